//! Watches through the kube crate: initial events, live events, bookmarks, too-old versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use rollsafe_emulator::Emulator;
use serde_json::json;

#[tokio::test]
async fn initial_and_live_events() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 2);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), "0")
        .await
        .unwrap()
        .boxed();
    let mut added = 0;
    while added < 2 {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(_)))) => added += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    let mut d = emu
        .get_object("deployments", Some("shop"), "d0001")
        .unwrap();
    d["metadata"]["labels"]["x"] = json!("y");
    emu.put_object(d).unwrap();
    emu.delete_object("deployments", Some("shop"), "d0000")
        .unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, Some(WatchEvent::Modified(ref d)) if d.metadata.name.as_deref() == Some("d0001")),
        "{ev:?}"
    );
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ev, Some(WatchEvent::Deleted(_))), "{ev:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn resume_from_a_list_resource_version_and_bookmarks() {
    let emu = start_with(Emulator::builder().bookmark_interval(Duration::from_millis(50))).await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let list = api.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    emu.put_object(deployment("shop", "later")).unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, Some(WatchEvent::Added(ref d)) if d.metadata.name.as_deref() == Some("later")),
        "{ev:?}"
    );
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ev, Some(WatchEvent::Bookmark(_))), "{ev:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn too_old_resource_version_is_an_error_event() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    emu.put_object(deployment("shop", "later")).unwrap();
    emu.compact();
    let mut stream = api
        .watch(&WatchParams::default().timeout(20), &rv)
        .await
        .unwrap()
        .boxed();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    match ev {
        Some(WatchEvent::Error(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
            assert!(s.message.starts_with("too old resource version"));
        }
        other => panic!("expected an ERROR event, got {other:?}"),
    }
    let end = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(end.is_none(), "the stream ends");
    emu.shutdown().await;
}
