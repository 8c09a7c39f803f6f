use super::*;
use crate::logical::{date_schema, decimal_schema, time_schema, timestamp_schema};

/// Seed 003's records of `dst_table01` and `dst_table02` as the JDBC source wrote them: the key
/// after `ValueToKey,ExtractField$Key`, then the value.
const SEED_003: &[(&str, &str)] = &[
    (
        r#"{"schema":{"type":"string","optional":true},"payload":"user01"}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":1,"user_id":"user01","item":"apple"}}"#,
    ),
    (
        r#"{"schema":{"type":"string","optional":true},"payload":"user02"}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":4,"user_id":"user02","item":"melon"}}"#,
    ),
    (
        r#"{"schema":{"type":"string","optional":true},"payload":"user01"}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"int32","optional":true,"field":"point"}],"optional":false,"name":"table02"},"payload":{"id":2,"user_id":"user01","point":5}}"#,
    ),
    (
        r#"{"schema":{"type":"string","optional":true},"payload":"user01"}"#,
        r#"{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":true,"field":"user_id"},{"type":"string","optional":true,"field":"item"}],"optional":false,"name":"table01"},"payload":{"id":5,"user_id":"user01","item":"super-apple-0000"}}"#,
    ),
];

fn round_trip(c: &JsonConverter, text: &str) -> (SchemaAndValue, String) {
    let sv = c.decode("t", Some(text.as_bytes())).expect(text);
    let bytes = c
        .encode("t", sv.schema.as_ref(), &sv.value)
        .expect("encode")
        .expect("not null");
    (sv, String::from_utf8(bytes).expect("utf-8"))
}

#[test]
fn seed_003_records_decode_and_encode_to_the_same_json() {
    let c = JsonConverter::default();
    for (key, value) in SEED_003 {
        let (k, again) = round_trip(&c, key);
        assert_eq!(&again, key);
        assert!(matches!(k.value, Value::String(_)));
        let (v, again) = round_trip(&c, value);
        assert_eq!(&again, value);
        let Value::Struct(row) = &v.value else {
            panic!("a struct: {v:?}");
        };
        assert_eq!(
            row.schema.name.as_deref(),
            Some(&value[value.find("table0").expect("name")..][..7])
        );
        assert!(matches!(row.get("id"), Some(Value::Int32(_))));
        assert_eq!(row.get("user_id"), Some(&k.value));
    }
}

#[test]
fn the_decoded_seed_row_has_its_fields_and_schema() {
    let (_, value) = SEED_003[0];
    let sv = JsonConverter::default()
        .decode("dst_table01", Some(value.as_bytes()))
        .expect("decodes");
    let schema = sv.schema.expect("a schema");
    assert_eq!(schema.ty, SchemaType::Struct);
    assert!(!schema.optional);
    let names: Vec<&str> = schema.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["id", "user_id", "item"]);
    assert!(schema.fields[1].schema.optional);
    let Value::Struct(row) = sv.value else {
        panic!("a struct");
    };
    assert_eq!(row.get("id"), Some(&Value::Int32(1)));
    assert_eq!(row.get("item"), Some(&Value::String("apple".into())));
}

#[test]
fn without_schemas_plain_json_is_read_and_written() {
    let c = JsonConverter::with_schemas(false);
    let text = r#"{"user_id":"u1","amount":12,"price":9.5,"tags":["a","b"],"ok":true,"none":null}"#;
    let (sv, again) = round_trip(&c, text);
    assert!(sv.schema.is_none());
    assert_eq!(again, text, "key order kept");
    let Value::Map(entries) = &sv.value else {
        panic!("a map");
    };
    assert_eq!(
        entries[1],
        (Value::String("amount".into()), Value::Int64(12))
    );
    assert_eq!(entries[2].1, Value::Float64(9.5));
    // Seed 000's shopping log: schemaless JSON values.
    let (_, again) = round_trip(&c, r#"{"timestamp":1700000000000,"item":"irene"}"#);
    assert_eq!(again, r#"{"timestamp":1700000000000,"item":"irene"}"#);
}

#[test]
fn the_envelope_is_required_with_schemas_enabled() {
    let c = JsonConverter::default();
    for bad in [
        r#"{"user_id":"u1"}"#,
        r#"{"schema":null}"#,
        r#"{"schema":null,"payload":1,"x":2}"#,
        "[1]",
        "",
    ] {
        let err = c.decode("orders", Some(bad.as_bytes())).expect_err(bad);
        // Kafka Connect's words exactly (a DLQ's exception.message header shows them).
        assert_eq!(
            err.to_string(),
            "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and \
             may not contain additional fields. If you are trying to deserialize plain JSON data, \
             set schemas.enable=false in your converter configuration."
        );
    }
    let err = c
        .decode("orders", Some(b"{not json"))
        .expect_err("malformed");
    assert_eq!(
        err.to_string(),
        "Converting byte[] to Kafka Connect data failed due to serialization error: "
    );
    let trace = err.trace();
    assert!(
        trace.starts_with("org.apache.kafka.connect.errors.DataException: Converting byte[]"),
        "{trace}"
    );
    assert!(
        trace.contains("\nCaused by: JsonConverter (topic orders): the data is not valid JSON"),
        "{trace}"
    );
    assert!(!err.is_retriable());
    // A null schema in the envelope is schemaless data.
    let sv = c
        .decode("t", Some(br#"{"schema":null,"payload":{"a":1}}"#))
        .expect("schemaless envelope");
    assert!(sv.schema.is_none());
    assert_eq!(
        c.encode("t", None, &sv.value).expect("encode"),
        Some(br#"{"schema":null,"payload":{"a":1}}"#.to_vec())
    );
}

#[test]
fn values_that_do_not_fit_the_schema_name_the_field() {
    let c = JsonConverter::default();
    let schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"struct","fields":[{"type":"int8","optional":false,"field":"n"}],"optional":true,"field":"inner"}],"optional":false}"#;
    let cases = [
        (r#"{"id":"x"}"#, "field id"),
        (r#"{"id":1.5}"#, "field id"),
        (r#"{}"#, "field id: invalid null"),
        (r#"{"id":1,"inner":{"n":300}}"#, "field inner.n"),
        (r#"{"id":3000000000}"#, "field id"),
    ];
    for (payload, want) in cases {
        let text = format!(r#"{{"schema":{schema},"payload":{payload}}}"#);
        let err = c.decode("t", Some(text.as_bytes())).expect_err(payload);
        assert!(err.to_string().contains(want), "{payload}: {err}");
    }
    // Encoding checks the value against the schema too.
    let s = Arc::new(Schema::of(SchemaType::Int32));
    let err = c
        .encode("t", Some(&s), &Value::String("x".into()))
        .expect_err("a string is not an int32");
    assert!(err.to_string().contains("int32"), "{err}");
    assert!(c.encode("t", Some(&s), &Value::Null).is_err(), "required");
}

#[test]
fn decimals_in_base64_and_as_numbers() {
    let schema = Arc::new(decimal_schema(2));
    let value = Value::Decimal(Decimal::new(12345, 2));
    let base64 = JsonConverter::default();
    let text = String::from_utf8(
        base64
            .encode("t", Some(&schema), &value)
            .expect("encode")
            .expect("bytes"),
    )
    .expect("utf-8");
    assert_eq!(
        text,
        r#"{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},"payload":"MDk="}"#
    );
    assert_eq!(
        base64
            .decode("t", Some(text.as_bytes()))
            .expect("decode")
            .value,
        value
    );
    let props: BTreeMap<String, String> =
        [("decimal.format".to_string(), "NUMERIC".to_string())].into();
    let numeric = JsonConverter::configure(&props).expect("config");
    let (sv, again) = round_trip(
        &numeric,
        r#"{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},"payload":123.45}"#,
    );
    assert_eq!(sv.value, value);
    assert!(again.ends_with(r#""payload":123.45}"#), "{again}");
    // A number with fewer decimals than the scale is widened; one with more is refused.
    let widened = numeric
        .decode("t", Some(again.replace("123.45", "7.5").as_bytes()))
        .expect("7.50");
    assert_eq!(widened.value, Value::Decimal(Decimal::new(750, 2)));
    assert!(numeric
        .decode("t", Some(again.replace("123.45", "1.234").as_bytes()))
        .is_err());
    let bad: BTreeMap<String, String> = [("decimal.format".to_string(), "HEX".to_string())].into();
    assert!(JsonConverter::configure(&bad).is_err());
}

#[test]
fn dates_times_and_timestamps_are_integers_on_the_wire() {
    let c = JsonConverter::default();
    let s = Arc::new(Schema::structure(vec![
        ("d", date_schema()),
        ("t", time_schema()),
        ("ts", timestamp_schema().optional()),
    ]));
    let text = format!(
        r#"{{"schema":{},"payload":{{"d":19723,"t":3600000,"ts":1700000000000}}}}"#,
        c.schema_json(&s).expect("schema")
    );
    let (sv, again) = round_trip(&c, &text);
    assert_eq!(again, text);
    let Value::Struct(row) = sv.value else {
        panic!("struct");
    };
    assert_eq!(row.get("d"), Some(&Value::Date(19_723)));
    assert_eq!(row.get("t"), Some(&Value::Time(3_600_000)));
    assert_eq!(row.get("ts"), Some(&Value::Timestamp(1_700_000_000_000)));
}

#[test]
fn schemas_keep_optional_name_version_doc_parameters_and_default() {
    let c = JsonConverter::default();
    let text = r#"{"schema":{"type":"int32","optional":true,"name":"n","version":3,"doc":"a count","parameters":{"p":"q"},"default":7},"payload":null}"#;
    let sv = c.decode("t", Some(text.as_bytes())).expect("decode");
    let schema = sv.schema.clone().expect("schema");
    assert_eq!(
        (
            schema.optional,
            schema.name.as_deref(),
            schema.version,
            schema.doc.as_deref()
        ),
        (true, Some("n"), Some(3), Some("a count"))
    );
    assert_eq!(schema.parameters.get("p").map(String::as_str), Some("q"));
    // replace.null.with.default (the default): a null payload reads as the default.
    assert_eq!(sv.value, Value::Int32(7));
    let again = c
        .encode("t", Some(&schema), &Value::Null)
        .expect("encode")
        .expect("bytes");
    assert_eq!(
        String::from_utf8(again).expect("utf-8"),
        text.replace("\"payload\":null", "\"payload\":7")
    );
    let keep: BTreeMap<String, String> =
        [("replace.null.with.default".to_string(), "false".to_string())].into();
    let keep = JsonConverter::configure(&keep).expect("config");
    assert_eq!(
        keep.decode("t", Some(text.as_bytes()))
            .expect("decode")
            .value,
        Value::Null
    );
}

#[test]
fn arrays_maps_and_bytes() {
    let c = JsonConverter::default();
    for text in [
        r#"{"schema":{"type":"array","items":{"type":"string","optional":false},"optional":false},"payload":["a","b"]}"#,
        r#"{"schema":{"type":"map","keys":{"type":"string","optional":false},"values":{"type":"int64","optional":false},"optional":false},"payload":{"x":1,"y":2}}"#,
        r#"{"schema":{"type":"map","keys":{"type":"int32","optional":false},"values":{"type":"boolean","optional":false},"optional":false},"payload":[[1,true],[2,false]]}"#,
        r#"{"schema":{"type":"bytes","optional":false},"payload":"AAEC/w=="}"#,
    ] {
        assert_eq!(round_trip(&c, text).1, text);
    }
    let bytes = c
        .decode(
            "t",
            Some(br#"{"schema":{"type":"bytes","optional":false},"payload":"AAEC/w=="}"#),
        )
        .expect("bytes");
    assert_eq!(bytes.value, Value::Bytes(vec![0, 1, 2, 255]));
    assert!(c
        .decode(
            "t",
            Some(br#"{"schema":{"type":"bytes","optional":false},"payload":"***"}"#)
        )
        .is_err());
}

#[test]
fn floats_are_written_as_java_writes_them() {
    let cases = [
        (1.0, "1.0"),
        (0.5, "0.5"),
        (1234567.0, "1234567.0"),
        (1.0e7, "1.0E7"),
        (1.5e-7, "1.5E-7"),
        (0.001, "0.001"),
        (-2.25, "-2.25"),
        (0.0, "0.0"),
        (123456789.125, "1.23456789125E8"),
    ];
    for (v, text) in cases {
        assert_eq!(java_double(v), text, "{v}");
    }
    assert_eq!(java_float(0.1), "0.1");
    assert_eq!(java_float(3.0e10), "3.0E10");
    let c = JsonConverter::with_schemas(false);
    let out = c
        .encode(
            "t",
            None,
            &Value::Array(vec![Value::Float64(f64::NAN), Value::Float64(2.0)]),
        )
        .expect("encode");
    assert_eq!(out, Some(br#"["NaN",2.0]"#.to_vec()));
}

#[test]
fn null_in_and_null_out() {
    let c = JsonConverter::default();
    assert_eq!(c.decode("t", None).expect("null"), SchemaAndValue::null());
    assert_eq!(c.encode("t", None, &Value::Null).expect("null"), None);
    let optional = Arc::new(Schema::of(SchemaType::String).optional());
    assert_eq!(
        c.encode("t", Some(&optional), &Value::Null)
            .expect("optional"),
        Some(br#"{"schema":{"type":"string","optional":true},"payload":null}"#.to_vec())
    );
}

#[test]
fn a_schema_seen_before_is_taken_from_the_cache_unless_it_is_sized_zero() {
    let (_, value) = SEED_003[0];
    let other = value.replace("\"id\":1", "\"id\":9");
    let decode = |c: &JsonConverter, text: &str| c.decode("t", Some(text.as_bytes())).expect(text);
    let cached = JsonConverter::default();
    let (first, second) = (decode(&cached, value), decode(&cached, &other));
    let (a, b) = (
        first.schema.expect("schema"),
        second.schema.expect("schema"),
    );
    assert!(
        Arc::ptr_eq(&a, &b),
        "the second record's schema was read again"
    );
    assert_ne!(first.value, second.value, "each record's own payload");
    // A schema differing in one field is another schema.
    let renamed = decode(&cached, &value.replace("\"item\"", "\"thing\""));
    assert!(renamed
        .schema
        .is_some_and(|s| !Arc::ptr_eq(&s, &a) && s.field("thing").is_some()));
    let uncached = JsonConverter::configure(&BTreeMap::from([(
        "schemas.cache.size".to_string(),
        "0".to_string(),
    )]))
    .expect("valid");
    let (first, second) = (decode(&uncached, value), decode(&uncached, &other));
    assert!(!Arc::ptr_eq(
        &first.schema.expect("schema"),
        &second.schema.expect("schema")
    ));
    // An invalid schema is an error each time, never cached.
    let bad = r#"{"schema":{"type":"nonsense"},"payload":1}"#;
    for _ in 0..2 {
        let err = cached
            .decode("orders", Some(bad.as_bytes()))
            .expect_err(bad);
        assert!(
            err.to_string().contains("JsonConverter (topic orders)"),
            "{err}"
        );
    }
}

#[test]
fn a_record_of_the_schema_before_is_read_as_the_first_was_and_its_errors_are_the_same() {
    let (_, value) = SEED_003[0];
    let converter = JsonConverter::default();
    let decode = |text: &str| converter.decode("t", Some(text.as_bytes()));
    let first = decode(value).expect(value);
    // The same schema text again: found without reading the envelope whole.
    let again = decode(value).expect(value);
    assert_eq!(first.value, again.value);
    assert!(Arc::ptr_eq(
        first.schema.as_ref().expect("schema"),
        again.schema.as_ref().expect("schema")
    ));
    let other = decode(&value.replace("\"id\":1", "\"id\":9")).expect("another id");
    assert_ne!(first.value, other.value, "each record's own payload");
    // After the schema: what does not make a whole envelope fails as it does on its own.
    let fresh = |text: &str| JsonConverter::default().decode("t", Some(text.as_bytes()));
    for broken in [
        value.replace("\"item\":\"apple\"}}", "\"item\":\"apple\"},\"extra\":1}"),
        value.replace("\"item\":\"apple\"}}", "\"item\":\"apple\"}"),
        value.replace("\"id\":1", "\"id\":\"one\""),
        value.replace("\"id\":1,", ""),
    ] {
        decode(value).expect(value);
        let known = decode(&broken).expect_err(&broken);
        let alone = fresh(&broken).expect_err(&broken);
        assert_eq!(known.to_string(), alone.to_string(), "{broken}");
    }
    // With spaces: the general path, the same value.
    let spaced = value.replacen("{\"schema\":", "{ \"schema\": ", 1);
    assert_eq!(decode(&spaced).expect(&spaced).value, first.value);
}
