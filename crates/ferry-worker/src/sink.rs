//! The sink task loop: the task's consumer `assign()`s exactly the topic-partitions the
//! scheduler gave the task, from the offsets in Raft (no consumer-group rebalancing); records
//! are converted and `put`; every `offset.flush.interval.ms` the offsets `pre_commit` returns are
//! committed with the task's generation, so a stale run is fenced.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connect::plugin::TaskFactory;
use ferry_connect::task::{Rewinds, SinkTaskContext};
use ferry_connect::{ConnectError, SinkRecord, SinkTask, TopicPartition};
use ferry_meta::state::{Command, SinkOffset, TargetState};
use rdkafka::error::KafkaResult;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::Offset;
use tokio::sync::watch;
use tracing::{debug, info, instrument, warn};

use crate::consumers::TaskConsumer;
use crate::dlq::Original;
use crate::librdkafka::RawMessage;
use crate::pipeline::Pipeline;
use crate::report::Held;
use crate::retry::Retries;
use crate::unit::{
    lifecycle, started, stopped, Control, Failure, LoopUnit, RaftCommitter, TopicsUsed, UnitCtx,
};

/// Most records handed to one `put` (Kafka Connect's `max.poll.records` default).
const MAX_BATCH: usize = 500;

/// Records taken from the consumer for one `put`, the last offset consumed for them per run of
/// a partition, and (when failures are tolerated) their bytes, for the task's reports.
#[derive(Default)]
struct Batch {
    records: Vec<SinkRecord>,
    consumed: Vec<(TopicPartition, i64)>,
    /// Messages consumed for it (records, dropped and skipped ones alike).
    messages: usize,
    held: Held,
}

impl Batch {
    /// Note a consumed message: a partition's run of messages is one entry, its last offset.
    fn note(&mut self, topic: &str, partition: i32, offset: i64) {
        self.messages += 1;
        match self.consumed.last_mut() {
            Some((tp, last)) if tp.partition == partition && tp.topic == topic => *last = offset,
            _ => self
                .consumed
                .push((TopicPartition::new(topic, partition), offset)),
        }
    }
}

/// The consumer of a sink task, as its loop uses it: Kafka's (a `StreamConsumer` assigned the
/// task's partitions), or a fake in the loop's tests.
pub trait SinkConsumer: Send + Sync {
    type Message<'a>: Message + Send
    where
        Self: 'a;
    /// A message [`SinkConsumer::ready`] returns.
    type Ready<'a>: Message + Send
    where
        Self: 'a;
    /// The next message, waiting for one.
    fn recv(&self) -> impl Future<Output = KafkaResult<Self::Message<'_>>> + Send;
    /// The messages ready now, up to `max` (errors the consumer reports among them), in order,
    /// without waiting.
    fn ready(&self, max: usize) -> Vec<KafkaResult<Self::Ready<'_>>>;
    /// Consume a partition again from `offset`.
    fn seek(&self, tp: &TopicPartition, offset: i64) -> KafkaResult<()>;
    /// Commit offsets to the consumer group (for monitoring; Raft has them), without waiting.
    fn commit_group(&self, offsets: &HashMap<TopicPartition, i64>) -> KafkaResult<()>;
    /// The partition's high watermark as last fetched, if known (no request to a broker).
    fn high_watermark(&self, _tp: &TopicPartition) -> Option<i64> {
        None
    }
}

impl SinkConsumer for TaskConsumer {
    type Message<'a> = BorrowedMessage<'a>;
    type Ready<'a> = RawMessage<'a>;

    fn recv(&self) -> impl Future<Output = KafkaResult<BorrowedMessage<'_>>> + Send {
        TaskConsumer::recv(self)
    }

    fn ready(&self, max: usize) -> Vec<KafkaResult<RawMessage<'_>>> {
        TaskConsumer::ready(self, max)
    }

    fn seek(&self, tp: &TopicPartition, offset: i64) -> KafkaResult<()> {
        TaskConsumer::seek(self, tp, offset)
    }

    fn commit_group(&self, offsets: &HashMap<TopicPartition, i64>) -> KafkaResult<()> {
        TaskConsumer::commit_group(self, offsets)
    }

    fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        TaskConsumer::high_watermark(self, tp)
    }
}

pub struct SinkLoop<C: SinkConsumer, P: Control> {
    unit: LoopUnit,
    control: P,
    task: Box<dyn SinkTask>,
    /// `None` while the task owns no partition: an idle task opens no Kafka client.
    consumer: Option<C>,
    pipeline: Pipeline,
    stop: watch::Receiver<bool>,
    /// Next offset to consume, per partition, as far as `put` has gone.
    next: HashMap<TopicPartition, i64>,
    committed: HashMap<TopicPartition, i64>,
    /// Where the task started, per partition whose position it knew then.
    started: HashMap<TopicPartition, i64>,
    /// Records read and not yet committed (Kafka Connect's sink-record-active-count).
    active: i64,
    /// Where the task asked to consume again.
    rewinds: Arc<Rewinds>,
    /// The topics consumed since they were last recorded.
    used: TopicsUsed,
}

fn kafka_error(what: &str, e: rdkafka::error::KafkaError) -> ConnectError {
    ConnectError::retriable(format!("{what}: {e}"))
}

/// Whether an error the consumer reports is one it recovers from by itself (a broker gone or
/// paused, a coordinator moving): logged, and consuming goes on — as a Java consumer retries
/// them inside `poll`. What it cannot recover from fails the task: no offset to reset to
/// (`auto.offset.reset=none`), a refused authorization, a fatal error.
fn recovers_by_itself(e: &rdkafka::error::KafkaError) -> bool {
    use rdkafka::error::KafkaError;
    use rdkafka::types::RDKafkaErrorCode as Code;
    match e {
        KafkaError::MessageConsumption(code) => !matches!(
            code,
            Code::AutoOffsetReset
                | Code::TopicAuthorizationFailed
                | Code::GroupAuthorizationFailed
                | Code::ClusterAuthorizationFailed
                | Code::Fatal
        ),
        _ => false,
    }
}

impl SinkLoop<TaskConsumer, UnitCtx> {
    async fn start(ctx: UnitCtx, stop: watch::Receiver<bool>) -> Result<Self, Failure> {
        let TaskFactory::Sink(factory) = ctx.plugin.tasks else {
            return Err(ConnectError::fatal(format!(
                "{} is not a sink connector",
                ctx.plugin.class
            ))
            .into());
        };
        let kafka = ctx.kafka()?;
        let pipeline = Pipeline::of_unit(&ctx, &kafka, !ctx.partitions.is_empty()).await?;
        let rewinds = Arc::new(Rewinds::default());
        let context = SinkTaskContext {
            connector: ctx.name.clone(),
            task: ctx.task.unwrap_or_default(),
            generation: ctx.generation,
            reporter: Some(pipeline.reporter.clone()),
            committer: Arc::new(RaftCommitter::new(ctx.clone())),
            rewinds: rewinds.clone(),
            clock: ctx.settings.clock,
            commit_times: Arc::new(ctx.metrics.commit_times.clone()),
        };
        let mut task = factory(&ctx.task_config, context)?;
        task.start().await?;
        let partitions: Vec<TopicPartition> = ctx
            .partitions
            .iter()
            .map(|tp| TopicPartition::new(tp.topic.clone(), tp.partition))
            .collect();
        task.open(&partitions).await?;

        // The offsets a starting task reads must be the latest committed ones; a task that owns
        // no partition reads none (and thousands of idle tasks add no linearizable reads).
        if !partitions.is_empty() {
            ctx.catch_up().await?;
        }
        let committed = ctx.sink_offsets();
        // A sink that keeps its offsets elsewhere (the JDBC sink's table) says where in open.
        let mut from = committed.clone();
        from.extend(rewinds.take());
        let consumer = if partitions.is_empty() {
            None
        } else {
            let (consumer, group) = consumer(&ctx, &kafka, &partitions, &from).await?;
            // Where the task starts from its group's offsets (a connector taken over from
            // Kafka Connect, or one whose offsets were never in Raft), those are its position:
            // the first commit records them, so that the offsets API shows them and the next
            // start does not depend on the group.
            from.extend(group);
            Some(consumer)
        };
        info!(unit = %ctx.label(), partitions = partitions.len(), generation = ctx.generation, "sink task assigned");
        ctx.metrics
            .sink_partition_count
            .set(i64::try_from(partitions.len()).unwrap_or(i64::MAX));
        let committed: HashMap<TopicPartition, i64> = partitions
            .iter()
            .filter_map(|tp| committed.get(tp).map(|o| (tp.clone(), *o)))
            .collect();
        let from: HashMap<TopicPartition, i64> = partitions
            .iter()
            .filter_map(|tp| from.get(tp).map(|o| (tp.clone(), *o)))
            .collect();
        Ok(SinkLoop::new(
            LoopUnit::of(&ctx),
            ctx,
            task,
            consumer,
            pipeline,
            stop,
            from,
            committed,
            rewinds,
        ))
    }
}

impl<C: SinkConsumer, P: Control> SinkLoop<C, P> {
    /// A loop consuming from `from` (next offset per partition), with `committed` the offsets
    /// in Raft; `rewinds` is the task's (in its context).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        unit: LoopUnit,
        control: P,
        task: Box<dyn SinkTask>,
        consumer: Option<C>,
        pipeline: Pipeline,
        stop: watch::Receiver<bool>,
        from: HashMap<TopicPartition, i64>,
        committed: HashMap<TopicPartition, i64>,
        rewinds: Arc<Rewinds>,
    ) -> Self {
        SinkLoop {
            unit,
            control,
            task,
            consumer,
            pipeline,
            stop,
            started: from.clone(),
            active: 0,
            next: from,
            committed,
            rewinds,
            used: TopicsUsed::default(),
        }
    }

    /// Convert and transform a consumed message: the record for `put`, unless a transform
    /// dropped it.
    fn take(&self, msg: &impl Message, batch: &mut Batch) -> Result<(), Failure> {
        let consumed = || (msg.topic().to_string(), msg.partition(), msg.offset());
        self.pipeline.metrics().sink_record_read.inc();
        batch.note(msg.topic(), msg.partition(), msg.offset());
        let reporter = &self.pipeline.reporter;
        match self.pipeline.sink_record(msg) {
            Ok(Some(record)) => {
                if reporter.tolerates() {
                    let seen = (record.topic.clone(), record.partition, record.offset);
                    batch.held.hold(seen, consumed(), Original::of(msg));
                }
                batch.records.push(record);
            }
            Ok(None) => {}
            Err((stage, class, error)) => {
                let ctx = reporter.context(consumed(), stage, class);
                reporter.tolerate(&ctx, &Original::of(msg), error)?;
            }
        }
        Ok(())
    }

    /// Hand a batch to the task; the offsets of every consumed message move on once `put`
    /// returns, dropped ones included, under the topic they were consumed from (a transform
    /// may have renamed it) — but for a partition the task rewound, which consumes again.
    async fn put(&mut self, batch: Batch) -> Result<(), Failure> {
        let mut rewound = HashSet::new();
        let windows = &self.pipeline.metrics().windows;
        windows.sink_read.record(batch.messages as f64);
        windows.batch_size.record(batch.messages as f64);
        if !batch.records.is_empty() {
            // The lease may have lapsed while the batch was taken.
            self.control.resumed().await?;
            self.pipeline.reporter.begin(batch.held);
            self.pipeline
                .metrics()
                .sink_record_send
                .inc_by(batch.records.len() as u64);
            let windows = &self.pipeline.metrics().windows;
            windows.sink_send.record(batch.records.len() as f64);
            let started = std::time::Instant::now();
            let put = self.put_records(batch.records, &mut rewound).await;
            self.pipeline
                .metrics()
                .windows
                .put_time
                .record(started.elapsed().as_secs_f64() * 1000.0);
            // A record reported under errors.tolerance=none fails the task even if the task
            // carried on.
            if let Some(fatal) = self.pipeline.reporter.end() {
                return Err(fatal.into());
            }
            put?;
        }
        for (tp, offset) in batch.consumed {
            if !rewound.contains(&tp) {
                self.used.saw(&tp.topic);
                self.next.insert(tp, offset + 1);
            }
        }
        // Between commits, the active records grow by what is read (counted exactly again at
        // each commit: a rewind's records are not read twice there).
        self.active += batch.messages as i64;
        self.note_active();
        Ok(())
    }

    /// Kafka Connect's sink-record-active-count as it now is.
    fn note_active(&self) {
        let metrics = self.pipeline.metrics();
        metrics.sink_record_active.set(self.active);
        metrics.windows.sink_active.record(self.active as f64);
    }

    /// At a commit: the records read and not yet committed, counted over the partitions with
    /// a commit or a known start position; and, if measured, each partition's lag behind the
    /// high watermark its consumer last fetched.
    fn note_committed(&mut self) {
        self.active = self
            .next
            .iter()
            .filter_map(|(tp, next)| {
                let base = self.committed.get(tp).or_else(|| self.started.get(tp))?;
                Some((next - base).max(0))
            })
            .sum();
        self.note_active();
        let metrics = self.pipeline.metrics();
        if let Some(consumer) = self
            .consumer
            .as_ref()
            .filter(|_| metrics.windows.measures_lag())
        {
            metrics
                .windows
                .lagging(self.next.iter().filter_map(|(tp, next)| {
                    let high = consumer.high_watermark(tp)?;
                    Some((tp.topic.clone(), tp.partition, (high - next).max(0)))
                }));
        }
    }

    /// `put`, retrying a retriable failure (see `retry`); then the failure fails the task. The
    /// records of a partition the task rewound are left out of the retry: the consumer
    /// delivers them again.
    async fn put_records(
        &mut self,
        mut records: Vec<SinkRecord>,
        rewound: &mut HashSet<TopicPartition>,
    ) -> Result<(), Failure> {
        let errors = self.pipeline.errors.clone();
        let mut retry = Retries::new(&errors, "put", self.pipeline.metrics().retries.clone());
        loop {
            let put = self.task.put(&records).await;
            let now = self.rewind()?;
            if !now.is_empty() {
                records.retain(|r| !now.contains(&r.topic_partition()));
                rewound.extend(now);
            }
            match put {
                Ok(()) => return Ok(()),
                Err(e) => retry.after(e, &mut self.stop, &self.unit.label).await?,
            }
            if records.is_empty() {
                return Ok(());
            }
        }
    }

    /// The task's time-based work when it `ticks`, retried as `put` is; the topics consumed
    /// recorded; the seeks the task asked for done.
    async fn tick(&mut self, ticks: bool) -> Result<(), Failure> {
        self.control.record_topics(self.used.take()).await;
        if !ticks {
            self.rewind()?;
            return Ok(());
        }
        let errors = self.pipeline.errors.clone();
        let mut retry = Retries::new(&errors, "tick", self.pipeline.metrics().retries.clone());
        loop {
            let tick = self.task.tick().await;
            self.rewind()?;
            match tick {
                Ok(()) => return Ok(()),
                Err(e) => retry.after(e, &mut self.stop, &self.unit.label).await?,
            }
        }
    }

    /// Seek the partitions the task asked to consume again; they are returned.
    fn rewind(&mut self) -> Result<HashSet<TopicPartition>, Failure> {
        let asked = self.rewinds.take();
        let Some(consumer) = &self.consumer else {
            // No partition, nothing to consume again.
            return Ok(HashSet::new());
        };
        for (tp, offset) in &asked {
            consumer
                .seek(tp, *offset)
                .map_err(|e| kafka_error(&format!("seek {tp} to offset {offset}"), e))?;
            self.next.insert(tp.clone(), *offset);
            info!(unit = %self.unit.label, partition = %tp, offset, "consuming again from the task's last commit");
        }
        Ok(asked.into_keys().collect())
    }

    /// Commit what `pre_commit` allows, with this task's generation.
    async fn commit(&mut self) -> Result<(), Failure> {
        if self.next == self.committed {
            return Ok(());
        }
        // The records skipped since the last commit are in the DLQ before their offsets move.
        self.pipeline.reporter.flush().await?;
        let errors = self.pipeline.errors.clone();
        let mut retry = Retries::new(&errors, "flush", self.pipeline.metrics().retries.clone());
        let allowed = loop {
            match self.task.pre_commit(&self.next).await {
                Ok(allowed) => break allowed,
                Err(e) => retry.after(e, &mut self.stop, &self.unit.label).await?,
            }
        };
        let offsets: Vec<SinkOffset> = allowed
            .iter()
            .filter(|(tp, o)| self.committed.get(*tp) != Some(*o))
            .map(|(tp, o)| SinkOffset {
                topic: tp.topic.clone(),
                partition: tp.partition,
                offset: Some(*o),
            })
            .collect();
        if offsets.is_empty() {
            return Ok(());
        }
        self.pipeline.metrics().sink_offset_commit_seq_no.inc();
        let started = std::time::Instant::now();
        let committed = self
            .control
            .commit(Command::CommitSinkOffsets {
                name: self.unit.name.clone(),
                task: self.unit.task,
                generation: self.unit.generation,
                offsets,
            })
            .await;
        let windows = &self.pipeline.metrics().windows;
        windows.committed(started, committed.is_ok());
        committed?;
        debug!(unit = %self.unit.label, partitions = allowed.len(), "offsets committed");
        self.pipeline.metrics().sink_offset_commit_completion.inc();
        windows.commit_completion.record(1.0);
        if let Some(consumer) = self.consumer.as_ref().filter(|_| self.unit.commit_group) {
            if let Err(e) = consumer.commit_group(&allowed) {
                debug!(error = %e, "consumer-group commit failed (Raft has the offsets)");
            }
        }
        self.committed.extend(allowed);
        self.note_committed();
        Ok(())
    }

    async fn run(
        &mut self,
        control: &mut watch::Receiver<TargetState>,
        stop: &mut watch::Receiver<bool>,
    ) -> Result<(), Failure> {
        let mut flush = tokio::time::interval(self.unit.flush_interval);
        flush.tick().await;
        let mut clock = tokio::time::interval(Duration::from_secs(1));
        clock.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut paused = false;
        let mut reported: Option<TargetState> = None;
        let ticks = self.task.ticks();
        loop {
            if *stop.borrow() {
                return Ok(());
            }
            // Frozen while the lease is lapsed: nothing consumed, written or committed, and
            // everything kept (consumer position, open files) for when it is held again.
            self.control.resumed().await?;
            let target = *control.borrow_and_update();
            if reported != Some(target) {
                debug!(unit = %self.unit.label, target = target.as_str(), "target state");
                // Paused: the loop stops taking records (librdkafka's own pause() makes the
                // consumer's close hang later, so it is not used).
                match target {
                    TargetState::Paused => paused = true,
                    TargetState::Running => paused = false,
                    TargetState::Stopped => return Ok(()),
                }
                self.control.report_target(target).await?;
                reported = Some(target);
            }
            let woke = tokio::select! {
                _ = stopped(stop) => Woke::Stop,
                changed = control.changed() => Woke::Control(changed.is_ok()),
                // A task that owns no partition has nothing to commit, rotate or record, and
                // one without time-based work wakes on the clock only to record the topics it
                // consumed or to seek where it asked: thousands of idle tasks must not wake.
                _ = flush.tick(), if self.consumer.is_some() => Woke::Flush,
                _ = clock.tick(), if self.consumer.is_some() && (ticks || self.used.pending() || self.rewinds.pending()) => Woke::Tick,
                first = next_message(self.consumer.as_ref()), if !paused => Woke::Records(self.batch(first)?),
            };
            match woke {
                Woke::Stop | Woke::Control(false) => return Ok(()),
                Woke::Control(true) | Woke::Records(None) => {}
                Woke::Flush => self.commit().await?,
                Woke::Tick => self.tick(ticks).await?,
                Woke::Records(Some(batch)) => self.put(*batch).await?,
            }
        }
    }

    /// The batch a first message starts, with what else the consumer has ready (up to
    /// `MAX_BATCH`); `None` when the consumer reported an error it recovers from by itself.
    fn batch<M: Message>(&self, first: KafkaResult<M>) -> Result<Option<Box<Batch>>, Failure> {
        let first = match first {
            Ok(first) => first,
            Err(e) if recovers_by_itself(&e) => {
                warn!(unit = %self.unit.label, error = %e, "the consumer reports a transient error; it retries by itself");
                return Ok(None);
            }
            Err(e) => return Err(kafka_error("consume", e).into()),
        };
        let mut batch = Batch::default();
        self.take(&first, &mut batch)?;
        drop(first);
        let Some(consumer) = &self.consumer else {
            return Ok(Some(Box::new(batch)));
        };
        for next in consumer.ready(MAX_BATCH - 1) {
            match next {
                Ok(next) => self.take(&next, &mut batch)?,
                Err(e) if recovers_by_itself(&e) => {
                    warn!(unit = %self.unit.label, error = %e, "the consumer reports a transient error; it retries by itself");
                }
                Err(e) => return Err(kafka_error("consume", e).into()),
            }
        }
        Ok(Some(Box::new(batch)))
    }
}

/// What woke a sink loop.
enum Woke {
    Stop,
    /// The target state changed (`false`: its sender is gone).
    Control(bool),
    Flush,
    Tick,
    Records(Option<Box<Batch>>),
}

/// How long a starting task keeps asking for its group's committed offsets (a broker may be
/// away) before it fails.
const GROUP_OFFSETS_TIMEOUT: Duration = Duration::from_secs(60);

/// The task's consumer (its partitions on the worker's shared consumer of its config),
/// assigned its partitions from `from` (where none, from its group's committed offset or as
/// `auto.offset.reset` says), and the group's offsets it started from.
async fn consumer(
    ctx: &UnitCtx,
    kafka: &crate::KafkaSettings,
    partitions: &[TopicPartition],
    from: &std::collections::BTreeMap<TopicPartition, i64>,
) -> Result<(TaskConsumer, BTreeMap<TopicPartition, i64>), Failure> {
    // The group (`connect-<name>`) only receives commits for monitoring: assignment comes
    // from Raft, never from the group.
    let config = crate::clients::shared_consumer(kafka, ctx)?;
    let unknown: Vec<TopicPartition> = partitions
        .iter()
        .filter(|tp| !from.contains_key(*tp))
        .cloned()
        .collect();
    let mut consumer = ctx.consumers.task(&config, partitions).await?;
    let group = if unknown.is_empty() {
        BTreeMap::new()
    } else {
        group_offsets(ctx, &consumer, &unknown).await?
    };
    let mut assignment = Vec::with_capacity(partitions.len());
    for tp in partitions {
        let offset = match from.get(tp).or(group.get(tp)) {
            Some(o) => Offset::Offset(*o),
            None => match config
                .properties
                .get("auto.offset.reset")
                .map(String::as_str)
            {
                Some("latest" | "largest" | "end") => Offset::End,
                Some("none" | "error") => {
                    return Err(ConnectError::fatal(format!(
                        "{}: {}-{} has no committed offset, and auto.offset.reset is none",
                        ctx.label(),
                        tp.topic,
                        tp.partition
                    ))
                    .into())
                }
                _ => Offset::Beginning,
            },
        };
        assignment.push((tp.clone(), offset));
    }
    consumer
        .assign(&assignment)
        .await
        .map_err(|e| kafka_error("assign", e))?;
    Ok((consumer, group))
}

/// The task's group's committed offsets of these partitions (those Kafka Connect left, when
/// Ferry takes a connector over), asked again while a broker is away; partitions without one
/// are absent.
async fn group_offsets(
    ctx: &UnitCtx,
    consumer: &TaskConsumer,
    partitions: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, i64>, Failure> {
    let started = Instant::now();
    loop {
        match consumer.group_offsets(partitions).await {
            Ok(answer) => return Ok(answer),
            Err(e) if started.elapsed() < GROUP_OFFSETS_TIMEOUT => {
                warn!(unit = %ctx.label(), error = %e, "cannot read the group's committed offsets yet; asking again");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                return Err(ConnectError::retriable(format!(
                    "the committed offsets of group {}: {e}",
                    consumer.group()
                ))
                .into())
            }
        }
    }
}

/// The next message of the consumer; without one (no partition), never.
async fn next_message<C: SinkConsumer>(consumer: Option<&C>) -> KafkaResult<C::Message<'_>> {
    match consumer {
        Some(consumer) => consumer.recv().await,
        None => std::future::pending().await,
    }
}

/// One session of a sink task: from start to a stop or a STOPPED target (`Ok`), fencing or a
/// failure. The task is stopped in every case.
async fn session(
    ctx: UnitCtx,
    mut control: watch::Receiver<TargetState>,
    mut stop: watch::Receiver<bool>,
) -> Result<(), Failure> {
    let mut waiting = stop.clone();
    let mut sink = started(&ctx, &mut waiting, || {
        SinkLoop::start(ctx.clone(), stop.clone())
    })
    .await?;
    let outcome = match sink.run(&mut control, &mut stop).await {
        // A final commit: it is fenced if the task moved meanwhile.
        Ok(()) => sink.commit().await,
        other => other,
    };
    let closing: Vec<TopicPartition> = sink.next.keys().cloned().collect();
    let closed = sink.task.close(&closing).await;
    let stopped = sink.task.stop().await;
    // Its partitions go back to the worker's shared consumer (closed when no task is left).
    drop(sink.consumer);
    outcome?;
    closed?;
    stopped?;
    Ok(())
}

/// Run a sink task until it is stopped, fenced or fails.
#[instrument(skip_all, fields(unit = %ctx.label(), connector = %ctx.name, task = ctx.task, generation = ctx.generation))]
pub async fn run(ctx: UnitCtx, control: watch::Receiver<TargetState>, stop: watch::Receiver<bool>) {
    lifecycle(ctx, control, stop, session).await;
    debug!("sink task finished");
}

#[cfg(test)]
mod tests;
