//! FileStreamSource: one task reads the file line by line; its source partition is
//! `{"filename": file}` and its offset `{"position": byte after the line}`, as in Kafka Connect,
//! so offsets of an existing deployment mean the same here.

use std::collections::BTreeMap;
use std::io::SeekFrom;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ferry_connect::record::SourceMap;
use ferry_connect::task::{Connector, Props};
use ferry_connect::{
    ConnectError, Result, Schema, SourceRecord, SourceTask, SourceTaskContext, Value,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tracing::{debug, info};

use crate::config::{FileSourceConfig, FILENAME_FIELD, POSITION_FIELD};

/// How long `poll` waits for new data before returning nothing.
const IDLE_WAIT: Duration = Duration::from_millis(200);
const READ_CHUNK: usize = 64 * 1024;

/// The FileStreamSource connector: one task reads the file.
pub struct FileSourceConnector {
    props: Props,
}

impl FileSourceConnector {
    /// The connector of a (validated) config.
    pub fn build(props: &Props) -> Result<Box<dyn Connector>> {
        FileSourceConfig::parse(props)?;
        Ok(Box::new(FileSourceConnector {
            props: props.clone(),
        }))
    }
}

impl Connector for FileSourceConnector {
    /// One task: a file is one stream (as Kafka Connect's FileStreamSourceConnector).
    fn task_configs(&self, _max_tasks: usize) -> Result<Vec<Props>> {
        Ok(vec![self.props.clone()])
    }
}

/// Reads the file's lines from the committed position, `batch.size` at a time.
pub struct FileSourceTask {
    config: FileSourceConfig,
    partition: Arc<SourceMap>,
    file: Option<tokio::fs::File>,
    /// Byte position of the first byte of `pending` in the file.
    position: u64,
    /// Bytes read but not yet ended by a newline.
    pending: Vec<u8>,
    start_position: u64,
    schema: Arc<Schema>,
    waiting_logged: bool,
}

impl FileSourceTask {
    /// The task, to start reading after the position committed for its file.
    pub fn build(props: &Props, context: SourceTaskContext) -> Result<Box<dyn SourceTask>> {
        let config = FileSourceConfig::parse(props)?;
        let partition: SourceMap =
            BTreeMap::from([(FILENAME_FIELD.to_string(), serde_json::json!(config.file))]);
        let start_position = context
            .offsets
            .offset(&partition)
            .as_ref()
            .and_then(|o| o.get(POSITION_FIELD))
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        debug!(file = %config.file, position = start_position, "starting at the committed position");
        Ok(Box::new(FileSourceTask {
            config,
            partition: Arc::new(partition),
            file: None,
            position: 0,
            pending: Vec::new(),
            start_position,
            schema: Arc::new(ferry_connect::Schema::of(ferry_connect::SchemaType::String)),
            waiting_logged: false,
        }))
    }

    async fn open(&mut self) -> Result<bool> {
        match tokio::fs::File::open(&self.config.file).await {
            Ok(mut file) => {
                file.seek(SeekFrom::Start(self.start_position))
                    .await
                    .map_err(|e| ConnectError::io(format!("seek in {}", self.config.file), e))?;
                info!(file = %self.config.file, position = self.start_position, "reading");
                self.position = self.start_position;
                self.file = Some(file);
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !self.waiting_logged {
                    info!(file = %self.config.file, "file not found yet; waiting for it to be created");
                    self.waiting_logged = true;
                }
                Ok(false)
            }
            Err(e) => Err(ConnectError::io(format!("open {}", self.config.file), e)),
        }
    }

    /// Complete lines in `pending`, up to `batch.size`, as records.
    fn records(&mut self) -> Vec<SourceRecord> {
        // At most a record per byte: the batch is allocated once, not grown record by record.
        let mut records = Vec::with_capacity(self.config.batch_size.min(self.pending.len()));
        let mut consumed = 0;
        while records.len() < self.config.batch_size {
            let rest = &self.pending[consumed..];
            let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') else {
                break;
            };
            // "\r\n" is one line ending; a lone '\r' at the end of what we have may be followed
            // by '\n' in the next read, so wait for more.
            let mut next = end + 1;
            if rest[end] == b'\r' {
                match rest.get(end + 1) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => break,
                }
            }
            let line = String::from_utf8_lossy(&rest[..end]).into_owned();
            consumed += next;
            let offset = self.position + consumed as u64;
            records.push(SourceRecord {
                source_partition: self.partition.clone(),
                source_offset: position_map(offset),
                topic: self.config.topic.clone(),
                partition: None,
                key_schema: None,
                key: Value::Null,
                value_schema: Some(self.schema.clone()),
                value: Value::String(line),
                timestamp: None,
                headers: Vec::new(),
            });
        }
        self.pending.drain(..consumed);
        self.position += consumed as u64;
        records
    }
}

/// A record's source offset: the position after its line. (One insert: `BTreeMap::from`
/// sorts and deduplicates its entries first, per record.)
fn position_map(offset: u64) -> SourceMap {
    let mut map = BTreeMap::new();
    map.insert(POSITION_FIELD.to_string(), serde_json::json!(offset));
    map
}

#[async_trait]
impl SourceTask for FileSourceTask {
    async fn poll(&mut self) -> Result<Vec<SourceRecord>> {
        if self.file.is_none() && !self.open().await? {
            tokio::time::sleep(IDLE_WAIT).await;
            return Ok(Vec::new());
        }
        let records = self.records();
        if !records.is_empty() {
            return Ok(records);
        }
        let Some(file) = self.file.as_mut() else {
            return Ok(Vec::new());
        };
        let mut buf = vec![0u8; READ_CHUNK];
        let read = file
            .read(&mut buf)
            .await
            .map_err(|e| ConnectError::io(format!("read {}", self.config.file), e))?;
        if read == 0 {
            tokio::time::sleep(IDLE_WAIT).await;
            return Ok(Vec::new());
        }
        self.pending.extend_from_slice(&buf[..read]);
        Ok(self.records())
    }

    async fn stop(&mut self) -> Result<()> {
        self.file = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_connect::task::OffsetReader;

    struct Committed(Option<SourceMap>);

    impl OffsetReader for Committed {
        fn offset(&self, _partition: &SourceMap) -> Option<SourceMap> {
            self.0.clone()
        }
    }

    async fn task(
        file: &std::path::Path,
        batch: &str,
        committed: Option<SourceMap>,
    ) -> Box<dyn SourceTask> {
        let props: Props = [
            ("file", file.to_string_lossy().to_string()),
            ("topic", "lines".to_string()),
            ("batch.size", batch.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let context = SourceTaskContext {
            connector: "src".into(),
            task: 0,
            offsets: Arc::new(Committed(committed)),
        };
        let mut task = FileSourceTask::build(&props, context).expect("valid config");
        task.start().await.expect("start");
        task
    }

    async fn drain(task: &mut Box<dyn SourceTask>) -> Vec<SourceRecord> {
        let mut all = Vec::new();
        for _ in 0..20 {
            let batch = task.poll().await.expect("poll");
            if batch.is_empty() && !all.is_empty() {
                break;
            }
            all.extend(batch);
        }
        all
    }

    fn lines(records: &[SourceRecord]) -> Vec<String> {
        records.iter().map(|r| r.value.to_string()).collect()
    }

    #[tokio::test]
    async fn reads_lines_with_kafka_connect_offsets_and_resumes_after_the_committed_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("in.txt");
        std::fs::write(&path, "one\r\ntwo\nthree\npartial").expect("write");
        let mut t = task(&path, "2000", None).await;
        let records = drain(&mut t).await;
        assert_eq!(
            lines(&records),
            vec!["one", "two", "three"],
            "the unfinished line waits"
        );
        assert_eq!(records[0].source_offset["position"], serde_json::json!(5));
        assert_eq!(records[2].source_offset["position"], serde_json::json!(15));
        assert_eq!(
            records[0].source_partition["filename"],
            serde_json::json!(path.to_string_lossy())
        );
        // The line is finished later.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        std::io::Write::write_all(&mut f, b" line\n").expect("append");
        assert_eq!(lines(&drain(&mut t).await), vec!["partial line"]);
        // A new task resumes after the committed offset of "two".
        let committed = records[1].source_offset.clone();
        let mut again = task(&path, "2000", Some(committed)).await;
        assert_eq!(
            lines(&drain(&mut again).await),
            vec!["three", "partial line"]
        );
    }

    #[tokio::test]
    async fn batch_size_bounds_each_poll() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("in.txt");
        let text: String = (0..10).map(|i| format!("l{i}\n")).collect();
        std::fs::write(&path, text).expect("write");
        let mut t = task(&path, "3", None).await;
        let mut sizes = Vec::new();
        for _ in 0..4 {
            sizes.push(t.poll().await.expect("poll").len());
        }
        assert_eq!(sizes, vec![3, 3, 3, 1]);
    }

    #[tokio::test]
    async fn a_missing_file_is_waited_for() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("later.txt");
        let mut t = task(&path, "10", None).await;
        assert!(t.poll().await.expect("no file yet").is_empty());
        std::fs::write(&path, "hello\n").expect("write");
        assert_eq!(lines(&drain(&mut t).await), vec!["hello"]);
    }
}
