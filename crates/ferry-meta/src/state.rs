//! The replicated state: what Kafka Connect keeps in its three internal topics, changed only by
//! applying a [`Request`] from the Raft log.
//!
//! [`ClusterState::apply`] is pure and deterministic: no clock, no randomness, no I/O. Every node
//! applying the same log reaches the same state, and the same answer for every request, which is
//! what lets a retried request (same request id) get the answer of its first application.

mod apply;
mod command;
mod model;

pub use command::*;
pub use model::*;

#[cfg(test)]
mod tests;
