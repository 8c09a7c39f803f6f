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
    /// Kafka did not do what the call needs of it.
    #[error("{0}")]
    Kafka(String),
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
            ApiError::Invalid(_) | ApiError::Meta(MetaError::TooLarge { .. }) => {
                Code::InvalidArgument
            }
            ApiError::Meta(m) if m.is_retriable() => Code::Unavailable,
            ApiError::Kafka(_) => Code::Unavailable,
            ApiError::Meta(MetaError::Membership(_)) => Code::FailedPrecondition,
            ApiError::Meta(_) => Code::Internal,
        };
        Status::new(code, capped(e.to_string()))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// A status message travels in an HTTP/2 header, whose size is limited: anything that can be
/// long (validation results) is a field of the response instead, and a message that is long
/// all the same (it quotes a client's long value) is cut to this many bytes.
pub const MAX_STATUS_MESSAGE: usize = 2048;

fn capped(mut message: String) -> String {
    if message.len() <= MAX_STATUS_MESSAGE {
        return message;
    }
    let total = message.len();
    let mut end = MAX_STATUS_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(&format!("… [{} more bytes]", total - end));
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_message_is_cut_on_a_character_boundary_and_says_so() {
        let long = "é".repeat(MAX_STATUS_MESSAGE);
        let status = Status::from(ApiError::Invalid(long.clone()));
        assert!(status.message().len() < MAX_STATUS_MESSAGE + 32);
        assert!(
            status
                .message()
                .ends_with(&format!("… [{} more bytes]", long.len() - 2048)),
            "{}",
            &status.message()[2000..]
        );
        let short = Status::from(ApiError::Invalid("tasks.max: bad".into()));
        assert_eq!(short.message(), "tasks.max: bad");
    }
}
