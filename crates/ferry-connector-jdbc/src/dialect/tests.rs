use super::*;

use std::sync::Arc;

fn names(n: &[&str]) -> Vec<String> {
    n.iter().map(|s| s.to_string()).collect()
}

fn dst() -> TableId {
    TableId::parse("dst_table01").expect("valid")
}

const Q: Dialect = Dialect { quote: true };

#[test]
fn the_seeds_insert() {
    assert_eq!(
        Q.insert(&dst(), &names(&["id", "user_id", "item"])),
        r#"INSERT INTO "dst_table01" ("id", "user_id", "item") VALUES ($1, $2, $3)"#
    );
    let plain = Dialect { quote: false };
    assert_eq!(
        plain.insert(&TableId::parse("public.t").expect("valid"), &names(&["a"])),
        "INSERT INTO public.t (a) VALUES ($1)"
    );
}

#[test]
fn upsert_update_and_delete_by_key() {
    let keys = names(&["id"]);
    assert_eq!(
        Q.upsert(&dst(), &keys, &names(&["user_id", "item"])),
        r#"INSERT INTO "dst_table01" ("id", "user_id", "item") VALUES ($1, $2, $3) ON CONFLICT ("id") DO UPDATE SET "user_id"=EXCLUDED."user_id", "item"=EXCLUDED."item""#
    );
    assert_eq!(
        Q.upsert(&dst(), &keys, &[]),
        r#"INSERT INTO "dst_table01" ("id") VALUES ($1) ON CONFLICT ("id") DO NOTHING"#
    );
    assert_eq!(
        Q.update(&dst(), &names(&["a", "b"]), &names(&["item"])),
        r#"UPDATE "dst_table01" SET "item" = $1 WHERE "a" = $2 AND "b" = $3"#
    );
    assert_eq!(
        Q.delete(&dst(), &keys),
        r#"DELETE FROM "dst_table01" WHERE "id" = $1"#
    );
}

#[test]
fn identifiers_are_quoted_safely() {
    assert_eq!(Q.ident(r#"we"ird"#), r#""we""ird""#);
    assert_eq!(
        Q.table(&TableId::parse("Sales.Orders").expect("valid")),
        r#""Sales"."Orders""#
    );
    for bad in ["", ".t", "s.", "a.b.c"] {
        let e = TableId::parse(bad).expect_err(bad).message;
        assert!(e.starts_with("table.name.format: "), "{e}");
    }
}

#[test]
fn column_types_of_connect_schemas() {
    let s = |ty| Schema::of(ty);
    for (schema, sql) in [
        (s(SchemaType::Int8), "SMALLINT"),
        (s(SchemaType::Int16), "SMALLINT"),
        (s(SchemaType::Int32), "INT"),
        (s(SchemaType::Int64), "BIGINT"),
        (s(SchemaType::Float32), "REAL"),
        (s(SchemaType::Float64), "DOUBLE PRECISION"),
        (s(SchemaType::Boolean), "BOOLEAN"),
        (s(SchemaType::String), "TEXT"),
        (s(SchemaType::Bytes), "BYTEA"),
    ] {
        assert_eq!(sql_type("f", &schema).expect("a type"), sql);
    }
    let mut decimal = s(SchemaType::Bytes);
    decimal.name = Some("org.apache.kafka.connect.data.Decimal".into());
    decimal.parameters.insert("scale".into(), "2".into());
    assert_eq!(sql_type("amount", &decimal).expect("a type"), "DECIMAL");
    let mut timestamp = s(SchemaType::Int64);
    timestamp.name = Some("org.apache.kafka.connect.data.Timestamp".into());
    assert_eq!(sql_type("at", &timestamp).expect("a type"), "TIMESTAMP");
    let mut array = s(SchemaType::Array);
    array.value_schema = Some(Arc::new(s(SchemaType::String)));
    assert_eq!(sql_type("tags", &array).expect("a type"), "TEXT[]");
    let e = sql_type("address", &s(SchemaType::Struct)).expect_err("no type");
    assert!(
        e.message
            .contains("field address: a struct has no column type"),
        "{}",
        e.message
    );
}

#[test]
fn auto_create_and_evolve() {
    let columns = vec![
        Column {
            name: "id".into(),
            sql_type: "INT".into(),
            optional: false,
            default: None,
        },
        Column {
            name: "item".into(),
            sql_type: "TEXT".into(),
            optional: true,
            default: Some("'none'".into()),
        },
    ];
    assert_eq!(
        Q.create_table(&dst(), &columns, &names(&["id"])),
        "CREATE TABLE \"dst_table01\" (\n\"id\" INT NOT NULL,\n\"item\" TEXT DEFAULT 'none',\nPRIMARY KEY(\"id\"))"
    );
    assert_eq!(
        Q.add_columns(&dst(), &columns[1..]),
        r#"ALTER TABLE "dst_table01" ADD "item" TEXT DEFAULT 'none'"#
    );
}

#[test]
fn the_offsets_table_fences_older_generations() {
    assert!(create_offsets_table().contains("PRIMARY KEY (connector, topic, kafka_partition)"));
    assert!(lock_offsets().ends_with("FOR UPDATE"));
    assert!(store_offsets().contains("WHERE o.generation <= EXCLUDED.generation"));
}
