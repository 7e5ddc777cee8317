//! `rollsafe why` against an in-process emulator: the controller's own decision for one
//! workload (roll, unchanged, halted, not opted in, unknown without the key), its Events, and
//! its errors — and never a Secret value on either stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use assert_cmd::Command;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_emulator::RunningEmulator;
use rollsafe_testing::{TestCluster, Workload, secret};
use rollsafe_watch::Fingerprinter;
use rollsafe_watch::cache::{Cache, SourceEntry, SourceKey, WorkloadEntry, WorkloadKey};
use serde_json::{Value, json};

const NS: &str = "shop";
/// The Secret's value before and after the change: neither may ever be printed.
const OLD_PASSWORD: &str = "old-hunter2-value";
const NEW_PASSWORD: &str = "new-correct-horse-value";
const KEY: &str = "0123456789abcdef-fingerprint-key";

struct Env {
    emu: RunningEmulator,
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    // Last: the emulator's runtime outlives the emulator.
    _runtime: tokio::runtime::Runtime,
}

/// A Deployment in [`NS`] reading `db-creds`' `password` as an env var and mounting ConfigMap
/// `settings`, with `annotations` on its metadata.
fn deployment(name: &str, annotations: Value) -> Value {
    let mut object = Workload::deployment(name)
        .namespace(NS)
        .with_replicas()
        .build();
    object["metadata"]["annotations"] = annotations;
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"][0]["env"] = json!([{"name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]);
    spec["volumes"] = json!([{"name": "config", "configMap": {"name": "settings"}}]);
    object
}

/// A core Event about Deployment `name`.
fn event(name: &str, workload: &str, reason: &str, message: &str, time: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": NS},
        "involvedObject": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": NS,
                           "name": workload},
        "reason": reason, "message": message,
        "type": if reason == "Rolled" { "Normal" } else { "Warning" },
        "firstTimestamp": time, "lastTimestamp": time, "count": 1,
        "source": {"component": "rollsafe.dev/watch"}
    })
}

fn start() -> Env {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let watched = json!({"rollsafe.dev/watch": "true"});
    let seeds = vec![
        secret(NS, "db-creds", OLD_PASSWORD),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "settings", "namespace": NS}, "data": {"level": "info"}}),
        deployment("api", watched.clone()),
        deployment("steady", watched.clone()),
        deployment(
            "stuck",
            json!({"rollsafe.dev/watch": "true",
                   "rollsafe.dev/halted": "flapping: 5 rolls within 600s; remove this annotation to resume"}),
        ),
        deployment("plain", json!({})),
        deployment(
            "evicting",
            json!({"rollsafe.dev/watch": "true", "rollsafe.dev/evicting": "2026-12-01T12:00:00Z"}),
        ),
        deployment("keyed", watched),
        event(
            "api.1",
            "api",
            "Rolled",
            "Rolled for changes to ConfigMap/settings",
            "2026-11-30T10:00:00Z",
        ),
        event(
            "api.2",
            "api",
            "RolloutDeferred",
            "Pod template updated for changes to Secret/db-creds but pods do not roll now: the Deployment is paused",
            "2026-12-01T09:30:00Z",
        ),
        // Not rollsafe's: never the answer, however recent.
        event(
            "api.3",
            "api",
            "ScalingReplicaSet",
            "Scaled up replica set api-1 to 1",
            "2026-12-02T08:00:00Z",
        ),
        event(
            "stuck.1",
            "stuck",
            "Halted",
            "Not rolled: it was rolled 5 times within 600s. Remove the rollsafe.dev/halted annotation to resume",
            "2026-12-01T12:00:00Z",
        ),
    ];
    let TestCluster {
        emu,
        kubeconfig,
        dir,
        ..
    } = runtime.block_on(TestCluster::start(seeds));
    let env = Env {
        emu,
        kubeconfig,
        dir,
        _runtime: runtime,
    };
    // Records as rollsafe watch writes them, for what is live now.
    let unkeyed = Fingerprinter::unkeyed();
    for name in ["api", "steady", "stuck"] {
        env.adopt(name, &unkeyed);
    }
    env.adopt("keyed", &Fingerprinter::keyed(KEY.as_bytes()).unwrap());
    env
}

impl Env {
    /// Writes the record of what `name` consumes now on it, computed with the watch crate.
    fn adopt(&self, name: &str, fingerprinter: &Fingerprinter) {
        let mut object = self.emu.get_object("deployments", Some(NS), name).unwrap();
        let entry = WorkloadEntry::from_object(WorkloadKind::Deployment.into(), &object, false);
        let mut cache = Cache::default();
        for config in entry.consumption.objects() {
            let resource = match config.kind {
                TargetKind::Secret => "secrets",
                TargetKind::ConfigMap => "configmaps",
            };
            let source = self
                .emu
                .get_object(resource, Some(NS), &config.name)
                .unwrap();
            cache.apply_source(
                SourceKey {
                    kind: config.kind,
                    namespace: NS.into(),
                    name: config.name.as_str().into(),
                },
                SourceEntry::from_object(config.kind, &source),
            );
        }
        let key = WorkloadKey {
            kind: WorkloadKind::Deployment.into(),
            namespace: NS.into(),
            name: name.into(),
        };
        cache.apply_workload(key.clone(), entry);
        let record = cache.record(&key, fingerprinter).unwrap();
        object["metadata"]["annotations"]["rollsafe.dev/config-record"] = json!(record);
        object["metadata"]["annotations"]["kubernetes.io/change-cause"] =
            json!("rollsafe watch: rolled for changes to ConfigMap/settings");
        self.emu.put_object(object).unwrap();
    }

    /// Changes the Secret's value.
    fn change_secret(&self) {
        let mut object = self
            .emu
            .get_object("secrets", Some(NS), "db-creds")
            .unwrap();
        object["data"] = json!({"password": base64(NEW_PASSWORD)});
        self.emu.put_object(object).unwrap();
    }

    /// `rollsafe why ARGS…`: (exit code, stdout, stderr); asserts that no Secret value, plain
    /// or base64, is on either stream.
    fn why(&self, args: &[&str]) -> (i32, String, String) {
        self.why_logging(args, None)
    }

    /// [`Env::why`] with `RUST_LOG` set to `log`, if given.
    fn why_logging(&self, args: &[&str], log: Option<&str>) -> (i32, String, String) {
        let mut command = Command::cargo_bin("rollsafe").unwrap();
        match log {
            Some(log) => command.env("RUST_LOG", log),
            None => command.env_remove("RUST_LOG"),
        };
        let output = command
            .arg("why")
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("ROLLSAFE_NAMESPACE")
            .env_remove("ROLLSAFE_CONTEXT")
            .env_remove("ROLLSAFE_AS")
            .env_remove("ROLLSAFE_AS_GROUP")
            .env_remove("ROLLSAFE_WATCH_FINGERPRINT_KEY_FILE")
            .env_remove("ROLLSAFE_WATCH_RESTART_WINDOW")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        for value in [OLD_PASSWORD, NEW_PASSWORD] {
            for shown in [value.to_owned(), base64(value)] {
                assert!(
                    !stdout.contains(&shown) && !stderr.contains(&shown),
                    "a Secret value was printed: {stdout}{stderr}"
                );
            }
        }
        assert!(!stdout.contains(KEY) && !stderr.contains(KEY));
        (output.status.code().unwrap_or(-1), stdout, stderr)
    }

    fn why_json(&self, args: &[&str]) -> Value {
        let (code, stdout, stderr) = self.why(args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        serde_json::from_str(&stdout).unwrap()
    }
}

fn base64(value: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(value)
}

/// The JSON with the rollout state (which the emulator's controllers move on their own clock)
/// checked and set aside.
fn stable(mut why: Value) -> Value {
    let rollout = why["rollout"].take();
    let state = rollout["state"].as_str().unwrap();
    assert!(
        ["pending", "progressing", "complete"].contains(&state),
        "{rollout}"
    );
    assert!(rollout["describe"].as_str().is_some(), "{rollout}");
    why["rollout"] = json!("[rollout]");
    why
}

#[test]
fn a_changed_secret_would_roll_and_is_named() {
    let env = start();
    env.change_secret();
    let why = env.why_json(&["-n", NS, "deployment/api"]);
    assert_eq!(why["rollNow"]["decision"], "roll");
    assert_eq!(why["rollNow"]["rolls"], true);
    assert_eq!(why["rollNow"]["changed"], json!(["Secret/db-creds"]));
    insta::assert_json_snapshot!("why_api_roll", stable(why));
    assert!(
        env.emu.requests().iter().all(|r| r.method == "GET"),
        "why patches nothing and writes no Event"
    );

    let (code, text, stderr) = env.why(&["-n", NS, "-o", "text", "deploy/api"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(
        text.contains("roll now:  would roll now: Secret/db-creds changed since its record"),
        "{text}"
    );
    assert!(
        text.contains(
            "consumes:  Secret/db-creds (exists; keys password; watched; changed since the record)"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "at spec.template.spec.containers[app].env[DB_PASSWORD].valueFrom.secretKeyRef"
        ),
        "{text}"
    );
    assert!(
        text.contains("last:      RolloutDeferred at 2026-12-01T09:30:00Z"),
        "{text}"
    );
    assert!(!text.contains("ScalingReplicaSet"), "{text}");
}

#[test]
fn a_change_outside_the_restart_window_is_pending() {
    let env = start();
    env.change_secret();
    // Two hours from now, for an hour: closed now, whenever the test runs.
    let hour = jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::UTC)
        .hour();
    let window = format!("* {:02}:00-{:02}:00 UTC", (hour + 2) % 24, (hour + 3) % 24);
    let why = env.why_json(&["-n", NS, "deployment/api", "--restart-window", &window]);
    assert_eq!(why["rollNow"]["decision"], "pending");
    assert_eq!(why["rollNow"]["rolls"], false);
    assert_eq!(why["rollNow"]["changed"], json!(["Secret/db-creds"]));
    let pending = &why["pending"];
    assert_eq!(pending["heldBy"], "window");
    assert_eq!(pending["marked"], false);
    let until: jiff::Timestamp = pending["until"].as_str().unwrap().parse().unwrap();
    assert!(until > jiff::Timestamp::now(), "{pending}");
    let reason = pending["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "Roll for changes to Secret/db-creds held by the --restart-window ({window}) until "
        )),
        "{reason}"
    );
    let (code, text, stderr) = env.why(&[
        "-n",
        NS,
        "-o",
        "text",
        "deploy/api",
        "--restart-window",
        &window,
    ]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(text.contains(&format!("pending:   {reason}")), "{text}");
    assert!(
        text.contains(&format!("roll now:  would not roll now: {reason}")),
        "{text}"
    );
    // Without a window, the same change would roll; `pending` is null.
    let why = env.why_json(&["-n", NS, "deployment/api"]);
    assert_eq!(why["rollNow"]["decision"], "roll");
    assert_eq!(why["pending"], Value::Null);
    // A window not understood is the command's error: one line, exit 1.
    let (code, stdout, stderr) = env.why(&[
        "-n",
        NS,
        "deploy/api",
        "--restart-window",
        "Mon-Fry 09:00-17:00",
    ]);
    assert_eq!(code, 1);
    assert_eq!(stdout, "");
    assert_eq!(
        stderr.trim_end(),
        "rollsafe: --restart-window: a day of the restart window is not one of Mon, Tue, Wed, Thu, Fri, Sat, Sun"
    );
}

#[test]
fn a_change_that_needs_approval_awaits_it() {
    let env = start();
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["metadata"]["annotations"]["rollsafe.dev/approval"] = json!("required");
    env.emu.put_object(api).unwrap();
    env.change_secret();
    let why = env.why_json(&["-n", NS, "deployment/api"]);
    assert_eq!(why["rollNow"]["decision"], "pending");
    assert_eq!(why["rollNow"]["rolls"], false);
    assert_eq!(
        why["pending"],
        json!({
            "heldBy": "approval",
            "until": null,
            "since": null,
            "reason": "Roll for changes to Secret/db-creds awaits approval: rollsafe approve -n shop deployment/api",
            "marked": false
        })
    );
}

#[test]
fn an_unchanged_workload_would_not_roll() {
    let env = start();
    let why = env.why_json(&["-n", NS, "deployment/steady"]);
    assert_eq!(why["rollNow"]["decision"], "unchanged");
    assert_eq!(why["rollNow"]["rolls"], false);
    assert_eq!(why["rollNow"]["changed"], json!([]));
    assert_eq!(why["consumes"][0]["changed"], false);
    assert_eq!(why["lastRoll"]["event"], Value::Null);
    assert_eq!(
        why["lastRoll"]["recorded"],
        json!(["ConfigMap/settings", "Secret/db-creds"])
    );
    let (code, text, _) = env.why(&["-n", NS, "-o", "text", "deployment/steady"]);
    assert_eq!(code, 0);
    assert!(
        text.contains(
            "roll now:  would not roll: what it consumes matches its rollsafe.dev/config-record"
        ),
        "{text}"
    );

    // The ConfigMap opts out: it leaves the record, which is rewritten without a roll.
    let mut settings = env
        .emu
        .get_object("configmaps", Some(NS), "settings")
        .unwrap();
    settings["metadata"]["annotations"] = json!({"openchoreo.dev/restart-on-change": "false"});
    env.emu.put_object(settings).unwrap();
    let why = env.why_json(&["-n", NS, "deployment/steady"]);
    let settings = &why["consumes"][0];
    assert_eq!(
        (
            &settings["name"],
            &settings["optedOutBy"],
            &settings["watched"]
        ),
        (
            &json!("settings"),
            &json!("openchoreo.dev/restart-on-change"),
            &json!(false)
        )
    );
    assert_eq!(why["rollNow"]["decision"], "adopt");
}

#[test]
fn a_halted_workload_says_why_and_how_to_resume() {
    let env = start();
    env.change_secret();
    let why = env.why_json(&["-n", NS, "deployment/stuck"]);
    assert_eq!(why["rollNow"]["decision"], "halted");
    assert_eq!(why["rollNow"]["rolls"], false);
    assert_eq!(
        why["halted"],
        json!({"reason": "flapping: 5 rolls within 600s; remove this annotation to resume",
               "resume": "kubectl annotate -n shop deployment/stuck rollsafe.dev/halted-"})
    );
    assert_eq!(why["lastRoll"]["event"]["reason"], "Halted");
    assert_eq!(why["lastRoll"]["event"]["time"], "2026-12-01T12:00:00Z");
}

#[test]
fn a_workload_without_the_annotation_is_watched_only_under_all() {
    let env = start();
    let why = env.why_json(&["-n", NS, "deployment/plain"]);
    assert_eq!(why["watch"]["state"], "unset");
    assert_eq!(why["rollNow"]["decision"], "not_watched");
    assert_eq!(why["rollNow"]["underAll"], "adopt", "no record yet");
    assert_eq!(why["lastRoll"]["record"], "none");
    let (_, text, _) = env.why(&["-n", NS, "-o", "text", "deployment/plain"]);
    assert!(
        text.contains("watch:     not opted in: no rollsafe.dev/watch (watched only under --all)"),
        "{text}"
    );
}

#[test]
fn an_eviction_in_progress_and_the_controllers_strategy_are_said() {
    let env = start();
    let why = env.why_json(&["-n", NS, "deployment/evicting"]);
    assert_eq!(why["evicting"], json!({"since": "2026-12-01T12:00:00Z"}));
    let (code, text, stderr) = env.why(&["-n", NS, "-o", "text", "deployment/evicting"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.contains("\nevicting:  in progress: pods created before 2026-12-01T12:00:00Z are evicted one at a time (rollsafe.dev/evicting); the controller removes the mark when the run ends, and a new leader continues it\n"),
        "{text}"
    );
    // Without an eviction in progress, nothing is said of one.
    let why = env.why_json(&["-n", NS, "deployment/api"]);
    assert!(why.get("evicting").is_none(), "{why}");

    // The controller's --strategy for the namespace decides for a workload that says nothing
    // (its settings given as flags here: no controller published them).
    let why = env.why_json(&[
        "-n",
        NS,
        "--strategy",
        "patch,shop=evict",
        "deployment/plain",
    ]);
    assert_eq!(why["settings"]["source"], "flags");
    assert_eq!(why["restartBy"]["strategy"], "evict");
    assert_eq!(why["restartBy"]["from"], "controller");
    let (_, text, _) = env.why(&[
        "-n",
        NS,
        "-o",
        "text",
        "--strategy",
        "patch,shop=evict",
        "deployment/plain",
    ]);
    assert!(
        text.contains("\nrestart:   restarted by eviction (rollsafe watch --strategy: evict in namespace shop; the Deployment says nothing)"),
        "{text}"
    );
    // Patch in this namespace, or settings unknown: a plain template patch, nothing to say.
    let why = env.why_json(&[
        "-n",
        NS,
        "--strategy",
        "evict,shop=patch",
        "deployment/plain",
    ]);
    assert!(why.get("restartBy").is_none(), "{why}");
    let why = env.why_json(&["-n", NS, "deployment/plain"]);
    assert!(why.get("restartBy").is_none(), "{why}");
    let (code, _, stderr) = env.why(&["-n", NS, "--strategy", "sideways", "deployment/plain"]);
    assert_ne!(code, 0);
    assert!(stderr.contains("--strategy: "), "{stderr}");
}

#[test]
fn a_keyed_record_needs_the_key() {
    let env = start();
    let why = env.why_json(&["-n", NS, "deployment/keyed"]);
    assert_eq!(why["rollNow"]["decision"], "unknown");
    assert_eq!(why["lastRoll"]["record"], "keyed");
    assert!(
        why["rollNow"]["reason"]
            .as_str()
            .unwrap()
            .contains("--fingerprint-key-file"),
        "{why}"
    );
    // Without the key the values are of no use: the Secret is read as metadata only.
    env.emu.clear_requests();
    let why = env.why_json(&["-n", NS, "deployment/keyed"]);
    assert_eq!(why["consumes"][1]["exists"], true);
    let reads = env.emu.requests_for("get", "secrets");
    assert!(!reads.is_empty());
    for read in reads {
        let accept = read.accept.unwrap_or_default();
        assert!(accept.contains("as=PartialObjectMetadata"), "{accept}");
    }
    let key = env.dir.path().join("fingerprint-key");
    std::fs::write(&key, format!("{KEY}\n")).unwrap();
    let key = key.to_str().unwrap();
    let why = env.why_json(&["-n", NS, "--fingerprint-key-file", key, "deployment/keyed"]);
    assert_eq!(why["rollNow"]["decision"], "unchanged");
    env.change_secret();
    let why = env.why_json(&["-n", NS, "--fingerprint-key-file", key, "deployment/keyed"]);
    assert_eq!(why["rollNow"]["decision"], "roll");
    assert_eq!(why["rollNow"]["changed"], json!(["Secret/db-creds"]));
}

#[test]
fn a_missing_workload_or_a_bad_target_is_one_line_and_exit_1() {
    let env = start();
    let cases: [(&[&str], &str); 8] = [
        (
            &[
                "-n",
                NS,
                "--fingerprint-key-file",
                "/nonexistent/key",
                "deployment/api",
            ],
            "rollsafe: cannot use the fingerprint key file /nonexistent/key: cannot read the fingerprint key file",
        ),
        (
            &["-n", NS, "deployment/nope"],
            "rollsafe: Deployment \"nope\" not found in namespace \"shop\"",
        ),
        (
            &["-n", "nowhere", "sts/api"],
            "rollsafe: StatefulSet \"api\" not found in namespace \"nowhere\"",
        ),
        (
            &["-n", NS, "api"],
            "rollsafe: invalid workload \"api\": give KIND/NAME",
        ),
        // `pod/NAME` explains a pod-level consumer (docs/why.md): a missing pod is one line.
        (
            &["-n", NS, "pod/api"],
            "rollsafe: Pod \"api\" not found in namespace \"shop\"",
        ),
        (
            &["-n", NS, "service/api"],
            "rollsafe: invalid workload kind \"service\"",
        ),
        (
            &["-n", NS, "deployment/Api"],
            "rollsafe: invalid Deployment name \"Api\"",
        ),
        (
            &["-n", "Bad_NS", "deployment/api"],
            "rollsafe: invalid namespace \"Bad_NS\"",
        ),
    ];
    for (args, expected) in cases {
        let (code, stdout, stderr) = env.why(args);
        assert_eq!((code, stdout.as_str()), (1, ""), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_trace_log_carries_no_secret_value() {
    let env = start();
    env.change_secret();
    let (code, _, stderr) = env.why_logging(&["-n", NS, "deployment/api"], Some("trace"));
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("TRACE"), "the trace log is on: {stderr}");
}
