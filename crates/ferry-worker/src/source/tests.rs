//! The source loop against fakes of its producer, its control plane, its task and its dead
//! letter queue, in paused time: offsets committed only once what was sent is delivered, a
//! record the broker refused dead-lettered before the offsets move (or failing the task), and
//! the commit cadence while records keep coming.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use ferry_connect::config::props;
use ferry_connect::task::Props;
use rdkafka::error::KafkaError;
use rdkafka::message::{OwnedMessage, Timestamp};
use rdkafka::types::RDKafkaErrorCode;

use super::*;
use crate::fakes::{self, FakeControl, Log};

/// The producer: deliveries wait until the test releases them; the records whose values are
/// listed are refused by the "broker".
struct FakeProducer {
    released: watch::Receiver<bool>,
    refused: Vec<String>,
    log: Log,
    /// The records sent and not yet reported: their `seq`, and the message if it is refused.
    sent: std::sync::Mutex<Vec<(usize, Option<OwnedMessage>)>>,
}

impl SourceProducer for FakeProducer {
    fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        out: &Original,
        seq: usize,
    ) -> Result<(), KafkaError> {
        let value = String::from_utf8_lossy(out.value.as_deref().unwrap_or_default()).to_string();
        self.log.push(format!("send {value}"));
        let refused = self.refused.contains(&value).then(|| {
            OwnedMessage::new(
                out.value.clone(),
                out.key.clone(),
                topic.to_string(),
                Timestamp::NotAvailable,
                partition.unwrap_or(0),
                -1,
                None,
            )
        });
        self.sent.lock().expect("sent").push((seq, refused));
        Ok(())
    }

    async fn delivered(&self) -> Vec<(usize, Undelivered)> {
        let mut released = self.released.clone();
        let _ = released.wait_for(|r| *r).await;
        let sent = std::mem::take(&mut *self.sent.lock().expect("sent"));
        sent.into_iter()
            .filter_map(|(seq, refused)| {
                let e = KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut);
                refused.map(|message| (seq, Undelivered(e, Box::new(message))))
            })
            .collect()
    }
}

/// A source that reads lines `from..to`, `per_poll` at a time, one poll a second.
struct FakeSource {
    next: u64,
    to: u64,
    per_poll: u64,
    log: Log,
}

#[async_trait]
impl SourceTask for FakeSource {
    async fn poll(&mut self) -> ferry_connect::Result<Vec<SourceRecord>> {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let end = (self.next + self.per_poll).min(self.to);
        let records = (self.next..end)
            .map(|n| SourceRecord {
                source_partition: Arc::new(BTreeMap::from([(
                    "file".into(),
                    serde_json::json!("f"),
                )])),
                source_offset: BTreeMap::from([("position".into(), serde_json::json!(n + 1))]),
                topic: "out".into(),
                partition: None,
                key_schema: None,
                key: ferry_connect::Value::Null,
                value_schema: None,
                value: ferry_connect::Value::String(format!("line-{n}")),
                timestamp: None,
                headers: Vec::new(),
            })
            .collect();
        self.next = end;
        Ok(records)
    }

    async fn commit(&mut self) -> ferry_connect::Result<()> {
        self.log.push("task commit");
        Ok(())
    }

    async fn stop(&mut self) -> ferry_connect::Result<()> {
        Ok(())
    }
}

const FLUSH: Duration = Duration::from_secs(10);

struct Bed {
    log: Log,
    release: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    _target: watch::Sender<TargetState>,
    done: tokio::task::JoinHandle<Result<(), Failure>>,
}

/// Start a loop over a source of lines `0..to`, `per_poll` at a time, whose deliveries wait
/// for the test (unless `released`) and refuse the `refused` lines.
fn start(to: u64, per_poll: u64, config: &[(&str, &str)], refused: &[&str], released: bool) -> Bed {
    let log = Log::default();
    let mut connector: Props = props(&[
        ("key.converter", "StringConverter"),
        ("value.converter", "StringConverter"),
    ]);
    connector.extend(props(config));
    let pipeline = fakes::pipeline(&connector, &log, false);
    let (release, released_rx) = watch::channel(released);
    let producer = FakeProducer {
        released: released_rx,
        refused: refused.iter().map(|r| r.to_string()).collect(),
        log: log.clone(),
        sent: Default::default(),
    };
    let task = FakeSource {
        next: 0,
        to,
        per_poll,
        log: log.clone(),
    };
    let (stop, stop_rx) = watch::channel(false);
    let (target, mut target_rx) = watch::channel(TargetState::Running);
    let mut source = SourceLoop::new(
        fakes::unit(FLUSH),
        FakeControl { log: log.clone() },
        Box::new(task),
        producer,
        pipeline,
        stop_rx.clone(),
        None,
    );
    let done = tokio::spawn(async move {
        let mut stop_rx = stop_rx;
        source.run(&mut target_rx, &mut stop_rx).await
    });
    Bed {
        log,
        release,
        stop,
        _target: target,
        done,
    }
}

#[tokio::test(start_paused = true)]
async fn source_offsets_are_committed_once_what_was_sent_is_delivered() {
    let bed = start(3, 3, &[], &[], false);
    // The burst is sent; the source has nothing more, so the loop commits — after the
    // deliveries, which wait.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(bed.log.count("send"), 3, "{:?}", bed.log.events());
    assert_eq!(bed.log.count("commit"), 0, "not before the deliveries");
    bed.release.send_replace(true);
    tokio::time::sleep(Duration::from_millis(10)).await;
    let events = bed.log.events();
    let commit = events.iter().position(|e| e == "commit {\"position\":3}");
    let told = events.iter().position(|e| e == "task commit");
    assert!(commit.is_some() && commit < told, "{events:?}");
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_record_the_broker_refused_is_dead_lettered_before_the_offsets_commit() {
    let config = [
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", "dlq"),
    ];
    let bed = start(3, 3, &config, &["line-1"], true);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let events = bed.log.events();
    let at = |e: &str| events.iter().position(|x| x == e);
    let (sent, flushed, committed) = (
        at("dlq send {\"position\":2}").expect("dead-lettered with its source offset"),
        at("dlq flush").expect("the DLQ flushed"),
        at("commit {\"position\":3}").expect("committed"),
    );
    assert!(sent < flushed && flushed < committed, "{events:?}");
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn with_errors_tolerance_none_a_refused_record_fails_the_task_and_nothing_is_committed() {
    let bed = start(3, 3, &[], &["line-1"], true);
    let failed = tokio::time::timeout(Duration::from_secs(60), bed.done)
        .await
        .expect("the task fails")
        .expect("the loop");
    let Err(Failure::Task(e)) = failed else {
        panic!("the task did not fail: {failed:?}");
    };
    assert!(e.message.contains("KAFKA_PRODUCE"), "{e}");
    assert_eq!(bed.log.count("commit"), 0, "{:?}", bed.log.events());
}

#[tokio::test(start_paused = true)]
async fn while_records_keep_coming_offsets_are_committed_every_flush_interval() {
    let bed = start(u64::MAX, 1, &[], &[], true);
    tokio::time::sleep(FLUSH - Duration::from_millis(500)).await;
    assert_eq!(bed.log.count("commit"), 0, "{:?}", bed.log.events());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(bed.log.count("commit"), 1, "{:?}", bed.log.events());
    tokio::time::sleep(FLUSH).await;
    assert_eq!(bed.log.count("commit"), 2, "{:?}", bed.log.events());
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}
