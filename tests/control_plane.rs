//! The control plane, end to end: real `ferryd` processes on loopback and the real `ferry` CLI.
//! Each test proves one point of the control-plane issue; times are printed, not asserted.

use std::time::{Duration, Instant};

use ferry_tests::{members, say, wait_for, Cluster, Settings};
use serde_json::Value;

const BOOT: Duration = Duration::from_secs(30);
const FAILOVER: Duration = Duration::from_secs(30);

fn started(n: u64, settings: Settings) -> (Cluster, u64) {
    let mut cluster = Cluster::new(n, settings);
    cluster.start_all();
    let leader = cluster.wait_leader(BOOT);
    // The cluster id is set right after the first election.
    for id in 1..=n {
        wait_for("the cluster id on every node", BOOT, || {
            let status = cluster.status(id)?;
            let cid = status.get("cluster_id")?.as_str()?;
            (!cid.is_empty()).then_some(())
        });
    }
    (cluster, leader)
}

fn follower_of(cluster: &Cluster, leader: u64) -> u64 {
    *cluster
        .nodes
        .keys()
        .find(|id| **id != leader && cluster.node(**id).is_running())
        .expect("a follower")
}

fn cluster_id(cluster: &Cluster, id: u64) -> String {
    cluster
        .status(id)
        .and_then(|s| {
            s.get("cluster_id")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

fn config_on(cluster: &Cluster, node: u64, name: &str) -> Value {
    cluster.json(node, &["connectors", "config", name])
}

#[test]
fn a_write_on_a_follower_is_read_at_once_on_every_node() {
    let (cluster, leader) = started(3, Settings::default());
    let follower = follower_of(&cluster, leader);
    say(format!(
        "leader {leader}, writing through follower {follower}"
    ));
    let created = cluster.create_sink(follower, "on-follower");
    assert!(created.ok(), "{created:?}");
    assert!(created.stdout.contains("version 1"), "{created:?}");
    // A read right after the write, on any node, sees it: same config, same version.
    let expected = config_on(&cluster, follower, "on-follower");
    assert_eq!(expected["topics"], "test1");
    assert_eq!(expected["name"], "on-follower");
    for id in 1..=3 {
        assert_eq!(
            config_on(&cluster, id, "on-follower"),
            expected,
            "config on node {id}"
        );
        let list = cluster.json(id, &["connectors", "list"]);
        assert_eq!(
            list,
            serde_json::json!(["on-follower"]),
            "list on node {id}"
        );
    }
    // An update through another follower: version 2 everywhere, immediately.
    let other = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("third node");
    let file = cluster.connector_file(
        "on-follower",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "test2"),
            ("file", "x.txt"),
        ],
    );
    let put = cluster.json(
        other,
        &[
            "connectors",
            "config",
            "on-follower",
            "-f",
            &file.to_string_lossy(),
        ],
    );
    assert_eq!(put["version"], 2);
    for id in 1..=3 {
        assert_eq!(
            config_on(&cluster, id, "on-follower")["topics"],
            "test2",
            "node {id}"
        );
    }
    // Status reads through every node agree as well.
    for id in 1..=3 {
        let status = cluster.json(id, &["connectors", "status", "on-follower"]);
        assert_eq!(status["type"], "sink");
        assert_eq!(status["target_state"], "RUNNING");
    }
}

#[test]
fn kill_9_of_the_leader_elects_a_new_one_and_loses_nothing() {
    let (mut cluster, leader) = started(3, Settings::default());
    let mut acknowledged = Vec::new();
    for i in 0..5 {
        let name = format!("before-{i}");
        let node = (i % 3) + 1;
        assert!(cluster.create_sink(node, &name).ok());
        acknowledged.push(name);
    }
    let killed_at = Instant::now();
    cluster.kill9(leader);
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let new_leader = cluster.wait_leader(FAILOVER);
    let failover = killed_at.elapsed();
    assert_ne!(new_leader, leader);
    say(format!(
        "FAILOVER: leader {leader} killed -9, node {new_leader} leads after {} ms",
        failover.as_millis()
    ));
    // Every management call keeps working through any surviving node.
    for (i, id) in survivors.iter().enumerate() {
        let name = format!("after-{i}");
        let created = cluster.create_sink(*id, &name);
        assert!(created.ok(), "create through node {id}: {created:?}");
        acknowledged.push(name);
        cluster.cli(*id, &["connectors", "pause", "before-0"]);
        cluster.cli(*id, &["connectors", "resume", "before-0"]);
        cluster.cli(*id, &["connectors", "status", "before-1"]);
        cluster.cli(*id, &["plugins"]);
        cluster.cli(*id, &["cluster", "status"]);
    }
    // Nothing acknowledged is lost, as seen from every survivor.
    for id in &survivors {
        let list = cluster.json(*id, &["connectors", "list"]);
        let names: Vec<&str> = list
            .as_array()
            .expect("a list")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for name in &acknowledged {
            assert!(
                names.contains(&name.as_str()),
                "{name} missing on node {id}: {names:?}"
            );
        }
    }
    // The CLI given every node still works while one is down.
    let all = cluster.cli_on(
        &[leader, survivors[0], survivors[1]],
        &["connectors", "list"],
    );
    assert!(all.ok(), "{all:?}");
}

#[test]
fn a_full_restart_in_another_order_keeps_configs_and_offsets() {
    let (mut cluster, _) = started(3, Settings::default());
    let id_before = cluster_id(&cluster, 1);
    assert!(cluster.create_sink(2, "durable").ok());
    cluster.cli(3, &["connectors", "stop", "durable"]);
    let offsets = cluster.dir.path().join("offsets.json");
    std::fs::write(
        &offsets,
        r#"{"offsets":[{"partition":{"kafka_topic":"test1","kafka_partition":0},"offset":{"kafka_offset":42}},
                       {"partition":{"kafka_topic":"test1","kafka_partition":1},"offset":{"kafka_offset":7}}]}"#,
    )
    .expect("write offsets");
    cluster.cli(
        1,
        &[
            "connectors",
            "offsets",
            "durable",
            "--alter",
            &offsets.to_string_lossy(),
        ],
    );
    let before = cluster.json(2, &["connectors", "offsets", "durable"]);
    assert_eq!(
        before["offsets"].as_array().map(Vec::len),
        Some(2),
        "{before}"
    );

    for id in [1, 2, 3] {
        assert_eq!(
            cluster.stop(id),
            Some(0),
            "node {id} exits cleanly on SIGTERM"
        );
    }
    for id in [3, 1, 2] {
        cluster.start(id);
    }
    cluster.wait_leader(BOOT);
    for id in 1..=3 {
        assert_eq!(
            cluster.json(id, &["connectors", "offsets", "durable"]),
            before,
            "offsets on node {id}"
        );
        let config = config_on(&cluster, id, "durable");
        assert_eq!(config["topics"], "test1");
        let status = cluster.json(id, &["connectors", "status", "durable"]);
        assert_eq!(status["target_state"], "STOPPED");
        assert_eq!(
            cluster_id(&cluster, id),
            id_before,
            "cluster id on node {id}"
        );
    }
    // No node initialized a cluster again.
    let inits: usize = (1..=3)
        .map(|id| {
            cluster
                .log_text(id)
                .matches("initializing the cluster")
                .count()
        })
        .sum();
    assert_eq!(inits, 1, "the cluster was initialized exactly once");
}

#[test]
fn a_wiped_node_never_starts_a_second_cluster_and_can_be_re_added() {
    let (mut cluster, _) = started(3, Settings::default());
    let original = cluster_id(&cluster, 2);
    assert!(cluster.create_sink(2, "kept").ok());
    // Node 1 is the one that bootstraps: wiping it is the dangerous case.
    cluster.kill9(1);
    cluster.wipe(1);
    cluster.start(1);
    wait_for("node 1 to notice its peers' cluster", BOOT, || {
        cluster
            .log_text(1)
            .contains("a peer already belongs to a cluster")
            .then_some(())
    });
    // The leader brings it back: same cluster, same data.
    wait_for("node 1 to rejoin with the same cluster id", BOOT, || {
        (cluster_id(&cluster, 1) == original).then_some(())
    });
    assert_eq!(config_on(&cluster, 1, "kept")["topics"], "test1");
    assert_eq!(
        cluster
            .log_text(1)
            .matches("initializing the cluster")
            .count(),
        1,
        "only the first boot initialized"
    );
    // And it can be removed and re-added explicitly; removed, it is retired (from feature
    // level 6), so that its own registration cannot make it a worker again.
    let leader = cluster.wait_leader(FAILOVER);
    let via = if leader == 1 { 2 } else { leader };
    ferry_tests::pipeline::at_feature_level(&cluster, via);
    cluster.cli(via, &["cluster", "remove-node", "--id", "1"]);
    let status = cluster.status(via).expect("status");
    assert!(
        !members(&status).contains_key(&1),
        "node 1 removed: {status}"
    );
    cluster.kill9(1);
    cluster.wipe(1);
    cluster.start(1);
    let via = cluster.wait_leader_among(&[2, 3], FAILOVER);
    let added = cluster.add_node(via, 1);
    let role = members(&added).get(&1).cloned();
    assert_eq!(role.as_deref(), Some("voter"), "{added}");
    wait_for("node 1 to serve the old data again", BOOT, || {
        let out = cluster.cli_on(&[1], &["-o", "json", "connectors", "config", "kept"]);
        (out.ok() && out.json()["topics"] == "test1").then_some(())
    });
    assert_eq!(cluster_id(&cluster, 1), original);
}

#[test]
fn add_node_keeps_quorum_when_an_original_voter_dies_and_remove_node_leaves_a_healthy_cluster() {
    let settings = Settings {
        target_voters: 5,
        ..Settings::default()
    };
    let (mut cluster, leader) = started(3, settings);
    cluster.configure_extra(4);
    cluster.start(4);
    let added = cluster.add_node(leader, 4);
    let voters: Vec<u64> = members(&added)
        .into_iter()
        .filter(|(_, role)| role == "voter")
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        voters,
        vec![1, 2, 3, 4],
        "node 4 promoted to voter (target 5): {added}"
    );
    wait_for(
        "node 4 to register as a worker and serve reads",
        BOOT,
        || {
            cluster
                .cli_on(&[4], &["connectors", "list"])
                .ok()
                .then_some(())
        },
    );
    // Kill an original voter (the leader, the harder case): 3 of 4 voters remain, a quorum.
    cluster.kill9(leader);
    let new_leader = cluster.wait_leader(FAILOVER);
    say(format!(
        "after killing {leader}, node {new_leader} leads the 4-voter cluster"
    ));
    let created = cluster.create_sink(4, "after-kill");
    assert!(created.ok(), "writes are served: {created:?}");
    // Remove the dead node: a healthy three-voter cluster that still serves writes.
    let removed = cluster.json(
        new_leader,
        &["cluster", "remove-node", "--id", &leader.to_string()],
    );
    let left = members(&removed);
    assert!(!left.contains_key(&leader), "{removed}");
    assert_eq!(left.len(), 3, "{removed}");
    let live: Vec<u64> = (1..=4).filter(|id| *id != leader).collect();
    for id in &live {
        let created = cluster.create_sink(*id, &format!("healthy-{id}"));
        assert!(created.ok(), "write through node {id}: {created:?}");
    }
    for id in &live {
        let list = cluster.json(*id, &["connectors", "list"]);
        assert_eq!(list.as_array().map(Vec::len), Some(4), "node {id}: {list}");
    }
}

#[test]
fn a_write_retried_after_its_node_died_is_applied_exactly_once() {
    // The management core logs each write it takes (with its request id) at debug.
    let settings = Settings {
        log_filter: "info,openraft=warn,ferryd::manage=debug".into(),
        ..Settings::default()
    };
    let (mut cluster, leader) = started(3, settings);
    assert!(cluster.create_sink(leader, "cas").ok());
    let follower = follower_of(&cluster, leader);
    let third = (1..=3)
        .find(|id| *id != leader && *id != follower)
        .expect("third node");
    let update = cluster.connector_file(
        "cas",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "t2"),
            ("file", "o.txt"),
        ],
    );
    let update = update.to_string_lossy().to_string();
    // A compare-and-set write: applied twice, its second application would fail (version 2 ≠ 1).
    let args = |rid: &str| -> Vec<String> {
        [
            "--request-id",
            rid,
            "-o",
            "json",
            "connectors",
            "config",
            "cas",
            "-f",
            &update,
            "--expect-version",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    // The follower takes the write and dies mid-request (its answer may never arrive).
    let mut child = std::process::Command::new(ferry_tests::bin("ferry"))
        .arg("--server")
        .arg(&cluster.node(follower).api)
        .args(args("retry-1"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ferry");
    wait_for(
        "the follower taking the write",
        Duration::from_secs(30),
        || {
            cluster
                .log_text(follower)
                .contains("req=retry-1")
                .then_some(())
        },
    );
    cluster.kill9(follower);
    let _ = child.wait();
    // The client retries with the same request id through another node.
    let a: Vec<String> = args("retry-1");
    let retried = cluster.cli_on(&[third], &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        retried.ok(),
        "the retry succeeds whether or not the first attempt applied: {retried:?}"
    );
    assert_eq!(retried.json()["version"], 2);
    assert_eq!(config_on(&cluster, third, "cas")["topics"], "t2");
    // Deterministic case: the write surely applied, then its node died; the retry answers the same.
    let update3 = cluster.connector_file(
        "cas",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "t3"),
            ("file", "o.txt"),
        ],
    );
    let update3 = update3.to_string_lossy().to_string();
    let b: Vec<&str> = vec![
        "--request-id",
        "retry-2",
        "-o",
        "json",
        "connectors",
        "config",
        "cas",
        "-f",
        &update3,
        "--expect-version",
        "2",
    ];
    let first = cluster.cli_on(&[leader], &b);
    assert!(first.ok(), "{first:?}");
    assert_eq!(first.json()["version"], 3);
    cluster.kill9(leader);
    cluster.start(follower);
    cluster.wait_leader(FAILOVER);
    let again = cluster.cli_on(&[third], &b);
    assert!(
        again.ok(),
        "a retry of an applied write gets its first answer, not a conflict: {again:?}"
    );
    assert_eq!(again.json()["version"], 3);
    assert_eq!(config_on(&cluster, third, "cas")["topics"], "t3");
    // A new request id is a new write: the same CAS now conflicts.
    let b2: Vec<&str> = vec![
        "--request-id",
        "retry-3",
        "connectors",
        "config",
        "cas",
        "-f",
        &update3,
        "--expect-version",
        "2",
    ];
    let conflict = cluster.cli_on(&[third], &b2);
    assert_eq!(conflict.code, Some(6), "{conflict:?}");
}

#[test]
fn a_node_that_was_down_catches_up_from_a_snapshot() {
    let settings = Settings {
        snapshot_logs: 20,
        logs_to_keep: 0,
        ..Settings::default()
    };
    let (mut cluster, leader) = started(3, settings);
    let lagging = follower_of(&cluster, leader);
    let lag_index = cluster
        .status(lagging)
        .and_then(|s| s["last_log_index"].as_u64())
        .unwrap_or(0);
    cluster.kill9(lagging);
    let writer = (1..=3).find(|id| *id != lagging).expect("a live node");
    for i in 0..60 {
        assert!(cluster.create_sink(writer, &format!("snap-{i}")).ok());
    }
    let leader = cluster.wait_leader(FAILOVER);
    let status = cluster.status(leader).expect("leader status");
    let purged = status["purged_index"].as_u64().unwrap_or(0);
    say(format!(
        "leader purged its log up to {purged}; node {lagging} stopped at {lag_index}"
    ));
    assert!(
        purged > lag_index,
        "the log was purged past what the down node had: {status}"
    );
    let target = status["applied_index"].as_u64().expect("applied");
    cluster.start(lagging);
    cluster.wait_applied(lagging, target, BOOT);
    let caught_up = cluster.status(lagging).expect("status");
    assert!(
        caught_up["snapshot_index"]
            .as_u64()
            .is_some_and(|s| s > lag_index),
        "installed a snapshot: {caught_up}"
    );
    let list = cluster.json(lagging, &["connectors", "list"]);
    assert_eq!(list.as_array().map(Vec::len), Some(60));
    // A node restarting from its own snapshot plus the log after it keeps everything.
    let own = cluster
        .status(leader)
        .and_then(|s| s["snapshot_index"].as_u64())
        .unwrap_or(0);
    assert!(own > 0, "the leader has a snapshot of its own");
    assert_eq!(cluster.stop(leader), Some(0));
    cluster.start(leader);
    cluster.wait_leader(FAILOVER);
    let list = cluster.json(leader, &["connectors", "list"]);
    assert_eq!(
        list.as_array().map(Vec::len),
        Some(60),
        "after restarting from a snapshot"
    );
}

fn start_error(text: &str) -> String {
    let (code, stderr) =
        Cluster::run_ferryd_to_exit(text, Duration::from_secs(10)).expect("ferryd exits");
    assert_ne!(code, Some(0), "ferryd must refuse: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

#[test]
fn bad_input_gets_clear_errors_and_nothing_is_stored() {
    let good =
        "node_id = 1\ndata_dir = \"d\"\napi_addr = \"127.0.0.1:1\"\nraft_addr = \"127.0.0.1:2\"\n\
                [[peers]]\nid = 1\napi_addr = \"127.0.0.1:1\"\nraft_addr = \"127.0.0.1:2\"\n\
                [[peers]]\nid = 2\napi_addr = \"127.0.0.1:3\"\nraft_addr = \"127.0.0.1:4\"\n";
    let cases = [
        (
            "malformed",
            good.replace("node_id = 1", "node_id = ="),
            "not a valid cluster.toml",
        ),
        (
            "unknown key",
            format!("colour = \"red\"\n{good}"),
            "unknown field `colour`",
        ),
        (
            "duplicate ids",
            good.replace("id = 2", "id = 1"),
            "node id 1 appears more than once",
        ),
        (
            "self not in peers",
            good.replace("node_id = 1", "node_id = 7"),
            "peers does not contain this node (node_id = 7)",
        ),
    ];
    for (what, text, want) in cases {
        let stderr = start_error(&text);
        assert!(stderr.contains(want), "{what}: {stderr}");
    }

    let (cluster, _) = started(3, Settings::default());
    let unknown = cluster.connector_file(
        "bad",
        &[("connector.class", "com.example.Nope"), ("topics", "t")],
    );
    let out = cluster.cli_on(
        &[2],
        &["connectors", "create", "-f", &unknown.to_string_lossy()],
    );
    assert_eq!(out.code, Some(4), "{out:?}");
    assert!(
        out.stderr.contains("connector.class") && out.stderr.contains("unknown connector class"),
        "{out:?}"
    );
    let missing = cluster.connector_file(
        "bad",
        &[("connector.class", "FileStreamSource"), ("file", "in.txt")],
    );
    let out = cluster.cli_on(
        &[3],
        &["connectors", "create", "-f", &missing.to_string_lossy()],
    );
    assert_eq!(out.code, Some(4), "{out:?}");
    assert!(
        out.stderr.contains(
            "topic: Missing required configuration \"topic\" which has no default value."
        ),
        "{out:?}"
    );
    let validate = cluster.cli_on(
        &[1],
        &[
            "-o",
            "json",
            "connectors",
            "validate",
            "-f",
            &missing.to_string_lossy(),
        ],
    );
    assert_eq!(validate.code, Some(4));
    let fields = validate.json()["configs"].clone();
    let topic = fields
        .as_array()
        .expect("configs")
        .iter()
        .find(|f| f["name"] == "topic")
        .expect("topic field")
        .clone();
    assert_eq!(
        topic["errors"][0],
        "Missing required configuration \"topic\" which has no default value."
    );
    for id in 1..=3 {
        assert_eq!(
            cluster.json(id, &["connectors", "list"]),
            serde_json::json!([]),
            "nothing stored (node {id})"
        );
    }
    let not_json = cluster.dir.path().join("broken.json");
    std::fs::write(&not_json, "{ nope").expect("write");
    let out = cluster.cli_on(
        &[1],
        &["connectors", "create", "-f", &not_json.to_string_lossy()],
    );
    assert_eq!(out.code, Some(4));
    assert!(
        out.stderr.contains("broken.json is not valid JSON"),
        "{out:?}"
    );
    let out = cluster.cli_on(&[1], &["connectors", "status", "nope"]);
    assert_eq!(out.code, Some(3), "{out:?}");

    // The CLI against a node that is down: a clear message and a non-zero exit, no panic.
    let port = ferry_tests::free_port();
    let down = std::process::Command::new(ferry_tests::bin("ferry"))
        .args([
            "--server",
            &format!("127.0.0.1:{port}"),
            "connectors",
            "list",
        ])
        .output()
        .expect("run ferry");
    let stderr = String::from_utf8_lossy(&down.stderr);
    assert_eq!(down.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.contains("no Ferry node answered") && stderr.contains(&port.to_string()),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"));
}

#[test]
fn offsets_change_only_while_stopped_and_restart_fences() {
    let (cluster, _) = started(3, Settings::default());
    assert!(cluster.create_sink(1, "kip875").ok());
    let offsets = cluster.dir.path().join("o.json");
    std::fs::write(
        &offsets,
        r#"{"offsets":[{"partition":{"kafka_topic":"test1","kafka_partition":3},"offset":{"kafka_offset":9}}]}"#,
    )
    .expect("write");
    let path = offsets.to_string_lossy().to_string();
    let refused = cluster.cli_on(&[2], &["connectors", "offsets", "kip875", "--alter", &path]);
    assert_eq!(refused.code, Some(6), "{refused:?}");
    assert!(refused.stderr.contains("STOPPED"), "{refused:?}");
    cluster.cli(2, &["connectors", "stop", "kip875"]);
    let altered = cluster.json(3, &["connectors", "offsets", "kip875", "--alter", &path]);
    assert_eq!(
        altered["offsets"][0]["offset"]["kafka_offset"], 9,
        "{altered}"
    );
    let reset = cluster.json(1, &["connectors", "offsets", "kip875", "--reset"]);
    assert_eq!(reset["offsets"], serde_json::json!([]));
    cluster.cli(1, &["connectors", "resume", "kip875"]);
    let restarted = cluster.json(2, &["connectors", "restart", "kip875"]);
    let state = restarted["connector"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        ["RESTARTING", "RUNNING"].contains(&state.as_str()),
        "{restarted}"
    );
    // The connector instance turns tasks.max = 2 into two task configs.
    wait_for("two task configs", BOOT, || {
        let tasks = cluster.json(1, &["connectors", "tasks", "kip875"]);
        (tasks.as_array().map(Vec::len) == Some(2)).then_some(())
    });
    let no_task = cluster.cli_on(&[2], &["connectors", "restart-task", "kip875", "5"]);
    assert_eq!(no_task.code, Some(3), "{no_task:?}");
    cluster.cli(2, &["connectors", "restart-task", "kip875", "0"]);
    cluster.cli(
        3,
        &[
            "connectors",
            "restart",
            "kip875",
            "--include-tasks",
            "--only-failed",
        ],
    );
    cluster.cli(3, &["connectors", "delete", "kip875"]);
    let gone = cluster.cli_on(&[1], &["connectors", "config", "kip875"]);
    assert_eq!(gone.code, Some(3));
}

#[test]
fn the_status_watch_streams_changes_from_any_node() {
    use std::io::{BufRead, BufReader};
    let (mut cluster, leader) = started(3, Settings::default());
    let follower = follower_of(&cluster, leader);
    let mut watch = std::process::Command::new(ferry_tests::bin("ferry"))
        .args([
            "--server",
            &cluster.node(follower).api,
            "-o",
            "json",
            "connectors",
            "watch",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ferry watch");
    let stdout = watch.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Writes through other nodes show up on the follower's stream, in order.
    assert!(cluster.create_sink(leader, "watched").ok());
    cluster.cli(leader, &["connectors", "pause", "watched"]);
    cluster.cli(leader, &["connectors", "delete", "watched"]);
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let event: Value = serde_json::from_str(&line).expect("a JSON event per line");
        let what = if event["deleted"] == true {
            "deleted".to_string()
        } else {
            event["status"]["target_state"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        if seen.last() != Some(&what) {
            seen.push(what);
        }
        if seen.last().map(String::as_str) == Some("deleted") {
            break;
        }
    }
    assert_eq!(seen, vec!["RUNNING", "PAUSED", "deleted"]);
    // A client holding a stream open does not keep its node from stopping: SIGTERM ends the
    // node (the harness gives up after 20 s), and the stream with it.
    let stopping = Instant::now();
    let code = cluster.stop(follower);
    say(format!(
        "WATCH: node {follower} stopped {} ms after SIGTERM with a watch stream open",
        stopping.elapsed().as_millis()
    ));
    assert_eq!(code, Some(0), "a clean exit");
    let _ = watch.kill();
    let _ = watch.wait();
}

#[test]
fn static_peers_bootstrap_one_cluster_in_reverse_boot_order_and_a_learner_beyond_the_target() {
    let mut cluster = Cluster::new(3, Settings::default());
    // The initializer (node 1) boots last, well after the others.
    cluster.start(3);
    wait_for("node 3 to serve", BOOT, || cluster.status(3));
    cluster.start(2);
    wait_for("node 2 to serve", BOOT, || cluster.status(2));
    let none = cluster.status(3).expect("status");
    assert!(
        none["leader_id"].is_null(),
        "no cluster before the initializer boots: {none}"
    );
    cluster.start(1);
    let leader = cluster.wait_leader(BOOT);
    let id = wait_for("a cluster id", BOOT, || {
        let cid = cluster_id(&cluster, leader);
        (!cid.is_empty()).then_some(cid)
    });
    for node in 1..=3 {
        wait_for("the same cluster id everywhere", BOOT, || {
            (cluster_id(&cluster, node) == id).then_some(())
        });
    }
    let inits: usize = (1..=3)
        .map(|n| {
            cluster
                .log_text(n)
                .matches("initializing the cluster")
                .count()
        })
        .sum();
    assert_eq!(inits, 1);
    let plugins = cluster.json(2, &["plugins"]);
    let classes: Vec<&str> = plugins
        .as_array()
        .expect("plugins")
        .iter()
        .filter_map(|p| p["class"].as_str())
        .collect();
    assert!(
        classes.contains(&"org.apache.kafka.connect.file.FileStreamSinkConnector"),
        "{plugins}"
    );

    // With 3 voters and target_voters = 3, a fourth node stays a learner and still serves.
    cluster.configure_extra(4);
    cluster.start(4);
    let added = cluster.add_node(2, 4);
    let role = members(&added).get(&4).cloned();
    assert_eq!(role.as_deref(), Some("learner"), "{added}");
    assert!(
        cluster.create_sink(4, "via-learner").ok(),
        "a learner forwards writes"
    );
    assert_eq!(
        config_on(&cluster, 4, "via-learner")["topics"],
        "test1",
        "and reads linearizably"
    );
    assert_eq!(cluster_id(&cluster, 4), id);
}

#[test]
fn secrets_are_never_returned_or_logged_even_at_trace_level() {
    const SECRET: &str = "TopSecret42";
    let settings = Settings {
        log_filter: "debug,openraft=trace,h2=info,hyper=info,tower=info,sled=info".into(),
        ..Settings::default()
    };
    let (mut cluster, leader) = started(3, settings);
    let url = format!("sftp://ferry:{SECRET}@files.example/out.txt");
    let file = cluster.connector_file(
        "secretive",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "t"),
            ("file", &url),
        ],
    );
    let file = file.to_string_lossy().to_string();
    let follower = follower_of(&cluster, leader);
    let mut shown = Vec::new();
    shown.push(
        cluster
            .cli(follower, &["connectors", "create", "-f", &file])
            .stdout,
    );
    shown.push(
        cluster
            .cli(leader, &["connectors", "config", "secretive"])
            .stdout,
    );
    let config = config_on(&cluster, follower, "secretive");
    assert_eq!(
        config["file"],
        "sftp://ferry:[hidden]@files.example/out.txt"
    );
    shown.push(config.to_string());
    shown.push(
        cluster
            .cli_on(
                &[leader],
                &["-o", "json", "connectors", "validate", "-f", &file],
            )
            .stdout,
    );
    // A rejected property holding a secret is named, never echoed.
    let bad = cluster.connector_file(
        "bad",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "t"),
            ("file", "x"),
            ("connection.password", SECRET),
        ],
    );
    let refused = cluster.cli_on(
        &[leader],
        &["connectors", "create", "-f", &bad.to_string_lossy()],
    );
    assert_eq!(refused.code, Some(4));
    assert!(
        refused.stderr.contains("connection.password"),
        "{refused:?}"
    );
    shown.push(refused.stderr);
    shown.push(
        cluster
            .cli_on(
                &[leader],
                &[
                    "-o",
                    "json",
                    "connectors",
                    "validate",
                    "-f",
                    &bad.to_string_lossy(),
                ],
            )
            .stdout,
    );
    // Replay through a restart, then look everywhere.
    assert_eq!(cluster.stop(follower), Some(0));
    cluster.start(follower);
    cluster.wait_leader(FAILOVER);
    assert_eq!(config_on(&cluster, follower, "secretive")["topics"], "t");
    for text in &shown {
        assert!(!text.contains(SECRET), "a secret was shown: {text}");
    }
    for id in 1..=3 {
        let log = cluster.log_text(id);
        assert!(log.contains("DEBUG"), "node {id} logged at debug level");
        assert!(!log.contains(SECRET), "node {id} logged a secret");
    }
}

#[test]
fn an_isolated_leader_is_replaced_and_catches_up_after_the_partition_heals() {
    let settings = Settings {
        proxied: true,
        ..Settings::default()
    };
    let (cluster, leader) = started(3, settings);
    assert!(cluster.create_sink(leader, "before").ok());
    let majority: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let cut_at = Instant::now();
    cluster.isolate(leader);
    let new_leader = cluster.wait_leader_among(&majority, FAILOVER);
    say(format!(
        "PARTITION: leader {leader} isolated; node {new_leader} leads the majority after {} ms",
        cut_at.elapsed().as_millis()
    ));
    assert_ne!(new_leader, leader);
    let during = cluster.create_sink(majority[0], "during");
    assert!(during.ok(), "the majority serves writes: {during:?}");
    cluster.heal();
    wait_for(
        "the old leader to see the majority's write",
        FAILOVER,
        || {
            let out = cluster.cli_on(&[leader], &["-o", "json", "connectors", "list"]);
            (out.ok()
                && out
                    .json()
                    .as_array()
                    .is_some_and(|l| l.iter().any(|n| n == "during")))
            .then_some(())
        },
    );
    let id = cluster_id(&cluster, leader);
    assert_eq!(id, cluster_id(&cluster, new_leader));
}

#[test]
fn the_cli_follows_the_leader_when_its_node_cannot_reach_it() {
    let settings = Settings {
        proxied: true,
        request_timeout_ms: 3000,
        ..Settings::default()
    };
    let (cluster, leader) = started(3, settings);
    let follower = follower_of(&cluster, leader);
    // The follower still hears the leader, but cannot send to it: it cannot forward writes.
    cluster.cut(follower, leader);
    let status = cluster.status(follower).expect("status");
    assert_eq!(status["leader_id"].as_u64(), Some(leader), "{status}");
    let created = cluster.create_sink(follower, "followed");
    assert!(
        created.ok(),
        "the CLI tried the leader the node named: {created:?}"
    );
    assert_eq!(config_on(&cluster, leader, "followed")["topics"], "test1");
    cluster.heal();
}
