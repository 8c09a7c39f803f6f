//! FileStreamSink: appends each record's value, one per line, to the task's file.

use std::collections::HashMap;

use async_trait::async_trait;
use ferry_connect::task::{Connector, Props};
use ferry_connect::{ConnectError, Result, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use std::io::Write;
use tracing::info;

use crate::config::FileSinkConfig;

/// The FileStreamSink connector: its tasks all write the same file.
pub struct FileSinkConnector {
    props: Props,
}

impl FileSinkConnector {
    /// The connector of a (validated) config.
    pub fn build(props: &Props) -> Result<Box<dyn Connector>> {
        FileSinkConfig::parse(props)?;
        Ok(Box::new(FileSinkConnector {
            props: props.clone(),
        }))
    }
}

impl Connector for FileSinkConnector {
    /// `max_tasks` identical tasks; Ferry's scheduler gives each its own partitions.
    fn task_configs(&self, max_tasks: usize) -> Result<Vec<Props>> {
        Ok(vec![self.props.clone(); max_tasks.max(1)])
    }
}

/// Appends lines to its file. A write that fails keeps what was not written, so that the
/// runtime's retry of `put` or `flush` (with the same records) writes each line exactly once:
/// records already appended are recognised by their offsets and skipped.
///
/// Writes are double-buffered: each `put` hands its lines to a write (off the async threads)
/// once the write before it is done, and the task goes on to the next records meanwhile; the
/// lines of a put are in the file when its write is done, not only at the next flush, as
/// Kafka Connect's FileStreamSink writes them.
pub struct FileSinkTask {
    config: FileSinkConfig,
    context: SinkTaskContext,
    /// The open file; `None` before it is opened (at start) and while a write has it.
    file: Option<std::fs::File>,
    /// Lines not yet handed to a write, in order after those of the write in flight.
    pending: Vec<u8>,
    /// The write in flight: it gives back the file, what it could not write, and its outcome.
    writing: Option<tokio::task::JoinHandle<Written>>,
    /// An emptied buffer, reused for the next lines.
    spare: Vec<u8>,
    /// The last offset appended to `pending`, per partition.
    appended: HashMap<TopicPartition, i64>,
    /// The file's pages written and let go.
    behind: Behind,
}

/// What a write gives back: the file, what is behind it now, the bytes it did not write, and
/// its outcome.
type Written = (std::fs::File, Behind, Vec<u8>, std::io::Result<()>);

/// Bytes of the file behind a task's last write that are handed to the disk at a time.
const WRITE_BEHIND: u64 = 8 * 1024 * 1024;

/// The file's pages a task has written and no longer needs in memory: the lines are in
/// Kafka and in the file, and nobody reads them back. Every `WRITE_BEHIND` bytes the task
/// starts the disk write of the range behind it (`sync_file_range`, no wait), and lets the
/// page cache drop the range before that one (`posix_fadvise` `DONTNEED`; a page still dirty
/// is kept). A sink streaming gigabytes then reuses the same few pages of memory instead of
/// filling the page cache, whose fresh pages cost more to fill than the copy itself (on this
/// project's virtual machines, half of a FileStreamSink's CPU).
#[derive(Clone, Copy, Debug, Default)]
struct Behind {
    /// Where the range being written to disk begins.
    writing: u64,
    /// Where the range that may be dropped begins.
    dropping: u64,
}

impl Behind {
    /// From the end of the file as it is opened: what was there before is left alone.
    fn at(end: u64) -> Self {
        Behind {
            writing: end,
            dropping: end,
        }
    }

    /// After a write that left the file `end` bytes long: the ranges (start, length) to hand
    /// to the disk and to drop, once `WRITE_BEHIND` bytes were written since the last time.
    fn after(&mut self, end: u64) -> Option<((u64, u64), (u64, u64))> {
        if end < self.writing.saturating_add(WRITE_BEHIND) {
            return None;
        }
        let ranges = (
            (self.writing, end - self.writing),
            (self.dropping, self.writing - self.dropping),
        );
        self.dropping = self.writing;
        self.writing = end;
        Some(ranges)
    }

    /// After a write that left `file` `end` bytes long.
    fn wrote(&mut self, file: &std::fs::File, end: u64) {
        use std::os::fd::AsRawFd;
        let Some(((write, write_length), (drop, drop_length))) = self.after(end) else {
            return;
        };
        let fd = file.as_raw_fd();
        let off = |n: u64| libc::off64_t::try_from(n).unwrap_or(libc::off64_t::MAX);
        // SAFETY: plain system calls on a file descriptor this task owns; a failure (a pipe,
        // a file system without them) only leaves the pages where they are.
        unsafe {
            libc::sync_file_range(
                fd,
                off(write),
                off(write_length),
                libc::SYNC_FILE_RANGE_WRITE,
            );
            libc::posix_fadvise(fd, off(drop), off(drop_length), libc::POSIX_FADV_DONTNEED);
        }
    }
}

/// Write as much of `pending` as the file takes; what was written leaves `pending`.
fn write_some(file: &mut std::fs::File, pending: &mut Vec<u8>) -> std::io::Result<()> {
    let mut written = 0;
    let result = loop {
        if written == pending.len() {
            break Ok(());
        }
        match file.write(&pending[written..]) {
            Ok(0) => break Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => written += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    pending.drain(..written);
    result
}

/// A record's value as a line: text as it is, anything else as Kafka Connect prints it.
fn append_line(pending: &mut Vec<u8>, value: &ferry_connect::Value) -> std::io::Result<()> {
    match value {
        ferry_connect::Value::String(text) => {
            pending.extend_from_slice(text.as_bytes());
            pending.push(b'\n');
            Ok(())
        }
        other => writeln!(pending, "{other}"),
    }
}

impl FileSinkTask {
    /// A task of a config, writing with `context`.
    pub fn build(props: &Props, context: SinkTaskContext) -> Result<Box<dyn SinkTask>> {
        Ok(Box::new(Self::new(props, context)?))
    }

    fn new(props: &Props, context: SinkTaskContext) -> Result<Self> {
        Ok(FileSinkTask {
            config: FileSinkConfig::parse(props)?,
            context,
            file: None,
            pending: Vec::new(),
            writing: None,
            spare: Vec::new(),
            appended: HashMap::new(),
            behind: Behind::default(),
        })
    }

    /// Hand what is pending to a write, once the write before it has finished; the task goes
    /// on meanwhile. Only written to the page cache: a sync is `flush`'s.
    async fn write_out(&mut self) -> Result<()> {
        self.written().await?;
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut file = match self.file.take() {
            Some(file) => file,
            None => self.open_file().await?,
        };
        let mut lines = std::mem::replace(&mut self.pending, std::mem::take(&mut self.spare));
        let mut behind = self.behind;
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let result = write_some(&mut file, &mut lines);
            // A pipe or a terminal has no position: nothing is behind.
            if let Ok(end) = std::io::Seek::stream_position(&mut file) {
                behind.wrote(&file, end);
            }
            (file, behind, lines, result)
        }));
        Ok(())
    }

    /// Wait for the write in flight, if any. What it could not write goes back in front of
    /// the pending lines, and its error is returned (the retried `put` or `flush` writes it).
    async fn written(&mut self) -> Result<()> {
        let Some(writing) = self.writing.take() else {
            return Ok(());
        };
        let path = &self.config.file;
        let (file, behind, mut left, result) = writing
            .await
            .map_err(|e| ConnectError::fatal(format!("the writer of {path} failed: {e}")))?;
        self.file = Some(file);
        self.behind = behind;
        if left.is_empty() {
            self.spare = left;
        } else {
            left.append(&mut self.pending);
            self.pending = left;
        }
        result.map_err(|e| ConnectError::io(format!("write {path}"), e))
    }

    /// Write out everything pending and make it durable (`fdatasync`).
    async fn write_and_sync(&mut self) -> Result<()> {
        self.write_out().await?;
        self.written().await?;
        let Some(file) = self.file.take() else {
            // Never opened: nothing written.
            return Ok(());
        };
        let (file, result) = tokio::task::spawn_blocking(move || {
            let result = match file.sync_data() {
                // A pipe or a terminal cannot be synced: nothing to make durable.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => Ok(()),
                other => other,
            };
            (file, result)
        })
        .await
        .map_err(|e| {
            ConnectError::fatal(format!("the writer of {} failed: {e}", self.config.file))
        })?;
        self.file = Some(file);
        result.map_err(|e| ConnectError::io(format!("sync {}", self.config.file), e))
    }

    /// Open the file for appending.
    async fn open_file(&mut self) -> Result<std::fs::File> {
        let path = self.config.file.clone();
        // Opening a pipe waits for its reader: off the async threads.
        let (file, end) = tokio::task::spawn_blocking(move || {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| ConnectError::io(format!("open {path} for appending"), e))?;
            let end = file.metadata().map_or(0, |m| m.len());
            Ok::<_, ConnectError>((file, end))
        })
        .await
        .map_err(|e| ConnectError::fatal(format!("opening {} failed: {e}", self.config.file)))??;
        self.behind = Behind::at(end);
        info!(connector = %self.context.connector, task = self.context.task, file = %self.config.file, "writing");
        Ok(file)
    }
}

#[async_trait]
impl SinkTask for FileSinkTask {
    async fn start(&mut self) -> Result<()> {
        self.file = Some(self.open_file().await?);
        Ok(())
    }

    async fn put(&mut self, records: &[SinkRecord]) -> Result<()> {
        for run in records.chunk_by(SinkRecord::same_partition) {
            let tp = run[0].topic_partition();
            let before = self.appended.get(&tp).copied();
            let mut last = None;
            let mut written = Ok(());
            // Records appended by an earlier try of this put are skipped.
            for record in run.iter().filter(|r| before.is_none_or(|o| r.offset > o)) {
                written = append_line(&mut self.pending, &record.value);
                if written.is_err() {
                    break;
                }
                last = Some(record.offset);
            }
            if let Some(last) = last {
                self.appended.insert(tp, last);
            }
            written.map_err(|e| ConnectError::io("format a record", e))?;
        }
        self.write_out().await
    }

    async fn flush(&mut self, _offsets: &HashMap<TopicPartition, i64>) -> Result<()> {
        self.write_and_sync().await
    }

    async fn stop(&mut self) -> Result<()> {
        if self.file.is_some() || self.writing.is_some() {
            self.write_out().await?;
            self.written().await?;
        }
        self.file = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use ferry_connect::task::{CommitOutcome, SinkCommit, SinkCommitter};
    use ferry_connect::Value;

    struct NoCommits;

    #[async_trait]
    impl SinkCommitter for NoCommits {
        async fn commit(&self, _commit: SinkCommit) -> Result<CommitOutcome> {
            Err(ConnectError::fatal(
                "FileStreamSink does not commit by itself",
            ))
        }
        async fn last_commit(
            &self,
            _partition: &TopicPartition,
        ) -> Result<Option<(i64, std::collections::BTreeMap<String, String>)>> {
            Ok(None)
        }
    }

    fn context() -> SinkTaskContext {
        SinkTaskContext {
            connector: "sink".into(),
            task: 0,
            generation: 1,
            reporter: None,
            committer: Arc::new(NoCommits),
            rewinds: Arc::default(),
            clock: ferry_connect::task::WallClock::system(),
            commit_times: std::sync::Arc::new(ferry_connect::task::Untimed),
        }
    }

    /// A started task writing to `path`.
    async fn started(path: &std::path::Path) -> FileSinkTask {
        let props: Props = [("file".to_string(), path.to_string_lossy().to_string())].into();
        let mut task = FileSinkTask::new(&props, context()).expect("valid");
        task.start().await.expect("start");
        task
    }

    fn record(offset: i64, value: Value) -> SinkRecord {
        SinkRecord {
            topic: "t".into(),
            partition: 0,
            offset,
            timestamp: None,
            key_schema: None,
            key: Value::Null,
            value_schema: None,
            value,
            headers: Vec::new(),
        }
    }

    #[tokio::test]
    async fn appends_one_line_per_record_and_pre_commit_returns_what_was_flushed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "existing\n").expect("write");
        let mut task = started(&path).await;
        task.put(&[
            record(0, Value::String("a".into())),
            record(1, Value::Int32(7)),
            record(2, Value::Null),
        ])
        .await
        .expect("put");
        let offsets = HashMap::from([(TopicPartition::new("t", 0), 3)]);
        let committed = task.pre_commit(&offsets).await.expect("pre_commit");
        assert_eq!(committed, offsets);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "existing\na\n7\nnull\n"
        );
        task.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn a_few_records_reach_the_file_without_waiting_for_a_flush() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let mut task = started(&path).await;
        task.put(&[record(0, Value::String("first".into()))])
            .await
            .expect("put");
        // No flush: the line was handed to a write at once; the file shows it when that
        // write is done (what the next put or flush would wait for).
        task.written().await.expect("written");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "first\n");
        task.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn lines_written_while_the_next_are_taken_keep_their_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let mut task = started(&path).await;
        // 2.5 MB of lines in puts of 100: a write is in flight while the next put comes.
        let line = |i: i64| format!("{i:06}-{}", "x".repeat(1000));
        let lines = 2_560;
        for first in (0..lines).step_by(100) {
            let batch: Vec<SinkRecord> = (first..(first + 100).min(lines))
                .map(|i| record(i, Value::String(line(i))))
                .collect();
            task.put(&batch).await.expect("put");
        }
        task.flush(&HashMap::new()).await.expect("flush");
        let written = std::fs::read_to_string(&path).expect("read");
        let expected: String = (0..lines).map(|i| line(i) + "\n").collect();
        assert!(written == expected, "every line once, in order");
        task.stop().await.expect("stop");
    }

    #[tokio::test]
    async fn a_failed_write_keeps_its_lines_and_a_retried_put_appends_each_once() {
        let props: Props = [("file".to_string(), "/dev/full".to_string())].into();
        let mut task = FileSinkTask::new(&props, context()).expect("valid");
        task.start().await.expect("start");
        let batch = || {
            (0..3)
                .map(|i| record(i, Value::Int64(i)))
                .collect::<Vec<_>>()
        };
        task.put(&batch()).await.expect("put");
        let err = task
            .flush(&HashMap::new())
            .await
            .expect_err("the disk is full");
        assert!(err.is_retriable(), "a full disk may be freed: {err}");
        assert!(err.message.contains("/dev/full"), "{err}");
        // The runtime retries: the same records again, then the flush, now on a disk with room.
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let roomy = std::fs::File::create(&path).expect("create");
        task.file = Some(roomy);
        task.put(&batch()).await.expect("put again");
        task.flush(&HashMap::new()).await.expect("flush");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "0\n1\n2\n");
    }

    #[test]
    fn every_write_behind_bytes_the_range_behind_is_written_and_the_one_before_dropped() {
        const W: u64 = WRITE_BEHIND;
        // Opened on a file of 100 bytes: those are never touched.
        let mut behind = Behind::at(100);
        assert_eq!(behind.after(100 + W - 1), None);
        assert_eq!(behind.after(100 + W), Some(((100, W), (100, 0))));
        assert_eq!(behind.after(100 + W + 10), None);
        assert_eq!(
            behind.after(100 + 3 * W),
            Some(((100 + W, 2 * W), (100, W)))
        );
        assert_eq!(
            behind.after(100 + 4 * W),
            Some(((100 + 3 * W, W), (100 + W, 2 * W)))
        );
    }

    #[test]
    fn the_connector_makes_max_tasks_identical_tasks() {
        let props: Props = [("file".to_string(), "x".to_string())].into();
        let connector = FileSinkConnector::build(&props).expect("valid");
        assert_eq!(connector.task_configs(3).expect("configs").len(), 3);
    }
}
