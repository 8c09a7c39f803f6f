//! `ferry-bench scale`: the control plane holding many connectors on three nodes — by default
//! 1,000 FileStreamSink connectors of 10 tasks (10,000 tasks) on an idle topic of 10
//! partitions, so that every task owns a partition. Measured: the time to create them all
//! (through the REST API, four clients at once), the time until every task is RUNNING, each
//! node's RSS and threads, the CPU of the idle cluster holding them, the Raft snapshots built
//! meanwhile (size and time, from the nodes' logs), the time for a dead worker's share to run
//! again on the others after a `kill -9`, and the time to delete them all. Printed, and
//! written to `target/bench/scale.json`.
//!
//! `FERRY_SCALE_CONNECTORS`, `FERRY_SCALE_TASKS` and `FERRY_SCALE_PARTITIONS` choose the size;
//! `FERRY_SCALE_TOPICS` spreads the connectors over that many topics of that many partitions
//! each (one topic by default: every connector reads every partition of it, so that a worker
//! needs a Kafka consumer per connector that holds a partition of it — a partition is assigned
//! once per consumer; with a topic per connector, a worker's tasks share one consumer);
//! `FERRY_SCALE_PARTITIONS=0` subscribes the connectors to a pattern no topic matches, so that
//! no task opens a Kafka client: the control plane's own cost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ferry_tests::pipeline::started;
use ferry_tests::rest::{self, Body};
use ferry_tests::{wait_for, Cluster, Kafka, Settings};
use serde_json::{json, Value};

use crate::sink::rss_mib;
use crate::versus::cpu_seconds;

/// How long any one phase may take before the run is given up.
const LIMIT: Duration = Duration::from_secs(900);
/// The idle cluster's CPU is read over this window, once every task runs.
const IDLE_WINDOW: Duration = Duration::from_secs(20);
const CLIENTS: usize = 4;

fn setting(variable: &str, default: usize) -> usize {
    std::env::var(variable)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One node's process figures from /proc: (CPU seconds, RSS MiB, threads).
fn process(pid: u32) -> (f64, f64, u64) {
    let threads = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    (cpu_seconds(&[pid]), rss_mib(pid), threads)
}

/// (state, worker) of every task of every connector, from one `GET /connectors?expand=status`.
fn task_places(cluster: &Cluster) -> Vec<(String, String)> {
    let Some(url) = cluster
        .nodes
        .values()
        .find(|n| n.pid().is_some())
        .map(|n| n.rest.clone())
    else {
        return Vec::new();
    };
    let Some(answer) = rest::call(&url, "GET", "/connectors?expand=status", Body::None) else {
        return Vec::new();
    };
    answer
        .body
        .as_object()
        .map(|all| {
            all.values()
                .flat_map(|c| ferry_tests::pipeline::task_places(&c["status"]))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait until `tasks` tasks run, none on a worker in `not_on`; the seconds it took.
fn until_running(cluster: &Cluster, tasks: usize, not_on: &[String], since: Instant) -> f64 {
    let mut last = 0;
    wait_for(&format!("{tasks} tasks RUNNING"), LIMIT, || {
        let places = task_places(cluster);
        let running = places
            .iter()
            .filter(|(state, worker)| state == "RUNNING" && !not_on.contains(worker))
            .count();
        if running / 1000 != last / 1000 {
            println!("  … {running} of {tasks} running");
        }
        last = running;
        (running == tasks).then(|| since.elapsed().as_secs_f64())
    })
}

/// The nodes' "snapshot built" log lines: (node, index, bytes, ms).
fn snapshots(cluster: &Cluster) -> Vec<(u64, u64, u64, u64)> {
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    cluster
        .nodes
        .keys()
        .flat_map(|id| {
            cluster
                .log_text(*id)
                .lines()
                .filter(|l| l.contains("snapshot built"))
                .map(|l| (*id, field(l, "index"), field(l, "bytes"), field(l, "ms")))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn node_figures(cluster: &Cluster) -> BTreeMap<u64, (f64, f64, u64)> {
    cluster
        .nodes
        .iter()
        .filter_map(|(id, n)| n.pid().map(|pid| (*id, process(pid))))
        .collect()
}

pub fn run() -> anyhow::Result<()> {
    let connectors = setting("FERRY_SCALE_CONNECTORS", 1000);
    let tasks = setting("FERRY_SCALE_TASKS", 10);
    let partitions = setting("FERRY_SCALE_PARTITIONS", tasks);
    let topics = setting("FERRY_SCALE_TOPICS", 1).max(1);
    let all_tasks = connectors * tasks;
    println!(
        "# Ferry's control plane at scale: {connectors} FileStreamSink connectors × {tasks} tasks on {topics} idle topic(s) of {partitions} partitions, 3 nodes"
    );
    let topic_names: Vec<String> = (0..topics).map(|t| format!("scale-idle-{t:05}")).collect();
    let kafka = Kafka::start(
        &topic_names
            .iter()
            .map(|t| (t.as_str(), partitions.max(1) as i32))
            .collect::<Vec<_>>(),
    );
    // With no partitions, the connectors subscribe to a pattern no topic matches: no task
    // owns a partition, so no task opens a Kafka client — the control plane alone.
    let subscription = |i: usize| match partitions {
        0 => ("topics.regex", "scale-none-.*".to_string()),
        _ => ("topics", topic_names[i % topics].clone()),
    };
    let settings = Settings {
        ferryd_timing: true,
        // ferryd's default offset.flush.interval.ms, as Kafka Connect's.
        offset_flush_ms: 60_000,
        log_filter: "warn,ferryd::startup=info,ferry_meta::store=info".into(),
        ..Settings::default()
    };
    let (mut cluster, _) = started(3, &kafka, settings);
    let dir = tempfile::tempdir()?;
    let names: Vec<String> = (0..connectors).map(|i| format!("scale-{i:05}")).collect();
    let subscription = &subscription;

    let created = Instant::now();
    std::thread::scope(|scope| {
        for client in 0..CLIENTS {
            let (cluster, names, dir) = (&cluster, &names, dir.path());
            scope.spawn(move || {
                let node = cluster.node(1 + (client as u64 % 3));
                for (i, name) in names.iter().enumerate().skip(client).step_by(CLIENTS) {
                    let mut config = json!({
                        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                        "tasks.max": tasks.to_string(),
                        "file": dir.join(format!("{name}.out")).to_string_lossy(),
                    });
                    let (key, value) = subscription(i);
                    config[key] = json!(value);
                    let body = json!({"name": name, "config": config});
                    let answer = rest::call(&node.rest, "POST", "/connectors", Body::Json(&body));
                    let status = answer.as_ref().map_or(0, |a| a.status);
                    assert_eq!(status, 201, "creating {name}: {:?}", answer.map(|a| a.body));
                }
            });
        }
    });
    let create_s = created.elapsed().as_secs_f64();
    println!("create    {connectors} connectors through the REST API: {create_s:>8.1} s");
    let running_s = until_running(&cluster, all_tasks, &[], created);
    println!("running   every one of {all_tasks} tasks RUNNING after: {running_s:>8.1} s (from the first create)");

    // The idle cluster: CPU over a window once everything runs (new connectors' groups are
    // not listed by the cluster, so their starting tasks opened no group client).
    let before = node_figures(&cluster);
    let window = Instant::now();
    std::thread::sleep(IDLE_WINDOW); // the measurement window itself
    let after = node_figures(&cluster);
    let seconds = window.elapsed().as_secs_f64();
    let mut nodes = Vec::new();
    for (id, (cpu, rss, threads)) in &after {
        let idle = before
            .get(id)
            .map_or(0.0, |b| (cpu - b.0) / seconds * 100.0);
        println!("node {id}    idle CPU {idle:>5.1} % of a core, RSS {rss:>7.1} MiB, {threads:>6} threads");
        nodes.push(
            json!({"node": id, "idle_cpu_percent": idle, "rss_mib": rss, "threads": threads}),
        );
    }
    let built = snapshots(&cluster);
    let largest = built.iter().max_by_key(|s| s.1);
    match largest {
        Some((node, index, bytes, ms)) => println!(
            "snapshot  {} built; the last (node {node}, index {index}): {:.1} MB in {ms} ms",
            built.len(),
            *bytes as f64 / 1e6
        ),
        None => println!("snapshot  none built (fewer entries than [raft] snapshot_logs)"),
    }

    // A dead worker's share: kill -9 a node that is not the leader.
    let leader = cluster.wait_leader(Duration::from_secs(60));
    let victim = (1..=3).find(|id| *id != leader).unwrap_or(1);
    let victim_worker = cluster
        .node(victim)
        .rest
        .trim_start_matches("http://")
        .to_string();
    let share = task_places(&cluster)
        .iter()
        .filter(|(_, w)| *w == victim_worker)
        .count();
    let killed = Instant::now();
    cluster.kill9(victim);
    let failover_s = until_running(&cluster, all_tasks, &[victim_worker], killed);
    println!(
        "failover  node {victim}'s {share} tasks RUNNING on the others after: {failover_s:>8.1} s"
    );
    let survivors = node_figures(&cluster);
    for (id, (_, rss, threads)) in &survivors {
        println!("node {id}    after the fail-over: RSS {rss:>7.1} MiB, {threads:>6} threads");
    }

    let deleting = Instant::now();
    let url = cluster.node(leader).rest.clone();
    for name in &names {
        let answer = rest::call(&url, "DELETE", &format!("/connectors/{name}"), Body::None);
        assert_eq!(answer.map_or(0, |a| a.status), 204, "deleting {name}");
    }
    wait_for("no connector listed", LIMIT, || {
        let list = rest::call(&url, "GET", "/connectors", Body::None)?;
        list.body
            .as_array()
            .is_some_and(Vec::is_empty)
            .then_some(())
    });
    let delete_s = deleting.elapsed().as_secs_f64();
    println!("delete    {connectors} connectors: {delete_s:>8.1} s");

    let report = json!({
        "connectors": connectors,
        "tasks_per_connector": tasks,
        "partitions": partitions,
        "topics": topics,
        "create_s": create_s,
        "all_running_s": running_s,
        "idle_window_s": seconds,
        "nodes": nodes,
        "snapshots": built.iter().map(|(node, index, bytes, ms)| json!({"node": node, "index": index, "bytes": bytes, "ms": ms})).collect::<Vec<Value>>(),
        "failover": {"node": victim, "tasks": share, "seconds": failover_s},
        "delete_s": delete_s,
    });
    crate::write_report("scale", &report)
}
