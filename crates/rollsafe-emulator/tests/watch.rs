//! Watches through the kube crate: initial events, live events, bookmarks, too-old versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use rollsafe_emulator::{Emulator, Fault, FaultAction, RunningEmulator};
use serde_json::{Value, json};

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

#[tokio::test]
async fn a_selector_watch_sees_objects_enter_and_leave_the_selection() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let emu = start().await;
    let api: Api<ConfigMap> = Api::namespaced(client(&emu, "admin").await, "shop");
    let mut stream = api
        .watch(&WatchParams::default().labels("tier=web").timeout(20), "0")
        .await
        .unwrap()
        .boxed();
    let cm = |labels: serde_json::Value, data: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "cfg", "namespace": "shop", "labels": labels},
               "data": {"v": data}})
    };
    let other = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "other", "namespace": "shop", "labels": {"tier": "db"}}});
    emu.put_object(other).unwrap();
    emu.put_object(cm(json!({"tier": "web"}), "1")).unwrap(); // ADDED
    emu.put_object(cm(json!({"tier": "web"}), "2")).unwrap(); // MODIFIED
    emu.put_object(cm(json!({"tier": "db"}), "3")).unwrap(); // leaves: DELETED
    let left_rv = emu.resource_version();
    emu.put_object(cm(json!({"tier": "db"}), "4")).unwrap(); // outside: nothing
    emu.put_object(cm(json!({"tier": "web"}), "5")).unwrap(); // enters: ADDED
    emu.delete_object("configmaps", Some("shop"), "cfg")
        .unwrap(); // DELETED
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let (kind, obj) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        let data = obj
            .data
            .unwrap_or_default()
            .get("v")
            .cloned()
            .unwrap_or_default();
        seen.push((
            kind,
            obj.metadata.name.unwrap_or_default(),
            data,
            obj.metadata.resource_version,
        ));
    }
    let summary: Vec<(&str, &str, &str)> = seen
        .iter()
        .map(|(k, n, d, _)| (*k, n.as_str(), d.as_str()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("ADDED", "cfg", "1"),
            ("MODIFIED", "cfg", "2"),
            // The last state that matched, at the resourceVersion of the change that left.
            ("DELETED", "cfg", "2"),
            ("ADDED", "cfg", "5"),
            ("DELETED", "cfg", "5"),
        ]
    );
    assert_eq!(seen[2].3.as_deref(), Some(left_rv.to_string().as_str()));
    emu.shutdown().await;
}

/// The advertised release (1.33) has the `WatchList` gate off: a streaming list
/// (`sendInitialEvents`) is refused with 422, as the real validation refuses it; kube's
/// default list-then-watch is what clients use against it.
#[tokio::test]
async fn streaming_lists_are_refused_as_by_a_1_33_server() {
    let emu = start().await;
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(client(&emu, "admin").await, "shop");
    let error = api
        .watch(&WatchParams::streaming_lists(), "0")
        .await
        .err()
        .expect("refused");
    let status = api_status(&error);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
        ),
        "{status:?}"
    );
}

/// With the `WatchList` gate on (as from 1.34, or 1.33 with `--feature-gates=WatchList=true`):
/// every current object as `ADDED`, then a bookmark annotated `k8s.io/initial-events-end` at
/// the snapshot's resourceVersion, then the live events.
#[tokio::test]
async fn streaming_lists_are_served_with_the_watch_list_gate_on() {
    let emu = start_with(Emulator::builder().watch_list(true)).await;
    seed_deployments(&emu, "shop", 3);
    seed_deployments(&emu, "other", 2);
    let api: Api<Deployment> = Api::namespaced(client(&emu, "admin").await, "shop");
    let mut stream = api
        .watch(&WatchParams::streaming_lists().timeout(20), "0")
        .await
        .unwrap()
        .boxed();
    let mut added = Vec::new();
    let end = loop {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(d)))) => added.push(d.metadata.name.unwrap()),
            Ok(Ok(Some(WatchEvent::Bookmark(bookmark)))) => break bookmark,
            other => panic!("unexpected {other:?}"),
        }
    };
    added.sort();
    assert_eq!(added, ["d0000", "d0001", "d0002"]);
    assert_eq!(
        end.metadata
            .annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
    let listed = api.list(&ListParams::default()).await.unwrap();
    assert_eq!(
        Some(end.metadata.resource_version.as_str()),
        listed.metadata.resource_version.as_deref(),
        "the bookmark carries the snapshot's resourceVersion"
    );
    let mut d = emu
        .get_object("deployments", Some("shop"), "d0001")
        .unwrap();
    d["metadata"]["labels"]["x"] = json!("y");
    emu.put_object(d).unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, Some(WatchEvent::Modified(ref d)) if d.metadata.name.as_deref() == Some("d0001")),
        "{ev:?}"
    );
    emu.shutdown().await;
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "shop"}, "data": {}})
}

/// A Secret watch in shop from "0", as the admin (bookmarks allowed, kube's default), open once
/// its response head arrived.
async fn watch_secrets(
    emu: &RunningEmulator,
) -> futures::stream::BoxStream<'static, kube::Result<WatchEvent<Secret>>> {
    let api: Api<Secret> = Api::namespaced(client(emu, "admin").await, "shop");
    tokio::time::timeout(
        Duration::from_secs(5),
        api.watch(&WatchParams::default().timeout(20), "0"),
    )
    .await
    .expect("the response head arrives")
    .expect("status 200")
    .boxed()
}

/// Whether the stream stays silent for half a second (no event, no bookmark, no end).
async fn silent(
    stream: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<Secret>>>,
) -> bool {
    tokio::time::timeout(Duration::from_millis(500), stream.try_next())
        .await
        .is_err()
}

async fn next_event(
    stream: &mut futures::stream::BoxStream<'static, kube::Result<WatchEvent<Secret>>>,
) -> WatchEvent<Secret> {
    tokio::time::timeout(Duration::from_secs(5), stream.try_next())
        .await
        .expect("an event within 5 s")
        .expect("a well-formed event")
        .expect("the stream goes on")
}

fn added_name(event: &WatchEvent<Secret>) -> Option<&str> {
    match event {
        WatchEvent::Added(s) => s.metadata.name.as_deref(),
        _ => None,
    }
}

#[tokio::test]
async fn a_stalled_watch_is_answered_then_silent_until_the_fault_is_removed() {
    let emu = start_with(Emulator::builder().bookmark_interval(Duration::from_millis(50))).await;
    let fault: Fault = serde_json::from_value(
        json!({"verb": "watch", "resource": "secrets", "action": {"type": "stall"}}),
    )
    .unwrap();
    let id = emu.add_fault(fault);
    let mut stream = watch_secrets(&emu).await;
    let entry = emu
        .wait_for_request(Duration::from_secs(5), |e| e.is("watch", "secrets"))
        .await
        .unwrap();
    assert_eq!(
        (entry.status, entry.faults.clone()),
        (200, vec!["stall".to_owned()])
    );
    emu.put_object(secret("db")).unwrap();
    assert!(
        silent(&mut stream).await,
        "no ADDED, no BOOKMARK while the fault is registered"
    );
    assert!(emu.remove_fault(id));
    let event = next_event(&mut stream).await;
    assert_eq!(
        added_name(&event),
        Some("db"),
        "the withheld event: {event:?}"
    );
    let event = next_event(&mut stream).await;
    assert!(matches!(event, WatchEvent::Bookmark(_)), "{event:?}");
    emu.put_object(secret("cache")).unwrap();
    loop {
        match next_event(&mut stream).await {
            WatchEvent::Bookmark(_) => continue,
            event => {
                assert_eq!(added_name(&event), Some("cache"), "{event:?}");
                break;
            }
        }
    }
    emu.shutdown().await;
}

/// `times: 1` (the default) stalls the first matching watch only: a client that notices the
/// silence and watches again gets a healthy stream.
#[tokio::test]
async fn a_second_watch_after_a_stalled_one_is_healthy() {
    let emu = start().await;
    emu.add_fault(Fault::on("watch", "secrets").then(FaultAction::Stall));
    let mut stalled = watch_secrets(&emu).await;
    emu.put_object(secret("db")).unwrap();
    assert!(silent(&mut stalled).await);
    drop(stalled); // the client gives up …
    let mut again = watch_secrets(&emu).await; // … and watches again
    let event = next_event(&mut again).await;
    assert_eq!(added_name(&event), Some("db"), "{event:?}");
    emu.put_object(secret("cache")).unwrap();
    let event = next_event(&mut again).await;
    assert_eq!(added_name(&event), Some("cache"), "{event:?}");
    let state = &emu.faults()[0];
    assert_eq!((state.matched, state.fired), (2, 1));
    emu.shutdown().await;
}
