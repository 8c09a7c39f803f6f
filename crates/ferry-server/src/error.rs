//! The one conversion from Ferry's errors to gRPC statuses. Codes are stable; the CLI maps
//! them to exit codes.

use ferry_meta::{MetaError, Rejection};
use tonic::{Code, Status};

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The state machine refused the command.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The request is malformed or the config does not validate.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Meta(#[from] MetaError),
}

impl From<ApiError> for Status {
    fn from(e: ApiError) -> Status {
        let code = match &e {
            ApiError::Rejected(r) => match r {
                Rejection::NotFound { .. } | Rejection::UnknownTask { .. } => Code::NotFound,
                Rejection::AlreadyExists { .. } => Code::AlreadyExists,
                Rejection::VersionMismatch { .. }
                | Rejection::StaleGeneration { .. }
                | Rejection::NotOwned { .. } => Code::Aborted,
                Rejection::StaleTaskConfigs { .. } => Code::Aborted,
                Rejection::NotStopped { .. }
                | Rejection::ClusterIdSet { .. }
                | Rejection::Unsupported { .. }
                | Rejection::NotEmpty { .. } => Code::FailedPrecondition,
            },
            ApiError::Invalid(_) => Code::InvalidArgument,
            ApiError::Meta(m) if m.is_retriable() => Code::Unavailable,
            ApiError::Meta(MetaError::Membership(_)) => Code::FailedPrecondition,
            ApiError::Meta(_) => Code::Internal,
        };
        Status::new(code, e.to_string())
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
