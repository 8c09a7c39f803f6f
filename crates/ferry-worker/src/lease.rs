//! The ownership lease. A worker heartbeats the leader; it counts from the send time of its
//! last acknowledged heartbeat, and once that is older than half the worker timeout it freezes its
//! tasks on its own (no writes, no commits; they resume when it holds a lease again) — so that
//! normally the old owner has gone quiet before the leader, after a full timeout, hands its
//! tasks to someone else. The generation check in `apply` is what makes a late zombie harmless;
//! the lease narrows the window. A stopping worker says so in its heartbeats ([`Lease::leave`]).

use std::time::{Duration, Instant};

use ferry_meta::MetaNode;
use tokio::sync::watch;
use tracing::{debug, info, warn};

/// Lease timing.
#[derive(Clone, Copy, Debug)]
pub struct LeaseSettings {
    /// How often the worker heartbeats the leader.
    pub heartbeat_interval: Duration,
    /// How long after its last acknowledged heartbeat the leader counts a worker dead; the lease is valid for less than this.
    pub worker_timeout: Duration,
    /// Test-only: never expire the lease, so that tests can prove the fence alone holds.
    pub disabled: bool,
}

impl LeaseSettings {
    /// How long an acknowledged heartbeat keeps the lease.
    pub fn validity(&self) -> Duration {
        self.worker_timeout / 2
    }
}

/// Whether the lease is held at `now`, given the send time of the last acknowledged heartbeat.
pub fn held(settings: &LeaseSettings, last_acked_send: Option<Instant>, now: Instant) -> bool {
    settings.disabled
        || last_acked_send
            .is_some_and(|sent| now.saturating_duration_since(sent) < settings.validity())
}

/// The lease's history: the send time of the last acknowledged heartbeat, and the epoch — how
/// many times the lease was taken afresh after having lapsed. A unit belongs to the epoch it was
/// started in; once the lease lapses, even if the next heartbeat is acknowledged before the unit
/// notices (a process thawed after SIGSTOP heartbeats as soon as it runs), that unit may never
/// commit again.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LeaseState {
    /// When the last heartbeat the leader acknowledged was sent.
    pub last_acked: Option<Instant>,
    /// The epoch of the lease held, counted up each time it is taken afresh.
    pub epoch: u64,
}

impl LeaseState {
    /// Whether an acknowledgement of a heartbeat sent at `sent` starts a new epoch: the lease
    /// had lapsed by then (or was never held).
    pub fn starts_epoch(&self, settings: &LeaseSettings, sent: Instant) -> bool {
        !held(settings, self.last_acked, sent)
    }

    /// Record the acknowledgement of a heartbeat sent at `sent`.
    pub fn acked(&mut self, settings: &LeaseSettings, sent: Instant) {
        if self.starts_epoch(settings, sent) {
            self.epoch += 1;
        }
        if self.last_acked.is_none_or(|last| sent > last) {
            self.last_acked = Some(sent);
        }
    }

    /// The epoch of the lease held at `now`, if it is held.
    pub fn current(&self, settings: &LeaseSettings, now: Instant) -> Option<u64> {
        held(settings, self.last_acked, now).then_some(self.epoch)
    }

    /// Whether a unit started in `epoch` may still commit at `now`.
    pub fn held_in(&self, settings: &LeaseSettings, epoch: u64, now: Instant) -> bool {
        settings.disabled || self.current(settings, now) == Some(epoch)
    }
}

/// The lease as units check it, synchronously, right before they commit: after a pause of the
/// process (SIGSTOP, a long stall) the clock has moved on and the lease is seen expired even
/// before the heartbeat loop runs again — and once the loop has renewed it, it is a new epoch.
#[derive(Debug)]
pub struct Lease {
    settings: LeaseSettings,
    state: std::sync::Mutex<LeaseState>,
    /// The node is stopping: heartbeats say so, and the leader gives it nothing new.
    leaving: watch::Sender<bool>,
    /// The leader acknowledged a heartbeat that said the node is leaving.
    told: watch::Sender<bool>,
}

impl Lease {
    /// A lease not held yet.
    pub fn new(settings: LeaseSettings) -> Self {
        Lease {
            settings,
            state: std::sync::Mutex::new(LeaseState::default()),
            leaving: watch::channel(false).0,
            told: watch::channel(false).0,
        }
    }

    /// Tell the leader, from the next heartbeat on (sent at once), that this node is stopping;
    /// wait at most `timeout` for the leader to acknowledge it.
    pub async fn leave(&self, timeout: Duration) -> bool {
        self.leaving.send_replace(true);
        let mut told = self.told.subscribe();
        tokio::time::timeout(timeout, told.wait_for(|told| *told))
            .await
            .is_ok_and(|told| told.is_ok())
    }

    fn state(&self) -> LeaseState {
        *self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The epoch of the lease now held, if it is.
    pub fn current(&self) -> Option<u64> {
        self.state().current(&self.settings, Instant::now())
    }

    /// Whether a unit started in `epoch` may commit now.
    pub fn held_in(&self, epoch: u64) -> bool {
        self.state().held_in(&self.settings, epoch, Instant::now())
    }

    /// Whether the lease is held now, its epoch, and how long ago the last heartbeat the
    /// leader acknowledged was sent (none before the first).
    pub fn seen(&self) -> (bool, u64, Option<Duration>) {
        let state = self.state();
        let now = Instant::now();
        (
            state.current(&self.settings, now).is_some(),
            state.epoch,
            state
                .last_acked
                .map(|sent| now.saturating_duration_since(sent)),
        )
    }

    fn starts_epoch(&self, sent: Instant) -> bool {
        self.state().starts_epoch(&self.settings, sent)
    }

    fn acked(&self, sent: Instant) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .acked(&self.settings, sent);
    }
}

/// Ferry's series of this worker's lease, read at each scrape: `ferry_worker_lease_held`,
/// `…_epoch` and `…_ack_age_ms`.
#[derive(Debug)]
pub struct LeaseSeries(pub std::sync::Arc<Lease>);

impl prometheus_client::collector::Collector for LeaseSeries {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let (held, epoch, age) = self.0.seen();
        let age = age.map_or(-1, |a| i64::try_from(a.as_millis()).unwrap_or(i64::MAX));
        crate::metrics::encode_gauges(
            &mut encoder,
            &[
                ("ferry_worker_lease_held", "1 while this worker holds its lease (it may commit).", i64::from(held)),
                ("ferry_worker_lease_epoch", "How many times this worker took its lease afresh.", i64::try_from(epoch).unwrap_or(i64::MAX)),
                ("ferry_worker_lease_ack_age_ms", "Milliseconds since the last heartbeat the leader acknowledged was sent (-1: none yet).", age),
            ],
        )
    }
}

/// Heartbeat the leader until `shutdown` (after the runtime has stopped its units: their final
/// commits need the lease); publish the epoch of the lease while it is held.
#[tracing::instrument(name = "lease", skip_all, fields(node = node.id()))]
pub async fn run(
    node: MetaNode,
    state: std::sync::Arc<Lease>,
    lease: watch::Sender<Option<u64>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = state.settings;
    let mut leaving = state.leaving.subscribe();
    loop {
        let sent = Instant::now();
        let left = *leaving.borrow_and_update();
        match node
            .send_heartbeat(
                settings.heartbeat_interval.max(Duration::from_millis(200)),
                left,
            )
            .await
        {
            Ok(reply) if reply.acked => {
                if left {
                    state.told.send_replace(true);
                }
                // Taking the lease afresh: first apply as far as the leader had, so that the
                // tasks started under it are the ones the leader assigns now, not the ones this
                // worker ran before it went away.
                if !state.starts_epoch(sent)
                    || node.wait_applied(reply.applied, settings.validity()).await
                {
                    state.acked(sent);
                } else {
                    debug!(leader_applied = ?reply.applied, "not caught up with the leader yet: lease not taken");
                }
            }
            Ok(_) => {}
            Err(e) => debug!(error = %e, "heartbeat not delivered"),
        }
        let now_held = state.current();
        if *lease.borrow() != now_held {
            match now_held {
                Some(epoch) => info!(epoch, "lease held: running assigned tasks"),
                None => warn!("lease lost (no acknowledged heartbeat): units frozen"),
            }
            lease.send_replace(now_held);
        }
        let wait = settings.heartbeat_interval.saturating_sub(sent.elapsed());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = leaving.changed() => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_series_say_whether_it_is_held_its_epoch_and_the_last_ack() {
        let lease = std::sync::Arc::new(Lease::new(LeaseSettings {
            heartbeat_interval: Duration::from_millis(500),
            worker_timeout: Duration::from_secs(60),
            disabled: false,
        }));
        let text = || {
            let mut registry = prometheus_client::registry::Registry::default();
            registry.register_collector(Box::new(LeaseSeries(lease.clone())));
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
            text
        };
        let before = text();
        for line in [
            "ferry_worker_lease_held 0",
            "ferry_worker_lease_epoch 0",
            "ferry_worker_lease_ack_age_ms -1",
        ] {
            assert!(
                before.lines().any(|l| l == line),
                "no {line:?} in\n{before}"
            );
        }
        lease.acked(Instant::now());
        let after = text();
        for line in ["ferry_worker_lease_held 1", "ferry_worker_lease_epoch 1"] {
            assert!(after.lines().any(|l| l == line), "no {line:?} in\n{after}");
        }
        assert!(
            !after.contains("ferry_worker_lease_ack_age_ms -1"),
            "{after}"
        );
    }

    #[test]
    fn the_lease_lasts_half_the_timeout_from_the_send_time() {
        let s = LeaseSettings {
            heartbeat_interval: Duration::from_millis(500),
            worker_timeout: Duration::from_secs(4),
            disabled: false,
        };
        let t = Instant::now();
        assert!(!held(&s, None, t));
        assert!(held(&s, Some(t), t + Duration::from_millis(1999)));
        assert!(!held(&s, Some(t), t + Duration::from_secs(2)));
        let off = LeaseSettings {
            disabled: true,
            ..s
        };
        assert!(held(&off, None, t));
    }

    #[test]
    fn a_lease_taken_again_after_it_lapsed_is_a_new_epoch() {
        let s = LeaseSettings {
            heartbeat_interval: Duration::from_millis(500),
            worker_timeout: Duration::from_secs(4),
            disabled: false,
        };
        let t = Instant::now();
        let at = |ms| t + Duration::from_millis(ms);
        let mut lease = LeaseState::default();
        assert_eq!(lease.current(&s, t), None);
        lease.acked(&s, t);
        assert_eq!(lease.current(&s, t), Some(1));
        // Renewed in time: the same epoch, and units of epoch 1 keep committing.
        lease.acked(&s, at(1500));
        assert_eq!(lease.current(&s, at(3000)), Some(1));
        assert!(lease.held_in(&s, 1, at(3000)));
        // A pause: nothing acknowledged from 1.5 s to 6 s. The first heartbeat after it is
        // acknowledged at once, but it starts epoch 2: units of epoch 1 may not commit.
        assert!(!lease.held_in(&s, 1, at(6000)));
        assert!(lease.starts_epoch(&s, at(6000)));
        lease.acked(&s, at(6000));
        assert_eq!(lease.current(&s, at(6100)), Some(2));
        assert!(!lease.held_in(&s, 1, at(6100)));
        assert!(lease.held_in(&s, 2, at(6100)));
        // A late acknowledgement of an older heartbeat does not move the lease back.
        lease.acked(&s, at(5000));
        assert_eq!(lease.last_acked, Some(at(6000)));
        assert_eq!(lease.epoch, 2);
    }

    #[test]
    fn a_disabled_lease_never_changes_epoch() {
        let s = LeaseSettings {
            heartbeat_interval: Duration::from_millis(500),
            worker_timeout: Duration::from_secs(4),
            disabled: true,
        };
        let t = Instant::now();
        let mut lease = LeaseState::default();
        assert!(lease.held_in(&s, 0, t));
        lease.acked(&s, t + Duration::from_secs(60));
        assert_eq!(lease.current(&s, t), Some(0));
        assert!(lease.held_in(&s, 0, t + Duration::from_secs(600)));
    }
}
