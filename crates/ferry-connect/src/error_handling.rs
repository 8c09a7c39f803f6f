//! Error handling the Kafka Connect way: which failures are retried and for how long
//! (`errors.retry.timeout`, `errors.retry.delay.max.ms`), whether a record that still fails is
//! tolerated (`errors.tolerance`), logged (`errors.log.*`) and sent to a dead letter queue
//! (`errors.deadletterqueue.*`) with the `__connect.errors.*` context headers. Pure: the worker
//! runs the operations, produces to the DLQ and waits.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{Choice, ConfigDef, ConfigKey, ConfigType, Importance, Values, Width};
use crate::error::{ConnectError, Result, Stage};

/// The first retry waits this long; each next one twice as long, up to the configured maximum.
const FIRST_DELAY: Duration = Duration::from_millis(300);
/// How many times a retriable failure of a task method (`put`, `flush`, `poll`) is retried when
/// `errors.retry.timeout` is 0, its default, before the task fails: a blip is ridden out, an
/// outage fails the task with its trace.
const QUICK_RETRIES: u32 = 5;

/// `errors.tolerance`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// A failure fails the task (the default).
    None,
    /// A record that fails is skipped (and logged / dead-lettered as configured).
    All,
}

/// A connector's error settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorSettings {
    /// `errors.tolerance`.
    pub tolerance: Tolerance,
    /// How long retriable failures are retried; `None`: forever (`-1`).
    pub retry_timeout: Option<Duration>,
    /// `errors.retry.delay.max.ms`: the longest wait between retries.
    pub retry_delay_max: Duration,
    /// `errors.log.enable`.
    pub log: bool,
    /// `errors.log.include.messages`.
    pub log_messages: bool,
    /// The dead letter queue of a sink, if one is set.
    pub dlq_topic: Option<String>,
    /// `errors.deadletterqueue.topic.replication.factor`.
    pub dlq_replication_factor: i32,
    /// `errors.deadletterqueue.context.headers.enable`.
    pub context_headers: bool,
}

impl Default for ErrorSettings {
    /// The declared defaults.
    fn default() -> Self {
        ErrorSettings::from_config(&BTreeMap::new()).expect("the declared defaults are valid")
    }
}

impl Choice for Tolerance {
    const CHOICES: &'static [(&'static str, Tolerance)] =
        &[("none", Tolerance::None), ("all", Tolerance::All)];
}

/// The properties [`ErrorSettings`] reads.
fn error_config() -> ConfigDef {
    let mut def = connector_config();
    def.extend(dead_letter_config());
    def
}

impl ErrorSettings {
    /// From a connector config; the error names the property.
    pub fn from_config(config: &BTreeMap<String, String>) -> Result<Self> {
        let values = Values::new(error_config(), config);
        let retry_timeout = match values.number::<i64>("errors.retry.timeout")? {
            -1 => None,
            t => Some(Duration::from_millis(t.unsigned_abs())),
        };
        Ok(ErrorSettings {
            tolerance: values.choice("errors.tolerance")?,
            retry_timeout,
            retry_delay_max: Duration::from_millis(values.number("errors.retry.delay.max.ms")?),
            log: values.boolean("errors.log.enable")?,
            log_messages: values.boolean("errors.log.include.messages")?,
            dlq_topic: values.text("errors.deadletterqueue.topic.name")?,
            dlq_replication_factor: values
                .number("errors.deadletterqueue.topic.replication.factor")?,
            context_headers: values.boolean("errors.deadletterqueue.context.headers.enable")?,
        })
    }

    /// How long to wait before retry number `attempt` (from 1) of a retriable failure that
    /// has been failing for `elapsed`; `None`: stop retrying.
    pub fn next_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        if let Some(timeout) = self.retry_timeout {
            if elapsed >= timeout {
                return None;
            }
        }
        let doubled = FIRST_DELAY.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let delay = doubled.min(self.retry_delay_max);
        Some(match self.retry_timeout {
            // Never past the deadline.
            Some(timeout) => delay.min(timeout - elapsed),
            None => delay,
        })
    }

    /// [`Self::next_delay`] for a task method (`put`, `flush`, `poll`): with
    /// `errors.retry.timeout=0` it is still retried a few times quickly (200 ms doubling).
    pub fn task_delay(&self, attempt: u32, elapsed: Duration) -> Option<Duration> {
        if self.retry_timeout == Some(Duration::ZERO) {
            (attempt <= QUICK_RETRIES).then(|| Duration::from_millis(100 << attempt))
        } else {
            self.next_delay(attempt, elapsed)
        }
    }
}

/// The group of the error handling properties in the validate API.
const GROUP: &str = "Error Handling";

/// The properties of error handling every connector has.
pub fn connector_config() -> ConfigDef {
    vec![
        ConfigKey::new(
            "errors.retry.timeout",
            ConfigType::Long,
            Importance::Medium,
            "How long (ms) a retriable failure is retried; 0: not at all, -1: forever.",
        )
        .default("0")
        .validator(|v| crate::config::at_least(-1)(v))
        .shown(GROUP, 1, Width::Medium, "Retry Timeout for Errors"),
        ConfigKey::new(
            "errors.retry.delay.max.ms",
            ConfigType::Long,
            Importance::Medium,
            "The longest wait (ms) between retries, which start at 300 ms and double.",
        )
        .default("60000")
        .validator(crate::config::positive)
        .shown(GROUP, 2, Width::Medium, "Maximum Delay Between Retries for Errors"),
        ConfigKey::new(
            "errors.tolerance",
            ConfigType::String,
            Importance::Medium,
            "none: a failing record fails the task; all: it is skipped (logged and dead-lettered as configured).",
        )
        .default("none")
        .choice::<Tolerance>()
        .shown(GROUP, 3, Width::Short, "Error Tolerance"),
        ConfigKey::new(
            "errors.log.enable",
            ConfigType::Boolean,
            Importance::Medium,
            "Log each failure (at WARN) with its stage and record position.",
        )
        .default("false")
        .shown(GROUP, 4, Width::Short, "Log Errors"),
        ConfigKey::new(
            "errors.log.include.messages",
            ConfigType::Boolean,
            Importance::Medium,
            "Include the record's key and value in that log line.",
        )
        .default("false")
        .shown(GROUP, 5, Width::Short, "Log Error Details"),
    ]
}

/// The properties of the dead letter queue. Sinks send records as they were consumed; sources
/// (a Ferry addition) send records that failed on their way out, with their source position.
pub fn dead_letter_config() -> ConfigDef {
    vec![
        ConfigKey::new(
            "errors.deadletterqueue.topic.name",
            ConfigType::String,
            Importance::Medium,
            "Topic for the records that failed (with errors.tolerance=all); empty: none.",
        )
        .default("")
        .shown(GROUP, 6, Width::Medium, "Dead Letter Queue Topic Name"),
        ConfigKey::new(
            "errors.deadletterqueue.topic.replication.factor",
            ConfigType::Short,
            Importance::Medium,
            "Replication factor of the dead letter queue when Ferry creates it.",
        )
        .default("3")
        .validator(crate::config::positive)
        .shown(
            GROUP,
            7,
            Width::Medium,
            "Dead Letter Queue Topic Replication Factor",
        ),
        ConfigKey::new(
            "errors.deadletterqueue.context.headers.enable",
            ConfigType::Boolean,
            Importance::Medium,
            "Add the __connect.errors.* headers saying where and why the record failed.",
        )
        .default("false")
        .shown(GROUP, 8, Width::Medium, "Enable Error Context Headers"),
    ]
}

/// Where a failed record came from and why it failed: what the context headers say.
#[derive(Clone, Debug, PartialEq)]
pub struct FailureContext {
    /// The topic the record was consumed from (or was to go to).
    pub topic: String,
    /// Its partition (-1: not known).
    pub partition: i32,
    /// Its offset (-1: not known).
    pub offset: i64,
    /// The connector.
    pub connector: String,
    /// The task.
    pub task: u32,
    /// Where the record failed.
    pub stage: Stage,
    /// The class that failed (Kafka Connect's: the converter, transform or task class).
    pub class_name: String,
    /// A source record's partition and offset (JSON), since it has no Kafka offset yet.
    pub source: Option<(String, String)>,
}

/// The ten `__connect.errors.*` headers of a dead-lettered record, in Kafka Connect's order,
/// and for a source record `__connect.errors.source.partition` and `.source.offset`.
pub fn context_headers(ctx: &FailureContext, error: &ConnectError) -> Vec<(String, Vec<u8>)> {
    let trace = error.trace();
    let headers = [
        ("topic", ctx.topic.clone()),
        ("partition", ctx.partition.to_string()),
        ("offset", ctx.offset.to_string()),
        ("connector.name", ctx.connector.clone()),
        ("task.id", ctx.task.to_string()),
        ("stage", ctx.stage.as_str().to_string()),
        ("class.name", ctx.class_name.clone()),
        ("exception.class.name", error.class.to_string()),
        ("exception.message", error.message.clone()),
        ("exception.stacktrace", trace),
    ];
    let source = ctx.source.iter().flat_map(|(partition, offset)| {
        [
            ("source.partition", partition.clone()),
            ("source.offset", offset.clone()),
        ]
    });
    headers
        .into_iter()
        .chain(source)
        .map(|(k, v)| (format!("__connect.errors.{k}"), v.into_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::config::props as config;

    #[test]
    fn seed_000_error_settings_are_read() {
        // Seed 000's sink: tolerate all, a DLQ with context headers, retries for 150 s.
        let s = ErrorSettings::from_config(&config(&[
            ("errors.deadletterqueue.topic.name", "test"),
            ("errors.tolerance", "all"),
            ("errors.retry.delay.max.ms", "30000"),
            ("errors.log.enable", "true"),
            ("errors.deadletterqueue.context.headers.enable", "true"),
            ("errors.log.include.messages", "true"),
            ("errors.retry.timeout", "150000"),
        ]))
        .expect("valid");
        assert_eq!(
            s,
            ErrorSettings {
                tolerance: Tolerance::All,
                retry_timeout: Some(Duration::from_secs(150)),
                retry_delay_max: Duration::from_secs(30),
                log: true,
                log_messages: true,
                dlq_topic: Some("test".into()),
                dlq_replication_factor: 3,
                context_headers: true,
            }
        );
        assert_eq!(
            ErrorSettings::from_config(&BTreeMap::new()).expect("defaults"),
            ErrorSettings::default()
        );
    }

    #[test]
    fn bad_error_settings_name_the_property() {
        for (key, value) in [
            ("errors.tolerance", "some"),
            ("errors.retry.timeout", "-2"),
            ("errors.retry.delay.max.ms", "0"),
            ("errors.log.enable", "yes"),
            ("errors.deadletterqueue.topic.replication.factor", "0"),
        ] {
            let err = ErrorSettings::from_config(&config(&[(key, value)])).expect_err(key);
            assert!(err.to_string().starts_with(key), "{err}");
        }
    }

    #[test]
    fn retries_back_off_exponentially_until_the_timeout() {
        let s = ErrorSettings {
            retry_timeout: Some(Duration::from_secs(10)),
            retry_delay_max: Duration::from_secs(2),
            ..ErrorSettings::default()
        };
        let ms = |a, e| {
            s.next_delay(a, Duration::from_millis(e))
                .map(|d| d.as_millis())
        };
        assert_eq!(ms(1, 0), Some(300));
        assert_eq!(ms(2, 300), Some(600));
        assert_eq!(ms(3, 900), Some(1200));
        assert_eq!(
            ms(4, 2100),
            Some(2000),
            "capped by errors.retry.delay.max.ms"
        );
        assert_eq!(ms(9, 9500), Some(500), "never past the deadline");
        assert_eq!(ms(10, 10_000), None);
        assert_eq!(
            ErrorSettings::default().next_delay(1, Duration::ZERO),
            None,
            "timeout 0: no retries"
        );
        let forever = ErrorSettings {
            retry_timeout: None,
            ..s
        };
        assert!(forever
            .next_delay(40, Duration::from_secs(86_400))
            .is_some());
    }

    #[test]
    fn task_methods_are_retried_a_few_times_even_with_timeout_zero() {
        let quick = ErrorSettings::default();
        let delays: Vec<Option<u128>> = (1..=6)
            .map(|a| quick.task_delay(a, Duration::ZERO).map(|d| d.as_millis()))
            .collect();
        assert_eq!(
            delays,
            [
                Some(200),
                Some(400),
                Some(800),
                Some(1600),
                Some(3200),
                None
            ]
        );
        let configured = ErrorSettings {
            retry_timeout: Some(Duration::from_secs(1)),
            ..ErrorSettings::default()
        };
        assert_eq!(
            configured.task_delay(1, Duration::ZERO),
            Some(Duration::from_millis(300))
        );
        assert_eq!(configured.task_delay(7, Duration::from_secs(1)), None);
    }

    #[test]
    fn the_ten_context_headers() {
        let ctx = FailureContext {
            topic: "dst_table01".into(),
            partition: 0,
            offset: 2,
            connector: "jdbc_sink_postgresql".into(),
            task: 0,
            stage: Stage::ValueConverter,
            class_name: "org.apache.kafka.connect.json.JsonConverter".into(),
            source: None,
        };
        let err = ConnectError::data("the data is not valid JSON");
        let headers: Vec<(String, String)> = context_headers(&ctx, &err)
            .into_iter()
            .map(|(k, v)| (k, String::from_utf8(v).expect("utf-8")))
            .collect();
        let keys: Vec<&str> = headers.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "__connect.errors.topic",
                "__connect.errors.partition",
                "__connect.errors.offset",
                "__connect.errors.connector.name",
                "__connect.errors.task.id",
                "__connect.errors.stage",
                "__connect.errors.class.name",
                "__connect.errors.exception.class.name",
                "__connect.errors.exception.message",
                "__connect.errors.exception.stacktrace",
            ]
        );
        assert_eq!(headers[2].1, "2");
        assert_eq!(headers[5].1, "VALUE_CONVERTER");
        assert_eq!(
            headers[7].1,
            "org.apache.kafka.connect.errors.DataException"
        );
        assert!(headers[9].1.contains("not valid JSON"));
    }

    #[test]
    fn a_source_record_also_says_where_it_was_in_its_source() {
        let ctx = FailureContext {
            topic: "lines".into(),
            partition: -1,
            offset: -1,
            connector: "src".into(),
            task: 0,
            stage: Stage::Transformation,
            class_name: "org.apache.kafka.connect.transforms.Cast$Value".into(),
            source: Some((
                r#"{"filename":"in.txt"}"#.into(),
                r#"{"position":12}"#.into(),
            )),
        };
        let headers = context_headers(&ctx, &ConnectError::data("not a number"));
        assert_eq!(headers.len(), 12);
        assert_eq!(
            headers[10],
            (
                "__connect.errors.source.partition".to_string(),
                br#"{"filename":"in.txt"}"#.to_vec()
            )
        );
        assert_eq!(
            headers[11],
            (
                "__connect.errors.source.offset".to_string(),
                br#"{"position":12}"#.to_vec()
            )
        );
    }
}
