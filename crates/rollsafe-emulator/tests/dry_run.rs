//! `dryRun=All` runs every check and answers what would be stored, but keeps nothing: no
//! object, no resourceVersion, no watch event, no rollout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn dry_run_writes_answer_but_keep_nothing() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let rv = emu.resource_version();
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };

    // create
    let created = api
        .create(
            &dry,
            &serde_json::from_value(deployment("shop", "new")).unwrap(),
        )
        .await
        .unwrap();
    assert!(created.metadata.uid.is_some());
    assert!(created.metadata.resource_version.is_none());
    assert_eq!(created.status.unwrap().observed_generation, Some(1));
    assert!(emu.get_object("deployments", Some("shop"), "new").is_none());

    // a create that would fail still fails
    let err = api
        .create(
            &dry,
            &serde_json::from_value(deployment("shop", "d0000")).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).reason, "AlreadyExists");

    // patch of the template: the answer shows the change, nothing rolls
    let patch = json!({"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}});
    let patched = api
        .patch(
            "d0000",
            &PatchParams {
                dry_run: true,
                ..Default::default()
            },
            &Patch::Strategic(&patch),
        )
        .await
        .unwrap();
    assert_eq!(
        patched
            .spec
            .unwrap()
            .template
            .metadata
            .unwrap()
            .annotations
            .unwrap()["x"],
        "1"
    );
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        patched.metadata.resource_version,
        before["metadata"]["resourceVersion"]
            .as_str()
            .map(String::from)
    );

    // replace
    let mut replaced: Deployment = serde_json::from_value(before.clone()).unwrap();
    replaced.spec.as_mut().unwrap().replicas = Some(7);
    let answer = api.replace("d0000", &dry, &replaced).await.unwrap();
    assert_eq!(answer.spec.unwrap().replicas, Some(7));

    // delete
    api.delete(
        "d0000",
        &DeleteParams {
            dry_run: true,
            ..Default::default()
        },
    )
    .await
    .unwrap();

    assert_eq!(
        emu.get_object("deployments", Some("shop"), "d0000")
            .unwrap(),
        before
    );
    assert_eq!(emu.resource_version(), rv, "no write happened");
    assert!(emu.rollouts().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn dry_run_values_other_than_all_are_422() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let req = http::Request::post("/api/v1/namespaces/shop/configmaps?dryRun=Some")
        .header("content-type", "application/json")
        .body(
            serde_json::to_vec(
                &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}),
            )
            .unwrap(),
        )
        .unwrap();
    let err = client.request::<ConfigMap>(req).await.unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"));
    assert_eq!(
        s.message,
        "CreateOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{\"Some\"}: supported values: \"All\""
    );
    assert!(emu.get_object("configmaps", Some("shop"), "c").is_none());
    emu.shutdown().await;
}
