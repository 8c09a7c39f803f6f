//! One fault scenario, end to end: a three-node cluster and a broker as real processes, numbered
//! records flowing through a sink connector, concurrent config clients and an offset poller
//! recording their histories, a nemesis injecting and healing faults; then convergence, a drain
//! of the sink, and every checker over what was recorded.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::checkers::{self, Assigned, Delivery, Effect};
use super::client::{spawn_config_clients, ClientPlan, History, Probe, WriteHold};
use super::linearizable::{check, ConfigRegister};
use super::nemesis::Nemesis;
use super::replay::{replay, Replayed};
use super::rng::Rng;
use super::workload::{offset_poller, producer, record_id, FreezeSampler, Samples};
use crate::hdfs::{Hadoop, Hdfs};
use crate::postgres::Postgres;
use crate::{lines_in_work_dirs, say, wait_for, Cluster, Kafka, Settings, Signal};

/// The topic the numbered records go to.
pub const TOPIC: &str = "jepsen";
/// The topic of the config clients' connectors (no records: their tasks idle).
pub const IDLE_TOPIC: &str = "jepsen-idle";
/// The dead letter queue of the big config's connector.
const IDLE_DLQ: &str = "jepsen-idle-dlq";
/// The sink connector under test.
pub const SINK: &str = "sink";
const BOOT: Duration = Duration::from_secs(60);
/// Within how long every running, unpaused node answers its status: the freeze checker's bound.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// How long a fault may last past its hold time while the sink's tasks have not recovered.
const RECOVERY: Duration = Duration::from_secs(30);
/// How long each node stays down in a rolling restart: longer than its worker timeout (5 s).
const ROLLING_DOWN: Duration = Duration::from_millis(6500);
/// How long the `leader-changes` nemesis cuts a follower off: past its lease (half the worker
/// timeout) and its leader's probing, short of the worker timeout (5 s).
const SHORT_CUT: Duration = Duration::from_millis(3500);
/// How long the `leader-changes` nemesis keeps a paused leader stopped once a successor leads:
/// a few worker heartbeats, well short of the worker timeout.
const PAUSE_AFTER_SUCCESSION: Duration = Duration::from_millis(1500);

/// The sinks the matrix runs, every one that exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// FileStreamSink: at-least-once (duplicates counted, not failed).
    File,
    /// The storage sink (HDFS sink class) on a directory every worker shares: exactly-once.
    Storage,
    /// The storage sink on a real HDFS of Hadoop 2.7.3: exactly-once.
    Hdfs,
    /// The storage sink as `Hdfs3SinkConnector` on a real HDFS of Hadoop 3: exactly-once.
    Hdfs3,
    /// The JDBC sink into a real PostgreSQL, plain inserts: exactly-once at the database.
    Jdbc,
}

/// Where the storage sinks put their files, under the store.
const TOPICS_DIR: &str = "/jepsen";

/// What a sink writes to, made for one run.
pub enum Output {
    /// Each worker's working directory (FileStreamSink's relative `file`).
    WorkDirs,
    /// A directory every worker shares.
    Shared(std::path::PathBuf),
    Hdfs(Hdfs),
    Postgres(Postgres),
}

/// The JDBC sink's table (made by auto.create: one TEXT column, `line`).
const JDBC_TABLE: &str = "jepsen_rows";

impl Sink {
    pub const ALL: [Sink; 5] = [
        Sink::File,
        Sink::Storage,
        Sink::Hdfs,
        Sink::Hdfs3,
        Sink::Jdbc,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Sink::File => "file",
            Sink::Storage => "storage",
            Sink::Hdfs => "hdfs",
            Sink::Hdfs3 => "hdfs3",
            Sink::Jdbc => "jdbc",
        }
    }

    /// Whether the sink promises no duplicates.
    pub fn exactly_once(self) -> bool {
        match self {
            Sink::File => false,
            Sink::Storage | Sink::Hdfs | Sink::Hdfs3 | Sink::Jdbc => true,
        }
    }

    /// Make what the sink writes to (an HDFS is started here).
    pub fn output(self, cluster: &Cluster) -> Output {
        match self {
            Sink::File => Output::WorkDirs,
            Sink::Storage => Output::Shared(cluster.dir.path().join("store")),
            Sink::Hdfs => Output::Hdfs(Hdfs::start_hadoop(Hadoop::Two)),
            Sink::Hdfs3 => Output::Hdfs(Hdfs::start_hadoop(Hadoop::Three)),
            Sink::Jdbc => Output::Postgres(Postgres::start()),
        }
    }

    fn config(self, output: &Output, tasks: usize) -> Vec<(&'static str, String)> {
        let mut config = vec![("topics", TOPIC.into()), ("tasks.max", tasks.to_string())];
        let mut class = "io.confluent.connect.hdfs.HdfsSinkConnector";
        let store_url = match output {
            // Relative: each worker writes in its own working directory.
            Output::WorkDirs => {
                config.push(("connector.class", "FileStreamSink".into()));
                config.push(("file", FILE_OUTPUT.into()));
                return config;
            }
            Output::Shared(dir) => dir.display().to_string(),
            Output::Hdfs(hdfs) => {
                if hdfs.hadoop() == Hadoop::Three {
                    class = "io.confluent.connect.hdfs3.Hdfs3SinkConnector";
                }
                format!("hdfs://{}", hdfs.namenode)
            }
            // Each record's string in a one-column row, batches of 50 so that faults land
            // between a batch's rows and its transaction's commit.
            Output::Postgres(pg) => {
                config.extend([
                    (
                        "connector.class",
                        "io.confluent.connect.jdbc.JdbcSinkConnector".into(),
                    ),
                    ("connection.url", pg.jdbc_url("kcdb")),
                    ("connection.user", "kcuser".into()),
                    ("connection.password", "kcpw".into()),
                    ("table.name.format", JDBC_TABLE.into()),
                    ("auto.create", "true".into()),
                    ("batch.size", "50".into()),
                    ("transforms", "row".into()),
                    (
                        "transforms.row.type",
                        "org.apache.kafka.connect.transforms.HoistField$Value".into(),
                    ),
                    ("transforms.row.field", "line".into()),
                ]);
                return config;
            }
        };
        config.extend([
            ("connector.class", class.into()),
            ("store.url", store_url),
            ("topics.dir", TOPICS_DIR.into()),
            (
                "format.class",
                "io.confluent.connect.hdfs.string.StringFormat".into(),
            ),
            // Small files and a commit every second, so that faults land mid-file and
            // between a commit and its renames.
            ("flush.size", "50".into()),
            ("rotate.schedule.interval.ms", "1000".into()),
        ]);
        config
    }

    /// The record numbers the sink wrote, with repeats: for the storage sinks, those in
    /// committed files (not in `+tmp`).
    fn delivered(self, cluster: &Cluster, output: &Output) -> Vec<u64> {
        let lines = match output {
            Output::WorkDirs => lines_in_work_dirs(cluster, FILE_OUTPUT),
            Output::Shared(dir) => {
                let topic = dir.join(TOPICS_DIR.trim_start_matches('/')).join(TOPIC);
                let mut lines = Vec::new();
                for partition in std::fs::read_dir(&topic).into_iter().flatten().flatten() {
                    for file in std::fs::read_dir(partition.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                    {
                        let text = std::fs::read_to_string(file.path()).unwrap_or_default();
                        lines.extend(text.lines().map(str::to_string));
                    }
                }
                lines
            }
            Output::Hdfs(hdfs) => hdfs
                .cat(&format!("{TOPICS_DIR}/{TOPIC}/*/*"))
                .lines()
                .map(str::to_string)
                .collect(),
            // Before the first batch the table does not exist yet.
            Output::Postgres(pg) => pg
                .try_psql(&format!("SELECT line FROM {JDBC_TABLE}"))
                .unwrap_or_default()
                .lines()
                .map(str::to_string)
                .collect(),
        };
        lines.iter().filter_map(|l| record_id(l)).collect()
    }
}

/// FileStreamSink's output, in each worker's directory.
const FILE_OUTPUT: &str = "sink.out";

impl std::str::FromStr for Sink {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Sink::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Sink::ALL.iter().map(|k| k.name()).collect();
                format!("unknown sink {s:?}: expected one of: {}", names.join(", "))
            })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub nemesis: Nemesis,
    pub sink: Sink,
    pub seed: u64,
    /// How long faults are injected while records flow and clients run.
    pub duration: Duration,
    /// Records per second.
    pub rate: u32,
    pub partitions: i32,
    pub tasks: usize,
    pub clients: u64,
    /// Whether workers keep their ownership lease; without it (a test-only setting) a zombie
    /// keeps working and only the generation fence stands between its commits and the state.
    pub lease: bool,
    /// How many tasks the `big-config` nemesis's connector has.
    pub big_tasks: usize,
    /// How many times the `leader-changes` nemesis stops the leader with SIGTERM.
    pub leader_stops: usize,
}

impl Scenario {
    pub fn new(nemesis: Nemesis, sink: Sink, seed: u64, duration: Duration) -> Scenario {
        let planned = nemesis.planned();
        Scenario {
            nemesis,
            sink,
            seed,
            duration,
            // Planned changes run under the load, with a task more per node than
            // its connector instance, so that every node runs sink tasks.
            rate: if planned { 1000 } else { 300 },
            partitions: 6,
            tasks: if planned { 6 } else { 3 },
            clients: 3,
            lease: true,
            big_tasks: 2000,
            leader_stops: 20,
        }
    }

    pub fn label(&self) -> String {
        format!(
            "{}/{}/seed {}{}",
            self.nemesis,
            self.sink.name(),
            self.seed,
            if self.lease { "" } else { "/no lease" }
        )
    }
}

/// What a scenario found.
#[derive(Clone, Debug)]
pub struct Summary {
    pub label: String,
    pub exactly_once: bool,
    pub faults: Vec<String>,
    pub delivery: Delivery,
    pub replayed: Replayed,
    pub ownership_violations: Vec<Effect>,
    pub log_offsets_backwards: Vec<(i32, i64, i64)>,
    pub read_offsets_backwards: Vec<(i32, i64, i64)>,
    pub offset_reads: usize,
    pub config_ops: usize,
    pub config_unknown: usize,
    pub non_linearizable: Vec<String>,
    /// Time from the last heal to convergence, or what kept it from converging.
    pub convergence: Result<Duration, Vec<String>>,
    /// Time for a displaced worker's tasks to run elsewhere, per fault that displaced one
    /// (`None`: not within the fault's hold time).
    pub failovers: Vec<Option<Duration>>,
    /// Nodes whose data was wiped or rolled back that were not caught-up voters in time.
    pub rejoins: Vec<String>,
    /// Lines of the nodes' logs that show a panic.
    pub panics: Vec<String>,
    /// What the freeze sampler saw: every running node asked its status, over and over.
    pub samples: Samples,
    /// Lines of the nodes' logs where a watchdog ended its node (frozen, or not stopped).
    pub watchdog: Vec<String>,
    /// What the `big-config` rounds saw.
    pub big: Vec<BigRound>,
    /// Whether planned changes ran (`rolling-restart`, `leader-changes`), and what they saw
    /// that they must not cause.
    pub planned: Option<Vec<String>>,
    pub elapsed: Duration,
}

/// One round of the `big-config` nemesis (with a connector whose config is 1 MiB beside it).
#[derive(Clone, Debug, Default)]
pub struct BigRound {
    pub tasks: usize,
    /// Until every task showed RUNNING in the status.
    pub running_after: Option<Duration>,
    /// From the delete until no node listed the connector.
    pub deleted_after: Option<Duration>,
    /// The most threads a ferryd had during the round, and before it.
    pub max_threads: u64,
    pub threads_before: u64,
    /// The largest resident memory of a ferryd during the round (MiB).
    pub max_rss_mib: u64,
    /// What the rest of the cluster should not have noticed, and did.
    pub problems: Vec<String>,
}

/// How long the big connector's tasks may take to all show RUNNING.
const BIG_RUNNING: Duration = Duration::from_secs(300);
/// Threads a ferryd may add while running the big connector: tokio's blocking pool (512 at
/// most) and a few more; a Kafka client per idle task would add several threads each.
const BIG_THREADS: u64 = 600;

impl Summary {
    /// Each checker's verdict: name, pass, what it saw.
    pub fn verdicts(&self) -> Vec<(&'static str, bool, String)> {
        let d = &self.delivery;
        let r = &self.replayed;
        vec![
            (
                "loss",
                d.lost.is_empty() && d.produced > 0,
                format!(
                    "{} acknowledged by the broker, {} delivered, {} lost",
                    d.produced, d.delivered, d.lost.len()
                ),
            ),
            (
                "duplicates",
                !self.exactly_once || d.duplicates == 0,
                format!(
                    "{} duplicated ({})",
                    d.duplicates,
                    if self.exactly_once { "exactly-once: none allowed" } else { "at-least-once: counted" }
                ),
            ),
            (
                "single owner",
                self.ownership_violations.is_empty() && r.commits > 0,
                format!(
                    "{} violations in {} committed effects ({} offset commits accepted, {} fenced, {} refused for a stale start, {} retries answered from the first) over {} log entries",
                    self.ownership_violations.len(),
                    r.effects.len(),
                    r.commits,
                    r.fenced,
                    r.conflicts,
                    r.repeats,
                    r.entries
                ),
            ),
            (
                "config linearizability",
                self.non_linearizable.is_empty() && self.config_ops > 0,
                format!(
                    "{} operations ({} of unknown outcome): {}",
                    self.config_ops,
                    self.config_unknown,
                    if self.non_linearizable.is_empty() {
                        "linearizable".to_string()
                    } else {
                        format!("NOT linearizable on {:?}", self.non_linearizable)
                    }
                ),
            ),
            (
                "convergence",
                self.convergence.is_ok(),
                match &self.convergence {
                    Ok(t) => format!("every task RUNNING, all nodes agree, {} ms after healing", t.as_millis()),
                    Err(problems) => format!("not converged: {problems:?}"),
                },
            ),
            (
                "rejoin",
                self.rejoins.is_empty(),
                if self.rejoins.is_empty() {
                    "every wiped or rolled-back node a caught-up voter again before the next fault".to_string()
                } else {
                    self.rejoins.join("; ")
                },
            ),
            (
                "steady under a big config",
                self.big.iter().all(|b| b.problems.is_empty()),
                if self.big.is_empty() {
                    "no big config in this run".to_string()
                } else {
                    self.big
                        .iter()
                        .map(|b| {
                            format!(
                                "{} tasks RUNNING after {}, deleted after {}, threads {} → at most {}, RSS at most {} MiB{}",
                                b.tasks,
                                b.running_after.map_or("never".into(), |t| format!("{} ms", t.as_millis())),
                                b.deleted_after.map_or("never".into(), |t| format!("{} ms", t.as_millis())),
                                b.threads_before,
                                b.max_threads,
                                b.max_rss_mib,
                                if b.problems.is_empty() {
                                    "; term, sink generations and leases unchanged".to_string()
                                } else {
                                    format!("; {}", b.problems.join("; "))
                                }
                            )
                        })
                        .collect::<Vec<_>>()
                        .join(" | ")
                },
            ),
            (
                "planned restarts",
                self.planned.as_ref().is_none_or(Vec::is_empty),
                match &self.planned {
                    None => "no planned changes in this run".to_string(),
                    Some(problems) if problems.is_empty() => "every node stopped within its bound; the tasks of the nodes not touched kept their workers and generations".to_string(),
                    Some(problems) => problems.join("; "),
                },
            ),
            (
                "no panics",
                self.panics.is_empty(),
                if self.panics.is_empty() {
                    "no node's log shows a panic".to_string()
                } else {
                    format!("{} lines: {:?}", self.panics.len(), self.panics.iter().take(3).collect::<Vec<_>>())
                },
            ),
            (
                "no freeze",
                self.samples.silences.is_empty() && self.watchdog.is_empty() && self.samples.asked > 0,
                if self.samples.silences.is_empty() && self.watchdog.is_empty() {
                    format!(
                        "{} status questions to running nodes, each answered within {} ms (slowest {} ms)",
                        self.samples.asked,
                        ANSWER_WITHIN.as_millis(),
                        self.samples.slowest.as_millis()
                    )
                } else {
                    self.samples
                        .silences
                        .iter()
                        .map(|s| format!("node {} (pid {}) silent from {}", s.node, s.pid, s.asked))
                        .chain(self.watchdog.iter().take(3).cloned())
                        .collect::<Vec<_>>()
                        .join("; ")
                },
            ),
            (
                "offsets monotonic",
                self.log_offsets_backwards.is_empty() && self.read_offsets_backwards.is_empty(),
                format!(
                    "{} backwards in the log, {} backwards in {} offsets read one read after another",
                    self.log_offsets_backwards.len(),
                    self.read_offsets_backwards.len(),
                    self.offset_reads
                ),
            ),
        ]
    }

    pub fn passed(&self) -> bool {
        self.verdicts().iter().all(|(_, ok, _)| *ok)
    }

    /// Median and max of the measured fail-overs.
    pub fn failover_stats(&self) -> Option<(Duration, Duration)> {
        let mut times: Vec<Duration> = self.failovers.iter().flatten().copied().collect();
        times.sort();
        Some((*times.get(times.len() / 2)?, *times.last()?))
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "SCENARIO {} ({} s): {} faults: {}",
            self.label,
            self.elapsed.as_secs(),
            self.faults.len(),
            self.faults.join("; ")
        )?;
        for (name, ok, detail) in self.verdicts() {
            writeln!(
                f,
                "  {:<24} {}  {detail}",
                name,
                if ok { "ok  " } else { "FAIL" }
            )?;
        }
        let slow = self.failovers.iter().filter(|t| t.is_none()).count();
        match self.failover_stats() {
            Some((median, max)) => writeln!(
                f,
                "  {:<24}       median {} ms, max {} ms over {} displaced workers{}",
                "fail-over",
                median.as_millis(),
                max.as_millis(),
                self.failovers.len() - slow,
                if slow > 0 {
                    format!(", {slow} not within the fault")
                } else {
                    String::new()
                }
            )?,
            None => writeln!(
                f,
                "  {:<24}       no fault displaced a worker that ran sink tasks",
                "fail-over"
            )?,
        }
        write!(
            f,
            "  VERDICT {}",
            if self.passed() { "PASS" } else { "FAIL" }
        )
    }
}

/// The nodes that are members and running.
fn live(cluster: &Cluster, removed: &BTreeSet<u64>) -> Vec<u64> {
    let mut running = cluster.running();
    running.retain(|id| !removed.contains(id));
    running
}

fn api(cluster: &Cluster, id: u64) -> String {
    cluster.node(id).api.clone()
}

/// The leader as the first answering node names it.
fn leader(cluster: &Cluster, probe: &Probe, among: &[u64]) -> Option<u64> {
    among
        .iter()
        .find_map(|id| probe.leader(&api(cluster, *id)))
        .filter(|l| among.contains(l))
}

/// The workers running the sink's tasks, as the first answering node says.
fn sink_workers(cluster: &Cluster, probe: &Probe, among: &[u64]) -> Vec<String> {
    among
        .iter()
        .find_map(|id| probe.tasks(&api(cluster, *id), SINK))
        .map(|tasks| tasks.into_iter().map(|t| t.worker).collect())
        .unwrap_or_default()
}

/// Whether the given connectors have settled as `ask` (nodes) see them, on `workers`.
fn settled(
    cluster: &Cluster,
    probe: &Probe,
    ask: &[u64],
    connectors: &[String],
    workers: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    for name in connectors {
        let views: BTreeMap<u64, Option<Vec<Assigned>>> = ask
            .iter()
            .map(|id| (*id, probe.tasks(&api(cluster, *id), name)))
            .collect();
        let reported = ask
            .iter()
            .find_map(|id| probe.status(&api(cluster, *id), name))
            .unwrap_or_default();
        if views.values().flatten().all(Vec::is_empty) && views.values().any(Option::is_some) {
            // A connector without tasks yet (just created): its tasks are still to come.
            problems.push(format!("{name} has no tasks yet"));
        }
        problems.extend(checkers::convergence(&views, &reported, workers));
    }
    problems
}

/// Poll `check` until it holds or `timeout` passes; whether it held.
fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    loop {
        if check() {
            return true;
        }
        if t0.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The problems a planned change (or a fault of another node) made for the sink's tasks that
/// were not on `victim`: moved or restarted while it was down, or restarted on the same worker
/// once it was back (moving to the returning node is the rebalance's doing).
fn undisturbed(
    victim: u64,
    victim_api: &str,
    before: &BTreeMap<u32, (String, u64)>,
    down: &BTreeMap<u32, (String, u64)>,
    after: &BTreeMap<u32, (String, u64)>,
    problems: &mut Vec<String>,
) {
    for (task, (worker, generation)) in before {
        if worker == victim_api {
            continue;
        }
        if down.get(task) != Some(&(worker.clone(), *generation)) {
            problems.push(format!(
                "while node {victim} was away, task {task} on {worker} (generation {generation}) became {:?}",
                down.get(task)
            ));
        }
        match after.get(task) {
            Some((w, g)) if w == worker && g != generation => problems.push(format!(
                "task {task} stayed on {worker} but its generation went from {generation} to {g} as node {victim} came back"
            )),
            _ => {}
        }
    }
}

/// Inject one fault, hold it, measure the fail-over, heal it.
struct Nemeses<'a> {
    cluster: &'a mut Cluster,
    /// The brokers (three, for the broker faults).
    kafka: &'a mut Kafka,
    probe: Probe,
    rng: Rng,
    removed: BTreeSet<u64>,
    next_id: u64,
    faults: Vec<String>,
    failovers: Vec<Option<Duration>>,
    /// Nodes whose data was wiped or rolled back that were not caught-up voters in time.
    rejoins: Vec<String>,
    big_tasks: usize,
    big: Vec<BigRound>,
    /// What planned changes did that they must not (see [`Summary::planned`]).
    planned: Vec<String>,
    planned_ran: bool,
    /// How many times `leader-changes` stops the leader.
    leader_stops: usize,
    /// Holds the config clients' writes.
    hold: Arc<WriteHold>,
}

/// The largest value of a `/proc/<pid>/status` field (e.g. `Threads`, `VmRSS` in kB) among
/// the running ferryds.
fn proc_max(cluster: &Cluster, field: &str) -> u64 {
    cluster
        .running()
        .into_iter()
        .filter_map(|id| cluster.node(id).pid())
        .filter_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            status
                .lines()
                .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .max()
        .unwrap_or(0)
}

fn max_threads(cluster: &Cluster) -> u64 {
    proc_max(cluster, "Threads")
}

/// How many times each node's lease was taken afresh, from its log.
fn lease_epochs(cluster: &Cluster, nodes: &[u64]) -> BTreeMap<u64, usize> {
    nodes
        .iter()
        .map(|id| (*id, cluster.log_text(*id).matches("lease held").count()))
        .collect()
}

/// How long a node whose data was wiped or rolled back may take to be a caught-up voter again.
const REJOIN: Duration = Duration::from_secs(30);

impl Nemeses<'_> {
    /// Wait until `id` is a voter whose standing is whole and whose last log index the
    /// leader has matched; record it as a problem if not within [`REJOIN`].
    fn rejoined(&mut self, id: u64, fault: &str) -> Option<Duration> {
        let t0 = Instant::now();
        let mut last = String::from("no leader");
        // What the cluster had committed when the node came back: the node must have it all.
        let mut committed: Option<u64> = None;
        while t0.elapsed() < REJOIN {
            let running = live(self.cluster, &self.removed);
            if let Some(l) = leader(self.cluster, &self.probe, &running) {
                match (self.cluster.status(l), self.cluster.status(id)) {
                    (Some(lead), Some(own)) => {
                        let m = lead["members"]
                            .as_array()
                            .and_then(|ms| ms.iter().find(|m| m["id"] == id).cloned())
                            .unwrap_or_default();
                        let target = *committed
                            .get_or_insert(lead["committed_index"].as_u64().unwrap_or_default());
                        let whole = m["role"] == "voter"
                            && own["not_voting"] == ""
                            && m["matched_index"].as_u64() >= own["last_log_index"].as_u64()
                            && own["applied_index"].as_u64() >= Some(target);
                        if whole {
                            return Some(t0.elapsed());
                        }
                        last = format!(
                            "leader {l} sees {m}; the node says last log {}, not voting: {:?}",
                            own["last_log_index"], own["not_voting"]
                        );
                    }
                    _ => last = format!("no status from leader {l} or node {id}"),
                }
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        self.rejoins.push(format!(
            "after {fault}: node {id} not a caught-up voter within {} s ({last})",
            REJOIN.as_secs()
        ));
        None
    }

    /// A fault of the disk: a node's data wiped, or rolled back to an older copy.
    fn disk_round(&mut self, kind: Nemesis) {
        let running = live(self.cluster, &self.removed);
        let victim = *self.rng.pick(&running).expect("a running node");
        let hold = Duration::from_millis(self.rng.between(5000, 8000));
        let t0 = Instant::now();
        let desc = match kind {
            Nemesis::Wipe => {
                self.cluster.kill9(victim);
                self.cluster.wipe(victim);
                self.cluster.start(victim);
                format!("wipe {victim}")
            }
            Nemesis::Rollback => {
                let copy = self
                    .cluster
                    .dir
                    .path()
                    .join(format!("rollback-{victim}-{}", self.faults.len()));
                let copied = self
                    .cluster
                    .status(victim)
                    .and_then(|s| s["last_log_index"].as_u64())
                    .unwrap_or_default();
                self.cluster.stop(victim);
                self.cluster.copy_data_dir(victim, &copy);
                self.cluster.start(victim);
                // Records flow until the leader has seen the node acknowledge entries its copy
                // lacks (bounded by the hold, longer than several heartbeats).
                let started = Instant::now();
                while started.elapsed() < hold {
                    let acked = leader(self.cluster, &self.probe, &running)
                        .and_then(|l| self.cluster.status(l))
                        .and_then(|s| {
                            s["members"]
                                .as_array()?
                                .iter()
                                .find(|m| m["id"] == victim)?["acknowledged_index"]
                                .as_u64()
                        });
                    if acked.is_some_and(|a| a > copied + 20) {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
                self.cluster.stop(victim);
                self.cluster.restore_data_dir(victim, &copy);
                self.cluster.start(victim);
                let others: Vec<u64> = running.iter().copied().filter(|id| *id != victim).collect();
                if self.rng.below(2) == 0 {
                    let other = *self.rng.pick(&others).expect("another node");
                    self.cluster.kill9(other);
                    std::thread::sleep(Duration::from_millis(self.rng.between(2000, 4000)));
                    self.cluster.start(other);
                    format!("rollback {victim}, kill -9 {other} meanwhile")
                } else {
                    format!("rollback {victim}")
                }
            }
            _ => unreachable!("not a disk fault"),
        };
        let took = self.rejoined(victim, &desc);
        say(format!(
            "NEMESIS {desc}: lasted {} ms, {}",
            t0.elapsed().as_millis(),
            match took {
                Some(t) => format!(
                    "node {victim} a caught-up voter again after {} ms",
                    t.as_millis()
                ),
                None => format!(
                    "node {victim} NOT a caught-up voter within {} s",
                    REJOIN.as_secs()
                ),
            }
        ));
        self.faults.push(desc);
    }

    /// A connector with `big_tasks` tasks created and deleted under load: the leader keeps its
    /// term, the sink's tasks their generations, every worker its lease, and no idle task
    /// opens a Kafka client.
    /// The sink's tasks as the first of `ask` that answers sees them: task → (worker,
    /// generation). Asked again until one answers, within [`RECOVERY`]: right after the leader
    /// stops, the others answer no linearizable read until they have elected another (about
    /// an election timeout, longer than one ask's own timeout); empty if none ever does.
    fn sink_tasks(&self, ask: &[u64]) -> BTreeMap<u32, (String, u64)> {
        let t0 = Instant::now();
        let answer = loop {
            let answer = ask
                .iter()
                .find_map(|id| self.probe.tasks(&api(self.cluster, *id), SINK));
            if answer.is_some() || t0.elapsed() > RECOVERY {
                break answer;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        answer
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.task, (t.worker, t.generation)))
            .collect()
    }

    /// Whether every unit runs on one of `workers` and their loads differ by at most one, as
    /// the scheduler places them once its moves are done.
    fn balanced(&self, ask: &[u64], workers: &BTreeSet<String>) -> bool {
        let Some(loads) = ask
            .iter()
            .find_map(|id| self.probe.loads(&api(self.cluster, *id)))
        else {
            return false;
        };
        let counts: Vec<usize> = workers
            .iter()
            .map(|w| loads.get(w).copied().unwrap_or(0))
            .collect();
        let placed: usize = counts.iter().sum();
        let (min, max) = (counts.iter().min(), counts.iter().max());
        placed == loads.values().sum::<usize>()
            && min.zip(max).is_some_and(|(min, max)| max - min <= 1)
    }

    /// Wait until every connector has settled and the units are balanced over `running`.
    fn wait_balanced(&self, running: &[u64], what: &str) {
        let workers: BTreeSet<String> = running.iter().map(|id| api(self.cluster, *id)).collect();
        wait_for(what, RECOVERY, || {
            let names = running
                .iter()
                .find_map(|id| self.probe.connectors(&api(self.cluster, *id)))?;
            (settled(self.cluster, &self.probe, running, &names, &workers).is_empty()
                && self.balanced(running, &workers))
            .then_some(())
        });
    }

    /// After `victim` started again: how long until the sink has settled with a task on it
    /// and every planned move is done (the next fault's check must not see one); `None` if
    /// not within [`RECOVERY`].
    fn back_in_balance(&self, victim: u64, others: &[u64]) -> Option<Duration> {
        let back = Instant::now();
        let victim_api = api(self.cluster, victim);
        let mut workers: BTreeSet<String> =
            others.iter().map(|id| api(self.cluster, *id)).collect();
        workers.insert(victim_api.clone());
        let rejoined = wait_until(RECOVERY, || {
            let ask = live(self.cluster, &self.removed);
            let settled = settled(
                self.cluster,
                &self.probe,
                &ask,
                &[SINK.to_string()],
                &workers,
            )
            .is_empty();
            let takes_part = self
                .sink_tasks(others)
                .values()
                .any(|(worker, _)| *worker == victim_api);
            settled && takes_part && self.balanced(others, &workers)
        });
        rejoined.then(|| back.elapsed())
    }

    /// A round of planned changes: the config clients' writes are held (a connector they
    /// create would rebalance the sink's tasks), every connector settles and balances, `body`
    /// runs, noting what the changes must not have caused; it returns the fault's description.
    fn planned_round(&mut self, body: impl FnOnce(&mut Self, &mut Vec<String>) -> String) {
        self.hold.hold();
        self.wait_balanced(
            &live(self.cluster, &self.removed),
            "every connector settled and balanced before planned changes",
        );
        let mut problems = Vec::new();
        let desc = body(self, &mut problems);
        self.hold.release();
        self.faults.push(desc);
        self.planned.extend(problems);
        self.planned_ran = true;
    }

    /// Stop `victim` with SIGTERM (within the bound), keep it down for `down_for` from the
    /// signal, start it again and wait until it runs sink tasks in a balanced cluster; the
    /// other nodes' tasks must be left alone meanwhile. How long the stop and the return took.
    fn restart_planned(
        &mut self,
        victim: u64,
        down_for: Duration,
        problems: &mut Vec<String>,
    ) -> (Duration, Option<Duration>) {
        let others: Vec<u64> = live(self.cluster, &self.removed)
            .into_iter()
            .filter(|id| *id != victim)
            .collect();
        let victim_api = api(self.cluster, victim);
        let before = self.sink_tasks(&others);
        let bound = self.cluster.shutdown_bound();
        let t0 = Instant::now();
        self.cluster.stop(victim);
        let stop = t0.elapsed();
        if stop > bound {
            problems.push(format!(
                "node {victim} took {} ms to stop on SIGTERM (bound {} ms)",
                stop.as_millis(),
                bound.as_millis()
            ));
        }
        while t0.elapsed() < down_for {
            std::thread::sleep(Duration::from_millis(100));
        }
        let down = self.sink_tasks(&others);
        self.cluster.start(victim);
        let rejoined = self.back_in_balance(victim, &others);
        let after = self.sink_tasks(&others);
        undisturbed(victim, &victim_api, &before, &down, &after, problems);
        if rejoined.is_none() {
            problems.push(format!(
                "node {victim} did not run sink tasks again within {} s of its start",
                RECOVERY.as_secs()
            ));
        }
        (stop, rejoined)
    }

    /// Every node, the leader included, stopped with SIGTERM and started again, one at a
    /// time, twice over; each stays down longer than the worker timeout.
    fn rolling_round(&mut self) {
        self.planned_round(|n, problems| {
            let mut stops = Vec::new();
            let mut leaders = 0;
            for pass in 1..=2 {
                for victim in live(n.cluster, &n.removed) {
                    let was_leader =
                        leader(n.cluster, &n.probe, &live(n.cluster, &n.removed)) == Some(victim);
                    leaders += usize::from(was_leader);
                    let (stop, rejoined) = n.restart_planned(victim, ROLLING_DOWN, problems);
                    stops.push(stop);
                    say(format!(
                        "NEMESIS rolling restart pass {pass}: node {victim}{} stopped in {} ms, down {} ms, running sink tasks again {:?} ms after its start",
                        if was_leader { " (the leader)" } else { "" },
                        stop.as_millis(),
                        ROLLING_DOWN.as_millis(),
                        rejoined.map(|t| t.as_millis())
                    ));
                }
            }
            if leaders == 0 {
                problems.push("no node was the leader when it was stopped".to_string());
            }
            format!(
                "rolling restart ({} stops, slowest {} ms)",
                stops.len(),
                stops.iter().max().map_or(0, Duration::as_millis)
            )
        });
    }

    /// The leader stopped with SIGTERM and started again `leader_stops` times: each stop is
    /// bounded, and the tasks of the other nodes keep their workers and generations.
    fn leader_round(&mut self) {
        self.planned_round(|n, problems| {
            let mut stops = Vec::new();
            for round in 1..=n.leader_stops {
                let Some(victim) = leader(n.cluster, &n.probe, &live(n.cluster, &n.removed))
                else {
                    problems.push(format!("no leader before stop {round}"));
                    continue;
                };
                let (stop, rejoined) = n.restart_planned(victim, Duration::ZERO, problems);
                stops.push(stop);
                say(format!(
                    "NEMESIS leader stop {round}: node {victim} stopped on SIGTERM in {} ms, running sink tasks again {:?} ms after its start",
                    stop.as_millis(),
                    rejoined.map(|t| t.as_millis())
                ));
            }
            format!(
                "leader stops ({} SIGTERMs, slowest {} ms)",
                stops.len(),
                stops.iter().max().map_or(0, Duration::as_millis)
            )
        });
    }

    /// A follower cut off from the others for less than the worker timeout, twice; then the
    /// leader paused (SIGSTOP) until a successor leads, and resumed before the worker timeout,
    /// twice. Every task keeps its worker and generation: connection resets are no proof of
    /// death, and a successor waits a full worker timeout for a silent worker.
    fn pause_round(&mut self) {
        self.planned_round(Self::short_faults);
    }

    fn short_faults(&mut self, problems: &mut Vec<String>) -> String {
        for round in 1..=2 {
            let all = live(self.cluster, &self.removed);
            let lead = leader(self.cluster, &self.probe, &all);
            let before = self.sink_tasks(&all);
            let Some(victim) = all.iter().copied().find(|id| {
                Some(*id) != lead
                    && before
                        .values()
                        .any(|(worker, _)| *worker == api(self.cluster, *id))
            }) else {
                problems.push(format!("no follower running sink tasks before cut {round}"));
                continue;
            };
            let epochs = lease_epochs(self.cluster, &[victim]);
            self.cluster.isolate(victim);
            std::thread::sleep(SHORT_CUT);
            self.cluster.heal();
            // Its lease lapsed (half the worker timeout): back once it holds one again.
            if !wait_until(RECOVERY, || lease_epochs(self.cluster, &[victim]) != epochs) {
                problems.push(format!(
                    "node {victim} did not hold its lease again after a short cut"
                ));
            }
            self.wait_balanced(
                &all,
                "every connector settled and balanced after a short cut",
            );
            let after = self.sink_tasks(&all);
            if after != before {
                problems.push(format!(
                    "node {victim} cut off for {} ms (less than the worker timeout) and its tasks moved or restarted: {before:?} became {after:?}",
                    SHORT_CUT.as_millis()
                ));
            }
            say(format!(
                "NEMESIS short cut {round}: node {victim} isolated {} ms; every task kept its worker and generation: {}",
                SHORT_CUT.as_millis(),
                after == before
            ));
        }
        for round in 1..=2 {
            let all = live(self.cluster, &self.removed);
            let Some(victim) = leader(self.cluster, &self.probe, &all) else {
                problems.push(format!("no leader before pause {round}"));
                continue;
            };
            let others: Vec<u64> = all.iter().copied().filter(|id| *id != victim).collect();
            let before = self.sink_tasks(&all);
            let t0 = Instant::now();
            self.cluster.signal(victim, Signal::SIGSTOP);
            // Paused until a successor leads and has heard the others' heartbeats, and
            // resumed before the worker timeout: nobody's tasks move, the paused node's
            // neither (a stopped process still accepts connections: no proof of death).
            let succeeded = wait_until(RECOVERY, || {
                leader(self.cluster, &self.probe, &others).is_some_and(|l| l != victim)
            });
            std::thread::sleep(PAUSE_AFTER_SUCCESSION);
            let down = self.sink_tasks(&others);
            self.cluster.signal(victim, Signal::SIGCONT);
            let epochs = lease_epochs(self.cluster, &[victim]);
            let resumed = wait_until(RECOVERY, || lease_epochs(self.cluster, &[victim]) != epochs);
            self.wait_balanced(&all, "every connector settled and balanced after a pause");
            let after = self.sink_tasks(&all);
            if !succeeded || !resumed {
                problems.push(format!(
                    "pause {round} of leader {victim}: a successor led: {succeeded}; it held its lease again: {resumed}"
                ));
            }
            for (when, seen) in [("while paused", &down), ("after", &after)] {
                let moved: Vec<String> = before
                    .iter()
                    .filter(|(task, was)| seen.get(*task) != Some(*was))
                    .map(|(task, was)| format!("task {task} {was:?} became {:?}", seen.get(task)))
                    .collect();
                if !moved.is_empty() {
                    problems.push(format!(
                        "the leader {victim} paused for less than the worker timeout, and {when} its successor moved or restarted tasks: {}",
                        moved.join(", ")
                    ));
                }
            }
            say(format!(
                "NEMESIS leader pause {round}: node {victim} paused {} ms, until a successor led and then {} ms",
                t0.elapsed().as_millis(),
                PAUSE_AFTER_SUCCESSION.as_millis()
            ));
        }
        "2 short cuts of a follower, 2 short pauses of the leader".to_string()
    }

    fn big_round(&mut self) {
        const BIG: &str = "big";
        const WIDE: &str = "wide";
        let t0 = Instant::now();
        let running = live(self.cluster, &self.removed);
        let mut round = BigRound {
            tasks: self.big_tasks,
            threads_before: max_threads(self.cluster),
            ..BigRound::default()
        };
        let Some(first) = leader(self.cluster, &self.probe, &running) else {
            round.problems.push("no leader before the round".into());
            self.big.push(round);
            return;
        };
        let term = |cluster: &Cluster, id: u64| {
            cluster
                .status(id)
                .and_then(|s| Some((s["leader_id"].as_u64()?, s["term"].as_u64()?)))
        };
        let before = term(self.cluster, first);
        let generations = |probe: &Probe, cluster: &Cluster| {
            probe.tasks(&api(cluster, first), SINK).map(|tasks| {
                tasks
                    .into_iter()
                    .map(|t| (t.task, t.generation))
                    .collect::<BTreeMap<u32, u64>>()
            })
        };
        // The clients' creates and deletes move tasks on purpose (a rebalance): they only read
        // until the check is done, and every connector has settled from their last write, so
        // that any move is the big connector's doing.
        self.hold.hold();
        let workers: BTreeSet<String> = running.iter().map(|id| api(self.cluster, *id)).collect();
        wait_for(
            "every connector settled before the big config",
            RECOVERY,
            || {
                let names = self.probe.connectors(&api(self.cluster, first))?;
                settled(self.cluster, &self.probe, &running, &names, &workers)
                    .is_empty()
                    .then_some(())
            },
        );
        let sink_before = generations(&self.probe, self.cluster);
        let epochs_before = lease_epochs(self.cluster, &running);
        let tasks = self.big_tasks.to_string();
        let file = self.cluster.connector_file(
            BIG,
            &[
                ("connector.class", "FileStreamSink"),
                ("topics", IDLE_TOPIC),
                ("file", "big.out"),
                ("tasks.max", &tasks),
                // A dead letter queue: a task that owns no partition opens no producer for it.
                ("errors.tolerance", "all"),
                ("errors.deadletterqueue.topic.name", IDLE_DLQ),
            ],
        );
        // Beside it, large entries: a connector whose config is close to [limits]
        // max_config_bytes (1 MiB: 120,000 topics that do not exist, beside the idle one).
        let topics: Vec<String> = std::iter::once(IDLE_TOPIC.to_string())
            .chain((0..120_000).map(|i| format!("x{i:06}")))
            .collect();
        let wide = self.cluster.connector_file(
            WIDE,
            &[
                ("connector.class", "FileStreamSink"),
                ("topics", &topics.join(",")),
                ("file", "wide.out"),
            ],
        );
        self.cluster.cli(
            first,
            &["connectors", "create", "-f", &wide.to_string_lossy()],
        );
        self.cluster.cli(
            first,
            &["connectors", "create", "-f", &file.to_string_lossy()],
        );
        let created = Instant::now();
        while created.elapsed() < BIG_RUNNING {
            round.max_threads = round.max_threads.max(max_threads(self.cluster));
            round.max_rss_mib = round
                .max_rss_mib
                .max(proc_max(self.cluster, "VmRSS") / 1024);
            let shown = self.probe.status(&api(self.cluster, first), BIG);
            let running_tasks = shown
                .iter()
                .flatten()
                .filter(|t| t.state == "RUNNING")
                .count();
            if running_tasks == self.big_tasks {
                round.running_after = Some(created.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        if round.running_after.is_none() {
            round.problems.push(format!(
                "not every one of {} tasks RUNNING within {} s",
                self.big_tasks,
                BIG_RUNNING.as_secs()
            ));
        }
        round.max_threads = round.max_threads.max(max_threads(self.cluster));
        let after = term(self.cluster, first);
        if after != before || before.is_none() {
            round.problems.push(format!(
                "the leader and term moved: (leader, term) {before:?} → {after:?}"
            ));
        }
        let sink_after = generations(&self.probe, self.cluster);
        if sink_after != sink_before || sink_before.is_none() {
            round.problems.push(format!(
                "the sink's task generations changed: {sink_before:?} → {sink_after:?}"
            ));
        }
        let epochs_after = lease_epochs(self.cluster, &running);
        if epochs_after != epochs_before {
            round.problems.push(format!(
                "a worker lost its lease (lease epochs per node {epochs_before:?} → {epochs_after:?})"
            ));
        }
        if round.max_threads > round.threads_before + BIG_THREADS {
            round.problems.push(format!(
                "a ferryd grew from {} to {} threads: idle tasks opened Kafka clients?",
                round.threads_before, round.max_threads
            ));
        }
        let via = leader(self.cluster, &self.probe, &running).unwrap_or(first);
        self.cluster.cli(via, &["connectors", "delete", BIG]);
        self.cluster.cli(via, &["connectors", "delete", WIDE]);
        let deleting = Instant::now();
        while deleting.elapsed() < BIG_RUNNING {
            let listed = running.iter().any(|id| {
                self.probe
                    .connectors(&api(self.cluster, *id))
                    .is_none_or(|names| names.iter().any(|n| n == BIG || n == WIDE))
            });
            if !listed {
                round.deleted_after = Some(deleting.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        if round.deleted_after.is_none() {
            round.problems.push(format!(
                "still listed {} s after its delete",
                BIG_RUNNING.as_secs()
            ));
        }
        self.hold.release();
        let desc = format!("big config ({} tasks)", self.big_tasks);
        say(format!(
            "NEMESIS {desc}: lasted {} ms: {round:?}",
            t0.elapsed().as_millis()
        ));
        self.faults.push(desc);
        self.big.push(round);
    }

    /// One of the three brokers killed (`kill -9`), paused or cut off from the workers for the
    /// hold time, then restarted, resumed or reconnected; the sink's tasks stay where they are
    /// (no worker is displaced) and the producer's acknowledged records must all arrive.
    fn broker_round(&mut self, kind: Nemesis) {
        let id = *self.rng.pick(&[1u32, 2, 3]).expect("a broker");
        let hold = Duration::from_millis(self.rng.between(5000, 8000));
        let t0 = Instant::now();
        let brokers = self
            .kafka
            .brokers_mut()
            .expect("the scenario's own brokers");
        match kind {
            Nemesis::KillBroker => brokers.kill9(id),
            Nemesis::PartitionBroker => brokers.cut(id),
            _ => brokers.signal(id, Signal::SIGSTOP),
        }
        std::thread::sleep(hold);
        let brokers = self
            .kafka
            .brokers_mut()
            .expect("the scenario's own brokers");
        let desc = match kind {
            Nemesis::KillBroker => {
                brokers.restart(id);
                format!("kill -9 broker {id}")
            }
            Nemesis::PartitionBroker => {
                let broken = brokers.heal(id);
                format!("broker {id} cut off from the workers ({broken} connections broken so far)")
            }
            _ => {
                brokers.signal(id, Signal::SIGCONT);
                format!("pause broker {id}")
            }
        };
        say(format!(
            "NEMESIS {desc}: lasted {} ms",
            t0.elapsed().as_millis()
        ));
        self.faults.push(desc);
    }

    fn round(&mut self, kind: Nemesis) {
        if matches!(kind, Nemesis::Wipe | Nemesis::Rollback) {
            return self.disk_round(kind);
        }
        if kind == Nemesis::BigConfig {
            return self.big_round();
        }
        if kind == Nemesis::RollingRestart {
            return self.rolling_round();
        }
        if kind == Nemesis::LeaderChanges {
            return self.leader_round();
        }
        if kind == Nemesis::ShortFaults {
            return self.pause_round();
        }
        if kind.broker() {
            return self.broker_round(kind);
        }
        let running = live(self.cluster, &self.removed);
        let victim = if kind.targets_leader() {
            leader(self.cluster, &self.probe, &running)
        } else {
            None
        };
        let victim = match victim {
            Some(v) => v,
            None => *self.rng.pick(&running).expect("a running node"),
        };
        let held =
            sink_workers(self.cluster, &self.probe, &running).contains(&api(self.cluster, victim));
        let hold = Duration::from_millis(self.rng.between(5000, 8000));
        let t0 = Instant::now();
        let mut target = victim;
        match kind {
            Nemesis::KillRandom | Nemesis::KillLeader => self.cluster.kill9(victim),
            Nemesis::Pause => self.cluster.signal(victim, Signal::SIGSTOP),
            Nemesis::Restart => {
                self.cluster.stop(victim);
                self.cluster.start(victim);
            }
            Nemesis::PartitionMajority | Nemesis::PartitionLeader => self.cluster.isolate(victim),
            Nemesis::Membership => {
                target = self.next_id;
                self.next_id += 1;
                self.cluster.configure_extra(target);
                self.cluster.start(target);
                let via = leader(self.cluster, &self.probe, &running).unwrap_or(victim);
                wait_for("the new node to answer", BOOT, || {
                    self.cluster.status(target).map(|_| ())
                });
                self.cluster.add_node(via, target);
            }
            // Rounds of their own (see `round`); combined is drawn into single faults.
            _ => {
                unreachable!(
                    "disk faults and the big config have their rounds; combined is drawn into \
                     single faults"
                )
            }
        }
        let desc = match kind {
            Nemesis::KillRandom | Nemesis::KillLeader => format!("kill -9 {victim}"),
            Nemesis::Pause => format!("pause {victim}"),
            Nemesis::Restart => format!("restart {victim}"),
            Nemesis::PartitionMajority | Nemesis::PartitionLeader => format!("isolate {victim}"),
            Nemesis::Membership => format!("add {target}, remove {target}"),
            // Rounds of their own (see `round`); combined is drawn into single faults.
            _ => {
                unreachable!()
            }
        };
        // Until the hold ends: when did the sink's tasks run again, away from a displaced victim?
        let others: Vec<u64> = live(self.cluster, &self.removed)
            .into_iter()
            .filter(|id| !kind.displaces() || *id != victim)
            .collect();
        let workers: BTreeSet<String> = others.iter().map(|id| api(self.cluster, *id)).collect();
        // The fault lasts its hold time, and beyond it until the sink's tasks run again (at most
        // RECOVERY), so that every fault is measured and the next starts from a settled cluster.
        let mut recovered = None;
        loop {
            if t0.elapsed() >= hold && (recovered.is_some() || t0.elapsed() >= RECOVERY) {
                break;
            }
            if recovered.is_none()
                && settled(
                    self.cluster,
                    &self.probe,
                    &others[..1.min(others.len())],
                    &[SINK.to_string()],
                    &workers,
                )
                .is_empty()
            {
                recovered = Some(t0.elapsed());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if kind.displaces() && held {
            self.failovers.push(recovered);
        }
        match kind {
            Nemesis::KillRandom | Nemesis::KillLeader => self.cluster.start(victim),
            Nemesis::Pause => self.cluster.signal(victim, Signal::SIGCONT),
            Nemesis::Restart => {}
            Nemesis::PartitionMajority | Nemesis::PartitionLeader => self.cluster.heal(),
            Nemesis::Membership => {
                let via = live(self.cluster, &self.removed)
                    .into_iter()
                    .find(|id| *id != target)
                    .expect("a node to remove through");
                let id = target.to_string();
                self.cluster
                    .json(via, &["cluster", "remove-node", "--id", &id]);
                self.removed.insert(target);
                self.cluster.stop(target);
            }
            // Rounds of their own (see `round`); combined is drawn into single faults.
            _ => {
                unreachable!()
            }
        }
        say(format!(
            "NEMESIS {desc}: lasted {} ms{}",
            t0.elapsed().as_millis(),
            match (held && kind.displaces(), recovered) {
                (true, Some(t)) =>
                    format!(", its sink tasks ran elsewhere after {} ms", t.as_millis()),
                (true, None) => format!(
                    ", its sink tasks did not run elsewhere within {} s",
                    RECOVERY.as_secs()
                ),
                _ => String::new(),
            }
        ));
        self.faults.push(desc);
    }
}

/// Run a scenario and check what it recorded.
pub fn run(s: &Scenario) -> Summary {
    let begun = Instant::now();
    say(format!("SCENARIO {} starts", s.label()));
    let mut rng = Rng::new(s.seed);
    let topics = [(TOPIC, s.partitions), (IDLE_TOPIC, 1), (IDLE_DLQ, 1)];
    let mut kafka = if s.nemesis.needs_three_brokers() {
        Kafka::three_proxied(&topics)
    } else {
        Kafka::start(&topics)
    };
    let planned = s.nemesis.planned();
    let defaults = Settings::default();
    let settings = Settings {
        kafka: Some(kafka.for_workers().to_string()),
        proxied: true,
        disable_lease: !s.lease,
        // The whole log stays: the single-owner checker replays it from the first entry.
        snapshot_logs: 10_000_000,
        logs_to_keep: 10_000_000,
        // Planned changes run with Kafka Connect's default offset flush and Ferry's default
        // worker timeout: a task restarted without its final commit writes a minute again.
        offset_flush_ms: if planned {
            60_000
        } else {
            defaults.offset_flush_ms
        },
        worker_timeout_ms: if planned {
            5000
        } else {
            defaults.worker_timeout_ms
        },
        limits: if s.nemesis == Nemesis::BigConfig {
            vec![("max_tasks_per_connector", s.big_tasks.max(s.tasks) as u64)]
        } else {
            Vec::new()
        },
        ..defaults
    };
    let mut cluster = Cluster::new(3, settings);
    cluster.start_all();
    let first_leader = cluster.wait_leader(BOOT);
    for id in 1..=3 {
        wait_for("every worker to register", BOOT, || {
            cluster
                .log_text(id)
                .contains("registered as a worker")
                .then_some(())
        });
    }
    let output = s.sink.output(&cluster);
    let config: Vec<(&str, String)> = s.sink.config(&output, s.tasks);
    let pairs: Vec<(&str, &str)> = config.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let file = cluster.connector_file(SINK, &pairs);
    cluster.cli(
        first_leader,
        &["connectors", "create", "-f", &file.to_string_lossy()],
    );
    let probe = Probe::new();
    let originals: Vec<u64> = vec![1, 2, 3];
    let addrs: Vec<String> = originals.iter().map(|id| api(&cluster, *id)).collect();
    let all_workers: BTreeSet<String> = addrs.iter().cloned().collect();
    wait_for("the sink's tasks running", BOOT, || {
        settled(
            &cluster,
            &probe,
            &originals,
            &[SINK.to_string()],
            &all_workers,
        )
        .is_empty()
        .then_some(())
    });

    // The workload.
    let started = Instant::now();
    let until = started + s.duration;
    let producer = producer(&kafka.bootstrap, TOPIC, s.partitions, s.rate);
    let poller = offset_poller(addrs.clone(), SINK, rng.next_u64());
    let sampler = FreezeSampler::start(cluster.processes.clone(), ANSWER_WITHIN);
    let history: History = Arc::new(Mutex::new(Vec::new()));
    let keys: Vec<String> = (0..3).map(|k| format!("k{k}")).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a client runtime");
    let plan = ClientPlan {
        id: 0,
        addrs: addrs.clone(),
        keys,
        topic: IDLE_TOPIC.to_string(),
        started,
        until,
        think: Duration::from_millis(100),
        seed: rng.next_u64(),
        hold: Arc::new(WriteHold::default()),
    };
    let clients = spawn_config_clients(&runtime, s.clients, &plan, &history);

    // The faults, one after another, each healed before the next.
    let mut nemeses = Nemeses {
        cluster: &mut cluster,
        kafka: &mut kafka,
        probe: Probe::new(),
        rng: rng.fork(),
        removed: BTreeSet::new(),
        next_id: 4,
        faults: Vec::new(),
        failovers: Vec::new(),
        rejoins: Vec::new(),
        big_tasks: s.big_tasks,
        big: Vec::new(),
        planned: Vec::new(),
        planned_ran: false,
        leader_stops: s.leader_stops,
        hold: plan.hold.clone(),
    };
    loop {
        let quiet = Duration::from_millis(nemeses.rng.between(1000, 3000));
        std::thread::sleep(quiet);
        if started.elapsed() >= s.duration {
            break;
        }
        let kind = s.nemesis.draw(&mut nemeses.rng);
        nemeses.round(kind);
    }
    let (faults, failovers, removed, rejoins, big, planned) = (
        nemeses.faults,
        nemeses.failovers,
        nemeses.removed,
        nemeses.rejoins,
        nemeses.big,
        nemeses.planned_ran.then_some(nemeses.planned),
    );
    let healed = Instant::now();
    for c in clients {
        let _ = runtime.block_on(c);
    }
    let produced = producer.finish();
    say(format!(
        "WORKLOAD: {} records acknowledged ({} not), faults over",
        produced.acked.len(),
        produced.failed
    ));

    // Convergence: every connector's tasks RUNNING at their assigned generation on live workers,
    // and every live node reporting the same assignment.
    let alive = live(&cluster, &removed);
    let workers: BTreeSet<String> = alive.iter().map(|id| api(&cluster, *id)).collect();
    let deadline = Duration::from_secs(90);
    let convergence = loop {
        let connectors = alive
            .iter()
            .find_map(|id| probe.connectors(&api(&cluster, *id)))
            .unwrap_or_default();
        let problems = settled(&cluster, &probe, &alive, &connectors, &workers);
        if problems.is_empty() {
            break Ok(healed.elapsed());
        }
        if healed.elapsed() > deadline {
            break Err(problems);
        }
        std::thread::sleep(Duration::from_millis(250));
    };

    // Drain: wait (bounded) for every acknowledged record to reach the sink.
    let wanted: BTreeSet<u64> = produced.acked.iter().map(|p| p.id).collect();
    let drain = Instant::now();
    let mut delivered = s.sink.delivered(&cluster, &output);
    while drain.elapsed() < Duration::from_secs(60) {
        let got: BTreeSet<u64> = delivered.iter().copied().collect();
        if wanted.is_subset(&got) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        delivered = s.sink.delivered(&cluster, &output);
    }
    let offsets_read = poller.finish();
    let samples = sampler.finish();
    let delivery = checkers::delivery(&produced.acked, &delivered);

    let panics = cluster.panics();
    let watchdog = cluster.lines_with("watchdog: the node cannot go on");
    // The log: stop every node, then replay the longest committed log.
    for id in cluster.running() {
        cluster.stop(id);
    }
    let logs: Vec<Vec<ferry_meta::types::Entry>> = cluster
        .nodes
        .values()
        .map(|n| {
            ferry_meta::store::read_committed_log(&n.data_dir.join("raft"))
                .unwrap_or_else(|e| panic!("cannot read node {}'s log: {e}", n.id))
        })
        .collect();
    let longest = logs
        .iter()
        .max_by_key(|l| l.len())
        .cloned()
        .unwrap_or_default();
    let replayed = replay(&longest, SINK, TOPIC);
    let ownership_violations = checkers::single_owner(&replayed.effects);
    let log_offsets_backwards = checkers::offsets_monotonic(&replayed.offsets);
    let read_offsets_backwards = checkers::offsets_monotonic(&offsets_read);

    let history = history.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let non_linearizable = check(&ConfigRegister, &history);
    if !ownership_violations.is_empty() || !log_offsets_backwards.is_empty() {
        let path = std::env::temp_dir().join(format!(
            "ferry-jepsen-{}.trace",
            s.label().replace(['/', ' '], "-")
        ));
        match std::fs::write(&path, super::replay::trace(&longest, SINK, TOPIC)) {
            Ok(()) => say(format!(
                "violations {ownership_violations:?}, offsets backwards {log_offsets_backwards:?}: the log is traced in {}",
                path.display()
            )),
            Err(e) => say(format!("cannot write the trace to {}: {e}", path.display())),
        }
    }
    let summary = Summary {
        label: s.label(),
        // Planned restarts write nothing twice, whatever the sink.
        exactly_once: s.sink.exactly_once() || s.nemesis.writes_nothing_twice(),
        faults,
        delivery,
        replayed,
        ownership_violations,
        log_offsets_backwards,
        read_offsets_backwards,
        offset_reads: offsets_read.len(),
        config_ops: history.len(),
        config_unknown: history.iter().filter(|o| o.ret.is_none()).count(),
        non_linearizable,
        convergence,
        failovers,
        rejoins,
        panics,
        samples,
        watchdog,
        big,
        planned,
        elapsed: begun.elapsed(),
    };
    say(summary.to_string());
    if !summary.passed() {
        cluster.keep_logs();
    }
    summary
}
