//! Following one workload's rollout across observations.
//!
//! A [`Follower`] is told what rollsafe set on the workload's pod template (the marker: the
//! restart annotation's value of a request, the config-hash annotation of a render or a
//! controller roll) and remembers, from the first observation that carries it, the workload's
//! uid and pod template. Each later observation is classified by [`super::classify`] and then
//! checked against that memory: another uid is [`RolloutState::Gone`], another marker or
//! another template is [`RolloutState::Superseded`]. StatefulSets and DaemonSets have no
//! progress condition, so the follower keeps when their counts last moved and calls them
//! [`RolloutState::Stalled`] after the progress deadline without movement. Time is given, never
//! read: the caller passes a monotonic `now`.

use std::hash::{DefaultHasher, Hasher};
use std::time::Duration;

use serde_json::Value;

use super::{Progress, RolloutState, RolloutStatus, StallReason, classify};
use crate::workload::WatchedKind;

/// What one observation of a workload says, as the follower needs it: read from the object
/// ([`Observation::of`]), or from the rollout route, which carries no uid or template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// `metadata.uid`, when known.
    pub uid: Option<String>,
    /// The value of the marker's annotation on the pod template, if any.
    pub marker: Option<String>,
    /// A digest of the pod template, when the object was read.
    pub template: Option<u64>,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// [`classify`]'s verdict.
    pub status: RolloutStatus,
}

impl Observation {
    /// Reads `object`, a workload of `kind`, whose pod-template annotation `marker_key` rollsafe
    /// set.
    pub fn of(kind: impl Into<WatchedKind>, object: &Value, marker_key: &str) -> Self {
        let kind = kind.into();
        Self::classified(kind, object, marker_key, classify(kind, object))
    }

    /// As [`Observation::of`], for a caller that classified `object` already.
    pub fn classified(
        kind: WatchedKind,
        object: &Value,
        marker_key: &str,
        status: RolloutStatus,
    ) -> Self {
        let template = kind.template(object);
        Self {
            uid: object
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            marker: template
                .and_then(|t| t.pointer("/metadata/annotations"))
                .and_then(|a| a.get(marker_key))
                .and_then(Value::as_str)
                .map(str::to_owned),
            template: Some(template_digest(template)),
            observed_generation: object
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            status,
        }
    }
}

/// The value of the pod-template annotation `key` of `object`.
pub fn template_annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/spec/template/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// What moved last, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Movement {
    observed_generation: i64,
    progress: Progress,
    at: Duration,
}

/// Follows one workload's rollout of rollsafe's change.
#[derive(Debug, Clone)]
pub struct Follower {
    kind: WatchedKind,
    marker: Option<String>,
    deadline: Duration,
    uid: Option<String>,
    template: Option<u64>,
    movement: Option<Movement>,
}

impl Follower {
    /// Follows a workload of `kind` whose pod template should carry the marker value `marker`
    /// (`None`: the value first observed), calling a StatefulSet or DaemonSet stalled after
    /// `deadline` without progress.
    pub fn new(kind: impl Into<WatchedKind>, marker: Option<String>, deadline: Duration) -> Self {
        Self {
            kind: kind.into(),
            marker,
            deadline,
            uid: None,
            template: None,
            movement: None,
        }
    }

    /// The workload's kind.
    pub fn kind(&self) -> WatchedKind {
        self.kind
    }

    /// Classifies `observation` (`None`: the workload was not found) made at `now`.
    pub fn observe(&mut self, observation: Option<Observation>, now: Duration) -> RolloutStatus {
        let Some(seen) = observation else {
            return gone();
        };
        match (&self.uid, seen.uid) {
            (Some(known), Some(uid)) if *known != uid => return gone(),
            (None, Some(uid)) => self.uid = Some(uid),
            _ => {}
        }
        let progress = seen.status.progress.unwrap_or_default();
        match (&self.marker, seen.marker) {
            (Some(want), Some(value)) if *want == value => {}
            (None, Some(value)) => self.marker = Some(value),
            _ => return superseded(progress),
        }
        match (self.template, seen.template) {
            (Some(known), Some(template)) if known != template => return superseded(progress),
            (None, Some(template)) => self.template = Some(template),
            _ => {}
        }
        self.clock(seen.observed_generation, seen.status, now)
    }

    /// A StatefulSet's or DaemonSet's deadline: progressing without movement for `deadline` is
    /// stalled. A Deployment's own condition says when it is (`ProgressDeadlineExceeded`), an
    /// Argo Rollout's its `Degraded` phase; a paused canary step is no stall.
    fn clock(
        &mut self,
        observed_generation: i64,
        status: RolloutStatus,
        now: Duration,
    ) -> RolloutStatus {
        if matches!(self.kind, WatchedKind::Deployment | WatchedKind::Rollout)
            || status.state != RolloutState::Progressing
        {
            self.movement = None;
            return status;
        }
        let progress = status.progress.unwrap_or_default();
        let moved = self
            .movement
            .is_none_or(|m| m.observed_generation != observed_generation || m.progress != progress);
        if moved {
            self.movement = Some(Movement {
                observed_generation,
                progress,
                at: now,
            });
            return status;
        }
        let since = self.movement.map_or(now, |m| m.at);
        if now.saturating_sub(since) >= self.deadline {
            return RolloutStatus {
                state: RolloutState::Stalled,
                reason: Some(StallReason::no_progress()),
                ..status
            };
        }
        status
    }
}

fn gone() -> RolloutStatus {
    RolloutStatus {
        state: RolloutState::Gone,
        progress: None,
        deferral: None,
        reason: None,
    }
}

fn superseded(progress: Progress) -> RolloutStatus {
    RolloutStatus {
        state: RolloutState::Superseded,
        progress: Some(progress),
        deferral: None,
        reason: None,
    }
}

/// A digest of `object`'s pod template, to notice it changing (in memory only).
/// The template is written straight into the hasher: no copy of it is made, as this runs for
/// every watch event of a workload.
fn template_digest(template: Option<&Value>) -> u64 {
    struct Hashing(DefaultHasher);
    impl std::io::Write for Hashing {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.write(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut hashing = Hashing(DefaultHasher::new());
    if let Some(template) = template {
        // Writing into the hasher cannot fail.
        let _ = serde_json::to_writer(&mut hashing, template);
    }
    hashing.0.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sts(uid: &str, marker: &str, image: &str, status: Value) -> Value {
        json!({"metadata": {"uid": uid, "generation": 2},
               "spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                        "template": {"metadata": {"annotations": {"krypton.io/restarted-at": marker}},
                                     "spec": {"containers": [{"name": "c", "image": image}]}}},
               "status": status})
    }

    fn midway(updated: i64) -> Value {
        json!({"observedGeneration": 2, "replicas": 3, "readyReplicas": 2, "updatedReplicas": updated,
               "currentRevision": "a", "updateRevision": "b"})
    }

    const DEADLINE: Duration = Duration::from_secs(60);

    fn follower() -> Follower {
        Follower::new(WatchedKind::StatefulSet, Some("t1".into()), DEADLINE)
    }

    fn seen(object: &Value) -> Option<Observation> {
        Some(Observation::of(
            WatchedKind::StatefulSet,
            object,
            "krypton.io/restarted-at",
        ))
    }

    #[test]
    fn a_rollout_without_movement_for_the_deadline_is_stalled() {
        let mut f = follower();
        let at = |s| Duration::from_secs(s);
        let o = sts("u1", "t1", "i", midway(1));
        assert_eq!(f.observe(seen(&o), at(0)).state, RolloutState::Progressing);
        assert_eq!(f.observe(seen(&o), at(59)).state, RolloutState::Progressing);
        // It moves: the clock starts again.
        let moved = sts("u1", "t1", "i", midway(2));
        assert_eq!(
            f.observe(seen(&moved), at(59)).state,
            RolloutState::Progressing
        );
        assert_eq!(
            f.observe(seen(&moved), at(118)).state,
            RolloutState::Progressing
        );
        let stalled = f.observe(seen(&moved), at(119));
        assert_eq!(stalled.state, RolloutState::Stalled);
        assert_eq!(stalled.reason, Some(StallReason::no_progress()));
    }

    #[test]
    fn another_uid_is_gone_and_another_marker_or_template_is_superseded() {
        let at = Duration::ZERO;
        let o = sts("u1", "t1", "i", midway(1));
        let mut f = follower();
        f.observe(seen(&o), at);
        assert_eq!(
            f.observe(seen(&sts("u2", "t1", "i", midway(1))), at).state,
            RolloutState::Gone
        );
        assert_eq!(f.observe(None, at).state, RolloutState::Gone);

        let mut f = follower();
        f.observe(seen(&o), at);
        assert_eq!(
            f.observe(seen(&sts("u1", "t2", "i", midway(1))), at).state,
            RolloutState::Superseded
        );

        let mut f = follower();
        f.observe(seen(&o), at);
        assert_eq!(
            f.observe(seen(&sts("u1", "t1", "other", midway(1))), at)
                .state,
            RolloutState::Superseded
        );
    }
}
