//! The FileStream connectors, as Kafka Connect ships them: a source that reads lines of a file
//! into a topic, and a sink that appends records to a file. Their runtime comes with the task
//! runtime; this crate declares them so that configs naming them validate.

pub mod config;

pub use config::{sink_plugin, source_plugin};
