//! Error handling end to end: malformed JSON among good records, with `errors.tolerance=all`
//! and a dead letter queue read back by an independent client (Python's confluent-kafka), and
//! with `errors.tolerance=none`, a FAILED task whose config fix brings everything in.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use ferry_tests::pipeline::{create, create_source, started};
use ferry_tests::{lines_in_work_dirs, say, wait_for, Cluster, Kafka, Settings};
use serde_json::Value;

const FLOW: Duration = Duration::from_secs(90);

fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/pyenv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/testbed/python.sh (make test does)",
        python.display()
    );
    python
}

/// Every record of `topic`, read by confluent-kafka.
fn read_topic(kafka: &Kafka, topic: &str, expected: usize) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/read_topic.py");
    let out = Command::new(python())
        .arg(script)
        .args([&kafka.bootstrap, topic, &expected.to_string()])
        .output()
        .expect("run the Python reader");
    assert!(
        out.status.success(),
        "the Python reader failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// 100 orders as JSON lines, every tenth one cut short; the good ones as FileStreamSink
/// writes them.
fn orders(cluster: &Cluster) -> (PathBuf, BTreeSet<String>, Vec<(usize, String)>) {
    let path = cluster.dir.path().join("orders.txt");
    let mut lines = Vec::new();
    let (mut good, mut bad) = (BTreeSet::new(), Vec::new());
    for i in 0..100 {
        if i % 10 == 7 {
            let line = format!(r#"{{"id": {i}, "item": "#);
            bad.push((i, line.clone()));
            lines.push(line);
        } else {
            lines.push(format!(r#"{{"id":{i}}}"#));
            good.insert(format!("{{id={i}}}"));
        }
    }
    std::fs::write(&path, lines.join("\n") + "\n").expect("write the orders");
    (path, good, bad)
}

fn sink_config<'a>(file: &'a str, tolerance: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("connector.class", "FileStreamSink"),
        ("topics", "orders"),
        ("file", file),
        (
            "value.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        ),
        ("value.converter.schemas.enable", "false"),
        ("errors.tolerance", tolerance),
        ("errors.log.enable", "true"),
        ("errors.log.include.messages", "true"),
        ("errors.deadletterqueue.topic.name", "dlq-orders"),
        ("errors.deadletterqueue.topic.replication.factor", "1"),
        ("errors.deadletterqueue.context.headers.enable", "true"),
    ]
}

#[test]
fn malformed_records_go_to_the_dead_letter_queue_with_their_context_and_the_rest_arrive() {
    let kafka = Kafka::start(&[("orders", 1), ("dlq-orders", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, good, bad) = orders(&cluster);
    create_source(&cluster, leader, &input, "orders");
    create(&cluster, leader, "sink", &sink_config("sink.out", "all"));
    wait_for("every good order in the sink", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "sink.out")
            .into_iter()
            .collect();
        (got == good).then_some(())
    });
    let dead = read_topic(&kafka, "dlq-orders", bad.len());
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    for (record, (offset, line)) in dead.iter().zip(&bad) {
        assert_eq!(
            record["value"].as_str(),
            Some(line.as_str()),
            "the record as consumed"
        );
        let h = &record["headers"];
        let header = |name: &str| {
            h[format!("__connect.errors.{name}")]
                .as_str()
                .map(str::to_string)
        };
        assert_eq!(header("topic").as_deref(), Some("orders"));
        assert_eq!(header("partition").as_deref(), Some("0"));
        assert_eq!(header("offset"), Some(offset.to_string()));
        assert_eq!(header("connector.name").as_deref(), Some("sink"));
        assert_eq!(header("task.id").as_deref(), Some("0"));
        assert_eq!(header("stage").as_deref(), Some("VALUE_CONVERTER"));
        assert_eq!(
            header("class.name").as_deref(),
            Some("org.apache.kafka.connect.json.JsonConverter")
        );
        assert_eq!(
            header("exception.class.name").as_deref(),
            Some("org.apache.kafka.connect.errors.DataException")
        );
        assert!(
            header("exception.message").is_some_and(|m| m.contains("not valid JSON")),
            "{h}"
        );
        assert!(
            header("exception.stacktrace").is_some_and(|m| m.contains("DataException")),
            "{h}"
        );
    }
    // Every consumed offset is committed, the dead-lettered ones included.
    wait_for("the sink's offsets at the end of the topic", FLOW, || {
        let offsets = cluster.json(leader, &["connectors", "offsets", "sink"]);
        (offsets["offsets"][0]["offset"]["kafka_offset"].as_i64() == Some(100)).then_some(())
    });
    assert!(cluster
        .log_text(leader)
        .contains("error tolerated: record skipped"));
    say(format!(
        "DLQ: {} good orders delivered, {} malformed ones in dlq-orders with all ten context headers",
        good.len(),
        dead.len()
    ));
}

#[test]
fn without_tolerance_the_task_fails_with_a_readable_trace_and_a_config_fix_resumes_it() {
    let kafka = Kafka::start(&[("orders", 1), ("dlq-orders", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, good, _) = orders(&cluster);
    create_source(&cluster, leader, &input, "orders");
    create(
        &cluster,
        leader,
        "strict",
        &sink_config("strict.out", "none"),
    );
    let trace = wait_for("the strict sink FAILED", FLOW, || {
        let status = cluster.json(leader, &["connectors", "status", "strict"]);
        let task = &status["tasks"][0];
        (task["state"] == "FAILED").then(|| task["trace"].as_str().unwrap_or_default().to_string())
    });
    assert!(trace.contains("VALUE_CONVERTER"), "{trace}");
    assert!(
        trace.contains("orders-0 offset 7"),
        "the trace names the record: {trace}"
    );
    assert!(trace.contains("not valid JSON"), "{trace}");
    // The records before the bad one were written; the rest wait.
    let before: BTreeSet<String> = lines_in_work_dirs(&cluster, "strict.out")
        .into_iter()
        .collect();
    assert!(before.len() <= 7, "{before:?}");
    // The fix: tolerate bad records. The task starts again from its committed offset.
    let fixed = cluster.connector_file("strict", &sink_config("strict.out", "all"));
    cluster.cli(
        leader,
        &[
            "connectors",
            "config",
            "strict",
            "-f",
            &fixed.to_string_lossy(),
        ],
    );
    wait_for("every good order after the fix", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "strict.out")
            .into_iter()
            .collect();
        (got == good).then_some(())
    });
    say(format!("STRICT: failed at offset 7 with a readable trace; after the fix all {} good orders arrived", good.len()));
}
