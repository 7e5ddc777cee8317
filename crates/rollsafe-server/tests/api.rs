//! The Restart Consumers API against the emulator: gate order, ACL, scope, visibility,
//! impersonation, audit, caching headers and the sanitized 500.

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

#[tokio::test]
async fn allowed_request_restarts_consumers() {
    let f = Fixture::start(|_| {}).await;
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["status"], "requested");
    assert_eq!(
        body["requested"],
        json!([{"kind": "Deployment", "name": "api"}, {"kind": "StatefulSet", "name": "worker"}])
    );
    assert!(body.get("error").is_none());
    let rolled: Vec<_> = f.emulator.rollouts().into_iter().map(|r| r.name).collect();
    assert_eq!(rolled, ["api", "worker"]);
    assert!(
        f.emulator.requests_for("get", "configmaps").is_empty(),
        "an admin's decision needs no access rules"
    );
    let audit = f.audit_lines();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["result"], "allow");
    assert_eq!(audit[0]["status"], "requested");
    assert_eq!(audit[0]["user"], "root@x.io");
    f.stop().await;
}

#[tokio::test]
async fn gate_order_reaches_no_later_gate() {
    let f = Fixture::start(|_| {}).await;
    // 1. Authentication, before the restart flag and path validation.
    let (status, headers, body) = f.restart("Bad_NS", "db", None).await;
    assert_eq!(
        (status.as_u16(), body.clone()),
        (401, json!({"error": "Authentication required"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    let (status, _, _) = f.restart(NS, "db", Some("not-a-token")).await;
    assert_eq!(status, 401);
    let (status, _, _) = f
        .request(
            Method::POST,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &[("cookie", &format!("krypton_session={}", admin()))],
        )
        .await;
    assert_eq!(status, 200, "the cookie authenticates too");
    f.emulator.clear_requests();
    // 3. Path validation: no Kubernetes call at all.
    let long = "a".repeat(254);
    for (ns, name) in [
        ("Bad_NS", "db"),
        (NS, "a%2Fb"),
        (NS, "A"),
        (NS, long.as_str()),
        ("a%2Fb", "db"),
        (&"n".repeat(64), "db"),
    ] {
        let (status, headers, body) = f.restart(ns, name, Some(&admin())).await;
        assert_eq!(
            (status.as_u16(), body),
            (400, json!({"error": "Invalid namespace or Secret name"})),
            "{ns}/{name}"
        );
        assert_eq!(headers["cache-control"], "no-store");
    }
    assert!(
        f.emulator.requests().is_empty(),
        "path validation makes no Kubernetes call"
    );
    // 4. Namespace scope: no Secret read.
    let (status, _, body) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Namespace \"team-b\" is not accessible"})
        )
    );
    assert_eq!(f.secret_reads(), 0);
    // 5. Live visibility: missing and history answer alike; no workload list.
    let (missing_status, _, missing) = f.restart(NS, "nope", Some(&admin())).await;
    let (history_status, _, history) = f.restart(NS, "db-v1", Some(&admin())).await;
    assert_eq!(
        (missing_status.as_u16(), missing),
        (404, json!({"error": "Secret \"nope\" not found"}))
    );
    assert_eq!(
        (history_status.as_u16(), history),
        (404, json!({"error": "Secret \"db-v1\" not found"}))
    );
    // 6. ACL: denied and audited.
    let (status, _, body) = f
        .restart(NS, "locked", Some(&token("dave@x.io", &["developers"])))
        .await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "You are not allowed to modify this secret"})
        )
    );
    assert_eq!(
        f.workload_requests(),
        0,
        "no gate failure lists or patches workloads"
    );
    assert!(
        f.emulator.rollouts().len() == 2,
        "only the cookie request rolled"
    );
    let audit = f.audit_lines();
    let results: Vec<_> = audit
        .iter()
        .map(|l| l["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        results,
        ["allow", "deny", "deny"],
        "namespace and ACL refusals are audited as deny"
    );
    assert!(audit[2].get("status").is_none());
    f.stop().await;
}

#[tokio::test]
async fn restart_flag_comes_after_authentication() {
    let f = Fixture::start(|s| s.restart_enabled = false).await;
    let (status, _, _) = f.restart(NS, "db", None).await;
    assert_eq!(status, 401);
    let (status, headers, body) = f.restart("Bad_NS", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Restarting apps is disabled on this deployment"})
        )
    );
    assert_eq!(headers["cache-control"], "no-store");
    assert!(f.emulator.requests().is_empty());
    f.stop().await;
}

#[tokio::test]
async fn acl_branches() {
    let access = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "krypton-access", "namespace": NS},
        "data": {"access.json": "{\"team-a\": {\"groups\": [\"devs-a\"], \"users\": [\"erin@x.io\"]}}"}});
    let mut objects = seed();
    objects.push(access);
    let f = Fixture::start_with(objects, |_| {}).await;
    let cases = [
        ("admin by user", token("ROOT@X.IO", &[]), "db", 200),
        (
            "admin by group",
            token("u@x.io", &["admins"]),
            "locked",
            200,
        ),
        (
            "annotation group",
            token("u@x.io", &["platform"]),
            "locked",
            200,
        ),
        ("annotation user", token("carol@x.io", &[]), "locked", 200),
        (
            "annotations alone decide",
            token("erin@x.io", &["devs-a"]),
            "locked",
            403,
        ),
        (
            "namespace rule group",
            token("u@x.io", &["devs-a"]),
            "db",
            200,
        ),
        ("namespace rule user", token("erin@x.io", &[]), "db", 200),
        (
            "namespace rule refuses",
            token("u@x.io", &["devs-b"]),
            "db",
            403,
        ),
    ];
    for (case, token, secret, expected) in cases {
        let (status, _, body) = f.restart(NS, secret, Some(&token)).await;
        assert_eq!(status.as_u16(), expected, "{case}: {body}");
    }
    // The access ConfigMap is read once (cached 60 s), as the server itself.
    let reads: Vec<_> = f
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.is("get", "configmaps"))
        .collect();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].impersonated_user, None);
    f.stop().await;
}

#[tokio::test]
async fn malformed_access_rules_fail_closed_and_missing_ones_are_open() {
    let mut objects = seed();
    objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "krypton-access", "namespace": NS},
        "data": {"access.json": "{\"team-a\": [\"devs\"]}"}}));
    let f = Fixture::start_with(objects, |_| {}).await;
    let (status, _, _) = f.restart(NS, "db", Some(&token("u@x.io", &["devs"]))).await;
    assert_eq!(status, 403);
    let (status, _, _) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "admins still pass");
    f.stop().await;

    let f = Fixture::start(|_| {}).await;
    let (status, _, _) = f.restart(NS, "db", Some(&token("u@x.io", &[]))).await;
    assert_eq!(status, 200, "no ConfigMap, no annotations: open");
    f.stop().await;
}

#[tokio::test]
async fn cluster_scope() {
    let f = Fixture::start(|s| s.scope = Scope::Cluster { allow_list: vec![] }).await;
    let (status, _, body) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = f.restart("team-z", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Namespace \"team-z\" is not accessible"})
        )
    );
    f.stop().await;

    let f = Fixture::start(|s| {
        s.scope = Scope::Cluster {
            allow_list: vec![NS.parse().unwrap()],
        }
    })
    .await;
    let (status, _, _) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(status, 403, "outside the allow-list");
    let (status, _, _) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200);
    f.stop().await;
}

#[tokio::test]
async fn impersonation_on_every_call() {
    let mut objects = seed();
    for i in 0..130 {
        objects.push(workload(
            "Deployment",
            &format!("extra-{i:03}"),
            if i % 10 == 0 { "db" } else { "other" },
        ));
    }
    let f = Fixture::start_with(objects, |s| s.impersonation = true).await;
    let caller = token("Dev@X.io", &["developers", "admins", "developers"]);
    let (status, _, body) = f.restart(NS, "db", Some(&caller)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matched"], 2 + 13);
    let requests = f.emulator.requests();
    let deployment_pages = requests
        .iter()
        .filter(|r| r.is("list", "deployments"))
        .count();
    assert_eq!(deployment_pages, 2, "more than one page of Deployments");
    let mut caller_calls = 0;
    for request in &requests {
        if request.is("get", "configmaps") {
            assert_eq!(
                request.impersonated_user, None,
                "the access ConfigMap is read as the server"
            );
            continue;
        }
        caller_calls += 1;
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("dev@x.io"),
            "{request:?}"
        );
        assert_eq!(
            request.impersonated_groups,
            ["developers", "admins", "developers"],
            "{request:?}"
        );
    }
    assert_eq!(
        caller_calls,
        1 + 2 + 1 + 1 + 15,
        "secret read, list pages and patches"
    );
    f.stop().await;
}

#[tokio::test]
async fn kubernetes_denial_of_the_secret_read() {
    let f = Fixture::start(|s| s.impersonation = true).await;
    let (status, _, body) = f
        .restart(NS, "db", Some(&token("mallory@x.io", &["nobody"])))
        .await;
    assert_eq!(status, 403);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("Access denied."),
        "{body}"
    );
    assert_eq!(f.workload_requests(), 0);
    f.stop().await;
}

#[tokio::test]
async fn sanitized_500_carries_a_request_id() {
    let f = Fixture::start(|_| {}).await;
    f.emulator
        .add_fault(Fault::on("get", "secrets").namespace(NS).name("db").then(
            FaultAction::Status {
                code: 500,
                reason: None,
                message: Some("etcd cluster is unavailable: upstream-detail-xyz".into()),
                retry_after_seconds: None,
                plain_text: false,
            },
        ));
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 500);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["error"], "Internal server error");
    let request_id = body["requestId"].as_str().unwrap();
    assert_eq!(request_id.len(), 36);
    assert!(!body.to_string().contains("upstream-detail-xyz"));
    assert_eq!(f.workload_requests(), 0);
    let audit = f.audit_lines();
    assert_eq!(audit[0]["result"], "error");
    assert_eq!(audit[0]["requestId"], request_id);
    f.stop().await;
}

#[tokio::test]
async fn failed_result_is_503_with_error_and_partial_is_207() {
    let f = Fixture::start(|_| {}).await;
    f.emulator.add_fault(
        Fault::on("list", "daemonsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(503)),
    );
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .always()
            .then(FaultAction::status(409)),
    );
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 503);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"], body["message"]);
    assert_eq!(
        body["discoveryFailures"],
        json!([{"kind": "DaemonSet", "code": "unavailable",
        "message": "Kubernetes was unavailable while listing this kind, so its inventory is unknown and nothing of this kind was patched. Retry later.", "httpStatus": 503}])
    );
    f.emulator.clear_faults();
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 207, "{body}");
    assert_eq!(body["status"], "partial");
    assert!(body.get("error").is_none());
    let audit = f.audit_lines();
    assert_eq!(audit[0]["result"], "error");
    assert_eq!(audit[1]["result"], "error");
    assert_eq!(
        audit[1]["failures"],
        json!([{"kind": "StatefulSet", "name": "worker", "code": "forbidden", "httpStatus": 403}])
    );
    f.stop().await;
}

#[tokio::test]
async fn other_routes_and_metrics() {
    let f = Fixture::start(|_| {}).await;
    let (status, headers, body) = f.request(Method::GET, "/api/config", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(
        body,
        json!({"restartEnabled": true, "scope": "namespace", "authMode": "session", "impersonation": false})
    );
    assert!(!body.to_string().contains(SECRET));
    let (status, headers, _) = f.request(Method::GET, "/readyz", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    let (status, headers, _) = f.request(Method::GET, "/healthz", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    let (status, headers, body) = f.request(Method::GET, "/nope", &[]).await;
    assert_eq!(
        (status.as_u16(), body),
        (404, json!({"error": "Not found"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    let (status, headers, body) = f
        .request(
            Method::GET,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &[],
        )
        .await;
    assert_eq!(
        (status.as_u16(), body),
        (405, json!({"error": "Method not allowed"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    f.restart(NS, "db", Some(&admin())).await;
    let response = f
        .http
        .request(
            Request::get(format!("{}/metrics", f.admin_url))
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.contains(r#"rollsafe_http_requests_total{route="restart",status="200"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rollsafe_restart_results_total{status="requested"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rollsafe_restart_patches_total{code="acknowledged"} 2"#),
        "{text}"
    );
    // Error responses by their static code; latencies of the run, its inventories and patches.
    for expected in [
        r#"rollsafe_http_errors_total{code="not_found"} 1"#,
        r#"rollsafe_http_errors_total{code="method_not_allowed"} 1"#,
        "rollsafe_restart_run_duration_seconds_count 1",
        r#"rollsafe_restart_inventory_duration_seconds_count{kind="DaemonSet"} 1"#,
        r#"rollsafe_restart_patch_duration_seconds_count{kind="Deployment"} 1"#,
        "rollsafe_restart_patch_timeouts_total 0",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    f.stop().await;
}

fn ns() -> rollsafe_core::name::Namespace {
    NS.parse().unwrap()
}

#[tokio::test]
async fn typed_client_reports_and_errors() {
    use rollsafe_client::{Client, ClientError, Token};
    let f = Fixture::start(|_| {}).await;
    let client = Client::new(&f.url, Some(Token::new(admin()))).unwrap();
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let report = client
        .restart_consumers(&ns(), &"db".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (report.http_status, report.result.status.as_str()),
        (207, "partial")
    );
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .always()
            .then(FaultAction::status(409)),
    );
    let report = client
        .restart_consumers(&ns(), &"db".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (report.http_status, report.result.status.as_str()),
        (503, "failed")
    );
    assert_eq!(
        report.result.error.as_deref(),
        Some(report.result.message.as_str())
    );
    for (client, namespace, name, expected) in [
        (Client::new(&f.url, None).unwrap(), NS, "db", 401),
        (
            Client::new(&f.url, Some(Token::new(token("dave@x.io", &[])))).unwrap(),
            NS,
            "locked",
            403,
        ),
        (client.clone(), NS, "missing", 404),
    ] {
        let (namespace, name) = (namespace.parse().unwrap(), name.parse().unwrap());
        match client.restart_consumers(&namespace, &name).await {
            Err(ClientError::Api(error)) => {
                assert_eq!(error.status, expected, "{name}: {error}");
                assert_eq!(error.is_authentication_required(), expected == 401);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // A name that is not a Secret name cannot even be put into a request.
    assert!("a/b".parse::<rollsafe_core::name::SecretName>().is_err());
    f.stop().await;
}

#[tokio::test]
async fn shutdown_lets_an_in_flight_restart_finish() {
    let f = Fixture::start(|_| {}).await;
    let call = f.slow_restart_in_flight().await;
    let emulator_rollouts = f.emulator.handle();
    f.stop().await;
    let status = call.await.unwrap().unwrap();
    assert_eq!(
        status, 200,
        "the in-flight restart completed during shutdown"
    );
    assert_eq!(emulator_rollouts.rollouts().len(), 2);
}

#[tokio::test]
async fn audit_file_and_logs_hold_no_secret_token_uid_or_upstream_text() {
    let f = Fixture::start(|s| s.impersonation = true).await;
    let upstream = "upstream-detail-do-not-echo";
    let status = |code| FaultAction::Status {
        code,
        reason: None,
        message: Some(upstream.into()),
        retry_after_seconds: None,
        plain_text: false,
    };
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .nth(1)
            .then(status(403)),
    );
    f.emulator.add_fault(
        Fault::on("list", "daemonsets")
            .namespace(NS)
            .nth(2)
            .then(status(500)),
    );
    f.emulator.add_fault(
        Fault::on("get", "secrets")
            .namespace(NS)
            .name("db")
            .nth(3)
            .then(status(502)),
    );
    let tokens = [
        admin(),
        token("dave@x.io", &["developers"]),
        token("carol@x.io", &["developers"]),
    ];
    for token in &tokens {
        for name in ["db", "locked", "db-v1", "missing"] {
            f.restart(NS, name, Some(token)).await;
        }
    }
    let logs = String::from_utf8_lossy(&captured_logs().lock().unwrap()).into_owned();
    assert!(logs.contains("restart allowed"), "logs are captured");
    let audit = std::fs::read_to_string(&f.audit_file).unwrap();
    let results: std::collections::BTreeSet<_> = f
        .audit_lines()
        .iter()
        .map(|l| l["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        results,
        ["allow", "deny", "error"].map(String::from).into(),
        "{audit}"
    );
    let mut forbidden: Vec<String> = vec![SECRET_VALUE.into(), SECRET.into(), upstream.into()];
    forbidden.extend(tokens.iter().cloned());
    for resource in ["deployments", "statefulsets", "daemonsets", "secrets"] {
        for object in f.emulator.list_objects(resource, Some(NS)) {
            forbidden.push(object["metadata"]["uid"].as_str().unwrap().to_owned());
            forbidden.push(format!(
                "\"{}\"",
                object["metadata"]["resourceVersion"].as_str().unwrap()
            ));
        }
    }
    for needle in &forbidden {
        assert!(
            !audit.contains(needle.as_str()),
            "the audit file holds {needle}"
        );
        assert!(!logs.contains(needle.as_str()), "the logs hold {needle}");
    }
    f.stop().await;
}

#[tokio::test]
async fn request_size_limits() {
    let f = Fixture::start(|_| {}).await;
    let big_header = "x".repeat(40 * 1024);
    let (status, _, _) = f
        .request(Method::GET, "/healthz", &[("x-padding", &big_header)])
        .await;
    assert_eq!(status, 431, "request heads over 32 KiB are refused");
    let request = Request::post(format!(
        "{}/api/namespaces/{NS}/secrets/db/restart-consumers",
        f.url
    ))
    .header("authorization", format!("Bearer {}", admin()))
    .body(Full::new(Bytes::from(vec![b'{'; 20 * 1024])))
    .unwrap();
    let response = f.http.request(request).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert!(f.emulator.requests().is_empty(), "refused before any gate");
    f.stop().await;
}

#[tokio::test]
async fn a_client_hanging_up_does_not_cancel_the_restart() {
    let f = Fixture::start(|_| {}).await;
    let call = f.slow_restart_in_flight().await;
    call.abort();
    let _ = call.await;
    // The run completes on its own: both workloads patched, and its audit line written.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while f.audit_lines().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was cancelled with its client"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.audit_lines()[0]["status"], "requested");
    assert_eq!(f.emulator.rollouts().len(), 2);
    f.stop().await;
}
