//! Shared helpers for the emulator's integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use rollsafe_emulator::{Emulator, EmulatorBuilder, RunningEmulator};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Starts an emulator with alice (no RBAC), bob (edit in "shop" via a RoleBinding), and the
/// "shop" namespace.
pub async fn start() -> RunningEmulator {
    start_with(Emulator::builder()).await
}

pub async fn start_with(builder: EmulatorBuilder) -> RunningEmulator {
    builder
        .identity("alice", "alice-token", &["devs"])
        .identity("bob", "bob-token", &["ops"])
        .seed_objects(vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "editor", "namespace": "shop"},
                   "rules": [{"apiGroups": ["", "apps"], "resources": ["*"], "verbs": ["*"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "bob-edits", "namespace": "shop"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "editor"},
                   "subjects": [{"kind": "User", "name": "bob"}]}),
        ])
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("emulator starts")
}

/// A kube client for a kubeconfig context, without the default retry policy.
pub async fn client(emu: &RunningEmulator, context: &str) -> kube::Client {
    kube::Client::try_from(config(emu, context).await).unwrap()
}

pub async fn config(emu: &RunningEmulator, context: &str) -> kube::Config {
    let kc = Kubeconfig::from_yaml(&emu.kubeconfig_yaml()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kc,
        &KubeConfigOptions {
            context: Some(context.to_string()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(10));
    config
}

pub fn deployment(ns: &str, name: &str) -> Value {
    rollsafe_emulator::Handle::sample_deployment(ns, name)
}

/// Seeds `n` deployments named d0000.. in `ns`.
pub fn seed_deployments(emu: &RunningEmulator, ns: &str, n: usize) {
    for i in 0..n {
        emu.put_object(deployment(ns, &format!("d{i:04}"))).unwrap();
    }
}

/// The status of an API error.
pub fn api_status(e: &kube::Error) -> &kube::core::Status {
    match e {
        kube::Error::Api(s) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// One request as the admin: (status, `Warning` header values, body).
pub async fn send(
    emu: &RunningEmulator,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> (u16, Vec<String>, Value) {
    send_bytes(
        emu,
        method,
        path,
        content_type,
        &serde_json::to_vec(body).unwrap(),
    )
    .await
}

/// [`send`] with the body's bytes as given (a body no JSON value can express, such as one with
/// a key twice).
pub async fn send_bytes(
    emu: &RunningEmulator,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> (u16, Vec<String>, Value) {
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        emu.admin_token(),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    let (status, head, body) = exchange(emu, &request).await;
    let warnings = head
        .lines()
        .filter_map(|l| l.split_once(": "))
        .filter(|(name, _)| name.eq_ignore_ascii_case("warning"))
        .map(|(_, value)| value.to_owned())
        .collect();
    // Connection: close answers are not chunked here unless the body streams; take the JSON.
    let json_start = body.find('{').unwrap_or(0);
    let json_end = body.rfind('}').map_or(body.len(), |i| i + 1);
    let body = serde_json::from_str(&body[json_start..json_end]).unwrap_or(Value::Null);
    (status, warnings, body)
}

/// Sends raw request bytes and returns the status (0 when none came within 10 s), the head and
/// the body.
pub async fn exchange(emu: &RunningEmulator, request: &[u8]) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(emu.addr()).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_owned(), body.to_owned())
}

/// Every kubectl release under the Cloud SDK, else kubectl from PATH; empty (the test skips,
/// saying why) when there is none and `CI` is not set.
pub fn kubectl_releases() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/google-cloud-sdk/bin")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("kubectl.1."))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if found.is_empty()
        && let Some(paths) = std::env::var_os("PATH")
    {
        found.extend(
            std::env::split_paths(&paths)
                .map(|dir| dir.join("kubectl"))
                .find(|p| p.is_file()),
        );
    }
    if found.is_empty() {
        assert!(
            std::env::var_os("CI").is_none_or(|v| v.is_empty()),
            "CI is set but kubectl is missing"
        );
        eprintln!(
            "skipping: kubectl is not installed (not under /usr/lib/google-cloud-sdk/bin nor on PATH)"
        );
    }
    found
}
