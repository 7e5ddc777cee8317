//! `rollsafe review rbac` without a cluster: its usage and its exit code 2 when no review can be
//! made (the reviews themselves run on the real control plane, `install_real.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn rollsafe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent")
        .output()
        .unwrap()
}

#[test]
fn an_unusable_kubeconfig_is_exit_2_with_one_line_on_stderr_and_nothing_on_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "not: [a kubeconfig").unwrap();
    let output = rollsafe(&[
        "review",
        "rbac",
        "-n",
        "rollsafe",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout, b"");
    let stderr = String::from_utf8(output.stderr).unwrap();
    // A fixed message and a code: nothing of the file is echoed.
    assert_eq!(
        stderr,
        "rollsafe: cannot connect to Kubernetes (kubeconfig)\n"
    );
}

#[test]
fn the_release_namespace_is_required_and_the_exit_codes_are_in_the_help() {
    let output = rollsafe(&["review", "rbac"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--namespace <NAMESPACE>"),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let help = rollsafe(&["review", "rbac", "--help"]);
    assert!(help.status.success());
    let help = String::from_utf8(help.stdout).unwrap();
    assert!(
        help.contains("Exit codes: 0 every ServiceAccount"),
        "{help}"
    );
    assert!(help.contains("SelfSubjectRulesReview"), "{help}");
}
