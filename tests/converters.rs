//! Converters end to end: real `ferryd` processes and the mock broker; what travels through
//! Kafka is Kafka Connect's wire format, read back by a connector with a different converter.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_tests::pipeline::{create, started, write_input};
use ferry_tests::{lines_in_work_dirs, say, wait_for, Kafka, Settings};

const FLOW: Duration = Duration::from_secs(90);

/// A FileStreamSource writes through JsonConverter; a sink reading with JsonConverter gets the
/// lines back, and one reading the same topic with StringConverter sees Kafka Connect's envelope.
#[test]
fn json_values_travel_in_kafka_connects_envelope_and_back() {
    let kafka = Kafka::start(&[("lines", 2)]);
    let (cluster, leader) = started(1, &kafka, Settings::default());
    let (input, lines) = write_input(&cluster, 300);
    create(
        &cluster,
        leader,
        "source",
        &[
            ("connector.class", "FileStreamSource"),
            ("file", &input.to_string_lossy()),
            ("topic", "lines"),
            (
                "value.converter",
                "org.apache.kafka.connect.json.JsonConverter",
            ),
        ],
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
    create(
        &cluster,
        leader,
        "raw",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("file", "raw.out"),
            ("value.converter", "StringConverter"),
        ],
    );
    let decoded = wait_for("every line through JsonConverter", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "sink.out")
            .into_iter()
            .collect();
        (got == lines).then_some(got)
    });
    let raw = wait_for("every envelope", FLOW, || {
        let got: BTreeSet<String> = lines_in_work_dirs(&cluster, "raw.out")
            .into_iter()
            .collect();
        (got.len() == lines.len()).then_some(got)
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
