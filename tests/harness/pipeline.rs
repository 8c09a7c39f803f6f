//! Pipelines for end-to-end tests: a cluster started against a broker with every worker
//! registered, an input file of numbered lines, connectors created through the CLI.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::{wait_for, Cluster, Kafka, Settings};

const BOOT: Duration = Duration::from_secs(30);

/// A started cluster of `n` nodes whose workers all registered, and its leader.
pub fn started(n: u64, kafka: &Kafka, settings: Settings) -> (Cluster, u64) {
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

pub fn write_input(cluster: &Cluster, lines: usize) -> (std::path::PathBuf, BTreeSet<String>) {
    let path = cluster.dir.path().join("input.txt");
    let all: Vec<String> = (0..lines).map(|i| format!("line-{i:05}")).collect();
    std::fs::write(&path, all.join("\n") + "\n").expect("write the input file");
    (path, all.into_iter().collect())
}

/// A FileStreamSource of `input` into `topic`.
pub fn create_source(cluster: &Cluster, node: u64, input: &std::path::Path, topic: &str) {
    create_source_with(cluster, node, "source", input, topic, &[]);
}

/// A FileStreamSource `name` of `input` into `topic`, with more properties.
pub fn create_source_with(
    cluster: &Cluster,
    node: u64,
    name: &str,
    input: &std::path::Path,
    topic: &str,
    more: &[(&str, &str)],
) {
    let file = input.to_string_lossy();
    let mut config = vec![
        ("connector.class", "FileStreamSource"),
        ("file", file.as_ref()),
        ("topic", topic),
    ];
    config.extend_from_slice(more);
    create(cluster, node, name, &config);
}

pub fn create(cluster: &Cluster, node: u64, name: &str, config: &[(&str, &str)]) {
    let file = cluster.connector_file(name, config);
    cluster.cli(
        node,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
}

/// Each task of a connector: (state, worker id), from its status.
pub fn task_workers(cluster: &Cluster, node: u64, name: &str) -> Vec<(String, String)> {
    task_places(&cluster.json(node, &["connectors", "status", name]))
}

/// Each task of a connector status (the CLI's or Kafka Connect's REST shape): (state,
/// worker id).
pub fn task_places(status: &serde_json::Value) -> Vec<(String, String)> {
    status["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|t| {
                    (
                        t["state"].as_str().unwrap_or_default().to_string(),
                        t["worker_id"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A follower (a node other than `leader`) that runs a task of `connector`.
pub fn follower_running(cluster: &Cluster, leader: u64, connector: &str) -> u64 {
    let workers = task_workers(cluster, leader, connector);
    cluster
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != leader)
        .find(|id| workers.iter().any(|(_, w)| *w == cluster.node(*id).api))
        .unwrap_or_else(|| panic!("no follower runs a task of {connector}: {workers:?}"))
}

/// Where every unit of the connectors runs: (connector, task or "connector") → worker.
pub fn placement(cluster: &Cluster, node: u64, names: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for name in names {
        let status = cluster.json(node, &["connectors", "status", name]);
        out.insert(
            format!("{name}/connector"),
            status["connector"]["worker_id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        for t in status["tasks"].as_array().into_iter().flatten() {
            out.insert(
                format!("{name}/{}", t["id"]),
                t["worker_id"].as_str().unwrap_or_default().to_string(),
            );
        }
    }
    out
}

/// A log filter that keeps everything a node logs at every level (the password checks).
pub const TRACE_ALL: &str = "trace,h2=info,hyper=info,tower=info,tonic=info,openraft=debug";

/// Workers writing JSON with schemas, as seed 003's worker.properties sets them.
pub fn json_workers() -> Settings {
    Settings {
        worker_converters: vec![
            (
                "key.converter".into(),
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
            (
                "value.converter".into(),
                "org.apache.kafka.connect.json.JsonConverter".into(),
            ),
        ],
        ..Settings::default()
    }
}

/// A sink connector's committed offsets per partition, as the offsets API shows them.
pub fn sink_offsets(cluster: &Cluster, node: u64, name: &str) -> BTreeMap<i64, i64> {
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

/// Stop a connector and wait until every task of it is STOPPED.
pub fn stop(cluster: &Cluster, node: u64, name: &str) {
    cluster.cli(node, &["connectors", "stop", name]);
    wait_for("the tasks STOPPED", Duration::from_secs(120), || {
        let t = task_workers(cluster, node, name);
        (!t.is_empty() && t.iter().all(|(s, _)| s == "STOPPED")).then_some(())
    });
}

/// Wait until the cluster runs at this build's feature level (raised by the leader once every
/// member said it understands it), which marks offsets changed through the offsets API and
/// retires the nodes remove-node takes out.
pub fn at_feature_level(cluster: &Cluster, node: u64) {
    wait_for("the cluster at this build's feature level", BOOT, || {
        let status = cluster.status(node)?;
        (status["feature_level"] == ferry_meta::format::FORMAT_VERSION).then_some(())
    });
}

/// Alter a connector's offsets (KIP-875 JSON) through the CLI; the offsets it answers.
pub fn alter_offsets(cluster: &Cluster, node: u64, name: &str, offsets: &str) -> serde_json::Value {
    at_feature_level(cluster, node);
    let file = cluster.dir.path().join(format!("{name}-offsets.json"));
    std::fs::write(&file, offsets).expect("write the offsets");
    cluster.json(
        node,
        &[
            "connectors",
            "offsets",
            name,
            "--alter",
            &file.to_string_lossy(),
        ],
    )
}

/// Reset a connector's offsets through the CLI; the offsets it answers.
pub fn reset_offsets(cluster: &Cluster, node: u64, name: &str) -> serde_json::Value {
    at_feature_level(cluster, node);
    cluster.json(node, &["connectors", "offsets", name, "--reset"])
}
