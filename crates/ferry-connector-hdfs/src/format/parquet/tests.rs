use super::*;
use bytes::Bytes;
use ferry_connect::converter::JsonConverter;
use ferry_connect::logical::{date_schema, decimal_schema, timestamp_schema, Decimal};
use ferry_connect::{Converter, Struct};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn record(schema: Option<Arc<Schema>>, value: Value, offset: i64) -> SinkRecord {
    SinkRecord {
        topic: "irene-shopping-log".into(),
        partition: 2,
        offset,
        timestamp: None,
        key_schema: None,
        key: Value::Null,
        value_schema: schema,
        value,
        headers: Vec::new(),
    }
}

/// A file of these records, pieces taken as the sink takes them, read back by the parquet
/// crate's Arrow reader: the batches and the number of row groups.
fn round_trip(codec: ParquetCodec, records: &[SinkRecord]) -> (Vec<RecordBatch>, usize) {
    let mut writer: Box<dyn RecordWriter> = Box::new(ParquetWriter::new(codec));
    let mut file = Vec::new();
    for r in records {
        writer.write(r).expect("write");
        file.extend(writer.take());
    }
    file.extend(writer.finish().expect("finish"));
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(Bytes::from(file)).expect("a Parquet file");
    let groups = builder.metadata().num_row_groups();
    let batches = builder
        .build()
        .expect("reader")
        .collect::<std::result::Result<Vec<_>, _>>()
        .expect("batches");
    (batches, groups)
}

fn click(id: i32, item: Option<&str>) -> (Arc<Schema>, Value) {
    let schema = Arc::new(Schema::structure(vec![
        ("id", Schema::of(SchemaType::Int32)),
        ("item", Schema::of(SchemaType::String).optional()),
        ("timestamp", Schema::of(SchemaType::Int64)),
    ]));
    let mut s = Struct::new(schema.clone()).expect("struct");
    s.put("id", Value::Int32(id)).expect("id");
    if let Some(item) = item {
        s.put("item", Value::String(item.into())).expect("item");
    }
    s.put("timestamp", Value::Int64(1_552_581_432_000 + i64::from(id)))
        .expect("ts");
    (schema, Value::Struct(s))
}

#[test]
fn rows_read_back_with_every_codec_across_row_groups() {
    for codec in [ParquetCodec::None, ParquetCodec::Snappy, ParquetCodec::Zstd] {
        let records: Vec<SinkRecord> = (0..70_000)
            .map(|i| {
                let (schema, value) = click(i, (i % 3 != 0).then_some("apple"));
                record(Some(schema), value, i64::from(i))
            })
            .collect();
        let (batches, groups) = round_trip(codec, &records);
        assert_eq!(groups, 2, "{codec:?}: 65,536 rows per row group");
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 70_000, "{codec:?}");
        let ids: Vec<i32> = batches
            .iter()
            .flat_map(|b| {
                b.column_by_name("id")
                    .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
                    .expect("id column")
                    .values()
                    .to_vec()
            })
            .collect();
        assert_eq!(ids, (0..70_000).collect::<Vec<_>>(), "{codec:?}");
        let items = batches[0]
            .column_by_name("item")
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .expect("item column");
        assert!(items.is_null(0) && items.value(1) == "apple", "{codec:?}");
    }
}

#[test]
fn nested_structs_lists_maps_and_logical_types_become_their_parquet_types() {
    let address = Schema::structure(vec![
        ("city", Schema::of(SchemaType::String)),
        ("zip", Schema::of(SchemaType::Int32).optional()),
    ])
    .optional();
    let schema = Arc::new(Schema::structure(vec![
        ("id", Schema::of(SchemaType::Int16)),
        ("price", decimal_schema(2)),
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
        ("address", address),
        (
            "qty",
            Schema::of(SchemaType::Int32)
                .with_default(Value::Int32(1))
                .expect("default"),
        ),
    ]));
    let row = |id: i16, with_address: bool| {
        let mut s = Struct::new(schema.clone()).expect("struct");
        s.put("id", Value::Int16(id)).expect("id");
        s.put("price", Value::Decimal(Decimal::new(12345, 2)))
            .expect("price");
        s.put("day", Value::Date(17969)).expect("day");
        s.put("at", Value::Timestamp(1_552_581_432_345))
            .expect("at");
        s.put(
            "tags",
            Value::Array(vec![Value::String("a".into()), Value::String("b".into())]),
        )
        .expect("tags");
        s.put(
            "attrs",
            Value::Map(vec![(Value::String("n".into()), Value::Int64(3))]),
        )
        .expect("attrs");
        if with_address {
            let Some(address_schema) = schema.field("address").map(|f| f.schema.clone()) else {
                panic!("address");
            };
            let mut a = Struct::new(address_schema).expect("address");
            a.put("city", Value::String("Seoul".into())).expect("city");
            s.put("address", Value::Struct(a)).expect("address");
        }
        Value::Struct(s)
    };
    let (batches, _) = round_trip(
        ParquetCodec::Snappy,
        &[
            record(Some(schema.clone()), row(1, true), 0),
            record(Some(schema.clone()), row(2, false), 1),
        ],
    );
    let batch = &batches[0];
    let types: Vec<String> = batch
        .schema()
        .fields()
        .iter()
        .map(|f| format!("{}:{}", f.name(), f.data_type()))
        .collect();
    for expected in [
        "id:Int16",
        "price:Decimal128(38, 2)",
        "day:Date32",
        "at:Timestamp(ms, \"UTC\")",
        "qty:Int32",
    ] {
        assert!(
            types.iter().any(|t| t == expected),
            "{expected} not in {types:?}"
        );
    }
    let price = batch
        .column_by_name("price")
        .and_then(|c| c.as_any().downcast_ref::<Decimal128Array>())
        .expect("price");
    assert_eq!(price.value_as_string(0), "123.45");
    let address = batch
        .column_by_name("address")
        .and_then(|c| c.as_any().downcast_ref::<StructArray>())
        .expect("address");
    assert!(address.is_valid(0) && address.is_null(1));
    let city = address.column_by_name("city").expect("city");
    assert_eq!(
        city.as_any()
            .downcast_ref::<StringArray>()
            .map(|c| c.value(0)),
        Some("Seoul")
    );
    let tags = batch
        .column_by_name("tags")
        .and_then(|c| c.as_any().downcast_ref::<ListArray>())
        .expect("tags");
    assert_eq!(tags.value_length(1), 2);
    let qty = batch
        .column_by_name("qty")
        .and_then(|c| c.as_any().downcast_ref::<Int32Array>())
        .expect("qty");
    assert_eq!(qty.value(0), 1, "a null with a default is the default");
    assert!(batch.column_by_name("attrs").is_some_and(|c| c.len() == 2));
}

#[test]
fn seed_003s_json_records_become_rows() {
    let message = br#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":1,"user_id":"user01","item":"apple"}}"#;
    let decoded = JsonConverter::default()
        .decode("dst_table01", Some(message))
        .expect("decodes");
    let (batches, _) = round_trip(
        ParquetCodec::Snappy,
        &[record(decoded.schema, decoded.value, 0)],
    );
    let user = batches[0]
        .column_by_name("user_id")
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .map(|c| c.value(0).to_string());
    assert_eq!(user.as_deref(), Some("user01"));
}

#[test]
fn records_parquet_cannot_hold_are_data_errors_naming_them_and_the_file_stays_whole() {
    let mut writer: Box<dyn RecordWriter> = Box::new(ParquetWriter::new(ParquetCodec::Snappy));
    let no_schema = writer
        .write(&record(None, Value::String("{}".into()), 7))
        .expect_err("no schema");
    assert!(
        no_schema.message.contains("irene-shopping-log-2 offset 7"),
        "{no_schema}"
    );
    assert!(
        no_schema.message.contains("schemas.enable=true"),
        "{no_schema}"
    );
    let not_struct = writer
        .write(&record(
            Some(Arc::new(Schema::of(SchemaType::String))),
            Value::String("x".into()),
            8,
        ))
        .expect_err("not a struct");
    assert!(
        not_struct.message.contains("Parquet files hold structs"),
        "{not_struct}"
    );
    let (schema, good) = click(1, Some("apple"));
    writer
        .write(&record(Some(schema.clone()), good.clone(), 9))
        .expect("good");
    let tombstone = writer
        .write(&record(Some(schema.clone()), Value::Null, 10))
        .expect_err("tombstone");
    assert!(!tombstone.is_retriable());
    writer
        .write(&record(Some(schema), good, 11))
        .expect("good again");
    let mut file = writer.take();
    file.extend(writer.finish().expect("finish"));
    let rows: usize = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(file))
        .expect("file")
        .build()
        .expect("reader")
        .map(|b| b.expect("batch").num_rows())
        .sum();
    assert_eq!(rows, 2);
}
