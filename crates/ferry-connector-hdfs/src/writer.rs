//! One topic partition's files, and the commit protocol for them (docs/design.md#the-storage-sink): records go to
//! temporary files (one per partition path); a rotation closes and syncs them, proposes "files
//! tmp → final, offsets start → next" through Raft (compare-and-set on `start`), and renames
//! only what Raft accepted. Each step that fails is driven again before anything else happens,
//! so a retried call never repeats or skips one. A file that cannot be written or closed is
//! given up with the partition's other open files, and the partition is consumed again from
//! its last commit (a rewind the runtime carries out). A starting writer replays the last accepted
//! commit (renaming only where the target is missing), removes this partition's temporary
//! files, and resumes after what is committed.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_connect::task::{
    CommitOutcome, CommitTimes, ErrantRecordReporter, Rewinds, SinkCommit, SinkCommitter,
};
use ferry_connect::{ConnectError, Result, Schema, SinkRecord, TopicPartition};
use tracing::{debug, info, warn};

use crate::config::HdfsSinkConfig;
use crate::format::{writer, RecordWriter};
use crate::naming::{file_name, Names};
use crate::storage::{Output, Renamed, Storage};

/// Bytes a file buffers before they are written to the store.
const WRITE_AT: usize = 128 * 1024;

/// What every writer of a task shares.
pub struct Shared {
    /// The task's config.
    pub config: HdfsSinkConfig,
    /// How files are named.
    pub names: Names,
    /// Where the files go.
    pub storage: Arc<dyn Storage>,
    /// Commits of files and offsets, through Raft.
    pub committer: Arc<dyn SinkCommitter>,
    /// Where records that fail go, if errors are tolerated.
    pub reporter: Option<Arc<dyn ErrantRecordReporter>>,
    /// Where a partition that lost its open files asks to be consumed again.
    pub rewinds: Arc<Rewinds>,
    /// The generation of this run of the task (in temporary file names; commits carry it).
    pub generation: u64,
    /// Where each commit's time goes (the worker's `ferry_sink_commit_seconds`).
    pub commit_times: Arc<dyn CommitTimes>,
}

struct OpenFile {
    tmp: String,
    output: Box<dyn Output>,
    writer: Box<dyn RecordWriter>,
    pending: Vec<u8>,
    first: i64,
    last: i64,
    schema: Option<Arc<Schema>>,
}

/// Where the writer is between records.
enum Phase {
    Writing,
    /// Files closed; the commit is to be proposed (again, if the answer was lost).
    Proposing(SinkCommit),
    /// Accepted; these renames are left.
    Renaming(Vec<(String, String)>),
}

/// The files of one topic-partition: written, rotated, and committed with their offsets.
pub struct PartitionWriter {
    tp: TopicPartition,
    /// The offset the next commit starts at; `None`: the first record's.
    start: Option<i64>,
    /// The offset after the last record taken.
    next: Option<i64>,
    files: BTreeMap<String, OpenFile>,
    records: u64,
    first_time: Option<i64>,
    /// The task's write counter when this partition was last written (for the open-file
    /// limit).
    pub last_written: u64,
    phase: Phase,
}

fn same_schema(a: &Option<Arc<Schema>>, b: &Option<Arc<Schema>>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        (None, None) => true,
        _ => false,
    }
}

impl PartitionWriter {
    /// Recover a partition this task now owns and say where it resumes.
    pub async fn open(shared: &Shared, tp: TopicPartition) -> Result<PartitionWriter> {
        let recorded = shared.committer.last_commit(&tp).await?;
        let resume = match &recorded {
            Some((next, payload)) => {
                for (tmp, target) in payload {
                    match shared.storage.rename(tmp, target).await? {
                        Renamed::Done => info!(file = %target, "replayed an accepted commit"),
                        Renamed::AlreadyThere => {}
                        Renamed::Missing => {
                            return Err(ConnectError::fatal(format!(
                                "{tp}: the accepted file {target} is missing and so is its temporary file {tmp}"
                            )))
                        }
                    }
                }
                Some(*next)
            }
            // Offsets reset through the offsets API: start where the consumer does, whatever
            // the files are named.
            None if shared.committer.offsets_altered_at().await?.is_some() => None,
            // No commit in Raft: take over what committed names say (a directory written by
            // Confluent's connector), if anything.
            None => Self::committed_end(shared, &tp).await?,
        };
        let prefix = shared.names.tmp_prefix(&tp.topic, tp.partition);
        for tmp in shared
            .storage
            .list_files(&shared.names.tmp_topic_dir(&tp.topic))
            .await?
        {
            if file_name(&tmp).starts_with(&prefix) {
                debug!(file = %tmp, "removing a leftover temporary file");
                shared.storage.delete(&tmp).await?;
            }
        }
        info!(partition = %tp, resume = ?resume, "partition recovered");
        Ok(PartitionWriter {
            tp,
            start: resume,
            next: resume,
            files: BTreeMap::new(),
            records: 0,
            first_time: None,
            last_written: 0,
            phase: Phase::Writing,
        })
    }

    /// The offset after the last committed file of a partition, by the names in its topic's
    /// directory.
    async fn committed_end(shared: &Shared, tp: &TopicPartition) -> Result<Option<i64>> {
        let files = shared
            .storage
            .list_files(&shared.names.topic_dir(&tp.topic))
            .await?;
        Ok(files
            .iter()
            .filter_map(|f| shared.names.parse_committed(file_name(f)))
            .filter(|c| c.topic == tp.topic && c.partition == tp.partition)
            .map(|c| c.end + 1)
            .max())
    }

    /// How many files it has open.
    pub fn open_files(&self) -> usize {
        self.files.len()
    }

    /// Whether records wait for a commit.
    pub fn has_pending(&self) -> bool {
        !self.files.is_empty() || self.start != self.next || !matches!(self.phase, Phase::Writing)
    }

    /// The record time of the first record of the open files.
    pub fn first_time(&self) -> Option<i64> {
        self.first_time
    }

    /// Take one record; `now` is the wall clock (ms). Rotation happens as configured.
    pub async fn write(&mut self, shared: &Shared, record: &SinkRecord, now: i64) -> Result<()> {
        self.settle(shared).await?;
        if self.next.is_some_and(|n| record.offset < n) {
            return Ok(()); // Written before (a retried put, or a taken-over directory).
        }
        let partitioner = &shared.config.partitioner;
        let placed = partitioner
            .encode(record, now)
            .and_then(|dir| Ok((dir, partitioner.record_time(record, now)?)));
        let (dir, time) = match placed {
            Ok(placed) => placed,
            Err(e) => return self.failed(shared, record, e).await,
        };
        if let (Some(interval), Some(first)) = (shared.config.rotate_interval_ms, self.first_time) {
            if time - first >= interval {
                self.commit(shared).await?;
            }
        }
        let same = self
            .files
            .get(&dir)
            .map(|f| same_schema(&f.schema, &record.value_schema));
        match (same, self.files.get_mut(&dir)) {
            (Some(true), Some(file)) => {
                if let Err(e) = file.writer.write(record) {
                    return self.failed(shared, record, e).await;
                }
            }
            _ => {
                // A new file: the record is encoded first, so that a record that cannot be
                // written neither rotates the open file nor leaves an empty one.
                let mut encoder = writer(&shared.config)?;
                if let Err(e) = encoder.write(record) {
                    return self.failed(shared, record, e).await;
                }
                if same == Some(false) {
                    debug!(partition = %self.tp, "schema changed: rotating");
                    self.commit(shared).await?;
                }
                let tmp = shared.names.tmp(
                    &self.tp.topic,
                    &dir,
                    self.tp.partition,
                    shared.generation,
                    &uuid::Uuid::new_v4().simple().to_string(),
                );
                let output = shared.storage.create(&tmp).await?;
                let file = OpenFile {
                    tmp,
                    output,
                    writer: encoder,
                    pending: Vec::new(),
                    first: record.offset,
                    last: record.offset,
                    schema: record.value_schema.clone(),
                };
                self.files.insert(dir.clone(), file);
            }
        }
        let Some(file) = self.files.get_mut(&dir) else {
            return Err(ConnectError::fatal("an open file went missing"));
        };
        file.last = record.offset;
        file.pending.extend(file.writer.take());
        if file.pending.len() >= WRITE_AT {
            let bytes = std::mem::take(&mut file.pending);
            if let Err(e) = file.output.write(bytes).await {
                let files = std::mem::take(&mut self.files);
                return Err(self
                    .rewind(shared, files.into_values().map(|f| f.tmp), e)
                    .await);
            }
        }
        self.took(record.offset);
        self.records += 1;
        self.first_time.get_or_insert(time);
        if self.records >= shared.config.flush_size {
            self.commit(shared).await?;
        }
        Ok(())
    }

    /// The next commit covers `offset` (written, or reported: a reported record does not
    /// count towards flush.size, as in Confluent's connector).
    fn took(&mut self, offset: i64) {
        self.start.get_or_insert(offset);
        self.next = Some(offset + 1);
    }

    /// A record that cannot be placed or written: reported (and then skipped, its offset
    /// covered by the next commit), or the task fails.
    async fn failed(
        &mut self,
        shared: &Shared,
        record: &SinkRecord,
        e: ConnectError,
    ) -> Result<()> {
        if e.is_retriable() {
            return Err(e);
        }
        let Some(reporter) = &shared.reporter else {
            return Err(e);
        };
        reporter.report(record, &e).await?;
        self.took(record.offset);
        Ok(())
    }

    /// Close the open files and commit them with their offsets (see the module docs).
    pub async fn commit(&mut self, shared: &Shared) -> Result<()> {
        self.settle(shared).await?;
        let (Some(start), Some(next)) = (self.start, self.next) else {
            return Ok(());
        };
        if start == next && self.files.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let mut payload = BTreeMap::new();
        let files = std::mem::take(&mut self.files);
        let tmps: Vec<String> = files.values().map(|f| f.tmp.clone()).collect();
        for (dir, file) in files {
            let target = shared.names.committed(
                &self.tp.topic,
                &dir,
                self.tp.partition,
                file.first,
                file.last,
            );
            let tmp = file.tmp.clone();
            if let Err(e) = Self::close(file).await {
                return Err(self.rewind(shared, tmps, e).await);
            }
            payload.insert(tmp, target);
        }
        self.phase = Phase::Proposing(SinkCommit {
            partition: self.tp.clone(),
            start,
            next,
            payload,
        });
        self.records = 0;
        self.first_time = None;
        self.settle(shared).await?;
        // Files closed, the commit in Raft, the files renamed.
        shared.commit_times.took(started.elapsed());
        Ok(())
    }

    async fn close(mut file: OpenFile) -> Result<()> {
        file.pending.extend(file.writer.finish()?);
        if !file.pending.is_empty() {
            file.output.write(file.pending).await?;
        }
        file.output.close().await
    }

    /// A file could not be written or closed: what was taken since the last commit is lost
    /// with it. The open files are given up (their temporary files `tmps` removed, or left
    /// for the task's next start to remove) and the partition is consumed again from the last
    /// commit; `e` keeps its class, so a store that is down is retried.
    async fn rewind(
        &mut self,
        shared: &Shared,
        tmps: impl IntoIterator<Item = String>,
        e: ConnectError,
    ) -> ConnectError {
        for tmp in tmps {
            if let Err(d) = shared.storage.delete(&tmp).await {
                debug!(file = %tmp, error = %d, "cannot remove a given-up temporary file: the task's next start will");
            }
        }
        let Some(start) = self.start else {
            return e; // Nothing was taken, so nothing is lost.
        };
        self.next = Some(start);
        self.records = 0;
        self.first_time = None;
        shared.rewinds.request(self.tp.clone(), start);
        ConnectError {
            message: format!(
                "{}: {}; the files since the last commit are given up and the partition is consumed again from offset {start}",
                self.tp, e.message
            ),
            ..e
        }
    }

    /// Drive a commit in progress to its end: propose it, then rename.
    async fn settle(&mut self, shared: &Shared) -> Result<()> {
        if let Phase::Proposing(commit) = &self.phase {
            let accepted = match shared.committer.commit(commit.clone()).await? {
                CommitOutcome::Committed => true,
                // Applied before, its answer lost: the same commit.
                CommitOutcome::Conflict { recorded } if recorded == Some(commit.next) => true,
                CommitOutcome::Conflict { recorded } => {
                    return Err(ConnectError::fatal(format!(
                        "{}: the recorded offset is {recorded:?}, not {} as this task wrote from; restarting it resumes from the record",
                        self.tp, commit.start
                    )))
                }
                CommitOutcome::Fenced => false,
            };
            if !accepted {
                return Err(ConnectError::fatal(format!(
                    "{}: fenced: another task owns this partition now; its files are left to it",
                    self.tp
                )));
            }
            let next = commit.next;
            let renames = commit.payload.clone().into_iter().collect();
            self.phase = Phase::Renaming(renames);
            self.start = Some(next);
        }
        if let Phase::Renaming(renames) = &mut self.phase {
            while let Some((tmp, target)) = renames.last() {
                if shared.storage.rename(tmp, target).await? == Renamed::Missing {
                    warn!(file = %target, "an accepted file is missing and so is its temporary file");
                }
                renames.pop();
            }
            self.phase = Phase::Writing;
        }
        Ok(())
    }

    /// The partition is no longer this task's: its open files are left for the next owner
    /// to remove.
    pub fn abandon(self) {
        debug!(partition = %self.tp, files = self.files.len(), "partition closed");
    }
}
