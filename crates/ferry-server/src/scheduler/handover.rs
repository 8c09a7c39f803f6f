//! Planned moves without a record written twice, as Kafka Connect's cooperative rebalancing
//! does them: a unit whose owner is alive is first revoked — its owner stops it, makes its final
//! commit under its current generation and releases it — and only then assigned elsewhere. A
//! revoked unit not released within the graceful shutdown time moves anyway, under a new
//! generation that fences its old run. A dead or silent worker's units move at once.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use ferry_meta::state::Command;
use ferry_meta::{ClusterState, NodeId};
use tracing::{info, warn};

use super::reducer::Liveness;

/// A revoked unit: connector, task, the generation it was revoked in.
type Revoked = (String, Option<u32>, u64);

/// The leader's memory of when it first saw each unit revoked (not replicated: a new leader
/// counts from when it first sees one).
#[derive(Debug, Default)]
pub struct Revocations {
    since: HashMap<Revoked, Instant>,
}

impl Revocations {
    /// The commands that carry out the reducer's `moves` (its `Assign`s) on `state`: a move off
    /// a live worker becomes a `Revoke`, and the `Assign` itself once the owner released the
    /// unit (then it is no longer a move off a live worker) or the graceful time is over.
    /// Before the cluster's feature level allows revoking, moves are made directly.
    pub fn plan(
        &mut self,
        state: &ClusterState,
        moves: Vec<Command>,
        live: &Liveness,
        now: Instant,
        graceful: Duration,
    ) -> Vec<Command> {
        let level = state.feature_level();
        let mut planned = Vec::new();
        let mut seen = HashSet::new();
        for command in moves {
            let Command::Assign { name, task, .. } = &command else {
                planned.push(command);
                continue;
            };
            let current = state.assignments.get(name).and_then(|a| match task {
                Some(task) => a.tasks.get(task),
                None => a.connector.as_ref(),
            });
            let alive = |w: NodeId| live.live.contains(&w) || live.draining.contains(&w);
            let Some(current) = current.filter(|a| a.worker.is_some_and(alive)) else {
                planned.push(command);
                continue;
            };
            let revoke = Command::Revoke {
                name: name.clone(),
                task: *task,
                generation: current.generation,
            };
            if revoke.format() > level {
                planned.push(command);
                continue;
            }
            let key = (name.clone(), *task, current.generation);
            let since = *self.since.entry(key.clone()).or_insert(now);
            seen.insert(key);
            if !current.revoked {
                info!(connector = %name, task = ?task, worker = ?current.worker, "revoking, to move it once its final commit is in");
                planned.push(revoke);
            } else if now.saturating_duration_since(since) >= graceful {
                warn!(
                    connector = %name,
                    task = ?task,
                    waited_ms = graceful.as_millis() as u64,
                    "a revoked unit was not released in time (task.shutdown.graceful.timeout.ms): moving it anyway"
                );
                planned.push(command);
            }
        }
        self.since.retain(|key, _| seen.contains(key));
        planned
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::state::Request;
    use ferry_meta::ConfigMap;
    use std::collections::BTreeSet;

    const GRACE: Duration = Duration::from_secs(5);

    fn apply(s: &mut ClusterState, c: Command) {
        let answer = s.apply(&Request::anonymous(c.clone()));
        assert!(answer.is_ok(), "{c:?}: {answer:?}");
    }

    /// A connector with one task on worker 1, at the feature level given.
    fn state(level: u32) -> ClusterState {
        let mut s = ClusterState::default();
        apply(&mut s, Command::SetFeatureLevel { level });
        apply(
            &mut s,
            Command::PutConnector {
                name: "a".into(),
                config: ConfigMap::default(),
                create: true,
                expected_version: None,
                initial: None,
            },
        );
        apply(
            &mut s,
            Command::PutTaskConfigs {
                name: "a".into(),
                version: 1,
                configs: vec![ConfigMap::default()],
                shared: ConfigMap::default(),
            },
        );
        apply(&mut s, assign(Some(1)));
        s
    }

    fn assign(worker: Option<u64>) -> Command {
        Command::Assign {
            name: "a".into(),
            task: Some(0),
            worker,
        }
    }

    fn live(ids: &[u64]) -> Liveness {
        Liveness {
            live: ids.iter().copied().collect(),
            ..Liveness::default()
        }
    }

    fn generation(s: &ClusterState) -> u64 {
        s.assignments["a"].tasks[&0].generation
    }

    #[test]
    fn a_move_off_a_live_worker_waits_for_its_release() {
        let mut s = state(4);
        let g = generation(&s);
        let mut r = Revocations::default();
        let t = Instant::now();
        let plan = r.plan(&s, vec![assign(Some(2))], &live(&[1, 2]), t, GRACE);
        assert_eq!(
            plan,
            vec![Command::Revoke {
                name: "a".into(),
                task: Some(0),
                generation: g
            }]
        );
        apply(&mut s, plan[0].clone());
        assert!(s.assignments["a"].tasks[&0].revoked);
        // Revoked, not released yet: nothing to do.
        let later = t + Duration::from_secs(1);
        assert!(r
            .plan(&s, vec![assign(Some(2))], &live(&[1, 2]), later, GRACE)
            .is_empty());
        // The owner's final commit is accepted under the same generation, then it releases.
        apply(
            &mut s,
            Command::Release {
                name: "a".into(),
                task: Some(0),
                generation: g,
            },
        );
        assert_eq!(s.assignments["a"].tasks[&0].worker, None);
        // Unassigned now: the move is made.
        let plan = r.plan(&s, vec![assign(Some(2))], &live(&[1, 2]), later, GRACE);
        assert_eq!(plan, vec![assign(Some(2))]);
    }

    #[test]
    fn a_revoked_unit_not_released_in_time_moves_anyway() {
        let mut s = state(4);
        let mut r = Revocations::default();
        let t = Instant::now();
        let plan = r.plan(&s, vec![assign(Some(2))], &live(&[1, 2]), t, GRACE);
        apply(&mut s, plan[0].clone());
        let plan = r.plan(&s, vec![assign(Some(2))], &live(&[1, 2]), t + GRACE, GRACE);
        assert_eq!(plan, vec![assign(Some(2))]);
    }

    #[test]
    fn a_dead_workers_units_and_older_clusters_move_at_once() {
        let s = state(4);
        let mut r = Revocations::default();
        let t = Instant::now();
        assert_eq!(
            r.plan(&s, vec![assign(Some(2))], &live(&[2]), t, GRACE),
            vec![assign(Some(2))],
            "worker 1 is dead"
        );
        let old = state(3);
        assert_eq!(
            r.plan(&old, vec![assign(Some(2))], &live(&[1, 2]), t, GRACE),
            vec![assign(Some(2))],
            "a cluster below feature level 4 cannot revoke"
        );
    }

    #[test]
    fn a_move_off_a_draining_worker_is_revoked_too() {
        let s = state(4);
        let mut r = Revocations::default();
        let draining = Liveness {
            live: BTreeSet::from([2]),
            draining: BTreeSet::from([1]),
            ..Liveness::default()
        };
        let plan = r.plan(&s, vec![assign(Some(2))], &draining, Instant::now(), GRACE);
        assert!(
            matches!(plan.as_slice(), [Command::Revoke { .. }]),
            "removed from the cluster but alive: {plan:?}"
        );
    }

    #[test]
    fn a_stale_release_is_fenced() {
        let mut s = state(4);
        let g = generation(&s);
        apply(&mut s, assign(Some(2)));
        let answer = s.apply(&Request::anonymous(Command::Release {
            name: "a".into(),
            task: Some(0),
            generation: g,
        }));
        assert!(answer.is_err(), "the unit moved: {answer:?}");
        assert_eq!(s.assignments["a"].tasks[&0].worker, Some(2));
    }
}
