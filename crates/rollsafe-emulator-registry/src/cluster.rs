//! The registry and the controller-manager under one lock: what the emulator's server holds.
//!
//! Every write a client makes goes through a [`Cluster`]: the [`Store`] checks and stores it,
//! then the [`ControllerManager`] sees what was committed — a workload written, a pod deleted
//! or evicted — and writes what the controllers would, through the store's public interface.
//! Reads go straight to the store (`Deref`); nothing here can write past the controllers.

use std::collections::BTreeSet;
use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::controllers::ControllerManager;
use crate::controllers::disruption;
use crate::controllers::rollout_log::Rollout;
use crate::controllers::rollout_sim::{Failure, RolloutPace};
use crate::eviction::{self, Eviction, EvictionError};
use crate::fieldmanager::Tracking;
use crate::store::deletion::{Deleted, Propagation};
use crate::store::{Preconditions, Store, Update, UpdateMode, Write, Written, meta_mut, meta_str};
use rollsafe_emulator_types::resources::{self, ResId, def, ids};
use rollsafe_emulator_types::status::StatusError;

/// The store and the simulated controllers.
#[derive(Debug, Default)]
pub struct Cluster {
    store: Store,
    controllers: ControllerManager,
}

impl Deref for Cluster {
    type Target = Store;

    fn deref(&self) -> &Store {
        &self.store
    }
}

impl Cluster {
    /// An empty cluster.
    pub fn new() -> Self {
        Self::default()
    }

    /// A cluster for unit tests: a manual clock, new pods Ready `pod_ready_millis` after
    /// their creation, and the namespace `shop`.
    #[cfg(test)]
    pub(crate) fn on_manual_clock(pod_ready_millis: u64) -> Self {
        let mut cluster = Self::new();
        cluster.use_manual_clock(Instant::now());
        cluster.set_rollout_settings(RolloutPace {
            pod_ready_millis,
            progress_deadline_scale: 1.0,
        });
        assert!(cluster.ensure_namespace("shop").is_ok());
        cluster
    }

    /// What the controllers do after a create or an update.
    fn settle(&mut self, written: &Written, mode: UpdateMode) {
        if let Written::Stored(committed) = written
            && mode != UpdateMode::Status
        {
            self.controllers.after_write(&mut self.store, committed);
        }
    }

    /// Creates an object (see [`Store::create`]); its controllers react.
    pub fn create(&mut self, res: ResId, obj: Value) -> Result<Arc<Value>, StatusError> {
        self.create_managed(res, obj, Write::Commit, Tracking::Keep)
    }

    /// Creates an object recording field ownership as `tracking` says (see
    /// [`Store::create_managed`]); its controllers react to a committed create.
    pub fn create_managed(
        &mut self,
        res: ResId,
        obj: Value,
        write: Write,
        tracking: Tracking<'_>,
    ) -> Result<Arc<Value>, StatusError> {
        let written = self
            .store
            .create_managed(res, obj, write, tracking, &self.controllers)?;
        self.settle(&written, UpdateMode::Put);
        Ok(written.object().clone())
    }

    /// Replaces an object (see [`Store::update`]): the stored object and whether anything
    /// changed; its controllers react.
    pub fn update(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        new: Value,
        mode: UpdateMode,
    ) -> Result<(Arc<Value>, bool), StatusError> {
        self.update_managed(Update::kept(res, ns, name, new, mode))
    }

    /// Carries out `update` (see [`Store::update_managed`]): the stored object and whether
    /// anything changed; the controllers react to a committed write of the main resource.
    pub fn update_managed(
        &mut self,
        update: Update<'_>,
    ) -> Result<(Arc<Value>, bool), StatusError> {
        let mode = update.mode;
        let written = self.store.update_managed(update, &self.controllers)?;
        self.settle(&written, mode);
        Ok((written.object().clone(), written.changed()))
    }

    /// Deletes an object with background propagation (see [`Store::delete`]).
    pub fn delete(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        pre: &Preconditions,
    ) -> Result<Arc<Value>, StatusError> {
        self.delete_object(res, ns, name, pre, Propagation::Background, Write::Commit)
            .map(|deleted| deleted.object().clone())
    }

    /// DELETE of one object (see [`Store::delete_object`]); a pod gone is replaced by its
    /// controller.
    pub fn delete_object(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        propagation: Propagation,
        write: Write,
    ) -> Result<Deleted, StatusError> {
        let deleted = self
            .store
            .delete_object(res, ns, name, pre, propagation, write)?;
        if res == ids::PODS
            && write == Write::Commit
            && let Deleted::Gone(pod) = &deleted
        {
            self.controllers.after_pod_delete(&mut self.store, pod);
        }
        Ok(deleted)
    }

    /// The eviction subresource (see [`eviction::evict`]): the namespace's budgets synced
    /// first; once the pod is gone, its controller replacing it and the budgets synced again.
    pub fn evict(&mut self, ns: &str, name: &str, request: &Eviction) -> Result<(), EvictionError> {
        let Some(pod) = self.store.get(ids::PODS, ns, name).cloned() else {
            // The registry's own answer: the pod is not found.
            return eviction::evict(&mut self.store, ns, name, request);
        };
        disruption::sync_namespace(&mut self.store, ns);
        eviction::evict(&mut self.store, ns, name, request)?;
        if request.write == Write::Commit && self.store.get(ids::PODS, ns, name).is_none() {
            self.controllers.after_pod_delete(&mut self.store, &pod);
            disruption::sync_namespace(&mut self.store, ns);
        }
        Ok(())
    }

    /// One pass of the disruption controller (see [`disruption::Controller::sync`]).
    pub fn sync_budgets(
        &mut self,
        controller: &mut disruption::Controller,
        namespaces: Option<&BTreeSet<String>>,
    ) {
        controller.sync(&mut self.store, namespaces);
    }

    /// Creates the object, or replaces it without a resourceVersion check: test setup and
    /// seeding. Namespaces the object needs are created.
    pub fn upsert(&mut self, obj: Value) -> Result<Arc<Value>, StatusError> {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        let Some(res) = resources::find_kind(api_version, kind) else {
            return Err(StatusError::bad_request(&format!(
                "no kind \"{kind}\" is registered for version \"{api_version}\""
            )));
        };
        let d = def(res);
        let mut obj = obj;
        let ns = if d.namespaced {
            let ns = meta_str(&obj, "namespace")
                .filter(|s| !s.is_empty())
                .unwrap_or("default")
                .to_string();
            meta_mut(&mut obj).insert("namespace".into(), json!(ns));
            self.ensure_namespace(&ns)?;
            ns
        } else {
            String::new()
        };
        let name = meta_str(&obj, "name").unwrap_or("").to_string();
        if !name.is_empty() && self.store.get(res, &ns, &name).is_some() {
            self.update(res, &ns, &name, obj, UpdateMode::Force)
                .map(|(o, _)| o)
        } else {
            self.create(res, obj)
        }
    }

    /// Creates a namespace when it does not exist; its controllers populate it.
    pub fn ensure_namespace(&mut self, ns: &str) -> Result<(), StatusError> {
        if !self.store.namespace_exists(ns) {
            self.create(
                ids::NAMESPACES,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        Ok(())
    }

    /// Empties the store and forgets what the controllers hold.
    pub fn clear(&mut self) {
        self.store.clear();
        self.controllers.reset();
    }

    /// How long Events live after their last write (see [`Store::set_event_ttl`]).
    pub fn set_event_ttl(&mut self, ttl: Duration) {
        self.store.set_event_ttl(ttl);
    }

    /// Deletes the Events whose TTL has passed (see [`Store::expire_events`]).
    pub fn expire_events(&mut self, now: Instant) -> usize {
        self.store.expire_events(now)
    }

    /// The CA bundle published in every new namespace's `kube-root-ca.crt`.
    pub fn set_root_ca(&mut self, pem: String) {
        self.controllers.set_root_ca(pem);
    }

    /// Expires every continue token issued so far.
    pub fn expire_continue_tokens(&mut self) {
        self.store.expire_continue_tokens();
    }

    /// Forgets the watch history (see [`Store::compact`]).
    pub fn compact(&mut self) {
        self.store.compact();
    }

    /// Whether workload writes keep ReplicaSets, ControllerRevisions and pods (default: yes).
    pub fn set_rollout_history(&mut self, on: bool) {
        self.controllers.sim.history = on;
    }

    /// The recorded rollouts, oldest first.
    pub fn rollouts(&self) -> Vec<Rollout> {
        self.controllers.rollout_log().rollouts()
    }

    /// Forgets the recorded rollouts.
    pub fn clear_rollouts(&mut self) {
        self.controllers.rollout_log_mut().clear();
    }

    /// How the simulated rollouts are paced.
    pub fn rollout_settings(&self) -> RolloutPace {
        self.controllers.sim.settings()
    }

    /// Replaces the pace; rollouts in progress go on at the new one.
    pub fn set_rollout_settings(&mut self, settings: RolloutPace) {
        self.controllers.sim.set_settings(settings);
    }

    /// The task that calls [`Cluster::advance_rollouts`] is woken through `waker` whenever a
    /// rollout starts or a timer is set.
    pub fn set_rollout_waker(&mut self, waker: Arc<Notify>) {
        self.controllers.sim.set_waker(waker);
    }

    /// Reads `now` from a manual clock from here on (tests).
    pub fn use_manual_clock(&mut self, now: Instant) {
        self.controllers.sim.use_manual_clock(now);
    }

    /// Moves the manual clock forward by `by` and the rollouts with it (tests).
    pub fn advance_clock(&mut self, by: Duration) {
        self.controllers.sim.pass(&mut self.store).advance_clock(by);
    }

    /// Moves every rollout in progress to `now`.
    pub fn advance_rollouts(&mut self, now: Instant) {
        self.controllers
            .sim
            .pass(&mut self.store)
            .advance_rollouts(now);
    }

    /// When the next thing of a rollout is due, if anything is.
    pub fn next_rollout_due(&self) -> Option<Instant> {
        self.controllers.sim.next_due()
    }

    /// Whether some rollout is in progress.
    pub fn rollouts_in_progress(&self) -> bool {
        self.controllers.sim.in_progress()
    }

    /// Marks the revision the next template change of this workload produces as failing (the
    /// `rolloutFails` fault, set before its patch is handled).
    pub fn fail_next_revision(&mut self, res: ResId, ns: &str, name: &str, failure: Failure) {
        self.controllers
            .sim
            .fail_next_revision((res, ns.to_owned(), name.to_owned()), failure);
    }

    /// Forgets a [`Cluster::fail_next_revision`] mark no template change used; whether there
    /// was one.
    pub fn cancel_failing_revision(&mut self, res: ResId, ns: &str, name: &str) -> bool {
        self.controllers
            .sim
            .cancel_failing_revision(&(res, ns.to_owned(), name.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i64) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })
    }

    fn pod_names(c: &Cluster) -> Vec<String> {
        c.range(ids::PODS, Some("ns"), None)
            .filter_map(|(_, pod)| meta_str(pod, "name").map(str::to_owned))
            .collect()
    }

    #[test]
    fn the_controllers_see_what_the_store_committed_and_nothing_else() {
        let mut c = Cluster::new();
        assert!(c.ensure_namespace("ns").is_ok());
        assert!(c.create(ids::DEPLOYMENTS, deployment(2)).is_ok());
        // The deployment controller made its ReplicaSet and the pods, Ready at once.
        assert_eq!(c.range(ids::REPLICASETS, Some("ns"), None).count(), 1);
        assert_eq!(pod_names(&c).len(), 2);
        assert!(c.rollouts().is_empty(), "a create is not a template change");

        let mut changed = (**c
            .get(ids::DEPLOYMENTS, "ns", "web")
            .unwrap_or(&Arc::default()))
        .clone();
        changed["spec"]["template"]["metadata"]["annotations"] = json!({"x": "1"});
        let dry = c.update_managed(Update {
            res: ids::DEPLOYMENTS,
            ns: "ns",
            name: "web",
            object: changed.clone(),
            mode: UpdateMode::Put,
            write: Write::DryRun,
            tracking: Tracking::Keep,
        });
        assert_eq!(dry.ok().map(|(_, changed)| changed), Some(true));
        assert!(c.rollouts().is_empty(), "a dry run reaches no controller");
        assert_eq!(c.range(ids::REPLICASETS, Some("ns"), None).count(), 1);

        let written = c.update(ids::DEPLOYMENTS, "ns", "web", changed, UpdateMode::Put);
        assert_eq!(written.ok().map(|(_, changed)| changed), Some(true));
        let rollouts = c.rollouts();
        assert_eq!(rollouts.len(), 1);
        assert!(rollouts[0].rolled);
        assert_eq!(c.range(ids::REPLICASETS, Some("ns"), None).count(), 2);

        // A pod deleted through the API is replaced; its name is new.
        let before = pod_names(&c);
        let victim = before[0].clone();
        assert!(
            c.delete(ids::PODS, "ns", &victim, &Preconditions::default())
                .is_ok()
        );
        let after = pod_names(&c);
        assert_eq!(after.len(), 2);
        assert!(!after.contains(&victim));

        // A new namespace got its ServiceAccount and CA bundle from its controllers.
        assert!(c.get(ids::SERVICEACCOUNTS, "ns", "default").is_some());
        assert!(c.get(ids::CONFIGMAPS, "ns", "kube-root-ca.crt").is_some());

        // The store alone stores: a write through it reaches no controller.
        let mut store = Store::new();
        assert!(store.ensure_namespace("ns").is_ok());
        assert!(store.get(ids::SERVICEACCOUNTS, "ns", "default").is_none());
        assert!(store.create(ids::DEPLOYMENTS, deployment(2)).is_ok());
        assert_eq!(store.range(ids::REPLICASETS, Some("ns"), None).count(), 0);
        assert_eq!(store.range(ids::PODS, Some("ns"), None).count(), 0);
    }
}
