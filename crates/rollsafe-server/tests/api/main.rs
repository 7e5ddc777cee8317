//! The Restart Consumers API against the emulator, one module per topic: gate order, ACL,
//! scope, impersonation, results and the sanitized 500, audit, shutdown. This file holds what
//! they share beyond the server fixture of `tests/common`: this suite's seed and settings, an
//! HTTP client, and the captured logs.

#![expect(clippy::unwrap_used, reason = "test helpers may unwrap")]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rollsafe_emulator::{Fault, FaultAction};
use rollsafe_server::Settings;
use rollsafe_server::acl::Admins;
use rollsafe_server::scope::Scope;
use serde_json::{Value, json};

#[path = "../common/mod.rs"]
mod common;

use common::{NS, SECRET, token, workload};

mod acl;
mod approve;
mod audit;
mod csrf;
mod gates;
mod held;
mod impersonation;
mod page;
mod preview;
mod results;
mod rollout;
mod scope;
mod shutdown;
mod token_review;

const SECRET_VALUE: &str = "s3cr3t-value-that-must-never-leak";

fn seed() -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS},
               "stringData": {"password": SECRET_VALUE}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db-v1", "namespace": NS,
               "labels": {"krypton.io/kind": "history", "krypton.io/history-of": "db"}},
               "stringData": {"password": SECRET_VALUE}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "locked", "namespace": NS,
               "annotations": {"krypton.io/allowed-groups": "platform", "krypton.io/allowed-users": "carol@x.io"}},
               "stringData": {"k": SECRET_VALUE}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "team-b"},
               "stringData": {"password": SECRET_VALUE}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "restarter", "namespace": NS},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                         {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": ["list", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "devs", "namespace": NS},
               "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "Role", "name": "restarter", "apiGroup": "rbac.authorization.k8s.io"}}),
    ];
    for (kind, name, secret) in [
        ("Deployment", "api", "db"),
        ("StatefulSet", "worker", "db"),
        ("DaemonSet", "agent", "locked"),
        ("Deployment", "unrelated", "other"),
    ] {
        objects.push(workload(kind, name, secret));
    }
    objects
}

/// A server of this suite, over the emulator, and an HTTP client for it. It dereferences to
/// the common fixture (the emulator, the audit file).
struct Fixture {
    server: common::Fixture,
    url: String,
    admin_url: String,
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

impl std::ops::Deref for Fixture {
    type Target = common::Fixture;

    fn deref(&self) -> &common::Fixture {
        &self.server
    }
}

/// This suite's settings over the common ones: admins `root@x.io` and group `admins`, and the
/// server's own identity for every call (tests that need impersonation turn it on).
fn configure_suite(settings: &mut Settings) {
    settings.admins = Admins {
        users: vec!["root@x.io".into()],
        groups: vec!["admins".into()],
    };
    settings.impersonation = false;
}

/// Everything every test of this binary logs, at debug level, to check for leaks.
static LOGS: std::sync::OnceLock<Arc<std::sync::Mutex<Vec<u8>>>> = std::sync::OnceLock::new();

struct LogWriter(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn captured_logs() -> Arc<std::sync::Mutex<Vec<u8>>> {
    LOGS.get_or_init(|| {
        let buffer = Arc::new(std::sync::Mutex::new(Vec::new()));
        let writer = buffer.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("debug"))
            .with_ansi(false)
            .with_writer(move || LogWriter(writer.clone()))
            .try_init();
        buffer
    })
    .clone()
}

impl Fixture {
    async fn start(configure: impl FnOnce(&mut Settings)) -> Self {
        Self::start_with(seed(), configure).await
    }

    async fn start_with(objects: Vec<Value>, configure: impl FnOnce(&mut Settings)) -> Self {
        captured_logs();
        let server = common::Fixture::start_seeded(objects, None, |settings| {
            configure_suite(settings);
            configure(settings);
        })
        .await;
        Self {
            url: format!("http://{}", server.api),
            admin_url: format!("http://{}", server.admin),
            server,
            http: HyperClient::builder(TokioExecutor::new()).build_http(),
        }
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (StatusCode, http::HeaderMap, Value) {
        let mut request = Request::builder()
            .method(method)
            .uri(format!("{}{}", self.url, path));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = self
            .http
            .request(request.body(Full::new(Bytes::new())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            headers,
            serde_json::from_slice(&body).unwrap_or(Value::Null),
        )
    }

    async fn restart(
        &self,
        namespace: &str,
        name: &str,
        token: Option<&str>,
    ) -> (StatusCode, http::HeaderMap, Value) {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("authorization", a.as_str())).collect();
        self.request(
            Method::POST,
            &format!("/api/namespaces/{namespace}/secrets/{name}/restart-consumers"),
            &headers,
        )
        .await
    }

    fn workload_requests(&self) -> usize {
        self.emulator
            .requests()
            .iter()
            .filter(|r| {
                matches!(
                    r.resource.as_deref(),
                    Some("deployments" | "statefulsets" | "daemonsets")
                )
            })
            .count()
    }

    fn secret_reads(&self) -> usize {
        self.emulator
            .requests()
            .iter()
            .filter(|r| r.is("get", "secrets"))
            .count()
    }

    /// The result records (intent records, written before a run's first patch, are left out).
    fn audit_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|record| record["stage"] != "intent")
            .collect()
    }

    /// Starts a restart of `db` whose patches each take 300 ms, and returns once one of them is
    /// being handled (polled with a deadline). The task yields the response status.
    async fn slow_restart_in_flight(
        &self,
    ) -> tokio::task::JoinHandle<Result<StatusCode, hyper_util::client::legacy::Error>> {
        self.emulator.add_fault(
            Fault::on("patch", "*")
                .namespace(NS)
                .always()
                .then(FaultAction::Delay { millis: 300 }),
        );
        let url = self.url.clone();
        let http = self.http.clone();
        let token = admin();
        let call = tokio::spawn(async move {
            let request = Request::post(format!(
                "{url}/api/namespaces/{NS}/secrets/db/restart-consumers"
            ))
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap();
            http.request(request).await.map(|r| r.status())
        });
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while !self
            .emulator
            .in_flight()
            .iter()
            .any(|s| s.verb == "patch" && s.current > 0)
        {
            assert!(tokio::time::Instant::now() < deadline, "no patch arrived");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        call
    }

    async fn stop(self) {
        self.server.stop().await;
    }
}

fn admin() -> String {
    token("root@x.io", &["developers"])
}
