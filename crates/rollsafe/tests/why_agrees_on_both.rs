//! `rollsafe why` and the controller agree, on both substrates: where `why` once re-decided the
//! controller's policy from its parts, it now runs the controller's own stages with the settings
//! the controller publishes on its Lease — and its verdict is what the controller then does.
//!
//! Each case: the controller adopts (and publishes its settings), stops; something changes;
//! `why -o json` answers; the controller starts again and does what `why` said. The cases are
//! the ones where the two disagreed: the sandbox's `--all`, `--reloader-compat`, a CronJob, the
//! flap stop, and a standing approval requirement shown before anything is pending.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Duration;

use assert_cmd::cargo::CommandCargoExt as _;
use base64::Engine as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use rollsafe_kube::published::LeaseRef;
use rollsafe_testing::{TestNamespace, on_both_substrates};
use rollsafe_watch::{Controller, ControllerSettings, Spawned, Status};
use serde_json::{Value, json};

/// How long a case waits for the controller.
const DEADLINE: Duration = Duration::from_secs(90);

const LEASE: &str = "rollsafe-watch";

fn secret(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name},
        "data": {"password": base64::engine::general_purpose::STANDARD.encode(value)}})
}

/// A Deployment reading `db`'s `password`, with these metadata annotations.
fn deployment(name: &str, annotations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
                {"name": "app", "image": "registry.example/app:1",
                 "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]}}}})
}

/// A controller on a task of its own, publishing its settings on the namespace's Lease.
struct Running(Spawned);

impl Running {
    fn start(ns: &TestNamespace, settings: &ControllerSettings) -> Self {
        let controller = Controller::new(
            ns.connection.client(None),
            ControllerSettings {
                namespaces: vec![ns.name.clone()],
                debounce: Duration::from_millis(50),
                publish_on: Some(LeaseRef {
                    namespace: ns.name.clone(),
                    name: LEASE.to_owned(),
                }),
                ..settings.clone()
            },
        );
        Running(controller.spawn())
    }

    async fn until(&mut self, what: &str, done: impl Fn(&Status) -> bool) -> Status {
        match self.0.wait_for(DEADLINE, done).await {
            Ok(status) => status,
            Err(last) => panic!("timed out waiting for {what}: {last:?}"),
        }
    }

    async fn stop(self) {
        self.0.stop().await.unwrap();
    }
}

/// Adopts what the namespace holds under `settings` (publishing them), then stops.
async fn adopted(ns: &TestNamespace, settings: &ControllerSettings, adoptions: u64) {
    let mut running = Running::start(ns, settings);
    running
        .until("adopted", |s| s.adoptions == adoptions && s.pending == 0)
        .await;
    rollsafe_testing::eventually("the settings published", DEADLINE, || async {
        let lease = LeaseRef {
            namespace: ns.name.clone(),
            name: LEASE.to_owned(),
        };
        rollsafe_kube::published::read(&ns.connection.client(None), &lease)
            .await
            .ok()
            .flatten()
    })
    .await;
    running.stop().await;
    ns.wait_all_at_rest().await;
}

async fn rotate(ns: &TestNamespace, value: &str) {
    let api: Api<DynamicObject> = ns
        .api_for(&json!({"apiVersion": "v1", "kind": "Secret"}))
        .await;
    let patch =
        json!({"data": {"password": base64::engine::general_purpose::STANDARD.encode(value)}});
    api.patch("db", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// `rollsafe why TARGET -o json` in the namespace: its answer.
async fn why(ns: &TestNamespace, target: &str) -> Value {
    let (kubeconfig, namespace, target) =
        (ns.kubeconfig.clone(), ns.name.clone(), target.to_owned());
    tokio::task::spawn_blocking(move || {
        let output = Command::cargo_bin("rollsafe")
            .unwrap()
            .args(["why", "-o", "json", "-n", &namespace, &target])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("ROLLSAFE_WATCH_CONTROLLER_LEASE")
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    })
    .await
    .unwrap()
}

on_both_substrates! {
    /// The sandbox's controller runs `--all`: a workload without rollsafe.dev/watch is watched,
    /// and `why` says so, and that it would roll — as the controller then does.
    async fn under_all_why_says_watched_and_the_controller_rolls(ns) {
        let all = ControllerSettings { all: true, ..ControllerSettings::default() };
        ns.apply_at_rest([secret("db", "one"), deployment("web", json!({}))]).await;
        adopted(ns, &all, 1).await;
        rotate(ns, "two").await;
        let answer = why(ns, "deployment/web").await;
        assert_eq!(answer["settings"]["source"], "published", "{answer:#}");
        assert_eq!(answer["watch"]["state"], "all", "{answer:#}");
        assert_eq!(answer["rollNow"]["decision"], "roll", "{answer:#}");
        assert_eq!(answer["rollNow"]["changed"], json!(["Secret/db"]));
        let mut running = Running::start(ns, &all);
        running.until("the roll why announced", |s| s.rolls == 1 && s.pending == 0).await;
        running.stop().await;
    }

    /// Under `--reloader-compat`, Reloader's reload list opts a workload in: `why` reads the
    /// same annotations the controller does and names the listed Secret.
    async fn under_reloader_compat_why_reads_the_reload_list(ns) {
        let compat = ControllerSettings { reloader_compat: true, ..ControllerSettings::default() };
        let mut listed = deployment("web", json!({"secret.reloader.stakater.com/reload": "db"}));
        listed["spec"]["template"]["spec"]["containers"][0]["env"] = json!([]);
        ns.apply_at_rest([secret("db", "one"), listed]).await;
        adopted(ns, &compat, 1).await;
        rotate(ns, "two").await;
        let answer = why(ns, "deployment/web").await;
        assert_eq!(answer["watch"]["state"], "reloader", "{answer:#}");
        let consumed: Vec<&str> = answer["consumes"].as_array().unwrap().iter()
            .filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(consumed, ["db"], "{answer:#}");
        assert_eq!(answer["rollNow"]["decision"], "roll", "{answer:#}");
        let mut running = Running::start(ns, &compat);
        running.until("the roll why announced", |s| s.rolls == 1 && s.pending == 0).await;
        running.stop().await;
    }

    /// A regular-expression reload entry consumes every existing Secret whose name matches:
    /// `why` lists them as the controller reads them, and a change to one rolls.
    async fn a_regular_expression_reload_entry_is_read_as_the_controller_reads_it(ns) {
        let compat = ControllerSettings { reloader_compat: true, ..ControllerSettings::default() };
        let mut listed = deployment("web", json!({"secret.reloader.stakater.com/reload": "cert-.*"}));
        listed["spec"]["template"]["spec"]["containers"][0]["env"] = json!([]);
        ns.apply_at_rest([secret("cert-2024", "one"), secret("other", "x"), listed]).await;
        adopted(ns, &compat, 1).await;
        let api: Api<DynamicObject> = ns.api_for(&json!({"apiVersion": "v1", "kind": "Secret"})).await;
        let patch = json!({"data": {"password": base64::engine::general_purpose::STANDARD.encode("two")}});
        api.patch("cert-2024", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        let answer = why(ns, "deployment/web").await;
        let consumed: Vec<&str> = answer["consumes"].as_array().unwrap().iter()
            .filter_map(|c| c["name"].as_str()).collect();
        assert_eq!(consumed, ["cert-2024"], "{answer:#}");
        assert_eq!(answer["rollNow"]["decision"], "roll", "{answer:#}");
        assert_eq!(answer["rollNow"]["changed"], json!(["Secret/cert-2024"]), "{answer:#}");
        let mut running = Running::start(ns, &compat);
        running.until("the roll why announced", |s| s.rolls == 1 && s.pending == 0).await;
        running.stop().await;
    }

    /// `why cronjob/NAME` explains a CronJob the controller rolls: its Jobs' template is
    /// patched and its pods start with the next run.
    async fn why_explains_a_cron_job(ns) {
        let defaults = ControllerSettings::default();
        ns.apply([
            secret("db", "one"),
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "nightly", "annotations": {"rollsafe.dev/watch": "true"}},
                "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "job", "image": "registry.example/job:1",
                        "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]}}}}}}),
        ]).await;
        adopted(ns, &defaults, 1).await;
        rotate(ns, "two").await;
        let answer = why(ns, "cronjob/nightly").await;
        assert_eq!(answer["kind"], "CronJob");
        assert_eq!(answer["rollNow"]["decision"], "deferred", "{answer:#}");
        let mut running = Running::start(ns, &defaults);
        let status = running.until("the roll why announced", |s| s.rolls == 1 && s.pending == 0).await;
        assert_eq!(status.deferred, 1);
        running.stop().await;
    }

    /// A workload rolled as often as the flap stop allows: `why` runs the brakes as the
    /// controller does (reading its roll times) and says it would be halted — as it then is.
    async fn why_runs_the_brakes(ns) {
        let defaults = ControllerSettings::default();
        let now = jiff::Timestamp::now();
        let times: Vec<String> = (1..=5)
            .map(|minutes| (now - jiff::SignedDuration::from_secs(minutes * 60)).to_string())
            .collect();
        ns.apply_at_rest([
            secret("db", "one"),
            deployment("web", json!({"rollsafe.dev/watch": "true", "rollsafe.dev/rolled-at": times.join(",")})),
        ]).await;
        adopted(ns, &defaults, 1).await;
        rotate(ns, "two").await;
        let answer = why(ns, "deployment/web").await;
        assert_eq!(answer["rollNow"]["decision"], "halt", "{answer:#}");
        let stopped: Vec<&Value> = answer["stages"].as_array().unwrap().iter()
            .filter(|s| s["result"] == "stopped").collect();
        assert_eq!(stopped.len(), 1, "{answer:#}");
        assert_eq!(stopped[0]["stage"], "brakes");
        let mut running = Running::start(ns, &defaults);
        running.until("the halt why announced", |s| s.halts == 1 && s.pending == 0).await;
        assert_eq!(running.0.status().borrow().rolls, 0);
        running.stop().await;
    }

    /// `--require-approval`: before any change, `why` shows the standing hold; after one, the
    /// roll awaits approval — and the controller marks it pending instead of rolling.
    async fn why_shows_a_standing_approval_requirement(ns) {
        let approval = ControllerSettings {
            require_approval: vec![ns.name.clone()],
            ..ControllerSettings::default()
        };
        ns.apply_at_rest([secret("db", "one"), deployment("web", json!({"rollsafe.dev/watch": "true"}))]).await;
        adopted(ns, &approval, 1).await;
        let before = why(ns, "deployment/web").await;
        assert_eq!(before["rollNow"]["decision"], "unchanged", "{before:#}");
        assert!(
            before["holds"].as_array().unwrap().iter()
                .any(|h| h.as_str().is_some_and(|h| h.starts_with("a roll needs approval"))),
            "{before:#}"
        );
        rotate(ns, "two").await;
        let answer = why(ns, "deployment/web").await;
        assert_eq!(answer["rollNow"]["decision"], "pending", "{answer:#}");
        assert_eq!(answer["pending"]["heldBy"], "approval", "{answer:#}");
        let mut running = Running::start(ns, &approval);
        let status = running.until("the pending mark", |s| s.pended == 1 && s.pending == 0).await;
        assert_eq!(status.rolls, 0);
        running.stop().await;
    }
}
