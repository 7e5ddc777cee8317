//! What the new pods of a rollout in progress say, for the rollout view: a note beside the
//! progress, never a verdict (the state stays `progressing` until Kubernetes' own deadline says
//! more).
//!
//! A workload that is `progressing` has its pods read once per view, as the caller (one list by
//! its `spec.selector.matchLabels`, one page of [`POD_PAGE`]; a StatefulSet's narrowed to its
//! update revision, so only the new pods speak), for at most [`MAX_WORKLOADS`] workloads of a
//! view. The note is the core's [`pod_reason`]: the most common reason among the pods that are
//! not ready — a container's waiting reason (`CrashLoopBackOff`, `ImagePullBackOff`, …) and
//! never a message (an application's output is never repeated). When the caller may not list
//! pods, the note says so instead (`notRead: "forbidden"`), and the page says why it cannot
//! show the pods' reason.
//!
//! Added to each such workload of the view: `"pods": {"reason": "CrashLoopBackOff"}` (or
//! `{"reason": null}`: read, nothing to say), or `"pods": {"notRead": "forbidden" |
//! "unavailable"}`.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use rollsafe_core::name::Namespace;
use rollsafe_core::rollout::reason::pod_reason;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::Discovery;
use serde_json::{Value, json};

/// The most progressing workloads of one view whose pods are read.
pub(crate) const MAX_WORKLOADS: usize = 8;
/// Pods read per workload (one page).
pub(crate) const POD_PAGE: u32 = 100;

/// Adds the `pods` note to each progressing workload of `view` (the serialized rollout view of
/// `discovery`), its pods read with `client` (the caller's) within `timeout` each. Without a
/// client (constrained impersonation grants no list of pods as anyone), each note says
/// `notRead: "forbidden"`, as a refused list would, and nothing is sent.
pub(crate) async fn add_notes(
    view: &mut Value,
    discovery: &Discovery,
    client: Option<&kube::Client>,
    namespace: &Namespace,
    timeout: Duration,
) {
    let Some(workloads) = view.get_mut("workloads").and_then(Value::as_array_mut) else {
        return;
    };
    let progressing: Vec<(usize, String)> = workloads
        .iter()
        .enumerate()
        .filter(|(_, workload)| workload["state"] == "progressing")
        .filter_map(|(index, workload)| {
            let object = discovery.matches().find(|found| {
                workload["kind"] == found.kind.as_str() && workload["name"] == found.name.as_str()
            })?;
            Some((index, new_pods_selector(object.kind, object.object())?))
        })
        .take(MAX_WORKLOADS)
        .collect();
    let Some(client) = client else {
        for (index, _) in progressing {
            if let Some(workload) = workloads.get_mut(index) {
                workload["pods"] = json!({ "notRead": "forbidden" });
            }
        }
        return;
    };
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace.as_str());
    let mut reads = tokio::task::JoinSet::new();
    for (index, selector) in progressing {
        let api = api.clone();
        reads.spawn(async move {
            let params = ListParams::default().labels(&selector).limit(POD_PAGE);
            let note = match tokio::time::timeout(timeout, api.list(&params)).await {
                Ok(Ok(pods)) => {
                    let pods: Vec<Value> = pods
                        .items
                        .iter()
                        .filter_map(|pod| serde_json::to_value(pod).ok())
                        .collect();
                    json!({ "reason": pod_reason(&pods) })
                }
                Ok(Err(kube::Error::Api(status))) if status.code == 403 => {
                    json!({ "notRead": "forbidden" })
                }
                Ok(Err(_)) | Err(_) => json!({ "notRead": "unavailable" }),
            };
            (index, note)
        });
    }
    while let Some(read) = reads.join_next().await {
        if let Ok((index, note)) = read
            && let Some(workload) = workloads.get_mut(index)
        {
            workload["pods"] = note;
        }
    }
}

/// The label selector of a workload's new pods: its `spec.selector.matchLabels`, and for a
/// StatefulSet its update revision (`controller-revision-hash`). `None` without match labels.
fn new_pods_selector(kind: WorkloadKind, object: &Value) -> Option<String> {
    let labels = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)?;
    let mut parts: Vec<String> = labels
        .iter()
        .filter_map(|(key, value)| Some(format!("{key}={}", value.as_str()?)))
        .collect();
    if parts.is_empty() {
        return None;
    }
    // A list's items carry no `kind`: the match says it.
    if kind == WorkloadKind::StatefulSet
        && let Some(revision) = object
            .pointer("/status/updateRevision")
            .and_then(Value::as_str)
            .filter(|revision| !revision.is_empty())
    {
        parts.push(format!("controller-revision-hash={revision}"));
    }
    Some(parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_new_pods_of_each_kind() {
        let deployment = json!({"spec": {"selector": {"matchLabels": {"app": "api"}}},
            "status": {"updateRevision": "not-a-deployment-field"}});
        assert_eq!(
            new_pods_selector(WorkloadKind::Deployment, &deployment).as_deref(),
            Some("app=api")
        );
        let stateful = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}},
            "status": {"updateRevision": "db-7c9d"}});
        assert_eq!(
            new_pods_selector(WorkloadKind::StatefulSet, &stateful).as_deref(),
            Some("app=db,controller-revision-hash=db-7c9d")
        );
        let expressions = json!({
            "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}});
        assert_eq!(
            new_pods_selector(WorkloadKind::DaemonSet, &expressions),
            None
        );
    }
}
