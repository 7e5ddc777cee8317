//! Simulated rollouts: the deployment, statefulset and daemonset controllers and the kubelet,
//! paced by a clock, so a rollout takes time and can fail.
//!
//! Every workload (with rollout history on) has real Pod objects, owned by its ReplicaSets
//! (Deployments) or by itself (StatefulSets, DaemonSets). How they move depends on
//! [`RolloutPace`]:
//!
//! - `podReadyMillis: 0` (the default) and no failing revision: a write's status is final in
//!   the same write, as before the simulation existed, and the pods follow at once, ready.
//! - otherwise a write keeps the workload's status as it was; the controllers then act on it
//!   in steps — ReplicaSets scaled within `maxSurge`/`maxUnavailable`, StatefulSet ordinals
//!   from the highest down to the partition, DaemonSet nodes within `maxUnavailable` — each
//!   step waiting for its new pods to become ready `podReadyMillis` after their creation, and
//!   the status written through the store after each step (a new resourceVersion and a
//!   `MODIFIED` event, no generation bump).
//!
//! A revision marked failing (the `rolloutFails` fault) gets pods that never become ready:
//! their containers wait with the failure's reason and message and restart with a growing
//! back-off; a Deployment stuck on it gets `Progressing=False` `ProgressDeadlineExceeded` once
//! `progressDeadlineSeconds × progressDeadlineScale` pass without progress.
//!
//! Time: [`Cluster::advance_rollouts`] moves every rollout in progress to `now`; the server calls
//! it from one background task, woken by the simulation's waker when something starts and
//! asleep until [`Cluster::next_rollout_due`]. Unit tests drive a manual clock instead
//! ([`Cluster::use_manual_clock`], [`Cluster::advance_clock`]).
//!
//! The controllers read and write through the store's public interface only (a `Pass`): the
//! objects they own are written as a controller writes them ([`Store::put_controlled`],
//! [`Store::remove_controlled`], the status subresource).
//!
//! [`Cluster::advance_rollouts`]: crate::cluster::Cluster::advance_rollouts
//! [`Cluster::next_rollout_due`]: crate::cluster::Cluster::next_rollout_due
//! [`Cluster::use_manual_clock`]: crate::cluster::Cluster::use_manual_clock
//! [`Cluster::advance_clock`]: crate::cluster::Cluster::advance_clock

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use super::{controller_revisions, replica_sets};
use crate::store::{Key, Store, UpdateMode, meta_str};
use crate::strategy::workloads::{replica_set_name, template_hash};
use rollsafe_emulator_types::resources::{ResId, ids};

mod daemon_set;
mod deployment;
pub mod pods;
pub mod rolling;
mod stateful_set;

pub use pods::{Failure, NODES};

/// How the simulated cluster paces rollouts (`/_emulator/settings`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RolloutPace {
    /// How long a new pod takes to become ready; 0: at once.
    pub pod_ready_millis: u64,
    /// Factor applied to every progress deadline (`0.01` makes 600 s six).
    pub progress_deadline_scale: f64,
}

impl Default for RolloutPace {
    fn default() -> Self {
        Self {
            pod_ready_millis: 0,
            progress_deadline_scale: 1.0,
        }
    }
}

/// A change of [`RolloutPace`]: the fields given are set, the others kept; any other field is
/// refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RolloutPaceChange {
    /// New `podReadyMillis`.
    pub pod_ready_millis: Option<u64>,
    /// New `progressDeadlineScale`: finite and greater than 0.
    pub progress_deadline_scale: Option<f64>,
}

impl RolloutPace {
    /// These settings with `change` applied, or why it is refused.
    pub fn with(self, change: RolloutPaceChange) -> Result<Self, String> {
        let mut next = self;
        if let Some(millis) = change.pod_ready_millis {
            next.pod_ready_millis = millis;
        }
        if let Some(scale) = change.progress_deadline_scale {
            if !scale.is_finite() || scale <= 0.0 {
                return Err(format!(
                    "progressDeadlineScale must be a number greater than 0, not {scale}"
                ));
            }
            next.progress_deadline_scale = scale;
        }
        Ok(next)
    }

    fn pod_ready(&self) -> Duration {
        Duration::from_millis(self.pod_ready_millis)
    }
}

/// How a reconcile paces new pods and whether it writes the workload's status.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// How long new pods take to become ready.
    delay: Duration,
    /// Write the status the pods give (else the write-time status stands).
    status: bool,
}

/// The simulation's own state, beside the objects.
#[derive(Debug)]
pub(crate) struct RolloutSim {
    /// Whether workload writes keep ReplicaSets, ControllerRevisions and pods (default: yes).
    pub(crate) history: bool,
    settings: RolloutPace,
    /// Set by tests: the time the simulation reads instead of the system clock.
    manual_clock: Option<Instant>,
    /// Pods whose kubelet still has something to do, by pod key.
    timers: BTreeMap<Key, pods::PodTimer>,
    /// Failing revisions of each workload: revision name → failure.
    failing: HashMap<Key, HashMap<String, Failure>>,
    /// A failure for the revision the next template change of the workload produces.
    pending: HashMap<Key, Failure>,
    /// Workloads whose rollout is in progress, with their progress deadline if any.
    active: BTreeMap<Key, Option<Instant>>,
    /// When each Deployment last progressed (its Progressing condition's lastUpdateTime).
    progressed: HashMap<Key, Instant>,
    /// Deployments whose new ReplicaSet the last write created.
    created: HashSet<Key>,
    /// Wakes the server's rollout task.
    waker: Option<Arc<Notify>>,
    /// Set while that task advances the rollouts: it reads the next due time itself.
    advancing: bool,
}

impl Default for RolloutSim {
    fn default() -> Self {
        Self {
            history: true,
            settings: RolloutPace::default(),
            manual_clock: None,
            timers: BTreeMap::new(),
            failing: HashMap::new(),
            pending: HashMap::new(),
            active: BTreeMap::new(),
            progressed: HashMap::new(),
            created: HashSet::new(),
            waker: None,
            advancing: false,
        }
    }
}

/// One pass of the workload controllers over the store: their state and the store they read
/// and write through its public interface.
pub(crate) struct Pass<'a> {
    pub(crate) store: &'a mut Store,
    pub(crate) sim: &'a mut RolloutSim,
}

impl RolloutSim {
    /// Forgets every rollout (a store reset), keeping the waker, the clock and whether history
    /// is kept.
    pub(crate) fn reset(&mut self) {
        *self = Self {
            history: self.history,
            waker: self.waker.take(),
            manual_clock: self.manual_clock,
            ..Self::default()
        };
    }

    /// A pass of the controllers over `store`.
    pub(crate) fn pass<'a>(&'a mut self, store: &'a mut Store) -> Pass<'a> {
        Pass { store, sim: self }
    }

    /// The current settings.
    pub fn settings(&self) -> RolloutPace {
        self.settings
    }

    /// Replaces the settings; rollouts in progress go on at the new pace.
    pub fn set_settings(&mut self, settings: RolloutPace) {
        self.settings = settings;
        self.wake();
    }

    /// The task that advances the rollouts is woken through `waker` whenever a rollout starts
    /// or a timer is set.
    pub fn set_waker(&mut self, waker: Arc<Notify>) {
        self.waker = Some(waker);
    }

    /// Reads `now` from a manual clock from here on (tests).
    pub fn use_manual_clock(&mut self, now: Instant) {
        self.manual_clock = Some(now);
    }

    /// The simulation's time: the manual clock when set, else the system's.
    pub fn now(&self) -> Instant {
        self.manual_clock.unwrap_or_else(Instant::now)
    }

    /// Marks the revision the next template change of this workload produces as failing (the
    /// `rolloutFails` fault, set before its patch is handled).
    pub fn fail_next_revision(&mut self, key: Key, failure: Failure) {
        self.pending.insert(key, failure);
    }

    /// Forgets a [`RolloutSim::fail_next_revision`] mark no template change used; whether
    /// there was one.
    pub fn cancel_failing_revision(&mut self, key: &Key) -> bool {
        self.pending.remove(key).is_some()
    }

    /// Whether some rollout is in progress.
    pub fn in_progress(&self) -> bool {
        !self.active.is_empty()
    }

    /// When the next thing is due: a pod becoming ready or restarting, or a progress deadline.
    pub fn next_due(&self) -> Option<Instant> {
        let pods = self.timers.values().map(|t| t.due);
        let deadlines = self.active.values().filter_map(|d| *d);
        pods.chain(deadlines).min()
    }

    /// Whether a write of `obj` (a workload at `key`) goes through the paced simulation rather
    /// than being final at once.
    pub(crate) fn is_paced(&self, key: &Key, obj: &Value) -> bool {
        self.history
            && (self.settings.pod_ready_millis > 0
                || self.pending.contains_key(key)
                || self
                    .failing
                    .get(key)
                    .is_some_and(|f| f.contains_key(&revision_name(key.0, obj))))
    }

    /// Wakes the rollout task for what a write started (not for what it does itself).
    fn wake(&self) {
        if let Some(waker) = self.waker.as_ref().filter(|_| !self.advancing) {
            waker.notify_one();
        }
    }
}

/// The name of the revision a workload's current template makes: its ReplicaSet's name
/// (Deployments) or its ControllerRevision's (`<name>-<hash>`).
pub fn revision_name(res: ResId, obj: &Value) -> String {
    if res == ids::DEPLOYMENTS {
        replica_set_name(obj)
    } else {
        format!(
            "{}-{}",
            meta_str(obj, "name").unwrap_or(""),
            template_hash(obj)
        )
    }
}

fn key_of(res: ResId, obj: &Value) -> Key {
    (
        res,
        meta_str(obj, "namespace").unwrap_or("").to_owned(),
        meta_str(obj, "name").unwrap_or("").to_owned(),
    )
}

impl Pass<'_> {
    /// The object at `key`.
    fn object(&self, key: &Key) -> Option<Arc<Value>> {
        self.store.get(key.0, &key.1, &key.2).cloned()
    }

    /// The simulation's time.
    fn sim_now(&self) -> Instant {
        self.sim.now()
    }

    /// Wakes the rollout task.
    fn wake(&self) {
        self.sim.wake();
    }

    /// Moves the manual clock forward by `by` and the rollouts with it (tests).
    pub(crate) fn advance_clock(&mut self, by: Duration) {
        let now = self.sim_now() + by;
        self.sim.manual_clock = Some(now);
        self.advance_rollouts(now);
    }

    /// Moves every rollout in progress to `now`: due pods become ready or restart, the
    /// controllers take every step that has become possible, statuses are written.
    pub fn advance_rollouts(&mut self, now: Instant) {
        if self.sim.manual_clock.is_some() {
            self.sim.manual_clock = Some(now);
        }
        self.sim.advancing = true;
        let keys: Vec<Key> = self.sim.active.keys().cloned().collect();
        for key in keys {
            let pace = Pace {
                delay: self.sim.settings.pod_ready(),
                status: true,
            };
            self.reconcile(&key, pace);
        }
        // Pods whose workload is no longer tracked (left by an instant write) still start.
        let orphans: Vec<Key> = self
            .sim
            .timers
            .values()
            .map(|t| t.workload.clone())
            .filter(|w| !self.sim.active.contains_key(w))
            .collect();
        for key in orphans {
            self.sim.active.insert(key.clone(), None);
            let pace = Pace {
                delay: self.sim.settings.pod_ready(),
                status: true,
            };
            self.reconcile(&key, pace);
        }
        self.sim.advancing = false;
    }

    /// After a committed template change: a pending failure now marks the new revision.
    pub(crate) fn mark_new_revision(&mut self, res: ResId, obj: &Value) {
        let key = key_of(res, obj);
        if let Some(failure) = self.sim.pending.remove(&key) {
            let revision = revision_name(res, obj);
            self.sim
                .failing
                .entry(key)
                .or_default()
                .insert(revision, failure);
        }
    }

    /// The workload controllers' history after a write of `obj` (a `res`): ReplicaSets of a
    /// Deployment, ControllerRevisions of a StatefulSet or DaemonSet. `paced`: the rollout goes
    /// step by step (the new ReplicaSet starts at 0 replicas and the old ones keep theirs, for
    /// the rollout to scale), else it is final at once.
    pub(crate) fn sync_history(&mut self, res: ResId, obj: &Value, paced: bool) {
        if !self.sim.history {
            return;
        }
        if res == ids::DEPLOYMENTS && replica_sets::sync(self.store, obj, paced) && paced {
            self.note_new_replica_set(obj);
        }
        if let Some(kind) = controller_revisions::revisioned_kind(res) {
            controller_revisions::sync(self.store, kind, obj);
        }
    }

    /// The controllers' reaction to a committed write of a workload (`paced`: as
    /// [`RolloutSim::is_paced`] said before the write).
    pub(crate) fn after_workload_write(&mut self, res: ResId, obj: &Value, paced: bool) {
        if !self.sim.history {
            return;
        }
        let key = key_of(res, obj);
        let pace = if paced {
            self.sim.active.entry(key.clone()).or_insert(None);
            Pace {
                delay: self.sim.settings.pod_ready(),
                status: true,
            }
        } else {
            Pace {
                delay: Duration::ZERO,
                status: false,
            }
        };
        self.reconcile(&key, pace);
    }

    /// The last write created the Deployment's new ReplicaSet (its Progressing condition says
    /// so next).
    pub(crate) fn note_new_replica_set(&mut self, deployment: &Value) {
        self.sim
            .created
            .insert(key_of(ids::DEPLOYMENTS, deployment));
    }

    /// A pod was deleted through the API: its controller replaces it.
    pub(crate) fn after_pod_delete(&mut self, pod: &Value) {
        if !self.sim.history {
            return;
        }
        let ns = meta_str(pod, "namespace").unwrap_or("").to_owned();
        let Some(owner) = pod
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .and_then(|refs| refs.iter().find(|r| r["controller"] == true))
        else {
            return;
        };
        let owner_name = owner["name"].as_str().unwrap_or("").to_owned();
        let key = match owner["kind"].as_str() {
            Some("ReplicaSet") => {
                let Some(deployment) = self
                    .store
                    .get(ids::REPLICASETS, &ns, &owner_name)
                    .and_then(|rs| rs.pointer("/metadata/ownerReferences/0/name"))
                    .and_then(Value::as_str)
                else {
                    return;
                };
                (ids::DEPLOYMENTS, ns, deployment.to_owned())
            }
            Some("StatefulSet") => (ids::STATEFULSETS, ns, owner_name),
            Some("DaemonSet") => (ids::DAEMONSETS, ns, owner_name),
            _ => return,
        };
        let Some(workload) = self.object(&key) else {
            return;
        };
        let paced = self.sim.is_paced(&key, &workload);
        if paced {
            self.sim.active.entry(key.clone()).or_insert(None);
        }
        let pace = Pace {
            delay: if paced {
                self.sim.settings.pod_ready()
            } else {
                Duration::ZERO
            },
            status: paced || key.0 != ids::DEPLOYMENTS,
        };
        self.reconcile(&key, pace);
    }

    /// One controller pass over a workload; keeps it in the active set while its rollout is
    /// in progress.
    fn reconcile(&mut self, key: &Key, pace: Pace) {
        let Some(obj) = self.object(key) else {
            self.forget_workload(key);
            return;
        };
        if self.store.namespace_terminating(&key.1) {
            return;
        }
        let now = self.sim_now();
        self.fire_pod_timers(key, now);
        let progress = match key.0 {
            ids::DEPLOYMENTS => self.reconcile_deployment(key, &obj, pace, now),
            ids::STATEFULSETS => self.reconcile_stateful_set(key, &obj, pace),
            ids::DAEMONSETS => self.reconcile_daemon_set(key, &obj, pace),
            _ => Progress::Done,
        };
        let timers = self.sim.timers.values().any(|t| &t.workload == key);
        match progress {
            Progress::Done if !timers => {
                self.sim.active.remove(key);
            }
            Progress::Done => {
                self.sim.active.insert(key.clone(), None);
            }
            Progress::Until(deadline) => {
                self.sim.active.insert(key.clone(), deadline);
            }
        }
        if self.sim.active.contains_key(key) {
            self.wake();
        }
    }

    fn forget_workload(&mut self, key: &Key) {
        self.sim.active.remove(key);
        self.sim.progressed.remove(key);
        self.sim.failing.remove(key);
        self.sim.created.remove(key);
        self.sim.timers.retain(|_, t| &t.workload != key);
    }

    /// The kubelet's part: every pod of `workload` whose timer is due gets its new status.
    fn fire_pod_timers(&mut self, workload: &Key, now: Instant) {
        let due: Vec<Key> = self
            .sim
            .timers
            .iter()
            .filter(|(_, t)| &t.workload == workload && t.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for pod_key in due {
            let Some(mut timer) = self.sim.timers.remove(&pod_key) else {
                continue;
            };
            let Some(pod) = self.object(&pod_key) else {
                continue;
            };
            let state = loop {
                let (state, next) = timer.fire();
                match next {
                    Some(next) if next.due <= now => timer = next,
                    Some(next) => {
                        self.sim.timers.insert(pod_key.clone(), next);
                        break state;
                    }
                    None => break state,
                }
            };
            let updated = pods::with_status((*pod).clone(), &state);
            self.store
                .put_controlled(ids::PODS, &pod_key.1, &pod_key.2, updated, Some(&pod));
        }
    }

    /// Creates a pod for `workload`; it is ready at once when nothing delays it, else it
    /// starts and a timer makes it ready (or failing) after `delay`.
    fn create_pod(
        &mut self,
        workload: &Key,
        pod: Value,
        failure: Option<Failure>,
        delay: Duration,
    ) {
        let ns = meta_str(&pod, "namespace").unwrap_or("").to_owned();
        let name = meta_str(&pod, "name").unwrap_or("").to_owned();
        if failure.is_none() && delay.is_zero() {
            let pod = pods::with_status(pod, &pods::PodState::Ready);
            self.store.put_controlled(ids::PODS, &ns, &name, pod, None);
            return;
        }
        let pod = pods::with_status(pod, &pods::PodState::Starting);
        self.store.put_controlled(ids::PODS, &ns, &name, pod, None);
        let timer = pods::PodTimer {
            workload: workload.clone(),
            due: self.sim_now() + delay,
            failure,
            restarts: 0,
        };
        self.sim.timers.insert((ids::PODS, ns, name), timer);
        self.wake();
    }

    /// Deletes one of the controllers' pods (at once: there is no kubelet to wait for).
    fn remove_pod(&mut self, pod: &Value) {
        let key = (
            ids::PODS,
            meta_str(pod, "namespace").unwrap_or("").to_owned(),
            meta_str(pod, "name").unwrap_or("").to_owned(),
        );
        self.sim.timers.remove(&key);
        self.store.remove_controlled(&key);
    }

    /// The pods `owner` controls, in name order.
    fn pods_of(&self, ns: &str, owner: pods::Owner<'_>) -> Vec<Arc<Value>> {
        self.store
            .named_with_prefix(ids::PODS, ns, &format!("{}-", owner.name))
            .into_iter()
            .filter(|p| owner.owns(p))
            .collect()
    }

    /// The failure of `revision` of `workload`, if it is marked failing.
    fn failure_of(&self, workload: &Key, revision: &str) -> Option<Failure> {
        self.sim
            .failing
            .get(workload)
            .and_then(|f| f.get(revision))
            .cloned()
    }

    /// Writes `status` as the workload's status (through the status subresource's path: a new
    /// resourceVersion and a `MODIFIED` event, no generation bump) unless it is unchanged.
    fn write_status(&mut self, key: &Key, status: Value) {
        let Some(current) = self.object(key) else {
            return;
        };
        if current.get("status") == Some(&status) {
            return;
        }
        let mut next = (*current).clone();
        next["status"] = status;
        if let Err(error) = self
            .store
            .update(key.0, &key.1, &key.2, next, UpdateMode::Status)
        {
            tracing::warn!(%error, "writing a simulated status failed");
        }
    }
}

/// Whether a workload's rollout still moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Nothing more to do (pods may still be starting or crash-looping).
    Done,
    /// In progress; a Deployment's progress deadline, when it has one.
    Until(Option<Instant>),
}

/// An integer at `pointer`, or `default`.
fn int_at(obj: &Value, pointer: &str, default: i64) -> i64 {
    obj.pointer(pointer)
        .and_then(Value::as_i64)
        .unwrap_or(default)
}

#[cfg(test)]
mod tests;
