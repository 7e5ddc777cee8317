//! The server suites' one fixture module: a server over an in-process emulator, its settings
//! and session tokens, and a raw HTTP/1.1 client. Every suite (`api`, `hardening`, `fuzz`,
//! `oidc`, `web`) builds on it.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rollsafe_emulator::RunningEmulator;
use rollsafe_server::audit::{AuditSink, Stream};
use rollsafe_server::metrics::Metrics;
use rollsafe_server::session::{self, AuthMode, NewSession, SessionSecret};
use rollsafe_server::{AppState, BoundServer, Settings};
use rollsafe_testing::{TestCluster, Workload};
use serde_json::{Value, json};

pub mod http;
pub mod provider;

#[allow(unused_imports)]
pub use http::{Response, exchange, get, in_flight, wait_until};

pub const SECRET: &str = "0123456789abcdef0123456789abcdef-hardening";
pub const NS: &str = "team-a";

pub fn seed() -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS},
               "stringData": {"password": "never-shown"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "restarter"},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                         {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": ["list", "patch"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "restarters"},
               "subjects": [{"kind": "Group", "name": "developers", "apiGroup": "rbac.authorization.k8s.io"},
                            {"kind": "Group", "name": "system:masters", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "restarter", "apiGroup": "rbac.authorization.k8s.io"}}),
    ];
    objects.push(workload("Deployment", "api", "db"));
    objects.push(workload("Deployment", "web", "db"));
    objects
}

/// A workload of `kind` in [`NS`] reading Secret `secret` with `envFrom`.
pub fn workload(kind: &str, name: &str, secret: &str) -> Value {
    Workload::of_kind(kind, name)
        .namespace(NS)
        .consuming_secret_via_env_from(secret)
        .build()
}

/// The key of the suites' session tokens.
pub fn session_secret() -> SessionSecret {
    SessionSecret::new(SECRET.as_bytes().to_vec())
}

/// The suites' settings: a server of [`NS`] whose sessions are signed with [`SECRET`], with
/// the restart flag and impersonation on; everything else at its default.
pub fn settings() -> Settings {
    let auth = AuthMode::Session {
        secret: session_secret(),
        max_age: Duration::from_secs(3600),
    };
    Settings {
        restart_enabled: true,
        impersonation: true,
        ..Settings::new(NS.parse().unwrap(), auth)
    }
}

pub struct Fixture {
    pub emulator: RunningEmulator,
    pub api: String,
    pub admin: String,
    pub audit_file: PathBuf,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl Fixture {
    pub async fn start(configure: impl FnOnce(&mut Settings)) -> Self {
        Self::start_with_audit(None, configure).await
    }

    /// With the audit file at `audit_file` (default: a fresh file in a temporary directory).
    pub async fn start_with_audit(
        audit_file: Option<PathBuf>,
        configure: impl FnOnce(&mut Settings),
    ) -> Self {
        Self::start_seeded(seed(), audit_file, configure).await
    }

    /// Over a cluster holding `objects`.
    pub async fn start_seeded(
        objects: Vec<Value>,
        audit_file: Option<PathBuf>,
        configure: impl FnOnce(&mut Settings),
    ) -> Self {
        let TestCluster {
            emu: emulator,
            connection,
            kubeconfig,
            dir,
        } = TestCluster::start(objects).await;
        let audit_file = audit_file.unwrap_or_else(|| dir.path().join("audit.log"));
        let mut settings = settings();
        settings.kubeconfig = Some(kubeconfig.clone());
        settings.audit_file = Some(audit_file.clone());
        configure(&mut settings);
        let audit = AuditSink::with_file(&audit_file)
            .unwrap()
            .on(Stream::Stderr);
        let state = Arc::new(AppState::new(settings, connection, audit, Metrics::new()));
        let bound = BoundServer::bind(state).await.unwrap();
        let api = bound.api_addr().unwrap().to_string();
        let admin = bound.admin_addr().unwrap().to_string();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(bound.run(async {
            let _ = stopped.await;
        }));
        emulator.clear_requests();
        Self {
            emulator,
            api,
            admin,
            audit_file,
            _dir: dir,
            stop: Some(stop),
            server: Some(server),
        }
    }

    pub fn audit_lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub async fn restart(&self, name: &str, token: &str) -> Response {
        restart(&self.api, NS, name, token).await
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

pub fn token(email: &str, groups: &[&str]) -> String {
    session::mint(
        &NewSession {
            sub: None,
            email: email.into(),
            name: None,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ttl: Duration::from_secs(600),
        },
        &session_secret(),
        session::now(),
    )
    .unwrap()
}

pub async fn restart(addr: &str, namespace: &str, name: &str, token: &str) -> Response {
    let request = format!(
        "POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers HTTP/1.1\r\n\
         Host: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    exchange(addr, request.as_bytes(), Duration::from_secs(60))
        .await
        .expect("the server answered")
}
