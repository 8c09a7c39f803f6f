//! The fault suite's checkers: pure functions over recorded histories, each tested with broken
//! histories that must make it fail.

pub mod checkers;
pub mod linearizable;
