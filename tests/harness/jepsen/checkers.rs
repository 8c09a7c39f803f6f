//! The fault suite's record checkers: loss, duplicates, single ownership on effects, offsets
//! that never move backwards without a reset, and convergence after healing. Each returns a
//! verdict that says what it saw.

use std::collections::{BTreeMap, BTreeSet};

/// A produced record: its unique number and where the broker put it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Produced {
    pub id: u64,
    pub partition: i32,
    pub offset: i64,
}

/// What the loss and duplicate checkers found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub produced: usize,
    pub delivered: usize,
    /// Acknowledged records that never arrived.
    pub lost: Vec<u64>,
    /// Deliveries beyond the first of a record.
    pub duplicates: usize,
}

impl Delivery {
    /// No loss; with `exactly_once`, no duplicate either.
    pub fn passes(&self, exactly_once: bool) -> bool {
        self.lost.is_empty() && (!exactly_once || self.duplicates == 0)
    }
}

/// Check every produced (acknowledged) record against the delivered ones (sink output and
/// DLQ together).
pub fn delivery(produced: &[Produced], delivered: &[u64]) -> Delivery {
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for id in delivered {
        *counts.entry(*id).or_default() += 1;
    }
    let lost = produced
        .iter()
        .filter(|p| !counts.contains_key(&p.id))
        .map(|p| p.id)
        .collect();
    let produced_ids: BTreeSet<u64> = produced.iter().map(|p| p.id).collect();
    Delivery {
        produced: produced.len(),
        delivered: counts.keys().filter(|id| produced_ids.contains(id)).count(),
        lost,
        duplicates: counts.values().map(|c| c - 1).sum(),
    }
}

/// One committed effect of a task: which partition, under which generation, by which worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Effect {
    pub partition: i32,
    pub worker: u64,
    pub generation: u64,
}

/// Committed effects, in commit order, that came from a generation older than one already
/// committed for the same partition: two owners' work both counted.
pub fn single_owner(effects: &[Effect]) -> Vec<Effect> {
    let mut newest: BTreeMap<i32, u64> = BTreeMap::new();
    let mut violations = Vec::new();
    for e in effects {
        let latest = newest.entry(e.partition).or_insert(e.generation);
        if e.generation < *latest {
            violations.push(e.clone());
        } else {
            *latest = e.generation;
        }
    }
    violations
}

/// An observation of a committed offset, or an explicit reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetEvent {
    Observed { partition: i32, offset: i64 },
    Reset,
}

/// Observations where a partition's committed offset went backwards with no reset between.
pub fn offsets_monotonic(events: &[OffsetEvent]) -> Vec<(i32, i64, i64)> {
    let mut last: BTreeMap<i32, i64> = BTreeMap::new();
    let mut violations = Vec::new();
    for e in events {
        match e {
            OffsetEvent::Reset => last.clear(),
            OffsetEvent::Observed { partition, offset } => {
                if let Some(prev) = last.get(partition) {
                    if offset < prev {
                        violations.push((*partition, *prev, *offset));
                    }
                }
                let entry = last.entry(*partition).or_insert(*offset);
                *entry = (*entry).max(*offset);
            }
        }
    }
    violations
}

/// A task's assignment as one node reports it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Assigned {
    pub connector: String,
    pub task: u32,
    pub worker: String,
    pub generation: u64,
}

/// A task's status as the runtime reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reported {
    pub connector: String,
    pub task: u32,
    pub state: String,
    pub worker: String,
    pub generation: u64,
    /// A FAILED task's trace (empty otherwise).
    pub trace: String,
}

/// What keeps a healed cluster from having converged: every live node must report the same
/// assignment, every assigned task must run on a live worker, and the status of each must be
/// RUNNING, reported by the generation it is assigned at (not by an earlier run). Empty when
/// converged.
pub fn convergence(
    views: &BTreeMap<u64, Option<Vec<Assigned>>>,
    reported: &[Reported],
    live_workers: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut reference: Option<(u64, Vec<Assigned>)> = None;
    for (node, view) in views {
        let Some(view) = view else {
            problems.push(format!("node {node} does not answer"));
            continue;
        };
        let mut view = view.clone();
        view.sort();
        match &reference {
            None => reference = Some((*node, view)),
            Some((first, expected)) if *expected != view => problems.push(format!(
                "node {node} reports assignment {view:?}, node {first} reports {expected:?}"
            )),
            Some(_) => {}
        }
    }
    let Some((_, assigned)) = reference else {
        problems.push("no node answers".into());
        return problems;
    };
    for a in &assigned {
        if !live_workers.contains(&a.worker) {
            problems.push(format!(
                "{} task {} is assigned to {:?}, not a live worker",
                a.connector, a.task, a.worker
            ));
        }
        match reported
            .iter()
            .find(|r| r.connector == a.connector && r.task == a.task)
        {
            None => problems.push(format!("{} task {} has no status", a.connector, a.task)),
            Some(r) if r.state != "RUNNING" || r.generation != a.generation => {
                let trace: String = r.trace.chars().take(400).collect();
                problems.push(format!(
                    "{} task {} is {} at generation {} (assigned at generation {}){}",
                    a.connector,
                    a.task,
                    r.state,
                    r.generation,
                    a.generation,
                    if trace.is_empty() {
                        String::new()
                    } else {
                        format!(": {trace}")
                    }
                ))
            }
            Some(_) => {}
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn produced(n: u64) -> Vec<Produced> {
        (0..n)
            .map(|id| Produced {
                id,
                partition: (id % 2) as i32,
                offset: (id / 2) as i64,
            })
            .collect()
    }

    #[test]
    fn every_record_once_passes_even_exactly_once() {
        let v = delivery(&produced(10), &(0..10).collect::<Vec<_>>());
        assert!(v.passes(true), "{v:?}");
        assert_eq!((v.produced, v.delivered, v.duplicates), (10, 10, 0));
    }

    #[test]
    fn a_lost_record_fails() {
        let delivered: Vec<u64> = (0..10).filter(|id| *id != 7).collect();
        let v = delivery(&produced(10), &delivered);
        assert_eq!(v.lost, vec![7]);
        assert!(!v.passes(false));
    }

    #[test]
    fn duplicates_are_counted_and_fail_exactly_once_only() {
        let mut delivered: Vec<u64> = (0..10).collect();
        delivered.extend([3, 3, 4]);
        let v = delivery(&produced(10), &delivered);
        assert_eq!(v.duplicates, 3);
        assert!(v.passes(false));
        assert!(!v.passes(true));
    }

    #[test]
    fn a_late_zombie_commit_breaks_single_ownership() {
        let e = |partition, worker, generation| Effect {
            partition,
            worker,
            generation,
        };
        assert!(single_owner(&[e(0, 1, 1), e(1, 2, 2), e(0, 3, 3), e(0, 3, 3)]).is_empty());
        let zombie = single_owner(&[e(0, 1, 1), e(0, 3, 3), e(0, 1, 1)]);
        assert_eq!(zombie, vec![e(0, 1, 1)]);
    }

    #[test]
    fn offsets_go_backwards_only_after_a_reset() {
        let o = |partition, offset| OffsetEvent::Observed { partition, offset };
        assert!(
            offsets_monotonic(&[o(0, 5), o(1, 2), o(0, 9), OffsetEvent::Reset, o(0, 0)]).is_empty()
        );
        assert_eq!(
            offsets_monotonic(&[o(0, 5), o(0, 9), o(0, 7)]),
            vec![(0, 9, 7)]
        );
    }

    fn assigned(task: u32, worker: &str, generation: u64) -> Assigned {
        Assigned {
            connector: "sink".into(),
            task,
            worker: worker.into(),
            generation,
        }
    }

    fn reported(task: u32, state: &str, generation: u64) -> Reported {
        Reported {
            connector: "sink".into(),
            task,
            state: state.into(),
            worker: "w1".into(),
            generation,
            trace: String::new(),
        }
    }

    #[test]
    fn convergence_needs_agreement_live_workers_and_running_at_the_assigned_generation() {
        let live: BTreeSet<String> = ["w1".to_string(), "w2".to_string()].into();
        let view = vec![assigned(0, "w1", 5), assigned(1, "w2", 6)];
        let views = BTreeMap::from([(1, Some(view.clone())), (2, Some(view.clone()))]);
        let running = [reported(0, "RUNNING", 5), reported(1, "RUNNING", 6)];
        assert!(convergence(&views, &running, &live).is_empty());

        // A node that disagrees, or does not answer.
        let stale = vec![assigned(0, "w1", 5), assigned(1, "w1", 4)];
        let split = BTreeMap::from([(1, Some(view.clone())), (2, Some(stale)), (3, None)]);
        assert_eq!(convergence(&split, &running, &live).len(), 2);
        // A task still on a dead worker.
        let dead = BTreeMap::from([(1, Some(vec![assigned(0, "w3", 5)]))]);
        assert_eq!(convergence(&dead, &running[..1], &live).len(), 1);
        // RUNNING reported by an earlier run (generation 4), or not running.
        let old = [reported(0, "RUNNING", 5), reported(1, "RUNNING", 4)];
        assert_eq!(convergence(&views, &old, &live).len(), 1);
        let failed = [reported(0, "FAILED", 5), reported(1, "RUNNING", 6)];
        assert_eq!(convergence(&views, &failed, &live).len(), 1);
        assert_eq!(convergence(&views, &running[..1], &live).len(), 1);
    }
}
