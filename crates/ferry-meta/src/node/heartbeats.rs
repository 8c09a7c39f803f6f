//! Workers' heartbeats: what the leader keeps of them (what each said about its start and
//! format), where it hands the ones it acknowledges ([`Heartbeats`]), and a worker's side of
//! them.

use super::*;

/// The worker liveness table a leader's acknowledged heartbeats are written to. It is kept by
/// whoever judges liveness (the scheduler), not by the Raft crate: heartbeats are never written
/// to the log, and what "alive" means is not Raft's business. The healer reads it too, to find
/// voters gone silent.
pub trait Heartbeats: Send + Sync + std::fmt::Debug {
    /// The leader acknowledged `worker`'s heartbeat now; `leaving` is what the heartbeat said
    /// about the worker stopping.
    fn acknowledged(&self, worker: NodeId, leaving: bool);
    /// When each worker's last acknowledged heartbeat arrived.
    fn last_heard(&self) -> HashMap<NodeId, Instant>;
}

impl MetaNode {
    /// On the leader: every member with what the leader knows of it, and the applied index.
    pub fn members_seen_by_leader(&self) -> (Vec<Member>, Option<u64>) {
        let m = self.inner.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        let replication = m.replication.clone().unwrap_or_default();
        let members: Vec<Member> = membership
            .nodes()
            .map(|(id, node)| Member {
                id: *id,
                node: node.clone(),
                voter: voters.contains(id),
                matched: replication.get(id).and_then(|l| l.map(|l| l.index)),
            })
            .collect();
        (members, m.last_applied.map(|l| l.index))
    }

    /// On the leader: the incarnation each node reported last.
    pub fn reported_incarnations(&self) -> BTreeMap<NodeId, String> {
        lock(&self.inner.boots)
            .iter()
            .map(|(id, seen)| (*id, seen.boot.incarnation.clone()))
            .collect()
    }

    /// On the leader: the highest index it had matched for `id` at one of the heartbeats of the
    /// node's current start (see [`heal::started_behind`]).
    pub fn acknowledged(&self, id: NodeId) -> Option<u64> {
        if self.leader() != Some(self.id()) {
            return None;
        }
        lock(&self.inner.boots)
            .get(&id)
            .and_then(|seen| seen.matched)
    }

    /// On the leader: the format each node said it understands.
    pub fn reported_formats(&self) -> BTreeMap<NodeId, u32> {
        lock(&self.inner.boots)
            .iter()
            .map(|(id, seen)| (*id, seen.boot.format))
            .collect()
    }

    /// On the leader: the voters to demote, with why.
    pub fn suspects(&self) -> BTreeMap<NodeId, String> {
        lock(&self.inner.suspects).clone()
    }

    /// Forget the suspects `done` says are dealt with.
    pub fn clear_suspects(&self, done: impl Fn(NodeId) -> bool) {
        lock(&self.inner.suspects).retain(|id, _| !done(*id));
    }

    /// On the leader: forget what a node said of its starts (a node removed, or added again:
    /// what an earlier process of it reported must not be taken for what the new one runs —
    /// its stale incarnation would look like a wiped data directory and get it demoted).
    pub(super) fn forget_starts(&self, id: NodeId) {
        lock(&self.inner.boots).remove(&id);
        lock(&self.inner.suspects).remove(&id);
    }

    /// On the leader: a node's start, from its heartbeat, with the index the leader has matched
    /// for it now. A node whose new start has less than its previous start had acknowledged
    /// (seen by this leader, in this term) becomes a suspect.
    pub(super) fn note_boot(&self, worker: NodeId, boot: &Boot, term: u64, matched: Option<u64>) {
        let mut boots = lock(&self.inner.boots);
        if let Some(seen) = boots.get_mut(&worker) {
            if seen.boot.boot_id == boot.boot_id && seen.term == term {
                seen.matched = seen.matched.max(matched);
                return;
            }
            if seen.boot.boot_id != boot.boot_id && seen.term == term && worker != self.id() {
                if let Some(reason) = heal::started_behind(boot, seen.matched) {
                    warn!(node = worker, %reason, "a node came back with fewer entries than it acknowledged");
                    lock(&self.inner.suspects).insert(worker, reason);
                }
            }
        }
        boots.insert(
            worker,
            Seen {
                boot: boot.clone(),
                term,
                matched,
            },
        );
    }

    /// On the leader: record a worker's heartbeat, if this node is a leader a quorum answered
    /// recently. Not written to the log.
    pub fn receive_heartbeat(&self, beat: &Heartbeat) -> Result<HeartbeatReply, ProposalError> {
        let worker = beat.worker;
        let (leader, applied, term, matched, removed) = {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow();
            let removed = m.membership_config.membership().get_node(&worker).is_none();
            let matched = m
                .replication
                .as_ref()
                .and_then(|r| r.get(&worker).copied().flatten())
                .map(|l| l.index);
            (
                m.current_leader,
                m.last_applied.map(|l| l.index),
                m.current_term,
                matched,
                removed,
            )
        };
        if leader != Some(self.id()) {
            return Err(ProposalError::NotLeader { leader });
        }
        if let Some(boot) = &beat.boot {
            self.note_boot(worker, boot, term, matched);
        }
        // Judged by this process's clock now, not by the age the metrics gave when they were
        // last reported: a leader paused (SIGSTOP) and woken must not take its old quorum for
        // a fresh one and grant leases — its own worker's included — after it was deposed.
        let recent = lock(&self.inner.quorum_acked)
            .is_some_and(|acked| acked.elapsed() <= self.inner.quorum_window);
        if recent {
            self.inner.heartbeats.acknowledged(worker, beat.leaving);
        }
        Ok(HeartbeatReply {
            acked: recent && !removed,
            applied,
            removed,
        })
    }

    /// On the leader: when each worker was last heard from (from the [`Heartbeats`] table).
    pub fn last_heard(&self) -> HashMap<NodeId, Instant> {
        self.inner.heartbeats.last_heard()
    }

    /// Send this worker's heartbeat to the leader (or record it, on the leader).
    pub async fn send_heartbeat(
        &self,
        timeout: Duration,
        leaving: bool,
    ) -> Result<HeartbeatReply, ProposalError> {
        let beat = Heartbeat {
            worker: self.id(),
            boot: Some(self.inner.boot.clone()),
            leaving,
        };
        let reply = match self.leader() {
            Some(leader) if leader == self.id() => self.receive_heartbeat(&beat),
            Some(leader) => {
                let client = self.leader_client(leader)?;
                from_leader(&client, client.heartbeat(&beat, timeout).await)
            }
            None => Err(ProposalError::NotLeader { leader: None }),
        }?;
        // A node that never belonged to the cluster (waiting for add-node) is not "removed".
        let removed = reply.removed && self.inner.raft.metrics().borrow().last_log_index.is_some();
        let was = self
            .inner
            .removed
            .swap(removed, std::sync::atomic::Ordering::Relaxed);
        if removed && !was {
            warn!("this node was removed from the cluster: it runs no tasks and takes no part until it is added again (ferry cluster add-node)");
        } else if was && !removed {
            info!("this node is a member of the cluster again");
        }
        Ok(reply)
    }

    /// Whether the leader said this node is not a member any more.
    pub fn removed(&self) -> bool {
        self.inner
            .removed
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}
