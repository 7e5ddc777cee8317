//! The StatefulSet controller's rollout (`pkg/controller/statefulset`
//! `stateful_set_control.go`, `OrderedReady`): pods `<name>-<ordinal>`, created lowest ordinal
//! first, each once those below are ready; `RollingUpdate` replaces one outdated pod at a time
//! from the highest ordinal down to the partition (ordinals below it are created at, and keep,
//! the current revision); `OnDelete` replaces nothing, and a deleted pod comes back at the
//! update revision.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Pass;
use super::pods::{self, NODES, Owner};
use super::rolling::{StatefulStep, stateful_step};
use super::{Pace, Progress, int_at, revision_name};
use crate::store::{Key, meta_str};
use rollsafe_emulator_types::resources::ids;

/// The label with a pod's revision (a ControllerRevision's name).
pub(super) const REVISION_LABEL: &str = "controller-revision-hash";

pub(super) fn revision_of(pod: &Value) -> &str {
    pod.pointer("/metadata/labels")
        .and_then(|l| l.get(REVISION_LABEL))
        .and_then(Value::as_str)
        .unwrap_or("")
}

impl Pass<'_> {
    /// The pod template a ControllerRevision holds, if it is there.
    pub(super) fn revision_template(&self, ns: &str, revision: &str) -> Option<Value> {
        let mut template = self
            .store
            .get(ids::CONTROLLERREVISIONS, ns, revision)?
            .pointer("/data/spec/template")?
            .clone();
        template.as_object_mut()?.remove("$patch");
        Some(template)
    }

    /// One pass of the statefulset controller over `sts`.
    pub(super) fn reconcile_stateful_set(
        &mut self,
        key: &Key,
        sts: &Value,
        pace: Pace,
    ) -> Progress {
        let ns = key.1.clone();
        let name = key.2.clone();
        let uid = meta_str(sts, "uid").unwrap_or("").to_owned();
        let replicas = int_at(sts, "/spec/replicas", 1).max(0);
        let update_revision = revision_name(ids::STATEFULSETS, sts);
        let current_revision = sts
            .pointer("/status/currentRevision")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map_or_else(|| update_revision.clone(), str::to_owned);
        let rolling = sts.pointer("/spec/updateStrategy/type") != Some(&json!("OnDelete"));
        let partition = int_at(sts, "/spec/updateStrategy/rollingUpdate/partition", 0).max(0);
        let owner = Owner {
            kind: "StatefulSet",
            name: &name,
            uid: &uid,
        };
        let prefix = format!("{name}-");
        let ordinals = |pods: &[Arc<Value>]| -> BTreeMap<i64, Arc<Value>> {
            pods.iter()
                .filter_map(|p| {
                    let ordinal = meta_str(p, "name")?.strip_prefix(&prefix)?.parse().ok()?;
                    Some((ordinal, p.clone()))
                })
                .collect()
        };
        let steps = usize::try_from(replicas).unwrap_or(0) * 4 + 8;
        let mut settled = false;
        for _ in 0..steps {
            let by_ordinal = ordinals(&self.pods_of(&ns, owner));
            let states: Vec<Option<(bool, bool)>> = (0..replicas)
                .map(|o| {
                    by_ordinal
                        .get(&o)
                        .map(|p| (revision_of(p) == update_revision, pods::is_ready(p)))
                })
                .collect();
            let extra: Vec<i64> = by_ordinal
                .keys()
                .copied()
                .filter(|o| *o >= replicas)
                .collect();
            match stateful_step(&states, &extra, rolling, partition) {
                StatefulStep::Create(ordinal) => {
                    let revision = if rolling && ordinal < partition {
                        &current_revision
                    } else {
                        &update_revision
                    };
                    let template = self
                        .revision_template(&ns, revision)
                        .or_else(|| sts.pointer("/spec/template").cloned())
                        .unwrap_or_else(|| json!({}));
                    let pod_name = format!("{name}-{ordinal}");
                    let labels = [
                        (REVISION_LABEL, revision.clone()),
                        ("statefulset.kubernetes.io/pod-name", pod_name.clone()),
                        ("apps.kubernetes.io/pod-index", ordinal.to_string()),
                    ];
                    let node = NODES[usize::try_from(ordinal).unwrap_or(0) % NODES.len()];
                    let mut pod = pods::new_pod(&ns, &pod_name, &template, &labels, owner, node);
                    pod["spec"]["hostname"] = json!(pod_name);
                    if let Some(service) = sts.pointer("/spec/serviceName") {
                        pod["spec"]["subdomain"] = service.clone();
                    }
                    let failure = self.failure_of(key, revision);
                    self.create_pod(key, pod, failure, pace.delay);
                }
                StatefulStep::Delete(ordinal) => {
                    if let Some(pod) = by_ordinal.get(&ordinal) {
                        self.remove_pod(pod);
                    }
                }
                StatefulStep::Wait => {
                    settled = states.iter().all(|s| matches!(s, Some((_, true))))
                        && (!rolling
                            || (partition..replicas)
                                .all(|o| matches!(states.get(o as usize), Some(Some((true, _))))));
                    break;
                }
            }
        }
        if pace.status {
            let pods = self.pods_of(&ns, owner);
            let count = pods.len() as i64;
            let ready = pods.iter().filter(|p| pods::is_ready(p)).count() as i64;
            let updated = pods
                .iter()
                .filter(|p| revision_of(p) == update_revision)
                .count() as i64;
            let mut current = pods
                .iter()
                .filter(|p| revision_of(p) == current_revision)
                .count() as i64;
            let mut current_revision = current_revision.clone();
            if rolling && updated == count && ready == count && count == replicas {
                current_revision.clone_from(&update_revision);
                current = updated;
            }
            let status = json!({
                "observedGeneration": int_at(sts, "/metadata/generation", 1),
                "replicas": count,
                "readyReplicas": ready,
                "currentReplicas": current,
                "updatedReplicas": updated,
                "availableReplicas": ready,
                "currentRevision": current_revision,
                "updateRevision": update_revision,
                "collisionCount": 0,
            });
            self.write_status(key, status);
        }
        if settled {
            Progress::Done
        } else {
            Progress::Until(None)
        }
    }
}
