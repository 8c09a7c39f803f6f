//! `/connectors…`: Kafka Connect's ConnectorsResource over the management core.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use ferry_connect::Validation;
use ferry_meta::state::TargetState;
use ferry_proto::management as pb;
use serde_json::Value;

use super::entities::{ConnectorInfo, ConnectorState, Message, Offsets, UnitState};
use super::error::{Asked, RestError, RestResult};
use super::{config_map, json_body, Rest};
use crate::api::convert;
use crate::manage::{Put, Stored};

/// The routes of this resource.
pub fn routes() -> Router<Rest> {
    Router::new()
        .route("/connectors", get(list).post(create))
        .route("/connectors/{name}", get(info).delete(delete))
        .route(
            "/connectors/{name}/config",
            get(config).put(put_config).patch(patch_config),
        )
        .route("/connectors/{name}/status", get(status))
        .route("/connectors/{name}/restart", post(restart))
        .route("/connectors/{name}/pause", put(pause))
        .route("/connectors/{name}/resume", put(resume))
        .route("/connectors/{name}/stop", put(stop))
        .route("/connectors/{name}/tasks", get(tasks))
        .route("/connectors/{name}/tasks/{task}/status", get(task_status))
        .route(
            "/connectors/{name}/tasks/{task}/restart",
            post(restart_task),
        )
        .route(
            "/connectors/{name}/offsets",
            get(offsets).patch(alter_offsets).delete(reset_offsets),
        )
        .route("/connectors/{name}/topics", get(topics))
        .route("/connectors/{name}/topics/reset", put(reset_topics))
}

/// Kafka Connect's messages for a connector that does not exist, which differ by endpoint.
fn not_found(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("Connector {name} not found")
}

fn unknown(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("Unknown connector {name}")
}

fn unknown_colon(name: &str) -> impl FnOnce() -> String + '_ {
    move || format!("Unknown connector: {name}")
}

/// A linearizable read about connector `name`: `f`'s answer, or Kafka Connect's 404 "Connector
/// <name> not found" when `f` finds nothing.
async fn about<T>(
    rest: &Rest,
    name: &str,
    f: impl FnOnce(&ferry_meta::ClusterState) -> Option<T>,
) -> RestResult<T> {
    about_or(rest, name, Asked::Read, not_found(name), f).await
}

/// [`about`], with this endpoint's 404 message and kind of request.
async fn about_or<T>(
    rest: &Rest,
    name: &str,
    asked: Asked,
    missing: impl FnOnce() -> String,
    f: impl FnOnce(&ferry_meta::ClusterState) -> Option<T>,
) -> RestResult<T> {
    rest.core
        .read_connector(name, f)
        .await
        .map_err(|e| RestError::from_core(e, asked, missing))
}

/// A connector's status as the REST API shows it.
fn state_of(rest: &Rest, s: &ferry_meta::ClusterState, name: &str) -> Option<ConnectorState> {
    let plugin = s
        .connectors
        .get(name)
        .and_then(|c| rest.core.plugin_of(&c.config));
    ConnectorState::of(s, name, plugin.map(|p| p.kind()), plugin.map(|p| p.version))
}

/// A query parameter as Jersey reads a boolean: `true` in any case, anything else false.
fn flag(query: &[(String, String)], name: &str) -> bool {
    query
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .is_some_and(|(_, v)| v.eq_ignore_ascii_case("true"))
}

async fn list(
    State(rest): State<Rest>,
    Query(query): Query<Vec<(String, String)>>,
) -> RestResult<Response> {
    let expand: Vec<&str> = query
        .iter()
        .filter(|(k, _)| k == "expand")
        .map(|(_, v)| v.as_str())
        .collect();
    let core = &rest.core;
    let answer = core
        .read(|s| {
            if expand.is_empty() {
                return serde_json::to_value(s.connectors.keys().collect::<Vec<_>>());
            }
            let mut all = serde_json::Map::new();
            for (name, connector) in &s.connectors {
                let kind = core.kind_of(&connector.config);
                let mut one = serde_json::Map::new();
                for what in &expand {
                    match *what {
                        "status" => {
                            if let Some(status) = state_of(&rest, s, name) {
                                one.insert("status".into(), serde_json::to_value(status)?);
                            }
                        }
                        "info" => {
                            let info = ConnectorInfo::of(name, connector, kind);
                            one.insert("info".into(), serde_json::to_value(info)?);
                        }
                        _ => {}
                    }
                }
                all.insert(name.clone(), Value::Object(one));
            }
            Ok(Value::Object(all))
        })
        .await
        .map_err(|e| RestError::from_core(e, Asked::Read, String::new))?
        .map_err(|e| RestError::internal(e.to_string()))?;
    Ok(Json(answer).into_response())
}

/// Kafka Connect's 400 for a config that does not validate.
fn invalid(validation: &Validation) -> RestError {
    let errors: Vec<String> = validation
        .fields
        .iter()
        .flat_map(|f| f.errors.iter().cloned())
        .collect();
    invalid_errors(&errors)
}

fn invalid_errors(errors: &[String]) -> RestError {
    RestError::bad_request(format!(
        "Connector configuration is invalid and contains the following {} error(s):\n{}\nYou can \
         also find the above list of errors at the endpoint \
         `/connector-plugins/{{connectorType}}/config/validate`",
        errors.len(),
        errors.join("\n")
    ))
}

/// A config for a create or a replace: no `null` value (Kafka Connect refuses one in
/// validation), and a `name`, if given, equal to the connector's.
fn full_config(value: &Value, name: &str) -> RestResult<BTreeMap<String, String>> {
    let (config, nulls) = super::split_nulls(value)?;
    if !nulls.is_empty() {
        let errors = vec![super::NULL_VALUE.to_string(); nulls.len()];
        return Err(invalid_errors(&errors));
    }
    if let Some(given) = config.get("name").filter(|given| *given != name) {
        return Err(RestError::bad_request(format!(
            "Connector name configuration ({given}) doesn't match connector name in the URL ({name})"
        )));
    }
    Ok(config)
}

/// What Kafka Connect finds wrong with a config's `connector.class` before validating it.
pub(super) enum ClassProblem {
    /// The config has none.
    Missing(String),
    /// It names no plugin of this build.
    Unknown(String),
}

impl ClassProblem {
    /// What Kafka Connect says.
    pub(super) fn message(&self) -> &str {
        match self {
            ClassProblem::Missing(m) | ClassProblem::Unknown(m) => m,
        }
    }

    /// The answer to a create or replace: 400, naming Kafka Connect's exception for an
    /// unknown class.
    fn answer(self) -> RestError {
        match self {
            ClassProblem::Missing(m) => RestError::bad_request(m),
            ClassProblem::Unknown(m) => RestError::bad_request(format!(
                "org.apache.kafka.connect.errors.ConnectException: {m}"
            )),
        }
    }
}

/// The config's `connector.class`, if it names a plugin of this build.
pub(super) fn known_class(
    rest: &Rest,
    config: &BTreeMap<String, String>,
) -> Result<String, ClassProblem> {
    let Some(class) = config.get("connector.class") else {
        // Secrets stay hidden, here as everywhere.
        let shown: Vec<String> = config
            .iter()
            .map(|(k, v)| format!("{k}={}", ferry_meta::redact::redact_value(k, v)))
            .collect();
        return Err(ClassProblem::Missing(format!(
            "Connector config {{{}}} contains no connector type",
            shown.join(", ")
        )));
    };
    let plugins = rest.core.plugins();
    if ferry_connect::plugin::find(plugins, class).is_none() {
        let available: Vec<&str> = plugins.iter().map(|p| p.class).collect();
        return Err(ClassProblem::Unknown(format!(
            "Failed to find any class that implements Connector and which name matches {class}, \
             available connectors are: {}",
            available.join(", ")
        )));
    }
    Ok(class.clone())
}

/// Where a created connector is found.
fn location(headers: &HeaderMap, name: &str) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}/connectors/{}", encode_segment(name))
}

/// A path segment, percent-encoded.
fn encode_segment(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Store a config: 201 with its location when created, 200 when replaced.
async fn store(
    rest: &Rest,
    headers: &HeaderMap,
    name: &str,
    config: BTreeMap<String, String>,
    write: Put,
) -> RestResult<Response> {
    // Kafka Connect checks the class of the config with its name in it.
    let mut named = config.clone();
    named.insert("name".into(), name.to_string());
    known_class(rest, &named).map_err(ClassProblem::answer)?;
    let stored = rest
        .core
        .put(name, config, write, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, not_found(name)))?;
    match stored {
        Stored::Refused(validation) => Err(invalid(&validation)),
        Stored::Done(stored) => {
            let info = ConnectorInfo::of(&stored.name, &stored.connector, stored.kind);
            Ok(if stored.created {
                (
                    StatusCode::CREATED,
                    [(header::LOCATION, location(headers, &stored.name))],
                    Json(info),
                )
                    .into_response()
            } else {
                Json(info).into_response()
            })
        }
    }
}

async fn create(State(rest): State<Rest>, headers: HeaderMap, body: Bytes) -> RestResult<Response> {
    let body = json_body(&headers, &body)?;
    let name = match body.get("name") {
        Some(Value::String(name)) => name.trim_matches(|c: char| c <= ' ').to_string(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let Some(config) = body.get("config").filter(|c| !c.is_null()) else {
        return Err(RestError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: None,
        });
    };
    let config = full_config(config, &name)?;
    let write = Put {
        create: true,
        initial: initial_state(body.get("initial_state"))?,
        ..Put::default()
    };
    store(&rest, &headers, &name, config, write).await
}

/// KIP-980's `initial_state`: `RUNNING`, `PAUSED` or `STOPPED` in any case; absent or null,
/// running. Another value fails Kafka Connect's enum binding: 500.
fn initial_state(given: Option<&Value>) -> RestResult<Option<TargetState>> {
    match given {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match s.to_ascii_uppercase().as_str() {
            "RUNNING" => Ok(Some(TargetState::Running)),
            "PAUSED" => Ok(Some(TargetState::Paused)),
            "STOPPED" => Ok(Some(TargetState::Stopped)),
            _ => Err(RestError::internal(format!(
                "Cannot deserialize value of type `InitialState` from String {s:?}: not one of \
                 the values accepted for Enum class: [STOPPED, PAUSED, RUNNING]"
            ))),
        },
        Some(other) => Err(RestError::internal(format!(
            "Cannot deserialize value of type `InitialState` from {}",
            super::json_kind(other)
        ))),
    }
}

async fn info(
    State(rest): State<Rest>,
    Path(name): Path<String>,
) -> RestResult<Json<ConnectorInfo>> {
    let info = about(&rest, &name, |s| {
        let c = s.connectors.get(&name)?;
        Some(ConnectorInfo::of(&name, c, rest.core.kind_of(&c.config)))
    })
    .await?;
    Ok(Json(info))
}

async fn delete(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<StatusCode> {
    rest.core
        .delete(&name, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, not_found(&name)))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn config(
    State(rest): State<Rest>,
    Path(name): Path<String>,
) -> RestResult<Json<BTreeMap<String, String>>> {
    let config = about(&rest, &name, |s| {
        s.connectors.get(&name).map(|c| c.config.redacted())
    })
    .await?;
    Ok(Json(config))
}

async fn put_config(
    State(rest): State<Rest>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> RestResult<Response> {
    let body = json_body(&headers, &body)?;
    let config = full_config(&body, &name)?;
    store(&rest, &headers, &name, config, Put::default()).await
}

/// KIP-477: the stored config with the given properties changed (`null` removes one), stored
/// if nobody changed it meanwhile.
async fn patch_config(
    State(rest): State<Rest>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> RestResult<Response> {
    let body = json_body(&headers, &body)?;
    let patch = config_map(&body)?;
    let (mut config, version) = about(&rest, &name, |s| {
        s.connectors
            .get(&name)
            .map(|c| (c.config.0.clone(), c.version))
    })
    .await?;
    for (k, v) in patch {
        match v {
            Some(v) => config.insert(k, v),
            None => config.remove(&k),
        };
    }
    // The connector exists (at `version`): this is an update, answered 200.
    let write = Put {
        expected_version: Some(version),
        ..Put::default()
    };
    store(&rest, &headers, &name, config, write).await
}

async fn status(
    State(rest): State<Rest>,
    Path(name): Path<String>,
) -> RestResult<Json<ConnectorState>> {
    let missing = || format!("No status found for connector {name}");
    let status = about_or(&rest, &name, Asked::Read, missing, |s| {
        state_of(&rest, s, &name)
    })
    .await?;
    Ok(Json(status))
}

/// KIP-745: without flags, the connector instance restarts (204); with any, the restart is
/// planned and the plan answered (202): what restarts shown RESTARTING.
async fn restart(
    State(rest): State<Rest>,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> RestResult<Response> {
    let include_tasks = flag(&query, "includeTasks");
    let only_failed = flag(&query, "onlyFailed");
    let before = about_or(&rest, &name, Asked::Write, unknown_colon(&name), |s| {
        state_of(&rest, s, &name)
    })
    .await?;
    rest.core
        .restart(&name, include_tasks, only_failed, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, unknown_colon(&name)))?;
    if !include_tasks && !only_failed {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let restarts = |unit: &UnitState| !only_failed || unit.state == "FAILED";
    let mut plan = before;
    if restarts(&plan.connector) {
        plan.connector.state = "RESTARTING".into();
    }
    for task in &mut plan.tasks {
        if include_tasks && restarts(task) {
            task.state = "RESTARTING".into();
        }
    }
    Ok((StatusCode::ACCEPTED, Json(plan)).into_response())
}

async fn target(
    rest: &Rest,
    name: &str,
    target: TargetState,
    answer: StatusCode,
) -> RestResult<StatusCode> {
    rest.core
        .set_target(name, target, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, unknown(name)))?;
    Ok(answer)
}

async fn pause(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<StatusCode> {
    target(&rest, &name, TargetState::Paused, StatusCode::ACCEPTED).await
}

async fn resume(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<StatusCode> {
    target(&rest, &name, TargetState::Running, StatusCode::ACCEPTED).await
}

async fn stop(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<StatusCode> {
    target(&rest, &name, TargetState::Stopped, StatusCode::NO_CONTENT).await
}

async fn tasks(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<Response> {
    let tasks = about(&rest, &name, |s| {
        let connector = s.connectors.get(&name)?;
        if !super::entities::lists_tasks(connector.target) {
            return Some(Vec::new());
        }
        let plugin = rest.core.plugin_of(&connector.config);
        super::entities::tasks(s, &name, plugin.map(|p| p.task_class))
    })
    .await?;
    Ok(Json(tasks).into_response())
}

/// A task id from the path: Kafka Connect answers a non-number with its plain 404.
fn task_id(task: &str) -> RestResult<u32> {
    task.parse()
        .map_err(|_| RestError::not_found("HTTP 404 Not Found"))
}

async fn task_status(
    State(rest): State<Rest>,
    Path((name, task)): Path<(String, String)>,
) -> RestResult<Json<UnitState>> {
    let id = task_id(&task)?;
    let missing = || format!("No status found for task {name}-{id}");
    let status = about_or(&rest, &name, Asked::Read, missing, |s| {
        state_of(&rest, s, &name)?
            .tasks
            .into_iter()
            .find(|t| t.id == Some(id))
    })
    .await?;
    Ok(Json(status))
}

async fn restart_task(
    State(rest): State<Rest>,
    Path((name, task)): Path<(String, String)>,
) -> RestResult<StatusCode> {
    let id = task_id(&task)?;
    rest.core
        .restart_task(&name, id, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, unknown_colon(&name)))?;
    Ok(StatusCode::NO_CONTENT)
}

async fn offsets(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<Json<Offsets>> {
    let offsets = about(&rest, &name, |s| {
        s.connectors
            .contains_key(&name)
            .then(|| Offsets::of(s, &name))
    })
    .await?;
    Ok(Json(offsets))
}

/// KIP-875 alter: the body's offsets, checked before the connector is looked up.
async fn alter_offsets(
    State(rest): State<Rest>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> RestResult<Json<Message>> {
    let body = json_body(&headers, &body)?;
    let entries = match body.get("offsets") {
        Some(Value::Array(entries)) if !entries.is_empty() => entries.clone(),
        Some(Value::Array(_)) | Some(Value::Null) | None => {
            return Err(RestError::bad_request(
                "Partitions / offsets need to be provided for an alter offsets request",
            ))
        }
        Some(other) => {
            return Err(RestError::internal(format!(
                "Cannot deserialize value of type `java.util.ArrayList` from {}",
                super::json_kind(other)
            )))
        }
    };
    let mut offsets = Vec::new();
    for entry in &entries {
        let Value::Object(entry) = entry else {
            return Err(RestError::internal(format!(
                "Cannot deserialize value of type `ConnectorOffset` from {}",
                super::json_kind(entry)
            )));
        };
        let text = |key: &str| entry.get(key).map_or_else(String::new, Value::to_string);
        offsets.push(pb::ConnectorOffset {
            partition_json: text("partition"),
            offset_json: text("offset"),
        });
    }
    rest.core
        .alter_offsets(&name, "", |kind| convert::parse_offsets(kind, &offsets))
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, not_found(&name)))?;
    Ok(Json(Message {
        message: "The offsets for this connector have been altered successfully".into(),
    }))
}

async fn reset_offsets(
    State(rest): State<Rest>,
    Path(name): Path<String>,
) -> RestResult<Json<Message>> {
    rest.core
        .reset_offsets(&name, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, not_found(&name)))?;
    Ok(Json(Message {
        message: "The offsets for this connector have been reset successfully".into(),
    }))
}

/// Kafka Connect's answer while topic tracking is off (`topic.tracking.enable=false`).
fn tracking_off() -> RestError {
    RestError::new(StatusCode::FORBIDDEN, "Topic tracking is disabled.")
}

/// KIP-558: the topics the connector's tasks used, `{"<name>": {"topics": [...]}}`.
async fn topics(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<Response> {
    if !rest.topic_tracking.enable {
        return Err(tracking_off());
    }
    let topics = rest
        .core
        .active_topics(&name)
        .await
        .map_err(|e| RestError::from_core(e, Asked::Read, not_found(&name)))?;
    Ok(Json(serde_json::json!({ name: { "topics": topics } })).into_response())
}

/// KIP-558: forget the connector's active topics; 202 without a body, as Kafka Connect.
async fn reset_topics(
    State(rest): State<Rest>,
    Path(name): Path<String>,
) -> RestResult<StatusCode> {
    if !rest.topic_tracking.enable {
        return Err(tracking_off());
    }
    if !rest.topic_tracking.allow_reset {
        return Err(RestError::new(
            StatusCode::FORBIDDEN,
            "Topic tracking reset is disabled.",
        ));
    }
    rest.core
        .reset_topics(&name, "")
        .await
        .map_err(|e| RestError::from_core(e, Asked::Write, not_found(&name)))?;
    Ok(StatusCode::ACCEPTED)
}
