//! Load benchmark of the Restart Consumers API (not a test).
//!
//! Starts the emulator and the server in this process, seeds a namespace with 200 workloads of
//! which 20 consume the Secret, and runs `LOAD_CLIENTS` concurrent clients (default 8) issuing
//! restart requests for `LOAD_SECONDS` seconds (default 5), each client as its own user with
//! impersonation on. Reports throughput, p50/p99 latency and the process's peak memory, and
//! checks from the emulator's request log that no request ever had more than 4 patches in
//! flight. The baseline, measured in the same run with the same concurrency, is the engine
//! called directly (no HTTP, no gates); the ratio is the server's cost over it.
//!
//! Run: `cargo bench -p rollsafe-server --bench load`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rollsafe_client::{Client, Token};
use rollsafe_emulator::Emulator;
use rollsafe_kube::{Connection, MAX_PATCHES_IN_FLIGHT, RestartEngine};
use rollsafe_server::audit::AuditSink;
use rollsafe_server::config::{Admins, AuthMode, Scope, SessionSecret, Settings};
use rollsafe_server::metrics::Metrics;
use rollsafe_server::session::{self, NewSession};
use rollsafe_server::{AppState, BoundServer};
use serde_json::{Value, json};

const NS: &str = "load";
const SECRET: &str = "load-benchmark-session-secret-0123456789";
const WORKLOADS: usize = 200;
const CONSUMERS: usize = 20;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn seed() -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": NS}, "stringData": {"k": "v"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "load-admins"},
               "subjects": [{"kind": "Group", "name": "load", "apiGroup": "rbac.authorization.k8s.io"}],
               "roleRef": {"kind": "ClusterRole", "name": "cluster-admin", "apiGroup": "rbac.authorization.k8s.io"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "cluster-admin"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
    ];
    for i in 0..WORKLOADS {
        let kind = ["Deployment", "StatefulSet", "DaemonSet"][i % 3];
        let secret = if i % (WORKLOADS / CONSUMERS) == 0 {
            "db"
        } else {
            "other"
        };
        objects.push(json!({
            "apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": format!("w-{i:04}"), "namespace": NS},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": {"metadata": {"labels": {"app": "x"}},
                "spec": {"containers": [{"name": "c", "image": "x", "envFrom": [{"secretRef": {"name": secret}}]}]}}}
        }));
    }
    objects
}

fn peak_memory_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

struct Run {
    requests: usize,
    latencies: Vec<Duration>,
    statuses: BTreeMap<String, usize>,
    elapsed: Duration,
}

impl Run {
    fn throughput(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    fn print(&self, label: &str) {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        println!(
            "{label:>8}: {} requests in {:.2}s = {:.1} req/s; p50 {:.1} ms, p99 {:.1} ms; statuses {:?}",
            self.requests,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            percentile(&sorted, 0.50).as_secs_f64() * 1e3,
            percentile(&sorted, 0.99).as_secs_f64() * 1e3,
            self.statuses
        );
    }
}

fn main() {
    let clients = env_number("LOAD_CLIENTS", 8) as usize;
    let seconds = env_number("LOAD_SECONDS", 5);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let emulator = Emulator::builder().seed_objects(seed()).start("127.0.0.1:0".parse().unwrap()).await.expect("emulator");
        let dir = tempfile::tempdir().expect("tempdir");
        let kubeconfig = dir.path().join("kubeconfig");
        emulator.write_kubeconfig(&kubeconfig).expect("kubeconfig");
        let connection = Connection::from_kubeconfig(Some(&kubeconfig), None).await.expect("connection");
        let settings = Settings {
            listen: "127.0.0.1:0".parse().unwrap(),
            admin_listen: "127.0.0.1:0".parse().unwrap(),
            kubeconfig: Some(kubeconfig.clone()),
            context: None,
            audit_file: None,
            restart_enabled: true,
            scope: Scope::Namespace,
            server_namespace: NS.parse().unwrap(),
            admins: Admins { users: vec![], groups: vec!["load".into()] },
            access_configmap: "krypton-access".parse().unwrap(),
            annotation_prefix: "krypton.io".parse().unwrap(),
            impersonation: true,
            auth: AuthMode::Session { secret: SessionSecret::new(SECRET.as_bytes().to_vec()), max_age: Duration::from_secs(3600) },
            allowed_groups: Default::default(),
            max_concurrent_restarts: usize::MAX >> 4,
        };
        let state = Arc::new(AppState::new(settings, connection.clone(), AuditSink::stdout().on(rollsafe_server::audit::Stream::Stderr), Metrics::new()));
        let bound = BoundServer::bind(state).await.expect("bind");
        let url = format!("http://{}", bound.api_addr().expect("addr"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(bound.run(async { let _ = stopped.await; }));
        let duration = Duration::from_secs(seconds);

        // Baseline: the engine alone, same concurrency, same identities.
        let engine = RestartEngine::new(&connection);
        let baseline_call: Call = Arc::new(move |client| {
            let engine = engine.clone();
            Box::pin(async move {
                let Ok(identity) = rollsafe_kube::Impersonation::new(format!("user-{client}@load.io"), ["load"]) else {
                    return "invalid identity".to_owned();
                };
                let request = rollsafe_kube::RestartRequest::new(NS.parse().expect("namespace"), "db".parse().expect("name"))
                    .acting_as(Some(identity));
                engine.run(&request).await.status.as_str().to_owned()
            })
        });
        let baseline = drive(clients, duration, baseline_call).await;
        emulator.clear_requests();
        emulator.reset_in_flight();

        // The server, through HTTP and every gate.
        let http: Arc<Vec<Client>> = Arc::new(
            (0..clients)
                .map(|client| {
                    let token = session::mint(
                        &NewSession { sub: None, email: format!("user-{client}@load.io"), name: None, groups: vec!["load".into()], ttl: Duration::from_secs(3600) },
                        &SessionSecret::new(SECRET.as_bytes().to_vec()),
                        session::now(),
                    )
                    .expect("token");
                    Client::new(&url, Some(Token::new(token))).expect("client")
                })
                .collect(),
        );
        let server_call: Call = Arc::new(move |client| {
            let http = http.clone();
            Box::pin(async move {
                match http[client].restart_consumers(&NS.parse().expect("namespace"), &"db".parse().expect("name")).await {
                    Ok(report) => report.result.status.as_str().to_owned(),
                    Err(error) => format!("error: {error}"),
                }
            })
        });
        let server_run = drive(clients, duration, server_call).await;

        // Per-request patch concurrency, from the emulator's log: a client's requests are
        // sequential, so overlaps among one user's patches are overlaps within one request.
        let mut by_user: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
        for entry in emulator.requests().into_iter().filter(|e| e.verb.as_deref() == Some("patch")) {
            by_user.entry(entry.impersonated_user.clone().unwrap_or_default()).or_default().push((entry.start_micros, entry.end_micros));
        }
        let worst = by_user.values().map(|spans| max_overlap(spans)).max().unwrap_or(0);

        println!("Restart Consumers load: {clients} clients, {seconds}s each run, {WORKLOADS} workloads, {CONSUMERS} consumers per request");
        baseline.print("engine");
        server_run.print("server");
        println!("ratio server/engine throughput: {:.2}", server_run.throughput() / baseline.throughput());
        println!("peak process memory (emulator, server and clients): {} MiB", peak_memory_kib().unwrap_or(0) / 1024);
        println!("max patches in flight within one request: {worst} (limit {MAX_PATCHES_IN_FLIGHT})");
        assert!(worst <= MAX_PATCHES_IN_FLIGHT, "a request exceeded the in-flight limit");
        let _ = stop.send(());
        let _ = server.await;
        emulator.shutdown().await;
    });
}

fn max_overlap(spans: &[(u64, u64)]) -> usize {
    let mut events: Vec<(u64, i32)> = spans
        .iter()
        .flat_map(|(s, e)| [(*s, 1), (*e, -1)])
        .collect();
    // Ends before starts at the same instant.
    events.sort_by_key(|(t, d)| (*t, *d));
    let (mut current, mut peak) = (0i32, 0i32);
    for (_, delta) in events {
        current += delta;
        peak = peak.max(current);
    }
    peak as usize
}

/// One request of client `n`.
type Call = Arc<dyn Fn(usize) -> futures::future::BoxFuture<'static, String> + Send + Sync>;

/// Runs `clients` tasks, each issuing requests one after another until `duration` has passed.
async fn drive(clients: usize, duration: Duration, call: Call) -> Run {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|client| {
            let call = call.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
                while started.elapsed() < duration {
                    let t = Instant::now();
                    let status = call(client).await;
                    latencies.push(t.elapsed());
                    *statuses.entry(status).or_default() += 1;
                }
                (latencies, statuses)
            })
        })
        .collect();
    let mut run = Run {
        requests: 0,
        latencies: Vec::new(),
        statuses: BTreeMap::new(),
        elapsed: Duration::ZERO,
    };
    for task in tasks {
        if let Ok((latencies, statuses)) = task.await {
            run.requests += latencies.len();
            run.latencies.extend(latencies);
            for (k, v) in statuses {
                *run.statuses.entry(k).or_default() += v;
            }
        }
    }
    run.elapsed = started.elapsed();
    run
}
