//! The JDBC source end to end against a real PostgreSQL, real ferryd workers and a broker,
//! its records read back by an independent client (confluent-kafka): each mode (bulk,
//! incrementing, timestamp, timestamp+incrementing, a query), column types as Connect
//! schemas, Confluent's offsets committed into Raft, rows committed out of order caught by
//! `timestamp.delay.interval.ms`, rows sharing a timestamp across batches, a table created
//! later picked up by `table.poll.interval.ms`, and a kill -9 in the middle of reading.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_tests::pipeline::{create, json_workers, started, task_workers};
use ferry_tests::postgres::Postgres;
use ferry_tests::{read_topic, say, wait_for, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use serde_json::Value;

const FLOW: Duration = Duration::from_secs(120);

/// The payloads of a topic's records (at least `n`), in the order read.
fn payloads(kafka: &Kafka, topic: &str, n: usize) -> Vec<Value> {
    read_topic(kafka, topic, n)
        .iter()
        .map(|r| {
            let value: Value =
                serde_json::from_str(r["value"].as_str().unwrap_or("null")).expect("JSON value");
            value
        })
        .collect()
}

/// Wait until `topic` holds at least `n` records; their payloads.
fn wait_records(kafka: &Kafka, topic: &str, n: usize) -> Vec<Value> {
    wait_for(&format!("{n} records in {topic}"), FLOW, || {
        let got = payloads(kafka, topic, n);
        (got.len() >= n).then_some(got)
    })
}

fn field(records: &[Value], name: &str) -> Vec<Value> {
    records.iter().map(|r| r["payload"][name].clone()).collect()
}

/// The committed offset of each source partition of a connector.
fn offsets(cluster: &ferry_tests::Cluster, node: u64, name: &str) -> BTreeMap<String, Value> {
    let shown = cluster.json(node, &["connectors", "offsets", name]);
    shown["offsets"]
        .as_array()
        .map(|all| {
            all.iter()
                .map(|o| (o["partition"].to_string(), o["offset"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn each_mode_copies_its_rows_with_their_types_and_confluents_offsets() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE inc_t (id serial PRIMARY KEY, amount numeric(10,2), day date NOT NULL,
           at timestamp(6), note text, tags text[], raw bytea, ok boolean, big bigint, u uuid, free numeric);
         CREATE TABLE ts_t (id int NOT NULL, updated timestamptz NOT NULL, v text);
         CREATE TABLE tsi_t (id serial NOT NULL, modified timestamp NOT NULL, v text);
         CREATE TABLE bulk_t (k int, v text);
         CREATE SCHEMA fresh;
         CREATE TABLE fresh.a (id serial PRIMARY KEY, v text);",
    );
    let kafka = Kafka::start(&[
        ("m_inc_t", 1),
        ("m_ts_t", 1),
        ("m_tsi_t", 1),
        ("m_bulk_t", 1),
        ("q_rows", 1),
        ("f_a", 1),
        ("f_b", 1),
    ]);
    let (cluster, leader) = started(1, &kafka, json_workers());
    let url = pg.jdbc_url("kcdb");
    let common = |table: &str, mode: &str| -> Vec<(String, String)> {
        [
            (
                "connector.class",
                "io.confluent.connect.jdbc.JdbcSourceConnector",
            ),
            ("connection.url", url.as_str()),
            ("connection.user", "kcuser"),
            ("connection.password", "kcpw"),
            ("topic.prefix", "m_"),
            ("table.whitelist", table),
            ("mode", mode),
            ("poll.interval.ms", "200"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("value.converter.decimal.format", "NUMERIC"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    };
    let make = |name: &str, mut props: Vec<(String, String)>, more: &[(&str, &str)]| {
        for (k, v) in more {
            props.retain(|(key, _)| key != k);
            props.push((k.to_string(), v.to_string()));
        }
        let refs: Vec<(&str, &str)> = props
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        create(&cluster, leader, name, &refs);
    };

    // incrementing, the serial column found on its own, three rows per poll.
    pg.psql(
        "INSERT INTO inc_t (amount, day, at, note, tags, raw, ok, big, u, free) VALUES
           (12.5, '2024-02-29', '2024-01-02 03:04:05.123456', 'first', '{a,b}', '\\x0102', true,
            9007199254740993, 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 1.23456);",
    );
    pg.psql("INSERT INTO inc_t (day) SELECT DATE '2000-01-01' + g FROM generate_series(1, 6) g;");
    make(
        "inc",
        common("inc_t", "incrementing"),
        &[("batch.max.rows", "3")],
    );
    let rows = wait_records(&kafka, "m_inc_t", 7);
    assert_eq!(
        field(&rows, "id"),
        (1..=7).map(|i| serde_json::json!(i)).collect::<Vec<_>>()
    );
    let first = &rows[0];
    let schema = &first["schema"];
    assert_eq!(schema["name"], "inc_t", "{schema}");
    assert_eq!(schema["optional"], false);
    let fields: BTreeMap<String, &Value> = schema["fields"]
        .as_array()
        .expect("fields")
        .iter()
        .map(|f| (f["field"].as_str().unwrap_or_default().to_string(), f))
        .collect();
    assert_eq!(fields["id"]["type"], "int32");
    assert_eq!(fields["id"]["optional"], false);
    assert_eq!(
        fields["amount"]["name"],
        "org.apache.kafka.connect.data.Decimal"
    );
    assert_eq!(fields["amount"]["parameters"]["scale"], "2");
    assert_eq!(fields["day"]["name"], "org.apache.kafka.connect.data.Date");
    assert_eq!(fields["day"]["optional"], false);
    assert_eq!(
        fields["at"]["name"],
        "org.apache.kafka.connect.data.Timestamp"
    );
    assert_eq!(fields["note"]["optional"], true);
    assert_eq!(fields["big"]["type"], "int64");
    assert_eq!(fields["free"]["parameters"]["scale"], "5");
    let p = &first["payload"];
    assert_eq!(p["amount"], serde_json::json!(12.50), "{p}");
    // 2024-02-29 is day 19782 since 1970; the timestamp's milliseconds.
    assert_eq!(p["day"], 19782, "{p}");
    assert_eq!(p["at"], 1_704_164_645_123i64, "{p}");
    assert_eq!(
        p["tags"], "{a,b}",
        "an array column is read as its text: {p}"
    );
    assert_eq!(p["raw"], "AQI=", "{p}");
    assert_eq!(p["ok"], true);
    assert_eq!(p["big"], 9_007_199_254_740_993i64);
    assert_eq!(p["u"], "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11");
    assert_eq!(p["free"], serde_json::json!(1.23456));
    assert_eq!(rows[1]["payload"]["note"], Value::Null);
    wait_for("the incrementing offset in Raft", FLOW, || {
        let o = offsets(&cluster, leader, "inc");
        let want = r#"{"protocol":"1","table":"kcdb.public.inc_t"}"#;
        (o.get(want) == Some(&serde_json::json!({"incrementing": 7}))).then_some(())
    });
    pg.psql("INSERT INTO inc_t (day) VALUES ('2030-01-01');");
    let rows = wait_records(&kafka, "m_inc_t", 8);
    assert_eq!(rows.len(), 8, "a new row once, nothing read twice");
    say("incrementing: 8 rows, Confluent's offset {\"incrementing\": 7} in Raft");

    // timestamp, with a delay for transactions that commit late, and rows sharing a
    // timestamp read two per poll.
    make(
        "ts",
        common("ts_t", "timestamp"),
        &[
            ("timestamp.column.name", "updated"),
            ("timestamp.delay.interval.ms", "3000"),
            ("batch.max.rows", "2"),
        ],
    );
    pg.psql(
        "INSERT INTO ts_t SELECT g, TIMESTAMPTZ '2020-05-05 10:00:00.000001+00', 'same' FROM generate_series(1, 5) g;",
    );
    // A transaction takes its timestamp, commits two seconds later; a later row commits first.
    let late = {
        let pg_port = pg.port;
        std::thread::spawn(move || {
            let sql =
                "BEGIN; INSERT INTO ts_t VALUES (100, now(), 'late'); SELECT pg_sleep(2); COMMIT;";
            std::process::Command::new("psql")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &pg_port.to_string(),
                    "-U",
                    "kcuser",
                    "-d",
                    "kcdb",
                    "-c",
                    sql,
                ])
                .env("PGPASSWORD", "kcpw")
                .output()
                .expect("psql")
        })
    };
    // Once the late row's transaction has taken its timestamp and sleeps, a later row commits.
    wait_for("the late transaction sleeping", FLOW, || {
        (pg.try_psql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'")?
            .trim()
            == "1")
            .then_some(())
    });
    pg.psql("INSERT INTO ts_t VALUES (101, now(), 'early');");
    assert!(late.join().expect("psql thread").status.success());
    let rows = wait_records(&kafka, "m_ts_t", 7);
    let ids: BTreeSet<i64> = field(&rows, "id")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    assert_eq!(
        ids,
        [1, 2, 3, 4, 5, 100, 101].into(),
        "the row committed late is not skipped"
    );
    // Rows sharing 10:00:00.000001 were committed with their microsecond (timestamp_nanos
    // 1000), then the offset moved to the late rows' time.
    let ts_offset = wait_for("the timestamp offset past the late rows", FLOW, || {
        let o = offsets(&cluster, leader, "ts");
        let got = o
            .get(r#"{"protocol":"1","table":"kcdb.public.ts_t"}"#)?
            .clone();
        (got["timestamp"].as_i64()? > 1_700_000_000_000 && got["timestamp_nanos"].is_i64())
            .then_some(got)
    });
    say(format!(
        "timestamp: rows sharing a timestamp and a late commit all read; offset {ts_offset}"
    ));

    // timestamp+incrementing on a TIMESTAMP (without zone) column written in UTC.
    make(
        "tsi",
        common("tsi_t", "timestamp+incrementing"),
        &[
            ("timestamp.column.name", "modified"),
            ("incrementing.column.name", "id"),
        ],
    );
    pg.psql(
        "INSERT INTO tsi_t (modified, v) SELECT TIMESTAMP '2021-01-01 00:00:00', 'x' FROM generate_series(1, 3);
         INSERT INTO tsi_t (modified, v) VALUES (now() AT TIME ZONE 'UTC' - interval '1 second', 'y');",
    );
    let rows = wait_records(&kafka, "m_tsi_t", 4);
    assert_eq!(
        field(&rows, "id"),
        (1..=4).map(|i| serde_json::json!(i)).collect::<Vec<_>>()
    );
    wait_for("the timestamp+incrementing offset", FLOW, || {
        let o = offsets(&cluster, leader, "tsi");
        let got = o.get(r#"{"protocol":"1","table":"kcdb.public.tsi_t"}"#)?;
        (got["incrementing"] == 4 && got["timestamp"].is_i64()).then_some(())
    });

    // bulk: the whole table on every poll.
    pg.psql("INSERT INTO bulk_t VALUES (1, 'a'), (2, 'b');");
    make(
        "bulk",
        common("bulk_t", "bulk"),
        &[("poll.interval.ms", "500")],
    );
    let rows = wait_records(&kafka, "m_bulk_t", 6);
    assert_eq!(
        field(&rows[..2], "k"),
        vec![serde_json::json!(1), serde_json::json!(2)]
    );
    assert_eq!(
        field(&rows[2..4], "k"),
        vec![serde_json::json!(1), serde_json::json!(2)]
    );

    // A query, incrementing on its id, to the topic named by the prefix.
    make(
        "q",
        common("", "incrementing"),
        &[
            ("table.whitelist", ""),
            (
                "query",
                "SELECT id, note, day FROM inc_t WHERE note IS NOT NULL OR id > 7",
            ),
            ("incrementing.column.name", "id"),
            ("topic.prefix", "q_rows"),
        ],
    );
    let rows = wait_records(&kafka, "q_rows", 2);
    assert_eq!(
        field(&rows, "id"),
        vec![serde_json::json!(1), serde_json::json!(8)]
    );
    assert_eq!(
        rows[0]["schema"].get("name"),
        None,
        "a query's struct has no name"
    );
    wait_for("the query's offset", FLOW, || {
        let o = offsets(&cluster, leader, "q");
        (o.get(r#"{"query":"query"}"#)? == &serde_json::json!({"incrementing": 8})).then_some(())
    });

    // The tables of a schema, listed again every second: one created later is picked up and
    // gets a task of its own.
    pg.psql("INSERT INTO fresh.a (v) VALUES ('one');");
    make(
        "fresh",
        common("", "incrementing"),
        &[
            ("table.whitelist", ""),
            ("schema.pattern", "fresh"),
            ("topic.prefix", "f_"),
            ("table.poll.interval.ms", "1000"),
            ("tasks.max", "4"),
        ],
    );
    wait_records(&kafka, "f_a", 1);
    assert_eq!(task_workers(&cluster, leader, "fresh").len(), 1);
    pg.psql("CREATE TABLE fresh.b (id serial PRIMARY KEY, w int); INSERT INTO fresh.b (w) VALUES (5), (6);");
    let rows = wait_records(&kafka, "f_b", 2);
    assert_eq!(
        field(&rows, "w"),
        vec![serde_json::json!(5), serde_json::json!(6)]
    );
    wait_for("a task per table", FLOW, || {
        let t = task_workers(&cluster, leader, "fresh");
        (t.len() == 2 && t.iter().all(|(s, _)| s == "RUNNING")).then_some(())
    });
    assert_eq!(
        payloads(&kafka, "f_a", 2).len(),
        1,
        "fresh.a is not read twice after the new task configs"
    );

    // PostgreSQL goes away (immediate shutdown: every connection dropped) and comes back:
    // the tasks log it, query again, and go on from their last row — nothing skipped or
    // repeated, no task failed.
    let failed_reads = || cluster.log_count(leader, &["reading failed; trying again"]);
    let before = failed_reads();
    pg.stop_server();
    wait_for("the tasks meeting the outage", FLOW, || {
        (failed_reads() > before).then_some(())
    });
    pg.start_server();
    pg.psql("INSERT INTO inc_t (day) VALUES ('2031-01-01'), ('2032-01-01');");
    let rows = wait_records(&kafka, "m_inc_t", 10);
    // (The serial jumps after a crash: PostgreSQL logs sequences ahead.)
    let in_table: Vec<Value> = pg
        .psql("SELECT id FROM inc_t ORDER BY id")
        .lines()
        .filter_map(|l| l.trim().parse::<i64>().ok())
        .map(|i| serde_json::json!(i))
        .collect();
    assert_eq!(
        field(&rows, "id"),
        in_table,
        "the rows after the restart, once"
    );
    for name in ["inc", "ts", "tsi", "bulk", "q", "fresh"] {
        let states = task_workers(&cluster, leader, name);
        assert!(
            states.iter().all(|(s, _)| s == "RUNNING"),
            "{name}: {states:?}"
        );
    }
    say("JDBC SOURCE MODES: incrementing, timestamp, timestamp+incrementing, bulk, query, a table created later, a database restart");
}

#[test]
fn a_kill_9_in_the_middle_of_reading_skips_no_row_and_the_repeats_are_counted() {
    let pg = Postgres::start();
    // 60 000 rows, seven to a timestamp, read five per poll: commits fall inside groups of
    // rows that share their timestamp.
    pg.psql(
        "CREATE TABLE events (id int NOT NULL, at timestamptz NOT NULL, v text);
         INSERT INTO events SELECT g, TIMESTAMPTZ '2022-01-01 00:00:00+00' + (g / 7) * interval '1 millisecond', 'e' || g
           FROM generate_series(0, 59999) g;",
    );
    let kafka = Kafka::start(&[("src_events", 2)]);
    let settings = Settings {
        offset_flush_ms: 300,
        ..json_workers()
    };
    let (mut cluster, leader) = started(3, &kafka, settings);
    create(
        &cluster,
        leader,
        "events",
        &[
            (
                "connector.class",
                "io.confluent.connect.jdbc.JdbcSourceConnector",
            ),
            ("connection.url", &pg.jdbc_url("kcdb")),
            ("connection.user", "kcuser"),
            ("connection.password", "kcpw"),
            ("topic.prefix", "src_"),
            ("table.whitelist", "events"),
            ("mode", "timestamp"),
            ("timestamp.column.name", "at"),
            ("batch.max.rows", "5"),
            ("poll.interval.ms", "500"),
        ],
    );
    let worker = wait_for("the source task running", FLOW, || {
        let t = task_workers(&cluster, leader, "events");
        t.first()
            .filter(|(s, _)| s == "RUNNING")
            .map(|(_, w)| w.clone())
    });
    let victim = cluster
        .nodes
        .values()
        .find(|n| n.api == worker)
        .map(|n| n.id)
        .expect("the task's node");
    // Watch the topic's end offsets (a Kafka client's metadata, fast) and kill as soon as
    // the task is well under way.
    let watcher: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .create()
        .expect("a consumer");
    let produced = || -> i64 {
        (0..2)
            .filter_map(|p| {
                watcher
                    .fetch_watermarks("src_events", p, Duration::from_secs(5))
                    .ok()
            })
            .map(|(_, high)| high)
            .sum()
    };
    wait_for("the first records", FLOW, || {
        (produced() >= 10_000).then_some(())
    });
    cluster.kill9(victim);
    let killed = Instant::now();
    let at_kill = produced();
    assert!(
        at_kill < 60_000,
        "the task had read every row before the kill"
    );
    say(format!(
        "killed -9 node {victim}, which ran the source task, after {at_kill} records"
    ));
    let survivors: Vec<u64> = (1..=3).filter(|id| *id != victim).collect();
    let now_leader = cluster.wait_leader_among(&survivors, FLOW);
    let dead_api = cluster.node(victim).api.clone();
    let moved = wait_for("the task on a survivor", FLOW, || {
        let t = task_workers(&cluster, now_leader, "events");
        t.first()
            .filter(|(s, w)| s == "RUNNING" && *w != dead_api)
            .map(|_| killed.elapsed())
    });
    say(format!(
        "the source task ran elsewhere {} ms after the kill",
        moved.as_millis()
    ));
    let records = wait_for("every row in the topic", FLOW, || {
        let got = read_topic(&kafka, "src_events", 80_000);
        let ids: BTreeSet<i64> = got
            .iter()
            .filter_map(|r| {
                let v: Value = serde_json::from_str(r["value"].as_str()?).ok()?;
                v["payload"]["id"].as_i64()
            })
            .collect();
        (ids.len() == 60_000).then_some(got)
    });
    let repeats = records.len() - 60_000;
    say(format!(
        "KILL MID-READ: 60000 rows, none skipped, {repeats} repeated (delivered after the last offset commit before the kill)"
    ));
    cluster.start(victim);
}
