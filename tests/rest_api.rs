//! Kafka Connect's REST API on every node, driven with `curl` as its users drive it: a
//! three-node cluster on a real broker, FileStream connectors, requests sent to followers
//! (forwarded to the leader) and to the leader; status codes, JSON shapes and error bodies as
//! Kafka Connect answers them (`../shared/reference/kafka-connect-rest.md`).

use std::time::Duration;

use ferry_tests::pipeline::started;
use ferry_tests::rest::{self, Answer, Body};
use ferry_tests::{free_port, produce_bytes, say, wait_for, Cluster, Kafka, Settings};
use serde_json::{json, Value};

const FLOW: Duration = Duration::from_secs(90);

/// Requests to one node, each with the status it must be answered with.
struct Node<'a> {
    cluster: &'a Cluster,
    id: u64,
}

impl Node<'_> {
    fn call(&self, method: &str, path: &str, body: Body<'_>, status: u16) -> Answer {
        let answer = self
            .cluster
            .rest(self.id, method, path, body)
            .unwrap_or_else(|| panic!("node {} did not answer {method} {path}", self.id));
        assert_eq!(
            answer.status, status,
            "{method} {path} on node {}: {:?}",
            self.id, answer.body
        );
        answer
    }

    /// A GET answered 200: its body.
    fn get(&self, path: &str) -> Value {
        self.call("GET", path, Body::None, 200).body
    }

    /// A request with a JSON body answered `status`: its body.
    fn send(&self, method: &str, path: &str, body: &Value, status: u16) -> Value {
        self.call(method, path, Body::Json(body), status).body
    }

    /// An error answer: Kafka Connect's body, its message starting with `message`.
    fn error(&self, method: &str, path: &str, body: Body<'_>, status: u16, message: &str) {
        let answer = self.call(method, path, body, status);
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

    /// Wait until connector `name`'s status satisfies `ok`.
    fn wait_status(&self, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        wait_for(what, FLOW, || {
            let status = self.get(&format!("/connectors/{name}/status"));
            ok(&status).then_some(status)
        })
    }
}

fn sink_config(file: &str) -> Value {
    json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "2",
        "topics": "rest-lines",
        "file": file,
    })
}

fn tasks_all(status: &Value, ok: impl Fn(&Value) -> bool) -> bool {
    status["tasks"]
        .as_array()
        .is_some_and(|t| !t.is_empty() && t.iter().all(ok))
}

#[test]
fn kafka_connect_s_rest_api_on_every_node() {
    let kafka = Kafka::start(&[("rest-lines", 2)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let f = Node {
        cluster: &cluster,
        id: (1..=3).find(|id| *id != leader).expect("a follower"),
    };
    let l = Node {
        cluster: &cluster,
        id: leader,
    };

    // The root, health and plugins.
    let root = f.get("/");
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
        let health = Node {
            cluster: &cluster,
            id,
        }
        .get("/health");
        assert_eq!(health["status"], "healthy", "{health}");
    }
    assert_eq!(f.get("/connectors"), json!([]));
    let plugins = f.get("/connector-plugins");
    let sink_plugin = plugins.as_array().and_then(|p| {
        p.iter()
            .find(|p| p["class"] == "org.apache.kafka.connect.file.FileStreamSinkConnector")
    });
    assert_eq!(
        sink_plugin.map(|p| &p["type"]),
        Some(&json!("sink")),
        "{plugins}"
    );

    // Create through a follower: 201, where it is, and Kafka Connect's ConnectorInfo.
    let create = json!({"name": " sink ", "config": sink_config("rest.out")});
    let created = f.call("POST", "/connectors", Body::Json(&create), 201);
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
    let body = Body::Json(&create);
    f.error(
        "POST",
        "/connectors",
        body,
        409,
        "Connector sink already exists",
    );
    let truncated = Body::Raw("application/json", "{\"name\": ");
    l.error("POST", "/connectors", truncated, 500, "");
    let text = Body::Raw("text/plain", "{}");
    l.error("POST", "/connectors", text, 415, "HTTP 415");
    let unknown_class = json!({"name": "x", "config": {"connector.class": "NoSuchConnector"}});
    f.error(
        "POST",
        "/connectors",
        Body::Json(&unknown_class),
        400,
        "org.apache.kafka.connect.errors.ConnectException: Failed to find any class that \
         implements Connector and which name matches NoSuchConnector",
    );
    let no_class = json!({"name": "x", "config": {"topics": "t"}});
    let body = Body::Json(&no_class);
    f.error("POST", "/connectors", body, 400, "Connector config {");
    let mismatch =
        json!({"name": "x", "config": {"name": "y", "connector.class": "FileStreamSink"}});
    f.error(
        "POST",
        "/connectors",
        Body::Json(&mismatch),
        400,
        "Connector name configuration (y) doesn't match connector name in the URL (x)",
    );
    let invalid = json!({"name": "x", "config": {
        "connector.class": "FileStreamSink", "topics": "t", "file": "x.out", "tasks.max": "many"
    }});
    f.error(
        "POST",
        "/connectors",
        Body::Json(&invalid),
        400,
        "Connector configuration is invalid and contains the following 1 error(s):\n",
    );

    // Reads of it, from any node; workers named by their REST address, as Kafka Connect
    // names them.
    assert_eq!(l.get("/connectors/sink")["name"], "sink");
    let none = Body::None;
    f.error(
        "GET",
        "/connectors/nope",
        none,
        404,
        "Connector nope not found",
    );
    assert_eq!(f.get("/connectors/sink/config"), want);
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
    let status = f.wait_status("sink", "RUNNING on workers named by REST address", |s| {
        s["tasks"].as_array().is_some_and(|t| t.len() == 2)
            && tasks_all(s, |t| t["state"] == "RUNNING" && named(t))
            && named(&s["connector"])
    });
    assert_eq!(
        (&status["name"], &status["type"]),
        (&json!("sink"), &json!("sink"))
    );
    assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
    // `ferry cluster status` shows each member's REST address.
    let members = cluster.status(leader).expect("cluster status")["members"].clone();
    let shown: Vec<&str> = members
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["rest_addr"].as_str())
        .collect();
    assert_eq!(shown.len(), 3, "{members}");
    assert!(
        shown.iter().all(|a| rest_addrs.iter().any(|r| r == a)),
        "{members}"
    );
    assert!(
        status["connector"].get("trace").is_none(),
        "no empty trace: {status}"
    );
    assert_eq!(status["tasks"][1]["id"], 1);
    let missing = "No status found for connector nope";
    f.error("GET", "/connectors/nope/status", none, 404, missing);
    let tasks = f.get("/connectors/sink/tasks");
    assert_eq!(
        tasks[1]["id"],
        json!({"connector": "sink", "task": 1}),
        "{tasks}"
    );
    assert_eq!(tasks[0]["config"]["file"], "rest.out", "{tasks}");
    // Gone in Kafka Connect 4 (KIP-970), as in Ferry.
    f.error(
        "GET",
        "/connectors/sink/tasks-config",
        none,
        404,
        "HTTP 404 Not Found",
    );
    let task = f.get("/connectors/sink/tasks/1/status");
    assert_eq!(
        (&task["id"], &task["state"]),
        (&json!(1), &json!("RUNNING"))
    );
    let missing = "No status found for task sink-7";
    f.error("GET", "/connectors/sink/tasks/7/status", none, 404, missing);
    let not_a_task = "/connectors/sink/tasks/x/status";
    f.error("GET", not_a_task, none, 404, "HTTP 404 Not Found");
    let expanded = f.get("/connectors?expand=status&expand=info");
    assert_eq!(expanded["sink"]["info"]["name"], "sink", "{expanded}");
    assert_eq!(expanded["sink"]["status"]["connector"]["state"], "RUNNING");
    let only_unknown = f.get("/connectors?expand=status,info");
    assert_eq!(
        only_unknown,
        json!({"sink": {}}),
        "unknown expand values are ignored"
    );

    // Config changes: PUT replaces (200, or 201 when it creates), PATCH merges.
    let mut replaced = sink_config("rest.out");
    replaced["tasks.max"] = json!(1);
    let put = f.send("PUT", "/connectors/sink/config", &replaced, 200);
    assert_eq!(
        put["config"]["tasks.max"], "1",
        "a number becomes a string: {put}"
    );
    let other = sink_config("other.out");
    let other = f.call("PUT", "/connectors/other/config", Body::Json(&other), 201);
    assert!(other
        .header("location")
        .is_some_and(|l| l.ends_with("/connectors/other")));
    let patch = json!({"tasks.max": "2", "file": "patched.out"});
    let patched = f.send("PATCH", "/connectors/other/config", &patch, 200);
    assert_eq!(patched["config"]["file"], "patched.out", "{patched}");
    let body = Body::Json(&patch);
    f.error(
        "PATCH",
        "/connectors/nope/config",
        body,
        404,
        "Connector nope not found",
    );
    let renamed = json!({"name": "else"});
    let body = Body::Json(&renamed);
    let mismatch = "Connector name configuration (else)";
    f.error("PUT", "/connectors/sink/config", body, 400, mismatch);

    // Pause, resume, restart.
    f.call("PUT", "/connectors/other/pause", none, 202);
    f.wait_status("other", "the connector PAUSED", |s| {
        s["connector"]["state"] == "PAUSED"
    });
    f.call("PUT", "/connectors/other/resume", none, 202);
    f.error(
        "PUT",
        "/connectors/nope/pause",
        none,
        404,
        "Unknown connector nope",
    );
    f.call("POST", "/connectors/other/restart", none, 204);
    f.wait_status("other", "the connector RUNNING again", |s| {
        s["connector"]["state"] == "RUNNING" && tasks_all(s, |t| t["state"] == "RUNNING")
    });
    let all = "/connectors/other/restart?includeTasks=true";
    let plan = f.call("POST", all, none, 202).body;
    assert_eq!(plan["connector"]["state"], "RESTARTING", "{plan}");
    assert!(tasks_all(&plan, |t| t["state"] == "RESTARTING"), "{plan}");
    // Once that restart is done, nothing has failed: a restart of the failed restarts nothing.
    f.wait_status("other", "the connector RUNNING after its restart", |s| {
        s["connector"]["state"] == "RUNNING" && tasks_all(s, |t| t["state"] == "RUNNING")
    });
    let failed = "/connectors/other/restart?includeTasks=true&onlyFailed=true";
    let plan = f.call("POST", failed, none, 202).body;
    assert_ne!(
        plan["connector"]["state"], "RESTARTING",
        "nothing failed: {plan}"
    );
    let unknown = "Unknown connector: nope";
    f.error("POST", "/connectors/nope/restart", none, 404, unknown);
    f.call("POST", "/connectors/sink/tasks/0/restart", none, 204);
    let unknown = "Unknown task: sink-9";
    f.error(
        "POST",
        "/connectors/sink/tasks/9/restart",
        none,
        404,
        unknown,
    );

    // Active topics (KIP-558): recorded once the sink consumed from its topic, forgotten by a
    // reset, recorded again by the next record.
    let topics = |node: &Node| node.get("/connectors/sink/topics")["sink"]["topics"].clone();
    assert_eq!(topics(&f), json!([]), "nothing consumed yet");
    produce_bytes(&kafka, "rest-lines", &[b"one", b"two"]);
    wait_for("the sink's active topic", FLOW, || {
        (topics(&l) == json!(["rest-lines"])).then_some(())
    });
    assert_eq!(
        f.call("PUT", "/connectors/sink/topics/reset", none, 202)
            .body,
        Value::Null
    );
    assert_eq!(topics(&f), json!([]), "reset");
    produce_bytes(&kafka, "rest-lines", &[b"three"]);
    wait_for("the sink's active topic again", FLOW, || {
        (topics(&f) == json!(["rest-lines"])).then_some(())
    });

    // Offsets (KIP-875): read any time, changed only while STOPPED.
    assert!(f.get("/connectors/sink/offsets")["offsets"].is_array());
    let alter = json!({"offsets": [{
        "partition": {"kafka_topic": "rest-lines", "kafka_partition": 0},
        "offset": {"kafka_offset": 5}
    }]});
    let body = Body::Json(&alter);
    let running = "Connectors must be in the STOPPED state";
    f.error("PATCH", "/connectors/sink/offsets", body, 400, running);
    let empty = json!({"offsets": []});
    let body = Body::Json(&empty);
    let needed = "Partitions / offsets need to be provided";
    f.error("PATCH", "/connectors/nope/offsets", body, 400, needed);
    f.call("PUT", "/connectors/sink/stop", none, 204);
    f.wait_status("sink", "the sink STOPPED", |s| {
        s["connector"]["state"] == "STOPPED"
    });
    let altered = f.send("PATCH", "/connectors/sink/offsets", &alter, 200);
    let message = "The offsets for this connector have been altered successfully";
    assert_eq!(altered, json!({ "message": message }));
    let offsets = l.get("/connectors/sink/offsets");
    assert!(
        offsets["offsets"]
            .as_array()
            .is_some_and(|all| all.contains(&alter["offsets"][0])),
        "{offsets}"
    );
    let reset = f.call("DELETE", "/connectors/sink/offsets", none, 200).body;
    let message = "The offsets for this connector have been reset successfully";
    assert_eq!(reset, json!({ "message": message }));
    let missing = "Connector nope not found";
    f.error("DELETE", "/connectors/nope/offsets", none, 404, missing);

    // KIP-980: created STOPPED, it never runs, and its offsets can be set at once.
    let stopped =
        json!({"name": "later", "config": sink_config("later.out"), "initial_state": "stopped"});
    let created = f.send("POST", "/connectors", &stopped, 201);
    assert_eq!(created["tasks"], json!([]), "{created}");
    f.wait_status("later", "created STOPPED", |s| {
        s["connector"]["state"] == "STOPPED"
    });
    assert_eq!(
        f.get("/connectors/later/tasks"),
        json!([]),
        "a STOPPED connector has no tasks"
    );
    let altered = f.send("PATCH", "/connectors/later/offsets", &alter, 200);
    assert_eq!(
        altered["message"],
        "The offsets for this connector have been altered successfully"
    );
    let bogus =
        json!({"name": "bogus", "config": sink_config("b.out"), "initial_state": "SLEEPING"});
    f.error(
        "POST",
        "/connectors",
        Body::Json(&bogus),
        500,
        "Cannot deserialize value",
    );
    f.error(
        "GET",
        "/connectors/bogus",
        none,
        404,
        "Connector bogus not found",
    );
    f.call("DELETE", "/connectors/later", none, 204);

    // Delete; unknown routes and methods.
    f.call("DELETE", "/connectors/sink", none, 204);
    let missing = "Connector sink not found";
    f.error("DELETE", "/connectors/sink", none, 404, missing);
    f.error("GET", "/connectors/sink", none, 404, missing);
    f.error("GET", "/no/such/path", none, 404, "HTTP 404 Not Found");
    f.error(
        "DELETE",
        "/connectors",
        none,
        405,
        "HTTP 405 Method Not Allowed",
    );
    assert_eq!(l.get("/connectors"), json!(["other"]));

    // Log levels at run time (KIP-495): a logger is a tracing target; a change applies to
    // the node at once — its log shows the DEBUG lines it did not write before.
    let loggers = f.get("/admin/loggers");
    assert_eq!(
        loggers["root"],
        json!({"level": "INFO", "last_modified": null}),
        "{loggers}"
    );
    assert_eq!(loggers["openraft"]["level"], "WARN", "{loggers}");
    let path = "/admin/loggers/ferryd";
    let no_level = json!({});
    let unknown = json!({"level": "LOUD"});
    f.error("PUT", path, Body::Json(&no_level), 400, "Desired 'level'");
    f.error(
        "PUT",
        path,
        Body::Json(&unknown),
        404,
        "invalid log level 'LOUD'.",
    );
    let debug_lines = |id: u64| {
        cluster
            .log_text(id)
            .lines()
            .filter(|line| line.contains(" DEBUG ") && line.contains(" ferryd::"))
            .count()
    };
    assert_eq!(debug_lines(f.id), 0, "DEBUG lines before the change");
    let changed = f.send("PUT", path, &json!({"level": "debug"}), 200);
    assert_eq!(changed, json!(["ferryd"]));
    let level = f.get("/admin/loggers/ferryd::rest");
    assert_eq!(level["level"], "DEBUG", "{level}");
    assert!(level["last_modified"].is_u64(), "{level}");
    // Every write is logged at DEBUG by the management core: one through this node shows.
    f.call("PUT", "/connectors/other/pause", none, 202);
    wait_for("ferryd's DEBUG lines in the node's log", FLOW, || {
        (debug_lines(f.id) > 0).then_some(())
    });
    let back = f.send("PUT", path, &json!({"level": "INFO"}), 200);
    assert_eq!(back, json!(["ferryd"]));
    // scope=cluster: 204 without a body, and every node applies it (through Raft).
    f.call(
        "PUT",
        "/admin/loggers/ferry_worker::sink?scope=cluster",
        Body::Json(&json!({"level": "trace"})),
        204,
    );
    for id in cluster.nodes.keys() {
        let node = Node {
            cluster: &cluster,
            id: *id,
        };
        wait_for(&format!("the cluster's level on node {id}"), FLOW, || {
            let level = node.get("/admin/loggers/ferry_worker::sink");
            (level["level"] == "TRACE").then_some(())
        });
    }
    f.call(
        "PUT",
        "/admin/loggers/ferry_worker::sink?scope=cluster",
        Body::Json(&json!({"level": "INFO"})),
        204,
    );
    say("REST: every request answered as Kafka Connect answers it, through followers and the leader");
}

/// Kafka Connect's `admin.listeners` (`/admin/*` only there), CORS
/// (`access.control.allow.origin`, `.methods`): a browser's preflight and requests from an
/// allowed origin get the headers, others none; and `topic.tracking.allow.reset=false`.
#[test]
fn admin_listeners_cors_and_topic_tracking_as_configured() {
    let kafka = Kafka::start(&[]);
    let admin_port = free_port();
    let admin = format!("http://127.0.0.1:{admin_port}");
    let settings = Settings {
        rest: vec![
            ("admin_listeners".into(), format!("{admin:?}")),
            (
                "access_control_allow_origin".into(),
                "\"http://console.example\"".into(),
            ),
            ("access_control_allow_methods".into(), "\"GET,PUT\"".into()),
        ],
        worker: vec![("topic_tracking_allow_reset".into(), "false".into())],
        ..Settings::default()
    };
    let (cluster, _) = started(1, &kafka, settings);
    let main = cluster.node(1).rest.clone();
    let get = |base: &str, path: &str| {
        rest::call(base, "GET", path, Body::None)
            .unwrap_or_else(|| panic!("no answer to GET {base}{path}"))
            .status
    };
    assert_eq!(
        get(&main, "/admin/loggers"),
        404,
        "no /admin on the main listener"
    );
    assert_eq!(get(&admin, "/admin/loggers"), 200);
    assert_eq!(
        get(&admin, "/connectors"),
        404,
        "only /admin on the admin listener"
    );
    assert_eq!(get(&main, "/connectors"), 200);
    assert_eq!(get(&main, "/connectors/any/topics"), 200);
    let reset = rest::call(&main, "PUT", "/connectors/any/topics/reset", Body::None)
        .expect("an answer to the reset");
    assert_eq!(
        (reset.status, reset.body["message"].as_str()),
        (403, Some("Topic tracking reset is disabled.")),
        "{reset:?}"
    );

    let from = |origin: &str, method: &str, headers: &[(&str, &str)]| {
        let mut all = vec![("Origin", origin)];
        all.extend_from_slice(headers);
        rest::call_with(&main, method, "/connectors", Body::None, &all).expect("an answer")
    };
    let preflight = from(
        "http://console.example",
        "OPTIONS",
        &[("Access-Control-Request-Method", "PUT")],
    );
    assert_eq!(
        preflight.header("access-control-allow-origin"),
        Some("http://console.example"),
        "{:?}",
        preflight.headers
    );
    let methods = preflight
        .header("access-control-allow-methods")
        .unwrap_or_default()
        .to_string();
    assert!(
        methods.contains("PUT") && !methods.contains("DELETE"),
        "{methods}"
    );
    let allowed = from("http://console.example", "GET", &[]);
    assert_eq!(allowed.status, 200);
    assert_eq!(
        allowed.header("access-control-allow-origin"),
        Some("http://console.example")
    );
    let other = from("http://elsewhere.example", "GET", &[]);
    assert_eq!(
        other.header("access-control-allow-origin"),
        None,
        "{:?}",
        other.headers
    );
    // A browser's write that is not JSON passes from the origin CORS admits (a tool the
    // operator trusts, as Kafka Connect trusts it: here to the 404 of an unknown connector),
    // and is refused from any other (cross-site request forgery).
    let write = |origin: &str| {
        rest::call_with(
            &main,
            "PUT",
            "/connectors/unknown/pause",
            Body::None,
            &[("Origin", origin)],
        )
        .expect("an answer")
        .status
    };
    assert_eq!(write("http://console.example"), 404);
    assert_eq!(write("http://elsewhere.example"), 415);
    say("REST: /admin on its own listener only; CORS for the allowed origin only; other origins' writes only as JSON");
}
