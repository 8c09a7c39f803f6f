//! The record workload: a producer of uniquely numbered records spread over every partition of
//! a topic (recording where the broker put each), a sequential poller of committed offsets, and
//! readers of what the sinks wrote.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};

use super::checkers::{OffsetEvent, Produced};
use super::client::Probe;
use super::rng::Rng;
use crate::Processes;

/// The value of record `id`, one line of a FileStreamSink's output.
pub fn record_value(id: u64) -> String {
    format!("r{id:09}")
}

/// The record number in a sink output line, if it is one of ours.
pub fn record_id(line: &str) -> Option<u64> {
    line.strip_prefix('r')?.parse().ok()
}

/// What the producer did.
#[derive(Debug, Default)]
pub struct Produce {
    /// Acknowledged records: the loss checker's input.
    pub acked: Vec<Produced>,
    /// Records the broker did not acknowledge (not counted as produced).
    pub failed: usize,
}

/// A thread that works until told to stop, then hands back what it recorded.
pub struct Background<T> {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<T>>,
}

impl<T: Send + 'static> Background<T> {
    /// Run `work` on its own thread; it should return soon after its flag turns true.
    pub fn spawn(work: impl FnOnce(&AtomicBool) -> T + Send + 'static) -> Background<T> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || work(&flag));
        Background {
            stop,
            handle: Some(handle),
        }
    }

    /// Stop the work; what it recorded.
    pub fn finish(mut self) -> T {
        self.stop.store(true, Ordering::Relaxed);
        let handle = self.handle.take().expect("finished once");
        handle.join().expect("a workload thread panicked")
    }
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Produce `rate` records per second, record `id` to partition `id % partitions`, until
/// stopped; every acknowledged record.
pub fn producer(bootstrap: &str, topic: &str, partitions: i32, rate: u32) -> Background<Produce> {
    let (bootstrap, topic) = (bootstrap.to_string(), topic.to_string());
    Background::spawn(move |stop| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a producer runtime");
        runtime.block_on(produce(&bootstrap, &topic, partitions, rate, stop))
    })
}

async fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    rate: u32,
    stop: &AtomicBool,
) -> Produce {
    // Idempotent: a retry after a broker's failure must not write a record twice into the
    // topic (that duplicate would be the producer's, not the sink's).
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("message.timeout.ms", "30000")
        .create()
        .expect("a producer");
    let tick = Duration::from_millis(20);
    let per_tick = (u64::from(rate) * 20 / 1000).max(1);
    // Records waiting for their acknowledgement: a batch stuck on a partition whose broker is
    // away must not hold back the others, so sending goes on while up to this many wait.
    let window = (u64::from(rate) * 30).max(1000) as usize;
    let mut out = Produce::default();
    let mut waiting = tokio::task::JoinSet::new();
    let mut next = 0u64;
    let mut interval = tokio::time::interval(tick);
    while !stop.load(Ordering::Relaxed) {
        interval.tick().await;
        while waiting.len() >= window {
            if let Some(done) = waiting.join_next().await {
                out.record(done);
            }
        }
        for id in next..next + per_tick {
            let value = record_value(id);
            let key = id.to_string();
            let partition = (id % partitions as u64) as i32;
            let record = FutureRecord::to(topic)
                .key(&key)
                .payload(&value)
                .partition(partition);
            match producer.send_result(record) {
                Ok(delivery) => {
                    waiting.spawn(async move {
                        let acked = match delivery.await {
                            Ok(Ok(d)) => Some((d.partition, d.offset)),
                            _ => None,
                        };
                        (id, acked)
                    });
                }
                Err(_) => out.failed += 1,
            }
        }
        next += per_tick;
        while let Some(done) = waiting.try_join_next() {
            out.record(done);
        }
    }
    // Every send ends within message.timeout.ms, acknowledged or not.
    while let Some(done) = waiting.join_next().await {
        out.record(done);
    }
    out
}

impl Produce {
    /// Count one send's outcome: acknowledged (with its partition and offset) or failed.
    fn record(&mut self, done: Result<(u64, Option<(i32, i64)>), tokio::task::JoinError>) {
        match done {
            Ok((id, Some((partition, offset)))) => self.acked.push(Produced {
                id,
                partition,
                offset,
            }),
            _ => self.failed += 1,
        }
    }
}

/// Read a sink connector's committed offsets from a random node, one read at a time (so that
/// each read starts after the previous one returned), until stopped.
pub fn offset_poller(addrs: Vec<String>, name: &str, seed: u64) -> Background<Vec<OffsetEvent>> {
    let name = name.to_string();
    Background::spawn(move |stop| {
        let probe = Probe::new();
        let mut rng = Rng::new(seed);
        let mut events = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let Some(addr) = rng.pick(&addrs) else {
                break;
            };
            if let Some(offsets) = probe.sink_offsets(addr, &name) {
                events.extend(
                    offsets
                        .into_iter()
                        .map(|(partition, offset)| OffsetEvent::Observed { partition, offset }),
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        events
    })
}

/// A node that did not answer its status in time, and where its threads were then.
#[derive(Clone, Debug)]
pub struct Silence {
    pub node: u64,
    pub pid: u32,
    /// When the question was asked (the harness's time of day).
    pub asked: String,
    pub stacks: String,
}

/// What the freeze sampler saw.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// Questions asked of running, unpaused nodes.
    pub asked: usize,
    /// The slowest answer.
    pub slowest: Duration,
    pub silences: Vec<Silence>,
}

/// The freeze sampler: a thread that asks every running node for its status in turn, each
/// within `bound`, until finished. A node that does not answer (and was neither paused,
/// stopped nor restarted meanwhile, nor resumed or started less than `bound` before) is
/// recorded with every thread's stack at that moment.
pub struct FreezeSampler {
    samples: Arc<Mutex<Samples>>,
    background: Background<()>,
}

impl FreezeSampler {
    /// Start sampling the nodes `processes` lists.
    pub fn start(processes: Processes, bound: Duration) -> FreezeSampler {
        let samples = Arc::new(Mutex::new(Samples::default()));
        let record = samples.clone();
        let background = Background::spawn(move |stop| {
            let probe = Probe::new();
            while !stop.load(Ordering::Relaxed) {
                for (id, process) in processes.now() {
                    let asked = Instant::now();
                    let Some(since) = process.running_since else {
                        continue;
                    };
                    if asked.duration_since(since) < bound {
                        continue;
                    }
                    let asked_at = crate::time_of_day();
                    let answered = probe.answers(&process.api, bound);
                    // Paused, ended or restarted meanwhile: its silence is the nemesis's doing.
                    if processes.get(id).as_ref() != Some(&process) {
                        continue;
                    }
                    let known = {
                        let mut samples = lock(&record);
                        samples.asked += 1;
                        samples.slowest = samples.slowest.max(asked.elapsed());
                        samples.silences.iter().any(|s| s.pid == process.pid)
                    };
                    if !answered && !known {
                        let silence = Silence {
                            node: id,
                            pid: process.pid,
                            asked: asked_at,
                            stacks: crate::stacks(process.pid),
                        };
                        crate::say(format!(
                            "FREEZE? node {id} (pid {}) did not answer its status asked at {} within {bound:?}; its threads:\n{}",
                            silence.pid, silence.asked, silence.stacks
                        ));
                        lock(&record).silences.push(silence);
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        FreezeSampler {
            samples,
            background,
        }
    }

    /// What it has seen so far.
    pub fn now(&self) -> Samples {
        lock(&self.samples).clone()
    }

    /// Stop it; what it saw.
    pub fn finish(self) -> Samples {
        let samples = self.samples.clone();
        self.background.finish();
        let seen = lock(&samples).clone();
        seen
    }
}

fn lock(samples: &Mutex<Samples>) -> std::sync::MutexGuard<'_, Samples> {
    samples.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_values_round_trip_and_other_lines_are_not_ours() {
        assert_eq!(record_id(&record_value(42)), Some(42));
        assert_eq!(record_id("hello"), None);
        assert_eq!(record_id("r12x"), None);
    }
}
