//! The task runtime, end to end: real `ferryd` processes, a real Apache Kafka broker (see
//! `Kafka` in the harness), FileStream connectors. Times are printed, not asserted.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_tests::pipeline::{
    create, create_source, placement, sink_offsets, started, task_workers, write_input,
};
use ferry_tests::{lines_in_work_dirs, say, wait_for, Cluster, Kafka, Settings};
use serde_json::Value;

const BOOT: Duration = Duration::from_secs(30);
const FLOW: Duration = Duration::from_secs(90);

/// Offsets committed to a consumer group, per partition (as lag tools read them).
fn group_offsets(kafka: &Kafka, group: &str, topic: &str, partitions: i32) -> BTreeMap<i64, i64> {
    use rdkafka::consumer::{BaseConsumer, Consumer};
    let consumer: BaseConsumer = match rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .set("group.id", group)
        .create()
    {
        Ok(c) => c,
        Err(_) => return BTreeMap::new(),
    };
    let mut tpl = rdkafka::TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    consumer
        .committed_offsets(tpl, Duration::from_secs(5))
        .map(|tpl| {
            tpl.elements()
                .iter()
                .filter_map(|e| match e.offset() {
                    rdkafka::Offset::Offset(o) => Some((i64::from(e.partition()), o)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn file_source_to_a_topic_to_file_sinks_delivers_every_line_through_every_partition_and_task() {
    let kafka = Kafka::start(&[("lines", 3)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    huge_pages_are_off(&cluster);
    let (input, expected) = write_input(&cluster, 10_000);
    let started = Instant::now();
    create_source(&cluster, leader, &input, "lines");
    create(
        &cluster,
        leader,
        "sink",
        &[
            (
                "connector.class",
                "org.apache.kafka.connect.file.FileStreamSinkConnector",
            ),
            ("topics", "lines"),
            ("tasks.max", "3"),
            // Relative: each worker writes in its own working directory.
            ("file", "sink.out"),
        ],
    );
    let got = wait_for("every line in the sink files", FLOW, || {
        let lines = lines_in_work_dirs(&cluster, "sink.out");
        let unique: BTreeSet<String> = lines.iter().cloned().collect();
        (unique.len() >= expected.len()).then_some(lines)
    });
    let unique: BTreeSet<String> = got.iter().cloned().collect();
    say(format!(
        "PIPELINE: {} lines through source -> 3 partitions -> 3 sink tasks in {} ms; {} duplicates",
        expected.len(),
        started.elapsed().as_millis(),
        got.len() - unique.len()
    ));
    assert_eq!(unique, expected, "every line arrived, nothing else");

    // Every partition got records, and every task owns one of them.
    let offsets = wait_for("the sink's offsets for all 3 partitions", FLOW, || {
        let offsets = sink_offsets(&cluster, leader, "sink");
        (offsets.len() == 3 && offsets.values().sum::<i64>() >= expected.len() as i64)
            .then_some(offsets)
    });
    assert!(offsets.values().all(|o| *o > 0), "{offsets:?}");
    // Lag tools see the same offsets in the connect-sink consumer group.
    let group = wait_for("the connect-sink group's offsets", FLOW, || {
        let group = group_offsets(&kafka, "connect-sink", "lines", 3);
        (group == offsets).then_some(group)
    });
    say(format!("GROUP: connect-sink committed {group:?}"));
    let tasks = cluster.json(leader, &["connectors", "tasks", "sink"]);
    let owned: Vec<usize> = tasks
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
        .collect();
    assert_eq!(owned, vec![1, 1, 1], "{tasks}");

    // Status: every unit RUNNING on a worker.
    for name in ["source", "sink"] {
        let status = cluster.json(leader, &["connectors", "status", name]);
        assert_eq!(status["connector"]["state"], "RUNNING", "{status}");
        for task in status["tasks"].as_array().expect("tasks") {
            assert_eq!(task["state"], "RUNNING", "{status}");
            assert!(!task["worker_id"].as_str().unwrap_or_default().is_empty());
        }
    }
    let size = std::fs::metadata(&input).map(|m| m.len()).ok();
    wait_for("the source to commit its whole file", FLOW, || {
        let source: Value = cluster.json(leader, &["connectors", "offsets", "source"]);
        (source["offsets"][0]["offset"]["position"].as_u64() == size).then_some(())
    });
}

/// Appends numbered lines to a file in the background, `per_tick` every 50 ms.
struct Writer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    handle: Option<std::thread::JoinHandle<usize>>,
}

impl Writer {
    fn start(path: std::path::PathBuf, first: usize, total: usize, per_tick: usize) -> Writer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .expect("open input");
            let mut next = first;
            while next < first + total && !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let end = (next + per_tick).min(first + total);
                let chunk: String = (next..end).map(|i| format!("line-{i:05}\n")).collect();
                file.write_all(chunk.as_bytes()).expect("append");
                next = end;
                std::thread::sleep(Duration::from_millis(50));
            }
            next - first
        });
        Writer {
            stop,
            handle: Some(handle),
        }
    }

    /// Wait for the writer to finish; the number of lines it wrote.
    fn finish(mut self) -> usize {
        self.handle.take().map_or(0, |h| h.join().unwrap_or(0))
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Every node runs with transparent huge pages off (each of librdkafka's threads would
/// otherwise hold 2 MiB pages of mimalloc's regions), as the kernel shows in
/// `/proc/<pid>/status` (a kernel without the line shows nothing to check).
fn huge_pages_are_off(cluster: &Cluster) {
    for id in 1..=3 {
        let pid = cluster.node(id).pid().expect("a running node");
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
        if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
            assert_eq!(
                line.split_whitespace().nth(1),
                Some("0"),
                "node {id}: {line}"
            );
        }
    }
}

fn pipeline(cluster: &Cluster, node: u64, input: &std::path::Path, tasks: &str) {
    create_source(cluster, node, input, "lines");
    create(
        cluster,
        node,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("tasks.max", tasks),
            ("file", "sink.out"),
        ],
    );
}

/// A follower (not the leader) that runs at least one task of the "sink" connector.
fn follower_running_sink_tasks(cluster: &Cluster, leader: u64) -> u64 {
    let workers = task_workers(cluster, leader, "sink");
    cluster
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != leader)
        .find(|id| workers.iter().any(|(_, w)| *w == cluster.node(*id).api))
        .expect("a follower runs sink tasks")
}

fn wait_lines(cluster: &Cluster, expected: &BTreeSet<String>, what: &str) -> Vec<String> {
    wait_lines_in(cluster, "sink.out", expected, what)
}

/// Wait until every expected line is in the workers' files named `file`; all their lines.
fn wait_lines_in(
    cluster: &Cluster,
    file: &str,
    expected: &BTreeSet<String>,
    what: &str,
) -> Vec<String> {
    wait_for(what, FLOW, || {
        let lines = lines_in_work_dirs(cluster, file);
        let unique: BTreeSet<&String> = lines.iter().collect();
        expected.iter().all(|l| unique.contains(l)).then_some(lines)
    })
}

/// Wait until the sink has written `more` lines beyond those it had: records flow end to end.
fn wait_flowing(cluster: &Cluster, more: usize) {
    let before = lines_in_work_dirs(cluster, "sink.out").len();
    wait_for("records flowing into the sink's files", FLOW, || {
        (lines_in_work_dirs(cluster, "sink.out").len() >= before + more).then_some(())
    });
}

/// A "nothing written" check's witness: a FileStreamSink of its own on topic `lines`, which
/// reads it from the beginning into `witness.out`; once it has every expected line, a sink that
/// had been running would have had them too. Deleted afterwards.
fn witness(cluster: &Cluster, node: u64, expected: &BTreeSet<String>) {
    create(
        cluster,
        node,
        "witness",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("tasks.max", "1"),
            ("file", "witness.out"),
        ],
    );
    wait_lines_in(
        cluster,
        "witness.out",
        expected,
        "the witness sink to have every line",
    );
    cluster.cli(node, &["connectors", "delete", "witness"]);
}

#[test]
fn seed_000_fail_over_kill_9_of_a_sink_worker_while_records_flow_loses_nothing() {
    let kafka = Kafka::start(&[("lines", 6)]);
    let (mut cluster, leader) = started(3, &kafka, Settings::default());
    let input = cluster.dir.path().join("input.txt");
    std::fs::write(&input, "").expect("create input");
    pipeline(&cluster, leader, &input, "6");
    wait_for("six sink tasks running", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        (t.len() == 6 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    let writer = Writer::start(input.clone(), 0, 30_000, 250);
    wait_flowing(&cluster, 1_000);
    // A non-leader worker that runs sink tasks.
    let victim = follower_running_sink_tasks(&cluster, leader);
    let victim_api = cluster.node(victim).api.clone();
    let moved: usize = task_workers(&cluster, leader, "sink")
        .iter()
        .filter(|(_, w)| *w == victim_api)
        .count();
    let killed = Instant::now();
    cluster.kill9(victim);
    let failover = wait_for("the victim's sink tasks running elsewhere", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        (t.len() == 6 && t.iter().all(|(s, w)| s == "RUNNING" && *w != victim_api))
            .then(|| killed.elapsed())
    });
    say(format!(
        "FAILOVER (seed 000): {moved} sink tasks of node {victim} running on other workers {} ms after kill -9",
        failover.as_millis()
    ));
    let written = writer.finish();
    let expected: BTreeSet<String> = (0..written).map(|i| format!("line-{i:05}")).collect();
    let lines = wait_lines(
        &cluster,
        &expected,
        "every line written during the fail-over",
    );
    let unique: BTreeSet<String> = lines.iter().cloned().collect();
    say(format!(
        "FAILOVER (seed 000): {} lines, none lost, {} duplicates (at-least-once)",
        expected.len(),
        lines.len() - unique.len()
    ));
    assert_eq!(unique, expected);
    let status = cluster.json(leader, &["connectors", "status", "sink"]);
    let workers: BTreeSet<&str> = status["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .filter_map(|t| t["worker_id"].as_str())
        .collect();
    assert!(
        !workers.contains(victim_api.as_str()),
        "status shows the new worker ids: {status}"
    );
}

#[test]
fn sinks_resume_from_committed_offsets_after_a_restart_of_all_nodes() {
    let kafka = Kafka::start(&[("lines", 3)]);
    let (mut cluster, leader) = started(3, &kafka, Settings::default());
    let (input, first) = write_input(&cluster, 5_000);
    pipeline(&cluster, leader, &input, "3");
    wait_lines(&cluster, &first, "the first 5,000 lines");
    wait_for("sink offsets committed for everything", FLOW, || {
        (sink_offsets(&cluster, leader, "sink").values().sum::<i64>() >= 5_000).then_some(())
    });
    for id in [1, 2, 3] {
        cluster.stop(id);
    }
    // Written twice before the restart already (a source task that moved while the cluster
    // started: the one it moved from produced until it was fenced): not the restart's.
    let before = lines_in_work_dirs(&cluster, "sink.out");
    let twice_before = before.len() - before.iter().collect::<BTreeSet<_>>().len();
    for id in [2, 3, 1] {
        cluster.start(id);
    }
    let leader = cluster.wait_leader(BOOT);
    let writer = Writer::start(input.clone(), 5_000, 2_000, 500);
    let written = writer.finish();
    let all: BTreeSet<String> = (0..5_000 + written)
        .map(|i| format!("line-{i:05}"))
        .collect();
    let lines = wait_lines(&cluster, &all, "the lines written after the restart");
    let unique: BTreeSet<String> = lines.iter().cloned().collect();
    let duplicates = (lines.len() - unique.len()).saturating_sub(twice_before);
    say(format!(
        "RESTART: {} lines before ({twice_before} written twice), {} after; {duplicates} more written twice",
        before.len(),
        lines.len()
    ));
    assert_eq!(unique, all);
    assert!(
        duplicates < 1_000,
        "the sinks resumed from committed offsets, not the beginning ({duplicates} duplicates)"
    );
    let _ = leader;
}

#[test]
fn pause_resume_stop_and_offsets_reset_change_what_the_tasks_do() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let (input, first) = write_input(&cluster, 1_000);
    pipeline(&cluster, leader, &input, "2");
    wait_lines(&cluster, &first, "the first lines");
    wait_for("offsets committed", FLOW, || {
        (sink_offsets(&cluster, leader, "sink").values().sum::<i64>() >= 1_000).then_some(())
    });

    // Paused: new lines reach the topic but not the files.
    cluster.cli(leader, &["connectors", "pause", "sink"]);
    wait_for("sink tasks PAUSED", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        t.iter().all(|(s, _)| s == "PAUSED").then_some(())
    });
    Writer::start(input.clone(), 1_000, 500, 500).finish();
    wait_for("the source to read the new lines", FLOW, || {
        let o = cluster.json(leader, &["connectors", "offsets", "source"]);
        let size = std::fs::metadata(&input).map(|m| m.len()).ok();
        (o["offsets"][0]["offset"]["position"].as_u64() == size).then_some(())
    });
    let all: BTreeSet<String> = (0..1_500).map(|i| format!("line-{i:05}")).collect();
    witness(&cluster, leader, &all);
    assert_eq!(
        lines_in_work_dirs(&cluster, "sink.out").len(),
        1_000,
        "nothing written while paused"
    );

    cluster.cli(leader, &["connectors", "resume", "sink"]);
    wait_lines(&cluster, &all, "the lines held back by the pause");

    // Stopped, offsets reset, resumed: the sinks consume the topic again from the beginning.
    wait_for("offsets committed", FLOW, || {
        (sink_offsets(&cluster, leader, "sink").values().sum::<i64>() >= 1_500).then_some(())
    });
    cluster.cli(leader, &["connectors", "stop", "sink"]);
    wait_for("sink tasks STOPPED", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        t.iter().all(|(s, _)| s == "STOPPED").then_some(())
    });
    let reset = cluster.json(leader, &["connectors", "offsets", "sink", "--reset"]);
    assert_eq!(reset["offsets"], serde_json::json!([]));
    cluster.cli(leader, &["connectors", "resume", "sink"]);
    wait_for("every line written twice after the reset", FLOW, || {
        (lines_in_work_dirs(&cluster, "sink.out").len() >= 3_000).then_some(())
    });
    let lines = lines_in_work_dirs(&cluster, "sink.out");
    let mut counts: BTreeMap<&String, usize> = BTreeMap::new();
    for l in &lines {
        *counts.entry(l).or_default() += 1;
    }
    assert!(
        all.iter().all(|l| counts.get(l) == Some(&2)),
        "each line twice after the reset"
    );
}

fn all_running(cluster: &Cluster, node: u64, names: &[&str], tasks: usize) -> bool {
    names.iter().all(|name| {
        let out = cluster.cli_on(&[node], &["-o", "json", "connectors", "status", name]);
        if !out.ok() {
            return false;
        }
        let status = out.json();
        let running = |s: &Value| {
            s["state"] == "RUNNING" && !s["worker_id"].as_str().unwrap_or_default().is_empty()
        };
        running(&status["connector"])
            && status["tasks"]
                .as_array()
                .is_some_and(|t| t.len() >= tasks.min(1) && t.iter().all(running))
    })
}

#[test]
fn seed_003_scale_out_moves_only_the_new_workers_share_and_survives_the_leader() {
    let kafka = Kafka::start(&[("lines", 5)]);
    let (mut cluster, leader) = started(2, &kafka, Settings::default());
    let input = cluster.dir.path().join("input.txt");
    std::fs::write(&input, "").expect("create input");
    pipeline(&cluster, leader, &input, "5");
    let names = ["source", "sink"];
    wait_for("every unit running on the two nodes", FLOW, || {
        (all_running(&cluster, leader, &names, 5) && placement(&cluster, leader, &names).len() == 8)
            .then_some(())
    });
    let before = placement(&cluster, leader, &names);
    let per_worker = |p: &BTreeMap<String, String>| {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for w in p.values() {
            *counts.entry(w.clone()).or_default() += 1;
        }
        counts
    };
    say(format!("SCALE-OUT: before {:?}", per_worker(&before)));
    assert_eq!(
        per_worker(&before).values().copied().collect::<Vec<_>>(),
        vec![4, 4]
    );

    cluster.configure_extra(3);
    cluster.start(3);
    cluster.add_node(leader, 3);
    let third = cluster.node(3).api.clone();
    let after = wait_for("the new worker's fair share", FLOW, || {
        let p = placement(&cluster, leader, &names);
        let counts = per_worker(&p);
        (counts.get(&third).copied() == Some(2) && all_running(&cluster, leader, &names, 5))
            .then_some(p)
    });
    let moved: Vec<&String> = after.keys().filter(|k| before[*k] != after[*k]).collect();
    say(format!(
        "SCALE-OUT: after {:?}; moved {moved:?}",
        per_worker(&after)
    ));
    assert_eq!(moved.len(), 2, "only the new worker's share moved");
    assert!(moved.iter().all(|k| after[*k] == third));

    // Records flow through all of this, and through a kill -9 of the leader.
    let writer = Writer::start(input.clone(), 0, 5_000, 250);
    wait_flowing(&cluster, 250);
    cluster.kill9(leader);
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != leader).collect();
    let new_leader = cluster.wait_leader_among(&survivors, FLOW);
    let dead = cluster.node(leader).api.clone();
    wait_for("every unit running on the survivors", FLOW, || {
        let p = placement(&cluster, new_leader, &names);
        (all_running(&cluster, new_leader, &names, 5) && p.values().all(|w| *w != dead))
            .then_some(())
    });
    let written = writer.finish();
    let expected: BTreeSet<String> = (0..written).map(|i| format!("line-{i:05}")).collect();
    wait_lines(&cluster, &expected, "every line through the leader's death");
    for id in &survivors {
        cluster.cli(*id, &["connectors", "list"]);
        cluster.cli(*id, &["connectors", "pause", "source"]);
        cluster.cli(*id, &["connectors", "resume", "source"]);
    }
    say(format!(
        "SCALE-OUT: leader {leader} killed; {} lines arrived; management works on {survivors:?}",
        expected.len()
    ));
}

/// remove-node moves the node's work away while it is still a member, then removes it: when the
/// call returns nothing is assigned to it, and it stops at once (found by the fault suite's
/// membership nemesis: removed first, the node kept its tasks, whose commits then waited in vain
/// for this node to apply them, and it did not stop within 20 s).
#[test]
fn remove_node_moves_its_tasks_away_first_and_the_node_stops_cleanly() {
    let kafka = Kafka::start(&[("lines", 6)]);
    let (mut cluster, leader) = started(3, &kafka, Settings::default());
    let input = cluster.dir.path().join("input.txt");
    std::fs::write(&input, "").expect("create input");
    pipeline(&cluster, leader, &input, "6");
    cluster.configure_extra(4);
    cluster.start(4);
    cluster.add_node(leader, 4);
    let fourth = cluster.node(4).api.clone();
    let names = ["source", "sink"];
    wait_for("units running on the added node", FLOW, || {
        let p = placement(&cluster, leader, &names);
        (all_running(&cluster, leader, &names, 6) && p.values().any(|w| *w == fourth)).then_some(())
    });
    let writer = Writer::start(input.clone(), 0, 4_000, 200);
    wait_flowing(&cluster, 200);
    cluster.json(leader, &["cluster", "remove-node", "--id", "4"]);
    let right_after = placement(&cluster, leader, &names);
    assert!(
        right_after.values().all(|w| *w != fourth),
        "nothing is assigned to a removed node: {right_after:?}"
    );
    let stopping = Instant::now();
    let code = cluster.stop(4);
    say(format!(
        "REMOVE-NODE: node 4's units moved before it left; it stopped {} ms after SIGTERM",
        stopping.elapsed().as_millis()
    ));
    assert_eq!(code, Some(0));
    assert!(
        !cluster
            .log_text(4)
            .contains("not every unit stopped in time"),
        "every unit of the removed node finished (its final commits were applied)"
    );
    let written = writer.finish();
    let expected: BTreeSet<String> = (0..written).map(|i| format!("line-{i:05}")).collect();
    wait_lines(&cluster, &expected, "every line through the removal");
    let status = cluster.status(leader).expect("cluster status");
    assert!(!ferry_tests::members(&status).contains_key(&4), "{status}");
}

/// Freeze a worker running sink tasks past the worker timeout, let its tasks move, thaw it.
/// What a zombie scenario leaves: the cluster, its leader, the frozen node, the moved task
/// ids with the generation each ran under on the frozen node, and the lines expected.
struct Zombie {
    /// The broker, kept running while the scenario is used.
    _kafka: Kafka,
    cluster: Cluster,
    leader: u64,
    zombie: u64,
    moved: Vec<(u64, u64)>,
    expected: BTreeSet<String>,
}

fn zombie_scenario(disable_lease: bool) -> Zombie {
    let kafka = Kafka::start(&[("lines", 3)]);
    let settings = Settings {
        disable_lease,
        ..Settings::default()
    };
    let (cluster, leader) = started(3, &kafka, settings);
    let input = cluster.dir.path().join("input.txt");
    std::fs::write(&input, "").expect("create input");
    pipeline(&cluster, leader, &input, "3");
    wait_for("three sink tasks running", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        (t.len() == 3 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    let writer = Writer::start(input.clone(), 0, 20_000, 200);
    wait_flowing(&cluster, 1_000);
    let zombie = follower_running_sink_tasks(&cluster, leader);
    let zombie_api = cluster.node(zombie).api.clone();
    let moved: Vec<u64> = task_workers(&cluster, leader, "sink")
        .iter()
        .enumerate()
        .filter(|(_, (_, w))| *w == zombie_api)
        .map(|(i, _)| i as u64)
        .collect();
    assert!(
        !moved.is_empty()
            && moved.iter().all(|t| !zombie_series(&cluster, zombie, *t)
                .unwrap_or_default()
                .is_empty()),
        "the zombie reports the tasks it runs"
    );
    let moved: Vec<(u64, u64)> = moved
        .into_iter()
        .map(|t| {
            (
                t,
                task_generation(&cluster, leader, t).unwrap_or_default().1,
            )
        })
        .collect();
    cluster.signal(zombie, ferry_tests::Signal::SIGSTOP);
    wait_for("the zombie's tasks running elsewhere", FLOW, || {
        let t = task_workers(&cluster, leader, "sink");
        t.iter()
            .all(|(s, w)| s == "RUNNING" && *w != zombie_api)
            .then_some(())
    });
    // The new owners write before the zombie wakes.
    wait_flowing(&cluster, 200);
    cluster.signal(zombie, ferry_tests::Signal::SIGCONT);
    let written = writer.finish();
    let expected: BTreeSet<String> = (0..written).map(|i| format!("line-{i:05}")).collect();
    Zombie {
        _kafka: kafka,
        cluster,
        leader,
        zombie,
        moved,
        expected,
    }
}

/// The series of sink task `task` on `node` (present while it runs there).
fn zombie_series(cluster: &Cluster, node: u64, task: u64) -> Option<Vec<i64>> {
    let task = task.to_string();
    cluster.series(node, SINK_READ, &[("connector", "sink"), ("task", &task)])
}

/// A sink task's count of records read: its series exists while it runs on a node.
const SINK_READ: &str = "kafka_connect_sink_task_sink_record_read_total";

/// Sink task `task`'s worker (API address) and generation, as `node`'s status shows them.
fn task_generation(cluster: &Cluster, node: u64, task: u64) -> Option<(String, u64)> {
    let status = cluster.json(node, &["connectors", "status", "sink"]);
    let t = status["tasks"]
        .as_array()?
        .iter()
        .find(|t| t["id"].as_u64() == Some(task))?;
    Some((
        t["worker_id"].as_str()?.to_string(),
        t["generation"].as_u64()?,
    ))
}

/// Whether the zombie no longer runs task `task` under `generation`, the one it lost: the
/// task's series is gone from it, or the task was given back to it under a newer generation
/// (the runtime starts a unit's new run only once its previous run has stopped).
fn stale_run_stopped(
    cluster: &Cluster,
    leader: u64,
    zombie: u64,
    task: u64,
    generation: u64,
) -> bool {
    if zombie_series(cluster, zombie, task) == Some(Vec::new()) {
        return true;
    }
    let zombie_api = &cluster.node(zombie).api;
    task_generation(cluster, leader, task)
        .is_some_and(|(worker, now)| worker == *zombie_api && now > generation)
}

fn fenced_commits(cluster: &Cluster, node: u64, tasks: &[(u64, u64)]) -> u64 {
    let status = cluster.json(node, &["connectors", "status", "sink"]);
    status["tasks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| {
            t["id"]
                .as_u64()
                .is_some_and(|id| tasks.iter().any(|(task, _)| *task == id))
        })
        .filter_map(|t| t["fenced_commits"].as_u64())
        .sum()
}

#[test]
fn fencing_alone_rejects_a_zombies_commits_by_generation() {
    let z = zombie_scenario(true);
    // Without the lease, the thawed worker still tries to commit for the tasks it lost: the
    // state machine refuses it by generation, and counts the attempt.
    let fenced = wait_for("the zombie's commit refused by generation", FLOW, || {
        let n = fenced_commits(&z.cluster, z.leader, &z.moved);
        (n > 0).then_some(n)
    });
    say(format!(
        "FENCING: node {} thawed; {fenced} commits of tasks {:?} refused by generation",
        z.zombie, z.moved
    ));
    wait_for("the zombie to stop its stale tasks", FLOW, || {
        z.moved
            .iter()
            .all(|(t, g)| stale_run_stopped(&z.cluster, z.leader, z.zombie, *t, *g))
            .then_some(())
    });
    let lines = wait_lines(&z.cluster, &z.expected, "every line despite the zombie");
    let unique: BTreeSet<String> = lines.iter().cloned().collect();
    assert_eq!(unique, z.expected);
}

#[test]
fn with_the_lease_a_zombie_stops_its_tasks_by_itself() {
    let z = zombie_scenario(false);
    // Noticed by its lease loop ("lease lost"), or first by a unit about to act ("lease
    // lapsed: frozen"): woken, the lease loop may have its next heartbeat acknowledged, and so
    // take a new lease, before it ever looks at the old one.
    wait_for("the zombie to notice its lease expired", FLOW, || {
        let log = z.cluster.log_text(z.zombie);
        (log.contains("lease lost") || log.contains("lease lapsed")).then_some(())
    });
    wait_lines(&z.cluster, &z.expected, "every line despite the zombie");
    // It never even tried to commit for the tasks it lost.
    assert_eq!(fenced_commits(&z.cluster, z.leader, &z.moved), 0);
    say(format!(
        "LEASE: node {} stopped tasks {:?} by itself; no fenced commit",
        z.zombie, z.moved
    ));
}

#[test]
fn a_failing_task_shows_failed_with_its_trace_and_recovers_through_the_api() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    let (input, lines) = write_input(&cluster, 500);
    create_source(&cluster, leader, &input, "lines");
    // A file in a directory that does not exist: the tasks cannot start.
    create(
        &cluster,
        leader,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("tasks.max", "2"),
            ("file", "/nonexistent-dir/sink.out"),
        ],
    );
    let status = wait_for("the sink tasks FAILED", FLOW, || {
        let status = cluster.json(leader, &["connectors", "status", "sink"]);
        let tasks = status["tasks"].as_array()?.clone();
        (tasks.len() == 2 && tasks.iter().all(|t| t["state"] == "FAILED")).then_some(status)
    });
    let trace = status["tasks"][0]["trace"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        trace.contains("/nonexistent-dir/sink.out"),
        "the trace names the file: {trace}"
    );
    let generation = status["tasks"][0]["generation"]
        .as_u64()
        .unwrap_or_default();
    // Restarting only the failed ones runs them again (and they fail again, under a new generation).
    cluster.cli(
        leader,
        &[
            "connectors",
            "restart",
            "sink",
            "--include-tasks",
            "--only-failed",
        ],
    );
    wait_for("a new generation of the failed task", FLOW, || {
        let status = cluster.json(leader, &["connectors", "status", "sink"]);
        (status["tasks"][0]["generation"].as_u64() > Some(generation)
            && status["tasks"][0]["state"] == "FAILED")
            .then_some(())
    });
    // A fixed config brings them up, and everything arrives.
    let fixed = cluster.connector_file(
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("tasks.max", "2"),
            ("file", "sink.out"),
        ],
    );
    cluster.cli(
        leader,
        &[
            "connectors",
            "config",
            "sink",
            "-f",
            &fixed.to_string_lossy(),
        ],
    );
    wait_lines(&cluster, &lines, "every line after the fix");
    let status = cluster.json(leader, &["connectors", "status", "sink"]);
    assert!(
        status["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["state"] == "RUNNING"),
        "{status}"
    );

    // Deleting the connector stops its tasks: new lines are not written any more.
    let tasks = task_workers(&cluster, leader, "sink").len();
    let running = || -> usize {
        (1..=3)
            .filter_map(|id| cluster.series(id, SINK_READ, &[("connector", "sink")]))
            .map(|series| series.len())
            .sum()
    };
    assert_eq!(running(), tasks, "every sink task reports on its node");
    cluster.cli(leader, &["connectors", "delete", "sink"]);
    wait_for("every sink task stopped", FLOW, || {
        (running() == 0).then_some(())
    });
    let before = lines_in_work_dirs(&cluster, "sink.out").len();
    Writer::start(input.clone(), 500, 200, 200).finish();
    let all: BTreeSet<String> = (0..700).map(|i| format!("line-{i:05}")).collect();
    witness(&cluster, leader, &all);
    assert_eq!(
        lines_in_work_dirs(&cluster, "sink.out").len(),
        before,
        "a deleted sink writes nothing"
    );
}

#[test]
fn a_regex_sink_picks_up_topics_created_later() {
    let kafka = Kafka::start(&[]);
    let (cluster, leader) = started(3, &kafka, Settings::default());
    create(
        &cluster,
        leader,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics.regex", "extra-.*"),
            ("tasks.max", "2"),
            ("file", "sink.out"),
        ],
    );
    // The topic appears only now, auto-created by the source's producer.
    let (input, lines) = write_input(&cluster, 300);
    create_source(&cluster, leader, &input, "extra-1");
    let started = Instant::now();
    wait_lines(
        &cluster,
        &lines,
        "the lines of a topic created after the sink",
    );
    let tasks = cluster.json(leader, &["connectors", "tasks", "sink"]);
    let owned: usize = tasks
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["partitions"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(
        owned > 0,
        "the new topic's partitions were spread over the tasks: {tasks}"
    );
    say(format!(
        "REGEX: a new topic's records reached the sink {} ms after its source started",
        started.elapsed().as_millis()
    ));
}
