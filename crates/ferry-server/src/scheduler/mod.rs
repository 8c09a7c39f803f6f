//! The scheduler: one reconciliation loop that runs on the leader only. It keeps worker
//! liveness from heartbeats (in memory, never in the log), resolves sink connectors' topics to
//! partitions from Kafka metadata, and writes the assignments the pure [`reducer`] decides.

pub mod death;
pub mod failover;
pub mod handover;
pub mod liveness;
pub mod reducer;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connect::topics::Topics;
use ferry_connect::{PluginDesc, PluginKind};
use ferry_meta::state::{Command, Connector, TopicPartitionRef};
use ferry_meta::{ClusterState, Heartbeats, MetaNode, NodeId, Request};
use ferry_worker::{KafkaSettings, Metadata};
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use liveness::{draining, liveness, WorkerTable};

/// How often the leader reconsiders the placement (also on every applied change).
const TICK: Duration = Duration::from_millis(250);
/// How often topic metadata is refreshed (new partitions are picked up).
const METADATA_REFRESH: Duration = Duration::from_secs(5);

/// Timing of failure detection.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How often workers heartbeat: one silent for longer is probed (see [`death`]).
    pub heartbeat_interval: Duration,
    pub worker_timeout: Duration,
    pub rebalance_delay: Duration,
    /// How long a revoked unit's owner has to stop it, commit and release it before it is
    /// moved anyway (Kafka Connect's `task.shutdown.graceful.timeout.ms`).
    pub graceful_shutdown: Duration,
}

/// Each sink connector's topics rule, kept while its `topics` and `topics.regex` stay the
/// same: the scheduler looks at every connector on every pass, and compiling a `topics.regex`
/// each time cost the leader of 1,000 connectors a third of a core.
#[derive(Default)]
struct Subscriptions(HashMap<String, (Subscribed, Option<Topics>)>);

/// What a connector's config says it subscribes to.
type Subscribed = [Option<String>; 2];

impl Subscriptions {
    /// The topics rule of a connector's current config (`None` if it has none that parses).
    fn of(&mut self, name: &str, connector: &Connector) -> Option<&Topics> {
        const KEYS: [&str; 2] = ["topics", "topics.regex"];
        let config = &connector.config.0;
        let unchanged = self.0.get(name).is_some_and(|(subscribed, _)| {
            KEYS.iter()
                .zip(subscribed)
                .all(|(key, was)| config.get(*key) == was.as_ref())
        });
        if !unchanged {
            let subscribed = KEYS.map(|key| config.get(key).cloned());
            self.0
                .insert(name.to_string(), (subscribed, Topics::of(config).ok()));
        }
        self.0.get(name)?.1.as_ref()
    }

    /// Forget the connectors that are gone.
    fn keep_only(&mut self, state: &ClusterState) {
        self.0.retain(|name, _| state.connectors.contains_key(name));
    }
}

/// The sink partition spreads that differ from the state.
fn sink_partition_commands(
    state: &ClusterState,
    plugins: &[PluginDesc],
    partitions: &BTreeSet<TopicPartitionRef>,
    subscriptions: &mut Subscriptions,
) -> Vec<Command> {
    let mut commands = Vec::new();
    subscriptions.keep_only(state);
    let mut by_topic: BTreeMap<&str, Vec<&TopicPartitionRef>> = BTreeMap::new();
    for tp in partitions {
        by_topic.entry(tp.topic.as_str()).or_default().push(tp);
    }
    for (name, connector) in &state.connectors {
        let class = connector.config.get("connector.class").unwrap_or_default();
        let sink = ferry_connect::plugin::find(plugins, class)
            .is_some_and(|p| p.kind() == PluginKind::Sink);
        if !sink || connector.task_count() == 0 {
            continue;
        }
        let Some(topics) = subscriptions.of(name, connector) else {
            continue;
        };
        let mine: BTreeSet<TopicPartitionRef> = topics
            .of_these(&by_topic)
            .into_iter()
            .flatten()
            .map(|tp| (*tp).clone())
            .collect();
        let spread = reducer::spread(&mine, connector.task_count() as u32);
        let current = state.sink_partitions.get(name);
        if current != Some(&spread) {
            commands.push(Command::SetSinkPartitions {
                name: name.clone(),
                partitions: spread,
            });
        }
    }
    commands
}

/// What a pass of the scheduler plans from. A pass over 10,000 tasks is not free: when these
/// are as the last pass saw them and it found nothing to move, the pass is skipped (a pass
/// that found moves runs again, as revocations wait on the clock).
#[derive(PartialEq)]
struct PassInputs {
    /// The applied index of the state.
    applied: u64,
    live: reducer::Liveness,
    /// How many times the sink topics' partitions changed.
    partitions: u64,
}

/// Run the scheduler until `shutdown`; it acts only while this node leads.
#[tracing::instrument(name = "scheduler", skip_all, fields(node = node.id()))]
pub async fn run(
    node: MetaNode,
    table: Arc<WorkerTable>,
    plugins: Arc<Vec<PluginDesc>>,
    kafka: Option<KafkaSettings>,
    timing: Timing,
    failover_times: Histogram,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut applied = node.state().applied();
    let mut leader_since: Option<Instant> = None;
    let mut metadata: Option<Metadata> = None;
    let mut partitions: Option<BTreeSet<TopicPartitionRef>> = None;
    // Bumped whenever the fetched partitions differ from the last ones.
    let mut partitions_seen = 0u64;
    // What the last pass read, if it found nothing to do: the same again needs no pass.
    let mut idle: Option<PassInputs> = None;
    let mut refreshed = Instant::now() - METADATA_REFRESH;
    let mut revocations = handover::Revocations::default();
    let mut subscriptions = Subscriptions::default();
    let mut prober = death::Prober::new(timing.heartbeat_interval, TICK);
    let mut failovers = failover::FailOvers::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            changed = applied.changed() => if changed.is_err() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if node.leader() != Some(node.id()) {
            idle = None;
            if leader_since.take().is_some() {
                info!("no longer the leader: scheduler idle");
                revocations = handover::Revocations::default();
                prober = death::Prober::new(timing.heartbeat_interval, TICK);
                failovers = failover::FailOvers::default();
            }
            continue;
        }
        let since = *leader_since.get_or_insert_with(|| {
            info!("leader: scheduling");
            Instant::now()
        });
        if let Some(settings) = &kafka {
            if refreshed.elapsed() >= METADATA_REFRESH {
                refreshed = Instant::now();
                if metadata.is_none() {
                    metadata = Metadata::new(settings)
                        .map_err(|e| warn!(error = %e, "cannot create a Kafka metadata client"))
                        .ok();
                }
                if let Some(client) = metadata.take() {
                    let fetch = tokio::task::spawn_blocking(move || {
                        let fetched = client.partitions(Duration::from_secs(5));
                        (client, fetched)
                    });
                    match fetch.await {
                        Ok((client, Ok(p))) => {
                            metadata = Some(client);
                            if partitions.as_ref() != Some(&p) {
                                partitions = Some(p);
                                partitions_seen += 1;
                            }
                        }
                        Ok((client, Err(e))) => {
                            metadata = Some(client);
                            warn!(error = %e, "cannot fetch Kafka metadata; keeping the last");
                        }
                        Err(e) => {
                            warn!(error = %e, "the metadata fetch failed; a new client will be made")
                        }
                    }
                }
            }
        }
        let commands = {
            let guard = node.state().read();
            let state = &guard.state;
            let workers: BTreeSet<NodeId> = state.workers.keys().copied().collect();
            let now = Instant::now();
            let heartbeats = table.last_heard();
            let dead = prober.dead(&node, &workers, &heartbeats, since, now);
            let mut live = liveness(&workers, &heartbeats, &dead, since, now, timing);
            // A stopping worker keeps its units until it releases them, and gets no new ones.
            for worker in table.leaving() {
                if live.live.remove(&worker) {
                    live.grace.insert(worker);
                }
            }
            live.draining = draining(state, &workers, &heartbeats, &dead, now, timing);
            for took in failovers.pass(state, &live, &heartbeats, since) {
                info!(
                    seconds = took.as_secs_f64(),
                    "fail-over: every unit of a gone worker runs again"
                );
                failover_times.observe(took.as_secs_f64());
            }
            let inputs = PassInputs {
                applied: *applied.borrow_and_update(),
                live: live.clone(),
                partitions: partitions_seen,
            };
            if idle.as_ref() == Some(&inputs) {
                continue;
            }
            let mut commands = Vec::new();
            if let Some(partitions) = &partitions {
                commands.extend(sink_partition_commands(
                    state,
                    &plugins,
                    partitions,
                    &mut subscriptions,
                ));
            }
            let moves = reducer::assign(state, &live);
            let settled = commands.is_empty() && moves.is_empty();
            commands.extend(revocations.plan(state, moves, &live, now, timing.graceful_shutdown));
            idle = settled.then_some(inputs);
            commands
        };
        write_all(&node, commands).await;
    }
}

/// How many of the scheduler's writes are in flight at once: Raft appends and replicates
/// them together, so that placing thousands of tasks takes a few round trips, in small entries.
/// `make bench`'s scale run (a dead node's ~3,340 tasks placed on the others): 64 at once
/// placed ~600 a second; 512, with the tasks' own status writes beside them, all of them in
/// about four seconds.
const IN_FLIGHT: usize = 512;

/// Write the commands, many at a time (each is independent of the others); on a failure to
/// write, the rest are left to the next pass, which plans again from the state.
async fn write_all(node: &MetaNode, commands: Vec<Command>) {
    use futures::StreamExt;
    let mut writes = futures::stream::iter(commands.into_iter().map(|command| {
        debug!(
            kind = command.kind(),
            connector = command.connector(),
            "scheduling"
        );
        let request = Request::new(uuid::Uuid::new_v4().to_string(), command);
        // Proposed here only: a deposed leader's plan is dropped, never forwarded.
        node.write_here(request)
    }))
    .buffer_unordered(IN_FLIGHT);
    while let Some(written) = writes.next().await {
        match written {
            Ok(Ok(_)) => {}
            Ok(Err(rejected)) => debug!(%rejected, "scheduling command refused; replanning"),
            Err(e) => {
                warn!(error = %e, "cannot write an assignment; retrying");
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::ConfigMap;

    fn connector(key: &str, value: &str) -> Connector {
        Connector {
            config: ConfigMap([(key.to_string(), value.to_string())].into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_connectors_topics_rule_is_kept_until_its_subscription_changes() {
        let mut subscriptions = Subscriptions::default();
        let pattern = connector("topics.regex", "orders-.*");
        let matches = |s: &mut Subscriptions, c: &Connector, topic: &str| {
            s.of("sink", c).is_some_and(|t| t.matches(topic))
        };
        assert!(matches(&mut subscriptions, &pattern, "orders-eu"));
        assert!(matches(&mut subscriptions, &pattern, "orders-us"));
        // The same name with another subscription (updated, or deleted and created again
        // between two passes): the rule follows the config.
        let list = connector("topics", "payments");
        assert!(!matches(&mut subscriptions, &list, "orders-eu"));
        assert!(matches(&mut subscriptions, &list, "payments"));
        // No rule that parses: no partitions.
        assert!(subscriptions
            .of("sink", &connector("topics.regex", "("))
            .is_none());
        // Gone from the state: forgotten.
        subscriptions.keep_only(&ClusterState::default());
        assert!(subscriptions.0.is_empty());
    }
}
