//! What a client sends cannot destabilise the cluster: every `[limits]` refusal names the limit
//! and the value, a config with any number of errors gets every error back, names are Kafka
//! Connect's (with `/`, `&`, `%` and Unicode), and the CLI ends quietly on a closed pipe.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Duration;

use ferry_tests::pipeline::started;
use ferry_tests::{
    bin, lines_in_work_dirs, produce_bytes, say, wait_for, Cluster, Kafka, Settings,
};

const FLOW: Duration = Duration::from_secs(60);

/// Limits small enough to reach in a test; the config limit sits just under the entry limit,
/// so that a config can pass its own check and still make too large an entry.
const LIMITS: [(&str, u64); 4] = [
    ("max_tasks_per_connector", 8),
    ("max_name_length", 40),
    ("max_config_bytes", 300_000),
    ("max_entry_bytes", 300_100),
];

fn sink(file: &str) -> Vec<(String, String)> {
    [
        ("connector.class", "FileStreamSink"),
        ("topics", "lines"),
        ("file", file),
        ("value.converter", "StringConverter"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// `ferry connectors create` of `config` named `name`; the CLI's output.
fn try_create(
    cluster: &Cluster,
    name: &str,
    config: &[(String, String)],
    json: bool,
) -> ferry_tests::CliOutput {
    let pairs: Vec<(&str, &str)> = config
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let file = cluster.connector_file(name, &pairs);
    let mut args = Vec::new();
    if json {
        args.extend(["-o", "json"]);
    }
    args.extend(["connectors", "create", "-f"]);
    let path = file.to_string_lossy().to_string();
    args.push(&path);
    cluster.cli_on(&[1], &args)
}

fn refused(out: &ferry_tests::CliOutput, want: &str) {
    assert_eq!(out.code, Some(4), "{out:?}");
    assert!(out.stderr.contains(want), "wanted {want:?} in {out:?}");
}

#[test]
fn limits_are_refused_naming_the_limit_and_errors_of_any_size_reach_the_user() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let settings = Settings {
        limits: LIMITS.to_vec(),
        ..Settings::default()
    };
    let (cluster, _) = started(1, &kafka, settings);

    // 10,000 unknown properties: every error comes back in the response (not in the gRPC
    // status, whose header it would overflow), the CLI lists the first 50 and counts the rest.
    let mut config = sink("never.out");
    config.extend((0..10_000).map(|i| (format!("bogus.{i:05}"), "x".to_string())));
    let out = try_create(&cluster, "many", &config, false);
    refused(&out, "invalid connector config for many: 10000 error(s)");
    refused(&out, "bogus.00000: unknown property \"bogus.00000\"");
    refused(&out, "bogus.00049: unknown property");
    refused(
        &out,
        "… and 9950 more (`ferry connectors validate -f FILE` lists every one)",
    );
    assert!(!out.stderr.contains("bogus.00050"), "only 50 listed");
    let out = try_create(&cluster, "many", &config, true);
    assert_eq!(out.code, Some(4), "{out:?}");
    let validation = out.json();
    assert_eq!(validation["error_count"], 10_000);
    let with_errors = validation["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .filter(|f| f["errors"].as_array().is_some_and(|e| !e.is_empty()))
        .count();
    assert_eq!(with_errors, 10_000, "every property's errors, as JSON");

    // Each limit, with its value and its name.
    let mut many_tasks = sink("t.out");
    many_tasks.push(("tasks.max".into(), "9".into()));
    refused(
        &try_create(&cluster, "tasks", &many_tasks, false),
        "tasks.max: tasks.max is 9, over the limit of 8 tasks per connector ([limits] \
         max_tasks_per_connector)",
    );
    refused(
        &try_create(&cluster, &"n".repeat(41), &sink("n.out"), false),
        "name: the name is 41 characters long, over the limit of 40 ([limits] max_name_length)",
    );
    refused(
        &try_create(&cluster, "bad\u{7}name", &sink("c.out"), false),
        "name: a connector name may not contain control characters (U+0007 at character 4)",
    );
    // A config of `total` bytes (names and values, its `name` included): a long file name.
    let padding = |total: usize| {
        let base: usize = sink("")
            .iter()
            .map(|(k, v)| k.len() + v.len())
            .sum::<usize>()
            + "name".len()
            + "big".len();
        sink(&"f".repeat(total - base))
    };
    refused(
        &try_create(&cluster, "big", &padding(300_001), false),
        "the config is 300001 bytes (names and values), over the limit of 300000 ([limits] \
         max_config_bytes)",
    );
    refused(
        &try_create(&cluster, "big", &padding(299_990), false),
        "([limits] max_entry_bytes)",
    );
    assert_eq!(
        cluster.json(1, &["connectors", "list"]),
        serde_json::json!([]),
        "nothing refused was stored"
    );
    // The validate command reports the same limits as property errors.
    let out = cluster.cli_on(
        &[1],
        &[
            "-o",
            "json",
            "connectors",
            "validate",
            "-f",
            &cluster
                .connector_file(&"v".repeat(41), &[("connector.class", "FileStreamSink")])
                .to_string_lossy(),
        ],
    );
    assert_eq!(out.code, Some(4), "{out:?}");
    let name = out.json()["configs"]
        .as_array()
        .expect("configs")
        .iter()
        .find(|f| f["name"] == "name")
        .cloned()
        .expect("the name's result");
    assert!(
        name["errors"][0]
            .as_str()
            .is_some_and(|e| e.contains("[limits] max_name_length")),
        "{name}"
    );
    say("LIMITS: 10,000 errors returned; tasks, name, config and entry limits refused by name");
}

#[test]
fn names_with_slashes_ampersands_percents_and_unicode_work_end_to_end() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let (cluster, _) = started(1, &kafka, Settings::default());
    let name = "team/orders & more 100% 日本語";
    let out = try_create(&cluster, name, &sink("named.out"), false);
    assert!(out.ok(), "{out:?}");
    assert_eq!(
        cluster.json(1, &["connectors", "list"]),
        serde_json::json!([name])
    );
    produce_bytes(&kafka, "lines", &[b"one", b"two", b"three"]);
    let expected: BTreeSet<String> = ["one", "two", "three"].map(String::from).into();
    wait_for("the named sink's lines", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "named.out")
            .into_iter()
            .collect();
        (got == expected).then_some(())
    });
    let status = cluster.json(1, &["connectors", "status", name]);
    assert_eq!(status["name"], name, "{status}");
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    let config = cluster.json(1, &["connectors", "config", name]);
    assert_eq!(config["name"], name, "{config}");
    cluster.cli(1, &["connectors", "pause", name]);
    wait_for("the named connector PAUSED", FLOW, || {
        let status = cluster.json(1, &["connectors", "status", name]);
        (status["connector"]["state"] == "PAUSED").then_some(())
    });
    cluster.cli(1, &["connectors", "delete", name]);
    assert_eq!(
        cluster.json(1, &["connectors", "list"]),
        serde_json::json!([])
    );

    // `ferry … | head -1`: the reader goes away before the CLI writes; it ends quietly.
    for args in [
        &["cluster", "status"][..],
        &["-o", "json", "cluster", "status"][..],
    ] {
        let mut child = Command::new(bin("ferry"))
            .args(["--server", &cluster.node(1).api])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run ferry");
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait for ferry");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?} said something: {stderr}");
    }
    say("NAMES: a name with '/', '&', '%' and Unicode created, consumed, paused, deleted; the CLI ends quietly on a closed pipe");
}
