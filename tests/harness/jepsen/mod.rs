//! The fault suite: pure checkers over recorded histories (each tested with broken histories
//! that must make it fail), the workload and its clients, the nemeses, and the scenario runner
//! that puts them together.

pub mod checkers;
pub mod client;
pub mod linearizable;
pub mod nemesis;
pub mod replay;
pub mod rng;
pub mod scenario;
pub mod workload;
