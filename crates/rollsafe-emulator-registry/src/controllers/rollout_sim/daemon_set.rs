//! The DaemonSet controller's rollout (`pkg/controller/daemon` `daemon_controller.go`,
//! `update.go rollingUpdate`): one pod on each simulated node, created at the update revision;
//! `RollingUpdate` deletes outdated pods — every unavailable one, then available ones while
//! fewer than `maxUnavailable` nodes (a percentage of the nodes rounded up; default 1) lack an
//! available pod — and their nodes get new pods; `OnDelete` replaces only deleted pods.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Pass;
use super::pods::{self, NODES, Owner};
use super::rolling::{daemon_deletions, scaled};
use super::stateful_set::{REVISION_LABEL, revision_of};
use super::{Pace, Progress, int_at, revision_name};
use crate::store::{Key, meta_str};
use rollsafe_emulator_types::resources::ids;
use rollsafe_emulator_types::util;

impl Pass<'_> {
    /// One pass of the daemonset controller over `ds`.
    pub(super) fn reconcile_daemon_set(&mut self, key: &Key, ds: &Value, pace: Pace) -> Progress {
        let ns = key.1.clone();
        let name = key.2.clone();
        let uid = meta_str(ds, "uid").unwrap_or("").to_owned();
        let update_revision = revision_name(ids::DAEMONSETS, ds);
        let rolling = ds.pointer("/spec/updateStrategy/type") != Some(&json!("OnDelete"));
        let nodes = NODES.len() as i64;
        let rolling_update = ds.pointer("/spec/updateStrategy/rollingUpdate");
        let surge = scaled(
            rolling_update.and_then(|r| r.get("maxSurge")),
            nodes,
            true,
            0,
        );
        let mut max_unavailable = scaled(
            rolling_update.and_then(|r| r.get("maxUnavailable")),
            nodes,
            true,
            1,
        );
        if surge <= 0 && max_unavailable <= 0 {
            max_unavailable = 1;
        }
        let owner = Owner {
            kind: "DaemonSet",
            name: &name,
            uid: &uid,
        };
        let template = ds
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let generation = crate::strategy::workloads::template_generation(ds).to_string();
        let per_node = |pods: &[Arc<Value>]| -> Vec<Vec<Arc<Value>>> {
            NODES
                .iter()
                .map(|node| {
                    pods.iter()
                        .filter(|p| p.pointer("/spec/nodeName") == Some(&json!(node)))
                        .cloned()
                        .collect()
                })
                .collect()
        };
        for _ in 0..NODES.len() * 4 + 8 {
            let on_nodes = per_node(&self.pods_of(&ns, owner));
            let mut changed = false;
            for (node, pods) in NODES.iter().zip(&on_nodes) {
                if pods.is_empty() {
                    let pod_name = format!("{name}-{}", util::name_suffix());
                    let labels = [
                        (REVISION_LABEL, update_revision.clone()),
                        ("pod-template-generation", generation.clone()),
                    ];
                    let pod = pods::new_pod(&ns, &pod_name, &template, &labels, owner, node);
                    let failure = self.failure_of(key, &update_revision);
                    self.create_pod(key, pod, failure, pace.delay);
                    changed = true;
                }
                for extra in pods.iter().skip(1) {
                    self.remove_pod(extra);
                    changed = true;
                }
            }
            if changed {
                continue;
            }
            if !rolling {
                break;
            }
            let states: Vec<Option<(bool, bool)>> = on_nodes
                .iter()
                .map(|pods| {
                    pods.first()
                        .map(|p| (revision_of(p) == update_revision, pods::is_ready(p)))
                })
                .collect();
            let deletions = daemon_deletions(&states, max_unavailable);
            if deletions.is_empty() {
                break;
            }
            for node in deletions {
                if let Some(pod) = on_nodes.get(node).and_then(|pods| pods.first()) {
                    self.remove_pod(pod);
                }
            }
        }
        let pods = self.pods_of(&ns, owner);
        let scheduled = per_node(&pods).iter().filter(|p| !p.is_empty()).count() as i64;
        let ready = pods.iter().filter(|p| pods::is_ready(p)).count() as i64;
        let updated = pods
            .iter()
            .filter(|p| revision_of(p) == update_revision)
            .count() as i64;
        if pace.status {
            let mut status = json!({
                "observedGeneration": int_at(ds, "/metadata/generation", 1),
                "desiredNumberScheduled": nodes,
                "currentNumberScheduled": scheduled,
                "numberReady": ready,
                "numberAvailable": ready,
                "updatedNumberScheduled": updated,
                "numberMisscheduled": 0,
            });
            if nodes > ready {
                status["numberUnavailable"] = json!(nodes - ready);
            }
            self.write_status(key, status);
        }
        if ready == nodes && (!rolling || updated == nodes) {
            Progress::Done
        } else {
            Progress::Until(None)
        }
    }
}
