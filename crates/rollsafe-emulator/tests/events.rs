//! Events: core `v1` and `events.k8s.io/v1` are one store seen two ways, and the deployment
//! controller simulation records `ScalingReplicaSet` Events as the real one does, through the
//! recorder's counting, aggregation and spam filter.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;

/// Creates Deployment `shop/web` with 3 replicas; its Deployments API.
async fn web_with_three_replicas(client: &kube::Client) -> Api<Deployment> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "shop");
    let mut web = deployment("shop", "web");
    web["spec"]["replicas"] = json!(3);
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(web).unwrap(),
        )
        .await
        .unwrap();
    deployments
}

#[tokio::test]
async fn the_deployment_controller_records_scaling_events() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let deployments = web_with_three_replicas(&client).await;
    deployments
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"template": {"metadata": {"annotations": {"x": "1"}}}}}),
            ),
        )
        .await
        .unwrap();

    let core: Api<CoreEvent> = Api::namespaced(client.clone(), "shop");
    let list = core.list(&ListParams::default()).await.unwrap();
    let messages: Vec<String> = list
        .items
        .iter()
        .map(|e| e.message.clone().unwrap_or_default())
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(
        messages[0].starts_with("Scaled up replica set web-")
            && messages[0].ends_with(" from 0 to 3"),
        "{messages:?}"
    );
    assert!(
        messages[2].starts_with("Scaled down replica set web-")
            && messages[2].ends_with(" from 3 to 0"),
        "{messages:?}"
    );
    let first = &list.items[0];
    assert_eq!(first.reason.as_deref(), Some("ScalingReplicaSet"));
    assert_eq!(first.type_.as_deref(), Some("Normal"));
    assert_eq!(first.involved_object.kind.as_deref(), Some("Deployment"));
    assert_eq!(first.involved_object.name.as_deref(), Some("web"));
    assert_eq!(
        first.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("deployment-controller")
    );

    // The same Events through events.k8s.io/v1.
    let v1: Api<Event> = Api::namespaced(client, "shop");
    let list = v1.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 3);
    assert_eq!(list.items[0].note.as_deref(), Some(messages[0].as_str()));
    assert_eq!(
        list.items[0]
            .regarding
            .as_ref()
            .and_then(|r| r.name.as_deref()),
        Some("web")
    );
    assert_eq!(
        list.items[0].reporting_controller.as_deref(),
        Some("deployment-controller")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn events_written_as_events_k8s_io_are_core_events() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let v1: Api<Event> = Api::namespaced(client.clone(), "shop");
    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "web.restart"},
        "eventTime": "2026-11-30T12:00:00.000000Z",
        "reportingController": "rollsafe.dev/watch",
        "reportingInstance": "rollsafe-0",
        "action": "Restart",
        "reason": "ConfigChanged",
        "note": "Secret db changed",
        "type": "Normal",
        "regarding": {"kind": "Deployment", "namespace": "shop", "name": "web", "apiVersion": "apps/v1"}
    }))
    .unwrap();
    let created = v1.create(&PostParams::default(), &event).await.unwrap();
    assert_eq!(created.note.as_deref(), Some("Secret db changed"));
    let stored = emu
        .get_object("events", Some("shop"), "web.restart")
        .unwrap();
    assert_eq!(stored["apiVersion"], "v1");
    assert_eq!(stored["message"], "Secret db changed");
    assert_eq!(stored["involvedObject"]["name"], "web");
    assert_eq!(stored["reportingComponent"], "rollsafe.dev/watch");
    // A series update through the new API (what event recorders do).
    let patched = v1
        .patch(
            "web.restart",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"series": {"count": 2, "lastObservedTime": "2026-11-30T12:01:00.000000Z"}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(patched.series.unwrap().count, 2);
    let core: Api<CoreEvent> = Api::namespaced(client, "shop");
    let got = core.get("web.restart").await.unwrap();
    assert_eq!(got.message.as_deref(), Some("Secret db changed"));
    assert_eq!(got.series.unwrap().count, Some(2));
    emu.shutdown().await;
}

#[tokio::test]
async fn a_deployment_rolled_forty_times_keeps_the_events_a_real_recorder_keeps() {
    let emu = start().await;
    let client = client(&emu, "admin").await;
    let deployments = web_with_three_replicas(&client).await;
    // One Event at creation, two per rollout (the new ReplicaSet up, the old one down), each
    // with its own message: 81 Events recorded.
    for n in 0..40 {
        deployments
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"template": {"metadata": {"annotations": {"n": n.to_string()}}}}})),
            )
            .await
            .unwrap();
    }
    let core: Api<CoreEvent> = Api::namespaced(client, "shop");
    let list = core.list(&ListParams::default()).await.unwrap();
    let about_web: Vec<&CoreEvent> = list
        .items
        .iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("web"))
        .collect();
    // Nine distinct messages stand alone; from the tenth they are combined on one Event; the
    // source's burst of 25 Events about the object ends the count there.
    assert_eq!(about_web.len(), 10, "{about_web:#?}");
    for event in &about_web[..9] {
        assert_eq!(event.count, Some(1));
        assert!(
            event
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("Scaled ")),
            "{event:?}"
        );
    }
    let combined = about_web[9];
    assert!(
        combined
            .message
            .as_deref()
            .is_some_and(|m| m.starts_with("(combined from similar events): Scaled ")),
        "{combined:?}"
    );
    assert_eq!(combined.count, Some(16));
    assert_eq!(about_web.iter().filter_map(|e| e.count).sum::<i32>(), 25);
    emu.shutdown().await;
}

#[tokio::test]
async fn events_expire_after_their_ttl_and_watchers_see_them_go() {
    let emu = start_with(
        rollsafe_emulator::Emulator::builder().event_ttl(std::time::Duration::from_millis(300)),
    )
    .await;
    let client = client(&emu, "admin").await;
    let events: Api<CoreEvent> = Api::namespaced(client, "shop");
    let event = |name: &str| {
        serde_json::from_value::<CoreEvent>(json!({
            "metadata": {"name": name, "namespace": "shop"},
            "involvedObject": {"kind": "Deployment", "name": "web", "namespace": "shop"},
            "reason": "Tested", "message": "m", "type": "Normal"
        }))
        .unwrap()
    };
    let created = events
        .create(&PostParams::default(), &event("old"))
        .await
        .unwrap();
    let rv = created.metadata.resource_version.unwrap();
    // A watcher from the creation on sees the expiry as a deletion, within a deadline.
    let stream = events
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap();
    let mut stream = std::pin::pin!(stream);
    let deleted = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while let Some(event) = stream.next().await {
            if let WatchEvent::Deleted(e) = event.unwrap() {
                return e.metadata.name;
            }
        }
        None
    })
    .await
    .expect("the Event expired within the deadline");
    assert_eq!(deleted.as_deref(), Some("old"));
    let left = events.list(&ListParams::default()).await.unwrap().items;
    assert!(left.is_empty(), "{left:?}");
    // The default TTL is kube-apiserver's hour.
    assert_eq!(
        rollsafe_emulator::EVENT_TTL,
        std::time::Duration::from_secs(3600)
    );
    emu.shutdown().await;
}
