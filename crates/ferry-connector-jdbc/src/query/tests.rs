use super::*;

const D: Dialect = Dialect { quote: true };

fn ts(micros: i64) -> Key {
    Key {
        incrementing: None,
        timestamp: Some(micros),
    }
}

#[test]
fn offsets_read_and_write_confluents_keys_with_microseconds_kept() {
    // 2024-01-02T03:04:05.123456Z
    let micros = 1_704_164_645_123_456;
    let offset = Offset {
        incrementing: Some(42),
        timestamp: Some(micros),
    };
    let map = offset.to_map();
    assert_eq!(map["incrementing"], json!(42));
    assert_eq!(map["timestamp"], json!(1_704_164_645_123i64));
    assert_eq!(map["timestamp_nanos"], json!(123_456_000));
    assert_eq!(Offset::from_map(&map).expect("valid"), offset);
    // Before 1970 the millisecond is floored and the nanoseconds stay positive, as Java's.
    let before = Offset {
        incrementing: None,
        timestamp: Some(-1),
    };
    let map = before.to_map();
    assert_eq!(map["timestamp"], json!(-1));
    assert_eq!(map["timestamp_nanos"], json!(999_999_000));
    assert_eq!(Offset::from_map(&map).expect("valid"), before);
    // An offset with milliseconds only (an older writer).
    let old: SourceMap = [("timestamp".to_string(), json!(1500))].into();
    assert_eq!(
        Offset::from_map(&old).expect("valid").timestamp,
        Some(1_500_000)
    );
    let bad: SourceMap = [("incrementing".to_string(), json!("x"))].into();
    let e = Offset::from_map(&bad).expect_err("not a number");
    assert!(e.message.contains("incrementing"), "{}", e.message);
    assert!(Offset::default().to_map().is_empty(), "bulk has no offset");
}

#[test]
fn in_timestamp_mode_a_timestamp_is_passed_only_once_all_its_rows_are_out() {
    let previous = Offset {
        incrementing: None,
        timestamp: Some(5),
    };
    let rows = [ts(10), ts(20), ts(20), ts(30)];
    // The batch ends inside the rows of 30: the next row shares it.
    let got = offsets(SourceMode::Timestamp, &previous, &rows, Some(&ts(30)));
    let stamps: Vec<Option<i64>> = got.iter().map(|o| o.timestamp).collect();
    assert_eq!(stamps, vec![Some(10), Some(10), Some(20), Some(20)]);
    // The result ends with the batch: 30 is complete.
    let got = offsets(SourceMode::Timestamp, &previous, &rows, None);
    assert_eq!(got[3].timestamp, Some(30));
    // Nothing complete yet: the previous offset stays.
    let got = offsets(SourceMode::Timestamp, &previous, &[ts(7)], Some(&ts(7)));
    assert_eq!(got[0], previous);
}

#[test]
fn incrementing_modes_take_each_rows_own_offset() {
    let rows = [
        Key {
            incrementing: Some(3),
            timestamp: Some(100),
        },
        Key {
            incrementing: Some(4),
            timestamp: Some(100),
        },
    ];
    let got = offsets(
        SourceMode::TimestampIncrementing,
        &Offset::default(),
        &rows,
        None,
    );
    assert_eq!(
        got[0],
        Offset {
            incrementing: Some(3),
            timestamp: Some(100)
        }
    );
    let got = offsets(SourceMode::Incrementing, &Offset::default(), &rows, None);
    assert_eq!(got[1].incrementing, Some(4));
    assert_eq!(got[1].timestamp, None);
    let got = offsets(SourceMode::Bulk, &Offset::default(), &rows, None);
    assert_eq!(got, vec![Offset::default(); 2]);
}

#[test]
fn queries_of_each_mode() {
    let ts_cols = vec!["updated".to_string()];
    let from = "\"public\".\"t\"";
    let inc = Criteria {
        mode: SourceMode::Incrementing,
        incrementing: Some("id"),
        timestamps: &[],
    };
    assert_eq!(
        inc.select(&D, "*", from, &Offset::default(), None, ""),
        (
            "SELECT * FROM \"public\".\"t\" ORDER BY \"id\" ASC".to_string(),
            vec![]
        ),
        "no offset: every row, none below an initial bound skipped"
    );
    let at = Offset {
        incrementing: Some(7),
        timestamp: Some(1000),
    };
    assert_eq!(
        inc.select(&D, "*", from, &at, None, ""),
        (
            "SELECT * FROM \"public\".\"t\" WHERE \"id\" > $1 ORDER BY \"id\" ASC".to_string(),
            vec![Bound::Int(7)]
        )
    );
    let stamp = Criteria {
        mode: SourceMode::Timestamp,
        incrementing: None,
        timestamps: &ts_cols,
    };
    assert_eq!(
        stamp.select(&D, "*", from, &at, Some(5000), "FOR SHARE"),
        (
            "SELECT * FROM \"public\".\"t\" WHERE \"updated\" > $1 AND \"updated\" < $2 ORDER BY \"updated\" ASC FOR SHARE".to_string(),
            vec![Bound::Timestamp(1000), Bound::Timestamp(5000)]
        )
    );
    let two = vec!["modified".to_string(), "created".to_string()];
    let both = Criteria {
        mode: SourceMode::TimestampIncrementing,
        incrementing: Some("id"),
        timestamps: &two,
    };
    let (sql, bounds) = both.select(
        &D,
        "\"id\", \"x\"::text AS \"x\"",
        "(SELECT 1) AS q",
        &at,
        Some(5000),
        "",
    );
    assert_eq!(
        sql,
        "SELECT \"id\", \"x\"::text AS \"x\" FROM (SELECT 1) AS q WHERE COALESCE(\"modified\", \"created\") < $1 AND \
         ((COALESCE(\"modified\", \"created\") = $2 AND \"id\" > $3) OR COALESCE(\"modified\", \"created\") > $2) \
         ORDER BY COALESCE(\"modified\", \"created\"), \"id\" ASC"
    );
    assert_eq!(
        bounds,
        vec![
            Bound::Timestamp(5000),
            Bound::Timestamp(1000),
            Bound::Int(7)
        ]
    );
    let bulk = Criteria {
        mode: SourceMode::Bulk,
        incrementing: None,
        timestamps: &[],
    };
    assert_eq!(
        bulk.select(&D, "*", from, &at, None, "").0,
        "SELECT * FROM \"public\".\"t\""
    );
}
