//! Membership that heals: a node that may have lost entries it acknowledged — its data
//! directory wiped, or restored from an older copy — never votes or counts towards a quorum
//! until it is whole again.
//!
//! Every copy of a node's data has an *incarnation* id, created with its database
//! (`crate::store`) and recorded for the node in the replicated membership. A node is *whole*
//! while the membership records its own incarnation (or none yet: a membership written before
//! incarnations existed). A node that is not whole refuses to vote and does not campaign
//! ([`Standing`]). The leader learns each node's incarnation and the last log index it started
//! with from its heartbeats, and ([`plan`]) demotes to learner a voter that came back under a
//! new incarnation, or whose log at start was behind what the leader had matched for it (a
//! restored copy); records its new incarnation; and promotes it to voter again once it has
//! caught up — one membership change at a time, each logged.
//!
//! The decisions are pure functions of what the node sees, tested without I/O; [`run`] carries
//! them out on the leader.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use openraft::ChangeMembers;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::node::MetaNode;
use crate::state::FerryNode;
use crate::types::NodeId;

/// How often the leader looks at the membership.
const TICK: Duration = Duration::from_millis(500);

/// What a node says about the data it started with, in every heartbeat.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Boot {
    /// The incarnation of its data directory.
    pub incarnation: String,
    /// Unique per start of the process.
    pub boot_id: String,
    /// Its last log index when it started (`None`: an empty log).
    pub last_log_index: Option<u64>,
    /// The highest format it understands (see `crate::format`); a node of a build from
    /// before formats were recorded sends none.
    #[serde(default = "crate::format::base")]
    pub format: u32,
}

/// Where a node stands, as it sees itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Standing {
    /// The membership records this copy of its data: it may vote.
    Whole,
    /// No Raft state yet, and the initializer of a new cluster named this incarnation among
    /// its voters: it may vote in the first election.
    Invited,
    /// No Raft state, no invitation: a new node waiting to be added, or a wiped one waiting to
    /// be brought back.
    Empty,
    /// The membership does not list it.
    NotMember,
    /// The membership records another incarnation: this node's data is a new copy, and the
    /// entries its previous copy acknowledged may be lost.
    Lost {
        /// The incarnation the membership records.
        recorded: String,
    },
}

impl Standing {
    /// Whether it may vote and campaign.
    pub fn may_vote(&self) -> bool {
        matches!(self, Standing::Whole | Standing::Invited)
    }

    /// Why it may not vote, for the log and the refusal.
    pub fn reason(&self, incarnation: &str) -> String {
        match self {
            Standing::Whole | Standing::Invited => "whole".into(),
            Standing::Empty => "this node has no Raft state yet (new, or its data directory was wiped): \
                 it waits for the leader to add it"
                .into(),
            Standing::NotMember => "this node is not a member of the cluster".into(),
            Standing::Lost { recorded } => format!(
                "this node's data directory is a new copy (incarnation {incarnation}) of the one the \
                 cluster knows (incarnation {recorded}): entries it acknowledged may be lost, so it \
                 does not vote until the leader has re-added it and it has caught up"
            ),
        }
    }
}

/// Where this node stands: `initialized` says whether it has Raft state (a log or a
/// membership), `recorded` is its own entry in the membership it knows, `invited` its entry in
/// an initializer's invitation.
pub fn standing(
    incarnation: &str,
    initialized: bool,
    recorded: Option<&FerryNode>,
    invited: Option<&FerryNode>,
) -> Standing {
    if !initialized {
        return match invited {
            Some(node) if node.incarnation == incarnation => Standing::Invited,
            _ => Standing::Empty,
        };
    }
    match recorded {
        None => Standing::NotMember,
        Some(node) if node.incarnation.is_empty() || node.incarnation == incarnation => {
            Standing::Whole
        }
        Some(node) => Standing::Lost {
            recorded: node.incarnation.clone(),
        },
    }
}

/// A member as the leader sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its node id.
    pub id: NodeId,
    /// Its addresses and incarnation.
    pub node: FerryNode,
    /// Whether it is a voter (else a learner).
    pub voter: bool,
    /// The highest log index the leader knows to be on it.
    pub matched: Option<u64>,
}

/// One membership change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Make a voter a learner: it may have lost entries it acknowledged.
    Demote {
        /// The voter.
        id: NodeId,
        /// Why.
        reason: String,
    },
    /// Record a member's incarnation.
    Record {
        /// The member.
        id: NodeId,
        /// Its addresses with the incarnation it reported.
        node: FerryNode,
    },
    /// Make a caught-up learner a voter again.
    Promote {
        /// The learner.
        id: NodeId,
    },
}

/// What the leader sees: the membership, the incarnations nodes reported, the nodes found to
/// have started behind what the leader had matched for them, and how far the log is applied.
pub struct View<'a> {
    /// The leader (this node).
    pub leader: NodeId,
    /// Every member.
    pub members: &'a [Member],
    /// The incarnation each node reported last.
    pub reported: &'a BTreeMap<NodeId, String>,
    /// Voters found to have started behind, and why.
    pub suspects: &'a BTreeMap<NodeId, String>,
    /// Voters unreachable for longer than `replace_dead_voter_after_ms`.
    pub silent: &'a BTreeSet<NodeId>,
    /// How far the leader has applied the log.
    pub applied: Option<u64>,
    /// How many voters the cluster aims at.
    pub target_voters: usize,
}

/// The size of a majority of `n` voters.
fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The next membership change, if any: demotions first (a node that may have lost entries
/// must stop counting at once), then recording incarnations, then promotions.
pub fn plan(view: &View) -> Option<Action> {
    let voters = view.members.iter().filter(|m| m.voter).count();
    let reported = |m: &Member| view.reported.get(&m.id).filter(|i| !i.is_empty());
    for m in view
        .members
        .iter()
        .filter(|m| m.voter && m.id != view.leader)
    {
        if voters <= 1 {
            break;
        }
        if let Some(why) = view.suspects.get(&m.id) {
            return Some(Action::Demote {
                id: m.id,
                reason: why.clone(),
            });
        }
        match reported(m) {
            Some(now) if !m.node.incarnation.is_empty() && *now != m.node.incarnation => {
                return Some(Action::Demote {
                    id: m.id,
                    reason: format!(
                        "it came back with a new data directory (incarnation {now}, was {})",
                        m.node.incarnation
                    ),
                });
            }
            _ => {}
        }
    }
    // A voter silent for long, beyond the target (its replacement is a voter already): out.
    if voters > view.target_voters {
        if let Some(m) = view
            .members
            .iter()
            .find(|m| m.voter && m.id != view.leader && view.silent.contains(&m.id))
        {
            return Some(Action::Demote {
                id: m.id,
                reason: "it has been unreachable for longer than replace_dead_voter_after_ms, \
                         and a caught-up learner took its place"
                    .into(),
            });
        }
    }
    for m in view.members {
        match reported(m) {
            // A voter's incarnation is only ever filled in; a new one demotes it first.
            Some(now)
                if *now != m.node.incarnation && (!m.voter || m.node.incarnation.is_empty()) =>
            {
                return Some(Action::Record {
                    id: m.id,
                    node: FerryNode {
                        incarnation: now.clone(),
                        ..m.node.clone()
                    },
                });
            }
            _ => {}
        }
    }
    let caught_up = |m: &Member| match (m.matched, view.applied) {
        (_, None) => true,
        (Some(matched), Some(applied)) => matched >= applied,
        (None, Some(_)) => false,
    };
    let candidate = view.members.iter().find(|m| {
        !m.voter
            && !m.node.incarnation.is_empty()
            && reported(m) == Some(&m.node.incarnation)
            && !view.suspects.contains_key(&m.id)
            && !view.silent.contains(&m.id)
            && caught_up(m)
    });
    let candidate = candidate?;
    if voters < view.target_voters {
        return Some(Action::Promote { id: candidate.id });
    }
    // A dead voter is replaced by adding the learner first: only if the live voters and the
    // learner are a majority of the larger set, so that the change itself can commit.
    let silent_voters = view
        .members
        .iter()
        .filter(|m| m.voter && view.silent.contains(&m.id))
        .count();
    if silent_voters > 0 && voters - silent_voters + 1 >= quorum(voters + 1) {
        return Some(Action::Promote { id: candidate.id });
    }
    None
}

/// Whether a node that reports `boot` started behind what the leader had matched for it:
/// the reason, if so.
pub fn started_behind(boot: &Boot, matched_before: Option<u64>) -> Option<String> {
    let matched = matched_before?;
    if boot.last_log_index.is_some_and(|last| last >= matched) {
        return None;
    }
    Some(format!(
        "it started with its log at {} but had acknowledged entries up to {matched}: its data \
         directory was restored from an older copy, or lost writes",
        boot.last_log_index
            .map_or_else(|| "nothing".to_string(), |i| i.to_string())
    ))
}

/// The voters whose last heartbeat (or, for a leader that took over since, its taking over) is
/// older than `after`.
pub fn silent_voters(
    voters: &BTreeSet<NodeId>,
    heard: &std::collections::HashMap<NodeId, Instant>,
    leader_since: Instant,
    now: Instant,
    after: Duration,
) -> BTreeSet<NodeId> {
    voters
        .iter()
        .copied()
        .filter(|v| {
            let last = heard
                .get(v)
                .copied()
                .map_or(leader_since, |h| h.max(leader_since));
            now.saturating_duration_since(last) >= after
        })
        .collect()
}

/// How the healer runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// How many voters the cluster aims at.
    pub target_voters: usize,
    /// Replace a voter unreachable this long by a caught-up learner (`None`: never).
    pub replace_dead_voter_after: Option<Duration>,
}

/// On the leader: raise the cluster's feature level once every member understands a higher one.
async fn raise_feature_level(node: &MetaNode, members: &[Member]) {
    let current = node.state().read().state.feature_level();
    let formats = node.reported_formats();
    let reported: Vec<Option<u32>> = members
        .iter()
        .map(|m| formats.get(&m.id).copied())
        .collect();
    let Some(level) = crate::format::level_to_raise(current, &reported) else {
        return;
    };
    info!(
        from = current,
        to = level,
        "every member understands a higher format: raising the cluster feature level"
    );
    let request = crate::state::Request::new(
        format!("feature-level/{level}"),
        crate::state::Command::SetFeatureLevel { level },
    );
    if let Err(e) = node.write(request).await {
        warn!(error = %e, "cannot raise the feature level yet; will retry");
    }
}

/// On the leader, until `shutdown`: carry out [`plan`], one change at a time.
#[tracing::instrument(name = "healer", skip_all, fields(node = node.id()))]
pub async fn run(node: MetaNode, settings: Settings, mut shutdown: watch::Receiver<bool>) {
    let mut leader_since: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(TICK) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        if node.leader() != Some(node.id()) {
            leader_since = None;
            continue;
        }
        let since = *leader_since.get_or_insert_with(Instant::now);
        let _decided = node.membership_lock().await;
        let (members, applied) = node.members_seen_by_leader();
        let voters: BTreeSet<NodeId> = members.iter().filter(|m| m.voter).map(|m| m.id).collect();
        let mut silent = match settings.replace_dead_voter_after {
            Some(after) => silent_voters(&voters, &node.last_heard(), since, Instant::now(), after),
            None => BTreeSet::new(),
        };
        silent.remove(&node.id());
        // A suspect that is no longer a voter has nothing to be demoted from.
        node.clear_suspects(|id| !voters.contains(&id));
        let reported = node.reported_incarnations();
        let suspects = node.suspects();
        let view = View {
            leader: node.id(),
            members: &members,
            reported: &reported,
            suspects: &suspects,
            silent: &silent,
            applied,
            target_voters: settings.target_voters,
        };
        let Some(action) = plan(&view) else {
            raise_feature_level(&node, &members).await;
            continue;
        };
        let (changed, what) = match &action {
            Action::Demote { id, reason } => {
                warn!(node = id, %reason, "node may have lost entries it acknowledged: demoting it to learner until it has caught up");
                (
                    node.demote(BTreeSet::from([*id])).await,
                    "demoted to learner",
                )
            }
            Action::Record { id, node: member } => {
                info!(node = id, incarnation = %member.incarnation, "recording the node's incarnation");
                let change = ChangeMembers::SetNodes(BTreeMap::from([(*id, member.clone())]));
                (node.change_membership(change).await, "incarnation recorded")
            }
            Action::Promote { id } => {
                info!(node = id, "learner caught up: promoting it to voter");
                let change = ChangeMembers::AddVoterIds(BTreeSet::from([*id]));
                (node.change_membership(change).await, "promoted to voter")
            }
        };
        match changed {
            Ok(reply) => {
                if let Action::Demote { id, .. } = &action {
                    node.clear_suspects(|s| s == *id);
                }
                info!(?action, log_index = reply.log_id.index, "{what}");
            }
            Err(e) => warn!(?action, error = %e, "membership change not made; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(incarnation: &str) -> FerryNode {
        FerryNode {
            api_addr: "a".into(),
            raft_addr: "r".into(),
            incarnation: incarnation.into(),
            ..FerryNode::default()
        }
    }

    #[test]
    fn standing_table() {
        let cases = [
            ("fresh, not invited", false, None, None, Standing::Empty),
            (
                "fresh, invited",
                false,
                None,
                Some(node("i1")),
                Standing::Invited,
            ),
            (
                "invitation for another copy",
                false,
                None,
                Some(node("i0")),
                Standing::Empty,
            ),
            ("member", true, Some(node("i1")), None, Standing::Whole),
            (
                "legacy membership",
                true,
                Some(node("")),
                None,
                Standing::Whole,
            ),
            (
                "wiped and replicated to",
                true,
                Some(node("i0")),
                None,
                Standing::Lost {
                    recorded: "i0".into(),
                },
            ),
            ("not listed", true, None, None, Standing::NotMember),
        ];
        for (name, initialized, recorded, invited, want) in cases {
            let got = standing("i1", initialized, recorded.as_ref(), invited.as_ref());
            assert_eq!(got, want, "{name}");
            assert_eq!(
                got.may_vote(),
                matches!(want, Standing::Whole | Standing::Invited),
                "{name}"
            );
        }
        assert!(Standing::Lost {
            recorded: "i0".into()
        }
        .reason("i1")
        .contains("incarnation i1"));
    }

    fn member(id: NodeId, incarnation: &str, voter: bool, matched: Option<u64>) -> Member {
        Member {
            id,
            node: node(incarnation),
            voter,
            matched,
        }
    }

    fn reported(pairs: &[(NodeId, &str)]) -> BTreeMap<NodeId, String> {
        pairs.iter().map(|(id, i)| (*id, i.to_string())).collect()
    }

    static NOBODY: BTreeSet<NodeId> = BTreeSet::new();

    fn view<'a>(
        members: &'a [Member],
        reported: &'a BTreeMap<NodeId, String>,
        suspects: &'a BTreeMap<NodeId, String>,
    ) -> View<'a> {
        View {
            leader: 1,
            members,
            reported,
            suspects,
            silent: &NOBODY,
            applied: Some(100),
            target_voters: 3,
        }
    }

    #[test]
    fn a_dead_voter_is_replaced_by_a_caught_up_learner_add_first_then_remove() {
        let none = BTreeMap::new();
        let r = reported(&[(1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")]);
        let dead: BTreeSet<NodeId> = [3].into();
        // Voters 1-3, learners 4 (behind) and 5 (caught up); voter 3 silent.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c", true, Some(40)),
            member(4, "d", false, Some(10)),
            member(5, "e", false, Some(100)),
        ];
        let v = View {
            silent: &dead,
            ..view(&members, &r, &none)
        };
        assert_eq!(plan(&v), Some(Action::Promote { id: 5 }), "add first");
        // Four voters now: the silent one goes.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c", true, Some(40)),
            member(4, "d", false, Some(10)),
            member(5, "e", true, Some(100)),
        ];
        let v = View {
            silent: &dead,
            ..view(&members, &r, &none)
        };
        assert!(matches!(plan(&v), Some(Action::Demote { id: 3, .. })));
        // Two of three voters silent: adding a fourth could not commit (2 live of 4): nothing.
        let two_dead: BTreeSet<NodeId> = [2, 3].into();
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(40)),
            member(3, "c", true, Some(40)),
            member(5, "e", false, Some(100)),
        ];
        let v = View {
            silent: &two_dead,
            ..view(&members, &r, &none)
        };
        assert_eq!(plan(&v), None);
        // Nobody silent and the target met: nothing.
        assert_eq!(plan(&view(&members, &r, &none)), None);
    }

    #[test]
    fn silence_counts_from_the_last_heartbeat_or_from_taking_over() {
        let t0 = Instant::now();
        let voters: BTreeSet<NodeId> = [1, 2, 3].into();
        let heard = std::collections::HashMap::from([
            (1, t0 + Duration::from_secs(9)),
            (2, t0 + Duration::from_secs(1)),
        ]);
        let now = t0 + Duration::from_secs(10);
        let after = Duration::from_secs(5);
        assert_eq!(
            silent_voters(&voters, &heard, t0, now, after),
            [2, 3].into()
        );
        // A leader that took over 2 s ago presumes everybody alive for now.
        let since = t0 + Duration::from_secs(8);
        assert!(silent_voters(&voters, &heard, since, now, after).is_empty());
    }

    #[test]
    fn a_wiped_voter_is_demoted_recorded_and_promoted_once_caught_up() {
        let none = BTreeMap::new();
        let r = reported(&[(1, "a"), (2, "b"), (3, "c2")]);
        // 1. Node 3 reports a new incarnation while a voter: demoted.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c", true, Some(100)),
        ];
        assert!(matches!(
            plan(&view(&members, &r, &none)),
            Some(Action::Demote { id: 3, .. })
        ));
        // 2. A learner now: its new incarnation is recorded.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c", false, Some(10)),
        ];
        assert_eq!(
            plan(&view(&members, &r, &none)),
            Some(Action::Record {
                id: 3,
                node: node("c2")
            })
        );
        // 3. Recorded, not caught up: nothing yet.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c2", false, Some(10)),
        ];
        assert_eq!(plan(&view(&members, &r, &none)), None);
        // 4. Caught up: promoted.
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c2", false, Some(100)),
        ];
        assert_eq!(
            plan(&view(&members, &r, &none)),
            Some(Action::Promote { id: 3 })
        );
    }

    #[test]
    fn a_suspect_voter_is_demoted_but_never_the_leader_nor_the_last_voter() {
        let r = reported(&[(1, "a"), (2, "b")]);
        let suspects: BTreeMap<NodeId, String> = [(2, "behind".to_string())].into();
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(3)),
        ];
        assert_eq!(
            plan(&view(&members, &r, &suspects)),
            Some(Action::Demote {
                id: 2,
                reason: "behind".into()
            })
        );
        let leader_suspect: BTreeMap<NodeId, String> = [(1, "behind".to_string())].into();
        assert_eq!(plan(&view(&members, &r, &leader_suspect)), None);
        let alone = [member(1, "a", true, Some(100)), member(2, "b", false, None)];
        let two_suspect: BTreeMap<NodeId, String> = [(2, "x".to_string())].into();
        // A learner suspect is not promoted.
        assert_eq!(plan(&view(&alone, &r, &two_suspect)), None);
    }

    #[test]
    fn legacy_memberships_adopt_incarnations_and_full_voter_sets_promote_nobody() {
        let none = BTreeMap::new();
        let r = reported(&[(1, "a"), (2, "b"), (3, "c"), (4, "d")]);
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "", true, Some(100)),
            member(3, "c", true, Some(100)),
            member(4, "d", false, Some(100)),
        ];
        assert_eq!(
            plan(&view(&members, &r, &none)),
            Some(Action::Record {
                id: 2,
                node: node("b")
            })
        );
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(3, "c", true, Some(100)),
            member(4, "d", false, Some(100)),
        ];
        assert_eq!(
            plan(&view(&members, &r, &none)),
            None,
            "three voters of three"
        );
        // Without a report, a learner is not promoted (its incarnation is not confirmed).
        let silent = reported(&[(1, "a"), (2, "b")]);
        let members = [
            member(1, "a", true, Some(100)),
            member(2, "b", true, Some(100)),
            member(4, "d", false, Some(100)),
        ];
        assert_eq!(plan(&view(&members, &silent, &none)), None);
    }

    #[test]
    fn a_node_that_starts_behind_its_matched_index_is_caught() {
        let boot = |last: Option<u64>| Boot {
            incarnation: "a".into(),
            boot_id: "b".into(),
            last_log_index: last,
            format: crate::format::FORMAT_VERSION,
        };
        assert!(started_behind(&boot(Some(50)), Some(80)).is_some());
        assert!(started_behind(&boot(None), Some(1)).is_some());
        assert!(started_behind(&boot(Some(80)), Some(80)).is_none());
        assert!(started_behind(&boot(Some(90)), Some(80)).is_none());
        assert!(
            started_behind(&boot(Some(1)), None).is_none(),
            "nothing matched: nothing to compare"
        );
    }
}
