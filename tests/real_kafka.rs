//! The real-Kafka harness itself: three KRaft brokers from Maven Central's jars keep every
//! acknowledged record through a `kill -9` of one of them, as Kafka's own console consumer
//! reads them back.

use std::time::Duration;

use ferry_tests::brokers::Brokers;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

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
