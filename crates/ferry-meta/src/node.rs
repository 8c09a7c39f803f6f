//! One member of the Raft group: its Raft handle, its applied state, and the two things every
//! caller needs — writes that reach the leader from any node, and reads that are linearizable
//! from any node.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::{ChangeMembers, ServerState};
use prometheus_client::metrics::histogram::Histogram;
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
pub use heartbeats::Heartbeats;

/// How long one forwarded call may take before it is retried.
const PEER_CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// The upper bounds (seconds) of the proposal-time histogram's buckets: 0.5 ms, doubling, to
/// about 4 s.
const PROPOSAL_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048,
    4.096,
];

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
    /// Where the leader's acknowledged heartbeats go: the worker liveness table, kept outside
    /// this crate by the scheduler that judges it.
    heartbeats: Arc<dyn Heartbeats>,
    /// The leader acknowledges heartbeats only if a quorum answered it within this window.
    quorum_window: Duration,
    /// While this node leads: when a quorum last acknowledged it, as of this process's clock
    /// (see [`track_quorum`]).
    quorum_acked: Arc<Mutex<Option<Instant>>>,
    /// On the leader: how long each write took from its proposal to its answer (applied).
    proposals: Histogram,
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
    /// The read-index rounds that this node's linearizable reads share.
    reads: reads::Rounds,
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
    /// The table the heartbeats this node acknowledges while it leads are written to.
    pub heartbeats: Arc<dyn Heartbeats>,
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
            heartbeats,
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
                heartbeats,
                overrides,
                quorum_window,
                quorum_acked: Arc::new(Mutex::new(None)),
                proposals: Histogram::new(PROPOSAL_BUCKETS.iter().copied()),
                deadline,
                max_entry_bytes,
                boot,
                invitation: Mutex::new(None),
                boots: Mutex::new(HashMap::new()),
                suspects: Mutex::new(BTreeMap::new()),
                membership: tokio::sync::Mutex::new(()),
                removed: std::sync::atomic::AtomicBool::new(false),
                reads: reads::Rounds::default(),
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

    /// This node's id.
    pub fn id(&self) -> NodeId {
        self.inner.id
    }

    /// Its Raft instance.
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// The applied state of this node (possibly behind the leader; see [`Self::linearizable`]).
    pub fn state(&self) -> &StateReader {
        &self.inner.state
    }

    /// How long the writes this node proposed as leader took, from proposal to answer (their
    /// count is the proposals'); a histogram in seconds, for the metrics registry.
    pub fn proposal_times(&self) -> &Histogram {
        &self.inner.proposals
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

    /// The leader this node knows of.
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

    /// This node's Raft role as it sees it.
    pub fn server_state(&self) -> ServerState {
        self.inner.raft.metrics().borrow().state
    }

    /// Stop Raft.
    pub async fn shutdown(&self) -> Result<(), MetaError> {
        self.inner
            .raft
            .shutdown()
            .await
            .map_err(|e| MetaError::Raft(format!("shutdown: {e}")))
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

mod heartbeats;
mod membership;
mod reads;
mod writes;

use writes::{check_leader_error, from_leader, write_error};
