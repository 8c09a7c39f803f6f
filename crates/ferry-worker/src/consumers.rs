//! A worker's shared Kafka consumers: one librdkafka consumer serves every sink task of the
//! worker whose effective client config is the same (tasks with other `consumer.override.*`
//! get their own), instead of a consumer — four threads, its own fetches — per task.
//!
//! Each task reads its own partitions from its own queue: the queue of its first partition,
//! with its other partitions' queues forwarded into it. librdkafka's prefetch bound
//! (`queued.max.messages.kbytes`) applies to that queue, so a task that stops reading — paused,
//! backing off, seeking, slow — stops the fetching of its own partitions only, as its own
//! consumer did. A seek moves one partition of the shared consumer.
//!
//! A task's group offsets (`connect-<name>`: read when Raft has none, committed for
//! monitoring) go through a group client of its connector on this worker — a consumer of that
//! group that is assigned nothing and fetches nothing — shared by the connector's tasks here,
//! and closed once unused for twice the offset flush interval (a connector whose offsets do
//! not move keeps no client). A group the cluster does not list has no offsets to read: a task
//! asks the cluster's group list first (one list serves every task that asked while the last
//! one was under way), and a new connector's tasks make no group client to start.
//! (librdkafka's Admin API calls for a group's offsets, which would spare that client, abort
//! the process on a race of their request timeout under load: measured with 3,300 tasks
//! starting at once.)
//!
//! A partition is assigned once per consumer: a task whose partitions another task of the
//! same config still holds (two connectors reading one topic, or a task's next run starting
//! while its last is closing) gets another consumer. A consumer with no task left is closed.
//!
//! No async thread waits on librdkafka here: a task's consumer is made, assigned, unassigned
//! and closed on the runtime's blocking threads ([`crate::kafka::off_runtime`]; librdkafka's
//! assignment calls wait for its own thread without a bound), and a seek is asked, not waited
//! for. The pool's lock and the group clients' lock are never held together nor across an
//! await; making a group client (on its first commit) holds the latter while librdkafka starts
//! the client's threads.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_connect::{ConnectError, TopicPartition};
use rdkafka::consumer::stream_consumer::StreamPartitionQueue;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, DefaultConsumerContext, StreamConsumer,
};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::oneshot;
use tracing::{debug, info, warn};

use crate::clients::SharedConsumerConfig;
use crate::kafka::{off_runtime, OffRuntime};
use crate::librdkafka::{self, BatchQueue, RawMessage};

/// How long a group's offsets are asked for, or committed, before the call fails.
const GROUP_CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The shared consumers of one worker.
pub struct Consumers {
    pool: Mutex<Vec<Entry>>,
    made: AtomicU64,
    /// Each connector's group client on this worker, and when it was last used.
    groups: Mutex<HashMap<GroupKey, (Arc<GroupClient>, Instant)>>,
    /// A group client unused for longer is closed.
    group_idle: Duration,
    /// Whether the task that closes idle group clients runs.
    sweeping: AtomicBool,
    /// The groups the cluster listed last to a client of each config (a listing shows only
    /// the groups its credentials may describe), and when that list was asked for; held while
    /// a list is under way.
    listed: tokio::sync::Mutex<HashMap<BTreeMap<String, String>, GroupList>>,
}

/// A group client's group and client properties.
type GroupKey = (String, BTreeMap<String, String>);

/// The names of the cluster's groups, and when they were asked for.
type GroupList = (Instant, Arc<HashSet<String>>);

/// A consumer of one group that is assigned nothing: it reads and commits the group's offsets.
struct GroupClient {
    group: String,
    /// Closing a consumer of a group waits until librdkafka has closed it.
    consumer: OffRuntime<BaseConsumer>,
}

/// A consumer of the pool and the partitions its tasks hold.
struct Entry {
    shared: Arc<Shared>,
    held: Vec<TopicPartition>,
}

/// One librdkafka consumer, and the task that serves its own queue (errors of the client as a
/// whole; no message arrives there, every assigned partition is forwarded to a task's queue).
struct Shared {
    id: u64,
    properties: BTreeMap<String, String>,
    consumer: Arc<StreamConsumer>,
    /// Dropped with the last handle: the serving task ends and closes the consumer.
    _closing: oneshot::Sender<()>,
}

impl Consumers {
    /// A worker's consumers, closing a group client unused for `group_idle`.
    pub fn new(group_idle: Duration) -> Self {
        Consumers {
            pool: Mutex::default(),
            made: AtomicU64::new(0),
            groups: Mutex::default(),
            group_idle,
            sweeping: AtomicBool::new(false),
            listed: tokio::sync::Mutex::default(),
        }
    }

    /// The number of librdkafka consumers open.
    pub fn open(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic while holding the lock leaves the pool as consistent as each step left it.
        self.pool.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A consumer of the pool for `config` that holds none of `partitions`, with `partitions`
    /// now held (made when there is none).
    fn hold(
        &self,
        config: &SharedConsumerConfig,
        partitions: &[TopicPartition],
    ) -> Result<Arc<Shared>, ConnectError> {
        let mut pool = self.lock();
        let free = pool.iter_mut().find(|e| {
            e.shared.properties == config.properties
                && !e.held.iter().any(|held| partitions.contains(held))
        });
        if let Some(entry) = free {
            entry.held.extend_from_slice(partitions);
            return Ok(entry.shared.clone());
        }
        let consumer: StreamConsumer = config
            .client_config()
            .create()
            .map_err(|e| ConnectError::fatal(format!("cannot create a Kafka consumer: {e}")))?;
        let consumer = Arc::new(consumer);
        let id = self.made.fetch_add(1, Ordering::Relaxed);
        let (closing, closed) = oneshot::channel();
        tokio::spawn(serve(id, consumer.clone(), closed));
        let shared = Arc::new(Shared {
            id,
            properties: config.properties.clone(),
            consumer,
            _closing: closing,
        });
        info!(
            consumer = id,
            open = pool.len() + 1,
            "opened a shared Kafka consumer"
        );
        pool.push(Entry {
            shared: shared.clone(),
            held: partitions.to_vec(),
        });
        Ok(shared)
    }

    /// Let `partitions` of `shared` go; a consumer that holds none is closed.
    fn release(&self, shared: &Arc<Shared>, partitions: &[TopicPartition]) {
        let mut pool = self.lock();
        let Some(at) = pool.iter().position(|e| Arc::ptr_eq(&e.shared, shared)) else {
            return;
        };
        pool[at].held.retain(|tp| !partitions.contains(tp));
        if pool[at].held.is_empty() {
            pool.remove(at);
            info!(
                consumer = shared.id,
                open = pool.len(),
                "closing a shared Kafka consumer: no task uses it"
            );
        }
    }

    fn groups(&self) -> std::sync::MutexGuard<'_, HashMap<GroupKey, (Arc<GroupClient>, Instant)>> {
        self.groups.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The group client of `key`, made when there is none.
    fn group(&self, key: &GroupKey) -> KafkaResult<Arc<GroupClient>> {
        let mut groups = self.groups();
        if let Some((client, used)) = groups.get_mut(key) {
            *used = Instant::now();
            return Ok(client.clone());
        }
        let (group, properties) = key;
        let config = SharedConsumerConfig {
            properties: properties.clone(),
            group: group.clone(),
        };
        let client = Arc::new(GroupClient {
            group: group.clone(),
            consumer: OffRuntime::new(config.client_config().create()?),
        });
        groups.insert(key.clone(), (client.clone(), Instant::now()));
        Ok(client)
    }

    /// Close the group clients unused for the idle time and not in use now; how many are left.
    pub fn close_idle_groups(&self) -> usize {
        let mut groups = self.groups();
        let before = groups.len();
        groups.retain(|_, (client, used)| {
            Arc::strong_count(client) > 1 || used.elapsed() < self.group_idle
        });
        if groups.len() < before {
            debug!(
                closed = before - groups.len(),
                open = groups.len(),
                "closed idle group clients"
            );
        }
        groups.len()
    }

    /// The groups whose clients are open.
    pub fn group_clients(&self) -> Vec<String> {
        self.groups()
            .keys()
            .map(|(group, _)| group.clone())
            .collect()
    }

    /// The names of the cluster's consumer groups (those with members and those with only
    /// committed offsets) as a client of `shared`'s config sees them, from a list asked for
    /// after this call began: a caller never gets a
    /// list older than its question, and the callers waiting while one list is under way share
    /// the next. librdkafka asks every broker the client knows from its metadata; a broker
    /// that does not answer fails the list. The client's metadata is asked for first (of
    /// `topic`, one the caller reads): a consumer just made, with nothing assigned yet, has
    /// none, and librdkafka's list then waited about a second for it.
    async fn listed_groups(
        &self,
        shared: &Shared,
        topic: &str,
    ) -> KafkaResult<Arc<HashSet<String>>> {
        let asked = Instant::now();
        let mut lists = self.listed.lock().await;
        if let Some((listed, groups)) = lists.get(&shared.properties) {
            if *listed > asked {
                return Ok(groups.clone());
            }
        }
        let listed = Instant::now();
        let client = shared.consumer.clone();
        let topic = topic.to_string();
        let groups = tokio::task::spawn_blocking(move || {
            client.fetch_metadata(Some(&topic), GROUP_CALL_TIMEOUT)?;
            let list = client.fetch_group_list(None, GROUP_CALL_TIMEOUT)?;
            let names: HashSet<String> =
                list.groups().iter().map(|g| g.name().to_string()).collect();
            Ok(Arc::new(names))
        })
        .await
        .map_err(|_| KafkaError::Canceled)
        .and_then(|answer| answer)?;
        lists.insert(shared.properties.clone(), (listed, groups.clone()));
        Ok(groups)
    }

    /// Close idle group clients every half idle time, while the pool is in use.
    fn sweep(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::AcqRel) {
            return;
        }
        let pool = Arc::downgrade(self);
        let every = (self.group_idle / 2).max(Duration::from_secs(1));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                match pool.upgrade() {
                    Some(pool) => pool.close_idle_groups(),
                    None => return,
                };
            }
        });
    }

    /// A consumer of `partitions` for a task of `config`, not assigned them yet (see
    /// [`TaskConsumer::assign`]). Made on a blocking thread: making a librdkafka consumer
    /// starts its threads and waits for them.
    pub async fn task(
        self: &Arc<Self>,
        config: &SharedConsumerConfig,
        partitions: &[TopicPartition],
    ) -> Result<TaskConsumer, ConnectError> {
        let (pool, config, partitions) = (self.clone(), config.clone(), partitions.to_vec());
        tokio::task::spawn_blocking(move || pool.make_task(&config, &partitions))
            .await
            .map_err(|e| ConnectError::retriable(format!("a task's consumer: {e}")))?
    }

    fn make_task(
        self: &Arc<Self>,
        config: &SharedConsumerConfig,
        partitions: &[TopicPartition],
    ) -> Result<TaskConsumer, ConnectError> {
        let Some(first) = partitions.first().cloned() else {
            return Err(ConnectError::fatal("a task's consumer needs a partition"));
        };
        self.sweep();
        let shared = self.hold(config, partitions)?;
        // From here the partitions are let go again if anything fails (`Drop`).
        let mut task = TaskConsumer {
            pool: self.clone(),
            shared: shared.clone(),
            queue: None,
            batch: None,
            partitions: partitions.to_vec(),
            group: (config.group.clone(), config.properties.clone()),
            assigned: false,
        };
        let queue = shared
            .consumer
            .split_partition_queue(&first.topic, first.partition)
            .ok_or_else(|| ConnectError::fatal(format!("{first}: no queue of its own")))?;
        task.queue = Some(queue);
        task.batch = Some(
            BatchQueue::new(shared.consumer.client(), &first)
                .map_err(|e| ConnectError::fatal(format!("consumer queue of {first}: {e}")))?,
        );
        // Forwarded before they are assigned: none of their messages reach another queue.
        for tp in &partitions[1..] {
            librdkafka::forward(shared.consumer.client(), tp, Some(&first))
                .map_err(|e| ConnectError::fatal(format!("consumer queue of {tp}: {e}")))?;
        }
        Ok(task)
    }
}

/// Serve the consumer's own queue until the consumer's last handle is gone, then close it off
/// the async threads (closing a consumer of a group blocks until librdkafka has closed it).
async fn serve(id: u64, consumer: Arc<StreamConsumer>, mut closed: oneshot::Receiver<()>) {
    loop {
        tokio::select! {
            _ = &mut closed => break,
            event = consumer.recv() => match event {
                Ok(m) => warn!(consumer = id, topic = m.topic(), partition = m.partition(), offset = m.offset(), "a message reached a shared consumer's own queue; its task reads it again from its committed offset"),
                Err(e) => warn!(consumer = id, error = %e, "the Kafka consumer reports an error; it retries by itself"),
            },
        }
    }
    let closing = tokio::task::spawn_blocking(move || drop(consumer));
    if tokio::time::timeout(Duration::from_secs(10), closing)
        .await
        .is_err()
    {
        warn!(
            consumer = id,
            "a shared Kafka consumer did not close within 10 s"
        );
    }
}

/// A sink task's partitions on a shared consumer, read from one queue.
pub struct TaskConsumer {
    pool: Arc<Consumers>,
    shared: Arc<Shared>,
    /// `None` only while it is made.
    queue: Option<StreamPartitionQueue<DefaultConsumerContext>>,
    /// The same queue, for the messages ready after the first (`None` only while it is made).
    batch: Option<BatchQueue>,
    partitions: Vec<TopicPartition>,
    /// Its group client's key: its group and client properties.
    group: GroupKey,
    assigned: bool,
}

impl TaskConsumer {
    /// Whether a message is of this task's partitions; one that is not is logged and let go.
    /// It would be of a partition another task held before on this consumer, from before
    /// that task let it go: librdkafka delivers no message fetched before an unassign, so this
    /// is never expected; its owner reads it from its offsets.
    fn keeps(&self, m: &impl Message) -> bool {
        let owns = self
            .partitions
            .iter()
            .any(|tp| tp.partition == m.partition() && tp.topic == m.topic());
        if !owns {
            warn!(consumer = self.shared.id, topic = m.topic(), partition = m.partition(), offset = m.offset(), "a message of another task's partition on this task's queue; not this task's to take");
        }
        owns
    }

    /// The next message of the task's partitions, waiting for one.
    pub async fn recv(&self) -> KafkaResult<BorrowedMessage<'_>> {
        let Some(queue) = &self.queue else {
            return std::future::pending().await;
        };
        loop {
            let m = queue.recv().await?;
            if self.keeps(&m) {
                return Ok(m);
            }
        }
    }

    /// The messages of the task's partitions ready now, up to `max`, without waiting.
    pub fn ready(&self, max: usize) -> Vec<KafkaResult<RawMessage<'_>>> {
        let Some(batch) = &self.batch else {
            return Vec::new();
        };
        let mut ready = batch.ready(max);
        ready.retain(|m| m.as_ref().map_or(true, |m| self.keeps(m)));
        ready
    }

    /// `tp`'s high watermark as the shared consumer last fetched it, if known.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        librdkafka::cached_high_watermark(self.shared.consumer.client(), tp)
    }

    /// Consume `tp` again from `offset`. The seek is asked, not waited for (librdkafka's
    /// version barrier keeps every message fetched before it from the task); a seek that
    /// fails is reported as the consumer's error on the task's queue.
    pub fn seek(&self, tp: &TopicPartition, offset: i64) -> KafkaResult<()> {
        self.shared.consumer.seek(
            &tp.topic,
            tp.partition,
            Offset::Offset(offset),
            Duration::ZERO,
        )
    }

    /// Commit `offsets` to the task's group, without waiting.
    pub fn commit_group(&self, offsets: &HashMap<TopicPartition, i64>) -> KafkaResult<()> {
        let client = self.pool.group(&self.group)?;
        let consumer = &client.consumer;
        // Serve what earlier commits left on the client's queue (their results); it fetches
        // nothing, so no message is ever there.
        while let Some(event) = consumer.poll(Duration::ZERO) {
            if let Err(e) = event {
                debug!(group = %client.group, error = %e, "the group client reports an error");
            }
        }
        let mut tpl = TopicPartitionList::new();
        for (tp, o) in offsets {
            tpl.add_partition_offset(&tp.topic, tp.partition, Offset::Offset(*o))?;
        }
        consumer.commit(&tpl, CommitMode::Async)
    }

    /// The offsets the task's group has committed for `partitions` (those without one are
    /// absent). A group the cluster does not list has none, and is not asked.
    pub async fn group_offsets(
        &self,
        partitions: &[TopicPartition],
    ) -> KafkaResult<BTreeMap<TopicPartition, i64>> {
        let Some(first) = partitions.first() else {
            return Ok(BTreeMap::new());
        };
        match self.pool.listed_groups(&self.shared, &first.topic).await {
            Ok(groups) if !groups.contains(&self.group.0) => return Ok(BTreeMap::new()),
            Ok(_) => {}
            Err(e) => {
                debug!(group = %self.group.0, error = %e, "cannot list the cluster's groups; asking the group")
            }
        }
        let mut tpl = TopicPartitionList::new();
        for tp in partitions {
            tpl.add_partition(&tp.topic, tp.partition);
        }
        let group = self.pool.group(&self.group)?;
        let asked = tokio::task::spawn_blocking(move || {
            group.consumer.committed_offsets(tpl, GROUP_CALL_TIMEOUT)
        })
        .await
        .map_err(|_| KafkaError::Canceled)
        .and_then(|answer| answer)?;
        Ok(asked
            .elements()
            .iter()
            .filter_map(|e| match e.offset() {
                Offset::Offset(o) => {
                    Some((TopicPartition::new(e.topic().to_string(), e.partition()), o))
                }
                _ => None,
            })
            .collect())
    }

    /// The task's group (`connect-<name>`, or as the connector overrides it).
    pub fn group(&self) -> &str {
        &self.group.0
    }

    /// Assign the task's partitions, each from its offset. librdkafka's assignment waits for
    /// its own thread without a bound: it is made on a blocking thread.
    pub async fn assign(&mut self, from: &[(TopicPartition, Offset)]) -> KafkaResult<()> {
        let mut assignment = TopicPartitionList::new();
        for (tp, offset) in from {
            assignment.add_partition_offset(&tp.topic, tp.partition, *offset)?;
        }
        let consumer = self.shared.consumer.clone();
        tokio::task::spawn_blocking(move || consumer.incremental_assign(&assignment))
            .await
            .map_err(|_| KafkaError::Canceled)??;
        self.assigned = true;
        debug!(
            consumer = self.shared.id,
            partitions = from.len(),
            "task's partitions assigned on a shared consumer"
        );
        Ok(())
    }
}

impl Drop for TaskConsumer {
    fn drop(&mut self) {
        let going = Going {
            pool: self.pool.clone(),
            shared: self.shared.clone(),
            queue: self.queue.take(),
            batch: self.batch.take(),
            partitions: std::mem::take(&mut self.partitions),
            assigned: self.assigned,
        };
        // librdkafka's unassignment waits for its own thread without a bound: never on an
        // async thread. The partitions stay held until it is done, so that no task is given
        // them on this consumer meanwhile.
        off_runtime(move || going.end());
    }
}

/// A task's partitions on a shared consumer, being let go.
struct Going {
    pool: Arc<Consumers>,
    shared: Arc<Shared>,
    queue: Option<StreamPartitionQueue<DefaultConsumerContext>>,
    batch: Option<BatchQueue>,
    partitions: Vec<TopicPartition>,
    assigned: bool,
}

impl Going {
    /// Unassign the partitions, stop forwarding their queues and let them go.
    fn end(self) {
        let client = &self.shared.consumer;
        if self.assigned {
            let mut tpl = TopicPartitionList::new();
            for tp in &self.partitions {
                tpl.add_partition(&tp.topic, tp.partition);
            }
            if let Err(e) = client.incremental_unassign(&tpl) {
                warn!(consumer = self.shared.id, error = %e, "cannot unassign a task's partitions from the shared consumer");
            }
        }
        for tp in self.partitions.iter().skip(1) {
            if let Err(e) = librdkafka::forward(client.client(), tp, None) {
                debug!(error = %e, partition = %tp, "cannot stop forwarding a partition's queue");
            }
        }
        // Its queue handles go before the consumer may be closed.
        drop(self.batch);
        drop(self.queue);
        self.pool.release(&self.shared, &self.partitions);
    }
}
