//! Linearizable reads from any node, through the leader's read index.

use super::*;

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
            let index = match self.leader() {
                Some(leader) if leader == self.id() => self.read_index_local().await,
                Some(leader) => self.remote_read_index(leader).await,
                None => Err(ProposalError::NotLeader { leader: None }),
            };
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
