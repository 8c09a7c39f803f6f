//! Ferry's task runtime: each worker runs the connector instances and tasks assigned to it,
//! against Kafka, and reports their status and offsets to the control plane, every command
//! carrying the task's generation so that a stale run is fenced.

#![warn(missing_docs)]

pub mod admin;
pub mod clients;
mod connector;
pub mod consumers;
mod dlq;
#[cfg(test)]
mod fakes;
pub mod kafka;
pub mod lease;
mod librdkafka;
pub mod metrics;
mod pipeline;
mod report;
mod retry;
pub mod runtime;
mod sink;
mod source;
mod takeover;
pub mod unit;

pub use kafka::{KafkaSettings, Metadata};
pub use lease::LeaseSettings;
pub use runtime::Runtime;
pub use unit::RuntimeSettings;
