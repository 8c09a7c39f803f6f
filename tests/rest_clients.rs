//! Tools written for Kafka Connect's REST API, installed from PyPI, against a three-node Ferry
//! cluster: kafka-connect-py's `kc` (create, list with expand, status, pause, resume, restart,
//! delete) through a follower, and kafka-connect-healthcheck, which reports the cluster
//! healthy, then unhealthy while a task is FAILED, then healthy again once it is gone.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ferry_tests::pipeline::started;
use ferry_tests::rest::{self, Body};
use ferry_tests::{free_port, produce_bytes, python, say, wait_for, Kafka, Settings};
use serde_json::{json, Value};

const FLOW: Duration = Duration::from_secs(90);
const TOPIC: &str = "tools-lines";

/// A program of `target/pyenv` (installed by scripts/testbed/python.sh).
fn tool(name: &str) -> PathBuf {
    python().with_file_name(name)
}

/// `kc --url <url> <args>`, which must succeed: what it printed, as JSON (`null` when it
/// printed that or nothing).
fn kc(url: &str, args: &[&str]) -> Value {
    let out = Command::new(tool("kc"))
        .args(["--url", url])
        .args(args)
        .output()
        .expect("run kc");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "kc {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = stdout.trim();
    if text.is_empty() {
        return Value::Null;
    }
    serde_json::from_str(text).unwrap_or_else(|e| panic!("kc {args:?} printed {text:?}: {e}"))
}

/// Whether every unit of a status is in `state`.
fn all_in(status: &Value, state: &str) -> bool {
    status["connector"]["state"] == state
        && status["tasks"]
            .as_array()
            .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == state))
}

/// kafka-connect-healthcheck, stopped on drop.
struct Healthcheck {
    child: Child,
    url: String,
}

impl Healthcheck {
    fn start(connect_url: &str) -> Healthcheck {
        let port = free_port();
        let child = Command::new(tool("kafka-connect-healthcheck"))
            .args(["--connect-url", connect_url, "--port", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start kafka-connect-healthcheck");
        Healthcheck {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    /// Its answer to `GET /`, once it answers: the status and the report.
    fn report(&self) -> Option<(u16, Value)> {
        rest::call(&self.url, "GET", "/", Body::None).map(|a| (a.status, a.body))
    }
}

impl Drop for Healthcheck {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn kafka_connect_py_and_kafka_connect_healthcheck_drive_ferry() {
    let kafka = Kafka::start(&[(TOPIC, 2)]);
    produce_bytes(&kafka, TOPIC, &[b"one", b"two", b"three"]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let url = cluster.node(follower).rest.clone();
    let out = cluster.dir.path().join("tools.out");
    let sink = |name: &str, converter: &str| {
        json!({"name": name, "config": {
            "connector.class": "FileStreamSink",
            "tasks.max": "2",
            "topics": TOPIC,
            "file": out.display().to_string(),
            "value.converter": converter,
            "value.converter.schemas.enable": "false",
        }})
        .to_string()
    };

    // kafka-connect-py's kc, every command a user runs.
    let created = kc(
        &url,
        &[
            "create",
            "--config-data",
            &sink(
                "tools-sink",
                "org.apache.kafka.connect.storage.StringConverter",
            ),
        ],
    );
    assert_eq!(created["name"], "tools-sink", "{created}");
    let status = |name: &str| kc(&url, &["status", name]);
    wait_for("kc status: RUNNING", FLOW, || {
        all_in(&status("tools-sink"), "RUNNING").then_some(())
    });
    let listed = kc(&url, &["list", "--expand", "status"]);
    assert_eq!(
        listed["tools-sink"]["status"]["connector"]["state"], "RUNNING",
        "{listed}"
    );
    kc(&url, &["pause", "tools-sink"]);
    wait_for("kc status: PAUSED", FLOW, || {
        all_in(&status("tools-sink"), "PAUSED").then_some(())
    });
    kc(&url, &["resume", "tools-sink"]);
    wait_for("kc status: RUNNING again", FLOW, || {
        all_in(&status("tools-sink"), "RUNNING").then_some(())
    });
    kc(&url, &["restart", "tools-sink"]);
    let plan = kc(&url, &["restart", "tools-sink", "--include-tasks"]);
    assert_eq!(plan["name"], "tools-sink", "the KIP-745 plan: {plan}");
    wait_for("kc status: RUNNING after the restarts", FLOW, || {
        all_in(&status("tools-sink"), "RUNNING").then_some(())
    });
    say("kc: create, list --expand status, status, pause, resume, restart answered by Ferry");

    // kafka-connect-healthcheck: healthy; a task FAILED makes it unhealthy.
    let health = Healthcheck::start(&url);
    let (code, report) = wait_for("the healthcheck's first report", FLOW, || health.report());
    assert_eq!(code, 200, "{report}");
    assert_eq!(report["healthy"], true, "{report}");
    // JSON values of a topic of plain text: each task fails on its first record.
    kc(
        &url,
        &[
            "create",
            "--config-data",
            &sink("tools-bad", "org.apache.kafka.connect.json.JsonConverter"),
        ],
    );
    let (code, report) = wait_for("the healthcheck reporting the FAILED task", FLOW, || {
        health.report().filter(|(code, _)| *code == 503)
    });
    assert_eq!(report["healthy"], false, "{report}");
    let failures = report["failures"].to_string();
    assert!(
        failures.contains("tools-bad") && failures.contains("FAILED"),
        "{code}: {report}"
    );
    kc(&url, &["delete", "tools-bad"]);
    wait_for("the healthcheck healthy again", FLOW, || {
        health.report().filter(|(code, _)| *code == 200)
    });
    say("kafka-connect-healthcheck: healthy, unhealthy while a task was FAILED, healthy again");

    kc(&url, &["delete", "tools-sink"]);
    assert_eq!(kc(&url, &["list"]), json!([]));
}
