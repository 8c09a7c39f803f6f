//! Seed 000 on a real HDFS: the team's HdfsSinkConnector config, unchanged but for the
//! NameNode's address — AvroFormat, TimeBasedPartitioner with 10-minute buckets,
//! `path.format=yyyyMMdd/HH/mm/yyyyMMddHHmm`, `flush.size=600000`, a scheduled rotation every
//! 10 minutes, six tasks — through three ferryd processes, with `kill -9` of a worker while
//! its files are open. The committed files are listed by Hadoop's FsShell and read by Python's
//! fastavro: every record exactly once, Confluent's names and directories.
//!
//! The scheduled rotation is the only commit this config makes with a few thousand records,
//! and it fires on the wall clock's 10-minute marks: the test waits for one (≤ 10 minutes).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_tests::hdfs::Hdfs;
use ferry_tests::pipeline::{started, task_workers};
use ferry_tests::storage::check_tiling;
use ferry_tests::{python, say, wait_for, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;

const TOPIC: &str = "irene-shopping-log";
const PARTITIONS: usize = 6;
const RECORDS: usize = 12_000;
const TEN_MINUTES_MS: u64 = 600_000;
const FLOW: Duration = Duration::from_secs(120);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Shopping-log records as the workers' JsonConverter (schemas.enable=true) reads them,
/// spread over the partitions.
fn produce(bootstrap: &str) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .expect("a producer");
    let schema = r#"{"type":"struct","name":"shopping_log","optional":false,"fields":[{"field":"id","type":"int32","optional":false},{"field":"user","type":"string","optional":false},{"field":"item","type":"string","optional":true},{"field":"price","type":"int64","optional":false},{"field":"timestamp","type":"int64","optional":false}]}"#;
    for i in 0..RECORDS {
        let value = format!(
            r#"{{"schema":{schema},"payload":{{"id":{i},"user":"irene-{:03}","item":"item-{:05}","price":{},"timestamp":{}}}}}"#,
            i % 97,
            i % 1013,
            1000 + i % 50_000,
            1_552_581_432_000u64 + i as u64
        );
        let mut record = BaseRecord::<(), str>::to(TOPIC)
            .payload(value.as_str())
            .partition((i % PARTITIONS) as i32);
        while let Err((_, r)) = producer.send(record) {
            record = r;
            producer.poll(Duration::from_millis(10));
        }
    }
    producer.flush(Duration::from_secs(30)).expect("delivered");
}

/// `yyyyMMdd/HH/mm/yyyyMMddHHmm` with mm a 10-minute mark, as seed 000's path.format makes it.
fn is_bucket(dirs: &[&str]) -> bool {
    let digits = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit());
    dirs.len() == 4
        && digits(dirs[0], 8)
        && digits(dirs[1], 2)
        && digits(dirs[2], 2)
        && dirs[2].ends_with('0')
        && dirs[3] == format!("{}{}{}", dirs[0], dirs[1], dirs[2])
}

/// Every record of the committed files, read by fastavro after `hdfs dfs -get`: file path in
/// HDFS → records.
fn committed(hdfs: &Hdfs, work: &Path, round: usize) -> BTreeMap<String, Vec<Value>> {
    let files = hdfs.files(&format!("/data/log/{TOPIC}"));
    if files.is_empty() {
        return BTreeMap::new();
    }
    let local = work.join(format!("got-{round}"));
    hdfs.get(&format!("/data/log/{TOPIC}"), &local);
    let mut paths = Vec::new();
    for f in &files {
        let relative = f
            .strip_prefix(&format!("/data/log/{TOPIC}/"))
            .unwrap_or_else(|| panic!("{f} outside the topic's directory"));
        paths.push(local.join(relative));
    }
    let out = Command::new(python())
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/py/read_avro.py"))
        .args(&paths)
        .output()
        .expect("run fastavro");
    assert!(
        out.status.success(),
        "fastavro could not read the files: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut by_file: BTreeMap<String, Vec<Value>> =
        files.iter().map(|f| (f.clone(), Vec::new())).collect();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let row: Value = serde_json::from_str(line).expect("a JSON line");
        let local_path = row["file"].as_str().expect("file");
        let relative = Path::new(local_path)
            .strip_prefix(&local)
            .expect("a fetched file")
            .to_string_lossy()
            .to_string();
        by_file
            .entry(format!("/data/log/{TOPIC}/{relative}"))
            .or_default()
            .push(row);
    }
    by_file
}

#[test]
fn seed_000_config_writes_avro_into_real_hdfs_exactly_once_across_a_kill_9() {
    let hdfs = Hdfs::start();
    let kafka = Kafka::start(&[(TOPIC, PARTITIONS as i32)]);
    // The workers read JSON with schemas, as connect-distributed.properties configures them.
    let settings = Settings {
        worker_converters: vec![(
            "value.converter".into(),
            "org.apache.kafka.connect.json.JsonConverter".into(),
        )],
        ..Settings::default()
    };
    let (mut cluster, leader) = started(3, &kafka, settings);
    let work = cluster.dir.path().to_path_buf();

    // Everything up to the kill's recovery must fit before the next 10-minute mark.
    let left = TEN_MINUTES_MS - now_ms() % TEN_MINUTES_MS;
    if left < 150_000 {
        say(format!(
            "{} s to a 10-minute mark: waiting for it first",
            left / 1000
        ));
        std::thread::sleep(Duration::from_millis(left + 1000));
    }
    produce(&kafka.bootstrap);

    // Seed 000's config as the team wrote it; only the NameNode's address is ours.
    let hdfs_url = format!("hdfs://{}", hdfs.namenode);
    let seed = [
        (
            "connector.class",
            "io.confluent.connect.hdfs.HdfsSinkConnector",
        ),
        ("hdfs.url", hdfs_url.as_str()),
        ("partition.duration.ms", "600000"),
        ("topics.dir", "/data/log"),
        ("tasks.max", "6"),
        ("topics", TOPIC),
        ("format.class", "io.confluent.connect.hdfs.avro.AvroFormat"),
        (
            "partitioner.class",
            "io.confluent.connect.hdfs.partitioner.TimeBasedPartitioner",
        ),
        ("path.format", "yyyyMMdd/HH/mm/yyyyMMddHHmm"),
        ("timestamp.field", "timestamp"),
        ("flush.size", "600000"),
        ("rotate.schedule.interval.ms", "600000"),
        ("errors.log.enable", "true"),
        ("errors.log.include.messages", "true"),
    ];
    let file = cluster.connector_file("irene-hdfs", &seed);
    let created = cluster.cli(
        leader,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
    assert!(created.ok(), "{created:?}");
    say(format!("created:\n{}", created.stdout.trim()));
    // Supported, or accepted with a warning that says why.
    for warned in ["timestamp.field", "timezone", "locale"] {
        assert!(
            created
                .stdout
                .lines()
                .any(|l| l.contains("warning") && l.contains(warned)),
            "no warning about {warned}: {created:?}"
        );
    }
    wait_for("six sink tasks running", FLOW, || {
        let t = task_workers(&cluster, leader, "irene-hdfs");
        (t.len() == 6 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });

    // The files are open under +tmp, in the seed's layout, one per partition.
    let open = wait_for("a temporary file per partition", FLOW, || {
        let tmp = hdfs.files(&format!("/data/log/+tmp/{TOPIC}"));
        (tmp.len() >= PARTITIONS).then_some(tmp)
    });
    for f in &open {
        let rest = f
            .strip_prefix(&format!("/data/log/+tmp/{TOPIC}/"))
            .unwrap_or_else(|| panic!("{f}"));
        let dirs: Vec<&str> = rest.split('/').collect();
        assert!(is_bucket(&dirs[..dirs.len() - 1]), "{f}");
        assert!(f.ends_with("_tmp.avro"), "{f}");
    }
    say(format!(
        "open under +tmp:\n{}",
        hdfs.shell(&["-ls", "-R", "/data/log/+tmp"]).trim()
    ));

    // kill -9 a follower whose tasks have files open.
    let workers = task_workers(&cluster, leader, "irene-hdfs");
    let victim = cluster
        .nodes
        .keys()
        .copied()
        .filter(|id| *id != leader)
        .find(|id| workers.iter().any(|(_, w)| *w == cluster.node(*id).api))
        .expect("a follower runs sink tasks");
    let victim_api = cluster.node(victim).api.clone();
    let killed = Instant::now();
    cluster.kill9(victim);
    let failover = wait_for("the victim's tasks running elsewhere", FLOW, || {
        let t = task_workers(&cluster, leader, "irene-hdfs");
        (t.len() == 6 && t.iter().all(|(s, w)| s == "RUNNING" && *w != victim_api))
            .then(|| killed.elapsed())
    });
    say(format!(
        "node {victim} killed; its tasks ran elsewhere {} ms later",
        failover.as_millis()
    ));

    // The scheduled rotation at the next 10-minute mark commits everything.
    let mark = TEN_MINUTES_MS - now_ms() % TEN_MINUTES_MS;
    say(format!(
        "waiting {} s for the scheduled rotation",
        mark / 1000
    ));
    std::thread::sleep(Duration::from_millis(mark));
    let mut round = 0;
    let files = wait_for(
        "every record in a committed file",
        Duration::from_secs(TEN_MINUTES_MS / 1000 + 120),
        || {
            round += 1;
            let files = committed(&hdfs, &work, round);
            let n: usize = files.values().map(Vec::len).sum();
            if n < RECORDS {
                std::thread::sleep(Duration::from_secs(5));
            }
            (n >= RECORDS).then_some(files)
        },
    );
    let ids: Vec<i64> = files
        .values()
        .flatten()
        .map(|row| {
            row["record"]["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("a record without an id: {row}"))
        })
        .collect();
    let unique: BTreeSet<i64> = ids.iter().copied().collect();
    assert_eq!(ids.len(), unique.len(), "no record twice");
    assert_eq!(unique, (0..RECORDS as i64).collect(), "no record lost");

    // Each record as produced, with the schema made from the Connect schema.
    let sample = files
        .values()
        .flatten()
        .find(|row| row["record"]["id"] == 4321)
        .expect("record 4321");
    assert_eq!(sample["record"]["user"], "irene-053");
    assert_eq!(sample["record"]["item"], "item-00269");
    assert_eq!(sample["record"]["timestamp"], 1_552_581_436_321i64);
    assert_eq!(sample["schema"]["name"], "shopping_log", "{sample}");
    assert_eq!(sample["codec"], "null");

    // Confluent's names in seed 000's directories; ranges that tile every partition.
    for (path, rows) in &files {
        let rest = path
            .strip_prefix(&format!("/data/log/{TOPIC}/"))
            .unwrap_or_else(|| panic!("{path}"));
        let dirs: Vec<&str> = rest.split('/').collect();
        assert!(is_bucket(&dirs[..dirs.len() - 1]), "{path}");
        let partition: i64 = rest
            .split('+')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .expect("partition");
        assert!(
            rows.iter()
                .all(|r| r["record"]["id"].as_i64().unwrap_or(-1) % PARTITIONS as i64 == partition),
            "{path} holds only its partition's records"
        );
    }
    let sizes: Vec<(String, usize)> = files.iter().map(|(k, v)| (k.clone(), v.len())).collect();
    assert_eq!(check_tiling(&sizes, TOPIC, ".avro").len(), PARTITIONS);
    let listing = hdfs.shell(&["-ls", "-R", "/data/log"]);
    say(format!("hdfs dfs -ls -R /data/log:\n{}", listing.trim()));
    assert!(
        hdfs.files(&format!("/data/log/+tmp/{TOPIC}")).is_empty(),
        "nothing left under +tmp after the commit"
    );
    say(format!(
        "SEED 000 ON HDFS: {} records in {} Avro files exactly once; node {victim}'s tasks moved {} ms after kill -9",
        ids.len(),
        files.len(),
        failover.as_millis()
    ));
}
