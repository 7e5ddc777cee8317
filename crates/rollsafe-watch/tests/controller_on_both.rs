//! The controller on both substrates — the real control plane and the emulator — with the same
//! assertions: adoption rolls nothing, a change rolls once whether it arrives as a patch, a
//! server-side apply or a replace, a no-op apply and an unread key roll nothing, a restart
//! rolls nothing and a change missed meanwhile rolls once, a CronJob's template is rolled,
//! two replicas on one Lease roll once, and each roll is followed to its end by the
//! workload's own controller: complete, or stalled with Kubernetes' own
//! `ProgressDeadlineExceeded` — announced by Events that `kubectl describe` shows.
//!
//! Each controller watches only its test's namespace: the real control plane is shared.
//! Emulator-only cases (faults, the request log) stay in `controller.rs`.

#![expect(clippy::unwrap_used, clippy::expect_used, reason = "tests may unwrap")]

use std::time::Duration;

use base64::Engine as _;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use rollsafe_testing::{TestNamespace, Workload, eventually, on_both_substrates};
use rollsafe_watch::{Controller, ControllerSettings};
use serde_json::{Value, json};

mod common;
use common::{DEADLINE, Running};

fn settings(ns: &TestNamespace) -> ControllerSettings {
    ControllerSettings {
        namespaces: vec![ns.name.clone()],
        debounce: Duration::from_millis(50),
        ..ControllerSettings::default()
    }
}

fn controller(ns: &TestNamespace, settings: ControllerSettings) -> Running {
    Running::spawn(Controller::new(ns.connection.client(None), settings))
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

fn secret(name: &str, data: &[(&str, &str)]) -> Value {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(b64(v))))
        .collect();
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": data})
}

fn key_ref(env: &str, secret: &str, key: &str) -> Value {
    json!({"name": env, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}})
}

/// A Deployment opted in, its container reading `env` and `env_from`.
fn deployment(name: &str, env: Value, env_from: Value) -> Value {
    let mut object = Workload::deployment(name).with_replicas().build();
    object["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true"});
    object["spec"]["template"]["spec"]["containers"][0]["env"] = env;
    object["spec"]["template"]["spec"]["containers"][0]["envFrom"] = env_from;
    object
}

/// `web` reads db/password; `api` (the barrier) reads all of `other`.
fn two_workloads() -> Vec<Value> {
    vec![
        secret("db", &[("password", "hunter2"), ("user", "app")]),
        secret("other", &[("k", "1")]),
        deployment("web", json!([key_ref("P", "db", "password")]), json!([])),
        deployment("api", json!([]), json!([{"secretRef": {"name": "other"}}])),
    ]
}

async fn secrets(ns: &TestNamespace) -> Api<DynamicObject> {
    ns.api_for(&json!({"apiVersion": "v1", "kind": "Secret"}))
        .await
}

/// Changes a Secret's data with a merge patch (as `kubectl patch` does).
async fn patch_secret(ns: &TestNamespace, name: &str, data: &[(&str, &str)]) {
    let data: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| ((*k).to_owned(), json!(b64(v))))
        .collect();
    secrets(ns)
        .await
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": data})),
        )
        .await
        .unwrap();
}

/// Server-side applies a Secret (as `kubectl apply --server-side` does).
async fn apply_secret(ns: &TestNamespace, name: &str, data: &[(&str, &str)]) {
    let mut object = secret(name, data);
    object["metadata"]["namespace"] = json!(ns.name);
    secrets(ns)
        .await
        .patch(
            name,
            &PatchParams::apply("kubectl").force(),
            &Patch::Apply(object),
        )
        .await
        .unwrap();
}

/// Replaces a Secret whole (as `kubectl edit` and `kubectl replace` do).
async fn replace_secret(ns: &TestNamespace, name: &str, data: &[(&str, &str)]) {
    let api = secrets(ns).await;
    let current = api.get(name).await.unwrap();
    let mut object = secret(name, data);
    object["metadata"]["namespace"] = json!(ns.name);
    object["metadata"]["resourceVersion"] = json!(current.metadata.resource_version);
    api.replace(
        name,
        &PostParams::default(),
        &serde_json::from_value(object).unwrap(),
    )
    .await
    .unwrap();
}

async fn workload(ns: &TestNamespace, kind: &str, name: &str) -> Value {
    let api_version = if kind == "CronJob" {
        "batch/v1"
    } else {
        "apps/v1"
    };
    ns.get(api_version, kind, name).await.unwrap()
}

/// A workload's pod template: what a roll changes. (Not `metadata.generation`: a real
/// Deployment's generation also counts changes to its own annotations, which adoption writes.)
async fn template(ns: &TestNamespace, name: &str) -> Value {
    workload(ns, "Deployment", name).await["spec"]["template"].clone()
}

/// The config hash a roll wrote onto `name`'s template.
async fn config_hash(ns: &TestNamespace, name: &str) -> Option<String> {
    template(ns, name)
        .await
        .pointer("/metadata/annotations/rollsafe.dev~1config-hash")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The Events about `name` with `reason`, through the core Events API.
async fn events(ns: &TestNamespace, name: &str, reason: &str) -> Vec<Value> {
    ns.events(name, reason).await
}

/// Changes `other` and waits until `api` rolled: every event before it has been handled.
async fn barrier(ns: &TestNamespace, running: &mut Running, value: &str) {
    let rolls = running.status.borrow().rolls;
    patch_secret(ns, "other", &[("k", value)]).await;
    running
        .until("the barrier roll", |s| s.rolls > rolls && s.pending == 0)
        .await;
}

/// `kubectl describe` of a workload, through the machine's newest kubectl.
async fn describe(ns: &TestNamespace, kind: &str, name: &str) -> String {
    let kubectl = rollsafe_testing::kubectl().expect("kubectl");
    let (kubeconfig, namespace) = (ns.kubeconfig.clone(), ns.name.clone());
    let (kind, name) = (kind.to_owned(), name.to_owned());
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["-n", &namespace, "describe", &kind, &name])
            .output()
    })
    .await
    .unwrap()
    .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

on_both_substrates! {
    /// Adoption writes the record and changes no template (no new revision); a change to a
    /// key `web` reads rolls it once, by one template change its controller rolls out; a
    /// change to a key it does not read rolls nothing.
    async fn adoption_rolls_nothing_and_a_change_rolls_once(ns) {
        let created = ns.apply(two_workloads()).await;
        let mut running = controller(ns, settings(ns));
        let status = running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        assert_eq!(status.rolls, 0);
        let web = workload(ns, "Deployment", "web").await;
        assert_eq!(web["spec"]["template"], created[2]["spec"]["template"], "adoption changed the template");
        assert!(web["metadata"]["annotations"]["rollsafe.dev/config-record"]
            .as_str().unwrap().starts_with("v1:"));

        patch_secret(ns, "db", &[("password", "changed")]).await;
        running.until("a roll", |s| s.rolls == 1 && s.pending == 0).await;
        let rolled = template(ns, "web").await;
        assert!(config_hash(ns, "web").await.is_some(), "{rolled}");
        assert_eq!(config_hash(ns, "api").await, None);

        patch_secret(ns, "db", &[("user", "ops")]).await;
        barrier(ns, &mut running, "2").await;
        assert_eq!(template(ns, "web").await, rolled, "an unread key rolled web");
        assert_eq!(running.status.borrow().rolls, 2, "web once, api once");
        running.stop().await;
    }

    /// A server-side apply of the same content rolls nothing; an apply and a replace that
    /// change the value each roll once.
    async fn apply_and_replace_roll_once_and_a_no_op_apply_rolls_nothing(ns) {
        ns.apply(two_workloads()).await;
        let mut running = controller(ns, settings(ns));
        running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        apply_secret(ns, "db", &[("password", "hunter2"), ("user", "app")]).await;
        barrier(ns, &mut running, "2").await;
        assert_eq!(config_hash(ns, "web").await, None, "a no-op apply rolled web");

        apply_secret(ns, "db", &[("password", "applied"), ("user", "app")]).await;
        running.until("the apply's roll", |s| s.rolls == 2 && s.pending == 0).await;
        let applied = config_hash(ns, "web").await;
        assert!(applied.is_some());

        replace_secret(ns, "db", &[("password", "edited"), ("user", "app")]).await;
        running.until("the replace's roll", |s| s.rolls == 3 && s.pending == 0).await;
        let replaced = config_hash(ns, "web").await;
        assert!(replaced.is_some() && replaced != applied);
        running.stop().await;
    }

    /// A restart with nothing changed patches nothing; a change made while no controller runs
    /// rolls once after the next start.
    async fn a_restart_rolls_nothing_and_a_missed_change_rolls_once(ns) {
        ns.apply(two_workloads()).await;
        let mut first = controller(ns, settings(ns));
        first.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        first.stop().await;
        // The workload's own controller answers the adoption's write with a status write on
        // the real control plane: the state to compare with is the one after it.
        ns.wait_all_at_rest().await;
        let record = |w: &Value| w["metadata"]["annotations"]["rollsafe.dev/config-record"].clone();
        let before = workload(ns, "Deployment", "web").await;

        let mut second = controller(ns, settings(ns));
        let status = second.until("synced and idle", |s| s.synced && s.pending == 0 && s.evaluations >= 2).await;
        assert_eq!((status.rolls, status.adoptions), (0, 0), "{status:?}");
        let after = workload(ns, "Deployment", "web").await;
        assert_eq!(after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "a restart wrote to web");
        assert_eq!(record(&after), record(&before));
        second.stop().await;

        patch_secret(ns, "db", &[("password", "rotated")]).await;
        let mut third = controller(ns, settings(ns));
        third.until("the missed roll", |s| s.rolls == 1 && s.pending == 0).await;
        let rolled = template(ns, "web").await;
        assert!(config_hash(ns, "web").await.is_some());
        barrier(ns, &mut third, "3").await;
        assert_eq!(template(ns, "web").await, rolled, "rolled twice");
        third.stop().await;
    }

    /// A CronJob consuming the Secret: its Jobs' template is rolled once per change of a key
    /// it reads.
    async fn a_cron_job_is_rolled_once_per_change(ns) {
        ns.apply([
            secret("db", &[("password", "a"), ("user", "app")]),
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "nightly", "annotations": {"rollsafe.dev/watch": "true"}},
                "spec": {"schedule": "0 3 * * *",
                    "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "job", "image": "registry.example/job:1",
                                        "env": [key_ref("P", "db", "password")]}]}}}}}}),
        ]).await;
        let mut running = controller(ns, settings(ns));
        running.until("adoption", |s| s.adoptions == 1 && s.pending == 0).await;
        patch_secret(ns, "db", &[("password", "b")]).await;
        running.until("the roll", |s| s.rolls == 1 && s.pending == 0).await;
        let cron = workload(ns, "CronJob", "nightly").await;
        assert!(cron.pointer("/spec/jobTemplate/spec/template/metadata/annotations/rollsafe.dev~1config-hash").is_some(), "{cron}");
        running.stop().await;
    }

    /// Two replicas on one real Lease: one leads; one change is rolled once, by the leader.
    async fn two_replicas_on_one_lease_roll_once(ns) {
        use rollsafe_watch::leader::{LeaseSettings, elect};
        ns.apply(two_workloads()).await;
        let lease = |identity: &str| LeaseSettings {
            namespace: ns.name.clone(),
            name: "rollsafe-watch".to_owned(),
            identity: identity.to_owned(),
            duration_seconds: 4,
            grace_seconds: 3,
        };
        let a = elect(ns.connection.client(None), &lease("a")).await.unwrap();
        let mut first = Running::spawn(Controller::new(ns.connection.client(None), settings(ns))
            .with_leadership(a.leader.clone()));
        first.until("a leads and adopts", |s| s.leader && s.adoptions == 2 && s.pending == 0).await;
        let b = elect(ns.connection.client(None), &lease("b")).await.unwrap();
        let mut second = Running::spawn(Controller::new(ns.connection.client(None), settings(ns))
            .with_leadership(b.leader.clone()));
        let status = second.until("b synced", |s| s.synced && s.pending == 0).await;
        assert!(!status.leader);
        patch_secret(ns, "db", &[("password", "one")]).await;
        first.until("the leader rolls", |s| s.rolls == 1 && s.pending == 0).await;
        assert!(config_hash(ns, "web").await.is_some());
        assert_eq!(second.status.borrow().rolls, 0);
        let lease_object = ns.get("coordination.k8s.io/v1", "Lease", "rollsafe-watch").await.unwrap();
        assert_eq!(lease_object["spec"]["holderIdentity"], "a");
        first.stop().await;
        second.stop().await;
        drop((a, b));
    }

    /// Each roll is followed to its end: `web`'s rollout completes; `bad`'s new pods crash-loop
    /// and its Deployment controller reports `ProgressDeadlineExceeded`. Both outcomes are
    /// Events that `kubectl describe` shows, naming no value.
    ///
    /// The one substrate-specific step: the crash is the pod simulator's marker on the real
    /// control plane and a fault on the emulator (docs/testing.md).
    async fn each_roll_is_followed_to_its_end(ns) {
        let mut bad = deployment("bad", json!([key_ref("P", "db", "password")]), json!([]));
        bad["spec"]["progressDeadlineSeconds"] = json!(2);
        bad["spec"]["template"]["metadata"]["annotations"] = json!({"sim.rollsafe.dev/crash-on-roll": "true"});
        ns.apply([
            secret("db", &[("password", "hunter2")]),
            deployment("web", json!([key_ref("P", "db", "password")]), json!([])),
            bad,
        ]).await;
        if let Some(emu) = ns.emulator() {
            emu.change_settings(rollsafe_emulator::RolloutPaceChange {
                pod_ready_millis: Some(200),
                progress_deadline_scale: None,
            }).unwrap();
            emu.add_fault(rollsafe_emulator::Fault::on("patch", "deployments")
                .name("bad").nth(2)
                .then(rollsafe_emulator::FaultAction::rollout_fails("CrashLoopBackOff", "simulated crash")));
        }
        let mut running = controller(ns, ControllerSettings {
            progress_deadline: Duration::from_secs(60),
            ..settings(ns)
        });
        running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        patch_secret(ns, "db", &[("password", "rotated-s3cr3t")]).await;
        running.until("two rolls", |s| s.rolls == 2).await;
        eventually("RolloutComplete for web and RolloutStalled for bad", DEADLINE, || async {
            (!events(ns, "web", "RolloutComplete").await.is_empty()
                && !events(ns, "bad", "RolloutStalled").await.is_empty()).then_some(())
        }).await;
        let stalled = events(ns, "bad", "RolloutStalled").await;
        assert_eq!(stalled.len(), 1, "{stalled:?}");
        assert_eq!(stalled[0]["type"], "Warning");
        let note = stalled[0]["message"].as_str().unwrap();
        assert!(note.contains("progress deadline exceeded"), "{note}");
        assert!(note.contains("has timed out progressing"), "{note}");
        assert!(events(ns, "bad", "RolloutComplete").await.is_empty());
        let complete = events(ns, "web", "RolloutComplete").await;
        assert!(complete[0]["message"].as_str().unwrap().starts_with("Rollout complete after "));
        let bad = workload(ns, "Deployment", "bad").await;
        let progressing = bad["status"]["conditions"].as_array().unwrap().iter()
            .find(|c| c["type"] == "Progressing").unwrap().clone();
        assert_eq!(progressing["reason"], "ProgressDeadlineExceeded", "{progressing}");

        let described = describe(ns, "deployment", "bad").await;
        assert!(described.contains("RolloutStalled"), "{described}");
        assert!(described.contains("Rollout stalled after"), "{described}");
        assert!(!described.contains("s3cr3t"), "{described}");
        let described = describe(ns, "deployment", "web").await;
        assert!(described.contains("Rolled for changes to Secret/db"), "{described}");
        running.stop().await;
    }

    /// The trial's bad rotation: every rollout of `bad` stalls (its new pods crash). Five
    /// rotations roll and stall; the sixth change within the flap stop's window (5 rolls in
    /// 10 minutes) is the fix after a stall — a recovery: it rolls, and its Event says so. That
    /// recovery stalls too, and the seventh change halts `bad`, the Halted Event naming the
    /// Secret it did not roll for. The CronJob reading the same Secret restarts nothing when
    /// rolled, so the flap stop never halts it: it rolls all seven times.
    async fn the_fix_after_a_stall_rolls_and_a_storm_of_stalls_still_halts(ns) {
        let mut bad = deployment("bad", json!([key_ref("P", "db", "password")]), json!([]));
        bad["spec"]["progressDeadlineSeconds"] = json!(2);
        bad["spec"]["template"]["metadata"]["annotations"] = json!({"sim.rollsafe.dev/crash-on-roll": "true"});
        ns.apply([
            secret("db", &[("password", "v0")]),
            bad,
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "nightly", "annotations": {"rollsafe.dev/watch": "true"}},
                "spec": {"schedule": "0 3 * * *",
                    "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "OnFailure",
                        "containers": [{"name": "job", "image": "registry.example/job:1",
                                        "env": [key_ref("P", "db", "password")]}]}}}}}}),
        ]).await;
        if let Some(emu) = ns.emulator() {
            emu.change_settings(rollsafe_emulator::RolloutPaceChange {
                pod_ready_millis: Some(200),
                progress_deadline_scale: None,
            }).unwrap();
            emu.add_fault(rollsafe_emulator::Fault::on("patch", "deployments")
                .name("bad").always()
                .then(rollsafe_emulator::FaultAction::rollout_fails("CrashLoopBackOff", "simulated crash")));
        }
        let mut running = controller(ns, ControllerSettings {
            progress_deadline: Duration::from_secs(60),
            ..settings(ns)
        });
        running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        for n in 1..=6u64 {
            patch_secret(ns, "db", &[("password", &format!("rotation-{n}"))]).await;
            running.until("both rolled", |s| s.rolls == 2 * n).await;
            running.until("bad's rollout stalled", |s| s.rollouts_stalled == n).await;
        }
        let status = running.status.borrow().clone();
        assert_eq!((status.recoveries, status.halts), (1, 0), "{status:?}");
        let recovered = events(ns, "bad", "Recovered").await;
        assert_eq!(recovered.len(), 1, "{recovered:?}");
        assert_eq!(recovered[0]["type"], "Normal");
        assert_eq!(
            recovered[0]["message"],
            "Rolled for changes to Secret/db. A recovery: it replaces a rollout that stalled, so the flap stop counted it (5 rolls within 600s) but did not halt it"
        );
        // The recovery stalled too: a storm, halted.
        patch_secret(ns, "db", &[("password", "rotation-7")]).await;
        let status = running.until("bad halted, nightly rolled", |s| s.halts == 1 && s.rolls == 13 && s.pending == 0).await;
        assert_eq!(status.recoveries, 1, "{status:?}");
        let halted = events(ns, "bad", "Halted").await;
        assert_eq!(halted.len(), 1, "{halted:?}");
        assert_eq!(
            halted[0]["message"],
            "Not rolled for changes to Secret/db: it was rolled 5 times within 600s (its last recovery roll stalled too). Remove the rollsafe.dev/halted annotation to resume"
        );
        let described = describe(ns, "deployment", "bad").await;
        assert!(described.contains("Not rolled for changes to Secret/db"), "{described}");
        assert!(described.contains("Recovered"), "{described}");
        assert!(!described.contains("rotation-"), "{described}");
        let bad = workload(ns, "Deployment", "bad").await;
        assert!(bad.pointer("/metadata/annotations/rollsafe.dev~1halted").is_some(), "{bad}");
        let nightly = workload(ns, "CronJob", "nightly").await;
        assert!(nightly.pointer("/metadata/annotations/rollsafe.dev~1halted").is_none(), "{nightly}");
        assert!(events(ns, "nightly", "Halted").await.is_empty());
        running.stop().await;
    }

    /// A selector the API server refuses, given to the controller without the CLI's startup
    /// check: its watches fail, are counted and logged — each log line a fixed sentence with a
    /// code and the HTTP status, never a debug rendering of the API server's Status. The
    /// startup check itself refuses it as a usage error naming the flag.
    async fn a_refused_selector_is_logged_without_debug_renderings(ns) {
        ns.apply(two_workloads()).await;
        let mut settings = ControllerSettings {
            selector: Some("a b c".to_owned()),
            ..settings(ns)
        };
        let client = ns.connection.client(None);
        let refused = rollsafe_watch::preflight::run(
            &client,
            &mut settings,
            rollsafe_watch::preflight::StreamingLists::Off,
        ).await.unwrap_err();
        assert!(refused.is_usage());
        assert_eq!(refused.code(), "selector_refused");
        assert_eq!(
            refused.to_string(),
            "--selector \"a b c\" is not a label selector the API server accepts (e.g. app=web,tier in (a,b),!legacy)"
        );
        let mut running = controller(ns, settings);
        running.until("the workload watches fail", |s| s.watch_errors >= 2).await;
        let status = running.status.borrow().clone();
        assert!(!status.synced, "{status:?}");
        running.stop().await;
    }

    /// The effective settings are published on the controller's Lease — by a controller without
    /// leader election at its start (creating the Lease), by the leader when it starts leading —
    /// and read back by what `why` and the page read them with.
    async fn the_effective_settings_are_published_on_the_lease(ns) {
        use rollsafe_kube::published::{LeaseRef, read};
        ns.apply(two_workloads()).await;
        let lease = LeaseRef { namespace: ns.name.clone(), name: "settings-lease".to_owned() };
        let client = ns.connection.client(None);
        assert_eq!(read(&client, &lease).await.unwrap(), None, "nothing published yet");
        let mut running = controller(ns, ControllerSettings {
            all: true,
            require_approval: vec![ns.name.clone()],
            publish_on: Some(lease.clone()),
            ..settings(ns)
        });
        running.settled().await;
        let published = eventually("the settings on the Lease", DEADLINE, || async {
            read(&client, &lease).await.unwrap()
        }).await;
        assert!(published.all, "{published:?}");
        assert!(!published.reloader_compat);
        assert!(published.requires_approval(&ns.name));
        assert_eq!(published.namespaces, vec![ns.name.clone()]);
        assert_eq!((published.flap_rolls, published.flap_window_seconds), (5, 600));
        running.stop().await;

        // A leader publishes when it starts leading, over what was there.
        let elected = rollsafe_watch::leader::LeaseSettings {
            namespace: ns.name.clone(),
            name: lease.name.clone(),
            identity: "a".to_owned(),
            duration_seconds: 4,
            grace_seconds: 3,
        };
        let election = rollsafe_watch::leader::elect(ns.connection.client(None), &elected).await.unwrap();
        let mut leader = Running::spawn(Controller::new(ns.connection.client(None), ControllerSettings {
            reloader_compat: true,
            publish_on: Some(lease.clone()),
            ..settings(ns)
        }).with_leadership(election.leader.clone()));
        leader.until("leading", |s| s.leader && s.synced).await;
        eventually("the leader's settings", DEADLINE, || async {
            read(&client, &lease).await.unwrap().filter(|p| p.reloader_compat && !p.all)
        }).await;
        leader.stop().await;
        drop(election);
    }

    /// A writer that reverts rollsafe's template annotation before the rollout completes (an
    /// operator reconciling the template it owns) is detected, not fought: one `Reverted`
    /// Warning naming its field manager, read back through kubectl, and no roll again for this
    /// content.
    async fn a_reverted_roll_is_announced_once_and_not_fought(ns) {
        let mut operated = deployment("operated", json!([key_ref("P", "db", "password")]), json!([]));
        // Its rollout never completes while the test runs: the new pods crash (the real pod
        // simulator's marker), or are never ready (the emulator).
        operated["spec"]["template"]["metadata"]["annotations"] = json!({"sim.rollsafe.dev/crash-on-roll": "true"});
        let mut seeds = two_workloads();
        seeds.push(operated);
        ns.apply_at_rest(seeds).await;
        if let Some(emu) = ns.emulator() {
            emu.change_settings(rollsafe_emulator::RolloutPaceChange {
                pod_ready_millis: Some(600_000),
                progress_deadline_scale: None,
            }).unwrap();
        }
        let mut running = controller(ns, settings(ns));
        running.until("adoptions", |s| s.adoptions == 3 && s.pending == 0).await;
        patch_secret(ns, "db", &[("password", "rotated")]).await;
        running.until("both consumers rolled", |s| s.rolls == 2 && s.pending == 0).await;
        // The operator puts back the template it owns (stamped with its own annotation, without
        // rollsafe's), with an update of the whole object, as its field manager.
        let api = ns.api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).await;
        let params = PostParams { field_manager: Some("test-operator".to_owned()), ..PostParams::default() };
        // As a controller does: read, change, write; again on a conflict (the workload's own
        // controller writes its status meanwhile).
        eventually("the operator's update", DEADLINE, || async {
            let object = api.get("operated").await.unwrap();
            let mut value = serde_json::to_value(&object).unwrap();
            value["spec"]["template"]["metadata"]["annotations"] = json!({
                "sim.rollsafe.dev/crash-on-roll": "true",
                "operator.example/template": "v1",
            });
            let object: DynamicObject = serde_json::from_value(value).unwrap();
            match api.replace("operated", &params, &object).await {
                Ok(_) => Some(()),
                Err(kube::Error::Api(status)) if status.code == 409 => None,
                Err(error) => panic!("{error}"),
            }
        }).await;
        running.until("the revert", |s| s.reverts == 1).await;
        let reverted = eventually("the Reverted event", DEADLINE, || async {
            let found = events(ns, "operated", "Reverted").await;
            (!found.is_empty()).then_some(found)
        }).await;
        assert_eq!(reverted.len(), 1, "{reverted:?}");
        assert_eq!(reverted[0]["type"], "Warning");
        let note = reverted[0]["message"].as_str().unwrap();
        // Named from managedFields, whose times are kept to the second: the operator's write
        // and the workload's creation in the same second are both named.
        let (by, rest) = note.split_once(") removed or changed rollsafe.dev/config-hash before the rollout completed;").expect(note);
        assert!(by.starts_with("another writer (") && by.contains("test-operator"), "{note}");
        assert!(rest.contains("rollsafe does not patch it again for this content"), "{note}");
        let described = describe(ns, "deployment", "operated").await;
        assert!(described.contains("Reverted"), "{described}");
        // Not fought: a later change elsewhere rolls its own consumer only.
        barrier(ns, &mut running, "after-revert").await;
        let status = running.status.borrow().clone();
        assert_eq!((status.rolls, status.reverts), (3, 1), "{status:?}");
        assert!(config_hash(ns, "operated").await.is_none(), "rollsafe patched the template again");
        running.stop().await;
    }

    /// A GitOps tool's replace of the whole object (Argo CD's `Replace=true`) drops rollsafe's
    /// record: the controller adopts the workload again without a roll, and says so — one
    /// `Readopted` Event naming the writer, read back through kubectl.
    async fn a_replace_that_drops_the_record_is_readopted_and_said(ns) {
        ns.apply_at_rest(two_workloads()).await;
        let mut running = controller(ns, settings(ns));
        running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        let api = ns.api_for(&json!({"apiVersion": "apps/v1", "kind": "Deployment"})).await;
        let params = PostParams { field_manager: Some("argocd-controller".to_owned()), ..PostParams::default() };
        eventually("the tool's replace", DEADLINE, || async {
            let object = api.get("web").await.unwrap();
            let mut value = serde_json::to_value(&object).unwrap();
            let annotations = value["metadata"]["annotations"].as_object_mut().unwrap();
            annotations.retain(|key, _| !key.starts_with("rollsafe.dev/config-"));
            annotations.insert("argocd.argoproj.io/tracking-id".to_owned(), json!("app:apps/Deployment:web"));
            let object: DynamicObject = serde_json::from_value(value).unwrap();
            match api.replace("web", &params, &object).await {
                Ok(_) => Some(()),
                Err(kube::Error::Api(status)) if status.code == 409 => None,
                Err(error) => panic!("{error}"),
            }
        }).await;
        let status = running.until("the readoption", |s| s.adoptions == 3 && s.pending == 0).await;
        assert_eq!(status.rolls, 0, "{status:?}");
        let readopted = eventually("the Readopted event", DEADLINE, || async {
            let found = events(ns, "web", "Readopted").await;
            (!found.is_empty()).then_some(found)
        }).await;
        assert_eq!(readopted.len(), 1, "{readopted:?}");
        assert_eq!(readopted[0]["type"], "Normal");
        let note = readopted[0]["message"].as_str().unwrap();
        assert!(note.starts_with("Adopted again, without a roll: another writer ("), "{note}");
        assert!(note.contains("argocd-controller"), "{note}");
        let described = describe(ns, "deployment", "web").await;
        assert!(described.contains("Readopted"), "{described}");
        running.stop().await;
    }

    /// The startup check finds streaming lists where the server serves them (the real 1.37
    /// server) and not where it does not (the emulator's default, 1.33's gate); the controller
    /// then starts every watch with a streaming list, or pages, and either way adopts without
    /// rolling and rolls a change once.
    async fn streaming_lists_where_served_and_paged_lists_where_not(ns) {
        ns.apply(two_workloads()).await;
        let served = rollsafe_kube::read::serves_streaming_lists(
            &ns.connection.client(None),
            rollsafe_core::reference::TargetKind::Secret,
            Some(&ns.name),
            Duration::from_secs(10),
        ).await.unwrap();
        assert_eq!(served, ns.capabilities().streaming_lists);
        let mut running = controller(ns, ControllerSettings {
            streaming_lists: served,
            ..settings(ns)
        });
        let status = running.until("adoptions", |s| s.adoptions == 2 && s.pending == 0).await;
        assert_eq!(status.rolls, 0);
        patch_secret(ns, "db", &[("password", "streamed")]).await;
        running.until("a roll", |s| s.rolls == 1 && s.pending == 0).await;
        assert!(config_hash(ns, "web").await.is_some());
        running.stop().await;
    }
}
