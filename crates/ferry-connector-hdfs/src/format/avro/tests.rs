use super::*;
use apache_avro::types::Value as Avro;
use ferry_connect::converter::JsonConverter;
use ferry_connect::logical::{date_schema, decimal_schema, timestamp_schema, Decimal};
use ferry_connect::{Converter, Struct};

fn record(schema: Option<Arc<Schema>>, value: Value, offset: i64) -> SinkRecord {
    SinkRecord {
        topic: "irene-shopping-log".into(),
        partition: 1,
        offset,
        timestamp: None,
        key_schema: None,
        key: Value::Null,
        value_schema: schema,
        value,
        headers: Vec::new(),
    }
}

/// A file of these records, read back by apache-avro's reader: its schema text and values.
fn round_trip(codec: AvroCodec, records: &[SinkRecord]) -> (String, Vec<Avro>) {
    let mut writer: Box<dyn RecordWriter> = Box::new(AvroWriter::new(codec));
    let mut file = Vec::new();
    for r in records {
        writer.write(r).expect("write");
        file.extend(writer.take());
    }
    file.extend(writer.finish().expect("finish"));
    let reader = apache_avro::Reader::new(&file[..]).expect("an Avro container file");
    let schema = reader.writer_schema().canonical_form();
    let values = reader.map(|v| v.expect("a record")).collect();
    (schema, values)
}

fn click(user: &str, ts: i64) -> (Arc<Schema>, Value) {
    let schema = Arc::new(Schema::structure(vec![
        ("user", Schema::of(SchemaType::String)),
        ("timestamp", Schema::of(SchemaType::Int64)),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("user", Value::String(user.into())).expect("user");
    s.put("timestamp", Value::Int64(ts)).expect("ts");
    (schema, Value::Struct(s))
}

#[test]
fn an_unnamed_struct_becomes_confluents_connect_default_record() {
    let (schema, _) = click("irene", 1);
    assert_eq!(
        avro_schema(&schema).expect("schema").to_string(),
        r#"{"type":"record","name":"ConnectDefault","namespace":"io.confluent.connect.avro","fields":[{"name":"user","type":"string"},{"name":"timestamp","type":"long"}]}"#
    );
}

#[test]
fn records_read_back_with_every_codec_across_blocks() {
    for codec in [AvroCodec::Null, AvroCodec::Deflate, AvroCodec::Snappy] {
        // Enough records for several 64 kB blocks.
        let records: Vec<SinkRecord> = (0..5000)
            .map(|i| {
                let (schema, value) = click(
                    &format!("user-{i:05}-{}", "x".repeat(20)),
                    1_552_581_432_000 + i,
                );
                record(Some(schema), value, i)
            })
            .collect();
        let (_, values) = round_trip(codec, &records);
        assert_eq!(values.len(), 5000, "{codec:?}");
        assert_eq!(
            values[4321],
            Avro::Record(vec![
                (
                    "user".into(),
                    Avro::String(format!("user-04321-{}", "x".repeat(20)))
                ),
                ("timestamp".into(), Avro::Long(1_552_581_432_000 + 4321)),
            ]),
            "{codec:?}"
        );
    }
}

#[test]
fn optional_fields_defaults_small_ints_and_logical_types_keep_their_meaning() {
    let price = decimal_schema(2).optional();
    let schema = Arc::new(
        Schema::structure(vec![
            ("id", Schema::of(SchemaType::Int16)),
            ("item", Schema::of(SchemaType::String).optional()),
            (
                "qty",
                Schema::of(SchemaType::Int32)
                    .with_default(Value::Int32(1))
                    .expect("default"),
            ),
            ("price", price),
            ("day", date_schema()),
            ("at", timestamp_schema()),
            ("tags", Schema::array(Schema::of(SchemaType::String))),
            (
                "attrs",
                Schema::map(
                    Schema::of(SchemaType::String),
                    Schema::of(SchemaType::Int64),
                ),
            ),
            (
                "by_id",
                Schema::map(
                    Schema::of(SchemaType::Int32),
                    Schema::of(SchemaType::Boolean),
                ),
            ),
        ])
        .named("com.example.Order"),
    );
    let text = avro_schema(&schema).expect("schema").to_string();
    for part in [
        r#""name":"Order","namespace":"com.example""#,
        r#"{"type":"int","connect.type":"int16"}"#,
        r#"{"name":"item","type":["null","string"],"default":null}"#,
        r#"{"name":"qty","type":{"type":"int","connect.default":1},"default":1}"#,
        r#""logicalType":"decimal""#,
        r#""precision":38"#,
        r#""connect.name":"org.apache.kafka.connect.data.Timestamp","logicalType":"timestamp-millis""#,
        r#"{"type":"map","values":"long"}"#,
        r#""name":"MapEntry","namespace":"io.confluent.connect.avro""#,
        r#""connect.name":"com.example.Order""#,
    ] {
        assert!(text.contains(part), "{part} not in {text}");
    }
    let mut order = Struct::new(schema.clone()).expect("struct");
    order.put("id", Value::Int16(7)).expect("id");
    order
        .put("price", Value::Decimal(Decimal::new(12345, 2)))
        .expect("price");
    order.put("day", Value::Date(17969)).expect("day");
    order
        .put("at", Value::Timestamp(1_552_581_432_345))
        .expect("at");
    order
        .put("tags", Value::Array(vec![Value::String("a".into())]))
        .expect("tags");
    order
        .put(
            "attrs",
            Value::Map(vec![(Value::String("n".into()), Value::Int64(3))]),
        )
        .expect("attrs");
    order
        .put(
            "by_id",
            Value::Map(vec![(Value::Int32(9), Value::Boolean(true))]),
        )
        .expect("by_id");
    let (_, values) = round_trip(
        AvroCodec::Null,
        &[record(Some(schema), Value::Struct(order), 0)],
    );
    let Avro::Record(fields) = &values[0] else {
        panic!("not a record: {:?}", values[0]);
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(field("id"), Some(Avro::Int(7)));
    assert_eq!(field("item"), Some(Avro::Union(0, Box::new(Avro::Null))));
    assert_eq!(
        field("qty"),
        Some(Avro::Int(1)),
        "a null with a default is the default"
    );
    assert_eq!(
        field("price"),
        Some(Avro::Union(
            1,
            Box::new(Avro::Decimal(apache_avro::Decimal::from(vec![0x30, 0x39])))
        ))
    );
    assert_eq!(field("day"), Some(Avro::Date(17969)));
    assert_eq!(field("at"), Some(Avro::TimestampMillis(1_552_581_432_345)));
    assert_eq!(
        field("by_id"),
        Some(Avro::Array(vec![Avro::Record(vec![
            ("key".into(), Avro::Int(9)),
            ("value".into(), Avro::Boolean(true)),
        ])]))
    );
}

#[test]
fn seed_003s_json_records_are_written_with_their_schema() {
    let message = br#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":1,"user_id":"user01","item":"apple"}}"#;
    let decoded = JsonConverter::default()
        .decode("dst_table01", Some(message))
        .expect("decodes");
    let (schema, values) = round_trip(
        AvroCodec::Snappy,
        &[record(decoded.schema, decoded.value, 0)],
    );
    assert!(schema.contains(r#""name":"table01""#), "{schema}");
    assert_eq!(
        values[0],
        Avro::Record(vec![
            ("id".into(), Avro::Int(1)),
            (
                "user_id".into(),
                Avro::Union(1, Box::new(Avro::String("user01".into())))
            ),
            (
                "item".into(),
                Avro::Union(1, Box::new(Avro::String("apple".into())))
            ),
        ])
    );
}

#[test]
fn two_unnamed_nested_structs_get_distinct_names() {
    let inner = Schema::structure(vec![("x", Schema::of(SchemaType::Int32))]);
    let other = Schema::structure(vec![("y", Schema::of(SchemaType::String))]);
    let schema = Schema::structure(vec![("a", inner), ("b", other)]);
    let text = avro_schema(&schema).expect("schema").to_string();
    apache_avro::Schema::parse_str(&text).expect("valid Avro");
    assert!(text.contains(r#""name":"ConnectDefault2""#), "{text}");
    assert!(text.contains(r#""name":"ConnectDefault3""#), "{text}");
}

#[test]
fn a_record_without_a_schema_or_that_does_not_fit_is_a_data_error_and_the_file_stays_whole() {
    let mut writer: Box<dyn RecordWriter> = Box::new(AvroWriter::new(AvroCodec::Null));
    let err = writer
        .write(&record(
            None,
            Value::String("{\"user\":\"irene\"}".into()),
            41,
        ))
        .expect_err("no schema");
    assert!(!err.is_retriable());
    assert!(
        err.message.contains("irene-shopping-log-1 offset 41"),
        "{err}"
    );
    assert!(err.message.contains("schemas.enable=true"), "{err}");

    let (schema, good) = click("irene", 5);
    writer
        .write(&record(Some(schema.clone()), good.clone(), 42))
        .expect("good");
    // The same schema, a value of another shape: refused, nothing half-written.
    let err = writer
        .write(&record(Some(schema.clone()), Value::Int64(3), 43))
        .expect_err("does not fit");
    assert!(err.message.contains("offset 43"), "{err}");
    writer
        .write(&record(Some(schema), good, 44))
        .expect("good again");
    let mut file = writer.take();
    file.extend(writer.finish().expect("finish"));
    let read: Vec<_> = apache_avro::Reader::new(&file[..]).expect("file").collect();
    assert_eq!(read.len(), 2);
    assert!(read.iter().all(|r| r.is_ok()));
}
