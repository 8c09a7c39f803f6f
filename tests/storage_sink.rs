//! The HDFS sink on a directory every worker shares, through real ferryd processes and a
//! broker: Confluent-named files under `topics.dir`, and every record exactly once across a
//! `kill -9` of a worker that was writing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ferry_tests::pipeline::{
    alter_offsets, create, create_source, follower_running, reset_offsets, sink_offsets, started,
    stop, task_workers,
};
use ferry_tests::storage::check_tiling;
use ferry_tests::{error_header, read_topic, say, wait_for, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

const FLOW: Duration = Duration::from_secs(120);

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_under(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Every committed file of `topic`, by name, with the records it holds (JSON strings).
fn committed(store: &Path, topic: &str) -> BTreeMap<String, Vec<String>> {
    committed_json(store, topic)
        .into_iter()
        .map(|(name, records)| {
            let texts = records
                .into_iter()
                .map(|r| r.as_str().expect("a JSON string per line").to_string())
                .collect();
            (name, texts)
        })
        .collect()
}

/// Every committed file of `topic`, by name, with the JSON values it holds.
fn committed_json(store: &Path, topic: &str) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut files = Vec::new();
    files_under(&store.join("data/log").join(topic), &mut files);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let records = text
                .lines()
                .map(|l| serde_json::from_str(l).expect("a JSON value per line"))
                .collect();
            (
                f.strip_prefix(store)
                    .expect("in the store")
                    .to_string_lossy()
                    .to_string(),
                records,
            )
        })
        .collect()
}

/// The HDFS sink `hdfs` writing JSON files under `/data/log` of a shared directory.
fn json_files_sink(
    cluster: &ferry_tests::Cluster,
    node: u64,
    store_url: &str,
    more: &[(&str, &str)],
) {
    let mut config = vec![
        (
            "connector.class",
            "io.confluent.connect.hdfs.HdfsSinkConnector",
        ),
        ("store.url", store_url),
        ("topics.dir", "/data/log"),
        ("format.class", "io.confluent.connect.hdfs.json.JsonFormat"),
    ];
    config.extend_from_slice(more);
    create(cluster, node, "hdfs", &config);
}

/// `line-NNNNN` for each number, spread over the topic's three partitions.
fn produce(bootstrap: &str, topic: &str, numbers: std::ops::Range<usize>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .expect("a producer");
    for i in numbers {
        let value = format!("line-{i:05}");
        let record = BaseRecord::<(), str>::to(topic)
            .payload(value.as_str())
            .partition((i % 3) as i32);
        ferry_tests::send_waiting(&producer, record);
    }
    producer.flush(Duration::from_secs(30)).expect("delivered");
}

#[test]
fn storage_sink_writes_confluent_named_files_exactly_once_across_a_kill_9() {
    let kafka = Kafka::start(&[("shop", 3)]);
    let (mut cluster, leader) = started(3, &kafka, Settings::default());
    let store = cluster.dir.path().join("store");
    let store_url = format!("file://{}", store.display());
    // Records go straight to the topic (a source could repeat some after a kill: the claim
    // is about the sink): each exactly once in the topic, so exactly once in the files.
    produce(&kafka.bootstrap, "shop", 0..3000);
    json_files_sink(
        &cluster,
        leader,
        &store_url,
        &[
            ("topics", "shop"),
            ("tasks.max", "3"),
            ("flush.size", "200"),
            ("rotate.schedule.interval.ms", "2000"),
        ],
    );
    wait_for("three sink tasks running", FLOW, || {
        let t = task_workers(&cluster, leader, "hdfs");
        (t.len() == 3 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    wait_for("the first records committed", FLOW, || {
        let n: usize = committed(&store, "shop").values().map(Vec::len).sum();
        (n >= 1000).then_some(())
    });
    // Kill a follower that writes; more records arrive meanwhile.
    let victim = follower_running(&cluster, leader, "hdfs");
    let victim_api = cluster.node(victim).api.clone();
    let killed = Instant::now();
    cluster.kill9(victim);
    produce(&kafka.bootstrap, "shop", 3000..6000);
    let failover = wait_for("the victim's tasks running elsewhere", FLOW, || {
        let t = task_workers(&cluster, leader, "hdfs");
        (t.len() == 3 && t.iter().all(|(s, w)| s == "RUNNING" && *w != victim_api))
            .then(|| killed.elapsed())
    });
    let expected: BTreeSet<String> = (0..6000).map(|i| format!("line-{i:05}")).collect();
    wait_for("every record in a committed file", FLOW, || {
        let files = committed(&store, "shop");
        let unique: BTreeSet<&String> = files.values().flatten().collect();
        (unique.len() >= expected.len()).then_some(())
    });
    // Every commit recorded to the end of each partition: a later commit would need records
    // past the end, so a duplicate can only be in the files already there.
    let ends = BTreeMap::from([(0, 2000), (1, 2000), (2, 2000)]);
    wait_for(
        "the commits recorded to the end of every partition",
        FLOW,
        || (sink_offsets(&cluster, leader, "hdfs") == ends).then_some(()),
    );
    let files = committed(&store, "shop");
    let all: Vec<&String> = files.values().flatten().collect();
    let unique: BTreeSet<&String> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "no record twice");
    assert_eq!(
        unique,
        expected.iter().collect::<BTreeSet<_>>(),
        "no record lost"
    );
    // Confluent's names under data/log/shop/partition=N/, ranges that tile each partition.
    for path in files.keys() {
        let partition = path.split('+').nth(1).expect("a partition in the name");
        assert!(
            path.starts_with(&format!("data/log/shop/partition={partition}/")),
            "{path}"
        );
    }
    let sizes: Vec<(String, usize)> = files.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    assert_eq!(
        check_tiling(&sizes, "shop", ".json").len(),
        3,
        "every partition has files"
    );
    say(format!(
        "STORAGE SINK: {} records in {} files exactly once; node {victim}'s tasks moved {} ms after kill -9",
        all.len(),
        files.len(),
        failover.as_millis()
    ));
}

#[test]
fn records_without_their_timestamp_field_go_to_the_dead_letter_queue_through_the_task() {
    let kafka = Kafka::start(&[("clicks", 1), ("dlq-clicks", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let store = cluster.dir.path().join("store");
    let input = cluster.dir.path().join("clicks.txt");
    let (mut lines, mut good, mut bad) = (Vec::new(), BTreeSet::new(), Vec::new());
    for i in 0..40i64 {
        if i % 8 == 5 {
            let line = format!(r#"{{"user":"u{i}","page":"/cart"}}"#);
            bad.push((i, line.clone()));
            lines.push(line);
        } else {
            // 2019-03-14T16:37:12Z plus i seconds.
            lines.push(format!(
                r#"{{"user":"u{i}","timestamp":{}}}"#,
                1_552_581_432_000 + i * 1000
            ));
            good.insert(format!("u{i}"));
        }
    }
    std::fs::write(&input, lines.join("\n") + "\n").expect("write the clicks");
    create_source(&cluster, leader, &input, "clicks");
    let store_url = store.to_string_lossy().to_string();
    create(
        &cluster,
        leader,
        "clicks-hdfs",
        &[
            (
                "connector.class",
                "io.confluent.connect.hdfs3.Hdfs3SinkConnector",
            ),
            ("topics", "clicks"),
            ("store.url", &store_url),
            ("topics.dir", "/data/log"),
            ("format.class", "io.confluent.connect.hdfs3.json.JsonFormat"),
            ("flush.size", "10"),
            ("rotate.schedule.interval.ms", "2000"),
            (
                "partitioner.class",
                "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
            ),
            ("partition.duration.ms", "3600000"),
            ("path.format", "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"),
            ("locale", "en"),
            ("timezone", "UTC"),
            ("timestamp.extractor", "RecordField"),
            ("timestamp.field", "timestamp"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("value.converter.schemas.enable", "false"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "dlq-clicks"),
            ("errors.deadletterqueue.topic.replication.factor", "1"),
            ("errors.deadletterqueue.context.headers.enable", "true"),
        ],
    );
    let files = wait_for("every good click in a committed file", FLOW, || {
        let files = committed_json(&store, "clicks");
        let n: usize = files.values().map(Vec::len).sum();
        (n >= good.len()).then_some(files)
    });
    let users: Vec<String> = files
        .values()
        .flatten()
        .map(|v| v["user"].as_str().expect("user").to_string())
        .collect();
    assert_eq!(users.len(), good.len(), "each once");
    assert_eq!(users.into_iter().collect::<BTreeSet<_>>(), good);
    assert!(
        files
            .keys()
            .all(|k| k.starts_with("data/log/clicks/year=2019/month=03/day=14/hour=16/clicks+0+")),
        "{:?}",
        files.keys()
    );
    let dead = read_topic(&kafka, "dlq-clicks", bad.len());
    assert_eq!(dead.len(), bad.len(), "{dead:?}");
    for (record, (offset, line)) in dead.iter().zip(&bad) {
        assert_eq!(record["value"].as_str(), Some(line.as_str()), "as consumed");
        let h = &record["headers"];
        let header = |name: &str| error_header(h, name);
        assert_eq!(header("stage").as_deref(), Some("TASK_PUT"));
        assert_eq!(header("offset"), Some(offset.to_string()));
        assert_eq!(
            header("class.name").as_deref(),
            Some("io.confluent.connect.hdfs3.Hdfs3SinkConnector")
        );
        assert!(
            header("exception.message")
                .is_some_and(|m| m.contains(r#"timestamp.field "timestamp": not in the value"#)),
            "{h}"
        );
    }
    // Raft's offset covers the dead-lettered records too.
    wait_for("the sink's offset at the end of the topic", FLOW, || {
        let offsets = cluster.json(leader, &["connectors", "offsets", "clicks-hdfs"]);
        (offsets["offsets"][0]["offset"]["kafka_offset"].as_i64() == Some(40)).then_some(())
    });
    say(format!(
        "STORAGE SINK DLQ: {} clicks in hourly files, {} without a timestamp reported by the task to dlq-clicks",
        good.len(),
        dead.len()
    ));
}

/// KIP-875 on the HDFS sink, whose commits are recorded in Raft and whose file names say where
/// each partition ends: an alter makes the sink write from the new offset (files of
/// overlapping ranges), and after a reset it starts where the consumer does — the names of
/// the files already there do not take over (they would for a directory met for the first
/// time).
#[test]
fn altered_and_reset_offsets_take_effect_on_the_hdfs_sink() {
    let kafka = Kafka::start(&[("replay", 3)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let store = cluster.dir.path().join("store");
    let store_url = format!("file://{}", store.display());
    produce(&kafka.bootstrap, "replay", 0..30);
    json_files_sink(
        &cluster,
        leader,
        &store_url,
        &[("topics", "replay"), ("flush.size", "5")],
    );
    let at_the_end = BTreeMap::from([(0, 10), (1, 10), (2, 10)]);
    wait_for("every record committed", FLOW, || {
        (sink_offsets(&cluster, leader, "hdfs") == at_the_end).then_some(())
    });
    let names = |store: &Path| -> BTreeSet<String> {
        committed(store, "replay")
            .keys()
            .filter_map(|k| k.rsplit('/').next().map(str::to_string))
            .collect()
    };
    assert!(names(&store).contains("replay+0+0000000005+0000000009.json"));

    stop(&cluster, leader, "hdfs");
    alter_offsets(
        &cluster,
        leader,
        "hdfs",
        r#"{"offsets":[{"partition":{"kafka_topic":"replay","kafka_partition":0},"offset":{"kafka_offset":3}}]}"#,
    );
    cluster.cli(leader, &["connectors", "resume", "hdfs"]);
    wait_for("partition 0 written again from offset 3", FLOW, || {
        names(&store)
            .contains("replay+0+0000000003+0000000007.json")
            .then_some(())
    });
    wait_for("the commit recorded", FLOW, || {
        (sink_offsets(&cluster, leader, "hdfs").get(&0) == Some(&8)).then_some(())
    });

    stop(&cluster, leader, "hdfs");
    let reset = reset_offsets(&cluster, leader, "hdfs");
    assert_eq!(reset["offsets"], serde_json::json!([]));
    cluster.cli(leader, &["connectors", "resume", "hdfs"]);
    // From the beginning: the same ranges again (same names, so the files stay as they are),
    // each commit recorded anew; taking over the names would have resumed at 10, committing
    // nothing.
    wait_for(
        "every partition committed again from its start",
        FLOW,
        || (sink_offsets(&cluster, leader, "hdfs") == at_the_end).then_some(()),
    );
    say("KIP-875 on the HDFS sink: an alter to offset 3 wrote 3..7 again; after a reset each partition was committed again from offset 0");
}
