//! Ferry beside Apache Kafka Connect 4.x, in one run on one machine: the same connector JSON
//! sent to each one's REST API, the same topic, the same converters, each system measured
//! while it works — records/s and MB/s from its first output to its last, CPU seconds per
//! million records (utime + stime of every one of its processes, from /proc; the broker is
//! not counted), and the peak RSS of its busiest worker. Printed as one table with the ratio
//! Ferry / Kafka Connect, and written to `target/bench/versus.json`.
//!
//! - W1: FileStreamSink, StringConverter, 1,000,000 × 1 KiB records in 64 partitions, beside
//!   kcat's raw consume of the same topic;
//! - W2: FileStreamSink, JsonConverter with schemas and seed 003's ValueToKey +
//!   ExtractField$Key on 1,000,000 records of a three-field struct;
//! - W3: FileStreamSource of 1,000,000 lines into a topic, beside kcat's produce of the file;
//! - W4: the control plane: 100 FileStreamSink connectors on an idle topic created one after
//!   the other, until every task is RUNNING; then deleted;
//! - W5: fail-over: `kill -9` of one of three workers running a sink's tasks, until they all
//!   run on the others (Ferry with its defaults; Kafka Connect with
//!   `scheduled.rebalance.max.delay.ms` at 0 and, once, at its default of five minutes).
//!
//! Both systems run with the same `offset.flush.interval.ms` (1 s: FileStreamSink's output is
//! complete at its flush, which comes with the offset commit); Kafka Connect with
//! `connect-distributed.sh`'s JVM options (`-Xms256M -Xmx2G`, the JVM's default G1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_tests::connect::KafkaConnect;
use ferry_tests::pipeline::started;
use ferry_tests::rest::{self, Body};
use ferry_tests::{wait_for, Cluster, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::{json, Value};

use crate::sink::RECORD_BYTES;

/// Records of W1 and lines of W3 (`FERRY_BENCH_RECORDS` sets fewer, for a quick look).
fn records() -> usize {
    std::env::var("FERRY_BENCH_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000)
}

/// Runs of each throughput workload (W1–W3); the row shown is the median run's
/// (`FERRY_VERSUS_RUNS`). Single runs on this machine differ by up to 2× from one minute to
/// the next.
fn runs() -> usize {
    std::env::var("FERRY_VERSUS_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3)
        .max(1)
}

/// Whether `item` is among those an environment variable selects (a comma-separated list;
/// unset, all are): `FERRY_VERSUS_SYSTEMS` (ferry, kafka-connect), `FERRY_VERSUS_WORKERS` (1,
/// 3), `FERRY_VERSUS_WORKLOADS` (W1 … W5, metrics) narrow a run while working on one figure.
fn selected(variable: &str, item: &str) -> bool {
    std::env::var(variable)
        .map(|list| list.split(',').any(|i| i.trim().eq_ignore_ascii_case(item)))
        .unwrap_or(true)
}
/// Ferry's `[kafka] properties` for a run that tries client settings
/// (`FERRY_VERSUS_KAFKA="consumer.fetch.max.bytes=8388608,…"`); none by default.
fn kafka_properties() -> Vec<(String, String)> {
    std::env::var("FERRY_VERSUS_KAFKA")
        .unwrap_or_default()
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// Ferry with `[metrics] enabled = false`: the baseline of metrics' cost.
const NO_METRICS: &str = "ferry-no-metrics";

/// W1's topic and its partitions.
const TOPIC: &str = "versus";
/// W2's topic (the same partitions).
const JSON_TOPIC: &str = "versus-json";
const PARTITIONS: i32 = 64;
/// W4's connectors.
const CONNECTORS: usize = 100;
/// `connect-distributed.sh`'s JVM options.
const CONNECT_JVM: &str = "-Xms256M -Xmx2G";
/// The offset flush interval of both systems.
const FLUSH_MS: u64 = 1000;
/// How long one workload may take.
const LIMIT: Duration = Duration::from_secs(900);
/// How often progress is looked at.
const POLL: Duration = Duration::from_millis(20);

/// One measurement.
#[derive(Clone, Debug)]
struct Row {
    workload: String,
    system: String,
    workers: usize,
    tasks: u32,
    /// Records handled.
    records: u64,
    /// Bytes written (the output file, or the records' values).
    bytes: u64,
    /// From the request to the first output.
    start_s: f64,
    /// From the first output to the last.
    run_s: f64,
    /// CPU of the system's processes over the whole workload.
    cpu_s: f64,
    /// Peak RSS of its busiest process during the workload.
    peak_rss_mib: f64,
    /// Records/s of every run of the workload, this row being the median one.
    runs: Vec<f64>,
}

impl Row {
    fn to_json(&self) -> Value {
        json!({
            "workload": self.workload,
            "system": self.system,
            "workers": self.workers,
            "tasks": self.tasks,
            "records": self.records,
            "bytes": self.bytes,
            "start_s": self.start_s,
            "run_s": self.run_s,
            "cpu_s": self.cpu_s,
            "peak_rss_mib": self.peak_rss_mib,
            "records_per_s": self.records_per_s(),
            "mb_per_s": self.mb_per_s(),
            "cpu_s_per_million": self.cpu_per_million(),
            "runs_records_per_s": self.runs,
        })
    }

    fn records_per_s(&self) -> f64 {
        self.records as f64 / self.run_s.max(1e-9)
    }

    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.run_s.max(1e-9)
    }

    fn cpu_per_million(&self) -> f64 {
        self.cpu_s * 1e6 / (self.records.max(1) as f64)
    }

    /// The run of median records/s among `runs` of one workload, with every run's rate.
    fn median_of(mut runs: Vec<Row>) -> Row {
        let rates: Vec<f64> = runs.iter().map(Row::records_per_s).collect();
        runs.sort_by(|a, b| a.records_per_s().total_cmp(&b.records_per_s()));
        let mut row = runs.swap_remove(runs.len() / 2);
        row.runs = rates;
        row
    }
}

/// A system under measurement.
enum System {
    /// Ferry's cluster, and which Ferry it is (`ferry`, or [`NO_METRICS`]).
    Ferry(Box<Cluster>, &'static str),
    Connect(Vec<KafkaConnect>),
}

impl System {
    fn start(kind: &str, workers: usize, kafka: &Kafka, group: &str) -> System {
        System::start_with(kind, workers, kafka, group, &[])
    }

    /// `start`, Kafka Connect's workers with `more` properties.
    fn start_with(
        kind: &str,
        workers: usize,
        kafka: &Kafka,
        group: &str,
        more: &[(&str, &str)],
    ) -> System {
        match kind {
            "ferry" | NO_METRICS => {
                // ferryd's own heartbeat, election and worker timeouts, as a user runs it.
                let settings = Settings {
                    offset_flush_ms: FLUSH_MS,
                    target_voters: workers.min(3),
                    ferryd_timing: true,
                    kafka_properties: kafka_properties(),
                    metrics: match kind {
                        NO_METRICS => vec![("enabled", "false")],
                        _ => Vec::new(),
                    },
                    ..Settings::default()
                };
                let (cluster, _) = started(workers as u64, kafka, settings);
                let name = if kind == NO_METRICS {
                    NO_METRICS
                } else {
                    "ferry"
                };
                System::Ferry(Box::new(cluster), name)
            }
            _ => {
                std::env::set_var("FERRY_CONNECT_JVM_OPTS", CONNECT_JVM);
                let properties = connect_properties(more);
                let properties: Vec<(&str, &str)> = properties
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let all = (0..workers)
                    .map(|_| KafkaConnect::start(&kafka.bootstrap, group, 1, &properties))
                    .collect();
                System::Connect(all)
            }
        }
    }

    fn name(&self) -> &'static str {
        match self {
            System::Ferry(_, name) => name,
            System::Connect(_) => "kafka-connect",
        }
    }

    fn workers(&self) -> usize {
        match self {
            System::Ferry(c, _) => c.nodes.len(),
            System::Connect(all) => all.len(),
        }
    }

    /// The REST API of its first running worker.
    fn rest(&self) -> String {
        match self {
            System::Ferry(c, _) => c
                .nodes
                .values()
                .find(|n| n.pid().is_some())
                .map(|n| n.rest.clone())
                .unwrap_or_default(),
            System::Connect(all) => all
                .iter()
                .find(|w| w.pid().is_some())
                .map(|w| w.url.clone())
                .unwrap_or_default(),
        }
    }

    /// The `worker_id` of each running worker, as its REST status names it.
    fn worker_ids(&self) -> Vec<String> {
        let urls: Vec<String> = match self {
            System::Ferry(c, _) => c
                .nodes
                .values()
                .filter(|n| n.pid().is_some())
                .map(|n| n.rest.clone())
                .collect(),
            System::Connect(all) => all
                .iter()
                .filter(|w| w.pid().is_some())
                .map(|w| w.url.clone())
                .collect(),
        };
        urls.iter()
            .map(|u| u.trim_start_matches("http://").to_string())
            .collect()
    }

    /// `kill -9` the worker named `worker_id` (for Ferry, not the Raft leader: the worker's
    /// own fail-over is measured, not an election).
    fn kill(&mut self, worker_id: &str) {
        match self {
            System::Ferry(c, _) => {
                let id = c
                    .nodes
                    .iter()
                    .find(|(_, n)| n.rest.trim_start_matches("http://") == worker_id)
                    .map(|(id, _)| *id);
                if let Some(id) = id {
                    c.kill9(id);
                }
            }
            System::Connect(all) => {
                if let Some(w) = all.iter_mut().find(|w| w.url.ends_with(worker_id)) {
                    w.kill9();
                }
            }
        }
    }

    /// Start again every worker killed, and wait until it has joined.
    fn revive(&mut self, kafka: &Kafka, group: &str, more: &[(&str, &str)]) {
        match self {
            System::Ferry(c, _) => {
                let dead: Vec<u64> = c
                    .nodes
                    .iter()
                    .filter(|(_, n)| n.pid().is_none())
                    .map(|(id, _)| *id)
                    .collect();
                for id in dead {
                    c.start(id);
                }
                c.wait_leader(Duration::from_secs(60));
            }
            System::Connect(all) => {
                let dead = all.iter().filter(|w| w.pid().is_none()).count();
                all.retain(|w| w.pid().is_some());
                for _ in 0..dead {
                    all.push(KafkaConnect::start(&kafka.bootstrap, group, 1, more));
                }
            }
        }
    }

    /// Each task's state and worker, if the connector's status answers.
    fn tasks(&self, name: &str) -> Vec<(String, String)> {
        let (_, body) = self.call("GET", &format!("/connectors/{name}/status"), None);
        ferry_tests::pipeline::task_places(&body)
    }

    /// The `worker_id` of the worker W5 spares: Ferry's Raft leader (the workers' own
    /// fail-over is measured, not an election), and Kafka Connect's group leader — the oldest
    /// worker alive, as the group coordinator keeps its leader while it stays a member. A new
    /// group leader has no memory of the assignment before it, and so reassigns the tasks of a
    /// worker that died at once, whatever `scheduled.rebalance.max.delay.ms` says: killing it
    /// would not measure the delay.
    fn leader_worker(&self) -> Option<String> {
        let url = match self {
            System::Ferry(c, _) => {
                let leader = c.wait_leader(Duration::from_secs(60));
                c.node(leader).rest.clone()
            }
            System::Connect(all) => all.iter().find(|w| w.pid().is_some())?.url.clone(),
        };
        Some(url.trim_start_matches("http://").to_string())
    }

    fn pids(&self) -> Vec<u32> {
        match self {
            System::Ferry(c, _) => c.nodes.values().filter_map(|n| n.pid()).collect(),
            System::Connect(all) => all.iter().filter_map(KafkaConnect::pid).collect(),
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let body = body.map_or(Body::None, Body::Json);
        rest::call(&self.rest(), method, path, body)
            .map(|a| (a.status, a.body))
            .unwrap_or((0, Value::Null))
    }

    fn create(&self, name: &str, config: &Value) {
        let (status, body) = self.call(
            "POST",
            "/connectors",
            Some(&json!({"name": name, "config": config})),
        );
        assert_eq!(status, 201, "{} refused {name}: {body}", self.name());
    }

    fn delete(&self, name: &str) {
        let (status, body) = self.call("DELETE", &format!("/connectors/{name}"), None);
        assert_eq!(status, 204, "{} did not delete {name}: {body}", self.name());
    }
}

/// The properties of the benchmark's Kafka Connect workers: the offset flush interval and the
/// converters of Ferry's, then `more`.
fn connect_properties(more: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut properties = vec![
        ("offset.flush.interval.ms".to_string(), FLUSH_MS.to_string()),
        (
            "key.converter".to_string(),
            "org.apache.kafka.connect.storage.StringConverter".to_string(),
        ),
        (
            "value.converter".to_string(),
            "org.apache.kafka.connect.storage.StringConverter".to_string(),
        ),
    ];
    properties.extend(more.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    properties
}

/// CPU seconds (user + system) of processes so far.
pub(crate) fn cpu_seconds(pids: &[u32]) -> f64 {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as f64;
    pids.iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (_, rest) = stat.rsplit_once(')')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: u64 = fields.get(11)?.parse().ok()?;
            let system: u64 = fields.get(12)?.parse().ok()?;
            Some((user + system) as f64 / ticks)
        })
        .sum()
}

/// The largest RSS among processes, in MiB.
fn max_rss_mib(pids: &[u32]) -> f64 {
    pids.iter()
        .map(|pid| crate::sink::rss_mib(*pid))
        .fold(0.0, f64::max)
}

/// Watch a system's processes from a request until `progress` reaches `target`: the time to
/// the first progress, to the target, the CPU used and the peak RSS.
fn watch(
    system: &System,
    what: &str,
    target: u64,
    mut progress: impl FnMut() -> u64,
    request: impl FnOnce(),
) -> (f64, f64, f64, f64) {
    let pids = system.pids();
    let cpu_before = cpu_seconds(&pids);
    let mut peak: f64 = max_rss_mib(&pids);
    let started = Instant::now();
    request();
    // A poll of its own, every few milliseconds, so that a fast run is timed closely.
    let mut first: Option<Instant> = None;
    let done = loop {
        peak = peak.max(max_rss_mib(&pids));
        let now = progress();
        if now > 0 && first.is_none() {
            first = Some(Instant::now());
        }
        if now >= target {
            break Instant::now();
        }
        assert!(
            started.elapsed() < LIMIT,
            "timed out after {LIMIT:?} waiting for {what} ({now} of {target})"
        );
        std::thread::sleep(POLL);
    };
    let first = first.unwrap_or(done);
    (
        (first - started).as_secs_f64(),
        (done - first).as_secs_f64(),
        cpu_seconds(&pids) - cpu_before,
        peak,
    )
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// The records in a topic (the sum of its partitions' high watermarks).
fn records_in(consumer: &BaseConsumer, topic: &str) -> u64 {
    let Ok(metadata) = consumer.fetch_metadata(Some(topic), Duration::from_secs(5)) else {
        return 0;
    };
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    partitions
        .iter()
        .filter_map(|p| {
            consumer
                .fetch_watermarks(topic, *p, Duration::from_secs(5))
                .ok()
        })
        .map(|(low, high)| (high - low).max(0) as u64)
        .sum()
}

/// W1 on one system: FileStreamSink of the whole topic with `tasks` tasks.
fn w1(system: &System, tasks: u32, dir: &Path, run: usize) -> Row {
    let target = (records() * (RECORD_BYTES + 1)) as u64;
    let strings = json!({"value.converter": "org.apache.kafka.connect.storage.StringConverter"});
    let workload = ("W1", "W1 FileStreamSink, String");
    file_sink(system, workload, TOPIC, strings, (tasks, run), dir, target)
}

/// W2 on one system: FileStreamSink of the JSON topic (JsonConverter with schemas) through
/// seed 003's ValueToKey + ExtractField$Key, with `tasks` tasks; `lines` the bytes of its
/// output.
fn w2(system: &System, tasks: u32, dir: &Path, lines: u64, run: usize) -> Row {
    let json = json!({
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "createKey,extractKey",
        "transforms.createKey.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.createKey.fields": "user_id",
        "transforms.extractKey.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
        "transforms.extractKey.field": "user_id",
    });
    let workload = ("W2", "W2 FileStreamSink, JSON + 2 SMTs");
    file_sink(system, workload, JSON_TOPIC, json, (tasks, run), dir, lines)
}

/// A FileStreamSink of `topic` with `tasks` tasks (StringConverter keys, `more` settings), timed
/// until its file holds `target` bytes; then deleted. `workload` is (its short name, its label),
/// `run` which run of it this is.
fn file_sink(
    system: &System,
    workload: (&str, &str),
    topic: &str,
    more: Value,
    (tasks, run): (u32, usize),
    dir: &Path,
    target: u64,
) -> Row {
    // Each system's connectors, and each run's, have names of their own: a sink's consumer
    // group is named after its connector, and a group's committed offsets would tell the next
    // one where to start.
    let (short, label) = workload;
    let name = format!(
        "{}-{}-{}-{tasks}-{run}",
        system.name(),
        short.to_lowercase(),
        system.workers()
    );
    let out = dir.join(format!("{name}.out"));
    let mut config = json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": tasks.to_string(),
        "topics": topic,
        "file": out.to_string_lossy(),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    });
    if let (Some(config), Value::Object(more)) = (config.as_object_mut(), more) {
        config.extend(more);
    }
    let (start_s, run_s, cpu_s, peak) = watch(
        system,
        &format!("{} to write every record of {short}", system.name()),
        target,
        || file_size(&out),
        || system.create(&name, &config),
    );
    system.delete(&name);
    Row {
        workload: label.into(),
        system: system.name().into(),
        workers: system.workers(),
        tasks,
        records: records() as u64,
        bytes: target,
        start_s,
        run_s,
        cpu_s,
        peak_rss_mib: peak,
        runs: Vec::new(),
    }
}

/// W3 on one system: FileStreamSource of `input` into a topic of its own.
fn w3(system: &System, kafka: &Kafka, input: &Path, consumer: &BaseConsumer, run: usize) -> Row {
    let name = format!("{}-w3-{}-{run}", system.name(), system.workers());
    let topic = format!("versus-{name}");
    ferry_tests::brokers::create_topics(&kafka.bootstrap, &[(&topic, 1)], 1);
    let config = json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "topic": topic,
        "file": input.to_string_lossy(),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    });
    let (start_s, run_s, cpu_s, peak) = watch(
        system,
        &format!("{} to produce every line of W3", system.name()),
        records() as u64,
        || records_in(consumer, &topic),
        || system.create(&name, &config),
    );
    system.delete(&name);
    Row {
        workload: "W3 FileStreamSource, String".into(),
        system: system.name().into(),
        workers: system.workers(),
        tasks: 1,
        records: records() as u64,
        bytes: file_size(input),
        start_s,
        run_s,
        cpu_s,
        peak_rss_mib: peak,
        runs: Vec::new(),
    }
}

/// W4 on one system: [`CONNECTORS`] sinks on an idle topic created one after the other until
/// all run; `records` counts connectors, `start_s` is the time to all RUNNING, `run_s` the
/// time to delete them all.
fn w4(system: &System, dir: &Path) -> Row {
    let names: Vec<String> = (0..CONNECTORS)
        .map(|i| format!("{}-w4-{}-{i:03}", system.name(), system.workers()))
        .collect();
    let pids = system.pids();
    let cpu_before = cpu_seconds(&pids);
    let started = Instant::now();
    for name in &names {
        let out = dir.join(format!("{name}.out"));
        system.create(
            name,
            &json!({
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "tasks.max": "1",
                "topics": "versus-idle",
                "file": out.to_string_lossy(),
            }),
        );
    }
    let mut peak: f64 = 0.0;
    wait_for(
        &format!("{} to run {CONNECTORS} connectors", system.name()),
        LIMIT,
        || {
            peak = peak.max(max_rss_mib(&pids));
            let (_, all) = system.call("GET", "/connectors?expand=status", None);
            let running = names
                .iter()
                .filter(|n| {
                    let s = &all[n.as_str()]["status"];
                    s["connector"]["state"] == "RUNNING"
                        && s["tasks"]
                            .as_array()
                            .is_some_and(|t| t.len() == 1 && t[0]["state"] == "RUNNING")
                })
                .count();
            (running == names.len()).then_some(())
        },
    );
    let all_running = started.elapsed().as_secs_f64();
    let deleting = Instant::now();
    for name in &names {
        system.delete(name);
    }
    wait_for(
        &format!("{} to list no connector", system.name()),
        LIMIT,
        || {
            let (_, list) = system.call("GET", "/connectors", None);
            list.as_array().is_some_and(Vec::is_empty).then_some(())
        },
    );
    Row {
        workload: "W4 100 connectors".into(),
        system: system.name().into(),
        workers: system.workers(),
        tasks: 1,
        records: CONNECTORS as u64,
        bytes: 0,
        start_s: all_running,
        run_s: deleting.elapsed().as_secs_f64(),
        cpu_s: cpu_seconds(&pids) - cpu_before,
        peak_rss_mib: peak,
        runs: Vec::new(),
    }
}

/// W5's tasks, and its kills (but at Kafka Connect's default delay).
const FAILOVER_TASKS: usize = 6;
const FAILOVER_KILLS: usize = 3;

/// W5 on one system of three workers: `kills` times, `kill -9` a worker running tasks of a
/// FileStreamSink (not Ferry's Raft leader), time until every task runs again on the others,
/// then start the worker again. The times, in seconds.
fn w5(
    system: &mut System,
    kafka: &Kafka,
    group: &str,
    more: &[(&str, &str)],
    kills: usize,
    dir: &Path,
) -> Vec<f64> {
    let name = format!("{}-w5", system.name());
    let out = dir.join(format!("{name}.out"));
    system.create(
        &name,
        &json!({
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": FAILOVER_TASKS.to_string(),
            "topics": "versus-idle",
            "file": out.to_string_lossy(),
        }),
    );
    let all_running_on = |system: &System, workers: &[String]| {
        let tasks = system.tasks(&name);
        tasks.len() == FAILOVER_TASKS
            && tasks
                .iter()
                .all(|(state, worker)| state == "RUNNING" && workers.contains(worker))
    };
    let mut times = Vec::new();
    for _ in 0..kills {
        let workers = system.worker_ids();
        wait_for("every W5 task RUNNING", LIMIT, || {
            all_running_on(system, &workers).then_some(())
        });
        let leader = system.leader_worker();
        let tasks = system.tasks(&name);
        let Some(victim) = workers
            .iter()
            .find(|w| Some(*w) != leader.as_ref() && tasks.iter().any(|(_, t)| t == *w))
            .cloned()
        else {
            break;
        };
        let killed = Instant::now();
        system.kill(&victim);
        let rest: Vec<String> = workers.into_iter().filter(|w| *w != victim).collect();
        let took = wait_for("W5's tasks RUNNING on the other workers", LIMIT, || {
            all_running_on(system, &rest).then(|| killed.elapsed())
        });
        times.push(took.as_secs_f64());
        system.revive(kafka, group, more);
    }
    system.delete(&name);
    times
}

/// What Ferry's metrics cost: W1 at one task on one worker, with metrics (as Ferry runs by
/// default) and with `[metrics] enabled = false`, each run of one beside a run of the other so
/// that the machine's drift falls on both; the median run of each, and their ratio.
fn metrics_cost(kafka: &Kafka, dir: &Path) -> Vec<Row> {
    let mut with = Vec::new();
    let mut without = Vec::new();
    for run in 0..runs() {
        for (kind, rows) in [("ferry", &mut with), (NO_METRICS, &mut without)] {
            let system = System::start(kind, 1, kafka, "versus-metrics");
            let row = w1(&system, 1, dir, run);
            println!("{}", line(&row));
            rows.push(row);
        }
    }
    let (with, without) = (Row::median_of(with), Row::median_of(without));
    println!(
        "metrics cost on W1 (1 worker, 1 task, medians of {} runs): {:.0} records/s with, {:.0} without: {:.3}×; CPU {:.2} s/M with, {:.2} without: {:.3}×",
        runs(),
        with.records_per_s(),
        without.records_per_s(),
        with.records_per_s() / without.records_per_s().max(1e-9),
        with.cpu_per_million(),
        without.cpu_per_million(),
        with.cpu_per_million() / without.cpu_per_million().max(1e-9),
    );
    vec![with, without]
}

fn median(times: &[f64]) -> f64 {
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// W5 for both systems: Ferry with its defaults; Kafka Connect with
/// `scheduled.rebalance.max.delay.ms` at 0 and at its default (five minutes: one kill).
fn failovers(kafka: &Kafka, dir: &Path) -> Vec<(String, Vec<f64>)> {
    let mut results = Vec::new();
    for (label, kind, more, kills) in [
        ("ferry, defaults", "ferry", &[][..], FAILOVER_KILLS),
        (
            "kafka-connect, scheduled.rebalance.max.delay.ms=0",
            "kafka-connect",
            &[("scheduled.rebalance.max.delay.ms", "0")][..],
            FAILOVER_KILLS,
        ),
        ("kafka-connect, defaults", "kafka-connect", &[][..], 1),
    ] {
        if !selected("FERRY_VERSUS_SYSTEMS", kind) {
            continue;
        }
        let group = format!("versus-w5-{}", results.len());
        let mut system = System::start_with(kind, 3, kafka, &group, more);
        let connect_more = connect_properties(more);
        let more: Vec<(&str, &str)> = connect_more
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let times = w5(&mut system, kafka, &group, &more, kills, dir);
        println!(
            "W5 fail-over                   {label}: median {:.1} s over {} kill(s) ({})",
            median(&times),
            times.len(),
            times
                .iter()
                .map(|t| format!("{t:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        results.push((label.to_string(), times));
    }
    results
}

/// kcat's raw consume of W1's topic into a file: records/s.
fn kcat_consume(bootstrap: &str, out: &Path) -> anyhow::Result<f64> {
    let took = crate::sink::kcat_consume(bootstrap, TOPIC, out)?;
    Ok(records() as f64 / took.as_secs_f64())
}

/// kcat's produce of W3's file, one record per line: records/s.
fn kcat_produce(bootstrap: &str, input: &Path, kafka: &Kafka) -> anyhow::Result<f64> {
    ferry_tests::brokers::create_topics(&kafka.bootstrap, &[("versus-kcat", 1)], 1);
    let started = Instant::now();
    let status = Command::new("kcat")
        .args(["-P", "-b", bootstrap, "-t", "versus-kcat", "-l"])
        .arg(input)
        .stderr(Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "kcat failed: {status}");
    Ok(records() as f64 / started.elapsed().as_secs_f64())
}

/// What the workloads read: W3's input file and the bytes of W2's output.
struct Inputs {
    lines_file: PathBuf,
    json_output: u64,
}

/// Every workload on `kind` with `workers` workers.
fn measure(kind: &str, workers: usize, kafka: &Kafka, inputs: &Inputs, dir: &Path) -> Vec<Row> {
    let system = System::start(kind, workers, kafka, &format!("versus-{workers}"));
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .create()
        .expect("a metadata client");
    let mut rows = Vec::new();
    // Each throughput workload `runs()` times, its median run kept.
    let mut median = |workload: &str, one: &dyn Fn(usize) -> Row| {
        if !selected("FERRY_VERSUS_WORKLOADS", workload) {
            return;
        }
        let all: Vec<Row> = (0..runs())
            .map(|run| {
                let row = one(run);
                println!("{}", line(&row));
                row
            })
            .collect();
        rows.push(Row::median_of(all));
    };
    for tasks in [1, 4] {
        median("W1", &|run| w1(&system, tasks, dir, run));
        median("W2", &|run| {
            w2(&system, tasks, dir, inputs.json_output, run)
        });
    }
    median("W3", &|run| {
        w3(&system, kafka, &inputs.lines_file, &consumer, run)
    });
    if selected("FERRY_VERSUS_WORKLOADS", "W4") {
        let row = w4(&system, dir);
        println!("{}", line(&row));
        rows.push(row);
    }
    rows
}

fn line(r: &Row) -> String {
    if r.workload.starts_with("W4") {
        return format!(
            "{:<30} {:<13} {} worker(s): all RUNNING after {:.1} s, all deleted after {:.1} s  CPU {:.1} s  peak RSS {:.1} MiB",
            r.workload, r.system, r.workers, r.start_s, r.run_s, r.cpu_s, r.peak_rss_mib
        );
    }
    format!(
        "{:<30} {:<13} {} worker(s) {} task(s): {:>9.0} records/s {:>7.1} MB/s  start {:>5.1} s  CPU {:>6.1} s/M records  peak RSS {:>7.1} MiB",
        r.workload,
        r.system,
        r.workers,
        r.tasks,
        r.records_per_s(),
        r.mb_per_s(),
        r.start_s,
        r.cpu_per_million(),
        r.peak_rss_mib
    )
}

/// The whole comparison: both systems with one and three workers.
pub fn run() -> anyhow::Result<()> {
    let kafka = Kafka::start(&[
        (TOPIC, PARTITIONS),
        (JSON_TOPIC, PARTITIONS),
        ("versus-idle", 1),
    ]);
    let records = records();
    let produced = crate::sink::produce_to(&kafka.bootstrap, TOPIC, records, PARTITIONS)?;
    println!(
        "# Ferry beside Kafka Connect 4.x: {records} × {RECORD_BYTES} B records in {PARTITIONS} partitions produced in {:.1} s",
        produced.as_secs_f64()
    );
    let (json_output, _) =
        crate::sink::produce_json_to(&kafka.bootstrap, JSON_TOPIC, records, PARTITIONS)?;
    let dir = tempfile::tempdir()?;
    let input = dir.path().join("w3.in");
    let lines: String = (0..records).map(|i| format!("line-{i:012}\n")).collect();
    std::fs::write(&input, lines)?;
    let kcat_in = kcat_consume(&kafka.bootstrap, &dir.path().join("kcat.out"))?;
    let kcat_out = kcat_produce(&kafka.bootstrap, &input, &kafka)?;
    println!("baseline  kcat consume of W1's topic: {kcat_in:>9.0} records/s; kcat produce of W3's file: {kcat_out:>9.0} records/s");
    let inputs = Inputs {
        lines_file: input,
        json_output,
    };
    let mut rows = Vec::new();
    for workers in [1, 3] {
        for kind in ["ferry", "kafka-connect"] {
            if selected("FERRY_VERSUS_WORKERS", &workers.to_string())
                && selected("FERRY_VERSUS_SYSTEMS", kind)
            {
                rows.extend(measure(kind, workers, &kafka, &inputs, dir.path()));
            }
        }
    }
    let metrics = if selected("FERRY_VERSUS_WORKLOADS", "metrics") {
        metrics_cost(&kafka, dir.path())
    } else {
        Vec::new()
    };
    let failover = if selected("FERRY_VERSUS_WORKLOADS", "W5") {
        failovers(&kafka, dir.path())
    } else {
        Vec::new()
    };
    println!("\n{}", table(&rows, kcat_in, kcat_out));
    let report = json!({
        "records": records,
        "record_bytes": RECORD_BYTES,
        "partitions": PARTITIONS,
        "kcat_consume_records_per_s": kcat_in,
        "kcat_produce_records_per_s": kcat_out,
        "connect_jvm": CONNECT_JVM,
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        "metrics_cost": metrics.iter().map(Row::to_json).collect::<Vec<_>>(),
        "failover_s": failover
            .iter()
            .map(|(label, times)| json!({"system": label, "times": times, "median": median(times)}))
            .collect::<Vec<_>>(),
    });
    crate::write_report("versus", &report)
}

/// The side-by-side table: per workload, workers and tasks, each system's figures and the
/// ratios Ferry / Kafka Connect.
fn table(rows: &[Row], kcat_in: f64, kcat_out: f64) -> String {
    let mut by: BTreeMap<(String, usize, u32), BTreeMap<String, &Row>> = BTreeMap::new();
    for r in rows {
        by.entry((r.workload.clone(), r.workers, r.tasks))
            .or_default()
            .insert(r.system.clone(), r);
    }
    let mut out = String::from(
        "| workload | workers | tasks | Ferry records/s | KC records/s | × | Ferry CPU s/M | KC CPU s/M | × | Ferry peak RSS MiB | KC peak RSS MiB | × |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for ((workload, workers, tasks), systems) in &by {
        let (Some(f), Some(k)) = (systems.get("ferry"), systems.get("kafka-connect")) else {
            continue;
        };
        let ((fr, kr), (fc, kc)) = if workload.starts_with("W4") {
            // The control plane: connectors per second to all RUNNING, CPU seconds in all.
            (
                (
                    f.records as f64 / f.start_s.max(1e-9),
                    k.records as f64 / k.start_s.max(1e-9),
                ),
                (f.cpu_s, k.cpu_s),
            )
        } else {
            (
                (f.records_per_s(), k.records_per_s()),
                (f.cpu_per_million(), k.cpu_per_million()),
            )
        };
        out.push_str(&format!(
            "| {workload} | {workers} | {tasks} | {fr:.0} | {kr:.0} | {:.2} | {:.1} | {:.1} | {:.2} | {:.0} | {:.0} | {:.2} |\n",
            fr / kr.max(1e-9),
            fc,
            kc,
            fc / kc.max(1e-9),
            f.peak_rss_mib,
            k.peak_rss_mib,
            f.peak_rss_mib / k.peak_rss_mib.max(1e-9),
        ));
    }
    out.push_str(&format!(
        "\nkcat: consume {kcat_in:.0} records/s, produce {kcat_out:.0} records/s. W4: connectors/s to all RUNNING, and CPU seconds in all.\n"
    ));
    out
}
