//! Ferry's Prometheus series as their users read them. Against Kafka Connect's own: a real
//! Kafka Connect 4.x worker exporting its JMX metrics through Prometheus's JMX exporter agent
//! with Strimzi's `kafka-connect-metrics.yaml` rules ([`RULES`]), and a Ferry node's
//! `GET /metrics`, both running a FileStreamSource and a FileStreamSink that dead-letters
//! malformed records: every series of Kafka Connect's domain (`kafka_connect_…`) is compared by
//! name, label names and type; a difference must be listed in `metrics_compat.allow` with its
//! reason, and every entry there must still be needed. And through a real Prometheus server
//! scraping a three-node cluster: what its HTTP API answers matches what the test knows.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_tests::connect::{exporter_agent, KafkaConnect};
use ferry_tests::exposition::Exposition;
use ferry_tests::pipeline::{follower_running, json_workers, started, task_places};
use ferry_tests::prometheus::Prometheus;
use ferry_tests::rest::{self, Body};
use ferry_tests::{free_port, produce_bytes, say, wait_for, Kafka, Settings};
use serde_json::{json, Value};

const TOPIC: &str = "metrics-orders";
const GOOD: usize = 30;
const BAD: usize = 5;
/// How long a system has to read every record and dead-letter the malformed ones.
const DRAINED: Duration = Duration::from_secs(120);
/// Both systems' scrapes ask for OpenMetrics, as Prometheus does.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0";

/// The rules of Strimzi's `kafka-connect-metrics.yaml` (its patterns, names, labels and types;
/// help texts left out), as the JMX exporter agent reads them: the Kafka clients' app-info and
/// per-client and per-node metrics, then Kafka Connect's connector, task, worker, rebalance and
/// coordinator groups.
const RULES: &str = r#"lowercaseOutputName: true
lowercaseOutputLabelNames: true
rules:
- pattern: 'kafka.(.+)<type=app-info, client-id=(.+)><>start-time-ms'
  name: kafka_$1_start_time_seconds
  labels: {clientId: "$2"}
  type: GAUGE
  valueFactor: 0.001
- pattern: 'kafka.(.+)<type=app-info, client-id=(.+)><>(commit-id|version): (.+)'
  name: kafka_$1_$3_info
  value: 1
  labels: {clientId: "$2", $3: "$4"}
  type: UNTYPED
- pattern: kafka.consumer<type=consumer-fetch-manager-metrics, client-id=(.+), topic=(.+), partition=(.+)><>(.+-total)
  name: kafka_consumer_fetch_manager_$4
  labels: {clientId: "$1", topic: "$2", partition: "$3"}
  type: COUNTER
- pattern: kafka.consumer<type=consumer-fetch-manager-metrics, client-id=(.+), topic=(.+), partition=(.+)><>(compression-rate|.+-avg|.+-replica|.+-lag|.+-lead)
  name: kafka_consumer_fetch_manager_$4
  labels: {clientId: "$1", topic: "$2", partition: "$3"}
  type: GAUGE
- pattern: kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(.+-total)
  name: kafka_producer_topic_$3
  labels: {clientId: "$1", topic: "$2"}
  type: COUNTER
- pattern: kafka.producer<type=producer-topic-metrics, client-id=(.+), topic=(.+)><>(compression-rate|.+-avg|.+rate)
  name: kafka_producer_topic_$3
  labels: {clientId: "$1", topic: "$2"}
  type: GAUGE
- pattern: kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-total)
  name: kafka_$2_$5
  labels: {clientId: "$3", nodeId: "$4"}
  type: COUNTER
- pattern: kafka.(.+)<type=(.+)-metrics, client-id=(.+), node-id=(.+)><>(.+-avg|.+-rate)
  name: kafka_$2_$5
  labels: {clientId: "$3", nodeId: "$4"}
  type: GAUGE
- pattern: kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>(.+-total)
  name: kafka_$2_$4
  labels: {clientId: "$3"}
  type: COUNTER
- pattern: kafka.(.+)<type=(.+)-metrics, client-id=(.*)><>(.+-avg|.+-bytes|.+-count|.+-ratio|.+-age|.+-flight|.+-threads|.+-connectors|.+-tasks|.+-ago)
  name: kafka_$2_$4
  labels: {clientId: "$3"}
  type: GAUGE
- pattern: 'kafka.connect<type=connector-metrics, connector=(.+)><>(connector-class|connector-type|connector-version|status): (.+)'
  name: kafka_connect_connector_$2
  value: 1
  labels: {connector: "$1", $2: "$3"}
  type: GAUGE
- pattern: 'kafka.connect<type=connector-task-metrics, connector=(.+), task=(.+)><>status: ([a-z-]+)'
  name: kafka_connect_connector_task_status
  value: 1
  labels: {connector: "$1", task: "$2", status: "$3"}
  type: GAUGE
- pattern: kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-total)
  name: kafka_connect_$1_$4
  labels: {connector: "$2", task: "$3"}
  type: COUNTER
- pattern: kafka.connect<type=(.+)-metrics, connector=(.+), task=(.+)><>(.+-count|.+-ms|.+-ratio|.+-seq-no|.+-rate|.+-max|.+-avg|.+-failures|.+-requests|.+-timestamp|.+-logged|.+-errors|.+-retries|.+-skipped)
  name: kafka_connect_$1_$4
  labels: {connector: "$2", task: "$3"}
  type: GAUGE
- pattern: kafka.connect<type=connect-worker-metrics, connector=(.+)><>([a-z-]+)
  name: kafka_connect_worker_$2
  labels: {connector: "$1"}
  type: GAUGE
- pattern: kafka.connect<type=connect-worker-metrics><>([a-z-]+-total)
  name: kafka_connect_worker_$1
  type: COUNTER
- pattern: kafka.connect<type=connect-worker-metrics><>([a-z-]+)
  name: kafka_connect_worker_$1
  type: GAUGE
- pattern: 'kafka.connect<type=connect-worker-rebalance-metrics><>(leader-name|connect-protocol): (.+)'
  name: kafka_connect_worker_rebalance_$1
  value: 1
  labels: {$1: "$2"}
  type: UNTYPED
- pattern: kafka.connect<type=connect-worker-rebalance-metrics><>([a-z-]+-total)
  name: kafka_connect_worker_rebalance_$1
  type: COUNTER
- pattern: kafka.connect<type=connect-worker-rebalance-metrics><>([a-z-]+)
  name: kafka_connect_worker_rebalance_$1
  type: GAUGE
- pattern: kafka.connect<type=connect-coordinator-metrics><>(assigned-connectors|assigned-tasks)
  name: kafka_connect_coordinator_$1
  type: GAUGE
"#;

/// The two connectors, as both systems are given them (`dir` holds the files).
fn connectors(dir: &std::path::Path, dlq: &str, lines: &str) -> Vec<(&'static str, Value)> {
    vec![
        (
            "metrics-sink",
            json!({
                "connector.class": "FileStreamSink",
                "tasks.max": "1",
                "topics": TOPIC,
                "file": dir.join("sink.out").display().to_string(),
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "errors.tolerance": "all",
                "errors.log.enable": "true",
                "errors.deadletterqueue.topic.name": dlq,
                "errors.deadletterqueue.topic.replication.factor": "1",
                "errors.deadletterqueue.context.headers.enable": "true",
            }),
        ),
        (
            "metrics-source",
            json!({
                "connector.class": "FileStreamSource",
                "tasks.max": "1",
                "topic": lines,
                "file": dir.join("source.in").display().to_string(),
            }),
        ),
    ]
}

/// One system under comparison: where its series are scraped and where its REST API is.
struct System {
    name: &'static str,
    metrics: String,
    rest: String,
}

impl System {
    fn scrape(&self) -> Option<Exposition> {
        let answer = rest::call_with(
            &self.metrics,
            "GET",
            "",
            Body::None,
            &[("Accept", OPENMETRICS)],
        )?;
        (answer.status == 200).then_some(())?;
        let text = answer.body.as_str()?;
        Some(Exposition::parse(text).unwrap_or_else(|e| panic!("{}'s scrape: {e}", self.name)))
    }

    /// Create the connectors; wait until the sink has read every record and dead-lettered the
    /// malformed ones, and the source has written its lines; the scrape then.
    fn run(&self, dir: &std::path::Path, dlq: &str, lines: &str) -> Exposition {
        for (name, config) in connectors(dir, dlq, lines) {
            let answer = rest::call(
                &self.rest,
                "PUT",
                &format!("/connectors/{name}/config"),
                Body::Json(&config),
            )
            .unwrap_or_else(|| panic!("{} did not answer", self.name));
            assert!(
                matches!(answer.status, 200 | 201),
                "{}: {answer:?}",
                self.name
            );
        }
        let sink = [("connector", "metrics-sink"), ("task", "0")];
        let source = [("connector", "metrics-source"), ("task", "0")];
        wait_for(
            &format!("{} to read every record", self.name),
            DRAINED,
            || {
                let scraped = self.scrape()?;
                let at_least = |name: &str, labels: &[(&str, &str)], n: usize| {
                    scraped.value(name, labels).is_some_and(|v| v >= n as f64)
                };
                (at_least(
                    "kafka_connect_sink_task_sink_record_read_total",
                    &sink,
                    GOOD + BAD,
                ) && at_least(
                    "kafka_connect_task_error_deadletterqueue_produce_requests",
                    &sink,
                    BAD,
                ) && at_least(
                    "kafka_connect_source_task_source_record_write_total",
                    &source,
                    3,
                ))
                .then_some(scraped)
            },
        )
    }
}

/// One series of a scrape, as compared: name, label names, type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Series {
    name: String,
    labels: Vec<String>,
    kind: String,
}

impl std::fmt::Display for Series {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{{{}}} {}",
            self.name,
            self.labels.join(","),
            self.kind
        )
    }
}

/// The series of Kafka Connect's domain in a scrape.
fn series(scraped: &Exposition) -> BTreeSet<Series> {
    scraped
        .samples
        .iter()
        .filter(|s| s.name.starts_with("kafka_connect_"))
        .map(|s| Series {
            name: s.name.clone(),
            labels: s.labels.keys().cloned().collect(),
            kind: scraped.type_of(&s.name).to_string(),
        })
        .collect()
}

/// An accepted difference: `connect-only` or `ferry-only`, a name (`*` matches any run of
/// characters), the label names and the type, and why.
struct Allowed {
    side: String,
    name: String,
    labels: Vec<String>,
    kind: String,
    reason: String,
}

impl Allowed {
    fn covers(&self, side: &str, series: &Series) -> bool {
        self.side == side
            && self.labels == series.labels
            && (self.kind == "*" || self.kind == series.kind)
            && glob(&self.name, &series.name)
    }
}

/// Whether `text` matches `pattern`, whose `*` matches any run of characters.
fn glob(pattern: &str, text: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == text,
        Some((head, tail)) => {
            let Some(rest) = text.strip_prefix(head) else {
                return false;
            };
            (0..=rest.len())
                .filter(|i| rest.is_char_boundary(*i))
                .any(|i| glob(tail, &rest[i..]))
        }
    }
}

fn allow_list() -> Vec<Allowed> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("metrics_compat.allow");
    let text = std::fs::read_to_string(&path).expect("tests/metrics_compat.allow");
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(n, line)| {
            let fail =
                |what: &str| -> ! { panic!("metrics_compat.allow:{}: {what}: {line}", n + 1) };
            let (entry, reason) = line
                .split_once(" | ")
                .unwrap_or_else(|| fail("no ' | reason'"));
            let words: Vec<&str> = entry.split_whitespace().collect();
            let [side, series, kind] = words[..] else {
                fail("want SIDE NAME{labels} TYPE | reason");
            };
            if !matches!(side, "connect-only" | "ferry-only") {
                fail("SIDE is connect-only or ferry-only");
            }
            let (name, labels) = series
                .strip_suffix('}')
                .and_then(|s| s.split_once('{'))
                .unwrap_or_else(|| fail("NAME{labels}"));
            if reason.trim().is_empty() {
                fail("a reason");
            }
            Allowed {
                side: side.to_string(),
                name: name.to_string(),
                labels: labels
                    .split(',')
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect(),
                kind: kind.to_string(),
                reason: reason.trim().to_string(),
            }
        })
        .collect()
}

#[test]
fn ferry_exports_the_series_kafka_connect_exports_through_strimzis_rules() {
    let kafka = Kafka::start(&[
        (TOPIC, 1),
        ("metrics-dlq-kc", 1),
        ("metrics-dlq-ferry", 1),
        ("metrics-lines-kc", 1),
        ("metrics-lines-ferry", 1),
    ]);
    let mut values: Vec<String> = (0..GOOD).map(|i| format!(r#"{{"id":{i}}}"#)).collect();
    values.extend((0..BAD).map(|i| format!("not json {i}")));
    let bytes: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
    produce_bytes(&kafka, TOPIC, &bytes);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("source.in"), "a\nb\nc\n").expect("source input");
    let rules = dir.path().join("kafka-connect-metrics.yml");
    std::fs::write(&rules, RULES).expect("the exporter's rules");

    let port = free_port();
    let agent = format!(
        "-javaagent:{}=127.0.0.1:{port}:{}",
        exporter_agent().display(),
        rules.display()
    );
    let connect = KafkaConnect::start_with(&kafka.bootstrap, "metrics-reference", 1, &[], &[agent]);
    let kc = System {
        name: "Kafka Connect",
        metrics: format!("http://127.0.0.1:{port}/metrics"),
        rest: connect.url.clone(),
    };
    // Ferry's worker as Kafka Connect's (JSON converters); sink offsets in Raft only, so that
    // the two sinks of one name do not commit to one consumer group.
    let settings = Settings {
        commit_consumer_group: false,
        ..json_workers()
    };
    let (cluster, leader) = started(1, &kafka, settings);
    let ferry = System {
        name: "Ferry",
        metrics: format!("{}/metrics", cluster.rest_url(leader)),
        rest: cluster.rest_url(leader),
    };
    let kc_dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(kc_dir.path().join("source.in"), "a\nb\nc\n").expect("source input");
    let theirs = series(&kc.run(kc_dir.path(), "metrics-dlq-kc", "metrics-lines-kc"));
    let ours = series(&ferry.run(dir.path(), "metrics-dlq-ferry", "metrics-lines-ferry"));
    assert!(
        theirs.len() > 50,
        "Kafka Connect's scrape has {} series",
        theirs.len()
    );

    let allowed = allow_list();
    let mut used = vec![false; allowed.len()];
    let mut unlisted = Vec::new();
    for (side, only) in [
        ("connect-only", theirs.difference(&ours)),
        ("ferry-only", ours.difference(&theirs)),
    ] {
        for s in only {
            match allowed.iter().position(|a| a.covers(side, s)) {
                Some(i) => used[i] = true,
                None => unlisted.push(format!("{side} {s}")),
            }
        }
    }
    let stale: Vec<String> = allowed
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(a, _)| {
            format!(
                "{} {}{{{}}} {} ({})",
                a.side,
                a.name,
                a.labels.join(","),
                a.kind,
                a.reason
            )
        })
        .collect();
    say(format!(
        "Kafka Connect {} series, Ferry {}, {} in common; {} accepted difference(s) in metrics_compat.allow",
        theirs.len(),
        ours.len(),
        theirs.intersection(&ours).count(),
        used.iter().filter(|u| **u).count()
    ));
    assert!(
        unlisted.is_empty() && stale.is_empty(),
        "differences not in metrics_compat.allow:\n{}\nentries of metrics_compat.allow no series needed:\n{}",
        unlisted.join("\n"),
        stale.join("\n")
    );
}

#[test]
fn a_glob_matches_runs_of_characters() {
    assert!(glob("kafka_*_total", "kafka_connect_x_total"));
    assert!(glob("*", ""));
    assert!(!glob("kafka_*_total", "kafka_connect_x_rate"));
    assert!(glob("a", "a") && !glob("a", "ab"));
}

/// A three-node cluster scraped by a real Prometheus server: a FileStreamSink with three tasks
/// (on two or three nodes) reads a known number of records, some malformed and dead-lettered; what
/// Prometheus's HTTP API answers — records read, dead letter queue requests, the tasks' status
/// series, the Raft leader — is what the test knows. After a `kill -9` of a worker that runs a
/// task, the leader's fail-over histogram has an observation.
#[test]
fn prometheus_scrapes_every_node_and_sees_what_the_test_knows() {
    const RECORDS: usize = 300;
    const TOPIC: &str = "prom-orders";
    let kafka = Kafka::start(&[(TOPIC, 3), ("prom-dlq", 1)]);
    // Each partition's lag too (`[metrics] partition_lag`, off by default).
    let settings = Settings {
        metrics: vec![("partition_lag", "true")],
        ..json_workers()
    };
    let (mut cluster, leader) = started(3, &kafka, settings);
    let targets: Vec<String> = (1..=3).map(|id| cluster.rest_url(id)).collect();
    let prometheus = Prometheus::start(&targets);
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({
        "connector.class": "FileStreamSink",
        "tasks.max": "3",
        "topics": TOPIC,
        "file": dir.path().join("prom.out").display().to_string(),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "prom-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
    });
    let created = cluster
        .rest(
            leader,
            "PUT",
            "/connectors/prom-sink/config",
            Body::Json(&config),
        )
        .expect("the REST API answers");
    assert_eq!(created.status, 201, "{created:?}");
    // Every task runs before the records are written, so that no count starts again from zero
    // with a moved task. Three tasks and the connector are four units on three workers: the
    // tasks run on two or three nodes.
    wait_for("three running tasks", DRAINED, || {
        let status = cluster.rest(leader, "GET", "/connectors/prom-sink/status", Body::None)?;
        let places = task_places(&status.body);
        (places.len() == 3 && places.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    // Every 10th record is malformed; the rest are JSON. Spread over the partitions, so that
    // every task gets some.
    let bad = ferry_tests::produce_every_tenth_malformed(&kafka, TOPIC, 3, RECORDS);
    let sink = r#"connector="prom-sink""#;
    let read = format!("sum(kafka_connect_sink_task_sink_record_read_total{{{sink}}})");
    let dlq = format!("sum(kafka_connect_task_error_deadletterqueue_produce_requests{{{sink}}})");
    wait_for(
        "Prometheus to see every record read and dead-lettered",
        DRAINED,
        || {
            let seen = (prometheus.scalar(&read)?, prometheus.scalar(&dlq)?);
            (seen == (RECORDS as f64, bad as f64)).then_some(())
        },
    );
    // Each task counts what it read, on its own node: every task read some.
    let per_node = prometheus
        .query(&format!(
            "kafka_connect_sink_task_sink_record_read_total{{{sink}}}"
        ))
        .expect("a query");
    assert_eq!(per_node.len(), 3, "{per_node:?}");
    assert!(per_node.iter().all(|(_, v)| *v > 0.0), "{per_node:?}");
    let running =
        format!(r#"count(kafka_connect_connector_task_status{{{sink},status="running"}} == 1)"#);
    assert_eq!(prometheus.scalar(&running), Some(3.0));
    // Every partition read to its end: three lag series, each 0.
    let lags = format!("ferry_sink_partition_lag{{{sink}}}");
    wait_for("every partition's lag to be 0", DRAINED, || {
        let lags = prometheus.query(&lags)?;
        (lags.len() == 3 && lags.iter().all(|(_, lag)| *lag == 0.0)).then_some(())
    });
    // The Raft leader, as every node sees it, and the one node that says it leads.
    assert_eq!(
        prometheus.scalar("min(ferry_raft_leader_id)"),
        Some(leader as f64)
    );
    assert_eq!(
        prometheus.scalar("max(ferry_raft_leader_id)"),
        Some(leader as f64)
    );
    let leads = prometheus
        .query("ferry_raft_is_leader == 1")
        .expect("a query");
    let instance = targets[leader as usize - 1].trim_start_matches("http://");
    assert_eq!(leads.len(), 1, "{leads:?}");
    assert_eq!(leads[0].0["instance"], instance, "{leads:?}");
    assert_eq!(
        prometheus.scalar("sum(ferry_failover_seconds_count)"),
        Some(0.0)
    );

    // A worker that runs a task dies; the leader moves its units and times it.
    let victim = follower_running(&cluster, leader, "prom-sink");
    cluster.kill9(victim);
    let failovers = wait_for("the leader to time a fail-over", DRAINED, || {
        prometheus
            .scalar("sum(ferry_failover_seconds_count)")
            .filter(|n| *n >= 1.0)
    });
    let took = prometheus
        .scalar("sum(ferry_failover_seconds_sum)")
        .expect("a sum");
    say(format!(
        "Prometheus: {RECORDS} records read, {bad} dead-lettered, leader {leader}; after node {victim}'s kill -9, {failovers} fail-over(s) of {took:.1} s"
    ));
    assert!(took > 0.0 && took < DRAINED.as_secs_f64(), "{took}");
    let status = cluster
        .rest(leader, "GET", "/connectors/prom-sink/status", Body::None)
        .expect("status");
    assert!(
        status.body["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["state"] == "RUNNING")),
        "the fail-over ended with every task running: {:?}",
        status.body
    );
}

/// A node with `[metrics] enabled = false` measures nothing and says so where its series
/// would be: `GET /metrics` and `ferry metrics`.
#[test]
fn a_node_with_metrics_off_serves_none_and_says_why() {
    let kafka = Kafka::start(&[]);
    let settings = Settings {
        metrics: vec![("enabled", "false")],
        ..Settings::default()
    };
    let (cluster, leader) = started(1, &kafka, settings);
    let answer = cluster
        .rest(leader, "GET", "/metrics", Body::None)
        .expect("the REST API answers");
    assert_eq!(answer.status, 404, "{answer:?}");
    assert!(
        answer.body["message"]
            .as_str()
            .is_some_and(|m| m.contains("[metrics] enabled = false")),
        "{answer:?}"
    );
    let cli = cluster.cli_on(&[leader], &["metrics"]);
    assert!(!cli.ok(), "{cli:?}");
    assert!(cli.stderr.contains("[metrics] enabled = false"), "{cli:?}");
}
