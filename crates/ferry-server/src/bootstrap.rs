//! The bootstrap decision of a node without Raft state, as a pure function of what its static
//! peers answered. Only the peer with the lowest id may initialize, only when every other peer
//! answered, and never when one of them already belongs to a cluster.

use ferry_meta::peer::ProbeReply;
use ferry_meta::NodeId;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// This node is not the initializer: wait for it, or for a leader to add this node.
    NotInitializer { initializer: NodeId },
    /// Every peer answered and none belongs to a cluster: initialize with all as voters.
    Initialize,
    /// Some peers did not answer yet: ask again later.
    Retry { missing: Vec<NodeId> },
    /// A peer belongs to a cluster already: never initialize; wait to be brought back.
    PeerInitialized {
        peer: NodeId,
        cluster_id: Option<String>,
    },
}

/// The initializer among the static peers.
pub fn initializer(peers: &[NodeId]) -> Option<NodeId> {
    peers.iter().copied().min()
}

/// A peer's answer to a probe (`None`: it did not answer).
pub type Answer = (NodeId, Option<ProbeReply>);

/// Decide from each other peer's probe answer.
pub fn decide(me: NodeId, peers: &[NodeId], answers: &[Answer]) -> Decision {
    match initializer(peers) {
        Some(first) if first != me => return Decision::NotInitializer { initializer: first },
        _ => {}
    }
    if let Some((peer, reply)) = answers
        .iter()
        .find_map(|(id, a)| a.as_ref().filter(|a| a.initialized).map(|a| (*id, a)))
    {
        return Decision::PeerInitialized {
            peer,
            cluster_id: reply.cluster_id.clone(),
        };
    }
    let missing: Vec<NodeId> = peers
        .iter()
        .copied()
        .filter(|p| *p != me)
        .filter(|p| !answers.iter().any(|(id, a)| id == p && a.is_some()))
        .collect();
    if missing.is_empty() {
        Decision::Initialize
    } else {
        Decision::Retry { missing }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(id: NodeId) -> Answer {
        (
            id,
            Some(ProbeReply {
                node_id: id,
                initialized: false,
                cluster_id: None,
                leader: None,
                incarnation: format!("i{id}"),
            }),
        )
    }

    fn member(id: NodeId) -> Answer {
        (
            id,
            Some(ProbeReply {
                node_id: id,
                initialized: true,
                cluster_id: Some("c1".into()),
                leader: Some(2),
                incarnation: format!("i{id}"),
            }),
        )
    }

    #[test]
    fn table() {
        let peers = [1, 2, 3];
        let cases: Vec<(&str, NodeId, Vec<Answer>, Decision)> = vec![
            (
                "all fresh",
                1,
                vec![fresh(2), fresh(3)],
                Decision::Initialize,
            ),
            (
                "one silent",
                1,
                vec![fresh(2), (3, None)],
                Decision::Retry { missing: vec![3] },
            ),
            (
                "none answered",
                1,
                vec![],
                Decision::Retry {
                    missing: vec![2, 3],
                },
            ),
            (
                "wiped initializer, peers in a cluster",
                1,
                vec![member(2), (3, None)],
                Decision::PeerInitialized {
                    peer: 2,
                    cluster_id: Some("c1".into()),
                },
            ),
            (
                "one member is enough to refuse",
                1,
                vec![fresh(2), member(3)],
                Decision::PeerInitialized {
                    peer: 3,
                    cluster_id: Some("c1".into()),
                },
            ),
            (
                "not the lowest id",
                2,
                vec![fresh(1), fresh(3)],
                Decision::NotInitializer { initializer: 1 },
            ),
        ];
        for (name, me, answers, want) in cases {
            assert_eq!(decide(me, &peers, &answers), want, "{name}");
        }
    }

    #[test]
    fn a_single_node_cluster_initializes_alone() {
        assert_eq!(decide(5, &[5], &[]), Decision::Initialize);
    }
}
