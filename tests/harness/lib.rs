//! Test harness: real `ferryd` processes on loopback with ephemeral ports, the real `ferry`
//! CLI, and waits with deadlines (never fixed sleeps); and the fault suite's checkers.

pub mod brokers;
pub mod connect;
pub mod exposition;
pub mod hdfs;
pub mod jepsen;
pub mod pipeline;
pub mod postgres;
pub mod prometheus;
pub mod proxy;
pub mod rest;
pub mod storage;

use std::collections::BTreeMap;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use nix::sys::signal::kill;
pub use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;

/// Where the binaries are: `FERRY_BIN_DIR`, or the workspace's `target/debug`.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("FERRY_BIN_DIR") {
        let dir = PathBuf::from(dir);
        return fs::canonicalize(&dir).unwrap_or(dir);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("debug")
}

pub fn bin(name: &str) -> PathBuf {
    let path = bin_dir().join(name);
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (`cargo build --workspace`), or set FERRY_BIN_DIR",
        path.display()
    );
    path
}

static LOG: Once = Once::new();

/// Say what a test is doing (stderr, shown by `--nocapture`), once timestamped per process.
pub fn say(message: impl AsRef<str>) {
    LOG.call_once(|| eprintln!("[harness] binaries from {}", bin_dir().display()));
    eprintln!("[harness {}] {}", time_of_day(), message.as_ref());
}

/// The time of day (UTC) as the nodes' logs print it, to read the two side by side.
pub fn time_of_day() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, ms) = (now.as_secs() % 86_400, now.subsec_millis());
    format!(
        "{:02}:{:02}:{:02}.{ms:03}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// A free TCP port on 127.0.0.1 for a server a test starts, never one this process handed out
/// before. It is taken outside the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`): a port the OS picked for `bind(0)` and that was
/// then released can be given to any outgoing connection (a node's to Kafka, a peer's to a
/// peer) before the server binds it, which once left a node with "Address already in use".
/// Each process starts at its own place in the range, so that two test processes rarely try
/// the same port; a port is handed out only if it can be bound now.
pub fn free_port() -> u16 {
    static NEXT: std::sync::Mutex<Option<u16>> = std::sync::Mutex::new(None);
    let (low, high) = non_ephemeral_ports();
    let span = u32::from(high - low) + 1;
    let mut next = NEXT.lock().unwrap_or_else(|p| p.into_inner());
    let mut port = next.unwrap_or_else(|| {
        let offset = std::process::id().wrapping_mul(7919) % span;
        low + u16::try_from(offset).expect("offset within a u16 range")
    });
    for _ in 0..span {
        let candidate = port;
        port = if port >= high { low } else { port + 1 };
        if TcpListener::bind(("127.0.0.1", candidate)).is_ok() {
            *next = Some(port);
            return candidate;
        }
    }
    panic!("no free port on 127.0.0.1 between {low} and {high}");
}

/// The ports below the kernel's ephemeral range (or above it, if it starts too low): the OS
/// never picks them for a connection's local end.
fn non_ephemeral_ports() -> (u16, u16) {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok();
    let bounds: Vec<u16> = range
        .iter()
        .flat_map(|r| r.split_whitespace())
        .filter_map(|n| n.parse().ok())
        .collect();
    match bounds[..] {
        [first, _] if first > 12_000 => (10_000, first - 1),
        [_, last] if last < 63_000 => (last + 1, 65_535),
        _ => (20_000, 29_999),
    }
}

/// Have `command`'s process killed when the thread that starts it ends (prctl's parent-death
/// signal), so that no node or JVM outlives the test or tool that started it, however that
/// ends.
pub fn dies_with_parent(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: between fork and exec the child makes one system call (prctl), which is
    // async-signal-safe, and touches no memory of the parent's.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        })
    }
}

/// Within how long a node told to stop exits: ferryd's `[worker] shutdown_timeout_ms` default.
pub const SHUTDOWN_BOUND: Duration = Duration::from_secs(30);
/// How long a node's watchdog may take to write every thread's stack before it exits.
const STACKS_TIME: Duration = Duration::from_secs(30);
/// The exit code of a node its watchdog ended (ferryd's `watchdog::EXIT_CODE`).
pub const WATCHDOG_EXIT: i32 = 71;

/// Wait until `child` exits, at most `timeout`: its status, or `None` if it still runs.
pub fn exited_within(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    try_wait_for(timeout, || child.try_wait().ok().flatten())
}

/// Wait until `check` returns `Some`, or fail after `timeout` with `what`.
pub fn wait_for<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    try_wait_for(timeout, check)
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// Wait until `check` returns `Some`; `None` after `timeout`.
pub fn try_wait_for<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let started = Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if started.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(delay);
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}

/// Timing and compaction settings of a test cluster.
#[derive(Clone, Debug)]
pub struct Settings {
    pub heartbeat_ms: u64,
    pub election_min_ms: u64,
    pub election_max_ms: u64,
    pub snapshot_logs: u64,
    pub logs_to_keep: u64,
    pub target_voters: usize,
    /// `RUST_LOG` of the nodes.
    pub log_filter: String,
    /// Kafka bootstrap servers, if the nodes run tasks.
    pub kafka: Option<String>,
    /// `[kafka] properties` (e.g. SASL credentials).
    pub kafka_properties: Vec<(String, String)>,
    pub worker_heartbeat_ms: u64,
    pub worker_timeout_ms: u64,
    pub offset_flush_ms: u64,
    /// Test-only: the nodes never give up their ownership lease.
    pub disable_lease: bool,
    /// Also commit sink offsets to the `connect-<name>` consumer groups.
    pub commit_consumer_group: bool,
    /// Route all node-to-node traffic through a proxy per directed pair (see [`Cluster::cut`]).
    pub proxied: bool,
    /// How long a write or a linearizable read waits for a leader.
    pub request_timeout_ms: u64,
    /// The workers' converters (`[worker.converters]`), e.g. ("value.converter",
    /// "org.apache.kafka.connect.json.JsonConverter") as connect-distributed.properties has it.
    pub worker_converters: Vec<(String, String)>,
    /// Test-only fault: each node's Raft log fails its appends while
    /// [`Cluster::storage_fault_file`] exists.
    pub storage_fault: bool,
    /// More `[rest]` settings of every node: (key, TOML value).
    pub rest: Vec<(String, String)>,
    /// More `[worker]` settings of every node: (key, TOML value).
    pub worker: Vec<(String, String)>,
    /// Test-only fault: the units of this connector panic as they start.
    pub panic_connector: Option<String>,
    /// `[raft] replace_dead_voter_after_ms`, when not the default.
    pub replace_dead_voter_ms: Option<u64>,
    /// Test only: nodes that behave as an older build, understanding formats of the
    /// replicated state up to the given one (`[raft] test_format_version`).
    pub format_versions: BTreeMap<u64, u32>,
    /// `[limits]` of cluster.toml, key → value (TOML), where not the defaults.
    pub limits: Vec<(&'static str, u64)>,
    /// Leave Raft's and the workers' heartbeat, election and timeout settings to ferryd's
    /// defaults (the fields above for them are then not used).
    pub ferryd_timing: bool,
    /// Test only: the tasks' wall clock this many milliseconds ahead of the machine's
    /// (`[worker] test_clock_ahead_ms`), so that a test chooses when a wall-clock schedule — a
    /// rotation at every 10-minute mark — fires.
    pub clock_ahead_ms: u64,
    /// `[log] format` of every node (`None`: not set, Ferry's default, text).
    pub log_format: Option<&'static str>,
    /// `[metrics]` of every node: (key, TOML value), e.g. `("partition_lag", "true")`.
    pub metrics: Vec<(&'static str, &'static str)>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            heartbeat_ms: 150,
            election_min_ms: 1000,
            election_max_ms: 2000,
            snapshot_logs: 5000,
            logs_to_keep: 1000,
            target_voters: 3,
            log_filter: std::env::var("FERRY_TEST_LOG")
                .unwrap_or_else(|_| "info,openraft=warn".into()),
            kafka: None,
            kafka_properties: Vec::new(),
            worker_heartbeat_ms: 300,
            worker_timeout_ms: 3000,
            offset_flush_ms: 1000,
            disable_lease: false,
            commit_consumer_group: true,
            proxied: false,
            request_timeout_ms: 20000,
            worker_converters: Vec::new(),
            storage_fault: false,
            rest: Vec::new(),
            worker: Vec::new(),
            panic_connector: None,
            replace_dead_voter_ms: None,
            format_versions: BTreeMap::new(),
            limits: Vec::new(),
            ferryd_timing: false,
            clock_ahead_ms: 0,
            log_format: None,
            metrics: Vec::new(),
        }
    }
}

/// One node's addresses and process.
pub struct Node {
    pub id: u64,
    pub api: String,
    pub raft: String,
    /// Its REST API, `http://127.0.0.1:<port>`.
    pub rest: String,
    pub config: PathBuf,
    pub data_dir: PathBuf,
    pub log: PathBuf,
    /// The node's working directory: relative connector paths resolve here.
    pub work_dir: PathBuf,
    child: Option<Child>,
    starts: u32,
}

impl Node {
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }
}

/// The running ferryd processes of a cluster, shared with threads that watch them (the fault
/// suite's freeze sampler): which node runs as which process, and since when it has run
/// unpaused.
#[derive(Clone, Debug, Default)]
pub struct Processes(std::sync::Arc<std::sync::Mutex<BTreeMap<u64, Process>>>);

/// A running node's process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    /// Its management API (`host:port`).
    pub api: String,
    /// Since when it has run unpaused: its start or its last SIGCONT; `None` while paused.
    pub running_since: Option<Instant>,
}

impl Processes {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Process>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every running node's process, now.
    pub fn now(&self) -> BTreeMap<u64, Process> {
        self.lock().clone()
    }

    /// Node `id`'s process, now.
    pub fn get(&self, id: u64) -> Option<Process> {
        self.lock().get(&id).cloned()
    }

    fn started(&self, id: u64, pid: u32, api: &str) {
        let process = Process {
            pid,
            api: api.to_string(),
            running_since: Some(Instant::now()),
        };
        self.lock().insert(id, process);
    }

    fn ended(&self, id: u64) {
        self.lock().remove(&id);
    }

    fn paused(&self, id: u64, paused: bool) {
        if let Some(p) = self.lock().get_mut(&id) {
            p.running_since = (!paused).then(Instant::now);
        }
    }
}

/// Every thread's stack of process `pid`, as gdb prints them (if gdb is installed).
pub fn stacks(pid: u32) -> String {
    let out = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-ex",
            "thread apply all bt",
            "-p",
            &pid.to_string(),
        ])
        .stdin(Stdio::null())
        .output();
    match out {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => format!("no gdb for the stacks of pid {pid}: {e}"),
    }
}

/// The result of a CLI run.
#[derive(Debug)]
pub struct CliOutput {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl CliOutput {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("CLI output is not JSON ({e}): {self:?}"))
    }
}

impl From<Output> for CliOutput {
    fn from(o: Output) -> Self {
        CliOutput {
            code: o.status.code(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// A cluster of real ferryd processes in a temporary directory.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub nodes: BTreeMap<u64, Node>,
    pub settings: Settings,
    /// The ids in every node's `[[peers]]`.
    peers: Vec<u64>,
    /// (from, to) → the proxy carrying `from`'s traffic to `to`.
    pub proxies: BTreeMap<(u64, u64), proxy::Proxy>,
    /// The running nodes' processes, for threads that watch them.
    pub processes: Processes,
}

impl Cluster {
    /// Configure `n` nodes (ids 1..=n) that bootstrap together; nothing is started.
    pub fn new(n: u64, settings: Settings) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("ferry-test-")
            .tempdir()
            .expect("cannot create a temp dir");
        let mut cluster = Cluster {
            dir,
            nodes: BTreeMap::new(),
            settings,
            peers: (1..=n).collect(),
            proxies: BTreeMap::new(),
            processes: Processes::default(),
        };
        for id in 1..=n {
            cluster.add_config(id);
        }
        if cluster.settings.proxied {
            for from in 1..=n {
                for to in (1..=n).filter(|to| *to != from) {
                    let proxy = proxy::Proxy::start(&cluster.nodes[&to].raft);
                    cluster.proxies.insert((from, to), proxy);
                }
            }
        }
        for id in 1..=n {
            cluster.write_config(id);
        }
        cluster
    }

    fn add_config(&mut self, id: u64) {
        let base = self.dir.path();
        self.nodes.insert(
            id,
            Node {
                id,
                api: format!("127.0.0.1:{}", free_port()),
                raft: format!("127.0.0.1:{}", free_port()),
                rest: format!("http://127.0.0.1:{}", free_port()),
                config: base.join(format!("node{id}.toml")),
                data_dir: base.join(format!("data{id}")),
                log: base.join(format!("node{id}.log")),
                work_dir: base.join(format!("work{id}")),
                child: None,
                starts: 0,
            },
        );
    }

    /// The text of a node's cluster.toml.
    pub fn config_text(&self, id: u64) -> String {
        let node = &self.nodes[&id];
        let s = &self.settings;
        let mut text = format!(
            "node_id = {id}\ndata_dir = {:?}\napi_addr = {:?}\nraft_addr = {:?}\ntarget_voters = {}\n",
            node.data_dir, node.api, node.raft, s.target_voters
        );
        let mut peers = self.peers.clone();
        if !peers.contains(&id) {
            peers.push(id);
        }
        for peer in peers {
            let p = &self.nodes[&peer];
            text.push_str(&format!(
                "\n[[peers]]\nid = {peer}\napi_addr = {:?}\nraft_addr = {:?}\n",
                p.api, p.raft
            ));
        }
        text.push_str(&format!(
            "\n[raft]\nsnapshot_logs = {}\nlogs_to_keep = {}\nrequest_timeout_ms = {}\n",
            s.snapshot_logs, s.logs_to_keep, s.request_timeout_ms
        ));
        if !s.ferryd_timing {
            text.push_str(&format!(
                "heartbeat_interval_ms = {}\nelection_timeout_min_ms = {}\nelection_timeout_max_ms = {}\n",
                s.heartbeat_ms, s.election_min_ms, s.election_max_ms
            ));
        }
        let overrides: Vec<String> = self
            .proxies
            .iter()
            .filter(|((from, _), _)| *from == id)
            .map(|((_, to), p)| format!("\"{to}\" = {:?}", p.addr))
            .collect();
        if !overrides.is_empty() {
            text.push_str(&format!(
                "test_peer_addrs = {{ {} }}\n",
                overrides.join(", ")
            ));
        }
        if let Some(version) = s.format_versions.get(&id) {
            text.push_str(&format!("test_format_version = {version}\n"));
        }
        if let Some(ms) = s.replace_dead_voter_ms {
            text.push_str(&format!("replace_dead_voter_after_ms = {ms}\n"));
        }
        if s.storage_fault {
            text.push_str(&format!(
                "test_storage_fault_file = {:?}\n",
                self.storage_fault_file(id)
            ));
        }
        text.push_str(&format!(
            "\n[worker]\noffset_flush_interval_ms = {}\ntest_disable_lease = {}\ncommit_consumer_group = {}\n",
            s.offset_flush_ms, s.disable_lease, s.commit_consumer_group
        ));
        if !s.ferryd_timing {
            text.push_str(&format!(
                "heartbeat_interval_ms = {}\ntimeout_ms = {}\n",
                s.worker_heartbeat_ms, s.worker_timeout_ms
            ));
        }
        if let Some(name) = &s.panic_connector {
            text.push_str(&format!("test_panic_connector = {name:?}\n"));
        }
        if s.clock_ahead_ms > 0 {
            text.push_str(&format!("test_clock_ahead_ms = {}\n", s.clock_ahead_ms));
        }
        for (key, value) in &s.worker {
            text.push_str(&format!("{key} = {value}\n"));
        }
        if !s.worker_converters.is_empty() {
            text.push_str("\n[worker.converters]\n");
            for (key, value) in &s.worker_converters {
                text.push_str(&format!("{key:?} = {value:?}\n"));
            }
        }
        if !s.limits.is_empty() {
            text.push_str("\n[limits]\n");
            for (key, value) in &s.limits {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        if let Some(format) = s.log_format {
            text.push_str(&format!("\n[log]\nformat = {format:?}\n"));
        }
        if !s.metrics.is_empty() {
            text.push_str("\n[metrics]\n");
            for (key, value) in &s.metrics {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        text.push_str(&format!("\n[rest]\nlisteners = {:?}\n", node.rest));
        for (key, value) in &s.rest {
            text.push_str(&format!("{key} = {value}\n"));
        }
        if let Some(bootstrap) = &s.kafka {
            text.push_str(&format!("\n[kafka]\nbootstrap_servers = {bootstrap:?}\n"));
            if !s.kafka_properties.is_empty() {
                text.push_str("[kafka.properties]\n");
                for (key, value) in &s.kafka_properties {
                    text.push_str(&format!("{key:?} = {value:?}\n"));
                }
            }
        }
        text
    }

    /// The file whose existence breaks node `id`'s Raft log (with `Settings::storage_fault`).
    pub fn storage_fault_file(&self, id: u64) -> PathBuf {
        self.dir.path().join(format!("fail-storage-{id}"))
    }

    /// Wait for node `id`'s process to end by itself; its exit code.
    pub fn wait_exit(&mut self, id: u64, timeout: Duration) -> Option<i32> {
        let node = self.nodes.get_mut(&id).expect("unknown node");
        let child = node.child.as_mut().expect("the node is not running");
        let status = exited_within(child, timeout)
            .unwrap_or_else(|| panic!("node {id} still runs after {timeout:?}"));
        node.child = None;
        self.processes.ended(id);
        status.code()
    }

    /// Write a node's cluster.toml again from the settings (which a test may have changed);
    /// it takes effect at the node's next start.
    pub fn rewrite_config(&self, id: u64) {
        self.write_config(id);
    }

    fn write_config(&self, id: u64) {
        let node = &self.nodes[&id];
        fs::write(&node.config, self.config_text(id)).expect("cannot write a node config");
    }

    /// Configure a node that is not one of the bootstrap peers (it lists them, plus itself).
    pub fn configure_extra(&mut self, id: u64) {
        self.add_config(id);
        self.write_config(id);
    }

    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    pub fn start(&mut self, id: u64) {
        let filter = self.settings.log_filter.clone();
        let node = self.nodes.get_mut(&id).expect("unknown node");
        assert!(node.child.is_none(), "node {id} is already running");
        node.starts += 1;
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&node.log)
            .expect("cannot open a node log");
        let err = log.try_clone().expect("cannot clone a log handle");
        fs::create_dir_all(&node.work_dir).expect("cannot create a node work dir");
        let child = dies_with_parent(&mut Command::new(bin("ferryd")))
            .current_dir(&node.work_dir)
            .arg("--config")
            .arg(&node.config)
            .env("RUST_LOG", filter)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .expect("cannot start ferryd");
        say(format!(
            "started node {id} (pid {}, api {})",
            child.id(),
            node.api
        ));
        self.processes.started(id, child.id(), &node.api);
        node.child = Some(child);
    }

    pub fn start_all(&mut self) {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.start(id);
        }
    }

    /// `kill -9` a node and reap it.
    pub fn kill9(&mut self, id: u64) {
        let node = self.nodes.get_mut(&id).expect("unknown node");
        if let Some(mut child) = node.child.take() {
            self.processes.ended(id);
            let _ = child.kill();
            let _ = child.wait();
            say(format!("killed -9 node {id}"));
        }
    }

    /// How long a node told to stop may take: its `[worker] shutdown_timeout_ms`.
    pub fn shutdown_bound(&self) -> Duration {
        let set = self
            .settings
            .worker
            .iter()
            .find(|(key, _)| key == "shutdown_timeout_ms")
            .and_then(|(_, ms)| ms.parse().ok());
        set.map_or(SHUTDOWN_BOUND, Duration::from_millis)
    }

    /// SIGTERM a node and wait for it to exit; returns its exit code. A node that has not
    /// exited within its shutdown bound is ended by its watchdog, which first writes every
    /// thread's stack to its log; that, or a node that outlives even its watchdog, fails the
    /// test, with the stacks.
    pub fn stop(&mut self, id: u64) -> Option<i32> {
        let bound = self.shutdown_bound();
        let node = self.nodes.get_mut(&id).expect("unknown node");
        let mut child = node.child.take()?;
        self.processes.ended(id);
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        match exited_within(&mut child, bound + STACKS_TIME) {
            Some(status) if status.code() == Some(WATCHDOG_EXIT) => {
                self.keep_logs();
                panic!(
                    "node {id} did not stop within {bound:?} of SIGTERM: its watchdog ended it ({status}); its log has every thread's stack"
                );
            }
            Some(status) => {
                say(format!("stopped node {id}: {status}"));
                status.code()
            }
            None => {
                let stacks = stacks(child.id());
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "node {id} did not stop within {:?} of SIGTERM, nor did its watchdog end it; its threads:\n{stacks}",
                    bound + STACKS_TIME
                );
            }
        }
    }

    /// Cut the traffic from one node to another (one direction).
    pub fn cut(&self, from: u64, to: u64) {
        self.proxies[&(from, to)].cut();
        say(format!("cut {from} -> {to}"));
    }

    /// Cut a node off from every other node, both directions.
    pub fn isolate(&self, id: u64) {
        for ((from, to), proxy) in &self.proxies {
            if *from == id || *to == id {
                proxy.cut();
            }
        }
        say(format!("isolated node {id}"));
    }

    /// Heal every cut.
    pub fn heal(&self) {
        self.proxies.values().for_each(proxy::Proxy::heal);
        say("healed every cut");
    }

    /// Freeze (SIGSTOP) or thaw (SIGCONT) a node's process: a zombie worker.
    pub fn signal(&self, id: u64, signal: Signal) {
        let pid = self.nodes[&id].pid().expect("the node is running");
        match signal {
            Signal::SIGSTOP => self.processes.paused(id, true),
            Signal::SIGCONT => self.processes.paused(id, false),
            _ => {}
        }
        kill(Pid::from_raw(pid as i32), signal).expect("signal the node");
        say(format!("sent {signal:?} to node {id}"));
    }

    /// Remove a node's data directory (the node must be down).
    pub fn wipe(&mut self, id: u64) {
        let node = &self.nodes[&id];
        assert!(node.child.is_none(), "wipe node {id} only while it is down");
        if node.data_dir.exists() {
            fs::remove_dir_all(&node.data_dir).expect("cannot wipe a data dir");
        }
        say(format!("wiped the data dir of node {id}"));
    }

    /// Copy a stopped node's data directory to `to` (a backup, as an operator would take).
    pub fn copy_data_dir(&self, id: u64, to: &Path) {
        let node = &self.nodes[&id];
        assert!(
            node.child.is_none(),
            "copy node {id}'s data only while it is down"
        );
        copy_dir(&node.data_dir, to);
        say(format!("copied the data dir of node {id}"));
    }

    /// Replace a stopped node's data directory with the copy in `from`.
    pub fn restore_data_dir(&mut self, id: u64, from: &Path) {
        self.wipe(id);
        copy_dir(from, &self.nodes[&id].data_dir);
        say(format!(
            "restored an older copy of the data dir of node {id}"
        ));
    }

    /// Copy every node's log out of the temp dir (which goes with the cluster); where to.
    pub fn keep_logs(&self) -> PathBuf {
        static KEPT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let keep = std::env::temp_dir().join(format!(
            "ferry-failed-{}-{}",
            std::process::id(),
            KEPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        if fs::create_dir_all(&keep).is_ok() {
            for node in self.nodes.values() {
                let _ = fs::copy(&node.log, keep.join(format!("node{}.log", node.id)));
            }
            eprintln!("---- full logs kept in {} ----", keep.display());
        }
        keep
    }

    /// Whether any node's log shows a panic: the lines that do.
    pub fn panics(&self) -> Vec<String> {
        self.lines_with("panicked")
    }

    /// The lines of every node's log that hold `needle`, each with its node.
    pub fn lines_with(&self, needle: &str) -> Vec<String> {
        self.nodes
            .keys()
            .flat_map(|id| {
                self.log_text(*id)
                    .lines()
                    .filter(|l| l.contains(needle))
                    .map(|l| format!("node {id}: {l}"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    pub fn log_text(&self, id: u64) -> String {
        fs::read_to_string(&self.nodes[&id].log).unwrap_or_default()
    }

    /// How many lines of a node's log hold every one of `needles`.
    pub fn log_count(&self, id: u64, needles: &[&str]) -> usize {
        self.log_text(id)
            .lines()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// Run the CLI against the given nodes (in order of preference).
    pub fn cli_on(&self, ids: &[u64], args: &[&str]) -> CliOutput {
        let servers: Vec<&str> = ids.iter().map(|id| self.nodes[id].api.as_str()).collect();
        let output = Command::new(bin("ferry"))
            .arg("--server")
            .arg(servers.join(","))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("cannot run ferry");
        let output = CliOutput::from(output);
        assert!(
            !output.stderr.contains("panicked"),
            "the CLI panicked: {output:?}"
        );
        output
    }

    /// Run the CLI against one node and require success.
    pub fn cli(&self, id: u64, args: &[&str]) -> CliOutput {
        let output = self.cli_on(&[id], args);
        assert!(
            output.ok(),
            "ferry {args:?} on node {id} failed: {output:?}"
        );
        output
    }

    /// `ferry -o json …` on one node, parsed.
    pub fn json(&self, id: u64, args: &[&str]) -> Value {
        let mut all = vec!["-o", "json"];
        all.extend_from_slice(args);
        self.cli(id, &all).json()
    }

    /// The values of a node's series named `name` whose labels include every one of `labels`
    /// (from `ferry metrics`); `None` if the node does not answer.
    pub fn series(&self, id: u64, name: &str, labels: &[(&str, &str)]) -> Option<Vec<i64>> {
        let output = self.cli_on(&[id], &["metrics"]);
        if !output.ok() {
            return None;
        }
        let scraped = exposition::Exposition::parse(&output.stdout)
            .unwrap_or_else(|e| panic!("node {id}'s metrics: {e}"));
        // Counts: the whole values.
        let values = scraped
            .values(name, labels)
            .filter(|v| v.fract() == 0.0)
            .map(|v| v as i64)
            .collect();
        Some(values)
    }

    /// The sum of [`Cluster::series`] over the given nodes (those that answer).
    pub fn metric(
        &self,
        ids: impl IntoIterator<Item = u64>,
        name: &str,
        labels: &[(&str, &str)],
    ) -> i64 {
        ids.into_iter()
            .flat_map(|id| self.series(id, name, labels).unwrap_or_default())
            .sum()
    }

    /// Node `id`'s REST listener, `http://host:port`.
    pub fn rest_url(&self, id: u64) -> String {
        self.nodes[&id].rest.clone()
    }

    /// A REST call to node `id` (`curl`); `None` if it did not answer.
    pub fn rest(
        &self,
        id: u64,
        method: &str,
        path: &str,
        body: rest::Body<'_>,
    ) -> Option<rest::Answer> {
        rest::call(&self.nodes[&id].rest, method, path, body)
    }

    /// Cluster status as one node sees it, if it answers.
    pub fn status(&self, id: u64) -> Option<Value> {
        let output = self.cli_on(&[id], &["-o", "json", "cluster", "status"]);
        // The CLI follows the leader when a node cannot answer yet (a node starting up), so
        // an answer may come from another node: only node `id`'s own counts.
        output
            .ok()
            .then(|| output.json())
            .filter(|status| status["node_id"].as_u64() == Some(id))
    }

    /// Every thread's stack of a running node, as gdb prints them (if gdb is installed).
    pub fn stacks(&self, id: u64) -> String {
        match self.nodes[&id].pid() {
            Some(pid) => format!(
                "---- node {id} (pid {pid}) does not answer; its threads ----\n{}",
                stacks(pid)
            ),
            None => format!("node {id} does not run"),
        }
    }

    /// The ids of the nodes whose processes run (paused ones included).
    pub fn running(&self) -> Vec<u64> {
        self.nodes
            .values()
            .filter(|n| n.is_running())
            .map(|n| n.id)
            .collect()
    }

    /// Wait until every running node agrees on a leader among them; return it.
    pub fn wait_leader(&self, timeout: Duration) -> u64 {
        self.wait_leader_among(&self.running(), timeout)
    }

    /// Wait until the given nodes agree on a leader among them; return it.
    pub fn wait_leader_among(&self, running: &[u64], timeout: Duration) -> u64 {
        let agreed = try_wait_for(timeout, || {
            let mut leader = None;
            for id in running {
                let l = self.status(*id)?.get("leader_id")?.as_u64()?;
                if leader.is_some_and(|x| x != l) || !running.contains(&l) {
                    return None;
                }
                leader = Some(l);
            }
            leader
        });
        agreed.unwrap_or_else(|| {
            // A node that does not answer at all: show where its threads are.
            for id in running {
                if self.status(*id).is_none() {
                    eprintln!("{}", self.stacks(*id));
                }
            }
            panic!("timed out after {timeout:?} waiting for a leader the nodes agree on")
        })
    }

    /// Wait until a node's applied index reaches `index`.
    pub fn wait_applied(&self, id: u64, index: u64, timeout: Duration) {
        wait_for(
            &format!("node {id} to apply index {index}"),
            timeout,
            || {
                let applied = self.status(id)?.get("applied_index")?.as_u64()?;
                (applied >= index).then_some(())
            },
        )
    }

    /// `ferry cluster add-node` of node `id` (configured here) through node `via`.
    pub fn add_node(&self, via: u64, id: u64) -> Value {
        let (api, raft) = (self.nodes[&id].api.clone(), self.nodes[&id].raft.clone());
        let id = id.to_string();
        self.json(
            via,
            &[
                "cluster",
                "add-node",
                "--id",
                &id,
                "--api-addr",
                &api,
                "--raft-addr",
                &raft,
            ],
        )
    }

    /// Write a connector JSON file in the cluster dir and return its path.
    pub fn connector_file(&self, name: &str, config: &[(&str, &str)]) -> PathBuf {
        let config: serde_json::Map<String, Value> = config
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        // A connector name may hold `/` and any Unicode: the file is named by its safe part.
        let safe: String = name
            .chars()
            .take(40)
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = self.dir.path().join(format!("{safe}-{}.json", uuid_like()));
        let body = serde_json::json!({ "name": name, "config": config });
        fs::write(&path, body.to_string()).expect("cannot write a connector file");
        path
    }

    /// Create a FileStreamSink connector through `node`.
    pub fn create_sink(&self, node: u64, name: &str) -> CliOutput {
        let file = self.connector_file(
            name,
            &[
                ("connector.class", "FileStreamSink"),
                ("topics", "test1"),
                ("tasks.max", "2"),
                ("file", "out.txt"),
            ],
        );
        self.cli_on(
            &[node],
            &["connectors", "create", "-f", &file.to_string_lossy()],
        )
    }

    /// Start a ferryd with an arbitrary config file; return its exit code and stderr.
    pub fn run_ferryd_to_exit(
        config_text: &str,
        timeout: Duration,
    ) -> anyhow::Result<(Option<i32>, String)> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("cluster.toml");
        fs::write(&path, config_text)?;
        let mut child = Command::new(bin("ferryd"))
            .arg("--config")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("cannot start ferryd")?;
        if exited_within(&mut child, timeout).is_none() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("ferryd did not exit within {timeout:?}");
        }
        let output = child.wait_with_output()?;
        Ok((
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in self.nodes.values_mut() {
            if let Some(mut child) = node.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if std::env::var_os("FERRY_KEEP_LOGS").is_some() && !std::thread::panicking() {
            self.keep_logs();
        }
        // A read of the applied state inside another freezes a node only when an apply comes
        // between them, but panics every time (ferry_meta::store::HELD_TWICE): fail the test
        // that ran it, whatever it asserted.
        let held_twice = self.lines_with(ferry_meta::store::HELD_TWICE);
        if !held_twice.is_empty() && !std::thread::panicking() {
            self.keep_logs();
            panic!("a node read the applied state inside another read of it:\n{held_twice:#?}");
        }
        if std::thread::panicking() {
            // Keep the evidence: copy the logs out of the temp dir, print their tails.
            self.keep_logs();
            for node in self.nodes.values() {
                let text = fs::read_to_string(&node.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                eprintln!("---- node {} log (last {} lines) ----", node.id, tail.len());
                for line in tail.iter().rev() {
                    eprintln!("{line}");
                }
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).expect("cannot create a directory");
    for entry in fs::read_dir(from).expect("cannot list a data dir") {
        let entry = entry.expect("cannot read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("cannot stat").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).expect("cannot copy a data file");
        }
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The member ids in a cluster status, with their roles ("voter" or "learner").
pub fn members(status: &Value) -> BTreeMap<u64, String> {
    status["members"]
        .as_array()
        .map(|members| {
            members
                .iter()
                .filter_map(|m| Some((m["id"].as_u64()?, m["role"].as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

/// Apache Kafka for one test: the single broker that `ferry-kafka` runs for a whole test run
/// (`make e2e`; its address in [`brokers::SHARED`]), emptied of the previous test's topics and
/// groups — or, for a test run on its own, a single broker of the test's own, stopped on drop.
pub struct Kafka {
    pub bootstrap: String,
    own: Option<brokers::Brokers>,
}

impl Kafka {
    /// Kafka with these topics (name, partitions), created through the Admin API; any other
    /// topic is auto-created by the broker on first use, as Kafka's default config does.
    pub fn start(topics: &[(&str, i32)]) -> Kafka {
        let (bootstrap, own) = match std::env::var(brokers::SHARED) {
            Ok(shared) if !shared.is_empty() => {
                brokers::clear(&shared);
                (shared, None)
            }
            _ => {
                let own = brokers::Brokers::start(1);
                (own.bootstrap.clone(), Some(own))
            }
        };
        brokers::create_topics(&bootstrap, topics, 1);
        say(format!("Kafka at {bootstrap} with topics {topics:?}"));
        Kafka { bootstrap, own }
    }

    /// A single broker of the test's own that does not create topics on first use
    /// (`auto.create.topics.enable=false`, as many production clusters run), with these topics.
    pub fn without_auto_creation(topics: &[(&str, i32)]) -> Kafka {
        let own = brokers::Brokers::start_with(1, &[("auto.create.topics.enable", "false")]);
        Kafka::own(own, topics, " (no auto-creation)")
    }

    /// A single broker of the test's own whose only client listener is SASL_PLAINTEXT with
    /// SCRAM-SHA-256 and one user, with these topics; its client properties in `client`.
    pub fn scram(user: &str, password: &str, topics: &[(&str, i32)]) -> Kafka {
        Kafka::own(
            brokers::Brokers::scram(user, password),
            topics,
            " (SASL/SCRAM)",
        )
    }

    /// A three-broker cluster of the test's own (replication factor 3, `min.insync.replicas`
    /// 2), as the seeds run theirs, with these topics.
    pub fn three(topics: &[(&str, i32)]) -> Kafka {
        Kafka::own(brokers::Brokers::start(3), topics, "")
    }

    /// `three`, the workers reaching each broker through a proxy that a test can cut
    /// ([`brokers::Brokers::proxied`]): give Ferry's nodes [`Kafka::for_workers`].
    pub fn three_proxied(topics: &[(&str, i32)]) -> Kafka {
        Kafka::own(
            brokers::Brokers::proxied(3),
            topics,
            " (workers through proxies)",
        )
    }

    fn own(own: brokers::Brokers, topics: &[(&str, i32)], what: &str) -> Kafka {
        own.create_topics(topics);
        say(format!(
            "Kafka at {}{what} with topics {topics:?}",
            own.bootstrap
        ));
        Kafka {
            bootstrap: own.bootstrap.clone(),
            own: Some(own),
        }
    }

    /// The bootstrap servers Ferry's nodes are given (the proxies, with `three_proxied`).
    pub fn for_workers(&self) -> &str {
        self.own
            .as_ref()
            .map_or(&self.bootstrap, |own| &own.for_workers)
    }

    /// The brokers, when they are the test's own (to kill, pause or restart one).
    pub fn brokers_mut(&mut self) -> Option<&mut brokers::Brokers> {
        self.own.as_mut()
    }

    /// The records of `topic` as Kafka's own console consumer prints them (one per line, each
    /// `headers<TAB>value` with `headers`), once `expected` are read or after `timeout`.
    pub fn console_consume(
        &self,
        topic: &str,
        expected: usize,
        timeout: Duration,
        headers: bool,
    ) -> Vec<String> {
        brokers::console_consume(&self.bootstrap, topic, expected, timeout, headers)
    }
}

/// Lines of every file named `name` in the nodes' working directories.
pub fn lines_in_work_dirs(cluster: &Cluster, name: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for node in cluster.nodes.values() {
        if let Ok(text) = fs::read_to_string(node.work_dir.join(name)) {
            lines.extend(text.lines().map(str::to_string));
        }
    }
    lines
}

/// The Python of `target/pyenv` (made by scripts/testbed/python.sh), with confluent-kafka.
pub fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join("target/pyenv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run ./scripts/testbed/python.sh (make test does)",
        python.display()
    );
    python
}

/// Every record of `topic`, read by confluent-kafka.
pub fn read_topic(kafka: &Kafka, topic: &str, expected: usize) -> Vec<Value> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/read_topic.py");
    let out = Command::new(python())
        .arg(script)
        .args([&kafka.bootstrap, topic, &expected.to_string()])
        .output()
        .expect("run the Python reader");
    assert!(
        out.status.success(),
        "the Python reader failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Send `record` with `producer`, polling it while its queue is full.
pub fn send_waiting<K, P>(
    producer: &rdkafka::producer::BaseProducer,
    mut record: rdkafka::producer::BaseRecord<'_, K, P>,
) where
    K: rdkafka::message::ToBytes + ?Sized,
    P: rdkafka::message::ToBytes + ?Sized,
{
    while let Err((_, r)) = producer.send(record) {
        record = r;
        producer.poll(Duration::from_millis(10));
    }
}

/// Produce `records` values to `topic`, record `i` to partition `i % partitions`: JSON objects
/// (`{"id":i}`), but every tenth (`i % 10 == 0`) malformed text. Returns how many are
/// malformed.
pub fn produce_every_tenth_malformed(
    kafka: &Kafka,
    topic: &str,
    partitions: usize,
    records: usize,
) -> usize {
    use rdkafka::producer::Producer;
    let producer: rdkafka::producer::BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &kafka.bootstrap)
        .create()
        .expect("a producer");
    for i in 0..records {
        let value = match i % 10 {
            0 => format!("malformed {i}"),
            _ => format!(r#"{{"id":{i}}}"#),
        };
        let record = rdkafka::producer::BaseRecord::<(), str>::to(topic)
            .partition((i % partitions) as i32)
            .payload(value.as_str());
        send_waiting(&producer, record);
    }
    producer
        .flush(Duration::from_secs(30))
        .expect("every record produced");
    records.div_ceil(10)
}

/// Produce records with these values (any bytes) to `topic` with confluent-kafka.
pub fn produce_bytes(kafka: &Kafka, topic: &str, values: &[&[u8]]) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("py/produce_hex.py");
    let hex = values
        .iter()
        .map(|v| v.iter().map(|b| format!("{b:02x}")).collect::<String>());
    let out = Command::new(python())
        .arg(script)
        .args([&kafka.bootstrap, topic])
        .args(hex)
        .output()
        .expect("run the Python producer");
    assert!(
        out.status.success(),
        "the Python producer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `__connect.errors.<name>` header of a record `read_topic` returned.
pub fn error_header(headers: &Value, name: &str) -> Option<String> {
    headers[format!("__connect.errors.{name}")]
        .as_str()
        .map(str::to_string)
}
