//! The scheduler's decisions as pure functions of the replicated state and of which workers
//! are alive: where every connector instance and task runs, and which topic-partitions each
//! sink task owns. Balanced (loads differ by at most one) and moving as little as possible: a
//! joining worker takes only its fair share, a dead worker's units spread over the others, and
//! nothing else moves.

use std::collections::{BTreeMap, BTreeSet};

use ferry_meta::state::{Assignment, Command, TopicPartitionRef};
use ferry_meta::{ClusterState, NodeId};

/// A connector instance (`task: None`) or one of its tasks.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Unit {
    pub connector: String,
    pub task: Option<u32>,
}

/// Which workers may run what.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Liveness {
    /// Workers that heartbeat: they may receive work.
    pub live: BTreeSet<NodeId>,
    /// Workers silent for less than the rebalance delay: they keep their units, get no new ones.
    pub grace: BTreeSet<NodeId>,
    /// Workers alive but no longer in the cluster's worker set (`remove-node`): every unit of
    /// theirs moves, and they get none (the move is planned: see `handover`).
    pub draining: BTreeSet<NodeId>,
}

/// Every unit the state asks for, in a stable order.
pub fn units(state: &ClusterState) -> Vec<Unit> {
    let mut units = Vec::new();
    for (name, connector) in &state.connectors {
        units.push(Unit {
            connector: name.clone(),
            task: None,
        });
        for task in 0..connector.task_count() as u32 {
            units.push(Unit {
                connector: name.clone(),
                task: Some(task),
            });
        }
    }
    units
}

/// Who runs `unit`, and under which generation.
pub fn assignment<'a>(state: &'a ClusterState, unit: &Unit) -> Option<&'a Assignment> {
    let assignment = state.assignments.get(&unit.connector)?;
    match unit.task {
        Some(task) => assignment.tasks.get(&task),
        None => assignment.connector.as_ref(),
    }
}

/// The assignment commands that bring the state to a balanced placement on `liveness`.
///
/// Two rules keep a planned move from being undone by the next plan (which would restart a
/// unit on the worker it never left): a unit revoked from or released by a worker counts as
/// gone from it and goes elsewhere if any other worker has room; and while a worker is in
/// grace its share is unknown (a new leader has not heard from it yet, or its heartbeat is
/// late), so units on live workers stay where they are — only units without a live owner are
/// placed, not back where they were revoked from even above another's share — until it is
/// heard from or gone.
pub fn assign(state: &ClusterState, liveness: &Liveness) -> Vec<Command> {
    let rebalance = liveness.grace.is_empty();
    let workers: Vec<NodeId> = liveness.live.iter().copied().collect();
    let mut owned: BTreeMap<NodeId, Vec<Unit>> = workers.iter().map(|w| (*w, Vec::new())).collect();
    // The units the plan may place, with where they run now.
    let mut movable: Vec<(Unit, Option<NodeId>)> = Vec::new();
    let mut pool: Vec<(Unit, Option<NodeId>)> = Vec::new();
    for unit in units(state) {
        let current = assignment(state, &unit);
        let worker = current.and_then(|a| a.worker);
        if worker.is_some_and(|w| liveness.grace.contains(&w) && !liveness.live.contains(&w)) {
            // A silent worker within its grace keeps its units.
            continue;
        }
        // The worker a unit should not go back to: revoked from it, or released by it
        // (putting it back would restart it where it ran).
        let revoked = current.is_some_and(|a| a.revoked);
        let avoid = match worker {
            Some(w) => Some(w).filter(|_| revoked),
            None => current.and_then(|a| a.released_by),
        };
        match worker.and_then(|w| owned.get_mut(&w)).filter(|_| !revoked) {
            Some(list) => list.push(unit.clone()),
            None => pool.push((unit.clone(), avoid)),
        }
        movable.push((unit, worker));
    }
    let mut placed: BTreeMap<Unit, Option<NodeId>> = BTreeMap::new();
    if !workers.is_empty() {
        let n = movable.len();
        let (base, extra) = (n / workers.len(), n % workers.len());
        // The most loaded workers get the larger caps: fewest moves.
        let mut by_load: Vec<NodeId> = workers.clone();
        by_load.sort_by_key(|w| (std::cmp::Reverse(owned[w].len()), *w));
        let caps: BTreeMap<NodeId, usize> = by_load
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let fair = base + usize::from(i < extra);
                // Not rebalancing: a worker above its share keeps what it has.
                let cap = if rebalance {
                    fair
                } else {
                    fair.max(owned[w].len())
                };
                (*w, cap)
            })
            .collect();
        for (worker, list) in owned.iter_mut() {
            let cap = caps[worker];
            if list.len() > cap {
                pool.extend(list.split_off(cap).into_iter().map(|unit| (unit, None)));
            }
        }
        pool.sort();
        for (unit, avoid) in pool {
            // Back to the worker it was revoked from only if no other has room; while
            // rebalancing waits, above another's share rather than back (the rebalance that
            // follows evens the loads out by moving, not restarting in place).
            let fits = |w: &NodeId| {
                owned[w].len() < caps[w] || (!rebalance && avoid.is_some_and(|a| a != *w))
            };
            let target = workers
                .iter()
                .copied()
                .filter(fits)
                .min_by_key(|w| (Some(*w) == avoid, owned[w].len(), *w));
            if let Some(w) = target {
                if let Some(list) = owned.get_mut(&w) {
                    list.push(unit);
                }
            }
        }
        for (worker, list) in owned {
            for unit in list {
                placed.insert(unit, Some(worker));
            }
        }
    }
    movable
        .into_iter()
        .filter_map(|(unit, current)| {
            let target = placed.get(&unit).copied().flatten();
            (target != current).then(|| Command::Assign {
                name: unit.connector.clone(),
                task: unit.task,
                worker: target,
            })
        })
        .collect()
}

/// Spread a sink connector's topic-partitions over its tasks, round-robin in a stable order.
pub fn spread(
    partitions: &BTreeSet<TopicPartitionRef>,
    tasks: u32,
) -> BTreeMap<u32, Vec<TopicPartitionRef>> {
    let mut spread: BTreeMap<u32, Vec<TopicPartitionRef>> =
        (0..tasks).map(|t| (t, Vec::new())).collect();
    if tasks == 0 {
        return spread;
    }
    for (i, tp) in partitions.iter().enumerate() {
        if let Some(list) = spread.get_mut(&((i as u32) % tasks)) {
            list.push(tp.clone());
        }
    }
    spread
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::state::{Request, TargetState};
    use ferry_meta::ConfigMap;

    /// A state with connectors of the given task counts.
    fn state(connectors: &[(&str, usize)]) -> ClusterState {
        let mut s = ClusterState::default();
        for (name, tasks) in connectors {
            let answer = s.apply(&Request::anonymous(Command::PutConnector {
                name: name.to_string(),
                config: ConfigMap::default(),
                create: true,
                expected_version: None,
                initial: None,
            }));
            assert!(answer.is_ok());
            let answer = s.apply(&Request::anonymous(Command::PutTaskConfigs {
                name: name.to_string(),
                version: 1,
                configs: vec![ConfigMap::default(); *tasks],
                shared: ConfigMap::default(),
            }));
            assert!(answer.is_ok());
        }
        s
    }

    fn live(ids: &[NodeId]) -> Liveness {
        Liveness {
            live: ids.iter().copied().collect(),
            ..Liveness::default()
        }
    }

    fn apply_all(s: &mut ClusterState, commands: &[Command]) {
        for c in commands {
            assert!(s.apply(&Request::anonymous(c.clone())).is_ok(), "{c:?}");
        }
    }

    /// Compute the plan, then apply it.
    fn settle(s: &mut ClusterState, liveness: &Liveness) {
        let commands = assign(s, liveness);
        apply_all(s, &commands);
    }

    fn owner(state: &ClusterState, unit: &Unit) -> Option<NodeId> {
        assignment(state, unit)?.worker
    }

    fn loads(s: &ClusterState) -> BTreeMap<NodeId, usize> {
        let mut loads = BTreeMap::new();
        for unit in units(s) {
            if let Some(w) = owner(s, &unit) {
                *loads.entry(w).or_default() += 1;
            }
        }
        loads
    }

    fn placement(s: &ClusterState) -> BTreeMap<Unit, Option<NodeId>> {
        units(s)
            .into_iter()
            .map(|u| {
                let o = owner(s, &u);
                (u, o)
            })
            .collect()
    }

    #[test]
    fn a_fresh_cluster_is_balanced() {
        let mut s = state(&[("a", 3), ("b", 2)]); // 7 units
        let commands = assign(&s, &live(&[1, 2, 3]));
        assert_eq!(commands.len(), 7);
        apply_all(&mut s, &commands);
        let mut counts: Vec<usize> = loads(&s).values().copied().collect();
        counts.sort();
        assert_eq!(counts, vec![2, 2, 3]);
        assert!(
            assign(&s, &live(&[1, 2, 3])).is_empty(),
            "stable once balanced"
        );
    }

    #[test]
    fn a_joining_worker_takes_only_its_share() {
        let mut s = state(&[("a", 5), ("b", 5)]); // 12 units on 2 workers
        settle(&mut s, &live(&[1, 2]));
        let before = placement(&s);
        let commands = assign(&s, &live(&[1, 2, 3]));
        assert_eq!(
            commands.len(),
            4,
            "12 units over 3 workers: the new one takes 4"
        );
        apply_all(&mut s, &commands);
        assert_eq!(
            loads(&s).values().copied().collect::<Vec<_>>(),
            vec![4, 4, 4]
        );
        let moved = placement(&s)
            .iter()
            .filter(|(u, w)| before[*u] != **w)
            .count();
        assert_eq!(moved, 4, "only the share of the new worker moved");
    }

    #[test]
    fn a_dead_workers_units_spread_and_nothing_else_moves() {
        let mut s = state(&[("a", 5)]); // 6 units on 3 workers
        settle(&mut s, &live(&[1, 2, 3]));
        let before = placement(&s);
        let commands = assign(&s, &live(&[1, 2]));
        apply_all(&mut s, &commands);
        assert_eq!(loads(&s), BTreeMap::from([(1, 3), (2, 3)]));
        for (unit, worker) in placement(&s) {
            if before[&unit] != Some(3) {
                assert_eq!(
                    before[&unit], worker,
                    "{unit:?} moved though its worker lives"
                );
            }
        }
    }

    #[test]
    fn within_the_rebalance_delay_a_silent_worker_keeps_its_units() {
        let mut s = state(&[("a", 5)]);
        settle(&mut s, &live(&[1, 2, 3]));
        let liveness = Liveness {
            live: BTreeSet::from([1, 2]),
            grace: BTreeSet::from([3]),
            ..Liveness::default()
        };
        assert!(assign(&s, &liveness).is_empty());
    }

    #[test]
    fn a_draining_worker_gives_up_every_unit_and_gets_none() {
        let mut s = state(&[("a", 5)]);
        settle(&mut s, &live(&[1, 2, 3]));
        let liveness = Liveness {
            live: BTreeSet::from([1, 2]),
            draining: BTreeSet::from([3]),
            ..Liveness::default()
        };
        settle(&mut s, &liveness);
        let l = loads(&s);
        assert!(!l.contains_key(&3), "{l:?}");
        assert_eq!(l.values().sum::<usize>(), 6);
    }

    #[test]
    fn with_no_live_worker_units_become_unassigned() {
        let mut s = state(&[("a", 1)]);
        settle(&mut s, &live(&[1]));
        let commands = assign(&s, &live(&[]));
        assert_eq!(commands.len(), 2);
        apply_all(&mut s, &commands);
        assert!(loads(&s).is_empty());
    }

    #[test]
    fn stopped_connectors_stay_placed() {
        let mut s = state(&[("a", 2)]);
        settle(&mut s, &live(&[1, 2]));
        let stop = Command::SetTargetState {
            name: "a".into(),
            target: TargetState::Stopped,
        };
        apply_all(&mut s, &[stop]);
        assert!(assign(&s, &live(&[1, 2])).is_empty());
    }

    #[test]
    fn partitions_spread_round_robin() {
        let parts: BTreeSet<TopicPartitionRef> = (0..5)
            .map(|p| TopicPartitionRef {
                topic: "t".into(),
                partition: p,
            })
            .collect();
        let spread = spread(&parts, 3);
        let sizes: Vec<usize> = spread.values().map(Vec::len).collect();
        assert_eq!(sizes, vec![2, 2, 1]);
        assert_eq!(spread[&1][0].partition, 1);
        assert!(super::spread(&parts, 0).is_empty());
    }

    /// A worker comes back and the leader moves its share to it through revocations, while
    /// the owners release in any order and, now and then, one worker is not heard from for a
    /// while (a new leader settling, a late heartbeat): no unit revoked from or released by a
    /// worker is ever assigned back to it (that would restart it where it ran), and the
    /// placement ends balanced and stable.
    #[test]
    fn a_revoked_unit_is_never_given_back_to_its_owner() {
        let mut rng: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |below: u64| {
            rng = rng
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (rng >> 33) % below
        };
        let all = live(&[1, 2, 3]);
        for shape in [
            &[("a", 3), ("b", 1)][..],
            &[("a", 2), ("b", 1)],
            &[("a", 4), ("b", 1), ("c", 1)],
            &[("a", 3)],
            &[("a", 5), ("b", 2)],
        ] {
            for returning in [1, 2, 3] {
                for _ in 0..200 {
                    let mut s = state(shape);
                    apply_all(&mut s, &[Command::SetFeatureLevel { level: 4 }]);
                    let others: Vec<NodeId> =
                        [1, 2, 3].into_iter().filter(|w| *w != returning).collect();
                    settle(&mut s, &live(&others));
                    let mut from: BTreeMap<Unit, NodeId> = BTreeMap::new();
                    for round in 0..100 {
                        let silent = next(10) + 1;
                        let liveness = if silent <= 3 && round < 60 {
                            Liveness {
                                live: all.live.iter().copied().filter(|w| *w != silent).collect(),
                                grace: BTreeSet::from([silent]),
                                ..Liveness::default()
                            }
                        } else {
                            all.clone()
                        };
                        for command in assign(&s, &liveness) {
                            let Command::Assign { name, task, worker } = &command else {
                                continue;
                            };
                            let unit = Unit {
                                connector: name.clone(),
                                task: *task,
                            };
                            let Some(current) = assignment(&s, &unit).copied() else {
                                continue;
                            };
                            match current.worker {
                                Some(owner) if !current.revoked => {
                                    from.insert(unit, owner);
                                    let revoke = Command::Revoke {
                                        name: name.clone(),
                                        task: *task,
                                        generation: current.generation,
                                    };
                                    apply_all(&mut s, &[revoke]);
                                }
                                Some(_) => {} // waits for its release
                                None => {
                                    let back = from.remove(&unit);
                                    assert!(
                                        back.is_none() || back != *worker,
                                        "{unit:?} went back to {back:?} ({shape:?}, worker {returning} returning)"
                                    );
                                    apply_all(&mut s, std::slice::from_ref(&command));
                                }
                            }
                        }
                        // One owner releases one revoked unit.
                        let revoked: Vec<(Unit, u64)> = units(&s)
                            .into_iter()
                            .filter_map(|u| {
                                let a = assignment(&s, &u).filter(|a| a.revoked)?;
                                Some((u.clone(), a.generation))
                            })
                            .collect();
                        if !revoked.is_empty() {
                            let (unit, generation) =
                                revoked[next(revoked.len() as u64) as usize].clone();
                            apply_all(
                                &mut s,
                                &[Command::Release {
                                    name: unit.connector,
                                    task: unit.task,
                                    generation,
                                }],
                            );
                        }
                    }
                    assert!(
                        assign(&s, &all).is_empty(),
                        "stable once every move is done"
                    );
                    let counts: Vec<usize> = loads(&s).values().copied().collect();
                    let (min, max) = (counts.iter().min(), counts.iter().max());
                    assert!(
                        min.zip(max).is_some_and(|(a, b)| b - a <= 1),
                        "balanced: {counts:?}"
                    );
                }
            }
        }
    }
}
