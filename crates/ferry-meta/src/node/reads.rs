//! Linearizable reads from any node, through the leader's read index.

use tokio::sync::oneshot;

use super::*;

/// The read-index rounds a node's linearizable reads share. Each round asks for the read
/// index once (the leader confirms its leadership with a quorum; a follower asks the leader);
/// a read waits for the first round that starts after it asked, and one round answers every
/// read that asked while the round before it was under way. Thousands of tasks starting at
/// once (a dead node's share) then cost a few quorum round trips, not one each.
#[derive(Default)]
pub(super) struct Rounds {
    state: Mutex<RoundsState>,
}

#[derive(Default)]
struct RoundsState {
    /// Whether a round is under way (its runner takes the waiting reads when it starts).
    running: bool,
    /// The reads waiting for the next round.
    waiting: Vec<oneshot::Sender<Result<ReadIndexReply, ProposalError>>>,
}

/// Ends the rounds if their runner stops other than by finding no read waiting (a panic, the
/// runtime shutting down): the reads still waiting are let go (they ask again), and the next
/// read starts a runner.
struct RunnerGone<'a>(Option<&'a Rounds>);

impl Drop for RunnerGone<'_> {
    fn drop(&mut self) {
        if let Some(rounds) = self.0 {
            let mut state = lock(&rounds.state);
            state.running = false;
            state.waiting.clear();
        }
    }
}

impl MetaNode {
    pub(super) fn ensure_leader(&self) -> Result<(), ProposalError> {
        match self.leader() {
            Some(leader) if leader == self.id() => Ok(()),
            leader => Err(ProposalError::NotLeader { leader }),
        }
    }

    /// The read index, if this node is the leader (it confirms leadership with a quorum).
    pub async fn read_index_local(&self) -> Result<ReadIndexReply, ProposalError> {
        let (read_log_id, _applied) = self
            .inner
            .raft
            .get_read_log_id()
            .await
            .map_err(check_leader_error)?;
        Ok(ReadIndexReply {
            index: read_log_id.map(|l| l.index),
        })
    }

    /// Wait until this node's applied state includes every write acknowledged before the call:
    /// on the leader by confirming leadership with a quorum, on a follower by asking the leader
    /// for its read index and waiting to apply that far.
    pub async fn linearizable(&self) -> Result<(), MetaError> {
        let started = Instant::now();
        let mut delay = Duration::from_millis(20);
        loop {
            let index = self.shared_read_index().await;
            let problem = match index {
                Ok(ReadIndexReply { index }) => {
                    let remaining = self.inner.deadline.saturating_sub(started.elapsed());
                    let waited = self
                        .inner
                        .raft
                        .wait(Some(remaining.max(Duration::from_millis(100))))
                        .applied_index_at_least(index, "linearizable read")
                        .await;
                    match waited {
                        Ok(_) => return Ok(()),
                        Err(e) => format!("waiting to apply up to {index:?}: {e}"),
                    }
                }
                Err(e) => e.to_string(),
            };
            if started.elapsed() >= self.inner.deadline {
                return Err(MetaError::Unavailable {
                    waited_ms: started.elapsed().as_millis(),
                    last: problem,
                });
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    /// The read index of the first round that starts after this call (see [`Rounds`]).
    async fn shared_read_index(&self) -> Result<ReadIndexReply, ProposalError> {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut state = lock(&self.inner.reads.state);
            state.waiting.push(answer);
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            let node = self.clone();
            tokio::spawn(async move { node.read_rounds().await });
        }
        answered.await.unwrap_or(Err(ProposalError::Unavailable(
            "the read-index round ended without an answer".into(),
        )))
    }

    /// Run rounds while reads wait for one.
    async fn read_rounds(&self) {
        let rounds = &self.inner.reads;
        let mut gone = RunnerGone(Some(rounds));
        loop {
            let waiting = {
                let mut state = lock(&rounds.state);
                if state.waiting.is_empty() {
                    state.running = false;
                    gone.0 = None;
                    return;
                }
                std::mem::take(&mut state.waiting)
            };
            let index = match self.leader() {
                Some(leader) if leader == self.id() => self.read_index_local().await,
                Some(leader) => self.remote_read_index(leader).await,
                None => Err(ProposalError::NotLeader { leader: None }),
            };
            for answer in waiting {
                let _ = answer.send(index.clone());
            }
        }
    }

    pub(super) async fn remote_read_index(
        &self,
        leader: NodeId,
    ) -> Result<ReadIndexReply, ProposalError> {
        let client = self.leader_client(leader)?;
        from_leader(&client, client.read_index(PEER_CALL_TIMEOUT).await)
    }

    /// Wait until this node has applied the log up to `index`, for at most `timeout`; whether
    /// it got there.
    pub async fn wait_applied(&self, index: Option<u64>, timeout: Duration) -> bool {
        self.inner
            .raft
            .wait(Some(timeout))
            .applied_index_at_least(index, "catching up")
            .await
            .is_ok()
    }
}
