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

pub type Raft = openraft::Raft<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Entry = openraft::Entry<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, FerryNode>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, FerryNode>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type Vote = openraft::Vote<NodeId>;
