//! What the controller remembers of each workload between evaluations, in one place: the
//! changes it has not rolled for yet and since when, whether a window or an approval holds its
//! roll, whether its last followed rollout stalled, the content a progressive hold was
//! announced for, and the record it had before a change it has no record of its own for.
//!
//! One map of workload → [`WorkloadState`]; a workload with nothing to remember has no entry,
//! so at 20,000 workloads the map holds only those in motion, and forgetting a workload is one
//! removal ([`Tracker::forget`]; the cache, the patch pool, the flap stop and the window queue
//! keep their own parts).

use std::collections::{BTreeSet, HashMap};

use tokio::time::Instant;

use crate::cache::{SourceKey, WorkloadKey};

/// What is remembered of one workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorkloadState {
    /// The sources whose changes it has not rolled for yet (named in Events).
    pub changed: BTreeSet<SourceKey>,
    /// When the first change it has not rolled for yet was observed.
    pub first_change: Option<Instant>,
    /// Since when a window or an approval holds its roll (its first change): its roll is timed
    /// in `held_roll`, not in `reaction`.
    pub held_since: Option<Instant>,
    /// The content a progressive hold was announced for (each hold is announced once).
    pub held: Option<String>,
    /// Its followed rollout stalled (a StatefulSet's or DaemonSet's status cannot say so),
    /// until it rolls again or goes.
    pub stalled: bool,
    /// Another writer removed its record (the cache held one, the workload now carries none):
    /// its adoption is announced as such.
    pub record_removed: bool,
    /// Its last roll was a recovery past the flap stop's limit ([`crate::outcome`]'s brakes):
    /// should that rollout stall too, the next roll past the limit halts.
    pub recovering: bool,
    /// Without a record yet: the record it had just before a consumed object changed (taken
    /// from this replica's view before the change is applied), so that a change made while its
    /// adoption waits rolls it instead of being absorbed into its first record.
    pub baseline: Option<String>,
}

impl WorkloadState {
    fn is_empty(&self) -> bool {
        *self == WorkloadState::default()
    }
}

/// Every workload's [`WorkloadState`].
#[derive(Debug, Default)]
pub struct Tracker {
    states: HashMap<WorkloadKey, WorkloadState>,
}

/// Above this capacity, an empty map is given back (the first list records a change for every
/// consumer; the burst's capacity is not kept).
const SPARE_CAPACITY: usize = 1024;

impl Tracker {
    /// What is remembered of `key`, if anything.
    pub fn get(&self, key: &WorkloadKey) -> Option<&WorkloadState> {
        self.states.get(key)
    }

    /// The sources whose changes `key` has not rolled for yet.
    pub fn changed(&self, key: &WorkloadKey) -> Option<&BTreeSet<SourceKey>> {
        self.get(key)
            .map(|state| &state.changed)
            .filter(|changed| !changed.is_empty())
    }

    /// Whether `key`'s followed rollout stalled.
    pub fn is_stalled(&self, key: &WorkloadKey) -> bool {
        self.get(key).is_some_and(|state| state.stalled)
    }

    /// The record `key` had before a change it has no record of its own for.
    pub fn baseline(&self, key: &WorkloadKey) -> Option<&str> {
        self.get(key)?.baseline.as_deref()
    }

    /// Changes what is remembered of `key`; an entry left with nothing is removed.
    pub fn update<R>(&mut self, key: &WorkloadKey, f: impl FnOnce(&mut WorkloadState) -> R) -> R {
        let state = self.states.entry(key.clone()).or_default();
        let result = f(state);
        if state.is_empty() {
            self.states.remove(key);
        }
        result
    }

    /// A change of `source` that `key` consumes, observed at `now`.
    pub fn changed_at(&mut self, key: &WorkloadKey, source: &SourceKey, now: Instant) {
        self.update(key, |state| {
            state.first_change.get_or_insert(now);
            state.changed.insert(source.clone());
        });
    }

    /// Forgets the changes `key` has not rolled for (they are not its news any more).
    pub fn forget_changes(&mut self, key: &WorkloadKey) {
        self.update(key, |state| {
            state.first_change = None;
            state.changed.clear();
        });
    }

    /// Forgets everything about `key` (it was deleted, or left the selection).
    pub fn forget(&mut self, key: &WorkloadKey) {
        self.states.remove(key);
    }

    /// Gives back the capacity a burst grew the map to, once it is empty again.
    pub fn release_spare(&mut self) {
        if self.states.is_empty() && self.states.capacity() > SPARE_CAPACITY {
            self.states = HashMap::new();
        }
    }

    /// Workloads remembered now.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use rollsafe_core::reference::TargetKind;
    use rollsafe_core::workload::WatchedKind;

    use super::*;

    fn web() -> WorkloadKey {
        WorkloadKey {
            kind: WatchedKind::Deployment,
            namespace: "shop".into(),
            name: "web".into(),
        }
    }

    fn db() -> SourceKey {
        SourceKey {
            kind: TargetKind::Secret,
            namespace: "shop".into(),
            name: "db".into(),
        }
    }

    #[test]
    fn a_workload_with_nothing_to_remember_has_no_entry() {
        let mut tracker = Tracker::default();
        let now = Instant::now();
        tracker.changed_at(&web(), &db(), now);
        assert_eq!(tracker.len(), 1);
        assert_eq!(tracker.get(&web()).and_then(|s| s.first_change), Some(now));
        tracker.forget_changes(&web());
        assert!(tracker.is_empty(), "an emptied state is removed");
        tracker.update(&web(), |state| state.stalled = true);
        tracker.changed_at(&web(), &db(), now);
        tracker.forget(&web());
        assert!(tracker.is_empty(), "forgetting a workload is one removal");
    }

    #[test]
    fn the_first_change_is_kept_until_the_changes_are_forgotten() {
        let mut tracker = Tracker::default();
        let first = Instant::now();
        tracker.changed_at(&web(), &db(), first);
        tracker.changed_at(&web(), &db(), first + std::time::Duration::from_secs(5));
        assert_eq!(
            tracker.get(&web()).and_then(|s| s.first_change),
            Some(first)
        );
        assert_eq!(tracker.changed(&web()).map(BTreeSet::len), Some(1));
    }
}
