//! The openraft type configuration of Ferry's Raft group.

use std::io::Cursor;

use crate::state::{FerryNode, Request, Response};

/// Node ids come from `cluster.toml` and are never reused for a different machine.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// Ferry's Raft types: log entries carry a [`Request`], applying one answers a [`Response`].
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = NodeId,
        Node = FerryNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// Ferry's Raft instance.
pub type Raft = openraft::Raft<TypeConfig>;
/// A log id.
pub type LogId = openraft::LogId<NodeId>;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A storage error, as openraft has it.
pub type StorageError = openraft::StorageError<NodeId>;
/// A stored membership.
pub type StoredMembership = openraft::StoredMembership<NodeId, FerryNode>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, FerryNode>;
/// A snapshot.
pub type Snapshot = openraft::Snapshot<TypeConfig>;
/// A vote.
pub type Vote = openraft::Vote<NodeId>;
