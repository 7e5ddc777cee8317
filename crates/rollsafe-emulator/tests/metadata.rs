//! Metadata-only reads: a get, list or watch that asks for `PartialObjectMetadata` receives the
//! objects' metadata and nothing else — no Secret value crosses the wire.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};

async fn raw_get(
    emu: &rollsafe_emulator::RunningEmulator,
    path: &str,
    accept: &str,
) -> (u16, String) {
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nAccept: {accept}\r\nConnection: close\r\n\r\n",
        emu.admin_token()
    );
    let (status, _, body) = exchange(emu, request.as_bytes()).await;
    (status, body)
}

async fn seed_secret(emu: &rollsafe_emulator::RunningEmulator) {
    let client = client(emu, "admin").await;
    let secrets: Api<Secret> = Api::namespaced(client, "shop");
    let secret = serde_json::from_value(json!({
        "metadata": {"name": "db", "labels": {"app": "shop"},
                     "annotations": {"krypton.io/allowed-groups": "devs"}},
        "data": {"password": "aHVudGVyMg=="}
    }))
    .unwrap();
    secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_get_or_list_asking_for_metadata_receives_no_values() {
    let emu = start().await;
    seed_secret(&emu).await;

    let (status, body) = raw_get(
        &emu,
        "/api/v1/namespaces/shop/secrets/db",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("aHVudGVyMg"), "{body}");
    let object: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(object["kind"], "PartialObjectMetadata");
    assert_eq!(object["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(object["metadata"]["name"], "db");
    assert_eq!(object["metadata"]["labels"]["app"], "shop");
    assert_eq!(
        object["metadata"]["annotations"]["krypton.io/allowed-groups"],
        "devs"
    );
    assert!(object.get("data").is_none() && object.get("type").is_none());

    let (status, body) = raw_get(
        &emu,
        "/api/v1/namespaces/shop/secrets?limit=500",
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("aHVudGVyMg"), "{body}");
    let list: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["apiVersion"], "meta.k8s.io/v1");
    assert!(list["metadata"]["resourceVersion"].is_string());
    let items = list["items"].as_array().unwrap();
    assert!(items.iter().any(|i| i["metadata"]["name"] == "db"));
    for item in items {
        assert_eq!(item["kind"], "PartialObjectMetadata");
        assert_eq!(item["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(item.as_object().unwrap().len(), 3, "{item}");
    }

    // Without the parameter, the object itself.
    let (_, body) = raw_get(
        &emu,
        "/api/v1/namespaces/shop/secrets/db",
        "application/json",
    )
    .await;
    assert!(body.contains("aHVudGVyMg"), "{body}");

    // The kube crate's metadata calls read the same.
    let client = client(&emu, "admin").await;
    let secrets: Api<Secret> = Api::namespaced(client, "shop");
    let meta = secrets.get_metadata("db").await.unwrap();
    assert_eq!(meta.metadata.name.as_deref(), Some("db"));
    let listed = secrets.list_metadata(&ListParams::default()).await.unwrap();
    assert!(
        listed
            .items
            .iter()
            .any(|i| i.metadata.name.as_deref() == Some("db"))
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_watch_asking_for_metadata_receives_no_values() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let secrets: Api<Secret> = Api::namespaced(client, "shop");
    let rv = secrets
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let stream = secrets
        .watch_metadata(&WatchParams::default().timeout(5), &rv)
        .await
        .unwrap();
    seed_secret(&emu).await;
    let mut stream = stream.boxed();
    let added = loop {
        match stream.try_next().await.unwrap() {
            Some(WatchEvent::Added(meta)) => break meta,
            Some(_) => continue,
            None => panic!("the watch ended before the Secret was added"),
        }
    };
    assert_eq!(added.metadata.name.as_deref(), Some("db"));

    // On the wire: PartialObjectMetadata objects, no data.
    let (status, body) = raw_get(
        &emu,
        "/api/v1/namespaces/shop/secrets?watch=true&timeoutSeconds=1",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    )
    .await;
    assert_eq!(status, 200);
    assert!(!body.contains("aHVudGVyMg"), "{body}");
    assert!(
        body.contains("\"kind\":\"PartialObjectMetadata\""),
        "{body}"
    );
    emu.shutdown().await;
}
