//! The deployment controller's rollout (`pkg/controller/deployment`: `rolling.go`,
//! `recreate.go`, `progress.go`, `sync.go calculateStatus`) over the ReplicaSets of
//! `store/replica_sets.rs`, and the ReplicaSet controller's part: pods made and removed to
//! match each ReplicaSet's replicas, not-ready pods removed first.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Pass;
use super::pods::{self, NODES, Owner};
use super::rolling::{self, Counts};
use super::{Pace, Progress, int_at};
use crate::controllers::replica_sets::{revision, same_template};
use crate::store::{Key, meta_str};
use rollsafe_emulator_types::resources::ids;
use rollsafe_emulator_types::util;

const PROGRESSING: &str = "Progressing";
const AVAILABLE: &str = "Available";
const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
const TIMED_OUT: &str = "ProgressDeadlineExceeded";
const PAUSED: &str = "DeploymentPaused";

/// `SetDeploymentCondition`: the condition is set unless one of the same status and reason is
/// there; the transition time stays while the status holds.
fn set_condition(
    conditions: &mut Vec<Value>,
    kind: &str,
    status: &str,
    reason: &str,
    message: &str,
) {
    let now = json!(util::now_seconds());
    let mut transition = now.clone();
    if let Some(current) = conditions.iter().find(|c| c["type"] == kind) {
        if current["status"] == status && current["reason"] == reason {
            return;
        }
        if current["status"] == status {
            transition = current["lastTransitionTime"].clone();
        }
    }
    conditions.retain(|c| c["type"] != kind);
    conditions.push(
        json!({"type": kind, "status": status, "lastUpdateTime": now,
                           "lastTransitionTime": transition, "reason": reason,
                           "message": message}),
    );
}

/// The Progressing condition after progress: lastUpdateTime now, even with the same reason.
fn set_progressing(conditions: &mut Vec<Value>, rs: &str) {
    let now = json!(util::now_seconds());
    let transition = conditions
        .iter()
        .find(|c| c["type"] == PROGRESSING && c["status"] == "True")
        .map_or_else(|| now.clone(), |c| c["lastTransitionTime"].clone());
    conditions.retain(|c| c["type"] != PROGRESSING);
    conditions.push(
        json!({"type": PROGRESSING, "status": "True", "lastUpdateTime": now,
                           "lastTransitionTime": transition, "reason": "ReplicaSetUpdated",
                           "message": format!("ReplicaSet \"{rs}\" is progressing.")}),
    );
}

fn reason_of<'a>(conditions: &'a [Value], kind: &str) -> Option<&'a str> {
    conditions
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["reason"].as_str())
}

/// One ReplicaSet's pods: how many, how many ready.
#[derive(Debug, Clone, Copy, Default)]
struct PodCounts {
    total: i64,
    ready: i64,
}

impl Pass<'_> {
    /// The ReplicaSets a Deployment controls, oldest revision first.
    fn replica_sets_of(&self, deployment: &Value) -> Vec<Arc<Value>> {
        let ns = meta_str(deployment, "namespace").unwrap_or("");
        let uid = meta_str(deployment, "uid").unwrap_or("");
        let prefix = format!("{}-", meta_str(deployment, "name").unwrap_or(""));
        let owner = Owner {
            kind: "Deployment",
            name: "",
            uid,
        };
        let mut sets: Vec<Arc<Value>> = self
            .store
            .named_with_prefix(ids::REPLICASETS, ns, &prefix)
            .into_iter()
            .filter(|rs| owner.owns(rs))
            .collect();
        sets.sort_by_key(|rs| revision(rs));
        sets
    }

    fn rs_pods(&self, rs: &Value) -> Vec<Arc<Value>> {
        let owner = Owner {
            kind: "ReplicaSet",
            name: meta_str(rs, "name").unwrap_or(""),
            uid: meta_str(rs, "uid").unwrap_or(""),
        };
        self.pods_of(meta_str(rs, "namespace").unwrap_or(""), owner)
    }

    fn rs_counts(&self, rs: &Value) -> PodCounts {
        let pods = self.rs_pods(rs);
        PodCounts {
            total: pods.len() as i64,
            ready: pods.iter().filter(|p| pods::is_ready(p)).count() as i64,
        }
    }

    /// The ReplicaSet controller: pods made or removed until `rs` has `spec.replicas`; whether
    /// anything changed.
    fn sync_rs_pods(&mut self, workload: &Key, rs: &Value, delay: Duration) -> bool {
        let want = int_at(rs, "/spec/replicas", 0).max(0);
        let ns = meta_str(rs, "namespace").unwrap_or("").to_owned();
        let name = meta_str(rs, "name").unwrap_or("").to_owned();
        let mut have = self.rs_pods(rs);
        let count = have.len() as i64;
        if count > want {
            // Not-ready pods go first, then the newest.
            have.sort_by_key(|p| pods::is_ready(p));
            let excess = usize::try_from(count - want).unwrap_or(0);
            for pod in have.iter().take(excess) {
                self.remove_pod(pod);
            }
            return true;
        }
        if count == want {
            return false;
        }
        let owner = Owner {
            kind: "ReplicaSet",
            name: &name,
            uid: meta_str(rs, "uid").unwrap_or(""),
        };
        let template = rs
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let failure = self.failure_of(workload, &name);
        for i in count..want {
            let pod_name = loop {
                let candidate = format!("{name}-{}", util::name_suffix());
                if self.store.get(ids::PODS, &ns, &candidate).is_none() {
                    break candidate;
                }
            };
            let node = NODES[usize::try_from(i).unwrap_or(0) % NODES.len()];
            let pod = pods::new_pod(&ns, &pod_name, &template, &[], owner, node);
            self.create_pod(workload, pod, failure.clone(), delay);
        }
        true
    }

    /// Sets a ReplicaSet's replicas.
    fn scale_rs(&mut self, rs: &Value, replicas: i64, desired: i64) {
        let mut next = rs.clone();
        next["spec"]["replicas"] = json!(replicas);
        next["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] =
            json!(desired.to_string());
        let ns = meta_str(rs, "namespace").unwrap_or("").to_owned();
        let name = meta_str(rs, "name").unwrap_or("").to_owned();
        self.store
            .put_controlled(ids::REPLICASETS, &ns, &name, next, Some(rs));
    }

    /// The ReplicaSet's status from its pods.
    fn write_rs_status(&mut self, rs: &Value) {
        let counts = self.rs_counts(rs);
        let status = json!({
            "replicas": counts.total, "fullyLabeledReplicas": counts.total,
            "readyReplicas": counts.ready, "availableReplicas": counts.ready,
            "observedGeneration": int_at(rs, "/metadata/generation", 1),
        });
        if rs.get("status") == Some(&status) {
            return;
        }
        let mut next = rs.clone();
        next["status"] = status;
        let ns = meta_str(rs, "namespace").unwrap_or("").to_owned();
        let name = meta_str(rs, "name").unwrap_or("").to_owned();
        self.store
            .put_controlled(ids::REPLICASETS, &ns, &name, next, Some(rs));
    }

    /// The new ReplicaSet's and the old ones' wanted replicas for one step.
    fn deployment_step(&self, deployment: &Value, sets: &[Arc<Value>], new: usize) -> Vec<i64> {
        let replicas = int_at(deployment, "/spec/replicas", 1);
        let strategy = deployment.pointer("/spec/strategy");
        let counts: Vec<Counts> = sets
            .iter()
            .map(|rs| Counts {
                spec: int_at(rs, "/spec/replicas", 0),
                available: self.rs_counts(rs).ready,
            })
            .collect();
        let old: Vec<Counts> = counts
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != new)
            .map(|(_, c)| *c)
            .collect();
        let (new_spec, old_specs) =
            if strategy.and_then(|s| s.get("type")).and_then(Value::as_str) == Some("Recreate") {
                // Every old pod goes first; the new set scales up once none is left.
                let old_pods: i64 = sets
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != new)
                    .map(|(_, rs)| self.rs_counts(rs).total)
                    .sum();
                let new_spec = if old_pods == 0 && old.iter().all(|c| c.spec == 0) {
                    replicas
                } else {
                    counts[new].spec
                };
                (new_spec, vec![0; old.len()])
            } else {
                let posts =
                    rolling::fenceposts(strategy.and_then(|s| s.get("rollingUpdate")), replicas);
                rolling::rolling_step(replicas, posts, counts[new], &old)
            };
        let mut old_specs = old_specs.into_iter();
        (0..sets.len())
            .map(|i| {
                if i == new {
                    new_spec
                } else {
                    old_specs.next().unwrap_or(0)
                }
            })
            .collect()
    }

    /// One pass of the deployment controller over `deployment`.
    pub(super) fn reconcile_deployment(
        &mut self,
        key: &Key,
        deployment: &Value,
        pace: Pace,
        now: Instant,
    ) -> Progress {
        if !pace.status {
            // Final at once: the ReplicaSets are already scaled; their pods follow.
            for rs in self.replica_sets_of(deployment) {
                self.sync_rs_pods(key, &rs, Duration::ZERO);
            }
            return Progress::Done;
        }
        let replicas = int_at(deployment, "/spec/replicas", 1);
        let paused = deployment.pointer("/spec/paused") == Some(&Value::Bool(true));
        let template = deployment.pointer("/spec/template");
        let steps = usize::try_from(replicas.max(0)).unwrap_or(0) * 4 + 8;
        for _ in 0..steps {
            let sets = self.replica_sets_of(deployment);
            let mut changed = false;
            for rs in &sets {
                changed |= self.sync_rs_pods(key, rs, pace.delay);
            }
            let new = sets.iter().position(|rs| same_template(rs, template));
            if let (Some(new), false) = (new, paused) {
                let sets = self.replica_sets_of(deployment);
                let wanted = self.deployment_step(deployment, &sets, new);
                for (rs, want) in sets.iter().zip(wanted) {
                    if int_at(rs, "/spec/replicas", 0) != want {
                        self.scale_rs(rs, want, replicas);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        let sets = self.replica_sets_of(deployment);
        for rs in &sets {
            self.write_rs_status(rs);
        }
        let sets = self.replica_sets_of(deployment);
        let new = sets.iter().find(|rs| same_template(rs, template));
        let status = self.deployment_status(key, deployment, &sets, new.map(|rs| &**rs), now);
        let progress = match reason_of(
            status["conditions"]
                .as_array()
                .map_or(&[][..], Vec::as_slice),
            PROGRESSING,
        ) {
            _ if paused => Progress::Done,
            Some(NEW_RS_AVAILABLE | TIMED_OUT) => Progress::Done,
            _ => Progress::Until(self.deadline(key, deployment)),
        };
        self.write_status(key, status);
        progress
    }

    /// When the Deployment's progress deadline passes, counting from its last progress.
    fn deadline(&self, key: &Key, deployment: &Value) -> Option<Instant> {
        let seconds = deployment
            .pointer("/spec/progressDeadlineSeconds")
            .and_then(Value::as_f64)?;
        let scaled = seconds * self.sim.settings.progress_deadline_scale;
        let since = self.sim.progressed.get(key)?;
        Some(*since + Duration::try_from_secs_f64(scaled.max(0.0)).unwrap_or(Duration::MAX / 4))
    }

    /// `calculateStatus` and `syncRolloutStatus`: counts from the ReplicaSets' pods, the
    /// Available condition from the minimum availability, Progressing from what moved since
    /// the status before.
    fn deployment_status(
        &mut self,
        key: &Key,
        deployment: &Value,
        sets: &[Arc<Value>],
        new: Option<&Value>,
        now: Instant,
    ) -> Value {
        let replicas = int_at(deployment, "/spec/replicas", 1);
        let old = deployment
            .get("status")
            .cloned()
            .unwrap_or_else(|| json!({}));
        let counts: Vec<PodCounts> = sets.iter().map(|rs| self.rs_counts(rs)).collect();
        let total: i64 = counts.iter().map(|c| c.total).sum();
        let ready: i64 = counts.iter().map(|c| c.ready).sum();
        let spec_total: i64 = sets.iter().map(|rs| int_at(rs, "/spec/replicas", 0)).sum();
        let updated = new.map_or(0, |rs| self.rs_counts(rs).total);
        let available = ready;
        let mut status = json!({
            "observedGeneration": int_at(deployment, "/metadata/generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": available,
        });
        if spec_total - available > 0 {
            status["unavailableReplicas"] = json!(spec_total - available);
        }
        let mut conditions: Vec<Value> = old
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let (_, max_unavailable) =
            rolling::fenceposts(deployment.pointer("/spec/strategy/rollingUpdate"), replicas);
        let max_unavailable =
            if deployment.pointer("/spec/strategy/type") == Some(&json!("RollingUpdate")) {
                max_unavailable
            } else {
                0
            };
        if available >= replicas - max_unavailable {
            set_condition(
                &mut conditions,
                AVAILABLE,
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
            );
        } else {
            set_condition(
                &mut conditions,
                AVAILABLE,
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
            );
        }
        let paused = deployment.pointer("/spec/paused") == Some(&Value::Bool(true));
        if paused {
            set_condition(
                &mut conditions,
                PROGRESSING,
                "Unknown",
                PAUSED,
                "Deployment is paused",
            );
        } else if let Some(new) = new {
            let rs_name = meta_str(new, "name").unwrap_or("");
            if reason_of(&conditions, PROGRESSING) == Some(PAUSED) {
                set_condition(
                    &mut conditions,
                    PROGRESSING,
                    "Unknown",
                    "DeploymentResumed",
                    "Deployment is resumed",
                );
            }
            if self.sim.created.remove(key) {
                set_condition(
                    &mut conditions,
                    PROGRESSING,
                    "True",
                    "NewReplicaSetCreated",
                    &format!("Created new replica set \"{rs_name}\""),
                );
                self.sim.progressed.insert(key.clone(), now);
            } else if reason_of(&conditions, PROGRESSING).is_none() {
                set_condition(
                    &mut conditions,
                    PROGRESSING,
                    "True",
                    "FoundNewReplicaSet",
                    &format!("Found new replica set \"{rs_name}\""),
                );
                self.sim.progressed.insert(key.clone(), now);
            }
            self.sim.progressed.entry(key.clone()).or_insert(now);
            let complete = updated == replicas && total == replicas && available == replicas;
            let was_complete =
                total == updated && reason_of(&conditions, PROGRESSING) == Some(NEW_RS_AVAILABLE);
            let old_int = |field: &str| int_at(&old, &format!("/{field}"), 0);
            let progressed = updated > old_int("updatedReplicas")
                || total - updated < old_int("replicas") - old_int("updatedReplicas")
                || ready > old_int("readyReplicas")
                || available > old_int("availableReplicas");
            if was_complete {
                // Settled: nothing to say until the template changes again.
            } else if complete {
                set_condition(
                    &mut conditions,
                    PROGRESSING,
                    "True",
                    NEW_RS_AVAILABLE,
                    &format!("ReplicaSet \"{rs_name}\" has successfully progressed."),
                );
            } else if progressed {
                set_progressing(&mut conditions, rs_name);
                self.sim.progressed.insert(key.clone(), now);
            } else if reason_of(&conditions, PROGRESSING) == Some(TIMED_OUT)
                || self.deadline(key, deployment).is_some_and(|d| d < now)
            {
                set_condition(
                    &mut conditions,
                    PROGRESSING,
                    "False",
                    TIMED_OUT,
                    &format!("ReplicaSet \"{rs_name}\" has timed out progressing."),
                );
            }
        }
        // The order the emulator has always written: Available, then Progressing.
        conditions.sort_by_key(|c| c["type"] != AVAILABLE);
        status["conditions"] = json!(conditions);
        status
    }
}
