//! Kafka-side semantics on a real broker: a connector's `consumer.override.*` and
//! `producer.override.*` reach its clients (a Java-only property is named in the log as not
//! used, a bad value fails the task naming the property), and the `connect-<name>` group's
//! committed offsets and lag read by Kafka's own `kafka-consumer-groups --describe`; a worker's
//! shared consumer serving tasks that stall, seek and commit each on their own.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ferry_connect::TopicPartition;
use ferry_worker::clients;
use ferry_worker::consumers::{Consumers, TaskConsumer};
use ferry_worker::KafkaSettings;

use ferry_tests::brokers::{describe_group, describe_topic};
use ferry_tests::pipeline::{create, create_source_with, started, task_workers, write_input};
use ferry_tests::{say, wait_for, Cluster, Kafka, Settings};
use rdkafka::config::ClientConfig;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::Offset;

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

/// Records of 1 KiB into one partition of `topic`, acknowledged.
fn produce_to(kafka: &Kafka, topic: &str, partition: i32, count: usize) {
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .set("acks", "all")
        .create()
        .expect("a producer");
    let value = vec![b'x'; 1024];
    for _ in 0..count {
        producer
            .send(
                BaseRecord::<(), _>::to(topic)
                    .partition(partition)
                    .payload(&value),
            )
            .expect("queue a record");
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record acknowledged");
}

/// The offsets of the next `count` messages a task's consumer delivers, each of `partition`.
async fn read(consumer: &TaskConsumer, partition: i32, count: usize) -> Vec<i64> {
    let mut offsets = Vec::with_capacity(count);
    while offsets.len() < count {
        let m = tokio::time::timeout(FLOW, consumer.recv())
            .await
            .unwrap_or_else(|_| {
                panic!("message {} of partition {partition} in time", offsets.len())
            })
            .expect("a message");
        assert_eq!(m.partition(), partition, "only the task's own partition");
        offsets.push(m.offset());
    }
    offsets
}

/// One worker's shared consumer serving two tasks of two connectors: a task that stops
/// reading (paused, or backing off from a failed `put`: either way its loop takes no record)
/// and seeks back does not stall the other, each task's prefetch is bounded on its own, and
/// each task's offsets go to its own group.
#[test]
fn one_tasks_pause_backoff_or_seek_on_a_shared_consumer_never_stalls_another() {
    let kafka = Kafka::start(&[("shared", 2)]);
    for partition in 0..2 {
        produce_to(&kafka, "shared", partition, SHARED_RECORDS);
    }
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(two_tasks_on_a_shared_consumer(&kafka));
    say("SHARED CONSUMER: one task stalled and sought back while another read its 3,000 records; each task's group committed on its own");
}

/// Records in each partition of `shared`.
const SHARED_RECORDS: usize = 3_000;

async fn two_tasks_on_a_shared_consumer(kafka: &Kafka) {
    const RECORDS: usize = SHARED_RECORDS;
    let worker = KafkaSettings {
        bootstrap_servers: kafka.bootstrap.clone(),
        // A prefetch bound of 256 KiB per task queue: a task that stops reading fills its own
        // queue with about a twelfth of its records, and the fetching of its partition stops.
        properties: [("consumer.queued.max.messages.kbytes", "256")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    };
    let config = |name: &str| {
        clients::shared_consumer_of(&worker, &Default::default(), name, Some(0)).expect("config")
    };
    let p = |partition| TopicPartition::new("shared", partition);
    // Group clients are closed once unused for a second.
    let pool = Arc::new(Consumers::new(Duration::from_secs(1)));
    let mut stalled = pool
        .task(&config("stalled"), &[p(0)])
        .await
        .expect("a task consumer");
    let mut flowing = pool
        .task(&config("flowing"), &[p(1)])
        .await
        .expect("a task consumer");
    assert_eq!(pool.open(), 1, "both tasks on one consumer");
    stalled
        .assign(&[(p(0), Offset::Offset(0))])
        .await
        .expect("assign p0");
    flowing
        .assign(&[(p(1), Offset::Offset(0))])
        .await
        .expect("assign p1");

    // One task takes a record and then none: the other reads everything, and its partition's
    // fetching goes on while the first's queue is full.
    assert_eq!(read(&stalled, 0, 1).await, [0]);
    let first = read(&flowing, 1, RECORDS / 2).await;
    // The stalled task seeks back to the start; the other goes on where it was.
    stalled.seek(&p(0), 0).expect("seek p0");
    let rest = read(&flowing, 1, RECORDS - RECORDS / 2).await;
    let flowed: Vec<i64> = first.into_iter().chain(rest).collect();
    assert_eq!(
        flowed,
        (0..RECORDS as i64).collect::<Vec<_>>(),
        "every record of the flowing task's partition, once, in order, while the other took none"
    );
    // The stalled task reads from where it sought, without a gap or a repeat.
    assert_eq!(
        read(&stalled, 0, RECORDS).await,
        (0..RECORDS as i64).collect::<Vec<_>>(),
        "after its seek, the stalled task's partition from offset 0"
    );

    // A task of another connector on a partition the pool already serves gets a consumer of
    // its own: a partition is assigned once per consumer.
    let mut again = pool
        .task(&config("again"), &[p(0)])
        .await
        .expect("a task consumer");
    assert_eq!(pool.open(), 2, "a second consumer for a partition held");
    again
        .assign(&[(p(0), Offset::Offset(RECORDS as i64 - 1))])
        .await
        .expect("assign");
    assert_eq!(read(&again, 0, 1).await, [RECORDS as i64 - 1]);

    // Group offsets, per task's group, through its connector's group client.
    stalled
        .commit_group(&[(p(0), RECORDS as i64)].into_iter().collect())
        .expect("commit");
    flowing
        .commit_group(&[(p(1), 1_234)].into_iter().collect())
        .expect("commit");
    for (group, partition, offset) in [
        ("connect-stalled", 0, RECORDS as i64),
        ("connect-flowing", 1, 1_234),
    ] {
        let bootstrap = kafka.bootstrap.clone();
        let shown = tokio::task::spawn_blocking(move || {
            wait_for(&format!("{group}'s committed offset"), FLOW, || {
                describe_group(&bootstrap, group)
                    .into_iter()
                    .find(|g| g.partition == partition && g.committed == Some(offset))
            })
        })
        .await
        .expect("describe the group");
        assert_eq!(shown.topic, "shared");
    }
    // A group the cluster does not list is not asked: no group client is made for it.
    let read_back = again.group_offsets(&[p(0), p(1)]).await.expect("list");
    assert!(
        read_back.is_empty(),
        "connect-again committed nothing: {read_back:?}"
    );
    let open = pool.group_clients();
    assert!(
        !open.iter().any(|g| g == "connect-again"),
        "no group client for connect-again, which the cluster does not list: {open:?}"
    );
    let read_back = stalled.group_offsets(&[p(0), p(1)]).await.expect("list");
    assert_eq!(read_back, [(p(0), RECORDS as i64)].into_iter().collect());

    // A task's end lets its partitions go; a consumer no task uses closes.
    drop((stalled, flowing));
    until("the consumer no task uses closed", || pool.open() == 1).await;
    drop(again);
    until("every consumer closed", || pool.open() == 0).await;
    until("idle group clients closed by the pool", || {
        pool.group_clients().is_empty()
    })
    .await;
}

/// Wait until `done`, polling; fail after `FLOW`.
async fn until(what: &str, done: impl Fn() -> bool) {
    let start = std::time::Instant::now();
    while !done() {
        assert!(start.elapsed() < FLOW, "{what}: not within {FLOW:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
