//! The rollout model against real `kubectl rollout status` (every release 1.27–1.33 the
//! machine carries) on the emulator's simulated rollouts: for each state kubectl's viewers
//! cover, both read the same object and must agree — kubectl's success is `complete` (or, for
//! a partition covering every replica, `deferred`), its waiting is `progressing`, its progress
//! deadline error is `stalled`. Where rollsafe names a state kubectl has no word for, the
//! table pins what kubectl says instead (docs/rollouts.md): a paused Deployment kubectl waits
//! for, and `OnDelete`, which its viewers refuse.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rollsafe_core::rollout::{RolloutState, classify};
use rollsafe_core::workload::WorkloadKind;
use rollsafe_emulator::{Fault, FaultAction, RolloutPaceChange, RunningEmulator};
use rollsafe_testing::{TestCluster, Workload, kubectl_releases};
use serde_json::{Value, json};

const NS: &str = "shop";

/// What `kubectl rollout status --watch=false` said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kubectl {
    /// Exit 0, rolled out (`successfully rolled out`, `partitioned roll out complete`).
    Done,
    /// Exit 0, `Waiting for …`.
    Waiting,
    /// Exit 1: `exceeded its progress deadline`.
    DeadlineExceeded,
    /// Exit 1: `rollout status is only available for RollingUpdate strategy type`.
    NotRollingUpdate,
}

fn kubectl_says(binary: &Path, kubeconfig: &Path, resource: &str, name: &str) -> (Kubectl, String) {
    let output = Command::new(binary)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["-n", NS, "rollout", "status", "--watch=false"])
        .arg(format!("{resource}/{name}"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let verdict = match (output.status.success(), text.as_str()) {
        (true, t) if t.contains("Waiting for") => Kubectl::Waiting,
        (true, t) if t.contains("rolled out") || t.contains("roll out complete") => Kubectl::Done,
        (false, t) if t.contains("exceeded its progress deadline") => Kubectl::DeadlineExceeded,
        (false, t) if t.contains("only available for RollingUpdate") => Kubectl::NotRollingUpdate,
        _ => panic!("{}: unexpected: {text}", binary.display()),
    };
    (verdict, text)
}

fn workload(kind: &str, name: &str, replicas: u64) -> Value {
    let mut object = Workload::of_kind(kind, name).namespace(NS).build();
    if kind != "DaemonSet" {
        object["spec"]["replicas"] = json!(replicas);
    }
    object
}

fn edit(emu: &RunningEmulator, resource: &str, name: &str, change: impl FnOnce(&mut Value)) {
    let mut object = emu.get_object(resource, Some(NS), name).unwrap();
    change(&mut object);
    emu.put_object(object).unwrap();
}

/// A new pod template: the rollout rollsafe would request.
fn roll(emu: &RunningEmulator, resource: &str, name: &str) {
    edit(emu, resource, name, |o| {
        o["spec"]["template"]["metadata"]["annotations"] =
            json!({"krypton.io/restarted-at": format!("{:?}", Instant::now())});
    });
}

fn state(emu: &RunningEmulator, kind: WorkloadKind, name: &str) -> RolloutState {
    classify(
        kind,
        &emu.get_object(kind.plural(), Some(NS), name).unwrap(),
    )
    .state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_agrees_with_kubectl_rollout_status_on_every_state_it_covers() {
    let releases = kubectl_releases();
    if releases.is_empty() {
        return;
    }
    use WorkloadKind::{DaemonSet, Deployment, StatefulSet};
    let mut seeds = vec![
        workload("Deployment", "done", 2),
        workload("Deployment", "slow", 2),
        workload("Deployment", "failing", 2),
        workload("Deployment", "paused", 2),
        workload("StatefulSet", "sts-done", 2),
        workload("StatefulSet", "sts-slow", 2),
        workload("StatefulSet", "sts-partition", 2),
        workload("StatefulSet", "sts-on-delete", 2),
        workload("DaemonSet", "ds-done", 0),
        workload("DaemonSet", "ds-slow", 0),
        workload("DaemonSet", "ds-on-delete", 0),
    ];
    seeds[2]["spec"]["progressDeadlineSeconds"] = json!(1);
    seeds[6]["spec"]["updateStrategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}});
    seeds[7]["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    seeds[10]["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let cluster = TestCluster::start(seeds).await;
    let emu = &cluster.emu;
    // Rolled at once.
    for (resource, name) in [
        ("deployments", "done"),
        ("statefulsets", "sts-done"),
        ("daemonsets", "ds-done"),
        ("statefulsets", "sts-partition"),
        ("statefulsets", "sts-on-delete"),
        ("daemonsets", "ds-on-delete"),
    ] {
        roll(emu, resource, name);
    }
    edit(emu, "deployments", "paused", |o| {
        o["spec"]["paused"] = json!(true)
    });
    roll(emu, "deployments", "paused");
    // Pods that take ten minutes to become ready: these stay in progress.
    emu.change_settings(RolloutPaceChange {
        pod_ready_millis: Some(600_000),
        progress_deadline_scale: None,
    })
    .unwrap();
    for (resource, name) in [
        ("deployments", "slow"),
        ("statefulsets", "sts-slow"),
        ("daemonsets", "ds-slow"),
    ] {
        roll(emu, resource, name);
    }
    // A revision that never becomes ready, past its one-second deadline.
    emu.add_fault(
        Fault::on("patch", "deployments")
            .name("failing")
            .then(FaultAction::rollout_fails("CrashLoopBackOff", "")),
    );
    // Through the API (a real patch), so that the fault marks the revision it makes.
    let (binary, kubeconfig) = (releases[0].clone(), cluster.kubeconfig.clone());
    let patched = tokio::task::spawn_blocking(move || {
        Command::new(binary)
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["-n", NS, "patch", "deployment", "failing", "-p"])
            .arg(r#"{"spec":{"template":{"metadata":{"annotations":{"krypton.io/restarted-at":"now"}}}}}"#)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(patched.status.success(), "{patched:?}");
    let started = Instant::now();
    while state(emu, Deployment, "failing") != RolloutState::Stalled {
        assert!(started.elapsed() < Duration::from_secs(30), "never stalled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let table = [
        (Deployment, "done", RolloutState::Complete, Kubectl::Done),
        (
            Deployment,
            "slow",
            RolloutState::Progressing,
            Kubectl::Waiting,
        ),
        (
            Deployment,
            "failing",
            RolloutState::Stalled,
            Kubectl::DeadlineExceeded,
        ),
        (
            Deployment,
            "paused",
            RolloutState::Deferred,
            Kubectl::Waiting,
        ),
        (
            StatefulSet,
            "sts-done",
            RolloutState::Complete,
            Kubectl::Done,
        ),
        (
            StatefulSet,
            "sts-slow",
            RolloutState::Progressing,
            Kubectl::Waiting,
        ),
        (
            StatefulSet,
            "sts-partition",
            RolloutState::Deferred,
            Kubectl::Done,
        ),
        (
            StatefulSet,
            "sts-on-delete",
            RolloutState::Deferred,
            Kubectl::NotRollingUpdate,
        ),
        (DaemonSet, "ds-done", RolloutState::Complete, Kubectl::Done),
        (
            DaemonSet,
            "ds-slow",
            RolloutState::Progressing,
            Kubectl::Waiting,
        ),
        (
            DaemonSet,
            "ds-on-delete",
            RolloutState::Deferred,
            Kubectl::NotRollingUpdate,
        ),
    ];
    let kubeconfig = cluster.kubeconfig.clone();
    let releases_for = releases.clone();
    let checked = tokio::task::spawn_blocking(move || {
        let mut checked = Vec::new();
        for binary in &releases_for {
            for (kind, name, _, expected) in table {
                let (said, text) = kubectl_says(binary, &kubeconfig, kind.plural(), name);
                assert_eq!(
                    said,
                    expected,
                    "{} {kind:?}/{name}: {text}",
                    binary.display()
                );
                checked.push((kind, name));
            }
        }
        checked
    })
    .await
    .unwrap();
    assert_eq!(checked.len(), table.len() * releases.len());
    for (kind, name, expected, _) in table {
        assert_eq!(state(emu, kind, name), expected, "{kind:?}/{name}");
    }
}
