//! The worker's reconciler: it watches the applied state and runs exactly the units assigned
//! to this worker under their current generation, while the ownership lease is held. Side
//! effects live here, never in the state machine's `apply`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ferry_connect::plugin::{find, TaskFactory};
use ferry_connect::PluginDesc;
use ferry_meta::state::{Command, TargetState, TopicPartitionRef};
use ferry_meta::{ClusterState, MetaNode, NodeId, Request};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::metrics::{TaskMetrics, WorkerMetrics};
use crate::unit::{RuntimeSettings, UnitCtx};

type Key = (String, Option<u32>);

/// What a unit runs with; a change of any of it restarts the unit. A task's config is not
/// part of it: a change of a task's config gives the task a new generation (see
/// `ClusterState::put_task_configs`), so that the config is read only when the unit starts.
#[derive(Clone, Debug, PartialEq)]
struct Spec {
    generation: u64,
    version: u64,
    partitions: Vec<TopicPartitionRef>,
}

/// A unit told to stop, still finishing.
struct Stopping {
    generation: u64,
    /// Its lease epoch, as for a running unit: a unit still assigned to this worker under the
    /// same generation (revoked, or this node is leaving) is resumed to make its final commit;
    /// one that moved while frozen is let go (the sender dropped) without committing.
    epoch: Option<watch::Sender<Option<u64>>>,
    handle: JoinHandle<()>,
}

struct Running {
    spec: Spec,
    /// The lease epoch it acts under (see `UnitCtx::epoch`): `None` while frozen.
    epoch: watch::Sender<Option<u64>>,
    control: watch::Sender<TargetState>,
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
}

/// Every unit assigned to `me`, revoked or not, with the generation it is assigned under and
/// whether it is revoked.
fn owned(state: &ClusterState, me: NodeId) -> BTreeMap<Key, (u64, bool)> {
    let mut out = BTreeMap::new();
    for (name, assignment) in &state.assignments {
        let units = assignment
            .connector
            .iter()
            .map(|a| (None, a))
            .chain(assignment.tasks.iter().map(|(t, a)| (Some(*t), a)));
        for (task, a) in units {
            if a.worker == Some(me) {
                out.insert((name.clone(), task), (a.generation, a.revoked));
            }
        }
    }
    out
}

/// Of the units `owned`, those `me` is to release: revoked ones, or every one when it is
/// leaving; with the generation each is released under.
fn to_release(owned: &BTreeMap<Key, (u64, bool)>, leaving: bool) -> BTreeMap<Key, u64> {
    owned
        .iter()
        .filter(|(_, (_, revoked))| leaving || *revoked)
        .map(|(key, (generation, _))| (key.clone(), *generation))
        .collect()
}

/// The units assigned to `me`, with their specs and target states; a revoked unit is not (its
/// owner stops it, commits and releases it).
fn desired(state: &ClusterState, me: NodeId) -> BTreeMap<Key, (Spec, TargetState)> {
    let mut out = BTreeMap::new();
    for (name, assignment) in &state.assignments {
        let Some(connector) = state.connectors.get(name) else {
            continue;
        };
        if let Some(a) = assignment
            .connector
            .filter(|a| a.worker == Some(me) && !a.revoked)
        {
            let spec = Spec {
                generation: a.generation,
                version: connector.version,
                partitions: Vec::new(),
            };
            out.insert((name.clone(), None), (spec, connector.target));
        }
        // Tasks run only once their configs match the connector's current config.
        if connector.tasks_version != connector.version {
            continue;
        }
        for (task, a) in &assignment.tasks {
            if a.worker != Some(me) || a.revoked {
                continue;
            }
            if *task as usize >= connector.task_count() {
                continue;
            }
            let spec = Spec {
                generation: a.generation,
                version: connector.version,
                partitions: state
                    .sink_partitions
                    .get(name)
                    .and_then(|p| p.get(task))
                    .cloned()
                    .unwrap_or_default(),
            };
            out.insert((name.clone(), Some(*task)), (spec, connector.target));
        }
    }
    out
}

/// The least time between two reconciling passes of a node.
const PASS_GAP: Duration = Duration::from_millis(20);

/// The worker runtime of one node.
pub struct Runtime {
    node: MetaNode,
    plugins: Arc<Vec<PluginDesc>>,
    settings: Arc<RuntimeSettings>,
    lease: Arc<crate::lease::Lease>,
    metrics: Arc<WorkerMetrics>,
    /// The Kafka consumers this worker's sink tasks share.
    consumers: Arc<crate::consumers::Consumers>,
    running: BTreeMap<Key, Running>,
    /// Units told to stop and still finishing (a final commit, closing files): the next run of
    /// the same unit waits for them, so two runs never write at once; a revoked one is
    /// released once it has finished.
    stopping: BTreeMap<Key, Stopping>,
    /// Releases being written.
    releasing: BTreeMap<Key, JoinHandle<()>>,
    /// Wakes the reconciler when a stopping unit or a release has finished.
    finished: (mpsc::UnboundedSender<()>, mpsc::UnboundedReceiver<()>),
}

impl Runtime {
    /// A runtime of the node `node`, running what the scheduler assigns to it.
    pub fn new(
        node: MetaNode,
        plugins: Arc<Vec<PluginDesc>>,
        settings: RuntimeSettings,
        lease: Arc<crate::lease::Lease>,
        metrics: Arc<WorkerMetrics>,
    ) -> Self {
        // A group client is used at least once per flush while its connector's offsets move.
        let consumers = Arc::new(crate::consumers::Consumers::new(
            settings.offset_flush_interval * 2,
        ));
        Runtime {
            node,
            plugins,
            settings: Arc::new(settings),
            lease,
            metrics,
            consumers,
            running: BTreeMap::new(),
            stopping: BTreeMap::new(),
            releasing: BTreeMap::new(),
            finished: mpsc::unbounded_channel(),
        }
    }

    /// Reconcile until `shutdown`; then leave: tell the leader, stop every unit (each makes
    /// its final commit) and release it, so that it moves without a record written twice —
    /// within `graceful` (Kafka Connect's `task.shutdown.graceful.timeout.ms`), after which
    /// what has not stopped is abandoned (its records since its last commit are delivered
    /// again by its next owner).
    #[tracing::instrument(name = "runtime", skip_all, fields(node = self.node.id()))]
    pub async fn run(
        mut self,
        mut lease: watch::Receiver<Option<u64>>,
        mut shutdown: watch::Receiver<bool>,
        graceful: Duration,
    ) {
        let mut applied = self.node.state().applied();
        // A pass looks at every unit of the node: the periodic one is skipped when nothing it
        // reads changed and nothing is pending (thousands of idle units cost a pass each time),
        // and a burst of changes (a thousand connectors deleted, a dead node's tasks arriving)
        // gets a pass every `PASS_GAP` at most, not one per change.
        let mut seen = None;
        let mut unit_finished = false;
        let mut last_pass: Option<tokio::time::Instant> = None;
        loop {
            let now = (*applied.borrow_and_update(), *lease.borrow_and_update());
            let pending = !self.stopping.is_empty() || !self.releasing.is_empty();
            if seen != Some(now) || unit_finished || pending {
                if let Some(last) = last_pass {
                    tokio::time::sleep_until(last + PASS_GAP).await;
                }
                // What finished or changed meanwhile is seen by this pass.
                while self.finished.1.try_recv().is_ok() {}
                let now = (*applied.borrow_and_update(), *lease.borrow_and_update());
                last_pass = Some(tokio::time::Instant::now());
                self.reconcile(now.1, false);
                seen = Some(now);
            }
            unit_finished = false;
            tokio::select! {
                changed = applied.changed() => if changed.is_err() { break },
                changed = lease.changed() => if changed.is_err() { break },
                _ = self.finished.1.recv() => unit_finished = true,
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        let deadline = tokio::time::Instant::now() + graceful;
        info!(
            units = self.running.len(),
            "leaving: stopping every unit, committing and releasing it"
        );
        if !self.lease.leave(graceful / 4).await {
            warn!("the leader did not acknowledge that this node is leaving");
        }
        loop {
            self.reconcile(*lease.borrow_and_update(), true);
            if self.running.is_empty()
                && self.stopping.is_empty()
                && self.releasing.is_empty()
                && owned(&self.node.state().read().state, self.node.id()).is_empty()
            {
                info!("every unit stopped and released");
                return;
            }
            tokio::select! {
                _ = applied.changed() => {}
                _ = lease.changed() => {}
                _ = self.finished.1.recv() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        warn!(
            units = self.stopping.len(),
            waited_ms = graceful.as_millis() as u64,
            "not every unit stopped and released in time (task.shutdown.graceful.timeout.ms): leaving the rest (their uncommitted records are delivered again)"
        );
    }

    fn reconcile(&mut self, lease: Option<u64>, leaving: bool) {
        self.stopping.retain(|_, s| !s.handle.is_finished());
        self.releasing.retain(|_, handle| !handle.is_finished());
        let Some(epoch) = lease else {
            // The lease lapsed: freeze every unit where it stands, stopping ones included (a
            // final commit waits too). None stops or starts: once the lease is taken again,
            // those whose assignment did not change resume.
            let stopping = self.stopping.values().filter_map(|s| s.epoch.as_ref());
            for sender in self.running.values().map(|r| &r.epoch).chain(stopping) {
                sender.send_if_modified(|e| e.take().is_some());
            }
            return;
        };
        let (desired, owned) = {
            let applied = self.node.state().read();
            let me = self.node.id();
            let desired = if leaving {
                BTreeMap::new()
            } else {
                desired(&applied.state, me)
            };
            (desired, owned(&applied.state, me))
        };
        let releases = to_release(&owned, leaving);
        // Still ours under the generation it runs with: it may act (and make its final commit).
        let ours = |key: &Key, generation: u64| owned.get(key).map(|(g, _)| *g) == Some(generation);
        for (key, stopping) in self.stopping.iter_mut() {
            if ours(key, stopping.generation) {
                if let Some(sender) = &stopping.epoch {
                    sender.send_replace(Some(epoch));
                }
            } else if stopping.epoch.take().is_some() {
                debug!(connector = %key.0, task = ?key.1, "moved while stopping: let go");
            }
        }
        // Stop what is no longer ours or runs with an old spec.
        let stale: Vec<Key> = self
            .running
            .iter()
            .filter(|(key, r)| desired.get(*key).map(|(spec, _)| spec) != Some(&r.spec))
            .map(|(key, _)| key.clone())
            .collect();
        for key in stale {
            if let Some(running) = self.running.remove(&key) {
                debug!(connector = %key.0, task = ?key.1, "stopping unit");
                let generation = running.spec.generation;
                // A unit revoked while frozen is resumed for its final commit; one that moved
                // meanwhile stays frozen and is let go without committing.
                let epoch = if ours(&key, generation) {
                    running.epoch.send_replace(Some(epoch));
                    Some(running.epoch)
                } else {
                    None
                };
                running.stop.send_replace(true);
                let finished = self.finished.0.clone();
                let handle = running.handle;
                let (name, task) = key.clone();
                let metrics = self.metrics.clone();
                let handle = tokio::spawn(async move {
                    let _ = handle.await;
                    info!(connector = %name, task = ?task, generation, "unit stopped");
                    match task {
                        Some(task) => {
                            metrics.task_count.dec();
                            metrics.forget(&name, task, generation);
                        }
                        None => {
                            metrics.connector_count.dec();
                        }
                    }
                    let _ = finished.send(());
                });
                self.stopping.insert(
                    key,
                    Stopping {
                        generation,
                        epoch,
                        handle,
                    },
                );
            }
        }
        // Release what was revoked (or everything, leaving) once it has stopped.
        for (key, generation) in releases {
            if self.running.contains_key(&key)
                || self.stopping.contains_key(&key)
                || self.releasing.contains_key(&key)
            {
                continue;
            }
            let handle = tokio::spawn(release(
                self.node.clone(),
                key.clone(),
                generation,
                self.finished.0.clone(),
            ));
            self.releasing.insert(key, handle);
        }
        for (key, (spec, target)) in desired {
            if let Some(running) = self.running.get(&key) {
                running.epoch.send_if_modified(|e| {
                    let resumed = *e != Some(epoch);
                    if resumed {
                        info!(connector = %key.0, task = ?key.1, epoch, "assignment unchanged under the new lease: resuming unit");
                    }
                    *e = Some(epoch);
                    resumed
                });
                running.control.send_if_modified(|t| {
                    let changed = *t != target;
                    *t = target;
                    changed
                });
                continue;
            }
            if self.stopping.contains_key(&key) {
                // Its previous run is still finishing; start it on a later pass.
                continue;
            }
            if let Some(running) = self.start(&key, spec, target, epoch) {
                self.running.insert(key, running);
            }
        }
    }

    fn start(&self, key: &Key, spec: Spec, target: TargetState, epoch: u64) -> Option<Running> {
        let (name, task) = key;
        let (epoch, epoch_rx) = watch::channel(Some(epoch));
        let (plugin, config, task_config) = {
            let applied = self.node.state().read();
            let connector = applied.state.connectors.get(name)?;
            let class = connector.config.get("connector.class").unwrap_or_default();
            let task_config = match task {
                Some(task) => connector.task_config(*task as usize)?.0,
                None => BTreeMap::new(),
            };
            (
                find(&self.plugins, class)?.clone(),
                connector.config.0.clone(),
                task_config,
            )
        };
        let kind = plugin.kind();
        let ctx = UnitCtx {
            node: self.node.clone(),
            name: name.clone(),
            task: *task,
            generation: spec.generation,
            plugin,
            connector_config: config,
            version: spec.version,
            task_config,
            partitions: spec.partitions.clone(),
            settings: self.settings.clone(),
            lease: self.lease.clone(),
            epoch: epoch_rx,
            metrics: match task {
                Some(task) => {
                    self.metrics.task_count.inc();
                    self.metrics.task(name, *task, kind, spec.generation)
                }
                None => {
                    self.metrics.connector_count.inc();
                    TaskMetrics::default()
                }
            },
            startup: match task {
                Some(_) => self.metrics.task_starts.attempt(),
                None => self.metrics.connector_starts.attempt(),
            },
            consumers: self.consumers.clone(),
        };
        info!(unit = %ctx.label(), generation = spec.generation, "starting unit");
        let (control, control_rx) = watch::channel(target);
        let (stop, stop_rx) = watch::channel(false);
        let unit = ctx.clone();
        let handle = match (task, ctx.plugin.tasks) {
            (None, _) => spawn_unit(unit, crate::connector::run(ctx, control_rx, stop_rx)),
            (Some(_), TaskFactory::Sink(_)) => {
                spawn_unit(unit, crate::sink::run(ctx, control_rx, stop_rx))
            }
            (Some(_), TaskFactory::Source(_)) => {
                spawn_unit(unit, crate::source::run(ctx, control_rx, stop_rx))
            }
        };
        Some(Running {
            spec,
            epoch,
            control,
            stop,
            handle,
        })
    }
}

/// Release a unit that has stopped (its final commit is in), so that the leader can assign it
/// elsewhere at once. Fenced if it moved meanwhile; retried on the next pass if not written.
async fn release(node: MetaNode, key: Key, generation: u64, finished: mpsc::UnboundedSender<()>) {
    let (name, task) = key;
    let request = Request::new(
        uuid::Uuid::new_v4().to_string(),
        Command::Release {
            name: name.clone(),
            task,
            generation,
        },
    );
    match node.commit_answer(request).await {
        Ok(Ok(_)) => info!(connector = %name, task = ?task, generation, "released"),
        Ok(Err(rejected)) => debug!(connector = %name, task = ?task, %rejected, "not released"),
        Err(e) => warn!(connector = %name, task = ?task, error = %e, "cannot release; retrying"),
    }
    let _ = finished.send(());
}

/// Run a unit as a task of its own. A panic inside it (a bug in a connector, a converter or the
/// runtime) ends that unit only: it is reported FAILED with the panic in its trace, and the
/// node serves on.
fn spawn_unit(
    ctx: UnitCtx,
    unit: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    use futures::FutureExt;
    tokio::spawn(async move {
        let injected = ctx.settings.test_panic_connector.as_deref() == Some(ctx.name.as_str());
        let run = async move {
            if injected {
                panic!("injected panic (worker.test_panic_connector)");
            }
            unit.await
        };
        if let Err(panic) = std::panic::AssertUnwindSafe(run).catch_unwind().await {
            let message = panic_message(panic.as_ref());
            tracing::error!(unit = %ctx.label(), panic = %message, "unit panicked");
            ctx.report_failure(&ferry_connect::ConnectError::fatal(format!(
                "{} panicked: {message}",
                ctx.label()
            )))
            .await;
        }
    })
}

/// The text a panic was raised with.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::state::{Command, Request};
    use ferry_meta::ConfigMap;

    fn apply(s: &mut ClusterState, c: Command) {
        assert!(s.apply(&Request::anonymous(c)).is_ok());
    }

    fn put_a() -> Command {
        Command::PutConnector {
            name: "a".into(),
            config: ConfigMap::default(),
            create: true,
            expected_version: None,
            initial: None,
        }
    }

    fn two_tasks_a() -> Command {
        Command::PutTaskConfigs {
            name: "a".into(),
            version: 1,
            configs: vec![ConfigMap::default(); 2],
            shared: ConfigMap::default(),
        }
    }

    #[test]
    fn a_worker_runs_what_is_assigned_to_it_once_task_configs_are_current() {
        let mut s = ClusterState::default();
        apply(&mut s, put_a());
        apply(
            &mut s,
            Command::Assign {
                name: "a".into(),
                task: None,
                worker: Some(1),
            },
        );
        assert_eq!(desired(&s, 1).len(), 1, "the connector instance");
        apply(&mut s, two_tasks_a());
        apply(
            &mut s,
            Command::Assign {
                name: "a".into(),
                task: Some(0),
                worker: Some(1),
            },
        );
        apply(
            &mut s,
            Command::Assign {
                name: "a".into(),
                task: Some(1),
                worker: Some(2),
            },
        );
        let mine = desired(&s, 1);
        assert!(mine.contains_key(&("a".to_string(), Some(0))));
        assert!(!mine.contains_key(&("a".to_string(), Some(1))));
        // A config change: tasks wait for new task configs.
        let config: ConfigMap = [("x", "1")].into_iter().collect();
        apply(
            &mut s,
            Command::PutConnector {
                name: "a".into(),
                config,
                create: false,
                expected_version: None,
                initial: None,
            },
        );
        assert_eq!(
            desired(&s, 1).len(),
            1,
            "only the connector instance until tasks are regenerated"
        );
    }

    #[test]
    fn a_revoked_unit_is_stopped_and_released_and_a_leaving_worker_releases_everything() {
        let mut s = ClusterState::default();
        apply(&mut s, put_a());
        apply(&mut s, two_tasks_a());
        for task in [0, 1] {
            apply(
                &mut s,
                Command::Assign {
                    name: "a".into(),
                    task: Some(task),
                    worker: Some(1),
                },
            );
        }
        let revoked = s.assignments["a"].tasks[&0].generation;
        apply(
            &mut s,
            Command::Revoke {
                name: "a".into(),
                task: Some(0),
                generation: revoked,
            },
        );
        let key = |task| ("a".to_string(), Some(task));
        let mine = desired(&s, 1);
        assert!(
            !mine.contains_key(&key(0)),
            "stopped: it makes its final commit"
        );
        assert!(mine.contains_key(&key(1)));
        let ours = owned(&s, 1);
        assert_eq!(ours[&key(0)], (revoked, true), "still ours until released");
        assert_eq!(
            to_release(&ours, false),
            BTreeMap::from([(key(0), revoked)])
        );
        assert_eq!(to_release(&ours, true).len(), 2, "leaving: everything");
        assert!(owned(&s, 2).is_empty());
    }
}
