//! The task runtime, end to end: real `ferryd` processes, librdkafka's mock broker over TCP
//! (in its own process), FileStream connectors. Times are printed, not asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_tests::{lines_in_work_dirs, say, wait_for, Cluster, Kafka, Settings};
use serde_json::Value;

const BOOT: Duration = Duration::from_secs(30);
const FLOW: Duration = Duration::from_secs(90);

fn started(n: u64, kafka: &Kafka, settings: Settings) -> (Cluster, u64) {
    let settings = Settings {
        kafka: Some(kafka.bootstrap.clone()),
        ..settings
    };
    let mut cluster = Cluster::new(n, settings);
    cluster.start_all();
    let leader = cluster.wait_leader(BOOT);
    // Every worker registered, so that no task moves to a latecomer.
    for id in 1..=n {
        wait_for("every worker to register", BOOT, || {
            cluster
                .log_text(id)
                .contains("registered as a worker")
                .then_some(())
        });
    }
    (cluster, leader)
}

fn write_input(cluster: &Cluster, lines: usize) -> (std::path::PathBuf, BTreeSet<String>) {
    let path = cluster.dir.path().join("input.txt");
    let all: Vec<String> = (0..lines).map(|i| format!("line-{i:05}")).collect();
    std::fs::write(&path, all.join("\n") + "\n").expect("write the input file");
    (path, all.into_iter().collect())
}

fn create(cluster: &Cluster, node: u64, name: &str, config: &[(&str, &str)]) {
    let file = cluster.connector_file(name, config);
    cluster.cli(
        node,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
}

/// Committed sink offsets per partition.
fn sink_offsets(cluster: &Cluster, node: u64, name: &str) -> BTreeMap<i64, i64> {
    let offsets = cluster.json(node, &["connectors", "offsets", name]);
    offsets["offsets"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter_map(|o| {
                    Some((
                        o["partition"]["kafka_partition"].as_i64()?,
                        o["offset"]["kafka_offset"].as_i64()?,
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn file_source_to_a_topic_to_file_sinks_delivers_every_line_through_every_partition_and_task() {
    let kafka = Kafka::start(&[("lines", 3)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let (input, expected) = write_input(&cluster, 10_000);
    let started = Instant::now();
    create(
        &cluster,
        leader,
        "source",
        &[
            ("connector.class", "FileStreamSource"),
            ("file", &input.to_string_lossy()),
            ("topic", "lines"),
        ],
    );
    create(
        &cluster,
        leader,
        "sink",
        &[
            (
                "connector.class",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ),
            ("topics", "lines"),
            ("tasks.max", "3"),
            // Relative: each worker writes in its own working directory.
            ("file", "sink.out"),
        ],
    );
    let got = wait_for("every line in the sink files", FLOW, || {
        let lines = lines_in_work_dirs(&cluster, "sink.out");
        let unique: BTreeSet<String> = lines.iter().cloned().collect();
        (unique.len() >= expected.len()).then_some(lines)
    });
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    say(format!(
        "PIPELINE: {} lines through source -> 3 partitions -> 3 sink tasks in {} ms; {} duplicates",
        expected.len(),
        started.elapsed().as_millis(),
        got.len() - unique.len()
    ));
    assert_eq!(unique, expected, "every line arrived, nothing else");

    // Every partition got records, and every task owns one of them.
    let offsets = wait_for("the sink's offsets for all 3 partitions", FLOW, || {
        let offsets = sink_offsets(&cluster, leader, "sink");
        (offsets.len() == 3 && offsets.values().sum::<i64>() >= expected.len() as i64)
            .then_some(offsets)
    });
    assert!(offsets.values().all(|o| *o > 0), "{offsets:?}");
    let tasks = cluster.json(leader, &["connectors", "tasks", "sink"]);
    let owned: Vec<usize> = tasks
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(owned, vec![1, 1, 1], "{tasks}");

    // Status: every unit RUNNING on a worker.
    for name in ["source", "sink"] {
        let status = cluster.json(leader, &["connectors", "status", name]);
        assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
        for task in status["tasks"].as_array().expect("tasks") {
            assert_eq!(task["state"], "RUNNING", "{status}");
            assert!(!task["worker_id"].as_str().unwrap_or_default().is_empty());
        }
    }
    let size = std::fs::metadata(&input).map(|m| m.len()).ok();
    wait_for("the source to commit its whole file", FLOW, || {
        let source: Value = cluster.json(leader, &["connectors", "offsets", "source"]);
        (source["offsets"][0]["offset"]["position"].as_u64() == size).then_some(())
    });
}
