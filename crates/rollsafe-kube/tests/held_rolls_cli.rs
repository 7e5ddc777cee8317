//! `rollsafe restart-consumers` (the built binary) of workloads whose roll `rollsafe watch`
//! holds: its output is the contract's, and the hold is settled by the same patch — the
//! controller's record at the held digest, no mark, no approval — so the controller does not
//! roll the same content again when the window opens or an approval would come.
//!
//! The binary is the `rollsafe` built beside this test (`target/<profile>/rollsafe`, which a
//! workspace `cargo test` builds before any test runs), or `ROLLSAFE_BIN`. Without it the test
//! says why it skipped, unless `CI` is set: then it fails.

use std::path::PathBuf;
use std::process::Command;

use rollsafe_core::annotations::{APPROVED, CONFIG_HASH, CONFIG_RECORD, PENDING};
use rollsafe_testing::{TestCluster, Workload, secret};
use serde_json::{Value, json};

const NS: &str = "shop";
const WINDOW: &str = "window until=2026-12-07T08:00:00Z digest=v1:held-by-window";
const APPROVAL: &str = "approval since=2026-12-03T06:00:00Z digest=v1:awaiting-approval";

/// The `rollsafe` binary of this build, if there is one.
fn rollsafe_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("ROLLSAFE_BIN") {
        return Some(PathBuf::from(path));
    }
    // This test runs as target/<profile>/deps/<name>; the binary is target/<profile>/rollsafe.
    let exe = std::env::current_exe().ok()?;
    let binary = exe.parent()?.parent()?.join("rollsafe");
    binary.is_file().then_some(binary)
}

fn consumer(kind: &str, name: &str, annotations: Value) -> Value {
    let mut object = Workload::of_kind(kind, name)
        .namespace(NS)
        .consuming_secret_via_env_from("db-creds")
        .build();
    object["metadata"]["annotations"] = annotations;
    object
}

#[test]
fn restart_consumers_settles_the_rolls_the_controller_holds() {
    let Some(binary) = rollsafe_binary() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "the rollsafe binary is missing beside this test (cargo test --workspace builds it)"
        );
        eprintln!("skipped: no rollsafe binary beside this test (cargo build -p rollsafe)");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let held = |mark: &str| {
        json!({
            "rollsafe.dev/watch": "true",
            CONFIG_RECORD: "v1:before;0123456789ab=0123456789abcdef",
            PENDING: mark,
        })
    };
    let mut approved = held(APPROVAL);
    approved[APPROVED] = json!("v1:awaiting-approval");
    let cluster = runtime.block_on(TestCluster::start(vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        secret(NS, "db-creds", "not-a-real-password"),
        consumer("Deployment", "api", held(WINDOW)),
        consumer("StatefulSet", "worker", approved),
    ]));
    let output = Command::new(binary)
        .args(["restart-consumers", "-n", NS, "db-creds", "--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_ANNOTATION")
        .env_remove("ROLLSAFE_NAMESPACE")
        .env_remove("ROLLSAFE_CONTEXT")
        .env_remove("ROLLSAFE_AS")
        .env_remove("ROLLSAFE_AS_GROUP")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    // The contract's body, unchanged.
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(out["status"], "requested", "{out}");
    assert_eq!(
        out["requested"],
        json!([{"kind": "Deployment", "name": "api"}, {"kind": "StatefulSet", "name": "worker"}])
    );
    // What the controller reads afterwards.
    for (resource, name, digest) in [
        ("deployments", "api", "v1:held-by-window"),
        ("statefulsets", "worker", "v1:awaiting-approval"),
    ] {
        let object = cluster.emu.get_object(resource, Some(NS), name).unwrap();
        let metadata = &object["metadata"]["annotations"];
        let template = &object["spec"]["template"]["metadata"]["annotations"];
        assert_eq!(metadata[CONFIG_RECORD], digest, "{name}: {metadata}");
        assert_eq!(metadata.get(PENDING), None, "{name}: {metadata}");
        assert_eq!(metadata.get(APPROVED), None, "{name}: {metadata}");
        assert_eq!(template[CONFIG_HASH], digest, "{name}: {template}");
        assert!(
            template["krypton.io/restarted-at"].is_string(),
            "{template}"
        );
    }
    drop(cluster);
}
