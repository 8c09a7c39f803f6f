//! Raft safety when disks lie, and crash-only nodes: a wiped or restored node never takes the
//! leader down and comes back as a caught-up voter under the leader's care; a corrupt cluster
//! id, a broken disk or a fatal Raft error ends the process; a panicking task fails alone.

use std::fs;
use std::time::Duration;

use ferry_tests::jepsen::workload::FreezeSampler;
use ferry_tests::{members, say, wait_for, Cluster, Settings, Signal, WATCHDOG_EXIT};
use serde_json::Value;

const BOOT: Duration = Duration::from_secs(30);
const HEAL: Duration = Duration::from_secs(60);

fn started(settings: Settings) -> (Cluster, u64) {
    let mut cluster = Cluster::new(3, settings);
    cluster.start_all();
    let leader = cluster.wait_leader(BOOT);
    for id in 1..=3 {
        wait_for(
            "every node registered and given the cluster id",
            BOOT,
            || {
                let status = cluster.status(id)?;
                (!status["cluster_id"].as_str()?.is_empty()).then_some(())
            },
        );
    }
    (cluster, leader)
}

/// Node `id` as the leader's status shows it.
fn member(status: &Value, id: u64) -> Option<Value> {
    status["members"]
        .as_array()?
        .iter()
        .find(|m| m["id"] == id)
        .cloned()
}

/// Wait until `id` is a voter under an incarnation other than `old`, recorded by the leader,
/// and the leader's matched index for it has reached its last log index; the leader.
fn wait_whole_again(cluster: &Cluster, id: u64, old: &str) -> u64 {
    let others: Vec<u64> = cluster.nodes.keys().copied().filter(|n| *n != id).collect();
    wait_for(
        "the returned node to be a caught-up voter again",
        HEAL,
        || {
            let leader = cluster.wait_leader_among(&others, BOOT);
            let status = cluster.status(leader)?;
            let m = member(&status, id)?;
            let own = cluster.status(id)?;
            let last = own["last_log_index"].as_u64()?;
            let whole = m["role"] == "voter"
                && m["incarnation"].as_str()? != old
                && m["incarnation"] == own["incarnation"]
                && m["matched_index"].as_u64()? >= last
                && own["not_voting"] == "";
            whole.then_some(leader)
        },
    )
}

fn no_panics(cluster: &Cluster) {
    let panics = cluster.panics();
    assert!(panics.is_empty(), "{panics:#?}");
}

#[test]
fn a_wiped_voter_or_leader_comes_back_as_a_caught_up_voter_under_a_new_incarnation() {
    let (mut cluster, leader) = started(Settings::default());
    for n in 0..5 {
        assert!(cluster.create_sink(leader, &format!("before-{n}")).ok());
    }
    // A follower first: before the fix, its leader panicked on the follower's lost log.
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    for victim in [follower, leader] {
        let running: Vec<u64> = (1..=3).collect();
        let lead = cluster.wait_leader_among(&running, BOOT);
        let old = member(&cluster.status(lead).expect("status"), victim).expect("member")
            ["incarnation"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(!old.is_empty(), "the membership records incarnations");
        cluster.kill9(victim);
        cluster.wipe(victim);
        cluster.start(victim);
        let lead = wait_whole_again(&cluster, victim, &old);
        say(format!(
            "node {victim} is a caught-up voter again under leader {lead}"
        ));
        let log = cluster.log_text(lead);
        assert!(
            log.contains("demoting it to learner") && log.contains("promoting it to voter"),
            "the leader demoted node {victim} and promoted it again"
        );
        assert!(
            cluster.log_text(victim).contains("not voting"),
            "the wiped node said it would not vote"
        );
        // It serves the data it lost again.
        let out = cluster.cli_on(
            &[victim],
            &["-o", "json", "connectors", "config", "before-4"],
        );
        assert!(out.ok() && out.json()["topics"] == "test1", "{out:?}");
    }
    no_panics(&cluster);
}

#[test]
fn a_node_restored_from_an_older_copy_is_caught_demoted_and_promoted_once_caught_up() {
    let (mut cluster, leader) = started(Settings::default());
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    cluster.stop(victim);
    let backup = cluster.dir.path().join("backup");
    cluster.copy_data_dir(victim, &backup);
    let copied_last = {
        cluster.start(victim);
        wait_for("the victim to serve", BOOT, || cluster.status(victim))["last_log_index"]
            .as_u64()
            .unwrap_or_default()
    };
    for n in 0..10 {
        assert!(cluster.create_sink(leader, &format!("after-{n}")).ok());
    }
    // The leader has seen the victim acknowledge the new entries (at one of its heartbeats).
    let acknowledged = wait_for(
        "the leader to see the new entries acknowledged",
        BOOT,
        || {
            let m = member(&cluster.status(leader)?, victim)?;
            m["acknowledged_index"]
                .as_u64()
                .filter(|a| *a > copied_last + 5)
        },
    );
    say(format!(
        "node {victim}: copy at {copied_last}, acknowledged {acknowledged}; restoring the copy"
    ));
    cluster.stop(victim);
    cluster.restore_data_dir(victim, &backup);
    cluster.start(victim);
    wait_for("the leader to catch the rollback", HEAL, || {
        cluster
            .log_text(leader)
            .contains("a node came back with fewer entries than it acknowledged")
            .then_some(())
    });
    let old = member(&cluster.status(leader).expect("status"), victim).expect("member")
        ["incarnation"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The leader demotes it, then promotes it once it has caught up.
    wait_for("the leader to demote and promote it again", HEAL, || {
        let log = cluster.log_text(leader);
        let demoted = log.find("demoting it to learner")?;
        log[demoted..].contains("promoted to voter").then_some(())
    });
    // The same incarnation (a copy of the same data): whole again once promoted.
    wait_for(
        "the restored node to be a caught-up voter again",
        HEAL,
        || {
            let status = cluster.status(leader)?;
            let m = member(&status, victim)?;
            let own = cluster.status(victim)?;
            (m["role"] == "voter"
                && m["incarnation"] == old.as_str()
                && m["matched_index"].as_u64()? >= own["last_log_index"].as_u64()?
                && own["last_log_index"].as_u64()? >= acknowledged)
                .then_some(())
        },
    );
    no_panics(&cluster);
}

#[test]
fn a_corrupt_or_foreign_cluster_id_stops_the_node_at_start() {
    let (mut cluster, leader) = started(Settings::default());
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    let file = cluster.node(victim).data_dir.join("cluster_id");
    let cases = [
        (
            "garbage",
            "not-a-cluster-id\u{0}\u{7f}",
            "does not hold a cluster id",
        ),
        (
            "another cluster's",
            "0b7a4c3e-1111-4222-8333-944455556666\n",
            "the data directory was mixed up",
        ),
    ];
    for (what, content, message) in cases {
        let good = wait_for("the node to persist its cluster id", BOOT, || {
            fs::read_to_string(&file)
                .ok()
                .filter(|id| !id.trim().is_empty())
        });
        cluster.stop(victim);
        fs::write(&file, content).expect("write");
        cluster.start(victim);
        let code = cluster.wait_exit(victim, BOOT);
        say(format!("{what} cluster id: exit code {code:?}"));
        // 1: refused at start; 70: found when its Raft data was read (both non-zero).
        assert!(matches!(code, Some(1 | 70)), "{what}: exit code {code:?}");
        let log = cluster.log_text(victim);
        assert!(log.contains(message), "{what}: the log says why");
        fs::write(&file, good).expect("restore");
        cluster.start(victim);
        wait_for("the node to serve again", BOOT, || cluster.status(victim));
    }
}

/// A node whose async runtime is blocked for good (a test-only switch) and that node's
/// watchdog, with `[worker]` settings of its own; the switch's file, not there yet.
fn freezable(worker: &[(&str, &str)]) -> (Cluster, std::path::PathBuf) {
    let mut worker: Vec<(String, String)> = worker
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Relative to the node's working directory.
    worker.push(("test_freeze_file".into(), "\"freeze\"".into()));
    let mut cluster = Cluster::new(
        1,
        Settings {
            worker,
            ..Settings::default()
        },
    );
    cluster.start_all();
    cluster.wait_leader(BOOT);
    let file = cluster.node(1).work_dir.join("freeze");
    (cluster, file)
}

/// The node's log shows its watchdog's `verdict` and every thread's stack, the runtime's
/// workers blocked where the test switch blocked them.
fn stacks_in_log(cluster: &Cluster, verdict: &str) {
    let log = cluster.log_text(1);
    assert!(
        log.contains(verdict),
        "the log names the verdict {verdict:?}"
    );
    let stacks = log
        .split_once("every thread's stack")
        .map(|(_, stacks)| stacks)
        .expect("the log holds the stacks");
    let blocked = stacks
        .lines()
        .filter(|l| l.contains("watchdog::freeze_on"))
        .count();
    say(format!(
        "watchdog: {verdict}; {} lines of stacks, {blocked} frames in the blocked workers",
        stacks.lines().count()
    ));
    assert!(
        stacks.contains("tokio-rt-worker"),
        "the runtime's threads are named"
    );
    assert!(
        blocked >= 2,
        "both runtime workers' stacks show where they block"
    );
}

/// A frozen node hides from nothing: its watchdog sees the runtime run nothing, writes every
/// thread's stack to the log and exits with its own code.
#[test]
fn a_frozen_node_writes_its_stacks_and_exits() {
    let (mut cluster, freeze) = freezable(&[("freeze_timeout_ms", "3000")]);
    fs::write(&freeze, "").expect("freeze the node");
    let code = cluster.wait_exit(1, Duration::from_secs(90));
    assert_eq!(code, Some(WATCHDOG_EXIT), "the watchdog's exit code");
    stacks_in_log(&cluster, "ran nothing for");
}

/// SIGTERM is obeyed even by a node whose runtime runs nothing: not stopped within its
/// shutdown bound, it writes every thread's stack and exits.
#[test]
fn a_node_that_cannot_stop_on_sigterm_writes_its_stacks_and_exits() {
    let (mut cluster, freeze) = freezable(&[
        ("freeze_timeout_ms", "600000"),
        ("task_shutdown_graceful_timeout_ms", "1000"),
        ("shutdown_timeout_ms", "3000"),
    ]);
    fs::write(&freeze, "").expect("freeze the node");
    wait_for("the runtime blocked", BOOT, || {
        (cluster.log_count(1, &["blocking every thread"]) > 0).then_some(())
    });
    // The fault suite's freeze sampler names the node that no longer answers, with its stacks.
    let sampler = FreezeSampler::start(cluster.processes.clone(), Duration::from_secs(2));
    let silence = wait_for("the sampler to find the node silent", BOOT, || {
        sampler.now().silences.first().cloned()
    });
    sampler.finish();
    assert_eq!(silence.node, 1);
    assert!(
        silence.stacks.contains("freeze_on"),
        "the sampler's stacks show where the runtime blocks: {}",
        silence.stacks
    );
    cluster.signal(1, Signal::SIGTERM);
    let code = cluster.wait_exit(1, Duration::from_secs(90));
    assert_eq!(code, Some(WATCHDOG_EXIT), "the watchdog's exit code");
    stacks_in_log(&cluster, "not stopped 3");
}

#[test]
fn a_storage_failure_of_the_raft_core_ends_the_process_and_the_rest_serve_on() {
    let settings = Settings {
        storage_fault: true,
        ..Settings::default()
    };
    let (mut cluster, leader) = started(settings);
    let victim = (1..=3).find(|id| *id != leader).expect("a follower");
    fs::write(cluster.storage_fault_file(victim), "").expect("inject the fault");
    // The next entry replicated to the victim fails to append there.
    assert!(cluster.create_sink(leader, "after-the-fault").ok());
    let code = cluster.wait_exit(victim, BOOT);
    assert_eq!(code, Some(70), "a fatal Raft error ends the process");
    assert!(cluster.log_text(victim).contains("the Raft core stopped"));
    // The others serve on; once the disk is healthy again, the node restarts and catches up.
    assert!(cluster.create_sink(leader, "while-it-is-down").ok());
    fs::remove_file(cluster.storage_fault_file(victim)).expect("heal");
    cluster.start(victim);
    wait_for("the node to serve the new config", BOOT, || {
        let out = cluster.cli_on(
            &[victim],
            &["-o", "json", "connectors", "config", "while-it-is-down"],
        );
        out.ok().then_some(())
    });
}

#[test]
fn a_panicking_unit_is_failed_with_the_panic_in_its_trace_and_the_node_serves_on() {
    let settings = Settings {
        panic_connector: Some("boom".into()),
        ..Settings::default()
    };
    let (cluster, leader) = started(settings);
    assert!(cluster.create_sink(leader, "boom").ok());
    let status = wait_for("the connector FAILED", BOOT, || {
        let status = cluster.json(leader, &["connectors", "status", "boom"]);
        (status["connector"]["state"] == "FAILED").then_some(status)
    });
    let trace = status["connector"]["trace"].as_str().unwrap_or_default();
    assert!(
        trace.contains("panicked") && trace.contains("injected panic"),
        "{status}"
    );
    // Every node still serves, and other connectors run.
    assert!(cluster.create_sink(leader, "fine").ok());
    for id in 1..=3 {
        assert!(cluster.node(id).is_running(), "node {id} runs");
        let out = cluster.cli_on(&[id], &["connectors", "list"]);
        assert!(out.ok() && out.stdout.contains("fine"), "{out:?}");
    }
    let members = members(&cluster.status(leader).expect("status"));
    assert_eq!(members.len(), 3);
}

fn voters(status: &Value) -> Vec<u64> {
    members(status)
        .into_iter()
        .filter(|(_, role)| role == "voter")
        .map(|(id, _)| id)
        .collect()
}

#[test]
fn five_nodes_lose_two_voters_one_after_the_other_and_keep_serving_after_the_replacements() {
    let settings = Settings {
        replace_dead_voter_ms: Some(3000),
        ..Settings::default()
    };
    let (mut cluster, leader) = started(settings);
    for id in [4, 5] {
        cluster.configure_extra(id);
        cluster.start(id);
        wait_for("the new node to answer", BOOT, || cluster.status(id));
        let added = cluster.add_node(leader, id);
        assert_eq!(
            members(&added).get(&id).map(String::as_str),
            Some("learner"),
            "{added}"
        );
    }
    assert!(cluster.create_sink(leader, "before").ok());
    // First a follower voter dies, then the leader.
    let follower = (1..=3).find(|id| *id != leader).expect("a follower");
    let mut dead = Vec::new();
    for victim in [follower, leader] {
        cluster.kill9(victim);
        dead.push(victim);
        let running: Vec<u64> = (1..=5).filter(|id| !dead.contains(id)).collect();
        let (lead, now) = wait_for("the dead voter replaced by a learner", HEAL, || {
            let lead = cluster.wait_leader_among(&running, BOOT);
            let status = cluster.status(lead)?;
            let now = voters(&status);
            (now.len() == 3 && now.iter().all(|v| running.contains(v))).then_some((lead, now))
        });
        say(format!(
            "node {victim} dead: voters now {now:?} under leader {lead}"
        ));
        assert!(
            cluster
                .log_text(lead)
                .contains("unreachable for longer than replace_dead_voter_after_ms"),
            "the leader said why it demoted node {victim}"
        );
        assert!(
            cluster.create_sink(lead, &format!("after-{victim}")).ok(),
            "the cluster serves writes"
        );
    }
    let running: Vec<u64> = (1..=5).filter(|id| !dead.contains(id)).collect();
    for id in running {
        let out = cluster.cli_on(&[id], &["-o", "json", "connectors", "config", "before"]);
        assert!(out.ok(), "node {id} serves reads: {out:?}");
    }
}

#[test]
fn a_removed_node_learns_it_was_removed_says_so_and_runs_no_tasks() {
    let (mut cluster, leader) = started(Settings::default());
    cluster.configure_extra(4);
    cluster.start(4);
    wait_for("the new node to answer", BOOT, || cluster.status(4));
    cluster.add_node(leader, 4);
    wait_for("node 4 to hold its lease", BOOT, || {
        cluster.log_text(4).contains("lease held").then_some(())
    });
    cluster.cli(leader, &["cluster", "remove-node", "--id", "4"]);
    let status = wait_for("node 4 to say it was removed", BOOT, || {
        let status = cluster.status(4)?;
        (status["removed"] == true).then_some(status)
    });
    assert!(
        status["not_voting"]
            .as_str()
            .unwrap_or_default()
            .contains("removed"),
        "{status}"
    );
    wait_for("node 4 to stop its tasks", BOOT, || {
        cluster.log_text(4).contains("lease lost").then_some(())
    });
    assert!(cluster.log_text(4).contains("removed from the cluster"));
    // Added again, it is a member again.
    cluster.add_node(leader, 4);
    wait_for("node 4 to be a member again", BOOT, || {
        let status = cluster.status(4)?;
        (status["removed"] == false).then_some(())
    });
}

#[test]
fn a_node_of_the_previous_format_and_the_new_coexist_until_the_feature_level_is_raised() {
    let mut settings = Settings::default();
    settings.format_versions.insert(3, 1);
    let (mut cluster, leader) = started(settings);
    let leader = if leader == 3 {
        cluster.kill9(3);
        cluster.start(3);
        cluster.wait_leader_among(&[1, 2], BOOT)
    } else {
        leader
    };
    // Every member has said which format it understands: node 3 the previous one.
    let status = wait_for("every member's format reported to the leader", BOOT, || {
        let status = cluster.status(leader)?;
        let all = status["members"]
            .as_array()?
            .iter()
            .all(|m| m["format"].as_u64().is_some());
        all.then_some(status)
    });
    assert_eq!(member(&status, 3).expect("node 3")["format"], 1, "{status}");
    assert_eq!(
        status["feature_level"], 1,
        "not raised while node 3 is old: {status}"
    );
    // The mixed cluster serves, on the old node too.
    assert!(cluster.create_sink(leader, "mixed").ok());
    let out = cluster.cli_on(&[3], &["-o", "json", "connectors", "config", "mixed"]);
    assert!(out.ok(), "{out:?}");
    // Node 3 upgraded: the leader raises the level by itself.
    cluster.stop(3);
    cluster.settings.format_versions.clear();
    cluster.rewrite_config(3);
    cluster.start(3);
    wait_for("the feature level raised", BOOT, || {
        let status = cluster.status(3)?;
        (status["feature_level"] == ferry_meta::format::FORMAT_VERSION).then_some(())
    });
    assert!(cluster
        .log_text(leader)
        .contains("raising the cluster feature level"));
    // Going back to the old build now: it refuses the entry it cannot understand, and says so.
    cluster.stop(3);
    cluster.settings.format_versions.insert(3, 1);
    cluster.rewrite_config(3);
    cluster.start(3);
    let code = cluster.wait_exit(3, BOOT);
    // 1 when it meets the entry re-applying its log at start, 70 when it meets it later.
    assert!(
        matches!(code, Some(1 | 70)),
        "the old build stops: {code:?}"
    );
    let log = cluster.log_text(3);
    assert!(
        log.contains("needs format 2, and this ferryd understands formats up to 1"),
        "it says why"
    );
    assert!(!log.contains("panicked"));
    no_panics(&cluster);
}

/// The highest generation among a connector's tasks, as its status shows them.
fn max_generation(cluster: &Cluster, node: u64, name: &str) -> Option<u64> {
    let status = cluster.json(node, &["connectors", "status", name]);
    status["tasks"]
        .as_array()?
        .iter()
        .filter_map(|t| t["generation"].as_u64())
        .max()
}

#[test]
fn backup_then_losing_two_of_three_nodes_then_restore_brings_connectors_offsets_and_generations_back(
) {
    let (mut cluster, leader) = started(Settings::default());
    assert!(cluster.create_sink(leader, "kept").ok());
    assert!(cluster.create_sink(leader, "also-kept").ok());
    cluster.cli(leader, &["connectors", "stop", "kept"]);
    let offsets = cluster.dir.path().join("offsets.json");
    fs::write(
        &offsets,
        r#"{"offsets":[{"partition":{"kafka_topic":"test1","kafka_partition":0},"offset":{"kafka_offset":42}}]}"#,
    )
    .expect("write offsets");
    cluster.cli(
        leader,
        &[
            "connectors",
            "offsets",
            "kept",
            "--alter",
            &offsets.to_string_lossy(),
        ],
    );
    let generation = wait_for("the other connector's tasks assigned", BOOT, || {
        max_generation(&cluster, leader, "also-kept")
    });
    let file = cluster.dir.path().join("ferry.backup");
    let taken = cluster.json(
        leader,
        &["cluster", "backup", "-f", &file.to_string_lossy()],
    );
    assert_eq!(taken["connectors"], 2, "{taken}");
    let old_id = taken["cluster_id"].as_str().unwrap_or_default().to_string();

    // Two of three nodes lost for good: no quorum is left.
    let survivor = leader;
    for id in (1..=3).filter(|id| *id != survivor) {
        cluster.kill9(id);
        cluster.wipe(id);
    }
    // The documented restore: stop the survivor, start every node empty (a new cluster from
    // the same static peers), restore the backup into it.
    cluster.stop(survivor);
    cluster.wipe(survivor);
    cluster.start_all();
    let leader = cluster.wait_leader(BOOT);
    let new_id = wait_for("the new cluster's id", BOOT, || {
        let status = cluster.status(leader)?;
        let id = status["cluster_id"].as_str()?.to_string();
        (!id.is_empty() && status["feature_level"] == ferry_meta::format::FORMAT_VERSION)
            .then_some(id)
    });
    assert_ne!(new_id, old_id, "a new cluster");
    let restored = cluster.json(
        leader,
        &["cluster", "restore", "-f", &file.to_string_lossy()],
    );
    assert_eq!(restored["connectors"], 2, "{restored}");
    assert_eq!(restored["from_cluster_id"], old_id.as_str());
    // A second restore is refused: the cluster has connectors now.
    let again = cluster.cli_on(
        &[leader],
        &["cluster", "restore", "-f", &file.to_string_lossy()],
    );
    assert!(
        !again.ok()
            && again
                .stderr
                .contains("restored only into a cluster without"),
        "{again:?}"
    );

    for id in 1..=3 {
        let config = cluster.json(id, &["connectors", "config", "kept"]);
        assert_eq!(config["topics"], "test1", "node {id}: {config}");
        let offsets = cluster.json(id, &["connectors", "offsets", "kept"]);
        assert_eq!(
            offsets["offsets"][0]["offset"]["kafka_offset"], 42,
            "node {id}: {offsets}"
        );
        wait_for(
            "the target state back too: the connector STOPPED",
            BOOT,
            || {
                let status = cluster.json(id, &["connectors", "status", "kept"]);
                (status["connector"]["state"] == "STOPPED").then_some(())
            },
        );
    }
    // Tasks are assigned again, under generations above every one handed out before.
    let after = wait_for(
        "the restored connector's tasks assigned again",
        BOOT,
        || max_generation(&cluster, leader, "also-kept").filter(|g| *g > generation),
    );
    say(format!(
        "generations: {generation} before the backup, {after} after the restore"
    ));
}
