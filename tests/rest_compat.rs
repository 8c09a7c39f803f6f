//! Ferry's REST API against Kafka Connect's own: one script of requests — every endpoint,
//! every error case — sent to a real Kafka Connect 4.x distributed worker and to a three-node
//! Ferry cluster (each request to the next node, so that followers forward) on the same
//! brokers, both running FileStreamSource and FileStreamSink. Status codes and JSON bodies are
//! compared after normalising only what must differ (worker ids, versions, traces, plugin
//! lists); every other difference must be listed in `rest_compat.allow` (a request, a JSON
//! pointer and the reason), and every entry there must still be needed. A request whose answer
//! depends on work in progress (a task starting, offsets being committed) is asked again until
//! both answers agree, or until `SETTLE` has passed — then the difference is reported.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_tests::connect::KafkaConnect;
use ferry_tests::pipeline::started;
use ferry_tests::rest::{self, Answer, Body};
use ferry_tests::{produce_bytes, say, try_wait_for, Cluster, Kafka, Settings};
use serde_json::{json, Value};

/// How long a request is asked again for both answers to agree.
const SETTLE: Duration = Duration::from_secs(20);
const TOPIC: &str = "compat-lines";
const RECORDS: usize = 40;

/// One request of the script.
struct Request {
    method: &'static str,
    path: String,
    body: Sent,
    /// Asked again until both answers agree (state that settles).
    settles: bool,
}

enum Sent {
    None,
    Json(Value),
    Raw(&'static str, &'static str),
}

impl Sent {
    fn body(&self) -> Body<'_> {
        match self {
            Sent::None => Body::None,
            Sent::Json(v) => Body::Json(v),
            Sent::Raw(media, text) => Body::Raw(media, text),
        }
    }
}

fn req(method: &'static str, path: &str) -> Request {
    Request {
        method,
        path: path.to_string(),
        body: Sent::None,
        settles: false,
    }
}

fn with(method: &'static str, path: &str, body: Value) -> Request {
    Request {
        body: Sent::Json(body),
        ..req(method, path)
    }
}

fn raw(method: &'static str, path: &str, media: &'static str, text: &'static str) -> Request {
    Request {
        body: Sent::Raw(media, text),
        ..req(method, path)
    }
}

/// A GET of state that settles: asked again until both agree.
fn settled(path: &str) -> Request {
    Request {
        settles: true,
        ..req("GET", path)
    }
}

/// One accepted difference: a request (`METHOD path`), a JSON pointer whose segments may be
/// `*` (any one segment), and why.
struct Allowed {
    request: String,
    pointer: Vec<String>,
    reason: String,
}

fn allow_list() -> Vec<Allowed> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rest_compat.allow");
    let text = std::fs::read_to_string(&path).expect("tests/rest_compat.allow");
    let mut allowed = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (entry, reason) = line
            .split_once(" | ")
            .unwrap_or_else(|| panic!("rest_compat.allow:{}: no ' | reason'", n + 1));
        let mut parts = entry.split_whitespace();
        let (Some(method), Some(path), Some(pointer), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            panic!(
                "rest_compat.allow:{}: want METHOD PATH POINTER | reason",
                n + 1
            );
        };
        assert!(
            !reason.trim().is_empty(),
            "rest_compat.allow:{}: a reason",
            n + 1
        );
        allowed.push(Allowed {
            request: format!("{method} {path}"),
            pointer: pointer.split('/').skip(1).map(str::to_string).collect(),
            reason: reason.trim().to_string(),
        });
    }
    allowed
}

impl Allowed {
    fn covers(&self, request: &str, pointer: &[String]) -> bool {
        self.request == request
            && self.pointer.len() == pointer.len()
            && self
                .pointer
                .iter()
                .zip(pointer)
                .all(|(want, got)| want == "*" || want == got)
    }
}

/// A difference: where (`#status` for the status code), Kafka Connect's and Ferry's.
type Difference = (Vec<String>, Value, Value);

fn differences(kc: &Value, ferry: &Value, at: &mut Vec<String>, out: &mut Vec<Difference>) {
    match (kc, ferry) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                at.push(key.clone());
                let absent = Value::String("<absent>".into());
                differences(
                    a.get(key).unwrap_or(&absent),
                    b.get(key).unwrap_or(&absent),
                    at,
                    out,
                );
                at.pop();
            }
            // Field order is part of the shape.
            let order_a: Vec<&String> = a.keys().filter(|k| b.contains_key(*k)).collect();
            let order_b: Vec<&String> = b.keys().filter(|k| a.contains_key(*k)).collect();
            if order_a != order_b {
                let mut here = at.clone();
                here.push("#order".into());
                out.push((here, json!(order_a), json!(order_b)));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let absent = Value::String("<absent>".into());
            for i in 0..a.len().max(b.len()) {
                at.push(i.to_string());
                differences(
                    a.get(i).unwrap_or(&absent),
                    b.get(i).unwrap_or(&absent),
                    at,
                    out,
                );
                at.pop();
            }
        }
        (a, b) if a != b => out.push((at.clone(), a.clone(), b.clone())),
        _ => {}
    }
}

/// What must differ, made the same: which worker runs what, versions, traces, and the lists
/// of plugins (each system lists its own: only the plugins both have are compared).
fn normalise(path: &str, body: &mut Value, versions: &[&str]) {
    fn walk(value: &mut Value, versions: &[&str]) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match key.as_str() {
                        "worker_id" if v.is_string() => *v = json!("<worker>"),
                        "trace" if v.is_string() => *v = json!("<trace>"),
                        "commit" | "kafka_cluster_id" if v.is_string() => *v = json!("<id>"),
                        "recommended_values" => *v = json!("<plugins>"),
                        "last_modified" if v.is_u64() => *v = json!("<time>"),
                        _ => walk(v, versions),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| walk(v, versions)),
            Value::String(s) if versions.contains(&s.as_str()) => *value = json!("<version>"),
            _ => {}
        }
    }
    walk(body, versions);
    // A restart plan lists its tasks in no order (Kafka Connect's comes from a map).
    if path.contains("/restart") {
        if let Some(Value::Array(tasks)) = body.get_mut("tasks") {
            tasks.sort_by_key(|t| t["id"].as_u64());
        }
    }
    // The offsets of a connector are a set: Kafka Connect lists them in its maps' order.
    if let Some(Value::Array(offsets)) = body.get_mut("offsets") {
        offsets.sort_by_key(|o| o["partition"].to_string());
    }
    if path.starts_with("/connector-plugins") && !path.contains("/config") {
        // Sorted by class, so that the lists of both compare by position.
        if let Value::Array(items) = body {
            items.sort_by(|a, b| a["class"].to_string().cmp(&b["class"].to_string()));
        }
    }
}

/// Keep the loggers both systems list (each has its own: Java classes, Rust modules).
fn common_loggers(kc: &mut Value, ferry: &mut Value) {
    let (Value::Object(a), Value::Object(b)) = (&mut *kc, &mut *ferry) else {
        return;
    };
    let both: BTreeSet<String> = a.keys().filter(|k| b.contains_key(*k)).cloned().collect();
    a.retain(|k, _| both.contains(k));
    b.retain(|k, _| both.contains(k));
}

/// Keep the plugins both systems list.
fn common_plugins(kc: &mut Value, ferry: &mut Value) {
    let classes = |v: &Value| -> BTreeSet<String> {
        v.as_array()
            .map(|a| a.iter().map(|p| p["class"].to_string()).collect())
            .unwrap_or_default()
    };
    let both: BTreeSet<String> = classes(kc).intersection(&classes(ferry)).cloned().collect();
    for v in [kc, ferry] {
        if let Value::Array(items) = v {
            items.retain(|p| both.contains(&p["class"].to_string()));
        }
    }
}

struct Systems<'a> {
    connect: &'a KafkaConnect,
    cluster: &'a Cluster,
    versions: Vec<String>,
    allowed: Vec<Allowed>,
    used: Vec<bool>,
    unlisted: Vec<String>,
    asked: usize,
}

impl Systems<'_> {
    fn answers(&self, r: &Request, node: u64) -> (Answer, Answer) {
        let kc = rest::call(&self.connect.url, r.method, &r.path, r.body.body())
            .unwrap_or_else(|| panic!("Kafka Connect did not answer {} {}", r.method, r.path));
        let ferry = self
            .cluster
            .rest(node, r.method, &r.path, r.body.body())
            .unwrap_or_else(|| panic!("node {node} did not answer {} {}", r.method, r.path));
        (kc, ferry)
    }

    /// The differences between the two answers that the allow-list does not cover.
    fn compare(&mut self, r: &Request, kc: &Answer, ferry: &Answer, record: bool) -> Vec<String> {
        let versions: Vec<&str> = self.versions.iter().map(String::as_str).collect();
        let (mut a, mut b) = (kc.body.clone(), ferry.body.clone());
        normalise(&r.path, &mut a, &versions);
        normalise(&r.path, &mut b, &versions);
        if r.path.starts_with("/connector-plugins") && !r.path.contains("/config") {
            common_plugins(&mut a, &mut b);
        }
        if r.path == "/admin/loggers" {
            common_loggers(&mut a, &mut b);
        }
        let mut found = Vec::new();
        if kc.status != ferry.status {
            found.push((
                vec!["#status".to_string()],
                json!(kc.status),
                json!(ferry.status),
            ));
        }
        differences(&a, &b, &mut Vec::new(), &mut found);
        let request = format!("{} {}", r.method, r.path);
        let mut unlisted = Vec::new();
        for (pointer, kc_value, ferry_value) in found {
            match self
                .allowed
                .iter()
                .position(|a| a.covers(&request, &pointer))
            {
                Some(i) => {
                    if record {
                        self.used[i] = true;
                    }
                }
                None => unlisted.push(format!(
                    "{request} /{}: Kafka Connect {kc_value}, Ferry {ferry_value}",
                    pointer.join("/")
                )),
            }
        }
        unlisted
    }

    fn run(&mut self, r: Request) {
        self.asked += 1;
        // Log levels are a node's own (scope=worker): those requests all go to one node.
        let node = if r.path.starts_with("/admin/loggers") {
            1
        } else {
            (self.asked as u64 % 3) + 1
        };
        // State that settles is asked again until both answers agree (or SETTLE passes, and
        // the answers of the last asking count).
        let agreed = if r.settles {
            try_wait_for(SETTLE, || {
                let (kc, ferry) = self.answers(&r, node);
                self.compare(&r, &kc, &ferry, false)
                    .is_empty()
                    .then_some((kc, ferry))
            })
        } else {
            None
        };
        let (kc, ferry) = agreed.unwrap_or_else(|| self.answers(&r, node));
        // The answers that count: their differences mark the entries they use.
        let unlisted = self.compare(&r, &kc, &ferry, true);
        say(format!(
            "{} {} (node {node}): {}",
            r.method,
            r.path,
            if unlisted.is_empty() {
                "the same".to_string()
            } else {
                format!(
                    "{} unlisted difference(s):\n  {}",
                    unlisted.len(),
                    unlisted.join("\n  ")
                )
            }
        ));
        self.unlisted.extend(unlisted);
    }
}

fn sink(file: &str, tasks: &str) -> Value {
    json!({
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": tasks,
        "topics": TOPIC,
        "file": file,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    })
}

fn source(file: &str) -> Value {
    json!({
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "topic": TOPIC,
        "file": file,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    })
}

/// The script: every endpoint, every error case.
fn script(dir: &std::path::Path) -> Vec<Request> {
    let out = dir.join("compat.out").display().to_string();
    let input = dir.join("compat.in").display().to_string();
    let sink_path = "/connectors/compat-sink";
    let p = |tail: &str| format!("{sink_path}{tail}");
    vec![
        // The worker and its plugins.
        req("GET", "/"),
        req("GET", "/health"),
        req("GET", "/connectors"),
        req("GET", "/connector-plugins"),
        req("GET", "/connector-plugins?connectorsOnly=false"),
        req("GET", "/connector-plugins?connectorsOnly=true"),
        req("GET", "/connector-plugins/FileStreamSink/config"),
        req(
            "GET",
            "/connector-plugins/org.apache.kafka.connect.file.FileStreamSourceConnector/config",
        ),
        req("GET", "/connector-plugins/Nope/config"),
        with(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            sink(&out, "2"),
        ),
        with(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            json!({"connector.class": "FileStreamSink", "name": "v", "tasks.max": "1",
                   "topics": TOPIC, "file": out,
                   "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                   "value.converter.schemas.enable": "false",
                   "header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}),
        ),
        with(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            json!({"connector.class": "FileStreamSink", "name": "v", "tasks.max": "0",
                   "topics": TOPIC, "topics.regex": "compat-.*", "file": out}),
        ),
        with(
            "PUT",
            "/connector-plugins/FileStreamSource/config/validate",
            json!({"connector.class": "FileStreamSource", "name": "v"}),
        ),
        with(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            json!({"name": "v"}),
        ),
        with(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            json!({"connector.class": "FileStreamSource", "name": "v"}),
        ),
        with(
            "PUT",
            "/connector-plugins/Nope/config/validate",
            json!({"connector.class": "Nope"}),
        ),
        // Creates that fail.
        raw("POST", "/connectors", "application/json", "{\"name\": "),
        raw("POST", "/connectors", "text/plain", "name=x"),
        with("POST", "/connectors", json!({"config": sink(&out, "1")})),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-bad", "config": {"tasks.max": "1"}}),
        ),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-bad", "config": {"connector.class": "Nope"}}),
        ),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-bad", "config": {
                "connector.class": "FileStreamSink", "tasks.max": "x", "topics": TOPIC}}),
        ),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-bad", "config": {
                "connector.class": "FileStreamSink", "tasks.max": "1", "topics": TOPIC,
                "file": out, "name": "other"}}),
        ),
        with(
            "POST",
            "/connectors",
            json!({"name": "bad\u{7}name", "config": sink(&out, "1")}),
        ),
        // The sink: created, then every read.
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-sink", "config": sink(&out, "2")}),
        ),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-sink", "config": sink(&out, "2")}),
        ),
        settled("/connectors"),
        settled(sink_path),
        settled(&p("/config")),
        settled(&p("/status")),
        settled(&p("/tasks")),
        settled(&p("/tasks-config")),
        settled(&p("/tasks/0/status")),
        req("GET", &p("/tasks/9/status")),
        req("GET", "/connectors/nope"),
        req("GET", "/connectors/nope/status"),
        req("GET", "/connectors/nope/config"),
        req("GET", "/connectors/nope/tasks"),
        settled("/connectors?expand=status"),
        settled("/connectors?expand=info"),
        settled("/connectors?expand=status&expand=info"),
        settled("/connectors?expand=bogus"),
        // Config changes.
        with("PUT", &p("/config"), sink(&out, "1")),
        settled(&p("/status")),
        with("PATCH", &p("/config"), json!({"tasks.max": "2"})),
        with("PATCH", &p("/config"), json!({"name": "other"})),
        settled(&p("/status")),
        with("PUT", &p("/config"), {
            let mut c = sink(&out, "2");
            c["name"] = json!("other");
            c
        }),
        with("PUT", "/connectors/compat-source/config", source(&input)),
        settled("/connectors/compat-source/status"),
        settled("/connectors/compat-source/tasks"),
        // Target states.
        req("PUT", &p("/pause")),
        settled(&p("/status")),
        req("PUT", &p("/resume")),
        settled(&p("/status")),
        // Restarts (KIP-745).
        req("POST", &p("/restart")),
        settled(&p("/status")),
        req("POST", &p("/restart?onlyFailed=true")),
        req("POST", &p("/restart?includeTasks=true&onlyFailed=true")),
        settled(&p("/status")),
        req("POST", &p("/tasks/0/restart")),
        settled(&p("/status")),
        req("POST", &p("/tasks/7/restart")),
        req("POST", "/connectors/nope/restart"),
        req("POST", "/connectors/nope/tasks/0/restart"),
        // Offsets (KIP-875): refused while running, changed while stopped.
        settled(&p("/offsets")),
        with(
            "PATCH",
            &p("/offsets"),
            json!({"offsets": [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                "offset": {"kafka_offset": 5}}]}),
        ),
        req("DELETE", &p("/offsets")),
        req("PUT", &p("/stop")),
        settled(&p("/status")),
        settled(&p("/tasks")),
        with("PATCH", &p("/offsets"), json!({})),
        with("PATCH", &p("/offsets"), json!({"offsets": []})),
        with(
            "PATCH",
            &p("/offsets"),
            json!({"offsets": [{"partition": {"kafka_topic": TOPIC, "kafka_partition": 0},
                                "offset": {"kafka_offset": 5}}]}),
        ),
        settled(&p("/offsets")),
        req("DELETE", &p("/offsets")),
        settled(&p("/offsets")),
        req("PUT", &p("/resume")),
        settled(&p("/status")),
        req("GET", "/connectors/nope/offsets"),
        req("DELETE", "/connectors/nope/offsets"),
        // Active topics (KIP-558): what the sink consumed and the source produced, a reset,
        // and a connector that does not exist.
        settled(&p("/topics")),
        settled("/connectors/compat-source/topics"),
        req("PUT", &p("/topics/reset")),
        settled(&p("/topics")),
        req("GET", "/connectors/nope/topics"),
        req("PUT", "/connectors/nope/topics/reset"),
        // Connectors created in a target state (KIP-980).
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-paused", "config": sink(&out, "1"),
                   "initial_state": "PAUSED"}),
        ),
        settled("/connectors/compat-paused/status"),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-stopped", "config": sink(&out, "1"),
                   "initial_state": "STOPPED"}),
        ),
        settled("/connectors/compat-stopped/status"),
        with(
            "POST",
            "/connectors",
            json!({"name": "compat-odd", "config": sink(&out, "1"),
                   "initial_state": "SLEEPING"}),
        ),
        // Log levels (KIP-495).
        req("GET", "/admin/loggers"),
        req("GET", "/admin/loggers/root"),
        with("PUT", "/admin/loggers/compat.test", json!({})),
        with(
            "PUT",
            "/admin/loggers/compat.test",
            json!({"level": "LOUD"}),
        ),
        with(
            "PUT",
            "/admin/loggers/compat.test",
            json!({"level": "debug"}),
        ),
        req("GET", "/admin/loggers/compat.test"),
        req("GET", "/admin/loggers/compat.never.set"),
        with(
            "PUT",
            "/admin/loggers/compat.test?scope=worker",
            json!({"level": "INFO"}),
        ),
        with(
            "PUT",
            "/admin/loggers/compat.test?scope=cluster",
            json!({"level": "WARN"}),
        ),
        settled("/admin/loggers/compat.test"),
        // Unknown connectors, paths and methods.
        req("PUT", "/connectors/nope/pause"),
        req("PUT", "/connectors/nope/resume"),
        req("PUT", "/connectors/nope/stop"),
        req("DELETE", "/connectors/nope"),
        req("DELETE", "/connectors"),
        req("GET", "/nope"),
        // Deletes.
        req("DELETE", "/connectors/compat-paused"),
        req("DELETE", "/connectors/compat-stopped"),
        req("DELETE", "/connectors/compat-source"),
        req("DELETE", sink_path),
        settled("/connectors"),
        req("GET", sink_path),
        // A deleted connector's active topics.
        settled("/connectors/compat-source/topics"),
    ]
}

#[test]
fn ferry_answers_every_request_of_the_script_as_kafka_connect_does() {
    let kafka = Kafka::start(&[(TOPIC, 2)]);
    let lines: Vec<String> = (0..RECORDS).map(|i| format!("line-{i}")).collect();
    let values: Vec<&[u8]> = lines.iter().map(|l| l.as_bytes()).collect();
    produce_bytes(&kafka, TOPIC, &values);
    let connect = KafkaConnect::start(&kafka.bootstrap, "compat-reference", 1, &[]);
    // Ferry's workers as Kafka Connect's: JSON converters; sink offsets kept in Raft only, so
    // that the two systems' sinks of the same name do not commit to one consumer group.
    let settings = Settings {
        commit_consumer_group: false,
        ..ferry_tests::pipeline::json_workers()
    };
    let (cluster, _leader) = started(3, &kafka, settings);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("compat.in"), "a\nb\nc\n").expect("source input");

    let kc_version = connect.call("GET", "/", None).1["version"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let ferry_version = cluster
        .rest(1, "GET", "/", Body::None)
        .map(|a| a.body["version"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let allowed = allow_list();
    let mut systems = Systems {
        connect: &connect,
        cluster: &cluster,
        versions: vec![kc_version, ferry_version],
        used: vec![false; allowed.len()],
        allowed,
        unlisted: Vec::new(),
        asked: 0,
    };
    let requests = script(dir.path());
    let count = requests.len();
    assert!(count >= 80, "the script has {count} requests");
    for r in requests {
        systems.run(r);
    }
    let stale: Vec<String> = systems
        .allowed
        .iter()
        .zip(&systems.used)
        .filter(|(_, used)| !**used)
        .map(|(a, _)| format!("{} /{} ({})", a.request, a.pointer.join("/"), a.reason))
        .collect();
    say(format!(
        "{count} requests; {} accepted difference(s) in rest_compat.allow",
        systems.used.iter().filter(|u| **u).count()
    ));
    assert!(
        systems.unlisted.is_empty() && stale.is_empty(),
        "differences not in rest_compat.allow:\n{}\nentries of rest_compat.allow no answer needed:\n{}",
        systems.unlisted.join("\n"),
        stale.join("\n")
    );
}
