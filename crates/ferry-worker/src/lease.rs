//! The ownership lease. A worker heartbeats the leader; it counts from the send time of its
//! last acknowledged heartbeat, and once that is older than half the worker timeout it stops its
//! tasks on its own — so that normally the old owner has stopped before the leader, after a
//! full timeout, hands its tasks to someone else. The generation check in `apply` is what makes
//! a late zombie harmless; the lease narrows the window.

use std::time::{Duration, Instant};

use ferry_meta::MetaNode;
use tokio::sync::watch;
use tracing::{info, warn};

/// Lease timing.
#[derive(Clone, Copy, Debug)]
pub struct LeaseSettings {
    pub heartbeat_interval: Duration,
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

/// The lease as units check it, synchronously, right before they commit: after a pause of the
/// process (SIGSTOP, a long stall) the clock has moved on and the lease is seen expired even
/// before the heartbeat loop runs again.
#[derive(Debug)]
pub struct Lease {
    settings: LeaseSettings,
    last_acked: std::sync::Mutex<Option<Instant>>,
}

impl Lease {
    pub fn new(settings: LeaseSettings) -> Self {
        Lease {
            settings,
            last_acked: std::sync::Mutex::new(None),
        }
    }

    pub fn held(&self) -> bool {
        let last = *self.last_acked.lock().unwrap_or_else(|p| p.into_inner());
        held(&self.settings, last, Instant::now())
    }

    fn acked(&self, sent: Instant) {
        *self.last_acked.lock().unwrap_or_else(|p| p.into_inner()) = Some(sent);
    }
}

/// Heartbeat the leader until `shutdown`; publish whether the lease is held.
pub async fn run(
    node: MetaNode,
    state: std::sync::Arc<Lease>,
    lease: watch::Sender<bool>,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = state.settings;
    loop {
        let sent = Instant::now();
        match node
            .send_heartbeat(settings.heartbeat_interval.max(Duration::from_millis(200)))
            .await
        {
            Ok(reply) if reply.acked => state.acked(sent),
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "heartbeat not delivered"),
        }
        let now_held = state.held();
        if *lease.borrow() != now_held {
            if now_held {
                info!("lease held: running assigned tasks");
            } else {
                warn!("lease lost (no acknowledged heartbeat): stopping tasks");
            }
            lease.send_replace(now_held);
        }
        let wait = settings.heartbeat_interval.saturating_sub(sent.elapsed());
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
