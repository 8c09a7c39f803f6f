//! `ferry-jepsen`: the fault suite's matrix, every nemesis × every sink × every seed asked for,
//! one scenario at a time, each against a fresh three-node cluster and broker.
//!
//! `ferry-jepsen [--nemesis all|NAME[,NAME…]] [--sink all|file|storage|hdfs|hdfs3|jdbc] [--seed N[,N…]]
//! [--duration SECONDS] [--rate RECORDS_PER_S] [--big-tasks N] [--leader-stops N] [--no-lease]`;
//! exits 1 if any
//! scenario fails a checker. `--no-lease` turns the workers' ownership lease off (a test-only
//! setting), so that zombies keep working and only generation fencing keeps their commits out.
//! `--big-tasks` is the task count of the `big-config` nemesis's connector (10,000 here; the
//! one run of it in `make test` has 2,000). `--leader-stops` is how many times the
//! `leader-changes` nemesis stops the leader with SIGTERM (20 here, 5 in `make test`).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use ferry_tests::jepsen::nemesis::{parse_list, Nemesis};
use ferry_tests::jepsen::scenario::{run, Scenario, Sink};

struct Args {
    nemeses: Vec<Nemesis>,
    sinks: Vec<Sink>,
    seeds: Vec<u64>,
    duration: Duration,
    rate: Option<u32>,
    lease: bool,
    big_tasks: usize,
    leader_stops: usize,
}

const USAGE: &str =
    "usage: ferry-jepsen [--nemesis all|NAME[,NAME...]] [--sink all|file|storage|hdfs|hdfs3|jdbc] \
[--seed N[,N...]] [--duration SECONDS] [--rate RECORDS_PER_S] [--big-tasks N] [--leader-stops N] [--no-lease]";

fn parse() -> Result<Args, String> {
    let mut args = Args {
        nemeses: Nemesis::ALL.to_vec(),
        sinks: Sink::ALL.to_vec(),
        seeds: vec![1],
        duration: Duration::from_secs(30),
        rate: None,
        lease: true,
        big_tasks: 10_000,
        leader_stops: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.to_string());
        }
        if flag == "--no-lease" {
            args.lease = false;
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--nemesis" => args.nemeses = parse_list(&value)?,
            "--sink" if value == "all" => args.sinks = Sink::ALL.to_vec(),
            "--sink" => {
                args.sinks = value
                    .split(',')
                    .map(|s| s.trim().parse())
                    .collect::<Result<_, _>>()?
            }
            "--seed" => {
                args.seeds = value
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse()
                            .map_err(|_| format!("--seed: {s:?} is not a number"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--duration" => {
                let secs: u64 = value
                    .parse()
                    .map_err(|_| format!("--duration: {value:?} is not a number of seconds"))?;
                if secs == 0 {
                    return Err("--duration must be at least 1 second".into());
                }
                args.duration = Duration::from_secs(secs);
            }
            "--rate" => {
                let rate: u32 = value
                    .parse()
                    .map_err(|_| format!("--rate: {value:?} is not a number"))?;
                if rate == 0 {
                    return Err("--rate must be at least 1 record per second".into());
                }
                args.rate = Some(rate);
            }
            "--big-tasks" => {
                args.big_tasks =
                    value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("--big-tasks: {value:?} is not a positive number")
                    })?;
            }
            "--leader-stops" => {
                args.leader_stops =
                    value.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                        format!("--leader-stops: {value:?} is not a positive number")
                    })?;
            }
            other => return Err(format!("unknown option {other:?}\n{USAGE}")),
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("ferry-jepsen: {e}");
            return ExitCode::from(2);
        }
    };
    let begun = Instant::now();
    let mut summaries = Vec::new();
    let mut broken: Vec<(String, String)> = Vec::new();
    for seed in &args.seeds {
        for sink in &args.sinks {
            for nemesis in &args.nemeses {
                let mut scenario = Scenario::new(*nemesis, *sink, *seed, args.duration);
                scenario.lease = args.lease;
                scenario.big_tasks = args.big_tasks;
                scenario.leader_stops = args.leader_stops;
                if let Some(rate) = args.rate {
                    scenario.rate = rate;
                }
                // A scenario that breaks (a harness deadline, a node that will not stop) is a
                // failed row; the matrix goes on.
                match std::panic::catch_unwind(|| run(&scenario)) {
                    Ok(summary) => summaries.push(summary),
                    Err(panic) => {
                        let why = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "a panic".into());
                        broken.push((scenario.label(), why));
                    }
                }
            }
        }
    }
    println!(
        "\nJEPSEN MATRIX: {} scenarios in {} s",
        summaries.len() + broken.len(),
        begun.elapsed().as_secs()
    );
    println!(
        "{:<36} {:>8} {:>9} {:>5} {:>6} {:>6} {:>6} {:>9} {:>12} {:>14}  verdict",
        "scenario",
        "produced",
        "delivered",
        "lost",
        "dups",
        "owner",
        "lin",
        "ops",
        "converge ms",
        "fail-over ms"
    );
    for s in &summaries {
        let d = &s.delivery;
        let failover = s.failover_stats().map_or("-".to_string(), |(m, x)| {
            format!("{}/{}", m.as_millis(), x.as_millis())
        });
        println!(
            "{:<36} {:>8} {:>9} {:>5} {:>6} {:>6} {:>6} {:>9} {:>12} {:>14}  {}",
            s.label,
            d.produced,
            d.delivered,
            d.lost.len(),
            d.duplicates,
            s.ownership_violations.len(),
            if s.non_linearizable.is_empty() {
                "ok"
            } else {
                "FAIL"
            },
            s.config_ops,
            s.convergence
                .as_ref()
                .map_or("none".to_string(), |t| t.as_millis().to_string()),
            failover,
            if s.passed() { "PASS" } else { "FAIL" }
        );
    }
    for (label, why) in &broken {
        println!(
            "{label:<36} BROKE: {}",
            why.lines().next().unwrap_or_default()
        );
    }
    let failed = summaries.iter().filter(|s| !s.passed()).count() + broken.len();
    println!("(fail-over: median/max; owner: ownership violations; lin: config linearizability)");
    if failed > 0 {
        println!(
            "{failed} of {} scenarios FAILED",
            summaries.len() + broken.len()
        );
        return ExitCode::FAILURE;
    }
    println!("every scenario passed");
    ExitCode::SUCCESS
}
