//! openraft storage on sled: the log ([`LogStore`]) and the state machine with its snapshots
//! ([`StateMachineStore`]), in one sled database per node.
//!
//! # Durability
//!
//! sled writes go to its own write-ahead log in the page cache; `flush` (an `fsync`) makes
//! them durable. Ferry flushes before it reports durability to Raft: after appending entries
//! (before the `LogFlushed` callback), after saving a vote, after purging, and after writing a
//! snapshot. A process crash (`kill -9`) therefore loses nothing Raft was told is stored, and
//! neither does a power loss, to the extent that the disk honours `fsync`. Between flushes,
//! sled may lose recent unflushed writes on power loss but recovers to a consistent prefix.
//!
//! The state machine is kept in memory and persisted as snapshots: one value holding the
//! state, the last applied log id and the membership, written together. On start the node loads
//! its latest snapshot and openraft re-applies the committed entries after it from the log
//! (the committed index is saved too, so that happens at once, without waiting for a leader).

mod held;
mod log;
mod sm;

use std::path::Path;

pub use held::{StateGuard, HELD_TWICE};
pub use log::LogStore;
pub use sm::{AppliedState, SnapshotFacts, StateMachineStore, StateReader};

use crate::error::MetaError;
use crate::types::Entry;

/// How many recent log entries each node keeps decoded in memory, for replication.
pub const LOG_CACHE_ENTRIES: usize = 1024;

/// Where the incarnation id is kept, beside the Raft data it names.
const NODE_TREE: &str = "node";
const INCARNATION: &str = "incarnation";

/// A node's storage, opened.
pub struct Opened {
    /// The Raft log.
    pub log: LogStore,
    /// The state machine.
    pub sm: StateMachineStore,
    /// The id of this copy of the node's data, created with the database: a node whose data
    /// directory was wiped comes back under a new one (see `crate::heal`).
    pub incarnation: String,
}

/// Open (or create) the node's Raft storage under `dir`.
pub fn open(dir: &Path) -> Result<Opened, MetaError> {
    let db = open_db(dir)?;
    let incarnation = incarnation(&db)?;
    let log = LogStore::open(&db, LOG_CACHE_ENTRIES)?;
    let sm = StateMachineStore::open(&db)?;
    Ok(Opened {
        log,
        sm,
        incarnation,
    })
}

/// The database's incarnation id, created (and flushed) the first time it is opened. A database
/// written before incarnations existed gets one too; the leader records it in the membership.
fn incarnation(db: &sled::Db) -> Result<String, MetaError> {
    let storage = |what: &str| {
        let what = what.to_string();
        move |source| MetaError::Storage { what, source }
    };
    let tree = db
        .open_tree(NODE_TREE)
        .map_err(storage("open sled tree node"))?;
    if let Some(raw) = tree
        .get(INCARNATION)
        .map_err(storage("read the incarnation id"))?
    {
        return String::from_utf8(raw.to_vec()).map_err(|e| MetaError::Corrupt {
            what: "the incarnation id".into(),
            reason: e.to_string(),
        });
    }
    let id = uuid::Uuid::new_v4().to_string();
    tree.insert(INCARNATION, id.as_bytes())
        .map_err(storage("write the incarnation id"))?;
    db.flush().map_err(storage("flush the incarnation id"))?;
    Ok(id)
}

/// Before Raft starts: a node that was the leader when it stopped starts as a follower of its
/// term (its vote kept, no longer marked committed), so that it leads again only if a quorum
/// elects it. openraft would otherwise resume leadership from the stored vote at once — and a
/// leader restored from an older copy of its data would then lead its old term with a shorter
/// log than its followers, whose entries of the same log ids differ. Returns the last log index.
pub async fn resume_as_follower(
    log: &mut LogStore,
    me: crate::NodeId,
) -> Result<Option<u64>, MetaError> {
    use openraft::storage::RaftLogStorage;
    let corrupt = |what: &str, e: crate::types::StorageError| MetaError::Corrupt {
        what: what.to_string(),
        reason: e.to_string(),
    };
    let vote = log.read_vote().await.map_err(|e| corrupt("the vote", e))?;
    if let Some(vote) = vote.filter(|v| v.committed && v.leader_id.voted_for() == Some(me)) {
        let follower = crate::types::Vote::new(vote.leader_id.term, me);
        log.save_vote(&follower)
            .await
            .map_err(|e| corrupt("the vote", e))?;
        tracing::info!(%vote, "was the leader when it stopped: starting as a follower of its term");
    }
    let state = log
        .get_log_state()
        .await
        .map_err(|e| corrupt("the log state", e))?;
    Ok(state.last_log_id.map(|l| l.index))
}

/// The committed log entries of a node that is not running (its storage is locked while it
/// runs), from index 1. Fails if the log was purged behind a snapshot.
pub fn read_committed_log(dir: &Path) -> Result<Vec<Entry>, MetaError> {
    log::read_committed(&open_db(dir)?)
}

fn open_db(dir: &Path) -> Result<sled::Db, MetaError> {
    sled::Config::new()
        .path(dir)
        .flush_every_ms(Some(1000))
        .open()
        .map_err(|source| MetaError::Storage {
            what: format!("open sled database in {}", dir.display()),
            source,
        })
}
