//! Kafka Connect's REST entities, their fields in its order, built from the replicated state
//! through the same conversions the gRPC API uses (`api::convert`).

use std::collections::BTreeMap;

use ferry_connect::PluginKind;
use ferry_meta::state::Connector;
use ferry_meta::ClusterState;
use ferry_proto::management as pb;
use serde::Serialize;
use serde_json::Value;

use crate::api::convert;

/// `{"connector": "c", "task": 0}`.
#[derive(Serialize)]
pub struct TaskId {
    /// The connector.
    pub connector: String,
    /// The task.
    pub task: u32,
}

/// A connector's config and tasks (Kafka Connect's ConnectorInfo).
#[derive(Serialize)]
pub struct ConnectorInfo {
    /// Its name.
    pub name: String,
    /// Its config, secrets hidden.
    pub config: BTreeMap<String, String>,
    /// Its tasks.
    pub tasks: Vec<TaskId>,
    /// `source`, `sink` or `unknown`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// How a plugin kind is named, `unknown` when the class is not a plugin of this build.
pub fn kind_name(kind: Option<PluginKind>) -> &'static str {
    kind.map_or("unknown", |k| k.as_str())
}

impl ConnectorInfo {
    /// A stored connector as Kafka Connect shows it.
    pub fn of(name: &str, connector: &Connector, kind: Option<PluginKind>) -> Self {
        ConnectorInfo {
            name: name.to_string(),
            config: connector.config.redacted(),
            tasks: (0..connector.task_count() as u32)
                .map(|task| TaskId {
                    connector: name.to_string(),
                    task,
                })
                .collect(),
            kind: kind_name(kind),
        }
    }
}

/// The state of a connector instance or of a task.
#[derive(Serialize, Clone)]
pub struct UnitState {
    /// The task's id (absent for the connector instance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// `UNASSIGNED`, `RUNNING`, `PAUSED`, `FAILED`, `RESTARTING` or `STOPPED`.
    pub state: String,
    /// The worker it runs on.
    pub worker_id: String,
    /// Why it failed; absent when empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub trace: String,
}

/// A connector's status (Kafka Connect's ConnectorStateInfo).
#[derive(Serialize)]
pub struct ConnectorState {
    /// The connector.
    pub name: String,
    /// Its instance's state.
    pub connector: UnitState,
    /// Its tasks' states, by id.
    pub tasks: Vec<UnitState>,
    /// `source`, `sink` or `unknown`.
    #[serde(rename = "type")]
    pub kind: String,
}

impl ConnectorState {
    /// The status of connector `name`, if it exists.
    pub fn of(state: &ClusterState, name: &str, kind: Option<PluginKind>) -> Option<Self> {
        let status = convert::status_info(state, name, kind, convert::Door::Rest)?;
        Some(ConnectorState::from(status))
    }
}

impl From<pb::ConnectorStatusInfo> for ConnectorState {
    fn from(s: pb::ConnectorStatusInfo) -> Self {
        ConnectorState {
            name: s.name,
            connector: UnitState {
                id: None,
                state: s.state,
                worker_id: s.worker_id,
                trace: s.trace,
            },
            tasks: s
                .tasks
                .into_iter()
                .map(|t| UnitState {
                    id: Some(t.id),
                    state: t.state,
                    worker_id: t.worker_id,
                    trace: t.trace,
                })
                .collect(),
            kind: s.r#type,
        }
    }
}

/// A task and its config (Kafka Connect's TaskInfo).
#[derive(Serialize)]
pub struct TaskInfo {
    /// The task.
    pub id: TaskId,
    /// Its config, secrets hidden.
    pub config: BTreeMap<String, String>,
}

/// A connector's tasks, if it exists.
pub fn tasks(state: &ClusterState, name: &str) -> Option<Vec<TaskInfo>> {
    Some(
        convert::tasks(state, name, convert::Door::Rest)?
            .into_iter()
            .map(|t| TaskInfo {
                id: TaskId {
                    connector: name.to_string(),
                    task: t.id,
                },
                config: t.config.into_iter().collect(),
            })
            .collect(),
    )
}

/// One partition's offset (KIP-875).
#[derive(Serialize)]
pub struct Offset {
    /// The partition.
    pub partition: Value,
    /// Its offset; `null` when reset.
    pub offset: Value,
}

/// A connector's offsets (Kafka Connect's ConnectorOffsets).
#[derive(Serialize)]
pub struct Offsets {
    /// Every partition's.
    pub offsets: Vec<Offset>,
}

impl Offsets {
    /// The offsets of connector `name`.
    pub fn of(state: &ClusterState, name: &str) -> Self {
        let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
        Offsets {
            offsets: convert::offsets(state, name)
                .offsets
                .iter()
                .map(|o| Offset {
                    partition: parse(&o.partition_json),
                    offset: parse(&o.offset_json),
                })
                .collect(),
        }
    }
}

/// `{"message": …}`.
#[derive(Serialize)]
pub struct Message {
    /// The message.
    pub message: String,
}

/// A plugin (Kafka Connect's PluginInfo).
#[derive(Serialize)]
pub struct PluginInfo {
    /// Its class.
    pub class: &'static str,
    /// `source` or `sink`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Its version.
    pub version: &'static str,
}

/// What `GET /` says (Kafka Connect's ServerInfo).
#[derive(Serialize)]
pub struct ServerInfo {
    /// The version.
    pub version: &'static str,
    /// The commit it was built from.
    pub commit: &'static str,
    /// The Kafka cluster's id.
    pub kafka_cluster_id: Option<String>,
}

/// What `GET /health` says (Kafka Connect's WorkerStatus).
#[derive(Serialize)]
pub struct WorkerStatus {
    /// `healthy`, `starting` or `unhealthy`.
    pub status: &'static str,
    /// Why.
    pub message: String,
}
