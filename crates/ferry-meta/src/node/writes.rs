//! Writes from any node: proposed here when this node leads, forwarded to the leader
//! otherwise, retried within the node's deadline; and what the leader does with a proposal.

use super::*;

impl MetaNode {
    /// Write to the replicated state through the leader, from any node. Retried (with the
    /// same request id, so it applies once) until the deadline while there is no reachable
    /// leader.
    ///
    /// When it returns, this node has applied the write too: a read here sees it.
    pub async fn write(&self, request: Request) -> Result<WriteReply, MetaError> {
        let reply = self.propose(Proposal::Write(request)).await?;
        self.inner
            .raft
            .wait(Some(self.inner.deadline))
            .applied_index_at_least(Some(reply.log_index), "read your write")
            .await
            .map_err(|e| MetaError::Unavailable {
                waited_ms: self.inner.deadline.as_millis(),
                last: format!("applying up to the write at {}: {e}", reply.log_index),
            })?;
        Ok(reply)
    }

    /// The state machine's answer to a write, or the rejection.
    pub async fn write_answer(&self, request: Request) -> Result<Response, MetaError> {
        Ok(self.write(request).await?.answer)
    }

    /// The state machine's answer to a write once the leader has committed and applied it,
    /// without waiting for this node to apply it too: for writers that act on the answer only
    /// (task commits and status reports). A node that is being removed from the cluster, which
    /// may never see its last writes applied, gets its answers all the same.
    pub async fn commit_answer(&self, request: Request) -> Result<Response, MetaError> {
        Ok(self.propose(Proposal::Write(request)).await?.answer)
    }

    /// A write proposed on this node only if it leads, neither forwarded nor retried: for the
    /// leader's own loops (the scheduler), whose decisions come from this node's view of the
    /// cluster — a deposed leader's plan must not be carried out by its successor.
    pub async fn write_here(&self, request: Request) -> Result<Response, MetaError> {
        if self.leader() != Some(self.id()) {
            return Err(MetaError::Unavailable {
                waited_ms: 0,
                last: "this node does not lead (any more)".to_string(),
            });
        }
        match self.propose_local(&Proposal::Write(request)).await {
            Ok(reply) => Ok(reply.answer),
            Err(ProposalError::Refused(reason)) => Err(MetaError::Membership(reason)),
            Err(e) => Err(MetaError::Unavailable {
                waited_ms: 0,
                last: e.to_string(),
            }),
        }
    }

    /// Carry out a proposal on the leader, wherever it is.
    pub async fn propose(&self, proposal: Proposal) -> Result<ProposalReply, MetaError> {
        if let Proposal::Write(request) = &proposal {
            let bytes = request.encoded_len();
            if bytes > self.inner.max_entry_bytes {
                return Err(MetaError::TooLarge {
                    what: request.command.kind(),
                    connector: request.command.connector().map(str::to_string),
                    bytes,
                    limit: self.inner.max_entry_bytes,
                });
            }
        }
        let started = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let attempt = match self.leader() {
                Some(leader) if leader == self.id() => self.propose_local(&proposal).await,
                Some(leader) => self.forward(leader, &proposal).await,
                None => Err(ProposalError::NotLeader { leader: None }),
            };
            let problem = match attempt {
                Ok(reply) => return Ok(reply),
                Err(ProposalError::Refused(reason)) => return Err(MetaError::Membership(reason)),
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.inner.deadline {
                return Err(MetaError::Unavailable {
                    waited_ms: started.elapsed().as_millis(),
                    last: problem,
                });
            }
            debug!(%proposal, %problem, "retrying proposal");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    pub(super) async fn forward(
        &self,
        leader: NodeId,
        proposal: &Proposal,
    ) -> Result<ProposalReply, ProposalError> {
        let client = self.leader_client(leader)?;
        // Membership changes wait for the new node to catch up: give them the full deadline.
        let timeout = match proposal {
            Proposal::Write(_) => PEER_CALL_TIMEOUT,
            _ => self.inner.deadline + PEER_CALL_TIMEOUT,
        };
        from_leader(&client, client.propose(proposal, timeout).await)
    }

    pub(super) fn leader_client(&self, leader: NodeId) -> Result<PeerClient, ProposalError> {
        let node = self.member(leader).ok_or_else(|| {
            ProposalError::Unavailable(format!("leader {leader} is not in the membership"))
        })?;
        self.peer(leader, &node.raft_addr)
            .map_err(|e| ProposalError::Unavailable(e.to_string()))
    }

    /// Carry out a proposal here, if this node is the leader.
    pub async fn propose_local(&self, proposal: &Proposal) -> Result<ProposalReply, ProposalError> {
        let raft = &self.inner.raft;
        let _membership = match proposal {
            Proposal::Write(_) => None,
            _ => Some(self.membership_lock().await),
        };
        match proposal {
            Proposal::Write(request) => {
                if !matches!(
                    request.command,
                    crate::state::Command::SetFeatureLevel { .. }
                ) {
                    let level = self.state().read().state.feature_level();
                    crate::format::admissible(request.format, level)
                        .map_err(ProposalError::Refused)?;
                }
                // Bounded as a forwarded write is: a write whose outcome is not known in time
                // is tried again by `propose` under the same request id (applied once), never
                // awaited for ever — a unit waiting on its status report would stay UNASSIGNED.
                let started = std::time::Instant::now();
                let written =
                    tokio::time::timeout(PEER_CALL_TIMEOUT, raft.client_write(request.clone()))
                        .await;
                // Timed when applied or timed out; a refusal (not the leader) is no proposal.
                if !matches!(written, Ok(Err(_))) {
                    self.inner
                        .proposals
                        .observe(started.elapsed().as_secs_f64());
                }
                let written = written
                    .map_err(|_| {
                        ProposalError::Unavailable(format!(
                            "no answer to {} within {} ms",
                            request.command.kind(),
                            PEER_CALL_TIMEOUT.as_millis()
                        ))
                    })?
                    .map_err(write_error)?;
                Ok(ProposalReply {
                    answer: written.data,
                    log_index: written.log_id.index,
                })
            }
            Proposal::AddNode {
                id,
                node,
                target_voters,
            } => {
                self.ensure_leader()?;
                let node = FerryNode {
                    incarnation: self.probe_incarnation(*id, &node.raft_addr).await?,
                    ..node.clone()
                };
                info!(node = id, %node, "adding learner");
                self.forget_starts(*id);
                let added = raft
                    .add_learner(*id, node, false)
                    .await
                    .map_err(write_error)?;
                self.wait_caught_up(*id, added.log_id.index).await?;
                let voters = {
                    let metrics = raft.metrics();
                    let m = metrics.borrow();
                    m.membership_config
                        .membership()
                        .voter_ids()
                        .collect::<BTreeSet<_>>()
                };
                let mut log_index = added.log_id.index;
                if !voters.contains(id) && voters.len() < *target_voters {
                    info!(
                        node = id,
                        voters = voters.len(),
                        target_voters,
                        "promoting to voter"
                    );
                    let promoted = self
                        .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([*id])))
                        .await?;
                    log_index = promoted.log_id.index;
                }
                Ok(ProposalReply {
                    answer: Ok(Outcome::Done),
                    log_index,
                })
            }
            Proposal::RemoveNode { id } => {
                self.ensure_leader()?;
                let (voter, member) = {
                    let metrics = raft.metrics();
                    let m = metrics.borrow();
                    let membership = m.membership_config.membership();
                    (
                        membership.voter_ids().any(|v| v == *id),
                        membership.get_node(id).is_some(),
                    )
                };
                if !member {
                    return Err(ProposalError::Refused(format!(
                        "node {id} is not a member of the cluster"
                    )));
                }
                let change = if voter {
                    info!(node = id, "demoting and removing voter");
                    ChangeMembers::RemoveVoters(BTreeSet::from([*id]))
                } else {
                    info!(node = id, "removing learner");
                    ChangeMembers::RemoveNodes(BTreeSet::from([*id]))
                };
                let reply = self.change_membership(change).await?;
                self.forget_starts(*id);
                Ok(ProposalReply {
                    answer: Ok(Outcome::Done),
                    log_index: reply.log_id.index,
                })
            }
        }
    }
}

/// A leader's answer; failing to reach it is worth another try.
pub(super) fn from_leader<T>(
    client: &PeerClient,
    answer: Result<T, CallError<ProposalError>>,
) -> Result<T, ProposalError> {
    answer.map_err(|e| match e {
        CallError::Remote(e) => e,
        CallError::Transport(reason) | CallError::Decode(reason) => ProposalError::Unavailable(
            format!("leader {} at {}: {reason}", client.node(), client.addr()),
        ),
    })
}

pub(super) fn write_error(
    e: RaftError<NodeId, ClientWriteError<NodeId, FerryNode>>,
) -> ProposalError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ProposalError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            ProposalError::Refused(e.to_string())
        }
        RaftError::Fatal(f) => ProposalError::Unavailable(format!("raft stopped: {f}")),
    }
}

pub(super) fn check_leader_error(
    e: RaftError<NodeId, CheckIsLeaderError<NodeId, FerryNode>>,
) -> ProposalError {
    match e {
        RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => ProposalError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(q)) => {
            ProposalError::Unavailable(q.to_string())
        }
        RaftError::Fatal(f) => ProposalError::Unavailable(format!("raft stopped: {f}")),
    }
}
