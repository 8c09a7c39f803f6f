//! The JDBC connectors' properties, with the names and defaults of Confluent's JDBC connector
//! (10.x): the connection (`connection.url` as PostgreSQL's JDBC driver reads it, user and
//! password), the source's and the sink's. The password is kept out of `Debug` and of every
//! message.

use std::collections::BTreeMap;

use ferry_connect::plugin::{Finding, TaskFactory};
use ferry_connect::{PluginDesc, Result};

use crate::sink::{JdbcSinkConnector, JdbcSinkTask};
use crate::source::{JdbcSourceConnector, JdbcSourceTask};

/// The class of Confluent's JDBC sink.
pub const SINK_CLASS: &str = "io.confluent.connect.jdbc.JdbcSinkConnector";
/// The class of Confluent's JDBC source.
pub const SOURCE_CLASS: &str = "io.confluent.connect.jdbc.JdbcSourceConnector";

/// The task property that lists a source task's tables (JSON: `[[schema, table], …]`).
pub const TABLES: &str = "tables";

/// Confluent's JDBC sink, for PostgreSQL.
pub fn sink_plugin() -> PluginDesc {
    PluginDesc {
        class: SINK_CLASS,
        task_class: "io.confluent.connect.jdbc.sink.JdbcSinkTask",
        aliases: &["JdbcSinkConnector"],
        version: env!("CARGO_PKG_VERSION"),
        connector: JdbcSinkConnector::build,
        tasks: TaskFactory::Sink(JdbcSinkTask::build),
        config: sink_config,
        check: Some(check_sink),
    }
}

/// Confluent's JDBC source, for PostgreSQL.
pub fn source_plugin() -> PluginDesc {
    PluginDesc {
        class: SOURCE_CLASS,
        task_class: "io.confluent.connect.jdbc.source.JdbcSourceTask",
        aliases: &["JdbcSourceConnector"],
        version: env!("CARGO_PKG_VERSION"),
        connector: JdbcSourceConnector::build,
        tasks: TaskFactory::Source(JdbcSourceTask::build),
        config: source_config,
        check: Some(check_source),
    }
}

mod connection;
mod sink;
mod source;

pub use connection::{Connection, Quoting};
pub use sink::{sink_config, InsertMode, JdbcSinkConfig, PkMode};
pub use source::{source_config, JdbcSourceConfig, NumericMapping, SourceMode};

/// What the sink refuses across properties (the same checks as at start).
pub fn check_sink(props: &BTreeMap<String, String>) -> Vec<Finding> {
    finding(JdbcSinkConfig::parse(props).map(|_| ()))
}

/// What the source refuses across properties (the same checks as at start).
pub fn check_source(props: &BTreeMap<String, String>) -> Vec<Finding> {
    finding(JdbcSourceConfig::parse(props).map(|_| ()))
}

/// A parse error as a finding on the property it is about.
fn finding(parsed: Result<()>) -> Vec<Finding> {
    match parsed {
        Ok(()) => Vec::new(),
        Err(e) => {
            let (property, problem) = e.problem("connection.url");
            vec![Finding::Error(property, problem)]
        }
    }
}

#[cfg(test)]
mod tests;
