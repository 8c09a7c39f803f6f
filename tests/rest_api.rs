//! Kafka Connect's REST API on every node, driven with `curl` as its users drive it: a
//! three-node cluster on a real broker, FileStream connectors, requests sent to followers
//! (forwarded to the leader) and to the leader; status codes, JSON shapes and error bodies as
//! Kafka Connect answers them (`../shared/reference/kafka-connect-rest.md`).

use std::time::Duration;

use ferry_tests::pipeline::started;
use ferry_tests::rest::{Answer, Body};
use ferry_tests::{say, wait_for, Cluster, Kafka, Settings};
use serde_json::{json, Value};

const FLOW: Duration = Duration::from_secs(90);

/// A request to `node` that must be answered with `status`.
fn expect(
    cluster: &Cluster,
    node: u64,
    method: &str,
    path: &str,
    body: Body<'_>,
    status: u16,
) -> Answer {
    let answer = cluster
        .rest(node, method, path, body)
        .unwrap_or_else(|| panic!("node {node} did not answer {method} {path}"));
    assert_eq!(
        answer.status, status,
        "{method} {path} on node {node}: {:?}",
        answer.body
    );
    answer
}

/// An error answer: Kafka Connect's body, with a message starting with `message`.
fn expect_error(
    cluster: &Cluster,
    node: u64,
    method: &str,
    path: &str,
    body: Body<'_>,
    status: u16,
    message: &str,
) {
    let answer = expect(cluster, node, method, path, body, status);
    assert_eq!(
        answer.body["error_code"],
        json!(status),
        "{:?}",
        answer.body
    );
    let text = answer.body["message"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(message),
        "{method} {path}: {text:?} does not start with {message:?}"
    );
}

fn sink_config(file: &str) -> Value {
    json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "2",
        "topics": "rest-lines",
        "file": file,
    })
}

#[test]
fn kafka_connect_s_rest_api_on_every_node() {
    let kafka = Kafka::start(&[("rest-lines", 2)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");

    // The root and health.
    let root = expect(&cluster, follower, "GET", "/", Body::None, 200).body;
    assert!(
        root["version"].is_string() && root["commit"].is_string(),
        "{root}"
    );
    assert!(
        root["kafka_cluster_id"]
            .as_str()
            .is_some_and(|id| !id.is_empty()),
        "the brokers' cluster id: {root}"
    );
    for id in 1..=3 {
        let health = expect(&cluster, id, "GET", "/health", Body::None, 200).body;
        assert_eq!(health["status"], "healthy", "{health}");
    }
    assert_eq!(
        expect(&cluster, follower, "GET", "/connectors", Body::None, 200).body,
        json!([])
    );
    let plugins = expect(
        &cluster,
        follower,
        "GET",
        "/connector-plugins",
        Body::None,
        200,
    )
    .body;
    assert!(
        plugins.as_array().is_some_and(|p| p.iter().any(|p| p
            == &json!({"class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "type": "sink", "version": p["version"]}))),
        "{plugins}"
    );

    // Create through a follower: 201, where it is, and Kafka Connect's ConnectorInfo.
    let create = json!({"name": " sink ", "config": sink_config("rest.out")});
    let created = expect(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&create),
        201,
    );
    assert!(
        created
            .header("location")
            .is_some_and(|l| l.ends_with("/connectors/sink")),
        "{:?}",
        created.headers
    );
    let mut want = sink_config("rest.out");
    want["name"] = json!("sink");
    assert_eq!(
        created.body,
        json!({"name": "sink", "config": want, "tasks": [], "type": "sink"}),
        "the name trimmed and put in the config; no task yet"
    );

    // The errors of a create, as Kafka Connect answers them.
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&create),
        409,
        "Connector sink already exists",
    );
    expect_error(
        &cluster,
        leader,
        "POST",
        "/connectors",
        Body::Raw("application/json", "{\"name\": "),
        500,
        "",
    );
    expect_error(
        &cluster,
        leader,
        "POST",
        "/connectors",
        Body::Raw("text/plain", "{}"),
        415,
        "HTTP 415",
    );
    let unknown_class = json!({"name": "x", "config": {"connector.class": "NoSuchConnector"}});
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&unknown_class),
        500,
        "Failed to find any class that implements Connector and which name matches NoSuchConnector",
    );
    let no_class = json!({"name": "x", "config": {"topics": "t"}});
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&no_class),
        400,
        "Connector config {",
    );
    let mismatch =
        json!({"name": "x", "config": {"name": "y", "connector.class": "FileStreamSink"}});
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&mismatch),
        400,
        "Connector name configuration (y) doesn't match connector name in the URL (x)",
    );
    let invalid = json!({"name": "x", "config": {"connector.class": "FileStreamSink", "topics": "t", "file": "x.out", "tasks.max": "many"}});
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors",
        Body::Json(&invalid),
        400,
        "Connector configuration is invalid and contains the following 1 error(s):\n",
    );

    // Reads of it, from any node.
    let info = expect(&cluster, leader, "GET", "/connectors/sink", Body::None, 200).body;
    assert_eq!(info["name"], "sink");
    expect_error(
        &cluster,
        follower,
        "GET",
        "/connectors/nope",
        Body::None,
        404,
        "Connector nope not found",
    );
    let config = expect(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/config",
        Body::None,
        200,
    )
    .body;
    assert_eq!(config, want);
    // Workers are named by their REST address, as Kafka Connect names them.
    let rest_addrs: Vec<String> = cluster
        .nodes
        .values()
        .map(|n| n.rest.trim_start_matches("http://").to_string())
        .collect();
    let named = |unit: &Value| {
        unit["worker_id"]
            .as_str()
            .is_some_and(|w| rest_addrs.iter().any(|r| r == w))
    };
    let status = wait_for(
        "the sink's tasks RUNNING, on workers named by REST address",
        FLOW,
        || {
            let status = expect(
                &cluster,
                follower,
                "GET",
                "/connectors/sink/status",
                Body::None,
                200,
            )
            .body;
            let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
            (tasks.len() == 2
                && tasks.iter().all(|t| t["state"] == "RUNNING" && named(t))
                && named(&status["connector"]))
            .then_some(status)
        },
    );
    assert_eq!(status["name"], "sink");
    assert_eq!(status["type"], "sink");
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
    assert!(
        status["connector"].get("trace").is_none(),
        "no empty trace: {status}"
    );
    assert_eq!(status["tasks"][1]["id"], 1);
    expect_error(
        &cluster,
        follower,
        "GET",
        "/connectors/nope/status",
        Body::None,
        404,
        "No status found for connector nope",
    );
    let tasks = expect(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/tasks",
        Body::None,
        200,
    )
    .body;
    assert_eq!(
        tasks[1]["id"],
        json!({"connector": "sink", "task": 1}),
        "{tasks}"
    );
    assert_eq!(tasks[0]["config"]["file"], "rest.out", "{tasks}");
    let by_id = expect(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/tasks-config",
        Body::None,
        200,
    )
    .body;
    assert_eq!(by_id["sink-1"], tasks[1]["config"], "{by_id}");
    let task = expect(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/tasks/1/status",
        Body::None,
        200,
    )
    .body;
    assert_eq!(task["id"], 1);
    assert_eq!(task["state"], "RUNNING");
    expect_error(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/tasks/7/status",
        Body::None,
        404,
        "No status found for task sink-7",
    );
    expect_error(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/tasks/x/status",
        Body::None,
        404,
        "HTTP 404 Not Found",
    );
    let expanded = expect(
        &cluster,
        follower,
        "GET",
        "/connectors?expand=status&expand=info",
        Body::None,
        200,
    )
    .body;
    assert_eq!(expanded["sink"]["info"]["name"], "sink", "{expanded}");
    assert_eq!(
        expanded["sink"]["status"]["connector"]["state"], "RUNNING",
        "{expanded}"
    );
    let only_unknown = expect(
        &cluster,
        follower,
        "GET",
        "/connectors?expand=status,info",
        Body::None,
        200,
    )
    .body;
    assert_eq!(
        only_unknown,
        json!({"sink": {}}),
        "unknown expand values are ignored"
    );

    // Config changes: PUT replaces (200, or 201 when it creates), PATCH merges.
    let mut replaced = sink_config("rest.out");
    replaced["tasks.max"] = json!(1);
    let put = expect(
        &cluster,
        follower,
        "PUT",
        "/connectors/sink/config",
        Body::Json(&replaced),
        200,
    )
    .body;
    assert_eq!(
        put["config"]["tasks.max"], "1",
        "a number becomes a string: {put}"
    );
    let other = expect(
        &cluster,
        follower,
        "PUT",
        "/connectors/other/config",
        Body::Json(&sink_config("other.out")),
        201,
    );
    assert!(other
        .header("location")
        .is_some_and(|l| l.ends_with("/connectors/other")));
    let patch = json!({"tasks.max": "2", "file": "patched.out"});
    let patched = expect(
        &cluster,
        follower,
        "PATCH",
        "/connectors/other/config",
        Body::Json(&patch),
        200,
    )
    .body;
    assert_eq!(patched["config"]["file"], "patched.out", "{patched}");
    expect_error(
        &cluster,
        follower,
        "PATCH",
        "/connectors/nope/config",
        Body::Json(&patch),
        404,
        "Connector nope not found",
    );
    expect_error(
        &cluster,
        follower,
        "PUT",
        "/connectors/sink/config",
        Body::Json(&json!({"name": "else"})),
        400,
        "Connector name configuration (else)",
    );

    // Pause, resume, restart.
    expect(
        &cluster,
        follower,
        "PUT",
        "/connectors/other/pause",
        Body::None,
        202,
    );
    wait_for("the connector PAUSED", FLOW, || {
        let s = expect(
            &cluster,
            follower,
            "GET",
            "/connectors/other/status",
            Body::None,
            200,
        )
        .body;
        (s["connector"]["state"] == "PAUSED").then_some(())
    });
    expect(
        &cluster,
        follower,
        "PUT",
        "/connectors/other/resume",
        Body::None,
        202,
    );
    expect_error(
        &cluster,
        follower,
        "PUT",
        "/connectors/nope/pause",
        Body::None,
        404,
        "Unknown connector nope",
    );
    expect(
        &cluster,
        follower,
        "POST",
        "/connectors/other/restart",
        Body::None,
        204,
    );
    wait_for("the connector RUNNING again", FLOW, || {
        let s = expect(
            &cluster,
            follower,
            "GET",
            "/connectors/other/status",
            Body::None,
            200,
        )
        .body;
        (s["connector"]["state"] == "RUNNING"
            && s["tasks"]
                .as_array()
                .is_some_and(|t| !t.is_empty() && t.iter().all(|t| t["state"] == "RUNNING")))
        .then_some(())
    });
    let plan = expect(
        &cluster,
        follower,
        "POST",
        "/connectors/other/restart?includeTasks=true",
        Body::None,
        202,
    )
    .body;
    assert_eq!(plan["connector"]["state"], "RESTARTING", "{plan}");
    assert!(
        plan["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["state"] == "RESTARTING")),
        "{plan}"
    );
    let plan = expect(
        &cluster,
        follower,
        "POST",
        "/connectors/other/restart?includeTasks=true&onlyFailed=true",
        Body::None,
        202,
    )
    .body;
    assert_ne!(
        plan["connector"]["state"], "RESTARTING",
        "nothing failed: {plan}"
    );
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors/nope/restart",
        Body::None,
        404,
        "Unknown connector: nope",
    );
    expect(
        &cluster,
        follower,
        "POST",
        "/connectors/sink/tasks/0/restart",
        Body::None,
        204,
    );
    expect_error(
        &cluster,
        follower,
        "POST",
        "/connectors/sink/tasks/9/restart",
        Body::None,
        404,
        "Unknown task: sink-9",
    );

    // Offsets (KIP-875): read any time, changed only while STOPPED.
    let offsets = expect(
        &cluster,
        follower,
        "GET",
        "/connectors/sink/offsets",
        Body::None,
        200,
    )
    .body;
    assert!(offsets["offsets"].is_array(), "{offsets}");
    let alter = json!({"offsets": [{"partition": {"kafka_topic": "rest-lines", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]});
    expect_error(
        &cluster,
        follower,
        "PATCH",
        "/connectors/sink/offsets",
        Body::Json(&alter),
        400,
        "Connectors must be in the STOPPED state",
    );
    expect_error(
        &cluster,
        follower,
        "PATCH",
        "/connectors/nope/offsets",
        Body::Json(&json!({"offsets": []})),
        400,
        "Partitions / offsets need to be provided",
    );
    expect(
        &cluster,
        follower,
        "PUT",
        "/connectors/sink/stop",
        Body::None,
        204,
    );
    wait_for("the sink STOPPED", FLOW, || {
        let s = expect(
            &cluster,
            follower,
            "GET",
            "/connectors/sink/status",
            Body::None,
            200,
        )
        .body;
        (s["connector"]["state"] == "STOPPED").then_some(())
    });
    let altered = expect(
        &cluster,
        follower,
        "PATCH",
        "/connectors/sink/offsets",
        Body::Json(&alter),
        200,
    )
    .body;
    assert_eq!(
        altered,
        json!({"message": "The offsets for this connector have been altered successfully"})
    );
    let offsets = expect(
        &cluster,
        leader,
        "GET",
        "/connectors/sink/offsets",
        Body::None,
        200,
    )
    .body;
    assert!(
        offsets["offsets"]
            .as_array()
            .is_some_and(|all| all.contains(&alter["offsets"][0])),
        "{offsets}"
    );
    let reset = expect(
        &cluster,
        follower,
        "DELETE",
        "/connectors/sink/offsets",
        Body::None,
        200,
    )
    .body;
    assert_eq!(
        reset,
        json!({"message": "The offsets for this connector have been reset successfully"})
    );
    expect_error(
        &cluster,
        follower,
        "DELETE",
        "/connectors/nope/offsets",
        Body::None,
        404,
        "Connector nope not found",
    );

    // Delete; unknown routes and methods.
    expect(
        &cluster,
        follower,
        "DELETE",
        "/connectors/sink",
        Body::None,
        204,
    );
    expect_error(
        &cluster,
        follower,
        "DELETE",
        "/connectors/sink",
        Body::None,
        404,
        "Connector sink not found",
    );
    expect_error(
        &cluster,
        follower,
        "GET",
        "/connectors/sink",
        Body::None,
        404,
        "Connector sink not found",
    );
    expect_error(
        &cluster,
        follower,
        "GET",
        "/no/such/path",
        Body::None,
        404,
        "HTTP 404 Not Found",
    );
    expect_error(
        &cluster,
        follower,
        "DELETE",
        "/connectors",
        Body::None,
        405,
        "HTTP 405 Method Not Allowed",
    );
    assert_eq!(
        expect(&cluster, leader, "GET", "/connectors", Body::None, 200).body,
        json!(["other"])
    );
    say("REST: every request answered as Kafka Connect answers it, through followers and the leader");
}
