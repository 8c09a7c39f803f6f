//! The task over a real directory, with a committer that applies the control plane's rules
//! (generation fencing, compare-and-set on the start offset) in memory.

use super::*;

use std::sync::Mutex;

use ferry_connect::config::props;
use ferry_connect::task::{CommitOutcome, ErrantRecordReporter, SinkCommit, SinkCommitter};
use ferry_connect::Value;

#[derive(Default)]
struct Recorded {
    generation: u64,
    next: BTreeMap<TopicPartition, (i64, BTreeMap<String, String>)>,
    commits: usize,
}

/// The commit rules of `ferry_meta`'s state machine, for one task.
struct Cas {
    generation: u64,
    state: Arc<Mutex<Recorded>>,
}

#[async_trait]
impl SinkCommitter for Cas {
    async fn commit(&self, c: SinkCommit) -> Result<CommitOutcome> {
        let mut s = self.state.lock().expect("lock");
        if self.generation != s.generation {
            return Ok(CommitOutcome::Fenced);
        }
        let recorded = s.next.get(&c.partition).map(|r| r.0);
        if recorded.is_some_and(|r| r != c.start) {
            return Ok(CommitOutcome::Conflict { recorded });
        }
        s.next.insert(c.partition, (c.next, c.payload));
        s.commits += 1;
        Ok(CommitOutcome::Committed)
    }

    async fn last_commit(
        &self,
        partition: &TopicPartition,
    ) -> Result<Option<(i64, BTreeMap<String, String>)>> {
        Ok(self
            .state
            .lock()
            .expect("lock")
            .next
            .get(partition)
            .cloned())
    }
}

struct Bed {
    dir: tempfile::TempDir,
    state: Arc<Mutex<Recorded>>,
}

impl Bed {
    fn new() -> Bed {
        Bed {
            dir: tempfile::tempdir().expect("tempdir"),
            state: Arc::new(Mutex::new(Recorded {
                generation: 1,
                ..Recorded::default()
            })),
        }
    }

    fn config(&self, more: &[(&str, &str)]) -> Props {
        let root = self.dir.path().to_string_lossy().to_string();
        let mut p = props(&[
            ("name", "hdfs"),
            ("store.url", &root),
            ("topics.dir", "/data/log"),
            ("format.class", "io.confluent.connect.hdfs.json.JsonFormat"),
            ("flush.size", "2"),
        ]);
        p.extend(props(more));
        p
    }

    /// A started task of `generation` owning partition 0 of `t`.
    async fn task(&self, generation: u64, more: &[(&str, &str)]) -> Box<dyn SinkTask> {
        self.task_reporting(generation, more, None).await
    }

    async fn task_reporting(
        &self,
        generation: u64,
        more: &[(&str, &str)],
        reporter: Option<Arc<dyn ErrantRecordReporter>>,
    ) -> Box<dyn SinkTask> {
        self.state.lock().expect("lock").generation = generation;
        let connector = HdfsSinkConnector::build(&self.config(more)).expect("valid");
        let task_props = connector.task_configs(1).expect("task configs").remove(0);
        let context = SinkTaskContext {
            connector: "hdfs".into(),
            task: 0,
            generation,
            reporter,
            committer: Arc::new(Cas {
                generation,
                state: self.state.clone(),
            }),
            rewinds: Arc::default(),
            clock: ferry_connect::task::WallClock::system(),
            commit_times: Arc::new(ferry_connect::task::Untimed),
        };
        let mut task = HdfsSinkTask::build(&task_props, context).expect("valid");
        task.start().await.expect("start");
        task.open(&[TopicPartition::new("t", 0)])
            .await
            .expect("open");
        task
    }

    /// Every file under the root: path → content.
    fn files(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("read_dir") {
                let path = entry.expect("entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(self.dir.path()).expect("under root");
                    out.insert(
                        rel.to_string_lossy().to_string(),
                        std::fs::read_to_string(&path).unwrap_or_default(),
                    );
                }
            }
        }
        out.retain(|k, _| !k.ends_with(".marker"));
        out
    }

    fn committed(&self) -> Vec<(String, String)> {
        self.files()
            .into_iter()
            .filter(|(k, _)| !k.contains("+tmp"))
            .collect()
    }

    fn recorded_next(&self) -> Option<i64> {
        let s = self.state.lock().expect("lock");
        s.next.get(&TopicPartition::new("t", 0)).map(|r| r.0)
    }
}

fn record(offset: i64) -> SinkRecord {
    SinkRecord {
        topic: "t".into(),
        partition: 0,
        offset,
        timestamp: Some(1_552_581_432_345),
        key_schema: None,
        key: Value::Null,
        value_schema: None,
        value: Value::Int64(offset),
        headers: Vec::new(),
    }
}

fn records(range: std::ops::Range<i64>) -> Vec<SinkRecord> {
    range.map(record).collect()
}

#[tokio::test]
async fn flush_size_commits_files_with_confluent_names_and_offsets_in_raft() {
    let bed = Bed::new();
    let mut task = bed.task(1, &[]).await;
    task.put(&records(0..5)).await.expect("put");
    assert_eq!(
        bed.committed(),
        [
            (
                "data/log/t/partition=0/t+0+0000000000+0000000001.json".to_string(),
                "0\n1\n".to_string()
            ),
            (
                "data/log/t/partition=0/t+0+0000000002+0000000003.json".to_string(),
                "2\n3\n".to_string()
            ),
        ]
    );
    assert_eq!(bed.recorded_next(), Some(4));
    let tmp: Vec<String> = bed
        .files()
        .into_keys()
        .filter(|k| k.contains("+tmp"))
        .collect();
    assert_eq!(tmp.len(), 1, "record 4 waits in a temporary file: {tmp:?}");
    assert!(
        tmp[0].starts_with("data/log/+tmp/t/partition=0/t+0+1+"),
        "{tmp:?}"
    );
    // The runtime must not commit offsets for this sink.
    let offsets = HashMap::from([(TopicPartition::new("t", 0), 5)]);
    assert!(task
        .pre_commit(&offsets)
        .await
        .expect("pre_commit")
        .is_empty());
}

/// Collects the offsets of reported records.
#[derive(Default)]
struct Collect(Mutex<Vec<i64>>);

#[async_trait]
impl ErrantRecordReporter for Collect {
    async fn report(&self, record: &SinkRecord, _error: &ConnectError) -> Result<()> {
        self.0.lock().expect("lock").push(record.offset);
        Ok(())
    }
}

#[tokio::test]
async fn a_reported_record_is_covered_by_the_next_commit_but_not_counted_towards_flush_size() {
    let bed = Bed::new();
    let reported = Arc::new(Collect::default());
    let mut task = bed
        .task_reporting(
            1,
            &[],
            Some(reported.clone() as Arc<dyn ErrantRecordReporter>),
        )
        .await;
    let mut batch = records(0..4);
    // Record 1 does not fit its schema: JsonFormat cannot write it.
    batch[1].value_schema = Some(Arc::new(ferry_connect::Schema::of(
        ferry_connect::SchemaType::String,
    )));
    task.put(&batch).await.expect("put");
    assert_eq!(*reported.0.lock().expect("lock"), [1]);
    assert_eq!(
        bed.committed(),
        [(
            "data/log/t/partition=0/t+0+0000000000+0000000002.json".to_string(),
            "0\n2\n".to_string()
        )],
        "two written records make a file of flush.size 2"
    );
    assert_eq!(bed.recorded_next(), Some(3));
}

#[tokio::test]
async fn a_restarted_task_cleans_its_leftovers_and_resumes_after_the_commit() {
    let bed = Bed::new();
    let mut first = bed.task(1, &[]).await;
    first.put(&records(0..3)).await.expect("put");
    drop(first); // killed: record 2 was only in a temporary file
    let mut second = bed.task(2, &[]).await;
    assert!(
        !bed.files().keys().any(|k| k.contains("+tmp")),
        "the partition's temporary files are gone"
    );
    // The consumer resumes at the recorded offset; a repeat of older records is skipped too.
    second.put(&records(1..6)).await.expect("put");
    let names: Vec<String> = bed.committed().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "data/log/t/partition=0/t+0+0000000000+0000000001.json",
            "data/log/t/partition=0/t+0+0000000002+0000000003.json",
            "data/log/t/partition=0/t+0+0000000004+0000000005.json",
        ]
    );
    let all: String = bed.committed().into_iter().map(|(_, v)| v).collect();
    assert_eq!(all, "0\n1\n2\n3\n4\n5\n", "every record exactly once");
}

#[tokio::test]
async fn an_accepted_commit_whose_renames_were_lost_is_replayed() {
    let bed = Bed::new();
    let tmp = "/data/log/+tmp/t/partition=0/t+0+1+abc_tmp.json";
    let target = "/data/log/t/partition=0/t+0+0000000000+0000000001.json";
    let full = bed.dir.path().join(tmp.trim_start_matches('/'));
    std::fs::create_dir_all(full.parent().expect("dir")).expect("mkdir");
    std::fs::write(&full, "0\n1\n").expect("write");
    bed.state.lock().expect("lock").next.insert(
        TopicPartition::new("t", 0),
        (2, BTreeMap::from([(tmp.to_string(), target.to_string())])),
    );
    let _task = bed.task(2, &[]).await;
    assert_eq!(
        bed.committed(),
        [(
            target.trim_start_matches('/').to_string(),
            "0\n1\n".to_string()
        )]
    );
}

#[tokio::test]
async fn a_fenced_task_renames_nothing() {
    let bed = Bed::new();
    let mut zombie = bed.task(1, &[]).await;
    zombie.put(&records(0..1)).await.expect("put");
    // The partition moves: generation 2 owns it now.
    let _owner = bed.task(2, &[]).await;
    let err = zombie.put(&records(1..2)).await.expect_err("fenced");
    assert!(err.message.contains("fenced"), "{err}");
    assert!(bed.committed().is_empty(), "{:?}", bed.files());
    assert_eq!(bed.recorded_next(), None);
}

#[tokio::test]
async fn a_directory_written_by_confluents_connector_is_taken_over() {
    let bed = Bed::new();
    let old = bed
        .dir
        .path()
        .join("data/log/t/partition=0/t+0+0000000000+0000000009.json");
    std::fs::create_dir_all(old.parent().expect("dir")).expect("mkdir");
    std::fs::write(&old, "confluent's\n").expect("write");
    let mut task = bed.task(1, &[]).await;
    task.put(&records(5..12)).await.expect("put");
    let names: Vec<String> = bed.committed().into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        names,
        [
            "data/log/t/partition=0/t+0+0000000000+0000000009.json",
            "data/log/t/partition=0/t+0+0000000010+0000000011.json",
        ]
    );
    assert_eq!(bed.recorded_next(), Some(12));
}

#[tokio::test]
async fn time_based_paths_and_a_schema_change_rotates() {
    let bed = Bed::new();
    let mut task = bed
        .task(
            1,
            &[
                ("flush.size", "100"),
                (
                    "partitioner.class",
                    "io.confluent.connect.hdfs.partitioner.TimeBasedPartitioner",
                ),
                ("partition.duration.ms", "600000"),
                ("path.format", "yyyyMMdd/HH/mm/yyyyMMddHHmm"),
                ("timestamp.extractor", "Record"),
            ],
        )
        .await;
    let mut changed = record(2);
    changed.value_schema = Some(Arc::new(ferry_connect::Schema::of(
        ferry_connect::SchemaType::Int64,
    )));
    task.put(&[record(0), record(1), changed])
        .await
        .expect("put");
    assert_eq!(
        bed.committed(),
        [(
            "data/log/t/20190314/16/30/201903141630/t+0+0000000000+0000000001.json".to_string(),
            "0\n1\n".to_string()
        )]
    );
}

#[test]
fn scheduled_rotations_fall_on_the_zones_boundaries() {
    // 16:37:12 UTC → the next ten-minute boundary is 16:40:00 UTC.
    let t = 1_552_581_432_345;
    assert_eq!(next_boundary(t, 600_000, &TimeZone::UTC), 1_552_581_600_000);
    // Daily at midnight in Seoul (+09:00): 15 March 00:00 KST is 14 March 15:00 UTC (passed),
    // so the next is 16 March 00:00 KST = 15 March 15:00 UTC.
    let seoul = crate::partitioner::time_zone("Asia/Seoul").expect("zone");
    assert_eq!(next_boundary(t, 86_400_000, &seoul), 1_552_662_000_000);
}

#[test]
fn a_local_store_that_is_not_shared_is_refused() {
    let bed = Bed::new();
    let connector = HdfsSinkConnector::build(&bed.config(&[])).expect("valid");
    let mut task_props = connector.task_configs(1).expect("configs").remove(0);
    // Another worker's directory: same path, no marker (simulated by another token).
    task_props.insert(MARKER_TOKEN.into(), "another-directory".into());
    let context = SinkTaskContext {
        connector: "hdfs".into(),
        task: 0,
        generation: 1,
        reporter: None,
        committer: Arc::new(Cas {
            generation: 1,
            state: bed.state.clone(),
        }),
        rewinds: Arc::default(),
        clock: ferry_connect::task::WallClock::system(),
        commit_times: Arc::new(ferry_connect::task::Untimed),
    };
    let mut task = HdfsSinkTask::build(&task_props, context).expect("valid");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let err = runtime.block_on(task.start()).expect_err("not shared");
    assert!(err.message.contains("every worker shares"), "{err}");
}

/// A local store whose files fail to close while `failing` is set, as they do when the
/// NameNode goes away between the writes and the close.
struct Flaky {
    inner: LocalStorage,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

struct FlakyOutput {
    inner: Box<dyn crate::storage::Output>,
    failing: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait]
impl crate::storage::Output for FlakyOutput {
    async fn write(&mut self, bytes: Vec<u8>) -> Result<()> {
        self.inner.write(bytes).await
    }

    async fn close(self: Box<Self>) -> Result<()> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ConnectError::retriable("close: Connection refused"));
        }
        self.inner.close().await
    }
}

#[async_trait]
impl Storage for Flaky {
    async fn create(&self, path: &str) -> Result<Box<dyn crate::storage::Output>> {
        Ok(Box::new(FlakyOutput {
            inner: self.inner.create(path).await?,
            failing: self.failing.clone(),
        }))
    }
    async fn rename(&self, from: &str, to: &str) -> Result<crate::storage::Renamed> {
        self.inner.rename(from, to).await
    }
    async fn list_files(&self, dir: &str) -> Result<Vec<String>> {
        self.inner.list_files(dir).await
    }
    async fn delete(&self, path: &str) -> Result<()> {
        self.inner.delete(path).await
    }
    async fn exists(&self, path: &str) -> Result<bool> {
        self.inner.exists(path).await
    }
    async fn read(&self, path: &str) -> Result<Vec<u8>> {
        self.inner.read(path).await
    }
}

#[tokio::test]
async fn a_file_that_cannot_be_closed_is_given_up_and_its_partition_consumed_again() {
    let bed = Bed::new();
    let config = HdfsSinkConfig::parse(&bed.config(&[("flush.size", "3")])).expect("config");
    let failing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rewinds = Arc::new(ferry_connect::task::Rewinds::default());
    let shared = Shared {
        commit_times: Arc::new(ferry_connect::task::Untimed),
        names: Names {
            topics_dir: config.topics_dir.clone(),
            delim: config.file_delim.clone(),
            pad: config.zero_pad_width,
            extension: config.format.extension(),
        },
        storage: Arc::new(Flaky {
            inner: LocalStorage::new(bed.dir.path()),
            failing: failing.clone(),
        }),
        config,
        committer: Arc::new(Cas {
            generation: 1,
            state: bed.state.clone(),
        }),
        reporter: None,
        rewinds: rewinds.clone(),
        generation: 1,
    };
    let tp = TopicPartition::new("t", 0);
    let mut writer = PartitionWriter::open(&shared, tp.clone())
        .await
        .expect("open");
    for r in records(0..3) {
        writer.write(&shared, &r, 0).await.expect("write");
    }
    assert_eq!(bed.recorded_next(), Some(3));

    // The store goes away after records 3 and 4 are written: the close at record 5 fails.
    writer.write(&shared, &record(3), 0).await.expect("write");
    writer.write(&shared, &record(4), 0).await.expect("write");
    failing.store(true, std::sync::atomic::Ordering::SeqCst);
    let e = writer
        .write(&shared, &record(5), 0)
        .await
        .expect_err("the close fails");
    assert!(e.is_retriable(), "a store that is down is retried: {e}");
    assert!(
        e.message.contains("consumed again from offset 3"),
        "{}",
        e.message
    );
    assert_eq!(rewinds.take(), HashMap::from([(tp.clone(), 3)]));
    assert!(
        bed.files().keys().all(|k| !k.contains("+tmp")),
        "the given-up file is removed: {:?}",
        bed.files()
    );
    assert_eq!(bed.recorded_next(), Some(3), "nothing more was committed");

    // Back: the records come again from offset 3 and are committed once.
    failing.store(false, std::sync::atomic::Ordering::SeqCst);
    for r in records(3..6) {
        writer.write(&shared, &r, 0).await.expect("write");
    }
    assert_eq!(
        bed.committed(),
        [
            (
                "data/log/t/partition=0/t+0+0000000000+0000000002.json".to_string(),
                "0\n1\n2\n".to_string()
            ),
            (
                "data/log/t/partition=0/t+0+0000000003+0000000005.json".to_string(),
                "3\n4\n5\n".to_string()
            ),
        ]
    );
    assert_eq!(bed.recorded_next(), Some(6));
    assert!(rewinds.take().is_empty());
}

#[test]
fn a_connector_name_with_slashes_keeps_its_marker_one_file_of_topics_dir() {
    let bed = Bed::new();
    let config = HdfsSinkConfig::parse(&bed.config(&[])).expect("config");
    let path = marker_path(&config, "team/a%b");
    assert_eq!(
        path,
        format!("{}/.ferry-team%2Fa%25b.marker", config.topics_dir)
    );
}
