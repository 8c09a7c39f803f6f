//! The source task loop: records from `poll` are transformed, converted and produced; every
//! `offset.flush.interval.ms`, and whenever a poll returns nothing after records were sent,
//! the loop waits until everything sent so far was delivered, then commits the source offsets
//! (with the task's generation) and calls the task's `commit`. A
//! source therefore never skips a record; after a fail-over it may repeat the records produced
//! since its last commit. A record that fails a transform, a converter or its delivery goes
//! through error handling (`report`): with `errors.tolerance=all` it is logged and
//! dead-lettered with its source partition and offset, and its offset moves on.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_connect::plugin::TaskFactory;
use ferry_connect::record::{source_map_json, SourceMap};
use ferry_connect::task::SourceTaskContext;
use ferry_connect::topic_creation::TopicCreation;
use ferry_connect::{ConnectError, SourceRecord, SourceTask, Stage};
use ferry_meta::state::{Command, SourceOffset, TargetState};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header as KafkaHeader, Message, OwnedHeaders, OwnedMessage};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use crate::kafka::OffRuntime;
use rdkafka::ClientContext;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, instrument};

use crate::admin::SourceTopics;
use crate::dlq::Original;
use crate::pipeline::Pipeline;
use crate::retry::Retries;
use crate::unit::{
    lifecycle, started, stopped, CommittedSourceOffsets, Control, Failure, LoopUnit, TopicsUsed,
    UnitCtx,
};

/// How often the topics written to are recorded (as often as a sink task's).
const TOPICS_EVERY: Duration = Duration::from_secs(1);

/// The class named for a record that could not be delivered.
const PRODUCER_CLASS: &str = "org.apache.kafka.clients.producer.KafkaProducer";

/// A source record's partition (its JSON text, shared by the records of the partition) and
/// offset (the task's own map, moved, not copied: its JSON text is written only for a commit
/// or an error, not per record).
type SourcePosition = (Arc<str>, Arc<SourceMap>);

/// In-flight records before the loop waits for deliveries.
const MAX_IN_FLIGHT: usize = 50_000;

/// A record the producer could not deliver: the broker refused it, or it timed out; the
/// record as the producer gives it back.
pub struct Undelivered(pub KafkaError, pub Box<OwnedMessage>);

/// The producer of a source task, as its loop uses it: Kafka's ([`KafkaProducer`]), or a fake
/// in the loop's tests.
pub trait SourceProducer: Send + Sync {
    /// Hand a record to the producer, to `topic` (and `partition`, if the source chose one), as
    /// the `seq`-th record since the loop last waited for deliveries; `QueueFull` when its queue
    /// is full.
    fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        out: &Original,
        seq: usize,
    ) -> Result<(), KafkaError>;

    /// Wait until every record sent so far is delivered or refused: the refused ones, by the
    /// `seq` they were sent with.
    fn delivered(&self) -> impl Future<Output = Vec<(usize, Undelivered)>> + Send;
}

/// Kafka's producer of a source task. Deliveries are counted, not awaited one by one: the
/// loop only ever waits for all it has sent (to commit, or to make room), so a delivery report
/// costs a count, and only a refused record is kept (a future per record, with its channel,
/// was a quarter of W3's CPU in ferryd).
pub struct KafkaProducer(OffRuntime<ThreadedProducer<Deliveries>>);

/// The delivery reports of a producer, as its polling thread hands them over.
#[derive(Default)]
pub struct Deliveries {
    tally: Mutex<Tally>,
    changed: Notify,
}

#[derive(Default)]
struct Tally {
    sent: u64,
    reported: u64,
    refused: Vec<(usize, Undelivered)>,
}

impl Deliveries {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, seq: usize) {
        let mut tally = self.tally();
        tally.reported += 1;
        if let Err((e, message)) = result {
            let record = Box::new(message.detach());
            tally.refused.push((seq, Undelivered(e.clone(), record)));
        }
        // The loop waits only for every record sent to be reported: the last report wakes it,
        // the others cost a count.
        let all = tally.reported >= tally.sent;
        drop(tally);
        if all {
            self.changed.notify_waiters();
        }
    }
}

impl SourceProducer for KafkaProducer {
    fn send(
        &self,
        topic: &str,
        partition: Option<i32>,
        out: &Original,
        seq: usize,
    ) -> Result<(), KafkaError> {
        let mut sending: BaseRecord<'_, [u8], [u8], usize> = BaseRecord::with_opaque_to(topic, seq);
        if !out.headers.is_empty() {
            let mut headers = OwnedHeaders::new_with_capacity(out.headers.len());
            for (key, value) in &out.headers {
                headers = headers.insert(KafkaHeader {
                    key,
                    value: value.as_deref(),
                });
            }
            sending = sending.headers(headers);
        }
        if let Some(k) = out.key.as_deref() {
            sending = sending.key(k);
        }
        if let Some(v) = out.value.as_deref() {
            sending = sending.payload(v);
        }
        if let Some(p) = partition {
            sending = sending.partition(p);
        }
        if let Some(ts) = out.timestamp {
            sending = sending.timestamp(ts);
        }
        // Counted before it is handed over: its report may come before `send` returns.
        let deliveries = self.0.context();
        deliveries.tally().sent += 1;
        self.0.send(sending).map_err(|(e, _)| {
            deliveries.tally().sent -= 1;
            e
        })
    }

    async fn delivered(&self) -> Vec<(usize, Undelivered)> {
        let deliveries = self.0.context();
        loop {
            // Registered before the count is read: a report in between still wakes it.
            let changed = deliveries.changed.notified();
            {
                let mut tally = deliveries.tally();
                if tally.reported >= tally.sent {
                    return std::mem::take(&mut tally.refused);
                }
            }
            changed.await;
        }
    }
}

pub struct SourceLoop<Pr: SourceProducer, P: Control> {
    unit: LoopUnit,
    control: P,
    task: Box<dyn SourceTask>,
    producer: Pr,
    pipeline: Pipeline,
    stop: watch::Receiver<bool>,
    /// Creates the topics it writes to before their first record (KIP-158), if configured.
    topics: Option<SourceTopics>,
    /// The positions of the records sent since the loop last waited for deliveries, in the
    /// order sent (a record's index is the `seq` it was sent with).
    in_flight: Vec<SourcePosition>,
    /// Latest offset per source partition among the records sent.
    sent: BTreeMap<Arc<str>, Arc<SourceMap>>,
    /// Whether `sent` moved since the last commit.
    moved: bool,
    /// The offsets last committed, per source partition (JSON texts).
    committed: BTreeMap<Arc<str>, String>,
    /// The topics written to since they were last recorded.
    used: TopicsUsed,
    /// The source partition of the record before, and its JSON text: a task's records mostly
    /// come from the partition of the record before them.
    last_partition: Option<(Arc<SourceMap>, Arc<str>)>,
}

impl SourceLoop<KafkaProducer, UnitCtx> {
    async fn start(ctx: UnitCtx, stop: watch::Receiver<bool>) -> Result<Self, Failure> {
        let TaskFactory::Source(factory) = ctx.plugin.tasks else {
            return Err(ConnectError::fatal(format!(
                "{} is not a source connector",
                ctx.plugin.class
            ))
            .into());
        };
        let kafka = ctx.kafka()?;
        let pipeline = Pipeline::of_unit(&ctx, &kafka, true).await?;
        let config = crate::clients::for_unit(&kafka, crate::clients::Role::Producer, &ctx)?;
        let producer = KafkaProducer(OffRuntime::new(
            config
                .create_with_context(Deliveries::default())
                .map_err(|e| ConnectError::fatal(format!("cannot create a Kafka producer: {e}")))?,
        ));
        let topics = match TopicCreation::from_config(&ctx.connector_config) {
            Ok(None) => None,
            Ok(Some(rules)) => {
                let admin = crate::clients::for_unit(&kafka, crate::clients::Role::Admin, &ctx)?;
                let admin = crate::admin::admin_client(admin, "topic creation")?;
                Some(SourceTopics::new(rules, admin))
            }
            Err(problems) => {
                let text: Vec<String> = problems.iter().map(|(k, p)| format!("{k}: {p}")).collect();
                return Err(ConnectError::fatal(text.join("; ")).into());
            }
        };
        ctx.catch_up().await?;
        let context = SourceTaskContext {
            connector: ctx.name.clone(),
            task: ctx.task.unwrap_or_default(),
            offsets: Arc::new(CommittedSourceOffsets::load(&ctx, &kafka).await?),
        };
        let mut task = factory(&ctx.task_config, context)?;
        task.start().await?;
        info!(unit = %ctx.label(), generation = ctx.generation, "source task started");
        Ok(SourceLoop::new(
            LoopUnit::of(&ctx),
            ctx,
            task,
            producer,
            pipeline,
            stop,
            topics,
        ))
    }
}

impl<Pr: SourceProducer, P: Control> SourceLoop<Pr, P> {
    pub fn new(
        unit: LoopUnit,
        control: P,
        task: Box<dyn SourceTask>,
        producer: Pr,
        pipeline: Pipeline,
        stop: watch::Receiver<bool>,
        topics: Option<SourceTopics>,
    ) -> Self {
        SourceLoop {
            unit,
            control,
            task,
            producer,
            pipeline,
            stop,
            topics,
            in_flight: Vec::new(),
            sent: BTreeMap::new(),
            moved: false,
            committed: BTreeMap::new(),
            used: TopicsUsed::default(),
            last_partition: None,
        }
    }

    /// The JSON text of a record's source partition.
    fn partition_json(&mut self, partition: &Arc<SourceMap>) -> Arc<str> {
        match &self.last_partition {
            Some((last, text)) if Arc::ptr_eq(last, partition) || last == partition => text.clone(),
            _ => {
                let text: Arc<str> = source_map_json(partition).into();
                self.last_partition = Some((partition.clone(), text.clone()));
                text
            }
        }
    }

    async fn send_batch(&mut self) -> Result<usize, Failure> {
        let errors = self.pipeline.errors.clone();
        let mut retry = Retries::new(&errors, "poll", self.pipeline.metrics().retries.clone());
        let records = loop {
            let started = std::time::Instant::now();
            let polled = self.task.poll().await;
            self.pipeline
                .metrics()
                .windows
                .poll_time
                .record(started.elapsed().as_secs_f64() * 1000.0);
            match polled {
                Ok(records) => break records,
                Err(e) => retry.after(e, &mut self.stop, &self.unit.label).await?,
            }
        };
        let count = records.len();
        self.pipeline
            .metrics()
            .source_record_poll
            .inc_by(count as u64);
        let windows = &self.pipeline.metrics().windows;
        windows.source_poll.record(count as f64);
        windows.batch_size.record(count as f64);
        for mut record in records {
            let position = (
                self.partition_json(&record.source_partition),
                Arc::new(std::mem::take(&mut record.source_offset)),
            );
            match self.pipeline.source_record(&mut record) {
                Ok(Some(out)) => self.produce(&record, &out, &position).await?,
                // Filtered out: nothing to produce, but the source has moved past it.
                Ok(None) => {}
                Err((stage, class, error)) => {
                    let original = self.pipeline.as_it_was(&record);
                    let at = (record.topic.clone(), record.partition.unwrap_or(-1), -1);
                    self.failed(at, stage, class, &position, &original, error)?;
                }
            }
            self.sent.insert(position.0, position.1);
            self.moved = true;
            if self.in_flight.len() >= MAX_IN_FLIGHT {
                self.await_deliveries().await?;
            }
        }
        self.note_active();
        Ok(count)
    }

    /// Error handling for a record that failed at `at` (topic, partition or -1, offset -1).
    fn failed(
        &self,
        at: (String, i32, i64),
        stage: Stage,
        class: String,
        position: &SourcePosition,
        original: &Original,
        error: ConnectError,
    ) -> Result<(), Failure> {
        let mut ctx = self.pipeline.reporter.context(at, stage, class);
        ctx.source = Some((position.0.to_string(), source_map_json(&position.1)));
        Ok(self.pipeline.reporter.tolerate(&ctx, original, error)?)
    }

    /// Hand a record to the producer (waiting while its queue is full).
    async fn produce(
        &mut self,
        record: &SourceRecord,
        out: &Original,
        position: &SourcePosition,
    ) -> Result<(), Failure> {
        if let Some(topics) = &mut self.topics {
            topics.ensure(&record.topic).await?;
        }
        loop {
            let seq = self.in_flight.len();
            match self
                .producer
                .send(&record.topic, record.partition, out, seq)
            {
                Ok(()) => {
                    self.used.saw(&record.topic);
                    self.in_flight.push(position.clone());
                    return Ok(());
                }
                Err(KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull)) => {
                    self.await_deliveries().await?;
                }
                Err(e) => {
                    let error =
                        ConnectError::fatal(format!("cannot produce to {}: {e}", record.topic));
                    let at = (record.topic.clone(), record.partition.unwrap_or(-1), -1);
                    let class = PRODUCER_CLASS.to_string();
                    return self.failed(at, Stage::KafkaProduce, class, position, out, error);
                }
            }
        }
    }

    /// Wait until every record sent so far is delivered; one that is not goes through error
    /// handling, in the order sent.
    async fn await_deliveries(&mut self) -> Result<(), Failure> {
        if self.in_flight.is_empty() {
            return Ok(());
        }
        let mut refused = self.producer.delivered().await;
        refused.sort_by_key(|(seq, _)| *seq);
        let delivered = self.in_flight.len().saturating_sub(refused.len());
        self.pipeline
            .metrics()
            .source_record_write
            .inc_by(delivered as u64);
        self.pipeline
            .metrics()
            .windows
            .source_write
            .record(delivered as f64);
        // Taken out and put back, so that its room is kept for the next records (a fresh one
        // grew again, copying, up to `MAX_IN_FLIGHT` each time).
        let mut in_flight = std::mem::take(&mut self.in_flight);
        let reported = self.report_refused(&in_flight, refused);
        in_flight.clear();
        self.in_flight = in_flight;
        self.note_active();
        reported
    }

    /// Kafka Connect's source-record-active-count: the records produced and not yet
    /// acknowledged by Kafka.
    fn note_active(&self) {
        let active = self.in_flight.len();
        let metrics = self.pipeline.metrics();
        metrics
            .source_record_active
            .set(i64::try_from(active).unwrap_or(i64::MAX));
        metrics.windows.source_active.record(active as f64);
    }

    /// Error handling for the records the producer could not deliver, of those `in_flight`.
    fn report_refused(
        &self,
        in_flight: &[SourcePosition],
        refused: Vec<(usize, Undelivered)>,
    ) -> Result<(), Failure> {
        for (seq, Undelivered(e, message)) in refused {
            let at = (message.topic().to_string(), message.partition(), -1);
            let error = ConnectError::fatal(format!(
                "a record was not delivered to {}: {e}",
                message.topic()
            ));
            let position = in_flight.get(seq).cloned().unwrap_or_default();
            let original = Original::of(message.as_ref());
            let class = PRODUCER_CLASS.to_string();
            self.failed(at, Stage::KafkaProduce, class, &position, &original, error)?;
        }
        Ok(())
    }

    /// Commit the offsets of everything delivered, with this task's generation.
    async fn commit(&mut self) -> Result<(), Failure> {
        self.await_deliveries().await?;
        // The records that failed since the last commit are in the DLQ before their offsets
        // move.
        self.pipeline.reporter.flush().await?;
        self.moved = false;
        let offsets: Vec<(Arc<str>, String)> = self
            .sent
            .iter()
            .map(|(p, o)| (p.clone(), source_map_json(o)))
            .filter(|(p, o)| self.committed.get(p) != Some(o))
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let committed = self
            .control
            .commit(Command::CommitSourceOffsets {
                name: self.unit.name.clone(),
                task: self.unit.task,
                generation: self.unit.generation,
                offsets: offsets
                    .iter()
                    .map(|(p, o)| SourceOffset {
                        partition: p.to_string(),
                        offset: Some(o.clone()),
                    })
                    .collect(),
            })
            .await;
        self.pipeline
            .metrics()
            .windows
            .committed(started, committed.is_ok());
        committed?;
        self.committed.extend(offsets);
        self.task.commit().await?;
        debug!(unit = %self.unit.label, "source offsets committed");
        Ok(())
    }

    async fn run(
        &mut self,
        control: &mut watch::Receiver<TargetState>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), Failure> {
        let interval = self.unit.flush_interval;
        let mut last_commit = tokio::time::Instant::now();
        let mut last_topics = tokio::time::Instant::now();
        let mut reported: Option<TargetState> = None;
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            // Frozen while the lease is lapsed: nothing polled, sent or committed.
            self.control.resumed().await?;
            let target = *control.borrow_and_update();
            if reported != Some(target) {
                if target == TargetState::Stopped {
                    return Ok(());
                }
                self.control.report_target(target).await?;
                reported = Some(target);
            }
            if last_commit.elapsed() >= interval {
                self.commit().await?;
                last_commit = tokio::time::Instant::now();
            }
            if last_topics.elapsed() >= TOPICS_EVERY {
                self.control.record_topics(self.used.take()).await;
                last_topics = tokio::time::Instant::now();
            }
            if target == TargetState::Paused {
                tokio::select! {
                    _ = stopped(stop) => return Ok(()),
                    changed = control.changed() => if changed.is_err() { return Ok(()) },
                    _ = tokio::time::sleep(interval) => {}
                }
                continue;
            }
            // `poll` returns within about a second; stop and pause are seen between polls.
            // When the source has nothing more for now, what it sent is committed at once:
            // a task moved or killed after a burst of records does not send them again.
            if self.send_batch().await? == 0 && self.moved {
                self.commit().await?;
                last_commit = tokio::time::Instant::now();
            }
        }
    }
}

/// One session of a source task: from start to a stop or a STOPPED target (`Ok`), fencing or
/// a failure. The task is stopped in every case.
async fn session(
    ctx: UnitCtx,
    mut control: watch::Receiver<TargetState>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let mut waiting = stop.clone();
    let mut source = started(&ctx, &mut waiting, || {
        SourceLoop::start(ctx.clone(), stop.clone())
    })
    .await?;
    let outcome = match source.run(&mut control, &mut stop).await {
        Ok(()) => source.commit().await,
        other => other,
    };
    let stopped = source.task.stop().await;
    outcome?;
    stopped?;
    Ok(())
}

/// Run a source task until it is stopped, fenced or fails.
#[instrument(skip_all, fields(unit = %ctx.label(), connector = %ctx.name, task = ctx.task, generation = ctx.generation))]
pub async fn run(ctx: UnitCtx, control: watch::Receiver<TargetState>, stop: watch::Receiver<bool>) {
    lifecycle(ctx, control, stop, session).await;
    debug!("source task finished");
}

#[cfg(test)]
mod tests;
