//! Errors of the control plane.

use crate::types::NodeId;

pub type Result<T, E = MetaError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("storage: cannot {what}: {source}")]
    Storage {
        what: String,
        #[source]
        source: sled::Error,
    },
    #[error("storage: {what} is corrupt: {reason}")]
    Corrupt { what: String, reason: String },
    /// No leader could be reached before the deadline; retriable.
    #[error("no leader reachable within {waited_ms} ms (last problem: {last})")]
    Unavailable { waited_ms: u128, last: String },
    #[error("cannot reach node {node} at {addr}: {reason}")]
    Unreachable {
        node: NodeId,
        addr: String,
        reason: String,
    },
    #[error("raft: {0}")]
    Raft(String),
    #[error("refused by the leader: {0}")]
    Membership(String),
    #[error("cannot decode {what}: {reason}")]
    Codec { what: String, reason: String },
    /// A write larger than the node's entry limit: refused before it reaches Raft.
    #[error(
        "the {what} write{for_connector} would be a Raft entry of {bytes} bytes, over the limit \
         of {limit} bytes ([limits] max_entry_bytes)",
        for_connector = connector.as_ref().map(|c| format!(" for connector {c}")).unwrap_or_default()
    )]
    TooLarge {
        what: &'static str,
        connector: Option<String>,
        bytes: usize,
        limit: usize,
    },
}

impl MetaError {
    /// Whether the same call may succeed if tried again later.
    pub fn is_retriable(&self) -> bool {
        matches!(
            self,
            MetaError::Unavailable { .. } | MetaError::Unreachable { .. }
        )
    }
}
