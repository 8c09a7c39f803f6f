use super::*;
use crate::dialect::TableId;
use ferry_connect::config::props;
use ferry_connect::Support;

#[test]
fn the_seeds_url_user_and_password() {
    let c = Connection::from_props(&props(&[
        ("connection.url", "jdbc:postgresql://pg01:5432/kcdb"),
        ("connection.user", "kcuser"),
        ("connection.password", "kcpw"),
    ]))
    .expect("valid");
    assert_eq!(c.hosts, [("pg01".to_string(), 5432)]);
    assert_eq!(c.database, "kcdb");
    assert_eq!(c.user.as_deref(), Some("kcuser"));
    assert_eq!(c.password(), Some("kcpw"));
    let shown = format!("{c:?}");
    assert!(!shown.contains("kcpw"), "{shown}");
}

#[test]
fn urls_the_driver_takes() {
    let c = Connection::parse_url(
        "jdbc:postgresql://a,b:5433,[::1]:6000/shop%20db?user=u&password=p%40ss&sslmode=disable",
    )
    .expect("valid");
    assert_eq!(
        c.hosts,
        [
            ("a".to_string(), 5432),
            ("b".to_string(), 5433),
            ("::1".to_string(), 6000)
        ]
    );
    assert_eq!(c.database, "shop db");
    assert_eq!(c.user.as_deref(), Some("u"));
    assert_eq!(c.password(), Some("p@ss"));
    assert_eq!(c.params.get("sslmode").map(String::as_str), Some("disable"));

    let short = Connection::parse_url("jdbc:postgresql:kcdb").expect("valid");
    assert_eq!(short.hosts, [("localhost".to_string(), 5432)]);
    assert_eq!(short.database, "kcdb");
    // No database: the user's, as the driver does.
    let own = Connection::parse_url("jdbc:postgresql://h/?user=kcuser").expect("valid");
    assert_eq!(own.database, "kcuser");
}

#[test]
fn the_properties_win_over_the_urls_parameters() {
    let c = Connection::from_props(&props(&[
        ("connection.url", "jdbc:postgresql://h/db?user=a&password=b"),
        ("connection.user", "kcuser"),
        ("connection.password", "kcpw"),
    ]))
    .expect("valid");
    assert_eq!(
        (c.user.as_deref(), c.password()),
        (Some("kcuser"), Some("kcpw"))
    );
}

#[test]
fn bad_urls_are_named_and_never_show_the_password() {
    for (url, wanted) in [
        (
            "jdbc:mysql://h/db?password=secret1",
            "not a PostgreSQL JDBC URL",
        ),
        (
            "jdbc:postgresql://h:99999/db?password=secret1",
            "is not a port",
        ),
        (
            "jdbc:postgresql://h/db?password=secret1%zz",
            "parameter \"password\" has",
        ),
        (
            "jdbc:postgresql://[::1/db?password=secret1",
            "without its ]",
        ),
    ] {
        let e = Connection::from_props(&props(&[("connection.url", url)]))
            .expect_err(url)
            .message;
        assert!(e.starts_with("connection.url: "), "{e}");
        assert!(e.contains(wanted), "{url}: {e}");
        assert!(!e.contains("secret1"), "{e}");
    }
    let missing = Connection::from_props(&props(&[]))
        .expect_err("missing")
        .message;
    assert!(missing.contains("connection.url"), "{missing}");
}

#[test]
fn sink_defaults_are_confluents() {
    let c = JdbcSinkConfig::parse(&props(&[(
        "connection.url",
        "jdbc:postgresql://pg01:5432/kcdb",
    )]))
    .expect("valid");
    assert_eq!(c.insert_mode, InsertMode::Insert);
    assert_eq!(c.pk_mode, PkMode::None);
    assert_eq!(c.table_of("dst_table01"), "dst_table01");
    assert_eq!(c.batch_size, 3000);
    assert!(!c.auto_create && !c.auto_evolve && !c.delete_enabled);
    assert!(c.quote_identifiers);
    assert_eq!((c.max_retries, c.retry_backoff_ms), (10, 3000));
}

#[test]
fn sink_settings_that_cannot_work_are_refused_by_name() {
    let url = ("connection.url", "jdbc:postgresql://h/db");
    for (more, wanted) in [
        (
            vec![("insert.mode", "upsert")],
            "insert.mode: upsert needs a primary key",
        ),
        (
            vec![("insert.mode", "merge")],
            "insert.mode: must be one of insert, upsert, update",
        ),
        (
            vec![("pk.mode", "record_key"), ("delete.enabled", "yes")],
            "delete.enabled: expected true or false",
        ),
        (
            vec![("pk.mode", "record_value"), ("delete.enabled", "true")],
            "delete.enabled: deletes need pk.mode=record_key",
        ),
        (
            vec![("pk.mode", "kafka"), ("pk.fields", "a,b")],
            "pk.fields: pk.mode=kafka takes three names",
        ),
        (vec![("batch.size", "0")], "batch.size: must be at least 1"),
        (vec![("batch.size", "many")], "batch.size"),
    ] {
        let mut p = props(&[url]);
        p.extend(props(&more));
        let e = JdbcSinkConfig::parse(&p).expect_err(wanted).message;
        assert!(e.contains(wanted), "{more:?}: {e}");
    }
    let mut ok = props(&[url]);
    ok.extend(props(&[
        ("insert.mode", "UPSERT"),
        ("pk.mode", "record_value"),
        ("pk.fields", "id"),
        ("table.name.format", "kafka_${topic}"),
    ]));
    let c = JdbcSinkConfig::parse(&ok).expect("valid");
    assert_eq!(
        (c.insert_mode, c.pk_mode),
        (InsertMode::Upsert, PkMode::RecordValue)
    );
    assert_eq!(c.pk_fields, ["id"]);
    assert_eq!(c.table_of("orders"), "kafka_orders");
}

/// Seed 003's jdbc_source_postgresql.json, as a config map.
fn seed_source() -> BTreeMap<String, String> {
    props(&[
        (
            "connector.class",
            "io.confluent.connect.jdbc.JdbcSourceConnector",
        ),
        ("connection.url", "jdbc:postgresql://pg01:5432/kcdb"),
        ("connection.user", "kcuser"),
        ("connection.password", "kcpw"),
        ("topic.prefix", "dst_"),
        ("poll.interval.ms", "5000"),
        ("table.poll.interval.ms", "60000"),
        ("table.whitelist", "table01,table02"),
        ("mode", "incrementing"),
        ("incrementing.column.name", "id"),
        ("tasks.max", "5"),
    ])
}

#[test]
fn the_seeds_source_config() {
    let c = JdbcSourceConfig::parse(&seed_source()).expect("valid");
    assert_eq!(c.mode, SourceMode::Incrementing);
    assert_eq!(c.incrementing_column.as_deref(), Some("id"));
    assert_eq!(c.whitelist, ["table01", "table02"]);
    assert_eq!(
        (c.poll_interval_ms, c.table_poll_interval_ms),
        (5000, 60_000)
    );
    assert_eq!(c.batch_max_rows, 100, "Confluent's default");
    assert_eq!(c.numeric_mapping, NumericMapping::None);
    let t = |schema: &str, table: &str| TableId {
        schema: Some(schema.to_string()),
        table: table.to_string(),
    };
    assert!(c.wants(&t("public", "table01")));
    assert!(!c.wants(&t("public", "dst_table01")));
    assert_eq!(c.topic_of(Some(&t("public", "table02"))), "dst_table02");
    assert!(check_source(&seed_source()).is_empty());
    assert!(!format!("{c:?}").contains("kcpw"));
}

#[test]
fn source_configs_confluent_refuses_name_the_property() {
    let with = |changes: &[(&str, &str)], removed: &[&str]| {
        let mut p = seed_source();
        for k in removed {
            p.remove(*k);
        }
        for (k, v) in changes {
            p.insert(k.to_string(), v.to_string());
        }
        match &check_source(&p)[..] {
            [Finding::Error(key, message)] => format!("{key}: {message}"),
            other => panic!("expected one error, got {other:?}"),
        }
    };
    assert!(with(&[], &["mode"]).starts_with("mode: missing"));
    assert!(with(&[("mode", "sometimes")], &[]).starts_with("mode: must be one of"));
    assert!(with(&[("table.blacklist", "x")], &[]).starts_with("table.whitelist:"));
    assert!(with(&[("mode", "timestamp")], &[]).starts_with("timestamp.column.name:"));
    assert!(with(&[("query", "SELECT 1")], &[]).starts_with("query:"));
    assert!(with(&[], &["topic.prefix"]).starts_with("topic.prefix:"));
    assert!(with(&[("batch.max.rows", "0")], &[]).starts_with("batch.max.rows:"));
    // A query needs its incrementing column named; a table's serial one is found.
    let mut q = seed_source();
    q.remove("table.whitelist");
    q.remove("incrementing.column.name");
    q.insert("query".into(), "SELECT * FROM table01".into());
    let found = &check_source(&q)[..];
    assert!(
        matches!(found, [Finding::Error(k, _)] if k == "incrementing.column.name"),
        "{found:?}"
    );
    let mut none = seed_source();
    none.remove("incrementing.column.name");
    assert!(check_source(&none).is_empty());
}

#[test]
fn the_sinks_retry_settings_say_they_have_no_effect() {
    let def = sink_config();
    for key in ["max.retries", "retry.backoff.ms"] {
        let k = def.iter().find(|k| k.name == key).expect("declared");
        assert!(matches!(k.support, Support::NoEffect(_)), "{key}");
    }
}
