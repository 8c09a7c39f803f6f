//! Converters end to end: real `ferryd` processes and a real Apache Kafka broker; what travels
//! through Kafka is Kafka Connect's wire format, read back by a connector with a different converter.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ferry_tests::pipeline::{create, create_source_with, started, write_input};
use ferry_tests::{lines_in_work_dirs, produce_bytes, say, wait_for, Cluster, Kafka, Settings};

const FLOW: Duration = Duration::from_secs(90);

/// A FileStreamSink `raw` of topic `lines` into raw.out, with StringConverter: what is on the
/// wire, as text.
fn create_raw(cluster: &Cluster, leader: u64) {
    create(
        cluster,
        leader,
        "raw",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("file", "raw.out"),
            ("value.converter", "StringConverter"),
        ],
    );
}

/// The distinct lines of a sink's output once `done` says they are all there.
fn output(
    cluster: &Cluster,
    file: &str,
    what: &str,
    done: impl Fn(&BTreeSet<String>) -> bool,
) -> BTreeSet<String> {
    wait_for(what, FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(cluster, file).into_iter().collect();
        done(&got).then_some(got)
    })
}

/// A FileStreamSource writes through JsonConverter; a sink reading with JsonConverter gets the
/// lines back, and one reading the same topic with StringConverter sees Kafka Connect's envelope.
#[test]
fn json_values_travel_in_kafka_connects_envelope_and_back() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, lines) = write_input(&cluster, 300);
    create_source_with(
        &cluster,
        leader,
        "source",
        &input,
        "lines",
        &[(
            "value.converter",
            "org.apache.kafka.connect.json.JsonConverter",
        )],
    );
    create(
        &cluster,
        leader,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("file", "sink.out"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
            ("value.converter.schemas.enable", "true"),
        ],
    );
    create_raw(&cluster, leader);
    let decoded = output(
        &cluster,
        "sink.out",
        "every line through JsonConverter",
        |got| got == &lines,
    );
    let raw = output(&cluster, "raw.out", "every envelope", |got| {
        got.len() == lines.len()
    });
    let expected: BTreeSet<String> = lines
        .iter()
        .map(|l| format!(r#"{{"schema":{{"type":"string","optional":false}},"payload":"{l}"}}"#))
        .collect();
    assert_eq!(raw, expected);
    say(format!(
        "JSON: {} lines decoded; on the wire, e.g. {}",
        decoded.len(),
        raw.iter().next().map(String::as_str).unwrap_or_default()
    ));
}

/// Bytes that are not UTF-8 under StringConverter are read with U+FFFD in their place, as
/// Kafka Connect reads them: the task neither fails nor skips the record.
#[test]
fn string_converter_reads_invalid_utf8_with_replacement_characters() {
    let kafka = Kafka::start(&[("lines", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    produce_bytes(
        &kafka,
        "lines",
        &[b"caf\xe9 au lait", b"plain", b"\xff\xfe"],
    );
    create_raw(&cluster, leader);
    let got = output(&cluster, "raw.out", "the three records", |got| {
        got.len() == 3
    });
    let expected: BTreeSet<String> = ["caf\u{fffd} au lait", "plain", "\u{fffd}\u{fffd}"]
        .into_iter()
        .map(str::to_string)
        .collect();
    assert_eq!(got, expected);
    let status = cluster.json(leader, &["connectors", "status", "raw"]);
    assert_eq!(status["tasks"][0]["state"], "RUNNING", "{status}");
    say("STRING: bytes that are not UTF-8 were written with replacement characters");
}

/// Transforms on both sides: the source hoists each line into a map and tags it, the value
/// travels as plain JSON, and a sink takes the line back out, dropping the records of one of
/// its topics (whose offsets move on all the same); a raw sink shows what the source
/// transforms produced.
#[test]
fn transform_chains_run_on_sources_and_sinks() {
    let kafka = Kafka::start(&[("lines", 2), ("other", 1)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, lines) = write_input(&cluster, 200);
    let other = cluster.dir.path().join("other.txt");
    let other_lines: Vec<String> = (0..50).map(|i| format!("other-{i:05}")).collect();
    std::fs::write(&other, other_lines.join("\n") + "\n").expect("write the other input");
    create_source_with(
        &cluster,
        leader,
        "other-source",
        &other,
        "other",
        &[
            ("value.converter", "JsonConverter"),
            ("value.converter.schemas.enable", "false"),
        ],
    );
    let json = "org.apache.kafka.connect.json.JsonConverter";
    create_source_with(
        &cluster,
        leader,
        "source",
        &input,
        "lines",
        &[
            ("value.converter", json),
            ("value.converter.schemas.enable", "false"),
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
        ],
    );
    // The records of topic other are filtered out; the others lose their map.
    create(
        &cluster,
        leader,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines,other"),
            ("file", "sink.out"),
            ("value.converter", json),
            ("value.converter.schemas.enable", "false"),
            ("transforms", "route,dropOther,line"),
            ("transforms.route.type", "RegexRouter"),
            ("transforms.route.regex", "(.*)"),
            ("transforms.route.replacement", "renamed-$1"),
            ("transforms.dropOther.type", "Filter"),
            ("transforms.dropOther.predicate", "isOther"),
            ("transforms.line.type", "ExtractField$Value"),
            ("transforms.line.field", "line"),
            ("predicates", "isOther"),
            ("predicates.isOther.type", "TopicNameMatches"),
            ("predicates.isOther.pattern", "renamed-other"),
        ],
    );
    create_raw(&cluster, leader);
    let got = output(&cluster, "sink.out", "every line out of its map", |got| {
        got == &lines
    });
    let raw = output(&cluster, "raw.out", "every tagged record", |got| {
        got.len() == lines.len()
    });
    let expected: BTreeSet<String> = lines
        .iter()
        .map(|l| format!(r#"{{"line":"{l}","data_source":"test-file-source"}}"#))
        .collect();
    assert_eq!(raw, expected);
    // The sink's offsets moved under the topics it consumed, not the ones RegexRouter made,
    // and past the records it dropped.
    let offsets = wait_for("the dropped records' offsets committed", FLOW, || {
        let offsets = cluster.json(leader, &["connectors", "offsets", "sink"]);
        let by_topic: BTreeMap<(String, i64), i64> = offsets["offsets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|o| {
                Some((
                    (
                        o["partition"]["kafka_topic"].as_str()?.to_string(),
                        o["partition"]["kafka_partition"].as_i64()?,
                    ),
                    o["offset"]["kafka_offset"].as_i64()?,
                ))
            })
            .collect();
        (by_topic.get(&("other".to_string(), 0)) == Some(&50)).then_some(by_topic)
    });
    assert!(
        offsets
            .keys()
            .all(|(topic, _)| topic == "lines" || topic == "other"),
        "{offsets:?}"
    );
    say(format!(
        "TRANSFORMS: {} lines through HoistField, InsertField, RegexRouter, Filter, ExtractField",
        got.len()
    ));
}
