//! The server side of the peer service, and the messages Ferry adds to Raft's: proposals
//! forwarded from a follower to the leader, read-index requests, and bootstrap probes.

use ferry_proto::peer::peer_server::{Peer, PeerServer};
use ferry_proto::peer::RaftPayload;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tonic::{Request as GrpcRequest, Response as GrpcResponse, Status};

use crate::node::MetaNode;
use crate::peer_client::MAX_MESSAGE_BYTES;
use crate::state::{FerryNode, Request, Response};
use crate::types::NodeId;

/// The calls of the peer service.
#[derive(Clone, Copy, Debug)]
pub enum PeerCall {
    /// Raft's log replication.
    AppendEntries,
    /// Raft's vote request.
    Vote,
    /// Raft's snapshot transfer.
    InstallSnapshot,
    /// A proposal forwarded to the leader.
    Forward,
    /// The leader's read index.
    ReadIndex,
    /// A bootstrap probe.
    Probe,
    /// A worker's heartbeat.
    Heartbeat,
}

/// A worker's heartbeat to the leader.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Heartbeat {
    /// The worker's node id.
    pub worker: NodeId,
    /// What the worker's node started with (see `crate::heal`).
    #[serde(default)]
    pub boot: Option<crate::heal::Boot>,
    /// The worker is stopping (SIGTERM): it gets no new units, and the ones it has are
    /// released by it as soon as their final commits are in.
    #[serde(default)]
    pub leaving: bool,
}

/// The leader's answer: `acked` only while it has heard from a quorum recently, so that a
/// deposed leader in a minority cannot keep its workers' leases alive. `applied` is the
/// leader's applied log index when it answered: a worker taking a new lease first applies that
/// far, so that it sees every move of its tasks the leader made while it was away.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct HeartbeatReply {
    /// Whether the heartbeat renews the worker's lease.
    pub acked: bool,
    /// The leader's applied log index.
    #[serde(default)]
    pub applied: Option<u64>,
    /// The worker is not in the leader's membership: it was removed from the cluster.
    #[serde(default)]
    pub removed: bool,
}

/// Something only the leader can do.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub enum Proposal {
    /// A write to the replicated state.
    Write(Request),
    /// Add a node as a learner, then promote it to voter while there are fewer than
    /// `target_voters` voters.
    AddNode {
        /// The new node's id.
        id: NodeId,
        /// Its addresses.
        node: FerryNode,
        /// How many voters the cluster aims at.
        target_voters: usize,
    },
    /// Demote and remove a node.
    RemoveNode {
        /// The node.
        id: NodeId,
    },
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Proposal::Write(request) => write!(f, "write {request}"),
            Proposal::AddNode { id, node, .. } => write!(f, "add node {id} ({node})"),
            Proposal::RemoveNode { id } => write!(f, "remove node {id}"),
        }
    }
}

/// What the leader answered to a proposal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProposalReply {
    /// For a write, the state machine's answer; membership changes answer `Ok(Done)`.
    pub answer: Response,
    /// The log index of the (last) entry the proposal produced.
    pub log_index: u64,
}

/// Why a node could not carry out a proposal.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, thiserror::Error)]
pub enum ProposalError {
    /// Try the leader (if known).
    #[error("node is not the leader (leader: {leader:?})")]
    NotLeader {
        /// The leader this node knows of.
        leader: Option<NodeId>,
    },
    /// The proposal is wrong and retrying will not help.
    #[error("{0}")]
    Refused(String),
    /// Retriable: a quorum could not be reached in time, or the node is shutting down.
    #[error("{0}")]
    Unavailable(String),
}

/// The leader's read index: the log index a read must see applied to be linearizable.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ReadIndexReply {
    /// The index.
    pub index: Option<u64>,
}

/// What a node says about itself during bootstrap.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ProbeReply {
    /// Its node id.
    pub node_id: NodeId,
    /// The node has Raft state: it belongs to a cluster (or initialized one).
    pub initialized: bool,
    /// The id of its cluster, if it has one.
    pub cluster_id: Option<String>,
    /// The leader it knows of.
    pub leader: Option<NodeId>,
    /// The incarnation of its data (see `crate::heal`).
    #[serde(default)]
    pub incarnation: String,
}

/// The peer service of one node.
pub struct PeerService {
    node: MetaNode,
}

impl PeerService {
    /// The gRPC server of the peer service of `node`.
    pub fn server(node: MetaNode) -> PeerServer<PeerService> {
        PeerServer::new(PeerService { node })
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES)
    }
}

fn decode<T: DeserializeOwned>(request: GrpcRequest<RaftPayload>) -> Result<T, Status> {
    serde_json::from_slice(&request.into_inner().data)
        .map_err(|e| Status::invalid_argument(format!("undecodable peer request: {e}")))
}

fn encode<T: Serialize>(reply: &T) -> Result<GrpcResponse<RaftPayload>, Status> {
    let data = serde_json::to_vec(reply)
        .map_err(|e| Status::internal(format!("cannot encode peer reply: {e}")))?;
    Ok(GrpcResponse::new(RaftPayload { data }))
}

#[tonic::async_trait]
impl Peer for PeerService {
    async fn append_entries(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let rpc = decode(request)?;
        encode(&self.node.raft().append_entries(rpc).await)
    }

    async fn vote(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let rpc: openraft::raft::VoteRequest<NodeId> = decode(request)?;
        let standing = self.node.standing();
        if !standing.may_vote() {
            let m = self.node.raft().metrics().borrow().clone();
            tracing::info!(candidate = %rpc.vote, reason = %standing.reason(&self.node.boot().incarnation), "vote refused");
            let refusal: Result<
                openraft::raft::VoteResponse<NodeId>,
                openraft::error::RaftError<NodeId>,
            > = Ok(openraft::raft::VoteResponse {
                vote: m.vote,
                vote_granted: false,
                last_log_id: None,
            });
            return encode(&refusal);
        }
        encode(&self.node.raft().vote(rpc).await)
    }

    async fn install_snapshot(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let rpc = decode(request)?;
        encode(&self.node.raft().install_snapshot(rpc).await)
    }

    async fn forward(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let proposal: Proposal = decode(request)?;
        encode(&self.node.propose_local(&proposal).await)
    }

    async fn read_index(
        &self,
        _request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        encode(&self.node.read_index_local().await)
    }

    async fn heartbeat(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let beat: Heartbeat = decode(request)?;
        encode(&self.node.receive_heartbeat(&beat))
    }

    async fn probe(
        &self,
        request: GrpcRequest<RaftPayload>,
    ) -> Result<GrpcResponse<RaftPayload>, Status> {
        let invitation: Option<std::collections::BTreeMap<NodeId, FerryNode>> = decode(request)?;
        let reply: Result<ProbeReply, String> =
            self.node.probe(invitation).await.map_err(|e| e.to_string());
        encode(&reply)
    }
}
