//! Kafka Connect's REST entities, their fields in its order, built from the replicated state
//! through the same conversions the gRPC API uses (`api::convert`).

use std::collections::BTreeMap;

use ferry_connect::config::Width;
use ferry_connect::{ConfigKey, PluginKind, Validation};
use ferry_meta::state::{Connector, TargetState};
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
    /// The version of its plugin (Kafka Connect 4's KIP-891); absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<&'static str>,
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

/// Whether Kafka Connect lists a connector's tasks in this target state: not while STOPPED
/// (it removes their configs), even while Ferry's are still being stopped (the gRPC API shows
/// them).
pub fn lists_tasks(target: TargetState) -> bool {
    target != TargetState::Stopped
}

impl ConnectorState {
    /// The status of connector `name`, if it exists, its plugin's `kind` and `version` if
    /// known.
    pub fn of(
        state: &ClusterState,
        name: &str,
        kind: Option<PluginKind>,
        version: Option<&'static str>,
    ) -> Option<Self> {
        let status = convert::status_info(state, name, kind, convert::Door::Rest)?;
        let listed = state
            .connectors
            .get(name)
            .is_some_and(|c| lists_tasks(c.target));
        let mut answer = ConnectorState::from(status);
        if !listed {
            answer.tasks.clear();
        }
        answer.connector.version = version;
        for task in &mut answer.tasks {
            task.version = version;
        }
        Some(answer)
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
                version: None,
            },
            tasks: s
                .tasks
                .into_iter()
                .map(|t| UnitState {
                    id: Some(t.id),
                    state: t.state,
                    worker_id: t.worker_id,
                    trace: t.trace,
                    version: None,
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
pub fn tasks(
    state: &ClusterState,
    name: &str,
    task_class: Option<&'static str>,
) -> Option<Vec<TaskInfo>> {
    Some(
        convert::tasks(state, name, convert::Door::Rest)?
            .into_iter()
            .map(|t| {
                let mut config: BTreeMap<String, String> = t.config.into_iter().collect();
                // Kafka Connect's task configs name their task class.
                if let Some(class) = task_class {
                    config.insert(TASK_CLASS.into(), class.into());
                }
                TaskInfo {
                    id: TaskId {
                        connector: name.to_string(),
                        task: t.id,
                    },
                    config,
                }
            })
            .collect(),
    )
}

/// The property of a task config that names its task class.
const TASK_CLASS: &str = "task.class";

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

/// What the validate endpoint answers (Kafka Connect's ConfigInfos).
#[derive(Serialize)]
pub struct ConfigInfos {
    /// `connector.class` as given.
    pub name: String,
    /// How many errors there are in all.
    pub error_count: usize,
    /// The groups of the properties, in the order they first appear.
    pub groups: Vec<&'static str>,
    /// Each property: its definition and its value.
    pub configs: Vec<ConfigInfo>,
}

/// One property of a validation.
#[derive(Serialize)]
pub struct ConfigInfo {
    /// Its declaration; `None` for a property Ferry does not declare.
    pub definition: Option<ConfigKeyInfo>,
    /// Its value and errors.
    pub value: Option<ConfigValueInfo>,
}

/// A property's declaration (Kafka Connect's ConfigKeyInfo).
#[derive(Serialize)]
pub struct ConfigKeyInfo {
    /// Its name.
    pub name: String,
    /// Its type (`STRING`, `INT`, …).
    #[serde(rename = "type")]
    pub ty: &'static str,
    /// Whether it must be given (it has no default).
    pub required: bool,
    /// Its default.
    pub default_value: Option<&'static str>,
    /// `HIGH`, `MEDIUM` or `LOW`.
    pub importance: &'static str,
    /// What it does.
    pub documentation: &'static str,
    /// Its group in a form.
    pub group: Option<&'static str>,
    /// Its place in the group; -1 outside a group.
    pub order_in_group: i32,
    /// Its field's width.
    pub width: &'static str,
    /// Its label.
    pub display_name: String,
    /// The properties whose meaning depends on it.
    pub dependents: Vec<String>,
}

impl ConfigKeyInfo {
    /// The declaration `key` of property `name`.
    pub fn of(name: &str, key: &ConfigKey) -> Self {
        ConfigKeyInfo {
            name: name.to_string(),
            ty: key.ty.as_str(),
            required: key.required && key.default.is_none(),
            default_value: key.default,
            importance: key.importance.as_str(),
            documentation: key.doc,
            group: key.display.and_then(|d| d.group),
            order_in_group: key.display.map_or(-1, |d| d.order),
            width: key.display.map_or(Width::None, |d| d.width).as_str(),
            display_name: key
                .display
                .map_or_else(|| name.to_string(), |d| d.label.to_string()),
            dependents: Vec::new(),
        }
    }
}

/// A property's value in a validation (Kafka Connect's ConfigValueInfo).
#[derive(Serialize)]
pub struct ConfigValueInfo {
    /// Its name.
    pub name: String,
    /// The value given, else its default; a secret's hidden.
    pub value: Option<String>,
    /// The values a form should offer.
    pub recommended_values: Vec<String>,
    /// What is wrong with it.
    pub errors: Vec<String>,
    /// Whether a form shows it.
    pub visible: bool,
}

impl ConfigInfos {
    /// The answer for `validation` of a config whose `connector.class` is `class`.
    pub fn of(class: &str, validation: &Validation) -> Self {
        let mut groups: Vec<&'static str> = Vec::new();
        for field in &validation.fields {
            if let Some(group) = field
                .key
                .as_ref()
                .and_then(|k| k.display)
                .and_then(|d| d.group)
            {
                if !groups.contains(&group) {
                    groups.push(group);
                }
            }
        }
        let configs = validation
            .fields
            .iter()
            .map(|field| {
                let given = field
                    .value
                    .as_ref()
                    .map(|v| ferry_meta::redact::redact_value(&field.name, v));
                let default = field
                    .key
                    .as_ref()
                    .and_then(|k| k.default)
                    .map(str::to_string);
                ConfigInfo {
                    definition: field
                        .key
                        .as_ref()
                        .map(|k| ConfigKeyInfo::of(&field.name, k)),
                    value: Some(ConfigValueInfo {
                        name: field.name.clone(),
                        value: given.or(default),
                        recommended_values: field.recommended.clone(),
                        errors: field.errors.clone(),
                        visible: true,
                    }),
                }
            })
            .collect();
        ConfigInfos {
            name: class.to_string(),
            error_count: validation.error_count(),
            groups,
            configs,
        }
    }
}
