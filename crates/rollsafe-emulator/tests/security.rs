//! The emulator as a security boundary of the sandbox: impersonation headers that cannot be read
//! are refused (never ignored, which would run the request as the impersonator), and the
//! unauthenticated admin API cannot be reached from a web page (foreign `Host`, foreign
//! `Origin`, form or `text/plain` bodies).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};

/// A GET of the secrets in "shop" as alice with extra header lines (raw bytes).
async fn list_secrets_as_alice(emu: &RunningEmulator, extra: &[u8]) -> (u16, Value) {
    let mut req = b"GET /api/v1/namespaces/shop/secrets HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer alice-token\r\nConnection: close\r\n".to_vec();
    req.extend_from_slice(extra);
    req.extend_from_slice(b"\r\n");
    let (status, _, body) = exchange(emu, &req).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

/// alice may read Secrets in "shop" and impersonate the user "bob" only.
async fn start_with_alice_reader() -> RunningEmulator {
    let emu = start().await;
    emu.put_object(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "reader", "namespace": "shop"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list", "get"]}]}),
    )
    .unwrap();
    emu.put_object(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "alice-reads", "namespace": "shop"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "User", "name": "alice"}]}),
    )
    .unwrap();
    emu.put_object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "be-bob"},
        "rules": [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]}]}))
        .unwrap();
    emu.put_object(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "alice-is-bob"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "be-bob"},
        "subjects": [{"kind": "User", "name": "alice"}]}))
        .unwrap();
    emu
}

fn assert_status_body(body: &Value, code: u16, reason: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
}

#[tokio::test]
async fn a_non_ascii_impersonated_user_is_authorized_as_that_user_not_skipped() {
    let emu = start_with_alice_reader().await;
    // alice reads, and may act as bob (an editor of "shop").
    assert_eq!(list_secrets_as_alice(&emu, b"").await.0, 200);
    assert_eq!(
        list_secrets_as_alice(&emu, b"Impersonate-User: bob\r\n")
            .await
            .0,
        200
    );
    // "bøb" is another user: alice may not impersonate it, and the request must not run as alice.
    let (status, body) = list_secrets_as_alice(&emu, "Impersonate-User: bøb\r\n".as_bytes()).await;
    assert_eq!(status, 403, "{body}");
    assert_status_body(&body, 403, "Forbidden");
    assert_eq!(
        body["message"],
        "users \"bøb\" is forbidden: User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let logged = emu.requests().pop().unwrap();
    assert_eq!(logged.impersonated_user.as_deref(), Some("bøb"));
    emu.shutdown().await;
}

#[tokio::test]
async fn unreadable_impersonation_headers_are_400_never_ignored() {
    let emu = start_with_alice_reader().await;
    let cases: &[(&str, &[u8])] = &[
        ("user not UTF-8", b"Impersonate-User: b\xffb\r\n"),
        (
            "group not UTF-8",
            b"Impersonate-User: bob\r\nImpersonate-Group: \xc3\x28\r\n",
        ),
        (
            "uid not UTF-8",
            b"Impersonate-User: bob\r\nImpersonate-Uid: \xfe\r\n",
        ),
        (
            "extra value not UTF-8",
            b"Impersonate-User: bob\r\nImpersonate-Extra-Scopes: \xff\r\n",
        ),
        (
            "extra key not UTF-8",
            b"Impersonate-User: bob\r\nImpersonate-Extra-%FF: x\r\n",
        ),
        (
            "two users",
            b"Impersonate-User: bob\r\nImpersonate-User: carol\r\n",
        ),
        ("a non-UTF-8 user alone", b"Impersonate-User: \x80\r\n"),
    ];
    for (what, header) in cases {
        let (status, body) = list_secrets_as_alice(&emu, header).await;
        assert_eq!(status, 400, "{what}: {body}");
        assert_status_body(&body, 400, "BadRequest");
        assert!(
            body["message"]
                .as_str()
                .unwrap()
                .starts_with("invalid impersonation header"),
            "{what}: {body}"
        );
    }
    emu.shutdown().await;
}

async fn admin_raw(
    emu: &RunningEmulator,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> (u16, String) {
    let req = format!(
        "{method} {path} HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = exchange(emu, req.as_bytes()).await;
    (status, body)
}

const FAULT: &str = r#"{"verb":"get","resource":"secrets","action":{"type":"status","code":500}}"#;

#[tokio::test]
async fn admin_api_state_changes_need_a_json_body() {
    let emu = start().await;
    let host = format!("Host: {}\r\n", emu.addr());
    for content_type in [
        "",
        "Content-Type: text/plain\r\n",
        "Content-Type: application/x-www-form-urlencoded\r\n",
        "Content-Type: multipart/form-data; boundary=x\r\n",
    ] {
        let headers = format!("{host}{content_type}");
        let (status, body) = admin_raw(&emu, "POST", "/_emulator/faults", &headers, FAULT).await;
        assert_eq!(status, 415, "{content_type:?}: {body}");
        let (status, _) = admin_raw(&emu, "POST", "/_emulator/reset", &headers, "").await;
        assert_eq!(status, 415, "{content_type:?}");
        let (status, _) = admin_raw(&emu, "DELETE", "/_emulator/requests", &headers, "").await;
        assert_eq!(status, 415, "{content_type:?}");
    }
    assert!(emu.faults().is_empty(), "no fault was registered");
    let headers = format!("{host}Content-Type: application/json; charset=utf-8\r\n");
    let (status, body) = admin_raw(&emu, "POST", "/_emulator/faults", &headers, FAULT).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(emu.faults().len(), 1);
    // Reads need no body.
    let (status, _) = admin_raw(&emu, "GET", "/_emulator/faults", &host, "").await;
    assert_eq!(status, 200);
    emu.shutdown().await;
}

#[tokio::test]
async fn admin_api_refuses_foreign_origins() {
    let emu = start().await;
    let port = emu.addr().port();
    let json_ct = "Content-Type: application/json\r\n";
    for origin in [
        "https://attacker.example".to_string(),
        "null".to_string(),
        format!("http://attacker.example:{port}"),
        "http://127.0.0.1:1".to_string(),
    ] {
        let headers = format!("Host: {}\r\nOrigin: {origin}\r\n{json_ct}", emu.addr());
        let (status, body) = admin_raw(&emu, "POST", "/_emulator/faults", &headers, FAULT).await;
        assert_eq!(status, 403, "{origin}: {body}");
        let (status, body) = admin_raw(&emu, "GET", "/_emulator/info", &headers, "").await;
        assert_eq!(status, 403, "{origin}: {body}");
        assert!(!body.contains(emu.admin_token()), "{origin}");
    }
    assert!(emu.faults().is_empty());
    // The emulator's own origin (a page it served, were there one) is allowed.
    for own in [
        format!("http://127.0.0.1:{port}"),
        format!("https://localhost:{port}"),
    ] {
        let headers = format!("Host: {}\r\nOrigin: {own}\r\n{json_ct}", emu.addr());
        let (status, body) = admin_raw(&emu, "POST", "/_emulator/faults", &headers, FAULT).await;
        assert_eq!(status, 200, "{own}: {body}");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn admin_api_answers_loopback_host_names_only() {
    let emu = start().await;
    let port = emu.addr().port();
    for host in [
        format!("rebind.attacker.example:{port}"),
        "attacker.example".to_string(),
        format!("10.0.0.1:{port}"),
        String::new(),
    ] {
        let headers = if host.is_empty() {
            String::new()
        } else {
            format!("Host: {host}\r\n")
        };
        let (status, body) = admin_raw(&emu, "GET", "/_emulator/info", &headers, "").await;
        assert_eq!(status, 403, "{host:?}: {body}");
        assert!(!body.contains(emu.admin_token()), "{host:?}");
    }
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_string(),
        format!("[::1]:{port}"),
    ] {
        let headers = format!("Host: {host}\r\n");
        let (status, body) = admin_raw(&emu, "GET", "/_emulator/info", &headers, "").await;
        assert_eq!(status, 200, "{host}: {body}");
        let info: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(info["adminToken"], emu.admin_token());
    }
    emu.shutdown().await;
}
