//! Deletion as on a real cluster: finalizers hold an object marked with `deletionTimestamp`,
//! `propagationPolicy` decides what happens to its dependents, and a namespace waits for what
//! it holds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/shop/configmaps";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";
const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

fn held_configmap(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "finalizers": ["example.com/hold"]}, "data": {"k": "v"}})
}

#[tokio::test]
async fn a_finalizer_holds_the_object_until_the_last_one_is_lifted() {
    let emu = start().await;
    let (status, _, _) = send(&emu, "POST", CONFIGMAPS, JSON, &held_configmap("held")).await;
    assert_eq!(status, 201);
    let path = format!("{CONFIGMAPS}/held");

    let (status, _, body) = send(&emu, "DELETE", &path, JSON, &json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["kind"], "ConfigMap", "the object, not a Status");
    assert!(body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(body["metadata"]["deletionGracePeriodSeconds"], 0);
    let held = emu.get_object("configmaps", Some("shop"), "held").unwrap();
    assert_eq!(
        held["metadata"]["deletionTimestamp"],
        body["metadata"]["deletionTimestamp"]
    );

    // A second DELETE changes nothing.
    let (status, _, again) = send(&emu, "DELETE", &path, JSON, &json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(
        again["metadata"]["resourceVersion"],
        body["metadata"]["resourceVersion"]
    );

    // No new finalizer while it is being deleted; the timestamp cannot be cleared.
    let (status, _, refused) = send(
        &emu,
        "PATCH",
        &path,
        MERGE,
        &json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        refused["message"],
        "ConfigMap \"held\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"example.com/more\"}"
    );
    let (status, _, _) = send(
        &emu,
        "PATCH",
        &path,
        MERGE,
        &json!({"metadata": {"deletionTimestamp": null}, "data": {"k": "w"}}),
    )
    .await;
    assert_eq!(status, 200);
    let still = emu.get_object("configmaps", Some("shop"), "held").unwrap();
    assert!(still["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(still["data"]["k"], "w");

    // Lifting the last finalizer removes it.
    let (status, _, last) = send(
        &emu,
        "PATCH",
        &path,
        MERGE,
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(status, 200, "{last}");
    assert!(emu.get_object("configmaps", Some("shop"), "held").is_none());
    let (status, _, _) = send(&emu, "GET", &path, JSON, &json!({})).await;
    assert_eq!(status, 404);
    emu.shutdown().await;
}

#[tokio::test]
async fn propagation_policies_decide_what_happens_to_the_replica_sets() {
    let emu = start().await;
    for name in ["fg", "bg", "orphan"] {
        let (status, _, _) = send(&emu, "POST", DEPLOYMENTS, JSON, &deployment("shop", name)).await;
        assert_eq!(status, 201);
    }
    let replica_sets = |owner: &str| -> Vec<Value> {
        emu.list_objects("replicasets", Some("shop"))
            .into_iter()
            .filter(|rs| {
                rs["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("{owner}-")))
            })
            .collect()
    };
    assert_eq!(replica_sets("fg").len(), 1);

    let (status, _, body) = send(
        &emu,
        "DELETE",
        &format!("{DEPLOYMENTS}/fg"),
        JSON,
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(status, 202, "foreground answers Accepted: {body}");
    assert_eq!(
        body["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    assert!(replica_sets("fg").is_empty());
    assert!(emu.get_object("deployments", Some("shop"), "fg").is_none());

    let (status, _, body) = send(
        &emu,
        "DELETE",
        &format!("{DEPLOYMENTS}/bg"),
        JSON,
        &json!({}),
    )
    .await;
    assert_eq!((status, body["kind"].as_str()), (200, Some("Status")));
    assert!(replica_sets("bg").is_empty());

    let (status, _, body) = send(
        &emu,
        "DELETE",
        &format!("{DEPLOYMENTS}/orphan?propagationPolicy=Orphan"),
        JSON,
        &json!({}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        emu.get_object("deployments", Some("shop"), "orphan")
            .is_none()
    );
    let left = replica_sets("orphan");
    assert_eq!(left.len(), 1, "orphaned, not deleted");
    assert!(left[0]["metadata"].get("ownerReferences").is_none());

    let (status, _, body) = send(
        &emu,
        "DELETE",
        &format!("{DEPLOYMENTS}/none"),
        JSON,
        &json!({"propagationPolicy": "Sideways"}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["message"],
        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: Unsupported value: \"Sideways\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_namespace_waits_for_what_finalizers_hold_and_refuses_new_content() {
    let emu = start().await;
    let (status, _, _) = send(&emu, "POST", CONFIGMAPS, JSON, &held_configmap("held")).await;
    assert_eq!(status, 201);
    let (status, _, body) = send(&emu, "DELETE", "/api/v1/namespaces/shop", JSON, &json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["status"]["phase"], "Terminating");
    let namespace = emu.get_object("namespaces", None, "shop").unwrap();
    assert!(namespace["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(namespace["status"]["phase"], "Terminating");
    assert!(
        emu.get_object("configmaps", Some("shop"), "kube-root-ca.crt")
            .is_none()
    );

    let (status, _, refused) = send(
        &emu,
        "POST",
        CONFIGMAPS,
        JSON,
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}),
    )
    .await;
    assert_eq!(status, 403);
    assert_eq!(
        refused["message"],
        "configmaps \"late\" is forbidden: unable to create new content in namespace shop because it is being terminated"
    );
    assert_eq!(
        refused["details"]["causes"][0]["reason"],
        "NamespaceTerminating"
    );

    let (status, _, _) = send(
        &emu,
        "PATCH",
        &format!("{CONFIGMAPS}/held"),
        MERGE,
        &json!({"metadata": {"finalizers": []}}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(emu.get_object("namespaces", None, "shop").is_none());
    emu.shutdown().await;
}
