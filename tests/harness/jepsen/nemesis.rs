//! Nemeses: the faults the suite injects into a running cluster, one at a time, each healed
//! before the next. A seeded [`Rng`] picks the kind (for `combined`), the victim and the timing,
//! so that a seed replays the same schedule.

use std::fmt;
use std::str::FromStr;

use super::rng::Rng;

/// A kind of fault, or a mix of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Nemesis {
    /// `kill -9` of a random node, restarted at heal.
    KillRandom,
    /// `kill -9` of the Raft leader, restarted at heal.
    KillLeader,
    /// SIGSTOP of a random node for longer than the worker timeout, then SIGCONT: a zombie.
    Pause,
    /// A graceful restart (SIGTERM, then start) of a random node.
    Restart,
    /// A random node cut off from the others (a minority of one against the majority).
    PartitionMajority,
    /// The leader cut off from the others.
    PartitionLeader,
    /// A new node added (learner, then voter) under load, then removed at heal.
    Membership,
    /// `kill -9` of any node (the leader too), its data directory deleted, restarted empty.
    Wipe,
    /// A node stopped, a copy of its data directory taken, restarted; after the hold it is
    /// stopped again and restarted from that older copy — and in half the rounds one of the
    /// other two nodes is killed right after, so that any quorum must include the restored one.
    Rollback,
    /// A client creates a connector with thousands of tasks (`Scenario::big_tasks`, the task
    /// limit raised for it) while the workload runs, waits for all of them in status, then
    /// deletes it: the leader's term, the sink's generations and every lease must not notice.
    BigConfig,
    /// Every node, the leader included, stopped with SIGTERM and started again, one at a time,
    /// twice over, each down longer than the worker timeout, under a load of 1,000 records/s
    /// with Kafka Connect's default `offset.flush.interval.ms`: planned changes, which must
    /// write no record twice and leave the tasks of the nodes not restarted alone.
    RollingRestart,
    /// The leader stopped with SIGTERM and started again (`Scenario::leader_stops` times),
    /// under the rolling restart's load: the stops are bounded, nothing is written twice, and
    /// the tasks of the other nodes are left alone.
    LeaderChanges,
    /// Faults shorter than the worker timeout, under the rolling restart's load: a follower cut
    /// off (its connections reset), the leader paused until a successor leads. Nothing may
    /// move: a reset is no proof of death, and a successor waits a full worker timeout.
    ShortFaults,
    /// `kill -9` of one of the three Kafka brokers, restarted at heal (the scenario runs on a
    /// three-broker cluster: replication factor 3, `min.insync.replicas=2`).
    KillBroker,
    /// SIGSTOP of one of the three Kafka brokers, SIGCONT at heal.
    PauseBroker,
    /// One of the three Kafka brokers cut off from Ferry's workers (their connections to it
    /// go through a proxy of the harness, which drops them and refuses new ones), while the
    /// other brokers, the controllers and the workload's producer still reach it.
    PartitionBroker,
    /// A random one of the faults, fault after fault (not `big-config`, `rolling-restart`,
    /// `leader-changes` nor `short-faults`, rounds of their own).
    Combined,
}

impl Nemesis {
    /// Every nemesis; `combined` is the last.
    pub const ALL: [Nemesis; 17] = [
        Nemesis::KillRandom,
        Nemesis::KillLeader,
        Nemesis::Pause,
        Nemesis::Restart,
        Nemesis::PartitionMajority,
        Nemesis::PartitionLeader,
        Nemesis::Membership,
        Nemesis::Wipe,
        Nemesis::Rollback,
        Nemesis::BigConfig,
        Nemesis::RollingRestart,
        Nemesis::LeaderChanges,
        Nemesis::ShortFaults,
        Nemesis::KillBroker,
        Nemesis::PauseBroker,
        Nemesis::PartitionBroker,
        Nemesis::Combined,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Nemesis::KillRandom => "kill-random",
            Nemesis::KillLeader => "kill-leader",
            Nemesis::Pause => "pause",
            Nemesis::Restart => "restart",
            Nemesis::PartitionMajority => "partition-majority",
            Nemesis::PartitionLeader => "partition-leader",
            Nemesis::Membership => "membership",
            Nemesis::Wipe => "wipe",
            Nemesis::Rollback => "rollback",
            Nemesis::BigConfig => "big-config",
            Nemesis::RollingRestart => "rolling-restart",
            Nemesis::LeaderChanges => "leader-changes",
            Nemesis::ShortFaults => "short-faults",
            Nemesis::KillBroker => "kill-broker",
            Nemesis::PauseBroker => "pause-broker",
            Nemesis::PartitionBroker => "partition-broker",
            Nemesis::Combined => "combined",
        }
    }

    /// The single kind of the next fault.
    pub fn draw(self, rng: &mut Rng) -> Nemesis {
        match self {
            Nemesis::Combined => {
                // Every fault but itself and the rounds of their own.
                let drawn: Vec<Nemesis> = Self::ALL
                    .into_iter()
                    .filter(|n| {
                        !matches!(n, Nemesis::BigConfig | Nemesis::Combined) && !n.planned()
                    })
                    .collect();
                *rng.pick(&drawn).unwrap_or(&Nemesis::KillRandom)
            }
            one => one,
        }
    }

    /// Whether the fault takes the victim's worker away, so that its tasks must move.
    /// Planned changes: rounds that must write no record twice and leave alone the tasks of
    /// the nodes they do not touch.
    pub fn planned(self) -> bool {
        matches!(
            self,
            Nemesis::RollingRestart | Nemesis::LeaderChanges | Nemesis::ShortFaults
        )
    }

    /// Whether the scenario must write no record twice, whatever the sink: planned changes,
    /// and `membership` (a node added takes its share by revocation; `remove-node` moves the
    /// removed worker's units the same way).
    pub fn writes_nothing_twice(self) -> bool {
        self.planned() || self == Nemesis::Membership
    }

    pub fn displaces(self) -> bool {
        matches!(
            self,
            Nemesis::KillRandom
                | Nemesis::KillLeader
                | Nemesis::Pause
                | Nemesis::PartitionMajority
                | Nemesis::PartitionLeader
        )
    }

    /// Whether the fault is one of a Kafka broker's.
    pub fn broker(self) -> bool {
        matches!(
            self,
            Nemesis::KillBroker | Nemesis::PauseBroker | Nemesis::PartitionBroker
        )
    }

    /// Whether the scenario runs on three Kafka brokers rather than one, the workers reaching
    /// them through proxies: it may take a broker away.
    pub fn needs_three_brokers(self) -> bool {
        self.broker() || self == Nemesis::Combined
    }

    /// Whether the victim is the leader rather than a random node.
    pub fn targets_leader(self) -> bool {
        matches!(self, Nemesis::KillLeader | Nemesis::PartitionLeader)
    }
}

impl fmt::Display for Nemesis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Nemesis {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Nemesis::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Nemesis::ALL.iter().map(|n| n.name()).collect();
                format!(
                    "unknown nemesis {s:?}: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// Parse `--nemesis` values: `all`, or names separated by commas.
pub fn parse_list(s: &str) -> Result<Vec<Nemesis>, String> {
    if s == "all" {
        return Ok(Nemesis::ALL.to_vec());
    }
    s.split(',').map(|n| n.trim().parse()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_combined_draws_every_single_fault_but_the_rounds_of_their_own() {
        for n in Nemesis::ALL {
            assert_eq!(n.name().parse::<Nemesis>(), Ok(n));
        }
        assert_eq!(parse_list("all").map(|l| l.len()), Ok(17));
        assert_eq!(
            parse_list("pause,kill-leader"),
            Ok(vec![Nemesis::Pause, Nemesis::KillLeader])
        );
        assert!(parse_list("pause,kill").unwrap_err().contains("\"kill\""));
        let mut rng = Rng::new(3);
        let drawn: std::collections::BTreeSet<Nemesis> =
            (0..200).map(|_| Nemesis::Combined.draw(&mut rng)).collect();
        assert_eq!(drawn.len(), 12, "{drawn:?}");
        assert!(!drawn.contains(&Nemesis::Combined));
        assert!(!drawn.contains(&Nemesis::BigConfig), "a load of its own");
        assert!(
            !drawn.contains(&Nemesis::RollingRestart)
                && !drawn.contains(&Nemesis::LeaderChanges)
                && !drawn.contains(&Nemesis::ShortFaults),
            "rounds of their own"
        );
    }
}
