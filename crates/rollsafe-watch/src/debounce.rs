//! Per-workload debounce: the first change to a workload opens a window; further changes inside
//! it join the same evaluation, which runs when the window closes. The window never extends, so
//! a steady stream of changes cannot postpone a roll forever.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use tokio::time::Instant;

use crate::cache::WorkloadKey;

/// The capacity an empty table of pending evaluations may keep.
const SPARE_CAPACITY: usize = 1024;

/// Pending evaluations, by deadline.
#[derive(Debug, Default)]
pub struct Debouncer {
    deadlines: HashMap<WorkloadKey, Instant>,
    order: BTreeSet<(Instant, WorkloadKey)>,
}

impl Debouncer {
    /// Schedules `key` at `now + window`, unless it is already scheduled earlier.
    pub fn schedule(&mut self, key: &WorkloadKey, now: Instant, window: Duration) {
        let at = now + window;
        if let Some(existing) = self.deadlines.get(key) {
            if *existing <= at {
                return;
            }
            self.order.remove(&(*existing, key.clone()));
        }
        self.deadlines.insert(key.clone(), at);
        self.order.insert((at, key.clone()));
    }

    /// Unschedules `key`, if it is scheduled.
    pub fn remove(&mut self, key: &WorkloadKey) {
        if let Some(at) = self.deadlines.remove(key) {
            self.order.remove(&(at, key.clone()));
        }
    }

    /// The earliest deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.order.first().map(|(at, _)| *at)
    }

    /// Removes and returns the earliest key due at `now`, if any. The loop takes them one at a
    /// time, so that it can stop (the patch pool is full, or it has evaluated its share of a
    /// step) and read the watches before it takes the next.
    pub fn pop_next_due(&mut self, now: Instant) -> Option<WorkloadKey> {
        let (at, _) = self.order.first()?;
        if *at > now {
            return None;
        }
        let (_, key) = self.order.pop_first()?;
        self.deadlines.remove(&key);
        // After a burst (the first list schedules every workload at once) the table keeps
        // its capacity; give it back once nothing is pending.
        if self.deadlines.is_empty() && self.deadlines.capacity() > SPARE_CAPACITY {
            self.deadlines = HashMap::new();
        }
        Some(key)
    }

    /// Removes and returns every key due at `now`, earliest first.
    #[cfg(test)]
    fn pop_due(&mut self, now: Instant) -> Vec<WorkloadKey> {
        std::iter::from_fn(|| self.pop_next_due(now)).collect()
    }

    /// How many evaluations are pending.
    pub fn len(&self) -> usize {
        self.deadlines.len()
    }

    /// Whether none is pending.
    pub fn is_empty(&self) -> bool {
        self.deadlines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::workload::WatchedKind;

    fn key(name: &str) -> WorkloadKey {
        WorkloadKey {
            kind: WatchedKind::Deployment,
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn changes_inside_the_window_coalesce() {
        let window = Duration::from_secs(2);
        let mut d = Debouncer::default();
        d.schedule(&key("web"), Instant::now(), window);
        tokio::time::advance(Duration::from_millis(1500)).await;
        // A second change (the Secret after the ConfigMap) joins the open window.
        d.schedule(&key("web"), Instant::now(), window);
        d.schedule(&key("api"), Instant::now(), window);
        assert_eq!(d.len(), 2);
        assert!(d.pop_due(Instant::now()).is_empty());
        tokio::time::sleep_until(d.next_deadline().unwrap()).await;
        assert_eq!(d.pop_due(Instant::now()), [key("web")]);
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert_eq!(d.pop_due(Instant::now()), [key("api")]);
        assert!(d.is_empty() && d.next_deadline().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_earlier_deadline_wins() {
        let mut d = Debouncer::default();
        d.schedule(&key("web"), Instant::now(), Duration::from_secs(10));
        d.schedule(&key("web"), Instant::now(), Duration::ZERO);
        assert_eq!(d.pop_due(Instant::now()), [key("web")]);
        assert!(d.is_empty());
    }
}
