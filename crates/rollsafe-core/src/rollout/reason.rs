//! Why a rollout does not move, in Kubernetes' own words where they are safe to repeat.
//!
//! Two sources: a Deployment's `Progressing` condition (`False`, `ProgressDeadlineExceeded`,
//! with the controller's message, which names a ReplicaSet), and the pods' container statuses
//! (`CrashLoopBackOff`, `ImagePullBackOff`, `CreateContainerConfigError`, … or running but not
//! ready). Only a container status's **reason** is carried, never its message: a waiting or
//! terminated message can hold what the application printed, and nothing rollsafe reports may
//! repeat an application's output. Reasons are Kubernetes identifiers; anything that is not one
//! is dropped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The Deployment condition reason of a rollout past its deadline.
pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// The reason rollsafe gives a StatefulSet or DaemonSet that made no progress within the
/// deadline, when its pods say nothing more precise.
pub const NO_PROGRESS: &str = "NoProgress";

/// An Argo Rollout's `status.phase` when it is aborted or past its deadline.
pub const DEGRADED: &str = "Degraded";

/// The reason of pods whose containers run but are not ready (a failing readiness probe).
pub const NOT_READY: &str = "ContainersNotReady";

/// The longest condition message carried.
const MAX_MESSAGE: usize = 256;

/// Why a rollout is stalled.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StallReason {
    /// A Kubernetes reason: the Deployment condition's (`ProgressDeadlineExceeded`), or rollsafe's
    /// `NoProgress`.
    pub reason: String,
    /// The condition's message, when Kubernetes wrote one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the pods of the rollout say, when they were read: the most common container
    /// reason among the pods that are not ready (`CrashLoopBackOff`, `ImagePullBackOff`, …, or
    /// `ContainersNotReady`).
    #[serde(rename = "podReason", default, skip_serializing_if = "Option::is_none")]
    pub pod_reason: Option<String>,
}

impl StallReason {
    /// A Deployment's `Progressing=False` with `ProgressDeadlineExceeded`, if it has one.
    pub fn of_deployment(object: &Value) -> Option<Self> {
        let condition = object
            .pointer("/status/conditions")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some("Progressing"))?;
        let reason = condition.get("reason").and_then(Value::as_str)?;
        if reason != PROGRESS_DEADLINE_EXCEEDED {
            return None;
        }
        Some(Self {
            reason: reason.to_owned(),
            message: condition
                .get("message")
                .and_then(Value::as_str)
                .map(sanitize_message),
            pod_reason: None,
        })
    }

    /// An Argo Rollout whose `status.phase` is `Degraded` without a progress-deadline
    /// condition (aborted, or failed analysis).
    pub fn degraded() -> Self {
        Self {
            reason: DEGRADED.to_owned(),
            message: None,
            pod_reason: None,
        }
    }

    /// rollsafe's own verdict on a workload without a progress condition.
    pub fn no_progress() -> Self {
        Self {
            reason: NO_PROGRESS.to_owned(),
            message: None,
            pod_reason: None,
        }
    }

    /// The same reason, with what `pods` (the workload's pods, as listed) say.
    pub fn with_pods(mut self, pods: &[Value]) -> Self {
        self.pod_reason = pod_reason(pods);
        self
    }

    /// Words for people.
    pub fn describe(&self) -> String {
        let mut out = match self.reason.as_str() {
            PROGRESS_DEADLINE_EXCEEDED => "progress deadline exceeded".to_owned(),
            NO_PROGRESS => "no progress within the progress deadline".to_owned(),
            DEGRADED => "the Rollout is degraded (aborted or failed analysis)".to_owned(),
            other => other.to_owned(),
        };
        if let Some(pods) = &self.pod_reason {
            out.push_str(&format!("; pods: {pods}"));
        }
        if let Some(message) = &self.message {
            out.push_str(&format!(" — {message}"));
        }
        out
    }
}

/// The most common reason among `pods` that are not ready: a container's waiting reason
/// (`CrashLoopBackOff`, `ImagePullBackOff`, …), a terminated one (`Error`, `OOMKilled`), or
/// `ContainersNotReady` for running containers that are not ready. Ties go to the first seen.
pub fn pod_reason(pods: &[Value]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for pod in pods.iter().filter(|p| !pod_ready(p)) {
        let Some(reason) = container_reason(pod) else {
            continue;
        };
        match counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => counts.push((reason, 1)),
        }
    }
    let mut best: Option<(String, usize)> = None;
    for (reason, n) in counts {
        if best.as_ref().is_none_or(|(_, m)| n > *m) {
            best = Some((reason, n));
        }
    }
    best.map(|(reason, _)| reason)
}

fn pod_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn container_reason(pod: &Value) -> Option<String> {
    let statuses = ["initContainerStatuses", "containerStatuses"]
        .into_iter()
        .filter_map(|list| {
            pod.pointer(&format!("/status/{list}"))
                .and_then(Value::as_array)
        })
        .flatten();
    let mut not_ready = false;
    for status in statuses {
        if status.get("ready").and_then(Value::as_bool) == Some(true) {
            continue;
        }
        for state in ["waiting", "terminated"] {
            if let Some(reason) = status
                .pointer(&format!("/state/{state}/reason"))
                .and_then(Value::as_str)
                .filter(|r| is_reason(r))
            {
                return Some(reason.to_owned());
            }
        }
        if let Some(reason) = status
            .pointer("/lastState/terminated/reason")
            .and_then(Value::as_str)
            .filter(|r| is_reason(r))
            && status.pointer("/state/running").is_none()
        {
            return Some(reason.to_owned());
        }
        not_ready = true;
    }
    not_ready.then(|| NOT_READY.to_owned())
}

/// A Kubernetes reason: a CamelCase identifier of ASCII letters and digits, at most 64 long.
fn is_reason(reason: &str) -> bool {
    !reason.is_empty()
        && reason.len() <= 64
        && reason.starts_with(|c: char| c.is_ascii_uppercase())
        && reason.chars().all(|c| c.is_ascii_alphanumeric())
}

/// A condition message on one line, without control characters, at most [`MAX_MESSAGE`] long.
fn sanitize_message(message: &str) -> String {
    let mut out: String = message
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if out.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(ready: bool, statuses: Value) -> Value {
        json!({"status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                          "containerStatuses": statuses}})
    }

    #[test]
    fn pods_say_why_by_their_most_common_reason() {
        let crash = |n| {
            pod(
                false,
                json!([{"name": "app", "ready": false, "restartCount": n,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s: password=hunter2"}}}]),
            )
        };
        let pull = pod(
            false,
            json!([{"name": "app", "ready": false, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]),
        );
        let healthy = pod(
            true,
            json!([{"name": "app", "ready": true, "state": {"running": {}}}]),
        );
        let unready = pod(
            false,
            json!([{"name": "app", "ready": false, "state": {"running": {}}}]),
        );
        let cases: [(Vec<Value>, Option<&str>); 6] = [
            (vec![], None),
            (vec![healthy.clone()], None),
            (
                vec![crash(1), pull.clone(), crash(2)],
                Some("CrashLoopBackOff"),
            ),
            (vec![pull.clone(), crash(1)], Some("ImagePullBackOff")),
            (vec![healthy, unready.clone()], Some(NOT_READY)),
            (
                vec![pod(
                    false,
                    json!([{"name": "a", "ready": false, "state": {"waiting": {"reason": "not a reason; rm -rf"}}}]),
                )],
                Some(NOT_READY),
            ),
        ];
        for (pods, want) in cases {
            assert_eq!(pod_reason(&pods).as_deref(), want, "{pods:?}");
        }
    }

    #[test]
    fn a_deployment_past_its_deadline_says_so_and_no_message_is_carried_from_pods() {
        let deployment = json!({"status": {"conditions": [
            {"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable"},
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
             "message": "ReplicaSet \"api-7d9\" has timed out progressing.\n"}]}});
        let reason = StallReason::of_deployment(&deployment).unwrap();
        assert_eq!(reason.reason, PROGRESS_DEADLINE_EXCEEDED);
        assert_eq!(
            reason.message.as_deref(),
            Some("ReplicaSet \"api-7d9\" has timed out progressing. ")
        );
        let pods = [pod(
            false,
            json!([{"name": "app", "ready": false,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "password=hunter2"}}}]),
        )];
        let reason = reason.with_pods(&pods);
        let text = format!(
            "{} {}",
            reason.describe(),
            serde_json::to_string(&reason).unwrap()
        );
        assert!(text.contains("CrashLoopBackOff"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");

        let progressing = json!({"status": {"conditions": [
            {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}]}});
        assert_eq!(StallReason::of_deployment(&progressing), None);
    }

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        let message = "é".repeat(300);
        let cut = sanitize_message(&message);
        assert!(cut.len() <= MAX_MESSAGE + '…'.len_utf8());
        assert!(cut.ends_with('…'));
    }
}
