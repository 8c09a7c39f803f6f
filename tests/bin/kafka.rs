//! `ferry-kafka`: real Apache Kafka (KRaft, from `target/kafka/libs`) for a test run or a demo.
//!
//! `ferry-kafka [--brokers 1|3] [TOPIC:PARTITIONS ...] [-- COMMAND ARGS...]` starts the
//! brokers and creates the topics. With a command, it runs the command with the brokers'
//! address in `FERRY_TEST_KAFKA` (the end-to-end tests share that broker, each emptying it
//! first), stops the brokers and exits with the command's status. Without one, it prints
//! `bootstrap=HOST:PORT,...` on the first line of stdout and serves until stdin closes or it
//! is stopped (`make run`).

use std::io::{BufRead, Write};
use std::process::ExitCode;

use ferry_tests::brokers::{self, Brokers};

fn usage(problem: &str) -> ExitCode {
    eprintln!("ferry-kafka: {problem}");
    eprintln!("usage: ferry-kafka [--brokers 1|3] [TOPIC:PARTITIONS ...] [-- COMMAND ARGS...]");
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let mut count = 1;
    let mut topics: Vec<(String, i32)> = Vec::new();
    let mut command: Vec<String> = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--" {
            command = args.by_ref().collect();
            break;
        }
        if arg == "--brokers" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n @ (1 | 3)) => count = n,
                _ => return usage("--brokers takes 1 or 3"),
            }
            continue;
        }
        match arg
            .rsplit_once(':')
            .and_then(|(t, p)| Some((t.to_string(), p.parse::<i32>().ok()?)))
        {
            Some(topic) => topics.push(topic),
            None => return usage(&format!("{arg:?} is not TOPIC:PARTITIONS")),
        }
    }
    let kafka = Brokers::start(count);
    let named: Vec<(&str, i32)> = topics.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    brokers::create_topics(&kafka.bootstrap, &named, count.min(3) as i32);
    let Some((program, rest)) = command.split_first() else {
        println!("bootstrap={}", kafka.bootstrap);
        let _ = std::io::stdout().flush();
        for line in std::io::stdin().lock().lines() {
            if line.is_err() {
                break;
            }
        }
        return ExitCode::SUCCESS;
    };
    let status = std::process::Command::new(program)
        .args(rest)
        .env(brokers::SHARED, &kafka.bootstrap)
        .status();
    drop(kafka);
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(status) => ExitCode::from(status.code().unwrap_or(1).clamp(1, 255) as u8),
        Err(e) => {
            eprintln!("ferry-kafka: cannot run {program}: {e}");
            ExitCode::FAILURE
        }
    }
}
