//! The kube crate against the emulator: every verb, Status bodies, paging, auth.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn create_get_update_delete_round_trip() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let api: Api<ConfigMap> = Api::namespaced(client, "shop");
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "cfg"}, "data": {"a": "1"}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &cm).await.unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    assert!(created.metadata.resource_version.is_some());
    assert!(created.metadata.creation_timestamp.is_some());

    let got = api.get("cfg").await.unwrap();
    assert_eq!(got.metadata.uid.as_deref(), Some(uid.as_str()));

    let mut changed = got.clone();
    changed.data = Some([("a".to_string(), "2".to_string())].into());
    let updated = api
        .replace("cfg", &PostParams::default(), &changed)
        .await
        .unwrap();
    assert_ne!(
        updated.metadata.resource_version,
        got.metadata.resource_version
    );

    // A stale resourceVersion is a 409 Conflict.
    let err = api
        .replace("cfg", &PostParams::default(), &changed)
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        s.message,
        "Operation cannot be fulfilled on configmaps \"cfg\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // Already exists.
    let err = api.create(&PostParams::default(), &cm).await.unwrap_err();
    assert_eq!(api_status(&err).reason, "AlreadyExists");

    let deleted = api.delete("cfg", &DeleteParams::default()).await.unwrap();
    assert!(deleted.is_right());
    let err = api.get("cfg").await.unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (404, "NotFound"));
    assert_eq!(s.message, "configmaps \"cfg\" not found");
    let d = s.details.as_ref().unwrap();
    assert_eq!((d.name.as_str(), d.kind.as_str()), ("cfg", "configmaps"));
    emu.shutdown().await;
}

#[tokio::test]
async fn secrets_string_data_becomes_data() {
    let emu = start().await;
    let api: Api<Secret> = Api::namespaced(client(&emu, "admin").await, "shop");
    let s: Secret = serde_json::from_value(json!({
        "metadata": {"name": "db"}, "stringData": {"password": "hunter2"}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &s).await.unwrap();
    assert_eq!(created.type_.as_deref(), Some("Opaque"));
    let data = created.data.unwrap();
    assert_eq!(data["password"].0, b"hunter2");
    emu.shutdown().await;
}

#[tokio::test]
async fn paging_gives_exact_pages_and_no_continue_at_the_end() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 5);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let mut token: Option<String> = None;
    let mut sizes = Vec::new();
    let mut rvs = Vec::new();
    let mut remaining = Vec::new();
    loop {
        let mut lp = ListParams::default().limit(2);
        if let Some(t) = &token {
            lp = lp.continue_token(t);
        }
        let page = api.list(&lp).await.unwrap();
        sizes.push(page.items.len());
        rvs.push(page.metadata.resource_version.clone());
        remaining.push(page.metadata.remaining_item_count);
        match page.metadata.continue_ {
            Some(t) if !t.is_empty() => token = Some(t),
            _ => break,
        }
    }
    assert_eq!(sizes, vec![2, 2, 1]);
    assert!(
        rvs.windows(2).all(|w| w[0] == w[1]),
        "all pages share the first page's RV"
    );
    assert_eq!(remaining, vec![Some(3), Some(1), None]);

    // resourceVersion=0 ignores limit.
    let all = api.list(&ListParams::default().match_any()).await.unwrap();
    assert_eq!(all.items.len(), 5);
    emu.shutdown().await;
}

#[tokio::test]
async fn selectors_filter_lists() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 3);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let by_name = api
        .list(&ListParams::default().fields("metadata.name=d0001"))
        .await
        .unwrap();
    assert_eq!(by_name.items.len(), 1);
    let by_label = api
        .list(&ListParams::default().labels("app in (d0000,d0002)"))
        .await
        .unwrap();
    assert_eq!(by_label.items.len(), 2);
    let err = api
        .list(&ListParams::default().fields("spec.replicas=1"))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 400);
    emu.shutdown().await;
}

#[tokio::test]
async fn malformed_and_expired_continue_tokens() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 4);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let err = api
        .list(&ListParams::default().limit(2).continue_token("garbage!"))
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (400, "BadRequest"));
    assert!(s.message.starts_with("invalid continue token"));

    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    emu.expire_continue_tokens();
    let err = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    let fresh = s
        .metadata
        .as_ref()
        .and_then(|m| m.continue_.clone())
        .unwrap();
    // The fresh token continues where the expired one would have.
    let rest = api
        .list(&ListParams::default().limit(2).continue_token(&fresh))
        .await
        .unwrap();
    let names: Vec<_> = rest
        .items
        .iter()
        .map(|d| d.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["d0002", "d0003"]);
    emu.shutdown().await;
}

#[tokio::test]
async fn json_patch_with_tests_and_422() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let d = api.get("d0000").await.unwrap();
    let uid = d.metadata.uid.clone().unwrap();
    let rv = d.metadata.resource_version.clone().unwrap();
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/uid", "value": uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
        {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"krypton.io/restarted-at": "2025-01-01T00:00:00.000Z"}}
    ]))
    .unwrap();
    let patched = api
        .patch(
            "d0000",
            &PatchParams::default(),
            &Patch::Json::<()>(ops.clone()),
        )
        .await
        .unwrap();
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        patched.status.as_ref().unwrap().observed_generation,
        Some(2)
    );
    let rollouts = emu.rollouts();
    assert_eq!(rollouts.len(), 1);
    assert!(rollouts[0].rolled);
    assert_eq!(
        rollouts[0].template_annotations["krypton.io/restarted-at"],
        "2025-01-01T00:00:00.000Z"
    );

    // The same patch again: the resourceVersion test fails → the generic 422.
    let err = api
        .patch("d0000", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "the server rejected our request due to an error in our request"
    );

    // Missing object → 404 before the patch is looked at.
    let err = api
        .patch(
            "nope",
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch::Patch(vec![])),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 404);
    let log = emu.requests_for("patch", "deployments");
    assert_eq!(log.len(), 3);
    assert_eq!(
        log[0].content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert!(
        log[0]
            .body
            .as_deref()
            .unwrap()
            .contains("krypton.io/restarted-at")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn merge_and_strategic_patches() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let merged = api
        .patch(
            "d0000",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "web"}}})),
        )
        .await
        .unwrap();
    assert_eq!(merged.metadata.labels.unwrap()["tier"], "web");
    let sm = api
        .patch(
            "d0000",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}})),
        )
        .await
        .unwrap();
    let containers = sm.spec.unwrap().template.spec.unwrap().containers;
    assert_eq!(containers.len(), 1);
    assert_eq!(
        containers[0].image.as_deref(),
        Some("registry.example/app:2")
    );
    assert_eq!(emu.rollouts().len(), 1);

    // A resourceVersion embedded in a merge patch is a precondition: 409 when stale.
    let err = api
        .patch(
            "d0000",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1", "labels": {"x": "y"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).reason, "Conflict");
    emu.shutdown().await;
}

#[tokio::test]
async fn unsupported_patch_type_is_415() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let http = reqwest_like(&emu, "application/yaml").await;
    assert_eq!(http, 415);
    emu.shutdown().await;
}

/// Sends a raw PATCH with a given content type through kube's raw request API.
async fn reqwest_like(emu: &rollsafe_emulator::RunningEmulator, content_type: &str) -> u16 {
    let client = client(emu, "admin").await;
    let req = http::Request::builder()
        .method("PATCH")
        .uri("/apis/apps/v1/namespaces/shop/deployments/d0000")
        .header("content-type", content_type)
        .body(b"{}".to_vec())
        .unwrap();
    match client.request_text(req).await {
        Ok(_) => 200,
        Err(kube::Error::Api(s)) => s.code,
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn scale_subresource() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let scale = api
        .patch_scale(
            "d0000",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(3));
    let d = api.get("d0000").await.unwrap();
    assert_eq!(d.spec.unwrap().replicas, Some(3));
    assert_eq!(d.status.unwrap().ready_replicas, Some(3));
    assert!(emu.rollouts().is_empty(), "scaling is not a rollout");
    emu.shutdown().await;
}

#[tokio::test]
async fn continued_pages_show_the_state_of_the_first_page() {
    let emu = start().await;
    let cm = |name: &str, v: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": name, "namespace": "shop"}, "data": {"v": v}})
    };
    for name in ["a", "b", "c", "d", "e"] {
        emu.put_object(cm(name, "old")).unwrap();
    }
    // The namespace's own `kube-root-ca.crt` ConfigMap is not part of this test.
    emu.delete_object("configmaps", Some("shop"), "kube-root-ca.crt")
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(client(&emu, "admin").await, "shop");
    let first = api.list(&ListParams::default().limit(2)).await.unwrap();
    let names = |l: &kube::core::ObjectList<ConfigMap>| {
        l.items
            .iter()
            .map(|c| {
                format!(
                    "{}={}",
                    c.metadata.name.clone().unwrap_or_default(),
                    c.data
                        .as_ref()
                        .and_then(|d| d.get("v"))
                        .cloned()
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&first), ["a=old", "b=old"]);
    let first_rv = first.metadata.resource_version.clone();
    // Between the pages: c changes, d goes, cc and f arrive, a (already listed) changes.
    emu.put_object(cm("c", "new")).unwrap();
    emu.delete_object("configmaps", Some("shop"), "d").unwrap();
    emu.put_object(cm("cc", "new")).unwrap();
    emu.put_object(cm("f", "new")).unwrap();
    emu.put_object(cm("a", "new")).unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&second), ["c=old", "d=old"]);
    assert_eq!(second.metadata.resource_version, first_rv);
    let token = second.metadata.continue_.clone().unwrap();
    let third = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(names(&third), ["e=old"]);
    assert!(third.metadata.continue_.is_none());
    // A fresh list sees the present.
    let now = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        names(&now),
        ["a=new", "b=old", "c=new", "cc=new", "e=old", "f=new"]
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn field_selectors_on_each_resource_s_own_fields() {
    let emu = start().await;
    for (name, kind) in [("plain", "Opaque"), ("cert", "kubernetes.io/tls")] {
        let mut s = json!({"apiVersion": "v1", "kind": "Secret", "type": kind,
            "metadata": {"name": name, "namespace": "shop"}, "data": {}});
        if kind == "kubernetes.io/tls" {
            s["data"] = json!({"tls.crt": "eA==", "tls.key": "eA=="});
        }
        emu.put_object(s).unwrap();
    }
    let client = client(&emu, "admin").await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "shop");
    let tls = secrets
        .list(&ListParams::default().fields("type=kubernetes.io/tls"))
        .await
        .unwrap();
    let names: Vec<_> = tls
        .items
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["cert"]);
    let not_tls = secrets
        .list(&ListParams::default().fields("type!=kubernetes.io/tls"))
        .await
        .unwrap();
    assert_eq!(not_tls.items.len(), 1);
    // ConfigMaps have no `type` field label.
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "shop");
    let err = cms
        .list(&ListParams::default().fields("type=x"))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 400);
    // Events by the object they are about (what `kubectl events --for` asks).
    emu.put_object(deployment("shop", "web")).unwrap();
    emu.put_object(deployment("shop", "api")).unwrap();
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client, "shop");
    let about_web = events
        .list(
            &ListParams::default().fields("involvedObject.kind=Deployment,involvedObject.name=web"),
        )
        .await
        .unwrap();
    assert_eq!(about_web.items.len(), 1);
    emu.shutdown().await;
}

/// A new namespace gets what the namespace controllers put there on a real cluster: the
/// `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap holding the API server's CA.
#[tokio::test]
async fn a_new_namespace_gets_its_default_service_account_and_root_ca() {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    let emu = start().await;
    let kube = client(&emu, "admin").await;
    let namespaces: Api<Namespace> = Api::all(kube.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("fresh".into());
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let accounts: Api<ServiceAccount> = Api::namespaced(kube.clone(), "fresh");
    let default = accounts.get("default").await.unwrap();
    assert!(default.metadata.uid.is_some());
    let config_maps: Api<ConfigMap> = Api::namespaced(kube, "fresh");
    let root_ca = config_maps.get("kube-root-ca.crt").await.unwrap();
    assert_eq!(
        root_ca.data.unwrap()["ca.crt"],
        emu.ca_pem(),
        "the CA clients verify the API server with"
    );
    namespaces
        .delete("fresh", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        emu.get_object("serviceaccounts", Some("fresh"), "default")
            .is_none(),
        "deleted with the namespace"
    );
}
