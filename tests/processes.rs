//! No process outlives what started it: `make run`'s script stopped with Ctrl-C (SIGINT to its
//! process group, as a terminal sends it) leaves nothing of itself running — no ferryd,
//! ferry-kafka, broker JVM or helper — and neither does a `ferry-kafka` whose standard input
//! closes.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use ferry_tests::{bin_dir, exited_within, free_port, say, try_wait_for, wait_for};
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// How long `make run`'s script may take to start: a broker, three nodes, the demo pipeline.
const START: Duration = Duration::from_secs(240);
/// How long everything may take to stop: the nodes' shutdown bound, then the broker's.
const STOP: Duration = Duration::from_secs(90);

/// The processes of process group `group`: pid and name.
fn group(group: u32) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // "pid (name) state ppid pgrp …": the name may hold spaces and parentheses.
            let (head, rest) = stat.rsplit_once(") ")?;
            let name = head.split_once(" (")?.1.to_string();
            let mut fields = rest.split_whitespace();
            let (state, pgrp) = (fields.next()?, fields.nth(1)?.parse::<u32>().ok()?);
            (pgrp == group && state != "Z").then_some((pid, name))
        })
        .collect()
}

/// Lines of `child`'s standard output, as they come.
fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Wait until a line holding `needle` comes; the lines before it.
fn wait_line(rx: &mpsc::Receiver<String>, needle: &str, timeout: Duration) -> Vec<String> {
    let mut seen = Vec::new();
    let found = try_wait_for(timeout, || {
        while let Ok(line) = rx.try_recv() {
            let hit = line.contains(needle);
            seen.push(line);
            if hit {
                return Some(());
            }
        }
        None
    });
    assert!(
        found.is_some(),
        "no line with {needle:?} within {timeout:?}; saw {seen:#?}"
    );
    seen
}

/// Wait until group `pgid` has no process left; fail with the ones that stay.
fn wait_group_gone(pgid: u32, what: &str) {
    let left = try_wait_for(STOP, || group(pgid).is_empty().then_some(()));
    assert!(
        left.is_some(),
        "{what}: processes left in its group after {STOP:?}: {:?}",
        group(pgid)
    );
}

#[test]
fn make_runs_script_stopped_with_ctrl_c_leaves_no_process() {
    let run = tempfile::tempdir().expect("a run dir");
    let ports: Vec<String> = (0..9).map(|_| free_port().to_string()).collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/run-local.sh");
    let mut child = Command::new(&script)
        .env("FERRY_RUN_DIR", run.path())
        .env("FERRY_BIN", bin_dir())
        .env("FERRY_RUN_PORTS", ports.join(" "))
        // Its own broker: the whole of what `make run` starts.
        .env_remove(ferry_tests::brokers::SHARED)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start scripts/run-local.sh");
    let pgid = child.id();
    let rx = lines(&mut child);
    let said = wait_line(&rx, "Ferry is running", START);
    let wrote = said
        .iter()
        .find(|l| l.starts_with("demo-sink wrote"))
        .cloned()
        .unwrap_or_default();
    let running = group(pgid);
    say(format!("make run: {wrote}; its group: {running:?}"));
    let names: Vec<&str> = running.iter().map(|(_, name)| name.as_str()).collect();
    assert_eq!(
        names.iter().filter(|n| **n == "ferryd").count(),
        3,
        "three nodes run in the script's group: {running:?}"
    );
    assert!(
        names.contains(&"ferry-kafka") && names.contains(&"java"),
        "{running:?}"
    );
    // Ctrl-C: SIGINT to every process of the foreground group.
    killpg(Pid::from_raw(pgid as i32), Signal::SIGINT).expect("SIGINT to the group");
    let status = exited_within(&mut child, STOP).expect("the script exits on Ctrl-C");
    say(format!("make run stopped with Ctrl-C: {status}"));
    wait_group_gone(pgid, "make run");
    for i in 1..=3 {
        let log =
            std::fs::read_to_string(run.path().join(format!("node{i}.log"))).unwrap_or_default();
        assert!(
            log.contains("startup: stopped"),
            "node {i} stopped cleanly: {log}"
        );
    }
}

#[test]
fn ferry_kafka_stops_its_broker_when_its_standard_input_closes() {
    let mut child = Command::new(bin_dir().join("ferry-kafka"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("start ferry-kafka");
    let pgid = child.id();
    let rx = lines(&mut child);
    wait_line(&rx, "bootstrap=", START);
    wait_for("the broker's JVM in the group", START, || {
        group(pgid)
            .iter()
            .any(|(_, name)| name == "java")
            .then_some(())
    });
    drop(child.stdin.take());
    let status = exited_within(&mut child, STOP).expect("ferry-kafka exits");
    assert!(status.success(), "ferry-kafka: {status}");
    wait_group_gone(pgid, "ferry-kafka");
}
