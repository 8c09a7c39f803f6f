//! `ferry-kafka`: real Apache Kafka (KRaft, from `target/kafka/libs`) for a test run or a demo.
//!
//! `ferry-kafka [--brokers 1|3] [TOPIC:PARTITIONS ...] [-- COMMAND ARGS...]` starts the
//! brokers and creates the topics. With a command, it runs the command with the brokers'
//! address in `FERRY_TEST_KAFKA` (the end-to-end tests share that broker, each emptying it
//! first), stops the brokers and exits with the command's status. Without one, it prints
//! `bootstrap=HOST:PORT,...` on the first line of stdout and serves until its standard input
//! closes or it is stopped. Either way, a stop signal (SIGINT, SIGTERM, SIGHUP) or the death of
//! its parent stops the brokers before it exits; with a command, the command is sent the
//! signal and the brokers stop once it has exited (`make run` runs its script so).

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::mpsc;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use ferry_tests::brokers::{self, Brokers};

fn usage(problem: &str) -> ExitCode {
    eprintln!("ferry-kafka: {problem}");
    eprintln!("usage: ferry-kafka [--brokers 1|3] [TOPIC:PARTITIONS ...] [-- COMMAND ARGS...]");
    ExitCode::from(2)
}

/// Why `ferry-kafka` stops serving.
enum Stop {
    /// A stop signal (its number).
    Signal(i32),
    /// The end of its standard input.
    Eof,
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
    // Every way out stops the brokers: a stop signal (SIGINT, SIGTERM, SIGHUP) is taken here
    // rather than ending the process where it stands, and the death of whatever started this
    // process is one too. The brokers themselves die with this process if it is killed
    // outright (see `brokers`).
    let (stops, stopped) = mpsc::channel();
    if let Err(e) = take_stop_signals(stops.clone()) {
        eprintln!("ferry-kafka: cannot take the stop signals: {e}");
        return ExitCode::FAILURE;
    }
    let kafka = Brokers::start(count);
    let named: Vec<(&str, i32)> = topics.iter().map(|(t, p)| (t.as_str(), *p)).collect();
    brokers::create_topics(&kafka.bootstrap, &named, count.min(3) as i32);
    let Some((program, rest)) = command.split_first() else {
        println!("bootstrap={}", kafka.bootstrap);
        let _ = std::io::stdout().flush();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if line.is_err() {
                    break;
                }
            }
            let _ = stops.send(Stop::Eof);
        });
        match stopped.recv() {
            Ok(Stop::Signal(signal)) => eprintln!("ferry-kafka: signal {signal}: stopping"),
            Ok(Stop::Eof) | Err(_) => eprintln!("ferry-kafka: standard input closed: stopping"),
        }
        drop(kafka);
        return ExitCode::SUCCESS;
    };
    let child = std::process::Command::new(program)
        .args(rest)
        .env(brokers::SHARED, &kafka.bootstrap)
        .spawn();
    let status = child.and_then(|mut child| {
        // The command is told of every stop signal, and the brokers outlive it.
        let pid = Pid::from_raw(child.id() as i32);
        std::thread::spawn(move || {
            for stop in stopped {
                if let Stop::Signal(signal) = stop {
                    if let Ok(signal) = Signal::try_from(signal) {
                        let _ = kill(pid, signal);
                    }
                }
            }
        });
        child.wait()
    });
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

/// Send every SIGINT, SIGTERM and SIGHUP to `stops`, and have the death of this process's
/// parent send it a SIGTERM.
fn take_stop_signals(stops: mpsc::Sender<Stop>) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::spawn(move || {
        for signal in signals.forever() {
            if stops.send(Stop::Signal(signal)).is_err() {
                return;
            }
        }
    });
    let parent = nix::unistd::getppid();
    nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
    if nix::unistd::getppid() != parent {
        // The parent died before the request took: stop as its death would have said.
        kill(nix::unistd::getpid(), Signal::SIGTERM)?;
    }
    Ok(())
}
