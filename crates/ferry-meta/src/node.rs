//! One member of the Raft group: its Raft handle, its applied state, and the two things every
//! caller needs — writes that reach the leader from any node, and reads that are linearizable
//! from any node.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use tracing::{debug, info, warn};

use crate::error::MetaError;
use crate::heal::{self, Boot, Member, Standing};
use crate::peer::{
    Heartbeat, HeartbeatReply, ProbeReply, Proposal, ProposalError, ProposalReply, ReadIndexReply,
};
use crate::peer_client::{CallError, Network, PeerClient};
use crate::state::{FerryNode, Outcome, Request, Response};
use crate::store::{self, StateReader};
use crate::types::{LogId, NodeId, Raft};

/// How long one forwarded call may take before it is retried.
const PEER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// A member of the Raft group. Cheap to clone.
#[derive(Clone)]
pub struct MetaNode {
    inner: Arc<Inner>,
}

struct Inner {
    id: NodeId,
    raft: Raft,
    state: StateReader,
    peers: Mutex<HashMap<NodeId, PeerClient>>,
    committed: Arc<Mutex<Option<LogId>>>,
    /// Test only: addresses that replace the membership's for some peers.
    overrides: Arc<BTreeMap<NodeId, String>>,
    /// On the leader: when each worker's last acknowledged heartbeat arrived.
    heartbeats: Mutex<HashMap<NodeId, Instant>>,
    /// On the leader: the workers whose latest heartbeat said they are stopping.
    leaving: Mutex<BTreeSet<NodeId>>,
    /// The leader acknowledges heartbeats only if a quorum answered it within this window.
    quorum_window: Duration,
    /// While this node leads: when a quorum last acknowledged it, as of this process's clock
    /// (see [`track_quorum`]).
    quorum_acked: Arc<Mutex<Option<Instant>>>,
    /// How long a write or a linearizable read keeps trying to reach a leader.
    deadline: Duration,
    /// The largest log entry this node proposes (bytes of the encoded request).
    max_entry_bytes: usize,
    /// What this node started with: its data's incarnation and its last log index.
    boot: Boot,
    /// The members an initializer named in its invitation, before this node had Raft state.
    invitation: Mutex<Option<BTreeMap<NodeId, FerryNode>>>,
    /// On the leader: what each node reported about its start in its latest heartbeat.
    boots: Mutex<HashMap<NodeId, Seen>>,
    /// On the leader: voters found to have started behind what the leader had matched for them.
    suspects: Mutex<BTreeMap<NodeId, String>>,
    /// Held while a membership change is decided and made, so that a client's add or remove
    /// and the healer's changes never act on each other's stale view.
    membership: tokio::sync::Mutex<()>,
    /// The leader said this node is not a member any more.
    removed: std::sync::atomic::AtomicBool,
}

/// A node's start as the leader saw it in its heartbeats.
struct Seen {
    boot: Boot,
    /// The term of the leader that saw it.
    term: u64,
    /// The highest index the leader had matched for the node at one of that start's heartbeats:
    /// entries that start acknowledged, which its next start must still have.
    matched: Option<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; these maps stay consistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a node behaves, besides openraft's own config.
#[derive(Clone, Debug)]
pub struct Options {
    /// How long a write or a linearizable read keeps trying to reach a leader.
    pub deadline: Duration,
    /// The leader acknowledges workers' heartbeats only while a quorum answered it within this
    /// window.
    pub quorum_window: Duration,
    /// The largest log entry this node proposes, in bytes of the encoded request: a larger
    /// write is refused before it reaches Raft ([`MetaError::TooLarge`]).
    pub max_entry_bytes: usize,
    /// Test only: addresses that replace the membership's for some peers.
    pub overrides: BTreeMap<NodeId, String>,
    /// Test only: while this file exists, appends to the Raft log fail.
    pub storage_fault_file: Option<std::path::PathBuf>,
}

/// What a write returned: the state machine's answer and where it sits in the log.
pub type WriteReply = ProposalReply;

impl MetaNode {
    /// Open the node's storage under `dir` and start its Raft instance. It takes part in a
    /// cluster once it is initialized or a leader adds it.
    pub async fn start(
        id: NodeId,
        dir: &Path,
        config: openraft::Config,
        options: Options,
    ) -> Result<Self, MetaError> {
        let Options {
            deadline,
            quorum_window,
            max_entry_bytes,
            overrides,
            storage_fault_file,
        } = options;
        // A node campaigns only once it knows it is whole (see `crate::heal`).
        let config = Arc::new(
            openraft::Config {
                enable_elect: false,
                ..config
            }
            .validate()
            .map_err(|e| MetaError::Raft(format!("invalid raft config: {e}")))?,
        );
        let store::Opened {
            mut log,
            sm,
            incarnation,
        } = store::open(dir)?;
        if let Some(file) = storage_fault_file {
            log.fail_appends_while(file);
        }
        let last_log_index = store::resume_as_follower(&mut log, id).await?;
        let state = sm.reader();
        let committed = log.committed();
        let overrides = Arc::new(overrides);
        let network = Network {
            overrides: overrides.clone(),
        };
        let raft = Raft::new(id, config, network, log, sm)
            .await
            .map_err(|e| MetaError::Raft(format!("cannot start raft: {e}")))?;
        let boot = Boot {
            incarnation,
            boot_id: uuid::Uuid::new_v4().to_string(),
            last_log_index,
            format: crate::format::understood(),
        };
        info!(incarnation = %boot.incarnation, last_log_index = ?boot.last_log_index, "raft storage opened");
        let node = MetaNode {
            inner: Arc::new(Inner {
                id,
                raft,
                state,
                peers: Mutex::new(HashMap::new()),
                committed,
                heartbeats: Mutex::new(HashMap::new()),
                leaving: Mutex::new(BTreeSet::new()),
                overrides,
                quorum_window,
                quorum_acked: Arc::new(Mutex::new(None)),
                deadline,
                max_entry_bytes,
                boot,
                invitation: Mutex::new(None),
                boots: Mutex::new(HashMap::new()),
                suspects: Mutex::new(BTreeMap::new()),
                membership: tokio::sync::Mutex::new(()),
                removed: std::sync::atomic::AtomicBool::new(false),
            }),
        };
        tokio::spawn(node.clone().follow_standing());
        tokio::spawn(track_quorum(
            node.inner.raft.metrics(),
            id,
            node.inner.quorum_acked.clone(),
        ));
        Ok(node)
    }

    /// Let Raft campaign only while this node is a whole voter, and log every change of
    /// standing; ends when Raft stops.
    #[tracing::instrument(name = "standing", skip_all, fields(node = self.id()))]
    async fn follow_standing(self) {
        let mut metrics = self.inner.raft.metrics();
        let mut last: Option<(Standing, bool)> = None;
        loop {
            let voter = {
                let m = metrics.borrow_and_update();
                m.membership_config
                    .membership()
                    .voter_ids()
                    .any(|v| v == self.id())
            };
            let standing = self.standing();
            let now = (standing.clone(), voter);
            if last.as_ref() != Some(&now) {
                let elect = voter && standing == Standing::Whole;
                self.inner.raft.runtime_config().elect(elect);
                if elect {
                    info!(voter, "this node is whole: it votes and may campaign");
                } else if !standing.may_vote() {
                    warn!(reason = %standing.reason(&self.inner.boot.incarnation), "not voting");
                }
                last = Some(now);
            }
            // The invitation changes without a metrics change: look again soon while not whole.
            let wait = if standing == Standing::Whole {
                Duration::from_secs(3600)
            } else {
                Duration::from_millis(200)
            };
            tokio::select! {
                changed = metrics.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(wait) => {}
            }
        }
    }

    /// Where this node stands (see [`heal::standing`]).
    pub fn standing(&self) -> Standing {
        let (initialized, recorded) = {
            let m = self.inner.raft.metrics();
            let m = m.borrow();
            let membership = m.membership_config.membership();
            (
                m.last_log_index.is_some() || membership.voter_ids().next().is_some(),
                membership.get_node(&self.id()).cloned(),
            )
        };
        let invitation = lock(&self.inner.invitation);
        heal::standing(
            &self.inner.boot.incarnation,
            initialized,
            recorded.as_ref(),
            invitation.as_ref().and_then(|m| m.get(&self.id())),
        )
    }

    /// What this node started with.
    pub fn boot(&self) -> &Boot {
        &self.inner.boot
    }

    /// How long writes and linearizable reads keep trying.
    pub fn deadline(&self) -> Duration {
        self.inner.deadline
    }

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

    /// On the leader: a node's start, from its heartbeat, with the index the leader has matched
    /// for it now. A node whose new start has less than its previous start had acknowledged
    /// (seen by this leader, in this term) becomes a suspect.
    fn note_boot(&self, worker: NodeId, boot: &Boot, term: u64, matched: Option<u64>) {
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

    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// The applied state of this node (possibly behind the leader; see [`Self::linearizable`]).
    pub fn state(&self) -> &StateReader {
        &self.inner.state
    }

    /// The highest log index this node knows to be committed.
    pub fn committed_index(&self) -> Option<u64> {
        let committed = self
            .inner
            .committed
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        committed.map(|l| l.index)
    }

    pub fn leader(&self) -> Option<NodeId> {
        self.inner.raft.metrics().borrow().current_leader
    }

    /// The addresses of a member, from the membership config this node knows.
    pub fn member(&self, id: NodeId) -> Option<FerryNode> {
        self.inner
            .raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&id)
            .cloned()
    }

    /// A client of a peer's service, cached per node and address.
    pub fn peer(&self, id: NodeId, addr: &str) -> Result<PeerClient, MetaError> {
        let addr = self.inner.overrides.get(&id).map_or(addr, String::as_str);
        let mut peers = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = peers.get(&id) {
            if client.addr() == addr {
                return Ok(client.clone());
            }
        }
        let client = PeerClient::new(id, addr)?;
        peers.insert(id, client.clone());
        Ok(client)
    }

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

    async fn forward(
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

    fn leader_client(&self, leader: NodeId) -> Result<PeerClient, ProposalError> {
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
                let written = raft
                    .client_write(request.clone())
                    .await
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
                Ok(ProposalReply {
                    answer: Ok(Outcome::Done),
                    log_index: reply.log_id.index,
                })
            }
        }
    }

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

    async fn change_membership_retaining(
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
    async fn probe_incarnation(&self, id: NodeId, addr: &str) -> Result<String, ProposalError> {
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
    async fn wait_caught_up(&self, id: NodeId, index: u64) -> Result<(), ProposalError> {
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

    fn ensure_leader(&self) -> Result<(), ProposalError> {
        match self.leader() {
            Some(leader) if leader == self.id() => Ok(()),
            leader => Err(ProposalError::NotLeader { leader }),
        }
    }

    /// The read index, if this node is the leader (it confirms leadership with a quorum).
    pub async fn read_index_local(&self) -> Result<ReadIndexReply, ProposalError> {
        let (read_log_id, _applied) = self
            .inner
            .raft
            .get_read_log_id()
            .await
            .map_err(check_leader_error)?;
        Ok(ReadIndexReply {
            index: read_log_id.map(|l| l.index),
        })
    }

    /// Wait until this node's applied state includes every write acknowledged before the call:
    /// on the leader by confirming leadership with a quorum, on a follower by asking the leader
    /// for its read index and waiting to apply that far.
    pub async fn linearizable(&self) -> Result<(), MetaError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let index = match self.leader() {
                Some(leader) if leader == self.id() => self.read_index_local().await,
                Some(leader) => self.remote_read_index(leader).await,
                None => Err(ProposalError::NotLeader { leader: None }),
            };
            let problem = match index {
                Ok(ReadIndexReply { index }) => {
                    let remaining = self.inner.deadline.saturating_sub(started.elapsed());
                    let waited = self
                        .inner
                        .raft
                        .wait(Some(remaining.max(Duration::from_millis(100))))
                        .applied_index_at_least(index, "linearizable read")
                        .await;
                    match waited {
                        Ok(_) => return Ok(()),
                        Err(e) => format!("waiting to apply up to {index:?}: {e}"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.inner.deadline {
                return Err(MetaError::Unavailable {
                    waited_ms: started.elapsed().as_millis(),
                    last: problem,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    async fn remote_read_index(&self, leader: NodeId) -> Result<ReadIndexReply, ProposalError> {
        let client = self.leader_client(leader)?;
        from_leader(&client, client.read_index(PEER_CALL_TIMEOUT).await)
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
            let mut beats = self
                .inner
                .heartbeats
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            beats.insert(worker, Instant::now());
            let mut leaving = lock(&self.inner.leaving);
            if beat.leaving {
                leaving.insert(worker);
            } else {
                leaving.remove(&worker);
            }
        }
        Ok(HeartbeatReply {
            acked: recent && !removed,
            applied,
            removed,
        })
    }

    /// On the leader: when each worker was last heard from.
    pub fn heartbeats(&self) -> HashMap<NodeId, Instant> {
        self.inner
            .heartbeats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// On the leader: the workers that said they are stopping.
    pub fn leaving(&self) -> BTreeSet<NodeId> {
        lock(&self.inner.leaving).clone()
    }

    /// Wait until this node has applied the log up to `index`, for at most `timeout`; whether
    /// it got there.
    pub async fn wait_applied(&self, index: Option<u64>, timeout: Duration) -> bool {
        self.inner
            .raft
            .wait(Some(timeout))
            .applied_index_at_least(index, "catching up")
            .await
            .is_ok()
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

    /// This node's Raft role as it sees it.
    pub fn server_state(&self) -> ServerState {
        self.inner.raft.metrics().borrow().state
    }

    pub async fn shutdown(&self) -> Result<(), MetaError> {
        self.inner
            .raft
            .shutdown()
            .await
            .map_err(|e| MetaError::Raft(format!("shutdown: {e}")))
    }
}

/// A leader's answer; failing to reach it is worth another try.
fn from_leader<T>(
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

fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, FerryNode>>) -> ProposalError {
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

fn check_leader_error(
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

/// Keep `acked` at the instant a quorum last acknowledged this node as leader, from Raft's
/// metrics (reported after every batch of events, with the age of that acknowledgement at the
/// time): `None` while it does not lead.
#[tracing::instrument(name = "quorum", skip_all, fields(node = me))]
async fn track_quorum(
    mut metrics: tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, FerryNode>>,
    me: NodeId,
    acked: Arc<Mutex<Option<Instant>>>,
) {
    loop {
        let at = {
            let m = metrics.borrow_and_update();
            m.millis_since_quorum_ack
                .filter(|_| m.current_leader == Some(me))
                .and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)))
        };
        *lock(&acked) = at;
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
