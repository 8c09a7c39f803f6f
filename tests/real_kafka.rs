//! The real-Kafka harness itself: three KRaft brokers from Maven Central's jars keep every
//! acknowledged record through a `kill -9` of one of them, as Kafka's own console consumer
//! reads them back; Kafka Connect itself runs from the same jars.

use std::time::Duration;

use ferry_tests::brokers::Brokers;
use ferry_tests::connect::KafkaConnect;
use ferry_tests::{say, wait_for, Kafka};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use serde_json::json;

/// Records `record-<i>` for `from..to`, keyed by `i`, into `events`, every one acknowledged.
fn produce(bootstrap: &str, from: usize, to: usize) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .create()
        .expect("a producer");
    for i in from..to {
        let value = format!("record-{i}");
        let key = i.to_string();
        producer
            .send(BaseRecord::to("events").key(&key).payload(&value))
            .expect("queue a record");
    }
    producer
        .flush(Duration::from_secs(60))
        .expect("every record acknowledged");
}

#[test]
fn three_brokers_keep_every_acknowledged_record_through_a_kill_9() {
    let mut kafka = Brokers::start(3);
    kafka.create_topics(&[("events", 3)]);
    produce(&kafka.bootstrap, 0, 100);
    kafka.kill9(2);
    produce(&kafka.bootstrap, 100, 200);
    kafka.restart(2);
    let mut read = kafka.console_consume("events", 200, Duration::from_secs(60));
    read.sort();
    let mut want: Vec<String> = (0..200).map(|i| format!("record-{i}")).collect();
    want.sort();
    assert_eq!(read, want);
}

/// Kafka Connect itself, from the same jars, runs FileStreamSink in distributed mode against
/// the test's broker and lists it through its REST API: the reference later comparisons use.
#[test]
fn kafka_connect_itself_runs_a_file_stream_sink_and_lists_it() {
    let kafka = Kafka::start(&[("events", 2)]);
    produce(&kafka.bootstrap, 0, 100);
    let connect = KafkaConnect::start(&kafka.bootstrap, "connect-reference", 1, &[]);
    let dir = tempfile::tempdir().expect("a dir for the sink's file");
    let file = dir.path().join("sink.out");
    let create = json!({
        "name": "file-sink",
        "config": {
            "connector.class": "FileStreamSink",
            "topics": "events",
            "tasks.max": "2",
            "file": file.to_string_lossy(),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        }
    });
    let (status, body) = connect.call("POST", "/connectors", Some(&create));
    assert_eq!(status, 201, "{body}");
    let (status, list) = connect.call("GET", "/connectors", None);
    assert_eq!((status, list), (200, json!(["file-sink"])));
    let lines = wait_for(
        "Kafka Connect's sink to write every record",
        Duration::from_secs(120),
        || {
            let text = std::fs::read_to_string(&file).ok()?;
            let lines: Vec<String> = text.lines().map(str::to_string).collect();
            (lines.len() >= 100).then_some(lines)
        },
    );
    let mut lines = lines;
    lines.sort();
    let mut want: Vec<String> = (0..100).map(|i| format!("record-{i}")).collect();
    want.sort();
    assert_eq!(lines, want);
    let (_, status) = connect.call("GET", "/connectors/file-sink/status", None);
    say(format!(
        "KAFKA CONNECT: FileStreamSink wrote 100 records; status {status}"
    ));
}
