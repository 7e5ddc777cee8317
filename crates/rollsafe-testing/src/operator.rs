//! A test custom resource that owns workloads or pods directly — as an operator's resources do
//! (Strimzi's StrimziPodSets, the Prometheus Operator's Prometheus) — for the suites of the
//! eviction strategy and of operator-owned workloads (docs/strategies.md). Real control plane.

use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};

use crate::substrate::{TestNamespace, eventually};

/// The CRD's name: `podgroups.sim.rollsafe.dev`, kind `PodGroup`, namespaced, any fields.
pub const POD_GROUP_CRD: &str = "podgroups.sim.rollsafe.dev";

/// Creates the PodGroup CRD once per control plane (an existing one is kept) and waits until
/// it is served.
pub async fn pod_group_crd(ns: &TestNamespace) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": POD_GROUP_CRD},
        "spec": {
            "group": "sim.rollsafe.dev", "scope": "Namespaced",
            "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    });
    let api = ns.api_for(&crd).await;
    let object: DynamicObject = serde_json::from_value(crd).expect("a CRD");
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the PodGroup CRD: {error}"),
    }
    eventually(
        "the PodGroup CRD is served",
        Duration::from_secs(90),
        || async {
            let crd = api.get_opt(POD_GROUP_CRD).await.ok()??;
            let crd = serde_json::to_value(crd).ok()?;
            crd["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Established" && c["status"] == "True")
                .then_some(())
        },
    )
    .await;
}

/// Creates PodGroup `name` in the namespace and returns it as stored.
pub async fn pod_group(ns: &TestNamespace, name: &str) -> Value {
    ns.apply([json!({"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "metadata": {"name": name}})])
        .await
        .remove(0)
}

/// The `ownerReferences` entry naming `owner` (a stored object) as the controller.
pub fn controlled_by(owner: &Value) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
        "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
        "controller": true
    })
}
