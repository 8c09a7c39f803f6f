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

/// Bytes waiting to be written once this many are pending (and at every flush).
const WRITE_AT: usize = 256 * 1024;

/// Appends lines to its file. A write that fails keeps what was not written, so that the
/// runtime's retry of `put` or `flush` (with the same records) writes each line exactly once:
/// records already appended are recognised by their offsets and skipped.
///
/// Writes are double-buffered: while one buffer is written (off the async threads) the task
/// fills the next, so consuming and converting records never waits for the file but when a
/// second buffer is full before the first is written.
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
}

/// What a write gives back: the file, the bytes it did not write, and its outcome.
type Written = (std::fs::File, Vec<u8>, std::io::Result<()>);

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
        self.writing = Some(tokio::task::spawn_blocking(move || {
            let result = write_some(&mut file, &mut lines);
            (file, lines, result)
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
        let (file, mut left, result) = writing
            .await
            .map_err(|e| ConnectError::fatal(format!("the writer of {path} failed: {e}")))?;
        self.file = Some(file);
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
    async fn open_file(&self) -> Result<std::fs::File> {
        let path = self.config.file.clone();
        // Opening a pipe waits for its reader: off the async threads.
        let file = tokio::task::spawn_blocking(move || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| ConnectError::io(format!("open {path} for appending"), e))
        })
        .await
        .map_err(|e| ConnectError::fatal(format!("opening {} failed: {e}", self.config.file)))??;
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
        if self.pending.len() >= WRITE_AT {
            self.write_out().await?;
        }
        Ok(())
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
        }
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
        let props: Props = [("file".to_string(), path.to_string_lossy().to_string())].into();
        let mut task = FileSinkTask::build(&props, context()).expect("valid");
        task.start().await.expect("start");
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
    async fn lines_written_while_the_next_are_taken_keep_their_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let props: Props = [("file".to_string(), path.to_string_lossy().to_string())].into();
        let mut task = FileSinkTask::build(&props, context()).expect("valid");
        task.start().await.expect("start");
        // Ten buffers' worth of lines, in puts of 100: writes are in flight while puts go on.
        let line = |i: i64| format!("{i:06}-{}", "x".repeat(1000));
        let lines = 10 * WRITE_AT as i64 / 1000;
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
        task.put(&batch()).await.expect("put again");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.txt");
        let roomy = std::fs::File::create(&path).expect("create");
        task.file = Some(roomy);
        task.flush(&HashMap::new()).await.expect("flush");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "0\n1\n2\n");
    }

    #[test]
    fn the_connector_makes_max_tasks_identical_tasks() {
        let props: Props = [("file".to_string(), "x".to_string())].into();
        let connector = FileSinkConnector::build(&props).expect("valid");
        assert_eq!(connector.task_configs(3).expect("configs").len(), 3);
    }
}
