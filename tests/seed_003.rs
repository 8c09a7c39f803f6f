//! Seed 003 step by step on Ferry: its PostgreSQL tables, its JDBC source and sink connectors
//! from the seed's JSON (addresses aside) created, listed and watched with the seed's `curl`
//! commands (host names replaced; where a unit runs is the `worker_id` of its status), two
//! workers and then a third added, a kill -9 of one while rows are inserted. Read back by PostgreSQL's psql and confluent-kafka, both
//! independent of Ferry: the topics hold the seed's records in the seed's partitions, the
//! destination tables hold every row exactly once (plain inserts, no duplicate-key error),
//! the 16-character item is in the DLQ with PostgreSQL's error, and no node's TRACE log holds
//! the password.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_tests::pipeline::{json_workers, started, TRACE_ALL};
use ferry_tests::postgres::{
    assert_long_item_dead_lettered, seed_003_sink_json, Postgres, SEED_003_DESTINATIONS,
};
use ferry_tests::{error_header, read_topic, say, wait_for, Cluster, Kafka, Settings};

const FLOW: Duration = Duration::from_secs(120);
const DLQ: &str = "dlq_jdbc_sink_postgresql";
const NAMES: [&str; 2] = ["jdbc_source_postgresql", "jdbc_sink_postgresql"];

/// jdbc_source_postgresql.json as the seed has it.
fn source_json(url: &str) -> String {
    format!(
        r#"{{
  "name": "jdbc_source_postgresql",
  "config": {{
    "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
    "connection.url": "{url}",
    "connection.user": "kcuser",
    "connection.password": "kcpw",
    "topic.prefix": "dst_",
    "poll.interval.ms" : "5000",
    "table.poll.interval.ms" : "60000",
    "table.whitelist" : "table01,table02",
    "mode":"incrementing",
    "incrementing.column.name": "id",
    "tasks.max": "5",
    "transforms":"createKey,extractInt",
    "transforms.createKey.type":"org.apache.kafka.connect.transforms.ValueToKey",
    "transforms.createKey.fields":"user_id",
    "transforms.extractInt.type":"org.apache.kafka.connect.transforms.ExtractField$Key",
    "transforms.extractInt.field":"user_id"
  }}
}}"#
    )
}

fn rows(pg: &Postgres, sql: &str) -> Vec<String> {
    pg.psql(sql).lines().map(str::to_string).collect()
}

/// Every unit of both connectors RUNNING on a live worker.
/// One of the seed's `curl` commands, sent to node `entry`'s REST listener in place of
/// `node01:8083` (the leader here, which the test never kills): its body, which must be JSON.
fn curl(cluster: &Cluster, entry: u64, args: &[&str]) -> serde_json::Value {
    let node01 = cluster.node(entry).rest.clone();
    let args: Vec<String> = args
        .iter()
        .map(|a| a.replace("http://node01:8083", &node01))
        .collect();
    let out = std::process::Command::new("curl")
        .arg("-s")
        .args(&args)
        .output()
        .expect("run curl");
    let body = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("curl {args:?}: {e}: {body}"))
}

/// The `worker_id` of the units node `id` runs: its REST address.
fn worker_id(cluster: &Cluster, id: u64) -> String {
    cluster
        .node(id)
        .rest
        .trim_start_matches("http://")
        .to_string()
}

/// Where every unit runs, if every one is RUNNING on a worker — from the same status reads
/// (a second read could catch a unit between its release and its next start), with the seed's
/// `curl -X GET http://node01:8083/connectors/<name>/status`.
fn all_running(cluster: &Cluster, entry: u64) -> Option<BTreeMap<String, String>> {
    let mut units = BTreeMap::new();
    for name in NAMES {
        let url = format!("http://node01:8083/connectors/{name}/status");
        let status = curl(cluster, entry, &["-X", "GET", &url]);
        let tasks = status["tasks"].as_array().cloned().unwrap_or_default();
        let all = std::iter::once((format!("{name}/connector"), &status["connector"]))
            .chain(tasks.iter().map(|t| (format!("{name}/{}", t["id"]), t)));
        for (key, unit) in all {
            let worker = unit["worker_id"].as_str().unwrap_or("");
            if unit["state"] != "RUNNING" || worker.is_empty() {
                return None;
            }
            units.insert(key, worker.to_string());
        }
    }
    Some(units)
}

fn per_worker(placed: &BTreeMap<String, String>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for w in placed.values() {
        *counts.entry(w.clone()).or_default() += 1;
    }
    counts
}

#[test]
fn seed_003_source_to_sink_with_its_dlq_a_third_worker_and_a_kill_9_exactly_once() {
    let pg = Postgres::start();
    pg.psql(
        "CREATE TABLE table01 (id serial NOT NULL, user_id varchar(10), item varchar(20), PRIMARY KEY (id));
         CREATE TABLE table02 (id serial NOT NULL, user_id varchar(10), point integer, PRIMARY KEY (id));",
    );
    pg.psql(SEED_003_DESTINATIONS);
    // Three brokers, as the seed's cluster has.
    let kafka = Kafka::three(&[("dst_table01", 2), ("dst_table02", 2), (DLQ, 1)]);
    let settings = Settings {
        log_filter: TRACE_ALL.into(),
        ..json_workers()
    };
    let (mut cluster, leader) = started(2, &kafka, settings);
    let url = pg.jdbc_url("kcdb");
    for (name, json) in [
        ("jdbc_source_postgresql", source_json(&url)),
        ("jdbc_sink_postgresql", seed_003_sink_json(&url, DLQ)),
    ] {
        let file = cluster.dir.path().join(format!("{name}.json"));
        std::fs::write(&file, json).expect("write the connector JSON");
        let data = format!("@{}", file.display());
        let created = curl(
            &cluster,
            leader,
            &[
                "-X",
                "POST",
                "http://node01:8083/connectors",
                "-H",
                "Content-Type: application/json",
                "-d",
                &data,
            ],
        );
        assert_eq!(created["name"], name, "{created}");
    }
    let listed = curl(
        &cluster,
        leader,
        &["-X", "GET", "http://node01:8083/connectors"],
    );
    let mut listed: Vec<&str> = listed
        .as_array()
        .map(|l| l.iter().filter_map(|n| n.as_str()).collect())
        .unwrap_or_default();
    listed.sort_unstable();
    assert_eq!(
        listed,
        ["jdbc_sink_postgresql", "jdbc_source_postgresql"],
        "both connectors listed"
    );
    let placed = wait_for("both connectors running on the two workers", FLOW, || {
        all_running(&cluster, leader).filter(|p| p.len() == 2 + 2 + 5)
    });
    say(format!(
        "two workers: the source has 2 tasks (one per table), the sink 5; per worker {:?}",
        per_worker(&placed)
    ));

    // The configs and the task configs never show the password.
    for name in NAMES {
        for shown in [
            cluster.cli(leader, &["-o", "json", "connectors", "config", name]),
            cluster.cli(leader, &["-o", "json", "connectors", "tasks", name]),
        ] {
            assert!(
                shown.ok() && !shown.stdout.contains("kcpw"),
                "{name}: the password is shown: {}",
                shown.stdout
            );
        }
    }
    // The seed's rows.
    pg.psql(
        "INSERT INTO table01 (user_id, item) VALUES ('user01', 'apple'),('user01', 'orange'),('user02', 'banana'),('user02', 'melon');
         INSERT INTO table02 (user_id, point) VALUES ('user01', 3),('user01', 5),('user02', 6),('user02', 1);",
    );
    wait_for(
        "the seed's rows in dst_table01 and dst_table02",
        FLOW,
        || {
            (rows(&pg, "SELECT count(*) FROM dst_table01") == ["4"]
                && rows(&pg, "SELECT count(*) FROM dst_table02") == ["4"])
            .then_some(())
        },
    );
    assert_eq!(
        rows(&pg, "SELECT * FROM dst_table01 ORDER BY id"),
        [
            "1|user01|apple",
            "2|user01|orange",
            "3|user02|banana",
            "4|user02|melon"
        ]
    );
    assert_eq!(
        rows(&pg, "SELECT * FROM dst_table02 ORDER BY id"),
        ["1|user01|3", "2|user01|5", "3|user02|6", "4|user02|1"]
    );
    // The topics as the seed's console consumer printed them: user01 in partition 0, user02
    // in partition 1, the key user_id and the value the row, both with their schemas.
    let printed = |topic: &str| -> Vec<(i64, i64, String, String)> {
        let mut records: Vec<(i64, i64, String, String)> = read_topic(&kafka, topic, 4)
            .iter()
            .map(|r| {
                (
                    r["partition"].as_i64().unwrap_or(-1),
                    r["offset"].as_i64().unwrap_or(-1),
                    r["key"].as_str().unwrap_or_default().to_string(),
                    r["value"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        records.sort();
        records
    };
    let key = |user: &str| {
        format!(r#"{{"schema":{{"type":"string","optional":true}},"payload":"{user}"}}"#)
    };
    let table01 = |id: i32, user: &str, item: &str| {
        format!(
            r#"{{"schema":{{"type":"struct","fields":[{{"type":"int32","optional":false,"field":"id"}},{{"type":"string","optional":true,"field":"user_id"}},{{"type":"string","optional":true,"field":"item"}}],"optional":false,"name":"table01"}},"payload":{{"id":{id},"user_id":"{user}","item":"{item}"}}}}"#
        )
    };
    assert_eq!(
        printed("dst_table01"),
        vec![
            (0, 0, key("user01"), table01(1, "user01", "apple")),
            (0, 1, key("user01"), table01(2, "user01", "orange")),
            (1, 0, key("user02"), table01(3, "user02", "banana")),
            (1, 1, key("user02"), table01(4, "user02", "melon")),
        ],
        "the seed's console consumer output"
    );
    let t02 = printed("dst_table02");
    assert!(
        t02.iter()
            .all(|(p, _, k, _)| (*p == 0) == (*k == key("user01"))),
        "one user's records in one partition: {t02:?}"
    );
    assert!(
        t02[3]
            .3
            .ends_with(r#""name":"table02"},"payload":{"id":4,"user_id":"user02","point":1}}"#),
        "{t02:?}"
    );
    say("seed 003: rows copied table → topic → table; user01 in partition 0, user02 in partition 1, as the seed printed");

    // The DLQ: 16 characters do not fit dst_table01's varchar(10).
    pg.psql("INSERT INTO table01 (user_id, item) VALUES ('user01', 'super-apple-0000');");
    let dead = wait_for("the long item in the DLQ", FLOW, || {
        let d = read_topic(&kafka, DLQ, 1);
        (!d.is_empty()).then_some(d)
    });
    let message = assert_long_item_dead_lettered(&dead[0]);
    assert_eq!(
        error_header(&dead[0]["headers"], "offset").as_deref(),
        Some("2")
    );
    assert!(rows(&pg, "SELECT id FROM dst_table01 WHERE id = 5").is_empty());
    // As the seed read it: Kafka's own console consumer, printing the headers.
    let printed = kafka.console_consume(DLQ, 1, FLOW, true);
    let [line] = printed.as_slice() else {
        panic!("Kafka's console consumer printed {printed:?}");
    };
    for header in [
        "__connect.errors.topic:dst_table01",
        "__connect.errors.offset:2",
        "__connect.errors.connector.name:jdbc_sink_postgresql",
        "__connect.errors.exception.class.name:",
    ] {
        assert!(line.contains(header), "{header} in {line}");
    }
    assert!(
        line.contains("super-apple-0000"),
        "the record's value: {line}"
    );
    say(format!(
        "seed 003: ('user01', 'super-apple-0000') is in the DLQ: {message}; Kafka's console consumer prints {line:.300}"
    ));

    // A third worker: tasks move to it, and only enough to even the load.
    cluster.configure_extra(3);
    cluster.start(3);
    cluster.add_node(leader, 3);
    let third = worker_id(&cluster, 3);
    let after = wait_for("tasks on the third worker", FLOW, || {
        all_running(&cluster, leader).filter(|p| {
            let counts = per_worker(p);
            counts.get(&third).copied().unwrap_or(0) >= 2 && counts.values().all(|c| *c <= 4)
        })
    });
    let moved: Vec<&String> = after
        .keys()
        .filter(|k| placed.get(*k) != after.get(*k))
        .collect();
    say(format!(
        "add-node 3: per worker {:?}; moved to it: {moved:?}",
        per_worker(&after)
    ));
    assert!(
        moved.iter().all(|k| after[*k] == third),
        "only moves to the new worker"
    );

    // Rows are inserted throughout; a worker other than the leader is killed.
    let inserting = Arc::new(AtomicBool::new(true));
    let writer = {
        let inserting = inserting.clone();
        let port = pg.port;
        std::thread::spawn(move || {
            let mut batches = 0;
            while inserting.load(Ordering::Relaxed) {
                let user = if batches % 2 == 0 { "user01" } else { "user02" };
                let sql = format!(
                    "INSERT INTO table01 (user_id, item) SELECT '{user}', 'pear' || g FROM generate_series(1, 5) g;
                     INSERT INTO table02 (user_id, point) SELECT '{user}', g FROM generate_series(1, 5) g;"
                );
                let ok = std::process::Command::new("psql")
                    .args([
                        "-h",
                        "127.0.0.1",
                        "-p",
                        &port.to_string(),
                        "-U",
                        "kcuser",
                        "-d",
                        "kcdb",
                        "-q",
                        "-c",
                        &sql,
                    ])
                    .env("PGPASSWORD", "kcpw")
                    .status()
                    .is_ok_and(|s| s.success());
                assert!(ok, "psql insert failed");
                batches += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            batches
        })
    };
    // The destination grows while rows are inserted: the kill comes while rows flow.
    let written = || -> usize {
        rows(&pg, "SELECT count(*) FROM dst_table01")
            .first()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    let grows = |what: &str| {
        let from = written();
        wait_for(what, FLOW, || (written() >= from + 20).then_some(()));
    };
    grows("inserted rows reaching the destination");
    // The victim: the follower running the most sink tasks, one without a source task if
    // there is one — sources are at-least-once
    // (docs/design.md#what-ferry-guarantees-and-what-it-does-not): a source task killed between a
    // delivery and its offset commit sends those rows again, which the seed's plain inserts
    // would then meet as duplicate keys. The source's own kill is in tests/jdbc_source.rs.
    let units_of = |id: u64, prefix: &str| {
        let worker = worker_id(&cluster, id);
        after
            .iter()
            .filter(|(u, w)| **w == worker && u.starts_with(prefix))
            .count()
    };
    let victim = (1..=3)
        .filter(|id| *id != leader)
        .max_by_key(|id| {
            (
                units_of(*id, "jdbc_source_postgresql") == 0,
                units_of(*id, "jdbc_sink_postgresql/"),
            )
        })
        .expect("a follower");
    let victim_api = worker_id(&cluster, victim);
    let lost: Vec<String> = after
        .iter()
        .filter(|(_, w)| **w == victim_api)
        .map(|(u, _)| u.clone())
        .collect();
    cluster.kill9(victim);
    let killed = Instant::now();
    say(format!("killed -9 node {victim}, which ran {lost:?}"));
    let moved = wait_for("the killed worker's units running elsewhere", FLOW, || {
        all_running(&cluster, leader)
            .filter(|p| p.len() == 9 && p.values().all(|w| *w != victim_api))
            .map(|_| killed.elapsed())
    });
    say(format!(
        "FAIL-OVER: the killed worker's units ran elsewhere {} ms after the kill -9",
        moved.as_millis()
    ));
    grows("rows inserted after the fail-over reaching the destination");
    inserting.store(false, Ordering::Relaxed);
    let batches = writer.join().expect("the writer");

    // Exactly once: every source row (but the long item) in the destination, once.
    let want01 = rows(
        &pg,
        "SELECT * FROM table01 WHERE length(item) <= 10 ORDER BY id",
    );
    let want02 = rows(&pg, "SELECT * FROM table02 ORDER BY id");
    wait_for("every row in the destination tables", FLOW, || {
        (rows(&pg, "SELECT count(*) FROM dst_table01") == [want01.len().to_string()]
            && rows(&pg, "SELECT count(*) FROM dst_table02") == [want02.len().to_string()])
        .then_some(())
    });
    assert_eq!(rows(&pg, "SELECT * FROM dst_table01 ORDER BY id"), want01);
    assert_eq!(rows(&pg, "SELECT * FROM dst_table02 ORDER BY id"), want02);
    // A row written twice would have met the primary key and been dead-lettered.
    let dead = read_topic(&kafka, DLQ, 2);
    assert_eq!(
        dead.len(),
        1,
        "a duplicate-key error or another failure: {dead:?}"
    );
    // The source repeats what it delivered after its last offset commit; the sink writes
    // each record once whatever it is given.
    let in_topics = read_topic(&kafka, "dst_table01", 100_000).len()
        + read_topic(&kafka, "dst_table02", 100_000).len();
    let source_rows = want01.len() + 1 + want02.len();
    say(format!(
        "SEED 003: {} + {} rows ({batches} insert batches during the kill) exactly once in dst_table01 / dst_table02; \
         the topics hold {in_topics} records for {source_rows} rows ({} repeated by the source); 1 DLQ record",
        want01.len(),
        want02.len(),
        in_topics - source_rows
    ));
    cluster.start(victim);
    for id in 1..=3 {
        let log = cluster.log_text(id);
        assert!(log.contains(" TRACE "), "node {id} logs at TRACE");
        assert!(!log.contains("kcpw"), "node {id}'s log holds the password");
    }
}
