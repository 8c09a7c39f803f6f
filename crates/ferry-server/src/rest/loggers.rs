//! `/admin/loggers` (KIP-495): this node's log levels, read and changed at run time.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::Value;

use super::error::{Asked, RestError, RestResult};
use super::{json_body, Rest};
use crate::loggers::{is_target, parse_level, LoggerLevel};

pub(super) fn routes() -> Router<Rest> {
    Router::new()
        .route("/admin/loggers", get(all))
        .route("/admin/loggers/{name}", get(one).put(set))
}

/// A logger's level (Kafka Connect's LoggerLevel).
#[derive(Serialize)]
struct Level {
    level: &'static str,
    last_modified: Option<u64>,
}

impl From<LoggerLevel> for Level {
    fn from(l: LoggerLevel) -> Self {
        Level {
            level: l.level,
            last_modified: l.last_modified,
        }
    }
}

async fn all(State(rest): State<Rest>) -> Json<BTreeMap<String, Level>> {
    Json(
        rest.loggers
            .all()
            .into_iter()
            .map(|(name, level)| (name, level.into()))
            .collect(),
    )
}

/// A logger's level: its own, else its closest ancestor's (every `tracing` target is a
/// logger; Ferry cannot tell which have logged).
async fn one(State(rest): State<Rest>, Path(name): Path<String>) -> RestResult<Json<Level>> {
    if !is_target(&name) {
        return Err(RestError::not_found(format!("Logger {name} not found.")));
    }
    Ok(Json(rest.loggers.of(&name).into()))
}

async fn set(
    State(rest): State<Rest>,
    Path(name): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
    headers: HeaderMap,
    body: Bytes,
) -> RestResult<Response> {
    let body = json_body(&headers, &body)?;
    let Some(asked) = body.get("level").and_then(Value::as_str) else {
        return Err(RestError::bad_request(
            "Desired 'level' parameter was not specified in request.",
        ));
    };
    let Some(level) = parse_level(asked) else {
        return Err(RestError::not_found(format!(
            "invalid log level '{asked}'."
        )));
    };
    if !is_target(&name) {
        return Err(RestError::not_found(format!("Logger {name} not found.")));
    }
    // `worker` is the default, and any scope but `cluster` counts as it (Kafka Connect's rule).
    let scope = query
        .iter()
        .rev()
        .find(|(k, _)| k == "scope")
        .map(|(_, v)| v.as_str());
    if scope.is_some_and(|s| s.eq_ignore_ascii_case("cluster")) {
        // Every node applies it as it learns of it; the answer says nothing about which.
        rest.core
            .set_cluster_log_level(&name, level, "")
            .await
            .map_err(|e| RestError::from_core(e, Asked::Write, || name.clone()))?;
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let changed = rest
        .loggers
        .set(&name, level)
        .map_err(RestError::internal)?;
    Ok(Json(serde_json::json!(changed)).into_response())
}
