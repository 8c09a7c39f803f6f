//! Each transform with Kafka Connect's documented examples, the seed 003 chain, predicates, and
//! configs that fail naming the property.

use super::*;
use crate::converter::{Converter, JsonConverter};
use crate::data::{SchemaType, Struct};
use crate::logical::Decimal;
use crate::record::SourceRecord;

use crate::config::props as config;

fn sink(topic: &str, value_schema: Option<Arc<Schema>>, value: Value) -> SinkRecord {
    SinkRecord {
        topic: topic.into(),
        partition: 3,
        offset: 42,
        timestamp: Some(1_700_000_000_000),
        key_schema: None,
        key: Value::Null,
        value_schema,
        value,
        headers: Vec::new(),
    }
}

fn map(entries: &[(&str, Value)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| (Value::String(k.to_string()), v.clone()))
            .collect(),
    )
}

fn run(pairs: &[(&str, &str)], record: &mut dyn ConnectRecord) -> Applied {
    Chain::from_config(&config(pairs))
        .expect("valid chain")
        .apply(record)
        .expect("applies")
}

fn json_of(schema: Option<&Arc<Schema>>, value: &Value) -> String {
    let bytes = JsonConverter::default()
        .encode("t", schema, value)
        .expect("encodes")
        .expect("not null");
    String::from_utf8(bytes).expect("utf-8")
}

#[test]
fn seed_003_value_to_key_then_extract_field_keys_records_by_user_id() {
    // dst_table01's first row, as the JDBC source reads it.
    let text = r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":1,"user_id":"user01","item":"apple"}}"#;
    let row = JsonConverter::default()
        .decode("dst_table01", Some(text.as_bytes()))
        .expect("decodes");
    let mut record = sink("dst_table01", row.schema.clone(), row.value.clone());
    let chain = SEED_003_CHAIN;
    assert_eq!(run(chain, &mut record), Applied::Keep);
    // The key the seed printed, and the value untouched.
    assert_eq!(
        json_of(record.key_schema.as_ref(), &record.key),
        r#"{"schema":{"type":"string","optional":true},"payload":"user01"}"#
    );
    assert_eq!(json_of(record.value_schema.as_ref(), &record.value), text);
}

#[test]
fn hoist_then_insert_field_as_in_kafkas_quickstart() {
    // FileStreamSource lines, hoisted into {"line": …} and tagged with a static field.
    let chain = [
        ("transforms", "MakeMap,InsertSource"),
        (
            "transforms.MakeMap.type",
            "org.apache.kafka.connect.transforms.HoistField$Value",
        ),
        ("transforms.MakeMap.field", "line"),
        (
            "transforms.InsertSource.type",
            "org.apache.kafka.connect.transforms.InsertField$Value",
        ),
        ("transforms.InsertSource.static.field", "data_source"),
        ("transforms.InsertSource.static.value", "test-file-source"),
    ];
    let mut schemaless = sink("connect-test", None, Value::String("foo".into()));
    run(&chain, &mut schemaless);
    assert_eq!(
        schemaless.value,
        map(&[
            ("line", Value::String("foo".into())),
            ("data_source", Value::String("test-file-source".into()))
        ])
    );
    let mut with_schema = sink(
        "connect-test",
        Some(Arc::new(Schema::of(SchemaType::String))),
        Value::String("foo".into()),
    );
    run(&chain, &mut with_schema);
    assert_eq!(
        json_of(with_schema.value_schema.as_ref(), &with_schema.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"line"},{"type":"string","optional":true,"field":"data_source"}],"optional":false},"payload":{"line":"foo","data_source":"test-file-source"}}"#
    );
}

#[test]
fn insert_field_adds_topic_partition_offset_and_timestamp() {
    let chain = [
        ("transforms", "meta"),
        ("transforms.meta.type", "InsertField$Value"),
        ("transforms.meta.topic.field", "t!"),
        ("transforms.meta.partition.field", "p"),
        ("transforms.meta.offset.field", "o"),
        ("transforms.meta.timestamp.field", "ts?"),
    ];
    let mut r = sink("orders", None, map(&[("id", Value::Int64(1))]));
    run(&chain, &mut r);
    assert_eq!(
        r.value,
        map(&[
            ("id", Value::Int64(1)),
            ("t", Value::String("orders".into())),
            ("p", Value::Int32(3)),
            ("o", Value::Int64(42)),
            ("ts", Value::Timestamp(1_700_000_000_000)),
        ])
    );
    let schema = Arc::new(Schema::structure(vec![(
        "id",
        Schema::of(SchemaType::Int64),
    )]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int64(1)).expect("fits");
    let mut r = sink("orders", Some(schema), Value::Struct(s));
    run(&chain, &mut r);
    let out = r.value_schema.expect("schema");
    let fields: Vec<(&str, bool)> = out
        .fields
        .iter()
        .map(|f| (f.name.as_str(), f.schema.optional))
        .collect();
    assert_eq!(
        fields,
        [
            ("id", false),
            ("t", false),
            ("p", true),
            ("o", true),
            ("ts", true)
        ]
    );
    // Tombstones pass through; the offset of a source record does not exist.
    let mut tombstone = sink("orders", None, Value::Null);
    assert_eq!(run(&chain, &mut tombstone), Applied::Keep);
    assert_eq!(tombstone.value, Value::Null);
    let mut source = SourceRecord {
        source_partition: Default::default(),
        source_offset: Default::default(),
        topic: "orders".into(),
        partition: None,
        key_schema: None,
        key: Value::Null,
        value_schema: None,
        value: map(&[("id", Value::Int64(1))]),
        timestamp: None,
        headers: Vec::new(),
    };
    let err = Chain::from_config(&config(&chain))
        .expect("valid")
        .apply(&mut source)
        .expect_err("no offset on a source record");
    assert!(err.to_string().contains("transform meta"), "{err}");
}

#[test]
fn replace_field_excludes_includes_and_renames() {
    // Confluent's example: drop c2, rename foo to c1 and bar to c2.
    let value = map(&[
        ("foo", Value::Int64(1)),
        ("bar", Value::String("b".into())),
        ("c2", Value::Boolean(true)),
    ]);
    let mut r = sink("t", None, value);
    run(
        &[
            ("transforms", "r"),
            ("transforms.r.type", "ReplaceField$Value"),
            ("transforms.r.exclude", "c2"),
            ("transforms.r.renames", "foo:c1,bar:c2"),
        ],
        &mut r,
    );
    assert_eq!(
        r.value,
        map(&[("c1", Value::Int64(1)), ("c2", Value::String("b".into()))])
    );
    let schema = Arc::new(Schema::structure(vec![
        ("a", Schema::of(SchemaType::Int32)),
        ("b", Schema::of(SchemaType::String).optional()),
        ("c", Schema::of(SchemaType::Boolean)),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("a", Value::Int32(1)).expect("a");
    s.put("c", Value::Boolean(true)).expect("c");
    let mut r = sink("t", Some(schema), Value::Struct(s));
    run(
        &[
            ("transforms", "r"),
            ("transforms.r.type", "ReplaceField$Value"),
            ("transforms.r.include", "a,b"),
            ("transforms.r.renames", "a:alpha"),
        ],
        &mut r,
    );
    assert_eq!(
        json_of(r.value_schema.as_ref(), &r.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"alpha"},{"type":"string","optional":true,"field":"b"}],"optional":false},"payload":{"alpha":1,"b":null}}"#
    );
}

#[test]
fn mask_field_empties_or_replaces() {
    let value = map(&[
        ("ssn", Value::String("123-45-6789".into())),
        ("age", Value::Int32(40)),
        ("vip", Value::Boolean(true)),
        ("tags", Value::Array(vec![Value::String("x".into())])),
        ("price", Value::Decimal(Decimal::new(1999, 2))),
    ]);
    let mut r = sink("t", None, value.clone());
    run(
        &[
            ("transforms", "m"),
            ("transforms.m.type", "MaskField$Value"),
            ("transforms.m.fields", "ssn,age,vip,tags,price"),
        ],
        &mut r,
    );
    assert_eq!(
        r.value,
        map(&[
            ("ssn", Value::String(String::new())),
            ("age", Value::Int32(0)),
            ("vip", Value::Boolean(false)),
            ("tags", Value::Array(Vec::new())),
            ("price", Value::Decimal(Decimal::new(0, 2))),
        ])
    );
    let mut r = sink("t", None, value.clone());
    run(
        &[
            ("transforms", "m"),
            ("transforms.m.type", "MaskField$Value"),
            ("transforms.m.fields", "ssn,age"),
            ("transforms.m.replacement", "9999"),
        ],
        &mut r,
    );
    let Value::Map(entries) = &r.value else {
        panic!("map");
    };
    assert_eq!(entries[0].1, Value::String("9999".into()));
    assert_eq!(entries[1].1, Value::Int32(9999));
    // A replacement for a boolean is an error naming the field.
    let err = Chain::from_config(&config(&[
        ("transforms", "m"),
        ("transforms.m.type", "MaskField$Value"),
        ("transforms.m.fields", "vip"),
        ("transforms.m.replacement", "x"),
    ]))
    .expect("valid")
    .apply(&mut sink("t", None, value))
    .expect_err("booleans take no replacement");
    assert!(err.to_string().contains("field vip"), "{err}");
}

#[test]
fn extract_field_from_a_struct_or_a_map() {
    // Confluent's example: {"id": 42, "name": "x"} with field=id gives 42.
    let mut r = sink(
        "t",
        None,
        map(&[
            ("id", Value::Int64(42)),
            ("name", Value::String("x".into())),
        ]),
    );
    run(
        &[
            ("transforms", "e"),
            ("transforms.e.type", "ExtractField$Value"),
            ("transforms.e.field", "id"),
        ],
        &mut r,
    );
    assert_eq!(
        (r.value_schema.is_none(), &r.value),
        (true, &Value::Int64(42))
    );
    let schema = Arc::new(Schema::structure(vec![(
        "id",
        Schema::of(SchemaType::Int32),
    )]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(7)).expect("id");
    let mut r = sink("t", Some(schema), Value::Struct(s));
    let err = Chain::from_config(&config(&[
        ("transforms", "e"),
        ("transforms.e.type", "ExtractField$Value"),
        ("transforms.e.field", "missing"),
    ]))
    .expect("valid")
    .apply(&mut r)
    .expect_err("unknown field");
    assert!(err.to_string().contains("unknown field: missing"), "{err}");
}

#[test]
fn value_to_key_needs_a_struct_or_map_with_the_fields() {
    let schema = Arc::new(Schema::structure(vec![(
        "id",
        Schema::of(SchemaType::Int32),
    )]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(7)).expect("id");
    let chain = config(&[
        ("transforms", "k"),
        ("transforms.k.type", "ValueToKey"),
        ("transforms.k.fields", "id,region"),
    ]);
    let err = Chain::from_config(&chain)
        .expect("valid")
        .apply(&mut sink("t", Some(schema), Value::Struct(s)))
        .expect_err("region is not a field");
    assert!(
        err.to_string().contains("field does not exist: region"),
        "{err}"
    );
    let err = Chain::from_config(&chain)
        .expect("valid")
        .apply(&mut sink("t", None, Value::String("x".into())))
        .expect_err("a string has no fields");
    assert!(err.to_string().contains("only Map objects"), "{err}");
    let mut r = sink(
        "t",
        None,
        map(&[
            ("id", Value::Int64(1)),
            ("region", Value::String("eu".into())),
        ]),
    );
    Chain::from_config(&chain)
        .expect("valid")
        .apply(&mut r)
        .expect("applies");
    assert_eq!(
        r.key,
        map(&[
            ("id", Value::Int64(1)),
            ("region", Value::String("eu".into()))
        ])
    );
}

#[test]
fn value_to_key_makes_each_value_schema_its_own_key_schema() {
    // One chain sees records of two tables in turn: the key schema it keeps for the last value
    // schema must never serve a record of another.
    let table = |id: Schema| {
        Arc::new(Schema::structure(vec![
            ("id", id),
            ("item", Schema::of(SchemaType::String).optional()),
        ]))
    };
    let numbered = table(Schema::of(SchemaType::Int32));
    let named = table(Schema::of(SchemaType::String));
    let chain = Chain::from_config(&config(&[
        ("transforms", "k"),
        ("transforms.k.type", "ValueToKey"),
        ("transforms.k.fields", "id"),
    ]))
    .expect("valid");
    for (schema, id) in [
        (&numbered, Value::Int32(1)),
        (&named, Value::String("a".into())),
        (&numbered, Value::Int32(2)),
    ] {
        let mut s = Struct::new(schema.clone()).expect("struct");
        s.put("id", id.clone()).expect("id");
        let mut r = sink("t", Some(schema.clone()), Value::Struct(s));
        chain.apply(&mut r).expect("applies");
        let key_schema = r.key_schema.expect("a key schema");
        let field = key_schema.field("id").expect("id in the key");
        assert!(Arc::ptr_eq(&field.schema, &schema.fields[0].schema));
        assert_eq!(key_schema.fields.len(), 1);
        let Value::Struct(key) = &r.key else {
            panic!("a struct key, got {:?}", r.key)
        };
        assert_eq!(key.get("id"), Some(&id));
    }
}

#[test]
fn routers_rename_topics() {
    // Confluent's example: drop the "soe-" prefix.
    let mut r = sink("soe-Order", None, Value::Null);
    run(
        &[
            ("transforms", "dropPrefix"),
            (
                "transforms.dropPrefix.type",
                "org.apache.kafka.connect.transforms.RegexRouter",
            ),
            ("transforms.dropPrefix.regex", "soe-(.*)"),
            ("transforms.dropPrefix.replacement", "$1"),
        ],
        &mut r,
    );
    assert_eq!(r.topic, "Order");
    // A topic the regex matches only in part is left alone (Java's matches()).
    let mut r = sink("xsoe-Order", None, Value::Null);
    run(
        &[
            ("transforms", "d"),
            ("transforms.d.type", "RegexRouter"),
            ("transforms.d.regex", "soe-(.*)"),
            ("transforms.d.replacement", "$1"),
        ],
        &mut r,
    );
    assert_eq!(r.topic, "xsoe-Order");
    let mut r = sink("test", None, Value::Null);
    run(
        &[
            ("transforms", "ts"),
            ("transforms.ts.type", "TimestampRouter"),
            ("transforms.ts.topic.format", "foo-${topic}-${timestamp}"),
            ("transforms.ts.timestamp.format", "yyyyMM"),
        ],
        &mut r,
    );
    assert_eq!(r.topic, "foo-test-202311");
    let mut r = sink("test", None, Value::Null);
    run(
        &[
            ("transforms", "ts"),
            ("transforms.ts.type", "TimestampRouter"),
        ],
        &mut r,
    );
    assert_eq!(r.topic, "test-20231114", "the defaults");
}

#[test]
fn filter_with_predicates_and_negate() {
    let filter = |negate: &str| {
        config(&[
            ("transforms", "Filter"),
            (
                "transforms.Filter.type",
                "org.apache.kafka.connect.transforms.Filter",
            ),
            ("transforms.Filter.predicate", "IsFoo"),
            ("transforms.Filter.negate", negate),
            ("predicates", "IsFoo"),
            (
                "predicates.IsFoo.type",
                "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            ),
            ("predicates.IsFoo.pattern", "foo"),
        ])
    };
    let drop_foo = Chain::from_config(&filter("false")).expect("valid");
    assert_eq!(
        drop_foo
            .apply(&mut sink("foo", None, Value::Null))
            .expect("ok"),
        Applied::Drop
    );
    assert_eq!(
        drop_foo
            .apply(&mut sink("food", None, Value::Null))
            .expect("ok"),
        Applied::Keep
    );
    let keep_foo = Chain::from_config(&filter("true")).expect("valid");
    assert_eq!(
        keep_foo
            .apply(&mut sink("foo", None, Value::Null))
            .expect("ok"),
        Applied::Keep
    );
    assert_eq!(
        keep_foo
            .apply(&mut sink("bar", None, Value::Null))
            .expect("ok"),
        Applied::Drop
    );

    let tombstones = Chain::from_config(&config(&[
        ("transforms", "dropTombstones"),
        ("transforms.dropTombstones.type", "Filter"),
        ("transforms.dropTombstones.predicate", "isTombstone"),
        ("predicates", "isTombstone,hasTrace"),
        ("predicates.isTombstone.type", "RecordIsTombstone"),
        ("predicates.hasTrace.type", "HasHeaderKey"),
        ("predicates.hasTrace.name", "trace"),
    ]))
    .expect("valid");
    assert_eq!(
        tombstones
            .apply(&mut sink("t", None, Value::Null))
            .expect("ok"),
        Applied::Drop
    );
    assert_eq!(
        tombstones
            .apply(&mut sink("t", None, Value::Int64(1)))
            .expect("ok"),
        Applied::Keep
    );
    // A transform whose predicate does not hold leaves the record as it is.
    let mut r = sink("bar", None, map(&[("a", Value::Int64(1))]));
    run(
        &[
            ("transforms", "e"),
            ("transforms.e.type", "ExtractField$Value"),
            ("transforms.e.field", "a"),
            ("transforms.e.predicate", "IsFoo"),
            ("predicates", "IsFoo"),
            ("predicates.IsFoo.type", "TopicNameMatches"),
            ("predicates.IsFoo.pattern", "foo"),
        ],
        &mut r,
    );
    assert_eq!(r.value, map(&[("a", Value::Int64(1))]));
}

#[test]
fn bad_configs_name_the_property() {
    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            vec![("transforms", "a")],
            "transforms.a.type: missing required property",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "com.example.Nope"),
            ],
            "transforms.a.type",
        ),
        (
            vec![("transforms", "a"), ("transforms.a.type", "ValueToKey")],
            "transforms.a.fields: missing required property",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "ExtractField$Key"),
                ("transforms.a.field", "x"),
                ("transforms.a.feild", "y"),
            ],
            "transforms.a.feild: not a property of this transform",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "RegexRouter"),
                ("transforms.a.regex", "("),
                ("transforms.a.replacement", "x"),
            ],
            "transforms.a.regex: not a valid regular expression",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "TimestampRouter"),
                ("transforms.a.timestamp.format", "yyyy-qq"),
            ],
            "transforms.a.timestamp.format",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "ReplaceField$Value"),
                ("transforms.a.renames", "a-b"),
            ],
            "transforms.a.renames: invalid rename mapping",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "InsertField$Value"),
                ("transforms.a.static.field", "x"),
            ],
            "transforms.a.static.value",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "Filter"),
                ("transforms.a.predicate", "p"),
            ],
            "transforms.a.predicate: \"p\" is not listed in predicates",
        ),
        (
            vec![
                ("transforms", "a"),
                ("transforms.a.type", "Filter"),
                ("transforms.a.negate", "true"),
            ],
            "transforms.a.negate: is set but transforms.a.predicate is not",
        ),
        (
            vec![
                ("predicates", "p"),
                ("predicates.p.type", "TopicNameMatches"),
            ],
            "predicates.p.pattern: missing required property",
        ),
        (
            vec![
                ("predicates", "p"),
                ("predicates.p.type", "TopicNameMatches"),
                ("predicates.p.pattern", "["),
            ],
            "predicates.p.pattern: not a valid regular expression",
        ),
    ];
    for (pairs, want) in cases {
        let err = Chain::from_config(&config(&pairs)).err().expect(want);
        assert!(err.to_string().contains(want), "{want}: {err}");
        let problem = err.config.as_ref().expect("a config error");
        assert!(
            want.starts_with(&problem.property),
            "{want}: the problem is about {}",
            problem.property
        );
    }
    assert!(Chain::from_config(&BTreeMap::new())
        .expect("no transforms")
        .is_empty());
}

#[test]
fn header_transforms_insert_drop_and_take_from_fields() {
    // InsertHeader's documented example: header=MyHeader, value.literal=MyValue.
    let mut r = sink(
        "t",
        None,
        map(&[
            ("id", Value::Int64(1)),
            ("trace", Value::String("abc".into())),
        ]),
    );
    run(
        &[
            ("transforms", "insert,from"),
            (
                "transforms.insert.type",
                "org.apache.kafka.connect.transforms.InsertHeader",
            ),
            ("transforms.insert.header", "MyHeader"),
            ("transforms.insert.value.literal", "MyValue"),
            ("transforms.from.type", "HeaderFrom$Value"),
            ("transforms.from.fields", "trace"),
            ("transforms.from.headers", "trace-id"),
            ("transforms.from.operation", "move"),
        ],
        &mut r,
    );
    let headers: Vec<(&str, &Value)> = r
        .headers
        .iter()
        .map(|h| (h.key.as_str(), &h.value))
        .collect();
    assert_eq!(
        headers,
        [
            ("MyHeader", &Value::String("MyValue".into())),
            ("trace-id", &Value::String("abc".into()))
        ]
    );
    assert_eq!(
        r.value,
        map(&[("id", Value::Int64(1))]),
        "moved, not copied"
    );
    // A literal is typed as SimpleHeaderConverter would type it.
    run(
        &[
            ("transforms", "n"),
            ("transforms.n.type", "InsertHeader"),
            ("transforms.n.header", "attempt"),
            ("transforms.n.value.literal", "3"),
        ],
        &mut r,
    );
    assert_eq!(r.headers[2].value, Value::Int8(3));
    run(
        &[
            ("transforms", "drop"),
            ("transforms.drop.type", "DropHeaders"),
            ("transforms.drop.headers", "MyHeader,attempt"),
        ],
        &mut r,
    );
    assert_eq!(r.headers.len(), 1);
    assert_eq!(r.headers[0].key, "trace-id");
    // With a schema, copy keeps the field and the header gets the field's schema.
    let schema = Arc::new(Schema::structure(vec![
        ("id", Schema::of(SchemaType::Int32)),
        ("region", Schema::of(SchemaType::String)),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(1)).expect("id");
    s.put("region", Value::String("eu".into())).expect("region");
    let mut r = sink("t", Some(schema.clone()), Value::Struct(s));
    run(
        &[
            ("transforms", "from"),
            ("transforms.from.type", "HeaderFrom$Value"),
            ("transforms.from.fields", "region"),
            ("transforms.from.headers", "region"),
            ("transforms.from.operation", "copy"),
        ],
        &mut r,
    );
    assert_eq!(r.value_schema.as_ref(), Some(&schema));
    assert_eq!(
        r.headers[0].schema.as_ref().map(|s| s.ty),
        Some(SchemaType::String)
    );
    let err = Chain::from_config(&config(&[
        ("transforms", "from"),
        ("transforms.from.type", "HeaderFrom$Value"),
        ("transforms.from.fields", "a,b"),
        ("transforms.from.headers", "a"),
        ("transforms.from.operation", "copy"),
    ]))
    .err()
    .expect("one header for two fields");
    assert!(
        err.to_string().starts_with("transforms.from.headers:"),
        "{err}"
    );
}

#[test]
fn set_schema_metadata_renames_the_schema_and_its_struct() {
    let schema =
        Arc::new(Schema::structure(vec![("id", Schema::of(SchemaType::Int32))]).named("old"));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(1)).expect("id");
    let mut r = sink("t", Some(schema), Value::Struct(s));
    run(
        &[
            ("transforms", "meta"),
            ("transforms.meta.type", "SetSchemaMetadata$Value"),
            ("transforms.meta.schema.name", "com.example.Order"),
            ("transforms.meta.schema.version", "2"),
        ],
        &mut r,
    );
    let schema = r.value_schema.clone().expect("schema");
    assert_eq!(
        (schema.name.as_deref(), schema.version),
        (Some("com.example.Order"), Some(2))
    );
    let Value::Struct(s) = &r.value else {
        panic!("struct");
    };
    assert_eq!(s.schema, schema, "the struct carries the new schema");
    assert!(json_of(Some(&schema), &r.value).contains(r#""name":"com.example.Order","version":2"#));
    let err = Chain::from_config(&config(&[
        ("transforms", "meta"),
        ("transforms.meta.type", "SetSchemaMetadata$Value"),
        ("transforms.meta.schema.name", "x"),
    ]))
    .expect("valid")
    .apply(&mut sink("t", None, Value::Int64(1)))
    .expect_err("schemaless");
    assert!(err.to_string().contains("schemaless value"), "{err}");
}

#[test]
fn cast_whole_values_and_fields() {
    // Kafka's documented example: spec=int8 on a whole value, then field casts.
    let mut r = sink(
        "t",
        Some(Arc::new(Schema::of(SchemaType::Int32))),
        Value::Int32(42),
    );
    run(
        &[
            ("transforms", "c"),
            ("transforms.c.type", "Cast$Value"),
            ("transforms.c.spec", "int8"),
        ],
        &mut r,
    );
    assert_eq!(
        (r.value_schema.as_ref().map(|s| s.ty), &r.value),
        (Some(SchemaType::Int8), &Value::Int8(42))
    );
    let mut r = sink(
        "t",
        None,
        map(&[
            ("count", Value::String("17".into())),
            ("ratio", Value::Float64(2.75)),
            ("on", Value::Int64(0)),
            ("price", Value::Decimal(Decimal::new(1999, 2))),
        ]),
    );
    run(
        &[
            ("transforms", "c"),
            ("transforms.c.type", "Cast$Value"),
            (
                "transforms.c.spec",
                "count:int64,ratio:int32,on:boolean,price:string",
            ),
        ],
        &mut r,
    );
    assert_eq!(
        r.value,
        map(&[
            ("count", Value::Int64(17)),
            ("ratio", Value::Int32(2)),
            ("on", Value::Boolean(false)),
            ("price", Value::String("19.99".into())),
        ])
    );
    let schema = Arc::new(Schema::structure(vec![
        ("id", Schema::of(SchemaType::Int64)),
        ("score", Schema::of(SchemaType::Float32).optional()),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int64(5)).expect("id");
    s.put("score", Value::Float32(1.5)).expect("score");
    let mut r = sink("t", Some(schema), Value::Struct(s));
    run(
        &[
            ("transforms", "c"),
            ("transforms.c.type", "Cast$Value"),
            ("transforms.c.spec", "id:string,score:float64"),
        ],
        &mut r,
    );
    assert_eq!(
        json_of(r.value_schema.as_ref(), &r.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"},{"type":"double","optional":true,"field":"score"}],"optional":false},"payload":{"id":"5","score":1.5}}"#
    );
    let bad = Chain::from_config(&config(&[
        ("transforms", "c"),
        ("transforms.c.type", "Cast$Value"),
        ("transforms.c.spec", "id:uuid"),
    ]))
    .err()
    .expect("not a type");
    assert!(bad.to_string().starts_with("transforms.c.spec:"), "{bad}");
    let err = Chain::from_config(&config(&[
        ("transforms", "c"),
        ("transforms.c.type", "Cast$Value"),
        ("transforms.c.spec", "count:int32"),
    ]))
    .expect("valid")
    .apply(&mut sink(
        "t",
        None,
        map(&[("count", Value::String("many".into()))]),
    ))
    .expect_err("not a number");
    assert!(err.to_string().contains("field count"), "{err}");
}

#[test]
fn flatten_nested_structs_and_maps() {
    // Kafka's documented example: {"content": {"id": 42, "name": {"first": "David"}}}.
    let mut r = sink(
        "t",
        None,
        map(&[(
            "content",
            map(&[
                ("id", Value::Int64(42)),
                ("name", map(&[("first", Value::String("David".into()))])),
            ]),
        )]),
    );
    run(
        &[("transforms", "f"), ("transforms.f.type", "Flatten$Value")],
        &mut r,
    );
    assert_eq!(
        r.value,
        map(&[
            ("content.id", Value::Int64(42)),
            ("content.name.first", Value::String("David".into()))
        ])
    );
    let inner = Schema::structure(vec![("city", Schema::of(SchemaType::String))]).optional();
    let schema = Arc::new(Schema::structure(vec![
        ("id", Schema::of(SchemaType::Int32)),
        ("address", inner),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(1)).expect("id");
    let mut r = sink("t", Some(schema), Value::Struct(s));
    run(
        &[
            ("transforms", "f"),
            ("transforms.f.type", "Flatten$Value"),
            ("transforms.f.delimiter", "_"),
        ],
        &mut r,
    );
    assert_eq!(
        json_of(r.value_schema.as_ref(), &r.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"address_city"}],"optional":false},"payload":{"id":1,"address_city":null}}"#
    );
}

#[test]
fn timestamp_converter_between_text_unix_and_logical_types() {
    // Kafka's documented example: a string field in "yyyy-MM-dd" to a Timestamp.
    let convert = |spec: &[(&str, &str)], record: &mut SinkRecord| {
        let mut pairs = vec![
            ("transforms", "ts"),
            ("transforms.ts.type", "TimestampConverter$Value"),
        ];
        pairs.extend(spec.iter().map(|(k, v)| (*k, *v)));
        run(&pairs, record)
    };
    let mut r = sink(
        "t",
        None,
        map(&[("when", Value::String("2023-11-14".into()))]),
    );
    convert(
        &[
            ("transforms.ts.field", "when"),
            ("transforms.ts.target.type", "Timestamp"),
            ("transforms.ts.format", "yyyy-MM-dd"),
        ],
        &mut r,
    );
    assert_eq!(
        r.value,
        map(&[("when", Value::Timestamp(1_699_920_000_000))])
    );
    // The whole value: unix seconds to text.
    let mut r = sink(
        "t",
        Some(Arc::new(Schema::of(SchemaType::Int64))),
        Value::Int64(1_700_000_000),
    );
    convert(
        &[
            ("transforms.ts.target.type", "string"),
            ("transforms.ts.format", "yyyy-MM-dd'T'HH:mm:ss'Z'"),
            ("transforms.ts.unix.precision", "seconds"),
        ],
        &mut r,
    );
    assert_eq!(r.value, Value::String("2023-11-14T22:13:20Z".into()));
    assert_eq!(r.value_schema.map(|s| s.ty), Some(SchemaType::String));
    // A Timestamp field to Date and to unix microseconds, with a schema.
    let schema = Arc::new(Schema::structure(vec![(
        "at",
        crate::logical::timestamp_schema(),
    )]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("at", Value::Timestamp(1_700_000_000_042))
        .expect("at");
    let mut r = sink("t", Some(schema.clone()), Value::Struct(s.clone()));
    convert(
        &[
            ("transforms.ts.field", "at"),
            ("transforms.ts.target.type", "Date"),
        ],
        &mut r,
    );
    assert_eq!(
        json_of(r.value_schema.as_ref(), &r.value),
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"name":"org.apache.kafka.connect.data.Date","version":1,"field":"at"}],"optional":false},"payload":{"at":19675}}"#
    );
    let mut r = sink("t", Some(schema), Value::Struct(s));
    convert(
        &[
            ("transforms.ts.field", "at"),
            ("transforms.ts.target.type", "unix"),
            ("transforms.ts.unix.precision", "microseconds"),
        ],
        &mut r,
    );
    let Value::Struct(out) = &r.value else {
        panic!("struct")
    };
    assert_eq!(out.get("at"), Some(&Value::Int64(1_700_000_000_042_000)));
    // Text that does not match the format names the field.
    let err = Chain::from_config(&config(&[
        ("transforms", "ts"),
        ("transforms.ts.type", "TimestampConverter$Value"),
        ("transforms.ts.field", "when"),
        ("transforms.ts.target.type", "Timestamp"),
        ("transforms.ts.format", "yyyy-MM-dd"),
    ]))
    .expect("valid")
    .apply(&mut sink(
        "t",
        None,
        map(&[("when", Value::String("yesterday".into()))]),
    ))
    .expect_err("not a date");
    assert!(err.to_string().contains("field when"), "{err}");
    let err = Chain::from_config(&config(&[
        ("transforms", "ts"),
        ("transforms.ts.type", "TimestampConverter$Value"),
        ("transforms.ts.target.type", "string"),
    ]))
    .err()
    .expect("string needs a format");
    assert!(
        err.to_string().starts_with("transforms.ts.format:"),
        "{err}"
    );
}
