//! `ferry-mock-kafka`: librdkafka's mock cluster as a process, for tests and `make run`.
//!
//! `ferry-mock-kafka [--brokers N] [TOPIC:PARTITIONS ...]` creates the topics, prints
//! `bootstrap=HOST:PORT,...` on the first line of stdout, and serves until stdin closes or it
//! is killed. The admin API cannot create topics on the mock (it hangs): create them here.

use std::io::{BufRead, Write};

use rdkafka::mocking::MockCluster;

fn main() -> std::process::ExitCode {
    let mut brokers = 1;
    let mut topics = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--brokers" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => brokers = n,
                None => {
                    eprintln!("ferry-mock-kafka: --brokers needs a number");
                    return std::process::ExitCode::from(2);
                }
            }
            continue;
        }
        match arg
            .rsplit_once(':')
            .and_then(|(t, p)| Some((t.to_string(), p.parse::<i32>().ok()?)))
        {
            Some(topic) => topics.push(topic),
            None => {
                eprintln!("ferry-mock-kafka: {arg:?} is not TOPIC:PARTITIONS");
                return std::process::ExitCode::from(2);
            }
        }
    }
    let cluster = match MockCluster::new(brokers) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ferry-mock-kafka: cannot start the mock cluster: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    for (topic, partitions) in &topics {
        if let Err(e) = cluster.create_topic(topic, *partitions, 1) {
            eprintln!("ferry-mock-kafka: cannot create {topic}: {e}");
            return std::process::ExitCode::FAILURE;
        }
    }
    println!("bootstrap={}", cluster.bootstrap_servers());
    let _ = std::io::stdout().flush();
    // Serve until stdin closes (the parent went away) or we are killed.
    for line in std::io::stdin().lock().lines() {
        if line.is_err() {
            break;
        }
    }
    std::process::ExitCode::SUCCESS
}
