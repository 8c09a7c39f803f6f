//! FileStreamSink: appends each record's value, one per line, to the task's file.

use std::collections::HashMap;

use async_trait::async_trait;
use ferry_connect::task::{Connector, Props};
use ferry_connect::{ConnectError, Result, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use tokio::io::{AsyncWriteExt, BufWriter};
use tracing::info;

use crate::config::FileSinkConfig;

pub struct FileSinkConnector {
    props: Props,
}

impl FileSinkConnector {
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

pub struct FileSinkTask {
    config: FileSinkConfig,
    writer: Option<BufWriter<tokio::fs::File>>,
}

impl FileSinkTask {
    pub fn build(props: &Props) -> Result<Box<dyn SinkTask>> {
        Ok(Box::new(FileSinkTask {
            config: FileSinkConfig::parse(props)?,
            writer: None,
        }))
    }

    fn writer(&mut self) -> Result<&mut BufWriter<tokio::fs::File>> {
        self.writer
            .as_mut()
            .ok_or_else(|| ConnectError::fatal("FileStreamSink used before start"))
    }
}

#[async_trait]
impl SinkTask for FileSinkTask {
    async fn start(&mut self, context: SinkTaskContext) -> Result<()> {
        let file = tokio::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.config.file)
            .await
            .map_err(|e| ConnectError::io(format!("open {} for appending", self.config.file), e))?;
        info!(connector = %context.connector, task = context.task, file = %self.config.file, "writing");
        self.writer = Some(BufWriter::with_capacity(256 * 1024, file));
        Ok(())
    }

    async fn put(&mut self, records: Vec<SinkRecord>) -> Result<()> {
        let file = self.config.file.clone();
        let writer = self.writer()?;
        for record in records {
            let line = format!("{}\n", record.value);
            writer
                .write_all(line.as_bytes())
                .await
                .map_err(|e| ConnectError::io(format!("write {file}"), e))?;
        }
        Ok(())
    }

    async fn flush(&mut self, _offsets: &HashMap<TopicPartition, i64>) -> Result<()> {
        let file = self.config.file.clone();
        let writer = self.writer()?;
        writer
            .flush()
            .await
            .map_err(|e| ConnectError::io(format!("flush {file}"), e))?;
        writer
            .get_ref()
            .sync_data()
            .await
            .map_err(|e| ConnectError::io(format!("sync {file}"), e))
    }

    async fn stop(&mut self) -> Result<()> {
        if let Some(mut writer) = self.writer.take() {
            writer
                .flush()
                .await
                .map_err(|e| ConnectError::io(format!("flush {}", self.config.file), e))?;
        }
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
        async fn committed(&self, _partition: &TopicPartition) -> Result<Option<i64>> {
            Ok(None)
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
        let mut task = FileSinkTask::build(&props).expect("valid");
        let context = SinkTaskContext {
            connector: "sink".into(),
            task: 0,
            reporter: None,
            committer: Arc::new(NoCommits),
        };
        task.start(context).await.expect("start");
        task.put(vec![
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

    #[test]
    fn the_connector_makes_max_tasks_identical_tasks() {
        let props: Props = [("file".to_string(), "x".to_string())].into();
        let connector = FileSinkConnector::build(&props).expect("valid");
        assert_eq!(connector.task_configs(3).expect("configs").len(), 3);
    }
}
