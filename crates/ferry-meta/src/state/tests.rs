//! Table-driven tests of `apply`: each case is a sequence of commands, the answer expected for
//! the last one, and a check of the state afterwards.

use super::*;
use crate::redact::ConfigMap;
use crate::state::TopicPartitionRef;
use std::collections::BTreeMap;

fn cfg(pairs: &[(&str, &str)]) -> ConfigMap {
    pairs.iter().map(|(k, v)| (*k, *v)).collect()
}

fn put(name: &str, create: bool, expected_version: Option<u64>) -> Command {
    Command::PutConnector {
        name: name.into(),
        config: cfg(&[("connector.class", "FileStreamSink"), ("topics", name)]),
        create,
        expected_version,
        initial: None,
    }
}

fn put_cfg(name: &str, config: ConfigMap) -> Command {
    Command::PutConnector {
        name: name.into(),
        config,
        create: false,
        expected_version: None,
        initial: None,
    }
}

fn tasks(name: &str, version: u64, n: usize) -> Command {
    Command::PutTaskConfigs {
        name: name.into(),
        version,
        configs: (0..n).map(|i| cfg(&[("task", &i.to_string())])).collect(),
        shared: ConfigMap::default(),
    }
}

fn assign(name: &str, task: Option<u32>, worker: u64) -> Command {
    Command::Assign {
        name: name.into(),
        task,
        worker: Some(worker),
    }
}

fn revoke(name: &str, task: Option<u32>, generation: u64) -> Command {
    Command::Revoke {
        name: name.into(),
        task,
        generation,
    }
}

fn release(name: &str, task: Option<u32>, generation: u64) -> Command {
    Command::Release {
        name: name.into(),
        task,
        generation,
    }
}

fn target(name: &str, target: TargetState) -> Command {
    Command::SetTargetState {
        name: name.into(),
        target,
    }
}

fn sink_commit(name: &str, task: u32, generation: u64, offset: i64) -> Command {
    Command::CommitSinkOffsets {
        name: name.into(),
        task,
        generation,
        offsets: vec![SinkOffset {
            topic: "t".into(),
            partition: 0,
            offset: Some(offset),
        }],
    }
}

/// Task 0 owns partition 0 of topic `t` (set before any assignment: no generation is used).
fn owns_partition_0(name: &str) -> Command {
    partitions(name, &[(0, &[0])])
}

fn report(name: &str, task: Option<u32>, generation: u64, state: RunState) -> Command {
    Command::ReportStatus {
        name: name.into(),
        task,
        generation,
        state,
        worker: Some(1),
        trace: None,
    }
}

struct Case {
    name: &'static str,
    commands: Vec<Command>,
    want: Response,
    check: fn(&ClusterState),
}

fn run(cases: Vec<Case>) {
    for case in cases {
        let mut state = ClusterState::default();
        let mut last = Ok(Outcome::Done);
        for command in &case.commands {
            last = state.apply(&Request::anonymous(command.clone()));
        }
        assert_eq!(last, case.want, "case {}", case.name);
        (case.check)(&state);
    }
}

fn nothing(_: &ClusterState) {}

#[test]
fn connectors() {
    run(vec![
        Case {
            name: "create stores version 1",
            commands: vec![put("a", true, None)],
            want: Ok(Outcome::Connector {
                version: 1,
                created: true,
            }),
            check: |s| {
                assert_eq!(s.connectors["a"].version, 1);
                assert_eq!(s.connectors["a"].target, TargetState::Running);
                assert_eq!(s.status["a"].connector.state, RunState::Unassigned);
            },
        },
        Case {
            name: "create twice is refused",
            commands: vec![put("a", true, None), put("a", true, None)],
            want: Err(Rejection::AlreadyExists { name: "a".into() }),
            check: |s| assert_eq!(s.connectors["a"].version, 1),
        },
        Case {
            name: "update bumps the version",
            commands: vec![
                put("a", true, None),
                put_cfg("a", cfg(&[("topics", "other")])),
            ],
            want: Ok(Outcome::Connector {
                version: 2,
                created: false,
            }),
            check: |s| assert_eq!(s.connectors["a"].config.get("topics"), Some("other")),
        },
        Case {
            name: "an unchanged config keeps its version",
            commands: vec![put("a", true, None), put("a", false, None)],
            want: Ok(Outcome::Connector {
                version: 1,
                created: false,
            }),
            check: nothing,
        },
        Case {
            name: "compare-and-set with the right version",
            commands: vec![
                put("a", true, None),
                Command::PutConnector {
                    name: "a".into(),
                    config: cfg(&[("x", "1")]),
                    create: false,
                    expected_version: Some(1),
                    initial: None,
                },
            ],
            want: Ok(Outcome::Connector {
                version: 2,
                created: false,
            }),
            check: nothing,
        },
        Case {
            name: "compare-and-set with a stale version",
            commands: vec![
                put("a", true, None),
                put_cfg("a", cfg(&[("x", "1")])),
                Command::PutConnector {
                    name: "a".into(),
                    config: cfg(&[("x", "2")]),
                    create: false,
                    expected_version: Some(1),
                    initial: None,
                },
            ],
            want: Err(Rejection::VersionMismatch {
                name: "a".into(),
                expected: 1,
                actual: 2,
            }),
            check: |s| assert_eq!(s.connectors["a"].config.get("x"), Some("1")),
        },
        Case {
            name: "delete removes everything of the connector",
            commands: vec![
                put("a", true, None),
                put("b", true, None),
                tasks("a", 1, 1),
                owns_partition_0("a"),
                assign("a", Some(0), 1),
                sink_commit("a", 0, 1, 5),
                Command::DeleteConnector { name: "a".into() },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert!(!s.connectors.contains_key("a"));
                assert!(!s.assignments.contains_key("a"));
                assert!(!s.status.contains_key("a"));
                assert!(!s.offsets.contains_key("a"));
                assert!(s.connectors.contains_key("b"));
            },
        },
        Case {
            name: "delete of an unknown connector",
            commands: vec![Command::DeleteConnector { name: "x".into() }],
            want: Err(Rejection::NotFound { name: "x".into() }),
            check: nothing,
        },
        Case {
            name: "pause sets the target state",
            commands: vec![put("a", true, None), target("a", TargetState::Paused)],
            want: Ok(Outcome::Done),
            check: |s| assert_eq!(s.connectors["a"].target, TargetState::Paused),
        },
    ]);
}

#[test]
fn generations_and_fencing() {
    run(vec![
        Case {
            name: "a revoke marks the unit, which keeps its worker and generation",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                owns_partition_0("a"),
                assign("a", Some(0), 1),
                revoke("a", Some(0), 1),
                sink_commit("a", 0, 1, 7),
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                let a = &s.assignments["a"].tasks[&0];
                assert!(a.revoked);
                assert_eq!((a.worker, a.generation), (Some(1), 1));
                assert_eq!(
                    s.offsets["a"].sink["t"][&0], 7,
                    "its final commit is accepted"
                );
            },
        },
        Case {
            name: "a release unassigns the unit; the next assignment is a new generation",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                assign("a", Some(0), 1),
                revoke("a", Some(0), 1),
                release("a", Some(0), 1),
                assign("a", Some(0), 2),
            ],
            want: Ok(Outcome::Assigned { generation: 2 }),
            check: |s| {
                let a = &s.assignments["a"].tasks[&0];
                assert!(!a.revoked);
                assert_eq!(a.worker, Some(2));
            },
        },
        Case {
            name: "a release from an older generation is fenced",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                assign("a", Some(0), 1),
                assign("a", Some(0), 2),
                release("a", Some(0), 1),
            ],
            want: Err(Rejection::StaleGeneration {
                name: "a".into(),
                task: Some(0),
                current: 2,
                got: 1,
            }),
            check: |s| assert_eq!(s.assignments["a"].tasks[&0].worker, Some(2)),
        },
        Case {
            name: "a revoke of an older generation is fenced",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                assign("a", Some(0), 1),
                assign("a", Some(0), 2),
                revoke("a", Some(0), 1),
            ],
            want: Err(Rejection::StaleGeneration {
                name: "a".into(),
                task: Some(0),
                current: 2,
                got: 1,
            }),
            check: |s| assert!(!s.assignments["a"].tasks[&0].revoked),
        },
        Case {
            name: "every assignment gets a new generation",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(0), 1),
                assign("a", Some(1), 2),
                assign("a", Some(0), 2),
            ],
            want: Ok(Outcome::Assigned { generation: 3 }),
            check: |s| {
                assert_eq!(s.assignments["a"].tasks[&0].generation, 3);
                assert_eq!(s.assignments["a"].tasks[&0].worker, Some(2));
                assert_eq!(s.assignments["a"].tasks[&1].generation, 2);
            },
        },
        Case {
            name: "a commit with the current generation is accepted",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                owns_partition_0("a"),
                assign("a", Some(0), 1),
                sink_commit("a", 0, 1, 42),
            ],
            want: Ok(Outcome::Done),
            check: |s| assert_eq!(s.offsets["a"].sink["t"][&0], 42),
        },
        Case {
            name: "a commit from a moved task is rejected",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                owns_partition_0("a"),
                assign("a", Some(0), 1),
                sink_commit("a", 0, 1, 10),
                assign("a", Some(0), 2),
                sink_commit("a", 0, 1, 99),
            ],
            want: Err(Rejection::StaleGeneration {
                name: "a".into(),
                task: Some(0),
                current: 2,
                got: 1,
            }),
            check: |s| {
                assert_eq!(s.offsets["a"].sink["t"][&0], 10);
                assert_eq!(
                    s.fenced["a"][&0].count, 1,
                    "the zombie's attempt is counted"
                );
                assert_eq!(s.fenced["a"][&0].last_generation, 1);
            },
        },
        Case {
            name: "a restart fences the old run",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                assign("a", Some(0), 1),
                Command::RestartTask {
                    name: "a".into(),
                    task: 0,
                },
                report("a", Some(0), 1, RunState::Running),
            ],
            want: Err(Rejection::StaleGeneration {
                name: "a".into(),
                task: Some(0),
                current: 2,
                got: 1,
            }),
            check: |s| {
                assert_eq!(s.status["a"].tasks[&0].state, RunState::Restarting);
                assert_eq!(s.status["a"].tasks[&0].worker, Some(1));
            },
        },
        Case {
            name: "a config change bumps the generation of changed tasks only",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(0), 1),
                assign("a", Some(1), 1),
                put_cfg("a", cfg(&[("x", "1")])),
                Command::PutTaskConfigs {
                    name: "a".into(),
                    version: 2,
                    configs: vec![cfg(&[("task", "0")]), cfg(&[("task", "1"), ("x", "1")])],
                    shared: ConfigMap::default(),
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.assignments["a"].tasks[&0].generation, 1);
                assert_eq!(s.assignments["a"].tasks[&1].generation, 3);
            },
        },
        Case {
            name: "task configs stored split: a task is bumped only if its whole config changed",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(0), 1),
                assign("a", Some(1), 1),
                put_cfg("a", cfg(&[("x", "1")])),
                // The same whole configs as `task`=0 / `task`=1, x=1 written whole would be.
                Command::PutTaskConfigs {
                    name: "a".into(),
                    version: 2,
                    configs: vec![cfg(&[("task", "0"), ("x", "0")]), cfg(&[("task", "1")])],
                    shared: cfg(&[("x", "1")]),
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                let c = &s.connectors["a"];
                assert_eq!(c.task_config(0), Some(cfg(&[("task", "0"), ("x", "0")])));
                assert_eq!(c.task_config(1), Some(cfg(&[("task", "1"), ("x", "1")])));
                assert_eq!(c.task_count(), 2);
                assert_eq!(s.assignments["a"].tasks[&0].generation, 3, "x changed");
                assert_eq!(s.assignments["a"].tasks[&1].generation, 4, "x added");
            },
        },
        Case {
            name: "the same whole configs split another way change no task",
            commands: vec![
                put("a", true, None),
                Command::PutTaskConfigs {
                    name: "a".into(),
                    version: 1,
                    configs: vec![
                        cfg(&[("t", "0"), ("x", "1")]),
                        cfg(&[("t", "1"), ("x", "1")]),
                    ],
                    shared: ConfigMap::default(),
                },
                assign("a", Some(0), 1),
                assign("a", Some(1), 1),
                Command::PutTaskConfigs {
                    name: "a".into(),
                    version: 1,
                    configs: vec![cfg(&[("t", "0")]), cfg(&[("t", "1")])],
                    shared: cfg(&[("x", "1")]),
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.assignments["a"].tasks[&0].generation, 1);
                assert_eq!(s.assignments["a"].tasks[&1].generation, 2);
                assert_eq!(s.connectors["a"].task_shared, cfg(&[("x", "1")]));
            },
        },
        Case {
            name: "fewer tasks drop the extra assignments",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(1), 1),
                tasks("a", 1, 1),
            ],
            want: Ok(Outcome::Done),
            check: |s| assert!(s.assignments["a"].tasks.is_empty()),
        },
        Case {
            name: "task configs from an old config version are refused",
            commands: vec![
                put("a", true, None),
                put_cfg("a", cfg(&[("x", "1")])),
                tasks("a", 1, 1),
            ],
            want: Err(Rejection::StaleTaskConfigs {
                name: "a".into(),
                current: 2,
                got: 1,
            }),
            check: |s| assert!(s.connectors["a"].tasks.is_empty()),
        },
        Case {
            name: "assigning an unknown task",
            commands: vec![put("a", true, None), assign("a", Some(3), 1)],
            want: Err(Rejection::UnknownTask {
                name: "a".into(),
                task: 3,
            }),
            check: |s| assert_eq!(s.generation, 0),
        },
        Case {
            name: "status with the current generation is recorded, trace capped",
            commands: vec![
                put("a", true, None),
                assign("a", None, 7),
                Command::ReportStatus {
                    name: "a".into(),
                    task: None,
                    generation: 1,
                    state: RunState::Failed,
                    worker: Some(7),
                    trace: Some("x".repeat(MAX_TRACE * 2)),
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                let st = &s.status["a"].connector;
                assert_eq!(st.state, RunState::Failed);
                assert!(st.trace.as_ref().is_some_and(|t| t.len() < MAX_TRACE + 64));
            },
        },
    ]);
}

#[test]
fn restarts() {
    let setup = || {
        vec![
            put("a", true, None),
            tasks("a", 1, 3),
            assign("a", None, 1),
            assign("a", Some(0), 1),
            assign("a", Some(1), 1),
            assign("a", Some(2), 1),
            report("a", Some(1), 3, RunState::Failed),
        ]
    };
    let with = |extra: Command| {
        let mut c = setup();
        c.push(extra);
        c
    };
    let restart = |include_tasks, only_failed| Command::Restart {
        name: "a".into(),
        include_tasks,
        only_failed,
    };
    run(vec![
        Case {
            name: "connector only",
            commands: with(restart(false, false)),
            want: Ok(Outcome::Restarted {
                connector: true,
                tasks: vec![],
            }),
            check: |s| assert_eq!(s.status["a"].connector.state, RunState::Restarting),
        },
        Case {
            name: "with tasks",
            commands: with(restart(true, false)),
            want: Ok(Outcome::Restarted {
                connector: true,
                tasks: vec![0, 1, 2],
            }),
            check: nothing,
        },
        Case {
            name: "only failed tasks",
            commands: with(restart(true, true)),
            want: Ok(Outcome::Restarted {
                connector: false,
                tasks: vec![1],
            }),
            check: |s| {
                assert_eq!(s.status["a"].tasks[&1].state, RunState::Restarting);
                assert_eq!(s.status["a"].tasks[&0].state, RunState::Unassigned);
            },
        },
        Case {
            name: "unknown task",
            commands: with(Command::RestartTask {
                name: "a".into(),
                task: 9,
            }),
            want: Err(Rejection::UnknownTask {
                name: "a".into(),
                task: 9,
            }),
            check: nothing,
        },
    ]);
}

#[test]
fn offsets_follow_kip_875() {
    let alter = || Command::AlterOffsets {
        name: "a".into(),
        sink: vec![SinkOffset {
            topic: "t".into(),
            partition: 1,
            offset: Some(7),
        }],
        source: vec![SourceOffset {
            partition: r#"{"file":"x"}"#.into(),
            offset: Some(r#"{"position":3}"#.into()),
        }],
        supersede: true,
    };
    run(vec![
        Case {
            name: "alter while running is refused",
            commands: vec![put("a", true, None), alter()],
            want: Err(Rejection::NotStopped {
                name: "a".into(),
                state: "RUNNING".into(),
            }),
            check: |s| assert!(!s.offsets.contains_key("a")),
        },
        Case {
            name: "alter while paused is refused",
            commands: vec![
                put("a", true, None),
                target("a", TargetState::Paused),
                alter(),
            ],
            want: Err(Rejection::NotStopped {
                name: "a".into(),
                state: "PAUSED".into(),
            }),
            check: nothing,
        },
        Case {
            name: "alter while stopped",
            commands: vec![
                put("a", true, None),
                target("a", TargetState::Stopped),
                alter(),
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.offsets["a"].sink["t"][&1], 7);
                assert_eq!(
                    s.offsets["a"].source[r#"{"file":"x"}"#],
                    r#"{"position":3}"#
                );
            },
        },
        Case {
            name: "a null offset removes the partition",
            commands: vec![
                put("a", true, None),
                target("a", TargetState::Stopped),
                alter(),
                Command::AlterOffsets {
                    name: "a".into(),
                    sink: vec![SinkOffset {
                        topic: "t".into(),
                        partition: 1,
                        offset: None,
                    }],
                    source: vec![],
                    supersede: false,
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert!(s.offsets["a"].sink.is_empty());
                assert_eq!(s.offsets["a"].source.len(), 1);
            },
        },
        Case {
            name: "reset while stopped leaves only the mark of the change",
            commands: vec![
                put("a", true, None),
                target("a", TargetState::Stopped),
                alter(),
                Command::ResetOffsets {
                    name: "a".into(),
                    supersede: true,
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(
                    s.offsets["a"],
                    Offsets {
                        altered_at: Some(s.generation),
                        ..Offsets::default()
                    }
                )
            },
        },
        Case {
            name: "a reset of format 1 leaves nothing",
            commands: vec![
                put("a", true, None),
                target("a", TargetState::Stopped),
                alter(),
                Command::ResetOffsets {
                    name: "a".into(),
                    supersede: false,
                },
            ],
            want: Ok(Outcome::Done),
            check: |s| assert!(!s.offsets.contains_key("a")),
        },
        Case {
            name: "an alter marks the generation it happened at",
            commands: vec![
                put("a", true, None),
                assign("a", None, 1),
                target("a", TargetState::Stopped),
                alter(),
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert!(s.generation > 0, "the put handed out generations");
                assert_eq!(s.offsets["a"].altered_at, Some(s.generation));
            },
        },
        Case {
            name: "reset while running is refused",
            commands: vec![
                put("a", true, None),
                Command::ResetOffsets {
                    name: "a".into(),
                    supersede: true,
                },
            ],
            want: Err(Rejection::NotStopped {
                name: "a".into(),
                state: "RUNNING".into(),
            }),
            check: nothing,
        },
    ]);
}

#[test]
fn cluster_id_is_set_once() {
    run(vec![
        Case {
            name: "first set",
            commands: vec![Command::SetClusterId { id: "c1".into() }],
            want: Ok(Outcome::Done),
            check: |s| assert_eq!(s.cluster_id.as_deref(), Some("c1")),
        },
        Case {
            name: "same id again is fine",
            commands: vec![
                Command::SetClusterId { id: "c1".into() },
                Command::SetClusterId { id: "c1".into() },
            ],
            want: Ok(Outcome::Done),
            check: nothing,
        },
        Case {
            name: "another id is refused",
            commands: vec![
                Command::SetClusterId { id: "c1".into() },
                Command::SetClusterId { id: "c2".into() },
            ],
            want: Err(Rejection::ClusterIdSet {
                current: "c1".into(),
            }),
            check: |s| assert_eq!(s.cluster_id.as_deref(), Some("c1")),
        },
    ]);
}

#[test]
fn a_retried_request_applies_once_and_gets_its_first_answer() {
    let mut state = ClusterState::default();
    let create = Request::new("req-1", put("a", true, None));
    let first = state.apply(&create);
    assert_eq!(
        first,
        Ok(Outcome::Connector {
            version: 1,
            created: true
        })
    );
    let bump = Request::new("req-2", put_cfg("a", cfg(&[("x", "1")])));
    assert!(state.apply(&bump).is_ok());
    // Retries: same answers, no change.
    assert_eq!(state.apply(&create), first);
    assert_eq!(
        state.apply(&bump),
        Ok(Outcome::Connector {
            version: 2,
            created: false
        })
    );
    assert_eq!(state.connectors["a"].version, 2);
    // A new id is a new write.
    let again = Request::new("req-3", put("a", true, None));
    assert_eq!(
        state.apply(&again),
        Err(Rejection::AlreadyExists { name: "a".into() })
    );
}

#[test]
fn recent_request_ids_are_bounded() {
    let mut state = ClusterState::default();
    for i in 0..RECENT_REQUESTS + 10 {
        let answer = state.apply(&Request::new(
            format!("r{i}"),
            Command::PutWorker {
                id: 1,
                node: FerryNode::default(),
                readmit: false,
            },
        ));
        assert_eq!(answer, Ok(Outcome::Done));
    }
    assert_eq!(state.requests.len(), RECENT_REQUESTS);
    assert_eq!(state.request_order.len(), RECENT_REQUESTS);
    assert!(!state.requests.contains_key("r0"));
    assert!(state
        .requests
        .contains_key(&format!("r{}", RECENT_REQUESTS + 9)));
}

#[test]
fn apply_is_deterministic() {
    let commands = [
        put("a", true, None),
        tasks("a", 1, 2),
        owns_partition_0("a"),
        assign("a", Some(0), 1),
        assign("a", Some(1), 2),
        sink_commit("a", 0, 1, 3),
        target("a", TargetState::Stopped),
        Command::ResetOffsets {
            name: "a".into(),
            supersede: true,
        },
    ];
    let replay = || {
        let mut s = ClusterState::default();
        let answers: Vec<Response> = commands
            .iter()
            .enumerate()
            .map(|(i, c)| s.apply(&Request::new(format!("r{i}"), c.clone())))
            .collect();
        (s, answers)
    };
    assert_eq!(replay(), replay());
}

#[test]
fn display_never_shows_config() {
    let request = Request::new(
        "r1",
        Command::PutConnector {
            name: "jdbc".into(),
            config: cfg(&[("connection.password", "kcpw")]),
            create: true,
            expected_version: None,
            initial: None,
        },
    );
    let shown = format!("{request} {request:?}");
    assert!(!shown.contains("kcpw"), "{shown}");
}

fn partitions(name: &str, spec: &[(u32, &[i32])]) -> Command {
    Command::SetSinkPartitions {
        name: name.into(),
        partitions: spec
            .iter()
            .map(|(task, parts)| {
                (
                    *task,
                    parts
                        .iter()
                        .map(|p| TopicPartitionRef {
                            topic: "t".into(),
                            partition: *p,
                        })
                        .collect(),
                )
            })
            .collect(),
    }
}

#[test]
fn sink_partitions_fence_the_tasks_they_move_from() {
    run(vec![
        Case {
            name: "first spread bumps assigned tasks",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(0), 1),
                assign("a", Some(1), 2),
                partitions("a", &[(0, &[0, 2]), (1, &[1])]),
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.sink_partitions["a"][&0].len(), 2);
                assert_eq!(s.assignments["a"].tasks[&0].generation, 3);
                assert_eq!(s.assignments["a"].tasks[&1].generation, 4);
            },
        },
        Case {
            name: "only the tasks whose partitions change are bumped",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                assign("a", Some(0), 1),
                assign("a", Some(1), 2),
                partitions("a", &[(0, &[0]), (1, &[1])]),
                partitions("a", &[(0, &[0]), (1, &[1, 2])]),
            ],
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.assignments["a"].tasks[&0].generation, 3);
                assert_eq!(s.assignments["a"].tasks[&1].generation, 5);
            },
        },
        Case {
            name: "a task commits only the partitions it owns",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 2),
                partitions("a", &[(0, &[1]), (1, &[0])]),
                assign("a", Some(0), 1),
                sink_commit("a", 0, 1, 7),
            ],
            want: Err(Rejection::NotOwned {
                name: "a".into(),
                task: 0,
                topic: "t".into(),
                partition: 0,
            }),
            check: |s| {
                assert!(!s.offsets.contains_key("a"), "nothing written");
                assert_eq!(s.fenced["a"][&0].count, 1, "counted as fenced");
            },
        },
        Case {
            name: "a task without partitions commits none",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                assign("a", Some(0), 1),
                sink_commit("a", 0, 1, 7),
            ],
            want: Err(Rejection::NotOwned {
                name: "a".into(),
                task: 0,
                topic: "t".into(),
                partition: 0,
            }),
            check: |s| assert!(!s.offsets.contains_key("a")),
        },
        Case {
            name: "partitions for a task that does not exist",
            commands: vec![
                put("a", true, None),
                tasks("a", 1, 1),
                partitions("a", &[(3, &[0])]),
            ],
            want: Err(Rejection::UnknownTask {
                name: "a".into(),
                task: 3,
            }),
            check: |s| assert!(!s.sink_partitions.contains_key("a")),
        },
    ]);
}

fn range(start: i64, next: i64, generation: u64) -> Command {
    Command::CommitSinkRange {
        name: "a".into(),
        task: 0,
        generation,
        topic: "t".into(),
        partition: 0,
        start,
        next,
        payload: [("file".to_string(), format!("t+0+{start}+{}", next - 1))].into(),
    }
}

#[test]
fn exactly_once_commits_are_compare_and_set_and_fenced() {
    let setup = || {
        vec![
            put("a", true, None),
            tasks("a", 1, 1),
            owns_partition_0("a"),
            assign("a", Some(0), 1),
        ]
    };
    let with = |extra: Vec<Command>| {
        let mut c = setup();
        c.extend(extra);
        c
    };
    run(vec![
        Case {
            name: "first commit",
            commands: with(vec![range(0, 10, 1)]),
            want: Ok(Outcome::Done),
            check: |s| {
                assert_eq!(s.offsets["a"].next_offset("t", 0), Some(10));
                assert_eq!(s.offsets["a"].commits["t"][&0]["file"], "t+0+0+9");
            },
        },
        Case {
            name: "the next range",
            commands: with(vec![range(0, 10, 1), range(10, 25, 1)]),
            want: Ok(Outcome::Done),
            check: |s| assert_eq!(s.offsets["a"].next_offset("t", 0), Some(25)),
        },
        Case {
            name: "a retry of an applied commit conflicts and changes nothing",
            commands: with(vec![range(0, 10, 1), range(0, 10, 1)]),
            want: Ok(Outcome::Conflict { recorded: Some(10) }),
            check: |s| assert_eq!(s.offsets["a"].next_offset("t", 0), Some(10)),
        },
        Case {
            name: "a range of a partition the task does not own",
            commands: with(vec![
                range(0, 10, 1),
                Command::CommitSinkRange {
                    name: "a".into(),
                    task: 0,
                    generation: 1,
                    topic: "t".into(),
                    partition: 1,
                    start: 0,
                    next: 5,
                    payload: BTreeMap::new(),
                },
            ]),
            want: Err(Rejection::NotOwned {
                name: "a".into(),
                task: 0,
                topic: "t".into(),
                partition: 1,
            }),
            check: |s| assert_eq!(s.offsets["a"].next_offset("t", 1), None),
        },
        Case {
            name: "a zombie's commit is fenced",
            commands: with(vec![
                range(0, 10, 1),
                assign("a", Some(0), 2),
                range(10, 20, 1),
            ]),
            want: Err(Rejection::StaleGeneration {
                name: "a".into(),
                task: Some(0),
                current: 2,
                got: 1,
            }),
            check: |s| assert_eq!(s.offsets["a"].next_offset("t", 0), Some(10)),
        },
    ]);
}

#[test]
fn task_configs_that_keep_what_they_share_once_need_format_3() {
    let whole = tasks("a", 1, 2);
    assert_eq!(whole.format(), crate::format::BASE_FORMAT);
    let split = Command::PutTaskConfigs {
        name: "a".into(),
        version: 1,
        configs: vec![ConfigMap::default(); 2],
        shared: cfg(&[("x", "1")]),
    };
    assert_eq!(split.format(), 3);
    // Written whole, the entry has no `shared` at all: an older build reads it as before.
    let text = serde_json::to_string(&Request::anonymous(whole)).expect("encode");
    assert!(!text.contains("shared"), "{text}");
}

#[test]
fn requests_carry_their_format_and_ones_from_a_newer_build_are_kept_unread() {
    // Written before formats were recorded: format 1.
    let old = r#"{"id":"r1","command":{"SetClusterId":{"id":"c"}}}"#;
    let request: Request = serde_json::from_str(old).expect("an old request decodes");
    assert_eq!(request.format, crate::format::BASE_FORMAT);
    assert_eq!(request.command, Command::SetClusterId { id: "c".into() });
    // A known command round-trips with its format.
    let raise = Request::new("r2", Command::SetFeatureLevel { level: 2 });
    assert_eq!(raise.format, 2);
    let text = serde_json::to_string(&raise).expect("encode");
    assert_eq!(
        serde_json::from_str::<Request>(&text).expect("decode"),
        raise
    );
    // A command of a format this build does not understand: kept as written, passed on
    // unchanged, and refused when applied.
    let future = r#"{"id":"r3","format":99,"command":{"Teleport":{"to":"mars"}}}"#;
    let request: Request = serde_json::from_str(future).expect("a future request decodes");
    assert!(matches!(
        request.command,
        Command::Unsupported { format: 99, .. }
    ));
    let again: serde_json::Value =
        serde_json::from_str(&serde_json::to_string(&request).expect("encode")).expect("json");
    let original: serde_json::Value = serde_json::from_str(future).expect("json");
    assert_eq!(again, original, "stored and forwarded unchanged");
    let mut state = ClusterState::default();
    assert_eq!(
        state.apply(&request),
        Err(Rejection::Unsupported { format: 99 })
    );
    // The feature level only rises.
    assert_eq!(state.feature_level(), 1);
    assert!(state
        .apply(&Request::anonymous(Command::SetFeatureLevel { level: 2 }))
        .is_ok());
    assert!(state
        .apply(&Request::anonymous(Command::SetFeatureLevel { level: 1 }))
        .is_ok());
    assert_eq!(state.feature_level(), 2);
}

fn worker(id: crate::NodeId, readmit: bool) -> Command {
    Command::PutWorker {
        id,
        node: FerryNode {
            api_addr: format!("w{id}:1"),
            ..FerryNode::default()
        },
        readmit,
    }
}

#[test]
fn a_retired_worker_comes_back_only_through_add_node() {
    let mut s = ClusterState::default();
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(worker(1, false));
    apply(Command::RemoveWorker {
        id: 1,
        retire: true,
    });
    // Its own registration, racing with its removal, changes nothing.
    apply(worker(1, false));
    assert!(!s.workers.contains_key(&1) && s.retired.contains(&1));
    // add-node admits it again; then its own registrations count.
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(worker(1, true));
    apply(worker(1, false));
    assert!(s.workers.contains_key(&1) && s.retired.is_empty());
    // A removal without retiring (below format 6) lets it register again, as before.
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(Command::RemoveWorker {
        id: 1,
        retire: false,
    });
    apply(worker(1, false));
    assert!(s.workers.contains_key(&1));
    assert_eq!(worker(1, true).format(), crate::format::REST_API);
    assert_eq!(worker(1, false).format(), crate::format::BASE_FORMAT);
}

#[test]
fn a_connector_created_in_a_target_state_starts_in_it() {
    let mut s = ClusterState::default();
    let create = |initial| Command::PutConnector {
        name: "a".into(),
        config: cfg(&[("connector.class", "FileStreamSink")]),
        create: true,
        expected_version: None,
        initial,
    };
    assert_eq!(
        create(Some(TargetState::Stopped)).format(),
        crate::format::REST_API
    );
    assert!(s
        .apply(&Request::anonymous(create(Some(TargetState::Stopped))))
        .is_ok());
    assert_eq!(s.connectors["a"].target, TargetState::Stopped);
    // An update never changes the target state.
    let update = Command::PutConnector {
        name: "a".into(),
        config: cfg(&[("connector.class", "FileStreamSink"), ("x", "1")]),
        create: false,
        expected_version: None,
        initial: Some(TargetState::Paused),
    };
    assert!(s.apply(&Request::anonymous(update)).is_ok());
    assert_eq!(s.connectors["a"].target, TargetState::Stopped);
}

#[test]
fn active_topics_grow_by_union_and_go_with_a_reset_or_the_connector() {
    let mut s = ClusterState::default();
    let record = |name: &str, topics: &[&str]| Command::RecordTopics {
        name: name.into(),
        topics: topics.iter().map(|t| t.to_string()).collect(),
    };
    assert!(s.apply(&Request::anonymous(put("a", true, None))).is_ok());
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(record("a", &["t1"]));
    apply(record("a", &["t2", "t1"]));
    // A task of a connector deleted meanwhile records nothing.
    apply(record("gone", &["t3"]));
    assert_eq!(
        s.topics,
        BTreeMap::from([("a".to_string(), ["t1", "t2"].map(String::from).into())])
    );
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(Command::ResetTopics { name: "a".into() });
    assert!(s.topics.is_empty());
    // A reset of a connector without topics (or without a connector) is no error.
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(Command::ResetTopics { name: "b".into() });
    apply(record("a", &["t4"]));
    assert!(!s.topics.is_empty());
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(Command::DeleteConnector { name: "a".into() });
    assert!(s.topics.is_empty());
    assert_eq!(
        record("a", &["t"]).format(),
        crate::format::TOPICS_AND_LOG_LEVELS
    );
    assert_eq!(
        Command::ResetTopics { name: "a".into() }.format(),
        crate::format::TOPICS_AND_LOG_LEVELS
    );
}

#[test]
fn cluster_log_levels_are_numbered_in_the_order_they_were_set() {
    let mut s = ClusterState::default();
    let set = |logger: &str, level: &str| Command::SetLogLevel {
        logger: logger.into(),
        level: level.into(),
    };
    let mut apply = |c: Command| assert_eq!(s.apply(&Request::anonymous(c)), Ok(Outcome::Done));
    apply(set("ferry_worker", "DEBUG"));
    apply(set("root", "WARN"));
    apply(set("ferry_worker", "INFO"));
    let seen: Vec<(&str, &str, u64)> = s
        .log_levels
        .iter()
        .map(|(k, l)| (k.as_str(), l.level.as_str(), l.seq))
        .collect();
    assert_eq!(seen, [("ferry_worker", "INFO", 3), ("root", "WARN", 2)]);
    assert_eq!(
        set("root", "INFO").format(),
        crate::format::TOPICS_AND_LOG_LEVELS
    );
}
