//! `cluster.toml`: one file per node. Parsed strictly (unknown keys are errors) and validated
//! with messages that say what is wrong and how to fix it.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_worker::KafkaSettings;
use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a valid cluster.toml: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: {problems}", problems = .problems.join("; "))]
    Invalid {
        path: PathBuf,
        problems: Vec<String>,
    },
}

/// One node's configuration.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// This node's id: unique in the cluster, never reused for another machine.
    pub node_id: u64,
    /// Where this node keeps its Raft log, state and snapshots. A relative path resolves
    /// against the directory of `cluster.toml`.
    pub data_dir: PathBuf,
    /// Client-facing management gRPC address (`host:port`) this node listens on; the `ferry`
    /// CLI connects here.
    pub api_addr: String,
    /// Peer-only gRPC address (`host:port`) for Raft and forwarded requests. Must be
    /// reachable by every other node and should not be exposed to clients.
    pub raft_addr: String,
    /// The voters that bootstrap the cluster, this node included. Every node of the first
    /// cluster lists the same peers; a node joining later lists them too, plus itself.
    pub peers: Vec<Peer>,
    /// How many voters the cluster aims for: `ferry cluster add-node` promotes a new node to
    /// voter while there are fewer (3 or 5; more voters, slower writes).
    #[serde(default = "default_target_voters")]
    pub target_voters: usize,
    /// Raft timing and log compaction.
    #[serde(default)]
    pub raft: RaftSettings,
    /// Failure detection of workers.
    #[serde(default)]
    pub worker: WorkerSettings,
    /// Kafka, for the connectors' consumers and producers.
    #[serde(default)]
    pub kafka: Option<KafkaSettings>,
    /// What one client request may ask of the cluster.
    #[serde(default)]
    pub limits: crate::limits::Limits,
    /// Kafka Connect's REST API; without this section the node serves none.
    #[serde(default)]
    pub rest: Option<RestSettings>,
    /// How the node writes its log.
    #[serde(default)]
    pub log: LogSettings,
    /// What the node measures and serves at `GET /metrics`.
    #[serde(default)]
    pub metrics: ferry_worker::metrics::MetricsOptions,
}

/// How a node writes its log (to standard error).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    /// `text` (the default) or `json`: one JSON object per line, with the fields of the spans
    /// it was written in (a unit's connector, task and generation). `ferryd --log-format`
    /// overrides it.
    #[serde(default)]
    pub format: LogFormat,
}

/// A log format.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Lines for people.
    #[default]
    Text,
    /// A JSON object per line, for log collectors.
    Json,
}

/// Kafka Connect's REST API on this node.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RestSettings {
    /// Kafka Connect's `listeners`: `http://host:port`, comma-separated (an empty host listens
    /// on every interface).
    pub listeners: String,
    /// The `host:port` other workers and clients reach this API at, shown as `worker_id` in
    /// its statuses (Kafka Connect's `rest.advertised.host.name` and `.port`). Default: the
    /// first listener's, an unspecified host replaced by `api_addr`'s.
    #[serde(default)]
    pub advertised: Option<String>,
    /// Kafka Connect's `admin.listeners`, where `/admin/*` is served: unset, on `listeners`;
    /// empty, nowhere; else only on these (`http://host:port`, comma-separated).
    #[serde(default)]
    pub admin_listeners: Option<String>,
    /// Kafka Connect's `access.control.allow.origin`: the origins a browser may call the API
    /// from (`*` for any, else comma-separated); unset or empty, no CORS headers.
    #[serde(default)]
    pub access_control_allow_origin: Option<String>,
    /// Kafka Connect's `access.control.allow.methods`: the methods allowed across origins
    /// (default `GET,POST,HEAD`).
    #[serde(default)]
    pub access_control_allow_methods: Option<String>,
}

impl RestSettings {
    /// The `host:port` of each listener, or what is wrong with one.
    pub fn addresses(&self) -> Result<Vec<String>, String> {
        listener_addresses("rest.listeners", &self.listeners)
    }

    /// The `host:port` of each admin listener (`None`: `/admin/*` is on the main ones), or
    /// what is wrong with one.
    pub fn admin_addresses(&self) -> Result<Option<Vec<String>>, String> {
        self.admin_listeners
            .as_deref()
            .map(|text| listener_addresses("rest.admin_listeners", text))
            .transpose()
    }
}

/// `http://host:port` listeners, comma-separated, as `host:port` addresses to bind (an empty
/// host: every interface); the error names `field`.
fn listener_addresses(field: &str, text: &str) -> Result<Vec<String>, String> {
    ferry_connect::config::split_list(text)
        .into_iter()
        .map(|listener| {
            let Some(addr) = listener.strip_prefix("http://") else {
                return Err(format!(
                    "{field}: {listener:?} is not http://host:port (https is not supported yet)"
                ));
            };
            let addr = addr.trim_end_matches('/');
            match addr.rsplit_once(':') {
                Some(("", port)) => Ok(format!("0.0.0.0:{port}")),
                Some(_) => Ok(addr.to_string()),
                None => Err(format!("{field}: {listener:?} has no port")),
            }
        })
        .collect()
}

/// A static peer.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    pub id: u64,
    /// The peer's management address.
    pub api_addr: String,
    /// The peer's Raft address.
    pub raft_addr: String,
}

const fn default_target_voters() -> usize {
    3
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RaftSettings {
    /// How often the leader sends heartbeats (ms).
    #[serde(default = "RaftSettings::default_heartbeat_ms")]
    pub heartbeat_interval_ms: u64,
    /// A follower that hears nothing from a leader for a random time in
    /// [min, max] ms starts an election.
    #[serde(default = "RaftSettings::default_election_min_ms")]
    pub election_timeout_min_ms: u64,
    #[serde(default = "RaftSettings::default_election_max_ms")]
    pub election_timeout_max_ms: u64,
    /// Build a snapshot after this many log entries since the last one.
    #[serde(default = "RaftSettings::default_snapshot_logs")]
    pub snapshot_logs: u64,
    /// Log entries kept behind a snapshot (so slightly lagging followers catch up from the
    /// log rather than a snapshot).
    #[serde(default = "RaftSettings::default_logs_to_keep")]
    pub logs_to_keep: u64,
    /// How long a write or a linearizable read waits for a leader before failing (ms).
    #[serde(default = "RaftSettings::default_request_timeout_ms")]
    pub request_timeout_ms: u64,
    /// A voter unreachable this long (ms) is replaced by a caught-up learner, if there is one:
    /// the leader promotes the learner, then demotes the dead voter to learner, one change at
    /// a time and only while the live voters stay a majority. 0: never.
    #[serde(default = "RaftSettings::default_replace_dead_voter_after_ms")]
    pub replace_dead_voter_after_ms: u64,
    /// Test only: reach these peers (node id → host:port) at these addresses instead of their
    /// raft_addr, so that a fault-injection proxy can sit between each pair of nodes.
    #[serde(default)]
    pub test_peer_addrs: BTreeMap<String, String>,
    /// Test only: while this file exists, the Raft log's appends fail as a broken disk's
    /// would (the node must then exit rather than serve). Never set this in production.
    #[serde(default)]
    pub test_storage_fault_file: Option<PathBuf>,
    /// Test only: behave as a build that understands formats of the replicated state up to
    /// this one (an older release), to test mixed-version clusters. Never set this in
    /// production.
    #[serde(default)]
    pub test_format_version: Option<u32>,
}

impl RaftSettings {
    const fn default_heartbeat_ms() -> u64 {
        250
    }
    const fn default_election_min_ms() -> u64 {
        1000
    }
    const fn default_election_max_ms() -> u64 {
        2000
    }
    const fn default_snapshot_logs() -> u64 {
        5000
    }
    const fn default_logs_to_keep() -> u64 {
        1000
    }
    const fn default_request_timeout_ms() -> u64 {
        15_000
    }
    const fn default_replace_dead_voter_after_ms() -> u64 {
        30_000
    }
}

impl Default for RaftSettings {
    fn default() -> Self {
        RaftSettings {
            heartbeat_interval_ms: Self::default_heartbeat_ms(),
            election_timeout_min_ms: Self::default_election_min_ms(),
            election_timeout_max_ms: Self::default_election_max_ms(),
            snapshot_logs: Self::default_snapshot_logs(),
            logs_to_keep: Self::default_logs_to_keep(),
            request_timeout_ms: Self::default_request_timeout_ms(),
            replace_dead_voter_after_ms: Self::default_replace_dead_voter_after_ms(),
            test_peer_addrs: BTreeMap::new(),
            test_storage_fault_file: None,
            test_format_version: None,
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkerSettings {
    /// How often a worker heartbeats the leader (ms).
    #[serde(default = "WorkerSettings::default_heartbeat_ms")]
    pub heartbeat_interval_ms: u64,
    /// A worker silent this long is declared dead (ms).
    #[serde(default = "WorkerSettings::default_timeout_ms")]
    pub timeout_ms: u64,
    /// After a worker is declared dead, wait this long before moving its tasks (ms); Kafka
    /// Connect's `scheduled.rebalance.max.delay.ms`, but seconds rather than minutes.
    #[serde(default = "WorkerSettings::default_rebalance_delay_ms")]
    pub rebalance_delay_ms: u64,
    /// How long a unit asked to stop has to make its final commit (ms), when it moves or its
    /// node stops: Kafka Connect's `task.shutdown.graceful.timeout.ms`. A unit revoked for a
    /// move that has not released itself by then moves anyway, under a new generation.
    #[serde(default = "WorkerSettings::default_task_shutdown_graceful_timeout_ms")]
    pub task_shutdown_graceful_timeout_ms: u64,
    /// A node told to stop (SIGTERM) exits within this time (ms), whatever is still running.
    #[serde(default = "WorkerSettings::default_shutdown_timeout_ms")]
    pub shutdown_timeout_ms: u64,
    /// A node whose async runtime runs nothing for this long is frozen: it writes every
    /// thread's stack to its log and exits with code 71 (ms): crash-only, never a zombie.
    #[serde(default = "WorkerSettings::default_freeze_timeout_ms")]
    pub freeze_timeout_ms: u64,
    /// How often tasks commit their offsets (ms): Kafka Connect's `offset.flush.interval.ms`.
    #[serde(default = "WorkerSettings::default_offset_flush_interval_ms")]
    pub offset_flush_interval_ms: u64,
    /// Also commit sink offsets to the `connect-<name>` consumer group, as Kafka Connect
    /// does, so that existing lag monitoring keeps working. Raft stays authoritative.
    #[serde(default = "WorkerSettings::default_commit_consumer_group")]
    pub commit_consumer_group: bool,
    /// Kafka Connect's offsets topic (its worker's `offset.storage.topic`): a source
    /// connector with no offsets in Ferry starts from the last ones Kafka Connect wrote there
    /// for its name (a connector's `offsets.storage.topic` wins).
    #[serde(default)]
    pub offset_storage_topic: Option<String>,
    /// Kafka Connect's `topic.tracking.enable`: record the topics each connector's tasks use,
    /// shown by `GET /connectors/{name}/topics` (KIP-558).
    #[serde(default = "WorkerSettings::default_topic_tracking_enable")]
    pub topic_tracking_enable: bool,
    /// Kafka Connect's `topic.tracking.allow.reset`: `PUT /connectors/{name}/topics/reset`
    /// allowed.
    #[serde(default = "WorkerSettings::default_topic_tracking_allow_reset")]
    pub topic_tracking_allow_reset: bool,
    /// Test only: never give up the ownership lease, so that tests can show that generation
    /// fencing alone keeps a zombie worker harmless. Never set this in production.
    #[serde(default)]
    pub test_disable_lease: bool,
    /// Test only: the units of this connector panic as they start (a panicking task must end
    /// FAILED with the panic in its trace, the node serving on). Never set this in production.
    #[serde(default)]
    pub test_panic_connector: Option<String>,
    /// Test only: the wall clock tasks read (a scheduled rotation, Wallclock record times) this
    /// many milliseconds ahead of the machine's, so that a test chooses when a wall-clock
    /// schedule fires. Never set this in production.
    #[serde(default)]
    pub test_clock_ahead_ms: i64,
    /// Test only: once this file exists, every thread of the node's async runtime blocks for
    /// good — a frozen node, which its watchdog must end. Never set this in production.
    #[serde(default)]
    pub test_freeze_file: Option<PathBuf>,
    /// The converters of connectors that name none, by Kafka Connect's worker property names
    /// (`"value.converter" = "org.apache.kafka.connect.json.JsonConverter"`,
    /// `"value.converter.schemas.enable" = "false"`).
    #[serde(default)]
    pub converters: std::collections::BTreeMap<String, String>,
}

impl WorkerSettings {
    const fn default_heartbeat_ms() -> u64 {
        500
    }
    const fn default_timeout_ms() -> u64 {
        5000
    }
    const fn default_rebalance_delay_ms() -> u64 {
        0
    }
    const fn default_commit_consumer_group() -> bool {
        true
    }
    const fn default_topic_tracking_enable() -> bool {
        true
    }
    const fn default_topic_tracking_allow_reset() -> bool {
        true
    }
    const fn default_offset_flush_interval_ms() -> u64 {
        60_000
    }
    const fn default_task_shutdown_graceful_timeout_ms() -> u64 {
        5000
    }
    const fn default_shutdown_timeout_ms() -> u64 {
        30_000
    }
    const fn default_freeze_timeout_ms() -> u64 {
        10_000
    }
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            heartbeat_interval_ms: Self::default_heartbeat_ms(),
            timeout_ms: Self::default_timeout_ms(),
            rebalance_delay_ms: Self::default_rebalance_delay_ms(),
            offset_flush_interval_ms: Self::default_offset_flush_interval_ms(),
            task_shutdown_graceful_timeout_ms: Self::default_task_shutdown_graceful_timeout_ms(),
            shutdown_timeout_ms: Self::default_shutdown_timeout_ms(),
            freeze_timeout_ms: Self::default_freeze_timeout_ms(),
            commit_consumer_group: Self::default_commit_consumer_group(),
            offset_storage_topic: None,
            topic_tracking_enable: Self::default_topic_tracking_enable(),
            topic_tracking_allow_reset: Self::default_topic_tracking_allow_reset(),
            test_disable_lease: false,
            test_panic_connector: None,
            test_clock_ahead_ms: 0,
            test_freeze_file: None,
            converters: std::collections::BTreeMap::new(),
        }
    }
}

/// librdkafka properties Ferry manages itself: setting them would break assignment or offsets.
const MANAGED_KAFKA_PROPERTIES: &[&str] = &[
    "bootstrap.servers",
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "auto.offset.reset",
    "transactional.id",
];

impl ClusterConfig {
    /// The REST API's advertised `host:port`, if this node serves one.
    pub fn rest_advertised(&self) -> Option<String> {
        let rest = self.rest.as_ref()?;
        if let Some(advertised) = &rest.advertised {
            return Some(advertised.clone());
        }
        let first = rest.addresses().ok()?.into_iter().next()?;
        let (host, port) = first.rsplit_once(':')?;
        let host = match host {
            "0.0.0.0" | "[::]" | "::" => self.api_addr.rsplit_once(':').map_or(host, |(h, _)| h),
            host => host,
        };
        Some(format!("{host}:{port}"))
    }

    /// Read, parse and validate a `cluster.toml`.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut config = Self::parse(&text).map_err(|message| ConfigError::Parse {
            path: path.to_path_buf(),
            message,
        })?;
        if config.data_dir.is_relative() {
            if let Some(parent) = path.parent() {
                config.data_dir = parent.join(&config.data_dir);
            }
        }
        config.validate().map_err(|problems| ConfigError::Invalid {
            path: path.to_path_buf(),
            problems,
        })?;
        Ok(config)
    }

    /// Parse without validating.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string().trim().replace('\n', " "))
    }

    /// Every problem, each saying how to fix it.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = self.limits.problems();
        if self.data_dir.as_os_str().is_empty() {
            problems.push("data_dir is empty: set it to a directory this node owns".into());
        }
        check_addr("api_addr", &self.api_addr, &mut problems);
        check_addr("raft_addr", &self.raft_addr, &mut problems);
        if self.api_addr == self.raft_addr {
            problems.push(format!(
                "api_addr and raft_addr are both {}: the peer service needs its own port",
                self.api_addr
            ));
        }
        if self.peers.is_empty() {
            problems.push("peers is empty: list the cluster's voters, this node included".into());
        }
        let mut ids = HashSet::new();
        let mut addrs = HashSet::new();
        for peer in &self.peers {
            if !ids.insert(peer.id) {
                problems.push(format!(
                    "peers: node id {} appears more than once; every node needs its own id",
                    peer.id
                ));
            }
            for addr in [&peer.api_addr, &peer.raft_addr] {
                if !addrs.insert(addr.clone()) {
                    problems.push(format!(
                        "peers: address {addr} is used more than once; give every node its own addresses"
                    ));
                }
            }
            check_addr(
                &format!("peers[id={}].api_addr", peer.id),
                &peer.api_addr,
                &mut problems,
            );
            check_addr(
                &format!("peers[id={}].raft_addr", peer.id),
                &peer.raft_addr,
                &mut problems,
            );
        }
        match self.peers.iter().find(|p| p.id == self.node_id) {
            None if !self.peers.is_empty() => problems.push(format!(
                "peers does not contain this node (node_id = {}): add a [[peers]] entry with id = {} and this node's addresses",
                self.node_id, self.node_id
            )),
            Some(me) if me.api_addr != self.api_addr || me.raft_addr != self.raft_addr => {
                problems.push(format!(
                    "the [[peers]] entry of node {} ({} / {}) differs from api_addr / raft_addr ({} / {}): make them the same",
                    self.node_id, me.api_addr, me.raft_addr, self.api_addr, self.raft_addr
                ))
            }
            _ => {}
        }
        if self.target_voters == 0 {
            problems.push("target_voters must be at least 1 (3 or 5 is usual)".into());
        }
        let raft = &self.raft;
        if raft.heartbeat_interval_ms == 0 {
            problems.push("raft.heartbeat_interval_ms must be positive".into());
        }
        if raft.election_timeout_min_ms <= raft.heartbeat_interval_ms {
            problems.push(format!(
                "raft.election_timeout_min_ms ({}) must be larger than raft.heartbeat_interval_ms ({}), several times over",
                raft.election_timeout_min_ms, raft.heartbeat_interval_ms
            ));
        }
        if raft.election_timeout_max_ms <= raft.election_timeout_min_ms {
            problems.push(format!(
                "raft.election_timeout_max_ms ({}) must be larger than raft.election_timeout_min_ms ({})",
                raft.election_timeout_max_ms, raft.election_timeout_min_ms
            ));
        }
        if raft.snapshot_logs == 0 {
            problems.push("raft.snapshot_logs must be positive".into());
        }
        if raft.request_timeout_ms < raft.election_timeout_max_ms {
            problems.push(format!(
                "raft.request_timeout_ms ({}) must be at least raft.election_timeout_max_ms ({}) so that requests survive an election",
                raft.request_timeout_ms, raft.election_timeout_max_ms
            ));
        }
        for (id, addr) in &raft.test_peer_addrs {
            if id.parse::<u64>().is_err() {
                problems.push(format!(
                    "raft.test_peer_addrs: {id:?} is not a node id (use \"2\" = \"host:port\")"
                ));
            }
            check_addr(&format!("raft.test_peer_addrs.{id}"), addr, &mut problems);
        }
        if let Some(rest) = &self.rest {
            match rest.addresses() {
                Ok(addrs) if addrs.is_empty() => {
                    problems.push("rest.listeners is empty: give http://host:port".into())
                }
                Ok(addrs) => {
                    for addr in addrs {
                        check_addr("rest.listeners", &addr, &mut problems);
                    }
                }
                Err(problem) => problems.push(problem),
            }
            match rest.admin_addresses() {
                Ok(addrs) => {
                    for addr in addrs.unwrap_or_default() {
                        check_addr("rest.admin_listeners", &addr, &mut problems);
                    }
                }
                Err(problem) => problems.push(problem),
            }
            if let Err(problem) = crate::rest::cors(
                rest.access_control_allow_origin.as_deref(),
                rest.access_control_allow_methods.as_deref(),
            ) {
                problems.push(problem);
            }
        }
        let worker = &self.worker;
        if worker.heartbeat_interval_ms == 0 {
            problems.push("worker.heartbeat_interval_ms must be positive".into());
        }
        if worker.timeout_ms < 2 * worker.heartbeat_interval_ms {
            problems.push(format!(
                "worker.timeout_ms ({}) must be at least twice worker.heartbeat_interval_ms ({})",
                worker.timeout_ms, worker.heartbeat_interval_ms
            ));
        }
        if worker.offset_flush_interval_ms == 0 {
            problems.push("worker.offset_flush_interval_ms must be positive".into());
        }
        if worker.shutdown_timeout_ms <= worker.task_shutdown_graceful_timeout_ms {
            problems.push(format!(
                "worker.shutdown_timeout_ms ({}) must be more than worker.task_shutdown_graceful_timeout_ms ({}): units are given that long to stop within the node's shutdown",
                worker.shutdown_timeout_ms, worker.task_shutdown_graceful_timeout_ms
            ));
        }
        if worker.freeze_timeout_ms < 1000 {
            problems.push(format!(
                "worker.freeze_timeout_ms ({}) must be at least 1000: a busy runtime may not tick for a moment, a frozen one never does",
                worker.freeze_timeout_ms
            ));
        }
        for problem in ferry_connect::converter::check_worker_converters(&worker.converters) {
            problems.push(format!("worker.converters: {problem}"));
        }
        if let Some(kafka) = &self.kafka {
            if kafka.bootstrap_servers.trim().is_empty() {
                problems.push(
                    "kafka.bootstrap_servers is empty: list host:port of your brokers".into(),
                );
            }
            for key in kafka.properties.keys() {
                if MANAGED_KAFKA_PROPERTIES.contains(&key.as_str()) {
                    problems.push(format!(
                        "kafka.properties.{key:?} is managed by Ferry; remove it (bootstrap servers go in kafka.bootstrap_servers)"
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// openraft's config from these settings.
    pub fn raft_config(&self) -> openraft::Config {
        openraft::Config {
            cluster_name: "ferry".into(),
            heartbeat_interval: self.raft.heartbeat_interval_ms,
            election_timeout_min: self.raft.election_timeout_min_ms,
            election_timeout_max: self.raft.election_timeout_max_ms,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.raft.snapshot_logs),
            max_in_snapshot_log_to_keep: self.raft.logs_to_keep,
            install_snapshot_timeout: 10_000,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            ..Default::default()
        }
    }

    /// The test-only peer address overrides, by node id.
    pub fn peer_overrides(&self) -> BTreeMap<u64, String> {
        self.raft
            .test_peer_addrs
            .iter()
            .filter_map(|(id, addr)| Some((id.parse().ok()?, addr.clone())))
            .collect()
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.raft.request_timeout_ms)
    }

    /// How the leader heals the membership.
    pub fn heal_settings(&self) -> ferry_meta::heal::Settings {
        ferry_meta::heal::Settings {
            target_voters: self.target_voters,
            replace_dead_voter_after: (self.raft.replace_dead_voter_after_ms > 0)
                .then(|| Duration::from_millis(self.raft.replace_dead_voter_after_ms)),
        }
    }
}

fn check_addr(field: &str, addr: &str, problems: &mut Vec<String>) {
    if addr.parse::<SocketAddr>().is_err() {
        let (host, port) = addr.rsplit_once(':').unwrap_or((addr, ""));
        if host.is_empty() || port.parse::<u16>().is_err() {
            problems.push(format!(
                "{field} = {addr:?} is not host:port (for example 127.0.0.1:7101)"
            ));
        }
    }
}

/// The most log entries one AppendEntries carries. openraft waits for each one no longer than
/// the heartbeat interval; with its default of 300 entries, a follower on a loaded machine
/// could not take a burst of a big connector's assignments and reports within that, timed out,
/// and was sent the same batch again for tens of seconds (its lease lost meanwhile). 32 keeps
/// each request small enough to fit the interval.
const MAX_PAYLOAD_ENTRIES: u64 = 32;

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
node_id = 1
data_dir = "data/node1"
api_addr = "127.0.0.1:7101"
raft_addr = "127.0.0.1:7201"

[[peers]]
id = 1
api_addr = "127.0.0.1:7101"
raft_addr = "127.0.0.1:7201"

[[peers]]
id = 2
api_addr = "127.0.0.1:7102"
raft_addr = "127.0.0.1:7202"

[kafka]
bootstrap_servers = "127.0.0.1:9092"
properties = { "security.protocol" = "plaintext" }
"#;

    fn problems(text: &str) -> Vec<String> {
        match ClusterConfig::parse(text) {
            Ok(config) => config.validate().err().unwrap_or_default(),
            Err(e) => vec![e],
        }
    }

    #[test]
    fn the_log_format_is_text_unless_json_is_asked_for_and_another_is_refused_by_name() {
        let config = ClusterConfig::parse(GOOD).expect("parses");
        assert_eq!(config.log.format, LogFormat::Text);
        let json =
            ClusterConfig::parse(&format!("{GOOD}\n[log]\nformat = \"json\"\n")).expect("parses");
        assert_eq!(json.log.format, LogFormat::Json);
        let wrong = ClusterConfig::parse(&format!("{GOOD}\n[log]\nformat = \"xml\"\n"));
        let error = wrong.expect_err("refused");
        assert!(error.contains("xml") && error.contains("format"), "{error}");
    }

    #[test]
    fn metrics_are_on_and_partition_lag_off_unless_asked_and_an_unknown_key_is_named() {
        use ferry_worker::metrics::MetricsOptions;
        let config = ClusterConfig::parse(GOOD).expect("parses");
        assert_eq!(config.metrics, MetricsOptions::default());
        assert!(config.metrics.enabled && !config.metrics.partition_lag);
        let lag = ClusterConfig::parse(&format!("{GOOD}\n[metrics]\npartition_lag = true\n"))
            .expect("parses");
        assert!(lag.metrics.enabled && lag.metrics.partition_lag);
        let off =
            ClusterConfig::parse(&format!("{GOOD}\n[metrics]\nenabled = false\n")).expect("parses");
        assert!(!off.metrics.enabled);
        let wrong = ClusterConfig::parse(&format!("{GOOD}\n[metrics]\nlag = true\n"));
        let error = wrong.expect_err("refused");
        assert!(error.contains("lag"), "{error}");
    }

    #[test]
    fn the_example_is_valid() {
        assert_eq!(problems(GOOD), Vec::<String>::new());
        let example = include_str!("../../../cluster.toml.example");
        assert_eq!(problems(example), Vec::<String>::new());
    }

    #[test]
    fn a_freeze_timeout_too_short_to_tell_a_busy_runtime_is_refused() {
        let config = ClusterConfig::parse(GOOD).expect("parses");
        assert_eq!(config.worker.freeze_timeout_ms, 10_000, "the default");
        let short = format!("{GOOD}\n[worker]\nfreeze_timeout_ms = 500\n");
        let problems = problems(&short);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("worker.freeze_timeout_ms (500) must be at least 1000")),
            "{problems:?}"
        );
    }

    #[test]
    fn limits_default_and_are_checked() {
        let config = ClusterConfig::parse(GOOD).expect("parses");
        assert_eq!(config.limits, crate::limits::Limits::default());
        let example =
            ClusterConfig::parse(include_str!("../../../cluster.toml.example")).expect("parses");
        assert_eq!(
            example.limits,
            crate::limits::Limits::default(),
            "the example states the defaults"
        );
        let bad = format!("{GOOD}\n[limits]\nmax_config_bytes = 5000000\n");
        let problems = problems(&bad);
        assert!(
            problems
                .iter()
                .any(|p| p.contains("limits.max_config_bytes (5000000) must be below")),
            "{problems:?}"
        );
    }

    #[test]
    fn bad_configs_say_what_to_fix() {
        let cases = [
            (
                "malformed",
                GOOD.replace("node_id = 1", "node_id = "),
                "invalid",
            ),
            (
                "unknown key",
                GOOD.replace("node_id = 1", "node_id = 1\nnode_name = \"a\""),
                "unknown field `node_name`",
            ),
            (
                "unknown raft key",
                format!("{GOOD}\n[raft]\nheartbeat = 5\n"),
                "unknown field `heartbeat`",
            ),
            (
                "duplicate ids",
                GOOD.replace("id = 2", "id = 1"),
                "node id 1 appears more than once",
            ),
            (
                "self missing",
                GOOD.replace("node_id = 1", "node_id = 9"),
                "peers does not contain this node (node_id = 9)",
            ),
            (
                "bad address",
                GOOD.replace(
                    "api_addr = \"127.0.0.1:7101\"\nraft",
                    "api_addr = \"nowhere\"\nraft",
                ),
                "api_addr = \"nowhere\" is not host:port",
            ),
            (
                "election vs heartbeat",
                format!("{GOOD}\n[raft]\nheartbeat_interval_ms = 3000\n"),
                "must be larger than raft.heartbeat_interval_ms",
            ),
            (
                "unknown worker converter",
                format!("{GOOD}\n[worker.converters]\n\"value.converter\" = \"AvroConverter\"\n"),
                "worker.converters: value.converter: unknown converter class",
            ),
            (
                "bad worker converter setting",
                format!(
                    "{GOOD}\n[worker.converters]\n\"value.converter\" = \"JsonConverter\"\n\"value.converter.schemas.enable\" = \"sometimes\"\n"
                ),
                "schemas.enable: expected true or false",
            ),
            (
                "managed kafka property",
                GOOD.replace("\"security.protocol\"", "\"group.id\""),
                "managed by Ferry",
            ),
            (
                "self differs",
                GOOD.replacen(
                    "raft_addr = \"127.0.0.1:7201\"\n\n",
                    "raft_addr = \"127.0.0.1:7209\"\n\n",
                    1,
                ),
                "differs from api_addr / raft_addr",
            ),
        ];
        for (name, text, want) in cases {
            let found = problems(&text);
            assert!(found.iter().any(|p| p.contains(want)), "{name}: {found:?}");
        }
    }
}
