//! The Restart Consumers API against the emulator, one module per topic: gate order, ACL,
//! scope, impersonation, results and the sanitized 500, audit, shutdown. This file holds the
//! fixture they share.

#![expect(clippy::unwrap_used, reason = "test helpers may unwrap")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rollsafe_emulator::{Fault, FaultAction, RunningEmulator};
use rollsafe_server::audit::AuditSink;
use rollsafe_server::config::{Admins, AuthMode, Scope, SessionSecret, Settings};
use rollsafe_server::metrics::Metrics;
use rollsafe_server::session::{self, NewSession};
use rollsafe_server::{AppState, BoundServer};
use rollsafe_testing::{TestCluster, Workload};
use serde_json::{Value, json};

mod acl;
mod audit;
mod csrf;
mod gates;
mod impersonation;
mod page;
mod preview;
mod results;
mod scope;
mod shutdown;
mod token_review;

const SECRET: &str = "0123456789abcdef0123456789abcdef-test";
const SECRET_VALUE: &str = "s3cr3t-value-that-must-never-leak";
const NS: &str = "team-a";

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

/// A workload of `kind` in [`NS`] reading Secret `secret` with `envFrom`.
fn workload(kind: &str, name: &str, secret: &str) -> Value {
    Workload::of_kind(kind, name)
        .namespace(NS)
        .consuming_secret_via_env_from(secret)
        .build()
}

struct Fixture {
    emulator: RunningEmulator,
    url: String,
    admin_url: String,
    audit_file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
    http: HyperClient<HttpConnector, Full<Bytes>>,
}

fn settings() -> Settings {
    Settings {
        listen: "127.0.0.1:0".parse().unwrap(),
        admin_listen: "127.0.0.1:0".parse().unwrap(),
        kubeconfig: None,
        context: None,
        audit_file: None,
        restart_enabled: true,
        scope: Scope::Namespace,
        server_namespace: NS.parse().unwrap(),
        admins: Admins {
            users: vec!["root@x.io".into()],
            groups: vec!["admins".into()],
        },
        access_configmap: "krypton-access".parse().unwrap(),
        annotation_prefix: "krypton.io".parse().unwrap(),
        impersonation: false,
        auth: AuthMode::Session {
            secret: SessionSecret::new(SECRET.as_bytes().to_vec()),
            max_age: Duration::from_secs(3600),
        },
        allowed_groups: Default::default(),
        max_concurrent_restarts: rollsafe_server::limits::MAX_CONCURRENT_RUNS,
        token_review: None,
        oidc: None,
    }
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
        let TestCluster {
            emu: emulator,
            connection,
            kubeconfig,
            dir,
        } = TestCluster::start(objects).await;
        let audit_file = dir.path().join("audit.log");
        let mut settings = settings();
        settings.kubeconfig = Some(kubeconfig.clone());
        settings.audit_file = Some(audit_file.clone());
        configure(&mut settings);
        let audit = AuditSink::with_file(&audit_file).unwrap();
        let state = Arc::new(AppState::new(settings, connection, audit, Metrics::new()));
        let bound = BoundServer::bind(state).await.unwrap();
        let url = format!("http://{}", bound.api_addr().unwrap());
        let admin_url = format!("http://{}", bound.admin_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(bound.run(async {
            let _ = stopped.await;
        }));
        emulator.clear_requests();
        Self {
            emulator,
            url,
            admin_url,
            audit_file,
            _dir: dir,
            stop: Some(stop),
            server: Some(server),
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

    async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

fn token(email: &str, groups: &[&str]) -> String {
    session::mint(
        &NewSession {
            sub: None,
            email: email.into(),
            name: None,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ttl: Duration::from_secs(600),
        },
        &SessionSecret::new(SECRET.as_bytes().to_vec()),
        session::now(),
    )
    .unwrap()
}

fn admin() -> String {
    token("root@x.io", &["developers"])
}
