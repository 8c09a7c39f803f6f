//! Kafka-side semantics on a real broker: a connector's `consumer.override.*` and
//! `producer.override.*` reach its clients (a Java-only property is named in the log as not
//! used, a bad value fails the task naming the property), and the `connect-<name>` group's
//! committed offsets and lag read by Kafka's own `kafka-consumer-groups --describe`.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_tests::brokers::{describe_group, describe_topic};
use ferry_tests::pipeline::{create, create_source_with, started, task_workers, write_input};
use ferry_tests::{say, wait_for, Cluster, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

const FLOW: Duration = Duration::from_secs(90);

/// Records `event-<i>` for `range`, keyed by `i` (both partitions get some), acknowledged.
fn produce(kafka: &Kafka, range: std::ops::Range<usize>) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .set("acks", "all")
        .create()
        .expect("a producer");
    for i in range {
        let (key, value) = (i.to_string(), format!("event-{i:04}"));
        producer
            .send(BaseRecord::to("events").key(&key).payload(&value))
            .expect("queue a record");
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record acknowledged");
}

fn lines(cluster: &Cluster, file: &str) -> Vec<String> {
    std::fs::read_to_string(cluster.node(1).work_dir.join(file))
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The trace of the connector's first task once it shows FAILED.
fn failed_trace(cluster: &Cluster, name: &str) -> String {
    wait_for(&format!("{name}'s task FAILED"), FLOW, || {
        let status = cluster.json(1, &["connectors", "status", name]);
        let task = status["tasks"].as_array()?.first()?.clone();
        (task["state"] == "FAILED").then(|| task["trace"].as_str().unwrap_or_default().to_string())
    })
}

fn state(cluster: &Cluster, name: &str) -> Vec<String> {
    task_workers(cluster, 1, name)
        .into_iter()
        .map(|(state, _)| state)
        .collect()
}

#[test]
fn consumer_overrides_reach_the_sinks_consumer_and_its_group_shows_offsets_and_lag() {
    let kafka = Kafka::start(&[("events", 2)]);
    produce(&kafka, 0..50);
    let (cluster, _) = started(1, &kafka, Settings::default());
    let sink = |name: &str, more: &[(&str, &str)]| {
        let file = format!("{name}.out");
        let mut config = vec![
            ("connector.class", "FileStreamSink"),
            ("topics", "events"),
            ("file", file.as_str()),
        ];
        config.extend_from_slice(more);
        create(&cluster, 1, name, &config);
    };
    sink(
        "late",
        &[
            ("consumer.override.auto.offset.reset", "latest"),
            ("consumer.override.max.poll.records", "10"),
        ],
    );
    sink("all", &[]);
    wait_for("both sinks' tasks RUNNING", FLOW, || {
        (state(&cluster, "late") == ["RUNNING"] && state(&cluster, "all") == ["RUNNING"])
            .then_some(())
    });
    // `latest` starts at the end of each partition once its consumer has fetched it: records
    // are produced until some reach the late sink; none of the first fifty may.
    let mut next = 50;
    wait_for("records produced after the start in late.out", FLOW, || {
        produce(&kafka, next..next + 10);
        next += 10;
        (!lines(&cluster, "late.out").is_empty()).then_some(())
    });
    let early: BTreeSet<String> = (0..50).map(|i| format!("event-{i:04}")).collect();
    let late = lines(&cluster, "late.out");
    assert!(
        late.iter().all(|l| !early.contains(l)),
        "consumer.override.auto.offset.reset=latest: no record from before the start, got {late:?}"
    );
    let all = wait_for("every record in all.out", FLOW, || {
        let all = lines(&cluster, "all.out");
        (all.len() >= next).then_some(all)
    });
    assert_eq!(all.len(), next, "each record once");
    let log = cluster.log_text(1);
    assert!(
        log.contains("consumer.override.max.poll.records") && log.contains("not used"),
        "the Java-only property is named as not used"
    );
    // The group's committed offsets, as Kafka's own tool shows them: no lag, then the lag of
    // what arrives while the connector is paused.
    let committed = |want_lag: i64| {
        wait_for(
            "connect-all's offsets in kafka-consumer-groups",
            FLOW,
            || {
                let parts = describe_group(&kafka.bootstrap, "connect-all");
                let total: i64 = parts.iter().filter_map(|p| p.committed).sum();
                let lag: i64 = parts.iter().filter_map(|p| p.lag).sum();
                (parts.len() == 2 && total == next as i64 && lag == want_lag).then_some(parts)
            },
        )
    };
    committed(0);
    cluster.cli(1, &["connectors", "pause", "all"]);
    wait_for("all PAUSED", FLOW, || {
        (state(&cluster, "all") == ["PAUSED"]).then_some(())
    });
    produce(&kafka, next..next + 7);
    let parts = committed(7);
    say(format!(
        "CLIENTS: consumer.override.auto.offset.reset=latest skipped the 50 earlier records; kafka-consumer-groups shows connect-all at {parts:?}"
    ));
}

#[test]
fn a_bad_producer_override_fails_the_source_task_naming_the_property() {
    let kafka = Kafka::start(&[("events", 1)]);
    let (cluster, _) = started(1, &kafka, Settings::default());
    let (input, _) = write_input(&cluster, 10);
    create_source_with(
        &cluster,
        1,
        "source",
        &input,
        "events",
        &[("producer.override.acks", "sometimes")],
    );
    let trace = failed_trace(&cluster, "source");
    assert!(trace.contains("producer.override.acks"), "{trace}");
    say(format!(
        "CLIENTS: a bad override fails the task: {}",
        trace.lines().next().unwrap_or_default()
    ));
}

#[test]
fn a_dead_letter_queue_wider_than_the_cluster_fails_the_task_naming_its_replication_factor() {
    let kafka = Kafka::start(&[("events", 1)]);
    let (cluster, _) = started(1, &kafka, Settings::default());
    // Kafka Connect's default replication factor of a DLQ topic is 3; this cluster has one
    // broker.
    create(
        &cluster,
        1,
        "wide",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "events"),
            ("file", "wide.out"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "dlq-wide"),
        ],
    );
    let trace = failed_trace(&cluster, "wide");
    assert!(
        trace.contains("\"dlq-wide\"")
            && trace.contains("errors.deadletterqueue.topic.replication.factor is 3"),
        "{trace}"
    );
    say(format!(
        "CLIENTS: a DLQ wider than the cluster fails the task: {}",
        trace.lines().next().unwrap_or_default()
    ));
}

#[test]
fn a_source_creates_its_topics_by_their_group_when_the_brokers_do_not() {
    let kafka = Kafka::without_auto_creation(&[]);
    let (cluster, _) = started(1, &kafka, Settings::default());
    let (input, expected) = write_input(&cluster, 200);
    create_source_with(
        &cluster,
        1,
        "source",
        &input,
        "state-lines",
        &[
            ("topic.creation.default.partitions", "1"),
            ("topic.creation.default.replication.factor", "-1"),
            ("topic.creation.groups", "state"),
            ("topic.creation.state.include", "state-.*"),
            ("topic.creation.state.partitions", "4"),
            ("topic.creation.state.retention.ms", "86400000"),
        ],
    );
    let read = wait_for("every line in state-lines", FLOW, || {
        let read = kafka.console_consume(
            "state-lines",
            expected.len(),
            Duration::from_secs(10),
            false,
        );
        (read.len() == expected.len()).then_some(read)
    });
    assert_eq!(read.into_iter().collect::<BTreeSet<_>>(), expected);
    let described = describe_topic(&kafka.bootstrap, "state-lines");
    assert!(
        described.contains("PartitionCount: 4") && described.contains("retention.ms=86400000"),
        "the state group's settings: {described}"
    );
    say(format!(
        "CLIENTS: KIP-158 created state-lines: {}",
        described.lines().next().unwrap_or_default()
    ));
}

#[test]
fn sasl_scram_credentials_in_the_workers_kafka_properties_reach_every_client() {
    const PASSWORD: &str = "scram-Secret-7d1f";
    let kafka = Kafka::scram("ferry", PASSWORD, &[("lines", 2)]);
    let settings = Settings {
        kafka_properties: [
            ("security.protocol", "SASL_PLAINTEXT"),
            ("sasl.mechanisms", "SCRAM-SHA-256"),
            ("sasl.username", "ferry"),
            ("sasl.password", PASSWORD),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .to_vec(),
        ..Settings::default()
    };
    let (cluster, _) = started(1, &kafka, settings);
    let (input, expected) = write_input(&cluster, 300);
    create_source_with(&cluster, 1, "source", &input, "lines", &[]);
    create(
        &cluster,
        1,
        "sink",
        &[
            ("connector.class", "FileStreamSink"),
            ("topics", "lines"),
            ("file", "sink.out"),
            ("errors.tolerance", "all"),
            ("errors.deadletterqueue.topic.name", "dlq-sink"),
            ("errors.deadletterqueue.topic.replication.factor", "1"),
        ],
    );
    // The producer, the consumer, the DLQ's admin client and the scheduler's metadata
    // client all log in: the lines go through.
    let got = wait_for("every line through the SASL listener", FLOW, || {
        let got: BTreeSet<String> = lines(&cluster, "sink.out").into_iter().collect();
        (got.len() == expected.len()).then_some(got)
    });
    assert_eq!(got, expected);
    let log = cluster.log_text(1);
    assert!(
        !log.contains(PASSWORD),
        "the node's log holds the SASL password"
    );
    let status = cluster
        .json(1, &["connectors", "config", "sink"])
        .to_string();
    assert!(!status.contains(PASSWORD));
    say("CLIENTS: SASL/SCRAM from [kafka] properties: 300 lines through the SASL listener, the password in no log");
}
