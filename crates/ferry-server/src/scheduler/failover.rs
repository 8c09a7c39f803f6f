//! Fail-overs as the leader sees them, timed for `ferry_failover_seconds`: from the last
//! heartbeat the leader had of a worker that is gone (proven dead, or silent past the worker
//! timeout) while units were assigned to it, until every one of those units runs again — its
//! latest status reported by the run of its current assignment, from a live worker, in a state
//! other than UNASSIGNED or RESTARTING — or no longer exists. A leader that took over did not
//! hear the gone worker's last heartbeat: its fail-overs are timed from when it began to lead.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use ferry_meta::state::RunState;
use ferry_meta::{ClusterState, NodeId};
use prometheus_client::metrics::histogram::Histogram;

use super::reducer::{assignment, units, Liveness, Unit};

/// The upper bounds (seconds) of the fail-over histogram's buckets.
const BUCKETS: [f64; 12] = [
    0.5, 1.0, 2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0,
];

/// The histogram the scheduler observes each fail-over's time into.
pub fn histogram() -> Histogram {
    Histogram::new(BUCKETS.iter().copied())
}

/// The fail-overs under way.
#[derive(Debug, Default)]
pub struct FailOvers {
    open: BTreeMap<NodeId, Open>,
}

#[derive(Debug)]
struct Open {
    since: Instant,
    units: Vec<Unit>,
}

impl FailOvers {
    /// One pass of the scheduler over `state` with the workers' `live`ness: time the workers
    /// newly gone that had units; return how long each fail-over that ended took.
    pub fn pass(
        &mut self,
        state: &ClusterState,
        live: &Liveness,
        heartbeats: &HashMap<NodeId, Instant>,
        leader_since: Instant,
    ) -> Vec<Duration> {
        let gone = |w: &NodeId| {
            !live.live.contains(w) && !live.grace.contains(w) && !live.draining.contains(w)
        };
        let mut found: BTreeMap<NodeId, Vec<Unit>> = BTreeMap::new();
        for unit in units(state) {
            let owner = assignment(state, &unit).and_then(|a| a.worker);
            if let Some(worker) = owner.filter(|w| gone(w) && !self.open.contains_key(w)) {
                found.entry(worker).or_default().push(unit);
            }
        }
        for (worker, units) in found {
            let since = heartbeats
                .get(&worker)
                .copied()
                .unwrap_or(leader_since)
                .max(leader_since);
            self.open.insert(worker, Open { since, units });
        }
        let mut ended = Vec::new();
        self.open.retain(|_, open| {
            let done = open.units.iter().all(|u| runs_again(state, live, u));
            if done {
                ended.push(open.since.elapsed());
            }
            !done
        });
        ended
    }
}

/// Whether `unit` runs again after its worker was found gone (or no longer exists).
fn runs_again(state: &ClusterState, live: &Liveness, unit: &Unit) -> bool {
    let Some(current) = assignment(state, unit) else {
        return true;
    };
    let status = state
        .status
        .get(&unit.connector)
        .and_then(|s| match unit.task {
            Some(task) => s.tasks.get(&task),
            None => Some(&s.connector),
        });
    status.is_some_and(|s| {
        s.generation == current.generation
            && s.worker.is_some_and(|w| live.live.contains(&w))
            && !matches!(s.state, RunState::Unassigned | RunState::Restarting)
    })
}

/// The workers a fail-over is under way for (tests).
#[cfg(test)]
impl FailOvers {
    fn workers(&self) -> std::collections::BTreeSet<NodeId> {
        self.open.keys().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::state::{Assignment, ConnectorAssignment, ConnectorStatus, Status};
    use std::collections::BTreeSet;

    fn state(owner: NodeId, generation: u64, reported: Option<(NodeId, RunState)>) -> ClusterState {
        let mut state = ClusterState::default();
        state.connectors.insert(
            "c".into(),
            ferry_meta::state::Connector {
                tasks: vec![Default::default()],
                ..Default::default()
            },
        );
        let on = |worker| Assignment {
            worker: Some(worker),
            generation,
            revoked: false,
            released_by: None,
        };
        state.assignments.insert(
            "c".into(),
            ConnectorAssignment {
                connector: Some(on(owner)),
                tasks: [(0, on(owner))].into(),
            },
        );
        if let Some((worker, run)) = reported {
            let status = Status {
                state: run,
                worker: Some(worker),
                trace: None,
                generation,
            };
            state.status.insert(
                "c".into(),
                ConnectorStatus {
                    connector: status.clone(),
                    tasks: [(0, status)].into(),
                },
            );
        }
        state
    }

    fn live(workers: &[NodeId]) -> Liveness {
        Liveness {
            live: workers.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_fail_over_is_timed_from_the_last_heartbeat_until_its_units_run_elsewhere() {
        let t0 = Instant::now();
        let leader_since = t0 - Duration::from_secs(60);
        let heard = HashMap::from([(1, t0 - Duration::from_secs(3)), (2, t0)]);
        let mut failovers = FailOvers::default();
        // Worker 1 runs everything and is alive: nothing to time.
        let running = state(1, 5, Some((1, RunState::Running)));
        assert!(failovers
            .pass(&running, &live(&[1, 2]), &heard, leader_since)
            .is_empty());
        assert!(failovers.workers().is_empty());
        // Worker 1 is gone, in grace first: not yet.
        let grace = Liveness {
            grace: [1].into(),
            ..live(&[2])
        };
        assert!(failovers
            .pass(&running, &grace, &heard, leader_since)
            .is_empty());
        assert!(failovers.workers().is_empty());
        // Gone: timed; its units moved to 2 (a new generation) but not started yet.
        assert!(failovers
            .pass(&running, &live(&[2]), &heard, leader_since)
            .is_empty());
        assert_eq!(failovers.workers(), BTreeSet::from([1]));
        let moved = state(2, 6, Some((1, RunState::Running)));
        assert!(failovers
            .pass(&moved, &live(&[2]), &heard, leader_since)
            .is_empty());
        let starting = state(2, 6, Some((2, RunState::Unassigned)));
        assert!(failovers
            .pass(&starting, &live(&[2]), &heard, leader_since)
            .is_empty());
        // Running on 2: one fail-over, of at least the 3 s since worker 1's last heartbeat.
        let ran = state(2, 6, Some((2, RunState::Running)));
        let ended = failovers.pass(&ran, &live(&[2]), &heard, leader_since);
        assert_eq!(ended.len(), 1);
        assert!(ended[0] >= Duration::from_secs(3), "{ended:?}");
        assert!(failovers.workers().is_empty());
        assert!(failovers
            .pass(&ran, &live(&[2]), &heard, leader_since)
            .is_empty());
    }

    #[test]
    fn a_new_leader_times_from_when_it_began_and_a_deleted_unit_needs_no_restart() {
        let leader_since = Instant::now() - Duration::from_secs(1);
        let mut failovers = FailOvers::default();
        let running = state(1, 5, Some((1, RunState::Running)));
        assert!(failovers
            .pass(&running, &live(&[2]), &HashMap::new(), leader_since)
            .is_empty());
        let ended = failovers.pass(
            &ClusterState::default(),
            &live(&[2]),
            &HashMap::new(),
            leader_since,
        );
        assert_eq!(ended.len(), 1);
        assert!(ended[0] >= Duration::from_secs(1) && ended[0] < Duration::from_secs(60));
    }
}
