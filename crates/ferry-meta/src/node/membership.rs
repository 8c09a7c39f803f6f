//! Membership changes: one at a time, a new node probed for its incarnation and added as a
//! learner, promoted once caught up; and the bootstrap probes.

use super::*;

impl MetaNode {
    /// The lock under which membership changes are decided and made, one at a time.
    pub async fn membership_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.membership.lock().await
    }

    /// Change the membership, waiting (up to the deadline) for a change in progress — the
    /// healer's, or another client's — to finish first. Voters removed are removed entirely
    /// unless the change is a demotion (`RemoveVoters` keeps them as learners only when asked
    /// through [`Self::demote`]).
    pub async fn change_membership(
        &self,
        change: ChangeMembers<NodeId, FerryNode>,
    ) -> Result<openraft::raft::ClientWriteResponse<crate::types::TypeConfig>, ProposalError> {
        self.change_membership_retaining(change, false).await
    }

    /// Make voters learners (see [`Self::change_membership`]).
    pub async fn demote(
        &self,
        ids: BTreeSet<NodeId>,
    ) -> Result<openraft::raft::ClientWriteResponse<crate::types::TypeConfig>, ProposalError> {
        self.change_membership_retaining(ChangeMembers::RemoveVoters(ids), true)
            .await
    }

    pub(super) async fn change_membership_retaining(
        &self,
        change: ChangeMembers<NodeId, FerryNode>,
        retain: bool,
    ) -> Result<openraft::raft::ClientWriteResponse<crate::types::TypeConfig>, ProposalError> {
        let started = Instant::now();
        loop {
            let attempt = tokio::time::timeout(
                self.inner.deadline,
                self.inner.raft.change_membership(change.clone(), retain),
            )
            .await
            .map_err(|_| {
                ProposalError::Unavailable(format!(
                    "the membership change was not committed within {} ms (is a quorum of voters up?)",
                    self.inner.deadline.as_millis()
                ))
            })?;
            match attempt {
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(
                    openraft::error::ChangeMembershipError::InProgress(busy),
                ))) if started.elapsed() < self.inner.deadline => {
                    debug!(%busy, "another membership change is in progress: waiting");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other.map_err(write_error),
            }
        }
    }

    /// Ask a node that is about to be added for its incarnation.
    pub(super) async fn probe_incarnation(
        &self,
        id: NodeId,
        addr: &str,
    ) -> Result<String, ProposalError> {
        let client = self
            .peer(id, addr)
            .map_err(|e| ProposalError::Refused(e.to_string()))?;
        let started = Instant::now();
        loop {
            match client.probe(None, PEER_CALL_TIMEOUT).await {
                Ok(reply) if reply.node_id == id => return Ok(reply.incarnation),
                Ok(reply) => {
                    return Err(ProposalError::Refused(format!(
                        "the node at {addr} says it is node {}, not node {id}",
                        reply.node_id
                    )))
                }
                Err(e) if started.elapsed() >= self.inner.deadline => {
                    return Err(ProposalError::Refused(format!(
                        "cannot reach node {id} at {addr} to add it ({e:?}); is ferryd running \
                         there, and is its raft_addr reachable from the leader?"
                    )))
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
    }

    /// On the leader: wait until a learner has replicated up to `index`, or say why not.
    pub(super) async fn wait_caught_up(&self, id: NodeId, index: u64) -> Result<(), ProposalError> {
        let waited = self
            .inner
            .raft
            .wait(Some(self.inner.deadline))
            .metrics(
                |m| {
                    m.replication
                        .as_ref()
                        .and_then(|r| r.get(&id))
                        .and_then(|matched| *matched)
                        .is_some_and(|matched| matched.index >= index)
                },
                "learner caught up",
            )
            .await;
        waited.map(|_| ()).map_err(|e| {
            ProposalError::Refused(format!(
                "node {id} was added as a learner but did not catch up within {} ms ({e}); \
                 is ferryd running there, and is its raft_addr reachable from the leader? \
                 Run add-node again once it is",
                self.inner.deadline.as_millis()
            ))
        })
    }

    /// What this node says about itself to a bootstrapping peer. An invitation (the voters an
    /// initializer is about to start a cluster with) is kept while this node has no Raft state:
    /// it may then vote in that cluster's first election.
    pub async fn probe(
        &self,
        invitation: Option<BTreeMap<NodeId, FerryNode>>,
    ) -> Result<ProbeReply, MetaError> {
        let initialized = self
            .inner
            .raft
            .is_initialized()
            .await
            .map_err(|e| MetaError::Raft(e.to_string()))?;
        if let Some(members) = invitation.filter(|_| !initialized) {
            info!(voters = ?members.keys().collect::<Vec<_>>(), "invited to bootstrap a cluster");
            *lock(&self.inner.invitation) = Some(members);
        }
        let cluster_id = self.state().read().state.cluster_id.clone();
        Ok(ProbeReply {
            node_id: self.id(),
            initialized,
            cluster_id,
            leader: self.leader(),
            incarnation: self.inner.boot.incarnation.clone(),
        })
    }
}
