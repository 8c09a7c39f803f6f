//! The FileStreamSink benchmark: 1,000,000 × 1 KiB records in 256 partitions of a real
//! Apache Kafka broker, drained by Debian's kcat into a file (the baseline) and by Ferry's FileStreamSink
//! over three workers; the JSON path with transforms; the storage sink's formats into a local
//! directory and into HDFS; then the median fail-over time over several kills, and RSS under load.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_tests::hdfs::Hdfs;
use ferry_tests::postgres::Postgres;
use ferry_tests::{lines_in_work_dirs, wait_for, Cluster, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

pub const RECORDS: usize = 1_000_000;
pub const RECORD_BYTES: usize = 1024;
pub const PARTITIONS: i32 = 256;
const KILLS: usize = 10;
/// Records of the JSON path: Kafka Connect's envelope with a three-field struct schema.
const JSON_RECORDS: usize = 200_000;
const JSON_TOPIC: &str = "bench-json";

/// Create the connector of `file` and wait until `done` says its work is all there; how long
/// that took.
fn timed(
    cluster: &Cluster,
    leader: u64,
    file: &std::path::Path,
    what: &str,
    mut done: impl FnMut() -> Option<()>,
) -> Duration {
    let started = Instant::now();
    cluster.cli(
        leader,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
    wait_for(what, Duration::from_secs(900), || {
        done().map(|()| started.elapsed())
    })
}

/// One record of the JSON path and the line FileStreamSink writes for it (fixed widths, so
/// that the output's size says when every record is there).
fn json_record(i: usize) -> (String, String) {
    let id = 1_000_000_000 + i as i64;
    let user = format!("user{:04}", i % 1000);
    let item = "x".repeat(800);
    let value = format!(
        r#"{{"schema":{{"type":"struct","fields":[{{"type":"int64","optional":false,"field":"id"}},{{"type":"string","optional":true,"field":"user_id"}},{{"type":"string","optional":true,"field":"item"}}],"optional":false,"name":"bench"}},"payload":{{"id":{id},"user_id":"{user}","item":"{item}"}}}}"#
    );
    let line = format!("Struct{{id={id},user_id={user},item={item}}}\n");
    (value, line)
}

/// Produce the JSON path's records: the bytes of FileStreamSink's lines for them, and of the
/// records' values.
fn produce_json(bootstrap: &str) -> anyhow::Result<(u64, u64)> {
    produce_json_to(bootstrap, JSON_TOPIC, JSON_RECORDS, PARTITIONS)
}

/// Produce `records` records of the JSON path to `topic`, round-robin over its `partitions`:
/// the bytes of FileStreamSink's lines for them, and of the records' values.
pub fn produce_json_to(
    bootstrap: &str,
    topic: &str,
    records: usize,
    partitions: i32,
) -> anyhow::Result<(u64, u64)> {
    let producer = bench_producer(bootstrap)?;
    let (mut bytes, mut input) = (0, 0);
    for i in 0..records {
        let (value, line) = json_record(i);
        bytes += line.len() as u64;
        input += value.len() as u64;
        send(
            &producer,
            BaseRecord::<(), [u8]>::to(topic)
                .payload(value.as_bytes())
                .partition(i as i32 % partitions),
        );
    }
    producer.flush(Duration::from_secs(120))?;
    Ok((bytes, input))
}

/// A producer tuned for loading the broker fast.
fn bench_producer(bootstrap: &str) -> anyhow::Result<BaseProducer> {
    Ok(ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.num.messages", "10000")
        .set("queue.buffering.max.messages", "1000000")
        .set("queue.buffering.max.kbytes", "2097151")
        .create()?)
}

/// Send, waiting for room in the producer's queue.
fn send(producer: &BaseProducer, mut record: BaseRecord<'_, (), [u8]>) {
    loop {
        match producer.send(record) {
            Ok(()) => return,
            Err((_, r)) => {
                record = r;
                producer.poll(Duration::from_millis(10));
            }
        }
    }
}

fn produce(bootstrap: &str) -> anyhow::Result<Duration> {
    produce_to(bootstrap, "bench", RECORDS, PARTITIONS)
}

/// Produce `records` numbered records of [`RECORD_BYTES`] to `topic`, round-robin over its
/// `partitions`: how long that took.
pub fn produce_to(
    bootstrap: &str,
    topic: &str,
    records: usize,
    partitions: i32,
) -> anyhow::Result<Duration> {
    let producer = bench_producer(bootstrap)?;
    let started = Instant::now();
    let mut value = vec![b'x'; RECORD_BYTES];
    for i in 0..records {
        let tag = format!("{i:09}");
        value[..tag.len()].copy_from_slice(tag.as_bytes());
        send(
            &producer,
            BaseRecord::<(), [u8]>::to(topic)
                .payload(&value)
                .partition(i as i32 % partitions),
        );
    }
    producer.flush(Duration::from_secs(120))?;
    Ok(started.elapsed())
}

fn kcat(bootstrap: &str, out: &std::path::Path) -> anyhow::Result<Duration> {
    kcat_consume(bootstrap, "bench", out)
}

/// kcat's raw consume of all of `topic` into the file `out`: how long it took.
pub fn kcat_consume(
    bootstrap: &str,
    topic: &str,
    out: &std::path::Path,
) -> anyhow::Result<Duration> {
    let file = std::fs::File::create(out)?;
    let started = Instant::now();
    let status = Command::new("kcat")
        .args([
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
        ])
        .stdout(file)
        .stderr(Stdio::null())
        .status()?;
    anyhow::ensure!(status.success(), "kcat failed: {status}");
    Ok(started.elapsed())
}

/// A process's RSS in MiB (0 if it is gone).
pub fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<f64>()
                .ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

/// Bytes in the committed files under `dir`.
fn committed_bytes(dir: &std::path::Path) -> u64 {
    committed_files(dir).1
}

/// The files under `dir` and their bytes.
fn committed_files(dir: &std::path::Path) -> (u64, u64) {
    let (mut files, mut total) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(m) = entry.metadata() {
                files += 1;
                total += m.len();
            }
        }
    }
    (files, total)
}

fn sink_bytes(cluster: &Cluster) -> u64 {
    output_bytes(cluster, "bench.out")
}

fn output_bytes(cluster: &Cluster, file: &str) -> u64 {
    cluster
        .nodes
        .values()
        .filter_map(|n| std::fs::metadata(n.work_dir.join(file)).ok())
        .map(|m| m.len())
        .sum()
}

fn sink_task_workers(cluster: &Cluster, node: u64) -> Vec<(String, String)> {
    let out = cluster.cli_on(&[node], &["-o", "json", "connectors", "status", "bench"]);
    if !out.ok() {
        return Vec::new();
    }
    out.json()["tasks"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    (
                        t["state"].as_str().unwrap_or_default().to_string(),
                        t["worker_id"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn run() -> anyhow::Result<()> {
    let kafka = Kafka::start(&[
        ("bench", PARTITIONS),
        (JSON_TOPIC, PARTITIONS),
        ("bench-pg-100-copied", 1),
        ("bench-pg-1000-copied", 1),
    ]);
    let produced = produce(&kafka.bootstrap)?;
    let mb = (RECORDS * RECORD_BYTES) as f64 / 1e6;
    println!(
        "input     {RECORDS} × {RECORD_BYTES} B records in {PARTITIONS} partitions produced in {:.1} s",
        produced.as_secs_f64()
    );
    let dir = tempfile::tempdir()?;
    let raw = kcat(&kafka.bootstrap, &dir.path().join("kcat.out"))?;
    let kcat_rate = RECORDS as f64 / raw.as_secs_f64();
    println!(
        "baseline  kcat -C -e -q to a file:                  {:>9.0} records/s  {:>7.1} MB/s  ({:.2} s)",
        kcat_rate,
        mb / raw.as_secs_f64(),
        raw.as_secs_f64()
    );

    let settings = Settings {
        // FileStreamSink's output is complete at its flush, which comes with the offset
        // commit: a short interval keeps its figure from being rounded up to the interval.
        offset_flush_ms: 500,
        // Warnings, and the line each worker logs once registered (`started` waits for them).
        log_filter: "warn,ferryd::startup=info".into(),
        ..Settings::default()
    };
    let (cluster, leader) = ferry_tests::pipeline::started(3, &kafka, settings);
    let file = cluster.connector_file(
        "bench",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "bench"),
            ("tasks.max", "6"),
            ("file", "bench.out"),
        ],
    );
    let target = (RECORDS * (RECORD_BYTES + 1)) as u64;
    let mut peak_rss: f64 = 0.0;
    let took = timed(
        &cluster,
        leader,
        &file,
        "the sink to write every record",
        || {
            for node in cluster.nodes.values() {
                if let Some(pid) = node.pid() {
                    peak_rss = peak_rss.max(rss_mib(pid));
                }
            }
            (sink_bytes(&cluster) >= target).then_some(())
        },
    );
    let rate = RECORDS as f64 / took.as_secs_f64();
    println!(
        "ferry     FileStreamSink, 6 tasks on 3 workers:     {:>9.0} records/s  {:>7.1} MB/s  ({:.2} s; {:.0}% of kcat)",
        rate,
        mb / took.as_secs_f64(),
        took.as_secs_f64(),
        100.0 * rate / kcat_rate
    );
    println!("memory    worker RSS under load (peak of 3):         {peak_rss:>9.1} MiB");
    let lines = lines_in_work_dirs(&cluster, "bench.out").len();
    anyhow::ensure!(
        lines >= RECORDS,
        "the sink wrote {lines} lines, fewer than {RECORDS}"
    );

    // The JSON path: Kafka Connect's envelope decoded by JsonConverter, then seed 003's
    // ValueToKey + ExtractField$Key, into FileStreamSink.
    let (json_bytes, json_input) = produce_json(&kafka.bootstrap)?;
    let file = cluster.connector_file(
        "bench-json",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", JSON_TOPIC),
            ("tasks.max", "6"),
            ("file", "bench-json.out"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("transforms", "createKey,extractKey"),
            (
                "transforms.createKey.type",
                "org.apache.kafka.connect.transforms.ValueToKey",
            ),
            ("transforms.createKey.fields", "user_id"),
            (
                "transforms.extractKey.type",
                "org.apache.kafka.connect.transforms.ExtractField$Key",
            ),
            ("transforms.extractKey.field", "user_id"),
        ],
    );
    let took = timed(
        &cluster,
        leader,
        &file,
        "the JSON sink to write every record",
        || (output_bytes(&cluster, "bench-json.out") >= json_bytes).then_some(()),
    );
    let json_rate = JSON_RECORDS as f64 / took.as_secs_f64();
    println!(
        "ferry     JSON with schema + ValueToKey + ExtractField$Key: {:>9.0} records/s  ({:.2} s for {JSON_RECORDS}; {:.0}% of the String path's records/s)",
        json_rate,
        took.as_secs_f64(),
        100.0 * json_rate / rate
    );

    formats(&cluster, leader, json_rate, json_input)?;
    jdbc(&cluster, leader, json_rate)?;

    // The storage sink (HDFS sink on a local directory), JsonFormat: the same 1 KiB records
    // as JSON strings, committed exactly once through Raft.
    let store = tempfile::tempdir()?;
    let store_url = store.path().to_string_lossy().to_string();
    let file = cluster.connector_file(
        "bench-store",
        &[
            (
                "connector.class",
                "io.confluent.connect.hdfs.HdfsSinkConnector",
            ),
            ("topics", "bench"),
            ("tasks.max", "6"),
            ("store.url", &store_url),
            ("topics.dir", "/bench"),
            ("format.class", "io.confluent.connect.hdfs.json.JsonFormat"),
            ("flush.size", "1000"),
            ("rotate.schedule.interval.ms", "1000"),
        ],
    );
    // Each record is a JSON string of its 1024 characters and a newline.
    let store_target = (RECORDS * (RECORD_BYTES + 3)) as u64;
    let took = timed(
        &cluster,
        leader,
        &file,
        "the storage sink to commit every record",
        || (committed_bytes(&store.path().join("bench/bench")) >= store_target).then_some(()),
    );
    let store_rate = RECORDS as f64 / took.as_secs_f64();
    println!(
        "ferry     storage sink, JsonFormat to a local dir:  {:>9.0} records/s  {:>7.1} MB/s  ({:.2} s; {:.0}% of FileStreamSink's records/s)",
        store_rate,
        store_target as f64 / 1e6 / took.as_secs_f64(),
        took.as_secs_f64(),
        100.0 * store_rate / rate
    );
    cluster.cli(leader, &["connectors", "delete", "bench-store"]);
    drop(cluster);

    failover(&kafka);
    drop(kafka);
    Ok(())
}

/// `ferry-bench failover`: the fail-over measurement alone, on a topic of its own records.
pub fn failover_only() -> anyhow::Result<()> {
    let kafka = Kafka::start(&[("bench", PARTITIONS)]);
    produce(&kafka.bootstrap)?;
    failover(&kafka);
    Ok(())
}

/// Fail-over, with ferryd's own heartbeat, election and worker timeout settings: kill -9 a
/// non-leader worker running sink tasks; time until its tasks run elsewhere; bring it back and
/// wait until it runs sink tasks again; [`KILLS`] times. Prints the median.
fn failover(kafka: &Kafka) {
    let mut cluster = Cluster::new(
        3,
        Settings {
            kafka: Some(kafka.bootstrap.clone()),
            log_filter: "warn".into(),
            ferryd_timing: true,
            ..Settings::default()
        },
    );
    cluster.start_all();
    let leader = cluster.wait_leader(Duration::from_secs(30));
    let file = cluster.connector_file(
        "bench",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "bench"),
            ("tasks.max", "6"),
            ("file", "failover.out"),
        ],
    );
    cluster.cli(
        leader,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
    let all_running = |cluster: &Cluster, leader: u64| {
        let t = sink_task_workers(cluster, leader);
        t.len() == 6 && t.iter().all(|(s, _)| s == "RUNNING")
    };
    let mut times = Vec::new();
    for _ in 0..KILLS {
        let leader = cluster.wait_leader(Duration::from_secs(30));
        wait_for("all sink tasks running", Duration::from_secs(60), || {
            all_running(&cluster, leader).then_some(())
        });
        let victim = (1..=3).filter(|id| *id != leader).find(|id| {
            sink_task_workers(&cluster, leader)
                .iter()
                .any(|(_, w)| *w == cluster.node(*id).api)
        });
        let Some(victim) = victim else { break };
        let api = cluster.node(victim).api.clone();
        let killed = Instant::now();
        cluster.kill9(victim);
        let took = wait_for("tasks moved", Duration::from_secs(60), || {
            let t = sink_task_workers(&cluster, leader);
            (t.len() == 6 && t.iter().all(|(s, w)| s == "RUNNING" && *w != api))
                .then(|| killed.elapsed())
        });
        times.push(took);
        cluster.start(victim);
        wait_for(
            "the restarted worker runs sink tasks again",
            Duration::from_secs(60),
            || {
                (all_running(&cluster, leader)
                    && sink_task_workers(&cluster, leader)
                        .iter()
                        .any(|(_, w)| *w == api))
                .then_some(())
            },
        );
    }
    times.sort();
    if let Some(median) = times.get(times.len() / 2) {
        println!(
            "failover  median over {} kill -9s of a sink worker, ferryd's default timing: {:>6} ms  (all: {:?} ms; worker timeout 5000 ms; target <= 1500 ms)",
            times.len(),
            median.as_millis(),
            times.iter().map(|t| t.as_millis()).collect::<Vec<_>>(),
        );
    }
}

/// Records of `name` committed through Raft: the sum of its partitions' next offsets (the
/// topic's offsets start at 0).
fn committed_records(cluster: &Cluster, node: u64, name: &str) -> Option<u64> {
    let out = cluster.cli_on(&[node], &["-o", "json", "connectors", "offsets", name]);
    if !out.ok() {
        return None;
    }
    let offsets = out.json()["offsets"].as_array()?.clone();
    Some(
        offsets
            .iter()
            .filter_map(|o| o["offset"]["kafka_offset"].as_u64())
            .sum(),
    )
}

/// The storage sink's formats on the JSON path's records (Kafka Connect's envelope, a
/// three-field struct): JsonFormat, AvroFormat and ParquetFormat into a local directory and
/// into a real HDFS, timed until Raft holds the offsets of every record, which is when their
/// files are committed; beside the JSON path's FileStreamSink figure.
fn formats(cluster: &Cluster, leader: u64, json_rate: f64, input: u64) -> anyhow::Result<()> {
    let hdfs = Hdfs::start();
    let local = tempfile::tempdir()?;
    let formats = [
        ("json", "io.confluent.connect.hdfs.json.JsonFormat"),
        ("avro", "io.confluent.connect.hdfs.avro.AvroFormat"),
        ("parquet", "io.confluent.connect.hdfs.parquet.ParquetFormat"),
    ];
    for (store, url) in [
        ("a local dir", local.path().to_string_lossy().to_string()),
        ("HDFS", format!("hdfs://{}", hdfs.namenode)),
    ] {
        for (ext, class) in formats {
            let name = format!(
                "bench-{ext}-{}",
                if store == "HDFS" { "hdfs" } else { "local" }
            );
            let topics_dir = format!("/{name}");
            let file = cluster.connector_file(
                &name,
                &[
                    (
                        "connector.class",
                        "io.confluent.connect.hdfs3.Hdfs3SinkConnector",
                    ),
                    ("topics", JSON_TOPIC),
                    ("tasks.max", "6"),
                    ("store.url", &url),
                    ("topics.dir", &topics_dir),
                    ("format.class", class),
                    ("flush.size", "1000"),
                    ("rotate.schedule.interval.ms", "1000"),
                    (
                        "value.converter",
                        "org.apache.kafka.connect.json.JsonConverter",
                    ),
                ],
            );
            let took = timed(
                cluster,
                leader,
                &file,
                "the storage sink to commit every record",
                || {
                    (committed_records(cluster, leader, &name)? >= JSON_RECORDS as u64)
                        .then_some(())
                },
            );
            let (files, bytes) = if store == "HDFS" {
                // DIR_COUNT FILE_COUNT CONTENT_SIZE PATHNAME
                let count = hdfs.shell(&["-count", &format!("{topics_dir}/{JSON_TOPIC}")]);
                let n: Vec<u64> = count
                    .split_whitespace()
                    .take(3)
                    .filter_map(|n| n.parse().ok())
                    .collect();
                (
                    n.get(1).copied().unwrap_or(0),
                    n.get(2).copied().unwrap_or(0),
                )
            } else {
                committed_files(&local.path().join(&name).join(JSON_TOPIC))
            };
            let rate = JSON_RECORDS as f64 / took.as_secs_f64();
            println!(
                "ferry     {:<8} {:<12} {:>9.0} records/s  {:>7.1} MB/s of input  ({:.2} s; {files} files, {:.1} MB; {:.0}% of the JSON path's FileStreamSink)",
                ext,
                store,
                rate,
                input as f64 / 1e6 / took.as_secs_f64(),
                took.as_secs_f64(),
                bytes as f64 / 1e6,
                100.0 * rate / json_rate
            );
            cluster.cli(leader, &["connectors", "delete", &name]);
        }
    }
    Ok(())
}

/// The JDBC sink on the JSON path's records into a real PostgreSQL, insert and upsert (keyed
/// by id), timed until the table holds every row; beside `psql \copy` of the same rows from a
/// CSV file into a table of the same shape, in the same run.
fn jdbc(cluster: &Cluster, leader: u64, json_rate: f64) -> anyhow::Result<()> {
    let pg = Postgres::start();
    let csv = tempfile::NamedTempFile::new()?;
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(csv.as_file());
        for i in 0..JSON_RECORDS {
            let id = 1_000_000_000 + i as i64;
            writeln!(out, "{id},user{:04},{}", i % 1000, "x".repeat(800))?;
        }
    }
    pg.psql("CREATE TABLE copied (id BIGINT NOT NULL PRIMARY KEY, user_id TEXT, item TEXT)");
    let started = Instant::now();
    pg.psql(&format!(
        "\\copy copied FROM '{}' WITH (FORMAT csv)",
        csv.path().display()
    ));
    let copy_took = started.elapsed();
    let copy_rate = JSON_RECORDS as f64 / copy_took.as_secs_f64();
    println!(
        "baseline  psql \\copy of the same rows (CSV):          {copy_rate:>9.0} rows/s  ({:.2} s for {JSON_RECORDS})",
        copy_took.as_secs_f64()
    );
    let url = pg.jdbc_url("kcdb");
    for (mode, more) in [
        ("insert", vec![]),
        (
            "upsert",
            vec![("pk.mode", "record_value"), ("pk.fields", "id")],
        ),
    ] {
        let name = format!("bench-jdbc-{mode}");
        let table = format!("bench_{mode}");
        let mut config = vec![
            (
                "connector.class",
                "io.confluent.connect.jdbc.JdbcSinkConnector",
            ),
            ("connection.url", url.as_str()),
            ("connection.user", "kcuser"),
            ("connection.password", "kcpw"),
            ("topics", JSON_TOPIC),
            ("tasks.max", "6"),
            ("table.name.format", table.as_str()),
            ("insert.mode", mode),
            ("auto.create", "true"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
        ];
        config.extend(more);
        let file = cluster.connector_file(&name, &config);
        let took = timed(
            cluster,
            leader,
            &file,
            "the JDBC sink to write every row",
            || {
                let rows: usize = pg
                    .try_psql(&format!("SELECT count(*) FROM {table}"))?
                    .trim()
                    .parse()
                    .ok()?;
                (rows >= JSON_RECORDS).then_some(())
            },
        );
        let rate = JSON_RECORDS as f64 / took.as_secs_f64();
        println!(
            "ferry     JDBC sink, {mode:<6} into PostgreSQL:       {rate:>9.0} rows/s  ({:.2} s; {:.0}% of psql \\copy, {:.0}% of the JSON path's FileStreamSink)",
            took.as_secs_f64(),
            100.0 * rate / copy_rate,
            100.0 * rate / json_rate
        );
        cluster.cli(leader, &["connectors", "delete", &name]);
    }
    source(cluster, leader, &pg, &url, copy_rate)?;
    Ok(())
}

/// The JDBC source reading the rows `\copy` loaded (incrementing on id, the default
/// `batch.max.rows`) into a topic, timed until the topic's end offsets hold every row;
/// beside `psql \copy (SELECT …) TO` a file and `\copy FROM` of the same rows.
fn source(
    cluster: &Cluster,
    leader: u64,
    pg: &Postgres,
    url: &str,
    copy_in_rate: f64,
) -> anyhow::Result<()> {
    let out = tempfile::NamedTempFile::new()?;
    let started = Instant::now();
    pg.psql(&format!(
        "\\copy (SELECT * FROM copied ORDER BY id) TO '{}' WITH (FORMAT csv)",
        out.path().display()
    ));
    let copy_out = started.elapsed();
    let copy_out_rate = JSON_RECORDS as f64 / copy_out.as_secs_f64();
    println!(
        "baseline  psql \\copy (SELECT …) TO a CSV file:      {copy_out_rate:>9.0} rows/s  ({:.2} s for {JSON_RECORDS})",
        copy_out.as_secs_f64()
    );
    let bootstrap = cluster.settings.kafka.clone().unwrap_or_default();
    let watcher: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()?;
    for batch in ["100", "1000"] {
        let name = format!("bench-jdbc-source-{batch}");
        let prefix = format!("bench-pg-{batch}-");
        let topic = format!("{prefix}copied");
        let config = vec![
            (
                "connector.class",
                "io.confluent.connect.jdbc.JdbcSourceConnector",
            ),
            ("connection.url", url),
            ("connection.user", "kcuser"),
            ("connection.password", "kcpw"),
            ("table.whitelist", "copied"),
            ("mode", "incrementing"),
            ("incrementing.column.name", "id"),
            ("topic.prefix", prefix.as_str()),
            ("batch.max.rows", batch),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
        ];
        let file = cluster.connector_file(&name, &config);
        let took = timed(
            cluster,
            leader,
            &file,
            "the JDBC source to produce every row",
            || {
                let produced: i64 = watcher
                    .fetch_watermarks(&topic, 0, Duration::from_secs(5))
                    .ok()?
                    .1;
                (produced as usize >= JSON_RECORDS).then_some(())
            },
        );
        let rate = JSON_RECORDS as f64 / took.as_secs_f64();
        println!(
            "ferry     JDBC source, batch.max.rows={batch:<4} to Kafka:  {rate:>9.0} rows/s  ({:.2} s; {:.0}% of psql \\copy TO, {:.0}% of \\copy FROM)",
            took.as_secs_f64(),
            100.0 * rate / copy_out_rate,
            100.0 * rate / copy_in_rate
        );
        cluster.cli(leader, &["connectors", "delete", &name]);
    }
    Ok(())
}
