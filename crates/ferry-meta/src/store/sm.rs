//! The state machine: [`ClusterState`] in memory, persisted with its last applied log id and
//! membership as snapshots in sled.

use std::io::Cursor;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use openraft::storage::RaftStateMachine;
use openraft::{EntryPayload, OptionalSend, RaftSnapshotBuilder, StorageIOError};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use super::held::{Applied, StateGuard, StateWriteGuard};
use crate::error::MetaError;
use crate::state::{ClusterState, Command, Outcome, Request, Response};
use crate::types::{
    Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership, TypeConfig,
};

const CURRENT: &str = "current";

/// The applied state: written and read as one value, so the state and the log id it reflects
/// can never disagree.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AppliedState {
    /// The last log entry applied.
    pub last_applied: Option<LogId>,
    /// The membership as of it.
    pub membership: StoredMembership,
    /// The state as of it.
    pub state: ClusterState,
}

/// A stored snapshot: its meta and the serialized [`AppliedState`].
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta,
    data: Vec<u8>,
    /// When this node stored it (built or installed), in milliseconds since the epoch; 0 in
    /// a snapshot stored before this was kept.
    #[serde(default)]
    stored_ms: u64,
}

impl StoredSnapshot {
    fn new(meta: SnapshotMeta, data: Vec<u8>) -> Self {
        let stored_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        StoredSnapshot {
            meta,
            data,
            stored_ms,
        }
    }

    fn facts(&self) -> SnapshotFacts {
        SnapshotFacts {
            bytes: self.data.len() as u64,
            stored: (self.stored_ms > 0)
                .then(|| UNIX_EPOCH + std::time::Duration::from_millis(self.stored_ms)),
        }
    }
}

/// What a node knows of its latest snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotFacts {
    /// The size of the state it holds (bytes, as sent to a node that installs it).
    pub bytes: u64,
    /// When this node stored it, if known.
    pub stored: Option<SystemTime>,
}

/// A read-only handle on the applied state, for the API and the reconcilers.
#[derive(Clone)]
pub struct StateReader {
    inner: Applied,
    applied: watch::Receiver<u64>,
    snapshot: Arc<Mutex<Option<SnapshotFacts>>>,
}

impl StateReader {
    /// Read the applied state. Drop the guard before reading it again (a second read on the
    /// same thread panics: it could deadlock, see `store::held`).
    pub fn read(&self) -> StateGuard<'_> {
        self.inner.read()
    }

    /// Changes whenever this node applies entries: the index of the last one applied.
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }

    /// This node's latest snapshot, if it has one.
    pub fn snapshot(&self) -> Option<SnapshotFacts> {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The state machine: the applied state, kept in sled with its last applied log id.
pub struct StateMachineStore {
    db: sled::Db,
    snapshots: sled::Tree,
    inner: Applied,
    applied_tx: Arc<watch::Sender<u64>>,
    applied_rx: watch::Receiver<u64>,
    /// Makes snapshot ids unique even for the same last log id.
    snapshot_seq: Arc<AtomicU64>,
    /// What the latest stored snapshot is.
    snapshot: Arc<Mutex<Option<SnapshotFacts>>>,
}

impl StateMachineStore {
    /// Open the state machine: its latest snapshot, if this build understands its format.
    pub(crate) fn open(db: &sled::Db) -> Result<Self, MetaError> {
        let snapshots = db
            .open_tree("snapshots")
            .map_err(|source| MetaError::Storage {
                what: "open sled tree snapshots".into(),
                source,
            })?;
        let mut applied = AppliedState::default();
        let mut facts = None;
        if let Some(raw) = snapshots
            .get(CURRENT)
            .map_err(|source| MetaError::Storage {
                what: "read the current snapshot".into(),
                source,
            })?
        {
            let stored: StoredSnapshot =
                serde_json::from_slice(&raw).map_err(|e| MetaError::Corrupt {
                    what: "the current snapshot".into(),
                    reason: e.to_string(),
                })?;
            applied = serde_json::from_slice(&stored.data).map_err(|e| MetaError::Corrupt {
                what: "the current snapshot's state".into(),
                reason: e.to_string(),
            })?;
            understood(&applied, None).map_err(MetaError::Raft)?;
            facts = Some(stored.facts());
        }
        let index = applied.last_applied.map_or(0, |l| l.index);
        let (tx, rx) = watch::channel(index);
        Ok(StateMachineStore {
            db: db.clone(),
            snapshots,
            inner: Applied::new(applied),
            applied_tx: Arc::new(tx),
            applied_rx: rx,
            snapshot_seq: Arc::new(AtomicU64::new(0)),
            snapshot: Arc::new(Mutex::new(facts)),
        })
    }

    /// A reader of the applied state.
    pub fn reader(&self) -> StateReader {
        StateReader {
            inner: self.inner.clone(),
            applied: self.applied_rx.clone(),
            snapshot: self.snapshot.clone(),
        }
    }

    fn write(&self) -> StateWriteGuard<'_> {
        self.inner.write()
    }

    fn read(&self) -> StateGuard<'_> {
        self.inner.read()
    }

    async fn store_snapshot(&self, stored: &StoredSnapshot) -> Result<(), StorageError> {
        let signature = Some(stored.meta.signature());
        let bytes = serde_json::to_vec(stored)
            .map_err(|e| StorageIOError::write_snapshot(signature.clone(), &e))?;
        self.snapshots
            .insert(CURRENT, bytes)
            .map_err(|e| StorageIOError::write_snapshot(signature.clone(), &e))?;
        self.db
            .flush_async()
            .await
            .map_err(|e| StorageIOError::write_snapshot(signature, &e))?;
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = Some(stored.facts());
        Ok(())
    }
}

/// Builds snapshots from a copy of the applied state.
pub struct SnapshotBuilder {
    store: StateMachineStore,
}

impl Clone for StateMachineStore {
    fn clone(&self) -> Self {
        StateMachineStore {
            db: self.db.clone(),
            snapshots: self.snapshots.clone(),
            inner: self.inner.clone(),
            applied_tx: self.applied_tx.clone(),
            applied_rx: self.applied_rx.clone(),
            snapshot_seq: self.snapshot_seq.clone(),
            snapshot: self.snapshot.clone(),
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let started = std::time::Instant::now();
        let applied = self.store.read().clone();
        let data =
            serde_json::to_vec(&applied).map_err(|e| StorageIOError::write_snapshot(None, &e))?;
        let seq = self.store.snapshot_seq.fetch_add(1, Ordering::Relaxed) + 1;
        let snapshot_id = match applied.last_applied {
            Some(last) => format!("{}-{}-{seq}", last.leader_id, last.index),
            None => format!("empty-{seq}"),
        };
        let meta = SnapshotMeta {
            last_log_id: applied.last_applied,
            last_membership: applied.membership.clone(),
            snapshot_id,
        };
        let stored = StoredSnapshot::new(meta, data);
        self.store.store_snapshot(&stored).await?;
        tracing::info!(
            index = applied.last_applied.map_or(0, |l| l.index),
            bytes = stored.data.len(),
            ms = started.elapsed().as_millis() as u64,
            "snapshot built"
        );
        Ok(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        let applied = self.read();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut answers = Vec::new();
        let last = {
            let mut applied = self.write();
            for entry in entries {
                applied.last_applied = Some(entry.log_id);
                let answer = match entry.payload {
                    EntryPayload::Blank => Ok(Outcome::Done),
                    EntryPayload::Normal(Request {
                        command: Command::Unsupported { format, .. },
                        ..
                    }) => {
                        let what = format!("log entry {}", entry.log_id);
                        let e = std::io::Error::other(crate::format::refusal(&what, format));
                        return Err(StorageIOError::apply(entry.log_id, &e).into());
                    }
                    EntryPayload::Normal(request) => applied.state.apply(&request),
                    EntryPayload::Membership(membership) => {
                        applied.membership = StoredMembership::new(Some(entry.log_id), membership);
                        Ok(Outcome::Done)
                    }
                };
                answers.push(answer);
            }
            applied.last_applied.map_or(0, |l| l.index)
        };
        self.applied_tx.send_replace(last);
        Ok(answers)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        SnapshotBuilder {
            store: self.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let installed: AppliedState = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        understood(&installed, Some(meta)).map_err(|refused| {
            StorageIOError::read_snapshot(Some(meta.signature()), &std::io::Error::other(refused))
        })?;
        let stored = StoredSnapshot::new(meta.clone(), data);
        self.store_snapshot(&stored).await?;
        let index = installed.last_applied.map_or(0, |l| l.index);
        *self.write() = installed;
        self.applied_tx.send_replace(index);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let raw = self
            .snapshots
            .get(CURRENT)
            .map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        let Some(raw) = raw else {
            return Ok(None);
        };
        let stored: StoredSnapshot =
            serde_json::from_slice(&raw).map_err(|e| StorageIOError::read_snapshot(None, &e))?;
        Ok(Some(Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        }))
    }
}

/// A snapshot's state carries the cluster's feature level: the refusal of one this build
/// cannot read.
fn understood(applied: &AppliedState, meta: Option<&SnapshotMeta>) -> Result<(), String> {
    let level = applied.state.feature_level();
    if level <= crate::format::understood() {
        return Ok(());
    }
    let what = match meta {
        Some(meta) => format!("snapshot {}", meta.snapshot_id),
        None => "the stored snapshot".to_string(),
    };
    Err(crate::format::refusal(&what, level))
}
