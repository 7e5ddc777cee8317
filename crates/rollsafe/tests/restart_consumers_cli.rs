//! `rollsafe consumers` and `rollsafe restart-consumers` against an in-process emulator.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use assert_cmd::Command;
use rollsafe_emulator::{Fault, FaultAction, RolloutPaceChange, RunningEmulator};
use rollsafe_testing::{TestCluster, Workload, rbac_for_group, secret};
use serde_json::{Value, json};

const NS: &str = "shop";

struct Env {
    emu: RunningEmulator,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    // Last: the emulator's runtime outlives the emulator.
    _runtime: tokio::runtime::Runtime,
}

/// A workload in [`NS`], reading `secret` with `envFrom` when given.
fn workload(kind: &str, name: &str, secret: Option<&str>) -> Value {
    let workload = Workload::of_kind(kind, name).namespace(NS);
    match secret {
        Some(secret) => workload.consuming_secret_via_env_from(secret).build(),
        None => workload.build(),
    }
}

fn start() -> Env {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut seeds = vec![
        secret(NS, "db-creds", "not-a-real-password"),
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": "unused", "namespace": NS}}),
        workload("Deployment", "api", Some("db-creds")),
        workload("Deployment", "web", None),
        workload("StatefulSet", "worker", Some("db-creds")),
    ];
    seeds.extend(rbac_for_group(NS, "devs", true));
    let TestCluster {
        emu,
        kubeconfig,
        dir,
        ..
    } = runtime.block_on(TestCluster::start(seeds));
    Env {
        emu,
        kubeconfig,
        _dir: dir,
        _runtime: runtime,
    }
}

impl Env {
    fn rollsafe(&self, args: &[&str]) -> (i32, Value, String) {
        let output = Command::cargo_bin("rollsafe")
            .unwrap()
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("ROLLSAFE_ANNOTATION")
            .env_remove("ROLLSAFE_NAMESPACE")
            .env_remove("ROLLSAFE_CONTEXT")
            .env_remove("ROLLSAFE_AS")
            .env_remove("ROLLSAFE_AS_GROUP")
            .output()
            .unwrap();
        let stdout = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (
            output.status.code().unwrap_or(-1),
            stdout,
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn annotations(&self, resource: &str, name: &str) -> Value {
        self.emu
            .get_object(resource, Some(NS), name)
            .unwrap()
            .pointer("/spec/template/metadata/annotations")
            .cloned()
            .unwrap_or(Value::Null)
    }
}

#[test]
fn consumers_prints_inventories_and_matches_and_patches_nothing() {
    let env = start();
    let (code, out, _) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!(code, 0);
    assert_eq!(
        out,
        json!({
            "namespace": "shop",
            "secret": "db-creds",
            "inventories": {
                "Deployment": {"complete": true},
                "StatefulSet": {"complete": true},
                "DaemonSet": {"complete": true}
            },
            "workloads": [
                {"kind": "Deployment", "name": "api", "references": [
                    {"kind": "Secret", "name": "db-creds", "via": "envFrom",
                     "containerList": "container", "container": "app", "optional": false}
                ], "rollsNow": true, "watch": "unset"},
                {"kind": "StatefulSet", "name": "worker", "references": [
                    {"kind": "Secret", "name": "db-creds", "via": "envFrom",
                     "containerList": "container", "container": "app", "optional": false}
                ], "rollsNow": true, "watch": "unset"}
            ],
            // The pods are read too: the workloads' own pods are not pod-level consumers.
            "podConsumers": {"state": "read", "groups": []}
        })
    );
    assert!(env.emu.requests().iter().all(|r| r.method == "GET"));

    env.emu
        .add_fault(Fault::on("list", "statefulsets").then(FaultAction::status(403)));
    let (code, out, stderr) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!(code, 2, "an incomplete inventory is not 'no consumers'");
    assert!(stderr.contains("consumers may be missing"), "{stderr}");
    let statefulsets = &out["inventories"]["StatefulSet"];
    assert_eq!(
        (
            &statefulsets["complete"],
            &statefulsets["code"],
            &statefulsets["httpStatus"]
        ),
        (&json!(false), &json!("forbidden"), &json!(403))
    );
    assert!(
        statefulsets["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Access denied.")),
        "{statefulsets}"
    );
    assert_eq!(out["workloads"].as_array().unwrap().len(), 1);
}

#[test]
fn consumers_exit_codes_say_whether_the_list_is_the_whole_answer() {
    let env = start();
    // A Secret, or a namespace, that does not exist.
    for target in [&["-n", NS, "missing"][..], &["nowhere/db-creds"]] {
        let (code, out, stderr) = env.rollsafe(&[&["consumers"], target].concat());
        assert_eq!((code, &out), (1, &Value::Null), "{target:?}: {stderr}");
        assert!(stderr.contains("not found in namespace \""), "{stderr}");
        assert!(!stderr.contains("Namespace("), "{stderr}");
    }
    let (code, out, _) = env.rollsafe(&["consumers", "-n", NS, "unused"]);
    assert_eq!((code, &out["workloads"]), (0, &json!([])));

    env.emu
        .add_fault(Fault::on("list", "statefulsets").then(FaultAction::status(403)));
    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args([
            "consumers",
            "-o",
            "text",
            "-n",
            NS,
            "db-creds",
            "--kubeconfig",
        ])
        .arg(&env.kubeconfig)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(
        text.contains("unlisted   StatefulSet: forbidden: its consumers are unknown; the identity may not list this kind"),
        "{text}"
    );
    assert!(
        !text.contains("patched") && !text.contains("server"),
        "{text}"
    );

    // Each fault answers one list.
    for resource in ["deployments", "statefulsets", "daemonsets"] {
        env.emu
            .add_fault(Fault::on("list", resource).then(FaultAction::status(401)));
    }
    let (code, out, _) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!((code, &out["workloads"]), (3, &json!([])));

    let help = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(["consumers", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit codes: 0 every inventory is complete"),
        "{help}"
    );
}

#[test]
fn restart_consumers_exit_codes_follow_the_status() {
    let env = start();
    // requested → 0, the exact API body on stdout.
    let (code, out, _) = env.rollsafe(&["restart-consumers", "-n", NS, "db-creds"]);
    assert_eq!(code, 0);
    assert_eq!(out["status"], "requested");
    assert_eq!(
        out["requested"],
        json!([{"kind": "Deployment", "name": "api"}, {"kind": "StatefulSet", "name": "worker"}])
    );
    assert!(out.get("error").is_none());
    let stamp = env.annotations("deployments", "api")["krypton.io/restarted-at"]
        .as_str()
        .unwrap()
        .to_owned();
    // One RFC 3339 UTC timestamp with milliseconds (docs/restart-contract.md).
    let shape = stamp
        .bytes()
        .map(|b| if b.is_ascii_digit() { b'0' } else { b })
        .collect::<Vec<u8>>();
    assert_eq!(shape, b"0000-00-00T00:00:00.000Z", "{stamp}");
    assert_eq!(
        env.annotations("statefulsets", "worker")["krypton.io/restarted-at"],
        json!(stamp),
        "one timestamp per run"
    );

    // no_targets → 0.
    let (code, out, _) = env.rollsafe(&["restart-consumers", "-n", NS, "unused"]);
    assert_eq!((code, out["status"].clone()), (0, json!("no_targets")));

    // partial → 2.
    env.emu
        .add_fault(Fault::on("patch", "statefulsets").then(FaultAction::status(409)));
    let (code, out, _) = env.rollsafe(&["restart-consumers", "-n", NS, "db-creds"]);
    assert_eq!((code, out["status"].clone()), (2, json!("partial")));
    assert_eq!(out["failures"][0]["code"], "conflict");

    // failed → 3, with `error`.
    env.emu.add_fault(
        Fault::on("patch", "*")
            .times(2)
            .then(FaultAction::status(500)),
    );
    let (code, out, _) = env.rollsafe(&["restart-consumers", "-n", NS, "db-creds"]);
    assert_eq!((code, out["status"].clone()), (3, json!("failed")));
    assert_eq!(out["error"], out["message"]);
}

#[test]
fn preflight_errors_exit_1_before_anything_is_listed() {
    let env = start();
    let (code, out, stderr) = env.rollsafe(&["restart-consumers", "-n", NS, "missing"]);
    assert_eq!(code, 1);
    assert_eq!(out, Value::Null);
    assert!(stderr.contains("not found"), "{stderr}");
    let (code, _, stderr) = env.rollsafe(&[
        "restart-consumers",
        "-n",
        NS,
        "db-creds",
        "--annotation",
        "Not A Key",
    ]);
    assert_eq!(code, 1);
    assert!(stderr.contains("annotation"), "{stderr}");
    let (code, _, _) = env.rollsafe(&["restart-consumers", "-n", "Bad_NS", "db-creds"]);
    assert_eq!(code, 1);
    assert!(
        env.emu
            .requests()
            .iter()
            .all(|r| r.verb.as_deref() == Some("get")),
        "only the Secret read"
    );
}

#[test]
fn target_errors_read_as_sentences_and_name_the_rule() {
    let env = start();
    let cases: &[(&[&str], &str)] = &[
        (
            &["-n", NS, "missing"],
            "rollsafe: Secret \"missing\" not found in namespace \"shop\"\n",
        ),
        (
            &["-n", NS, "other/db"],
            "rollsafe: the namespace is given twice and differs: -n shop and other/db; give one \
             of the two\n",
        ),
        (
            &["-n", NS, "Bad_Name"],
            "rollsafe: invalid Secret name \"Bad_Name\": a Secret name must be a lowercase RFC \
             1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a \
             letter or digit, at most 253 characters\n",
        ),
        (
            &["-n", "Bad_NS", "db"],
            "rollsafe: invalid namespace \"Bad_NS\": a namespace must be a lowercase RFC 1123 \
             label: lower-case letters, digits and '-', starting and ending with a letter or \
             digit, at most 63 characters\n",
        ),
    ];
    for command in ["consumers", "restart-consumers"] {
        for (args, expected) in cases {
            let (code, out, stderr) = env.rollsafe(&[&[command], *args].concat());
            assert_eq!((code, &out, stderr.as_str()), (1, &Value::Null, *expected));
        }
    }
}

#[test]
fn annotation_and_identity_options() {
    let env = start();
    let (code, out, _) = env.rollsafe(&[
        "restart-consumers",
        "-n",
        NS,
        "db-creds",
        "--annotation",
        "example.com/rolled-at",
        "--as",
        "ada@example.com",
        "--as-group",
        "devs",
        "--as-group",
        "ops",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        env.annotations("deployments", "api")
            .get("example.com/rolled-at")
            .is_some()
    );
    let requests = env.emu.requests();
    assert_eq!(requests.len(), 1 + 3 + 2);
    for request in requests {
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("ada@example.com")
        );
        assert_eq!(request.impersonated_groups, ["devs", "ops"]);
    }
}

#[test]
fn one_target_form_everywhere_and_one_output_rule() {
    let env = start();
    // `NAMESPACE/NAME` and `-n NAMESPACE NAME` name the same Secret.
    let (code, slash, _) = env.rollsafe(&["consumers", &format!("{NS}/db-creds")]);
    assert_eq!(code, 0);
    let (_, flag, _) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!(slash, flag);
    // Both at once must agree; a disagreement is a preflight error, nothing patched.
    let (code, _, stderr) = env.rollsafe(&["restart-consumers", "-n", "other", "shop/db-creds"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("given twice"), "{stderr}");
    assert_eq!(env.annotations("deployments", "api"), Value::Null);
    // `-o text`: a summary line, then one line per workload.
    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(["restart-consumers", "-o", "text", &format!("{NS}/db-creds")])
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_ANNOTATION")
        .env_remove("ROLLSAFE_NAMESPACE")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("requested: "), "{text}");
    assert_eq!(
        &lines[1..],
        [
            "requested  Deployment/api",
            "requested  StatefulSet/worker",
            "note: Only acknowledged pod-template patches are reported as requested. Rollout completion, readiness, and credential uptake are not verified."
        ],
        "{text}"
    );
}

/// Runs `rollsafe ARGS --kubeconfig …`, returning the exit code, stdout as text and stderr.
fn rollsafe_text(env: &Env, args: &[&str]) -> (i32, String, String) {
    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(args)
        .arg("--kubeconfig")
        .arg(&env.kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_ANNOTATION")
        .env_remove("ROLLSAFE_NAMESPACE")
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn the_text_says_what_will_not_roll_now_and_what_the_controller_does() {
    let env = start();
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true",
        "rollsafe.dev/halted": "flapping: 5 rolls within 600s; remove this annotation to resume"});
    api["spec"]["paused"] = json!(true);
    env.emu.put_object(api).unwrap();
    let mut worker = env
        .emu
        .get_object("statefulsets", Some(NS), "worker")
        .unwrap();
    worker["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "configmap/settings",
        "rollsafe.dev/pending": "window until=2031-01-01T02:00:00Z digest=v1:abc"});
    env.emu.put_object(worker).unwrap();
    let (code, text, stderr) =
        rollsafe_text(&env, &["consumers", "-o", "text", "-n", NS, "db-creds"]);
    assert_eq!(code, 0, "{stderr}");
    // What the JSON says, in lines: no line per listed kind, each consumer's references to
    // the Secret by path, and the roll the controller holds.
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        [
            "Secret shop/db-creds",
            "consumer   Deployment/api (does not roll now: the Deployment is paused); watch: \
             watched; halted by rollsafe watch (flapping: 5 rolls within 600s; remove this \
             annotation to resume): remove the rollsafe.dev/halted annotation to resume",
            "           via containers[app].envFrom",
            "consumer   StatefulSet/worker; watch: not for this object (its rollsafe.dev/watch \
             list does not name it)",
            "           via containers[app].envFrom",
            "           held by rollsafe watch: a restart window holds a roll until \
             2031-01-01T02:00:00Z",
        ],
        "{text}"
    );
    let (code, json, _) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!(code, 0);
    assert_eq!(
        json["workloads"][1]["pending"],
        json!({"heldBy": "window", "until": "2031-01-01T02:00:00Z", "digest": "v1:abc"})
    );
    let (code, text, stderr) = rollsafe_text(
        &env,
        &["restart-consumers", "-o", "text", "-n", NS, "db-creds"],
    );
    assert_eq!(code, 0, "{stderr}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[1..3],
        [
            "requested  Deployment/api (will not roll now: the Deployment is paused; it rolls \
             when it is resumed)",
            "requested  StatefulSet/worker",
        ],
        "{text}"
    );
    // The JSON stays the contract's: no mark in it.
    let (_, out, _) = env.rollsafe(&["restart-consumers", "-n", NS, "db-creds"]);
    assert_eq!(
        out["requested"],
        json!([{"kind": "Deployment", "name": "api"}, {"kind": "StatefulSet", "name": "worker"}])
    );
}

#[test]
fn a_closed_stdout_keeps_the_restart_status_as_the_exit_code() {
    let env = start();
    env.emu
        .add_fault(Fault::on("patch", "statefulsets").then(FaultAction::status(409)));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(["restart-consumers", "-n", NS, "db-creds", "--kubeconfig"])
        .arg(&env.kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_ANNOTATION")
        .env_remove("ROLLSAFE_NAMESPACE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the result is written.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // partial → 2, as with an open stdout; the patch went out; nothing on stderr.
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, "");
    assert!(env.annotations("deployments", "api")["krypton.io/restarted-at"].is_string());
}

#[test]
fn wait_follows_each_requested_rollout_to_its_end() {
    let env = start();
    let mut worker = env
        .emu
        .get_object("statefulsets", Some(NS), "worker")
        .unwrap();
    worker["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    env.emu.put_object(worker).unwrap();
    let (code, out, stderr) = env.rollsafe(&["restart-consumers", "--wait", "-n", NS, "db-creds"]);
    assert_eq!(code, 0, "{stderr}");
    // The contract result, unchanged, and each rollout's end.
    assert_eq!(out["result"]["status"], "requested");
    assert_eq!(out["rollout"]["ended"], "done");
    assert_eq!(
        out["rollout"]["counts"],
        json!({"complete": 1, "deferred": 1})
    );
    let workloads = &out["rollout"]["workloads"];
    assert_eq!(workloads[0]["name"], "api");
    assert_eq!(workloads[0]["state"], "complete");
    assert_eq!(workloads[1]["name"], "worker");
    assert_eq!(workloads[1]["state"], "deferred");
    assert_eq!(workloads[1]["deferral"], "on_delete");
    // Not a terminal: timestamped lines on stderr, one per change.
    assert!(
        stderr
            .lines()
            .any(|l| l.ends_with(" Deployment/api complete: 1 updated, 1 ready of 1")),
        "{stderr}"
    );
    // Following lists each kind, never one workload at a time.
    assert!(
        env.emu
            .requests()
            .iter()
            .filter(|r| r.method == "GET")
            .all(|r| !r.path.contains("/deployments/api")),
        "no per-workload reads"
    );
}

#[test]
fn wait_flags_are_checked_before_anything_is_patched() {
    let env = start();
    for (args, message) in [
        (
            &[
                "restart-consumers",
                "--wait",
                "--timeout",
                "soon",
                "-n",
                NS,
                "db-creds",
            ][..],
            "invalid --timeout \"soon\": not a duration",
        ),
        (
            &["restart-consumers", "--timeout", "5m", "-n", NS, "db-creds"][..],
            "--timeout and --progress-deadline apply to --wait",
        ),
        (
            &[
                "restart-consumers",
                "--progressive",
                "--wait=false",
                "-n",
                NS,
                "db-creds",
            ][..],
            "--progressive follows each wave to its end: it cannot run with --wait=false",
        ),
    ] {
        let (code, out, stderr) = env.rollsafe(args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert_eq!(out, Value::Null, "{args:?}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert_eq!(env.annotations("deployments", "api"), Value::Null);
}

#[test]
fn progressive_rolls_the_canary_first_and_holds_the_rest_when_it_does_not_complete() {
    let env = start();
    // No wave annotations: the canary is the first by kind and name (Deployment/api). Its
    // patch is refused, so the rest must never be patched.
    env.emu.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("api")
            .then(FaultAction::status(409)),
    );
    let (code, out, stderr) =
        env.rollsafe(&["restart-consumers", "--progressive", "-n", NS, "db-creds"]);
    // The stopping wave's own code: its one patch failed.
    assert_eq!(code, 3, "{stderr}");
    assert_eq!(out["waves"].as_array().unwrap().len(), 1, "{out}");
    assert_eq!(out["waves"][0]["wave"], json!({"kind": "canary"}));
    assert_eq!(out["waves"][0]["result"]["status"], "failed");
    assert_eq!(out["stopped"]["cause"], "not_requested");
    assert_eq!(
        out["heldBack"],
        json!([{"kind": "StatefulSet", "name": "worker"}])
    );
    assert_eq!(env.annotations("statefulsets", "worker"), Value::Null);

    // Annotated waves roll in ascending order; the unannotated go last; a bad value is said and
    // goes last too.
    let env = start();
    let mut worker = env
        .emu
        .get_object("statefulsets", Some(NS), "worker")
        .unwrap();
    worker["metadata"]["annotations"] = json!({"rollsafe.dev/rollout-wave": "0"});
    env.emu.put_object(worker).unwrap();
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["metadata"]["annotations"] = json!({"rollsafe.dev/rollout-wave": "first"});
    env.emu.put_object(api).unwrap();
    let (code, out, stderr) =
        env.rollsafe(&["restart-consumers", "--progressive", "-n", NS, "db-creds"]);
    assert_eq!(code, 0, "{stderr}");
    let waves: Vec<Value> = out["waves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| json!([w["wave"], w["result"]["requested"]]))
        .collect();
    assert_eq!(
        waves,
        [
            json!([{"kind": "annotated", "number": 0}, [{"kind": "StatefulSet", "name": "worker"}]]),
            json!([{"kind": "rest"}, [{"kind": "Deployment", "name": "api"}]]),
        ]
    );
    assert_eq!(out["heldBack"], json!([]));
    assert_eq!(out["invalidWaves"][0]["error"], "not_a_number");
    assert!(
        stderr.contains("Deployment/api: rollsafe.dev/rollout-wave is not used"),
        "{stderr}"
    );
    // One timestamp for the whole run.
    assert_eq!(
        env.annotations("deployments", "api")["krypton.io/restarted-at"],
        env.annotations("statefulsets", "worker")["krypton.io/restarted-at"]
    );
}

/// Slow pods, and every progress deadline a hundredth of its spec.
fn slow_rollouts(env: &Env) {
    env.emu
        .change_settings(RolloutPaceChange {
            pod_ready_millis: Some(300),
            progress_deadline_scale: Some(0.01),
        })
        .unwrap();
}

#[test]
fn wait_shows_a_slow_rollout_move_and_a_failing_one_stall_with_its_reason() {
    let env = start();
    slow_rollouts(&env);
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["spec"]["replicas"] = json!(3);
    env.emu.put_object(api).unwrap();
    let (code, out, stderr) = env.rollsafe(&["restart-consumers", "--wait", "-n", NS, "db-creds"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(out["rollout"]["counts"], json!({"complete": 2}), "{out}");
    // It was seen moving before it was complete.
    let api_lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" Deployment/api "))
        .collect();
    assert!(
        api_lines.iter().any(|l| l.contains(" progressing: ")),
        "{stderr}"
    );
    assert!(
        api_lines
            .last()
            .unwrap()
            .ends_with("complete: 3 updated, 3 ready of 3"),
        "{stderr}"
    );

    // The StatefulSet's next revision crash-loops: no progress within --progress-deadline.
    env.emu.add_fault(
        Fault::on("patch", "statefulsets").then(FaultAction::rollout_fails(
            "CrashLoopBackOff",
            "password authentication failed",
        )),
    );
    let (code, out, stderr) = env.rollsafe(&[
        "restart-consumers",
        "--wait",
        "--progress-deadline",
        "2s",
        "-o",
        "json",
        "-n",
        NS,
        "db-creds",
    ]);
    assert_eq!(code, 4, "{stderr}");
    let worker = &out["rollout"]["workloads"][1];
    assert_eq!(worker["state"], "stalled", "{out}");
    assert_eq!(worker["reason"]["reason"], "NoProgress");
    assert_eq!(worker["reason"]["podReason"], "CrashLoopBackOff");
    assert_eq!(out["rollout"]["workloads"][0]["state"], "complete");

    // A timeout is its own exit code.
    env.emu.add_fault(
        Fault::on("patch", "statefulsets").then(FaultAction::rollout_fails("CrashLoopBackOff", "")),
    );
    let (code, out, stderr) = env.rollsafe(&[
        "restart-consumers",
        "--wait",
        "--timeout",
        "1s",
        "-n",
        NS,
        "db-creds",
    ]);
    assert_eq!(code, 5, "{stderr}");
    assert_eq!(out["rollout"]["ended"], "timeout");
}

#[test]
fn a_failing_canary_leaves_every_other_consumer_unpatched_and_a_fix_completes_the_rest() {
    let env = start();
    slow_rollouts(&env);
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["spec"]["progressDeadlineSeconds"] = json!(100);
    env.emu.put_object(api).unwrap();
    // The rotated value is wrong: the canary's new pods crash-loop.
    env.emu.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("api")
            .then(FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "password authentication failed",
            )),
    );
    env.emu.clear_rollouts();
    let (code, out, stderr) =
        env.rollsafe(&["restart-consumers", "--progressive", "-n", NS, "db-creds"]);
    assert_eq!(code, 4, "{stderr}");
    assert_eq!(out["stopped"]["cause"], "stalled", "{out}");
    assert_eq!(out["stopped"]["workload"]["name"], "api");
    assert_eq!(
        out["stopped"]["workload"]["reason"]["reason"],
        "ProgressDeadlineExceeded"
    );
    assert_eq!(
        out["stopped"]["workload"]["reason"]["podReason"],
        "CrashLoopBackOff"
    );
    assert_eq!(
        out["heldBack"],
        json!([{"kind": "StatefulSet", "name": "worker"}])
    );
    assert_eq!(env.annotations("statefulsets", "worker"), Value::Null);
    let rolled = |name: &str| env.emu.rollouts().iter().filter(|r| r.name == name).count();
    assert_eq!((rolled("api"), rolled("worker")), (1, 0));

    // The fixed Secret: the stalled canary rolls to it and completes, then the rest, once each.
    let (code, out, stderr) = env.rollsafe(&[
        "restart-consumers",
        "--progressive",
        "-o",
        "text",
        "-n",
        NS,
        "db-creds",
    ]);
    assert_eq!(code, 0, "{stderr}{out}");
    assert_eq!((rolled("api"), rolled("worker")), (2, 1));
}

/// The cost of following, measured on 500 consumers whose pods take 300 ms: every request the
/// follow makes is a list of one kind (never a read of one workload), at most one per kind per
/// poll. The figures are printed for docs/rollouts.md.
#[test]
fn following_500_consumers_costs_one_list_per_kind_per_poll() {
    let env = start();
    for index in 0..500 {
        env.emu
            .put_object(workload(
                "Deployment",
                &format!("app-{index:03}"),
                Some("db-creds"),
            ))
            .unwrap();
    }
    slow_rollouts(&env);
    env.emu.clear_requests();
    let started = std::time::Instant::now();
    let (code, out, stderr) = env.rollsafe(&["restart-consumers", "--wait", "-n", NS, "db-creds"]);
    let elapsed = started.elapsed();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        out["rollout"]["counts"]["complete"], 502,
        "{}",
        out["rollout"]["counts"]
    );
    let requests = env.emu.requests();
    // Discovery lists each kind; then one patch per workload; what follows is the follow.
    let last_patch = requests.iter().rposition(|r| r.method == "PATCH").unwrap();
    let follow: Vec<_> = requests[last_patch + 1..].iter().collect();
    assert!(
        follow
            .iter()
            .all(|r| r.verb.as_deref() == Some("list") && r.name.is_none()),
        "only lists: {:?}",
        follow
            .iter()
            .map(|r| (&r.verb, &r.path))
            .collect::<Vec<_>>()
    );
    let lists = |resource: &str| {
        follow
            .iter()
            .filter(|r| r.resource.as_deref() == Some(resource))
            .count()
    };
    let (deployments, statefulsets) = (lists("deployments"), lists("statefulsets"));
    // Paged by 500: 502 Deployments are two pages a poll.
    let polls = deployments.div_ceil(2);
    assert!(statefulsets <= polls, "{statefulsets} > {polls}");
    assert_eq!(lists("daemonsets"), 0, "no DaemonSet was requested");
    eprintln!(
        "following 502 Deployments and 1 StatefulSet: {} requests over {polls} polls in {:.1}s \
         ({deployments} Deployment list pages, {statefulsets} StatefulSet lists)",
        follow.len(),
        elapsed.as_secs_f64()
    );
}

#[test]
fn a_workload_with_reloaders_annotations_is_said_to_need_reloader_compat() {
    let env = start();
    let mut api = env.emu.get_object("deployments", Some(NS), "api").unwrap();
    api["metadata"]["annotations"] = json!({"reloader.stakater.com/auto": "true"});
    env.emu.put_object(api).unwrap();
    let (code, out, _) = env.rollsafe(&["consumers", "-n", NS, "db-creds"]);
    assert_eq!(code, 0);
    assert_eq!(out["workloads"][0]["name"], "api");
    assert_eq!(out["workloads"][0]["watch"], "reloader");
    let (code, text, stderr) =
        rollsafe_text(&env, &["consumers", "-o", "text", "-n", NS, "db-creds"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        text.contains(
            "consumer   Deployment/api; watch: Reloader annotations: watched as they say under --reloader-compat"
        ),
        "{text}"
    );
}
