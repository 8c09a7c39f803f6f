//! What becomes of a record that failed — in a converter, a transform, a sink's `put` (reported
//! by the task through Kafka Connect's errant record reporter) or on a source record's way
//! out: with `errors.tolerance=none` it fails the task with a trace naming the record; with
//! `all` it is logged and dead-lettered as configured, and the task goes on. Either way it is
//! never dropped unseen.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use async_trait::async_trait;
use ferry_connect::error_handling::{ErrorSettings, FailureContext, Tolerance};
use ferry_connect::task::ErrantRecordReporter;
use ferry_connect::{ConnectError, SinkRecord, Stage};
use tracing::warn;

use crate::dlq::{DeadLetterQueue, DeadLetters, Original};
use crate::metrics::TaskMetrics;

/// A record's place in Kafka: topic, partition, offset.
pub type Position = (String, i32, i64);

pub struct Reporter {
    unit: String,
    connector: String,
    task: u32,
    /// The class named for failures in `put`.
    task_class: String,
    errors: ErrorSettings,
    dead_letters: Option<Box<dyn DeadLetterQueue>>,
    batch: Mutex<Held>,
    metrics: TaskMetrics,
}

/// The records of the `put` in progress, by their position as the task sees them (a transform
/// may have renamed the topic), with where they were consumed and their bytes.
#[derive(Default)]
pub struct Held {
    originals: HashMap<Position, (Position, Original)>,
    reported: HashSet<Position>,
    /// The first report under `errors.tolerance=none`: it fails the task after `put`.
    fatal: Option<ConnectError>,
}

impl Held {
    pub fn hold(&mut self, seen: Position, consumed: Position, original: Original) {
        self.originals.insert(seen, (consumed, original));
    }
}

/// How a failed record is named in traces and logs.
fn describe(ctx: &FailureContext) -> String {
    match &ctx.source {
        Some((partition, offset)) => format!(
            "the record for {} from source partition {partition} at offset {offset}",
            ctx.topic
        ),
        None => format!(
            "the record at {}-{} offset {}",
            ctx.topic, ctx.partition, ctx.offset
        ),
    }
}

impl Reporter {
    pub fn new(
        unit: String,
        connector: String,
        task: u32,
        task_class: String,
        errors: ErrorSettings,
        dead_letters: Option<Box<dyn DeadLetterQueue>>,
        metrics: TaskMetrics,
    ) -> Self {
        Reporter {
            unit,
            connector,
            task,
            task_class,
            errors,
            dead_letters,
            batch: Mutex::new(Held::default()),
            metrics,
        }
    }

    /// The reporter of a unit, with its connector's error settings and the DLQ they name.
    ///
    /// A unit that will see no record (a sink task that owns no partition) opens no dead
    /// letter queue producer: it has nothing to report, and idle tasks open no Kafka client.
    pub async fn of_unit(
        ctx: &crate::unit::UnitCtx,
        kafka: &crate::kafka::KafkaSettings,
        sees_records: bool,
    ) -> Result<Reporter, ConnectError> {
        let errors = ErrorSettings::from_config(&ctx.connector_config)?;
        let dead_letters = if sees_records {
            DeadLetters::open(&errors, ctx, kafka)
                .await?
                .map(|d| Box::new(d) as Box<dyn DeadLetterQueue>)
        } else {
            None
        };
        Ok(Reporter::new(
            ctx.label(),
            ctx.name.clone(),
            ctx.task.unwrap_or_default(),
            ctx.plugin.class.to_string(),
            errors,
            dead_letters,
            ctx.metrics.clone(),
        ))
    }

    /// The task's counts.
    pub fn metrics(&self) -> &TaskMetrics {
        &self.metrics
    }

    /// The error settings it reports by.
    pub fn settings(&self) -> &ErrorSettings {
        &self.errors
    }

    /// Whether failures are tolerated, so that a record's bytes must be kept for its report.
    pub fn tolerates(&self) -> bool {
        self.errors.tolerance == Tolerance::All
    }

    /// The context of a failure of this task.
    pub fn context(&self, at: Position, stage: Stage, class_name: String) -> FailureContext {
        FailureContext {
            topic: at.0,
            partition: at.1,
            offset: at.2,
            connector: self.connector.clone(),
            task: self.task,
            stage,
            class_name,
            source: None,
        }
    }

    /// A record failed: fail the task (`Err`, with a trace naming the record) or log and
    /// dead-letter it as configured.
    pub fn tolerate(
        &self,
        ctx: &FailureContext,
        original: &Original,
        error: ConnectError,
    ) -> Result<(), ConnectError> {
        let record = describe(ctx);
        self.metrics.record_failures.inc();
        self.metrics.record_errors.inc();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        self.metrics.last_error_timestamp.set(now);
        if self.errors.tolerance == Tolerance::None {
            return Err(ConnectError {
                message: format!(
                    "{} failed on {record}: {} (errors.tolerance=none)",
                    ctx.stage.as_str(),
                    error.message
                ),
                ..error
            });
        }
        self.metrics.records_skipped.inc();
        if self.errors.log {
            self.metrics.errors_logged.inc();
            let stage = ctx.stage.as_str();
            if self.errors.log_messages {
                let lossy = |b: &Option<Vec<u8>>| {
                    b.as_deref()
                        .map(|b| String::from_utf8_lossy(b).into_owned())
                };
                warn!(unit = %self.unit, stage, record, key = ?lossy(&original.key), value = ?lossy(&original.value), error = %error.trace(), "error tolerated: record skipped");
            } else {
                warn!(unit = %self.unit, stage, record, error = %error.trace(), "error tolerated: record skipped");
            }
        }
        if let Some(dlq) = &self.dead_letters {
            if let Err(e) = dlq.send(original, ctx, &error) {
                self.metrics.dlq_failures.inc();
                return Err(e);
            }
            self.metrics.dlq_requests.inc();
        }
        Ok(())
    }

    /// Hold the records of a `put` so that the task can report them.
    pub fn begin(&self, held: Held) {
        *self.lock() = held;
    }

    /// The `put` is over: its records are let go; a report under `errors.tolerance=none`
    /// comes back as the task's failure.
    pub fn end(&self) -> Option<ConnectError> {
        std::mem::take(&mut *self.lock()).fatal
    }

    /// Wait until the DLQ has every record sent to it.
    pub async fn flush(&self) -> Result<(), ConnectError> {
        match &self.dead_letters {
            Some(dlq) => dlq.flush().await,
            None => Ok(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.batch.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl ErrantRecordReporter for Reporter {
    async fn report(&self, record: &SinkRecord, error: &ConnectError) -> ferry_connect::Result<()> {
        let seen: Position = (record.topic.clone(), record.partition, record.offset);
        let (consumed, original) = {
            let mut held = self.lock();
            if !held.reported.insert(seen.clone()) {
                // Reported again by a retried `put`: it was dealt with the first time.
                return match &held.fatal {
                    Some(e) => Err(e.detached()),
                    None => Ok(()),
                };
            }
            match held.originals.get(&seen) {
                Some((consumed, original)) => (consumed.clone(), original.clone()),
                None => {
                    if self.tolerates() {
                        warn!(unit = %self.unit, topic = %record.topic, partition = record.partition, offset = record.offset, "the task reported a record that is not in its batch: dead-lettered as text");
                    }
                    let text = |v: &ferry_connect::Value| {
                        (!matches!(v, ferry_connect::Value::Null))
                            .then(|| v.to_string().into_bytes())
                    };
                    let original = Original {
                        key: text(&record.key),
                        value: text(&record.value),
                        headers: Vec::new(),
                        timestamp: record.timestamp,
                    };
                    (seen, original)
                }
            }
        };
        let ctx = self.context(consumed, Stage::TaskPut, self.task_class.clone());
        match self.tolerate(&ctx, &original, error.detached()) {
            // Delivered before the call returns: an exactly-once sink may commit the
            // record's offset through Raft right after.
            Ok(()) => self.flush().await,
            Err(e) => {
                let answer = e.detached();
                self.lock().fatal.get_or_insert(e);
                Err(answer)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_connect::Value;

    fn reporter(tolerance: Tolerance) -> Reporter {
        let errors = ErrorSettings {
            tolerance,
            ..ErrorSettings::default()
        };
        Reporter::new(
            "sink-0".into(),
            "sink".into(),
            0,
            "JdbcSinkConnector".into(),
            errors,
            None,
            TaskMetrics::default(),
        )
    }

    fn record(topic: &str, offset: i64) -> SinkRecord {
        SinkRecord {
            topic: topic.into(),
            partition: 1,
            offset,
            timestamp: None,
            key_schema: None,
            key: Value::Null,
            value_schema: None,
            value: Value::String("super-apple-0000".into()),
            headers: Vec::new(),
        }
    }

    fn held_renamed() -> Held {
        // RegexRouter renamed `dst_table01` to `table01` before `put`.
        let mut held = Held::default();
        held.hold(
            ("table01".into(), 1, 5),
            ("dst_table01".into(), 1, 5),
            Original {
                value: Some(b"{\"item\":\"super-apple-0000\"}".to_vec()),
                ..Original::default()
            },
        );
        held
    }

    #[tokio::test]
    async fn without_tolerance_a_reported_record_fails_the_task_naming_where_it_was_consumed() {
        let r = reporter(Tolerance::None);
        r.begin(held_renamed());
        let err = ConnectError::data("value too long for type character varying(10)");
        let answer = r
            .report(&record("table01", 5), &err)
            .await
            .expect_err("not tolerated");
        assert!(answer.message.contains("TASK_PUT"), "{answer}");
        let fatal = r.end().expect("the put fails the task");
        assert!(
            fatal.message.contains("dst_table01-1 offset 5"),
            "the consumed position: {fatal}"
        );
        assert!(fatal.message.contains("character varying(10)"), "{fatal}");
        assert!(r.end().is_none(), "the next put starts clean");
    }

    #[tokio::test]
    async fn with_tolerance_reports_are_accepted_once_and_the_put_goes_on() {
        let r = reporter(Tolerance::All);
        r.begin(held_renamed());
        let err = ConnectError::data("value too long");
        r.report(&record("table01", 5), &err)
            .await
            .expect("tolerated");
        r.report(&record("table01", 5), &err)
            .await
            .expect("a repeat after a retried put");
        r.report(&record("unknown", 9), &err)
            .await
            .expect("a record the task made up is still tolerated");
        assert!(r.end().is_none());
    }

    #[test]
    fn a_source_record_is_named_by_its_source_position() {
        let r = reporter(Tolerance::None);
        let mut ctx = r.context(
            ("lines".into(), -1, -1),
            Stage::Transformation,
            "Cast".into(),
        );
        ctx.source = Some((
            r#"{"filename":"in.txt"}"#.into(),
            r#"{"position":3}"#.into(),
        ));
        let err = r
            .tolerate(
                &ctx,
                &Original::default(),
                ConnectError::data("not a number"),
            )
            .expect_err("not tolerated");
        assert!(
            err.message.contains(
                r#"from source partition {"filename":"in.txt"} at offset {"position":3}"#
            ),
            "{err}"
        );
    }
}
