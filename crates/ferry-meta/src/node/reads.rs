//! Linearizable reads from any node, through the leader's read index.

use tokio::sync::oneshot;

use super::*;

/// What a read-index round answers.
type Answer = Result<ReadIndexReply, ProposalError>;

/// The read-index rounds a node's linearizable reads share. Each round asks for the read
/// index once (the leader confirms its leadership with a quorum; a follower asks the leader);
/// a read waits for the first round that starts after it asked, and one round answers every
/// read that asked while the round before it was under way. Thousands of tasks starting at
/// once (a dead node's share) then cost a few quorum round trips, not one each. A read is never
/// answered by a round that started before it asked: that round's index may miss a write
/// acknowledged meanwhile.
#[derive(Default)]
pub(super) struct Rounds {
    state: Arc<Mutex<RoundsState>>,
}

#[derive(Default)]
struct RoundsState {
    /// Whether a round is under way (its runner takes the waiting reads when it starts).
    running: bool,
    /// The reads waiting for the next round.
    waiting: Vec<oneshot::Sender<Answer>>,
}

impl Rounds {
    /// The answer of the first round that starts after this call; `ask` runs a round (when no
    /// runner is under way, this call starts one with it).
    pub(super) async fn join<F, Fut>(&self, ask: F) -> Answer
    where
        F: Fn() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Answer> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let start = {
            let mut state = lock(&self.state);
            state.waiting.push(answer);
            !std::mem::replace(&mut state.running, true)
        };
        if start {
            tokio::spawn(run_rounds(self.state.clone(), ask));
        }
        answered.await.unwrap_or(Err(ProposalError::Unavailable(
            "the read-index round ended without an answer".into(),
        )))
    }
}

/// Run rounds while reads wait for one.
async fn run_rounds<F, Fut>(rounds: Arc<Mutex<RoundsState>>, ask: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let mut gone = RunnerGone(Some(&rounds));
    loop {
        let waiting = {
            let mut state = lock(&rounds);
            if state.waiting.is_empty() {
                state.running = false;
                gone.0 = None;
                return;
            }
            std::mem::take(&mut state.waiting)
        };
        let index = ask().await;
        for answer in waiting {
            let _ = answer.send(index.clone());
        }
    }
}

/// Ends the rounds if their runner stops other than by finding no read waiting (a panic, the
/// runtime shutting down): the reads still waiting are let go (they ask again), and the next
/// read starts a runner.
struct RunnerGone<'a>(Option<&'a Mutex<RoundsState>>);

impl Drop for RunnerGone<'_> {
    fn drop(&mut self) {
        if let Some(rounds) = self.0 {
            let mut state = lock(rounds);
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
    async fn shared_read_index(&self) -> Answer {
        let node = self.clone();
        self.inner
            .reads
            .join(move || {
                let node = node.clone();
                async move { node.read_index_once().await }
            })
            .await
    }

    /// The read index, asked once: of this node if it leads, else of the leader.
    async fn read_index_once(&self) -> Answer {
        match self.leader() {
            Some(leader) if leader == self.id() => self.read_index_local().await,
            Some(leader) => self.remote_read_index(leader).await,
            None => Err(ProposalError::NotLeader { leader: None }),
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Yield to the runtime's other tasks until `done` holds (failing after ten seconds).
    async fn until(what: &str, mut done: impl FnMut() -> bool) {
        let waited = tokio::time::timeout(Duration::from_secs(10), async {
            while !done() {
                tokio::task::yield_now().await;
            }
        });
        assert!(waited.await.is_ok(), "never saw {what}");
    }

    #[tokio::test]
    async fn a_read_is_answered_by_the_first_round_that_starts_after_it_asked() {
        let rounds = Arc::new(Rounds::default());
        let asked = Arc::new(AtomicU64::new(0));
        // Each round counts itself, then waits for the test's permit, and answers its number.
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let ask = {
            let (asked, permits) = (asked.clone(), permits.clone());
            move || {
                let (asked, permits) = (asked.clone(), permits.clone());
                async move {
                    let round = asked.fetch_add(1, Ordering::SeqCst) + 1;
                    permits.acquire().await.expect("open").forget();
                    Ok(ReadIndexReply { index: Some(round) })
                }
            }
        };
        let read = |rounds: &Arc<Rounds>| {
            let (rounds, ask) = (rounds.clone(), ask.clone());
            tokio::spawn(async move { rounds.join(ask).await })
        };
        let first = read(&rounds);
        until("round 1 asked", || asked.load(Ordering::SeqCst) == 1).await;
        // Two reads ask while round 1 is under way: round 1 may miss what was acknowledged
        // before they asked, so they wait for round 2, which answers both.
        let (second, third) = (read(&rounds), read(&rounds));
        until("two reads waiting", || {
            lock(&rounds.state).waiting.len() == 2
        })
        .await;
        permits.add_permits(1);
        assert_eq!(first.await.expect("read").map(|r| r.index), Ok(Some(1)));
        until("round 2 asked", || asked.load(Ordering::SeqCst) == 2).await;
        permits.add_permits(1);
        assert_eq!(second.await.expect("read").map(|r| r.index), Ok(Some(2)));
        assert_eq!(third.await.expect("read").map(|r| r.index), Ok(Some(2)));
        assert_eq!(asked.load(Ordering::SeqCst), 2, "one round for both");
        // With nobody waiting the runner stopped; the next read starts a round of its own.
        until("the runner stopped", || !lock(&rounds.state).running).await;
        permits.add_permits(1);
        assert_eq!(
            read(&rounds).await.expect("read").map(|r| r.index),
            Ok(Some(3))
        );
    }
}
