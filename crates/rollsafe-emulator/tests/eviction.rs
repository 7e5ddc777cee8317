//! The eviction subresource (`POST …/pods/<name>/eviction`) and the PodDisruptionBudget status
//! the emulator's disruption controller keeps, over HTTP: what kube's `Api::evict` (rollsafe's
//! eviction strategy) and `kubectl drain` read — 201 `Success`, the real 429 with its
//! `DisruptionBudget` cause while a budget allows nothing, 404, 400, 403, 405, the 500 of a pod
//! two budgets select, dry runs — and the faults the strategy's fault tests register on
//! `create pods/eviction`.
//!
//! Emulator-only: they drive the emulator's pod pace, faults and request log. Their claims about
//! the real server are checked by [`answers_match_kube_apiserver_on_real`], which sends the same
//! evictions to a fresh emulator and to the real control plane (`ROLLSAFE_CONTROL_PLANE`) and
//! compares the answers and the budgets' status; the strategy itself is proven on both
//! substrates in `crates/rollsafe/tests/eviction_real.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use http_body_util::BodyExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, EvictParams};
use rollsafe_emulator::{Fault, FaultAction, RolloutPaceChange, RunningEmulator};
use rollsafe_testing::{Substrate, TestNamespace, eventually};
use serde_json::{Value, json};

const SETTLE: Duration = Duration::from_secs(60);

fn web(ns: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}
    })
}

fn budget(ns: &str, name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": "web"}});
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

fn eviction(name: &str) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}})
}

fn eviction_path(ns: &str, pod: &str) -> String {
    format!("/api/v1/namespaces/{ns}/pods/{pod}/eviction")
}

/// The pods of `ns`, by name: (Ready, being deleted).
fn pods(emu: &RunningEmulator, ns: &str) -> BTreeMap<String, bool> {
    emu.list_objects("pods", Some(ns))
        .iter()
        .map(|pod| {
            let ready = pod["status"]["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            });
            (pod["metadata"]["name"].as_str().unwrap().to_owned(), ready)
        })
        .collect()
}

/// Waits until `ns` has `count` pods, all Ready.
async fn ready(emu: &RunningEmulator, ns: &str, count: usize) -> Vec<String> {
    eventually("the pods Ready", SETTLE, || async {
        let pods = pods(emu, ns);
        (pods.len() == count && pods.values().all(|r| *r)).then(|| pods.into_keys().collect())
    })
    .await
}

/// Waits until the budget's status says `allowed` disruptions for its current generation.
async fn allows(emu: &RunningEmulator, ns: &str, name: &str, allowed: i64) -> Value {
    eventually("the budget's status", SETTLE, || async {
        let budget = emu.get_object("poddisruptionbudgets", Some(ns), name)?;
        let status = &budget["status"];
        (status["disruptionsAllowed"] == allowed
            && status["observedGeneration"] == budget["metadata"]["generation"])
            .then(|| status.clone())
    })
    .await
}

async fn pace(emu: &RunningEmulator, millis: u64) {
    emu.change_settings(RolloutPaceChange {
        pod_ready_millis: Some(millis),
        ..RolloutPaceChange::default()
    })
    .unwrap();
}

#[tokio::test]
async fn kube_evict_answers_success_and_the_replica_set_replaces_the_pod() {
    let emu = start().await;
    emu.put_object(web("shop", 2)).unwrap();
    let before = ready(&emu, "shop", 2).await;
    let api: Api<Pod> = Api::namespaced(client(&emu, "admin").await, "shop");
    let answer = api
        .evict(&before[0], &EvictParams::default())
        .await
        .unwrap();
    assert_eq!(
        answer.status,
        Some(kube::core::response::StatusSummary::Success)
    );
    assert_eq!(answer.code, 201);
    let after = ready(&emu, "shop", 2).await;
    assert!(!after.contains(&before[0]), "{after:?}");
    assert!(after.contains(&before[1]));
    let logged = emu.requests_for("create", "pods/eviction");
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].status, 201);
}

#[tokio::test]
async fn a_budget_of_two_over_three_refuses_with_the_real_429_until_the_replacement_is_ready() {
    let emu = start().await;
    pace(&emu, 400).await;
    emu.put_object(web("shop", 3)).unwrap();
    emu.put_object(budget("shop", "web", json!({"minAvailable": 2})))
        .unwrap();
    let pods = ready(&emu, "shop", 3).await;
    let status = allows(&emu, "shop", "web", 1).await;
    assert_eq!(
        (
            &status["expectedPods"],
            &status["desiredHealthy"],
            &status["currentHealthy"]
        ),
        (&json!(3), &json!(2), &json!(3))
    );

    let (code, _, body) = send(
        &emu,
        "POST",
        &eviction_path("shop", &pods[0]),
        "application/json",
        &eviction(&pods[0]),
    )
    .await;
    assert_eq!(
        (code, &body),
        (
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
        )
    );
    // The replacement is starting: two healthy, two needed.
    let (code, _, body) = send(
        &emu,
        "POST",
        &eviction_path("shop", &pods[1]),
        "application/json",
        &eviction(&pods[1]),
    )
    .await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]},
            "code": 429})
    );
    let api: Api<Pod> = Api::namespaced(client(&emu, "admin").await, "shop");
    match api.evict(&pods[1], &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (429, "TooManyRequests")
            );
        }
        other => panic!("expected the budget's 429, got {other:?}"),
    }
    let budget = emu
        .get_object("poddisruptionbudgets", Some("shop"), "web")
        .unwrap();
    assert_eq!(budget["status"]["disruptionsAllowed"], 0);
    assert_eq!(
        budget["status"]["conditions"][0]["reason"],
        "InsufficientPods"
    );

    // Once the replacement is Ready the budget allows one again.
    ready(&emu, "shop", 3).await;
    allows(&emu, "shop", "web", 1).await;
    api.evict(&pods[1], &EvictParams::default()).await.unwrap();
    assert!(!self::pods(&emu, "shop").contains_key(&pods[1]));
}

#[tokio::test]
async fn the_budget_follows_its_pods_and_its_controllers_scale() {
    let emu = start().await;
    emu.put_object(web("shop", 3)).unwrap();
    emu.put_object(budget("shop", "web", json!({"maxUnavailable": "34%"})))
        .unwrap();
    ready(&emu, "shop", 3).await;
    // 34 % of 3, rounded up: two may be down.
    let status = allows(&emu, "shop", "web", 2).await;
    assert_eq!(status["desiredHealthy"], 1);
    let mut scaled = emu.get_object("deployments", Some("shop"), "web").unwrap();
    scaled["spec"]["replicas"] = json!(6);
    emu.put_object(scaled).unwrap();
    ready(&emu, "shop", 6).await;
    // 34 % of 6, rounded up: three.
    let status = allows(&emu, "shop", "web", 3).await;
    assert_eq!(
        (
            &status["expectedPods"],
            &status["desiredHealthy"],
            &status["currentHealthy"]
        ),
        (&json!(6), &json!(3), &json!(6)),
        "{status}"
    );
}

#[tokio::test]
async fn refusals_are_the_real_servers() {
    let emu = start().await;
    emu.put_object(web("shop", 3)).unwrap();
    emu.put_object(budget("shop", "web", json!({"minAvailable": 1})))
        .unwrap();
    let pods = ready(&emu, "shop", 3).await;
    let pod = pods[0].as_str();
    let path = eviction_path("shop", pod);
    let post = |path: String, body: Value| {
        let emu = &emu;
        async move { send(emu, "POST", &path, "application/json", &body).await }
    };
    let status_of = |body: &Value| {
        (
            body["code"].clone(),
            body["reason"].clone(),
            body["message"].clone(),
        )
    };

    let (code, _, body) = post(eviction_path("shop", "nope"), eviction("nope")).await;
    assert_eq!(
        (code, status_of(&body)),
        (
            404,
            (
                json!(404),
                json!("NotFound"),
                json!("pods \"nope\" not found")
            )
        )
    );
    assert_eq!(body["details"], json!({"name": "nope", "kind": "pods"}));

    for mismatched in [
        eviction("other"),
        json!({"apiVersion": "policy/v1", "kind": "Eviction"}),
    ] {
        let (code, _, body) = post(path.clone(), mismatched).await;
        assert_eq!(
            (code, status_of(&body)),
            (
                400,
                (
                    json!(400),
                    json!("BadRequest"),
                    json!("name in URL does not match name in Eviction object")
                )
            )
        );
    }
    let (code, _, body) = post(
        path.clone(),
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod}}),
    )
    .await;
    assert_eq!(
        (code, body["message"].clone()),
        (
            400,
            json!(
                "Pod in version \"v1\" cannot be handled as a Eviction: converting (v1.Pod) to (policy.Eviction): unknown conversion"
            )
        )
    );
    let (code, _, body) = post(
        path.clone(),
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": 5}}),
    )
    .await;
    assert_eq!(
        (code, body["message"].clone()),
        (
            400,
            json!(
                "Eviction in version \"v1\" cannot be handled as a Eviction: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"
            )
        )
    );
    let mut unknown = eviction(pod);
    unknown["bogus"] = json!(1);
    let (code, _, body) = post(format!("{path}?fieldValidation=Strict"), unknown.clone()).await;
    assert_eq!(
        (code, body["message"].clone()),
        (
            400,
            json!(
                "Eviction in version \"v1\" cannot be handled as a Eviction: strict decoding error: unknown field \"bogus\""
            )
        )
    );

    // A dry run answers as an eviction would and keeps the pod, with the warning of its
    // unknown field.
    let (code, warnings, body) = post(format!("{path}?dryRun=All"), unknown).await;
    assert_eq!((code, body["status"].clone()), (201, json!("Success")));
    assert_eq!(warnings, ["299 - \"unknown field \\\"bogus\\\"\""]);
    let mut dry = eviction(pod);
    dry["deleteOptions"] = json!({"dryRun": ["All"]});
    assert_eq!(post(path.clone(), dry).await.0, 201);
    assert!(
        self::pods(&emu, "shop").contains_key(pod),
        "a dry run evicts nothing"
    );

    let (code, _, body) = send(&emu, "GET", &path, "application/json", &Value::Null).await;
    assert_eq!(
        (code, status_of(&body)),
        (
            405,
            (
                json!(405),
                json!("MethodNotAllowed"),
                json!("the server does not allow this method on the requested resource")
            )
        )
    );

    emu.put_object(budget("shop", "other", json!({"maxUnavailable": 1})))
        .unwrap();
    let (code, _, body) = post(path.clone(), eviction(pod)).await;
    assert_eq!(code, 500);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "code": 500})
    );
    assert!(self::pods(&emu, "shop").contains_key(pod));
}

#[tokio::test]
async fn rbac_judges_create_on_pods_eviction() {
    let emu = start().await;
    emu.put_object(web("shop", 1)).unwrap();
    let pod = ready(&emu, "shop", 1).await.remove(0);
    let alice: Api<Pod> = Api::namespaced(client(&emu, "alice").await, "shop");
    match alice.evict(&pod, &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 403);
            assert_eq!(
                status.message,
                format!(
                    "pods \"{pod}\" is forbidden: User \"alice\" cannot create resource \"pods/eviction\" in API group \"\" in the namespace \"shop\""
                )
            );
        }
        other => panic!("expected 403, got {other:?}"),
    }
    // Reading pods does not grant evicting them; `create` on `pods/eviction` does.
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "evictor", "namespace": "shop"},
            "rules": [{"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-evicts", "namespace": "shop"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "evictor"},
            "subjects": [{"kind": "User", "name": "alice"}]}),
    ] {
        emu.put_object(object).unwrap();
    }
    alice.evict(&pod, &EvictParams::default()).await.unwrap();
    assert!(!pods(&emu, "shop").contains_key(&pod));
}

#[tokio::test]
async fn faults_fire_on_create_pods_eviction() {
    let emu = start().await;
    emu.put_object(web("shop", 2)).unwrap();
    let before = ready(&emu, "shop", 2).await;
    let api: Api<Pod> = Api::namespaced(client(&emu, "admin").await, "shop");
    emu.add_fault(
        Fault::on("create", "pods/eviction").then(FaultAction::status_retry_after(429, 1)),
    );
    match api.evict(&before[0], &EvictParams::default()).await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 429),
        other => panic!("expected the fault's 429, got {other:?}"),
    }
    assert_eq!(pods(&emu, "shop").len(), 2);
    assert!(
        pods(&emu, "shop").contains_key(&before[0]),
        "the fault fired before anything was done"
    );
    // The connection is reset after the eviction was done: the client cannot tell.
    emu.add_fault(Fault::on("create", "pods/eviction").then(FaultAction::DropAfterApply));
    assert!(
        api.evict(&before[0], &EvictParams::default())
            .await
            .is_err()
    );
    let after = ready(&emu, "shop", 2).await;
    assert!(!after.contains(&before[0]), "{after:?}");
}

// ---------------------------------------------------------------------------------------------
// Against the real control plane

/// One request as the namespace's admin (or `user`): (status, body). A PATCH is a merge patch.
async fn request(
    ns: &TestNamespace,
    user: Option<&str>,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let client = match user {
        Some(user) => ns.connection_as(user).await.client(None),
        None => ns.client(),
    };
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(
            "Content-Type",
            if method == "PATCH" {
                "application/merge-patch+json"
            } else {
                "application/json"
            },
        )
        .header("Accept", "application/json")
        .body(kube::client::Body::from(
            body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
        ))
        .unwrap();
    let response = client.send(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// One side of the comparison: a namespace, its pods in name order, and every answer with the
/// namespace and the pods' names masked.
struct Side {
    ns: TestNamespace,
    pods: Vec<String>,
}

impl Side {
    async fn new(substrate: Substrate) -> Self {
        let ns = TestNamespace::create(substrate, "eviction-parity").await;
        ns.apply([
            web(&ns.name, 3),
            budget(&ns.name, "web", json!({"minAvailable": 3})),
        ])
        .await;
        let mut side = Self {
            ns,
            pods: Vec::new(),
        };
        side.settle(&[("web", 1, 0)]).await;
        side
    }

    /// Waits until three pods are Ready (none going) and each named budget observed its
    /// generation with three healthy pods and `allowed` disruptions; keeps the pods' names.
    async fn settle(&mut self, budgets: &[(&str, i64, i64)]) {
        let ns = &self.ns;
        self.pods = eventually("the pods Ready", SETTLE, || async {
            let (_, list) = request(
                ns,
                None,
                "GET",
                &format!("/api/v1/namespaces/{}/pods", ns.name),
                None,
            )
            .await;
            let items = list["items"].as_array()?.clone();
            let ready: Vec<String> = items
                .iter()
                .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
                .filter(|p| {
                    p["status"]["conditions"].as_array().is_some_and(|c| {
                        c.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
                })
                .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_owned))
                .collect();
            (items.len() == 3 && ready.len() == 3).then_some(ready)
        })
        .await;
        for (name, generation, allowed) in budgets {
            eventually("the budget's status", SETTLE, || async {
                let (_, budget) = request(
                    ns,
                    None,
                    "GET",
                    &format!(
                        "/apis/policy/v1/namespaces/{}/poddisruptionbudgets/{name}",
                        ns.name
                    ),
                    None,
                )
                .await;
                let status = &budget["status"];
                (status["observedGeneration"] == *generation
                    && status["currentHealthy"] == 3
                    && status["disruptionsAllowed"] == *allowed)
                    .then_some(())
            })
            .await;
        }
    }

    fn mask(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                let mut masked = text.replace(&self.ns.name, "<ns>");
                for (i, pod) in self.pods.iter().enumerate() {
                    masked = masked.replace(pod, &format!("<pod{i}>"));
                }
                *text = masked;
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.mask(v)),
            Value::Object(map) => {
                map.remove("lastTransitionTime");
                map.values_mut().for_each(|v| self.mask(v));
            }
            _ => {}
        }
    }

    /// Evicts pod `index` (`None`: a pod that does not exist) with `body` (`None`: the right
    /// Eviction), as `user`, and answers masked.
    async fn evict(
        &self,
        index: Option<usize>,
        query: &str,
        user: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let pod = index.map_or("nope", |i| self.pods[i].as_str());
        let body = body.unwrap_or_else(|| eviction(pod));
        let path = format!("{}{query}", eviction_path(&self.ns.name, pod));
        let (code, mut answer) = request(&self.ns, user, "POST", &path, Some(&body)).await;
        self.mask(&mut answer);
        (code, answer)
    }

    async fn budget_status(&self, name: &str) -> Value {
        let (_, mut budget) = request(
            &self.ns,
            None,
            "GET",
            &format!(
                "/apis/policy/v1/namespaces/{}/poddisruptionbudgets/{name}",
                self.ns.name
            ),
            None,
        )
        .await;
        let mut status = budget["status"].take();
        self.mask(&mut status);
        status
    }

    async fn patch_budget(&self, name: &str, patch: Value) {
        let (code, body) = request(
            &self.ns,
            None,
            "PATCH",
            &format!(
                "/apis/policy/v1/namespaces/{}/poddisruptionbudgets/{name}",
                self.ns.name
            ),
            Some(&patch),
        )
        .await;
        assert!(code == 200, "{body}");
    }
}

/// Named `…on_real` so that `cargo xtask test --substrate emulator` skips it. The same
/// evictions on a fresh emulator and on the real control plane, step by step, each answer and
/// each budget's status compared (namespace, pod names and transition times masked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_match_kube_apiserver_on_real() {
    let (mut emulated, mut real) =
        tokio::join!(Side::new(Substrate::Emulator), Side::new(Substrate::Real));
    let mut checked = 0;
    macro_rules! same {
        ($what:expr, $call:ident($($arg:expr),*)) => {{
            let (a, b) = tokio::join!(emulated.$call($($arg),*), real.$call($($arg),*));
            assert_eq!(a, b, "{}: the emulator's (left) and the real server's (right) differ", $what);
            checked += 1;
        }};
    }
    same!("a budget of three over three", budget_status("web"));
    same!("a refusal", evict(Some(0), "", None, None));
    same!("a missing pod", evict(None, "", None, None));
    same!(
        "a name mismatch",
        evict(Some(0), "", None, Some(eviction("other")))
    );
    same!(
        "another kind",
        evict(
            Some(0),
            "",
            None,
            Some(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}))
        )
    );
    same!(
        "a wrong type",
        evict(
            Some(0),
            "",
            None,
            Some(json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": 5}}))
        )
    );
    same!(
        "a strict unknown field",
        evict(
            Some(0),
            "?fieldValidation=Strict",
            None,
            Some(
                json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "x"}, "bogus": 1})
            )
        )
    );
    same!(
        "an identity without RBAC",
        evict(Some(0), "", Some("alice"), None)
    );

    tokio::join!(
        emulated.patch_budget("web", json!({"spec": {"minAvailable": 2}})),
        real.patch_budget("web", json!({"spec": {"minAvailable": 2}}))
    );
    tokio::join!(
        emulated.settle(&[("web", 2, 1)]),
        real.settle(&[("web", 2, 1)])
    );
    same!("a budget of two over three", budget_status("web"));
    same!("a dry run", evict(Some(0), "?dryRun=All", None, None));
    same!("an eviction", evict(Some(0), "", None, None));

    tokio::join!(
        emulated.settle(&[("web", 2, 1)]),
        real.settle(&[("web", 2, 1)])
    );
    let other = |ns: &TestNamespace| budget(&ns.name, "other", json!({"maxUnavailable": "34%"}));
    tokio::join!(
        emulated.ns.apply([other(&emulated.ns)]),
        real.ns.apply([other(&real.ns)])
    );
    tokio::join!(
        emulated.settle(&[("other", 1, 2)]),
        real.settle(&[("other", 1, 2)])
    );
    same!(
        "a percentage of the Deployment's scale",
        budget_status("other")
    );
    same!("two budgets", evict(Some(1), "", None, None));
    println!("eviction parity: {checked} answers compared, all identical");
    emulated.ns.finish().await;
    real.ns.finish().await;
}
