//! The replicated state: what Kafka Connect keeps in its three internal topics, changed only by
//! applying a [`Request`] from the Raft log.
//!
//! [`ClusterState::apply`] is pure and deterministic: no clock, no randomness, no I/O. Every node
//! applying the same log reaches the same state, and the same answer for every request, which is
//! what lets a retried request (same request id) get the answer of its first application.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::redact::ConfigMap;
use crate::NodeId;

/// How many answered request ids the state remembers. A retry arriving after this many other
/// identified writes is applied again; clients retry within seconds, so this covers them.
pub const RECENT_REQUESTS: usize = 4096;

/// A Raft node's addresses. Every ferryd is both a Raft member (voter or learner) and a worker.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, PartialOrd, Ord, Hash)]
pub struct FerryNode {
    /// Client-facing management gRPC address (`host:port`).
    pub api_addr: String,
    /// Peer-only gRPC address for Raft and forwarded requests (`host:port`).
    pub raft_addr: String,
    /// The incarnation of the node's data directory (see `crate::heal`); empty when not known
    /// yet (a membership written before incarnations existed, or a node added by address).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub incarnation: String,
}

impl fmt::Display for FerryNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "api={} raft={}", self.api_addr, self.raft_addr)?;
        if !self.incarnation.is_empty() {
            write!(f, " incarnation={}", self.incarnation)?;
        }
        Ok(())
    }
}

/// What the user asked a connector to do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TargetState {
    #[default]
    Running,
    Paused,
    Stopped,
}

impl TargetState {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Running => "RUNNING",
            TargetState::Paused => "PAUSED",
            TargetState::Stopped => "STOPPED",
        }
    }
}

/// The runtime state of a connector or task, as Kafka Connect names them.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RunState {
    #[default]
    Unassigned,
    Running,
    Paused,
    Stopped,
    Failed,
    Restarting,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Unassigned => "UNASSIGNED",
            RunState::Running => "RUNNING",
            RunState::Paused => "PAUSED",
            RunState::Stopped => "STOPPED",
            RunState::Failed => "FAILED",
            RunState::Restarting => "RESTARTING",
        }
    }
}

/// A connector: its config as the user gave it, what it should do, and its config version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Connector {
    pub config: ConfigMap,
    pub target: TargetState,
    /// Starts at 1 on create, +1 on every config change.
    pub version: u64,
    /// Each task's own part of its config (index = task id): with `task_shared`, the configs
    /// from the connector's `task_configs(max)`. Read them with [`Connector::task_config`].
    pub tasks: Vec<ConfigMap>,
    /// What every task's config shares, stored once (empty when stored whole, as before
    /// format 3).
    #[serde(default, skip_serializing_if = "ConfigMap::is_empty")]
    pub task_shared: ConfigMap,
    /// The connector config version the task configs were generated from.
    pub tasks_version: u64,
}

impl Connector {
    /// How many tasks the connector has.
    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// The whole config of task `task`.
    pub fn task_config(&self, task: usize) -> Option<ConfigMap> {
        let own = self.tasks.get(task)?;
        Some(crate::tasks::merged(&self.task_shared, own))
    }

    /// Every task's whole config, in task order.
    pub fn task_configs(&self) -> Vec<ConfigMap> {
        (0..self.task_count())
            .filter_map(|t| self.task_config(t))
            .collect()
    }
}

/// Who runs a connector instance or task, and under which generation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub worker: Option<NodeId>,
    /// Unique across the cluster's life: bumped on every change of owner or config and on
    /// restart. Commands from a task carry it; a stale one is rejected (fencing).
    pub generation: u64,
    /// The scheduler wants the unit elsewhere (format 4): its owner stops it, commits under
    /// this generation and releases it ([`Command::Release`]); only then is it assigned again.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revoked: bool,
    /// Unassigned by its owner's release: the worker it was revoked from, which the scheduler
    /// does not give it back to while another has room (that would restart it where it ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_by: Option<NodeId>,
}

/// The assignments of one connector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ConnectorAssignment {
    pub connector: Option<Assignment>,
    pub tasks: BTreeMap<u32, Assignment>,
}

/// A status as reported by the runtime (or set by the control plane on restart).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    pub state: RunState,
    pub worker: Option<NodeId>,
    /// Error trace of a FAILED status, capped at [`MAX_TRACE`] bytes.
    pub trace: Option<String>,
    pub generation: u64,
}

/// Status of a connector and its tasks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ConnectorStatus {
    pub connector: Status,
    pub tasks: BTreeMap<u32, Status>,
}

/// Commits of a task that were refused for a stale generation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FencedCommits {
    pub count: u64,
    /// The stale generation of the last refused commit.
    pub last_generation: u64,
}

/// Error traces are capped so that a crash loop cannot bloat the log.
pub const MAX_TRACE: usize = 8 * 1024;

/// A topic-partition as the state stores it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartitionRef {
    pub topic: String,
    pub partition: i32,
}

/// One sink offset: the next offset to consume from a topic-partition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SinkOffset {
    pub topic: String,
    pub partition: i32,
    /// `None` in an alter request removes the partition's offset.
    pub offset: Option<i64>,
}

/// One source offset: a source partition and its offset, both JSON objects in canonical form
/// (as Kafka Connect stores them).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SourceOffset {
    pub partition: String,
    /// `None` removes the partition's offset.
    pub offset: Option<String>,
}

/// Offsets of one connector.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Offsets {
    /// topic → partition → next offset.
    pub sink: BTreeMap<String, BTreeMap<i32, i64>>,
    /// source partition (JSON) → offset (JSON).
    pub source: BTreeMap<String, String>,
    /// For exactly-once sinks: topic → partition → what the last accepted commit recorded with
    /// its offsets (e.g. the files it made final), for a starting task to finish.
    #[serde(default)]
    pub commits: BTreeMap<String, BTreeMap<i32, BTreeMap<String, String>>>,
    /// The last generation handed out when these offsets were last altered or reset through
    /// the offsets API (KIP-875), if ever. Tasks started later have higher generations, so a
    /// sink that also keeps its offsets elsewhere (the JDBC sink's table, the HDFS sink's file
    /// names) knows that what a generation up to this one wrote there predates the change: the
    /// offsets here win (format 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub altered_at: Option<u64>,
}

impl Offsets {
    pub fn is_empty(&self) -> bool {
        self.sink.is_empty()
            && self.source.is_empty()
            && self.commits.is_empty()
            && self.altered_at.is_none()
    }

    /// The next offset recorded for a topic-partition.
    pub fn next_offset(&self, topic: &str, partition: i32) -> Option<i64> {
        self.sink.get(topic)?.get(&partition).copied()
    }

    fn set_sink(&mut self, o: &SinkOffset) {
        match o.offset {
            Some(offset) => {
                self.sink
                    .entry(o.topic.clone())
                    .or_default()
                    .insert(o.partition, offset);
            }
            None => {
                if let Some(parts) = self.sink.get_mut(&o.topic) {
                    parts.remove(&o.partition);
                    if parts.is_empty() {
                        self.sink.remove(&o.topic);
                    }
                }
            }
        }
    }

    fn set_source(&mut self, o: &SourceOffset) {
        match &o.offset {
            Some(offset) => {
                self.source.insert(o.partition.clone(), offset.clone());
            }
            None => {
                self.source.remove(&o.partition);
            }
        }
    }
}

/// A write to the replicated state, with an optional client request id that makes a retry of the
/// same write apply once, and the format its command needs (see `crate::format`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub id: Option<String>,
    pub format: u32,
    pub command: Command,
}

impl Request {
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
        level: u32,
    },
    /// Restore a backup into a cluster without connectors (format 2): see `crate::backup`.
    RestoreState {
        state: Box<ClusterState>,
    },
    /// A command of a format this build does not understand, kept as it was written so that
    /// it is stored and passed on unchanged; applying it stops the node (see `crate::format`).
    #[serde(skip)]
    Unsupported {
        format: u32,
        raw: serde_json::Value,
    },
    /// Set once by the node that bootstrapped the cluster.
    SetClusterId {
        id: String,
    },
    /// Register or update a worker's addresses.
    PutWorker {
        id: NodeId,
        node: FerryNode,
    },
    RemoveWorker {
        id: NodeId,
    },
    /// Create (`create = true`: must not exist) or update a connector's config.
    PutConnector {
        name: String,
        config: ConfigMap,
        create: bool,
        /// Compare-and-set: apply only if the current version is this.
        expected_version: Option<u64>,
    },
    DeleteConnector {
        name: String,
    },
    SetTargetState {
        name: String,
        target: TargetState,
    },
    /// Restart the connector instance and, with `include_tasks`, its tasks; with `only_failed`,
    /// only those whose status is FAILED.
    Restart {
        name: String,
        include_tasks: bool,
        only_failed: bool,
    },
    RestartTask {
        name: String,
        task: u32,
    },
    /// Task configs generated from connector config version `version`: each task's own
    /// part, with what they all share in `shared` (format 3; before it, `configs` are whole
    /// and `shared` is absent). See [`crate::tasks::split`].
    PutTaskConfigs {
        name: String,
        version: u64,
        configs: Vec<ConfigMap>,
        #[serde(default, skip_serializing_if = "ConfigMap::is_empty")]
        shared: ConfigMap,
    },
    /// Assign (or, with `worker = None`, unassign) a connector instance (`task = None`) or task.
    Assign {
        name: String,
        task: Option<u32>,
        worker: Option<NodeId>,
    },
    /// Ask the owner of a unit to stop it, commit and release it, so that it can move without
    /// a record written twice (format 4). Fenced by generation.
    Revoke {
        name: String,
        task: Option<u32>,
        generation: u64,
    },
    /// The owner stopped the unit and made its final commit under `generation`: the unit is
    /// unassigned, to be assigned afresh (format 4). Fenced by generation.
    Release {
        name: String,
        task: Option<u32>,
        generation: u64,
    },
    /// A status report from the runtime, fenced by generation.
    ReportStatus {
        name: String,
        task: Option<u32>,
        generation: u64,
        state: RunState,
        worker: Option<NodeId>,
        trace: Option<String>,
    },
    /// Sink offsets committed by a task, fenced by generation.
    CommitSinkOffsets {
        name: String,
        task: u32,
        generation: u64,
        offsets: Vec<SinkOffset>,
    },
    /// An exactly-once sink's atomic commit of one partition: accepted only if the generation
    /// is current and `start` equals the recorded next offset (or none is recorded).
    CommitSinkRange {
        name: String,
        task: u32,
        generation: u64,
        topic: String,
        partition: i32,
        start: i64,
        next: i64,
        payload: BTreeMap<String, String>,
    },
    /// Source offsets committed by a task, fenced by generation.
    CommitSourceOffsets {
        name: String,
        task: u32,
        generation: u64,
        offsets: Vec<SourceOffset>,
    },
    /// The topic-partitions of each task of a sink connector. Tasks whose partitions change get
    /// a new generation (their old run is fenced).
    SetSinkPartitions {
        name: String,
        partitions: BTreeMap<u32, Vec<TopicPartitionRef>>,
    },
    /// KIP-875: only while the connector is STOPPED. With `supersede` (format 5), the change
    /// is marked ([`Offsets::altered_at`]) so that it wins over offsets a sink keeps elsewhere.
    AlterOffsets {
        name: String,
        sink: Vec<SinkOffset>,
        source: Vec<SourceOffset>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supersede: bool,
    },
    /// KIP-875: only while the connector is STOPPED; `supersede` as for `AlterOffsets`.
    ResetOffsets {
        name: String,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        supersede: bool,
    },
}

impl Command {
    /// The format a command needs: every command before formats were recorded is
    /// [`BASE_FORMAT`](crate::format::BASE_FORMAT). A new command or a new meaning of a field
    /// gets the next format here.
    pub fn format(&self) -> u32 {
        match self {
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
            | Command::RemoveWorker { .. } => None,
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
            | Command::ResetOffsets { name, .. } => Some(name),
        }
    }
}

/// What an accepted command did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Done,
    /// A connector config was stored.
    Connector {
        version: u64,
        created: bool,
    },
    /// What a restart restarted.
    Restarted {
        connector: bool,
        tasks: Vec<u32>,
    },
    /// A new assignment and its generation.
    Assigned {
        generation: u64,
    },
    /// A compare-and-set commit found another start offset recorded; nothing changed.
    Conflict {
        recorded: Option<i64>,
    },
}

/// Why a command was refused. The state is unchanged, except that an offset commit refused
/// for a stale generation is counted (see [`ClusterState::fenced`]), so that fencing can be
/// observed.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    #[error("connector {name} not found")]
    NotFound { name: String },
    #[error("a command of format {format}, which this build does not understand")]
    Unsupported { format: u32 },
    #[error(
        "the cluster has {connectors} connectors: a backup is restored only into a cluster \
         without any (a new cluster, or delete them first)"
    )]
    NotEmpty { connectors: usize },
    #[error("connector {name} already exists")]
    AlreadyExists { name: String },
    #[error("connector {name} is at version {actual}, not the expected {expected}")]
    VersionMismatch {
        name: String,
        expected: u64,
        actual: u64,
    },
    #[error("connector {name} has no task {task}")]
    UnknownTask { name: String, task: u32 },
    #[error("stale generation {got} for {name} task {task:?}: the current generation is {current} (the task moved or restarted)")]
    StaleGeneration {
        name: String,
        task: Option<u32>,
        current: u64,
        got: u64,
    },
    #[error("{name} task {task} does not own {topic}-{partition}: its offsets are not its to commit (the partition moved to another task)")]
    NotOwned {
        name: String,
        task: u32,
        topic: String,
        partition: i32,
    },
    #[error(
        "connector {name} is {state}: offsets can only be altered or reset while it is STOPPED"
    )]
    NotStopped { name: String, state: String },
    #[error("task configs for {name} were generated from version {got}, but the config is at version {current}")]
    StaleTaskConfigs {
        name: String,
        current: u64,
        got: u64,
    },
    #[error("the cluster id is already {current}")]
    ClusterIdSet { current: String },
}

/// The answer to a request, the same on every node and for every retry of the same request id.
pub type Response = Result<Outcome, Rejection>;

/// Everything Ferry replicates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ClusterState {
    pub cluster_id: Option<String>,
    /// The highest format every member understands, raised by the leader (see
    /// `crate::format`); snapshots carry it, so a node can tell one it cannot read.
    #[serde(default = "crate::format::base")]
    pub feature_level: u32,
    pub workers: BTreeMap<NodeId, FerryNode>,
    pub connectors: BTreeMap<String, Connector>,
    pub assignments: BTreeMap<String, ConnectorAssignment>,
    pub status: BTreeMap<String, ConnectorStatus>,
    pub offsets: BTreeMap<String, Offsets>,
    /// For sink connectors: task → the topic-partitions it owns (resolved by the scheduler
    /// from Kafka metadata).
    pub sink_partitions: BTreeMap<String, BTreeMap<u32, Vec<TopicPartitionRef>>>,
    /// Offset commits refused because their task's generation was stale (a zombie's attempts),
    /// per connector and task.
    #[serde(default)]
    pub fenced: BTreeMap<String, BTreeMap<u32, FencedCommits>>,
    /// The last generation handed out; the next is this + 1.
    pub generation: u64,
    /// Answers to recent identified requests, oldest first in `request_order`.
    pub requests: BTreeMap<String, Response>,
    pub request_order: VecDeque<String>,
}

impl ClusterState {
    /// The cluster's feature level (see `crate::format`).
    pub fn feature_level(&self) -> u32 {
        self.feature_level.max(crate::format::BASE_FORMAT)
    }

    /// Apply one request. A request id seen recently gets its first answer again and changes
    /// nothing.
    pub fn apply(&mut self, request: &Request) -> Response {
        if let Some(id) = &request.id {
            if let Some(answer) = self.requests.get(id) {
                return answer.clone();
            }
        }
        let answer = self.apply_command(&request.command);
        if let Some(id) = &request.id {
            self.remember(id.clone(), answer.clone());
        }
        answer
    }

    fn remember(&mut self, id: String, answer: Response) {
        self.requests.insert(id.clone(), answer);
        self.request_order.push_back(id);
        while self.request_order.len() > RECENT_REQUESTS {
            if let Some(old) = self.request_order.pop_front() {
                self.requests.remove(&old);
            }
        }
    }

    fn next_generation(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    fn connector(&self, name: &str) -> Result<&Connector, Rejection> {
        self.connectors
            .get(name)
            .ok_or_else(|| Rejection::NotFound {
                name: name.to_string(),
            })
    }

    fn apply_command(&mut self, command: &Command) -> Response {
        match command {
            Command::SetFeatureLevel { level } => {
                self.feature_level = self.feature_level.max(*level);
                Ok(Outcome::Done)
            }
            Command::Unsupported { format, .. } => Err(Rejection::Unsupported { format: *format }),
            Command::RestoreState { state } => {
                if !self.connectors.is_empty() {
                    return Err(Rejection::NotEmpty {
                        connectors: self.connectors.len(),
                    });
                }
                *self = crate::backup::restored(self, state);
                Ok(Outcome::Done)
            }
            Command::SetClusterId { id } => match &self.cluster_id {
                Some(current) if current != id => Err(Rejection::ClusterIdSet {
                    current: current.clone(),
                }),
                _ => {
                    self.cluster_id = Some(id.clone());
                    Ok(Outcome::Done)
                }
            },
            Command::PutWorker { id, node } => {
                self.workers.insert(*id, node.clone());
                Ok(Outcome::Done)
            }
            Command::RemoveWorker { id } => {
                self.workers.remove(id);
                Ok(Outcome::Done)
            }
            Command::PutConnector {
                name,
                config,
                create,
                expected_version,
            } => self.put_connector(name, config, *create, *expected_version),
            Command::DeleteConnector { name } => {
                self.connector(name)?;
                self.connectors.remove(name);
                self.assignments.remove(name);
                self.status.remove(name);
                self.offsets.remove(name);
                self.sink_partitions.remove(name);
                self.fenced.remove(name);
                Ok(Outcome::Done)
            }
            Command::SetTargetState { name, target } => {
                let connector = self
                    .connectors
                    .get_mut(name)
                    .ok_or_else(|| Rejection::NotFound { name: name.clone() })?;
                connector.target = *target;
                Ok(Outcome::Done)
            }
            Command::Restart {
                name,
                include_tasks,
                only_failed,
            } => self.restart(name, *include_tasks, *only_failed),
            Command::RestartTask { name, task } => {
                let connector = self.connector(name)?;
                if *task as usize >= connector.tasks.len() {
                    return Err(Rejection::UnknownTask {
                        name: name.clone(),
                        task: *task,
                    });
                }
                self.restart_instance(name, Some(*task));
                Ok(Outcome::Restarted {
                    connector: false,
                    tasks: vec![*task],
                })
            }
            Command::PutTaskConfigs {
                name,
                version,
                configs,
                shared,
            } => self.put_task_configs(name, *version, shared, configs),
            Command::Assign { name, task, worker } => {
                let connector = self.connector(name)?;
                if let Some(task) = task {
                    if *task as usize >= connector.tasks.len() {
                        return Err(Rejection::UnknownTask {
                            name: name.clone(),
                            task: *task,
                        });
                    }
                }
                let generation = self.next_generation();
                let assignment = Assignment {
                    worker: *worker,
                    generation,
                    revoked: false,
                    released_by: None,
                };
                let entry = self.assignments.entry(name.clone()).or_default();
                match task {
                    Some(task) => {
                        entry.tasks.insert(*task, assignment);
                    }
                    None => entry.connector = Some(assignment),
                }
                let status = self.status_mut(name, *task);
                *status = Status {
                    state: RunState::Unassigned,
                    worker: *worker,
                    trace: None,
                    generation,
                };
                Ok(Outcome::Assigned { generation })
            }
            Command::Revoke {
                name,
                task,
                generation,
            } => {
                self.check_generation(name, *task, *generation)?;
                if let Some(a) = self.assignment_mut(name, *task) {
                    a.revoked = true;
                }
                Ok(Outcome::Done)
            }
            Command::Release {
                name,
                task,
                generation,
            } => {
                self.check_generation(name, *task, *generation)?;
                if let Some(a) = self.assignment_mut(name, *task) {
                    a.released_by = a.worker.take();
                    a.revoked = false;
                }
                let status = self.status_mut(name, *task);
                status.state = RunState::Unassigned;
                status.worker = None;
                Ok(Outcome::Done)
            }
            Command::ReportStatus {
                name,
                task,
                generation,
                state,
                worker,
                trace,
            } => {
                self.check_generation(name, *task, *generation)?;
                let trace = trace.as_ref().map(|t| cap_trace(t));
                *self.status_mut(name, *task) = Status {
                    state: *state,
                    worker: *worker,
                    trace,
                    generation: *generation,
                };
                Ok(Outcome::Done)
            }
            Command::CommitSinkOffsets {
                name,
                task,
                generation,
                offsets,
            } => {
                self.check_commit(name, *task, *generation)?;
                self.check_owned(
                    name,
                    *task,
                    *generation,
                    offsets.iter().map(|o| (o.topic.as_str(), o.partition)),
                )?;
                let stored = self.offsets.entry(name.clone()).or_default();
                offsets.iter().for_each(|o| stored.set_sink(o));
                Ok(Outcome::Done)
            }
            Command::CommitSourceOffsets {
                name,
                task,
                generation,
                offsets,
            } => {
                self.check_commit(name, *task, *generation)?;
                let stored = self.offsets.entry(name.clone()).or_default();
                offsets.iter().for_each(|o| stored.set_source(o));
                Ok(Outcome::Done)
            }
            Command::CommitSinkRange {
                name,
                task,
                generation,
                topic,
                partition,
                start,
                next,
                payload,
            } => {
                self.check_commit(name, *task, *generation)?;
                self.check_owned(
                    name,
                    *task,
                    *generation,
                    std::iter::once((topic.as_str(), *partition)),
                )?;
                let stored = self.offsets.entry(name.clone()).or_default();
                let recorded = stored.next_offset(topic, *partition);
                if recorded.is_some_and(|r| r != *start) {
                    return Ok(Outcome::Conflict { recorded });
                }
                stored.set_sink(&SinkOffset {
                    topic: topic.clone(),
                    partition: *partition,
                    offset: Some(*next),
                });
                stored
                    .commits
                    .entry(topic.clone())
                    .or_default()
                    .insert(*partition, payload.clone());
                Ok(Outcome::Done)
            }
            Command::SetSinkPartitions { name, partitions } => {
                self.set_sink_partitions(name, partitions)
            }
            Command::AlterOffsets {
                name,
                sink,
                source,
                supersede,
            } => {
                self.require_stopped(name)?;
                let generation = self.generation;
                let stored = self.offsets.entry(name.clone()).or_default();
                sink.iter().for_each(|o| stored.set_sink(o));
                source.iter().for_each(|o| stored.set_source(o));
                if *supersede {
                    stored.altered_at = Some(generation);
                }
                if stored.is_empty() {
                    self.offsets.remove(name);
                }
                Ok(Outcome::Done)
            }
            Command::ResetOffsets { name, supersede } => {
                self.require_stopped(name)?;
                self.offsets.remove(name);
                if *supersede {
                    let marked = Offsets {
                        altered_at: Some(self.generation),
                        ..Offsets::default()
                    };
                    self.offsets.insert(name.clone(), marked);
                }
                Ok(Outcome::Done)
            }
        }
    }

    fn put_connector(
        &mut self,
        name: &str,
        config: &ConfigMap,
        create: bool,
        expected_version: Option<u64>,
    ) -> Response {
        let current = self.connectors.get(name).map(|c| c.version);
        if create && current.is_some() {
            return Err(Rejection::AlreadyExists {
                name: name.to_string(),
            });
        }
        if let Some(expected) = expected_version {
            let actual = current.unwrap_or(0);
            if actual != expected {
                return Err(Rejection::VersionMismatch {
                    name: name.to_string(),
                    expected,
                    actual,
                });
            }
        }
        let connector = self.connectors.entry(name.to_string()).or_default();
        if current.is_some() && connector.config == *config {
            // Kafka Connect answers an unchanged PUT without bumping anything.
            return Ok(Outcome::Connector {
                version: connector.version,
                created: false,
            });
        }
        connector.config = config.clone();
        connector.version += 1;
        let version = connector.version;
        self.status.entry(name.to_string()).or_default();
        Ok(Outcome::Connector {
            version,
            created: current.is_none(),
        })
    }

    fn restart(&mut self, name: &str, include_tasks: bool, only_failed: bool) -> Response {
        let connector = self.connector(name)?;
        let task_ids: Vec<u32> = (0..connector.tasks.len() as u32).collect();
        let failed = |status: Option<&Status>| status.is_some_and(|s| s.state == RunState::Failed);
        let status = self.status.get(name);
        let restart_connector = !only_failed || failed(status.map(|s| &s.connector));
        let tasks: Vec<u32> = if include_tasks {
            task_ids
                .into_iter()
                .filter(|t| !only_failed || failed(status.and_then(|s| s.tasks.get(t))))
                .collect()
        } else {
            Vec::new()
        };
        if restart_connector {
            self.restart_instance(name, None);
        }
        for task in &tasks {
            self.restart_instance(name, Some(*task));
        }
        Ok(Outcome::Restarted {
            connector: restart_connector,
            tasks,
        })
    }

    /// A restart bumps the generation (the old run is fenced) and marks the status RESTARTING.
    fn restart_instance(&mut self, name: &str, task: Option<u32>) {
        let generation = self.next_generation();
        let entry = self.assignments.entry(name.to_string()).or_default();
        let slot = match task {
            Some(task) => entry.tasks.get_mut(&task),
            None => entry.connector.as_mut(),
        };
        let worker = match slot {
            Some(assignment) => {
                assignment.generation = generation;
                assignment.worker
            }
            None => {
                let assignment = Assignment {
                    worker: None,
                    generation,
                    revoked: false,
                    released_by: None,
                };
                match task {
                    Some(task) => {
                        entry.tasks.insert(task, assignment);
                    }
                    None => entry.connector = Some(assignment),
                }
                None
            }
        };
        *self.status_mut(name, task) = Status {
            state: RunState::Restarting,
            worker,
            trace: None,
            generation,
        };
    }

    fn put_task_configs(
        &mut self,
        name: &str,
        version: u64,
        shared: &ConfigMap,
        configs: &[ConfigMap],
    ) -> Response {
        let connector = self.connector(name)?;
        if connector.version != version {
            return Err(Rejection::StaleTaskConfigs {
                name: name.to_string(),
                current: connector.version,
                got: version,
            });
        }
        let count = configs.len() as u32;
        // A task changed if its whole config did, however it is split.
        let same_split = connector.task_shared == *shared;
        let changed: Vec<u32> = (0..count)
            .filter(|t| {
                let (t, own) = (*t as usize, &configs[*t as usize]);
                if same_split {
                    connector.tasks.get(t) != Some(own)
                } else {
                    connector.task_config(t) != Some(crate::tasks::merged(shared, own))
                }
            })
            .collect();
        if let Some(connector) = self.connectors.get_mut(name) {
            connector.tasks = configs.to_vec();
            connector.task_shared = shared.clone();
            connector.tasks_version = version;
        }
        // Tasks beyond the new count are gone; changed tasks are fenced by a new generation.
        if let Some(entry) = self.assignments.get_mut(name) {
            entry.tasks.retain(|t, _| *t < count);
        }
        if let Some(status) = self.status.get_mut(name) {
            status.tasks.retain(|t, _| *t < count);
        }
        if let Some(partitions) = self.sink_partitions.get_mut(name) {
            partitions.retain(|t, _| *t < count);
        }
        for task in changed {
            self.bump_task(name, task);
        }
        Ok(Outcome::Done)
    }

    fn set_sink_partitions(
        &mut self,
        name: &str,
        partitions: &BTreeMap<u32, Vec<TopicPartitionRef>>,
    ) -> Response {
        let connector = self.connector(name)?;
        if let Some(task) = partitions
            .keys()
            .find(|t| **t as usize >= connector.tasks.len())
        {
            return Err(Rejection::UnknownTask {
                name: name.to_string(),
                task: *task,
            });
        }
        let old = self.sink_partitions.get(name).cloned().unwrap_or_default();
        let changed: std::collections::BTreeSet<u32> = partitions
            .keys()
            .chain(old.keys())
            .copied()
            .filter(|t| old.get(t) != partitions.get(t))
            .collect();
        for task in changed {
            self.bump_task(name, task);
        }
        self.sink_partitions
            .insert(name.to_string(), partitions.clone());
        Ok(Outcome::Done)
    }

    /// A new generation for an assigned task: its current run is fenced.
    fn bump_task(&mut self, name: &str, task: u32) {
        let assigned = self
            .assignments
            .get(name)
            .is_some_and(|a| a.tasks.contains_key(&task));
        if assigned {
            let generation = self.next_generation();
            if let Some(a) = self
                .assignments
                .get_mut(name)
                .and_then(|a| a.tasks.get_mut(&task))
            {
                a.generation = generation;
            }
        }
    }

    /// The generation check of an offset commit; a stale one is counted in `fenced`.
    fn check_commit(&mut self, name: &str, task: u32, generation: u64) -> Result<(), Rejection> {
        let checked = self.check_generation(name, Some(task), generation);
        if let Err(Rejection::StaleGeneration { .. }) = &checked {
            self.count_fenced(name, task, generation);
        }
        checked
    }

    /// A sink task commits offsets only for the partitions the scheduler gave it. The
    /// generation already implies it (a change of a task's partitions fences its run); this
    /// states it where the offsets are written, and a refusal is counted as fenced.
    fn check_owned<'a>(
        &mut self,
        name: &str,
        task: u32,
        generation: u64,
        mut partitions: impl Iterator<Item = (&'a str, i32)>,
    ) -> Result<(), Rejection> {
        let owned = self.sink_partitions.get(name).and_then(|p| p.get(&task));
        let stray = partitions.find(|(topic, partition)| {
            !owned.is_some_and(|o| {
                o.iter()
                    .any(|tp| tp.topic == *topic && tp.partition == *partition)
            })
        });
        match stray {
            None => Ok(()),
            Some((topic, partition)) => {
                self.count_fenced(name, task, generation);
                Err(Rejection::NotOwned {
                    name: name.to_string(),
                    task,
                    topic: topic.to_string(),
                    partition,
                })
            }
        }
    }

    fn count_fenced(&mut self, name: &str, task: u32, generation: u64) {
        let fenced = self
            .fenced
            .entry(name.to_string())
            .or_default()
            .entry(task)
            .or_default();
        fenced.count += 1;
        fenced.last_generation = generation;
    }

    fn check_generation(&self, name: &str, task: Option<u32>, got: u64) -> Result<(), Rejection> {
        self.connector(name)?;
        let current = self.assignments.get(name).and_then(|a| match task {
            Some(task) => a.tasks.get(&task),
            None => a.connector.as_ref(),
        });
        match current {
            Some(a) if a.generation == got => Ok(()),
            other => Err(Rejection::StaleGeneration {
                name: name.to_string(),
                task,
                current: other.map_or(0, |a| a.generation),
                got,
            }),
        }
    }

    fn require_stopped(&self, name: &str) -> Result<(), Rejection> {
        let connector = self.connector(name)?;
        if connector.target != TargetState::Stopped {
            return Err(Rejection::NotStopped {
                name: name.to_string(),
                state: connector.target.as_str().to_string(),
            });
        }
        Ok(())
    }

    fn assignment_mut(&mut self, name: &str, task: Option<u32>) -> Option<&mut Assignment> {
        let entry = self.assignments.get_mut(name)?;
        match task {
            Some(task) => entry.tasks.get_mut(&task),
            None => entry.connector.as_mut(),
        }
    }

    fn status_mut(&mut self, name: &str, task: Option<u32>) -> &mut Status {
        let entry = self.status.entry(name.to_string()).or_default();
        match task {
            Some(task) => entry.tasks.entry(task).or_default(),
            None => &mut entry.connector,
        }
    }
}

/// A trace cut to [`MAX_TRACE`] bytes (on a character boundary), saying so.
pub fn cap_trace(trace: &str) -> String {
    if trace.len() <= MAX_TRACE {
        return trace.to_string();
    }
    let mut end = MAX_TRACE;
    while !trace.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [trace truncated]", &trace[..end])
}

#[cfg(test)]
mod tests;
