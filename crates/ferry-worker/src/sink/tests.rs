//! The sink loop against fakes of its consumer, its control plane, its task and its dead letter
//! queue, in paused time: what it commits and when, rewinds, retries and their backoff, the
//! DLQ before the offsets, a stop in the middle of retrying.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferry_connect::config::props;
use ferry_connect::task::Props;
use rdkafka::error::KafkaResult;
use rdkafka::message::{OwnedMessage, Timestamp};
use tokio::time::Instant;

use super::*;
use crate::fakes::{self, show, FakeControl, Log};

fn tp(partition: i32) -> TopicPartition {
    TopicPartition::new("t", partition)
}

/// A topic's partitions and where the consumer is in each.
#[derive(Default)]
struct Partitions {
    messages: BTreeMap<TopicPartition, Vec<OwnedMessage>>,
    positions: HashMap<TopicPartition, i64>,
}

struct FakeConsumer {
    partitions: Mutex<Partitions>,
    more: tokio::sync::Notify,
    log: Log,
}

impl FakeConsumer {
    fn new(log: &Log) -> Self {
        FakeConsumer {
            partitions: Mutex::new(Partitions::default()),
            more: tokio::sync::Notify::new(),
            log: log.clone(),
        }
    }

    /// Append values to a partition.
    fn produce(&self, partition: i32, values: &[&str]) {
        let mut p = self.partitions.lock().expect("partitions");
        let messages = p.messages.entry(tp(partition)).or_default();
        for value in values {
            let offset = messages.len() as i64;
            messages.push(OwnedMessage::new(
                Some(value.as_bytes().to_vec()),
                None,
                "t".into(),
                Timestamp::NotAvailable,
                partition,
                offset,
                None,
            ));
        }
        drop(p);
        self.more.notify_one();
    }

    fn next(&self) -> Option<OwnedMessage> {
        let mut p = self.partitions.lock().expect("partitions");
        let Partitions {
            messages,
            positions,
        } = &mut *p;
        for (tp, log) in messages.iter() {
            let at = positions.entry(tp.clone()).or_insert(0);
            if let Some(m) = log.get(*at as usize) {
                *at += 1;
                return Some(m.clone());
            }
        }
        None
    }
}

impl SinkConsumer for FakeConsumer {
    type Message<'a> = OwnedMessage;
    type Ready<'a> = OwnedMessage;

    async fn recv(&self) -> KafkaResult<OwnedMessage> {
        loop {
            if let Some(m) = self.next() {
                return Ok(m);
            }
            self.more.notified().await;
        }
    }

    fn ready(&self, max: usize) -> Vec<KafkaResult<OwnedMessage>> {
        std::iter::from_fn(|| self.next())
            .take(max)
            .map(Ok)
            .collect()
    }

    fn seek(&self, tp: &TopicPartition, offset: i64) -> KafkaResult<()> {
        self.log.push(format!("seek {tp} {offset}"));
        self.partitions
            .lock()
            .expect("partitions")
            .positions
            .insert(tp.clone(), offset);
        self.more.notify_one();
        Ok(())
    }

    fn commit_group(&self, offsets: &HashMap<TopicPartition, i64>) -> KafkaResult<()> {
        self.log.push(format!("group {}", show(offsets)));
        Ok(())
    }
}

/// What the fake task does.
#[derive(Default)]
struct Script {
    /// Retriable failures of `put` before it succeeds; `usize::MAX`: always.
    failing_puts: usize,
    /// Asked once, during the first `put` that succeeds: consume a partition again from here.
    rewind: Option<(TopicPartition, i64)>,
    /// An exactly-once sink: `pre_commit` allows nothing (it commits by itself).
    commits_by_itself: bool,
    /// The task owns no partition: the loop has no consumer.
    no_partitions: bool,
    /// The task has no time-based work (`ticks` is false).
    no_ticks: bool,
}

struct FakeTask {
    script: Script,
    rewinds: Arc<Rewinds>,
    log: Log,
    /// When each `put` was called.
    puts: Arc<Mutex<Vec<Instant>>>,
}

#[async_trait]
impl SinkTask for FakeTask {
    async fn put(&mut self, records: &[SinkRecord]) -> ferry_connect::Result<()> {
        self.puts.lock().expect("puts").push(Instant::now());
        let offsets: Vec<String> = records.iter().map(|r| r.offset.to_string()).collect();
        self.log.push(format!("put {}", offsets.join(",")));
        if self.script.failing_puts > 0 {
            self.script.failing_puts = self.script.failing_puts.saturating_sub(1);
            return Err(ConnectError::retriable("the store is away"));
        }
        if let Some((tp, offset)) = self.script.rewind.take() {
            self.rewinds.request(tp, offset);
        }
        Ok(())
    }

    async fn flush(&mut self, _: &HashMap<TopicPartition, i64>) -> ferry_connect::Result<()> {
        Ok(())
    }

    async fn pre_commit(
        &mut self,
        offsets: &HashMap<TopicPartition, i64>,
    ) -> ferry_connect::Result<HashMap<TopicPartition, i64>> {
        if self.script.commits_by_itself {
            return Ok(HashMap::new());
        }
        Ok(offsets.clone())
    }

    fn ticks(&self) -> bool {
        !self.script.no_ticks
    }

    async fn tick(&mut self) -> ferry_connect::Result<()> {
        self.log.push("tick".to_string());
        Ok(())
    }

    async fn stop(&mut self) -> ferry_connect::Result<()> {
        Ok(())
    }
}

const FLUSH: Duration = Duration::from_secs(10);

/// A running loop over the fakes, and what the test holds to drive and watch it.
struct Bed {
    log: Log,
    metrics: crate::metrics::TaskMetrics,
    consumer: Arc<FakeConsumer>,
    puts: Arc<Mutex<Vec<Instant>>>,
    stop: watch::Sender<bool>,
    _target: watch::Sender<TargetState>,
    done: tokio::task::JoinHandle<Result<(), Failure>>,
}

/// The consumer, shared with the test.
struct Shared(Arc<FakeConsumer>);

impl SinkConsumer for Shared {
    type Message<'a> = OwnedMessage;
    type Ready<'a> = OwnedMessage;

    fn recv(&self) -> impl Future<Output = KafkaResult<OwnedMessage>> + Send {
        self.0.recv()
    }

    fn ready(&self, max: usize) -> Vec<KafkaResult<OwnedMessage>> {
        self.0.ready(max)
    }

    fn seek(&self, tp: &TopicPartition, offset: i64) -> KafkaResult<()> {
        self.0.seek(tp, offset)
    }

    fn commit_group(&self, offsets: &HashMap<TopicPartition, i64>) -> KafkaResult<()> {
        self.0.commit_group(offsets)
    }
}

/// Start a loop: values already in partition 0, the connector's error settings, the task's
/// script, a DLQ (that fails if asked) when the config names one.
fn start(values: &[&str], config: &[(&str, &str)], script: Script, dlq_fails: bool) -> Bed {
    let log = Log::default();
    let consumer = Arc::new(FakeConsumer::new(&log));
    consumer.produce(0, values);
    let mut connector: Props = props(&[("value.converter", "JsonConverter")]);
    connector.insert("value.converter.schemas.enable".into(), "false".into());
    connector.extend(props(config));
    let pipeline = fakes::pipeline(&connector, &log, dlq_fails);
    let metrics = pipeline.metrics().clone();
    let rewinds = Arc::new(Rewinds::default());
    let puts = Arc::new(Mutex::new(Vec::new()));
    let owned = (!script.no_partitions).then(|| Shared(consumer.clone()));
    let task = FakeTask {
        script,
        rewinds: rewinds.clone(),
        log: log.clone(),
        puts: puts.clone(),
    };
    let (stop, stop_rx) = watch::channel(false);
    let (target, mut target_rx) = watch::channel(TargetState::Running);
    let mut sink = SinkLoop::new(
        fakes::unit(FLUSH),
        FakeControl { log: log.clone() },
        Box::new(task),
        owned,
        pipeline,
        stop_rx.clone(),
        HashMap::from([(tp(0), 0)]),
        HashMap::new(),
        rewinds,
    );
    let done = tokio::spawn(async move {
        let mut stop_rx = stop_rx;
        sink.run(&mut target_rx, &mut stop_rx).await
    });
    Bed {
        log,
        metrics,
        consumer,
        puts,
        stop,
        _target: target,
        done,
    }
}

/// Let the loop run for `d` of (paused) time.
async fn run_for(d: Duration) {
    tokio::time::sleep(d).await;
}

#[tokio::test(start_paused = true)]
async fn offsets_are_committed_every_flush_interval_and_only_when_they_moved() {
    let bed = start(&["1", "2", "3"], &[], Script::default(), false);
    run_for(FLUSH - Duration::from_millis(500)).await;
    assert_eq!(bed.log.count("put"), 1, "{:?}", bed.log.events());
    assert_eq!(bed.log.count("commit"), 0, "not before the interval");
    run_for(Duration::from_secs(1)).await;
    assert_eq!(bed.log.count("commit"), 1);
    assert!(bed
        .log
        .events()
        .contains(&"commit {\"t-0\": 3}".to_string()));
    // Nothing new: nothing to commit at the next interval.
    run_for(FLUSH).await;
    assert_eq!(bed.log.count("commit"), 1, "{:?}", bed.log.events());
    bed.consumer.produce(0, &["4", "5"]);
    run_for(FLUSH).await;
    assert_eq!(bed.log.count("commit"), 2);
    let events = bed.log.events();
    assert_eq!(
        events.iter().rfind(|e| *e != "tick").map(String::as_str),
        Some("commit {\"t-0\": 5}")
    );
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_rewind_consumes_again_from_the_offset_the_task_asked_for() {
    let script = Script {
        rewind: Some((tp(0), 1)),
        ..Script::default()
    };
    let bed = start(&["1", "2", "3"], &[], script, false);
    run_for(FLUSH + Duration::from_millis(500)).await;
    let events = bed.log.events();
    let puts: Vec<&String> = events.iter().filter(|e| e.starts_with("put")).collect();
    assert_eq!(puts, ["put 0,1,2", "put 1,2"], "{events:?}");
    assert!(events.contains(&"seek t-0 1".to_string()), "{events:?}");
    // Committed once everything is put again, not past what was rewound before that.
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("commit"))
            .collect::<Vec<_>>(),
        ["commit {\"t-0\": 3}"]
    );
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn only_what_pre_commit_allows_is_committed() {
    let script = Script {
        commits_by_itself: true,
        ..Script::default()
    };
    let bed = start(&["1", "2"], &[], script, false);
    run_for(FLUSH * 3).await;
    assert_eq!(bed.log.count("put"), 1);
    assert_eq!(bed.log.count("commit"), 0, "{:?}", bed.log.events());
    assert_eq!(bed.metrics.sink_offset_commit_completion.get(), 0);
    assert_eq!(
        bed.metrics.sink_record_active.get(),
        2,
        "read, not committed"
    );
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_retriable_put_is_retried_with_a_doubling_backoff_then_succeeds() {
    let script = Script {
        failing_puts: 3,
        ..Script::default()
    };
    let bed = start(&["1"], &[("errors.retry.timeout", "60000")], script, false);
    run_for(Duration::from_secs(5)).await;
    let puts = bed.puts.lock().expect("puts").clone();
    assert_eq!(puts.len(), 4, "three failures, then the put that succeeds");
    let waits: Vec<u128> = puts.windows(2).map(|w| (w[1] - w[0]).as_millis()).collect();
    assert_eq!(waits, [300, 600, 1200]);
    let m = &bed.metrics;
    assert_eq!(m.retries.get(), 3, "each retry counted");
    assert_eq!((m.sink_record_read.get(), m.sink_record_send.get()), (1, 1));
    assert_eq!(m.sink_record_active.get(), 1, "read, not yet committed");
    run_for(FLUSH).await;
    assert_eq!(bed.log.count("commit"), 1, "committed once put");
    assert_eq!(
        m.sink_offset_commit_completion.get(),
        1,
        "the commit counted"
    );
    assert_eq!(m.sink_offset_commit_seq_no.get(), 1);
    assert_eq!(
        m.sink_record_active.get(),
        0,
        "nothing read since the commit"
    );
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn with_no_retry_timeout_the_quick_retries_end_in_a_failure_and_nothing_is_committed() {
    let script = Script {
        failing_puts: usize::MAX,
        ..Script::default()
    };
    let bed = start(&["1"], &[], script, false);
    let failed = bed.done.await.expect("the loop");
    let Err(Failure::Task(e)) = failed else {
        panic!("the task did not fail: {failed:?}");
    };
    assert!(e.message.contains("errors.retry.timeout"), "{e}");
    assert_eq!(
        bed.log.count("put"),
        6,
        "the first try and five quick retries"
    );
    assert_eq!(bed.log.count("commit"), 0);
}

#[tokio::test(start_paused = true)]
async fn records_sent_to_the_dlq_are_in_it_before_their_offsets_are_committed() {
    let config = [
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", "dlq"),
    ];
    let bed = start(&["not json", "2"], &config, Script::default(), false);
    run_for(FLUSH + Duration::from_millis(500)).await;
    let events = bed.log.events();
    let at = |e: &str| events.iter().position(|x| x == e);
    assert_eq!(
        events
            .iter()
            .filter(|e| e.starts_with("put"))
            .collect::<Vec<_>>(),
        ["put 1"],
        "the bad record is not put: {events:?}"
    );
    let (sent, flushed, committed) = (
        at("dlq send 0").expect("sent to the DLQ"),
        at("dlq flush").expect("the DLQ flushed"),
        at("commit {\"t-0\": 2}").expect("committed"),
    );
    assert!(sent < flushed && flushed < committed, "{events:?}");
    let m = &bed.metrics;
    assert_eq!((m.sink_record_read.get(), m.sink_record_send.get()), (2, 1));
    assert_eq!(
        (
            m.record_errors.get(),
            m.records_skipped.get(),
            m.dlq_requests.get()
        ),
        (1, 1, 1)
    );
    assert_eq!(m.errors_logged.get(), 0, "errors.log.enable is false");
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn offsets_do_not_move_past_a_record_the_dlq_did_not_take() {
    let config = [
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", "dlq"),
    ];
    let bed = start(&["not json", "2"], &config, Script::default(), true);
    let failed = bed.done.await.expect("the loop");
    assert!(matches!(failed, Err(Failure::Task(_))), "{failed:?}");
    assert_eq!(bed.log.count("commit"), 0, "{:?}", bed.log.events());
}

#[tokio::test(start_paused = true)]
async fn a_stop_while_retrying_ends_the_loop_without_waiting_for_the_next_try() {
    let script = Script {
        failing_puts: usize::MAX,
        ..Script::default()
    };
    // Retried forever, with waits up to a minute.
    let bed = start(&["1"], &[("errors.retry.timeout", "-1")], script, false);
    run_for(Duration::from_secs(40)).await;
    let tries = bed.log.count("put");
    assert!(tries >= 5, "{tries}");
    let stopped_at = Instant::now();
    bed.stop.send_replace(true);
    let done = tokio::time::timeout(Duration::from_secs(1), bed.done)
        .await
        .expect("the loop ends when stopped")
        .expect("the loop");
    assert!(matches!(done, Err(Failure::Stopped)), "{done:?}");
    assert_eq!(Instant::now(), stopped_at, "no wait after the stop");
    assert_eq!(bed.log.count("put"), tries, "no try after the stop");
}

#[tokio::test(start_paused = true)]
async fn the_topics_consumed_are_recorded_at_the_next_tick_and_again_only_after_more_records() {
    let bed = start(&["1", "2"], &[], Script::default(), false);
    run_for(Duration::from_millis(1500)).await;
    assert_eq!(bed.log.count("topics t"), 1, "{:?}", bed.log.events());
    // Nothing consumed since: nothing to record.
    run_for(Duration::from_secs(3)).await;
    assert_eq!(bed.log.count("topics t"), 1, "{:?}", bed.log.events());
    // Consumed again: recorded again (the control plane keeps only what it lacks).
    bed.consumer.produce(0, &["3"]);
    run_for(Duration::from_millis(1500)).await;
    assert_eq!(bed.log.count("topics t"), 2, "{:?}", bed.log.events());
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_task_with_partitions_ticks_every_second_and_one_without_never_wakes_for_it() {
    let busy = start(&["1"], &[], Script::default(), false);
    let idle = start(
        &[],
        &[],
        Script {
            no_partitions: true,
            ..Script::default()
        },
        false,
    );
    run_for(Duration::from_millis(5500)).await;
    // At once, then at each second.
    assert_eq!(busy.log.count("tick"), 6, "{:?}", busy.log.events());
    assert_eq!(idle.log.count("tick"), 0, "{:?}", idle.log.events());
    for bed in [busy, idle] {
        bed.stop.send_replace(true);
        assert!(bed.done.await.expect("the loop").is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn a_task_without_time_based_work_is_never_ticked_and_still_records_its_topics() {
    let bed = start(
        &["1", "2"],
        &[],
        Script {
            no_ticks: true,
            ..Script::default()
        },
        false,
    );
    run_for(Duration::from_millis(5500)).await;
    assert_eq!(bed.log.count("tick"), 0, "{:?}", bed.log.events());
    assert_eq!(bed.log.count("topics t"), 1, "{:?}", bed.log.events());
    bed.consumer.produce(0, &["3"]);
    run_for(Duration::from_millis(1500)).await;
    assert_eq!(bed.log.count("topics t"), 2, "{:?}", bed.log.events());
    assert_eq!(bed.log.count("tick"), 0, "{:?}", bed.log.events());
    bed.stop.send_replace(true);
    assert!(bed.done.await.expect("the loop").is_ok());
}
