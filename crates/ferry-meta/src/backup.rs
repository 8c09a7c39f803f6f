//! Backups of the replicated state: a consistent copy taken through Raft (a linearizable read
//! of the applied state), and its restore into a new, empty cluster — the safe alternative to
//! copying data directories after losing a majority.
//!
//! A backup holds what the cluster holds: connector configs (secrets included, as in the Raft
//! log), task configs, assignments, status, offsets and the last generation handed out. A
//! restore brings all of that back into a cluster that has no connectors yet, keeping that
//! cluster's own id and workers, and never moves a generation backwards, so that fencing at the
//! destinations (the JDBC sink's offsets table, the storage sink's commits) still holds.

use serde::{Deserialize, Serialize};

use crate::state::ClusterState;

/// What `ferry cluster backup` writes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Backup {
    /// Always [`BACKUP_KIND`]: tells a backup from any other JSON file.
    pub kind: String,
    /// The cluster it was taken from.
    pub cluster_id: Option<String>,
    /// The log index the state was taken at.
    pub applied_index: Option<u64>,
    /// The state, with its feature level (the format needed to read it).
    pub state: ClusterState,
}

/// What a backup file's `kind` says.
pub const BACKUP_KIND: &str = "ferry-backup";

impl Backup {
    /// A backup of `state`, taken at `applied_index`.
    pub fn of(state: &ClusterState, applied_index: Option<u64>) -> Self {
        Backup {
            kind: BACKUP_KIND.into(),
            cluster_id: state.cluster_id.clone(),
            applied_index,
            state: state.clone(),
        }
    }

    /// The backup as a JSON file.
    pub fn encode(&self) -> Result<Vec<u8>, String> {
        serde_json::to_vec_pretty(self).map_err(|e| format!("cannot encode the backup: {e}"))
    }

    /// Read a backup, refusing what is not one or what this build cannot read.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let backup: Backup = serde_json::from_slice(bytes)
            .map_err(|e| format!("not a Ferry backup (ferry cluster backup writes one): {e}"))?;
        if backup.kind != BACKUP_KIND {
            return Err(format!(
                "not a Ferry backup: its kind is {:?}, not {BACKUP_KIND:?}",
                backup.kind
            ));
        }
        let level = backup.state.feature_level();
        if level > crate::format::understood() {
            return Err(crate::format::refusal("this backup", level));
        }
        Ok(backup)
    }
}

/// The state of an empty cluster after restoring `backup` into it: the backup's connectors
/// (with their target states), task configs, sink partitions and offsets; the cluster's own id,
/// workers and feature level; the higher of the two generations. Nothing is assigned: the
/// scheduler assigns every connector and task afresh, under generations above any the backup's
/// cluster handed out, so that a task of that cluster still running somewhere is fenced.
pub fn restored(current: &ClusterState, backup: &ClusterState) -> ClusterState {
    ClusterState {
        cluster_id: current.cluster_id.clone(),
        feature_level: current.feature_level,
        workers: current.workers.clone(),
        retired: current.retired.clone(),
        log_levels: current.log_levels.clone(),
        requests: current.requests.clone(),
        request_order: current.request_order.clone(),
        generation: current.generation.max(backup.generation),
        assignments: Default::default(),
        status: Default::default(),
        ..backup.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Command, Request};
    use crate::ConfigMap;

    #[test]
    fn a_backup_round_trips_and_restores_keeping_the_new_clusters_identity() {
        let mut old = ClusterState::default();
        let put = |name: &str| {
            Request::anonymous(Command::PutConnector {
                name: name.into(),
                config: [("topics", "t")].into_iter().collect::<ConfigMap>(),
                create: true,
                expected_version: None,
                initial: None,
            })
        };
        assert!(old
            .apply(&Request::anonymous(Command::SetClusterId {
                id: "old".into()
            }))
            .is_ok());
        assert!(old.apply(&put("a")).is_ok());
        assert!(old
            .apply(&Request::anonymous(Command::Assign {
                name: "a".into(),
                task: None,
                worker: Some(1),
            }))
            .is_ok());
        let backup = Backup::of(&old, Some(42));
        let decoded = Backup::decode(&backup.encode().expect("encode")).expect("decode");
        assert_eq!(decoded, backup);

        let mut new = ClusterState::default();
        assert!(new
            .apply(&Request::anonymous(Command::SetClusterId {
                id: "new".into()
            }))
            .is_ok());
        let state = restored(&new, &decoded.state);
        assert_eq!(state.cluster_id.as_deref(), Some("new"));
        assert!(state.connectors.contains_key("a"));
        assert_eq!(
            state.generation, old.generation,
            "generations never go back"
        );
        assert!(
            state.assignments.is_empty(),
            "everything is assigned afresh"
        );

        assert!(Backup::decode(b"{}")
            .unwrap_err()
            .contains("not a Ferry backup"));
        let mut wrong = backup.clone();
        wrong.kind = "other".into();
        assert!(Backup::decode(&wrong.encode().expect("encode")).is_err());
    }
}
