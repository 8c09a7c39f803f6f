//! The committed effects of a run, read from the Raft log itself: a stopped node's committed
//! entries are replayed through the state machine, and every accepted offset commit and every
//! change of a partition's owner is listed with its generation and worker, in log order. The
//! checkers then judge them on their own terms (a commit older than the partition's newest
//! owner is a violation), whatever the state machine decided.

use std::collections::BTreeMap;

use ferry_meta::state::{Command, ConnectorAssignment, Outcome};
use ferry_meta::types::Entry;
use ferry_meta::ClusterState;
use openraft::EntryPayload;

use super::checkers::{Effect, OffsetEvent};

/// What a replay of the log found for one sink connector and topic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Entries replayed.
    pub entries: usize,
    /// Owner changes and accepted commits, in log order.
    pub effects: Vec<Effect>,
    /// Committed offsets after each accepted commit, and resets.
    pub offsets: Vec<OffsetEvent>,
    /// Offset commits the state machine accepted.
    pub commits: usize,
    /// Offset commits it refused for a stale generation (zombies fenced).
    pub fenced: usize,
    /// Range commits refused because their start was not the recorded offset (a task that
    /// wrote from an offset another commit has moved past).
    pub conflicts: usize,
    /// Entries that repeat a request already applied (a writer retried after losing the
    /// answer): the state machine answers them as the first time and changes nothing, so they
    /// are no effect.
    pub repeats: usize,
}

impl Replayed {
    /// An accepted commit by `task` at `generation` of `offsets` (partition, next offset): one
    /// effect per partition, by the worker `before` assigned the task to.
    fn accepted(
        &mut self,
        before: Option<&ConnectorAssignment>,
        task: u32,
        generation: u64,
        offsets: impl Iterator<Item = (i32, Option<i64>)>,
    ) {
        self.commits += 1;
        let worker = before
            .and_then(|a| a.tasks.get(&task))
            .and_then(|a| a.worker)
            .unwrap_or(0);
        for (partition, offset) in offsets {
            self.effects.push(Effect {
                partition,
                worker,
                generation,
            });
            if let Some(offset) = offset {
                self.offsets
                    .push(OffsetEvent::Observed { partition, offset });
            }
        }
    }
}

/// Whether `request` repeats one `state` has already answered.
fn is_repeat(state: &ClusterState, request: &ferry_meta::Request) -> bool {
    request
        .id
        .as_ref()
        .is_some_and(|id| state.requests.contains_key(id))
}

/// Partition → (generation, worker) of the task that owns it now.
fn owners(state: &ClusterState, name: &str, topic: &str) -> BTreeMap<i32, (u64, u64)> {
    let mut owners = BTreeMap::new();
    let (Some(parts), Some(assigned)) =
        (state.sink_partitions.get(name), state.assignments.get(name))
    else {
        return owners;
    };
    for (task, tps) in parts {
        let Some(a) = assigned.tasks.get(task) else {
            continue;
        };
        for tp in tps.iter().filter(|tp| tp.topic == topic) {
            owners.insert(tp.partition, (a.generation, a.worker.unwrap_or(0)));
        }
    }
    owners
}

/// Replay `entries` (from index 1) and collect the effects on connector `name`'s `topic`.
pub fn replay(entries: &[Entry], name: &str, topic: &str) -> Replayed {
    let mut state = ClusterState::default();
    let mut out = Replayed {
        entries: entries.len(),
        ..Replayed::default()
    };
    let mut last_owners = BTreeMap::new();
    for entry in entries {
        let EntryPayload::Normal(request) = &entry.payload else {
            continue;
        };
        let command = &request.command;
        if command.connector() != Some(name) {
            // Another connector's entry (thousands, with a big connector): no copy of the state.
            let _ = state.apply(request);
            continue;
        }
        // What the entry needs of the state before it: the connector's assignments only.
        let before = state.assignments.get(name).cloned();
        let repeat = is_repeat(&state, request);
        let answer = state.apply(request);
        if repeat {
            out.repeats += 1;
            continue;
        }
        match (command, &answer) {
            (
                Command::CommitSinkOffsets {
                    task,
                    generation,
                    offsets,
                    ..
                },
                Ok(_),
            ) => {
                let offsets = offsets.iter().filter(|o| o.topic == topic);
                out.accepted(
                    before.as_ref(),
                    *task,
                    *generation,
                    offsets.map(|o| (o.partition, o.offset)),
                );
            }
            // The storage sinks' commit: a range of one partition, compare-and-set on `start`.
            (
                Command::CommitSinkRange {
                    task,
                    generation,
                    topic: t,
                    partition,
                    next,
                    ..
                },
                Ok(Outcome::Done),
            ) if t == topic => {
                out.accepted(
                    before.as_ref(),
                    *task,
                    *generation,
                    std::iter::once((*partition, Some(*next))),
                );
            }
            (Command::CommitSinkRange { .. }, Ok(Outcome::Conflict { .. })) => out.conflicts += 1,
            (Command::CommitSinkRange { .. }, Err(_)) => out.fenced += 1,
            (Command::CommitSinkOffsets { .. }, Err(_)) => out.fenced += 1,
            (
                Command::AlterOffsets { .. }
                | Command::ResetOffsets { .. }
                | Command::DeleteConnector { .. },
                Ok(_),
            ) => out.offsets.push(OffsetEvent::Reset),
            _ => {}
        }
        let now = owners(&state, name, topic);
        for (partition, (generation, worker)) in &now {
            if last_owners.get(partition) != Some(&(*generation, *worker)) {
                out.effects.push(Effect {
                    partition: *partition,
                    worker: *worker,
                    generation: *generation,
                });
            }
        }
        last_owners = now;
    }
    out
}

/// A readable account of every entry about connector `name`, with what the state machine
/// answered and the owners of `topic`'s partitions after it: written beside a failed verdict,
/// so that a violation can be traced to the entries that caused it.
pub fn trace(entries: &[Entry], name: &str, topic: &str) -> String {
    use std::fmt::Write;
    let mut state = ClusterState::default();
    let mut out = String::new();
    for entry in entries {
        let index = entry.log_id.index;
        let EntryPayload::Normal(request) = &entry.payload else {
            let _ = writeln!(out, "{index}: (membership or blank)");
            continue;
        };
        let repeat = is_repeat(&state, request);
        let answer = state.apply(request);
        let command = &request.command;
        if command.connector() != Some(name) && command.connector().is_some() {
            continue;
        }
        let detail = match command {
            Command::CommitSinkOffsets {
                task,
                generation,
                offsets,
                ..
            } => format!(
                "task {task} generation {generation} offsets {:?}",
                offsets
                    .iter()
                    .map(|o| (o.partition, o.offset))
                    .collect::<Vec<_>>()
            ),
            other => format!("{other:?}"),
        };
        let answer = match answer {
            _ if repeat => "a repeat of an applied request: no effect".to_string(),
            Ok(outcome) => format!("{outcome:?}"),
            Err(rejection) => format!("refused: {rejection}"),
        };
        let _ = writeln!(
            out,
            "{index}: {} {detail} -> {answer}; owners {:?}",
            command.kind(),
            owners(&state, name, topic)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_meta::state::{SinkOffset, TopicPartitionRef};
    use ferry_meta::{ConfigMap, Request};
    use openraft::{CommittedLeaderId, LogId};

    fn entries(commands: Vec<Command>) -> Vec<Entry> {
        requests(commands.into_iter().map(Request::anonymous).collect())
    }

    fn requests(requests: Vec<Request>) -> Vec<Entry> {
        requests
            .into_iter()
            .enumerate()
            .map(|(i, request)| Entry {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), i as u64 + 1),
                payload: EntryPayload::Normal(request),
            })
            .collect()
    }

    fn commit(generation: u64, offset: i64) -> Command {
        Command::CommitSinkOffsets {
            name: "sink".into(),
            task: 0,
            generation,
            offsets: vec![SinkOffset {
                topic: "t".into(),
                partition: 0,
                offset: Some(offset),
            }],
        }
    }

    fn assign(worker: u64) -> Command {
        Command::Assign {
            name: "sink".into(),
            task: Some(0),
            worker: Some(worker),
        }
    }

    fn setup() -> Vec<Command> {
        let config: ConfigMap = [("connector.class".to_string(), "FileStreamSink".to_string())]
            .into_iter()
            .collect();
        vec![
            Command::PutConnector {
                name: "sink".into(),
                config: config.clone(),
                create: true,
                expected_version: None,
                initial: None,
            },
            Command::PutTaskConfigs {
                name: "sink".into(),
                version: 1,
                configs: vec![config],
                shared: ferry_meta::ConfigMap::default(),
            },
            assign(1), // generation 1
            Command::SetSinkPartitions {
                name: "sink".into(),
                partitions: BTreeMap::from([(
                    0,
                    vec![TopicPartitionRef {
                        topic: "t".into(),
                        partition: 0,
                    }],
                )]),
            }, // generation 2
        ]
    }

    #[test]
    fn owner_changes_and_accepted_commits_are_listed_with_generation_and_worker() {
        let mut log = setup();
        log.extend([
            commit(2, 10),
            assign(2), // generation 3: worker 1's run is now a zombie
            commit(2, 20),
            commit(3, 15),
        ]);
        let r = replay(&entries(log), "sink", "t");
        let e = |worker, generation| Effect {
            partition: 0,
            worker,
            generation,
        };
        assert_eq!(r.effects, vec![e(1, 2), e(1, 2), e(2, 3), e(2, 3)]);
        assert_eq!((r.commits, r.fenced, r.entries), (2, 1, 8));
        assert_eq!(
            r.offsets,
            vec![
                OffsetEvent::Observed {
                    partition: 0,
                    offset: 10
                },
                OffsetEvent::Observed {
                    partition: 0,
                    offset: 15
                },
            ]
        );
        assert!(super::super::checkers::single_owner(&r.effects).is_empty());
    }

    fn range(generation: u64, start: i64, next: i64) -> Command {
        Command::CommitSinkRange {
            name: "sink".into(),
            task: 0,
            generation,
            topic: "t".into(),
            partition: 0,
            start,
            next,
            payload: BTreeMap::from([("tmp".to_string(), "final".to_string())]),
        }
    }

    #[test]
    fn range_commits_are_effects_and_a_zombie_or_a_stale_start_is_refused() {
        let mut log = setup();
        log.extend([
            range(2, 0, 10),
            assign(2),        // generation 3
            range(2, 10, 20), // the zombie of generation 2: fenced
            range(3, 0, 12),  // a start the state has moved past: a conflict
            range(3, 10, 15),
        ]);
        let r = replay(&entries(log), "sink", "t");
        assert_eq!((r.commits, r.fenced, r.conflicts), (2, 1, 1));
        let observed = |offset| OffsetEvent::Observed {
            partition: 0,
            offset,
        };
        assert_eq!(r.offsets, vec![observed(10), observed(15)]);
        assert!(super::super::checkers::single_owner(&r.effects).is_empty());
        assert_eq!(
            r.effects.last().map(|e| (e.worker, e.generation)),
            Some((2, 3))
        );
    }

    #[test]
    fn a_retried_request_already_applied_is_no_effect() {
        // A task's commit is applied, its answer lost (the leader paused); the task moves, and
        // the retry of the same request lands later in the log. The state machine answers it
        // as the first time without changing anything: it is not a zombie's accepted commit.
        let mut log: Vec<Request> = setup().into_iter().map(Request::anonymous).collect();
        log.push(Request::new("commit-1", commit(2, 10)));
        log.push(Request::anonymous(assign(2)));
        log.push(Request::new("commit-1", commit(2, 10)));
        log.push(Request::new("commit-2", commit(3, 15)));
        let r = replay(&requests(log), "sink", "t");
        assert_eq!((r.commits, r.repeats, r.fenced), (2, 1, 0));
        assert!(super::super::checkers::single_owner(&r.effects).is_empty());
        assert!(super::super::checkers::offsets_monotonic(&r.offsets).is_empty());
        let shown = trace(
            &requests(vec![
                Request::new("c", commit(2, 10)),
                Request::new("c", commit(2, 10)),
            ]),
            "sink",
            "t",
        );
        assert!(shown.contains("a repeat of an applied request"), "{shown}");
    }
}
