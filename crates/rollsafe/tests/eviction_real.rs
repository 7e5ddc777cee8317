//! `rollsafe restart-consumers --strategy evict` on the real control plane: the Eviction API,
//! PodDisruptionBudgets and `disruptionsAllowed` are the real apiserver's and the real
//! disruption controller's; the pods are the scheduler's and kwok's (docs/testing.md).
//!
//! The budget, single-replica and interrupted-run scenarios run on both substrates
//! (`…::on_real`, `…::on_emulator`, below): the emulator serves the eviction subresource and
//! keeps the budgets' status for the pods of its simulated workloads (docs/emulator.md), paced
//! there so that a replacement takes a moment to become Ready ([`pace_pods`]). Real-only: pods
//! a custom resource owns directly — the emulator stores a client's pods without running them
//! (they never become Ready), and the crash-looping replacement is kwok's stage. Each scenario
//! runs in a namespace of its own.

#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests may unwrap")]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use rollsafe_testing::operator::{controlled_by, pod_group, pod_group_crd};
use rollsafe_testing::{Substrate, TestNamespace, Workload, eventually, on_both_substrates};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};

const SECRET: &str = "db-creds";
const SETTLE: Duration = Duration::from_secs(90);

/// What one run of the command printed and how it exited.
struct Run {
    code: i32,
    json: Value,
    stderr: String,
}

fn command(ns: &TestNamespace, extra: &[&str]) -> tokio::process::Command {
    let mut command = std::process::Command::cargo_bin("rollsafe").unwrap();
    command
        .args(["restart-consumers", "-n", &ns.name, SECRET, "--kubeconfig"])
        .arg(&ns.kubeconfig)
        .args([
            "--strategy",
            "evict",
            "--progress-deadline",
            "30s",
            "--timeout",
            "4m",
            "-o",
            "json",
        ])
        .args(extra)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_NAMESPACE")
        .env_remove("ROLLSAFE_CONTEXT")
        .env_remove("ROLLSAFE_AS")
        .env_remove("ROLLSAFE_STRATEGY");
    tokio::process::Command::from(command)
}

async fn evict(ns: &TestNamespace, extra: &[&str]) -> Run {
    let output = command(ns, extra).output().await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let json = serde_json::from_str(&stdout)
        .unwrap_or_else(|_| panic!("stdout is not JSON: {stdout:?}; stderr: {stderr}"));
    Run {
        code: output.status.code().unwrap_or(-1),
        json,
        stderr,
    }
}

fn consumer(name: &str, replicas: u32) -> Value {
    let mut object = Workload::deployment(name)
        .consuming_secret_via_env_from(SECRET)
        .build();
    object["spec"]["replicas"] = json!(replicas);
    object
}

fn budget(name: &str, app: &str, min_available: u32) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}
    })
}

async fn seed(ns: &TestNamespace, objects: Vec<Value>) {
    let mut all = vec![rollsafe_testing::secret(
        &ns.name,
        SECRET,
        "not-a-real-password",
    )];
    all.extend(objects);
    ns.apply_at_rest(all).await;
}

/// The pods of the namespace: name → (uid, Ready, being deleted).
async fn pods(ns: &TestNamespace) -> BTreeMap<String, (String, bool, bool)> {
    let api: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
    api.list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|pod| {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            let deleting = pod.metadata.deletion_timestamp.is_some();
            (
                pod.metadata.name.unwrap_or_default(),
                (pod.metadata.uid.unwrap_or_default(), ready, deleting),
            )
        })
        .collect()
}

/// Waits until `count` pods are Ready and none is being deleted.
async fn ready_pods(ns: &TestNamespace, count: usize) -> BTreeMap<String, (String, bool, bool)> {
    eventually("the pods Ready", SETTLE, || async {
        let pods = pods(ns).await;
        (pods.len() == count
            && pods
                .values()
                .all(|(_, ready, deleting)| *ready && !deleting))
        .then_some(pods)
    })
    .await
}

/// Follows every pod event of the namespace and keeps the fewest pods Ready (and not being
/// deleted) seen at once, from the moment it has seen `initial` Ready.
struct ReadyFloor {
    fewest: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ReadyFloor {
    async fn start(ns: &TestNamespace, initial: usize) -> Self {
        let fewest = Arc::new(AtomicUsize::new(usize::MAX));
        let seen_initial = Arc::new(AtomicBool::new(false));
        let api: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
        let (floor, seen) = (fewest.clone(), seen_initial.clone());
        let task = tokio::spawn(async move {
            let mut ready: BTreeSet<String> = BTreeSet::new();
            let mut events = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = events.next().await {
                let (pod, gone) = match event {
                    watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => (pod, false),
                    watcher::Event::Delete(pod) => (pod, true),
                    _ => continue,
                };
                let name = pod.metadata.name.clone().unwrap_or_default();
                let is_ready = !gone
                    && pod.metadata.deletion_timestamp.is_none()
                    && pod
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| {
                            c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                        });
                if is_ready {
                    ready.insert(name);
                } else {
                    ready.remove(&name);
                }
                if ready.len() >= initial {
                    seen.store(true, Ordering::SeqCst);
                }
                if seen.load(Ordering::SeqCst) {
                    floor.fetch_min(ready.len(), Ordering::SeqCst);
                }
            }
        });
        eventually("the pod watch sees every pod Ready", SETTLE, || async {
            seen_initial.load(Ordering::SeqCst).then_some(())
        })
        .await;
        Self { fewest, task }
    }

    fn stop(self) -> usize {
        self.task.abort();
        self.fewest.load(Ordering::SeqCst)
    }
}

/// How long a new pod takes to become Ready on the emulator, as kwok's take a moment on the
/// real control plane: a budget then has a replacement to wait for, and a run too.
const EMULATED_POD_READY_MILLIS: u64 = 500;

/// On the emulator, paces its pods ([`EMULATED_POD_READY_MILLIS`]); nothing on the real control
/// plane.
fn pace_pods(ns: &TestNamespace) {
    if let Some(emu) = ns.emulator() {
        emu.change_settings(rollsafe_emulator::RolloutPaceChange {
            pod_ready_millis: Some(EMULATED_POD_READY_MILLIS),
            ..rollsafe_emulator::RolloutPaceChange::default()
        })
        .unwrap();
    }
}

fn evicted(run: &Value) -> Vec<String> {
    run["evicted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

/// Three replicas under a budget of `minAvailable: 2`, the run allowed three down at once
/// (`rollsafe.dev/max-unavailable: "3"`): only the budget holds the pace, and it holds — never
/// two pods down at once, the budget's refusals waited on, every pod replaced, the template
/// never written.
async fn a_budget_of_two_over_three_replicas_never_lets_two_pods_down(ns: &TestNamespace) {
    pace_pods(ns);
    let mut web = consumer("web", 3);
    web["metadata"]["annotations"] = json!({"rollsafe.dev/max-unavailable": "3"});
    // A replacement takes a moment to become Ready (kwok's slow-start stage on the real control
    // plane, the paced pods on the emulator): the budget has one to wait for, so it must say
    // "not now" to the second eviction — without it, all three would go at once.
    web["spec"]["template"]["metadata"]["annotations"] =
        json!({"sim.rollsafe.dev/slow-start": "true"});
    seed(ns, vec![web, budget("web", "web", 2)]).await;
    let before = ready_pods(ns, 3).await;
    let generation =
        ns.get("apps/v1", "Deployment", "web").await.unwrap()["metadata"]["generation"].clone();
    eventually("the budget allows one disruption", SETTLE, || async {
        let pdb = ns.get("policy/v1", "PodDisruptionBudget", "web").await?;
        (pdb["status"]["disruptionsAllowed"] == json!(1)).then_some(())
    })
    .await;

    let floor = ReadyFloor::start(ns, 3).await;
    let run = evict(ns, &[]).await;
    let fewest = floor.stop();

    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = &run.json["runs"][0];
    assert_eq!(report["target"], "Deployment/web");
    assert_eq!(report["state"], "complete", "{}", run.json);
    let evicted: BTreeSet<String> = evicted(report).into_iter().collect();
    let original: BTreeSet<String> = before.keys().cloned().collect();
    assert_eq!(evicted, original, "each original pod evicted once");
    assert!(
        fewest >= 2,
        "the budget let {fewest} pod(s) stay Ready at one moment"
    );
    assert!(
        run.stderr.contains("refused evicting"),
        "with three allowed at once, the budget must have said \"not now\": {}",
        run.stderr
    );
    let after = ready_pods(ns, 3).await;
    assert!(after.keys().all(|name| !original.contains(name)));
    let web = ns.get("apps/v1", "Deployment", "web").await.unwrap();
    assert_eq!(
        web["metadata"]["generation"], generation,
        "eviction never writes the template"
    );
}

/// One replica and no budget: evicting it is downtime, so it is deferred — until
/// `rollsafe.dev/evict-unprotected: "true"` accepts that.
async fn a_single_unprotected_replica_is_deferred_until_downtime_is_accepted(ns: &TestNamespace) {
    pace_pods(ns);
    seed(ns, vec![consumer("solo", 1)]).await;
    let before = ready_pods(ns, 1).await;

    let run = evict(ns, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json["runs"][0]["state"], "deferred", "{}", run.json);
    assert_eq!(run.json["runs"][0]["reason"], "unprotected");
    assert_eq!(pods(ns).await, before, "the pod is untouched");

    let api: Api<DynamicObject> = ns
        .api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"}))
        .await;
    api.patch(
        "solo",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {"rollsafe.dev/evict-unprotected": "true"}}}),
        ),
    )
    .await
    .unwrap();
    let run = evict(ns, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json["runs"][0]["state"], "complete", "{}", run.json);
    assert_eq!(
        evicted(&run.json["runs"][0]),
        before.keys().cloned().collect::<Vec<_>>()
    );
}

/// A run stopped after its first eviction and started again with the `--since` it printed
/// continues: together the two runs evict each original pod exactly once.
async fn an_interrupted_run_continues_with_since_and_evicts_no_pod_twice(ns: &TestNamespace) {
    pace_pods(ns);
    seed(ns, vec![consumer("web", 3), budget("web", "web", 2)]).await;
    let before: BTreeSet<String> = ready_pods(ns, 3).await.into_keys().collect();

    let mut child = command(ns, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut since = None;
    let mut first = Vec::new();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some((_, rest)) = line.split_once("--since ") {
            since = Some(rest.trim_end_matches(')').to_owned());
        }
        if let Some((_, pod)) = line.split_once("evicted pod/") {
            first.push(pod.to_owned());
            child.start_kill().unwrap();
            break;
        }
    }
    let _ = child.wait().await;
    let since = since.expect("the run prints its --since");
    assert_eq!(first.len(), 1);

    let run = evict(ns, &["--since", &since]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.json["since"], since.as_str());
    let second = evicted(&run.json["runs"][0]);
    let all: Vec<String> = first.iter().chain(&second).cloned().collect();
    let unique: BTreeSet<String> = all.iter().cloned().collect();
    assert_eq!(all.len(), unique.len(), "no pod evicted twice: {all:?}");
    assert_eq!(unique, before, "each original pod evicted once");
}

on_both_substrates! {
    /// [`a_budget_of_two_over_three_replicas_never_lets_two_pods_down`].
    async fn a_budget_of_two_over_three_replicas_never_lets_two_pods_down(ns) {
        super::a_budget_of_two_over_three_replicas_never_lets_two_pods_down(ns).await;
    }

    /// [`a_single_unprotected_replica_is_deferred_until_downtime_is_accepted`].
    async fn a_single_unprotected_replica_is_deferred_until_downtime_is_accepted(ns) {
        super::a_single_unprotected_replica_is_deferred_until_downtime_is_accepted(ns).await;
    }

    /// [`an_interrupted_run_continues_with_since_and_evicts_no_pod_twice`].
    async fn an_interrupted_run_continues_with_since_and_evicts_no_pod_twice(ns) {
        super::an_interrupted_run_continues_with_since_and_evicts_no_pod_twice(ns).await;
    }
}

/// A test operator: keeps pods `<name>-0..n` of a PodGroup, each owned by it directly, and
/// recreates any that is gone — crash-looping ones once `crash` is set.
fn pod_group_operator(
    ns: &TestNamespace,
    owner: &Value,
    replicas: usize,
    crash: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    let pods: Api<Pod> = Api::namespaced(ns.client(), &ns.name);
    let name = owner["metadata"]["name"].as_str().unwrap().to_owned();
    let reference = controlled_by(owner);
    tokio::spawn(async move {
        loop {
            let present: BTreeSet<String> = pods
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect();
            for ordinal in 0..replicas {
                let pod_name = format!("{name}-{ordinal}");
                if present.contains(&pod_name) {
                    continue;
                }
                let mut annotations = json!({});
                if crash.load(Ordering::SeqCst) {
                    annotations = json!({
                        "sim.rollsafe.dev/crash-on-roll": "true",
                        "rollsafe.dev/config-hash": "simulated"
                    });
                }
                let pod: Pod = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": pod_name, "labels": {"group": name},
                        "annotations": annotations, "ownerReferences": [reference]},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                        "envFrom": [{"secretRef": {"name": SECRET}}]}]}
                }))
                .unwrap();
                let _ = pods.create(&PostParams::default(), &pod).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Pods a custom resource owns directly are consumers: restarted from the highest ordinal
/// down, each replacement Ready before the next; when a replacement crash-loops, the run stalls
/// naming it and the rest are not evicted.
#[tokio::test]
async fn pods_a_custom_resource_owns_are_evicted_highest_first_and_a_crash_stops_the_rest() {
    let ns = TestNamespace::create(Substrate::Real, "evict-operator").await;
    pod_group_crd(&ns).await;
    seed(&ns, vec![]).await;
    let owner = pod_group(&ns, "kafka").await;
    let mut kafka_budget = budget("kafka", "kafka", 2);
    kafka_budget["spec"]["selector"] = json!({"matchLabels": {"group": "kafka"}});
    ns.apply([kafka_budget]).await;
    let crash = Arc::new(AtomicBool::new(false));
    let operator = pod_group_operator(&ns, &owner, 3, crash.clone());
    ready_pods(&ns, 3).await;

    let run = evict(&ns, &[]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    let report = &run.json["runs"][0];
    assert_eq!(report["target"], "PodGroup/kafka");
    assert_eq!(report["state"], "complete", "{}", run.json);
    assert_eq!(evicted(report), ["kafka-2", "kafka-1", "kafka-0"]);
    assert!(
        run.stderr.contains("PodGroup/kafka: 3 consuming pod(s)"),
        "{}",
        run.stderr
    );

    let settled = ready_pods(&ns, 3).await;
    crash.store(true, Ordering::SeqCst);
    let run = evict(&ns, &[]).await;
    assert_eq!(run.code, 4, "stalled: {}", run.stderr);
    let report = &run.json["runs"][0];
    assert_eq!(report["state"], "stalled", "{}", run.json);
    assert_eq!(report["reason"], "not_ready");
    assert_eq!(report["pod"], "kafka-2");
    assert_eq!(report["waiting"], "CrashLoopBackOff");
    assert_eq!(evicted(report), ["kafka-2"]);
    let now = pods(&ns).await;
    for untouched in ["kafka-0", "kafka-1"] {
        assert_eq!(
            now[untouched].0, settled[untouched].0,
            "{untouched} not evicted"
        );
    }
    operator.abort();
    ns.finish().await;
}
