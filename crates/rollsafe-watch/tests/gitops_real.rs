//! No drift fights (docs/gitops.md): for each way a GitOps tool or a person writes a workload
//! that rollsafe has rolled, on the real control plane (kube-apiserver v1.37, shared by the
//! test run through `ROLLSAFE_CONTROL_PLANE`):
//!
//! - whether rollsafe's pod-template annotation survives the tool's next write;
//! - whether that write restarts the pods, read from the Deployment's revision
//!   (`deployment.kubernetes.io/revision`) and its ReplicaSets, and that rollsafe adds no roll
//!   of its own on top (its published roll count and its `Rolled` Events);
//! - whether the tool would then report drift, computed the way the tool computes it: a
//!   server-side dry-run apply of the tool's manifest compared with the live object (Flux,
//!   Helm, Argo CD's server-side diff), only over fields rollsafe's field managers do not own
//!   where Argo CD's `ignoreDifferences.managedFieldsManagers` says so, and `kubectl diff` for
//!   the client-side apply.
//!
//! rollsafe's roll is made by the real controller ([`rollsafe_watch::Controller`], field
//! manager `rollsafe-watch`), as in `controller_on_both.rs`. The tools' writes are made as the
//! tools make them: real kubectl (`apply`, `diff`), server-side apply under the tool's field
//! manager with `force` (Flux's kustomize-controller, Argo CD's server-side apply), a PUT of the
//! manifest (Argo CD's `Replace=true`, `kubectl replace`) or of the live object with a new spec
//! (a naive operator), and real Helm through its Go SDK (helm-python-sdk: Helm 4, three-way
//! merge and server-side apply). The render path's manifests come from the render engine
//! (`rollsafe render`'s library).
//!
//! Real only: the tests end in `_on_real`. The emulator has a field manager of its own
//! (`rollsafe-emulator-registry/src/fieldmanager`), but the claims here are about the real
//! server's merge of the tools' writes, and Helm and kubectl are run against it. Without kubectl
//! or the Helm SDK's python the tests that need them say so and stop (and fail under `CI`), as
//! the chart tests do.

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use common::Running;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use rollsafe_testing::{Substrate, TestNamespace, eventually};
use rollsafe_watch::{Controller, ControllerSettings};
use serde_json::{Value, json};

/// The field managers of rollsafe's writes: the controller and the restart engine. The
/// snippets of docs/gitops.md name both.
const ROLLSAFE_MANAGERS: [&str; 2] = ["rollsafe-watch", "rollsafe"];
/// The template annotation the controller writes.
const CONFIG_HASH: &str = "rollsafe.dev/config-hash";
/// The Deployment controller's revision annotation.
const REVISION: &str = "deployment.kubernetes.io/revision";
/// A label the tools' second write changes on the Deployment's own metadata: a real write that
/// does not touch the pod template.
const SYNC_LABEL: &str = "gitops.rollsafe.dev/sync";
const WEB: &str = "web";

// ---------------------------------------------------------------------------------------------
// Objects

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret(ns: &TestNamespace, name: &str, key: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": ns.name},
        "data": {key: b64(value)}})
}

/// The Deployment as the tool's manifest has it: opted in (the opt-in is the tool's own
/// field), reading `secret`'s `password` key, with `sync` as the value of [`SYNC_LABEL`].
fn manifest(ns: &TestNamespace, name: &str, secret: &str, sync: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns.name,
            "labels": {"app": name, SYNC_LABEL: sync},
            "annotations": {"rollsafe.dev/watch": "true"}},
        "spec": {"replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                    "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": secret, "key": "password"}}}]}]}}}})
}

// ---------------------------------------------------------------------------------------------
// Reading the workload

/// What a roll changes, read back: the Deployment's revision, its ReplicaSets, its template.
#[derive(Debug, Clone)]
struct Rollout {
    revision: u64,
    replica_sets: usize,
    template: Value,
}

impl Rollout {
    fn hash(&self) -> Option<&str> {
        self.template["metadata"]["annotations"][CONFIG_HASH].as_str()
    }
}

async fn api(ns: &TestNamespace, api_version: &str, kind: &str) -> Api<DynamicObject> {
    ns.api_for(&json!({"apiVersion": api_version, "kind": kind}))
        .await
}

async fn live(ns: &TestNamespace, name: &str) -> Value {
    ns.get("apps/v1", "Deployment", name).await.unwrap()
}

/// The Deployment `name` once at rest: its revision, how many ReplicaSets it owns, its template.
async fn rollout(ns: &TestNamespace, name: &str) -> Rollout {
    ns.wait_all_at_rest().await;
    let deployment = live(ns, name).await;
    let revision = deployment["metadata"]["annotations"][REVISION]
        .as_str()
        .unwrap_or_else(|| panic!("no {REVISION} on {deployment}"))
        .parse()
        .unwrap();
    let replica_sets = api(ns, "apps/v1", "ReplicaSet")
        .await
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|rs| {
            rs.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|owner| owner.name == name)
        })
        .count();
    Rollout {
        revision,
        replica_sets,
        template: deployment["spec"]["template"].clone(),
    }
}

/// The Events about `name` with `reason`.
async fn events(ns: &TestNamespace, name: &str, reason: &str) -> Vec<Value> {
    ns.events(name, reason).await
}

// ---------------------------------------------------------------------------------------------
// Drift, computed as the tools compute it

/// Removes what no tool compares: the server's bookkeeping and the status.
fn normalized(mut object: Value) -> Value {
    let metadata = object["metadata"].as_object_mut().unwrap();
    for field in ["managedFields", "resourceVersion"] {
        metadata.remove(field);
    }
    object.as_object_mut().unwrap().remove("status");
    object
}

/// The fields (`fieldsV1`) the live object's managed fields give to any of `managers`.
fn owned_by(live: &Value, managers: &[&str]) -> Vec<Value> {
    live["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|entry| {
            entry["manager"]
                .as_str()
                .is_some_and(|m| managers.contains(&m))
        })
        .map(|entry| entry["fieldsV1"].clone())
        .collect()
}

/// Removes from `object` the map fields `fields` (a `fieldsV1` set) names: what Argo CD's
/// `managedFieldsManagers` leaves out of its comparison. List items (`k:`, `v:`, `i:`) are not
/// removed: rollsafe owns none.
fn strip_fields(object: &mut Value, fields: &Value) {
    let (Some(object), Some(fields)) = (object.as_object_mut(), fields.as_object()) else {
        return;
    };
    for (key, below) in fields {
        let Some(name) = key.strip_prefix("f:") else {
            continue;
        };
        let children = below
            .as_object()
            .map(|b| b.keys().filter(|k| *k != ".").count())
            .unwrap_or(0);
        if children == 0 {
            object.remove(name);
        } else if let Some(value) = object.get_mut(name) {
            strip_fields(value, below);
        }
    }
}

/// Copies into `target` the live values of the map fields `fields` names: what Argo CD's
/// `RespectIgnoreDifferences=true` does to the manifest before it syncs.
fn keep_live_fields(target: &mut Value, live: &Value, fields: &Value) {
    let Some(fields) = fields.as_object() else {
        return;
    };
    for (key, below) in fields {
        let Some(name) = key.strip_prefix("f:") else {
            continue;
        };
        let Some(live_value) = live.get(name) else {
            continue;
        };
        let children = below
            .as_object()
            .map(|b| b.keys().filter(|k| *k != ".").count())
            .unwrap_or(0);
        if children == 0 {
            target[name] = live_value.clone();
        } else {
            if !target[name].is_object() {
                target[name] = json!({});
            }
            keep_live_fields(&mut target[name], live_value, below);
        }
    }
}

/// The paths where `a` and `b` differ.
fn differences(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for key in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                differences(
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    &format!("{path}/{key}"),
                    out,
                );
            }
        }
        _ if a != b => out.push(path.to_owned()),
        _ => {}
    }
}

/// The drift a tool applying `manifest` server-side as `manager` would report now: a
/// server-side dry-run apply (forced, as Flux, Argo CD and Helm apply), compared with the live
/// object — leaving out the fields `ignored` managers own (Argo CD's
/// `ignoreDifferences.managedFieldsManagers`). The paths that differ.
async fn server_side_drift(
    ns: &TestNamespace,
    manifest: &Value,
    manager: &str,
    ignored: &[&str],
) -> Vec<String> {
    let name = manifest["metadata"]["name"].as_str().unwrap();
    let deployments = api(ns, "apps/v1", "Deployment").await;
    let mut params = PatchParams::apply(manager).force();
    params.dry_run = true;
    let predicted = deployments
        .patch(name, &params, &Patch::Apply(manifest))
        .await
        .unwrap();
    let live = live(ns, name).await;
    let mut predicted = normalized(serde_json::to_value(predicted).unwrap());
    let mut current = normalized(live.clone());
    for fields in owned_by(&live, ignored) {
        strip_fields(&mut predicted, &fields);
        strip_fields(&mut current, &fields);
    }
    let mut out = Vec::new();
    differences(&current, &predicted, "", &mut out);
    out
}

// ---------------------------------------------------------------------------------------------
// The tools' writes

/// Server-side apply of `manifest` as `manager`, forcing conflicts (Flux's kustomize-controller,
/// Argo CD with `ServerSideApply=true`, `kubectl apply --server-side --force-conflicts`).
async fn server_side_apply(ns: &TestNamespace, manifest: &Value, manager: &str) {
    let name = manifest["metadata"]["name"].as_str().unwrap();
    api(ns, "apps/v1", "Deployment")
        .await
        .patch(
            name,
            &PatchParams::apply(manager).force(),
            &Patch::Apply(manifest),
        )
        .await
        .unwrap();
}

/// A PUT of `object` over the live one (its resourceVersion set from the live object), as
/// `kubectl replace` — Argo CD's `Replace=true` — and naive operators write.
async fn replace(ns: &TestNamespace, mut object: Value, manager: &str) {
    let name = object["metadata"]["name"].as_str().unwrap().to_owned();
    let current = live(ns, &name).await;
    object["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    let params = PostParams {
        field_manager: Some(manager.to_owned()),
        ..PostParams::default()
    };
    api(ns, "apps/v1", "Deployment")
        .await
        .replace(&name, &params, &serde_json::from_value(object).unwrap())
        .await
        .unwrap();
}

/// Whether a missing tool must fail the test (CI) rather than skip it.
fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The python of the virtual environment `.ci/run` creates with helm-python-sdk:
/// `ROLLSAFE_HELM_PYTHON`, else `.ci/venv/bin/python`; `None` (skip, said why) when there is
/// none and `CI` is not set, as the chart tests do (`crates/rollsafe/tests/install_common`).
fn helm_python() -> Option<PathBuf> {
    let candidate = std::env::var_os("ROLLSAFE_HELM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .unwrap()
                .join(".ci/venv/bin/python")
        });
    if candidate.is_file() {
        return Some(candidate);
    }
    assert!(
        !required(),
        "CI is set but the Helm SDK python ({}) is missing: run .ci/run to create .ci/venv",
        candidate.display()
    );
    eprintln!(
        "skipping: no Helm SDK python at {} (set ROLLSAFE_HELM_PYTHON or run .ci/run)",
        candidate.display()
    );
    None
}

/// Real kubectl, or `None` (skip) when there is none and `CI` is not set.
fn kubectl_or_skip() -> Option<PathBuf> {
    let found = rollsafe_testing::kubectl();
    if found.is_none() {
        assert!(!required(), "CI is set but kubectl is missing");
        eprintln!("skipping: no kubectl (set KUBECTL or put one on PATH)");
    }
    found
}

/// Runs kubectl against the test's namespace; its exit code and output.
async fn kubectl(ns: &TestNamespace, kubectl: &Path, args: &[&str]) -> (i32, String) {
    let mut command = Command::new(kubectl);
    command
        .arg("--kubeconfig")
        .arg(&ns.kubeconfig)
        .args(["-n", &ns.name])
        .args(args);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .unwrap()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.code().unwrap_or(-1), text)
}

/// Writes `object` to a file of the test's directory (JSON is YAML) and returns its path.
fn manifest_file(ns: &TestNamespace, file: &str, object: &Value) -> String {
    let path = ns.dir.path().join(file);
    std::fs::write(&path, serde_json::to_vec_pretty(object).unwrap()).unwrap();
    path.to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// The scenario every tool shares

/// A controller watching only the test's namespace.
fn controller(ns: &TestNamespace) -> Running {
    Running::spawn(Controller::new(
        ns.connection.client(None),
        ControllerSettings {
            namespaces: vec![ns.name.clone()],
            debounce: Duration::from_millis(50),
            ..ControllerSettings::default()
        },
    ))
}

/// The namespace after rollsafe rolled `web`: the Secrets `db` (read by `web`) and `other`
/// (read by `api`, the barrier); `web` written first by `create` (the tool's first write);
/// the controller adopted both and rolled `web` once for a change to `db`.
struct Rolled {
    running: Running,
    rolled: Rollout,
    first: Rollout,
}

async fn rolled_by_rollsafe<F, Fut>(ns: &TestNamespace, create: F) -> Rolled
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    ns.apply([
        secret(ns, "db", "password", "hunter2"),
        secret(ns, "other", "password", "1"),
    ])
    .await;
    create().await;
    ns.apply_at_rest([manifest(ns, "api", "other", "1")]).await;
    let first = rollout(ns, WEB).await;
    let mut running = controller(ns);
    running
        .until("adoptions", |s| s.adoptions == 2 && s.pending == 0)
        .await;
    api(ns, "v1", "Secret")
        .await
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"password": b64("rotated")}})),
        )
        .await
        .unwrap();
    running
        .until("rollsafe's roll", |s| s.rolls == 1 && s.pending == 0)
        .await;
    let rolled = rollout(ns, WEB).await;
    assert!(rolled.hash().is_some(), "{:?}", rolled.template);
    assert_eq!(rolled.revision, first.revision + 1, "rollsafe's roll");
    assert_eq!(
        rolled.replica_sets,
        first.replica_sets + 1,
        "rollsafe's roll"
    );
    let owners: Vec<String> = live(ns, WEB).await["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["fieldsV1"].to_string().contains(CONFIG_HASH))
        .map(|e| e["manager"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        owners,
        ["rollsafe-watch"],
        "the hash's field manager is the documented one"
    );
    Rolled {
        running,
        rolled,
        first,
    }
}

/// After the tool's next write: waits until `web` is at rest, then until the controller has
/// handled everything before a change to `other` (the barrier: `api` rolls), and returns
/// `web`'s rollout and the controller's roll count for `web` alone.
async fn after_the_write(ns: &TestNamespace, running: &mut Running) -> (Rollout, u64) {
    ns.wait_all_at_rest().await;
    let rolls = running.status.borrow().rolls;
    api(ns, "v1", "Secret")
        .await
        .patch(
            "other",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"password": b64(&format!("barrier-{rolls}"))}})),
        )
        .await
        .unwrap();
    running
        .until("the barrier's roll", |s| s.rolls > rolls && s.pending == 0)
        .await;
    let after = rollout(ns, WEB).await;
    // rollsafe's rolls of web: every roll but the barrier's.
    let rolls_of_web = running.status.borrow().rolls - 1;
    (after, rolls_of_web)
}

/// The cells of one row, as asserted: survives, the tool's write rolled the pods, rollsafe's
/// rolls of `web` in all (1: only the first), drift reported.
fn row(tool: &str, survives: bool, rolls_again: bool, drift: &[String]) {
    eprintln!(
        "| {tool} | survives: {survives} | the write rolls the pods: {rolls_again} | drift: {drift:?} |"
    );
}

// ---------------------------------------------------------------------------------------------
// The rows

/// `kubectl apply` (client-side, last-applied): the three-way merge leaves the hash (not in
/// the last-applied configuration, not in the manifest) alone; the write rolls nothing;
/// `kubectl diff` shows nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_client_side_apply_keeps_the_hash_on_real() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ns = TestNamespace::create(Substrate::Real, "gitops-kubectl-apply").await;
    let first = manifest_file(&ns, "v1.json", &manifest(&ns, WEB, "db", "1"));
    let Rolled {
        mut running,
        rolled,
        ..
    } = rolled_by_rollsafe(&ns, || async {
        let (code, out) = kubectl(&ns, &bin, &["apply", "-f", &first]).await;
        assert_eq!(code, 0, "{out}");
    })
    .await;

    let second = manifest_file(&ns, "v2.json", &manifest(&ns, WEB, "db", "2"));
    let (code, out) = kubectl(&ns, &bin, &["apply", "-f", &second]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("configured"), "a real write: {out}");
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), rolled.hash(), "the hash survives");
    assert_eq!(after.template, rolled.template);
    assert_eq!(
        (after.revision, after.replica_sets),
        (rolled.revision, rolled.replica_sets)
    );
    assert_eq!(rolls, 1, "rollsafe rolled again");
    assert_eq!(live(&ns, WEB).await["metadata"]["labels"][SYNC_LABEL], "2");

    let (code, out) = kubectl(&ns, &bin, &["diff", "-f", &second]).await;
    assert_eq!(code, 0, "kubectl diff reports drift: {out}");
    assert!(out.trim().is_empty() || !out.contains(CONFIG_HASH), "{out}");
    row("kubectl apply", true, false, &[]);
    running.stop().await;
    ns.finish().await;
}

/// Server-side apply by another field manager with `--force-conflicts` (Flux's
/// kustomize-controller): the hash is rollsafe-watch's field, not in the applier's
/// configuration, so the apply neither removes nor changes it; nothing rolls; Flux's dry-run
/// comparison of the whole object shows no drift, with no configuration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flux_server_side_apply_keeps_the_hash_on_real() {
    let ns = TestNamespace::create(Substrate::Real, "gitops-flux").await;
    let Rolled {
        mut running,
        rolled,
        ..
    } = rolled_by_rollsafe(&ns, || async {
        server_side_apply(&ns, &manifest(&ns, WEB, "db", "1"), "kustomize-controller").await;
    })
    .await;

    let second = manifest(&ns, WEB, "db", "2");
    server_side_apply(&ns, &second, "kustomize-controller").await;
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), rolled.hash(), "the hash survives");
    assert_eq!(after.template, rolled.template);
    assert_eq!(
        (after.revision, after.replica_sets),
        (rolled.revision, rolled.replica_sets)
    );
    assert_eq!(rolls, 1, "rollsafe rolled again");

    let drift = server_side_drift(&ns, &second, "kustomize-controller", &[]).await;
    assert_eq!(drift, Vec::<String>::new(), "Flux would report drift");
    // kubectl's own server-side apply, the same way.
    let drift = server_side_drift(&ns, &second, "kubectl", &[]).await;
    assert_eq!(drift, Vec::<String>::new());
    row("Flux (server-side apply, force)", true, false, &drift);
    running.stop().await;
    ns.finish().await;
}

/// A full replace of the object with the manifest (Argo CD's `Replace=true`, `kubectl
/// replace`): the hash and rollsafe's record on the workload's metadata are gone, so the
/// template is the first revision's again and the Deployment controller rolls back to the first
/// ReplicaSet — the tool's write restarts the pods, reading the Secret as it is now. rollsafe
/// sees a workload with no record and adopts it: no roll of its own on top, no `Rolled` Event.
/// Argo CD reports no drift (the live object is the manifest).
///
/// With the docs/gitops.md snippet (`managedFieldsManagers: [rollsafe-watch, rollsafe]` and
/// `RespectIgnoreDifferences=true`), Argo CD copies the live values of rollsafe's fields into
/// the manifest before it replaces: the hash survives, nothing rolls, no drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_replace_removes_the_hash_unless_told_on_real() {
    let ns = TestNamespace::create(Substrate::Real, "gitops-argo-replace").await;
    let Rolled {
        mut running,
        rolled,
        first,
    } = rolled_by_rollsafe(&ns, || async {
        server_side_apply(&ns, &manifest(&ns, WEB, "db", "1"), "argocd-controller").await;
    })
    .await;
    let adoptions = running.status.borrow().adoptions;

    // Without the snippet: the manifest replaces the object.
    replace(&ns, manifest(&ns, WEB, "db", "2"), "argocd-controller").await;
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), None, "the replace removed the hash");
    assert_eq!(
        after.template, first.template,
        "the first revision's template"
    );
    assert_eq!(
        after.revision,
        rolled.revision + 1,
        "the replace rolled the pods"
    );
    assert_eq!(
        after.replica_sets, rolled.replica_sets,
        "back to the first ReplicaSet: no new one"
    );
    assert_eq!(rolls, 1, "rollsafe rolled on top of the replace");
    assert_eq!(events(&ns, WEB, "Rolled").await.len(), 1);
    let status = running.status.borrow().clone();
    assert_eq!(
        status.adoptions,
        adoptions + 1,
        "re-adopted without a roll: {status:?}"
    );
    let web = live(&ns, WEB).await;
    assert!(
        web["metadata"]["annotations"]["rollsafe.dev/config-record"].is_string(),
        "{web}"
    );
    let drift = server_side_drift(
        &ns,
        &manifest(&ns, WEB, "db", "2"),
        "argocd-controller",
        &ROLLSAFE_MANAGERS,
    )
    .await;
    assert_eq!(drift, Vec::<String>::new());
    row("Argo CD Replace=true", false, true, &drift);

    // A change now: rollsafe rolls once and the hash is back.
    api(&ns, "v1", "Secret")
        .await
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"password": b64("rotated-again")}})),
        )
        .await
        .unwrap();
    running
        .until("the second roll", |s| {
            s.rolls == rolls + 2 && s.pending == 0
        })
        .await;
    let rolled = rollout(&ns, WEB).await;
    assert!(rolled.hash().is_some());

    // With the snippet: RespectIgnoreDifferences keeps the live values of rollsafe's fields.
    let current = live(&ns, WEB).await;
    let mut target = manifest(&ns, WEB, "db", "3");
    for fields in owned_by(&current, &ROLLSAFE_MANAGERS) {
        keep_live_fields(&mut target, &current, &fields);
    }
    assert_eq!(
        target["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH],
        rolled.hash().unwrap()
    );
    replace(&ns, target, "argocd-controller").await;
    let (after, rolls_now) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), rolled.hash(), "the hash survives");
    assert_eq!(
        (after.revision, after.replica_sets),
        (rolled.revision, rolled.replica_sets)
    );
    assert_eq!(rolls_now, rolls + 2, "rollsafe rolled again");
    assert_eq!(live(&ns, WEB).await["metadata"]["labels"][SYNC_LABEL], "3");
    let drift = server_side_drift(
        &ns,
        &manifest(&ns, WEB, "db", "3"),
        "argocd-controller",
        &ROLLSAFE_MANAGERS,
    )
    .await;
    assert_eq!(drift, Vec::<String>::new(), "Argo CD would report drift");
    row(
        "Argo CD Replace=true + RespectIgnoreDifferences",
        true,
        false,
        &drift,
    );
    running.stop().await;
    ns.finish().await;
}

/// Argo CD's default sync with the snippet's diff: a server-side apply by `argocd-controller`
/// (its `ServerSideApply=true`; a client-side apply behaves as `kubectl apply` above) keeps the
/// hash, rolls nothing, and the diff over the fields rollsafe's managers do not own is empty —
/// as is the diff over every field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn argo_cd_server_side_apply_and_diff_are_quiet_on_real() {
    let ns = TestNamespace::create(Substrate::Real, "gitops-argo-ssa").await;
    let Rolled {
        mut running,
        rolled,
        ..
    } = rolled_by_rollsafe(&ns, || async {
        server_side_apply(&ns, &manifest(&ns, WEB, "db", "1"), "argocd-controller").await;
    })
    .await;
    let second = manifest(&ns, WEB, "db", "2");
    server_side_apply(&ns, &second, "argocd-controller").await;
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), rolled.hash(), "the hash survives");
    assert_eq!(
        (after.revision, after.replica_sets),
        (rolled.revision, rolled.replica_sets)
    );
    assert_eq!(rolls, 1, "rollsafe rolled again");
    let ignored = server_side_drift(&ns, &second, "argocd-controller", &ROLLSAFE_MANAGERS).await;
    assert_eq!(ignored, Vec::<String>::new(), "Argo CD would report drift");
    let all = server_side_drift(&ns, &second, "argocd-controller", &[]).await;
    assert_eq!(all, Vec::<String>::new());
    // The ignore entry leaves out exactly rollsafe's fields: the hash and the record.
    let mut stripped = normalized(live(&ns, WEB).await);
    for fields in owned_by(&live(&ns, WEB).await, &ROLLSAFE_MANAGERS) {
        strip_fields(&mut stripped, &fields);
    }
    assert!(
        stripped["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH].is_null(),
        "{stripped}"
    );
    assert!(stripped["metadata"]["annotations"]["rollsafe.dev/config-record"].is_null());
    assert_eq!(
        stripped["metadata"]["annotations"]["rollsafe.dev/watch"],
        "true"
    );
    row("Argo CD (ServerSideApply=true)", true, false, &ignored);
    running.stop().await;
    ns.finish().await;
}

/// A naive operator that reads the object and PUTs it back with its own desired spec: the
/// workload's metadata (rollsafe's record) is kept, the template's hash is not. The write rolls
/// the pods (the template is the first revision's again); rollsafe's record still matches what
/// the workload consumes, so it does not roll on top — and, without a roll, writes no Event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_naive_operator_put_rolls_once_and_rollsafe_not_again_on_real() {
    let ns = TestNamespace::create(Substrate::Real, "gitops-naive-operator").await;
    let Rolled {
        mut running,
        rolled,
        first,
    } = rolled_by_rollsafe(&ns, || async {
        ns.apply([manifest(&ns, WEB, "db", "1")]).await;
    })
    .await;
    let adoptions = running.status.borrow().adoptions;
    let mut object = live(&ns, WEB).await;
    object["spec"] = manifest(&ns, WEB, "db", "1")["spec"].clone();
    object["metadata"]["labels"][SYNC_LABEL] = json!("2");
    let object = normalized(object);
    replace(&ns, object, "operator").await;
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(after.hash(), None, "the PUT removed the hash");
    assert_eq!(after.template, first.template);
    assert_eq!(
        after.revision,
        rolled.revision + 1,
        "the PUT rolled the pods"
    );
    assert_eq!(after.replica_sets, rolled.replica_sets);
    assert_eq!(rolls, 1, "rollsafe rolled on top of the PUT");
    assert_eq!(running.status.borrow().adoptions, adoptions, "no adoption");
    assert_eq!(events(&ns, WEB, "Rolled").await.len(), 1);
    row("naive operator PUT", false, true, &[]);
    running.stop().await;
    ns.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Helm, through its Go SDK (helm-python-sdk bundles Helm 4)

/// Drives Helm's SDK: install or upgrade a chart with the C library's options, which the
/// Python wrapper does not expose (`server_side_apply`, `force_conflicts`).
const HELM_DRIVER: &str = r#"
import json, sys
import helm_python as helm
from helm_python import _native
request = json.load(sys.stdin)
config = helm.Config(kubeconfig_path=request["kubeconfig"], namespace=request["namespace"])
chart = helm.Chart.load(request["chart"])
options = {"namespace": request["namespace"], "timeout_seconds": 120}
# Install takes a boolean; upgrade "true", "false" or "auto" (auto: as the last release did).
if request["op"] == "install":
    options["server_side_apply"] = request["serverSide"] == "true"
else:
    options["server_side_apply"] = request["serverSide"]
if request.get("forceConflicts"):
    options["force_conflicts"] = True
function = "helm_install" if request["op"] == "install" else "helm_upgrade"
try:
    payload = _native.call_string(function, config._raw(), _native.HANDLE(0), chart._raw(),
        None, request["name"], json.dumps(request["values"]), json.dumps(options))
except helm.HelmError as error:
    json.dump({"error": type(error).__name__, "message": str(error)}, sys.stdout)
    sys.exit(1)
release = json.loads(payload)
json.dump({"version": release.get("version"), "manifest": release.get("manifest", "")}, sys.stdout)
"#;

/// A chart of one template: `web`'s manifest with the sync label from `.Values.sync`.
fn chart(ns: &TestNamespace) -> PathBuf {
    let dir = ns.dir.path().join("chart");
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: web\nversion: 0.1.0\n",
    )
    .unwrap();
    let mut object = manifest(ns, WEB, "db", "SYNC");
    object["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let text = serde_json::to_string_pretty(&object)
        .unwrap()
        .replace("\"SYNC\"", "{{ .Values.sync | quote }}");
    std::fs::write(dir.join("templates/web.yaml"), text).unwrap();
    dir
}

async fn helm(
    ns: &TestNamespace,
    python: &Path,
    op: &str,
    server_side: &str,
    sync: &str,
) -> Result<Value, Value> {
    let driver = ns.dir.path().join("helm_gitops.py");
    std::fs::write(&driver, HELM_DRIVER).unwrap();
    let request = json!({"op": op, "kubeconfig": ns.kubeconfig, "namespace": ns.name,
        "chart": chart(ns), "name": "web", "values": {"sync": sync},
        "serverSide": server_side, "forceConflicts": server_side == "true"});
    let python = python.to_owned();
    tokio::task::spawn_blocking(move || {
        use std::io::Write as _;
        let mut child = Command::new(python)
            .arg(driver)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
            panic!(
                "the Helm driver printed no JSON ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
        if output.status.success() {
            Ok(answer)
        } else {
            Err(answer)
        }
    })
    .await
    .unwrap()
}

/// `helm install` then `helm upgrade` through the SDK, client-side (`server_side_apply:
/// "false"`, Helm's three-way merge of the last release's manifest, the new one and the live
/// object) or server-side (`"true"`, field manager `helm`, conflicts forced).
async fn helm_row(server_side: &str) {
    let Some(python) = helm_python() else {
        return;
    };
    let ns =
        TestNamespace::create(Substrate::Real, &format!("gitops-helm-ssa-{server_side}")).await;
    let Rolled {
        mut running,
        rolled,
        ..
    } = rolled_by_rollsafe(&ns, || async {
        helm(&ns, &python, "install", server_side, "1")
            .await
            .unwrap_or_else(|e| panic!("helm install: {e}"));
    })
    .await;
    let owner = |web: &Value, field: &str| -> Vec<String> {
        web["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["fieldsV1"].to_string().contains(field))
            .map(|e| {
                format!(
                    "{}/{}",
                    e["manager"].as_str().unwrap(),
                    e["operation"].as_str().unwrap()
                )
            })
            .collect()
    };
    // Helm's field manager is its program's name: `helm` for the CLI, the Python interpreter's
    // for the SDK driven from Python. Its operation says how it wrote.
    let web = live(&ns, WEB).await;
    let writers = owner(&web, SYNC_LABEL);
    assert_eq!(writers.len(), 1, "{writers:?}");
    let (manager, operation) = writers[0].split_once('/').unwrap();
    let manager = manager.to_owned();
    let expected = if server_side == "true" {
        "Apply"
    } else {
        "Update"
    };
    assert_eq!(operation, expected, "{writers:?}");

    let upgraded = helm(&ns, &python, "upgrade", server_side, "2")
        .await
        .unwrap_or_else(|e| panic!("helm upgrade: {e}"));
    assert!(upgraded["manifest"].as_str().is_some(), "{upgraded}");
    let (after, rolls) = after_the_write(&ns, &mut running).await;
    assert_eq!(live(&ns, WEB).await["metadata"]["labels"][SYNC_LABEL], "2");
    assert_eq!(after.hash(), rolled.hash(), "the hash survives");
    assert_eq!(after.template, rolled.template);
    assert_eq!(
        (after.revision, after.replica_sets),
        (rolled.revision, rolled.replica_sets)
    );
    assert_eq!(rolls, 1, "rollsafe rolled again");

    // Helm's manifest as it applies it: with the release's ownership marks it adds.
    let mut object = manifest(&ns, WEB, "db", "2");
    object["metadata"]["labels"]["app.kubernetes.io/managed-by"] = json!("Helm");
    object["metadata"]["annotations"]["meta.helm.sh/release-name"] = json!("web");
    object["metadata"]["annotations"]["meta.helm.sh/release-namespace"] = json!(ns.name);
    let drift = server_side_drift(&ns, &object, &manager, &[]).await;
    assert_eq!(
        drift,
        Vec::<String>::new(),
        "Helm's manifest against the live object"
    );
    row(
        &format!("helm upgrade (server_side_apply={server_side})"),
        true,
        false,
        &drift,
    );
    running.stop().await;
    ns.finish().await;
}

/// `helm upgrade` through the SDK with Helm's three-way merge: the hash survives, nothing
/// rolls, no drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_three_way_merge_keeps_the_hash_on_real() {
    helm_row("false").await;
}

/// `helm upgrade` through the SDK with Helm 4's server-side apply: the hash survives, nothing
/// rolls, no drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_server_side_apply_keeps_the_hash_on_real() {
    helm_row("true").await;
}

// ---------------------------------------------------------------------------------------------
// The render path

/// `rollsafe render`'s engine on the tool's manifests (a Secret and `web`), default mode: the
/// manifests with the hash annotation written into `web`'s template.
fn rendered(ns: &TestNamespace, password: &str, sync: &str) -> (Value, Value) {
    let mut secret = secret(ns, "db", "password", password);
    let mut web = manifest(ns, WEB, "db", sync);
    let settings = rollsafe_core::render::RenderSettings {
        release_namespace: Some(ns.name.clone()),
        ..rollsafe_core::render::RenderSettings::default()
    };
    rollsafe_core::render::render(&mut [&mut secret, &mut web], None, &settings).unwrap();
    (secret, web)
}

/// The render path: the hash is part of the manifest, so the tool owns it. Each tool's way of
/// writing — client-side apply, server-side apply (Flux, Argo CD, Helm 4), replace (Argo CD's
/// `Replace=true`) — writes the same hash again: it survives, nothing rolls, no drift. A change
/// of the Secret in the manifest changes the hash: one roll, by the tool's write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rendered_hash_never_drifts_on_real() {
    let Some(bin) = kubectl_or_skip() else { return };
    let ns = TestNamespace::create(Substrate::Real, "gitops-render").await;
    let hash = |web: &Value| {
        web["spec"]["template"]["metadata"]["annotations"]
            [rollsafe_core::annotations::DP_RESOURCE_HASH]
            .as_str()
            .map(str::to_owned)
    };
    let (secret_v1, web_v1) = rendered(&ns, "hunter2", "1");
    assert!(hash(&web_v1).is_some(), "{web_v1}");
    assert_eq!(
        rendered(&ns, "hunter2", "1").1,
        web_v1,
        "a render is stable"
    );
    ns.apply([secret_v1]).await;
    server_side_apply(&ns, &web_v1, "kustomize-controller").await;
    let first = rollout(&ns, WEB).await;
    assert_eq!(
        first.template["metadata"]["annotations"],
        web_v1["spec"]["template"]["metadata"]["annotations"]
    );

    // The next sync of the same render, each tool's way; then each tool's drift check.
    let (_, web_v1b) = rendered(&ns, "hunter2", "2");
    assert_eq!(
        hash(&web_v1b),
        hash(&web_v1),
        "a metadata label is not in the hash's input"
    );
    server_side_apply(&ns, &web_v1b, "kustomize-controller").await;
    replace(&ns, web_v1b.clone(), "argocd-controller").await;
    let file = manifest_file(&ns, "web.json", &web_v1b);
    let (code, out) = kubectl(&ns, &bin, &["apply", "-f", &file]).await;
    assert_eq!(code, 0, "{out}");
    let after = rollout(&ns, WEB).await;
    assert_eq!(after.template, first.template);
    assert_eq!(
        (after.revision, after.replica_sets),
        (first.revision, first.replica_sets),
        "a sync rolled"
    );
    for manager in ["kustomize-controller", "argocd-controller", "helm"] {
        let drift = server_side_drift(&ns, &web_v1b, manager, &[]).await;
        assert_eq!(drift, Vec::<String>::new(), "{manager} would report drift");
    }
    let (code, out) = kubectl(&ns, &bin, &["diff", "-f", &file]).await;
    assert_eq!(code, 0, "kubectl diff reports drift: {out}");
    row(
        "rollsafe render (post-renderer), every tool",
        true,
        false,
        &[],
    );

    // A change: the render's hash moves, the tool's write rolls once.
    let (secret_v2, web_v2) = rendered(&ns, "rotated", "2");
    assert_ne!(hash(&web_v2), hash(&web_v1));
    api(&ns, "v1", "Secret")
        .await
        .patch(
            "db",
            &PatchParams::apply("kustomize-controller").force(),
            &Patch::Apply(&secret_v2),
        )
        .await
        .unwrap();
    server_side_apply(&ns, &web_v2, "kustomize-controller").await;
    let changed = eventually("the change's roll", common::DEADLINE, || async {
        let now = rollout(&ns, WEB).await;
        (now.revision > first.revision).then_some(now)
    })
    .await;
    assert_eq!(
        (changed.revision, changed.replica_sets),
        (first.revision + 1, first.replica_sets + 1)
    );
    server_side_apply(&ns, &web_v2, "kustomize-controller").await;
    let again = rollout(&ns, WEB).await;
    assert_eq!(
        (again.revision, again.replica_sets),
        (changed.revision, changed.replica_sets),
        "rolled twice"
    );
    ns.finish().await;
}
