//! A server-wide cap on concurrent restart runs.
//!
//! A run holds every list page of three kinds in memory while it patches, so memory grows with
//! concurrency × namespace size. The server admits at most `KRYPTON_MAX_CONCURRENT_RESTARTS`
//! runs at once (default [`MAX_CONCURRENT_RUNS`]); a request beyond that answers 429 with
//! `Retry-After` after authentication, the restart flag and path validation — before any
//! Kubernetes call — and is counted (`rollsafe_restart_shed_total`). A permit is taken before
//! the namespace-scope gate and held until the run's result record is written, so the gates'
//! reads count too. Nothing queues: a client that is told to retry holds no server memory.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default for the most restart runs in progress at once, server-wide.
pub const MAX_CONCURRENT_RUNS: usize = 64;
/// The `Retry-After` of a shed request, in seconds.
pub const RETRY_AFTER_SECONDS: u32 = 1;

/// Admits up to a fixed number of runs at once.
#[derive(Debug, Clone)]
pub struct RunLimiter {
    permits: Arc<Semaphore>,
    limit: usize,
}

/// A run's admission; dropping it frees the slot.
#[derive(Debug)]
pub struct RunPermit(
    #[expect(dead_code, reason = "held for its drop, which frees the slot")] OwnedSemaphorePermit,
);

impl RunLimiter {
    /// At most `limit` runs at once (at least one).
    pub fn new(limit: usize) -> Self {
        let limit = limit.max(1);
        Self {
            permits: Arc::new(Semaphore::new(limit)),
            limit,
        }
    }

    /// A slot now, or `None` when every slot is taken. Never waits.
    pub fn try_admit(&self) -> Option<RunPermit> {
        self.permits.clone().try_acquire_owned().ok().map(RunPermit)
    }

    /// The limit.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Runs in progress.
    pub fn in_use(&self) -> usize {
        self.limit - self.permits.available_permits()
    }
}

impl Default for RunLimiter {
    fn default() -> Self {
        Self::new(MAX_CONCURRENT_RUNS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_and_frees_on_drop() {
        let limiter = RunLimiter::new(2);
        let a = limiter.try_admit().unwrap();
        let _b = limiter.try_admit().unwrap();
        assert!(limiter.try_admit().is_none());
        assert_eq!(limiter.in_use(), 2);
        drop(a);
        assert!(limiter.try_admit().is_some());
        assert_eq!(RunLimiter::new(0).limit(), 1);
    }
}
