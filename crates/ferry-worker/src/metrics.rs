//! What a worker counts, kept per node in one Prometheus registry (`prometheus-client`):
//! Kafka Connect's worker and task metrics, under the names Strimzi's JMX exporter rules give
//! them (`kafka_connect_<group>_<attribute>`, labels `connector` and `task`), as gauges like
//! theirs. A task's series exist while it runs on this node, as Kafka Connect's metric groups
//! do, and start at zero with each start. The states of the units a node runs are read from
//! its applied state at each scrape ([`UnitStatus`]).

mod state_time;
mod windowed;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ferry_connect::plugin::{self, PluginDesc, PluginKind};
use ferry_connect::task::CommitTimes;
use ferry_meta::state::RunState;
use ferry_meta::store::StateReader;
use ferry_meta::{ClusterState, NodeId};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// One count that goes up and down (tasks running), or a value set (a timestamp).
pub type Count = Gauge<i64, AtomicI64>;

/// A count that only goes up: Kafka Connect's `-total` attributes, which Strimzi's rules
/// export as counters. Its series is named with `_total`, which the encoder appends.
pub type Total = Counter<u64, AtomicU64>;

/// The name to register a series under: a counter's without the `_total` its encoder adds.
fn family_name(series: &str) -> &str {
    series.strip_suffix("_total").unwrap_or(series)
}

/// The labels of a task's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskLabels {
    connector: String,
    task: String,
}

/// Declares the per-task counts once: the field, the series name and its meaning.
macro_rules! task_metrics {
    ($($field:ident: $kind:ty = $name:literal, $help:literal;)*) => {
        /// A task's counts, updated by its loop, pipeline and reporter. A default one counts
        /// into nothing registered (unit tests).
        #[derive(Clone, Debug, Default)]
        pub struct TaskMetrics {
            $(#[doc = $help] pub $field: $kind,)*
            /// Its windowed measures (Kafka Connect's `-rate`, `-avg` and `-max`).
            pub windows: TaskWindows,
            /// A sink task's commits to its destination: its connector's histogram.
            pub commit_times: CommitTimer,
        }

        /// Every task's series of one count each.
        #[derive(Debug, Default)]
        struct TaskFamilies {
            $($field: Family<TaskLabels, $kind>,)*
        }

        impl TaskFamilies {
            fn register(&self, registry: &mut Registry) {
                $(registry.register(family_name($name), $help, self.$field.clone());)*
            }

            /// A task's counts: those of its kind's groups registered, the others counting
            /// into nothing.
            fn of(
                &self,
                labels: &TaskLabels,
                kind: PluginKind,
                windows: TaskWindows,
                commit_times: CommitTimer,
            ) -> TaskMetrics {
                TaskMetrics {
                    $($field: match shown_for($name, kind) {
                        true => self.$field.get_or_create_owned(labels),
                        false => Default::default(),
                    },)*
                    windows,
                    commit_times,
                }
            }

            fn remove(&self, labels: &TaskLabels) {
                $(self.$field.remove(labels);)*
            }
        }
    };
}

task_metrics! {
    sink_record_read: Total = "kafka_connect_sink_task_sink_record_read_total",
        "Records read from Kafka by this sink task (before transforms).";
    sink_record_send: Total = "kafka_connect_sink_task_sink_record_send_total",
        "Records output from the transforms and put to this sink task.";
    sink_partition_count: Count = "kafka_connect_sink_task_partition_count",
        "Topic partitions assigned to this sink task.";
    sink_offset_commit_completion: Total = "kafka_connect_sink_task_offset_commit_completion_total",
        "Offset commits of this sink task that completed.";
    sink_offset_commit_skip: Total = "kafka_connect_sink_task_offset_commit_skip_total",
        "Offset commits of this sink task answered too late and ignored (none in Ferry: a commit is answered before the next is made).";
    sink_offset_commit_seq_no: Count = "kafka_connect_sink_task_offset_commit_seq_no",
        "The sequence number of this sink task's last offset commit.";
    sink_record_active: Count = "kafka_connect_sink_task_sink_record_active_count",
        "Records read from Kafka by this sink task and not yet committed.";
    source_record_poll: Total = "kafka_connect_source_task_source_record_poll_total",
        "Records polled from this source task (before transforms).";
    source_record_write: Total = "kafka_connect_source_task_source_record_write_total",
        "Records output from the transforms and written to Kafka by this source task.";
    source_record_active: Count = "kafka_connect_source_task_source_record_active_count",
        "Records produced by this source task and not yet acknowledged by Kafka.";
    record_failures: Count = "kafka_connect_task_error_total_record_failures",
        "Record processing failures in this task.";
    record_errors: Count = "kafka_connect_task_error_total_record_errors",
        "Records that failed in this task (after retries, if any).";
    records_skipped: Count = "kafka_connect_task_error_total_records_skipped",
        "Records skipped because of errors (errors.tolerance=all).";
    retries: Count = "kafka_connect_task_error_total_retries",
        "Operations of this task retried after a retriable failure.";
    errors_logged: Count = "kafka_connect_task_error_total_errors_logged",
        "Errors logged (errors.log.enable=true).";
    dlq_requests: Count = "kafka_connect_task_error_deadletterqueue_produce_requests",
        "Records sent to the dead letter queue.";
    dlq_failures: Count = "kafka_connect_task_error_deadletterqueue_produce_failures",
        "Records the dead letter queue failed to take.";
    last_error_timestamp: Count = "kafka_connect_task_error_last_error_timestamp",
        "When this task last met an error (milliseconds since the epoch; 0: never).";
}

/// Whether a task of `kind` has the series `name`, as Kafka Connect's tasks have their
/// groups: sink-task-metrics for sinks, source-task-metrics for sources, the others for both.
fn shown_for(name: &str, kind: PluginKind) -> bool {
    if name.starts_with("kafka_connect_sink_task_") {
        kind == PluginKind::Sink
    } else if name.starts_with("kafka_connect_source_task_") {
        kind == PluginKind::Source
    } else {
        true
    }
}

/// The upper bounds (seconds) of the sink commit histogram's buckets: 1 ms, doubling, to
/// about 16 s.
const COMMIT_BUCKETS: [f64; 15] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192, 16.384,
];

fn commit_histogram() -> Histogram {
    Histogram::new(COMMIT_BUCKETS.iter().copied())
}

/// Each connector's sink commit times on this node.
type CommitFamily = Family<ConnectorLabels, Histogram, fn() -> Histogram>;

/// A sink task's commit times (its connector's histogram); a default one keeps nothing.
#[derive(Clone, Debug, Default)]
pub struct CommitTimer(Option<Histogram>);

impl CommitTimes for CommitTimer {
    fn took(&self, time: std::time::Duration) {
        if let Some(histogram) = &self.0 {
            histogram.observe(time.as_secs_f64());
        }
    }
}

/// A worker's starts of one kind of unit (connector instances or tasks), as Kafka Connect's
/// connect-worker-metrics count them: each start attempted, and its outcome at the unit's first
/// report — a state it runs in (running, paused, stopped) or a failure.
#[derive(Clone, Debug, Default)]
pub struct Starts {
    attempts: Total,
    successes: Total,
    failures: Total,
    /// The outcomes (1 a success, 0 a failure) of the sample window.
    outcomes: Windowed,
    /// Successes and failures as fractions of the window's outcomes, set at each scrape.
    success_ratio: Real,
    failure_ratio: Real,
}

/// A real-valued gauge (a fraction, a rate, a time).
type Real = Gauge<f64, std::sync::atomic::AtomicU64>;

impl Starts {
    /// Register under `kafka_connect_worker_<kind>_startup_…`.
    fn register(&self, registry: &mut Registry, kind: &str) {
        let name = |what: &str| format!("kafka_connect_worker_{kind}_startup_{what}");
        // Counters: their encoder adds `_total`.
        registry.register(
            name("attempts"),
            format!("Starts of a {kind} this worker attempted."),
            self.attempts.clone(),
        );
        registry.register(
            name("success"),
            format!("Starts of a {kind} that succeeded."),
            self.successes.clone(),
        );
        registry.register(
            name("failure"),
            format!("Starts of a {kind} that failed."),
            self.failures.clone(),
        );
        registry.register(
            name("success_percentage"),
            format!(
                "The fraction of this worker's {kind} starts in the sample window that succeeded."
            ),
            self.success_ratio.clone(),
        );
        registry.register(
            name("failure_percentage"),
            format!(
                "The fraction of this worker's {kind} starts in the sample window that failed."
            ),
            self.failure_ratio.clone(),
        );
    }

    /// A unit starting: its outcome is counted once, at its first report.
    pub fn attempt(&self) -> Startup {
        self.attempts.inc();
        Startup {
            starts: Some(self.clone()),
            decided: Default::default(),
        }
    }

    /// The success and failure percentages as of `now`: the frequencies of the outcomes of
    /// the sample window, as Kafka Connect's (0 when there were none).
    fn measure(&self, now: Instant) {
        let Some(window) = &self.outcomes.0 else {
            return;
        };
        let window = lock(window);
        self.success_ratio.set(window.frequency(now, true));
        self.failure_ratio.set(window.frequency(now, false));
    }
}

/// One unit's start, decided by its first report. A default one counts into nothing.
#[derive(Clone, Debug, Default)]
pub struct Startup {
    starts: Option<Starts>,
    decided: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Startup {
    /// The unit reported `state`: the first state it runs in, or a failure, decides its start.
    pub fn reported(&self, state: RunState) {
        let Some(starts) = &self.starts else {
            return;
        };
        let (outcome, value) = match state {
            RunState::Running | RunState::Paused | RunState::Stopped => (&starts.successes, 1.0),
            RunState::Failed => (&starts.failures, 0.0),
            RunState::Unassigned | RunState::Restarting => return,
        };
        if !self.decided.swap(true, std::sync::atomic::Ordering::AcqRel) {
            outcome.inc();
            starts.outcomes.record(value);
        }
    }
}

/// What a node that measures nothing answers a request for its series.
pub const METRICS_OFF: &str =
    "this node's metrics are off ([metrics] enabled = false in its cluster.toml)";

/// What a node measures: `[metrics]` in `cluster.toml`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsOptions {
    /// Measure the worker and its tasks and serve the series (`GET /metrics`). Off, tasks
    /// measure nothing (their counts go nowhere) and `GET /metrics` answers 404.
    pub enabled: bool,
    /// Each sink task's lag per partition (`ferry_sink_partition_lag`): a series for every
    /// partition of every sink task, so off unless asked for.
    pub partition_lag: bool,
}

impl Default for MetricsOptions {
    fn default() -> Self {
        MetricsOptions {
            enabled: true,
            partition_lag: false,
        }
    }
}

/// The run of a task on this node that its series are of.
#[derive(Clone, Debug)]
struct Run {
    generation: u64,
    kind: PluginKind,
    windows: TaskWindows,
}

/// The runs of the tasks on this node.
type Runs = HashMap<TaskLabels, Run>;

/// A node's metrics: the worker's own and every task's it runs.
#[derive(Debug)]
pub struct WorkerMetrics {
    registry: Registry,
    /// Connectors (connector instances) running on this worker.
    pub connector_count: Count,
    /// Tasks running on this worker.
    pub task_count: Count,
    /// Connector instances started on this worker.
    pub connector_starts: Starts,
    /// Tasks started on this worker.
    pub task_starts: Starts,
    tasks: TaskFamilies,
    /// The measures read at each scrape of the tasks running here.
    windows: Arc<Mutex<Runs>>,
    /// How long each connector's sink tasks took to commit to their destination.
    commit_times: CommitFamily,
    options: MetricsOptions,
}

impl Default for WorkerMetrics {
    /// Without the units' states (unit tests).
    fn default() -> Self {
        Self::build(None, MetricsOptions::default())
    }
}

impl WorkerMetrics {
    /// A node's metrics, with the states of the units `worker` runs read from `state` at each
    /// scrape (and their connectors described by `plugins`).
    pub fn new(
        state: StateReader,
        worker: NodeId,
        plugins: Arc<Vec<PluginDesc>>,
        options: MetricsOptions,
    ) -> Self {
        let status = UnitStatus {
            state,
            worker,
            plugins,
        };
        Self::build(Some(status), options)
    }

    fn build(status: Option<UnitStatus>, options: MetricsOptions) -> Self {
        let mut registry = Registry::default();
        if let Some(status) = status {
            registry.register_collector(Box::new(status));
        }
        let connector_count = Count::default();
        let task_count = Count::default();
        registry.register(
            "kafka_connect_worker_connector_count",
            "Connectors run in this worker.",
            connector_count.clone(),
        );
        registry.register(
            "kafka_connect_worker_task_count",
            "Tasks run in this worker.",
            task_count.clone(),
        );
        let (connector_starts, task_starts) = (Starts::default(), Starts::default());
        connector_starts.register(&mut registry, "connector");
        task_starts.register(&mut registry, "task");
        let tasks = TaskFamilies::default();
        tasks.register(&mut registry);
        let windows = Arc::<Mutex<Runs>>::default();
        registry.register_collector(Box::new(WindowSeries(windows.clone())));
        let commit_times = CommitFamily::new_with_constructor(commit_histogram);
        registry.register(
            "ferry_sink_commit_seconds",
            "How long the sink tasks of each connector on this node took to commit to their destination (a database transaction, a set of files).",
            commit_times.clone(),
        );
        WorkerMetrics {
            registry,
            connector_count,
            task_count,
            connector_starts,
            task_starts,
            tasks,
            windows,
            commit_times,
            options,
        }
    }

    /// Whether the node measures and serves its series.
    pub fn enabled(&self) -> bool {
        self.options.enabled
    }

    /// Add a series kept elsewhere (Ferry's own: the scheduler's fail-over times).
    pub fn register(
        &mut self,
        name: &str,
        help: &str,
        metric: impl prometheus_client::registry::Metric,
    ) {
        self.registry.register(name, help, metric);
    }

    /// Add series read at each scrape (Ferry's own: its Raft's).
    pub fn register_collector(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    /// The counts of a run of a task of `kind` starting on this node (under `generation`),
    /// from zero.
    pub fn task(
        &self,
        connector: &str,
        task: u32,
        kind: PluginKind,
        generation: u64,
    ) -> TaskMetrics {
        if !self.options.enabled {
            return TaskMetrics {
                windows: TaskWindows::off(),
                ..Default::default()
            };
        }
        let labels = labels(connector, task);
        self.tasks.remove(&labels);
        let windows = TaskWindows {
            lags: (self.options.partition_lag && kind == PluginKind::Sink).then(Arc::default),
            ..Default::default()
        };
        let run = Run {
            generation,
            kind,
            windows: windows.clone(),
        };
        lock(&self.windows).insert(labels.clone(), run);
        let commit_times = (kind == PluginKind::Sink).then(|| {
            let connector = ConnectorLabels {
                connector: connector.to_string(),
            };
            self.commit_times.get_or_create(&connector).clone()
        });
        self.tasks
            .of(&labels, kind, windows, CommitTimer(commit_times))
    }

    /// The run of a task under `generation` stopped on this node: its series go, unless a
    /// newer run of the task has them.
    pub fn forget(&self, connector: &str, task: u32, generation: u64) {
        let labels = labels(connector, task);
        let mut running = lock(&self.windows);
        // A newer run of the task started here before this one ended: the series are its.
        if running
            .get(&labels)
            .is_some_and(|run| run.generation != generation)
        {
            return;
        }
        self.tasks.remove(&labels);
        running.remove(&labels);
        // The connector's commit times go with its last task here.
        if !running.keys().any(|l| l.connector == connector) {
            self.commit_times.remove(&ConnectorLabels {
                connector: connector.to_string(),
            });
        }
    }

    /// Every series, in Prometheus' text format.
    pub fn render(&self) -> String {
        let now = Instant::now();
        self.connector_starts.measure(now);
        self.task_starts.measure(now);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// The states of the units one worker runs, as Kafka Connect's connector-metrics and
/// connector-task-metrics (`status`) and its per-connector connect-worker-metrics (task counts
/// by state) show them, under Strimzi's names; read from the node's applied state at each
/// scrape, so they never disagree with the status API.
struct UnitStatus {
    state: StateReader,
    worker: NodeId,
    plugins: Arc<Vec<PluginDesc>>,
}

impl std::fmt::Debug for UnitStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnitStatus")
            .field("worker", &self.worker)
            .finish()
    }
}

impl Collector for UnitStatus {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let families = StatusFamilies::of(&self.state.read().state, self.worker, &self.plugins);
        families.encode(encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectorStatusLabels {
    connector: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TaskStatusLabels {
    connector: String,
    task: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectorLabels {
    connector: String,
}

/// Which of a connector's tasks on a worker a count counts.
#[derive(Clone, Copy)]
enum Counted {
    All,
    In(RunState),
    /// Kafka Connect's `destroyed`, a state Ferry's tasks are never in.
    None,
}

/// Kafka Connect's task counts per connector on a worker: what each counts, its series' name
/// and meaning.
const TASK_COUNTS: &[(Counted, &str, &str)] = &[
    (
        Counted::All,
        "kafka_connect_worker_connector_total_task_count",
        "Tasks of the connector on this worker.",
    ),
    (
        Counted::In(RunState::Running),
        "kafka_connect_worker_connector_running_task_count",
        "Running tasks of the connector on this worker.",
    ),
    (
        Counted::In(RunState::Paused),
        "kafka_connect_worker_connector_paused_task_count",
        "Paused tasks of the connector on this worker.",
    ),
    (
        Counted::In(RunState::Failed),
        "kafka_connect_worker_connector_failed_task_count",
        "Failed tasks of the connector on this worker.",
    ),
    (
        Counted::In(RunState::Unassigned),
        "kafka_connect_worker_connector_unassigned_task_count",
        "Unassigned tasks of the connector on this worker.",
    ),
    (
        Counted::In(RunState::Restarting),
        "kafka_connect_worker_connector_restarting_task_count",
        "Restarting tasks of the connector on this worker.",
    ),
    (
        Counted::None,
        "kafka_connect_worker_connector_destroyed_task_count",
        "Destroyed tasks of the connector on this worker (none in Ferry).",
    ),
];

/// The labels of a series that describes a connector: its name and one fact.
type ConnectorInfoLabels = [(&'static str, String); 2];

/// One fact of a connector's plugin.
type Fact = fn(&PluginDesc) -> &'static str;

/// Kafka Connect's connector-metrics that describe a connector instance: the series (1, the
/// fact as a label), the label, its meaning, and the fact, from the connector's plugin.
const CONNECTOR_INFO: &[(&str, &str, &str, Fact)] = &[
    (
        "kafka_connect_connector_connector_class",
        "connector_class",
        "The class of each connector instance this worker runs (1, the class as a label).",
        |p| p.class,
    ),
    (
        "kafka_connect_connector_connector_type",
        "connector_type",
        "Whether each connector instance this worker runs is a sink or a source (1, as a label).",
        |p| p.kind().as_str(),
    ),
    (
        "kafka_connect_connector_connector_version",
        "connector_version",
        "The version of each connector instance's plugin (1, the version as a label).",
        |p| p.version,
    ),
];

/// The status series of one worker's units, built from a state.
#[derive(Default)]
struct StatusFamilies {
    connectors: Family<ConnectorStatusLabels, Count>,
    /// One family per [`CONNECTOR_INFO`] entry, in its order.
    info: Vec<Family<ConnectorInfoLabels, Count>>,
    tasks: Family<TaskStatusLabels, Count>,
    /// One family per [`TASK_COUNTS`] entry, in its order.
    counts: Vec<Family<ConnectorLabels, Count>>,
    /// Ferry's own: each task's generation, and the commits refused for a stale one.
    generations: Family<TaskLabels, Count>,
    fenced: Family<TaskLabels, Total>,
}

/// Kafka Connect's status as its metrics spell it (`running`, …).
fn status_label(state: RunState) -> String {
    state.as_str().to_ascii_lowercase()
}

impl StatusFamilies {
    /// The series of the units whose latest status `worker` reported or was assigned.
    fn of(state: &ClusterState, worker: NodeId, plugins: &[PluginDesc]) -> Self {
        let families = StatusFamilies {
            counts: TASK_COUNTS.iter().map(|_| Family::default()).collect(),
            info: CONNECTOR_INFO.iter().map(|_| Family::default()).collect(),
            ..Default::default()
        };
        for (name, status) in &state.status {
            if status.connector.worker == Some(worker) {
                families
                    .connectors
                    .get_or_create(&ConnectorStatusLabels {
                        connector: name.clone(),
                        status: status_label(status.connector.state),
                    })
                    .set(1);
                let class = state
                    .connectors
                    .get(name)
                    .and_then(|c| c.config.get("connector.class"));
                if let Some(plugin) = class.and_then(|class| plugin::find(plugins, class)) {
                    for ((_, label, _, fact), family) in CONNECTOR_INFO.iter().zip(&families.info) {
                        let labels = [
                            ("connector", name.clone()),
                            (*label, fact(plugin).to_string()),
                        ];
                        family.get_or_create(&labels).set(1);
                    }
                }
            }
            let mine: Vec<_> = status
                .tasks
                .iter()
                .filter(|(_, t)| t.worker == Some(worker))
                .collect();
            if mine.is_empty() {
                continue;
            }
            let connector = ConnectorLabels {
                connector: name.clone(),
            };
            for ((counted, _, _), family) in TASK_COUNTS.iter().zip(&families.counts) {
                let n = match counted {
                    Counted::All => mine.len(),
                    Counted::In(s) => mine.iter().filter(|(_, t)| t.state == *s).count(),
                    Counted::None => 0,
                };
                family.get_or_create(&connector).set(n as i64);
            }
            for (task, status) in mine {
                let labels = labels(name, *task);
                families
                    .generations
                    .get_or_create(&labels)
                    .set(i64::try_from(status.generation).unwrap_or(i64::MAX));
                let fenced = state
                    .fenced
                    .get(name)
                    .and_then(|tasks| tasks.get(task))
                    .map_or(0, |f| f.count);
                families.fenced.get_or_create(&labels).inc_by(fenced);
                families
                    .tasks
                    .get_or_create(&TaskStatusLabels {
                        connector: name.clone(),
                        task: task.to_string(),
                        status: status_label(status.state),
                    })
                    .set(1);
            }
        }
        families
    }

    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        encode_metric(
            &mut encoder,
            "kafka_connect_connector_status",
            "The status of each connector instance this worker runs (1, its state as a label).",
            &self.connectors,
        )?;
        for ((name, _, help, _), family) in CONNECTOR_INFO.iter().zip(&self.info) {
            encode_metric(&mut encoder, name, help, family)?;
        }
        encode_metric(
            &mut encoder,
            "kafka_connect_connector_task_status",
            "The status of each task this worker runs (1, its state as a label).",
            &self.tasks,
        )?;
        for ((_, name, help), family) in TASK_COUNTS.iter().zip(&self.counts) {
            encode_metric(&mut encoder, name, help, family)?;
        }
        encode_metric(&mut encoder, "ferry_task_generation", "The generation of each task this worker runs (bumped at every move, restart and config change).", &self.generations)?;
        encode_metric(
            &mut encoder,
            family_name("ferry_task_fenced_commits_total"),
            "Commits refused for the task because they came with a stale generation (a zombie's).",
            &self.fenced,
        )?;
        Ok(())
    }
}

/// Encode one metric (a family, a histogram, a gauge) under `name` with its meaning, in a
/// collector.
pub fn encode_metric(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let descriptor = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(descriptor)
}

/// Encode series of one value each, without labels: (name, meaning, value). For collectors of
/// values read at each scrape (Ferry's Raft and lease series).
pub fn encode_gauges(
    encoder: &mut DescriptorEncoder,
    gauges: &[(&str, &str, i64)],
) -> Result<(), std::fmt::Error> {
    for (name, help, value) in gauges {
        let gauge = prometheus_client::metrics::gauge::ConstGauge::new(*value);
        encode_metric(encoder, name, help, &gauge)?;
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic elsewhere leaves these measures usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One windowed measure of a task (see [`windowed`]), recorded by its loop once per batch;
/// nothing while metrics are off.
#[derive(Clone, Debug)]
pub struct Windowed(Option<Arc<Mutex<windowed::Window>>>);

impl Default for Windowed {
    fn default() -> Self {
        Windowed(Some(Arc::new(Mutex::new(windowed::Window::new(
            Instant::now(),
        )))))
    }
}

impl Windowed {
    /// A measure that records nothing (metrics off).
    fn off() -> Self {
        Windowed(None)
    }

    /// Record a value now.
    pub fn record(&self, value: f64) {
        if let Some(window) = &self.0 {
            lock(window).record(value, Instant::now());
        }
    }
}

/// A sink task's lag of each partition: (topic, partition) → records behind.
pub type Lags = BTreeMap<(String, i32), i64>;

/// A task's measures read at each scrape: its windowed ones, and the time it spent in each
/// state.
#[derive(Clone, Debug, Default)]
pub struct TaskWindows {
    /// Records read from Kafka per batch (a sink's).
    pub sink_read: Windowed,
    /// Records put to the task per batch (a sink's).
    pub sink_send: Windowed,
    /// Milliseconds each put of a batch took.
    pub put_time: Windowed,
    /// Records polled per batch (a source's).
    pub source_poll: Windowed,
    /// Records delivered to Kafka per batch (a source's).
    pub source_write: Windowed,
    /// Milliseconds each poll took.
    pub poll_time: Windowed,
    /// Records in each batch polled from a source task or read for a sink task.
    pub batch_size: Windowed,
    /// Milliseconds each offset commit took.
    pub commit_time: Windowed,
    /// Each offset commit's outcome: 1 it succeeded, 0 it failed.
    pub commit_outcome: Windowed,
    /// Each completed offset commit of a sink task (1 each).
    pub commit_completion: Windowed,
    /// Each offset commit of a sink task answered too late (none in Ferry).
    pub commit_skip: Windowed,
    /// A sink task's records read and not yet committed, at each read and commit.
    pub sink_active: Windowed,
    /// A source task's records produced and not yet acknowledged, at each send and delivery.
    pub source_active: Windowed,
    /// The time the task spent in each state it reported.
    pub states: Arc<Mutex<state_time::StateTime>>,
    /// A sink task's lag per partition (its high watermark less its next offset), kept only
    /// with `[metrics] partition_lag`.
    pub lags: Option<Arc<Mutex<Lags>>>,
}

impl TaskWindows {
    /// Measures that record nothing (metrics off).
    fn off() -> Self {
        TaskWindows {
            sink_read: Windowed::off(),
            sink_send: Windowed::off(),
            put_time: Windowed::off(),
            source_poll: Windowed::off(),
            source_write: Windowed::off(),
            poll_time: Windowed::off(),
            batch_size: Windowed::off(),
            commit_time: Windowed::off(),
            commit_outcome: Windowed::off(),
            commit_completion: Windowed::off(),
            commit_skip: Windowed::off(),
            sink_active: Windowed::off(),
            source_active: Windowed::off(),
            states: Arc::default(),
            lags: None,
        }
    }

    /// Whether a sink task's lag per partition is measured.
    pub fn measures_lag(&self) -> bool {
        self.lags.is_some()
    }

    /// A sink task's lag of each of its partitions (topic, partition, lag).
    pub fn lagging(&self, lags: impl IntoIterator<Item = (String, i32, i64)>) {
        if let Some(kept) = &self.lags {
            let mut kept = lock(kept);
            for (topic, partition, lag) in lags {
                kept.insert((topic, partition), lag);
            }
        }
    }

    /// An offset commit that started at `started` ended, well or not.
    pub fn committed(&self, started: Instant, ok: bool) {
        self.commit_time
            .record(started.elapsed().as_secs_f64() * 1000.0);
        self.commit_outcome.record(if ok { 1.0 } else { 0.0 });
    }

    /// The task reported `state`.
    pub fn entered(&self, state: RunState) {
        lock(&self.states).enter(state, Instant::now());
    }
}

/// Which of a task's windowed measures a series shows.
type Measure = fn(&TaskWindows) -> &Windowed;

/// Which view of a window a series shows.
#[derive(Clone, Copy)]
enum View {
    Rate,
    Avg,
    Max,
    /// Of a measure of outcomes (1 a success, 0 a failure): the fraction that succeeded.
    Successes,
    /// The fraction that failed.
    Failures,
}

/// Kafka Connect's windowed attributes of sink and source tasks: name, meaning, the measure
/// and the view of it.
const WINDOWED: &[(&str, &str, Measure, View)] = &[
    (
        "kafka_connect_sink_task_sink_record_read_rate",
        "Records read from Kafka per second by this sink task (before transforms).",
        |w| &w.sink_read,
        View::Rate,
    ),
    (
        "kafka_connect_sink_task_sink_record_send_rate",
        "Records output from the transforms and put to this sink task, per second.",
        |w| &w.sink_send,
        View::Rate,
    ),
    (
        "kafka_connect_sink_task_put_batch_avg_time_ms",
        "The average time in milliseconds this sink task took to put a batch.",
        |w| &w.put_time,
        View::Avg,
    ),
    (
        "kafka_connect_sink_task_put_batch_max_time_ms",
        "The longest time in milliseconds this sink task took to put a batch.",
        |w| &w.put_time,
        View::Max,
    ),
    (
        "kafka_connect_source_task_source_record_poll_rate",
        "Records polled from this source task per second (before transforms).",
        |w| &w.source_poll,
        View::Rate,
    ),
    (
        "kafka_connect_source_task_source_record_write_rate",
        "Records output from the transforms and written to Kafka per second by this source task.",
        |w| &w.source_write,
        View::Rate,
    ),
    (
        "kafka_connect_source_task_poll_batch_avg_time_ms",
        "The average time in milliseconds this source task took to poll a batch.",
        |w| &w.poll_time,
        View::Avg,
    ),
    (
        "kafka_connect_source_task_poll_batch_max_time_ms",
        "The longest time in milliseconds this source task took to poll a batch.",
        |w| &w.poll_time,
        View::Max,
    ),
    (
        "kafka_connect_connector_task_batch_size_avg",
        "The average number of records in the batches the task handled.",
        |w| &w.batch_size,
        View::Avg,
    ),
    (
        "kafka_connect_connector_task_batch_size_max",
        "The largest number of records in a batch the task handled.",
        |w| &w.batch_size,
        View::Max,
    ),
    (
        "kafka_connect_connector_task_offset_commit_avg_time_ms",
        "The average time in milliseconds the task's offset commits took.",
        |w| &w.commit_time,
        View::Avg,
    ),
    (
        "kafka_connect_connector_task_offset_commit_max_time_ms",
        "The longest time in milliseconds an offset commit of the task took.",
        |w| &w.commit_time,
        View::Max,
    ),
    (
        "kafka_connect_connector_task_offset_commit_success_percentage",
        "The fraction of the task's offset commits that succeeded (0 to 1).",
        |w| &w.commit_outcome,
        View::Successes,
    ),
    (
        "kafka_connect_connector_task_offset_commit_failure_percentage",
        "The fraction of the task's offset commits that failed (0 to 1).",
        |w| &w.commit_outcome,
        View::Failures,
    ),
    (
        "kafka_connect_sink_task_offset_commit_completion_rate",
        "Offset commits of this sink task that completed, per second.",
        |w| &w.commit_completion,
        View::Rate,
    ),
    (
        "kafka_connect_sink_task_offset_commit_skip_rate",
        "Offset commits of this sink task answered too late and ignored, per second (none in Ferry).",
        |w| &w.commit_skip,
        View::Rate,
    ),
    (
        "kafka_connect_sink_task_sink_record_active_count_avg",
        "The average number of records this sink task had read and not yet committed.",
        |w| &w.sink_active,
        View::Avg,
    ),
    (
        "kafka_connect_sink_task_sink_record_active_count_max",
        "The most records this sink task had read and not yet committed.",
        |w| &w.sink_active,
        View::Max,
    ),
    (
        "kafka_connect_source_task_source_record_active_count_avg",
        "The average number of records this source task had produced and Kafka not yet acknowledged.",
        |w| &w.source_active,
        View::Avg,
    ),
    (
        "kafka_connect_source_task_source_record_active_count_max",
        "The most records this source task had produced and Kafka not yet acknowledged.",
        |w| &w.source_active,
        View::Max,
    ),
];

/// Kafka Connect's connector-task-metrics of the time in a state: name, meaning, the state.
const STATE_RATIOS: &[(&str, &str, RunState)] = &[
    (
        "kafka_connect_connector_task_running_ratio",
        "The fraction of the time since the task's first report that it spent running.",
        RunState::Running,
    ),
    (
        "kafka_connect_connector_task_pause_ratio",
        "The fraction of the time since the task's first report that it spent paused.",
        RunState::Paused,
    ),
];

/// The windowed and state-time series of the tasks running on this node, measured at each
/// scrape; a task shows those of its kind's groups (see [`shown_for`]).
#[derive(Debug)]
struct WindowSeries(Arc<Mutex<Runs>>);

impl Collector for WindowSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let now = Instant::now();
        let tasks = lock(&self.0).clone();
        let shown = |name: &'static str| {
            tasks
                .iter()
                .filter(move |(_, run)| shown_for(name, run.kind))
                .map(|(labels, run)| (labels, &run.windows))
        };
        for (name, help, measure, view) in WINDOWED {
            let family = Family::<TaskLabels, Real>::default();
            for (labels, windows) in shown(name) {
                let Some(window) = &measure(windows).0 else {
                    continue;
                };
                let window = lock(window);
                let value = match view {
                    View::Rate => window.rate(now),
                    View::Avg => window.avg(now),
                    View::Max => window.max(now),
                    View::Successes => window.frequency(now, true),
                    View::Failures => window.frequency(now, false),
                };
                family.get_or_create(labels).set(value);
            }
            encode_metric(&mut encoder, name, help, &family)?;
        }
        for (name, help, state) in STATE_RATIOS {
            let family = Family::<TaskLabels, Real>::default();
            for (labels, windows) in shown(name) {
                let ratio = lock(&windows.states).ratio(*state, now);
                family.get_or_create(labels).set(ratio);
            }
            encode_metric(&mut encoder, name, help, &family)?;
        }
        let lags = Family::<PartitionLabels, Count>::default();
        for (labels, Run { windows, .. }) in &tasks {
            for ((topic, partition), lag) in windows.lags.iter().flat_map(|l| lock(l).clone()) {
                let partition = PartitionLabels {
                    connector: labels.connector.clone(),
                    task: labels.task.clone(),
                    topic,
                    partition: partition.to_string(),
                };
                lags.get_or_create(&partition).set(lag);
            }
        }
        encode_metric(
            &mut encoder,
            "ferry_sink_partition_lag",
            "Records of each partition a sink task reads that it has not read yet (the high watermark it last fetched less its next offset; with [metrics] partition_lag).",
            &lags,
        )
    }
}

/// The labels of a series of one partition of a task.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PartitionLabels {
    connector: String,
    task: String,
    topic: String,
    partition: String,
}

fn labels(connector: &str, task: u32) -> TaskLabels {
    TaskLabels {
        connector: connector.to_string(),
        task: task.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_s_series_live_while_it_runs_and_start_from_zero() {
        let metrics = WorkerMetrics::default();
        let t = metrics.task("sink", 0, PluginKind::Sink, 1);
        t.sink_record_read.inc_by(5);
        t.source_record_poll.inc_by(5);
        metrics.task_count.inc();
        let text = metrics.render();
        assert!(
            text.contains(
                "kafka_connect_sink_task_sink_record_read_total{connector=\"sink\",task=\"0\"} 5"
            ),
            "{text}"
        );
        assert!(text.contains("kafka_connect_worker_task_count 1"), "{text}");
        // A sink task has no source-task series (what it counts there goes nowhere).
        assert!(
            !text.contains("kafka_connect_source_task_source_record_poll_total{"),
            "{text}"
        );
        let again = metrics.task("sink", 0, PluginKind::Sink, 2);
        assert_eq!(again.sink_record_read.get(), 0, "a new start counts anew");
        // Its commits to its destination, in its connector's histogram, while a task of it
        // runs here.
        let other = metrics.task("sink", 1, PluginKind::Sink, 3);
        again.commit_times.took(std::time::Duration::from_millis(3));
        other.commit_times.took(std::time::Duration::from_millis(5));
        let count = "ferry_sink_commit_seconds_count{connector=\"sink\"} 2";
        assert!(
            metrics.render().lines().any(|l| l == count),
            "{}",
            metrics.render()
        );
        // The first run of task 0 ends after the second started: the series are the second's.
        metrics.forget("sink", 0, 1);
        assert!(metrics
            .render()
            .contains("sink_record_read_total{connector=\"sink\",task=\"0\"} 0"));
        metrics.forget("sink", 0, 2);
        assert!(!metrics.render().contains("task=\"0\""));
        assert!(metrics.render().lines().any(|l| l == count));
        metrics.forget("sink", 1, 3);
        assert!(!metrics.render().contains("connector=\"sink\""));
    }

    #[test]
    fn a_task_shows_the_windowed_measures_it_recorded_while_it_runs() {
        let metrics = WorkerMetrics::default();
        let t = metrics.task("sink", 0, PluginKind::Sink, 1);
        t.windows.entered(RunState::Running);
        t.windows.sink_read.record(300.0);
        t.windows.put_time.record(4.0);
        t.windows.put_time.record(8.0);
        let text = metrics.render();
        let value = |name: &str| {
            let prefix = format!("{name}{{connector=\"sink\",task=\"0\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok())
        };
        // 300 records over at least one 30 s window.
        let rate = value("kafka_connect_sink_task_sink_record_read_rate");
        assert!(rate.is_some_and(|r| r > 0.0 && r <= 10.0), "{text}");
        assert_eq!(
            value("kafka_connect_sink_task_put_batch_avg_time_ms"),
            Some(6.0)
        );
        assert_eq!(
            value("kafka_connect_sink_task_put_batch_max_time_ms"),
            Some(8.0)
        );
        t.windows.committed(Instant::now(), true);
        t.windows.committed(Instant::now(), false);
        let text = metrics.render();
        let value = |name: &str| {
            let prefix = format!("{name}{{connector=\"sink\",task=\"0\"}} ");
            text.lines()
                .find_map(|l| l.strip_prefix(&prefix)?.parse::<f64>().ok())
        };
        for name in [
            "kafka_connect_connector_task_offset_commit_success_percentage",
            "kafka_connect_connector_task_offset_commit_failure_percentage",
        ] {
            assert_eq!(value(name), Some(0.5), "{name}: {text}");
        }
        // Nothing recorded: a rate of 0, an average of nothing; a sink task has no source
        // series; it has run since its first report.
        assert_eq!(
            value("kafka_connect_source_task_source_record_poll_rate"),
            None
        );
        assert_eq!(
            value("kafka_connect_sink_task_sink_record_send_rate"),
            Some(0.0)
        );
        assert!(
            value("kafka_connect_sink_task_sink_record_active_count_avg").is_some_and(f64::is_nan)
        );
        assert_eq!(
            value("kafka_connect_connector_task_running_ratio"),
            Some(1.0)
        );
        assert_eq!(value("kafka_connect_connector_task_pause_ratio"), Some(0.0));
        metrics.forget("sink", 0, 1);
        assert!(!metrics.render().contains("connector=\"sink\""));
    }

    #[test]
    fn a_start_is_decided_once_by_the_units_first_report() {
        let metrics = WorkerMetrics::default();
        let ok = metrics.task_starts.attempt();
        ok.reported(RunState::Unassigned);
        ok.reported(RunState::Running);
        ok.reported(RunState::Failed);
        let failed = metrics.task_starts.attempt();
        failed.reported(RunState::Failed);
        failed.reported(RunState::Running);
        let _pending = metrics.task_starts.attempt();
        metrics
            .connector_starts
            .attempt()
            .reported(RunState::Paused);
        let text = metrics.render();
        for line in [
            "kafka_connect_worker_task_startup_attempts_total 3",
            "kafka_connect_worker_task_startup_success_total 1",
            "kafka_connect_worker_task_startup_failure_total 1",
            "kafka_connect_worker_connector_startup_attempts_total 1",
            "kafka_connect_worker_connector_startup_success_total 1",
            "kafka_connect_worker_connector_startup_failure_total 0",
            "kafka_connect_worker_connector_startup_success_percentage 1.0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        let ratio = text
            .lines()
            .find_map(|l| l.strip_prefix("kafka_connect_worker_task_startup_failure_percentage "))
            .and_then(|v| v.parse::<f64>().ok());
        assert!(ratio.is_some_and(|r| (r - 0.5).abs() < 1e-9), "{text}");
    }

    #[derive(Debug)]
    struct Fixed(ClusterState, NodeId);

    impl Collector for Fixed {
        fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let plugins = [PluginDesc {
                class: "org.example.TestSink",
                task_class: "org.example.TestSinkTask",
                aliases: &["TestSink"],
                version: "7",
                connector: |_| Err(ferry_connect::ConnectError::fatal("not built here")),
                tasks: ferry_connect::plugin::TaskFactory::Sink(|_, _| {
                    Err(ferry_connect::ConnectError::fatal("not built here"))
                }),
                config: Vec::new,
                check: None,
            }];
            StatusFamilies::of(&self.0, self.1, &plugins).encode(encoder)
        }
    }

    #[test]
    fn a_worker_shows_the_states_of_its_own_units_and_counts_its_tasks_per_connector() {
        use ferry_meta::state::{ConnectorStatus, Status};
        let on = |worker: NodeId, state: RunState| Status {
            state,
            worker: Some(worker),
            ..Default::default()
        };
        let mut state = ClusterState::default();
        // Connector a's plugin is known (its instance is described), b's is not.
        state.connectors.insert(
            "a".into(),
            ferry_meta::state::Connector {
                config: ferry_meta::ConfigMap(
                    [("connector.class".to_string(), "TestSink".to_string())].into(),
                ),
                ..Default::default()
            },
        );
        state.status.insert(
            "a".into(),
            ConnectorStatus {
                connector: on(1, RunState::Running),
                tasks: [
                    (0, on(1, RunState::Running)),
                    (1, on(1, RunState::Failed)),
                    (2, on(2, RunState::Running)),
                ]
                .into(),
            },
        );
        state.status.insert(
            "b".into(),
            ConnectorStatus {
                connector: on(2, RunState::Paused),
                tasks: [(0, on(1, RunState::Paused))].into(),
            },
        );
        if let Some(status) = state.status.get_mut("a") {
            if let Some(t) = status.tasks.get_mut(&1) {
                t.generation = 9;
            }
        }
        state.fenced.insert(
            "a".into(),
            [(
                1,
                ferry_meta::state::FencedCommits {
                    count: 2,
                    last_generation: 4,
                },
            )]
            .into(),
        );
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Fixed(state, 1)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
        let has = |line: &str| text.lines().any(|l| l == line);
        for line in [
            "kafka_connect_connector_status{connector=\"a\",status=\"running\"} 1",
            "kafka_connect_connector_task_status{connector=\"a\",task=\"0\",status=\"running\"} 1",
            "kafka_connect_connector_task_status{connector=\"a\",task=\"1\",status=\"failed\"} 1",
            "kafka_connect_connector_task_status{connector=\"b\",task=\"0\",status=\"paused\"} 1",
            "kafka_connect_worker_connector_total_task_count{connector=\"a\"} 2",
            "kafka_connect_worker_connector_running_task_count{connector=\"a\"} 1",
            "kafka_connect_worker_connector_failed_task_count{connector=\"a\"} 1",
            "kafka_connect_worker_connector_paused_task_count{connector=\"a\"} 0",
            "kafka_connect_worker_connector_total_task_count{connector=\"b\"} 1",
            "kafka_connect_worker_connector_paused_task_count{connector=\"b\"} 1",
            "kafka_connect_worker_connector_destroyed_task_count{connector=\"b\"} 0",
            "kafka_connect_connector_connector_class{connector=\"a\",connector_class=\"org.example.TestSink\"} 1",
            "kafka_connect_connector_connector_type{connector=\"a\",connector_type=\"sink\"} 1",
            "kafka_connect_connector_connector_version{connector=\"a\",connector_version=\"7\"} 1",
            "ferry_task_generation{connector=\"a\",task=\"1\"} 9",
            "ferry_task_fenced_commits_total{connector=\"a\",task=\"1\"} 2",
            "ferry_task_fenced_commits_total{connector=\"a\",task=\"0\"} 0",
        ] {
            assert!(has(line), "no {line:?} in\n{text}");
        }
        // What worker 2 runs is not worker 1's to show.
        assert!(!text.contains("task=\"2\""), "{text}");
        assert!(!text.contains("connector=\"b\",status="), "{text}");
    }
}
