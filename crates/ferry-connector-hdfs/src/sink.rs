//! HdfsSinkConnector and its task: records are routed to their topic partition's writer
//! (`writer`), which rotates on `flush.size`, `rotate.interval.ms` and schema changes; the
//! task adds the wall-clock `rotate.schedule.interval.ms` (fired by `tick`, records or not)
//! and the open-file limit. Offsets are committed by the writers through Raft, never by the
//! runtime's offset commits.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use ferry_connect::task::{Connector, Props, WallClock};
use ferry_connect::{ConnectError, Result, SinkRecord, SinkTask, SinkTaskContext, TopicPartition};
use jiff::tz::TimeZone;
use tracing::info;

use crate::config::{HdfsSinkConfig, StoreUrl};
use crate::naming::Names;
use crate::partitioner::offset_ms;
use crate::storage::{HdfsStorage, LocalStorage, Storage};
use crate::writer::{PartitionWriter, Shared};

/// The task property carrying the token of the shared-directory marker.
const MARKER_TOKEN: &str = "ferry.store.marker";

/// The connector's marker file in `topics.dir`. A connector name may hold `/` (as Kafka
/// Connect allows): it is escaped, with `%`, so that the marker stays one file of that
/// directory.
fn marker_path(config: &HdfsSinkConfig, connector: &str) -> String {
    let escaped = connector.replace('%', "%25").replace('/', "%2F");
    format!("{}/.ferry-{escaped}.marker", config.topics_dir)
}

fn store(config: &HdfsSinkConfig) -> Result<Arc<dyn Storage>> {
    match &config.url {
        StoreUrl::Local(root) => Ok(Arc::new(LocalStorage::new(root))),
        StoreUrl::Hdfs { namenode } => Ok(Arc::new(HdfsStorage::new(namenode)?)),
    }
}

/// The HDFS sink connector: tasks alike, each given its partitions by the scheduler.
pub struct HdfsSinkConnector {
    props: Props,
    config: HdfsSinkConfig,
}

impl HdfsSinkConnector {
    /// The connector of a (validated) config.
    pub fn build(props: &Props) -> Result<Box<dyn Connector>> {
        Ok(Box::new(HdfsSinkConnector {
            props: props.clone(),
            config: HdfsSinkConfig::parse(props)?,
        }))
    }
}

impl Connector for HdfsSinkConnector {
    /// `max_tasks` identical tasks (the scheduler gives each its partitions). On a local
    /// directory the connector first leaves a marker there that every task must see: a
    /// directory that is not shared by all workers is refused (docs/design.md#the-storage-sink).
    fn task_configs(&self, max_tasks: usize) -> Result<Vec<Props>> {
        let mut props = self.props.clone();
        if let StoreUrl::Local(root) = &self.config.url {
            let name = self.props.get("name").map_or("connector", String::as_str);
            let path = root.join(marker_path(&self.config, name).trim_start_matches('/'));
            let token = match std::fs::read_to_string(&path) {
                Ok(token) if !token.trim().is_empty() => token.trim().to_string(),
                _ => {
                    let token = uuid::Uuid::new_v4().to_string();
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            ConnectError::io(format!("create {}", dir.display()), e)
                        })?;
                    }
                    std::fs::write(&path, &token)
                        .map_err(|e| ConnectError::io(format!("write {}", path.display()), e))?;
                    token
                }
            };
            props.insert(MARKER_TOKEN.into(), token);
        }
        Ok(vec![props; max_tasks.max(1)])
    }
}

/// Writes its partitions' records to files and commits them, with their offsets, through Raft.
pub struct HdfsSinkTask {
    /// The marker token the connector left in a local store, which this worker must see.
    marker: Option<String>,
    connector: String,
    shared: Shared,
    writers: BTreeMap<TopicPartition, PartitionWriter>,
    /// Counts records written, to find the least recently written partition.
    written: u64,
    /// When the next scheduled rotation is due (ms).
    next_rotation: Option<i64>,
    /// The wall clock of schedules and Wallclock record times (the context's).
    clock: WallClock,
}

impl HdfsSinkTask {
    /// A task of a config, writing with `context`.
    pub fn build(props: &Props, context: SinkTaskContext) -> Result<Box<dyn SinkTask>> {
        let config = HdfsSinkConfig::parse(props)?;
        let storage = store(&config)?;
        let names = Names {
            topics_dir: config.topics_dir.clone(),
            delim: config.file_delim.clone(),
            pad: config.zero_pad_width,
            extension: config.format.extension(),
        };
        info!(connector = %context.connector, task = context.task, store = ?config.url, "writing");
        Ok(Box::new(HdfsSinkTask {
            marker: props.get(MARKER_TOKEN).cloned(),
            connector: context.connector,
            shared: Shared {
                config,
                names,
                storage,
                committer: context.committer,
                reporter: context.reporter,
                rewinds: context.rewinds,
                generation: context.generation,
                commit_times: context.commit_times,
            },
            writers: BTreeMap::new(),
            written: 0,
            next_rotation: None,
            clock: context.clock,
        }))
    }

    /// Past the open-file limit: commit the least recently written partition with files.
    async fn limit_open_files(&mut self) -> Result<()> {
        let shared = &self.shared;
        let open: usize = self.writers.values().map(PartitionWriter::open_files).sum();
        if open <= shared.config.max_open_files {
            return Ok(());
        }
        if let Some(oldest) = self
            .writers
            .values_mut()
            .filter(|w| w.open_files() > 0)
            .min_by_key(|w| w.last_written)
        {
            oldest.commit(shared).await?;
        }
        Ok(())
    }
}

/// The first boundary after `now` of a schedule of `interval_ms`, aligned to `zone`'s clock.
pub fn next_boundary(now: i64, interval_ms: i64, zone: &TimeZone) -> i64 {
    let local = now + offset_ms(zone, now);
    let next_local = (local.div_euclid(interval_ms) + 1) * interval_ms;
    next_local - offset_ms(zone, next_local - offset_ms(zone, now))
}

#[async_trait]
impl SinkTask for HdfsSinkTask {
    /// On a local store, check that this worker sees the connector's marker.
    async fn start(&mut self) -> Result<()> {
        if let Some(token) = &self.marker {
            let path = marker_path(&self.shared.config, &self.connector);
            let seen = self.shared.storage.read(&path).await.ok();
            if seen
                .as_deref()
                .map(|s| String::from_utf8_lossy(s).trim().to_string())
                .as_deref()
                != Some(token.as_str())
            {
                return Err(ConnectError::config("store.url", format!(
                    "this worker does not see the marker {path} the connector left in the directory: a local store.url must be one directory every worker shares"
                )));
            }
        }
        Ok(())
    }

    async fn open(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        for tp in partitions {
            let writer = PartitionWriter::open(&self.shared, tp.clone()).await?;
            self.writers.insert(tp.clone(), writer);
        }
        Ok(())
    }

    async fn put(&mut self, records: &[SinkRecord]) -> Result<()> {
        let now = self.clock.now_ms();
        for record in records {
            let shared = &self.shared;
            let tp = record.topic_partition();
            let writer = self.writers.get_mut(&tp).ok_or_else(|| {
                ConnectError::fatal(format!("a record of {tp}, which this task was not given"))
            })?;
            self.written += 1;
            writer.last_written = self.written;
            writer.write(shared, record, now).await?;
            self.limit_open_files().await?;
        }
        Ok(())
    }

    fn ticks(&self) -> bool {
        // A scheduled rotation is the only time-based work.
        self.shared.config.rotate_schedule_ms.is_some()
    }

    async fn tick(&mut self) -> Result<()> {
        let shared = &self.shared;
        let Some(interval) = shared.config.rotate_schedule_ms else {
            return Ok(());
        };
        let now = self.clock.now_ms();
        let zone = shared.config.partitioner.zone();
        let due = *self
            .next_rotation
            .get_or_insert_with(|| next_boundary(now, interval, &zone));
        if now < due {
            return Ok(());
        }
        // Side by side, not one after another: closing an HDFS file waits for the NameNode to
        // learn of its last block (hdfs-native polls `complete`, from 500 ms).
        let due = self.writers.values_mut().filter(|w| w.has_pending());
        for committed in futures::future::join_all(due.map(|w| w.commit(shared))).await {
            committed?;
        }
        self.next_rotation = Some(next_boundary(now, interval, &zone));
        Ok(())
    }

    async fn flush(&mut self, _offsets: &HashMap<TopicPartition, i64>) -> Result<()> {
        Ok(())
    }

    /// Nothing for the runtime to commit: the writers commit their offsets with their files.
    async fn pre_commit(
        &mut self,
        _offsets: &HashMap<TopicPartition, i64>,
    ) -> Result<HashMap<TopicPartition, i64>> {
        Ok(HashMap::new())
    }

    async fn close(&mut self, partitions: &[TopicPartition]) -> Result<()> {
        for tp in partitions {
            if let Some(writer) = self.writers.remove(tp) {
                writer.abandon();
            }
        }
        Ok(())
    }

    async fn stop(&mut self) -> Result<()> {
        for (_, writer) in std::mem::take(&mut self.writers) {
            writer.abandon();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
