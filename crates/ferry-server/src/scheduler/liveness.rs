//! Worker liveness: the table of acknowledged heartbeats the leader's Raft node writes to
//! ([`WorkerTable`], in memory, never in the log), and how the scheduler judges it — which
//! workers are live, in grace, or draining.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Instant;

use ferry_meta::{ClusterState, Heartbeats, NodeId};

use super::reducer::Liveness;
use super::Timing;

/// The leader's view of its workers' heartbeats: when each last arrived, and who said it is
/// stopping. Written by the Raft node as it acknowledges heartbeats, read by the scheduler and
/// the healer.
#[derive(Debug, Default)]
pub struct WorkerTable {
    heard: Mutex<HashMap<NodeId, Instant>>,
    leaving: Mutex<BTreeSet<NodeId>>,
}

impl WorkerTable {
    /// The workers whose latest heartbeat said they are stopping.
    pub fn leaving(&self) -> BTreeSet<NodeId> {
        lock(&self.leaving).clone()
    }
}

impl Heartbeats for WorkerTable {
    fn acknowledged(&self, worker: NodeId, leaving: bool) {
        lock(&self.heard).insert(worker, Instant::now());
        let mut stopping = lock(&self.leaving);
        if leaving {
            stopping.insert(worker);
        } else {
            stopping.remove(&worker);
        }
    }

    fn last_heard(&self) -> HashMap<NodeId, Instant> {
        lock(&self.heard).clone()
    }
}

/// A table's lock, even if a panicking holder poisoned it (the maps stay consistent: each
/// write is one insert or remove).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Which workers are alive, from the leader's heartbeat table. A leader that took over less
/// than one timeout ago has not heard from everyone yet: a worker it has not heard from keeps
/// its units (it is not declared dead before a full timeout) but gets no new ones until it
/// heartbeats — it may be the stopped leader this one replaces. A worker proven `dead` is
/// neither live nor in grace: its units move now.
pub fn liveness(
    workers: &BTreeSet<NodeId>,
    heartbeats: &HashMap<NodeId, Instant>,
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
pub fn draining(
    state: &ClusterState,
    workers: &BTreeSet<NodeId>,
    heartbeats: &HashMap<NodeId, Instant>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const TIMING: Timing = Timing {
        heartbeat_interval: Duration::from_millis(500),
        worker_timeout: Duration::from_secs(5),
        rebalance_delay: Duration::from_secs(2),
        graceful_shutdown: Duration::from_secs(5),
    };

    #[test]
    fn the_table_keeps_the_latest_heartbeat_and_who_is_leaving() {
        let table = WorkerTable::default();
        table.acknowledged(1, false);
        table.acknowledged(2, true);
        assert_eq!(table.leaving(), BTreeSet::from([2]));
        let first = table.last_heard()[&2];
        table.acknowledged(2, false);
        assert!(
            table.leaving().is_empty(),
            "a later heartbeat takes it back"
        );
        assert!(table.last_heard()[&2] >= first);
        assert_eq!(table.last_heard().len(), 2);
    }

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
