//! `rollsafe watch` restarting by eviction (`rollsafe.dev/strategy: evict`,
//! docs/strategies.md) on the real control plane: the Eviction API, PodDisruptionBudgets and
//! `disruptionsAllowed` are the real apiserver's and the real disruption controller's, the
//! replacement pods the real ReplicaSet controller's, scheduled by the real scheduler and run by
//! kwok (docs/testing.md).
//!
//! Real-substrate only: these scenarios are about what the real server and controllers do with
//! evictions; the emulator's subresource is proven by its own suite (docs/emulator.md).

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::watcher;
use rollsafe_testing::{Substrate, TestNamespace, Workload, eventually};
use rollsafe_watch::{Controller, ControllerSettings};
use serde_json::{Value, json};

use common::{DEADLINE, Running};

const EVICTING: &str = "rollsafe.dev/evicting";

fn settings(ns: &TestNamespace) -> ControllerSettings {
    ControllerSettings {
        namespaces: vec![ns.name.clone()],
        debounce: Duration::from_millis(50),
        progress_deadline: Duration::from_secs(60),
        ..ControllerSettings::default()
    }
}

fn controller(ns: &TestNamespace) -> Running {
    Running::spawn(Controller::new(ns.connection.client(None), settings(ns)))
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret(value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
        "data": {"password": b64(value)}})
}

/// A Deployment of `replicas` consuming Secret `db`, restarted by eviction, with a budget of
/// `minAvailable: replicas - 1`.
fn evicted_consumer(name: &str, replicas: u32) -> Vec<Value> {
    let mut object = Workload::deployment(name)
        .consuming_secret_via_env_from("db")
        .annotate("rollsafe.dev/watch", "true")
        .annotate("rollsafe.dev/strategy", "evict")
        .build();
    object["spec"]["replicas"] = json!(replicas);
    let budget = json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
        "spec": {"minAvailable": replicas - 1, "selector": {"matchLabels": {"app": name}}}
    });
    vec![object, budget]
}

async fn rotate(ns: &TestNamespace, value: &str) {
    let api = ns
        .api_for(&json!({"apiVersion": "v1", "kind": "Secret"}))
        .await;
    api.patch(
        "db",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"password": b64(value)}})),
    )
    .await
    .unwrap();
}

async fn settled_pods(ns: &TestNamespace, count: usize) -> BTreeSet<String> {
    eventually("the pods Ready", DEADLINE, || async {
        let ready = ns.ready_pods().await;
        (ready.len() == count).then_some(ready)
    })
    .await
}

/// Every pod of the namespace that was deleted (evicted) while it ran, by name.
fn deletions(ns: &TestNamespace) -> (Arc<Mutex<Vec<String>>>, tokio::task::JoinHandle<()>) {
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let api: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
    let seen = deleted.clone();
    let task = tokio::spawn(async move {
        let mut marked = BTreeSet::new();
        let mut events = watcher(api, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            if let watcher::Event::Apply(pod) | watcher::Event::Delete(pod) = event
                && pod.metadata.deletion_timestamp.is_some()
                && let Some(name) = pod.metadata.name
                && marked.insert(name.clone())
            {
                seen.lock().unwrap().push(name);
            }
        }
    });
    (deleted, task)
}

/// The messages of the Events about `name` with `reason`.
async fn events(ns: &TestNamespace, name: &str, reason: &str) -> Vec<String> {
    ns.events(name, reason)
        .await
        .iter()
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn deployment(ns: &TestNamespace, name: &str) -> Value {
    ns.get("apps/v1", "Deployment", name).await.unwrap()
}

/// Web, three replicas restarted by eviction under a budget of two, adopted by a controller,
/// then its Secret rotated and the roll made: the original pods, the deletions seen from
/// before the roll, and the controller.
struct Rotated {
    before: BTreeSet<String>,
    deleted: Arc<Mutex<Vec<String>>>,
    watch: tokio::task::JoinHandle<()>,
    running: Running,
}

async fn rotated(ns: &TestNamespace) -> Rotated {
    let mut seeds = vec![secret("hunter2")];
    seeds.extend(evicted_consumer("web", 3));
    ns.apply_at_rest(seeds).await;
    let before = settled_pods(ns, 3).await;
    let (deleted, watch) = deletions(ns);
    let mut running = controller(ns);
    running
        .until("adopted", |s| s.adoptions == 1 && s.pending == 0)
        .await;
    rotate(ns, "rotated").await;
    running.until("rolled", |s| s.rolls == 1).await;
    Rotated {
        before,
        deleted,
        watch,
        running,
    }
}

/// A rotation restarts a workload that restarts by eviction: each original pod evicted once,
/// the budget holding, the pod template never written, the run's mark gone at its end, and
/// the Events say so (read back through kubectl describe).
#[tokio::test]
async fn a_rotation_restarts_by_eviction_without_writing_the_template() {
    let ns = TestNamespace::create(Substrate::Real, "watch-evict").await;
    let Rotated {
        before,
        deleted,
        watch,
        running,
    } = rotated(&ns).await;
    // A Deployment's generation moves with its annotations too; its template and revision
    // are what a template write would change (the seed's template has no rollsafe annotation).
    let template = Workload::deployment("web")
        .consuming_secret_via_env_from("db")
        .build()["spec"]["template"]["spec"]["containers"]
        .clone();
    let complete = eventually("the run's RolloutComplete", DEADLINE, || async {
        let found = events(&ns, "web", "RolloutComplete").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert!(
        complete[0].starts_with("Restarted by eviction after")
            && complete[0].contains("3 pod(s) evicted"),
        "{complete:?}"
    );
    let rolled = events(&ns, "web", "Rolled").await;
    assert!(
        rolled[0].contains("Restarting by eviction (rollsafe.dev/strategy: evict)"),
        "{rolled:?}"
    );
    let web = deployment(&ns, "web").await;
    assert_eq!(
        web["spec"]["template"]["spec"]["containers"][0]["envFrom"], template[0]["envFrom"],
        "the template is not written"
    );
    assert!(
        web["spec"]["template"]["metadata"]
            .get("annotations")
            .is_none(),
        "the template is not written: {}",
        web["spec"]["template"]
    );
    assert_eq!(
        web["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "1",
        "no new revision"
    );
    assert!(
        web["spec"]["template"]["metadata"]["annotations"]
            .get("rollsafe.dev/config-hash")
            .is_none()
    );
    assert!(
        web["metadata"]["annotations"].get(EVICTING).is_none(),
        "the mark is removed at the run's end: {}",
        web["metadata"]["annotations"]
    );
    let after = settled_pods(&ns, 3).await;
    assert!(after.is_disjoint(&before), "every pod replaced");
    watch.abort();
    let deleted: BTreeSet<String> = deleted.lock().unwrap().iter().cloned().collect();
    assert_eq!(
        deleted, before,
        "each original pod evicted once, no replacement"
    );
    running.stop().await;
    ns.finish().await;
}

/// The controller stops in the middle of a run (a leader change, a restart): the mark stays on
/// the workload, and the next controller continues the run from it — the pods the first one
/// evicted are not evicted again, and every original pod is restarted.
#[tokio::test]
async fn a_run_interrupted_by_a_restart_continues_and_evicts_no_pod_twice() {
    let ns = TestNamespace::create(Substrate::Real, "watch-evict-resume").await;
    let Rotated {
        before,
        deleted,
        watch,
        running: first,
    } = rotated(&ns).await;
    eventually("a first eviction", DEADLINE, || async {
        (!deleted.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    first.stop().await;
    let mark = deployment(&ns, "web").await["metadata"]["annotations"][EVICTING].clone();
    let evicted_first = deleted.lock().unwrap().len();
    if evicted_first < 3 {
        assert!(mark.is_string(), "the mark outlives the controller mid-run");
    }

    let mut second = controller(&ns);
    second.settled().await;
    eventually("the run's end", DEADLINE, || async {
        let web = deployment(&ns, "web").await;
        let done = web["metadata"]["annotations"].get(EVICTING).is_none();
        let ready = ns.ready_pods().await;
        (done && ready.len() == 3 && ready.is_disjoint(&before)).then_some(())
    })
    .await;
    watch.abort();
    let deleted = deleted.lock().unwrap().clone();
    let unique: BTreeSet<String> = deleted.iter().cloned().collect();
    assert_eq!(
        deleted.len(),
        unique.len(),
        "no pod evicted twice: {deleted:?}"
    );
    assert_eq!(
        unique, before,
        "each original pod evicted once, no replacement"
    );
    assert_eq!(
        second.status.borrow().rolls,
        0,
        "the second controller rolls nothing anew"
    );
    second.stop().await;
    ns.finish().await;
}

/// A Deployment owned by a custom resource whose operator puts back the template it owns —
/// as the Prometheus Operator or Strimzi do — is restarted by a template patch only until the
/// operator reverts it: the revert is announced once (a `Reverted` Warning naming the operator
/// and the eviction strategy), the Rolled note named the owner, and nothing is patched again.
#[tokio::test]
async fn an_operator_that_reverts_the_template_is_warned_once_and_not_fought() {
    let ns = TestNamespace::create(Substrate::Real, "watch-operator-revert").await;
    rollsafe_testing::operator::pod_group_crd(&ns).await;
    let owner = rollsafe_testing::operator::pod_group(&ns, "metrics").await;
    let mut operated = Workload::deployment("prometheus")
        .consuming_secret_via_env_from("db")
        .annotate("rollsafe.dev/watch", "true")
        .build();
    operated["spec"]["replicas"] = json!(2);
    operated["metadata"]["ownerReferences"] =
        json!([rollsafe_testing::operator::controlled_by(&owner)]);
    // Its new pods never become Ready while the test runs, so the rollout is still going
    // when the operator reverts the template (the real pod simulator's marker).
    operated["spec"]["template"]["metadata"]["annotations"] =
        json!({"sim.rollsafe.dev/crash-on-roll": "true"});
    ns.apply_at_rest(vec![secret("hunter2"), operated]).await;

    // The test operator: whenever the template carries rollsafe's annotation, it writes its
    // own template back (read, change, update, as its field manager).
    let api = ns
        .api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}))
        .await;
    let operator_api = api.clone();
    let operator = tokio::spawn(async move {
        let params = kube::api::PostParams {
            field_manager: Some("test-operator".to_owned()),
            ..kube::api::PostParams::default()
        };
        loop {
            if let Ok(object) = operator_api.get("prometheus").await {
                let mut value = serde_json::to_value(&object).unwrap();
                let annotations = &value["spec"]["template"]["metadata"]["annotations"];
                if annotations.get("rollsafe.dev/config-hash").is_some() {
                    // Its own template, stamped as operators stamp theirs.
                    value["spec"]["template"]["metadata"]["annotations"] = json!({
                        "sim.rollsafe.dev/crash-on-roll": "true",
                        "operator.example/template": "v1",
                    });
                    let object: kube::api::DynamicObject = serde_json::from_value(value).unwrap();
                    let _ = operator_api.replace("prometheus", &params, &object).await;
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });

    let mut running = controller(&ns);
    running
        .until("adopted", |s| s.adoptions == 1 && s.pending == 0)
        .await;
    rotate(&ns, "rotated").await;
    running.until("rolled", |s| s.rolls == 1).await;
    running.until("the revert", |s| s.reverts == 1).await;
    let reverted = eventually("the Reverted Event", DEADLINE, || async {
        let found = events(&ns, "prometheus", "Reverted").await;
        (!found.is_empty()).then_some(found)
    })
    .await;
    assert_eq!(reverted.len(), 1, "{reverted:?}");
    assert!(
        reverted[0].contains("test-operator")
            && reverted[0].contains("rollsafe.dev/strategy: evict"),
        "{reverted:?}"
    );
    let rolled = events(&ns, "prometheus", "Rolled").await;
    assert!(
        rolled[0].contains("Its template belongs to PodGroup/metrics"),
        "{rolled:?}"
    );
    // Not fought: another rotation of the same content is not rolled; the operator's template
    // stays as it wrote it.
    rotate(&ns, "rotated").await;
    running.settled().await;
    let status = running.status.borrow().clone();
    assert_eq!((status.rolls, status.reverts), (1, 1), "{status:?}");
    let web = api.get("prometheus").await.unwrap();
    let web = serde_json::to_value(web).unwrap();
    assert!(
        web["spec"]["template"]["metadata"]["annotations"]
            .get("rollsafe.dev/config-hash")
            .is_none()
    );
    operator.abort();
    running.stop().await;
    ns.finish().await;
}
