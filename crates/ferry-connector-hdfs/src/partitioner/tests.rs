use super::*;

use ferry_connect::config::props;
use ferry_connect::converter::JsonConverter;
use ferry_connect::Converter;

/// 2019-03-14T16:37:12.345Z, a moment of seed 000's shopping log.
const T: i64 = 1_552_581_432_345;

/// A record with this JSON value: in Kafka Connect's envelope if it has one, else schemaless.
fn record(value_json: &str, timestamp: Option<i64>) -> SinkRecord {
    let schemas = if value_json.starts_with(r#"{"schema""#) {
        "true"
    } else {
        "false"
    };
    let converter =
        JsonConverter::configure(&props(&[("schemas.enable", schemas)])).expect("converter");
    let v = converter
        .decode("irene-shopping-log", Some(value_json.as_bytes()))
        .expect("valid JSON");
    SinkRecord {
        topic: "irene-shopping-log".into(),
        partition: 3,
        offset: 42,
        timestamp,
        key_schema: None,
        key: Value::Null,
        value_schema: v.schema,
        value: v.value,
        headers: Vec::new(),
    }
}

fn partitioner(pairs: &[(&str, &str)]) -> Partitioner {
    Partitioner::from_config(&props(pairs)).expect("valid partitioner config")
}

/// Seed 000's partitioner settings.
const SEED_000: [(&str, &str); 4] = [
    (
        "partitioner.class",
        "io.confluent.connect.hdfs.partitioner.TimeBasedPartitioner",
    ),
    ("partition.duration.ms", "600000"),
    ("path.format", "yyyyMMdd/HH/mm/yyyyMMddHHmm"),
    ("timestamp.field", "timestamp"),
];

#[test]
fn seed_000_buckets_ten_minutes_by_the_wall_clock() {
    // timestamp.extractor is not set: Wallclock, Confluent's default (timestamp.field unused).
    let p = partitioner(&SEED_000);
    let r = record(r#"{"timestamp": 0}"#, None);
    assert_eq!(
        p.encode(&r, T).expect("placed"),
        "20190314/16/30/201903141630"
    );
    assert_eq!(
        p.encode(&r, T + 23 * 60_000).expect("placed"),
        "20190314/17/00/201903141700",
        "16:60 is the next hour's first bucket"
    );
}

#[test]
fn record_field_times_may_be_millis_timestamps_or_iso_text_and_nested() {
    let mut settings = SEED_000.to_vec();
    settings.push(("timestamp.extractor", "RecordField"));
    let p = partitioner(&settings);
    for value in [
        format!(r#"{{"timestamp": {T}}}"#),
        r#"{"timestamp": "2019-03-14T16:37:12.345Z"}"#.to_string(),
        r#"{"timestamp": "2019-03-15T01:37:12+09:00"}"#.to_string(),
        r#"{"timestamp": "2019-03-14T16:31:00"}"#.to_string(),
    ] {
        assert_eq!(
            p.encode(&record(&value, None), 0).expect(&value),
            "20190314/16/30/201903141630",
            "{value}"
        );
    }
    // A Connect Timestamp in a struct, nested.
    let nested = format!(
        r#"{{"schema":{{"type":"struct","fields":[{{"type":"struct","field":"meta","fields":[{{"type":"int64","name":"org.apache.kafka.connect.data.Timestamp","field":"at"}}]}}]}},"payload":{{"meta":{{"at":{T}}}}}}}"#
    );
    let r = record(&nested, None);
    settings.retain(|(k, _)| *k != "timestamp.field");
    settings.push(("timestamp.field", "meta.at"));
    let p = partitioner(&settings);
    assert_eq!(
        p.encode(&r, 0).expect("placed"),
        "20190314/16/30/201903141630"
    );
}

#[test]
fn a_record_without_its_time_is_a_data_error_naming_the_record_and_field() {
    let mut settings = SEED_000.to_vec();
    settings.push(("timestamp.extractor", "RecordField"));
    let p = partitioner(&settings);
    for (value, why) in [
        (r#"{"user": "irene"}"#, "not in the value"),
        (r#"{"timestamp": "yesterday"}"#, "not an ISO-8601 time"),
        (r#"{"timestamp": true}"#, "boolean is not a time"),
        (r#""just text""#, "a parent is string"),
    ] {
        let err = p.encode(&record(value, None), T).expect_err(value);
        assert!(!err.is_retriable());
        assert!(
            err.message.contains("irene-shopping-log-3 offset 42"),
            "{err}"
        );
        assert!(
            err.message.contains(r#"timestamp.field "timestamp""#),
            "{err}"
        );
        assert!(err.message.contains(why), "{value}: {err}");
    }
    let mut settings = SEED_000.to_vec();
    settings.push(("timestamp.extractor", "Record"));
    let err = partitioner(&settings)
        .encode(&record("{}", None), T)
        .expect_err("no timestamp");
    assert!(err.message.contains("has no timestamp"), "{err}");
}

#[test]
fn buckets_follow_the_time_zone_and_the_documented_path_format() {
    // Confluent's documented example: 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH.
    let hourly = [
        ("partitioner.class", "TimeBasedPartitioner"),
        ("partition.duration.ms", "3600000"),
        ("path.format", "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH/"),
        ("timestamp.extractor", "Record"),
        ("timezone", "Asia/Seoul"),
        ("locale", "ko_KR"),
    ];
    let r = record("{}", Some(T));
    assert_eq!(
        partitioner(&hourly).encode(&r, 0).expect("placed"),
        "year=2019/month=03/day=15/hour=01",
        "01:37 in Seoul; the trailing delimiter is dropped"
    );
    // A day in India (+05:30) starts at its own midnight, not UTC's.
    let daily = [
        (
            "partitioner.class",
            "io.confluent.connect.storage.partitioner.DailyPartitioner",
        ),
        ("timestamp.extractor", "Record"),
        ("timezone", "Asia/Kolkata"),
    ];
    let before_midnight = record("{}", Some(1_552_588_000_000)); // 2019-03-14T18:26:40Z = 23:56:40 IST
    let after_midnight = record("{}", Some(1_552_588_300_000)); // 00:01:40 IST on the 15th
    assert_eq!(
        partitioner(&daily)
            .encode(&before_midnight, 0)
            .expect("placed"),
        "year=2019/month=03/day=14"
    );
    assert_eq!(
        partitioner(&daily)
            .encode(&after_midnight, 0)
            .expect("placed"),
        "year=2019/month=03/day=15"
    );
    let fixed = [
        ("partitioner.class", "HourlyPartitioner"),
        ("timestamp.extractor", "Record"),
        ("timezone", "-03:30"),
    ];
    assert_eq!(
        partitioner(&fixed).encode(&r, 0).expect("placed"),
        "year=2019/month=03/day=14/hour=13"
    );
}

#[test]
fn default_and_field_partitioners_name_their_directories() {
    let r = record(
        r#"{"schema":{"type":"struct","fields":[{"type":"string","field":"user_id"},{"type":"int32","field":"shop"},{"type":"double","field":"price"}]},"payload":{"user_id":"user01","shop":7,"price":1.5}}"#,
        None,
    );
    assert_eq!(
        partitioner(&[]).encode(&r, 0).expect("placed"),
        "partition=3"
    );
    let p = partitioner(&[
        (
            "partitioner.class",
            "io.confluent.connect.hdfs.partitioner.FieldPartitioner",
        ),
        ("partition.field.name", "user_id, shop"),
    ]);
    assert_eq!(p.encode(&r, 0).expect("placed"), "user_id=user01/shop=7");
    let p = partitioner(&[
        ("partitioner.class", "FieldPartitioner"),
        ("partition.field.name", "price"),
    ]);
    let err = p.encode(&r, 0).expect_err("a double names no partition");
    assert!(
        err.message
            .contains(r#"partition field "price" is float64"#),
        "{err}"
    );
    let err = p
        .encode(&record(r#"{"price": 1}"#, None), 0)
        .expect_err("not a struct");
    assert!(err.message.contains("needs a struct value"), "{err}");
}

#[test]
fn bad_partitioner_configs_name_the_property() {
    for (pairs, property) in [
        (
            vec![("partitioner.class", "com.example.MyPartitioner")],
            "partitioner.class",
        ),
        (
            vec![("partitioner.class", "FieldPartitioner")],
            "partition.field.name",
        ),
        (
            vec![
                ("partitioner.class", "TimeBasedPartitioner"),
                ("path.format", "yyyy"),
            ],
            "partition.duration.ms",
        ),
        (
            vec![
                ("partitioner.class", "TimeBasedPartitioner"),
                ("partition.duration.ms", "-1"),
                ("path.format", "yyyy"),
            ],
            "partition.duration.ms",
        ),
        (
            vec![
                ("partitioner.class", "TimeBasedPartitioner"),
                ("partition.duration.ms", "60000"),
            ],
            "path.format",
        ),
        (
            vec![
                ("partitioner.class", "TimeBasedPartitioner"),
                ("partition.duration.ms", "60000"),
                ("path.format", "yyyy/qq"),
            ],
            "path.format",
        ),
        (
            vec![
                ("partitioner.class", "HourlyPartitioner"),
                ("timezone", "Mars/Olympus"),
            ],
            "timezone",
        ),
        (
            vec![
                ("partitioner.class", "HourlyPartitioner"),
                ("timezone", "+25:00"),
            ],
            "timezone",
        ),
        (
            vec![
                ("partitioner.class", "HourlyPartitioner"),
                ("timestamp.extractor", "Custom"),
            ],
            "timestamp.extractor",
        ),
    ] {
        let err = Partitioner::from_config(&props(&pairs)).expect_err(property);
        assert!(err.message.starts_with(property), "{pairs:?}: {err}");
    }
}
