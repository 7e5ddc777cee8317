//! Rollouts on both substrates — the real control plane's Deployment, StatefulSet and
//! DaemonSet controllers with simulated pods, and the emulator — through the CLI a user runs:
//! `restart-consumers --wait` follows each roll to its end (complete, or deferred when
//! `OnDelete`, paused or fully partitioned), `--progressive` stops at a crash-looping canary
//! with Kubernetes' own `ProgressDeadlineExceeded` and patches nothing else, and rollsafe's
//! states agree with real `kubectl rollout status` on the same objects.
//!
//! The one substrate-specific step: the crash is the pod simulator's marker
//! (`sim.rollsafe.dev/crash-on-roll`) on the real control plane and a fault on the emulator
//! (docs/testing.md).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt as _;
use rollsafe_testing::{TestNamespace, Workload, on_both_substrates};
use serde_json::{Value, json};

const SECRET: &str = "db-creds";

fn consumer(kind: &str, name: &str) -> Value {
    let mut object = Workload::of_kind(kind, name)
        .consuming_secret_via_env_from(SECRET)
        .build();
    if kind != "DaemonSet" {
        object["spec"]["replicas"] = json!(1);
    }
    object
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

/// Runs the rollsafe binary with the namespace's kubeconfig: exit code, stdout as JSON, stderr.
async fn rollsafe(ns: &TestNamespace, args: &[&str]) -> (i32, Value, String) {
    let kubeconfig = ns.kubeconfig.clone();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let output = Command::cargo_bin("rollsafe")
            .unwrap()
            .args(&args)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("ROLLSAFE_NAMESPACE")
            .env_remove("ROLLSAFE_CONTEXT")
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            serde_json::from_slice(&output.stdout).unwrap_or(Value::Null),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    })
    .await
    .unwrap()
}

/// What `kubectl rollout status --watch=false` (the machine's newest kubectl) says of one
/// workload: `done`, `waiting`, `deadline` or `not-rolling-update`.
async fn kubectl_rollout_status(ns: &TestNamespace, resource: &str) -> &'static str {
    let kubectl = rollsafe_testing::kubectl().expect("kubectl");
    let (kubeconfig, namespace, target) =
        (ns.kubeconfig.clone(), ns.name.clone(), resource.to_owned());
    let output = tokio::task::spawn_blocking(move || {
        Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args([
                "-n",
                &namespace,
                "rollout",
                "status",
                "--watch=false",
                &target,
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    match (output.status.success(), text.as_str()) {
        (true, t) if t.contains("Waiting for") => "waiting",
        (true, t) if t.contains("rolled out") || t.contains("roll out complete") => "done",
        (false, t) if t.contains("exceeded its progress deadline") => "deadline",
        (false, t) if t.contains("only available for RollingUpdate") => "not-rolling-update",
        _ => panic!("kubectl rollout status {resource}: unexpected: {text}"),
    }
}

/// The restart annotation on a workload's template, as stored.
async fn restarted_at(ns: &TestNamespace, kind: &str, name: &str) -> Option<String> {
    ns.get("apps/v1", kind, name)
        .await
        .unwrap()
        .pointer("/spec/template/metadata/annotations/krypton.io~1restarted-at")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The canary's next revision crash-loops: the simulator's marker on the real control plane
/// (set on the template before the roll), a fault on the emulator.
fn crash_on_roll(ns: &TestNamespace, object: &mut Value, resource: &str) {
    object["spec"]["template"]["metadata"]["annotations"] =
        json!({"sim.rollsafe.dev/crash-on-roll": "true"});
    if let Some(emu) = ns.emulator() {
        let name = object["metadata"]["name"].as_str().unwrap();
        emu.add_fault(
            rollsafe_emulator::Fault::on("patch", resource)
                .name(name)
                .then(rollsafe_emulator::FaultAction::rollout_fails(
                    "CrashLoopBackOff",
                    "simulated crash",
                )),
        );
    }
}

on_both_substrates! {
    /// `--wait` follows each requested roll to its end: the Deployment completes, the
    /// `OnDelete` StatefulSet and the DaemonSet are deferred — and kubectl agrees.
    async fn wait_follows_each_roll_to_its_end_and_kubectl_agrees(ns) {
        let mut worker = consumer("StatefulSet", "worker");
        worker["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        let mut agent = consumer("DaemonSet", "agent");
        agent["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
        seed(ns, vec![consumer("Deployment", "api"), worker, agent]).await;
        let (code, out, stderr) =
            rollsafe(ns, &["restart-consumers", "--wait", "-n", &ns.name, SECRET]).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(out["result"]["status"], "requested", "{out}");
        assert_eq!(out["rollout"]["ended"], "done", "{out}");
        assert_eq!(out["rollout"]["counts"], json!({"complete": 1, "deferred": 2}), "{out}");
        let states: Vec<(String, String)> = out["rollout"]["workloads"].as_array().unwrap().iter()
            .map(|w| (w["name"].as_str().unwrap().to_owned(), w["state"].as_str().unwrap().to_owned()))
            .collect();
        assert!(states.contains(&("api".to_owned(), "complete".to_owned())), "{states:?}");
        assert!(
            stderr.lines().any(|l| l.ends_with(" Deployment/api complete: 1 updated, 1 ready of 1")),
            "{stderr}"
        );
        assert_eq!(kubectl_rollout_status(ns, "deployment/api").await, "done");
        assert_eq!(kubectl_rollout_status(ns, "statefulset/worker").await, "not-rolling-update");
        assert_eq!(kubectl_rollout_status(ns, "daemonset/agent").await, "not-rolling-update");
    }

    /// A paused Deployment and a StatefulSet partitioned above its replicas are requested and
    /// deferred; kubectl waits for the paused one and calls the partitioned one complete.
    async fn paused_and_partitioned_are_deferred(ns) {
        let mut paused = consumer("Deployment", "paused");
        paused["spec"]["paused"] = json!(true);
        let mut partitioned = consumer("StatefulSet", "partitioned");
        partitioned["spec"]["updateStrategy"] =
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}});
        seed(ns, vec![paused, partitioned]).await;
        let (code, out, stderr) =
            rollsafe(ns, &["restart-consumers", "--wait", "-n", &ns.name, SECRET]).await;
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(out["rollout"]["counts"], json!({"deferred": 2}), "{out}");
        assert_eq!(kubectl_rollout_status(ns, "deployment/paused").await, "waiting");
        assert_eq!(kubectl_rollout_status(ns, "statefulset/partitioned").await, "done");
    }

    /// `--progressive`: the canary's new pods crash-loop, its Deployment controller reports
    /// `ProgressDeadlineExceeded` (after its own 3 s; a Deployment's stall is its own condition's to say, so a run that
    /// missed it would end at `--timeout` with exit 5), the run
    /// stops there with exit 4 and the rest is never patched; kubectl says the same deadline
    /// was exceeded.
    async fn progressive_stops_at_a_crash_looping_canary(ns) {
        let mut api = consumer("Deployment", "api");
        api["spec"]["progressDeadlineSeconds"] = json!(3);
        crash_on_roll(ns, &mut api, "deployments");
        if let Some(emu) = ns.emulator() {
            emu.change_settings(rollsafe_emulator::RolloutPaceChange {
                pod_ready_millis: Some(200),
                progress_deadline_scale: None,
            }).unwrap();
        }
        seed(ns, vec![api, consumer("StatefulSet", "worker")]).await;
        let (code, out, stderr) =
            rollsafe(ns, &["restart-consumers", "--progressive", "--timeout", "120s",
                "-n", &ns.name, SECRET]).await;
        assert_eq!(code, 4, "{stderr}\n{out}");
        assert_eq!(out["stopped"]["cause"], "stalled", "{out}");
        assert_eq!(out["stopped"]["workload"]["name"], "api");
        assert_eq!(out["stopped"]["workload"]["reason"]["reason"], "ProgressDeadlineExceeded", "{out}");
        assert_eq!(out["heldBack"], json!([{"kind": "StatefulSet", "name": "worker"}]));
        assert!(restarted_at(ns, "Deployment", "api").await.is_some());
        assert_eq!(restarted_at(ns, "StatefulSet", "worker").await, None);
        assert_eq!(kubectl_rollout_status(ns, "deployment/api").await, "deadline");
    }

    /// A StatefulSet has no progress deadline of its own: its crash-looping new pod makes no
    /// progress within `--progress-deadline`, and `--wait` reports it stalled with the pods'
    /// own reason (exit 4).
    async fn a_crash_looping_stateful_set_stalls_within_the_progress_deadline(ns) {
        let mut worker = consumer("StatefulSet", "worker");
        crash_on_roll(ns, &mut worker, "statefulsets");
        if let Some(emu) = ns.emulator() {
            emu.change_settings(rollsafe_emulator::RolloutPaceChange {
                pod_ready_millis: Some(200),
                progress_deadline_scale: None,
            }).unwrap();
        }
        seed(ns, vec![worker]).await;
        let (code, out, stderr) = rollsafe(ns, &["restart-consumers", "--wait",
            "--progress-deadline", "10s", "--timeout", "120s", "-n", &ns.name, SECRET]).await;
        assert_eq!(code, 4, "{stderr}\n{out}");
        let worker = &out["rollout"]["workloads"][0];
        assert_eq!(worker["state"], "stalled", "{out}");
        assert_eq!(worker["reason"]["reason"], "NoProgress", "{out}");
        assert_eq!(worker["reason"]["podReason"], "CrashLoopBackOff", "{out}");
    }
}
