//! The restart engine on both substrates — the real control plane and the emulator — with the
//! same assertions: the result table, discovery through real paging, every reference path,
//! conflicts a real API server reports after an intervening edit or a replacement, a deletion
//! after discovery, RBAC judged by each substrate's authorizer for impersonated identities, and
//! what a requested roll does to the workload afterwards (rolled, or deferred when paused or
//! `OnDelete`).
//!
//! Emulator-only cases (faults, the request log, the in-flight cap measured server-side) stay in
//! `restart.rs`.

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

use std::time::Duration;

use jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use rollsafe_core::annotations::RESTART_ANNOTATION;
use rollsafe_core::contract::{RestartResult, RestartStatus};
use rollsafe_core::failure::FailureCode;
use rollsafe_kube::{Impersonation, RestartEngine, RestartRequest};
use rollsafe_testing::{TestNamespace, Workload, eventually, on_both_substrates};
use serde_json::{Value, json};

const SECRET: &str = "db-creds";
const NOW: &str = "2026-11-29T18:00:00.123Z";
const SETTLE: Duration = Duration::from_secs(60);

fn request(ns: &TestNamespace) -> RestartRequest {
    RestartRequest::new(ns.name.parse().unwrap(), SECRET.parse().unwrap())
        .at(NOW.parse::<Timestamp>().unwrap())
}

async fn run(ns: &TestNamespace, identity: Option<&Impersonation>) -> RestartResult {
    RestartEngine::new(&ns.connection)
        .run(&request(ns).acting_as(identity.cloned()))
        .await
}

fn consumer(kind: &str, name: &str) -> Value {
    Workload::of_kind(kind, name)
        .with_replicas()
        .consuming_secret_via_volume(SECRET)
        .build()
}

fn bystander(kind: &str, name: &str) -> Value {
    Workload::of_kind(kind, name).with_replicas().build()
}

/// Creates the Secret and `objects`, and waits until every workload among them is at rest:
/// on a real server a workload's controller writes its status for a moment after it is
/// created, and each write changes the resourceVersion the patch tests (a conflict, as the
/// contract says — the emulator wrote status in the same write and hid this).
async fn seed(ns: &TestNamespace, objects: Vec<Value>) {
    let mut all = vec![rollsafe_testing::secret(
        &ns.name,
        SECRET,
        "not-a-real-password",
    )];
    all.extend(objects);
    ns.apply_at_rest(all).await;
}

async fn workload(ns: &TestNamespace, kind: &str, name: &str) -> Value {
    ns.get("apps/v1", kind, name).await.unwrap()
}

/// The restart annotation on a workload's pod template, as stored.
async fn annotation(ns: &TestNamespace, kind: &str, name: &str) -> Option<String> {
    workload(ns, kind, name)
        .await
        .pointer("/spec/template/metadata/annotations")?
        .get(RESTART_ANNOTATION)?
        .as_str()
        .map(str::to_owned)
}

on_both_substrates! {
    /// Every consumer's patch is acknowledged: `requested`, the annotation stored, and the
    /// workload's own controller rolls it to the end.
    async fn requested_when_every_match_is_acknowledged(ns) {
        seed(ns, vec![
            consumer("Deployment", "api-server"),
            bystander("Deployment", "unrelated"),
            consumer("StatefulSet", "worker"),
            bystander("DaemonSet", "agent"),
        ]).await;
        let result = run(ns, None).await;
        assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
        assert_eq!(
            serde_json::to_value(&result).unwrap(),
            json!({
                "status": "requested",
                "matched": 2,
                "requested": [
                    {"kind": "Deployment", "name": "api-server"},
                    {"kind": "StatefulSet", "name": "worker"}
                ],
                "failures": [],
                "discoveryFailures": [],
                "message": "Rollout requested for 2 of 2 matched workloads.",
                "note": "Only acknowledged pod-template patches are reported as requested. Rollout completion, readiness, and credential uptake are not verified."
            })
        );
        assert_eq!(annotation(ns, "Deployment", "api-server").await.as_deref(), Some(NOW));
        assert_eq!(annotation(ns, "StatefulSet", "worker").await.as_deref(), Some(NOW));
        assert_eq!(annotation(ns, "Deployment", "unrelated").await, None);
        assert_eq!(annotation(ns, "DaemonSet", "agent").await, None);
        ns.wait_at_rest("Deployment", "api-server").await;
        ns.wait_at_rest("StatefulSet", "worker").await;
    }

    /// Discovery pages through lists longer than a page (limit 100, continue tokens) and finds
    /// the consumers on every page, each once.
    async fn discovery_pages_through_every_list(ns) {
        let mut objects = Vec::new();
        for i in 0..230 {
            let name = format!("web-{i:03}");
            let mut object = if i % 100 == 7 {
                consumer("Deployment", &name)
            } else {
                bystander("Deployment", &name)
            };
            object["spec"]["replicas"] = json!(0);
            objects.push(object);
        }
        seed(ns, objects).await;
        let result = run(ns, None).await;
        assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
        let names: Vec<&str> = result.requested.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["web-007", "web-107", "web-207"]);
        assert_eq!(result.matched, 3);
    }

    /// Each place a pod template can name a Secret makes its workload a consumer; a plain
    /// value naming it does not.
    async fn every_reference_path_is_a_consumer(ns) {
        let container = |extra: Value| {
            let mut c = json!({"name": "app", "image": "registry.example/app:1"});
            if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
                c.extend(extra.clone());
            }
            c
        };
        let with_spec = |name: &str, spec: Value| {
            let mut object = Workload::deployment(name).with_replicas().build();
            object["spec"]["template"]["spec"] = spec;
            object
        };
        seed(ns, vec![
            with_spec("env-key", json!({"containers": [container(json!({"env": [
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": SECRET, "key": "password"}}}]}))]})),
            with_spec("env-from", json!({"containers": [container(json!({"envFrom": [
                {"secretRef": {"name": SECRET}}]}))]})),
            with_spec("init-env-from", json!({
                "initContainers": [container(json!({"name": "init", "envFrom": [{"secretRef": {"name": SECRET}}]}))],
                "containers": [container(json!({}))]})),
            with_spec("volume", json!({"containers": [container(json!({}))],
                "volumes": [{"name": "v", "secret": {"secretName": SECRET}}]})),
            with_spec("projected", json!({"containers": [container(json!({}))],
                "volumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": SECRET}}]}}]})),
            with_spec("pull-secret", json!({"containers": [container(json!({}))],
                "imagePullSecrets": [{"name": SECRET}]})),
            with_spec("plain-value", json!({"containers": [container(json!({"env": [
                {"name": "P", "value": SECRET}]}))]})),
        ]).await;
        let result = run(ns, None).await;
        assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
        let mut names: Vec<&str> = result.requested.iter().map(|t| t.name.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, ["env-from", "env-key", "init-env-from", "projected", "pull-secret", "volume"]);
    }

    /// An edit between discovery and the patch fails the patch's `test` of the
    /// resourceVersion: a conflict, nothing written.
    async fn an_edit_between_list_and_patch_is_a_conflict(ns) {
        seed(ns, vec![consumer("Deployment", "web")]).await;
        let engine = RestartEngine::new(&ns.connection);
        let plan = engine.plan(&request(ns)).await;
        assert_eq!(plan.targets().count(), 1);
        let api = ns.api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).await;
        api.patch("web", &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"edited": "yes"}}}))).await.unwrap();
        let result = engine.execute(plan).await;
        assert_eq!(result.status, RestartStatus::Failed, "{result:?}");
        let failure = &result.failures[0];
        assert_eq!((failure.name.as_str(), failure.code, failure.http_status),
            ("web", FailureCode::Conflict, Some(422)));
        assert_eq!(annotation(ns, "Deployment", "web").await, None);
    }

    /// A same-name replacement between discovery and the patch fails the patch's `test` of
    /// the uid: a conflict, the new object untouched.
    async fn a_same_name_replacement_is_a_conflict(ns) {
        seed(ns, vec![consumer("Deployment", "web")]).await;
        let engine = RestartEngine::new(&ns.connection);
        let plan = engine.plan(&request(ns)).await;
        let api = ns.api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).await;
        api.delete("web", &DeleteParams::foreground()).await.unwrap();
        eventually("the Deployment is gone", SETTLE, || async {
            api.get_opt("web").await.unwrap().is_none().then_some(())
        }).await;
        let mut again = consumer("Deployment", "web");
        again["metadata"]["namespace"] = json!(ns.name);
        api.create(&PostParams::default(), &serde_json::from_value(again).unwrap()).await.unwrap();
        let result = engine.execute(plan).await;
        let failure = &result.failures[0];
        assert_eq!((failure.name.as_str(), failure.code, failure.http_status),
            ("web", FailureCode::Conflict, Some(422)));
        assert_eq!(annotation(ns, "Deployment", "web").await, None);
    }

    /// A workload deleted after discovery is `not_found`; the others are still requested.
    async fn a_workload_deleted_after_discovery_is_not_found(ns) {
        seed(ns, vec![consumer("Deployment", "web"), consumer("Deployment", "api")]).await;
        let engine = RestartEngine::new(&ns.connection);
        let plan = engine.plan(&request(ns)).await;
        let api = ns.api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).await;
        api.delete("web", &DeleteParams::default()).await.unwrap();
        eventually("the Deployment is gone", SETTLE, || async {
            api.get_opt("web").await.unwrap().is_none().then_some(())
        }).await;
        let result = engine.execute(plan).await;
        assert_eq!(result.status, RestartStatus::Partial, "{result:?}");
        let failure = &result.failures[0];
        assert_eq!((failure.name.as_str(), failure.code, failure.http_status),
            ("web", FailureCode::NotFound, Some(404)));
        assert_eq!(result.requested[0].name, "api");
    }

    /// Impersonated identities are judged by the substrate's own authorizer: a member of a
    /// group the namespace's RoleBinding names is requested; anyone else gets `forbidden` for
    /// every kind, and nothing is written.
    async fn impersonation_is_judged_by_rbac(ns) {
        let mut objects = rollsafe_testing::rbac_for_group(&ns.name, "devs", false);
        objects.push(consumer("Deployment", "web"));
        seed(ns, objects).await;

        let mallory = Impersonation::new("mallory@example.com", ["nobody"]).unwrap();
        let refused = run(ns, Some(&mallory)).await;
        assert_eq!(refused.status, RestartStatus::Failed, "{refused:?}");
        assert_eq!(refused.discovery_failures.len(), 3);
        assert!(refused.discovery_failures.iter()
            .all(|f| f.code == FailureCode::Forbidden && f.http_status == Some(403)), "{refused:?}");
        assert_eq!(annotation(ns, "Deployment", "web").await, None);

        let alice = Impersonation::new("alice", ["devs"]).unwrap();
        // A real authorizer's RBAC cache takes a moment to see a new RoleBinding.
        let allowed = eventually("alice's RoleBinding is in force", SETTLE, || async {
            let result = run(ns, Some(&alice)).await;
            (result.status == RestartStatus::Requested).then_some(result)
        }).await;
        assert_eq!(allowed.requested[0].name, "web");
        assert_eq!(annotation(ns, "Deployment", "web").await.as_deref(), Some(NOW));
    }

    /// At most four patches are in flight at any moment, across kinds, as the server saw
    /// them (the emulator's request log; the real API server's audit log), and each workload
    /// is patched once.
    async fn at_most_four_patches_are_in_flight(ns) {
        let mut objects = Vec::new();
        for i in 0..30 {
            objects.push(consumer("Deployment", &format!("web-{i:02}")));
        }
        for i in 0..10 {
            objects.push(consumer("StatefulSet", &format!("db-{i:02}")));
            objects.push(consumer("DaemonSet", &format!("agent-{i:02}")));
        }
        for object in &mut objects {
            if object["kind"] != "DaemonSet" {
                object["spec"]["replicas"] = json!(0);
            }
        }
        seed(ns, objects).await;
        let result = run(ns, None).await;
        assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
        assert_eq!(result.requested.len(), 50);
        let patches = eventually("the server recorded 50 patches", SETTLE, || async {
            let patches: Vec<_> = ns.server_requests().into_iter()
                .filter(|r| r.verb == "patch")
                .filter(|r| ["deployments", "statefulsets", "daemonsets"].contains(&r.resource.as_str()))
                .collect();
            (patches.len() >= 50).then_some(patches)
        }).await;
        assert_eq!(patches.len(), 50, "{patches:?}");
        let mut names: Vec<_> = patches.iter().map(|p| p.name.clone().unwrap()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 50, "a workload was patched twice");
        let peak = rollsafe_testing::peak_overlap(&patches);
        assert!((1..=rollsafe_kube::MAX_PATCHES_IN_FLIGHT).contains(&peak), "peak {peak}");
    }

    /// Every request of an impersonated run reaches the server as the impersonated identity
    /// — the lists and the patches — and the authorizer judged it as that identity.
    async fn every_request_of_an_impersonated_run_is_impersonated(ns) {
        let mut objects = rollsafe_testing::rbac_for_group(&ns.name, "devs", false);
        objects.push(consumer("Deployment", "web"));
        objects.push(consumer("StatefulSet", "worker"));
        seed(ns, objects).await;
        let ada = Impersonation::new("ada@example.com", ["devs", "ops"]).unwrap();
        let result = eventually("ada's RoleBinding is in force", SETTLE, || async {
            let result = run(ns, Some(&ada)).await;
            (result.status == RestartStatus::Requested).then_some(result)
        }).await;
        assert_eq!(result.requested.len(), 2);
        let requests = eventually("the server recorded the run", SETTLE, || async {
            let requests: Vec<_> = ns.server_requests().into_iter()
                .filter(|r| r.impersonated_user.is_some() || r.verb == "patch")
                .filter(|r| ["deployments", "statefulsets", "daemonsets"].contains(&r.resource.as_str()))
                .collect();
            (requests.iter().filter(|r| r.verb == "patch").count() >= 2).then_some(requests)
        }).await;
        assert!(requests.iter().any(|r| r.verb == "list"), "{requests:?}");
        for request in &requests {
            assert_eq!(request.impersonated_user.as_deref(), Some("ada@example.com"), "{request:?}");
            for group in ["devs", "ops"] {
                assert!(request.impersonated_groups.iter().any(|g| g == group), "{request:?}");
            }
        }
    }
}
