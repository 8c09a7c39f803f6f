//! The FileStream connectors, as Kafka Connect ships them: a source that reads the lines of a
//! file into a topic, and a sink that appends records to a file, one per line.
//!
//! Guarantees: FileStreamSink is at-least-once, as in Kafka Connect (after a fail-over, records
//! since the last offset commit are written again); FileStreamSource never skips a line and may
//! repeat lines produced after its last offset commit.

#![warn(missing_docs)]

pub mod config;
pub mod sink;
pub mod source;

pub use config::{sink_plugin, source_plugin};
