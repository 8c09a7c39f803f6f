//! The web console (`/ui`) as a person uses it: headless Chromium, driven by Playwright
//! (`tests/py/console.py`), against a three-node cluster — and the REST API's Ferry extensions
//! it reads, the rule that a browser's writes are JSON, and its live updates ending when a node
//! stops.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use ferry_tests::exposition::Exposition;
use ferry_tests::pipeline::{json_workers, started, task_places};
use ferry_tests::rest::{self, Body};
use ferry_tests::{bin, produce_every_tenth_malformed, python, say, wait_for, Kafka, Settings};
use serde_json::{json, Value};

const DRAINED: Duration = Duration::from_secs(60);

/// Debian's Chromium (scripts/testbed/chromium.sh installs it): the browser itself, not the
/// wrapper script, where it is.
fn chromium() -> PathBuf {
    ["/usr/lib/chromium/chromium", "/usr/bin/chromium"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("Debian's chromium is missing: run ./scripts/testbed/chromium.sh (make test does)")
}

/// Where the screenshot is kept after the test (the tests' artifacts, under target/).
fn artifact(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/artifacts");
    std::fs::create_dir_all(&dir).expect("target/artifacts");
    dir.join(name)
}

/// A FileStreamSink with three tasks (on two or three nodes) reads 60 records, 6 of them
/// malformed and dead-lettered; the console of a follower shows the three nodes with the leader,
/// the tasks RUNNING and the 6 dead-lettered records (summed over every node's metrics, which the
/// node serving the console asks of the others), a rate above zero while 300 more flow, and a
/// lag of 0; `ferry connectors pause` turns the tasks PAUSED on screen; the console's Resume,
/// Restart (every task a later generation), Stop and Pause buttons work; a node killed shows as
/// not answering. Before it, the REST API's Ferry extensions are checked, and a browser's write
/// that is not JSON is refused.
#[test]
fn the_console_shows_the_cluster_and_its_connectors_and_drives_them() {
    const TOPIC: &str = "console-orders";
    const RECORDS: usize = 60;
    let kafka = Kafka::start(&[(TOPIC, 3), ("console-dlq", 1)]);
    // Each partition's lag too (`[metrics] partition_lag`, off by default), which the page sums.
    let settings = Settings {
        metrics: vec![("partition_lag", "true")],
        ..json_workers()
    };
    let (cluster, leader) = started(3, &kafka, settings);
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({
        "connector.class": "FileStreamSink",
        "tasks.max": "3",
        "topics": TOPIC,
        "file": dir.path().join("console.out").display().to_string(),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": "console-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
    });
    let created = cluster
        .rest(
            leader,
            "PUT",
            "/connectors/console-sink/config",
            Body::Json(&config),
        )
        .expect("the REST API answers");
    assert_eq!(created.status, 201, "{created:?}");
    wait_for("three running tasks", DRAINED, || {
        let status = cluster.rest(leader, "GET", "/connectors/console-sink/status", Body::None)?;
        let places = task_places(&status.body);
        (places.len() == 3 && places.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    let bad = produce_every_tenth_malformed(&kafka, TOPIC, 3, RECORDS);

    // What the console reads: the cluster, the connectors with Ferry's facts, any node's series.
    let view = cluster
        .rest(follower, "GET", "/ferry/cluster", Body::None)
        .expect("GET /ferry/cluster");
    assert_eq!(view.status, 200, "{view:?}");
    assert_eq!(view.body["node_id"], json!(follower));
    assert_eq!(view.body["leader_id"], json!(leader));
    assert_eq!(view.body["members"].as_array().map(Vec::len), Some(3));
    let statuses = cluster
        .rest(follower, "GET", "/ferry/connectors", Body::None)
        .expect("GET /ferry/connectors");
    let sink = statuses
        .body
        .as_array()
        .and_then(|all| all.iter().find(|s| s["name"] == "console-sink").cloned());
    let sink = sink.unwrap_or_else(|| panic!("console-sink in {statuses:?}"));
    assert_eq!(sink["target_state"], "RUNNING", "{sink}");
    let tasks = sink["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 3, "{sink}");
    assert!(
        tasks.iter().all(|t| t["generation"].as_u64() >= Some(1)),
        "every task has a generation: {sink}"
    );
    // The dead-lettered records, summed over the three nodes' series as the console sums them,
    // each node's asked of the follower.
    wait_for(
        "the nodes' metrics, read through one node, to count 6 dead-lettered records",
        DRAINED,
        || {
            let mut sum = 0.0;
            for id in 1..=3 {
                let answer = cluster.rest(
                    follower,
                    "GET",
                    &format!("/ferry/nodes/{id}/metrics"),
                    Body::None,
                )?;
                assert_eq!(answer.status, 200, "node {id}'s metrics: {answer:?}");
                let text = answer.body.as_str().expect("text");
                let scraped = Exposition::parse(text).expect("node metrics parse");
                sum += scraped
                    .values(
                        "kafka_connect_task_error_deadletterqueue_produce_requests",
                        &[("connector", "console-sink")],
                    )
                    .sum::<f64>();
            }
            (sum == bad as f64).then_some(())
        },
    );
    let unknown = cluster
        .rest(follower, "GET", "/ferry/nodes/99/metrics", Body::None)
        .expect("an answer");
    assert_eq!(unknown.status, 404, "{unknown:?}");

    // A browser's write that is not JSON (a form post from another site) is refused and
    // changes nothing; the same write as JSON — the console's — is accepted.
    let base = cluster.rest_url(follower);
    let forged = rest::call_with(
        &base,
        "PUT",
        "/connectors/console-sink/pause",
        Body::Raw("application/x-www-form-urlencoded", "x=1"),
        &[("Origin", "http://elsewhere.example")],
    )
    .expect("an answer");
    assert_eq!(forged.status, 415, "{forged:?}");
    let after = cluster
        .rest(leader, "GET", "/connectors/console-sink/status", Body::None)
        .expect("status");
    assert_eq!(
        after.body["connector"]["state"], "RUNNING",
        "the refused pause changed nothing: {after:?}"
    );
    let no_type = rest::call_with(
        &base,
        "POST",
        "/connectors/console-sink/restart",
        Body::None,
        &[("Origin", "http://elsewhere.example")],
    )
    .expect("an answer");
    assert_eq!(no_type.status, 415, "{no_type:?}");

    // The console in a browser.
    let pause = json!([
        bin("ferry").display().to_string(),
        "--server",
        cluster.node(leader).api,
        "connectors",
        "pause",
        "console-sink"
    ]);
    let screenshot = artifact("console.png");
    let screenshot_down = artifact("console-node-down.png");
    for file in [&screenshot, &screenshot_down] {
        let _ = std::fs::remove_file(file);
    }
    // The follower that does not serve the console: killed at the end.
    let victim = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("a third node");
    let pid = cluster.node(victim).pid().expect("the node runs");
    let kill = json!(["kill", "-9", pid.to_string()]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/console.py");
    let mut driver = Command::new(python())
        .arg(&script)
        .arg("--url")
        .arg(format!("{base}/ui/"))
        .arg("--browser")
        .arg(chromium())
        .args([
            "--connector",
            "console-sink",
            "--tasks",
            "3",
            "--nodes",
            "3",
        ])
        .args(["--leader", &leader.to_string()])
        .args(["--dead-lettered", &bad.to_string()])
        .args(["--bootstrap", &kafka.bootstrap, "--topic", TOPIC])
        .arg("--pause")
        .arg(pause.to_string())
        .arg("--screenshot")
        .arg(&screenshot)
        .arg("--kill")
        .arg(kill.to_string())
        .args(["--killed", &victim.to_string()])
        .arg("--screenshot-down")
        .arg(&screenshot_down)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tests/py/console.py");
    let stdout = driver.stdout.take().expect("stdout");
    for line in BufReader::new(stdout).lines() {
        say(line.expect("a line of the driver's"));
    }
    let done = driver.wait_with_output().expect("the driver ends");
    assert!(
        done.status.success(),
        "the console test failed: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    // The Pause button paused it for the cluster, not only on screen.
    let status = cluster
        .rest(leader, "GET", "/connectors/console-sink/status", Body::None)
        .expect("status");
    assert_eq!(status.body["connector"]["state"], "PAUSED", "{status:?}");
    for file in [&screenshot, &screenshot_down] {
        let png = std::fs::read(file).expect("the screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
        say(format!("the console's screenshot: {}", file.display()));
    }
}

/// A console open on a node (its `/ui/events` stream) ends when the node stops, cleanly and
/// at once: the node's REST server is not left to the shutdown bound (its log would say it was
/// abandoned), and the stream's client sees the stream end (curl exits 0, not with a cut
/// transfer).
#[test]
fn an_open_console_does_not_hold_a_stopping_node() {
    let kafka = Kafka::start(&[]);
    let (mut cluster, leader) = started(1, &kafka, Settings::default());
    let mut events = Command::new("curl")
        .args(["-s", "-N", "--max-time", "60"])
        .arg(format!("{}/ui/events", cluster.rest_url(leader)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("curl");
    let mut lines = BufReader::new(events.stdout.take().expect("stdout")).lines();
    // The first event comes at once: the state as it is.
    let first: Vec<String> = lines
        .by_ref()
        .map_while(Result::ok)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(
        first.first().map(String::as_str),
        Some("event: change"),
        "{first:?}"
    );
    let data: Value = first
        .iter()
        .find_map(|l| l.strip_prefix("data: "))
        .and_then(|d| serde_json::from_str(d).ok())
        .unwrap_or_else(|| panic!("a JSON change: {first:?}"));
    assert_eq!(data["leader_id"], json!(leader), "{data}");
    assert!(data["applied_index"].as_u64() > Some(0), "{data}");
    cluster.stop(leader);
    for _ in lines.by_ref() {}
    let ended = events.wait().expect("curl ends");
    assert!(
        ended.success(),
        "the event stream ended cleanly when the node stopped: {ended}"
    );
    assert_eq!(
        cluster.log_count(leader, &["rest server", "abandoned"]),
        0,
        "the node's REST server stopped within its drain: {}",
        cluster.log_text(leader)
    );
}
