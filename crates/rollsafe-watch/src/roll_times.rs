//! A workload's recent roll times, as each roll writes them on it (`rollsafe.dev/rolled-at`):
//! what the brakes ([`crate::limits`]) read back after a restart or a failover.

use std::time::Duration;

use jiff::Timestamp;
use tokio::time::Instant;

/// The most roll times a workload keeps (the flap stop needs its limit's count; the bucket
/// counts every roll within its refill time, and a workload rolled more often is halted).
pub const ROLL_TIMES_KEPT: usize = 16;

/// A workload's recent roll times, as `rollsafe.dev/rolled-at` holds them: Unix seconds,
/// oldest first, at most [`ROLL_TIMES_KEPT`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RollTimes(Box<[i64]>);

impl RollTimes {
    /// Reads the annotation: RFC 3339 times, comma-separated. Entries that are not times are
    /// skipped (a hand edit cannot stop a roll); at most the newest [`ROLL_TIMES_KEPT`] kept.
    pub fn parse(text: &str) -> Self {
        let mut times: Vec<i64> = text
            .split(',')
            .filter_map(|entry| entry.trim().parse::<Timestamp>().ok())
            .map(|at| at.as_second())
            .collect();
        times.sort_unstable();
        let skip = times.len().saturating_sub(ROLL_TIMES_KEPT);
        Self(times.split_off(skip).into_boxed_slice())
    }

    /// The times, oldest first.
    pub fn seconds(&self) -> &[i64] {
        &self.0
    }

    /// The annotation after a roll at `now`: the times within `keep` of it, then `now`, at most
    /// [`ROLL_TIMES_KEPT`].
    pub fn after_roll(&self, now: Timestamp, keep: Duration) -> String {
        let now_s = now.as_second();
        let keep_s = i64::try_from(keep.as_secs()).unwrap_or(i64::MAX);
        let mut kept: Vec<i64> = self
            .0
            .iter()
            .copied()
            .filter(|at| *at <= now_s && now_s.saturating_sub(*at) < keep_s)
            .collect();
        kept.push(now_s);
        let skip = kept.len().saturating_sub(ROLL_TIMES_KEPT);
        kept[skip..]
            .iter()
            .filter_map(|at| Timestamp::from_second(*at).ok())
            .map(|at| at.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The times as instants of this process's clock, given that the wall clock reads `wall`
    /// at `now`: each as long before `now` as it is before `wall` (a time in the future counts
    /// as now).
    pub fn instants(&self, wall: Timestamp, now: Instant) -> impl Iterator<Item = Instant> + '_ {
        let wall_s = wall.as_second();
        self.0.iter().map(move |at| {
            let ago = u64::try_from(wall_s.saturating_sub(*at)).unwrap_or(0);
            now.checked_sub(Duration::from_secs(ago)).unwrap_or(now)
        })
    }
}
