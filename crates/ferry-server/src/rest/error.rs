//! Kafka Connect's errors: `{"error_code": <HTTP status>, "message": …}`, with the status and
//! the message Kafka Connect gives in each case, from the management core's errors.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use ferry_meta::{MetaError, Rejection};
use serde::Serialize;

use crate::error::ApiError;

/// An error answer.
#[derive(Debug)]
pub struct RestError {
    /// Its status.
    pub status: StatusCode,
    /// Its message (Kafka Connect's `null` for `None`).
    pub message: Option<String>,
}

/// What was asked when an error happened: Kafka Connect answers a write that finds no leader
/// with 409 ("try again") and a read with 500.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Asked {
    /// A read of the state.
    Read,
    /// A write through the leader.
    Write,
}

/// Kafka Connect's message when a forwarded write finds no leader.
pub const NO_LEADER: &str = "Cannot complete request momentarily due to no known leader URL, \
                             likely because a rebalance was underway.";
/// Kafka Connect's message when a read cannot be answered during a rebalance.
pub const REBALANCING: &str = "Request cannot be completed because a rebalance is expected";

#[derive(Serialize)]
struct ErrorBody<'a> {
    error_code: u16,
    message: Option<&'a str>,
}

impl RestError {
    /// An error of this status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        RestError {
            status,
            message: Some(message.into()),
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        RestError::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        RestError::new(StatusCode::NOT_FOUND, message)
    }

    /// 500, as Kafka Connect answers what its JSON binding refuses and any unexpected failure.
    pub fn internal(message: impl Into<String>) -> Self {
        RestError::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    /// The answer to a core error, `not_found` giving the message of this endpoint's 404.
    pub fn from_core(e: ApiError, asked: Asked, not_found: impl FnOnce() -> String) -> Self {
        match e {
            ApiError::Rejected(r) => match r {
                Rejection::NotFound { .. } => RestError::not_found(not_found()),
                Rejection::UnknownTask { name, task } => {
                    RestError::not_found(format!("Unknown task: {name}-{task}"))
                }
                Rejection::AlreadyExists { name } => RestError::new(
                    StatusCode::CONFLICT,
                    format!("Connector {name} already exists"),
                ),
                Rejection::NotStopped { name, .. } => RestError::bad_request(format!(
                    "Connectors must be in the STOPPED state before their offsets can be modified. \
                     This can be done for the specified connector by issuing a 'PUT' request to \
                     the '/connectors/{name}/stop' endpoint"
                )),
                Rejection::VersionMismatch { .. }
                | Rejection::StaleGeneration { .. }
                | Rejection::NotOwned { .. }
                | Rejection::StaleTaskConfigs { .. } => {
                    RestError::new(StatusCode::CONFLICT, r.to_string())
                }
                Rejection::Unsupported { .. }
                | Rejection::ClusterIdSet { .. }
                | Rejection::NotEmpty { .. } => RestError::internal(r.to_string()),
            },
            ApiError::Invalid(message) => RestError::bad_request(message),
            ApiError::Meta(MetaError::TooLarge { .. }) => RestError::bad_request(e.to_string()),
            ApiError::Meta(m) if m.is_retriable() => match asked {
                Asked::Write => RestError::new(StatusCode::CONFLICT, NO_LEADER),
                Asked::Read => RestError::internal(REBALANCING),
            },
            ApiError::Meta(_) | ApiError::Kafka(_) => RestError::internal(e.to_string()),
        }
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error_code: self.status.as_u16(),
            message: self.message.as_deref(),
        };
        (self.status, Json(body)).into_response()
    }
}

/// What a handler answers.
pub type RestResult<T> = Result<T, RestError>;
