//! The Raft log, vote and committed index in sled.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::{Arc, Mutex, MutexGuard};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{OptionalSend, RaftLogReader, StorageIOError};

use crate::error::MetaError;
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const PURGED: &str = "last_purged";

/// Log entries keyed by big-endian index, so that sled's order is the log's order.
#[derive(Clone)]
pub struct LogStore {
    db: sled::Db,
    logs: sled::Tree,
    meta: sled::Tree,
    /// Recent entries, decoded: replication reads them without touching sled.
    cache: Arc<Mutex<BTreeMap<u64, Entry>>>,
    cache_size: usize,
    /// The last committed log id this node knows, shared with [`LogStore::committed`].
    committed: Arc<Mutex<Option<LogId>>>,
    /// Test only: while this file exists, appends fail as a broken disk's would.
    fault_file: Option<std::path::PathBuf>,
}

impl LogStore {
    pub(crate) fn open(db: &sled::Db, cache_size: usize) -> Result<Self, MetaError> {
        let tree = |name: &str| {
            db.open_tree(name).map_err(|source| MetaError::Storage {
                what: format!("open sled tree {name}"),
                source,
            })
        };
        Ok(LogStore {
            db: db.clone(),
            logs: tree("raft_log")?,
            meta: tree("raft_meta")?,
            cache: Arc::new(Mutex::new(BTreeMap::new())),
            cache_size: cache_size.max(1),
            committed: Arc::new(Mutex::new(None)),
            fault_file: None,
        })
    }

    /// Test only: make appends fail with an I/O error while `file` exists.
    pub fn fail_appends_while(&mut self, file: std::path::PathBuf) {
        self.fault_file = Some(file);
    }

    /// A handle on the committed log id, updated as Raft saves it.
    pub fn committed(&self) -> Arc<Mutex<Option<LogId>>> {
        self.committed.clone()
    }

    fn cache(&self) -> MutexGuard<'_, BTreeMap<u64, Entry>> {
        // A poisoned cache only means a panic elsewhere; the data is a copy of sled's.
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read_meta<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, IoError> {
        let raw = self.meta.get(key)?;
        Ok(raw
            .map(|bytes| serde_json::from_slice(&bytes))
            .transpose()?)
    }

    fn write_meta<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<(), IoError> {
        self.meta.insert(key, serde_json::to_vec(value)?)?;
        Ok(())
    }

    async fn flush(&self) -> Result<(), StorageError> {
        self.db
            .flush_async()
            .await
            .map_err(|e| StorageIOError::write(&e))?;
        Ok(())
    }

    fn last_entry_id(&self) -> Result<Option<LogId>, IoError> {
        if let Some((_, entry)) = self.cache().iter().next_back() {
            return Ok(Some(entry.log_id));
        }
        match self.logs.last()? {
            Some((_, bytes)) => Ok(Some(serde_json::from_slice::<Entry>(&bytes)?.log_id)),
            None => Ok(None),
        }
    }
}

/// What can go wrong reading or writing the log's own keys.
#[derive(Debug, thiserror::Error)]
enum IoError {
    #[error("sled: {0}")]
    Sled(#[from] sled::Error),
    #[error("encoding: {0}")]
    Codec(#[from] serde_json::Error),
}

/// The committed entries of a node's log, read from its sled trees: for offline inspection of a
/// stopped node (the fault suite replays them through the state machine).
pub(crate) fn read_committed(db: &sled::Db) -> Result<Vec<Entry>, MetaError> {
    let store = LogStore::open(db, 1)?;
    let corrupt = |what: &str, e: IoError| MetaError::Corrupt {
        what: what.to_string(),
        reason: e.to_string(),
    };
    let purged: Option<LogId> = store
        .read_meta(PURGED)
        .map_err(|e| corrupt("the purge point", e))?;
    if let Some(purged) = purged {
        return Err(MetaError::Corrupt {
            what: "the raft log".into(),
            reason: format!(
                "purged up to index {} behind a snapshot: the log no longer starts at the beginning",
                purged.index
            ),
        });
    }
    let committed: Option<Option<LogId>> = store
        .read_meta(COMMITTED)
        .map_err(|e| corrupt("the committed log id", e))?;
    let Some(committed) = committed.flatten() else {
        return Ok(Vec::new());
    };
    let mut entries = Vec::new();
    for item in store.logs.range(..=key(committed.index)) {
        let (k, bytes) = item.map_err(|e| corrupt("the raft log", IoError::Sled(e)))?;
        let entry: Entry = serde_json::from_slice(&bytes).map_err(|e| MetaError::Corrupt {
            what: format!("raft log entry {k:?}"),
            reason: e.to_string(),
        })?;
        entries.push(entry);
    }
    Ok(entries)
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

fn bounds<RB: RangeBounds<u64>>(range: &RB) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => Some(e.saturating_add(1)),
        Bound::Excluded(e) => Some(*e),
        Bound::Unbounded => None,
    };
    (start, end)
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (start, end) = bounds(&range);
        if end.is_some_and(|end| end <= start) {
            return Ok(Vec::new());
        }
        {
            let cache = self.cache();
            let first_cached = cache.keys().next().copied();
            if first_cached.is_some_and(|first| first <= start) {
                return Ok(cache.range(range).map(|(_, e)| e.clone()).collect());
            }
        }
        let iter = match end {
            Some(end) => self.logs.range(key(start)..key(end)),
            None => self.logs.range(key(start)..),
        };
        let mut entries = Vec::new();
        for item in iter {
            let (_, bytes) = item.map_err(|e| StorageIOError::read_logs(&e))?;
            let entry: Entry =
                serde_json::from_slice(&bytes).map_err(|e| StorageIOError::read_logs(&e))?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId> = self
            .read_meta(PURGED)
            .map_err(|e| StorageIOError::read_logs(&e))?;
        let last = self
            .last_entry_id()
            .map_err(|e| StorageIOError::read_logs(&e))?
            .or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        self.write_meta(VOTE, vote)
            .map_err(|e| StorageIOError::write_vote(&e))?;
        self.flush().await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self
            .read_meta(VOTE)
            .map_err(|e| StorageIOError::read_vote(&e))?)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        // Not flushed: losing it only means waiting for the leader's commit index on restart.
        *self.committed.lock().unwrap_or_else(|p| p.into_inner()) = committed;
        Ok(self
            .write_meta(COMMITTED, &committed)
            .map_err(|e| StorageIOError::write(&e))?)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let committed = self
            .read_meta::<Option<LogId>>(COMMITTED)
            .map_err(|e| StorageIOError::read(&e))?;
        Ok(committed.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        if let Some(file) = self.fault_file.as_ref().filter(|f| f.exists()) {
            let e = std::io::Error::other(format!(
                "injected storage fault ({} exists)",
                file.display()
            ));
            return Err(StorageIOError::write_logs(&e).into());
        }
        let mut batch = sled::Batch::default();
        let mut appended = Vec::new();
        for entry in entries {
            let bytes = serde_json::to_vec(&entry)
                .map_err(|e| StorageIOError::write_log_entry(entry.log_id, &e))?;
            batch.insert(&key(entry.log_id.index), bytes);
            appended.push(entry);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        {
            let mut cache = self.cache();
            for entry in appended {
                cache.insert(entry.log_id.index, entry);
            }
            while cache.len() > self.cache_size {
                cache.pop_first();
            }
        }
        let flushed = self
            .db
            .flush_async()
            .await
            .map(|_| ())
            .map_err(std::io::Error::other);
        let failed = flushed.as_ref().err().map(StorageIOError::write_logs);
        callback.log_io_completed(flushed);
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut batch = sled::Batch::default();
        for item in self.logs.range(key(log_id.index)..) {
            let (k, _) = item.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.cache().retain(|index, _| *index < log_id.index);
        self.flush().await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        // Record the purge point first: a crash half-way leaves entries that are simply ignored.
        self.write_meta(PURGED, &log_id)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.flush().await?;
        let mut batch = sled::Batch::default();
        for item in self.logs.range(..=key(log_id.index)) {
            let (k, _) = item.map_err(|e| StorageIOError::write_logs(&e))?;
            batch.remove(k);
        }
        self.logs
            .apply_batch(batch)
            .map_err(|e| StorageIOError::write_logs(&e))?;
        self.cache().retain(|index, _| *index > log_id.index);
        self.flush().await
    }
}
