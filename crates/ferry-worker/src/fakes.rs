//! Fakes of what a task's loop works with — its control plane, its dead letter queue — and a
//! log of what happened, in order, for the loops' unit tests.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use ferry_connect::error_handling::{ErrorSettings, FailureContext};
use ferry_connect::task::Props;
use ferry_connect::{ConnectError, TopicPartition};
use ferry_meta::state::{Command, TargetState};

use crate::dlq::{DeadLetterQueue, Original};
use crate::pipeline::Pipeline;
use crate::report::Reporter;
use crate::unit::{Control, Failure, LoopUnit};

/// What happened, in order, across the fakes.
#[derive(Clone, Default)]
pub struct Log(Arc<Mutex<Vec<String>>>);

impl Log {
    pub fn push(&self, event: impl Into<String>) {
        self.0.lock().expect("log").push(event.into());
    }

    pub fn events(&self) -> Vec<String> {
        self.0.lock().expect("log").clone()
    }

    pub fn count(&self, prefix: &str) -> usize {
        self.events()
            .iter()
            .filter(|e| e.starts_with(prefix))
            .count()
    }
}

pub fn show(offsets: &HashMap<TopicPartition, i64>) -> String {
    let sorted: BTreeMap<String, i64> = offsets.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    format!("{sorted:?}")
}

/// The control plane: commits are logged.
pub struct FakeControl {
    pub log: Log,
}

impl Control for FakeControl {
    fn resumed(&self) -> impl Future<Output = Result<(), Failure>> + Send {
        std::future::ready(Ok(()))
    }

    fn report_target(
        &self,
        target: TargetState,
    ) -> impl Future<Output = Result<(), Failure>> + Send {
        self.log.push(format!("report {}", target.as_str()));
        std::future::ready(Ok(()))
    }

    fn record_topics(&self, topics: BTreeSet<String>) -> impl Future<Output = ()> + Send {
        if !topics.is_empty() {
            let topics: Vec<String> = topics.into_iter().collect();
            self.log.push(format!("topics {}", topics.join(" ")));
        }
        std::future::ready(())
    }

    fn commit(&self, command: Command) -> impl Future<Output = Result<(), Failure>> + Send {
        match &command {
            Command::CommitSinkOffsets { offsets, .. } => {
                let offsets: HashMap<TopicPartition, i64> = offsets
                    .iter()
                    .map(|o| {
                        let tp = TopicPartition::new(o.topic.clone(), o.partition);
                        (tp, o.offset.unwrap_or(-1))
                    })
                    .collect();
                self.log.push(format!("commit {}", show(&offsets)));
            }
            Command::CommitSourceOffsets { offsets, .. } => {
                let offsets: Vec<String> = offsets
                    .iter()
                    .map(|o| o.offset.clone().unwrap_or_default())
                    .collect();
                self.log.push(format!("commit {}", offsets.join(" ")));
            }
            _ => {}
        }
        std::future::ready(Ok(()))
    }
}

/// The dead letter queue: what is sent and flushed is logged; a flush may fail.
pub struct FakeDlq {
    pub log: Log,
    pub fails: bool,
}

#[async_trait]
impl DeadLetterQueue for FakeDlq {
    fn send(
        &self,
        _: &Original,
        ctx: &FailureContext,
        _: &ConnectError,
    ) -> Result<(), ConnectError> {
        match &ctx.source {
            Some((_, offset)) => self.log.push(format!("dlq send {offset}")),
            None => self.log.push(format!("dlq send {}", ctx.offset)),
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), ConnectError> {
        self.log.push("dlq flush");
        if self.fails {
            return Err(ConnectError::retriable("the DLQ broker is away"));
        }
        Ok(())
    }
}

/// The pipeline a connector config declares, with a fake DLQ (whose flush fails if asked) when
/// the config names one; what the DLQ does goes to `log`.
pub fn pipeline(connector: &Props, log: &Log, dlq_fails: bool) -> Pipeline {
    let errors = ErrorSettings::from_config(connector).expect("error settings");
    let dlq = errors.dlq_topic.as_ref().map(|_| {
        Box::new(FakeDlq {
            log: log.clone(),
            fails: dlq_fails,
        }) as Box<dyn DeadLetterQueue>
    });
    let reporter = Reporter::new(
        "c-0".into(),
        "c".into(),
        0,
        "FakeTask".into(),
        errors,
        dlq,
        crate::metrics::TaskMetrics::default(),
    );
    Pipeline::new(connector, &Props::new(), reporter).expect("pipeline")
}

/// Task 0 of connector `c`, generation 1, committing every `flush_interval`.
pub fn unit(flush_interval: std::time::Duration) -> LoopUnit {
    LoopUnit {
        label: "c-0".into(),
        name: "c".into(),
        task: 0,
        generation: 1,
        flush_interval,
        commit_group: false,
    }
}
