//! The replicated state survives closing and reopening its sled storage: the snapshot holds the
//! applied state with its last applied log id and membership, written together.

use std::collections::BTreeMap;

use ferry_meta::state::{Command, Request};
use ferry_meta::store::{self, AppliedState};
use ferry_meta::types::{Entry, LogId};
use ferry_meta::{ConfigMap, FerryNode, TypeConfig};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, Membership, RaftSnapshotBuilder};

/// Open the storage in `dir`. A handle dropped just before may still hold sled's lock for a
/// moment (its flusher thread lets go after the drop): asked again until the lock is free, for
/// at most ten seconds.
fn open(dir: &std::path::Path) -> store::Opened {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match store::open(dir) {
            Ok(opened) => return opened,
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("open {}: {e}", dir.display()),
        }
    }
}

fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload,
    }
}

#[tokio::test]
async fn a_snapshot_restores_state_and_last_applied_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let members: BTreeMap<u64, FerryNode> = [(1, FerryNode::default())].into();
    let put = Request::new(
        "r1",
        Command::PutConnector {
            name: "a".into(),
            config: [("topics", "t")].into_iter().collect::<ConfigMap>(),
            create: true,
            expected_version: None,
            initial: None,
        },
    );
    let built_after = std::time::SystemTime::now();
    let (before, facts): (AppliedState, _) = {
        let mut sm = open(dir.path()).sm;
        assert_eq!(sm.reader().snapshot(), None, "no snapshot yet");
        let answers = sm
            .apply(vec![
                entry(
                    1,
                    EntryPayload::Membership(Membership::new(vec![[1].into()], members)),
                ),
                entry(2, EntryPayload::Normal(put.clone())),
            ])
            .await
            .expect("apply");
        assert_eq!(answers.len(), 2);
        let mut builder = sm.get_snapshot_builder().await;
        builder.build_snapshot().await.expect("snapshot");
        let applied = sm.reader().read().clone();
        let facts = sm.reader().snapshot().expect("the snapshot built is known");
        (applied, facts)
    };
    // What the metrics say of it: the state's size, and when it was stored.
    assert!(facts.bytes > 100, "{facts:?}");
    assert!(facts
        .stored
        .is_some_and(|t| t >= built_after - std::time::Duration::from_secs(1)));
    let store::Opened {
        mut log, mut sm, ..
    } = open(dir.path());
    let (last, membership) = sm.applied_state().await.expect("applied state");
    assert_eq!(last, before.last_applied);
    assert_eq!(membership, before.membership);
    assert_eq!(sm.reader().read().state, before.state);
    assert_eq!(sm.reader().read().state.connectors["a"].version, 1);
    // A reopened node knows its snapshot as it was stored (to the millisecond).
    let reopened = sm.reader().snapshot().expect("known after reopening");
    assert_eq!(reopened.bytes, facts.bytes);
    let gap = |a: std::time::SystemTime, b: std::time::SystemTime| {
        a.duration_since(b)
            .or_else(|_| b.duration_since(a))
            .unwrap_or_default()
    };
    assert!(reopened
        .stored
        .zip(facts.stored)
        .is_some_and(|(a, b)| gap(a, b) < std::time::Duration::from_millis(2)));
    // The state's request-id memory survives too: a retry is still answered, not re-applied.
    let mut state = sm.reader().read().state.clone();
    assert!(state.apply(&put).is_ok());
    assert_eq!(state.connectors["a"].version, 1);
    // The log is empty (nothing was appended), and reports so.
    let log_state = log.get_log_state().await.expect("log state");
    assert_eq!(log_state.last_log_id, None);
}

#[test]
fn the_incarnation_is_created_with_the_database_and_kept_across_opens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = open(dir.path()).incarnation;
    let again = open(dir.path()).incarnation;
    assert_eq!(first, again, "the same data keeps its incarnation");
    let wiped = tempfile::tempdir().expect("tempdir");
    let other = open(wiped.path()).incarnation;
    assert_ne!(first, other, "a new data directory is a new incarnation");
    assert!(!first.is_empty());
}

#[tokio::test]
async fn a_node_that_stopped_as_leader_starts_as_a_follower_of_its_term() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut log = open(dir.path()).log;
    let mut led = openraft::Vote::new(3, 1);
    led.commit();
    log.save_vote(&led).await.expect("save");
    assert_eq!(
        store::resume_as_follower(&mut log, 1)
            .await
            .expect("resume"),
        None
    );
    let vote = log.read_vote().await.expect("read").expect("a vote");
    assert_eq!(
        vote,
        openraft::Vote::new(3, 1),
        "same term, no longer committed"
    );
    // Another node's committed vote (this node followed it) is kept as it is.
    let mut followed = openraft::Vote::new(4, 2);
    followed.commit();
    log.save_vote(&followed).await.expect("save");
    store::resume_as_follower(&mut log, 1)
        .await
        .expect("resume");
    assert_eq!(log.read_vote().await.expect("read"), Some(followed));
}
