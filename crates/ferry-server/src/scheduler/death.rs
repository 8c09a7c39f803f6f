//! Proof of death: the leader does not wait out a worker's full timeout when it can show that
//! the worker is gone. A worker whose heartbeats are overdue is probed with a fresh TCP
//! connection to the address it advertises; only a refused connection (nothing listens there:
//! the process is gone) is proof. A timeout, a reset or any other error proves nothing — a
//! partition causes those — and the timeout stands. A heartbeat heard after the probe voids it.
//!
//! (The other proof, a heartbeat from a new incarnation of the worker, needs nothing here: the
//! new process runs the units assigned to its node at once and releases those its predecessor
//! had been asked to give up.)

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_meta::{MetaNode, NodeId};
use tracing::{info, warn};

/// How long a probe's connection attempt may take; longer proves nothing.
const PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// After how many heartbeat intervals of silence a worker is probed.
const OVERDUE_INTERVALS: f64 = 1.5;

/// What a probe found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probed {
    /// The worker's last heartbeat when the probe started (`None`: not heard by this leader).
    pub heard: Option<Instant>,
    /// A fresh connection to its address was refused.
    pub refused: bool,
    /// When the probe ended.
    pub at: Instant,
}

/// Whether a worker is to be probed now: one this leader has not heard from since it took over
/// (the previous leader's own worker among them) at once, one it heard from once silent for
/// more than [`OVERDUE_INTERVALS`] heartbeat intervals; and not probed since its last
/// heartbeat less than `again` ago. (A refusal is proof whenever it comes: probing early costs
/// a connection, never a wrong verdict.)
pub fn to_probe(
    heard: Option<Instant>,
    leader_since: Instant,
    last_probe: Option<&Probed>,
    now: Instant,
    interval: Duration,
    again: Duration,
) -> bool {
    let overdue = match heard.filter(|h| *h >= leader_since) {
        Some(heard) => now.saturating_duration_since(heard) > interval.mul_f64(OVERDUE_INTERVALS),
        None => true,
    };
    let fresh =
        last_probe.is_some_and(|p| p.heard == heard && now.saturating_duration_since(p.at) < again);
    overdue && !fresh
}

/// Whether a probe proves the worker dead: refused, and no heartbeat heard since it started.
pub fn proves_dead(probe: &Probed, heard: Option<Instant>) -> bool {
    probe.refused && heard <= probe.heard
}

/// The probes of one leader's term.
pub struct Prober {
    /// The workers' heartbeat interval.
    interval: Duration,
    /// How soon a worker still silent is probed again.
    again: Duration,
    results: Arc<Mutex<HashMap<NodeId, Probed>>>,
    in_flight: Arc<Mutex<BTreeSet<NodeId>>>,
}

impl Prober {
    pub fn new(interval: Duration, again: Duration) -> Self {
        Prober {
            interval,
            again,
            results: Arc::default(),
            in_flight: Arc::default(),
        }
    }

    /// Start probes of the overdue workers (not `me`), and return those proven dead.
    pub fn dead(
        &self,
        node: &MetaNode,
        workers: &BTreeSet<NodeId>,
        heartbeats: &HashMap<NodeId, Instant>,
        leader_since: Instant,
        now: Instant,
    ) -> BTreeSet<NodeId> {
        let results = lock(&self.results).clone();
        let mut dead = BTreeSet::new();
        for worker in workers.iter().filter(|w| **w != node.id()) {
            let heard = heartbeats.get(worker).copied();
            let last = results.get(worker);
            if last.is_some_and(|p| proves_dead(p, heard)) {
                dead.insert(*worker);
                continue;
            }
            if !to_probe(heard, leader_since, last, now, self.interval, self.again) {
                continue;
            }
            let Some(member) = node.member(*worker) else {
                continue;
            };
            if !lock(&self.in_flight).insert(*worker) {
                continue;
            }
            let (results, in_flight, worker) =
                (self.results.clone(), self.in_flight.clone(), *worker);
            tokio::spawn(async move {
                let refused = refused(&member.raft_addr).await;
                if refused {
                    warn!(
                        worker,
                        addr = %member.raft_addr,
                        "proof of death: a fresh connection to the silent worker was refused; its units move now"
                    );
                }
                let probed = Probed {
                    heard,
                    refused,
                    at: Instant::now(),
                };
                lock(&results).insert(worker, probed);
                lock(&in_flight).remove(&worker);
            });
        }
        dead
    }
}

/// Whether a fresh connection to `addr` is refused. Anything else — accepted, timed out, reset,
/// unreachable, a name that does not resolve — is no proof.
async fn refused(addr: &str) -> bool {
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr)).await {
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => true,
        Ok(Err(e)) => {
            info!(addr, error = %e, "probe of a silent worker failed: no proof of death");
            false
        }
        _ => false,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(500);
    const AGAIN: Duration = Duration::from_millis(250);

    #[test]
    fn a_worker_is_probed_once_its_heartbeats_are_overdue() {
        let t0 = Instant::now();
        let heard = Some(t0 + Duration::from_secs(10));
        let at = |ms| t0 + Duration::from_secs(10) + Duration::from_millis(ms);
        assert!(!to_probe(heard, t0, None, at(700), INTERVAL, AGAIN));
        assert!(to_probe(heard, t0, None, at(800), INTERVAL, AGAIN));
        let probed = Probed {
            heard,
            refused: false,
            at: at(800),
        };
        assert!(!to_probe(
            heard,
            t0,
            Some(&probed),
            at(900),
            INTERVAL,
            AGAIN
        ));
        assert!(to_probe(
            heard,
            t0,
            Some(&probed),
            at(1100),
            INTERVAL,
            AGAIN
        ));
    }

    #[test]
    fn a_new_leader_probes_at_once_those_it_has_not_heard_from() {
        let t0 = Instant::now();
        let since = t0 + Duration::from_secs(60);
        let just = since + Duration::from_millis(10);
        assert!(to_probe(None, since, None, just, INTERVAL, AGAIN));
        assert!(
            to_probe(Some(t0), since, None, just, INTERVAL, AGAIN),
            "heard under an earlier term only"
        );
        assert!(!to_probe(Some(since), since, None, just, INTERVAL, AGAIN));
    }

    #[test]
    fn only_a_refusal_with_no_heartbeat_since_proves_death() {
        let t0 = Instant::now();
        let heard = Some(t0);
        let refused = Probed {
            heard,
            refused: true,
            at: t0 + Duration::from_secs(1),
        };
        assert!(proves_dead(&refused, heard));
        assert!(
            !proves_dead(&refused, Some(t0 + Duration::from_secs(2))),
            "heard from again: alive (a new incarnation, or the probe raced a restart)"
        );
        let reset = Probed {
            refused: false,
            ..refused
        };
        assert!(!proves_dead(&reset, heard), "no refusal, no proof");
    }

    #[tokio::test]
    async fn a_closed_port_refuses_and_a_listening_one_does_not() {
        let listening = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listening.local_addr().unwrap().to_string();
        let closed = {
            let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            gone.local_addr().unwrap().to_string()
        };
        assert!(refused(&closed).await);
        assert!(!refused(&open).await);
        assert!(!refused("no-such-host.invalid:1").await, "no proof");
    }
}
