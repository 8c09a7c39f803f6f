//! Seed 000 on a real HDFS, Hadoop 2.7.3 and Hadoop 3 side by side: the team's
//! HdfsSinkConnector config, unchanged but for the NameNode's address (and the class,
//! `Hdfs3SinkConnector`, on Hadoop 3) — AvroFormat, TimeBasedPartitioner with 10-minute buckets,
//! `path.format=yyyyMMdd/HH/mm/yyyyMMddHHmm`, `flush.size=600000`, a scheduled rotation every
//! 10 minutes, six tasks — through three ferryd processes, with `kill -9` of a worker while
//! its files are open. The committed files are listed by Hadoop's FsShell and read by Python's
//! fastavro: every record exactly once, Confluent's names and directories.
//!
//! The scheduled rotation is the only commit this config makes with a few thousand records,
//! and it fires on the wall clock's 10-minute marks: the tasks' clock is set ahead
//! (`[worker] test_clock_ahead_ms`) so that one comes 90 s after the nodes start.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ferry_tests::hdfs::{Hadoop, Hdfs};
use ferry_tests::pipeline::{create, follower_running, sink_offsets, started, task_workers};
use ferry_tests::storage::check_tiling;
use ferry_tests::{error_header, python, read_topic, say, wait_for, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::Value;

const TOPIC: &str = "irene-shopping-log";
const PARTITIONS: usize = 6;
const RECORDS: usize = 12_000;
const TEN_MINUTES_MS: u64 = 600_000;
/// How long after the nodes start their tasks' clock reaches a 10-minute mark (the set-up up
/// to the kill's recovery takes about 15 s).
const BEFORE_THE_MARK_MS: u64 = 90_000;
const FLOW: Duration = Duration::from_secs(120);

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Workers that read JSON with schemas, as connect-distributed.properties configures them.
fn json_workers() -> Settings {
    Settings {
        worker_converters: vec![(
            "value.converter".into(),
            "org.apache.kafka.connect.json.JsonConverter".into(),
        )],
        ..Settings::default()
    }
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
        let record = BaseRecord::<(), str>::to(TOPIC)
            .payload(value.as_str())
            .partition((i % PARTITIONS) as i32);
        ferry_tests::send_waiting(&producer, record);
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

/// Every record of the committed files of `topic`, read by fastavro (`read_avro.py`) or
/// pyarrow (`read_parquet.py`) after `hdfs dfs -get`: file path in HDFS -> records.
fn committed(
    hdfs: &Hdfs,
    topic: &str,
    reader: &str,
    work: &Path,
    round: usize,
) -> BTreeMap<String, Vec<Value>> {
    let files = hdfs.files(&format!("/data/log/{topic}"));
    if files.is_empty() {
        return BTreeMap::new();
    }
    let local = work.join(format!("got-{topic}-{round}"));
    hdfs.get(&format!("/data/log/{topic}"), &local);
    let mut paths = Vec::new();
    for f in &files {
        let relative = f
            .strip_prefix(&format!("/data/log/{topic}/"))
            .unwrap_or_else(|| panic!("{f} outside the topic's directory"));
        paths.push(local.join(relative));
    }
    let out = Command::new(python())
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("py")
                .join(reader),
        )
        .args(&paths)
        .output()
        .expect("run fastavro");
    assert!(
        out.status.success(),
        "{reader} could not read the files: {}",
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
            .entry(format!("/data/log/{topic}/{relative}"))
            .or_default()
            .push(row);
    }
    by_file
}

/// Seed 000's connector on one HDFS release: its name, its class, and the file system.
struct Target {
    name: &'static str,
    class: &'static str,
    hdfs: Hdfs,
}

/// Seed 000's config on Hadoop 2.7.3 (`HdfsSinkConnector`, as the seed has it) and, beside it
/// on the same topic through the same workers and the same `kill -9`, on Hadoop 3
/// (`Hdfs3SinkConnector`): one wait for the 10-minute mark serves both.
#[test]
fn seed_000_config_writes_avro_into_real_hdfs_2_and_3_exactly_once_across_a_kill_9() {
    let targets = [
        Target {
            name: "irene-hdfs",
            class: "io.confluent.connect.hdfs.HdfsSinkConnector",
            hdfs: Hdfs::start_hadoop(Hadoop::Two),
        },
        Target {
            name: "irene-hdfs3",
            class: "io.confluent.connect.hdfs3.Hdfs3SinkConnector",
            hdfs: Hdfs::start_hadoop(Hadoop::Three),
        },
    ];
    // Three brokers, as the seed's cluster has.
    let kafka = Kafka::three(&[(TOPIC, PARTITIONS as i32)]);
    // The tasks' wall clock is set ahead so that a 10-minute mark comes `BEFORE_THE_MARK_MS`
    // after the nodes start: everything up to the kill's recovery fits before it, and the
    // scheduled rotation at the mark commits everything.
    let ahead =
        (TEN_MINUTES_MS - (now_ms() + BEFORE_THE_MARK_MS) % TEN_MINUTES_MS) % TEN_MINUTES_MS;
    let settings = Settings {
        clock_ahead_ms: ahead,
        ..json_workers()
    };
    let (mut cluster, leader) = started(3, &kafka, settings);
    let work = cluster.dir.path().to_path_buf();
    produce(&kafka.bootstrap);

    for target in &targets {
        // Seed 000's config as the team wrote it; only the NameNode's address is ours (and
        // the class, on Hadoop 3).
        let hdfs_url = format!("hdfs://{}", target.hdfs.namenode);
        let seed = [
            ("connector.class", target.class),
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
        let file = cluster.connector_file(target.name, &seed);
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
    }
    let running = |cluster: &ferry_tests::Cluster, target: &Target| {
        let t = task_workers(cluster, leader, target.name);
        (t.len() == 6 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(t)
    };
    for target in &targets {
        wait_for("six sink tasks running", FLOW, || running(&cluster, target));

        // The files are open under +tmp, in the seed's layout, one per partition.
        let open = wait_for("a temporary file per partition", FLOW, || {
            let tmp = target.hdfs.files(&format!("/data/log/+tmp/{TOPIC}"));
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
            "{} open under +tmp:\n{}",
            target.name,
            target.hdfs.shell(&["-ls", "-R", "/data/log/+tmp"]).trim()
        ));
    }

    // kill -9 a follower whose tasks have files open.
    let victim = follower_running(&cluster, leader, targets[0].name);
    let victim_api = cluster.node(victim).api.clone();
    let killed = Instant::now();
    cluster.kill9(victim);
    let failover = wait_for("the victim's tasks running elsewhere", FLOW, || {
        targets
            .iter()
            .all(|target| {
                running(&cluster, target).is_some_and(|t| t.iter().all(|(_, w)| *w != victim_api))
            })
            .then(|| killed.elapsed())
    });
    say(format!(
        "node {victim} killed; its tasks ran elsewhere {} ms later",
        failover.as_millis()
    ));

    // The scheduled rotation at the next 10-minute mark of the tasks' clock commits
    // everything.
    let mark = TEN_MINUTES_MS - (now_ms() + ahead) % TEN_MINUTES_MS;
    assert!(
        mark < BEFORE_THE_MARK_MS,
        "the mark passed before the kill's recovery"
    );
    say(format!(
        "the scheduled rotation comes in {} s: waiting for its commits",
        mark / 1000
    ));
    // Every record's commit recorded in Raft (a rotation commits its files there, then renames
    // them): then the files are read.
    for target in &targets {
        wait_for(
            "every record's commit recorded",
            Duration::from_millis(mark) + FLOW,
            || {
                let offsets = sink_offsets(&cluster, leader, target.name);
                (offsets.values().sum::<i64>() >= RECORDS as i64).then_some(())
            },
        );
    }
    for target in &targets {
        check_seed_000_files(target, &work.join(target.name));
    }
    say(format!(
        "SEED 000 ON HADOOP 2 AND 3: {RECORDS} records in Avro files exactly once on each; node {victim}'s tasks moved {} ms after kill -9",
        failover.as_millis()
    ));
}

/// What seed 000's connector committed on `target`'s HDFS after the rotation: every record
/// exactly once, as produced, in Confluent's names and directories, nothing left under +tmp.
fn check_seed_000_files(target: &Target, work: &Path) {
    let hdfs = &target.hdfs;
    std::fs::create_dir_all(work).expect("a work directory");
    let mut round = 0;
    let files = wait_for("every record in a committed file", FLOW, || {
        round += 1;
        let files = committed(hdfs, TOPIC, "read_avro.py", work, round);
        let n: usize = files.values().map(Vec::len).sum();
        (n >= RECORDS).then_some(files)
    });
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
    assert_eq!(ids.len(), unique.len(), "{}: no record twice", target.name);
    assert_eq!(
        unique,
        (0..RECORDS as i64).collect(),
        "{}: no record lost",
        target.name
    );

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
    say(format!(
        "{}: hdfs dfs -ls -R /data/log:\n{}",
        target.name,
        listing.trim()
    ));
    assert!(
        hdfs.files(&format!("/data/log/+tmp/{TOPIC}")).is_empty(),
        "{}: nothing left under +tmp after the commit",
        target.name
    );
    say(format!(
        "{}: {} records in {} Avro files, exactly once",
        target.name,
        ids.len(),
        files.len()
    ));
}

/// `orders` records: structs with a Decimal amount of scale 2, but every 25th has a scale of
/// 200, which no Parquet DECIMAL holds (a schema change that must not rotate the file either).
/// Even numbers are region `eu` in partition 0, odd ones `us` in partition 1.
fn produce_orders(bootstrap: &str, numbers: std::ops::Range<usize>) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .create()
        .expect("a producer");
    let schema = |scale: u32| {
        format!(
            r#"{{"type":"struct","name":"order","optional":false,"fields":[{{"field":"id","type":"int32","optional":false}},{{"field":"region","type":"string","optional":false}},{{"field":"amount","type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{{"scale":"{scale}"}}}}]}}"#
        )
    };
    for i in numbers {
        let scale = if is_unwritable(i) { 200 } else { 2 };
        // 12.34 + i (at scale 2) as Connect's Decimal: base64 of the big-endian unscaled value.
        let amount = base64_of(&(1234 + 100 * i as u32).to_be_bytes());
        let region = ["eu", "us"][i % 2];
        let value = format!(
            r#"{{"schema":{},"payload":{{"id":{i},"region":"{region}","amount":"{amount}"}}}}"#,
            schema(scale)
        );
        let record = BaseRecord::<(), str>::to("orders")
            .payload(value.as_str())
            .partition((i % 2) as i32);
        ferry_tests::send_waiting(&producer, record);
    }
    producer.flush(Duration::from_secs(30)).expect("delivered");
}

fn is_unwritable(i: usize) -> bool {
    i % 25 == 7
}

fn base64_of(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The ids of the rows of the committed Parquet files of `orders` (pyarrow), once there are
/// `want` of them; each file holds its region's rows, compressed with zstd.
fn order_rows(hdfs: &Hdfs, work: &Path, round: &mut usize, want: usize) -> Vec<i64> {
    wait_for("the rows in committed Parquet files", FLOW, || {
        *round += 1;
        let ids: Vec<i64> = committed(hdfs, "orders", "read_parquet.py", work, *round)
            .into_iter()
            .flat_map(|(path, records)| {
                let region = if path.contains("/region=eu/") { 0 } else { 1 };
                records.into_iter().map(move |r| {
                    let id = r["record"]["id"].as_i64().unwrap_or(-1);
                    assert_eq!(id % 2, region, "{path} holds its region's rows: {r}");
                    assert_eq!(r["codec"], "ZSTD", "{r}");
                    id
                })
            })
            .collect();
        (ids.len() >= want).then_some(ids)
    })
}

/// The states of `orders-hdfs`'s tasks.
fn task_states(cluster: &ferry_tests::Cluster, node: u64) -> Vec<String> {
    task_workers(cluster, node, "orders-hdfs")
        .into_iter()
        .map(|(state, _)| state)
        .collect()
}

#[test]
fn parquet_on_hdfs_dead_letters_what_has_no_row_and_rides_out_namenode_outages() {
    let mut hdfs = Hdfs::start();
    let kafka = Kafka::start(&[("orders", 2), ("dlq-orders", 1)]);
    let (cluster, leader) = started(1, &kafka, json_workers());
    let work = cluster.dir.path().to_path_buf();
    let store_url = format!("hdfs://{}", hdfs.namenode);
    create(
        &cluster,
        leader,
        "orders-hdfs",
        &[
            (
                "connector.class",
                "io.confluent.connect.hdfs3.Hdfs3SinkConnector",
            ),
            ("topics", "orders"),
            ("tasks.max", "2"),
            ("store.url", &store_url),
            ("topics.dir", "/data/log"),
            (
                "format.class",
                "io.confluent.connect.hdfs3.parquet.ParquetFormat",
            ),
            ("parquet.codec", "zstd"),
            // Each 100 records of a partition hold 96 rows: two files, nothing left open.
            ("flush.size", "48"),
            (
                "partitioner.class",
                "io.confluent.connect.storage.partitioner.FieldPartitioner",
            ),
            ("partition.field.name", "region"),
            ("errors.tolerance", "all"),
            ("errors.retry.timeout", "30000"),
            ("errors.deadletterqueue.topic.name", "dlq-orders"),
            ("errors.deadletterqueue.topic.replication.factor", "1"),
            ("errors.deadletterqueue.context.headers.enable", "true"),
        ],
    );
    let rows = |n: usize| -> BTreeSet<i64> {
        (0..n)
            .filter(|i| !is_unwritable(*i))
            .map(|i| i as i64)
            .collect()
    };
    let mut round = 0;
    produce_orders(&kafka.bootstrap, 0..400);
    let ids = order_rows(&hdfs, &work, &mut round, rows(400).len());
    assert_eq!(ids.iter().copied().collect::<BTreeSet<_>>(), rows(400));
    assert_eq!(ids.len(), rows(400).len(), "each row once");
    // Each commit of files is timed in the connector's histogram: at least one a partition.
    let commits = cluster.metric(
        [leader],
        "ferry_sink_commit_seconds_count",
        &[("connector", "orders-hdfs")],
    );
    assert!(commits >= 2, "{commits} HDFS commits timed");
    // What has no row is in the DLQ, with the reason.
    let dead = read_topic(&kafka, "dlq-orders", 16);
    assert_eq!(dead.len(), 16, "{dead:?}");
    for record in &dead {
        let h = &record["headers"];
        assert_eq!(error_header(h, "stage").as_deref(), Some("TASK_PUT"), "{h}");
        assert!(
            error_header(h, "exception.message")
                .is_some_and(|m| m.contains("a Decimal scale of 200 does not fit Parquet")),
            "{h}"
        );
    }
    say(format!(
        "{} rows in Parquet, 16 records of an unwritable Decimal scale in the DLQ",
        ids.len()
    ));

    // The NameNode goes away while no file is open and records arrive: creating a file
    // fails, is retried with backoff (the task stays RUNNING), and lands once it is back.
    hdfs.kill_namenode();
    produce_orders(&kafka.bootstrap, 400..600);
    wait_for("a retried create in the log", FLOW, || {
        let log = cluster.log_text(leader);
        (log.contains("retriable failure: retrying")
            && log.contains(&format!("create {store_url}/data/log/+tmp/orders/")))
        .then_some(())
    });
    assert_eq!(task_states(&cluster, leader), ["RUNNING", "RUNNING"]);
    let restarted = Instant::now();
    hdfs.start_namenode();
    let ids = order_rows(&hdfs, &work, &mut round, rows(600).len());
    assert_eq!(ids.len(), rows(600).len(), "each row once");
    say(format!(
        "NameNode down and back: the retried writes landed {} ms after its restart",
        restarted.elapsed().as_millis()
    ));

    // Down longer than errors.retry.timeout: FAILED, with a trace naming the store; back, a
    // restart from the CLI resumes from the last commit.
    hdfs.kill_namenode();
    produce_orders(&kafka.bootstrap, 600..700);
    let trace = wait_for(
        "a task FAILED by the outage",
        Duration::from_secs(180),
        || {
            let status = cluster.json(leader, &["connectors", "status", "orders-hdfs"]);
            status["tasks"].as_array().and_then(|tasks| {
                tasks
                    .iter()
                    .find(|t| t["state"] == "FAILED")
                    .map(|t| t["trace"].as_str().unwrap_or_default().to_string())
            })
        },
    );
    assert!(trace.contains("errors.retry.timeout"), "{trace}");
    assert!(
        trace.contains(&store_url),
        "the trace names the store: {trace}"
    );
    say(format!(
        "FAILED after the retry timeout: {}",
        trace.lines().next().unwrap_or_default()
    ));
    hdfs.start_namenode();
    cluster.cli(
        leader,
        &[
            "connectors",
            "restart",
            "orders-hdfs",
            "--include-tasks",
            "--only-failed",
        ],
    );
    let ids = order_rows(&hdfs, &work, &mut round, rows(700).len());
    assert_eq!(ids.len(), rows(700).len(), "each row once");
    assert_eq!(
        ids.into_iter().collect::<BTreeSet<_>>(),
        rows(700),
        "no row lost"
    );

    // Down while files are open: their close fails, so what they held is given up, the
    // partitions are consumed again from their last commit, and the task rides it out.
    produce_orders(&kafka.bootstrap, 700..740);
    wait_for("open files of both regions", FLOW, || {
        let open = hdfs.files("/data/log/+tmp/orders");
        (["region=eu", "region=us"]
            .iter()
            .all(|r| open.iter().any(|f| f.contains(r))))
        .then_some(())
    });
    hdfs.kill_namenode();
    produce_orders(&kafka.bootstrap, 740..800);
    wait_for("a rewind in the log", FLOW, || {
        cluster
            .log_text(leader)
            .contains("consuming again from the task's last commit")
            .then_some(())
    });
    // The outage lasts until a write is retried against it after the rewind.
    let retries = || {
        cluster.metric(
            cluster.running(),
            "kafka_connect_task_error_total_retries",
            &[("connector", "orders-hdfs")],
        )
    };
    let after_rewind = retries();
    wait_for("a write retried while the NameNode is down", FLOW, || {
        (retries() > after_rewind).then_some(())
    });
    assert_eq!(task_states(&cluster, leader), ["RUNNING", "RUNNING"]);
    hdfs.start_namenode();
    let ids = order_rows(&hdfs, &work, &mut round, rows(800).len());
    assert_eq!(ids.len(), rows(800).len(), "each row once");
    assert_eq!(
        ids.into_iter().collect::<BTreeSet<_>>(),
        rows(800),
        "no row lost"
    );
    let status = cluster.json(leader, &["connectors", "status", "orders-hdfs"]);
    assert!(
        status["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().all(|t| t["state"] == "RUNNING")),
        "no task failed: {status}"
    );
    let dead = read_topic(&kafka, "dlq-orders", 32);
    let dead_offsets: BTreeSet<(i64, i64)> = dead
        .iter()
        .filter_map(|r| {
            let h = &r["headers"];
            Some((
                error_header(h, "partition")?.parse().ok()?,
                error_header(h, "offset")?.parse().ok()?,
            ))
        })
        .collect();
    assert_eq!(
        dead_offsets.len(),
        32,
        "every unwritable record dead-lettered: {dead:?}"
    );
    say(format!(
        "PARQUET ON HDFS: {} rows exactly once across three NameNode outages; {} DLQ records for 32 unwritable records",
        rows(800).len(),
        dead.len()
    ));
}
