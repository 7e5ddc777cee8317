//! The Pods the simulated controllers create, and the simulated kubelet's view of them: a pod
//! is created `Pending` with its containers `ContainerCreating`, becomes `Running` and ready
//! once its start time has passed, or — when its revision is marked failing — keeps its
//! containers `waiting` with the failure's reason and message, restarting with a doubling
//! back-off as kubelet's `CrashLoopBackOff` does.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::store::meta_str;
use rollsafe_emulator_types::util;

pub use crate::nodes::NODES;

/// The first crash-loop back-off of a failing pod (kubelet's is 10 s, doubling to 5 min).
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
/// The longest back-off.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Why the pods of a revision never become ready (the `rolloutFails` fault).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The containers' waiting reason (`CrashLoopBackOff`).
    pub reason: String,
    /// Its message.
    pub message: String,
}

/// A pod's controller: kind, name, uid.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    /// `ReplicaSet`, `StatefulSet` or `DaemonSet`.
    pub kind: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its uid.
    pub uid: &'a str,
}

impl Owner<'_> {
    /// Whether `obj`'s controller reference names this owner.
    pub fn owns(&self, obj: &Value) -> bool {
        obj.pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|refs| {
                refs.iter().any(|r| {
                    r.get("uid").and_then(Value::as_str) == Some(self.uid)
                        && r.get("controller") == Some(&Value::Bool(true))
                })
            })
    }
}

/// A new pod of `template`, named `name`, with `labels` added to the template's, owned by
/// `owner` and bound to `node`.
pub fn new_pod(
    ns: &str,
    name: &str,
    template: &Value,
    labels: &[(&str, String)],
    owner: Owner<'_>,
    node: &str,
) -> Value {
    let mut metadata = template
        .get("metadata")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (key, value) in labels {
        metadata["labels"][*key] = json!(value);
    }
    metadata["name"] = json!(name);
    metadata["namespace"] = json!(ns);
    metadata["ownerReferences"] = json!([{
        "apiVersion": "apps/v1", "kind": owner.kind, "name": owner.name, "uid": owner.uid,
        "controller": true, "blockOwnerDeletion": true,
    }]);
    let mut spec = template.get("spec").cloned().unwrap_or_else(|| json!({}));
    spec["nodeName"] = json!(node);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

/// Where a pod's containers are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodState {
    /// Created, containers starting.
    Starting,
    /// Running and ready.
    Ready,
    /// Never ready: waiting with the failure, after `restarts` restarts.
    Failing(Failure, u32),
}

/// The pod's condition of `kind` as `status` (`"True"`/`"False"`), keeping the previous
/// transition time while the status holds.
fn condition(pod: &Value, kind: &str, status: &str, reason: Option<&str>, now: &str) -> Value {
    let previous = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind));
    let since = match previous {
        Some(p) if p["status"] == status => p["lastTransitionTime"].clone(),
        _ => json!(now),
    };
    let mut c = json!({"type": kind, "status": status, "lastProbeTime": null,
                       "lastTransitionTime": since});
    if let Some(reason) = reason {
        c["reason"] = json!(reason);
        let names: Vec<&str> = container_names(pod);
        c["message"] = json!(format!(
            "containers with unready status: [{}]",
            names.join(" ")
        ));
    }
    c
}

fn container_names(pod: &Value) -> Vec<&str> {
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .filter_map(|c| c.get("name").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default()
}

/// A stable pod IP from the pod's name, in the 10.244.0.0/16 pod network.
fn pod_ip(name: &str) -> String {
    let sum = name
        .bytes()
        .fold(0_u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.244.{}.{}", (sum >> 8) % 256, sum % 254 + 1)
}

/// `pod` with the status kubelet would report in `state`.
pub fn with_status(mut pod: Value, state: &PodState) -> Value {
    let now = util::now_seconds();
    let started = pod
        .pointer("/status/startTime")
        .cloned()
        .unwrap_or_else(|| json!(now));
    let ready = *state == PodState::Ready;
    let not_ready = (!ready).then_some("ContainersNotReady");
    let scheduled = condition(&pod, "PodScheduled", "True", None, &now);
    let initialized = condition(&pod, "Initialized", "True", None, &now);
    let sandbox = condition(
        &pod,
        "PodReadyToStartContainers",
        if *state == PodState::Starting {
            "False"
        } else {
            "True"
        },
        None,
        &now,
    );
    let ready_condition = condition(
        &pod,
        "Ready",
        if ready { "True" } else { "False" },
        not_ready,
        &now,
    );
    let containers_ready = condition(
        &pod,
        "ContainersReady",
        if ready { "True" } else { "False" },
        not_ready,
        &now,
    );
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let name = c.get("name").cloned().unwrap_or(Value::Null);
                    let image = c.get("image").cloned().unwrap_or(Value::Null);
                    let mut s = json!({"name": name, "image": image, "imageID": "",
                                       "ready": ready, "started": ready, "restartCount": 0});
                    match state {
                        PodState::Starting => {
                            s["state"] = json!({"waiting": {"reason": "ContainerCreating"}});
                        }
                        PodState::Ready => {
                            s["state"] = json!({"running": {"startedAt": started}});
                        }
                        PodState::Failing(failure, restarts) => {
                            s["restartCount"] = json!(restarts);
                            s["state"] = json!({"waiting": {"reason": failure.reason,
                                                            "message": failure.message}});
                            if *restarts > 0 {
                                s["lastState"] = json!({"terminated": {
                                    "exitCode": 1, "reason": "Error",
                                    "startedAt": now, "finishedAt": now}});
                            }
                        }
                    }
                    s
                })
                .collect()
        })
        .unwrap_or_default();
    let phase = if *state == PodState::Starting {
        "Pending"
    } else {
        "Running"
    };
    let name = meta_str(&pod, "name").unwrap_or("").to_owned();
    pod["status"] = json!({
        "phase": phase,
        "conditions": [sandbox, initialized, ready_condition, containers_ready, scheduled],
        "hostIP": "10.0.0.1",
        "hostIPs": [{"ip": "10.0.0.1"}],
        "podIP": pod_ip(&name),
        "podIPs": [{"ip": pod_ip(&name)}],
        "startTime": started,
        "containerStatuses": containers,
        "qosClass": "BestEffort",
    });
    pod
}

/// Whether the pod's `Ready` condition is true.
pub fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

/// What the simulated kubelet still has to do to one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodTimer {
    /// The workload the pod belongs to (through its ReplicaSet for Deployments).
    pub workload: crate::store::Key,
    /// When the next change is due.
    pub due: Instant,
    /// The failure, for a pod of a failing revision.
    pub failure: Option<Failure>,
    /// Restarts so far.
    pub restarts: u32,
}

impl PodTimer {
    /// The state the pod reaches at `due`, and the timer after it (`None`: nothing more to do).
    pub fn fire(&self) -> (PodState, Option<Self>) {
        match &self.failure {
            None => (PodState::Ready, None),
            Some(failure) => {
                let backoff = FIRST_BACKOFF
                    .saturating_mul(1_u32 << self.restarts.min(8))
                    .min(MAX_BACKOFF);
                let next = Self {
                    due: self.due + backoff,
                    restarts: self.restarts + 1,
                    ..self.clone()
                };
                (
                    PodState::Failing(failure.clone(), self.restarts),
                    Some(next),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod() -> Value {
        new_pod(
            "shop",
            "web-abc-x1",
            &json!({"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "app", "image": "app:1"}]}}),
            &[("pod-template-hash", "abc".to_owned())],
            Owner {
                kind: "ReplicaSet",
                name: "web-abc",
                uid: "u1",
            },
            NODES[0],
        )
    }

    #[test]
    fn a_pod_starts_then_becomes_ready() {
        let starting = with_status(pod(), &PodState::Starting);
        assert_eq!(starting["status"]["phase"], "Pending");
        assert!(!is_ready(&starting));
        assert_eq!(
            starting["status"]["containerStatuses"][0]["state"]["waiting"]["reason"],
            "ContainerCreating"
        );
        let ready = with_status(starting, &PodState::Ready);
        assert!(is_ready(&ready));
        assert_eq!(ready["status"]["phase"], "Running");
        assert_eq!(ready["metadata"]["labels"]["pod-template-hash"], "abc");
        assert_eq!(ready["spec"]["nodeName"], "node-1");
        assert!(
            Owner {
                kind: "ReplicaSet",
                name: "web-abc",
                uid: "u1"
            }
            .owns(&ready)
        );
    }

    #[test]
    fn a_failing_pod_waits_and_restarts_with_a_growing_back_off() {
        let failure = Failure {
            reason: "CrashLoopBackOff".into(),
            message: "back-off".into(),
        };
        let t0 = Instant::now();
        let timer = PodTimer {
            workload: (0, "shop".into(), "web".into()),
            due: t0,
            failure: Some(failure.clone()),
            restarts: 0,
        };
        let (state, next) = timer.fire();
        assert_eq!(state, PodState::Failing(failure.clone(), 0));
        let next = next.unwrap();
        assert_eq!((next.due - t0, next.restarts), (FIRST_BACKOFF, 1));
        let (state, after) = next.fire();
        assert_eq!(state, PodState::Failing(failure.clone(), 1));
        assert_eq!(after.unwrap().due - t0, FIRST_BACKOFF * 3);
        let failing = with_status(pod(), &PodState::Failing(failure, 2));
        let status = &failing["status"]["containerStatuses"][0];
        assert_eq!(status["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(status["restartCount"], 2);
        assert!(!is_ready(&failing));
    }
}
