//! `rollsafe approve` against an in-process emulator with RBAC: the approval written as the
//! caller, exactly for the roll pending, refused when RBAC says no, when nothing awaits
//! approval, or when the pending roll moved on between the read and the patch.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use rollsafe_emulator::{Fault, FaultAction, RunningEmulator};
use rollsafe_testing::{TestCluster, Workload};
use serde_json::{Value, json};

const NS: &str = "shop";
const MARK: &str = "approval since=2026-12-03T06:00:00Z digest=v1:abc";

struct Env {
    emu: RunningEmulator,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    // Last: the emulator's runtime outlives the emulator.
    _runtime: tokio::runtime::Runtime,
}

fn deployment(name: &str, pending: Option<&str>) -> Value {
    let mut object = Workload::deployment(name).namespace(NS).build();
    object["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true"});
    if let Some(pending) = pending {
        object["metadata"]["annotations"]["rollsafe.dev/pending"] = json!(pending);
    }
    object
}

/// Role `name` granting `verbs` on Deployments to group `group`.
fn role(name: &str, group: &str, verbs: &[&str]) -> Vec<Value> {
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": name, "namespace": NS},
               "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": verbs}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": name, "namespace": NS},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]}),
    ]
}

fn start() -> Env {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut seeds = vec![
        deployment("api", Some(MARK)),
        deployment("plain", None),
        deployment(
            "windowed",
            Some("window until=2026-12-07T08:00:00Z digest=v1:abc"),
        ),
    ];
    seeds.extend(role("approver", "approvers", &["get", "patch"]));
    seeds.extend(role("reader", "readers", &["get"]));
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
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::cargo_bin("rollsafe").unwrap();
        command
            .arg("approve")
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("ROLLSAFE_NAMESPACE")
            .env_remove("ROLLSAFE_CONTEXT")
            .env_remove("ROLLSAFE_AS")
            .env_remove("ROLLSAFE_AS_GROUP");
        command
    }

    /// (exit code, stdout, stderr).
    fn approve(&self, args: &[&str]) -> (i32, String, String) {
        let output = self.command(args).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    fn approved(&self, name: &str) -> Option<String> {
        self.emu.get_object("deployments", Some(NS), name).unwrap()["metadata"]["annotations"]
            ["rollsafe.dev/approved"]
            .as_str()
            .map(str::to_owned)
    }
}

#[test]
fn an_approval_is_written_as_the_approver_for_exactly_the_pending_roll() {
    let env = start();
    let (code, stdout, stderr) = env.approve(&[
        "-n",
        NS,
        "deploy/api",
        "-o",
        "text",
        "--as",
        "ada@example.com",
        "--as-group",
        "approvers",
    ]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            0,
            "approved deployment/api in shop: the roll to v1:abc pending since 2026-12-03T06:00:00Z\n",
            ""
        )
    );
    assert_eq!(env.approved("api").as_deref(), Some("v1:abc"));
    let patches = env.emu.requests_for("patch", "deployments");
    assert_eq!(patches.len(), 1);
    let patch = &patches[0];
    assert_eq!(patch.impersonated_user.as_deref(), Some("ada@example.com"));
    assert_eq!(patch.impersonated_groups, ["approvers"]);
    assert_eq!(
        patch.query_param("fieldManager").as_deref(),
        Some("rollsafe-approve")
    );
    assert_eq!(
        patch.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    let body: Value = serde_json::from_str(patch.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        body[0],
        json!({"op": "test", "path": "/metadata/annotations/rollsafe.dev~1pending", "value": MARK})
    );
}

#[test]
fn the_approval_prints_by_the_output_rule() {
    let env = start();
    let (code, stdout, stderr) = env.approve(&["-n", NS, "deploy/api"]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    // Not a terminal: one line of JSON, as every other command's result.
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"kind": "Deployment", "namespace": NS, "name": "api", "approved": "v1:abc",
               "pendingSince": "2026-12-03T06:00:00Z"})
    );
    let (code, stdout, stderr) = env.approve(&["-n", NS, "-o", "yaml", "deploy/api"]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
}

#[test]
fn rbac_decides_who_may_approve() {
    let env = start();
    let (code, stdout, stderr) = env.approve(&[
        "-n",
        NS,
        "deployment/api",
        "--as",
        "eve@example.com",
        "--as-group",
        "readers",
    ]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (
            1,
            "",
            "rollsafe: forbidden: approving needs patch on deployment/api\n"
        )
    );
    assert_eq!(env.approved("api"), None);
}

#[test]
fn nothing_to_approve_is_one_line_and_exit_1() {
    let env = start();
    let cases: [(&str, &str); 3] = [
        (
            "deployment/plain",
            "rollsafe: deployment/plain has no roll awaiting approval\n",
        ),
        (
            "deployment/windowed",
            "rollsafe: deployment/windowed has no roll awaiting approval: its roll is held by a restart window until 2026-12-07T08:00:00Z\n",
        ),
        (
            "deployment/nope",
            "rollsafe: deployment/nope not found in namespace shop\n",
        ),
    ];
    for (target, expected) in cases {
        let (code, stdout, stderr) = env.approve(&["-n", NS, target]);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (1, "", expected),
            "{target}"
        );
    }
    assert!(env.emu.requests_for("patch", "deployments").is_empty());
}

#[test]
fn a_roll_that_moved_on_since_it_was_read_is_not_approved() {
    let env = start();
    // The patch waits; meanwhile the controller marks a newer roll.
    env.emu.add_fault(
        Fault::on("patch", "deployments")
            .name("api")
            .then(FaultAction::Delay { millis: 1500 }),
    );
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("rollsafe"))
        .args(["approve", "-n", NS, "deployment/api", "--kubeconfig"])
        .arg(&env.kubeconfig)
        .env_remove("ROLLSAFE_AS")
        .env_remove("ROLLSAFE_AS_GROUP")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env
        .emu
        .in_flight()
        .iter()
        .any(|stat| stat.verb == "patch" && stat.current > 0)
    {
        assert!(
            Instant::now() < deadline,
            "the approval's patch never started"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    env.emu
        .put_object(deployment(
            "api",
            Some("approval since=2026-12-03T07:00:00Z digest=v1:newer"),
        ))
        .unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "rollsafe: the roll awaiting approval on deployment/api changed meanwhile; nothing was approved (see rollsafe why deployment/api)\n"
    );
    assert_eq!(env.approved("api"), None);
}
