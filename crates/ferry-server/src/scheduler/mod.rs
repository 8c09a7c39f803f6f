//! The scheduler: one reconciliation loop that runs on the leader only. It keeps worker
//! liveness from heartbeats (in memory, never in the log), resolves sink connectors' topics to
//! partitions from Kafka metadata, and writes the assignments the pure [`reducer`] decides.

pub mod death;
pub mod handover;
pub mod reducer;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_connect::topics::Topics;
use ferry_connect::{PluginDesc, PluginKind};
use ferry_meta::state::{Command, TopicPartitionRef};
use ferry_meta::{ClusterState, MetaNode, NodeId, Request};
use ferry_worker::{KafkaSettings, Metadata};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use reducer::Liveness;

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

/// Which workers are alive, from the leader's heartbeat table. A leader that took over less
/// than one timeout ago has not heard from everyone yet: a worker it has not heard from keeps
/// its units (it is not declared dead before a full timeout) but gets no new ones until it
/// heartbeats — it may be the stopped leader this one replaces. A worker proven `dead` is
/// neither live nor in grace: its units move now.
pub fn liveness(
    workers: &BTreeSet<NodeId>,
    heartbeats: &std::collections::HashMap<NodeId, Instant>,
    dead: &BTreeSet<NodeId>,
    leader_since: Instant,
    now: Instant,
    timing: Timing,
) -> Liveness {
    let mut liveness = Liveness::default();
    let settling = now.saturating_duration_since(leader_since) < timing.worker_timeout;
    for worker in workers.difference(dead) {
        let silent = heartbeats
            .get(worker)
            .map(|last| now.saturating_duration_since(*last));
        match silent {
            Some(silent) if silent < timing.worker_timeout => {
                liveness.live.insert(*worker);
            }
            _ if settling => {
                liveness.grace.insert(*worker);
            }
            Some(silent) if silent < timing.worker_timeout + timing.rebalance_delay => {
                liveness.grace.insert(*worker);
            }
            None if now.saturating_duration_since(leader_since)
                < timing.worker_timeout + timing.rebalance_delay =>
            {
                liveness.grace.insert(*worker);
            }
            _ => {}
        }
    }
    liveness
}

/// The workers removed from the cluster's worker set (`remove-node`) that still own units and
/// still heartbeat: their units are revoked and move once committed, not taken from them.
fn draining(
    state: &ClusterState,
    workers: &BTreeSet<NodeId>,
    heartbeats: &std::collections::HashMap<NodeId, Instant>,
    dead: &BTreeSet<NodeId>,
    now: Instant,
    timing: Timing,
) -> BTreeSet<NodeId> {
    state
        .assignments
        .values()
        .flat_map(|a| a.connector.iter().chain(a.tasks.values()))
        .filter_map(|a| a.worker)
        .filter(|w| !workers.contains(w) && !dead.contains(w))
        .filter(|w| {
            heartbeats
                .get(w)
                .is_some_and(|last| now.saturating_duration_since(*last) < timing.worker_timeout)
        })
        .collect()
}

/// The sink partition spreads that differ from the state.
fn sink_partition_commands(
    state: &ClusterState,
    plugins: &[PluginDesc],
    partitions: &BTreeSet<TopicPartitionRef>,
) -> Vec<Command> {
    let mut commands = Vec::new();
    for (name, connector) in &state.connectors {
        let class = connector.config.get("connector.class").unwrap_or_default();
        let sink = ferry_connect::plugin::find(plugins, class)
            .is_some_and(|p| p.kind() == PluginKind::Sink);
        if !sink || connector.task_count() == 0 {
            continue;
        }
        let Ok(topics) = Topics::of(&connector.config.0) else {
            continue;
        };
        let mine: BTreeSet<TopicPartitionRef> = partitions
            .iter()
            .filter(|tp| topics.matches(&tp.topic))
            .cloned()
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

/// Run the scheduler until `shutdown`; it acts only while this node leads.
#[tracing::instrument(name = "scheduler", skip_all, fields(node = node.id()))]
pub async fn run(
    node: MetaNode,
    plugins: Arc<Vec<PluginDesc>>,
    kafka: Option<KafkaSettings>,
    timing: Timing,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut applied = node.state().applied();
    let mut leader_since: Option<Instant> = None;
    let mut metadata: Option<Metadata> = None;
    let mut partitions: Option<BTreeSet<TopicPartitionRef>> = None;
    let mut refreshed = Instant::now() - METADATA_REFRESH;
    let mut revocations = handover::Revocations::default();
    let mut prober = death::Prober::new(timing.heartbeat_interval, TICK);
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            changed = applied.changed() => if changed.is_err() { return },
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if node.leader() != Some(node.id()) {
            if leader_since.take().is_some() {
                info!("no longer the leader: scheduler idle");
                revocations = handover::Revocations::default();
                prober = death::Prober::new(timing.heartbeat_interval, TICK);
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
                            partitions = Some(p);
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
            let heartbeats = node.heartbeats();
            let dead = prober.dead(&node, &workers, &heartbeats, since, now);
            let mut live = liveness(&workers, &heartbeats, &dead, since, now, timing);
            // A stopping worker keeps its units until it releases them, and gets no new ones.
            for worker in node.leaving() {
                if live.live.remove(&worker) {
                    live.grace.insert(worker);
                }
            }
            live.draining = draining(state, &workers, &heartbeats, &dead, now, timing);
            let mut commands = Vec::new();
            if let Some(partitions) = &partitions {
                commands.extend(sink_partition_commands(state, &plugins, partitions));
            }
            let moves = reducer::assign(state, &live);
            commands.extend(revocations.plan(state, moves, &live, now, timing.graceful_shutdown));
            commands
        };
        write_all(&node, commands).await;
    }
}

/// How many of the scheduler's writes are in flight at once: Raft appends and replicates
/// them together, so that placing thousands of tasks takes a few round trips, in small entries.
const IN_FLIGHT: usize = 64;

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
    use std::collections::HashMap;

    const TIMING: Timing = Timing {
        heartbeat_interval: Duration::from_millis(500),
        worker_timeout: Duration::from_secs(5),
        rebalance_delay: Duration::from_secs(2),
        graceful_shutdown: Duration::from_secs(5),
    };

    #[test]
    fn liveness_from_heartbeats() {
        let t0 = Instant::now();
        let now = t0 + Duration::from_secs(60);
        let workers = BTreeSet::from([1, 2, 3, 4]);
        let beats = HashMap::from([
            (1, now - Duration::from_secs(1)),
            (2, now - Duration::from_secs(6)),
            (3, now - Duration::from_secs(30)),
        ]);
        let l = liveness(&workers, &beats, &BTreeSet::new(), t0, now, TIMING);
        assert_eq!(l.live, BTreeSet::from([1]));
        assert_eq!(
            l.grace,
            BTreeSet::from([2]),
            "silent past the timeout, within the delay"
        );
    }

    #[test]
    fn a_worker_proven_dead_is_neither_live_nor_in_grace() {
        let t0 = Instant::now();
        let workers = BTreeSet::from([1, 2]);
        let beats = HashMap::from([(1, t0), (2, t0)]);
        let dead = BTreeSet::from([2]);
        let settling = liveness(
            &workers,
            &beats,
            &dead,
            t0,
            t0 + Duration::from_secs(1),
            TIMING,
        );
        assert_eq!(settling.live, BTreeSet::from([1]));
        assert!(settling.grace.is_empty(), "its units move now");
    }

    #[test]
    fn a_new_leader_keeps_everyone_s_units_for_one_timeout_and_gives_work_to_those_it_heard() {
        let t0 = Instant::now();
        let workers = BTreeSet::from([1, 2]);
        let l = liveness(
            &workers,
            &HashMap::from([(1, t0)]),
            &BTreeSet::new(),
            t0,
            t0 + Duration::from_secs(1),
            TIMING,
        );
        assert_eq!(l.live, BTreeSet::from([1]));
        assert_eq!(l.grace, BTreeSet::from([2]), "not heard from yet");
        let later = liveness(
            &workers,
            &HashMap::new(),
            &BTreeSet::new(),
            t0,
            t0 + Duration::from_secs(6),
            TIMING,
        );
        assert!(later.live.is_empty());
        assert_eq!(later.grace, workers);
        let much_later = liveness(
            &workers,
            &HashMap::new(),
            &BTreeSet::new(),
            t0,
            t0 + Duration::from_secs(8),
            TIMING,
        );
        assert!(much_later.live.is_empty() && much_later.grace.is_empty());
    }
}
