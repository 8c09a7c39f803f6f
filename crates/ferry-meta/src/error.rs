//! Errors of the control plane.

use crate::types::NodeId;

/// A result whose error is a [`MetaError`] by default.
pub type Result<T, E = MetaError> = std::result::Result<T, E>;

/// What the control plane could not do.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// The storage failed.
    #[error("storage: cannot {what}: {source}")]
    Storage {
        /// What it was doing.
        what: String,
        /// Why it failed.
        #[source]
        source: sled::Error,
    },
    /// What was read is not what was written.
    #[error("storage: {what} is corrupt: {reason}")]
    Corrupt {
        /// What was read.
        what: String,
        /// What is wrong with it.
        reason: String,
    },
    /// No leader could be reached before the deadline; retriable.
    #[error("no leader reachable within {waited_ms} ms (last problem: {last})")]
    Unavailable {
        /// How long it tried.
        waited_ms: u128,
        /// The last problem it met.
        last: String,
    },
    /// A peer did not answer.
    #[error("cannot reach node {node} at {addr}: {reason}")]
    Unreachable {
        /// The peer.
        node: NodeId,
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Raft failed.
    #[error("raft: {0}")]
    Raft(String),
    /// The leader refused a membership change.
    #[error("refused by the leader: {0}")]
    Membership(String),
    /// A message or a stored value could not be decoded.
    #[error("cannot decode {what}: {reason}")]
    Codec {
        /// What.
        what: String,
        /// Why.
        reason: String,
    },
    /// A write larger than the node's entry limit: refused before it reaches Raft.
    #[error(
        "the {what} write{for_connector} would be a Raft entry of {bytes} bytes, over the limit \
         of {limit} bytes ([limits] max_entry_bytes)",
        for_connector = connector.as_ref().map(|c| format!(" for connector {c}")).unwrap_or_default()
    )]
    TooLarge {
        /// The kind of write.
        what: &'static str,
        /// The connector it was for, if any.
        connector: Option<String>,
        /// The size of the entry it would be.
        bytes: usize,
        /// The limit.
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
