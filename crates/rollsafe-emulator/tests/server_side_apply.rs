//! Server-side apply and field ownership over HTTP: `metadata.managedFields` entries as the
//! real server writes them, the 409 of a conflicting apply and `force=true`, fields an apply
//! drops, shared ownership, `Update` entries of the other writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};

const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/shop/deployments/web";
/// The manager of the emulated deployment controller's writes.
const CONTROLLER: &str = "kube-controller-manager";

fn manifest(replicas: u32, image: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels: {{app: web}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}
        ports:
        - containerPort: 80
"
    )
}

/// A raw request; the decoded answer, or the Status of an error.
async fn send(
    emu: &RunningEmulator,
    method: &str,
    uri: &str,
    content_type: &str,
    user_agent: Option<&str>,
    body: Vec<u8>,
) -> Result<Value, kube::core::Status> {
    let client = client(emu, "admin").await;
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", content_type);
    if let Some(ua) = user_agent {
        req = req.header("user-agent", ua);
    }
    match client.request::<Value>(req.body(body).unwrap()).await {
        Ok(v) => Ok(v),
        Err(kube::Error::Api(s)) => Err(*s),
        Err(other) => panic!("{other:?}"),
    }
}

async fn apply(
    emu: &RunningEmulator,
    manager: &str,
    force: bool,
    yaml: &str,
) -> Result<Value, kube::core::Status> {
    let force = if force { "&force=true" } else { "" };
    send(
        emu,
        "PATCH",
        &format!("{DEPLOYMENT}?fieldManager={manager}{force}"),
        "application/apply-patch+yaml",
        None,
        yaml.as_bytes().to_vec(),
    )
    .await
}

async fn merge_patch(emu: &RunningEmulator, query: &str, ua: Option<&str>, patch: Value) -> Value {
    send(
        emu,
        "PATCH",
        &format!("{DEPLOYMENT}{query}"),
        "application/merge-patch+json",
        ua,
        serde_json::to_vec(&patch).unwrap(),
    )
    .await
    .unwrap()
}

/// The managedFields entry of a manager.
fn entry<'a>(obj: &'a Value, manager: &str) -> Option<&'a Value> {
    obj["metadata"]["managedFields"]
        .as_array()?
        .iter()
        .find(|e| e["manager"] == manager)
}

/// The managers of the entries, in order, but for the emulated controllers'.
fn managers(obj: &Value) -> Vec<String> {
    obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|e| e["manager"].as_str().unwrap_or("").to_owned())
                .filter(|m| m != CONTROLLER)
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn apply_creates_with_an_apply_entry_in_the_real_format() {
    let emu = start().await;
    let created = apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap();
    let list = created["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{list:?}");
    // Applies come first; the deployment controller's annotation and status writes follow.
    let e = &list[0];
    assert_eq!(
        list[1]["fieldsV1"],
        json!({"f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}}})
    );
    assert_eq!(
        (
            &list[1]["manager"],
            &list[1]["operation"],
            list[1].get("subresource")
        ),
        (&json!(CONTROLLER), &json!("Update"), None)
    );
    assert_eq!(
        (&list[2]["manager"], &list[2]["subresource"]),
        (&json!(CONTROLLER), &json!("status"))
    );
    assert!(list[2]["fieldsV1"]["f:status"]["f:observedGeneration"].is_object());
    let keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "manager",
            "operation",
            "apiVersion",
            "time",
            "fieldsType",
            "fieldsV1"
        ]
    );
    assert_eq!(e["manager"], "alpha");
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "apps/v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    let time = e["time"].as_str().unwrap();
    assert!(
        time.len() == 20 && time.ends_with('Z') && time.as_bytes()[10] == b'T',
        "{time}"
    );
    assert_eq!(
        e["fieldsV1"],
        json!({
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:selector": {},
                "f:template": {
                    "f:metadata": {"f:labels": {"f:app": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"web\"}": {
                        ".": {}, "f:image": {}, "f:name": {},
                        "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {
                            ".": {}, "f:containerPort": {}}}}}}}}
        })
    );
    // The stored object shows them too; a no-op apply writes nothing.
    let stored = emu.get_object("deployments", Some("shop"), "web").unwrap();
    assert_eq!(
        stored["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
    let rv = emu.resource_version();
    let again = apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    assert_eq!(
        again["metadata"]["managedFields"],
        created["metadata"]["managedFields"]
    );
    assert_eq!(emu.resource_version(), rv);
    emu.shutdown().await;
}

#[tokio::test]
async fn a_conflicting_apply_is_the_real_409_and_force_takes_the_fields_over() {
    let emu = start().await;
    apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap();

    let err = apply(&emu, "beta", false, &manifest(3, "nginx:1"))
        .await
        .unwrap_err();
    let got = serde_json::to_value(&err).unwrap();
    assert_eq!(got["code"], 409);
    assert_eq!(got["status"], "Failure");
    assert_eq!(got["reason"], "Conflict");
    assert_eq!(
        got["message"],
        "Apply failed with 1 conflict: conflict with \"alpha\": .spec.replicas"
    );
    assert_eq!(
        got["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alpha\"",
                "field": ".spec.replicas"}])
    );

    // Two fields: one block per manager, a line per field.
    let err = apply(&emu, "beta", false, &manifest(3, "nginx:2"))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 2 conflicts: conflicts with \"alpha\":\n- .spec.replicas\n- .spec.template.spec.containers[name=\"web\"].image"
    );
    assert_eq!(err.details.map(|d| d.causes.len()), Some(2));

    // Forced: beta owns replicas, alpha no longer does; alpha keeps what it shares.
    let forced = apply(&emu, "beta", true, &manifest(3, "nginx:1"))
        .await
        .unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    let alpha = entry(&forced, "alpha").unwrap();
    assert!(alpha["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    assert!(alpha["fieldsV1"]["f:spec"].get("f:template").is_some());
    let beta = entry(&forced, "beta").unwrap();
    assert_eq!(beta["operation"], "Apply");
    assert_eq!(beta["fieldsV1"]["f:spec"]["f:replicas"], json!({}));

    // Now alpha conflicts with beta; an Update manager's conflict names its version.
    let err = apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"beta\": .spec.replicas"
    );
    merge_patch(
        &emu,
        "?fieldManager=kubectl-patch",
        None,
        json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:9"}]}}}}),
    )
    .await;
    let err = apply(&emu, "alpha", false, &manifest(3, "nginx:1"))
        .await
        .unwrap_err();
    assert_eq!(
        err.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1: .spec.template.spec.containers[name=\"web\"].image"
    );
    let cause = &err.details.unwrap().causes[0];
    assert_eq!(
        cause.message,
        "conflict with \"kubectl-patch\" using apps/v1"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn dropped_fields_go_unless_another_manager_owns_them() {
    let emu = start().await;
    let with_extra = manifest(2, "nginx:1").replace(
        "  labels: {app: web}\nspec:",
        "  labels: {app: web, tier: front}\n  annotations: {note: x}\nspec:",
    ) + "      - name: sidecar\n        image: busybox\n";
    apply(&emu, "alpha", false, &with_extra).await.unwrap();
    // beta shares replicas (same value: no conflict).
    let shared = apply(
        &emu,
        "beta",
        false,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: 2}\n",
    )
    .await
    .unwrap();
    // beta changed nothing, so its new entry has no time, and an entry without one sorts
    // first among the applies (as kube-apiserver 1.37 orders them; the differential suite).
    assert_eq!(managers(&shared), ["beta", "alpha"]);
    assert!(entry(&shared, "beta").unwrap().get("time").is_none());
    assert_eq!(
        entry(&shared, "beta").unwrap()["fieldsV1"],
        json!({"f:spec": {"f:replicas": {}}})
    );

    // alpha drops the label, the annotation, the sidecar and replicas.
    let plain = manifest(2, "nginx:1").replace("spec:\n  replicas: 2\n", "spec:\n");
    let after = apply(&emu, "alpha", false, &plain).await.unwrap();
    assert_eq!(after["metadata"]["labels"], json!({"app": "web"}));
    assert!(after["metadata"]["annotations"].get("note").is_none());
    let containers = after["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1, "{containers:?}");
    assert_eq!(containers[0]["name"], "web");
    // replicas stays: beta owns it.
    assert_eq!(after["spec"]["replicas"], 2);
    let alpha = entry(&after, "alpha").unwrap();
    assert!(alpha["fieldsV1"]["f:spec"].get("f:replicas").is_none());
    emu.shutdown().await;
}

#[tokio::test]
async fn other_writes_record_update_entries() {
    let emu = start().await;
    apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap();

    // A merge patch with a fieldManager: an Update entry, taking replicas from alpha.
    let patched = merge_patch(
        &emu,
        "?fieldManager=gamma",
        None,
        json!({"spec": {"replicas": 4}}),
    )
    .await;
    let gamma = entry(&patched, "gamma").unwrap();
    assert_eq!(gamma["operation"], "Update");
    assert_eq!(gamma["apiVersion"], "apps/v1");
    assert_eq!(gamma["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
    assert!(gamma.get("subresource").is_none());
    assert!(
        entry(&patched, "alpha").unwrap()["fieldsV1"]["f:spec"]
            .get("f:replicas")
            .is_none()
    );
    // Apply entries come first.
    assert_eq!(managers(&patched), ["alpha", "gamma"]);

    // Without fieldManager the User-Agent's product names the manager; a new field owns
    // itself (`.`) next to its items; a set list's items are values.
    let patched = merge_patch(
        &emu,
        "",
        Some("deploy-bot/2.1 (linux/amd64) rev/abc"),
        json!({"metadata": {"finalizers": ["example.com/hold"]}}),
    )
    .await;
    let bot = entry(&patched, "deploy-bot").unwrap();
    assert_eq!(
        bot["fieldsV1"],
        json!({"f:metadata": {"f:finalizers": {".": {}, "v:\"example.com/hold\"": {}}}})
    );

    // A no-op write keeps the resourceVersion and the managedFields (timestamps included).
    let rv = emu.resource_version();
    let same = merge_patch(
        &emu,
        "?fieldManager=delta",
        None,
        json!({"spec": {"replicas": 4}}),
    )
    .await;
    assert_eq!(
        same["metadata"]["managedFields"],
        patched["metadata"]["managedFields"]
    );
    assert_eq!(emu.resource_version(), rv);

    // A status write: an entry with subresource status, owning status only.
    let status = send(
        &emu,
        "PATCH",
        &format!("{DEPLOYMENT}/status?fieldManager=ctl"),
        "application/merge-patch+json",
        None,
        serde_json::to_vec(
            &json!({"status": {"conditions": [{"type": "Custom", "status": "True"}]}}),
        )
        .unwrap(),
    )
    .await
    .unwrap();
    let ctl = entry(&status, "ctl").unwrap();
    assert_eq!(ctl["subresource"], "status");
    assert_eq!(ctl["operation"], "Update");
    assert_eq!(
        ctl["fieldsV1"]["f:status"]["f:conditions"]["k:{\"type\":\"Custom\"}"],
        json!({".": {}, "f:status": {}, "f:type": {}})
    );
    assert_eq!(ctl["fieldsV1"].as_object().map(|o| o.len()), Some(1));

    // A create: an Update entry (kubectl create sends fieldManager=kubectl-create).
    let cm = send(
        &emu,
        "POST",
        "/api/v1/namespaces/shop/configmaps?fieldManager=kubectl-create",
        "application/json",
        None,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg"}, "data": {"k": "v"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let create = entry(&cm, "kubectl-create").unwrap();
    assert_eq!(create["operation"], "Update");
    assert_eq!(create["apiVersion"], "v1");
    assert_eq!(create["fieldsV1"], json!({"f:data": {".": {}, "f:k": {}}}));
    emu.shutdown().await;
}

#[tokio::test]
async fn managed_fields_in_request_bodies() {
    let emu = start().await;
    apply(&emu, "alpha", false, &manifest(1, "nginx:1"))
        .await
        .unwrap();

    // An empty list keeps them (clients unaware of the field do not wipe it).
    let kept = merge_patch(&emu, "", None, json!({"metadata": {"managedFields": []}})).await;
    assert_eq!(managers(&kept), ["alpha"]);
    // A valid list replaces them.
    let replaced = merge_patch(
        &emu,
        "",
        None,
        json!({"metadata": {"managedFields": [{"manager": "other", "operation": "Update",
            "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}}}]}}),
    )
    .await;
    assert_eq!(managers(&replaced), ["other"]);
    // An invalid one is ignored.
    let ignored = merge_patch(
        &emu,
        "",
        None,
        json!({"metadata": {"managedFields": [{"manager": "x", "operation": "Frob"}]}}),
    )
    .await;
    assert_eq!(managers(&ignored), ["other"]);
    // A list of one empty entry clears them.
    let cleared = merge_patch(&emu, "", None, json!({"metadata": {"managedFields": [{}]}})).await;
    assert!(
        cleared["metadata"].get("managedFields").is_none(),
        "{cleared}"
    );
    // An applied configuration may not carry them.
    let err = apply(
        &emu,
        "alpha",
        false,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  managedFields: []\n",
    )
    .await
    .unwrap_err();
    assert_eq!(
        (err.code, err.message.as_str()),
        (400, "metadata.managedFields must be nil")
    );
    // A dry run answers with them and keeps nothing.
    let rv = emu.resource_version();
    let dry = send(
        &emu,
        "PATCH",
        &format!("{DEPLOYMENT}?fieldManager=alpha&dryRun=All"),
        "application/apply-patch+yaml",
        None,
        manifest(5, "nginx:1").into_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(dry["spec"]["replicas"], 5);
    assert!(entry(&dry, "alpha").is_some());
    assert_eq!(emu.resource_version(), rv);
    emu.shutdown().await;
}

#[tokio::test]
async fn beyond_ten_update_managers_the_oldest_are_merged_into_ancient_changes() {
    let emu = start().await;
    let path = "/api/v1/namespaces/shop/configmaps";
    send(
        &emu,
        "POST",
        &format!("{path}?fieldManager=a-creator"),
        "application/json",
        None,
        serde_json::to_vec(&json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings"}, "data": {"k00": "0"}}))
        .unwrap(),
    )
    .await
    .unwrap();
    let mut last = Value::Null;
    for n in 1..=12 {
        last = send(
            &emu,
            "PATCH",
            &format!("{path}/settings?fieldManager=m{n:02}"),
            "application/merge-patch+json",
            None,
            serde_json::to_vec(&json!({"data": {format!("k{n:02}"): n.to_string()}})).unwrap(),
        )
        .await
        .unwrap();
    }
    // Thirteen managers wrote; ten entries remain: the oldest four (the creator, m01, m02,
    // m03) are one `ancient-changes` entry owning everything they owned.
    let mut names = managers(&last);
    names.sort();
    let mut want: Vec<String> = (4..=12).map(|n| format!("m{n:02}")).collect();
    want.push("ancient-changes".into());
    want.sort();
    assert_eq!(names, want, "{last:#}");
    let ancient = entry(&last, "ancient-changes").unwrap();
    assert_eq!(ancient["operation"], "Update");
    assert_eq!(ancient["apiVersion"], "v1");
    let owned = &ancient["fieldsV1"]["f:data"];
    for key in ["f:k00", "f:k01", "f:k02", "f:k03"] {
        assert!(owned.get(key).is_some(), "{key}: {ancient:#}");
    }
    assert!(owned.get("f:k04").is_none(), "{ancient:#}");
    assert!(
        entry(&last, "m04").unwrap()["fieldsV1"]["f:data"]
            .get("f:k04")
            .is_some()
    );
    emu.shutdown().await;
}
