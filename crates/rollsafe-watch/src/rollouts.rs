//! Following the rollouts the controller started, from the workload watch it already has.
//!
//! After a roll is acknowledged, [`Rollouts::follow`] pins the workload's uid, its new pod
//! template and the config hash the roll wrote (the core's [`Follower`]). Every later watch
//! event of that workload is an observation; no request is made for it. When the rollout is
//! final — `complete`, `stalled` (a Deployment's `ProgressDeadlineExceeded`; a StatefulSet or
//! DaemonSet without progress for the progress deadline), `superseded` or `gone` — it is
//! reported once and forgotten. A StatefulSet or DaemonSet that stops sending events is
//! checked at its deadline ([`Rollouts::next_deadline`], [`Rollouts::expire`]). A rollout
//! not final after [`FOLLOW_LIMIT_FACTOR`] deadlines is dropped unreported (a Deployment whose
//! controller never answers), so what is followed stays bounded. The state lives in this
//! replica's memory: a rollout started before a restart or by another leader is not followed.

use std::collections::HashMap;
use std::time::Duration;

use rollsafe_core::rollout::RolloutStatus;
use rollsafe_core::rollout::follow::{Follower, Observation};
use tokio::time::Instant;

use crate::cache::WorkloadKey;

/// How many progress deadlines a rollout is followed at most.
pub const FOLLOW_LIMIT_FACTOR: u32 = 3;

/// A rollout that became final.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// The workload.
    pub key: WorkloadKey,
    /// Its uid when the roll was acknowledged (for the Event's object).
    pub uid: Option<String>,
    /// Its final status.
    pub status: RolloutStatus,
    /// From the roll's acknowledgement to now.
    pub elapsed: Duration,
}

#[derive(Debug)]
struct Followed {
    follower: Follower,
    uid: Option<String>,
    started: Instant,
    /// When [`Rollouts::expire`] looks at it next.
    next_check: Instant,
    /// The last observation, re-read at the deadline when no event arrives.
    last: Option<Observation>,
}

/// The rollouts being followed.
#[derive(Debug)]
pub struct Rollouts {
    deadline: Duration,
    following: HashMap<WorkloadKey, Followed>,
}

impl Rollouts {
    /// Follows with `deadline` as the progress deadline of StatefulSets and DaemonSets.
    pub fn new(deadline: Duration) -> Self {
        Self {
            deadline,
            following: HashMap::new(),
        }
    }

    /// Starts following `key` from `acknowledged`, the object its roll patch returned (whose
    /// pod template carries `marker`), at `now`. A rollout of the same workload followed so
    /// far is replaced: the new roll supersedes it, and is the one that matters.
    pub fn follow(
        &mut self,
        key: WorkloadKey,
        acknowledged: Observation,
        now: Instant,
    ) -> Option<Finished> {
        let follower = Follower::new(key.kind, acknowledged.marker.clone(), self.deadline);
        self.following.insert(
            key.clone(),
            Followed {
                follower,
                uid: acknowledged.uid.clone(),
                started: now,
                next_check: now + self.deadline,
                last: None,
            },
        );
        self.observe(&key, Some(acknowledged), now)
    }

    /// An observation of `key` (`None`: deleted) at `now`; the rollout if it became final.
    pub fn observe(
        &mut self,
        key: &WorkloadKey,
        observation: Option<Observation>,
        now: Instant,
    ) -> Option<Finished> {
        let followed = self.following.get_mut(key)?;
        let elapsed = now.saturating_duration_since(followed.started);
        let status = followed.follower.observe(observation.clone(), elapsed);
        if !status.state.is_final() {
            followed.last = observation;
            return None;
        }
        let followed = self.following.remove(key)?;
        Some(Finished {
            key: key.clone(),
            uid: followed.uid,
            status,
            elapsed,
        })
    }

    /// Whether `key`'s rollout is followed.
    pub fn is_following(&self, key: &WorkloadKey) -> bool {
        self.following.contains_key(key)
    }

    /// How many rollouts are followed.
    pub fn len(&self) -> usize {
        self.following.len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.following.is_empty()
    }

    /// When [`Rollouts::expire`] next has something to decide: a deadline after the roll,
    /// then every quarter of a deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.following.values().map(|f| f.next_check).min()
    }

    /// Re-reads each rollout past its deadline with its last observation (no event may come
    /// for a StatefulSet that stopped moving), and drops those followed for longer than
    /// [`FOLLOW_LIMIT_FACTOR`] deadlines. Returns those that became final.
    pub fn expire(&mut self, now: Instant) -> Vec<Finished> {
        let due: Vec<WorkloadKey> = self
            .following
            .iter()
            .filter(|(_, f)| now >= f.next_check)
            .map(|(key, _)| key.clone())
            .collect();
        let mut finished = Vec::new();
        for key in due {
            let Some(followed) = self.following.get_mut(&key) else {
                continue;
            };
            if now >= followed.started + self.deadline * FOLLOW_LIMIT_FACTOR {
                self.following.remove(&key);
                continue;
            }
            let last = followed.last.clone();
            if let Some(done) = self.observe(&key, last, now) {
                finished.push(done);
            } else if let Some(followed) = self.following.get_mut(&key) {
                followed.next_check = now + (self.deadline / 4).max(Duration::from_secs(1));
            }
        }
        finished
    }

    /// Stops following `key`.
    pub fn forget(&mut self, key: &WorkloadKey) {
        self.following.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::rollout::RolloutState;
    use rollsafe_core::workload::WatchedKind;
    use serde_json::{Value, json};

    fn key() -> WorkloadKey {
        WorkloadKey {
            kind: WatchedKind::StatefulSet,
            namespace: "shop".into(),
            name: "db".into(),
        }
    }

    fn sts(hash: &str, updated: i64, ready: i64) -> Value {
        json!({"metadata": {"uid": "u1", "generation": 2},
               "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate"},
                        "template": {"metadata": {"annotations": {"rollsafe.dev/config-hash": hash}}}},
               "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": updated,
                          "readyReplicas": ready, "availableReplicas": ready,
                          "currentRevision": if updated == 3 { "db-2" } else { "db-1" },
                          "updateRevision": "db-2"}})
    }

    fn seen(object: &Value) -> Observation {
        Observation::of(WatchedKind::StatefulSet, object, "rollsafe.dev/config-hash")
    }

    #[tokio::test(start_paused = true)]
    async fn a_rollout_is_reported_once_when_it_completes() {
        let mut rollouts = Rollouts::new(Duration::from_secs(60));
        let start = Instant::now();
        assert_eq!(
            rollouts.follow(key(), seen(&sts("v1:a", 0, 3)), start),
            None
        );
        assert_eq!(
            rollouts.observe(&key(), Some(seen(&sts("v1:a", 1, 2))), start),
            None
        );
        let done = rollouts
            .observe(
                &key(),
                Some(seen(&sts("v1:a", 3, 3))),
                start + Duration::from_secs(5),
            )
            .unwrap();
        assert_eq!(done.status.state, RolloutState::Complete);
        assert_eq!(done.elapsed, Duration::from_secs(5));
        assert!(rollouts.is_empty());
        assert_eq!(
            rollouts.observe(&key(), Some(seen(&sts("v1:a", 3, 3))), start),
            None
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stateful_set_that_stops_moving_stalls_at_its_deadline_without_an_event() {
        let mut rollouts = Rollouts::new(Duration::from_secs(60));
        let start = Instant::now();
        rollouts.follow(key(), seen(&sts("v1:a", 1, 2)), start);
        assert_eq!(
            rollouts.next_deadline(),
            Some(start + Duration::from_secs(60))
        );
        assert!(rollouts.expire(start + Duration::from_secs(30)).is_empty());
        let stalled = rollouts.expire(start + Duration::from_secs(61));
        assert_eq!(stalled.len(), 1);
        assert_eq!(stalled[0].status.state, RolloutState::Stalled);
        assert!(rollouts.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn another_change_supersedes_and_a_deletion_is_gone() {
        let mut rollouts = Rollouts::new(Duration::from_secs(60));
        let start = Instant::now();
        rollouts.follow(key(), seen(&sts("v1:a", 0, 3)), start);
        let superseded = rollouts
            .observe(&key(), Some(seen(&sts("v1:b", 0, 3))), start)
            .unwrap();
        assert_eq!(superseded.status.state, RolloutState::Superseded);
        rollouts.follow(key(), seen(&sts("v1:a", 0, 3)), start);
        let gone = rollouts.observe(&key(), None, start).unwrap();
        assert_eq!(gone.status.state, RolloutState::Gone);
    }

    #[tokio::test(start_paused = true)]
    async fn a_rollout_that_never_ends_is_dropped_after_the_limit() {
        let mut rollouts = Rollouts::new(Duration::from_secs(60));
        let start = Instant::now();
        let deployment = WorkloadKey {
            kind: WatchedKind::Deployment,
            ..key()
        };
        let object = json!({"metadata": {"uid": "u1", "generation": 3},
            "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"rollsafe.dev/config-hash": "v1:a"}}}},
            "status": {"observedGeneration": 2}});
        let seen = Observation::of(WatchedKind::Deployment, &object, "rollsafe.dev/config-hash");
        rollouts.follow(deployment.clone(), seen, start);
        assert!(rollouts.expire(start + Duration::from_secs(61)).is_empty());
        assert!(rollouts.is_following(&deployment));
        // Looked at again a quarter of a deadline later, not at once.
        assert_eq!(
            rollouts.next_deadline(),
            Some(start + Duration::from_secs(76))
        );
        assert!(rollouts.expire(start + Duration::from_secs(181)).is_empty());
        assert!(!rollouts.is_following(&deployment));
    }
}
