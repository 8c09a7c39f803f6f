//! What is replicated: the cluster's workers, connectors with their configs and task configs,
//! assignments, statuses and offsets.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use serde::{Deserialize, Serialize};

use super::command::Response;
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
    /// A worker's REST API as it advertises it (`host:port`), Kafka Connect's `worker_id` in
    /// that API's statuses; empty when it serves none, and in membership records. Written from
    /// format [`crate::format::REST_API`].
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rest_url: String,
}

impl fmt::Display for FerryNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "api={} raft={}", self.api_addr, self.raft_addr)?;
        if !self.incarnation.is_empty() {
            write!(f, " incarnation={}", self.incarnation)?;
        }
        if !self.rest_url.is_empty() {
            write!(f, " rest={}", self.rest_url)?;
        }
        Ok(())
    }
}

/// What the user asked a connector to do.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TargetState {
    /// Running.
    #[default]
    Running,
    /// Paused: its tasks stay assigned but process nothing.
    Paused,
    /// Stopped: its tasks are stopped (KIP-875's state for offset changes).
    Stopped,
}

impl TargetState {
    /// Kafka Connect's name of the state.
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
    /// Not running on a worker yet.
    #[default]
    Unassigned,
    /// Running.
    Running,
    /// Paused.
    Paused,
    /// Stopped.
    Stopped,
    /// Failed, with its trace.
    Failed,
    /// Restarting.
    Restarting,
}

impl RunState {
    /// Kafka Connect's name of the state.
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
    /// The config as the user gave it.
    pub config: ConfigMap,
    /// What it should do: run, pause or stop.
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
    /// The worker; `None`: unassigned.
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
    /// Who runs the connector instance.
    pub connector: Option<Assignment>,
    /// Who runs each task.
    pub tasks: BTreeMap<u32, Assignment>,
}

/// A status as reported by the runtime (or set by the control plane on restart).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Status {
    /// The state it reported.
    pub state: RunState,
    /// The worker it reported from.
    pub worker: Option<NodeId>,
    /// Error trace of a FAILED status, capped at [`MAX_TRACE`] bytes.
    pub trace: Option<String>,
    /// The generation of the run that reported it.
    pub generation: u64,
}

/// Status of a connector and its tasks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ConnectorStatus {
    /// The connector instance's status.
    pub connector: Status,
    /// Each task's status.
    pub tasks: BTreeMap<u32, Status>,
}

/// Commits of a task that were refused for a stale generation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct FencedCommits {
    /// How many were refused.
    pub count: u64,
    /// The stale generation of the last refused commit.
    pub last_generation: u64,
}

/// Error traces are capped so that a crash loop cannot bloat the log.
pub const MAX_TRACE: usize = 8 * 1024;

/// A topic-partition as the state stores it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TopicPartitionRef {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
}

/// One sink offset: the next offset to consume from a topic-partition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SinkOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// `None` in an alter request removes the partition's offset.
    pub offset: Option<i64>,
}

/// One source offset: a source partition and its offset, both JSON objects in canonical form
/// (as Kafka Connect stores them).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct SourceOffset {
    /// The source partition (JSON).
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
    /// Whether it holds nothing.
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

    pub(crate) fn set_sink(&mut self, o: &SinkOffset) {
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

    pub(crate) fn set_source(&mut self, o: &SourceOffset) {
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

/// Everything Ferry replicates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct ClusterState {
    /// The cluster's id, set once at bootstrap.
    pub cluster_id: Option<String>,
    /// The highest format every member understands, raised by the leader (see
    /// `crate::format`); snapshots carry it, so a node can tell one it cannot read.
    #[serde(default = "crate::format::base")]
    pub feature_level: u32,
    /// The workers: every node's addresses.
    pub workers: BTreeMap<NodeId, FerryNode>,
    /// Workers taken out by `remove-node`: such a node does not register itself again (its
    /// registration may race with its removal); `add-node` admits it again. From format
    /// [`crate::format::REST_API`].
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub retired: BTreeSet<NodeId>,
    /// The connectors.
    pub connectors: BTreeMap<String, Connector>,
    /// Who runs what.
    pub assignments: BTreeMap<String, ConnectorAssignment>,
    /// What each connector and task reported.
    pub status: BTreeMap<String, ConnectorStatus>,
    /// Each connector's offsets.
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
    /// The recent request ids, oldest first.
    pub request_order: VecDeque<String>,
    /// The topics each connector's tasks used (Kafka Connect's active topics, KIP-558): a sink
    /// task's consumed topics, a source task's produced ones. From format
    /// [`crate::format::TOPICS_AND_LOG_LEVELS`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub topics: BTreeMap<String, BTreeSet<String>>,
    /// Log levels set for the whole cluster (`/admin/loggers/{name}?scope=cluster`): each node
    /// applies every change once, in the order of their `seq`. From format
    /// [`crate::format::TOPICS_AND_LOG_LEVELS`].
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub log_levels: BTreeMap<String, ClusterLogLevel>,
}

/// A log level set for the whole cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ClusterLogLevel {
    /// The level, by Kafka Connect's (log4j's) name.
    pub level: String,
    /// The change's place among all cluster-wide changes (1, 2, …): a node applies those
    /// above the last it applied.
    pub seq: u64,
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
