//! Versioned replicated state, for rolling upgrades.
//!
//! Every [`Request`](crate::state::Request) in the log says the format it needs (its command's
//! [`Command::format`](crate::state::Command::format)), and every snapshot carries the cluster's
//! feature level in its state. A build understands formats up to [`FORMAT_VERSION`]. A command
//! of a higher format than the cluster's feature level is never proposed; the leader raises
//! the level, through Raft, only once every member has said (in its heartbeats) that it
//! understands it. A node that meets an entry or a snapshot of a format it does not understand
//! (started from an older build after the level was raised) refuses to apply it and stops with
//! a message saying so, instead of applying half of it or crashing on an unknown command.
//!
//! Every later change to what is stored goes through this: a new command or field that an
//! older build would misread gets a new format number, declared in `Command::format`.

use std::sync::atomic::{AtomicU32, Ordering};

/// The formats this build understands: 1, the format before formats were recorded; 2, which
/// adds the feature level itself (`SetFeatureLevel`) and `RestoreState`; 3, task configs stored
/// with what they share kept once (`PutTaskConfigs.shared`, `Connector.task_shared`); 4, units
/// moved by revoking them first (`Revoke`, `Release`, `Assignment.revoked`); 5, offsets changed
/// through the offsets API marked as winning over a sink's own (`supersede`,
/// `Offsets.altered_at`); 6, what Kafka Connect's REST API needs: workers' REST addresses
/// (`FerryNode.rest_url` in `PutWorker`) and connectors created in a target state
/// (`PutConnector.initial`, KIP-980); 7, connectors' active topics (`RecordTopics`,
/// `ResetTopics`, KIP-558) and cluster-wide log levels (`SetLogLevel`).
pub const FORMAT_VERSION: u32 = 7;

/// The format from which connectors' active topics and cluster-wide log levels are kept.
pub const TOPICS_AND_LOG_LEVELS: u32 = 7;

/// The format from which a worker's record carries its REST address and a connector may be
/// created in a target state.
pub const REST_API: u32 = 6;

/// The format from which offsets changed through the offsets API are marked as winning over a
/// sink's own (`supersede`); below it they are changed as before.
pub const SUPERSEDING_OFFSETS: u32 = 5;

/// The format of everything written before formats were recorded.
pub const BASE_FORMAT: u32 = 1;

static UNDERSTOOD: AtomicU32 = AtomicU32::new(FORMAT_VERSION);

/// The highest format this process understands.
pub fn understood() -> u32 {
    UNDERSTOOD.load(Ordering::Relaxed)
}

/// Test only: make this process behave as a build that understands formats up to `version`
/// (an older release), to test mixed clusters. Set before the node starts.
pub fn understand_only(version: u32) {
    UNDERSTOOD.store(
        version.clamp(BASE_FORMAT, FORMAT_VERSION),
        Ordering::Relaxed,
    );
}

/// Serde's default for a format absent from what was written.
pub const fn base() -> u32 {
    BASE_FORMAT
}

/// Whether a command of `format` may be proposed at the cluster's `level`: why not, if not.
pub fn admissible(format: u32, level: u32) -> Result<(), String> {
    if format <= level {
        return Ok(());
    }
    Err(format!(
        "this change needs cluster feature level {format}, and the cluster is at level {level}: \
         upgrade every node to a build that understands it (the leader then raises the level \
         by itself)"
    ))
}

/// The level the leader may raise the cluster to: the lowest format every member understands,
/// if every member reported one and it is above `current`.
pub fn level_to_raise(current: u32, members: &[Option<u32>]) -> Option<u32> {
    let lowest = members
        .iter()
        .copied()
        .collect::<Option<Vec<u32>>>()?
        .into_iter()
        .min()?;
    (lowest > current).then_some(lowest)
}

/// The refusal of an entry or snapshot of a format this build does not understand.
pub fn refusal(what: &str, format: u32) -> String {
    format!(
        "{what} needs format {format}, and this ferryd understands formats up to {}: the \
         cluster was upgraded past this build; upgrade ferryd on this node and start it again",
        understood()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_level_is_raised_only_when_every_member_understands_it() {
        assert_eq!(level_to_raise(1, &[Some(2), Some(2), Some(2)]), Some(2));
        assert_eq!(level_to_raise(1, &[Some(2), Some(1), Some(2)]), None);
        assert_eq!(
            level_to_raise(1, &[Some(2), None, Some(2)]),
            None,
            "one did not say"
        );
        assert_eq!(
            level_to_raise(2, &[Some(2), Some(3)]),
            None,
            "never to the same level"
        );
        assert_eq!(level_to_raise(2, &[Some(3), Some(4)]), Some(3));
        assert_eq!(level_to_raise(1, &[]), None);
    }

    #[test]
    fn commands_above_the_level_are_not_admissible() {
        assert!(admissible(1, 1).is_ok());
        assert!(admissible(2, 3).is_ok());
        assert!(admissible(2, 1).unwrap_err().contains("feature level 2"));
    }
}
