//! `rollsafe why pod/NAME`: a pod-level consumer — who owns the pod, what it consumes (the
//! same reference rules as a pod template, read from the pod's spec), and how it is restarted:
//! with the Deployment, StatefulSet or DaemonSet it belongs to, by eviction when another
//! resource owns it, or not at all when nothing does or when it has finished. The words are the consumers preview's
//! ([`PodConsumers`]). The pod is read once (`get pods`); nothing else is.
//!
//! Output (`-o json`):
//!
//! ```json
//! { "kind": "Pod", "namespace": "shop", "name": "kafka-0",
//!   "owner": { "apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "name": "kafka" },
//!   "operator": true, "workload": null,
//!   "consumes": [ { "kind": "Secret", "name": "db-creds",
//!                   "references": [ { "path": "spec.containers[app].envFrom[].secretRef", … } ] } ],
//!   "restart": { "by": "evict", "reason": "owned by PodGroup/kafka (an operator's resource), …" } }
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;

use k8s_openapi::api::core::v1::Pod;
use rollsafe_core::name::Namespace;
use rollsafe_core::preview::{
    ConsumingPodRef, POD_TEMPLATE_HASH, PodConsumers, PodRestart, workload_of_pod,
};
use rollsafe_core::reference::{self, ConfigRef, TargetKind};
use rollsafe_core::strategy::{Owner, finished_phase};
use rollsafe_core::validation::is_dns1123_subdomain;
use serde::Serialize;
use serde_json::Value;

use super::{Read, ReferenceAt, path_in, read_one};
use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::namespace_flag;
use crate::{process, stdout};

/// The kinds `why` reads as a pod (`pod/NAME`, `po/NAME`, `pods/NAME`).
const POD_KINDS: [&str; 3] = ["pod", "po", "pods"];

/// The name of a `pod/NAME` target, `None` for any other kind.
pub(super) fn target(text: &str) -> Option<anyhow::Result<String>> {
    let (kind, name) = text.split_once('/')?;
    let kind = kind.to_ascii_lowercase();
    if !POD_KINDS.contains(&kind.as_str()) {
        return None;
    }
    Some(if is_dns1123_subdomain(name) {
        Ok(name.to_owned())
    } else {
        Err(anyhow::anyhow!(
            "invalid Pod name {name:?}: a name must be a lowercase RFC 1123 subdomain"
        ))
    })
}

/// The answer for one pod, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PodWhy {
    kind: &'static str,
    namespace: String,
    name: String,
    /// Its controlling owner; `null`: standalone.
    owner: Option<Owner>,
    /// Whether that owner is an operator's resource (not one of Kubernetes' own controllers).
    operator: bool,
    /// The Deployment, StatefulSet or DaemonSet it belongs to (`Deployment/web`), if one.
    workload: Option<String>,
    /// Every Secret and ConfigMap its spec references, sorted by kind and name.
    consumes: Vec<PodConsumed>,
    restart: PodRestartShown,
}

/// One object the pod consumes.
#[derive(Debug, Serialize)]
struct PodConsumed {
    kind: TargetKind,
    name: String,
    references: Vec<ReferenceAt>,
}

/// How the pod is restarted.
#[derive(Debug, Serialize)]
struct PodRestartShown {
    /// `workload` (with the workload it belongs to), `evict`, `not_evicted`, or `finished` (a
    /// pod that `Succeeded` or `Failed`).
    by: &'static str,
    reason: String,
}

/// `rollsafe why pod/NAME`: reads the pod as the identity and prints the answer.
pub(super) fn run(kube: &KubeArgs, output: OutputFormat, name: &str) -> anyhow::Result<ExitCode> {
    let namespace = namespace_flag(kube.namespace.as_deref())?;
    let why = process::runtime()?.block_on(async {
        let session = kube.session(namespace).await?;
        explain(&session.client, &session.namespace, name).await
    })?;
    let out = match output {
        OutputFormat::Json => restart_exit::json(&why)?,
        OutputFormat::Text => text(&why),
    };
    stdout::line(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads the pod and explains it.
async fn explain(
    client: &kube::Client,
    namespace: &Namespace,
    name: &str,
) -> anyhow::Result<PodWhy> {
    let pod = read_pod(client, namespace, name).await?;
    Ok(explain_pod(namespace, name, &pod))
}

fn explain_pod(namespace: &Namespace, name: &str, pod: &Value) -> PodWhy {
    let owner = Owner::controlling(pod).map(|owner| Owner {
        uid: String::new(),
        ..owner
    });
    let hash = pod
        .pointer("/metadata/labels")
        .and_then(|labels| labels.get(POD_TEMPLATE_HASH))
        .and_then(Value::as_str);
    let workload =
        workload_of_pod(owner.as_ref(), hash).map(|(kind, name)| format!("{kind}/{name}"));
    let restart = match (finished_phase(pod), &workload) {
        (Some(phase), _) => PodRestartShown {
            by: "finished",
            reason: format!(
                "finished ({phase}): it runs nothing, so no restart reaches it; not evicted"
            ),
        },
        (None, Some(workload)) => PodRestartShown {
            by: "workload",
            reason: format!(
                "restarted with {workload}, which it belongs to: rollsafe why {}",
                workload.to_ascii_lowercase()
            ),
        },
        (None, None) => {
            let found = PodConsumers::of([ConsumingPodRef {
                name,
                owner: owner.as_ref(),
                pod_template_hash: hash,
            }]);
            let group = found.groups.into_iter().next();
            PodRestartShown {
                by: match group.as_ref().map(|g| g.restart) {
                    Some(PodRestart::NotEvicted) => "not_evicted",
                    _ => "evict",
                },
                reason: group.map(|g| g.reason).unwrap_or_default(),
            }
        }
    };
    let mut consumes: BTreeMap<ConfigRef, Vec<ReferenceAt>> = BTreeMap::new();
    for reference in reference::extract(pod) {
        let config = ConfigRef {
            kind: reference.kind,
            name: reference.name.clone(),
        };
        consumes.entry(config).or_default().push(ReferenceAt {
            path: path_in("spec", &reference.origin, reference.kind),
            reference,
        });
    }
    PodWhy {
        kind: "Pod",
        namespace: namespace.to_string(),
        name: name.to_owned(),
        operator: owner
            .as_ref()
            .is_some_and(|owner| !owner.is_kubernetes_controller()),
        owner,
        workload,
        consumes: consumes
            .into_iter()
            .map(|(config, references)| PodConsumed {
                kind: config.kind,
                name: config.name,
                references,
            })
            .collect(),
        restart,
    }
}

/// Reads the pod; a missing or unreadable one is the command's error (exit 1).
async fn read_pod(
    client: &kube::Client,
    namespace: &Namespace,
    name: &str,
) -> anyhow::Result<Value> {
    let api: kube::Api<Pod> = kube::Api::namespaced(client.clone(), namespace.as_str());
    let what = Read {
        kind: "Pod",
        rbac: " (RBAC: get pods)",
        unserved: None,
    };
    read_one(api, &what, namespace, name).await
}

/// `-o text`: one line per fact.
pub(super) fn text(why: &PodWhy) -> String {
    let mut out = format!("Pod {}/{}", why.namespace, why.name);
    let owner = match (&why.owner, &why.workload) {
        (None, _) => "none (standalone)".to_owned(),
        (Some(owner), Some(workload)) => format!("{owner} ({workload})"),
        (Some(owner), None) if why.operator => format!("{owner} (an operator's resource)"),
        (Some(owner), None) => owner.to_string(),
    };
    out.push_str(&format!("\nowner:     {owner}"));
    if why.consumes.is_empty() {
        out.push_str("\nconsumes:  nothing (no Secret or ConfigMap referenced)");
    }
    for consumed in &why.consumes {
        out.push_str(&format!(
            "\nconsumes:  {}/{}",
            consumed.kind.as_str(),
            consumed.name
        ));
        for reference in &consumed.references {
            out.push_str(&format!("\n             at {}", reference.path));
        }
    }
    out.push_str(&format!("\nrestart:   {}", why.restart.reason));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn namespace() -> Namespace {
        "shop".parse().unwrap_or_else(|_| unreachable!())
    }

    #[test]
    fn pod_targets() {
        assert_eq!(
            target("pod/kafka-0").and_then(Result::ok).as_deref(),
            Some("kafka-0")
        );
        assert_eq!(
            target("PO/kafka-0").and_then(Result::ok).as_deref(),
            Some("kafka-0")
        );
        assert!(target("pods/Bad_Name").is_some_and(|r| r.is_err()));
        assert!(target("deployment/api").is_none());
        assert!(target("api").is_none());
    }

    #[test]
    fn each_owner_says_how_the_pod_is_restarted() {
        let pod = |owner: Value, labels: Value| {
            json!({"metadata": {"ownerReferences": owner, "labels": labels},
                "spec": {"containers": [{"name": "app",
                    "envFrom": [{"secretRef": {"name": "db-creds"}}]}]}})
        };
        let group = json!([{"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup",
            "name": "kafka", "uid": "u", "controller": true}]);
        let why = explain_pod(&namespace(), "kafka-0", &pod(group, json!({})));
        assert_eq!(
            text(&why),
            "Pod shop/kafka-0\n\
             owner:     PodGroup/kafka (an operator's resource)\n\
             consumes:  Secret/db-creds\n             \
             at spec.containers[app].envFrom[].secretRef\n\
             restart:   owned by PodGroup/kafka (an operator's resource), not by a Deployment, StatefulSet or DaemonSet: a template patch does not reach it; rollsafe restart-consumers --strategy evict evicts it one at a time, PodDisruptionBudgets holding, and PodGroup/kafka recreates it"
        );
        let job = json!([{"apiVersion": "batch/v1", "kind": "Job", "name": "migrate",
            "uid": "u", "controller": true}]);
        let mut completed = pod(job, json!({}));
        completed["status"] = json!({"phase": "Succeeded"});
        let why = explain_pod(&namespace(), "migrate-x1", &completed);
        assert_eq!(why.restart.by, "finished");
        assert!(
            text(&why).ends_with(
                "\nrestart:   finished (Succeeded): it runs nothing, so no restart reaches it; not evicted"
            ),
            "{}",
            text(&why)
        );
        let why = explain_pod(&namespace(), "debug", &pod(json!([]), json!({})));
        assert!(
            text(&why).ends_with(
                "owner:     none (standalone)\nconsumes:  Secret/db-creds\n             at spec.containers[app].envFrom[].secretRef\nrestart:   standalone: nothing recreates it, not evicted"
            ),
            "{}",
            text(&why)
        );
        let rs = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c",
            "uid": "u", "controller": true}]);
        let why = explain_pod(
            &namespace(),
            "web-5d8f7c-x",
            &pod(rs, json!({"pod-template-hash": "5d8f7c"})),
        );
        let value = serde_json::to_value(&why).unwrap_or_default();
        assert_eq!(value["workload"], "Deployment/web");
        assert_eq!(value["restart"]["by"], "workload");
        assert_eq!(
            value["restart"]["reason"],
            "restarted with Deployment/web, which it belongs to: rollsafe why deployment/web"
        );
        assert!(value["owner"].get("uid").is_none());
    }
}
