//! The controller-manager's place: the simulated controllers, each a client of the store's
//! public interface, as kube-controller-manager's controllers are clients of the API.
//!
//! - [`rollout_sim`]: the deployment, statefulset and daemonset controllers and the kubelet,
//!   paced by a clock;
//! - [`replica_sets`] and [`controller_revisions`]: the workloads' revision history;
//! - [`recorder`]: the Events those controllers record, through client-go's correlation
//!   ([`event_correlation`]);
//! - [`rollout_log`]: the emulator's own log of pod-template changes (its admin API);
//! - [`disruption`]: the disruption controller, driven by the store's events;
//! - [`namespaces`]: a new namespace's `default` ServiceAccount and `kube-root-ca.crt`.
//!
//! The registry ([`crate::store`]) stores and validates; a [`ControllerManager`] sees each
//! committed write of a workload and each pod deleted through the API, and writes what the
//! controllers would. [`crate::cluster::Cluster`] runs both under one lock, the controllers
//! right after the write they react to, so a write's answer and the objects it makes agree
//! when the pace is instant (what the sandbox and most tests need).

pub mod controller_revisions;
pub mod disruption;
pub mod event_correlation;
pub mod namespaces;
pub mod recorder;
pub mod replica_sets;
pub mod rollout_log;
pub mod rollout_sim;

use serde_json::Value;

use crate::store::{Committed, Key, Pacing, Store, meta_str};
use crate::strategy;
use rollsafe_emulator_types::resources::{def, ids};

/// The simulated controllers' state, beside the store's objects.
#[derive(Debug, Default)]
pub struct ControllerManager {
    /// The rollouts' pace, timers and failing revisions.
    pub(crate) sim: rollout_sim::RolloutSim,
    /// The controllers' event recorder.
    recorder: recorder::Recorder,
    /// The pod-template changes recorded so far.
    log: rollout_log::RolloutLog,
    /// The CA bundle published in every namespace's `kube-root-ca.crt`.
    root_ca: String,
}

impl Pacing for ControllerManager {
    fn paced(&self, key: &Key, workload: &Value) -> bool {
        self.sim.is_paced(key, workload)
    }
}

impl ControllerManager {
    /// The controllers' reaction to a committed write of a main resource (never one of a
    /// status subresource): a new namespace's ServiceAccount and CA bundle; a workload's
    /// Events, its rollout in the log, its revision history and its pods.
    pub fn after_write(&mut self, store: &mut Store, committed: &Committed) {
        let d = def(committed.res);
        if committed.res == ids::NAMESPACES && committed.old.is_none() {
            let name = meta_str(&committed.object, "name").unwrap_or_default();
            namespaces::populate(store, name, &self.root_ca);
        }
        if !strategy::is_workload(d) {
            return;
        }
        let object = &committed.object;
        let old = committed.old.as_deref();
        self.recorder
            .record(store, d, object, old, committed.template_changed);
        if committed.template_changed {
            self.log.record(d, object);
        }
        let mut pass = self.sim.pass(store);
        if committed.template_changed {
            pass.mark_new_revision(committed.res, object);
        }
        pass.sync_history(committed.res, object, committed.paced);
        pass.after_workload_write(committed.res, object, committed.paced);
    }

    /// A pod was deleted through the API (or evicted): its controller replaces it.
    pub fn after_pod_delete(&mut self, store: &mut Store, pod: &Value) {
        self.sim.pass(store).after_pod_delete(pod);
    }

    /// Forgets everything the controllers hold (a store reset), keeping the rollout task's
    /// waker, the clock, whether history is kept and the CA bundle.
    pub fn reset(&mut self) {
        self.sim.reset();
        self.recorder = recorder::Recorder::default();
        self.log.clear();
    }

    /// The CA bundle published in every new namespace's `kube-root-ca.crt`.
    pub fn set_root_ca(&mut self, pem: String) {
        self.root_ca = pem;
    }

    /// The rollout log.
    pub fn rollout_log(&self) -> &rollout_log::RolloutLog {
        &self.log
    }

    /// The rollout log, to clear it.
    pub fn rollout_log_mut(&mut self) -> &mut rollout_log::RolloutLog {
        &mut self.log
    }
}
