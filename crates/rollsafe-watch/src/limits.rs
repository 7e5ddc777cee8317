//! The two brakes on rolling: a global token bucket (rolls per minute across the cluster, with
//! a burst) and the per-workload flap stop (more than N rolls within M halts the workload).
//!
//! Both live in the leader's memory, and both are rebuilt from the workloads after a restart or
//! a failover: every roll writes the workload's recent roll times ([`crate::roll_times::RollTimes`],
//! `rollsafe.dev/rolled-at`) in its own patch. A new leader seeds the bucket from the roll
//! times of every workload ([`TokenBucket::seed`]) and the flap stop from each workload's own
//! ([`FlapGuard::seed`]), so a failover neither refills the bucket nor empties a history.

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

    /// How long an empty bucket takes to fill.
    pub fn refill_time(&self) -> Duration {
        if self.per_minute == 0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(f64::from(self.burst) * 60.0 / f64::from(self.per_minute))
    }

    /// Rebuilds the bucket from the rolls made (by any replica) at `rolls`, for a process that
    /// has just started deciding at `now`: as if it had been empty one refill time ago and had
    /// paid for each roll since. An underestimate of the tokens the last leader had left, never
    /// an overestimate: a failover cannot raise the roll rate.
    pub fn seed(&mut self, rolls: impl IntoIterator<Item = Instant>, now: Instant) {
        if self.per_minute == 0 {
            return;
        }
        let start = now.checked_sub(self.refill_time()).unwrap_or(now);
        let mut rolls: Vec<Instant> = rolls
            .into_iter()
            .filter(|at| *at >= start && *at <= now)
            .collect();
        rolls.sort_unstable();
        self.tokens = 0.0;
        self.refilled = start;
        for at in rolls {
            self.refill(at);
            self.tokens = (self.tokens - 1.0).max(0.0);
        }
        self.refill(now);
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

    /// Takes the roll times recorded on the workload when they say more than this process
    /// remembers (rolls made by an earlier leader, or before a restart).
    pub fn seed(&mut self, key: &WorkloadKey, rolls: impl IntoIterator<Item = Instant>) {
        if self.limit.rolls == 0 {
            return;
        }
        let recorded: VecDeque<Instant> = rolls.into_iter().collect();
        let known = self.rolls.get(key).map_or(0, VecDeque::len);
        if recorded.len() > known {
            self.rolls.insert(key.clone(), recorded);
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
    use crate::roll_times::{ROLL_TIMES_KEPT, RollTimes};
    use jiff::Timestamp;
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

    #[test]
    fn roll_times_round_trip_and_keep_only_what_the_brakes_read() {
        let now: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        let times = RollTimes::parse("2026-12-04T09:50:00Z, junk,2026-12-04T09:00:00Z");
        assert_eq!(times.seconds().len(), 2, "the junk entry is skipped");
        assert_eq!(
            times.after_roll(now, Duration::from_secs(900)),
            "2026-12-04T09:50:00Z,2026-12-04T10:00:00Z",
            "09:00 is older than the 15 min the brakes look back"
        );
        let many: Vec<String> = (0..40)
            .map(|minute| format!("2026-12-04T09:{:02}:00Z", minute))
            .collect();
        let kept = RollTimes::parse(&many.join(","));
        assert_eq!(kept.seconds().len(), ROLL_TIMES_KEPT);
        assert_eq!(
            kept.seconds().last(),
            Some(
                &"2026-12-04T09:39:00Z"
                    .parse::<Timestamp>()
                    .unwrap()
                    .as_second()
            )
        );
        assert_eq!(
            RollTimes::default().after_roll(now, Duration::from_secs(60)),
            "2026-12-04T10:00:00Z"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_leader_rebuilds_the_brakes_from_the_recorded_roll_times() {
        let now = Instant::now() + Duration::from_secs(3600);
        tokio::time::advance(Duration::from_secs(3600)).await;
        let wall: Timestamp = "2026-12-04T10:00:00Z".parse().unwrap();
        // The last leader spent its burst of 3 in the last 30 s (a rate of 6 a minute).
        let spent =
            RollTimes::parse("2026-12-04T09:59:30Z,2026-12-04T09:59:40Z,2026-12-04T09:59:50Z");
        let mut bucket = TokenBucket::new(6, 3, now);
        bucket.seed(spent.instants(wall, now), now);
        // Seeded as if empty 30 s ago: 3 tokens earned, 3 spent, clamped at 0 → 3 refilled at
        // 1 per 10 s after the last: 1 token now, not a full bucket.
        assert!(bucket.take(now).is_ok());
        assert!(
            bucket.take(now).is_err(),
            "a failover does not refill the bucket"
        );
        // Nothing recent: a full bucket.
        let mut idle = TokenBucket::new(6, 3, now);
        idle.seed(RollTimes::default().instants(wall, now), now);
        for _ in 0..3 {
            assert!(idle.take(now).is_ok());
        }
        assert!(idle.take(now).is_err());

        // The flap stop: two rolls recorded, limit 3 in 10 min: one more goes, then it flaps.
        let mut flap = FlapGuard::new(FlapLimit {
            rolls: 3,
            window: Duration::from_secs(600),
        });
        let recorded = RollTimes::parse("2026-12-04T09:55:00Z,2026-12-04T09:58:00Z");
        flap.seed(&key(), recorded.instants(wall, now));
        assert!(!flap.would_flap(&key(), now));
        flap.rolled(&key(), now);
        assert!(flap.would_flap(&key(), now));
        // A shorter record (read before the last roll was seen) does not shorten the history.
        flap.seed(&key(), recorded.instants(wall, now));
        assert!(flap.would_flap(&key(), now));
    }
}
