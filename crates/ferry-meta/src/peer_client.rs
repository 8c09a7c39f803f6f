//! The client side of the peer service: openraft's network (append entries, vote, snapshots)
//! and the calls Ferry adds (forwarded proposals, read index, bootstrap probes). Payloads are
//! JSON; transport failures become `Unreachable` so that openraft backs off.

use std::time::Duration;

use ferry_proto::peer::peer_client::PeerClient as GrpcPeerClient;
use ferry_proto::peer::RaftPayload;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use crate::error::MetaError;
use crate::peer::{PeerCall, ProbeReply, Proposal, ProposalReply, ReadIndexReply};
use crate::state::FerryNode;
use crate::types::{NodeId, TypeConfig};

/// Largest peer message: a chunk of snapshot or a batch of entries fits well below.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How long to wait for a TCP connection to a peer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// A client of one peer's service, over two connections: one for calls that carry data
/// (entries, snapshots, forwarded writes) and one for the small calls that keep the cluster
/// alive (votes, heartbeats, read indexes), so that those never queue behind a large message.
#[derive(Clone)]
pub struct PeerClient {
    node: NodeId,
    addr: String,
    bulk: GrpcPeerClient<Channel>,
    urgent: GrpcPeerClient<Channel>,
}

/// Which of a peer's two connections a call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lane {
    /// Entries, snapshots, forwarded writes: as large as a write may be.
    Bulk,
    /// Votes, heartbeats (Raft's and the workers'), read indexes, probes: small and urgent.
    Urgent,
}

impl PeerCall {
    /// The connection a call takes (an empty append, Raft's heartbeat, is urgent too: see
    /// [`Connection::append_entries`]).
    pub fn lane(self) -> Lane {
        match self {
            PeerCall::AppendEntries | PeerCall::InstallSnapshot | PeerCall::Forward => Lane::Bulk,
            PeerCall::Vote | PeerCall::ReadIndex | PeerCall::Probe | PeerCall::Heartbeat => {
                Lane::Urgent
            }
        }
    }
}

/// Why a peer call failed.
#[derive(Debug)]
pub enum CallError<E> {
    /// The peer could not be reached, or did not answer in time.
    Transport(String),
    /// The peer answered something that does not decode (a version mismatch or a bug).
    Decode(String),
    /// The peer answered with an error.
    Remote(E),
}

impl PeerClient {
    /// A lazily connecting client: nothing is sent until the first call.
    pub fn new(node: NodeId, addr: &str) -> Result<Self, MetaError> {
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| MetaError::Unreachable {
                node,
                addr: addr.to_string(),
                reason: format!("invalid address: {e}"),
            })?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        let client = || {
            GrpcPeerClient::new(endpoint.connect_lazy())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES)
        };
        Ok(PeerClient {
            node,
            addr: addr.to_string(),
            bulk: client(),
            urgent: client(),
        })
    }

    /// The peer's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The peer's node id.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// One call on its lane: encode, send with a deadline, decode `Result<T, E>`.
    pub async fn call<Q, T, E>(
        &self,
        call: PeerCall,
        request: &Q,
        timeout: Duration,
    ) -> Result<T, CallError<E>>
    where
        Q: Serialize,
        T: DeserializeOwned,
        E: DeserializeOwned,
    {
        self.call_on(call.lane(), call, request, timeout).await
    }

    /// One call on the given lane.
    pub async fn call_on<Q, T, E>(
        &self,
        lane: Lane,
        call: PeerCall,
        request: &Q,
        timeout: Duration,
    ) -> Result<T, CallError<E>>
    where
        Q: Serialize,
        T: DeserializeOwned,
        E: DeserializeOwned,
    {
        let data = serde_json::to_vec(request).map_err(|e| CallError::Decode(e.to_string()))?;
        let mut req = tonic::Request::new(RaftPayload { data });
        req.set_timeout(timeout);
        let mut client = match lane {
            Lane::Bulk => self.bulk.clone(),
            Lane::Urgent => self.urgent.clone(),
        };
        let reply = match call {
            PeerCall::AppendEntries => client.append_entries(req).await,
            PeerCall::Vote => client.vote(req).await,
            PeerCall::InstallSnapshot => client.install_snapshot(req).await,
            PeerCall::Forward => client.forward(req).await,
            PeerCall::ReadIndex => client.read_index(req).await,
            PeerCall::Probe => client.probe(req).await,
            PeerCall::Heartbeat => client.heartbeat(req).await,
        };
        let reply = reply.map_err(|status| {
            CallError::Transport(format!("{}: {}", status.code(), status.message()))
        })?;
        let decoded: Result<T, E> = serde_json::from_slice(&reply.into_inner().data)
            .map_err(|e| CallError::Decode(format!("undecodable reply: {e}")))?;
        decoded.map_err(CallError::Remote)
    }

    /// Ask a peer about itself; with an invitation, the voters this node is about to start a
    /// new cluster with.
    pub async fn probe(
        &self,
        invitation: Option<&std::collections::BTreeMap<NodeId, FerryNode>>,
        timeout: Duration,
    ) -> Result<ProbeReply, CallError<String>> {
        self.call(PeerCall::Probe, &invitation, timeout).await
    }

    /// Forward a proposal to the leader.
    pub async fn propose(
        &self,
        proposal: &Proposal,
        timeout: Duration,
    ) -> Result<ProposalReply, CallError<crate::peer::ProposalError>> {
        self.call(PeerCall::Forward, proposal, timeout).await
    }

    /// Send a worker's heartbeat to the leader.
    pub async fn heartbeat(
        &self,
        beat: &crate::peer::Heartbeat,
        timeout: Duration,
    ) -> Result<crate::peer::HeartbeatReply, CallError<crate::peer::ProposalError>> {
        self.call(PeerCall::Heartbeat, beat, timeout).await
    }

    /// Ask the leader for its read index.
    pub async fn read_index(
        &self,
        timeout: Duration,
    ) -> Result<ReadIndexReply, CallError<crate::peer::ProposalError>> {
        self.call(PeerCall::ReadIndex, &(), timeout).await
    }

    async fn raft_call<Q, T, E>(
        &self,
        lane: Lane,
        call: PeerCall,
        request: &Q,
        option: &RPCOption,
    ) -> Result<T, RPCError<NodeId, FerryNode, E>>
    where
        Q: Serialize,
        T: DeserializeOwned,
        E: DeserializeOwned + std::error::Error,
    {
        match self
            .call_on::<Q, T, E>(lane, call, request, option.hard_ttl())
            .await
        {
            Ok(reply) => Ok(reply),
            Err(CallError::Remote(e)) => Err(RPCError::RemoteError(RemoteError::new(self.node, e))),
            Err(CallError::Transport(reason)) => {
                let error = std::io::Error::other(format!("{}: {reason}", self.addr));
                Err(RPCError::Unreachable(Unreachable::new(&error)))
            }
            Err(CallError::Decode(reason)) => {
                let error = std::io::Error::other(format!("{}: {reason}", self.addr));
                Err(RPCError::Network(NetworkError::new(&error)))
            }
        }
    }
}

/// openraft's network factory: one [`PeerClient`] per target.
#[derive(Clone, Default)]
pub struct Network {
    /// Test only: addresses that replace the membership's for some peers (a fault-injection
    /// proxy in between).
    pub overrides: std::sync::Arc<std::collections::BTreeMap<NodeId, String>>,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &FerryNode) -> Self::Network {
        let addr = self.overrides.get(&target).unwrap_or(&node.raft_addr);
        Connection {
            client: PeerClient::new(target, addr).map_err(|e| e.to_string()),
        }
    }
}

/// A connection to one peer; an invalid address fails every call as unreachable.
pub struct Connection {
    client: Result<PeerClient, String>,
}

fn unreachable<E: std::error::Error>(reason: &str) -> RPCError<NodeId, FerryNode, E> {
    RPCError::Unreachable(Unreachable::new(&std::io::Error::other(reason.to_string())))
}

impl RaftNetwork<TypeConfig> for Connection {
    /// An append without entries is Raft's heartbeat: it takes the urgent lane, so that a
    /// snapshot or a large forwarded write on the bulk lane never delays it.
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, FerryNode, RaftError<NodeId>>> {
        let lane = if rpc.entries.is_empty() {
            Lane::Urgent
        } else {
            Lane::Bulk
        };
        match &self.client {
            Ok(client) => {
                client
                    .raft_call(lane, PeerCall::AppendEntries, &rpc, &option)
                    .await
            }
            Err(reason) => Err(unreachable(reason)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, FerryNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        match &self.client {
            Ok(client) => {
                client
                    .raft_call(Lane::Bulk, PeerCall::InstallSnapshot, &rpc, &option)
                    .await
            }
            Err(reason) => Err(unreachable(reason)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, FerryNode, RaftError<NodeId>>> {
        match &self.client {
            Ok(client) => {
                client
                    .raft_call(Lane::Urgent, PeerCall::Vote, &rpc, &option)
                    .await
            }
            Err(reason) => Err(unreachable(reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_keeps_the_cluster_alive_never_shares_a_connection_with_data() {
        for urgent in [
            PeerCall::Vote,
            PeerCall::Heartbeat,
            PeerCall::ReadIndex,
            PeerCall::Probe,
        ] {
            assert_eq!(urgent.lane(), Lane::Urgent, "{urgent:?}");
        }
        for bulk in [
            PeerCall::AppendEntries,
            PeerCall::InstallSnapshot,
            PeerCall::Forward,
        ] {
            assert_eq!(bulk.lane(), Lane::Bulk, "{bulk:?}");
        }
    }
}
