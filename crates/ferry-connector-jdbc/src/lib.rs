//! Confluent's JDBC connectors for PostgreSQL: `connection.url` in its `jdbc:postgresql://…`
//! form, the source's queries and offsets (bulk, incrementing, timestamp and both; tables
//! listed again and spread over tasks), the sink's SQL (insert, upsert, update, delete,
//! auto-create and auto-evolve) and its offsets table, which makes it exactly-once at the
//! database (docs/design.md#the-jdbc-sink).

#![warn(missing_docs)]
pub mod bind;
pub mod column;
pub mod config;
pub mod dialect;
pub mod pg;
pub mod query;
pub mod row;
pub mod sink;
pub mod source;

pub use config::{sink_plugin, source_plugin};
