//! Ferry's own series of its Raft group, as this node sees it (openraft's metrics at each
//! scrape): `ferry_raft_*`. Kafka Connect has no counterpart: its control plane is Kafka's
//! internal topics.

use ferry_meta::MetaNode;
use openraft::ServerState;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use std::time::SystemTime;

use ferry_meta::store::SnapshotFacts;

/// openraft's metrics of Ferry's Raft.
type Metrics = openraft::RaftMetrics<ferry_meta::NodeId, ferry_meta::FerryNode>;

/// What this node's Raft metrics say, read at each scrape.
pub struct RaftSeries {
    node: MetaNode,
}

impl RaftSeries {
    /// The series of `node`'s Raft.
    pub fn new(node: MetaNode) -> Self {
        RaftSeries { node }
    }
}

impl std::fmt::Debug for RaftSeries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftSeries")
            .field("node", &self.node.id())
            .finish()
    }
}

/// What a scrape reads besides openraft's metrics: the node's commit index and its latest
/// snapshot.
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    committed: Option<u64>,
    snapshot: Option<SnapshotFacts>,
    now: Option<SystemTime>,
}

/// Each series: its name, meaning and value (`-1` where Raft has none yet).
fn series(m: &Metrics, seen: Seen) -> [(&'static str, &'static str, i64); 13] {
    let index = |i: Option<u64>| i.map_or(-1, |i| i64::try_from(i).unwrap_or(i64::MAX));
    let last_log = index(m.last_log_index);
    let applied = index(m.last_applied.map(|l| l.index));
    let purged = index(m.purged.map(|l| l.index));
    let age = match (seen.snapshot.and_then(|s| s.stored), seen.now) {
        (Some(stored), Some(now)) => {
            index(Some(now.duration_since(stored).map_or(0, |d| d.as_secs())))
        }
        _ => -1,
    };
    [
        (
            "ferry_raft_term",
            "The node's current Raft term.",
            index(Some(m.current_term)),
        ),
        (
            "ferry_raft_leader_id",
            "The leader this node knows of (-1: none).",
            index(m.current_leader),
        ),
        (
            "ferry_raft_is_leader",
            "1 while this node leads.",
            i64::from(m.state == ServerState::Leader),
        ),
        (
            "ferry_raft_last_log_index",
            "The index of the last entry in this node's log.",
            last_log,
        ),
        (
            "ferry_raft_committed_index",
            "The highest index this node knows to be committed.",
            index(seen.committed),
        ),
        (
            "ferry_raft_applied_index",
            "The index of the last entry this node applied.",
            applied,
        ),
        (
            "ferry_raft_apply_lag",
            "Entries in this node's log not applied yet.",
            (last_log - applied).max(0),
        ),
        (
            "ferry_raft_snapshot_index",
            "The last index the node's latest snapshot holds.",
            index(m.snapshot.map(|l| l.index)),
        ),
        (
            "ferry_raft_purged_index",
            "The last index purged from the node's log (kept in its snapshot).",
            purged,
        ),
        (
            "ferry_raft_log_entries",
            "Entries in this node's log (after the last purged one).",
            (last_log - purged.max(0)).max(0),
        ),
        (
            "ferry_raft_snapshot_bytes",
            "The size of the state this node's latest snapshot holds (-1: no snapshot).",
            index(seen.snapshot.map(|s| s.bytes)),
        ),
        (
            "ferry_raft_snapshot_age_seconds",
            "Seconds since this node stored its latest snapshot, built or installed (-1: none, or not known).",
            age,
        ),
        (
            "ferry_raft_quorum_ack_age_ms",
            "On the leader: milliseconds since a quorum last acknowledged it (-1 elsewhere).",
            index(m.millis_since_quorum_ack),
        ),
    ]
}

impl Collector for RaftSeries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let metrics = self.node.raft().metrics().borrow().clone();
        let seen = Seen {
            committed: self.node.committed_index(),
            snapshot: self.node.state().snapshot(),
            now: Some(SystemTime::now()),
        };
        ferry_worker::metrics::encode_gauges(&mut encoder, &series(&metrics, seen))?;
        ferry_worker::metrics::encode_metric(
            &mut encoder,
            "ferry_raft_proposal_seconds",
            "How long the writes this node proposed as leader took, from proposal to answer.",
            self.node.proposal_times(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_s_series_say_it_leads_and_how_far_it_applied() {
        let mut m = Metrics::new_initial(2);
        let of = |m: &Metrics, name: &str| {
            series(m, Seen::default())
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, _, v)| *v)
        };
        assert_eq!(of(&m, "ferry_raft_leader_id"), Some(-1), "no leader yet");
        assert_eq!(of(&m, "ferry_raft_applied_index"), Some(-1));
        m.current_term = 3;
        m.current_leader = Some(2);
        m.state = ServerState::Leader;
        m.last_log_index = Some(10);
        m.last_applied = Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(3, 2),
            7,
        ));
        m.millis_since_quorum_ack = Some(40);
        assert_eq!(of(&m, "ferry_raft_term"), Some(3));
        assert_eq!(of(&m, "ferry_raft_leader_id"), Some(2));
        assert_eq!(of(&m, "ferry_raft_is_leader"), Some(1));
        assert_eq!(of(&m, "ferry_raft_applied_index"), Some(7));
        assert_eq!(of(&m, "ferry_raft_apply_lag"), Some(3));
        assert_eq!(of(&m, "ferry_raft_quorum_ack_age_ms"), Some(40));
        assert_eq!(of(&m, "ferry_raft_log_entries"), Some(10));
        assert_eq!(of(&m, "ferry_raft_snapshot_bytes"), Some(-1), "no snapshot");
        // A snapshot of 500 bytes stored 90 s ago, the log purged up to 6, 8 committed.
        m.purged = Some(openraft::LogId::new(
            openraft::CommittedLeaderId::new(3, 2),
            6,
        ));
        let now = SystemTime::now();
        let seen = Seen {
            committed: Some(8),
            snapshot: Some(SnapshotFacts {
                bytes: 500,
                stored: Some(now - std::time::Duration::from_secs(90)),
            }),
            now: Some(now),
        };
        let of = |name: &str| {
            series(&m, seen)
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, _, v)| *v)
        };
        assert_eq!(of("ferry_raft_committed_index"), Some(8));
        assert_eq!(of("ferry_raft_log_entries"), Some(4));
        assert_eq!(of("ferry_raft_snapshot_bytes"), Some(500));
        assert_eq!(of("ferry_raft_snapshot_age_seconds"), Some(90));
    }
}
