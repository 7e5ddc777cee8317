//! A reader that stops early (`rollsafe refs … | head`) ends the command quietly: exit 0 and
//! nothing on stderr, as Unix tools do.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;
use std::process::{Command, Stdio};

/// A manifest stream whose `refs` and `render` outputs are far larger than a pipe's buffer.
fn large_manifest() -> tempfile::NamedTempFile {
    let mut text = String::new();
    for index in 0..2000 {
        text.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{index}\n  \
             namespace: shop\nspec:\n  selector:\n    matchLabels: {{app: a}}\n  template:\n    \
             metadata:\n      labels: {{app: a}}\n    spec:\n      containers:\n      - name: c\n        \
             image: busybox\n        envFrom:\n        - secretRef: {{name: db-creds-{index}}}\n"
        ));
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), text).unwrap();
    file
}

/// Runs `rollsafe ARGS FILE`, reads a few bytes of stdout, closes it and waits.
fn read_a_little_then_close(args: &[&str]) -> (Option<i32>, String) {
    let manifest = large_manifest();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(args)
        .arg(manifest.path())
        .env_remove("RUST_LOG")
        .env_remove("REFERENCED_CONFIG_ROLLOUT")
        .env_remove("HELM_NAMESPACE")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/rollsafe-test-kubeconfig")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut start = [0u8; 16];
    stdout.read_exact(&mut start).unwrap();
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn refs_into_a_closed_pipe_exits_0_quietly() {
    assert_eq!(
        read_a_little_then_close(&["refs"]),
        (Some(0), String::new())
    );
}

#[test]
fn render_into_a_closed_pipe_exits_0_quietly() {
    assert_eq!(
        read_a_little_then_close(&["render"]),
        (Some(0), String::new())
    );
}
