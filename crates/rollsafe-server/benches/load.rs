//! Load benchmark of the Restart Consumers API (not a test).
//!
//! Starts the emulator and the servers in this process and runs `LOAD_CLIENTS` concurrent
//! clients (default 8) issuing restart requests for `LOAD_SECONDS` seconds (default 2) per run,
//! `LOAD_ROUNDS` times (default 3, the runs interleaved), each client as its own user with
//! impersonation on, in two variants:
//!
//! - **racing**: 200 workloads, 20 of which consume `db`; every client restarts `db`, so most
//!   patches lose the optimistic-concurrency race (422) — a conflict benchmark as much as a
//!   throughput one;
//! - **disjoint**: 200 workloads, 20 per client consuming that client's own Secret; no patch
//!   races another, so every request is a full run of 20 acknowledged patches.
//!
//! In each variant, four runs with the same concurrency and identities: the engine alone (the
//! baseline), the engine plus the Secret read the gates make (what the server cannot avoid), the
//! server with its audit records only copied to a discarded stream, and the server with an
//! fsync'd audit file (the production setting: an intent record before the first patch, a result
//! record before the response). Each prints throughput, p50/p99 and the ratios to the engine,
//! so the difference can be attributed: Kubernetes read, HTTP and gates, durable audit. The
//! emulator's request log checks that no request ever had more than 4 patches in flight.
//!
//! Each run also prints the process's CPU time per request (emulator, servers and clients
//! together), which tells a cost in CPU from one in waiting. `LOAD_VARIANT=racing|disjoint`
//! and `LOAD_RUN=<part of a label>` narrow it to what is being profiled; `LOAD_EACH=1` prints
//! every round. Rounds rotate the order of the runs.
//!
//! The emulator runs on its own two-thread runtime, as the API server is its own process in a
//! cluster: its handlers hold the store's lock while they work, and on a shared runtime a worker
//! blocked on that lock was a worker the engine, the server and the clients could not use, so
//! the runs that do more of their own work (the server's) paid for the emulator's waits too.
//!
//! The process uses mimalloc: with glibc's allocator, the emulator (10⁵ objects and their
//! history, eight client threads) slowed down run after run — the engine's own throughput fell
//! from 296 to 151 req/s over eight 3 s runs, most of the time in `malloc_consolidate` and
//! `unlink_chunk` — so later runs were not measured on the same ground as earlier ones.
//!
//! Run: `cargo bench -p rollsafe-server --bench load`

#![allow(clippy::unwrap_used, clippy::expect_used)]

/// See the module documentation: the same allocator for every run, one that does not degrade.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rollsafe_client::{Client, Token};
use rollsafe_kube::{Connection, MAX_PATCHES_IN_FLIGHT, RestartEngine};
use rollsafe_server::acl::Admins;
use rollsafe_server::audit::AuditSink;
use rollsafe_server::metrics::Metrics;
use rollsafe_server::output::LossyLines;
use rollsafe_server::session::{self, AuthMode, NewSession, SessionSecret};
use rollsafe_server::{AppState, BoundServer, Settings};
use rollsafe_testing::TestCluster;
use serde_json::{Value, json};

const NS: &str = "load";
const NS_DISJOINT: &str = "load-disjoint";
const SECRET: &str = "load-benchmark-session-secret-0123456789";
const WORKLOADS: usize = 200;
const CONSUMERS: usize = 20;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A workload in `namespace` consuming `secret`.
fn workload(kind: &str, namespace: &str, name: &str, secret: &str) -> Value {
    rollsafe_testing::Workload::of_kind(kind, name)
        .namespace(namespace)
        .consuming_secret_via_env_from(secret)
        .build()
}

/// [`NS`]: `WORKLOADS` workloads, `CONSUMERS` of them consume `db`. [`NS_DISJOINT`]: for each
/// client `n`, `CONSUMERS` workloads consume `db-n`; the rest (up to `WORKLOADS`) consume
/// nothing of ours — every request lists as many objects as in [`NS`].
fn seed(clients: usize) -> Vec<Value> {
    let mut objects = vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS_DISJOINT}}),
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
        objects.push(workload(kind, NS, &format!("w-{i:04}"), secret));
    }
    for client in 0..clients {
        objects.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": format!("db-{client}"), "namespace": NS_DISJOINT}, "stringData": {"k": "v"}}));
    }
    for i in 0..WORKLOADS.max(clients * CONSUMERS) {
        let kind = ["Deployment", "StatefulSet", "DaemonSet"][i % 3];
        let secret = if i < clients * CONSUMERS {
            format!("db-{}", i % clients)
        } else {
            "other".to_owned()
        };
        objects.push(workload(kind, NS_DISJOINT, &format!("w-{i:04}"), &secret));
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

#[derive(Default)]
struct Run {
    requests: usize,
    latencies: Vec<Duration>,
    statuses: BTreeMap<String, usize>,
    elapsed: Duration,
    /// Process CPU time (user and system, every thread: emulator, server and clients) spent
    /// while the run's clients were sending.
    cpu: Duration,
}

impl Run {
    fn throughput(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64()
    }

    /// Adds another run's requests, latencies, statuses and time.
    fn add(&mut self, other: Run) {
        self.requests += other.requests;
        self.latencies.extend(other.latencies);
        for (status, count) in other.statuses {
            *self.statuses.entry(status).or_default() += count;
        }
        self.elapsed += other.elapsed;
        self.cpu += other.cpu;
    }

    fn p99(&self) -> Duration {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        percentile(&sorted, 0.99)
    }

    fn print(&self, label: &str) {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        println!(
            "{label:>30}: {} requests in {:.2}s = {:.1} req/s; p50 {:.1} ms, p99 {:.1} ms; CPU {:.2} ms per request ({:.0} % of 1 core); statuses {:?}",
            self.requests,
            self.elapsed.as_secs_f64(),
            self.throughput(),
            percentile(&sorted, 0.50).as_secs_f64() * 1e3,
            percentile(&sorted, 0.99).as_secs_f64() * 1e3,
            self.cpu.as_secs_f64() * 1e3 / self.requests.max(1) as f64,
            self.cpu.as_secs_f64() * 100.0 / self.elapsed.as_secs_f64(),
            self.statuses
        );
    }
}

/// One restart workload: a namespace, and which Secret each client restarts.
#[derive(Clone, Copy)]
enum Variant {
    /// Every client restarts `db` in [`NS`]: the same 20 workloads, so most patches lose the
    /// race (422) and the throughput measures conflicts as much as work.
    Racing,
    /// Client `n` restarts `db-n` in [`NS_DISJOINT`], whose consumers no other client touches.
    Disjoint,
}

impl Variant {
    fn namespace(self) -> &'static str {
        match self {
            Variant::Racing => NS,
            Variant::Disjoint => NS_DISJOINT,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Variant::Racing => "racing",
            Variant::Disjoint => "disjoint",
        }
    }

    fn secret(self, client: usize) -> String {
        match self {
            Variant::Racing => "db".to_owned(),
            Variant::Disjoint => format!("db-{client}"),
        }
    }
}

/// A server over `connection` for `namespace`, its audit records durable in `audit_file` when
/// given (the production setting) or only copied to a discarded stream.
async fn start_server(
    connection: &Connection,
    kubeconfig: &std::path::Path,
    namespace: &str,
    audit_file: Option<&std::path::Path>,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let auth = AuthMode::Session {
        secret: SessionSecret::new(SECRET.as_bytes().to_vec()),
        max_age: Duration::from_secs(3600),
    };
    let settings = Settings {
        kubeconfig: Some(kubeconfig.to_owned()),
        audit_file: audit_file.map(std::path::Path::to_owned),
        restart_enabled: true,
        admins: Admins {
            users: vec![],
            groups: vec!["load".into()],
        },
        impersonation: true,
        ..Settings::new(namespace.parse().unwrap(), auth)
    };
    // The stream copy goes nowhere: the benchmark measures the server, not a terminal.
    let copy = LossyLines::spawn("bench-audit-copy", 8192, std::io::sink()).ok();
    let audit = match audit_file {
        Some(path) => AuditSink::with_file_and_copy(path, copy).expect("audit file"),
        None => AuditSink::copy_only(copy),
    };
    let state = Arc::new(AppState::new(
        settings,
        connection.clone(),
        audit,
        Metrics::new(),
    ));
    let bound = BoundServer::bind(state).await.expect("bind");
    let url = format!("http://{}", bound.api_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(bound.run(async {
        let _ = stopped.await;
    }));
    (url, stop, server)
}

fn identity(client: usize) -> rollsafe_kube::Impersonation {
    rollsafe_kube::Impersonation::new(format!("user-{client}@load.io"), ["load"]).expect("identity")
}

/// The engine alone, as each client's identity.
fn engine_call(connection: &Connection, variant: Variant) -> Call {
    let engine = RestartEngine::new(connection);
    Arc::new(move |client| {
        let engine = engine.clone();
        Box::pin(async move {
            let request = rollsafe_kube::RestartRequest::new(
                variant.namespace().parse().expect("namespace"),
                variant.secret(client).parse().expect("name"),
            )
            .acting_as(Some(identity(client)));
            engine.run(&request).await.status.as_str().to_owned()
        })
    })
}

/// The engine plus the one Kubernetes call the gates make in this configuration (the Secret
/// read as the caller; admins skip the access rules, namespace scope lists nothing): what the
/// server cannot avoid doing beyond the engine.
fn engine_and_read_call(connection: &Connection, variant: Variant) -> Call {
    let engine = RestartEngine::new(connection);
    let connection = connection.clone();
    Arc::new(move |client| {
        let engine = engine.clone();
        let connection = connection.clone();
        Box::pin(async move {
            let identity = identity(client);
            let namespace = variant.namespace().parse().expect("namespace");
            let secret = variant.secret(client).parse().expect("name");
            let reader = connection.client(Some(&identity));
            if rollsafe_kube::read_secret_metadata(
                &reader,
                &namespace,
                &secret,
                engine.timeouts().get,
            )
            .await
            .is_err()
            {
                return "read failed".to_owned();
            }
            let request =
                rollsafe_kube::RestartRequest::new(namespace, secret).acting_as(Some(identity));
            engine.run(&request).await.status.as_str().to_owned()
        })
    })
}

/// Through HTTP and every gate, each client as its own user.
fn server_call(url: &str, clients: usize, variant: Variant) -> Call {
    let http: Arc<Vec<Client>> = Arc::new(
        (0..clients)
            .map(|client| {
                let token = session::mint(
                    &NewSession {
                        sub: None,
                        email: format!("user-{client}@load.io"),
                        name: None,
                        groups: vec!["load".into()],
                        ttl: Duration::from_secs(3600),
                    },
                    &SessionSecret::new(SECRET.as_bytes().to_vec()),
                    session::now(),
                )
                .expect("token");
                Client::new(url, Some(Token::new(token))).expect("client")
            })
            .collect(),
    );
    Arc::new(move |client| {
        let http = http.clone();
        Box::pin(async move {
            match http[client]
                .restart_consumers(
                    &variant.namespace().parse().expect("namespace"),
                    &variant.secret(client).parse().expect("name"),
                )
                .await
            {
                Ok(report) => report.result.status.as_str().to_owned(),
                Err(error) => format!("error: {error}"),
            }
        })
    })
}

fn main() {
    let clients = env_number("LOAD_CLIENTS", 8) as usize;
    let seconds = env_number("LOAD_SECONDS", 2);
    let rounds = env_number("LOAD_ROUNDS", 3);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The emulator's own runtime (see the module documentation).
    let api_server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("api-server")
        .enable_all()
        .build()
        .expect("runtime");
    let api_server_handle = api_server.handle().clone();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let duration = Duration::from_secs(seconds);
        println!(
            "Restart Consumers load: {clients} clients, {rounds} rounds of {seconds}s per run, {WORKLOADS} workloads per namespace, {CONSUMERS} consumers per request"
        );
        let mut worst = 0;
        // `LOAD_VARIANT` and `LOAD_RUN` narrow the benchmark to one variant and the runs whose
        // label contains it, to profile one of them (`perf record`); ratios need the engine run.
        let only_variant = std::env::var("LOAD_VARIANT").ok();
        let only_run = std::env::var("LOAD_RUN").ok();
        // `LOAD_EACH=1` prints every round's run as well as the totals.
        let each_round = env_number("LOAD_EACH", 0) == 1;
        for variant in [Variant::Racing, Variant::Disjoint] {
            if only_variant.as_deref().is_some_and(|v| v != variant.label()) {
                continue;
            }
            // A fresh emulator per variant, so one variant's history is not the other's
            // ground. It is as light as before it simulated the controllers' history: this
            // benchmark measures the server against the engine, not the emulator.
            let TestCluster { emu: emulator, connection, kubeconfig, dir: _cluster_dir } =
                TestCluster::start_on(
                    &api_server_handle,
                    rollsafe_emulator::Emulator::builder()
                        .seed_objects(seed(clients))
                        .without_rollout_history(),
                )
                .await;
            let waits_before = DurableWaits::now();
            let namespace = variant.namespace();
            let audit_file = dir.path().join(format!("audit-{namespace}.log"));
            let (durable_url, durable_stop, durable_server) = start_server(&connection, &kubeconfig, namespace, Some(&audit_file)).await;
            let (copy_url, copy_stop, copy_server) = start_server(&connection, &kubeconfig, namespace, None).await;
            let runs: Vec<(&str, Call)> = [
                ("engine", engine_call(&connection, variant)),
                ("engine+read", engine_and_read_call(&connection, variant)),
                ("server (no audit file)", server_call(&copy_url, clients, variant)),
                ("server (fsync'd audit file)", server_call(&durable_url, clients, variant)),
            ]
            .into_iter()
            .filter(|(label, _)| only_run.as_deref().is_none_or(|only| label.contains(only)))
            .collect();
            println!("{}:", match variant {
                Variant::Racing => "racing — every client restarts the same Secret's 20 workloads",
                Variant::Disjoint => "disjoint — each client restarts its own Secret's 20 workloads",
            });
            // Rounds interleave the four runs, so drift in the machine's load (other processes,
            // the emulator's growing history) falls on all of them alike.
            let mut totals: Vec<Run> = runs.iter().map(|_| Run::default()).collect();
            for round in 0..rounds as usize {
                // Each round starts one run later, so no run always follows the same one.
                for step in 0..runs.len() {
                    let index = (round + step) % runs.len();
                    let (label, call) = &runs[index];
                    let total = &mut totals[index];
                    emulator.clear_requests();
                    emulator.clear_rollouts();
                    let run = drive(clients, duration, call.clone()).await;
                    // Per-request patch concurrency, from the emulator's log: a client's requests
                    // are sequential, so overlaps among one user's patches are within one request.
                    let mut by_user: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
                    for entry in emulator.requests().into_iter().filter(|e| e.verb.as_deref() == Some("patch")) {
                        by_user.entry(entry.impersonated_user.clone().unwrap_or_default()).or_default().push((entry.start_micros, entry.end_micros));
                    }
                    worst = worst.max(by_user.values().map(|spans| max_overlap(spans)).max().unwrap_or(0));
                    if each_round {
                        run.print(label);
                    }
                    total.add(run);
                }
            }
            let base = totals.first().map_or((f64::NAN, f64::NAN), |first| {
                (first.throughput(), first.p99().as_secs_f64())
            });
            for ((label, _), total) in runs.iter().zip(&totals) {
                total.print(label);
                println!(
                    "{:>30}  throughput ×{:.2} of the engine, p99 ×{:.2}",
                    "",
                    total.throughput() / base.0,
                    total.p99().as_secs_f64() / base.1
                );
            }
            let records = std::fs::read_to_string(&audit_file).map(|t| t.lines().count()).unwrap_or(0);
            println!("{:>30}  {records} records in the audit file", "");
            let audit = DurableWaits::now().since(&waits_before);
            println!(
                "{:>30}  durable wait per record under load: {:.2} ms on average, of which write + fdatasync {:.2} ms ({} records in {} batches)",
                "",
                audit.waited * 1000.0 / audit.records.max(1.0),
                audit.syncing * 1000.0 / audit.batches.max(1.0),
                audit.records,
                audit.batches,
            );
            for (stop, server) in [(durable_stop, durable_server), (copy_stop, copy_server)] {
                let _ = stop.send(());
                let _ = server.await;
            }
            emulator.shutdown().await;
        }
        audit_alone(clients, dir.path()).await;
        println!("peak process memory (emulator, servers and clients): {} MiB", peak_memory_kib().unwrap_or(0) / 1024);
        println!("max patches in flight within one request: {worst} (limit {MAX_PATCHES_IN_FLIGHT})");
        assert!(worst <= MAX_PATCHES_IN_FLIGHT, "a request exceeded the in-flight limit");
    });
}

/// The durable audit so far, from the server's own `rollsafe_audit_durable_wait_seconds` and
/// `rollsafe_audit_sync_seconds` histograms, which every server in the process shares.
struct DurableWaits {
    /// Seconds records waited to be on disk, in total.
    waited: f64,
    /// Records that waited.
    records: f64,
    /// Seconds the writer spent in write + fdatasync, in total.
    syncing: f64,
    /// Batches written.
    batches: f64,
}

impl DurableWaits {
    fn now() -> Self {
        let text = Metrics::new().encode();
        let value = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        Self {
            waited: value("rollsafe_audit_durable_wait_seconds_sum"),
            records: value("rollsafe_audit_durable_wait_seconds_count"),
            syncing: value("rollsafe_audit_sync_seconds_sum"),
            batches: value("rollsafe_audit_sync_seconds_count"),
        }
    }

    /// What happened after `before`.
    fn since(&self, before: &Self) -> Self {
        Self {
            waited: self.waited - before.waited,
            records: self.records - before.records,
            syncing: self.syncing - before.syncing,
            batches: self.batches - before.batches,
        }
    }
}

/// The durable audit alone: `clients` writers each waiting for its record to be synced, as a
/// restart run waits twice (intent, result). Prints the wait per record and the records per
/// second the one writer thread sustains.
async fn audit_alone(clients: usize, dir: &std::path::Path) {
    const RECORDS: usize = 200;
    let copy = LossyLines::spawn("bench-audit-alone", 8192, std::io::sink()).ok();
    let sink =
        AuditSink::with_file_and_copy(&dir.join("audit-alone.log"), copy).expect("audit file");
    let started = Instant::now();
    let writers: Vec<_> = (0..clients)
        .map(|client| {
            let sink = sink.clone();
            tokio::spawn(async move {
                let mut waits = Vec::with_capacity(RECORDS);
                for i in 0..RECORDS {
                    let record = json!({"stage": "intent", "requestId": format!("{client}-{i}"), "planned": [{"kind": "Deployment", "name": "w-0001"}]});
                    let t = Instant::now();
                    sink.write(&record).await.expect("durable");
                    waits.push(t.elapsed());
                }
                waits
            })
        })
        .collect();
    let mut waits = Vec::new();
    for writer in writers {
        waits.extend(writer.await.expect("writer"));
    }
    let elapsed = started.elapsed();
    waits.sort();
    println!(
        "audit file alone: {clients} writers × {RECORDS} records = {:.0} records/s; wait per record p50 {:.2} ms, p99 {:.2} ms",
        waits.len() as f64 / elapsed.as_secs_f64(),
        percentile(&waits, 0.50).as_secs_f64() * 1e3,
        percentile(&waits, 0.99).as_secs_f64() * 1e3
    );
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
/// This process's CPU time so far (user and system, all threads), from `/proc/self/stat`
/// (zero where it cannot be read).
fn process_cpu() -> Duration {
    const TICKS_PER_SECOND: f64 = 100.0; // USER_HZ on Linux
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return Duration::ZERO;
    };
    // Fields after the parenthesised command name: state is field 3, utime 14 and stime 15.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    Duration::from_secs_f64(ticks as f64 / TICKS_PER_SECOND)
}

async fn drive(clients: usize, duration: Duration, call: Call) -> Run {
    let cpu_before = process_cpu();
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
        cpu: Duration::ZERO,
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
    run.cpu = process_cpu().saturating_sub(cpu_before);
    run
}
