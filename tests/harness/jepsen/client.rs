//! Clients of the fault suite: a gRPC probe that asks one node at a time what it knows (tasks,
//! status, offsets, leader), and the concurrent config clients — through gRPC or through Kafka
//! Connect's REST API — whose history the linearizability checker reads.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_proto::management as pb;
use ferry_proto::management::management_client::ManagementClient;
use tonic::transport::Channel;
use tonic::Code;

use super::checkers::{Assigned, Reported};
use super::linearizable::{ConfigInput, ConfigOutput, Op};
use super::rng::Rng;
use crate::rest::{self, Answer, Body};

fn channel(addr: &str, timeout: Duration) -> Option<ManagementClient<Channel>> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}")).ok()?;
    let channel = endpoint
        .connect_timeout(Duration::from_millis(500))
        .timeout(timeout)
        .connect_lazy();
    Some(ManagementClient::new(channel))
}

/// Synchronous calls to one node at a time, each bounded by a short timeout; `None` when the
/// node does not answer.
pub struct Probe {
    runtime: tokio::runtime::Runtime,
}

impl Default for Probe {
    fn default() -> Self {
        Probe::new()
    }
}

impl Probe {
    pub fn new() -> Probe {
        // A worker thread of its own, so that a dropped channel's connection is closed at once
        // rather than left open until the next call.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a probe runtime");
        Probe { runtime }
    }

    /// One call to the node at `addr`, bounded by `timeout`; `None` if it does not answer.
    fn ask<R, F, Fut>(&self, addr: &str, timeout: Duration, call: F) -> Option<R>
    where
        F: FnOnce(ManagementClient<Channel>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<R>, tonic::Status>>,
    {
        let _context = self.runtime.enter();
        let client = channel(addr, timeout)?;
        self.runtime
            .block_on(call(client))
            .ok()
            .map(tonic::Response::into_inner)
    }

    /// Whether the node at `addr` answers its status within `bound`: any answer counts, an
    /// error too (a node starting up, or one not listening, answers at once); silence does not.
    pub fn answers(&self, addr: &str, bound: Duration) -> bool {
        let _context = self.runtime.enter();
        let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
            return false;
        };
        // Only the bound below ends the call: a connection that waits in a frozen node's
        // backlog is silence, not an error.
        let mut client = ManagementClient::new(endpoint.connect_timeout(bound * 2).connect_lazy());
        let call = client.cluster_status(pb::Empty {});
        self.runtime
            .block_on(tokio::time::timeout(bound, call))
            .is_ok()
    }

    /// The leader a node names, if it names one.
    pub fn leader(&self, addr: &str) -> Option<u64> {
        self.ask(addr, Duration::from_secs(2), |mut c| async move {
            c.cluster_status(pb::Empty {}).await
        })?
        .leader_id
    }

    /// The assignment of a connector's tasks, as one node answers it (a linearizable read).
    pub fn tasks(&self, addr: &str, name: &str) -> Option<Vec<Assigned>> {
        let req = pb::ConnectorName { name: name.into() };
        let tasks = self
            .ask(addr, Duration::from_secs(3), |mut c| async move {
                c.list_tasks(req).await
            })?
            .tasks;
        Some(
            tasks
                .into_iter()
                .map(|t| Assigned {
                    connector: name.to_string(),
                    task: t.id,
                    worker: t.worker_id,
                    generation: t.generation,
                })
                .collect(),
        )
    }

    /// The status of a connector's tasks, as one node answers it.
    pub fn status(&self, addr: &str, name: &str) -> Option<Vec<Reported>> {
        let req = pb::ConnectorName { name: name.into() };
        let status = self.ask(addr, Duration::from_secs(3), |mut c| async move {
            c.connector_status(req).await
        })?;
        Some(
            status
                .tasks
                .into_iter()
                .map(|t| Reported {
                    connector: name.to_string(),
                    task: t.id,
                    state: t.state,
                    worker: t.worker_id,
                    generation: t.generation,
                    trace: t.trace,
                })
                .collect(),
        )
    }

    /// Every connector name, as one node answers it.
    pub fn connectors(&self, addr: &str) -> Option<Vec<String>> {
        let names = self.ask(addr, Duration::from_secs(3), |mut c| async move {
            c.list_connectors(pb::ListConnectorsRequest {}).await
        })?;
        Some(names.names)
    }

    /// How many units (connector instances and tasks) each worker runs, by the status one node
    /// answers; units on no worker are counted under "".
    pub fn loads(&self, addr: &str) -> Option<BTreeMap<String, usize>> {
        let mut loads = BTreeMap::new();
        for name in self.connectors(addr)? {
            let req = pb::ConnectorName { name };
            let status = self.ask(addr, Duration::from_secs(3), |mut c| async move {
                c.connector_status(req).await
            })?;
            let workers = std::iter::once(status.worker_id)
                .chain(status.tasks.into_iter().map(|t| t.worker_id));
            for worker in workers {
                *loads.entry(worker).or_default() += 1;
            }
        }
        Some(loads)
    }

    /// A sink connector's committed offsets, partition → next offset.
    pub fn sink_offsets(&self, addr: &str, name: &str) -> Option<BTreeMap<i32, i64>> {
        let req = pb::ConnectorName { name: name.into() };
        let offsets = self
            .ask(addr, Duration::from_secs(2), |mut c| async move {
                c.get_offsets(req).await
            })?
            .offsets;
        let mut out = BTreeMap::new();
        for o in offsets {
            let partition: serde_json::Value = serde_json::from_str(&o.partition_json).ok()?;
            let offset: serde_json::Value = serde_json::from_str(&o.offset_json).ok()?;
            out.insert(
                i32::try_from(partition["kafka_partition"].as_i64()?).ok()?,
                offset["kafka_offset"].as_i64()?,
            );
        }
        Some(out)
    }
}

pub type History = Arc<Mutex<Vec<Op<ConfigInput, ConfigOutput>>>>;

/// The register a config client writes: a FileStreamSink whose `file` is the value, on an idle
/// topic (its tasks really run, so config churn restarts tasks during the faults).
pub fn register_config(value: &str, topic: &str) -> HashMap<String, String> {
    [
        ("connector.class", "FileStreamSink"),
        ("topics", topic),
        ("file", value),
        ("tasks.max", "1"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

/// Whether a failed call may still have taken effect.
fn indeterminate(code: Code) -> bool {
    matches!(
        code,
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::Unknown
            | Code::Cancelled
            | Code::Internal
    )
}

/// A call that could not even connect: it never reached a node, so it had no effect.
fn never_sent(status: &tonic::Status) -> bool {
    let text = format!("{status:?}");
    status.code() == Code::Unavailable
        && (text.contains("tcp connect") || text.contains("Connection refused"))
}

/// What a config client does.
#[derive(Clone, Debug)]
pub struct ClientPlan {
    pub id: u64,
    pub addrs: Vec<String>,
    pub keys: Vec<String>,
    /// The topic of the register connectors.
    pub topic: String,
    /// Time origin of the history.
    pub started: Instant,
    pub until: Instant,
    /// Pause between two operations.
    pub think: Duration,
    pub seed: u64,
    /// Lets a nemesis hold the clients' writes.
    pub hold: Arc<WriteHold>,
}

/// While held, the clients only read: a nemesis that checks that nothing else moved (the big
/// config) holds the writes, whose creates and deletes rebalance tasks on purpose.
#[derive(Debug, Default)]
pub struct WriteHold {
    held: AtomicBool,
    writing: AtomicUsize,
}

impl WriteHold {
    /// Hold the writes; returns once no write is in flight.
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
        crate::wait_for(
            "the config clients' writes in flight",
            Duration::from_secs(30),
            || (self.writing.load(Ordering::SeqCst) == 0).then_some(()),
        );
    }

    pub fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }

    /// Start a write unless held: the guard counts it in flight.
    fn write(&self) -> Option<Writing<'_>> {
        self.writing.fetch_add(1, Ordering::SeqCst);
        if self.held.load(Ordering::SeqCst) {
            self.writing.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Writing(self))
    }
}

/// A write in flight.
struct Writing<'a>(&'a WriteHold);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.writing.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Start `count` gRPC config clients (ids 0..count) on `runtime`, each with `plan` and its
/// own id.
pub fn spawn_config_clients(
    runtime: &tokio::runtime::Runtime,
    count: u64,
    plan: &ClientPlan,
    history: &History,
) -> Vec<tokio::task::JoinHandle<()>> {
    spawn_clients(runtime, count, plan, history, config_client)
}

/// Start `count` clients (ids 0..count) on `runtime`, each `client` with `plan` and its own id.
pub fn spawn_clients<F>(
    runtime: &tokio::runtime::Runtime,
    count: u64,
    plan: &ClientPlan,
    history: &History,
    client: fn(ClientPlan, History) -> F,
) -> Vec<tokio::task::JoinHandle<()>>
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    (0..count)
        .map(|id| {
            let plan = ClientPlan { id, ..plan.clone() };
            runtime.spawn(client(plan, history.clone()))
        })
        .collect()
}

/// The next operation of a client: a key and what to do with it, or `None` while writes are
/// held (after the client's pause).
async fn next_op<'a>(
    rng: &mut Rng,
    plan: &'a ClientPlan,
    count: u64,
) -> Option<(String, ConfigInput, Option<Writing<'a>>)> {
    let key = rng.pick(&plan.keys).cloned().unwrap_or_default();
    let value = format!("idle-c{}-{count}.out", plan.id);
    let input = match rng.below(10) {
        0..=3 => ConfigInput::Get,
        4..=6 => ConfigInput::Put(value.clone()),
        7..=8 => ConfigInput::Create(value),
        _ => ConfigInput::Delete,
    };
    let writing = match input {
        ConfigInput::Get => None,
        _ => match plan.hold.write() {
            Some(writing) => Some(writing),
            None => {
                tokio::time::sleep(plan.think).await;
                return None;
            }
        },
    };
    Some((key, input, writing))
}

/// How a client's call ended.
enum Ended {
    /// With this answer.
    Answered(ConfigOutput),
    /// Without effect: a failed read, or a call that never reached a node.
    NoEffect,
    /// Perhaps with effect, perhaps not.
    Unknown,
}

/// Record an operation that ended this way (nothing for one without effect).
fn record(history: &History, key: String, input: ConfigInput, call: u64, ret: u64, ended: Ended) {
    let op = match ended {
        Ended::Answered(output) => Op {
            key,
            input,
            call,
            ret: Some(ret),
            output: Some(output),
        },
        Ended::NoEffect => return,
        Ended::Unknown => Op {
            key,
            input,
            call,
            ret: None,
            output: None,
        },
    };
    history.lock().unwrap_or_else(|p| p.into_inner()).push(op);
}

/// Run create/put/get/delete operations against random nodes until `until`, recording each
/// invocation and completion (a call cut off mid-flight as of unknown outcome).
pub async fn config_client(plan: ClientPlan, history: History) {
    let mut rng = Rng::new(plan.seed ^ plan.id.wrapping_mul(0x1000_0000_01b3));
    let mut count = 0;
    while Instant::now() < plan.until {
        let Some(addr) = rng.pick(&plan.addrs) else {
            return;
        };
        let Some(mut c) = channel(addr, Duration::from_secs(8)) else {
            return;
        };
        count += 1;
        let Some((key, input, writing)) = next_op(&mut rng, &plan, count).await else {
            continue;
        };
        let call = plan.started.elapsed().as_nanos() as u64;
        let outcome: Result<ConfigOutput, tonic::Status> = match &input {
            ConfigInput::Get => match c
                .get_connector(pb::ConnectorName { name: key.clone() })
                .await
            {
                Ok(r) => Ok(ConfigOutput::Value(
                    r.into_inner().config.get("file").cloned(),
                )),
                Err(s) if s.code() == Code::NotFound => Ok(ConfigOutput::Value(None)),
                Err(s) => Err(s),
            },
            ConfigInput::Put(v) => c
                .put_connector_config(pb::PutConnectorConfigRequest {
                    name: key.clone(),
                    config: register_config(v, &plan.topic),
                    request_id: String::new(),
                    expected_version: None,
                })
                .await
                .map(|_| ConfigOutput::Ok),
            ConfigInput::Create(v) => match c
                .create_connector(pb::CreateConnectorRequest {
                    name: key.clone(),
                    config: register_config(v, &plan.topic),
                    request_id: String::new(),
                })
                .await
            {
                Ok(_) => Ok(ConfigOutput::Ok),
                Err(s) if s.code() == Code::AlreadyExists => Ok(ConfigOutput::AlreadyExists),
                Err(s) => Err(s),
            },
            ConfigInput::Delete => match c
                .delete_connector(pb::WriteConnectorRequest {
                    name: key.clone(),
                    request_id: String::new(),
                })
                .await
            {
                Ok(_) => Ok(ConfigOutput::Ok),
                Err(s) if s.code() == Code::NotFound => Ok(ConfigOutput::NotFound),
                Err(s) => Err(s),
            },
        };
        let ret = plan.started.elapsed().as_nanos() as u64;
        drop(writing);
        let ended = match outcome {
            Ok(output) => Ended::Answered(output),
            // A failed read has no effect, and neither has a call that never connected.
            Err(_) if input == ConfigInput::Get => Ended::NoEffect,
            Err(status) if never_sent(&status) => Ended::NoEffect,
            Err(status) if indeterminate(status.code()) => Ended::Unknown,
            Err(status) => panic!("unexpected answer {status:?} to {input:?}"),
        };
        record(&history, key, input, call, ret, ended);
        tokio::time::sleep(plan.think).await;
    }
}

/// `config_client` through the REST API, as a Kafka Connect user's script would call it (curl;
/// the plan's `addrs` are REST base URLs).
/// Every answer must be the operation's own or one of Kafka Connect's "try again" answers (409
/// while no leader is known, 500): those leave a write's outcome unknown and a read without
/// effect, as does no answer at all.
pub async fn rest_config_client(plan: ClientPlan, history: History) {
    let mut rng = Rng::new(plan.seed ^ plan.id.wrapping_mul(0x1000_0000_01b3));
    let mut count = 0;
    while Instant::now() < plan.until {
        let Some(base) = rng.pick(&plan.addrs).cloned() else {
            return;
        };
        count += 1;
        let Some((key, input, writing)) = next_op(&mut rng, &plan, count).await else {
            continue;
        };
        let call = plan.started.elapsed().as_nanos() as u64;
        let (asked, k) = (input.clone(), key.clone());
        let topic = plan.topic.clone();
        let answer = tokio::task::spawn_blocking(move || rest_call(&base, &k, &asked, &topic))
            .await
            .expect("a REST call");
        let ret = plan.started.elapsed().as_nanos() as u64;
        drop(writing);
        let ended = match answer {
            Some(a) => rest_outcome(&key, &input, &a),
            None if input == ConfigInput::Get => Ended::NoEffect,
            None => Ended::Unknown,
        };
        record(&history, key, input, call, ret, ended);
        tokio::time::sleep(plan.think).await;
    }
}

/// The request of one operation on connector `key`.
fn rest_call(base: &str, key: &str, input: &ConfigInput, topic: &str) -> Option<Answer> {
    let config = |v: &str| serde_json::to_value(register_config(v, topic)).unwrap_or_default();
    let path = format!("/connectors/{key}");
    match input {
        ConfigInput::Get => rest::call(base, "GET", &format!("{path}/config"), Body::None),
        ConfigInput::Put(v) => rest::call(
            base,
            "PUT",
            &format!("{path}/config"),
            Body::Json(&config(v)),
        ),
        ConfigInput::Create(v) => rest::call(
            base,
            "POST",
            "/connectors",
            Body::Json(&serde_json::json!({"name": key, "config": config(v)})),
        ),
        ConfigInput::Delete => rest::call(base, "DELETE", &path, Body::None),
    }
}

/// What an answer means for the history.
fn rest_outcome(key: &str, input: &ConfigInput, answer: &Answer) -> Ended {
    let exists = format!("Connector {key} already exists");
    match (input, answer.status) {
        (ConfigInput::Get, 200) => Ended::Answered(ConfigOutput::Value(
            answer.body["file"].as_str().map(str::to_string),
        )),
        (ConfigInput::Get, 404) => Ended::Answered(ConfigOutput::Value(None)),
        (ConfigInput::Put(_), 200 | 201) | (ConfigInput::Create(_), 201) => {
            Ended::Answered(ConfigOutput::Ok)
        }
        (ConfigInput::Create(_), 409) if answer.body["message"] == exists.as_str() => {
            Ended::Answered(ConfigOutput::AlreadyExists)
        }
        (ConfigInput::Delete, 204) => Ended::Answered(ConfigOutput::Ok),
        (ConfigInput::Delete, 404) => Ended::Answered(ConfigOutput::NotFound),
        (ConfigInput::Get, 409 | 500) => Ended::NoEffect,
        (_, 409 | 500) => Ended::Unknown,
        (_, status) => panic!(
            "unexpected answer {status} to {input:?} of {key}: {}",
            answer.body
        ),
    }
}
