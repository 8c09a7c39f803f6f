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
pub struct FileSinkTask {
    config: FileSinkConfig,
    context: SinkTaskContext,
    /// The open file; `None` before it is opened (at start) and while a write has it.
    file: Option<std::fs::File>,
    pending: Vec<u8>,
    /// The last offset appended to `pending`, per partition.
    appended: HashMap<TopicPartition, i64>,
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
            appended: HashMap::new(),
        })
    }

    /// Write out what is pending, off the async threads: a pipe may block. Only written to
    /// the page cache: a sync is `flush`'s, once per offset commit.
    async fn write_out(&mut self) -> Result<()> {
        let mut pending = std::mem::take(&mut self.pending);
        let (pending, result) = self
            .with_file("write", move |file| {
                let result = write_some(file, &mut pending);
                (pending, result)
            })
            .await?;
        self.pending = pending;
        result
    }

    /// Make what was written durable (`fdatasync`).
    async fn sync(&mut self) -> Result<()> {
        let ((), result) = self
            .with_file("sync", |file| match file.sync_data() {
                // A pipe or a terminal cannot be synced: nothing to make durable.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => ((), Ok(())),
                other => ((), other),
            })
            .await?;
        result
    }

    /// Run `io` on the file (opened if it is not) off the async threads; its outcome is an
    /// error naming the file and what was done (`what`).
    async fn with_file<T: Send + 'static>(
        &mut self,
        what: &'static str,
        io: impl FnOnce(&mut std::fs::File) -> (T, std::io::Result<()>) + Send + 'static,
    ) -> Result<(T, Result<()>)> {
        let path = self.config.file.clone();
        let mut file = match self.file.take() {
            Some(file) => file,
            None => self.open_file().await?,
        };
        let (file, (out, result)) = tokio::task::spawn_blocking(move || {
            let done = io(&mut file);
            (file, done)
        })
        .await
        .map_err(|e| ConnectError::fatal(format!("the writer of {path} failed: {e}")))?;
        self.file = Some(file);
        let result = result.map_err(|e| ConnectError::io(format!("{what} {path}"), e));
        Ok((out, result))
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
        self.write_out().await?;
        self.sync().await
    }

    async fn stop(&mut self) -> Result<()> {
        if self.file.is_some() {
            self.write_out().await?;
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
