//! What every running unit (connector instance or task) shares: its identity and generation,
//! status reports and offset commits to the control plane (fenced by generation), and the
//! control-plane implementations of the connector contracts (`SinkCommitter`, `OffsetReader`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_connect::record::{source_map_from_json, source_map_json, SourceMap};
use ferry_connect::task::{
    CommitOutcome, OffsetReader, Props, SinkCommit, SinkCommitter, WallClock,
};
use ferry_connect::{ConnectError, PluginDesc, TopicPartition};
use ferry_meta::state::{Command, Outcome, RunState, TargetState, TopicPartitionRef};
use ferry_meta::{MetaNode, Rejection, Request};
use tracing::{debug, info, warn};

use crate::kafka::KafkaSettings;

/// How often a frozen unit looks at its lease again (the lease can come back in the same
/// epoch without the runtime noticing that it lapsed).
const FROZEN_CHECK: Duration = Duration::from_millis(50);

/// Runtime settings shared by every unit of a worker.
#[derive(Clone, Debug)]
pub struct RuntimeSettings {
    /// The brokers; `None` when `cluster.toml` has no `[kafka]` (no task can run).
    pub kafka: Option<KafkaSettings>,
    /// Kafka Connect's `offset.flush.interval.ms`.
    pub offset_flush_interval: Duration,
    /// Also commit sink offsets to the `connect-<name>` consumer group.
    pub commit_consumer_group: bool,
    /// The worker's converters and their settings, by Kafka Connect's names
    /// (`value.converter`, `value.converter.schemas.enable`): what a connector that names none
    /// uses.
    pub converters: BTreeMap<String, String>,
    /// Kafka Connect's offsets topic (its `offset.storage.topic`), to take source connectors
    /// over from it (see [`crate::takeover`]); a connector's `offsets.storage.topic` wins.
    pub offset_storage_topic: Option<String>,
    /// Kafka Connect's `topic.tracking.enable`: record the topics each connector's tasks use
    /// (KIP-558).
    pub topic_tracking: bool,
    /// Test only: the units of this connector panic as they start.
    pub test_panic_connector: Option<String>,
    /// The wall clock given to tasks (the machine's but in tests).
    pub clock: WallClock,
}

/// The topics a task used since it last recorded them (KIP-558's active topics): noted per
/// record, recorded by the loop once a second.
#[derive(Debug, Default)]
pub struct TopicsUsed(BTreeSet<String>);

impl TopicsUsed {
    /// A record went to or came from `topic`.
    pub fn saw(&mut self, topic: &str) {
        if !self.0.contains(topic) {
            self.0.insert(topic.to_string());
        }
    }

    /// Whether a topic was noted since the last `take`.
    pub fn pending(&self) -> bool {
        !self.0.is_empty()
    }

    /// The topics noted since the last call.
    pub fn take(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.0)
    }
}

/// Why a unit stopped other than by being asked to.
#[derive(Debug)]
pub enum Failure {
    /// Its generation is stale: it moved, restarted or was reconfigured. Stop quietly.
    Fenced,
    /// The task failed: report FAILED with this trace.
    Task(ConnectError),
    /// It was asked to stop in the middle of an operation (while retrying one).
    Stopped,
}

impl From<ConnectError> for Failure {
    fn from(e: ConnectError) -> Self {
        Failure::Task(e)
    }
}

/// A unit to run: which, under which generation, with which configs.
#[derive(Clone)]
pub struct UnitCtx {
    /// The node the unit runs on (its writes go through it to the leader).
    pub node: MetaNode,
    /// The connector's name.
    pub name: String,
    /// `None`: the connector instance.
    pub task: Option<u32>,
    /// The generation of this run: every command it writes carries it, so a stale run is fenced.
    pub generation: u64,
    /// The connector's plugin.
    pub plugin: PluginDesc,
    /// The connector's config.
    pub connector_config: Props,
    /// The connector config version this unit was started for.
    pub version: u64,
    /// The task's config (the connector's, for the connector instance).
    pub task_config: Props,
    /// A sink task's topic-partitions.
    pub partitions: Vec<TopicPartitionRef>,
    /// The worker's settings.
    pub settings: Arc<RuntimeSettings>,
    /// The worker's lease, which the unit acts under.
    pub lease: Arc<crate::lease::Lease>,
    /// The lease epoch this unit may act under, set by the runtime: the one it started in, or
    /// a later one it was resumed in after the lease lapsed and was taken again with its
    /// assignment unchanged; `None` while frozen. Closed once the runtime let the unit go.
    pub epoch: tokio::sync::watch::Receiver<Option<u64>>,
    /// A task's counts on this node (a connector instance's count into nothing).
    pub metrics: crate::metrics::TaskMetrics,
    /// This run's start, decided by its first report (the worker's startup counts).
    pub startup: crate::metrics::Startup,
    /// The worker's shared Kafka consumers, which serve its sink tasks.
    pub consumers: Arc<crate::consumers::Consumers>,
}

impl UnitCtx {
    /// How this unit appears in logs.
    pub fn label(&self) -> String {
        match self.task {
            Some(t) => format!("{}-{t}", self.name),
            None => self.name.clone(),
        }
    }

    /// Write a command of this unit; a stale generation, a partition no longer its own, or a
    /// deleted connector is `Fenced`.
    /// Units act on the answer only (a read of their own writes goes through a linearizable
    /// read), so this does not wait for this node to apply the write.
    pub async fn write(&self, command: Command) -> Result<Outcome, Failure> {
        let request = Request::new(uuid::Uuid::new_v4().to_string(), command);
        match self.node.commit_answer(request).await {
            Ok(Ok(outcome)) => Ok(outcome),
            Ok(Err(
                Rejection::StaleGeneration { .. }
                | Rejection::NotOwned { .. }
                | Rejection::NotFound { .. }
                | Rejection::StaleTaskConfigs { .. },
            )) => {
                debug!(unit = %self.label(), generation = self.generation, "fenced");
                Err(Failure::Fenced)
            }
            Ok(Err(other)) => Err(Failure::Task(ConnectError::fatal(format!(
                "the control plane refused a command of {}: {other}",
                self.label()
            )))),
            Err(e) => Err(Failure::Task(ConnectError::retriable(format!(
                "the control plane is unavailable: {e}"
            )))),
        }
    }

    /// The Kafka settings tasks need, or a clear error if `cluster.toml` has none.
    pub fn kafka(&self) -> Result<crate::kafka::KafkaSettings, ConnectError> {
        self.settings.kafka.clone().ok_or_else(|| {
            ConnectError::fatal(format!(
                "{}: no [kafka] section in cluster.toml; tasks need kafka.bootstrap_servers",
                self.label()
            ))
        })
    }

    /// Whether this unit may write and commit now: the lease it acts under is held. Checked
    /// synchronously, right before acting: after a pause of the process (SIGSTOP, a long
    /// stall) the clock has moved on and the lease is seen lapsed before anything else runs.
    pub fn acting(&self) -> bool {
        self.epoch
            .borrow()
            .is_some_and(|epoch| self.lease.held_in(epoch))
    }

    /// Wait while the unit is frozen (its lease lapsed): `Ok` once it may act again, resumed
    /// by the runtime under a new lease; `Fenced` if the runtime let it go meanwhile (it moved,
    /// or its node stops) — it then stops without writing or committing anything more.
    pub async fn resumed(&self) -> Result<(), Failure> {
        let mut epoch = self.epoch.clone();
        let mut said = false;
        loop {
            if self.acting() {
                if said {
                    info!(unit = %self.label(), "lease held again: resuming");
                }
                return Ok(());
            }
            if !said {
                warn!(unit = %self.label(), "lease lapsed: frozen (no writes, no commits) until it is held again");
                said = true;
            }
            tokio::select! {
                changed = epoch.changed() => if changed.is_err() && !self.acting() {
                    info!(unit = %self.label(), "let go while frozen: stopping without committing");
                    return Err(Failure::Fenced);
                },
                _ = tokio::time::sleep(FROZEN_CHECK) => {}
            }
        }
    }

    /// Commit offsets: only under a held lease (waiting while frozen), refused (fenced) for a
    /// stale generation.
    pub async fn commit(&self, command: Command) -> Result<(), Failure> {
        self.resumed().await?;
        self.write(command).await.map(|_| ())
    }

    /// Report this unit's status.
    pub async fn report(&self, state: RunState, trace: Option<String>) -> Result<(), Failure> {
        self.startup.reported(state);
        self.metrics.windows.entered(state);
        self.write(Command::ReportStatus {
            name: self.name.clone(),
            task: self.task,
            generation: self.generation,
            state,
            worker: Some(self.node.id()),
            // Capped here too, so that a long trace never makes a large log entry.
            trace: trace.as_deref().map(ferry_meta::state::cap_trace),
        })
        .await
        .map(|_| ())
    }

    /// Add the topics this unit used to its connector's active topics (KIP-558), those not
    /// there already; nothing while topic tracking is off or the cluster is below the format
    /// that keeps them. Best effort, as Kafka Connect's: a write that fails is logged, and
    /// the topics are recorded when the unit next uses them.
    pub async fn record_topics(&self, topics: BTreeSet<String>) {
        if topics.is_empty() || !self.settings.topic_tracking {
            return;
        }
        let missing: Vec<String> = {
            let applied = self.node.state().read();
            if applied.state.feature_level() < ferry_meta::format::TOPICS_AND_LOG_LEVELS {
                return;
            }
            let known = applied.state.topics.get(&self.name);
            topics
                .into_iter()
                .filter(|t| known.is_none_or(|k| !k.contains(t)))
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let command = Command::RecordTopics {
            name: self.name.clone(),
            topics: missing,
        };
        if let Err(e) = self.write(command).await {
            debug!(unit = %self.label(), error = ?e, "active topics not recorded this time");
        }
    }

    /// Report the state a target state calls for.
    pub async fn report_target(&self, target: TargetState) -> Result<(), Failure> {
        let state = match target {
            TargetState::Running => RunState::Running,
            TargetState::Paused => RunState::Paused,
            TargetState::Stopped => RunState::Stopped,
        };
        self.report(state, None).await
    }

    /// Report a failure (best effort: a fenced unit has nothing to report).
    pub async fn report_failure(&self, error: &ConnectError) {
        let trace = error.trace();
        warn!(unit = %self.label(), error = %trace, "failed");
        if let Err(Failure::Task(e)) = self.report(RunState::Failed, Some(trace)).await {
            warn!(unit = %self.label(), error = %e, "cannot report the failure");
        }
    }

    /// Bring this node's applied state up to the leader's (a linearizable read), so that the
    /// offsets a starting task reads are the latest committed ones — after a restart the
    /// state may still be replaying its log.
    pub async fn catch_up(&self) -> Result<(), Failure> {
        self.node.linearizable().await.map_err(|e| {
            Failure::Task(ConnectError::retriable(format!(
                "the control plane is unavailable: {e}"
            )))
        })
    }

    /// The committed sink offsets of this connector (next offset per partition).
    pub fn sink_offsets(&self) -> BTreeMap<TopicPartition, i64> {
        let applied = self.node.state().read();
        applied
            .state
            .offsets
            .get(&self.name)
            .map(|o| {
                o.sink
                    .iter()
                    .flat_map(|(topic, parts)| {
                        parts
                            .iter()
                            .map(move |(p, off)| (TopicPartition::new(topic.clone(), *p), *off))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Source offsets as committed when the task started.
pub struct CommittedSourceOffsets {
    offsets: BTreeMap<String, SourceMap>,
}

impl CommittedSourceOffsets {
    /// Ferry's offsets of the connector; without any, those Kafka Connect left in its offsets
    /// topic, if one is named (the connector's `offsets.storage.topic`, or the worker's).
    pub async fn load(ctx: &UnitCtx, kafka: &KafkaSettings) -> Result<Self, ConnectError> {
        let own = Self::of(ctx);
        let topic = ctx
            .connector_config
            .get(ferry_connect::config::OFFSETS_STORAGE_TOPIC)
            .or(ctx.settings.offset_storage_topic.as_ref())
            .filter(|t| !t.trim().is_empty());
        let Some(topic) = topic.filter(|_| own.offsets.is_empty()) else {
            return Ok(own);
        };
        let offsets = crate::takeover::source_offsets(kafka, topic, &ctx.name).await?;
        tracing::info!(
            unit = %ctx.label(),
            topic = %topic,
            partitions = offsets.len(),
            "no offsets in Ferry: starting from Kafka Connect's"
        );
        Ok(CommittedSourceOffsets { offsets })
    }

    /// The source offsets committed for the unit's connector.
    pub fn of(ctx: &UnitCtx) -> Self {
        let applied = ctx.node.state().read();
        let offsets = applied
            .state
            .offsets
            .get(&ctx.name)
            .map(|o| {
                o.source
                    .iter()
                    .filter_map(|(p, off)| Some((p.clone(), source_map_from_json(off)?)))
                    .collect()
            })
            .unwrap_or_default();
        CommittedSourceOffsets { offsets }
    }
}

impl OffsetReader for CommittedSourceOffsets {
    fn offset(&self, partition: &SourceMap) -> Option<SourceMap> {
        self.offsets.get(&source_map_json(partition)).cloned()
    }
}

/// The exactly-once commit interface, over the control plane.
pub struct RaftCommitter {
    ctx: UnitCtx,
}

impl RaftCommitter {
    /// A committer of the unit's exactly-once commits.
    pub fn new(ctx: UnitCtx) -> Self {
        RaftCommitter { ctx }
    }
}

#[async_trait]
impl SinkCommitter for RaftCommitter {
    async fn commit(&self, commit: SinkCommit) -> ferry_connect::Result<CommitOutcome> {
        let task = self
            .ctx
            .task
            .ok_or_else(|| ConnectError::fatal("a connector instance cannot commit offsets"))?;
        if self.ctx.resumed().await.is_err() {
            return Ok(CommitOutcome::Fenced);
        }
        let outcome = self
            .ctx
            .write(Command::CommitSinkRange {
                name: self.ctx.name.clone(),
                task,
                generation: self.ctx.generation,
                topic: commit.partition.topic.clone(),
                partition: commit.partition.partition,
                start: commit.start,
                next: commit.next,
                payload: commit.payload,
            })
            .await;
        match outcome {
            Ok(Outcome::Conflict { recorded }) => Ok(CommitOutcome::Conflict { recorded }),
            Ok(_) => Ok(CommitOutcome::Committed),
            Err(Failure::Fenced) => Ok(CommitOutcome::Fenced),
            Err(Failure::Task(e)) => Err(e),
            Err(Failure::Stopped) => Err(ConnectError::retriable("the task is stopping")),
        }
    }

    async fn last_commit(
        &self,
        partition: &TopicPartition,
    ) -> ferry_connect::Result<Option<(i64, BTreeMap<String, String>)>> {
        self.ctx.node.linearizable().await.map_err(|e| {
            ConnectError::retriable(format!("the control plane is unavailable: {e}"))
        })?;
        let applied = self.ctx.node.state().read();
        let Some(offsets) = applied.state.offsets.get(&self.ctx.name) else {
            return Ok(None);
        };
        let Some(next) = offsets.next_offset(&partition.topic, partition.partition) else {
            return Ok(None);
        };
        let payload = offsets
            .commits
            .get(&partition.topic)
            .and_then(|parts| parts.get(&partition.partition))
            .cloned()
            .unwrap_or_default();
        Ok(Some((next, payload)))
    }

    /// Read locally: the alter happened while the connector was stopped, before the assignment
    /// that started this task, which this node has applied.
    async fn offsets_altered_at(&self) -> ferry_connect::Result<Option<u64>> {
        let applied = self.ctx.node.state().read();
        Ok(applied
            .state
            .offsets
            .get(&self.ctx.name)
            .and_then(|o| o.altered_at))
    }
}

/// What a task's loop knows of its unit.
#[derive(Clone, Debug)]
pub struct LoopUnit {
    /// The unit's label in logs (`name-task`).
    pub label: String,
    /// The connector's name.
    pub name: String,
    /// The task number.
    pub task: u32,
    /// The generation of this run of the task.
    pub generation: u64,
    /// Kafka Connect's `offset.flush.interval.ms`.
    pub flush_interval: Duration,
    /// Whether offsets are also committed to the `connect-<name>` group.
    pub commit_group: bool,
}

impl LoopUnit {
    /// What a unit context says of its loop.
    pub fn of(ctx: &UnitCtx) -> LoopUnit {
        LoopUnit {
            label: ctx.label(),
            name: ctx.name.clone(),
            task: ctx.task.unwrap_or_default(),
            generation: ctx.generation,
            flush_interval: ctx.settings.offset_flush_interval,
            commit_group: ctx.settings.commit_consumer_group,
        }
    }
}

/// What a task's loop needs of the control plane: implemented over Raft by [`UnitCtx`], and by
/// a fake in the loops' tests.
pub trait Control: Send + Sync {
    /// Wait while the lease is lapsed; `Err` if the unit is fenced or stopped meanwhile.
    fn resumed(&self) -> impl std::future::Future<Output = Result<(), Failure>> + Send;
    /// Report the state a target state puts the unit in.
    fn report_target(
        &self,
        target: TargetState,
    ) -> impl std::future::Future<Output = Result<(), Failure>> + Send;
    /// Commit offsets (a command fenced by the unit's generation), under the lease.
    fn commit(
        &self,
        command: Command,
    ) -> impl std::future::Future<Output = Result<(), Failure>> + Send;
    /// Record the topics the unit used (see [`UnitCtx::record_topics`]).
    fn record_topics(
        &self,
        topics: BTreeSet<String>,
    ) -> impl std::future::Future<Output = ()> + Send;
}

impl Control for UnitCtx {
    fn resumed(&self) -> impl std::future::Future<Output = Result<(), Failure>> + Send {
        UnitCtx::resumed(self)
    }

    fn report_target(
        &self,
        target: TargetState,
    ) -> impl std::future::Future<Output = Result<(), Failure>> + Send {
        UnitCtx::report_target(self, target)
    }

    fn commit(
        &self,
        command: Command,
    ) -> impl std::future::Future<Output = Result<(), Failure>> + Send {
        UnitCtx::commit(self, command)
    }

    fn record_topics(
        &self,
        topics: BTreeSet<String>,
    ) -> impl std::future::Future<Output = ()> + Send {
        UnitCtx::record_topics(self, topics)
    }
}

/// Resolves once `stop` turns true (or its sender is gone).
pub async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Start a session's loop, again with backoff while that fails retriably (its database or
/// store unreachable as the task opens, the control plane just after a restart), within
/// `errors.retry.timeout` (five quick retries when it is 0). Nothing was written or committed
/// by this session yet, so starting again is safe for every sink; a failure after the start
/// goes through the retry layer of the call that failed, or fails the task.
pub async fn started<T, F, Fut>(
    ctx: &UnitCtx,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    mut start: F,
) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Failure>>,
{
    let errors = ferry_connect::error_handling::ErrorSettings::from_config(&ctx.connector_config)?;
    let mut retry = crate::retry::Retries::new(&errors, "start", ctx.metrics.retries.clone());
    loop {
        match start().await {
            Err(Failure::Task(e)) if e.is_retriable() => retry.after(e, stop, &ctx.label()).await?,
            other => return other,
        }
    }
}

/// The life of a task: sessions of work while its target state is RUNNING or PAUSED, idle
/// (status STOPPED) while it is STOPPED, until it is told to stop, is fenced, or fails. A
/// session ends with `Ok` when the target turns STOPPED or the unit is stopped.
pub async fn lifecycle<F, Fut>(
    ctx: UnitCtx,
    mut control: tokio::sync::watch::Receiver<TargetState>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    session: F,
) where
    F: Fn(
        UnitCtx,
        tokio::sync::watch::Receiver<TargetState>,
        tokio::sync::watch::Receiver<bool>,
    ) -> Fut,
    Fut: std::future::Future<Output = Result<(), Failure>>,
{
    loop {
        if *control.borrow_and_update() == TargetState::Stopped {
            if let Err(Failure::Fenced) = ctx.report(RunState::Stopped, None).await {
                return;
            }
            while *control.borrow_and_update() == TargetState::Stopped {
                tokio::select! {
                    changed = control.changed() => if changed.is_err() { return },
                    _ = stopped(&mut stop) => return,
                }
            }
        }
        if *stop.borrow() {
            return;
        }
        match session(ctx.clone(), control.clone(), stop.clone()).await {
            Ok(()) if *stop.borrow() => return,
            Ok(()) => {}
            Err(Failure::Fenced) => {
                tracing::info!(unit = %ctx.label(), "fenced: stopped");
                return;
            }
            Err(Failure::Stopped) => return,
            Err(Failure::Task(e)) => {
                ctx.report_failure(&e).await;
                return;
            }
        }
    }
}
