//! Confluent's JDBC connectors for PostgreSQL: `connection.url` in its `jdbc:postgresql://…`
//! form, the sink's SQL (insert, upsert, update, delete, auto-create and auto-evolve) and its
//! offsets table, which makes it exactly-once at the database (DESIGN.md "JDBC sink").
//!
//! Being built (issue 8): the sink is here; the source is not yet.

pub mod bind;
pub mod config;
pub mod dialect;
pub mod row;
pub mod sink;

pub use config::sink_plugin;
