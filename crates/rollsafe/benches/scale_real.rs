//! A controller that rolls workloads on Secret changes, measured against the real control plane
//! (kube-apiserver, etcd, the controller manager, the scheduler and kwok, v1.37.2, started by
//! `rollsafe_testing::control_plane::ControlPlane`) at several inventory sizes, each figure beside
//! a baseline measured in the same run. The emulator bench (`benches/scale.rs`) is unchanged.
//!
//! Run: `cargo bench -p rollsafe --bench scale_real` (the 10k size), or
//! `ROLLSAFE_SCALE_SIZES=10000:2000,50000:10000,100000:20000 cargo bench -p rollsafe --bench scale_real`.
//!
//! Each size gets a control plane of its own (started and stopped by this process). The
//! inventory: `secrets` Secrets in 100 namespaces — a fiftieth Helm-release sized (one 24 KiB
//! value), the rest three small keys — and `workloads` opted-in Deployments with
//! `replicas: 0` (kwok and the scheduler then have no pods to run; the Deployment controller
//! still writes each one's ReplicaSet and status), each consuming three Secrets (one key by
//! `secretKeyRef`, one whole by `envFrom`, one as a volume shared by five Deployments). It is
//! created through the API in parallel ([`IN_FLIGHT`] requests at once, well inside the API
//! server's default 200 mutating requests in flight).
//!
//! The controller under test is a [`Profile`]: the command that starts it against a kubeconfig,
//! how a workload opts in, how it reports ready, and its user agent (how its requests are told
//! apart in the API server's audit log). `ROLLSAFE_SCALE_PROFILE=rollsafe` (default) or
//! `reloader` (Stakater Reloader, `reloader.stakater.com/auto: "true"` on each workload; the
//! binary from `ROLLSAFE_SCALE_RELOADER_BIN`, see `tools/reloader/`). A roll is any change of a
//! Deployment's pod template, seen by this process's own watch, so both profiles are judged alike.
//!
//! Per size: the bare paged list (`limit=500`) and streaming list of the five kinds a controller
//! of this kind watches; cold start (spawn → ready) as a ratio to both; adoption (rollsafe's
//! record on every workload); the controller's `VmRSS`/`VmHWM` steady and at peak, per listed
//! object; its requests per minute by verb over a steady window and per change during the churn
//! (the API server's audit log filtered by user and user agent — `apiserver_request_total` has no
//! user-agent label — covering workloads, Secrets and ConfigMaps, not Leases or Events); the
//! watches it holds (`apiserver_longrunning_requests{verb="WATCH"}` with it against without
//! it); the API server's and etcd's `VmRSS` with it against without it; reaction to Secret
//! changes at [`RATE`]/s split by fan-out (1 and 5 consumers) p50/p99/max against the same
//! writes sent bare; correctness (every consumer rolled exactly once, nothing else rolled).
//!
//! Read-only, against your own cluster: `ROLLSAFE_SCALE_KUBECONFIG=~/.kube/config` (its current
//! context) runs only the baselines (a paged and a streaming list of the five kinds), the
//! controller's cold start against them and its memory after the steady window, with
//! `rollsafe watch --dry-run` (no patch); nothing is created or changed.
//!
//! Knobs: `ROLLSAFE_SCALE_CHANGES` (200), `ROLLSAFE_SCALE_STEADY_SECONDS` (60),
//! `ROLLSAFE_SCALE_LOG_DIR` (the controller's logs; a temporary folder otherwise).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark may unwrap"
)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead as _, Seek as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::ObjectList;
use kube::runtime::{WatchStreamExt as _, watcher};
use rollsafe_testing::control_plane::ControlPlane;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

const NAMESPACES: usize = 100;
/// Deployments sharing one volume Secret.
const GROUP: usize = 5;
/// Every this many changes, one is to a shared volume Secret (its [`GROUP`] consumers roll).
const SHARED_EVERY: usize = 7;
const HELM_VALUE_BYTES: usize = 24 * 1024;
const PAGE: u32 = 500;
/// Changes (and bare writes) per second.
const RATE: f64 = 10.0;
/// Create requests in flight while the inventory is loaded.
const IN_FLIGHT: usize = 24;
/// Who the bench's own requests impersonate, so the audit log tells them apart.
const BENCH_USER: &str = "scale-bench";
/// The identity every component of the control plane and the controller under test use.
const ADMIN_USER: &str = "rollsafe-admin";
const BASELINE_NS: &str = "scale-baseline";
const BASELINE_DEPLOYMENT: &str = "patch-target";
const READY_DEADLINE: Duration = Duration::from_secs(900);
const ADOPTION_DEADLINE: Duration = Duration::from_secs(1800);
const ROLL_DEADLINE: Duration = Duration::from_secs(300);

/// How a controller under test is started, opted into, and known to be ready.
struct Profile {
    name: &'static str,
    /// The annotation each workload carries to opt in.
    opt_in: (&'static str, &'static str),
    /// The annotation it writes on every opted-in workload before it is settled, if any.
    adoption: Option<&'static str>,
    /// The prefix of its requests' user agent; `None`: it sends none (kube-rs).
    user_agent: Option<&'static str>,
    /// Its readiness: a path on its admin address answering 200.
    ready_path: &'static str,
    /// Its admin address when it cannot be chosen (a free port otherwise).
    fixed_address: Option<&'static str>,
    /// The command, from a kubeconfig and an admin address.
    command: fn(&Path, SocketAddr) -> Command,
    /// What makes it write nothing, for the read-only run against your own cluster; `None`:
    /// it has no such mode.
    read_only: Option<&'static [&'static str]>,
}

fn rollsafe_command(kubeconfig: &Path, admin: SocketAddr) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command
        .args(["watch", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--admin-listen", &admin.to_string()])
        .args(["--debounce", "0", "--max-rolls-per-minute", "0"])
        .args(["--instance", "scale-bench"])
        .env("HOME", "/nonexistent");
    command
}

/// Reloader with its defaults: the env-vars strategy, no reload on create, every namespace,
/// `/metrics` on `:9090` (fixed in v1.4.22; it has no readiness endpoint outside `--enable-ha`,
/// so "ready" is its metrics answering, which precedes its informers' sync).
fn reloader_command(kubeconfig: &Path, _admin: SocketAddr) -> Command {
    let bin = std::env::var_os("ROLLSAFE_SCALE_RELOADER_BIN")
        .expect("ROLLSAFE_SCALE_RELOADER_BIN: Reloader's binary (tools/reloader/build.sh)");
    let mut command = Command::new(bin);
    command.env("KUBECONFIG", kubeconfig);
    command
}

const PROFILES: [Profile; 2] = [
    Profile {
        name: "rollsafe",
        opt_in: ("rollsafe.dev/watch", "true"),
        adoption: Some("rollsafe.dev/config-record"),
        user_agent: None,
        ready_path: "/readyz",
        fixed_address: None,
        command: rollsafe_command,
        read_only: Some(&["--dry-run"]),
    },
    Profile {
        name: "reloader",
        opt_in: ("reloader.stakater.com/auto", "true"),
        adoption: None,
        user_agent: Some("Reloader"),
        ready_path: "/metrics",
        fixed_address: Some("127.0.0.1:9090"),
        command: reloader_command,
        read_only: None,
    },
];

#[derive(Clone, Copy)]
struct Size {
    secrets: usize,
    workloads: usize,
}

impl Size {
    fn share(total: usize, n: usize) -> usize {
        total / NAMESPACES + usize::from(n < total % NAMESPACES)
    }
}

fn sizes() -> Vec<Size> {
    std::env::var("ROLLSAFE_SCALE_SIZES")
        .unwrap_or_else(|_| "10000:2000".to_owned())
        .split(',')
        .map(|pair| {
            let (s, w) = pair.split_once(':').expect("sizes are SECRETS:WORKLOADS");
            Size {
                secrets: s.trim().parse().unwrap(),
                workloads: w.trim().parse().unwrap(),
            }
        })
        .collect()
}

fn setting(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn namespace(n: usize) -> String {
    format!("scale-{n:03}")
}

fn app(j: usize) -> String {
    format!("app-{j:04}")
}

fn shared_secret(group: usize) -> String {
    format!("tls-{group:04}")
}

fn noise(seed: u64, len: usize) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

fn b64(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn small_secret(ns: &str, name: &str, seed: u64) -> Value {
    let password: String = noise(seed, 12).iter().map(|b| format!("{b:02x}")).collect();
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
    "metadata": {"name": name, "namespace": ns, "labels": {"app.kubernetes.io/part-of": "scale"}},
    "data": {
        "username": b64(format!("svc-{name}")),
        "password": b64(password),
        "url": b64(format!("postgres://db.{ns}.svc:5432/{name}")),
    }})
}

fn helm_secret(ns: &str, k: usize, seed: u64) -> Value {
    let release = app(k);
    json!({"apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{release}.v1"), "namespace": ns,
            "labels": {"name": release, "owner": "helm", "status": "deployed", "version": "1"}},
        "data": {"release": b64(noise(seed, HELM_VALUE_BYTES))}})
}

fn deployment(ns: &str, name: &str, opt_in: Option<(&str, &str)>) -> Value {
    let mut annotations = serde_json::Map::new();
    if let Some((key, value)) = opt_in {
        annotations.insert(key.to_owned(), json!(value));
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}}}})
}

fn consumer(ns: &str, j: usize, opt_in: (&str, &str)) -> Value {
    let name = app(j);
    let mut object = deployment(ns, &name, Some(opt_in));
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"][0]["env"] = json!([{"name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": format!("{name}-config"), "key": "password"}}}]);
    spec["containers"][0]["envFrom"] = json!([{"secretRef": {"name": format!("{name}-env")}}]);
    spec["containers"][0]["volumeMounts"] =
        json!([{"name": "tls", "mountPath": "/etc/tls", "readOnly": true}]);
    spec["volumes"] = json!([{"name": "tls", "secret": {"secretName": shared_secret(j / GROUP)}}]);
    object
}

/// Every object of the inventory, namespaces first, Secrets before the Deployments.
fn inventory(size: Size, profile: &Profile) -> (Vec<Value>, Vec<Value>, Vec<String>) {
    let mut namespaces = vec![json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": BASELINE_NS}})];
    let mut objects = Vec::new();
    let mut opted_in = Vec::new();
    let mut seed = 0u64;
    for n in 0..NAMESPACES {
        let ns = namespace(n);
        namespaces.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}));
        let secrets = Size::share(size.secrets, n);
        let helm = Size::share(size.secrets / 50, n);
        let workloads = Size::share(size.workloads, n);
        let groups = workloads.div_ceil(GROUP);
        let consumed = 2 * workloads + groups;
        assert!(
            helm + consumed <= secrets,
            "too few Secrets for the workloads"
        );
        for k in 0..helm {
            seed += 1;
            objects.push(helm_secret(&ns, k, seed));
        }
        for j in 0..workloads {
            for suffix in ["config", "env"] {
                seed += 1;
                objects.push(small_secret(&ns, &format!("{}-{suffix}", app(j)), seed));
            }
        }
        for g in 0..groups {
            seed += 1;
            objects.push(small_secret(&ns, &shared_secret(g), seed));
        }
        for m in 0..secrets - helm - consumed {
            seed += 1;
            objects.push(small_secret(&ns, &format!("misc-{m:04}"), seed));
        }
    }
    for n in 0..NAMESPACES {
        let ns = namespace(n);
        for j in 0..Size::share(size.workloads, n) {
            objects.push(consumer(&ns, j, profile.opt_in));
            opted_in.push(format!("{ns}/{}", app(j)));
        }
    }
    for name in std::iter::once(BASELINE_DEPLOYMENT.to_owned()).chain(fanned_targets()) {
        objects.push(deployment(BASELINE_NS, &name, None));
    }
    (namespaces, objects, opted_in)
}

fn fanned_targets() -> impl Iterator<Item = String> {
    (0..GROUP).map(|i| format!("{BASELINE_DEPLOYMENT}-{i}"))
}

async fn create(client: &kube::Client, object: Value) {
    let ns = object["metadata"]["namespace"].as_str().map(str::to_owned);
    let (path, plural) = match object["kind"].as_str().unwrap() {
        "Namespace" => ("/api/v1".to_owned(), "namespaces"),
        "Secret" => (format!("/api/v1/namespaces/{}", ns.unwrap()), "secrets"),
        _ => (
            format!("/apis/apps/v1/namespaces/{}", ns.unwrap()),
            "deployments",
        ),
    };
    let request = kube::core::Request::new(format!("{path}/{plural}"))
        .create(&PostParams::default(), serde_json::to_vec(&object).unwrap())
        .unwrap();
    for attempt in 0.. {
        match client.request_text(request.clone()).await {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 => return,
            Err(error) if attempt < 20 => {
                eprintln!("  (create retried: {error})");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(error) => panic!("create failed: {error}"),
        }
    }
}

/// Until every Deployment's controller observed its generation.
async fn deployments_at_rest(client: &kube::Client) {
    let api: Api<Deployment> = Api::all(client.clone());
    loop {
        let mut pending = 0;
        let mut params = ListParams::default().limit(PAGE);
        loop {
            let page = api.list(&params).await.unwrap();
            pending += page
                .items
                .iter()
                .filter(|d| {
                    d.status.as_ref().and_then(|s| s.observed_generation) != d.metadata.generation
                })
                .count();
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        if pending == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn list_all<K: serde::de::DeserializeOwned + Clone>(
    client: &kube::Client,
    path: &str,
) -> (usize, usize) {
    let (mut items, mut bytes) = (0, 0);
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let request = kube::core::Request::new(path).list(&params).unwrap();
        let text = client.request_text(request).await.unwrap();
        bytes += text.len();
        let page: ObjectList<K> = serde_json::from_str(&text).unwrap();
        items += page.items.len();
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return (items, bytes),
        }
    }
}

/// A streaming list (`sendInitialEvents=true`) of one kind, read to its initial-events-end
/// bookmark; its objects, or `None` where the server does not serve streaming lists.
async fn stream_all<K>(api: Api<K>) -> Option<usize>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let mut stream = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut items = 0;
    while let Some(event) = stream.next().await {
        match event.ok()? {
            watcher::Event::InitApply(_) => items += 1,
            watcher::Event::InitDone => return Some(items),
            _ => {}
        }
    }
    None
}

/// The bench's view of every Deployment: its pod template and when it changed.
#[derive(Default)]
struct Seen {
    template: String,
    adopted: bool,
    rolls: Vec<Instant>,
}

#[derive(Default)]
struct Tracker {
    seen: HashMap<String, Seen>,
    adopted: usize,
}

fn track(
    client: kube::Client,
    adoption: Option<&'static str>,
) -> (
    Arc<Mutex<Tracker>>,
    tokio::sync::watch::Receiver<bool>,
    tokio::task::JoinHandle<()>,
) {
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let (synced_tx, synced) = tokio::sync::watch::channel(false);
    let state = tracker.clone();
    let task = tokio::spawn(async move {
        let api: Api<Deployment> = Api::all(client);
        let mut stream = watcher(api, watcher::Config::default())
            .default_backoff()
            .boxed();
        while let Some(event) = stream.next().await {
            let at = Instant::now();
            match event {
                Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => {
                    let key = format!(
                        "{}/{}",
                        d.metadata.namespace.as_deref().unwrap_or(""),
                        d.metadata.name.as_deref().unwrap_or("")
                    );
                    let template = serde_json::to_string(
                        &d.spec
                            .as_ref()
                            .map(|s| s.template.clone())
                            .unwrap_or_default(),
                    )
                    .unwrap();
                    let adopted = adoption.is_some_and(|a| {
                        d.metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|m| m.contains_key(a))
                    });
                    let mut t = state.lock().unwrap();
                    let first = !t.seen.contains_key(&key);
                    let seen = t.seen.entry(key).or_default();
                    if !first && seen.template != template {
                        seen.rolls.push(at);
                    }
                    seen.template = template;
                    let newly = adopted && !seen.adopted;
                    seen.adopted = adopted;
                    if newly {
                        t.adopted += 1;
                    }
                }
                Ok(watcher::Event::InitDone) => {
                    synced_tx.send_replace(true);
                }
                Ok(_) => {}
                Err(error) => eprintln!("  (bench watch error: {error})"),
            }
        }
    });
    (tracker, synced, task)
}

struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn check_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "the controller exited ({status}); its log ends:\n{}",
                tail.join("\n")
            );
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// (`VmRSS`, `VmHWM`) of `pid` in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| {
                l.trim_start_matches(name)
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .unwrap_or(0)
            * 1024
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The pid of this control plane's `component` (its command line names the plane's folder).
fn component_pid(folder: &str, component: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            (args.first()?.ends_with(&format!("/{component}"))
                && args.iter().any(|a| a.contains(folder)))
            .then_some(pid)
        })
}

fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

async fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    String::from_utf8_lossy(&response)
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// The API server's watches held (`apiserver_longrunning_requests{verb="WATCH"}`, summed).
async fn watches_held(client: &kube::Client) -> f64 {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("apiserver_longrunning_requests{") && l.contains("verb=\"WATCH\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Reads the audit log from a byte offset: the controller's requests by verb (its user, not
/// impersonated, with its user agent) and the new offset.
fn controller_requests(audit: &Path, from: u64, profile: &Profile) -> (BTreeMap<String, u64>, u64) {
    let mut file = std::fs::File::open(audit).unwrap();
    file.seek(std::io::SeekFrom::Start(from)).unwrap();
    let mut reader = std::io::BufReader::new(file);
    let mut counts = BTreeMap::new();
    let mut offset = from;
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).unwrap();
        if n == 0 || !line.ends_with('\n') {
            break;
        }
        offset += n as u64;
        let Ok(event) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if event["user"]["username"].as_str() != Some(ADMIN_USER)
            || !event["impersonatedUser"].is_null()
        {
            continue;
        }
        let agent = event["userAgent"].as_str();
        let ours = match profile.user_agent {
            None => agent.is_none(),
            Some(prefix) => agent.is_some_and(|a| a.starts_with(prefix)),
        };
        if ours {
            let verb = event["verb"].as_str().unwrap_or("?").to_owned();
            *counts.entry(verb).or_default() += 1;
        }
    }
    (counts, offset)
}

fn audit_end(audit: &Path) -> u64 {
    std::fs::metadata(audit).map(|m| m.len()).unwrap_or(0)
}

fn describe(counts: &BTreeMap<String, f64>) -> String {
    if counts.values().all(|v| *v < 0.05) {
        return "none".to_owned();
    }
    counts
        .iter()
        .filter(|(_, v)| **v >= 0.05)
        .map(|(verb, v)| format!("{verb} {v:.1}"))
        .collect::<Vec<_>>()
        .join(", ")
}

struct Change {
    namespace: String,
    secret: String,
    key: &'static str,
    consumers: Vec<String>,
}

fn plan(size: Size, changes: usize) -> Vec<Change> {
    (0..changes)
        .map(|c| {
            let n = c % NAMESPACES;
            let group = c / NAMESPACES;
            let workloads = Size::share(size.workloads, n);
            assert!(group < workloads.div_ceil(GROUP), "too many changes");
            let ns = namespace(n);
            let members: Vec<usize> =
                (group * GROUP..((group + 1) * GROUP).min(workloads)).collect();
            let (secret, key, consumers) = if c % SHARED_EVERY == SHARED_EVERY - 1 {
                (shared_secret(group), "url", members)
            } else if c % 2 == 0 {
                (
                    format!("{}-config", app(members[0])),
                    "password",
                    vec![members[0]],
                )
            } else {
                (
                    format!("{}-env", app(members[0])),
                    "username",
                    vec![members[0]],
                )
            };
            Change {
                consumers: consumers
                    .iter()
                    .map(|&j| format!("{ns}/{}", app(j)))
                    .collect(),
                namespace: ns,
                secret,
                key,
            }
        })
        .collect()
}

fn ticks() -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / RATE));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    ticks
}

async fn churn(client: kube::Client, changes: Vec<(String, String, &'static str)>) -> Vec<Instant> {
    let mut ticks = ticks();
    let mut sent = Vec::new();
    for (index, (ns, secret, key)) in changes.into_iter().enumerate() {
        ticks.tick().await;
        let api: Api<Secret> = Api::namespaced(client.clone(), &ns);
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "replace", "path": format!("/data/{key}"), "value": b64(format!("rotated-{index}"))}
        ]))
        .unwrap();
        sent.push(tokio::spawn(async move {
            api.patch(&secret, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
                .unwrap();
            Instant::now()
        }));
    }
    futures::future::join_all(sent)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect()
}

async fn bare_patch(api: Api<Deployment>, name: String, index: usize) -> Duration {
    let patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/metadata/annotations/bench", "value": format!("{index}")}
    ]))
    .unwrap();
    let started = Instant::now();
    api.patch(&name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .unwrap();
    started.elapsed()
}

async fn bare_patches(
    client: kube::Client,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (Vec<Duration>, Vec<Duration>) {
    let api: Api<Deployment> = Api::namespaced(client, BASELINE_NS);
    let mut ticks = ticks();
    let (mut sent, mut fanned) = (Vec::new(), Vec::new());
    for index in 1.. {
        tokio::select! {
            _ = ticks.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        sent.push(tokio::spawn(bare_patch(
            api.clone(),
            BASELINE_DEPLOYMENT.to_owned(),
            index,
        )));
        if index % SHARED_EVERY == 0 {
            let api = api.clone();
            fanned.push(tokio::spawn(async move {
                let started = Instant::now();
                let all = fanned_targets().map(|name| bare_patch(api.clone(), name, index));
                futures::future::join_all(all).await;
                started.elapsed()
            }));
        }
    }
    let answered = |tasks: Vec<tokio::task::JoinHandle<Duration>>| async {
        futures::future::join_all(tasks)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect::<Vec<_>>()
    };
    (answered(sent).await, answered(fanned).await)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `p50 / p99 / max` of `samples` and their ratios to `baseline`'s.
fn reaction(samples: &[Duration], baseline: &[Duration]) -> (String, String) {
    let ps = [0.5, 0.99, 1.0];
    let s: Vec<Duration> = ps.iter().map(|p| percentile(samples, *p)).collect();
    let b: Vec<Duration> = ps.iter().map(|p| percentile(baseline, *p)).collect();
    (
        format!(
            "{:.0} / {:.0} / {:.0} ms (bare {:.0} / {:.0} / {:.0})",
            ms(s[0]),
            ms(s[1]),
            ms(s[2]),
            ms(b[0]),
            ms(b[1]),
            ms(b[2])
        ),
        format!(
            "{:.1}× / {:.1}× / {:.1}×",
            s[0].as_secs_f64() / b[0].as_secs_f64(),
            s[1].as_secs_f64() / b[1].as_secs_f64(),
            s[2].as_secs_f64() / b[2].as_secs_f64()
        ),
    )
}

/// A paged list and a streaming list of the five kinds, one kind after another: (paged time,
/// streaming time, objects, JSON bytes of the pages).
async fn baselines(client: &kube::Client) -> (Duration, Option<Duration>, usize, usize) {
    let client = client.clone();
    let started = Instant::now();
    let kinds = [
        list_all::<Secret>(&client, "/api/v1/secrets").await,
        list_all::<ConfigMap>(&client, "/api/v1/configmaps").await,
        list_all::<Deployment>(&client, "/apis/apps/v1/deployments").await,
        list_all::<StatefulSet>(&client, "/apis/apps/v1/statefulsets").await,
        list_all::<DaemonSet>(&client, "/apis/apps/v1/daemonsets").await,
    ];
    let paged = started.elapsed();
    let listed: usize = kinds.iter().map(|k| k.0).sum();
    let listed_bytes: usize = kinds.iter().map(|k| k.1).sum();
    let started = Instant::now();
    let streamed = async {
        Some(
            stream_all(Api::<Secret>::all(client.clone())).await?
                + stream_all(Api::<ConfigMap>::all(client.clone())).await?
                + stream_all(Api::<Deployment>::all(client.clone())).await?
                + stream_all(Api::<StatefulSet>::all(client.clone())).await?
                + stream_all(Api::<DaemonSet>::all(client.clone())).await?,
        )
    }
    .await;
    let streaming = streamed.map(|_| started.elapsed());
    (paged, streaming, listed, listed_bytes)
}

/// `a` against `b` as `0.00×`.
fn ratio(a: Duration, b: Duration) -> String {
    format!("{:.2}×", a.as_secs_f64() / b.as_secs_f64())
}

/// The streaming list's time, or that it is not served.
fn streaming_text(streaming: Option<Duration>) -> String {
    streaming.map_or_else(
        || "not served".to_owned(),
        |d| format!("{:.2} s", d.as_secs_f64()),
    )
}

/// Spawns the controller and waits for its readiness: (process, pid, cold start).
async fn start_controller(
    profile: &Profile,
    kubeconfig: &Path,
    log: PathBuf,
    extra: &[&str],
) -> (Process, u32, Duration, SocketAddr) {
    let address = profile
        .fixed_address
        .map_or_else(free_port, |a| a.parse().unwrap());
    let mut command = (profile.command)(kubeconfig, address);
    command
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let started = Instant::now();
    let mut process = Process {
        child: command.spawn().unwrap(),
        log,
    };
    let pid = process.child.id();
    loop {
        if http_status(address, profile.ready_path).await == Some(200) {
            break;
        }
        process.check_alive();
        assert!(started.elapsed() < READY_DEADLINE, "never ready");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (process, pid, started.elapsed(), address)
}

/// The read-only run against a cluster of your own: baselines, cold start, memory; no writes.
async fn read_only(kubeconfig: &Path, profile: &Profile, logs: &Path) {
    let extra = profile
        .read_only
        .unwrap_or_else(|| panic!("{} has no mode that writes nothing", profile.name));
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(config).unwrap();
    let (paged, streaming, listed, listed_bytes) = baselines(&client).await;
    let log = logs.join(format!("{}-read-only.log", profile.name));
    let (mut process, pid, cold, _) = start_controller(profile, kubeconfig, log, extra).await;
    let (_, hwm_ready) = memory(pid);
    tokio::time::sleep(Duration::from_secs(setting(
        "ROLLSAFE_SCALE_STEADY_SECONDS",
        60,
    )))
    .await;
    process.check_alive();
    let (rss, hwm) = memory(pid);
    println!(
        "{} read-only: {listed} objects, {:.1} MB of JSON; cold start {:.2} s against {:.2} s paged / {} streaming ({} / {}); VmRSS steady {:.1} MiB ({} B/object), VmHWM {:.1} MiB ({:.1} at ready)",
        profile.name,
        listed_bytes as f64 / 1e6,
        cold.as_secs_f64(),
        paged.as_secs_f64(),
        streaming_text(streaming),
        ratio(cold, paged),
        streaming.map_or_else(|| "—".to_owned(), |s| ratio(cold, s)),
        mib(rss),
        rss / listed.max(1) as u64,
        mib(hwm),
        mib(hwm_ready)
    );
}

/// One size's figures, as rows of (figure, value).
type Column = Vec<(String, String)>;

#[expect(clippy::too_many_lines, reason = "one run's phases in order")]
async fn run(size: Size, profile: &Profile, logs: &Path) -> Column {
    let whole = Instant::now();
    let mut column: Column = Vec::new();
    let mut row = |figure: &str, value: String| {
        println!("  {figure}: {value}");
        column.push((figure.to_owned(), value));
    };
    let mut plane = ControlPlane::build_and_start().await.unwrap();
    let info = plane.info().clone();
    let folder = info
        .kubeconfig
        .parent()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&info.kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let admin = kube::Client::try_from(config.clone()).unwrap();
    config.auth_info.impersonate = Some(BENCH_USER.to_owned());
    config.auth_info.impersonate_groups = Some(vec!["system:masters".to_owned()]);
    config.read_timeout = Some(Duration::from_secs(600));
    let client = kube::Client::try_from(config).unwrap();
    let apiserver = component_pid(&folder, "kube-apiserver").unwrap();
    let etcd = component_pid(&folder, "etcd").unwrap();

    // The inventory, in parallel.
    let started = Instant::now();
    let (namespaces, objects, opted_in) = inventory(size, profile);
    let count = objects.len() + namespaces.len();
    for ns in namespaces {
        create(&client, ns).await;
    }
    futures::stream::iter(objects)
        .for_each_concurrent(IN_FLIGHT, |o| {
            let client = client.clone();
            async move { create(&client, o).await }
        })
        .await;
    let loaded = started.elapsed();
    deployments_at_rest(&client).await;
    row(
        "inventory created",
        format!(
            "{count} objects in {:.0} s ({:.0}/s), at rest after {:.0} s",
            loaded.as_secs_f64(),
            count as f64 / loaded.as_secs_f64(),
            started.elapsed().as_secs_f64()
        ),
    );

    let (paged, streaming, listed, listed_bytes) = baselines(&client).await;

    let (tracker, mut synced, watch) = track(client.clone(), profile.adoption);
    synced.wait_for(|s| *s).await.unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    let watches_without = watches_held(&admin).await;
    let (api_rss_without, _) = memory(apiserver);
    let (etcd_rss_without, _) = memory(etcd);

    // Cold start.
    let log = logs.join(format!("{}-{}.log", profile.name, size.secrets));
    let (mut process, pid, cold, _) = start_controller(profile, &info.kubeconfig, log, &[]).await;
    let started = Instant::now() - cold;
    let (_, hwm_ready) = memory(pid);
    row(
        "cold start → ready / paged list / streaming list",
        format!(
            "{:.2} s / {:.2} s / {}: {} / {} ({listed} objects, {:.1} MB JSON)",
            cold.as_secs_f64(),
            paged.as_secs_f64(),
            streaming_text(streaming),
            ratio(cold, paged),
            streaming.map_or_else(|| "—".to_owned(), |s| ratio(cold, s)),
            listed_bytes as f64 / 1e6
        ),
    );

    // Adoption, where the controller writes one.
    if profile.adoption.is_some() {
        loop {
            let adopted = tracker.lock().unwrap().adopted;
            if adopted >= opted_in.len() {
                break;
            }
            process.check_alive();
            assert!(started.elapsed() < ADOPTION_DEADLINE, "{adopted} adopted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        row(
            "adoption (every workload recorded)",
            format!("{:.1} s after start", started.elapsed().as_secs_f64()),
        );
        // The Deployment controller writes status after each record; let it finish.
        deployments_at_rest(&client).await;
    }

    // Steady: a window where nothing changes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let window = Duration::from_secs(setting("ROLLSAFE_SCALE_STEADY_SECONDS", 60));
    let from = audit_end(&info.audit);
    tokio::time::sleep(window).await;
    process.check_alive();
    let (steady_counts, _) = controller_requests(&info.audit, from, profile);
    let per_minute: BTreeMap<String, f64> = steady_counts
        .iter()
        .map(|(v, n)| (v.clone(), *n as f64 * 60.0 / window.as_secs_f64()))
        .collect();
    let (rss_steady, hwm_steady) = memory(pid);
    let watches_with = watches_held(&admin).await;
    let (api_rss_with, _) = memory(apiserver);
    let (etcd_rss_with, _) = memory(etcd);
    row(
        "controller VmRSS steady / VmHWM peak (at ready)",
        format!(
            "{:.1} / {:.1} MiB ({:.1}); {} B/object",
            mib(rss_steady),
            mib(hwm_steady),
            mib(hwm_ready),
            rss_steady / listed as u64
        ),
    );
    row("requests/min at steady state", describe(&per_minute));
    row(
        "watches held (with / without)",
        format!(
            "{:.0} ({:+.0}) / {:.0}",
            watches_with,
            watches_with - watches_without,
            watches_without
        ),
    );
    row(
        "apiserver / etcd VmRSS with / without",
        format!(
            "{:.0} / {:.0} MiB; {:.0} / {:.0} MiB",
            mib(api_rss_with),
            mib(api_rss_without),
            mib(etcd_rss_with),
            mib(etcd_rss_without)
        ),
    );

    // Reaction under churn, beside bare writes at the same rate.
    let plan = plan(size, setting("ROLLSAFE_SCALE_CHANGES", 200) as usize);
    let affected: HashSet<&str> = plan
        .iter()
        .flat_map(|c| c.consumers.iter().map(String::as_str))
        .collect();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let bare = tokio::spawn(bare_patches(client.clone(), stop));
    let from = audit_end(&info.audit);
    let churn_started = Instant::now();
    let acks = churn(
        client.clone(),
        plan.iter()
            .map(|c| (c.namespace.clone(), c.secret.clone(), c.key))
            .collect(),
    )
    .await;
    stop_tx.send_replace(true);
    let (round_trips, fanned_trips) = bare.await.unwrap();
    let until = Instant::now() + ROLL_DEADLINE;
    loop {
        let missing = {
            let t = tracker.lock().unwrap();
            affected
                .iter()
                .filter(|k| t.seen.get(**k).is_none_or(|s| s.rolls.is_empty()))
                .count()
        };
        if missing == 0 {
            break;
        }
        process.check_alive();
        assert!(Instant::now() < until, "{missing} consumers never rolled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Late or repeated rolls have time to show.
    tokio::time::sleep(Duration::from_secs(10)).await;
    let churn_window = churn_started.elapsed();
    let (churn_counts, _) = controller_requests(&info.audit, from, profile);
    let (rss_end, hwm_end) = memory(pid);
    let per_change: BTreeMap<String, f64> = churn_counts
        .iter()
        .map(|(verb, n)| {
            let steady =
                per_minute.get(verb).copied().unwrap_or(0.0) / 60.0 * churn_window.as_secs_f64();
            (
                verb.clone(),
                (*n as f64 - steady).max(0.0) / plan.len() as f64,
            )
        })
        .collect();
    let (mut single, mut shared) = (Vec::new(), Vec::new());
    {
        let t = tracker.lock().unwrap();
        for (change, ack) in plan.iter().zip(&acks) {
            for consumer in &change.consumers {
                let rolled = t.seen[consumer].rolls[0].saturating_duration_since(*ack);
                if change.consumers.len() == 1 {
                    single.push(rolled);
                } else {
                    shared.push(rolled);
                }
            }
        }
    }
    let (value, ratio) = reaction(&single, &round_trips);
    row(
        "reaction, 1 consumer: p50 / p99 / max",
        format!("{value}: {ratio}"),
    );
    let (value, ratio) = reaction(&shared, &fanned_trips);
    row(
        "reaction, 5 consumers: p50 / p99 / max",
        format!("{value}: {ratio}"),
    );
    row(
        "requests per change (above steady)",
        format!(
            "{} ({} changes at {RATE}/s)",
            describe(&per_change),
            plan.len()
        ),
    );
    row(
        "controller VmRSS / VmHWM after churn",
        format!("{:.1} / {:.1} MiB", mib(rss_end), mib(hwm_end)),
    );

    // Correctness.
    let (mut once, mut repeated, mut others) = (0, 0, 0);
    {
        let t = tracker.lock().unwrap();
        for (key, seen) in &t.seen {
            if key.starts_with(BASELINE_NS) {
                continue;
            }
            match (affected.contains(key.as_str()), seen.rolls.len()) {
                (true, 1) => once += 1,
                (true, _) => repeated += 1,
                (false, 0) => {}
                (false, _) => others += 1,
            }
        }
    }
    let correct = once == affected.len() && repeated == 0 && others == 0;
    row(
        "correctness",
        format!(
            "{once}/{} rolled once, {repeated} more than once, {others} others rolled: {}",
            affected.len(),
            if correct { "ok" } else { "FAILED" }
        ),
    );
    drop(process);
    watch.abort();
    plane.stop();
    row(
        "this size's run",
        format!("{:.0} s", whole.elapsed().as_secs_f64()),
    );
    column
}

fn main() {
    let profile_name =
        std::env::var("ROLLSAFE_SCALE_PROFILE").unwrap_or_else(|_| "rollsafe".into());
    let profile = PROFILES
        .iter()
        .find(|p| p.name == profile_name)
        .expect("ROLLSAFE_SCALE_PROFILE is rollsafe or reloader");
    let temp = tempfile::tempdir().unwrap();
    let logs = std::env::var_os("ROLLSAFE_SCALE_LOG_DIR")
        .map_or_else(|| temp.path().to_owned(), PathBuf::from);
    std::fs::create_dir_all(&logs).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    if let Some(kubeconfig) = std::env::var_os("ROLLSAFE_SCALE_KUBECONFIG") {
        runtime.block_on(read_only(Path::new(&kubeconfig), profile, &logs));
        return;
    }
    let started = Instant::now();
    let sizes = sizes();
    let mut columns = Vec::new();
    for size in &sizes {
        println!(
            "{}: {} Secrets, {} opted-in Deployments",
            profile.name, size.secrets, size.workloads
        );
        columns.push(runtime.block_on(run(*size, profile, &logs)));
    }
    println!();
    println!(
        "{} against the real control plane (v1.37.2), {:.0} s in all",
        profile.name,
        started.elapsed().as_secs_f64()
    );
    let header: Vec<String> = sizes
        .iter()
        .map(|s| format!("{} Secrets / {} workloads", s.secrets, s.workloads))
        .collect();
    println!("| figure | {} |", header.join(" | "));
    println!("|---|{}", "---|".repeat(sizes.len()));
    for (i, (figure, _)) in columns[0].iter().enumerate() {
        let values: Vec<&str> = columns.iter().map(|c| c[i].1.as_str()).collect();
        println!("| {figure} | {} |", values.join(" | "));
    }
    let failed = columns
        .iter()
        .any(|c| c.iter().any(|(_, v)| v.ends_with("FAILED")));
    assert!(
        !failed,
        "a size did not roll exactly the affected consumers once"
    );
}
