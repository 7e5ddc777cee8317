//! The rollout model: where a workload's rollout of rollsafe's change stands, read from the
//! workload's spec and status as the API server holds them.
//!
//! [`classify`] answers one of seven [`RolloutState`]s for one observation. It agrees with
//! `kubectl rollout status` (k8s.io/kubectl `polymorphichelpers/rollout_status.go`) on every
//! status kubectl's viewers cover: kubectl's "spec update to be observed" is
//! [`RolloutState::Pending`], its "Waiting for …" is [`RolloutState::Progressing`], its success
//! is [`RolloutState::Complete`] and its "exceeded its progress deadline" is
//! [`RolloutState::Stalled`]. Where kubectl cannot tell (it waits on a paused Deployment, and
//! refuses `OnDelete`), rollsafe says [`RolloutState::Deferred`] with the
//! [`Deferral`]; a partition covering every replica is deferred too, where kubectl reports a
//! partitioned rollout of zero pods complete.
//!
//! Three states need more than one observation, and [`follow::Follower`] keeps what they need:
//! the workload's uid ([`RolloutState::Gone`] when it is replaced), the pod template it first saw
//! carrying rollsafe's change ([`RolloutState::Superseded`] when it changes again), and when
//! the rollout last moved (a StatefulSet or DaemonSet, which have no progress condition, is
//! [`RolloutState::Stalled`] after a progress deadline without movement).
//!
//! - [`follow`]: following one workload across observations.
//! - [`reason`]: why a rollout does not move, from Kubernetes' own reasons (the Deployment's
//!   condition, the pods' container statuses).
//! - [`view`]: the rollout state of a Secret's consumers, as the rollout route answers it.
//! - [`waves`]: the order of a progressive restart.

pub mod follow;
pub mod reason;
pub mod view;
pub mod waves;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use follow::{Follower, Observation};
pub use reason::StallReason;
pub use view::{ConsumersRollout, WorkloadRollout};
pub use waves::{Wave, WaveError, WavePlan};

use crate::workload::{Deferral, WatchedKind};

/// How long a StatefulSet or DaemonSet may go without progress before it is stalled, unless
/// configured (`--progress-deadline`): the Deployment default, `progressDeadlineSeconds: 600`.
pub const DEFAULT_PROGRESS_DEADLINE: std::time::Duration = std::time::Duration::from_secs(600);

/// Where a workload's rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutState {
    /// The workload's controller has not observed the change yet
    /// (`status.observedGeneration < metadata.generation`).
    Pending,
    /// Replicas are being updated, readied or made available, within the deadline.
    Progressing,
    /// Every replica updated and available, old ones gone: `kubectl rollout status` succeeds.
    Complete,
    /// No progress within the deadline; carries Kubernetes' reason.
    Stalled,
    /// Patched, but the pods roll only on the workload's own trigger (paused, `OnDelete`, a
    /// partition covering every replica).
    Deferred,
    /// The pod template changed again after rollsafe's change: another rollout runs now.
    Superseded,
    /// Deleted, or replaced by a new object of the same name (a new uid).
    Gone,
}

impl RolloutState {
    /// Every state, in display order.
    pub const ALL: [RolloutState; 7] = [
        RolloutState::Pending,
        RolloutState::Progressing,
        RolloutState::Complete,
        RolloutState::Stalled,
        RolloutState::Deferred,
        RolloutState::Superseded,
        RolloutState::Gone,
    ];

    /// The state as JSON, logs and metric labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutState::Pending => "pending",
            RolloutState::Progressing => "progressing",
            RolloutState::Complete => "complete",
            RolloutState::Stalled => "stalled",
            RolloutState::Deferred => "deferred",
            RolloutState::Superseded => "superseded",
            RolloutState::Gone => "gone",
        }
    }

    /// Whether following can stop: nothing rollsafe waits for will change this state by itself.
    /// `stalled` is final for a follower (it reports, it does not wait for someone to fix the
    /// change), though Kubernetes may still recover the rollout later.
    pub fn is_final(self) -> bool {
        !matches!(self, RolloutState::Pending | RolloutState::Progressing)
    }

    /// Whether the state counts as a success for a waiting caller: `complete`, or `deferred`
    /// (reported as such: it rolls on its own trigger).
    pub fn is_success(self) -> bool {
        matches!(self, RolloutState::Complete | RolloutState::Deferred)
    }
}

impl std::fmt::Display for RolloutState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Replica counts of a rollout, read from the workload's status: how many of `desired` run the
/// new template (`updated`), are ready and are available.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Progress {
    /// `spec.replicas` (DaemonSet: `status.desiredNumberScheduled`).
    pub desired: i64,
    /// On the new template.
    pub updated: i64,
    /// Ready.
    pub ready: i64,
    /// Available.
    pub available: i64,
}

impl Progress {
    /// The counts of `object`, a workload of `kind`.
    pub fn of(kind: impl Into<WatchedKind>, object: &Value) -> Self {
        let int = |pointer: &str| object.pointer(pointer).and_then(Value::as_i64);
        match kind.into() {
            WatchedKind::Deployment | WatchedKind::StatefulSet | WatchedKind::Rollout => Self {
                desired: int("/spec/replicas").unwrap_or(1),
                updated: int("/status/updatedReplicas").unwrap_or(0),
                ready: int("/status/readyReplicas").unwrap_or(0),
                available: int("/status/availableReplicas").unwrap_or(0),
            },
            // A CronJob's pods belong to its Jobs; it has no replicas of its own.
            WatchedKind::CronJob => Self::default(),
            WatchedKind::DaemonSet => Self {
                desired: int("/status/desiredNumberScheduled").unwrap_or(0),
                updated: int("/status/updatedNumberScheduled").unwrap_or(0),
                ready: int("/status/numberReady").unwrap_or(0),
                available: int("/status/numberAvailable").unwrap_or(0),
            },
        }
    }
}

/// One observation's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStatus {
    /// Where the rollout stands.
    pub state: RolloutState,
    /// The replica counts, when the workload exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Why a deferred workload does not roll now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferral: Option<Deferral>,
    /// Why a stalled workload does not move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StallReason>,
}

impl RolloutStatus {
    /// Before anything was observed.
    pub fn pending() -> Self {
        Self::new(RolloutState::Pending, None)
    }

    fn new(state: RolloutState, progress: Option<Progress>) -> Self {
        Self {
            state,
            progress,
            deferral: None,
            reason: None,
        }
    }

    /// Words for people: the state, and the counts or the reason behind it.
    pub fn describe(&self) -> String {
        let counts = self.progress.map(|p| {
            format!(
                "{} updated, {} ready of {}",
                p.updated.max(0),
                p.ready.max(0),
                p.desired.max(0)
            )
        });
        match (self.state, counts) {
            (RolloutState::Deferred, _) => match self.deferral {
                Some(d) => format!("deferred: {}", d.reason()),
                None => "deferred".to_owned(),
            },
            (RolloutState::Stalled, counts) => {
                let why = self
                    .reason
                    .as_ref()
                    .map_or_else(|| "no progress".to_owned(), StallReason::describe);
                match counts {
                    Some(c) => format!("stalled: {why} ({c})"),
                    None => format!("stalled: {why}"),
                }
            }
            (RolloutState::Pending, _) => {
                "pending: the workload's controller has not observed the change yet".to_owned()
            }
            (RolloutState::Superseded, _) => {
                "superseded: its pod template changed again after rollsafe's change".to_owned()
            }
            (RolloutState::Gone, _) => "gone: deleted or replaced".to_owned(),
            (state, Some(c)) => format!("{state}: {c}"),
            (state, None) => state.as_str().to_owned(),
        }
    }
}

/// What kubectl's viewer of `kind` says of `object`, in rollsafe's states, before the follower's
/// memory (uid, template, clock) is applied: `Pending`, `Progressing`, `Complete`, `Stalled`
/// (a Deployment's `ProgressDeadlineExceeded`) or `Deferred`.
pub fn classify(kind: impl Into<WatchedKind>, object: &Value) -> RolloutStatus {
    let kind = kind.into();
    let int = |pointer: &str| object.pointer(pointer).and_then(Value::as_i64);
    let generation = int("/metadata/generation").unwrap_or(0);
    // Argo Rollouts writes its observedGeneration as a string.
    let observed = object
        .pointer("/status/observedGeneration")
        .and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()))
        .unwrap_or(0);
    let progress = Progress::of(kind, object);
    let status = |state| RolloutStatus::new(state, Some(progress));
    let deferral = Deferral::of(kind, object);
    let deferred = |d: Deferral| RolloutStatus {
        deferral: Some(d),
        ..status(RolloutState::Deferred)
    };
    // A kind rolled through ReplicaSets (a Deployment, an Argo Rollout): complete once every
    // replica is updated and available and no old one is left, and its controller agrees.
    let replica_sets = |agrees: bool| {
        let replicas = int("/status/replicas").unwrap_or(0);
        let done = agrees
            && progress.updated >= progress.desired
            && replicas <= progress.updated
            && progress.available >= progress.updated;
        match (done, deferral) {
            (true, _) => status(RolloutState::Complete),
            (false, Some(d)) => deferred(d),
            (false, None) => status(RolloutState::Progressing),
        }
    };
    match kind {
        WatchedKind::Deployment => {
            if generation > observed {
                return status(RolloutState::Pending);
            }
            if let Some(reason) = StallReason::of_deployment(object) {
                return RolloutStatus {
                    reason: Some(reason),
                    ..status(RolloutState::Stalled)
                };
            }
            replica_sets(true)
        }
        WatchedKind::StatefulSet => {
            if observed == 0 || generation > observed {
                return status(RolloutState::Pending);
            }
            let revisions_agree = object.pointer("/status/updateRevision")
                == object.pointer("/status/currentRevision");
            if deferral == Some(Deferral::OnDelete) {
                // kubectl refuses `OnDelete`; it is complete once every pod was replaced.
                return if revisions_agree && progress.updated >= progress.desired {
                    status(RolloutState::Complete)
                } else {
                    deferred(Deferral::OnDelete)
                };
            }
            if progress.ready < progress.desired {
                return status(RolloutState::Progressing);
            }
            let partition = object
                .pointer("/spec/updateStrategy/rollingUpdate/partition")
                .and_then(Value::as_i64);
            if object
                .pointer("/spec/updateStrategy/rollingUpdate")
                .is_some()
            {
                if let Some(partition) = partition
                    && progress.updated < progress.desired - partition
                {
                    return status(RolloutState::Progressing);
                }
                return match deferral {
                    Some(d) if !revisions_agree => deferred(d),
                    _ => status(RolloutState::Complete),
                };
            }
            if revisions_agree {
                status(RolloutState::Complete)
            } else {
                status(RolloutState::Progressing)
            }
        }
        WatchedKind::DaemonSet => {
            if generation > observed {
                return status(RolloutState::Pending);
            }
            let done =
                progress.updated >= progress.desired && progress.available >= progress.desired;
            match (done, deferral) {
                (true, _) => status(RolloutState::Complete),
                (false, Some(d)) => deferred(d),
                (false, None) => status(RolloutState::Progressing),
            }
        }
        // A CronJob's change reaches pods with its next scheduled Job: nothing to follow.
        WatchedKind::CronJob => deferred(Deferral::NextRun),
        // Argo Rollouts: its `status.phase` says it (`Healthy` once the new revision is
        // promoted, `Degraded` past its progress deadline or aborted), the counts as a
        // Deployment's.
        WatchedKind::Rollout => {
            if generation > observed {
                return status(RolloutState::Pending);
            }
            let phase = object.pointer("/status/phase").and_then(Value::as_str);
            if phase == Some("Degraded") {
                return RolloutStatus {
                    reason: Some(
                        StallReason::of_deployment(object).unwrap_or_else(StallReason::degraded),
                    ),
                    ..status(RolloutState::Stalled)
                };
            }
            replica_sets(phase == Some("Healthy"))
        }
    }
}

/// Counts of final states, for summaries (`-o json`, logs, the page).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateCounts(pub std::collections::BTreeMap<RolloutState, usize>);

impl StateCounts {
    /// Counts the states of `statuses`.
    pub fn of<'a>(states: impl IntoIterator<Item = &'a RolloutState>) -> Self {
        let mut counts = std::collections::BTreeMap::new();
        for state in states {
            *counts.entry(*state).or_insert(0) += 1;
        }
        Self(counts)
    }

    /// How many are in `state`.
    pub fn get(&self, state: RolloutState) -> usize {
        self.0.get(&state).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
