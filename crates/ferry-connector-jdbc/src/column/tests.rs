use super::*;
use bytes::BytesMut;

fn col(kind: Kind, optional: bool) -> SourceColumn {
    SourceColumn {
        name: "c".into(),
        kind,
        optional,
    }
}

fn encoded(d: Decimal) -> Vec<u8> {
    let mut out = BytesMut::new();
    crate::bind::numeric(&d, &mut out);
    out.to_vec()
}

#[test]
fn numerics_come_back_as_the_decimals_written() {
    for (unscaled, scale) in [
        (12_345_678i128, 3),
        (-5, 2),
        (0, 2),
        (10_000, 0),
        (123_456_789_012_345_678_901_234_567_890, 10),
        (-1, 0),
    ] {
        let d = Decimal::new(unscaled, scale);
        assert_eq!(numeric(&encoded(d)).expect("decodes"), d, "{d}");
    }
    // NaN and infinities have no Decimal.
    let nan = [0u8, 0, 0, 0, 0xC0, 0, 0, 0];
    assert!(numeric(&nan).expect_err("NaN").contains("NaN"));
    // More than 38 digits.
    let mut big = vec![0u8, 11, 0, 10, 0, 0, 0, 0];
    big.extend(std::iter::repeat_n([0x27u8, 0x0f], 11).flatten());
    assert!(numeric(&big).expect_err("too big").contains("38 digits"));
}

#[test]
fn numeric_types_map_by_precision_and_scale() {
    // NUMERIC(10, 2): typmod ((10 << 16) | 2) + 4.
    let typmod = ((10 << 16) | 2) + 4;
    assert_eq!(numeric_typmod(typmod), Some((10, 2)));
    assert_eq!(numeric_typmod(-1), None);
    assert_eq!(
        kind_of(&Type::NUMERIC, typmod, NumericMapping::None),
        Kind::Decimal(Some(2))
    );
    assert_eq!(
        kind_of(&Type::NUMERIC, typmod, NumericMapping::BestFit),
        Kind::NumericDouble
    );
    assert_eq!(
        kind_of(&Type::NUMERIC, typmod, NumericMapping::PrecisionOnly),
        Kind::Decimal(Some(2))
    );
    let int5 = (5 << 16) + 4;
    assert_eq!(
        kind_of(&Type::NUMERIC, int5, NumericMapping::PrecisionOnly),
        Kind::NumericInt(SchemaType::Int32)
    );
    assert_eq!(
        kind_of(&Type::NUMERIC, -1, NumericMapping::BestFit),
        Kind::Decimal(None)
    );
    // The value of NUMERIC(5, 0) 12345 as an INT32.
    let v = col(Kind::NumericInt(SchemaType::Int32), false)
        .decode(Some(&encoded(Decimal::new(12345, 0))))
        .expect("fits");
    assert_eq!(v, Value::Int32(12345));
    // A NUMERIC(10, 2) written as 1.5 comes back at scale 2.
    let v = col(Kind::Decimal(Some(2)), false)
        .decode(Some(&encoded(Decimal::new(15, 1))))
        .expect("rescaled");
    assert_eq!(v, Value::Decimal(Decimal::new(150, 2)));
    // Unconstrained: the schema takes the value's scale.
    let c = col(Kind::Decimal(None), true);
    let v = c
        .decode(Some(&encoded(Decimal::new(31_415, 4))))
        .expect("decodes");
    let schema = c.schema(&v);
    assert_eq!(
        schema.parameters.get("scale").map(String::as_str),
        Some("4")
    );
    assert!(schema.optional);
    assert!(c.varies());
}

#[test]
fn dates_times_and_timestamps_keep_their_instant() {
    // 2000-01-02 is one day after PostgreSQL's epoch.
    let v = col(Kind::Date, false)
        .decode(Some(&1i32.to_be_bytes()))
        .expect("date");
    assert_eq!(v, Value::Date(PG_EPOCH_DAYS as i32 + 1));
    // 01:00:00.123456 → 3 600 123 ms.
    let v = col(Kind::Time, false)
        .decode(Some(&3_600_123_456i64.to_be_bytes()))
        .expect("time");
    assert_eq!(v, Value::Time(3_600_123));
    // 10:00 at UTC+2 (7200 s east, i.e. -7200 west) is 08:00 UTC.
    let mut tz = 36_000_000_000i64.to_be_bytes().to_vec();
    tz.extend((-7200i32).to_be_bytes());
    let v = col(Kind::TimeTz, false).decode(Some(&tz)).expect("timetz");
    assert_eq!(v, Value::Time(8 * 3_600_000));
    let raw = 1_500_000i64.to_be_bytes();
    assert_eq!(
        timestamp_micros(&raw).expect("micros"),
        PG_EPOCH_MICROS + 1_500_000
    );
    let v = col(Kind::Timestamp, false)
        .decode(Some(&raw))
        .expect("timestamp");
    assert_eq!(v, Value::Timestamp(PG_EPOCH_MICROS / 1000 + 1500));
    let e = col(Kind::Timestamp, false)
        .decode(Some(&i64::MAX.to_be_bytes()))
        .expect_err("infinity");
    assert_eq!(
        e.message,
        "column c: an infinite timestamp has no Connect value"
    );
}

#[test]
fn other_values_and_the_row_schema() {
    let uuid: Vec<u8> = (0u8..16).collect();
    assert_eq!(
        col(Kind::Uuid, false).decode(Some(&uuid)).expect("uuid"),
        Value::String("00010203-0405-0607-0809-0a0b0c0d0e0f".into())
    );
    let mut jsonb = vec![1u8];
    jsonb.extend(b"{\"a\": 1}");
    assert_eq!(
        col(Kind::Jsonb, false).decode(Some(&jsonb)).expect("jsonb"),
        Value::String("{\"a\": 1}".into())
    );
    assert_eq!(
        col(Kind::Text, true).decode(None).expect("null"),
        Value::Null
    );
    assert_eq!(
        kind_of(&Type::INTERVAL, -1, NumericMapping::None),
        Kind::Cast
    );
    assert_eq!(
        kind_of(&Type::VARCHAR, 14, NumericMapping::None),
        Kind::Text
    );
    // The seed's table01: id serial NOT NULL, user_id and item nullable varchars.
    let columns = vec![
        SourceColumn {
            name: "id".into(),
            kind: Kind::Int32,
            optional: false,
        },
        SourceColumn {
            name: "user_id".into(),
            kind: Kind::Text,
            optional: true,
        },
        SourceColumn {
            name: "item".into(),
            kind: Kind::Text,
            optional: true,
        },
    ];
    let values = vec![
        Value::Int32(1),
        Value::String("user01".into()),
        Value::String("apple".into()),
    ];
    let schema = row_schema(Some("table01"), &columns, &values);
    assert_eq!(schema.name.as_deref(), Some("table01"));
    assert!(!schema.optional);
    assert!(!schema.fields[0].schema.optional);
    assert!(schema.fields[1].schema.optional);
    assert_eq!(schema.fields[2].name, "item");
}
