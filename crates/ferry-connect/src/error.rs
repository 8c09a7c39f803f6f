//! Errors of connectors and converters. Each carries whether retrying may help, so that the
//! runtime can choose between retrying, the dead letter queue and failing the task.

/// Which stage of a record's way an error arose in (Kafka Connect's `Stage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Converting a key.
    KeyConverter,
    /// Converting a value.
    ValueConverter,
    /// Converting headers.
    HeaderConverter,
    /// A transform.
    Transformation,
    /// The sink task's `put`.
    TaskPut,
    /// The source task's `poll`.
    TaskPoll,
    /// Producing to Kafka.
    KafkaProduce,
    /// Consuming from Kafka.
    KafkaConsume,
}

impl Stage {
    /// Kafka Connect's name of the stage (`VALUE_CONVERTER`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::KeyConverter => "KEY_CONVERTER",
            Stage::ValueConverter => "VALUE_CONVERTER",
            Stage::HeaderConverter => "HEADER_CONVERTER",
            Stage::Transformation => "TRANSFORMATION",
            Stage::TaskPut => "TASK_PUT",
            Stage::TaskPoll => "TASK_POLL",
            Stage::KafkaProduce => "KAFKA_PRODUCE",
            Stage::KafkaConsume => "KAFKA_CONSUME",
        }
    }
}

/// Whether an error is worth retrying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Transient (a timeout, a lost connection): retry within `errors.retry.timeout`.
    Retriable,
    /// Retrying will not help (bad data, a bad config, a refused write).
    Fatal,
}

/// An error of a connector, a task, a converter or a transform.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    /// Whether retrying may help.
    pub retry: Retry,
    /// Kafka Connect's exception class, for status traces and DLQ headers
    /// (e.g. `org.apache.kafka.connect.errors.DataException`).
    pub class: &'static str,
    /// What went wrong.
    pub message: String,
    /// What a config error is about, for validation to report on its property.
    pub config: Option<Box<ConfigProblem>>,
    /// What caused it.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

/// A config error in structured form: the property at fault, the value it was given (never a
/// secret's), and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The property at fault.
    pub property: String,
    /// The value it was given, if it is not a secret.
    pub value: Option<String>,
    /// What is wrong with it.
    pub problem: String,
}

impl ConnectError {
    /// The same error without its cause chain (which cannot be cloned), for a second owner.
    pub fn detached(&self) -> ConnectError {
        ConnectError {
            retry: self.retry,
            class: self.class,
            message: self.message.clone(),
            config: self.config.clone(),
            source: None,
        }
    }

    /// A bad config: `property` is at fault, `problem` says how. Not retriable. The message
    /// reads `property: problem`.
    pub fn config(property: impl Into<String>, problem: impl Into<String>) -> Self {
        let (property, problem) = (property.into(), problem.into());
        ConnectError {
            message: format!("{property}: {problem}"),
            config: Some(Box::new(ConfigProblem {
                property,
                value: None,
                problem,
            })),
            ..ConnectError::fatal("")
        }
    }

    /// A config error that also records the value given (never use it for a secret).
    pub fn with_value(mut self, value: impl Into<String>) -> Self {
        if let Some(config) = self.config.as_mut() {
            config.value = Some(value.into());
        }
        self
    }

    /// The same config error about a property under `prefix` (a transform's own properties
    /// under `transforms.<alias>.`).
    pub fn under(mut self, prefix: &str) -> Self {
        self.message = format!("{prefix}{}", self.message);
        if let Some(config) = self.config.as_mut() {
            config.property = format!("{prefix}{}", config.property);
        }
        self
    }

    /// The property this error is about and what is wrong with it: its [`ConfigProblem`], or
    /// `fallback` and the whole message for an error that is not a config error.
    pub fn problem(&self, fallback: &str) -> (String, String) {
        match &self.config {
            Some(c) => (c.property.clone(), c.problem.clone()),
            None => (fallback.to_string(), self.message.clone()),
        }
    }

    /// Bad data (a value that does not fit, undecodable bytes): not retriable.
    pub fn data(message: impl Into<String>) -> Self {
        ConnectError {
            retry: Retry::Fatal,
            class: "org.apache.kafka.connect.errors.DataException",
            message: message.into(),
            config: None,
            source: None,
        }
    }

    /// A failure that retrying will not fix.
    pub fn fatal(message: impl Into<String>) -> Self {
        ConnectError {
            retry: Retry::Fatal,
            class: "org.apache.kafka.connect.errors.ConnectException",
            message: message.into(),
            config: None,
            source: None,
        }
    }

    /// A transient failure.
    pub fn retriable(message: impl Into<String>) -> Self {
        ConnectError {
            retry: Retry::Retriable,
            class: "org.apache.kafka.connect.errors.RetriableException",
            message: message.into(),
            config: None,
            source: None,
        }
    }

    /// An I/O error, classified by its kind: interruptions, timeouts, lost connections and a
    /// full disk (which may be freed) are retriable.
    pub fn io(what: impl Into<String>, e: std::io::Error) -> Self {
        use std::io::ErrorKind::*;
        let retry = match e.kind() {
            Interrupted | TimedOut | WouldBlock | ConnectionReset | ConnectionAborted
            | ConnectionRefused | NotConnected | BrokenPipe | StorageFull | QuotaExceeded => {
                Retry::Retriable
            }
            _ => Retry::Fatal,
        };
        ConnectError {
            retry,
            class: match retry {
                Retry::Retriable => "org.apache.kafka.connect.errors.RetriableException",
                Retry::Fatal => "org.apache.kafka.connect.errors.ConnectException",
            },
            message: format!("{}: {e}", what.into()),
            config: None,
            source: Some(Box::new(e)),
        }
    }

    /// Whether retrying may help.
    pub fn is_retriable(&self) -> bool {
        self.retry == Retry::Retriable
    }

    /// The same error with `cause` as its cause, as Kafka Connect wraps one exception in
    /// another: the message stays the outer one, the cause shows in [`ConnectError::trace`].
    pub fn caused_by(mut self, cause: impl Into<String>) -> Self {
        self.source = Some(Box::new(Cause(cause.into())));
        self
    }

    /// The class and message, then every cause: a status trace, a DLQ stack-trace header, a
    /// log line.
    pub fn trace(&self) -> String {
        let mut trace = format!("{}: {}", self.class, self.message);
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            trace.push_str(&format!("\nCaused by: {cause}"));
            source = cause.source();
        }
        trace
    }
}

/// A cause known only by its text.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Cause(String);

/// A result whose error is a [`ConnectError`] by default.
pub type Result<T, E = ConnectError> = std::result::Result<T, E>;
