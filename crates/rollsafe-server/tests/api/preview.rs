//! `GET …/consumers`: the restart's gates and discovery, no patch, and whether each workload
//! would roll now.

use super::*;
use rollsafe_client::{Client, ClientError, Token};

fn consumers_path(namespace: &str, name: &str) -> String {
    format!("/api/namespaces/{namespace}/secrets/{name}/consumers")
}

async fn preview(f: &Fixture, name: &str, token: &str) -> (StatusCode, Value) {
    let auth = format!("Bearer {token}");
    let (status, headers, body) = f
        .request(
            Method::GET,
            &consumers_path(NS, name),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(headers["cache-control"], "no-store");
    (status, body)
}

fn patches(f: &Fixture) -> usize {
    f.emulator
        .requests()
        .iter()
        .filter(|r| r.verb.as_deref() == Some("patch"))
        .count()
}

#[tokio::test]
async fn the_preview_lists_references_and_what_rolls_now_and_patches_nothing() {
    let mut objects = seed();
    let mut paused = workload("Deployment", "paused", "db");
    paused["spec"]["paused"] = json!(true);
    objects.push(paused);
    let mut on_delete = workload("StatefulSet", "manual", "db");
    on_delete["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    objects.push(on_delete);
    // A preview changes nothing: it answers even where restarting is off.
    let f = Fixture::start_with(objects, |s| s.restart_enabled = false).await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["namespace"], NS);
    assert_eq!(body["secret"], "db");
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        assert_eq!(
            body["inventories"][kind],
            json!({"complete": true}),
            "{kind}"
        );
    }
    let workloads: Vec<(String, String, bool, Value)> = body["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["kind"].as_str().unwrap().to_owned(),
                w["name"].as_str().unwrap().to_owned(),
                w["rollsNow"].as_bool().unwrap(),
                w["deferral"].clone(),
            )
        })
        .collect();
    assert_eq!(
        workloads,
        [
            ("Deployment".into(), "api".into(), true, Value::Null),
            ("Deployment".into(), "paused".into(), false, json!("paused")),
            (
                "StatefulSet".into(),
                "manual".into(),
                false,
                json!("on_delete")
            ),
            ("StatefulSet".into(), "worker".into(), true, Value::Null),
        ]
    );
    assert_eq!(
        body["workloads"][0]["references"],
        json!([{"kind": "Secret", "name": "db", "via": "envFrom", "containerList": "container",
                "container": "app", "optional": false}])
    );
    assert_eq!(
        body["workloads"][1]["deferralReason"],
        "the Deployment is paused"
    );
    assert_eq!(patches(&f), 0, "a preview never patches");
    assert!(
        !body.to_string().contains(SECRET_VALUE),
        "no Secret value in a preview"
    );
    assert!(f.audit_lines().is_empty(), "a preview is not a restart");
    f.stop().await;
}

#[tokio::test]
async fn the_preview_has_the_restarts_gates() {
    let f = Fixture::start(|_| {}).await;
    let (status, _, body) = f.request(Method::GET, &consumers_path(NS, "db"), &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body, json!({"error": "Authentication required"}));
    // A history snapshot and a missing Secret answer the same.
    let (missing_status, missing) = preview(&f, "nope", &admin()).await;
    let (history_status, history) = preview(&f, "db-v1", &admin()).await;
    assert_eq!(missing_status, 404);
    assert_eq!(history_status, 404);
    assert_eq!(history["error"], "Secret \"db-v1\" not found");
    assert_eq!(missing["error"], "Secret \"nope\" not found");
    // Scope, and the ACL on the live object.
    let auth = format!("Bearer {}", admin());
    let (status, _, _) = f
        .request(
            Method::GET,
            &consumers_path("team-b", "db"),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(status, 403);
    let (status, body) = preview(&f, "locked", &token("dave@x.io", &["developers"])).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"], "You are not allowed to modify this secret");
    let (status, _, _) = f
        .request(
            Method::GET,
            &consumers_path(NS, "Bad_Name"),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(status, 400);
    assert_eq!(f.workload_requests(), 0, "no gate let a list through");
    f.stop().await;
}

#[tokio::test]
async fn an_incomplete_kind_is_reported_and_the_typed_client_reads_it() {
    let f = Fixture::start(|_| {}).await;
    f.emulator.add_fault(
        Fault::on("list", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let client = Client::new(&f.url, Some(Token::new(admin()))).unwrap();
    let preview = client
        .consumers(&NS.parse().unwrap(), &"db".parse().unwrap())
        .await
        .unwrap();
    assert!(!preview.is_complete());
    let statefulsets = &preview.inventories[&rollsafe_core::workload::WorkloadKind::StatefulSet];
    assert!(!statefulsets.complete);
    assert_eq!(statefulsets.http_status, Some(403));
    assert_eq!(
        statefulsets.code,
        Some(rollsafe_core::failure::FailureCode::Forbidden)
    );
    let names: Vec<&str> = preview.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["api"], "an incomplete kind contributes nothing");
    assert_eq!(preview.rolling_now(), 1);
    let refused = Client::new(&f.url, Some(Token::new(token("dave@x.io", &[]))))
        .unwrap()
        .consumers(&NS.parse().unwrap(), &"locked".parse().unwrap())
        .await;
    match refused {
        Err(ClientError::Api(error)) => assert_eq!(error.status, 403),
        other => panic!("{other:?}"),
    }
    assert_eq!(patches(&f), 0);
    f.stop().await;
}

/// The controller's Lease in [`NS`], carrying `settings` as `rollsafe watch` publishes them.
fn controller_lease(settings: Value) -> Value {
    let mut published = json!({"all": false, "reloaderCompat": false, "namespaces": [],
        "selector": null, "sourceSelector": null, "namespaceSelector": null,
        "ignoreNamespaces": [], "ignoreKinds": [], "requireApproval": [],
        "restartWindow": null, "progressive": false, "argoRollouts": false, "flapRolls": 5,
        "flapWindowSeconds": 600, "maxRollsPerMinute": 60, "burst": 10, "dryRun": false,
        "keyed": false, "instance": "controller-0", "at": "2026-12-07T06:00:00Z"});
    for (key, value) in settings.as_object().unwrap() {
        published[key] = value.clone();
    }
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
           "metadata": {"name": "rollsafe-watch", "namespace": NS,
                        "annotations": {"rollsafe.dev/settings": published.to_string()}},
           "spec": {"holderIdentity": "controller-0"}})
}

/// Each workload's `controller` judgement, by name.
fn judged(body: &Value) -> Vec<(String, Value)> {
    body["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_owned(),
                w["controller"].clone(),
            )
        })
        .collect()
}

fn annotated(kind: &str, name: &str, annotations: Value) -> Value {
    let mut object = workload(kind, name, "db");
    object["metadata"]["annotations"] = annotations;
    object
}

#[tokio::test]
async fn each_consumer_is_judged_under_the_settings_the_controller_published() {
    let mut objects = seed();
    // `--all`, approvals required in this namespace, a restart window.
    objects.push(controller_lease(
        json!({"all": true, "requireApproval": [NS],
        "restartWindow": "Sat 03:00-04:00 UTC"}),
    ));
    objects.push(annotated(
        "Deployment",
        "held",
        json!({"rollsafe.dev/pending": "approval since=2026-12-03T06:00:00Z digest=v1:abc"}),
    ));
    objects.push(annotated(
        "Deployment",
        "out",
        json!({"rollsafe.dev/watch": "false"}),
    ));
    objects.push(annotated(
        "Deployment",
        "own-window",
        json!({"rollsafe.dev/restart-window": "Mon-Fri 09:00-17:00 Europe/Berlin"}),
    ));
    // Impersonation on: the caller's identity is used for the discovery, never for the Lease.
    let f = Fixture::start_with(objects, |s| s.impersonation = true).await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["controller"],
        json!({"settings": "published", "lease": format!("{NS}/rollsafe-watch"),
               "at": "2026-12-07T06:00:00Z", "all": true, "reloaderCompat": false,
               "dryRun": false})
    );
    let window = json!({"window": "Sat 03:00-04:00 UTC", "from": "controller"});
    assert_eq!(
        judged(&body),
        [
            // No rollsafe.dev/watch: watched, because the controller runs with --all.
            (
                "api".into(),
                json!({"watched": "yes", "because": "all", "approval": "namespace",
                                  "restartWindow": window})
            ),
            (
                "held".into(),
                json!({"watched": "yes", "because": "all", "approval": "namespace",
                                   "restartWindow": window})
            ),
            (
                "out".into(),
                json!({"watched": "no", "because": "opted_out"})
            ),
            (
                "own-window".into(),
                json!({"watched": "yes", "because": "all",
                "approval": "namespace",
                "restartWindow": {"window": "Mon-Fri 09:00-17:00 Europe/Berlin",
                                  "from": "workload"}})
            ),
            (
                "worker".into(),
                json!({"watched": "yes", "because": "all", "approval": "namespace",
                                     "restartWindow": window})
            ),
        ]
    );
    assert_eq!(body["workloads"][1]["pending"]["heldBy"], "approval");
    // The Lease was read once, by name, as the server itself.
    let leases: Vec<_> = f
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.resource.as_deref() == Some("leases"))
        .collect();
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert_eq!(leases[0].verb.as_deref(), Some("get"));
    assert_eq!(leases[0].name.as_deref(), Some("rollsafe-watch"));
    assert_eq!(
        leases[0].impersonated_user, None,
        "read as the server itself"
    );
    assert_eq!(patches(&f), 0);
    f.stop().await;
}

#[tokio::test]
async fn the_controllers_strategy_says_how_a_workload_that_does_not_choose_restarts() {
    let mut objects = seed();
    objects.push(controller_lease(
        json!({"strategy": format!("patch,{NS}=evict")}),
    ));
    objects.push(annotated(
        "Deployment",
        "patched",
        json!({"rollsafe.dev/strategy": "patch"}),
    ));
    let f = Fixture::start_with(objects, |_| {}).await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    let restart: Vec<(String, Value)> = body["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["name"].as_str().unwrap().to_owned(),
                w.get("restartBy").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let by_controller = |kind: &str| {
        json!({"strategy": "evict", "from": "controller", "reason": format!(
            "restarted by eviction (rollsafe watch --strategy: evict in namespace {NS}; the {kind} says nothing): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template"
        )})
    };
    assert_eq!(
        restart,
        [
            ("api".to_owned(), by_controller("Deployment")),
            // Its own annotation chooses: a template patch, nothing to say.
            ("patched".to_owned(), Value::Null),
            ("worker".to_owned(), by_controller("StatefulSet")),
        ]
    );
    f.stop().await;
}

#[tokio::test]
async fn without_the_published_settings_what_depends_on_them_is_unknown() {
    // No Lease at all.
    let f = Fixture::start_with(seed(), |_| {}).await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["controller"],
        json!({"settings": "unknown", "lease": format!("{NS}/rollsafe-watch"),
               "code": "not_published",
               "message": format!("the Lease {NS}/rollsafe-watch carries no rollsafe.dev/settings: \
                                   is rollsafe watch running with that Lease?")})
    );
    assert_eq!(
        judged(&body),
        [
            (
                "api".into(),
                json!({"watched": "unknown", "because": "settings_unknown"})
            ),
            (
                "worker".into(),
                json!({"watched": "unknown", "because": "settings_unknown"})
            ),
        ]
    );
    f.stop().await;

    // A Lease the server may not read: a fixed sentence, never the upstream text.
    let mut objects = seed();
    objects.push(controller_lease(json!({"all": true})));
    objects.push(annotated(
        "Deployment",
        "out",
        json!({"rollsafe.dev/watch": "false"}),
    ));
    let f = Fixture::start_with(objects, |_| {}).await;
    f.emulator.add_fault(
        Fault::on("get", "leases")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["controller"]["settings"], "unknown");
    assert_eq!(body["controller"]["code"], "forbidden");
    assert_eq!(
        body["controller"]["message"],
        format!(
            "could not read its Lease {NS}/rollsafe-watch: the server may not read it (HTTP 403)"
        )
    );
    assert!(body["controller"].get("all").is_none(), "{body}");
    // What the annotations alone decide is still said.
    assert_eq!(
        judged(&body)[1],
        (
            "out".into(),
            json!({"watched": "no", "because": "opted_out"})
        )
    );
    f.stop().await;

    // None configured.
    let f = Fixture::start_with(seed(), |s| s.controller_lease = None).await;
    let (_, body) = preview(&f, "db", &admin()).await;
    assert_eq!(body["controller"]["code"], "not_configured");
    assert_eq!(
        body["controller"]["message"],
        "no controller Lease is configured (--controller-lease)"
    );
    assert!(
        f.emulator
            .requests()
            .iter()
            .all(|r| r.resource.as_deref() != Some("leases")),
        "no Lease read"
    );
    f.stop().await;
}

/// A pod of [`NS`] reading Secret `db` with `envFrom`, controlled by `owner` (none: `null`).
fn consuming_pod(name: &str, owner: Value, labels: Value) -> Value {
    let owners = if owner.is_null() {
        json!([])
    } else {
        json!([owner])
    };
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels, "ownerReferences": owners},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
            "envFrom": [{"secretRef": {"name": "db"}}]}]}})
}

/// A Secret consumed by a StatefulSet an operator's resource controls, by pods a custom
/// resource owns directly, by a standalone pod, and by a Deployment's own pod.
fn owned_consumers() -> Vec<Value> {
    let mut objects: Vec<Value> = seed()
        .into_iter()
        .map(|mut object| {
            if object["kind"] == "Secret" && object["metadata"]["name"] == "db" {
                object["metadata"]["annotations"] = json!({"rollsafe.dev/strategy": "evict"});
            }
            object
        })
        .collect();
    let mut kafka = workload("StatefulSet", "kafka", "db");
    kafka["metadata"]["ownerReferences"] = json!([{"apiVersion": "kafka.strimzi.io/v1beta2",
        "kind": "Kafka", "name": "my-cluster", "uid": "uid-never-shown", "controller": true}]);
    objects.push(kafka);
    let group = json!({"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "name": "kafka",
        "uid": "uid-never-shown", "controller": true});
    objects.push(consuming_pod("kafka-0", group.clone(), json!({})));
    objects.push(consuming_pod("kafka-1", group, json!({})));
    objects.push(consuming_pod("debug", Value::Null, json!({})));
    objects.push(consuming_pod(
        "api-5d8f7c-x2x4z",
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "api-5d8f7c",
            "uid": "uid-never-shown", "controller": true}),
        json!({"pod-template-hash": "5d8f7c"}),
    ));
    objects
}

#[tokio::test]
async fn operator_owned_workloads_and_pod_level_consumers_are_in_the_preview() {
    let f = Fixture::start_with(owned_consumers(), |_| {}).await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    let by_name = |name: &str| {
        body["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .cloned()
            .unwrap()
    };
    let kafka = by_name("kafka");
    assert_eq!(
        kafka["operatorOwner"],
        json!({"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka", "name": "my-cluster"})
    );
    // The Secret's own strategy, from the metadata the gates read.
    for (kind, name) in [
        ("Deployment", "api"),
        ("StatefulSet", "kafka"),
        ("StatefulSet", "worker"),
    ] {
        assert_eq!(
            by_name(name)["restartBy"],
            json!({"strategy": "evict", "from": "secret",
                "reason": format!("the Secret asks for eviction (rollsafe.dev/strategy: evict on the Secret), which rollsafe watch does not read yet: put it on the {kind}, or run rollsafe restart-consumers --strategy evict")}),
            "{name}"
        );
    }
    assert!(by_name("api").get("operatorOwner").is_none());
    let pods = &body["podConsumers"];
    assert_eq!(pods["state"], "read");
    let groups: Vec<(Value, Value, Value)> = pods["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["owner"]["kind"].clone(),
                g["pods"].clone(),
                g["restart"].clone(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (
                json!("PodGroup"),
                json!(["kafka-0", "kafka-1"]),
                json!("evict")
            ),
            (Value::Null, json!(["debug"]), json!("not_evicted")),
        ],
        "the Deployment's own pod is not a pod-level consumer"
    );
    assert!(!body.to_string().contains("uid-never-shown"));
    // The pods were listed once, as the server itself here; the restart contract is unchanged.
    let lists: Vec<_> = f
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.is("list", "pods"))
        .collect();
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert_eq!(lists[0].impersonated_user, None);
    assert_eq!(patches(&f), 0);
    let (status, _, result) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(
        result["requested"],
        json!([{"kind": "Deployment", "name": "api"},
               {"kind": "StatefulSet", "name": "kafka"},
               {"kind": "StatefulSet", "name": "worker"}]),
        "a restart patches the three kinds, operator-owned or not"
    );
    assert!(result.get("podConsumers").is_none() && result.get("workloads").is_none());
    f.stop().await;
}

#[tokio::test]
async fn a_caller_who_may_not_list_pods_gets_the_preview_with_pods_not_readable() {
    let f = Fixture::start_with(owned_consumers(), |s| s.impersonation = true).await;
    // `developers` may read the Secret and list the workloads, not list pods.
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["workloads"].as_array().unwrap().len(), 3);
    assert_eq!(
        body["podConsumers"],
        json!({"state": "not_readable", "code": "forbidden",
            "message": "not readable: the identity may not list pods in this namespace, so pods that consume the Secret outside a Deployment, StatefulSet or DaemonSet are not shown (RBAC: list pods)",
            "groups": []})
    );
    let lists: Vec<_> = f
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.is("list", "pods"))
        .collect();
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert_eq!(lists[0].status, 403);
    assert_eq!(lists[0].impersonated_user.as_deref(), Some("root@x.io"));
    // The typed client reads the added fields.
    let preview = Client::new(&f.url, Some(Token::new(admin())))
        .unwrap()
        .consumers(&NS.parse().unwrap(), &"db".parse().unwrap())
        .await
        .unwrap();
    let pods = preview.pod_consumers.unwrap();
    assert_eq!(pods.state, rollsafe_core::preview::PodsRead::NotReadable);
    assert_eq!(
        preview.workloads[1].owned_by().as_deref(),
        Some("StatefulSet/kafka is owned by Kafka/my-cluster")
    );
    f.stop().await;
}

/// Under constrained impersonation, whose rules grant no list of pods as the caller, the
/// preview sends none and says so; the rest is answered as before.
#[tokio::test]
async fn under_constrained_impersonation_no_pod_list_is_sent() {
    use rollsafe_server::impersonation::Constraint;
    let f = Fixture::start_with(owned_consumers(), |s| {
        s.impersonation = true;
        s.impersonation_constrained = Constraint::Required;
    })
    .await;
    let (status, body) = preview(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["workloads"].as_array().unwrap().len(), 3);
    assert_eq!(body["podConsumers"]["state"], "not_readable");
    assert_eq!(body["podConsumers"]["code"], "not_granted");
    assert!(
        !f.emulator.requests().iter().any(|r| r.is("list", "pods")),
        "no list of pods is sent as the caller"
    );
    f.stop().await;
}
