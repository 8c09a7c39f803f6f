//! The one retry layer for task methods (docs/design.md#errors-one-retry-layer-nothing-dropped): a failure classified retriable where it
//! arose is retried with exponential backoff within `errors.retry.timeout` (a few quick
//! retries when it is 0); any other failure, or one that outlasts the timeout, fails the task.
//! A unit asked to stop stops waiting.
//!
//! ```ignore
//! let mut retry = Retries::new(&errors, "put", metrics.retries.clone());
//! loop {
//!     match task.put(records.clone()).await {
//!         Ok(()) => break,
//!         Err(e) => retry.after(e, &mut stop, &unit).await?,
//!     }
//! }
//! ```

use std::time::Instant;

use ferry_connect::error_handling::ErrorSettings;
use ferry_connect::ConnectError;
use tokio::sync::watch;
use tracing::warn;

use crate::metrics::Count;
use crate::unit::{stopped, Failure};

pub struct Retries<'a> {
    errors: &'a ErrorSettings,
    what: &'static str,
    started: Instant,
    attempt: u32,
    /// The task's count of retries (Kafka Connect's `total-retries`).
    counted: Count,
}

impl<'a> Retries<'a> {
    /// Retries of one operation; `what` names it in logs and in the final error; each retry
    /// is counted in `counted`.
    pub fn new(errors: &'a ErrorSettings, what: &'static str, counted: Count) -> Self {
        Retries {
            errors,
            what,
            started: Instant::now(),
            attempt: 0,
            counted,
        }
    }

    /// The operation failed with `e`: `Ok` once it is time to try again; the failure itself
    /// if it is not retriable or has outlasted the timeout; `Failure::Stopped` if the unit is
    /// stopped meanwhile.
    pub async fn after(
        &mut self,
        e: ConnectError,
        stop: &mut watch::Receiver<bool>,
        unit: &str,
    ) -> Result<(), Failure> {
        if !e.is_retriable() {
            return Err(e.into());
        }
        self.attempt += 1;
        let (what, attempt) = (self.what, self.attempt);
        let Some(delay) = self.errors.task_delay(attempt, self.started.elapsed()) else {
            return Err(ConnectError {
                message: format!(
                    "{what} failed {attempt} times in {} ms (errors.retry.timeout): {}",
                    self.started.elapsed().as_millis(),
                    e.message
                ),
                ..e
            }
            .into());
        };
        self.counted.inc();
        warn!(unit, what, attempt, delay_ms = delay.as_millis() as u64, error = %e, "retriable failure: retrying");
        tokio::select! {
            _ = tokio::time::sleep(delay) => Ok(()),
            _ = stopped(stop) => Err(Failure::Stopped),
        }
    }
}
