use super::*;

use ferry_connect::config::props;
use ferry_connect::Struct;

/// A record as seed 003's source produces it for table01, keyed by user_id.
fn seed_record(id: i32, user: &str, item: &str) -> SinkRecord {
    let schema = Arc::new(
        Schema::structure(vec![
            ("id", Schema::of(SchemaType::Int32)),
            ("user_id", Schema::of(SchemaType::String).optional()),
            ("item", Schema::of(SchemaType::String).optional()),
        ])
        .named("table01"),
    );
    let mut value = Struct::new(schema.clone()).expect("struct");
    value.put("id", Value::Int32(id)).expect("id");
    value
        .put("user_id", Value::String(user.into()))
        .expect("user_id");
    value.put("item", Value::String(item.into())).expect("item");
    SinkRecord {
        topic: "dst_table01".into(),
        partition: 1,
        offset: 7,
        timestamp: None,
        key_schema: Some(Arc::new(Schema::of(SchemaType::String).optional())),
        key: Value::String(user.into()),
        value_schema: Some(schema),
        value: Value::Struct(value),
        headers: Vec::new(),
    }
}

fn config(more: &[(&str, &str)]) -> JdbcSinkConfig {
    let mut p = props(&[("connection.url", "jdbc:postgresql://pg01:5432/kcdb")]);
    p.extend(props(more));
    JdbcSinkConfig::parse(&p).expect("valid")
}

fn names(cells: &[Cell]) -> Vec<&str> {
    cells.iter().map(|c| c.name.as_str()).collect()
}

const Q: Dialect = Dialect { quote: true };

#[test]
fn the_seeds_sink_inserts_every_value_field_into_the_topics_table() {
    let row = row_of(&config(&[]), &seed_record(1, "user01", "apple")).expect("a row");
    assert_eq!(row.table, TableId::parse("dst_table01").expect("valid"));
    assert_eq!(row.op, Op::Insert);
    assert!(row.keys.is_empty());
    assert_eq!(names(&row.others), ["id", "user_id", "item"]);
    let (sql, params) = row.sql(&Q);
    assert_eq!(
        sql,
        r#"INSERT INTO "dst_table01" ("id", "user_id", "item") VALUES ($1, $2, $3)"#
    );
    assert_eq!(params[2].value, Value::String("apple".into()));
}

#[test]
fn keys_from_the_record_key_the_value_or_kafka() {
    let r = seed_record(2, "user01", "orange");
    let by_value = row_of(
        &config(&[
            ("insert.mode", "upsert"),
            ("pk.mode", "record_value"),
            ("pk.fields", "id"),
        ]),
        &r,
    )
    .expect("a row");
    assert_eq!(
        (names(&by_value.keys), names(&by_value.others)),
        (vec!["id"], vec!["user_id", "item"])
    );
    assert_eq!(by_value.op, Op::Upsert);
    let (_, params) = by_value.sql(&Q);
    assert_eq!(params[0].value, Value::Int32(2), "keys first in an upsert");

    let by_key = row_of(
        &config(&[
            ("insert.mode", "update"),
            ("pk.mode", "record_key"),
            ("pk.fields", "user_id"),
        ]),
        &r,
    )
    .expect("a row");
    assert_eq!(names(&by_key.keys), ["user_id"]);
    assert_eq!(
        names(&by_key.others),
        ["id", "item"],
        "the key column is not set twice"
    );
    let (sql, params) = by_key.sql(&Q);
    assert_eq!(
        sql,
        r#"UPDATE "dst_table01" SET "id" = $1, "item" = $2 WHERE "user_id" = $3"#
    );
    assert_eq!(params[2].value, Value::String("user01".into()));

    let kafka = row_of(&config(&[("pk.mode", "kafka")]), &r).expect("a row");
    assert_eq!(
        kafka
            .keys
            .iter()
            .map(|c| (c.name.as_str(), c.value.clone()))
            .collect::<Vec<_>>(),
        [
            ("__connect_topic", Value::String("dst_table01".into())),
            ("__connect_partition", Value::Int32(1)),
            ("__connect_offset", Value::Int64(7)),
        ]
    );
    let columns = kafka.columns().expect("types");
    assert_eq!(columns[0].sql_type, "TEXT");
    assert!(!columns[0].optional && columns[4].optional, "{columns:?}");
}

#[test]
fn tombstones_delete_only_when_enabled() {
    let mut r = seed_record(3, "user02", "banana");
    r.value = Value::Null;
    r.value_schema = None;
    let e = row_of(&config(&[]), &r).expect_err("no delete").message;
    assert!(
        e.contains("dst_table01-1 offset 7") && e.contains("delete.enabled=true"),
        "{e}"
    );
    let row = row_of(
        &config(&[
            ("pk.mode", "record_key"),
            ("pk.fields", "user_id"),
            ("delete.enabled", "true"),
        ]),
        &r,
    )
    .expect("a delete");
    assert_eq!(row.op, Op::Delete);
    assert_eq!(
        row.sql(&Q).0,
        r#"DELETE FROM "dst_table01" WHERE "user_id" = $1"#
    );
}

#[test]
fn records_that_have_no_row_are_data_errors_naming_them() {
    let mut schemaless = seed_record(4, "user02", "melon");
    schemaless.value = Value::String("{\"id\":4}".into());
    let e = row_of(&config(&[]), &schemaless).expect_err("no struct");
    assert!(!e.is_retriable());
    assert!(
        e.message.contains("its value is not a struct"),
        "{}",
        e.message
    );
    let e = row_of(
        &config(&[("pk.mode", "record_value"), ("pk.fields", "sku")]),
        &seed_record(5, "u", "x"),
    )
    .expect_err("no such field");
    assert!(
        e.message.contains("its value has no field \"sku\""),
        "{}",
        e.message
    );
    let e = row_of(
        &config(&[("pk.mode", "record_key")]),
        &seed_record(6, "u", "x"),
    )
    .expect_err("a primitive key needs its column's name");
    assert!(
        e.message.contains("pk.fields must name its one column"),
        "{}",
        e.message
    );
}

#[test]
fn fields_whitelist_limits_the_columns() {
    let row = row_of(
        &config(&[("fields.whitelist", "id,item")]),
        &seed_record(1, "u", "apple"),
    )
    .expect("a row");
    assert_eq!(names(&row.others), ["id", "item"]);
}
