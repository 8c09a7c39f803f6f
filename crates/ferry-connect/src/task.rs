//! The contracts between the runtime and a connector: `Connector`, `SinkTask`, `SourceTask`,
//! the errant-record reporter, and the commit interface of exactly-once sinks.
//!
//! Error contract: an `Err` from a task method is classified by [`ConnectError::retry`]. A
//! retriable error is retried by the runtime (with the same records, within
//! `errors.retry.timeout`); any other error fails the task (status FAILED with the trace) unless
//! the records it names were reported through the [`ErrantRecordReporter`]. After `stop` no other
//! method is called.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;

use crate::error::{ConnectError, Result};
use crate::record::{SinkRecord, SourceMap, SourceRecord, TopicPartition};

/// A connector's own config map.
pub type Props = BTreeMap<String, String>;

/// A connector instance: it splits its work into task configs.
#[async_trait]
pub trait Connector: Send + Sync {
    /// Called once before the first `task_configs` (Kafka Connect's `start`): what the split
    /// depends on is looked up here (the tables of a database, say).
    async fn start(&mut self) -> Result<()> {
        Ok(())
    }
    /// Configs for at most `max_tasks` tasks (Kafka Connect's `taskConfigs(maxTasks)`).
    fn task_configs(&self, max_tasks: usize) -> Result<Vec<Props>>;
    /// Returns when the task configs should be generated again (Kafka Connect's
    /// `requestTaskReconfiguration`), for example because a table was created; by default
    /// never. The runtime then calls `task_configs` and restarts the tasks whose config changed.
    async fn reconfigure(&mut self) -> Result<()> {
        std::future::pending().await
    }
}

/// Where a sink task reports records that failed on their own (Kafka Connect's
/// `ErrantRecordReporter`): they go to the dead letter queue or the log, as configured, and
/// the task carries on. When `report` returns `Ok` the record is in the dead letter queue, so
/// its offset may be committed.
#[async_trait]
pub trait ErrantRecordReporter: Send + Sync {
    /// Report a record that failed in `put`: dead-lettered or failing the task, as configured.
    async fn report(&self, record: &SinkRecord, error: &ConnectError) -> Result<()>;
}

/// One atomic commit of an exactly-once sink for one partition: "at generation G, starting at
/// offset `start`, the data up to `next` is durable; record `payload` with it". Accepted only if
/// the task's generation is current and `start` equals the recorded next offset, so that a
/// retry after an unknown outcome cannot apply twice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SinkCommit {
    /// The partition.
    pub partition: TopicPartition,
    /// The next offset recorded before this commit (the commit's first).
    pub start: i64,
    /// The next offset after it.
    pub next: i64,
    /// What the sink needs recorded with the offsets (e.g. temporary → final file names).
    pub payload: BTreeMap<String, String>,
}

/// What became of a [`SinkCommit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CommitOutcome {
    /// Recorded.
    Committed,
    /// The task's generation is stale: another owner has the partition. Stop writing.
    Fenced,
    /// `start` did not match; the recorded next offset is given. Nothing was changed.
    Conflict {
        /// The next offset recorded, if any.
        recorded: Option<i64>,
    },
}

/// The commit interface of exactly-once sinks; the worker implements it over the control plane.
#[async_trait]
pub trait SinkCommitter: Send + Sync {
    /// Record a commit if its `start` is the recorded next offset and this task still owns the partition.
    async fn commit(&self, commit: SinkCommit) -> Result<CommitOutcome>;
    /// The next offset recorded for a partition.
    async fn committed(&self, partition: &TopicPartition) -> Result<Option<i64>> {
        Ok(self.last_commit(partition).await?.map(|(next, _)| next))
    }
    /// The next offset recorded for a partition and the payload of the last commit accepted
    /// for it (what a starting task replays).
    async fn last_commit(
        &self,
        partition: &TopicPartition,
    ) -> Result<Option<(i64, BTreeMap<String, String>)>>;
    /// The generation at which this connector's offsets were last altered or reset through the
    /// offsets API (KIP-875), if ever. What a task of that generation or an older one wrote
    /// where the sink keeps offsets of its own (a database table, file names) predates the
    /// change: the offsets the runtime consumes from win over it.
    async fn offsets_altered_at(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}

/// Offsets a sink task asks the runtime to consume from again (Kafka Connect's
/// `SinkTaskContext.offset(...)`): a task that lost what it had buffered since its last
/// commit rewinds its partition to that commit. The runtime seeks after the call that asked,
/// and leaves that partition's records out of a retry of the same call: they come again from
/// the consumer.
#[derive(Debug, Default)]
pub struct Rewinds(std::sync::Mutex<HashMap<TopicPartition, i64>>);

impl Rewinds {
    /// Consume `partition` again from `offset`.
    pub fn request(&self, partition: TopicPartition, offset: i64) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(partition, offset);
    }

    /// Whether something was asked since the last `take`.
    pub fn pending(&self) -> bool {
        !self.0.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    /// What was asked since the last call.
    pub fn take(&self) -> HashMap<TopicPartition, i64> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// The wall clock a task reads for wall-clock schedules and record times (a scheduled
/// rotation, a Wallclock timestamp extractor): the machine's, or — test only — one set ahead
/// of it (`[worker] test_clock_ahead_ms`), so that a test chooses when a schedule fires.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WallClock {
    ahead_ms: i64,
}

impl WallClock {
    /// The machine's clock.
    pub const fn system() -> WallClock {
        WallClock { ahead_ms: 0 }
    }

    /// Test only: the machine's clock plus `ahead_ms`.
    pub const fn ahead(ahead_ms: i64) -> WallClock {
        WallClock { ahead_ms }
    }

    /// Milliseconds since the Unix epoch.
    pub fn now_ms(self) -> i64 {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX) + self.ahead_ms
    }
}

/// Where a sink task tells how long each commit to its destination took — a database
/// transaction, a set of files committed — for the worker's `ferry_sink_commit_seconds`.
pub trait CommitTimes: Send + Sync {
    /// A commit took `time`.
    fn took(&self, time: std::time::Duration);
}

/// Commit times kept nowhere (a task built outside a worker).
pub struct Untimed;

impl CommitTimes for Untimed {
    fn took(&self, _time: std::time::Duration) {}
}

/// What a sink task is built with, beside its config.
#[derive(Clone)]
pub struct SinkTaskContext {
    /// The connector's name.
    pub connector: String,
    /// The task's number.
    pub task: u32,
    /// The generation this run of the task has (for unique file names; commits carry it).
    pub generation: u64,
    /// Where records that fail in `put` are reported, if errors are handled.
    pub reporter: Option<Arc<dyn ErrantRecordReporter>>,
    /// Commits of exactly-once sinks, through Raft.
    pub committer: Arc<dyn SinkCommitter>,
    /// Where the task asks to consume partitions again.
    pub rewinds: Arc<Rewinds>,
    /// The wall clock of schedules and record times.
    pub clock: WallClock,
    /// Where the task tells how long its commits to its destination took.
    pub commit_times: Arc<dyn CommitTimes>,
}

/// A sink task (Kafka Connect's `SinkTask`).
#[async_trait]
pub trait SinkTask: Send {
    /// Work before the first `open` that needs I/O (the task was built from its parsed config
    /// and its context).
    async fn start(&mut self) -> Result<()> {
        Ok(())
    }
    /// The partitions this task now owns (after `start`, and when they change).
    async fn open(&mut self, _partitions: &[TopicPartition]) -> Result<()> {
        Ok(())
    }
    /// Write (or buffer) records. After a retriable error the same records come again.
    async fn put(&mut self, records: &[SinkRecord]) -> Result<()>;
    /// Whether the task has time-based work for [`SinkTask::tick`]; asked when the task has
    /// started. A task that has none is never ticked: thousands of idle tasks on a worker wake
    /// for nothing.
    fn ticks(&self) -> bool {
        false
    }
    /// Called about once a second, whether records arrive or not, when [`SinkTask::ticks`]:
    /// time-based work (a scheduled rotation) belongs here.
    async fn tick(&mut self) -> Result<()> {
        Ok(())
    }
    /// Make everything put so far durable.
    async fn flush(&mut self, offsets: &HashMap<TopicPartition, i64>) -> Result<()>;
    /// The offsets (next offset per partition) that may be committed; by default flush, then all
    /// of them. Exactly-once sinks return nothing and commit through [`SinkCommitter`].
    async fn pre_commit(
        &mut self,
        offsets: &HashMap<TopicPartition, i64>,
    ) -> Result<HashMap<TopicPartition, i64>> {
        self.flush(offsets).await?;
        Ok(offsets.clone())
    }
    /// The partitions this task no longer owns.
    async fn close(&mut self, _partitions: &[TopicPartition]) -> Result<()> {
        Ok(())
    }
    /// Stop: let go of what it holds.
    async fn stop(&mut self) -> Result<()>;
}

/// Committed source offsets, for a starting source task.
pub trait OffsetReader: Send + Sync {
    /// The offset committed for a source partition, if any.
    fn offset(&self, partition: &SourceMap) -> Option<SourceMap>;
}

/// What a source task is built with, beside its config.
#[derive(Clone)]
pub struct SourceTaskContext {
    /// The connector's name.
    pub connector: String,
    /// The task's number.
    pub task: u32,
    /// The offsets committed for its source partitions.
    pub offsets: Arc<dyn OffsetReader>,
}

/// A source task (Kafka Connect's `SourceTask`).
#[async_trait]
pub trait SourceTask: Send {
    /// Work before the first `poll` that needs I/O (the task was built from its parsed config
    /// and its context).
    async fn start(&mut self) -> Result<()> {
        Ok(())
    }
    /// New records, or none for now; should return within about a second so that the task
    /// can be stopped promptly.
    async fn poll(&mut self) -> Result<Vec<SourceRecord>>;
    /// The records returned so far were delivered and their offsets committed.
    async fn commit(&mut self) -> Result<()> {
        Ok(())
    }
    /// Stop: let go of what it holds.
    async fn stop(&mut self) -> Result<()>;
}
