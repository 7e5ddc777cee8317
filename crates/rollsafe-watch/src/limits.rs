//! The two brakes on rolling: a global token bucket (rolls per minute across the cluster, with
//! a burst) and the per-workload flap stop (more than N rolls within M halts the workload).

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use tokio::time::Instant;

use crate::cache::WorkloadKey;

/// A token bucket: `burst` tokens, refilled at `per_minute` tokens a minute.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    per_minute: u32,
    burst: u32,
    tokens: f64,
    refilled: Instant,
}

impl TokenBucket {
    /// A full bucket. `per_minute` 0 means unlimited.
    pub fn new(per_minute: u32, burst: u32, now: Instant) -> Self {
        Self {
            per_minute,
            burst: burst.max(1),
            tokens: f64::from(burst.max(1)),
            refilled: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens =
            (self.tokens + elapsed * f64::from(self.per_minute) / 60.0).min(f64::from(self.burst));
        self.refilled = now;
    }

    /// How long until a token is available (zero: one is), without taking it.
    pub fn wait(&mut self, now: Instant) -> Duration {
        if self.per_minute == 0 {
            return Duration::ZERO;
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64((1.0 - self.tokens) * 60.0 / f64::from(self.per_minute))
    }

    /// Takes a token, or says how long until one is available.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.per_minute == 0 {
            return Ok(());
        }
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        let missing = 1.0 - self.tokens;
        Err(Duration::from_secs_f64(
            missing * 60.0 / f64::from(self.per_minute),
        ))
    }
}

/// The flap stop: a workload rolled `limit` times within `window` is not rolled again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlapLimit {
    /// Rolls allowed within the window (0: no limit).
    pub rolls: u32,
    /// The window.
    pub window: Duration,
}

impl Default for FlapLimit {
    fn default() -> Self {
        Self {
            rolls: 5,
            window: Duration::from_secs(600),
        }
    }
}

impl FlapLimit {
    /// `5/10m`: rolls, a slash, a window in the one duration format (`rollsafe_core::duration`).
    /// `0` disables the stop.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        const EXPECTED: &str = "expected <rolls>/<window>, e.g. 5/10m, or 0";
        let text = text.trim();
        if text == "0" {
            return Ok(Self {
                rolls: 0,
                window: Duration::ZERO,
            });
        }
        let (rolls, window) = text.split_once('/').ok_or(EXPECTED)?;
        let rolls: u32 = rolls.trim().parse().map_err(|_| EXPECTED)?;
        let window = rollsafe_core::duration::parse(window).map_err(|_| EXPECTED)?;
        if rolls == 0 || window.is_zero() {
            return Err(EXPECTED);
        }
        Ok(Self { rolls, window })
    }
}

/// Recent roll times per workload (in memory; the halt itself is recorded on the workload).
#[derive(Debug, Default)]
pub struct FlapGuard {
    limit: FlapLimit,
    rolls: HashMap<WorkloadKey, VecDeque<Instant>>,
}

impl FlapGuard {
    /// A guard with this limit.
    pub fn new(limit: FlapLimit) -> Self {
        Self {
            limit,
            rolls: HashMap::new(),
        }
    }

    /// Whether one more roll now would exceed the limit.
    pub fn would_flap(&mut self, key: &WorkloadKey, now: Instant) -> bool {
        if self.limit.rolls == 0 {
            return false;
        }
        let Some(times) = self.rolls.get_mut(key) else {
            return false;
        };
        while times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= self.limit.window)
        {
            times.pop_front();
        }
        times.len() >= self.limit.rolls as usize
    }

    /// Records a roll.
    pub fn rolled(&mut self, key: &WorkloadKey, now: Instant) {
        if self.limit.rolls > 0 {
            self.rolls.entry(key.clone()).or_default().push_back(now);
        }
    }

    /// Forgets a workload's history (it was halted, or deleted).
    pub fn forget(&mut self, key: &WorkloadKey) {
        self.rolls.remove(key);
    }

    /// The configured limit.
    pub fn limit(&self) -> FlapLimit {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::workload::WatchedKind;

    fn key() -> WorkloadKey {
        WorkloadKey {
            kind: WatchedKind::Deployment,
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_a_burst_then_the_rate() {
        let mut bucket = TokenBucket::new(60, 2, Instant::now());
        assert!(bucket.take(Instant::now()).is_ok());
        assert!(bucket.take(Instant::now()).is_ok());
        let wait = bucket.take(Instant::now()).unwrap_err();
        assert_eq!(wait, Duration::from_secs(1));
        tokio::time::advance(wait).await;
        assert!(bucket.take(Instant::now()).is_ok());
        assert_eq!(bucket.wait(Instant::now()), Duration::from_secs(1));
        assert!(bucket.take(Instant::now()).is_err());
        tokio::time::advance(Duration::from_millis(400)).await;
        assert_eq!(bucket.wait(Instant::now()), Duration::from_millis(600));
        let mut unlimited = TokenBucket::new(0, 1, Instant::now());
        for _ in 0..100 {
            assert!(unlimited.take(Instant::now()).is_ok());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn flap_stop_counts_rolls_in_the_window() {
        let mut guard = FlapGuard::new(FlapLimit {
            rolls: 3,
            window: Duration::from_secs(60),
        });
        for _ in 0..3 {
            assert!(!guard.would_flap(&key(), Instant::now()));
            guard.rolled(&key(), Instant::now());
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        assert!(guard.would_flap(&key(), Instant::now()));
        // The first roll leaves the window.
        tokio::time::advance(Duration::from_secs(31)).await;
        assert!(!guard.would_flap(&key(), Instant::now()));
        guard.forget(&key());
        assert!(!guard.would_flap(&key(), Instant::now()));
    }

    #[test]
    fn flap_limit_parsing() {
        assert_eq!(
            FlapLimit::parse("5/10m"),
            Ok(FlapLimit {
                rolls: 5,
                window: Duration::from_secs(600)
            })
        );
        assert_eq!(
            FlapLimit::parse("3/90s").map(|l| l.window),
            Ok(Duration::from_secs(90))
        );
        assert_eq!(FlapLimit::parse("0").map(|l| l.rolls), Ok(0));
        for bad in [
            "", "5", "5/", "/10m", "0/10m", "5/0m", "5/10x", "x/1m", "5/1.5m",
        ] {
            assert!(FlapLimit::parse(bad).is_err(), "{bad}");
        }
    }
}
