//! The writes to the replicated state: a [`Request`] carries a [`Command`] (with its format and
//! an optional request id); applying it gives a [`Response`], an [`Outcome`] or a
//! [`Rejection`].

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::model::*;
use crate::redact::ConfigMap;
use crate::NodeId;

/// A write to the replicated state, with an optional client request id that makes a retry of the
/// same write apply once, and the format its command needs (see `crate::format`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The client's request id: a retry with the same id gets the first answer.
    pub id: Option<String>,
    /// The format its command needs.
    pub format: u32,
    /// The change.
    pub command: Command,
}

impl Request {
    /// A write with a client request id (a retry with the same id applies once).
    pub fn new(id: impl Into<String>, command: Command) -> Self {
        Request {
            id: Some(id.into()),
            format: command.format(),
            command,
        }
    }

    /// A write without a request id: applied as often as it is proposed.
    pub fn anonymous(command: Command) -> Self {
        Request {
            id: None,
            format: command.format(),
            command,
        }
    }

    /// How many bytes the request takes encoded, as the log stores it (counted, not kept).
    pub fn encoded_len(&self) -> usize {
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0 += buf.len();
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut count = Count(0);
        // Encoding a request cannot fail (its maps have string keys); if it ever did, the
        // count so far is a lower bound and Raft's own encoding reports the error.
        let _ = serde_json::to_writer(&mut count, self);
        count.0
    }
}

/// A request as written: its command is decoded only if this build understands its format.
#[derive(Serialize, Deserialize)]
struct WireRequest {
    id: Option<String>,
    #[serde(default = "crate::format::base")]
    format: u32,
    command: serde_json::Value,
}

impl Serialize for Request {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let command = match &self.command {
            Command::Unsupported { raw, .. } => raw.clone(),
            known => serde_json::to_value(known).map_err(serde::ser::Error::custom)?,
        };
        WireRequest {
            id: self.id.clone(),
            format: self.format,
            command,
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Request {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = WireRequest::deserialize(deserializer)?;
        let command = if wire.format > crate::format::understood() {
            Command::Unsupported {
                format: wire.format,
                raw: wire.command,
            }
        } else {
            serde_json::from_value(wire.command).map_err(serde::de::Error::custom)?
        };
        Ok(Request {
            id: wire.id,
            format: wire.format,
            command,
        })
    }
}

/// Shown in Raft's logs: the kind and the connector, never the config (it may hold secrets).
impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.command.kind())?;
        if let Some(name) = self.command.connector() {
            write!(f, "({name})")?;
        }
        if let Some(id) = &self.id {
            write!(f, " req={id}")?;
        }
        Ok(())
    }
}

/// Every change to [`ClusterState`].
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// Raise the cluster's feature level (format 2): only once every member understands it.
    SetFeatureLevel {
        /// The level: the highest format every member understands.
        level: u32,
    },
    /// Restore a backup into a cluster without connectors (format 2): see `crate::backup`.
    RestoreState {
        /// The backup's state.
        state: Box<ClusterState>,
    },
    /// A command of a format this build does not understand, kept as it was written so that
    /// it is stored and passed on unchanged; applying it stops the node (see `crate::format`).
    #[serde(skip)]
    Unsupported {
        /// The format it needs.
        format: u32,
        /// The command as it was written.
        raw: serde_json::Value,
    },
    /// Set once by the node that bootstrapped the cluster.
    SetClusterId {
        /// The cluster's id.
        id: String,
    },
    /// Register or update a worker's addresses. A retired worker (see `RemoveWorker`) is
    /// registered only when `readmit` (add-node) says so: its own registration is ignored.
    PutWorker {
        /// The worker's node id.
        id: NodeId,
        /// Its addresses.
        node: FerryNode,
        /// Admit it even if it was retired (add-node). From format [`crate::format::REST_API`].
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        readmit: bool,
    },
    /// Forget a worker: its units are assigned elsewhere.
    RemoveWorker {
        /// The worker's node id.
        id: NodeId,
        /// Retire it too (remove-node): it does not register itself again until readmitted.
        /// From format [`crate::format::REST_API`].
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retire: bool,
    },
    /// Create (`create = true`: must not exist) or update a connector's config.
    PutConnector {
        /// The connector.
        name: String,
        /// The config.
        config: ConfigMap,
        /// A create: the connector must not exist yet.
        create: bool,
        /// Compare-and-set: apply only if the current version is this.
        expected_version: Option<u64>,
        /// The target state a connector this creates starts in (KIP-980's `initial_state`),
        /// set with its config in the same entry; `None`: running. Written from format
        /// [`crate::format::REST_API`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        initial: Option<TargetState>,
    },
    /// Delete a connector, with its tasks, status and offsets.
    DeleteConnector {
        /// The connector.
        name: String,
    },
    /// Pause, resume or stop a connector.
    SetTargetState {
        /// The connector.
        name: String,
        /// RUNNING, PAUSED or STOPPED.
        target: TargetState,
    },
    /// Restart the connector instance and, with `include_tasks`, its tasks; with `only_failed`,
    /// only those whose status is FAILED.
    Restart {
        /// The connector.
        name: String,
        /// Its tasks too.
        include_tasks: bool,
        /// Only what is FAILED.
        only_failed: bool,
    },
    /// Restart one task (a new generation fences its current run).
    RestartTask {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
    },
    /// Task configs generated from connector config version `version`: each task's own
    /// part, with what they all share in `shared` (format 3; before it, `configs` are whole
    /// and `shared` is absent). See [`crate::tasks::split`].
    PutTaskConfigs {
        /// The connector.
        name: String,
        /// The connector config version they were generated from.
        version: u64,
        /// Each task's own part of its config.
        configs: Vec<ConfigMap>,
        /// What every task's config has (format 3).
        #[serde(default, skip_serializing_if = "ConfigMap::is_empty")]
        shared: ConfigMap,
    },
    /// Assign (or, with `worker = None`, unassign) a connector instance (`task = None`) or task.
    Assign {
        /// The connector.
        name: String,
        /// The task; `None`: the connector instance.
        task: Option<u32>,
        /// The worker; `None`: unassigned.
        worker: Option<NodeId>,
    },
    /// Ask the owner of a unit to stop it, commit and release it, so that it can move without
    /// a record written twice (format 4). Fenced by generation.
    Revoke {
        /// The connector.
        name: String,
        /// The task; `None`: the connector instance.
        task: Option<u32>,
        /// The generation revoked.
        generation: u64,
    },
    /// The owner stopped the unit and made its final commit under `generation`: the unit is
    /// unassigned, to be assigned afresh (format 4). Fenced by generation.
    Release {
        /// The connector.
        name: String,
        /// The task; `None`: the connector instance.
        task: Option<u32>,
        /// The generation released.
        generation: u64,
    },
    /// A status report from the runtime, fenced by generation.
    ReportStatus {
        /// The connector.
        name: String,
        /// The task; `None`: the connector instance.
        task: Option<u32>,
        /// The generation of the run that sends it (a stale one is fenced).
        generation: u64,
        /// The state it is in.
        state: RunState,
        /// The worker it runs on.
        worker: Option<NodeId>,
        /// Why it failed, if it did.
        trace: Option<String>,
    },
    /// Sink offsets committed by a task, fenced by generation.
    CommitSinkOffsets {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
        /// The generation of the run that sends it (a stale one is fenced).
        generation: u64,
        /// The next offset of each partition.
        offsets: Vec<SinkOffset>,
    },
    /// An exactly-once sink's atomic commit of one partition: accepted only if the generation
    /// is current and `start` equals the recorded next offset (or none is recorded).
    CommitSinkRange {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
        /// The generation of the run that sends it (a stale one is fenced).
        generation: u64,
        /// The partition's topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The next offset the commit expects recorded.
        start: i64,
        /// The next offset after the commit.
        next: i64,
        /// What a starting task must finish (the files the commit made final).
        payload: BTreeMap<String, String>,
    },
    /// Source offsets committed by a task, fenced by generation.
    CommitSourceOffsets {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
        /// The generation of the run that sends it (a stale one is fenced).
        generation: u64,
        /// The offset of each source partition.
        offsets: Vec<SourceOffset>,
    },
    /// The topic-partitions of each task of a sink connector. Tasks whose partitions change get
    /// a new generation (their old run is fenced).
    SetSinkPartitions {
        /// The connector.
        name: String,
        /// Each task's topic-partitions.
        partitions: BTreeMap<u32, Vec<TopicPartitionRef>>,
    },
    /// KIP-875: only while the connector is STOPPED. With `supersede` (format 5), the change
    /// is marked ([`Offsets::altered_at`]) so that it wins over offsets a sink keeps elsewhere.
    AlterOffsets {
        /// The connector.
        name: String,
        /// Sink partitions' next offsets (`None` removes one).
        sink: Vec<SinkOffset>,
        /// Source partitions' offsets (`None` removes one).
        source: Vec<SourceOffset>,
        /// Mark the change as winning over a sink's own offsets (format 5).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supersede: bool,
    },
    /// KIP-875: only while the connector is STOPPED; `supersede` as for `AlterOffsets`.
    ResetOffsets {
        /// The connector.
        name: String,
        /// Mark the change as winning over a sink's own offsets (format 5).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supersede: bool,
    },
    /// A task used these topics (KIP-558; format 7): added to its connector's active topics,
    /// if the connector exists.
    RecordTopics {
        /// The connector.
        name: String,
        /// The topics.
        topics: Vec<String>,
    },
    /// Forget a connector's active topics (format 7).
    ResetTopics {
        /// The connector.
        name: String,
    },
    /// Set a logger's level on every node (format 7).
    SetLogLevel {
        /// The logger.
        logger: String,
        /// The level, by Kafka Connect's name.
        level: String,
    },
}

impl Command {
    /// The format a command needs: every command before formats were recorded is
    /// [`BASE_FORMAT`](crate::format::BASE_FORMAT). A new command or a new meaning of a field
    /// gets the next format here.
    pub fn format(&self) -> u32 {
        match self {
            Command::PutWorker { node, readmit, .. } if !node.rest_url.is_empty() || *readmit => {
                crate::format::REST_API
            }
            Command::RemoveWorker { retire: true, .. } => crate::format::REST_API,
            Command::PutConnector {
                initial: Some(_), ..
            } => crate::format::REST_API,
            Command::RecordTopics { .. }
            | Command::ResetTopics { .. }
            | Command::SetLogLevel { .. } => crate::format::TOPICS_AND_LOG_LEVELS,
            Command::RestoreState { state }
                if !state.topics.is_empty() || !state.log_levels.is_empty() =>
            {
                crate::format::TOPICS_AND_LOG_LEVELS
            }
            Command::RestoreState { state }
                if !state.retired.is_empty()
                    || state.workers.values().any(|w| !w.rest_url.is_empty()) =>
            {
                crate::format::REST_API
            }
            Command::PutTaskConfigs { shared, .. } if !shared.is_empty() => 3,
            Command::RestoreState { state }
                if state.connectors.values().any(|c| !c.task_shared.is_empty()) =>
            {
                3
            }
            Command::Revoke { .. } | Command::Release { .. } => 4,
            Command::AlterOffsets {
                supersede: true, ..
            }
            | Command::ResetOffsets {
                supersede: true, ..
            } => crate::format::SUPERSEDING_OFFSETS,
            Command::SetFeatureLevel { .. } | Command::RestoreState { .. } => 2,
            Command::Unsupported { format, .. } => *format,
            _ => crate::format::BASE_FORMAT,
        }
    }

    /// A short name of the command, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Command::SetFeatureLevel { .. } => "set-feature-level",
            Command::RestoreState { .. } => "restore-state",
            Command::Unsupported { .. } => "unsupported",
            Command::SetClusterId { .. } => "set-cluster-id",
            Command::PutWorker { .. } => "put-worker",
            Command::RemoveWorker { .. } => "remove-worker",
            Command::PutConnector { .. } => "put-connector",
            Command::DeleteConnector { .. } => "delete-connector",
            Command::SetTargetState { .. } => "set-target-state",
            Command::Restart { .. } => "restart",
            Command::RestartTask { .. } => "restart-task",
            Command::PutTaskConfigs { .. } => "put-task-configs",
            Command::Assign { .. } => "assign",
            Command::Revoke { .. } => "revoke",
            Command::Release { .. } => "release",
            Command::ReportStatus { .. } => "report-status",
            Command::CommitSinkOffsets { .. } => "commit-sink-offsets",
            Command::CommitSourceOffsets { .. } => "commit-source-offsets",
            Command::CommitSinkRange { .. } => "commit-sink-range",
            Command::SetSinkPartitions { .. } => "set-sink-partitions",
            Command::AlterOffsets { .. } => "alter-offsets",
            Command::ResetOffsets { .. } => "reset-offsets",
            Command::RecordTopics { .. } => "record-topics",
            Command::ResetTopics { .. } => "reset-topics",
            Command::SetLogLevel { .. } => "set-log-level",
        }
    }

    /// The connector a command is about, if any.
    pub fn connector(&self) -> Option<&str> {
        match self {
            Command::SetClusterId { .. }
            | Command::SetFeatureLevel { .. }
            | Command::RestoreState { .. }
            | Command::Unsupported { .. }
            | Command::PutWorker { .. }
            | Command::RemoveWorker { .. }
            | Command::SetLogLevel { .. } => None,
            Command::PutConnector { name, .. }
            | Command::DeleteConnector { name }
            | Command::SetTargetState { name, .. }
            | Command::Restart { name, .. }
            | Command::RestartTask { name, .. }
            | Command::PutTaskConfigs { name, .. }
            | Command::Assign { name, .. }
            | Command::Revoke { name, .. }
            | Command::Release { name, .. }
            | Command::ReportStatus { name, .. }
            | Command::CommitSinkOffsets { name, .. }
            | Command::CommitSourceOffsets { name, .. }
            | Command::CommitSinkRange { name, .. }
            | Command::SetSinkPartitions { name, .. }
            | Command::AlterOffsets { name, .. }
            | Command::ResetOffsets { name, .. }
            | Command::RecordTopics { name, .. }
            | Command::ResetTopics { name } => Some(name),
        }
    }
}

/// What an accepted command did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Applied.
    Done,
    /// A connector config was stored.
    Connector {
        /// Its version.
        version: u64,
        /// Whether the connector was created.
        created: bool,
    },
    /// What a restart restarted.
    Restarted {
        /// The connector instance.
        connector: bool,
        /// These tasks.
        tasks: Vec<u32>,
    },
    /// A new assignment and its generation.
    Assigned {
        /// The generation of the assigned run.
        generation: u64,
    },
    /// A compare-and-set commit found another start offset recorded; nothing changed.
    Conflict {
        /// The next offset recorded.
        recorded: Option<i64>,
    },
}

/// Why a command was refused. The state is unchanged, except that an offset commit refused
/// for a stale generation is counted (see [`ClusterState::fenced`]), so that fencing can be
/// observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// No such connector.
    #[error("connector {name} not found")]
    NotFound {
        /// The connector.
        name: String,
    },
    /// A command this build cannot apply.
    #[error("a command of format {format}, which this build does not understand")]
    Unsupported {
        /// The format it needs.
        format: u32,
    },
    /// A restore into a cluster that has connectors.
    #[error(
        "the cluster has {connectors} connectors: a backup is restored only into a cluster \
         without any (a new cluster, or delete them first)"
    )]
    NotEmpty {
        /// How many it has.
        connectors: usize,
    },
    /// A create of a connector that exists.
    #[error("connector {name} already exists")]
    AlreadyExists {
        /// The connector.
        name: String,
    },
    /// A compare-and-set update of another version.
    #[error("connector {name} is at version {actual}, not the expected {expected}")]
    VersionMismatch {
        /// The connector.
        name: String,
        /// The version the update expected.
        expected: u64,
        /// The version stored.
        actual: u64,
    },
    /// A task the connector does not have.
    #[error("connector {name} has no task {task}")]
    UnknownTask {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
    },
    /// A command from a run that is not the unit's current one (fenced).
    #[error("stale generation {got} for {name} task {task:?}: the current generation is {current} (the task moved or restarted)")]
    StaleGeneration {
        /// The connector.
        name: String,
        /// The task; `None`: the connector instance.
        task: Option<u32>,
        /// The current generation.
        current: u64,
        /// The generation the command came with.
        got: u64,
    },
    /// A commit of a partition the task does not own.
    #[error("{name} task {task} does not own {topic}-{partition}: its offsets are not its to commit (the partition moved to another task)")]
    NotOwned {
        /// The connector.
        name: String,
        /// The task.
        task: u32,
        /// The partition's topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// An offsets change while the connector is not STOPPED.
    #[error(
        "connector {name} is {state}: offsets can only be altered or reset while it is STOPPED"
    )]
    NotStopped {
        /// The connector.
        name: String,
        /// Its target state.
        state: String,
    },
    /// Task configs of a connector config that is no longer current.
    #[error("task configs for {name} were generated from version {got}, but the config is at version {current}")]
    StaleTaskConfigs {
        /// The connector.
        name: String,
        /// The current config version.
        current: u64,
        /// The version they were generated from.
        got: u64,
    },
    /// Another cluster id is set.
    #[error("the cluster id is already {current}")]
    ClusterIdSet {
        /// The id set.
        current: String,
    },
}

/// The answer to a request, the same on every node and for every retry of the same request id.
pub type Response = Result<Outcome, Rejection>;
