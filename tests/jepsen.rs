//! The fault suite's subset for `make test` (the whole matrix is `make jepsen`): recorded
//! histories under nemeses, checked afterwards.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_tests::jepsen::client::{
    rest_config_client, spawn_clients, spawn_config_clients, ClientPlan, History,
};
use ferry_tests::jepsen::linearizable::{check, ConfigRegister};
use ferry_tests::jepsen::nemesis::Nemesis;
use ferry_tests::jepsen::scenario::{run, Scenario, Sink};
use ferry_tests::{say, wait_for, Cluster, Settings};

#[test]
fn concurrent_config_clients_see_a_linearizable_history_through_a_leader_kill() {
    through_a_leader_kill(Door::Grpc);
}

/// Kafka Connect's REST API on every node, the leader killed under it: any node answers, each
/// answer is the right one or one of Kafka Connect's "try again" answers (409, 500), and the
/// history is linearizable.
#[test]
fn concurrent_rest_clients_see_a_linearizable_history_through_a_leader_kill() {
    through_a_leader_kill(Door::Rest);
}

/// Which API the config clients speak.
#[derive(Clone, Copy, Debug)]
enum Door {
    Grpc,
    Rest,
}

/// Five config clients on three keys through `door`, against every node, a kill -9 of the
/// leader once they are under way; the recorded history must be linearizable.
fn through_a_leader_kill(door: Door) {
    let mut cluster = Cluster::new(3, Settings::default());
    cluster.start_all();
    let leader = cluster.wait_leader(Duration::from_secs(30));
    let addrs: Vec<String> = cluster
        .nodes
        .values()
        .map(|n| match door {
            Door::Grpc => n.api.clone(),
            Door::Rest => n.rest.clone(),
        })
        .collect();
    let keys: Vec<String> = (0..3).map(|k| format!("k{k}")).collect();
    let history: History = Arc::new(Mutex::new(Vec::new()));
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let started = Instant::now();
    let until = started + Duration::from_secs(10);
    let plan = ClientPlan {
        id: 0,
        addrs,
        keys: keys.clone(),
        topic: "test1".into(),
        started,
        until,
        think: Duration::ZERO,
        seed: 1,
        hold: Default::default(),
    };
    let clients = match door {
        Door::Grpc => spawn_config_clients(&runtime, 5, &plan, &history),
        Door::Rest => spawn_clients(&runtime, 5, &plan, &history, rest_config_client),
    };
    // The kill comes once the clients are well under way.
    wait_for(
        "operations before the kill",
        Duration::from_secs(30),
        || {
            let done = history.lock().unwrap_or_else(|p| p.into_inner()).len();
            (done >= 40).then_some(())
        },
    );
    cluster.kill9(leader);
    for c in clients {
        runtime.block_on(c).expect("client task");
    }
    let history = history.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let unknown = history.iter().filter(|o| o.ret.is_none()).count();
    let failing = check(&ConfigRegister, &history);
    say(format!(
        "LINEARIZABILITY ({door:?}): {} operations on {} keys ({unknown} of unknown outcome) through a kill -9 of leader {leader}: {}",
        history.len(),
        keys.len(),
        if failing.is_empty() { "linearizable".to_string() } else { format!("NOT linearizable on {failing:?}") }
    ));
    assert!(history.len() > 50, "the workload ran");
    assert!(failing.is_empty(), "non-linearizable keys: {failing:?}");
}

/// Run one scenario of the matrix and require every checker to pass.
fn scenario(nemesis: Nemesis, seed: u64, secs: u64, lease: bool) {
    scenario_with(Sink::File, nemesis, seed, secs, lease)
}

fn scenario_with(sink: Sink, nemesis: Nemesis, seed: u64, secs: u64, lease: bool) {
    let mut s = Scenario::new(nemesis, sink, seed, Duration::from_secs(secs));
    s.lease = lease;
    let summary = run(&s);
    assert!(summary.passed(), "{summary}");
    assert!(!summary.faults.is_empty(), "the nemesis injected faults");
}

/// kill -9, SIGSTOP past the worker timeout, graceful restarts and partitions, one after another
/// (the restart nemesis found a node that never finished stopping: regression case).
#[test]
fn combined_faults_under_load_lose_nothing_keep_one_owner_and_converge() {
    scenario(Nemesis::Combined, 11, 45, true);
}

/// Paused workers without their lease keep working when they wake: only the generation fence
/// keeps their commits out, and the single-owner checker on the replayed log must agree. (It
/// once reported a paused leader's retried commit — answered from its first application — as a
/// zombie's; the replay now knows a repeat is no effect.)
#[test]
fn zombies_without_a_lease_are_fenced_by_generation() {
    scenario(Nemesis::Pause, 2, 25, false);
}

/// Disks that lie: a node's data directory wiped (the leader's too) and a node restored from an
/// older copy of its own (with one of the others killed right after, in some rounds) — nothing
/// lost or duplicated, no panic, and the node a caught-up voter again before the next fault.
#[test]
fn wiped_and_rolled_back_nodes_lose_nothing_and_rejoin_as_caught_up_voters() {
    scenario(Nemesis::Wipe, 7, 20, true);
    scenario(Nemesis::Rollback, 9, 20, true);
}

/// A client creates a connector with 2,000 tasks (10,000 in `make jepsen`) while records flow,
/// then deletes it: every task shows RUNNING, the leader keeps its term, the sink's tasks their
/// generations and every worker its lease, and no idle task opens a Kafka client.
#[test]
fn a_connector_with_thousands_of_tasks_disturbs_nothing_else() {
    scenario(Nemesis::BigConfig, 3, 20, true);
}

/// A node added as learner and promoted, then removed, while records flow and tasks rebalance.
#[test]
fn membership_changes_under_load_lose_nothing_and_converge() {
    scenario(Nemesis::Membership, 5, 20, true);
}

/// The storage sink on a shared directory: kill -9 of random nodes and of the leader, and
/// zombies without their lease, while it writes, commits and renames; every record exactly
/// once in its committed files.
#[test]
fn the_storage_sink_is_exactly_once_through_kills_of_workers_and_the_leader() {
    scenario_with(Sink::Storage, Nemesis::KillLeader, 3, 20, true);
    scenario_with(Sink::Storage, Nemesis::KillRandom, 4, 20, true);
}

#[test]
fn storage_sink_zombies_without_a_lease_are_fenced_and_duplicate_nothing() {
    scenario_with(Sink::Storage, Nemesis::Pause, 2, 25, false);
}

/// The same sink on a real HDFS under every kind of fault.
#[test]
fn the_hdfs_sink_is_exactly_once_under_combined_faults() {
    scenario_with(Sink::Hdfs, Nemesis::Combined, 11, 30, true);
}

/// `Hdfs3SinkConnector` on Hadoop 3's NameNode and DataNode, through kill -9 of the leader.
#[test]
fn the_hdfs3_sink_on_hadoop_3_is_exactly_once_through_kills_of_the_leader() {
    scenario_with(Sink::Hdfs3, Nemesis::KillLeader, 7, 20, true);
}

/// The JDBC sink into PostgreSQL, plain inserts, through kill -9 of random nodes: every
/// record in exactly one row (a batch and its offsets commit in one transaction, fenced by
/// generation at the database).
#[test]
fn the_jdbc_sink_is_exactly_once_through_kills_of_workers() {
    scenario_with(Sink::Jdbc, Nemesis::KillRandom, 6, 20, true);
}

/// Planned changes cost nothing: every node, the leader included, stopped with SIGTERM and
/// started again, twice over, each down longer than the worker timeout, under a FileStreamSink
/// at 1,000 records/s with a 60 s offset flush — nothing lost, nothing written twice, and the
/// tasks of the nodes not being restarted keep their workers and generations.
#[test]
fn rolling_restarts_write_nothing_twice_and_leave_other_nodes_tasks_alone() {
    scenario(Nemesis::RollingRestart, 1, 5, true);
}

/// SIGTERM of the leader under load, five times (twenty in `make jepsen`): each exit within
/// `shutdown_timeout_ms`, nothing written twice, the other nodes' tasks untouched.
#[test]
fn the_leader_stopped_under_load_exits_in_time_and_writes_nothing_twice() {
    let mut s = Scenario::new(
        Nemesis::LeaderChanges,
        Sink::File,
        1,
        Duration::from_secs(5),
    );
    s.leader_stops = 5;
    let summary = run(&s);
    assert!(summary.passed(), "{summary}");
    assert!(!summary.faults.is_empty(), "the nemesis injected faults");
}

/// Faults shorter than the worker timeout move nothing: a follower cut off for 3.5 s (its
/// connections reset: no proof of death) and the leader paused until a successor leads (the
/// successor restarts no healthy worker's tasks, and the woken leader's stale plan is dropped).
#[test]
fn short_cuts_and_a_paused_leader_move_no_task_and_write_nothing_twice() {
    scenario(Nemesis::ShortFaults, 1, 5, true);
}

/// Kafka's own faults, on a three-broker cluster (replication factor 3,
/// `min.insync.replicas=2`): one broker killed (`kill -9`) and restarted, one paused and
/// resumed, one cut off from the workers alone — every record the producer had acknowledged
/// (`acks=all`) reaches the sink, whose tasks ride the faults out (a consumer error a broker's
/// absence causes is transient).
#[test]
fn a_broker_killed_paused_or_cut_off_loses_no_acknowledged_record() {
    scenario(Nemesis::KillBroker, 1, 20, true);
    scenario(Nemesis::PauseBroker, 1, 20, true);
    scenario(Nemesis::PartitionBroker, 1, 20, true);
}
