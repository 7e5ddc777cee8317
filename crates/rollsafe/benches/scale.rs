//! `rollsafe watch` at cluster scale, the whole process measured from outside: the release
//! binary runs as a separate process against the emulator (in this process), and every figure
//! stands beside a baseline measured in the same run.
//!
//! Run: `cargo bench -p rollsafe --bench scale`.
//!
//! The inventory (defaults: issue 26's): 100,000 Secrets in 100 namespaces — 2,000 of them
//! Helm-release sized (type `helm.sh/release.v1`, one 24 KiB value), the rest three small keys —
//! and 20,000 opted-in Deployments (`rollsafe.dev/watch: "true"`), each consuming three Secrets:
//! one key by `secretKeyRef`, one whole by `envFrom`, one as a volume (a volume Secret is shared
//! by [`GROUP`] Deployments, as a certificate would be). It is loaded in-process
//! (`Handle::put_object`, the API's own write path, cheaper than the admin API's `List` bodies
//! under its 3 MiB body cap), without the simulated ReplicaSets and Pods (the controller watches
//! neither).
//!
//! Figures, in order:
//!
//! 1. Baseline: a bare kube client's paged list (`limit=500`, decoded into typed objects as
//!    `Api::list` does) of the five kinds the controller watches — Secrets, ConfigMaps,
//!    Deployments, StatefulSets, DaemonSets; its time, objects and JSON bytes.
//! 2. Cold start: `rollsafe watch` spawned (kubeconfig to the emulator, `--debounce 0`, no roll
//!    rate limit) → its `/readyz` answers 200; ratio against the baseline.
//! 3. Adoption: until every opted-in Deployment carries `rollsafe.dev/config-record`, seen by a
//!    watch on Deployments from this process.
//! 4. Steady: until the controller has watched every kind again since the last record (the
//!    request log, where the bench's own requests carry another user), `/readyz` is 200 and its
//!    queue (`/metrics`) is empty; the controller's lists from the start between ready and
//!    steady are printed (relists: a watch that could not resume), and those during the churn.
//!    Memory: `VmRSS` and `VmHWM` of the process (`/proc/<pid>/status`) at ready, when steady,
//!    and after the churn; per listed object.
//! 5. Reaction under churn: consumed Secrets changed at 30 per second (JSON Patch, one key each),
//!    300 changes reaching 384 consumers, each sent on its tick whether or not the previous one
//!    was answered; per (change, consumer), from the change acknowledged to
//!    the consumer's pod-template `rollsafe.dev/config-hash` seen changed by the watch:
//!    p50/p99/max, beside a bare JSON Patch round trip to the same server (an annotation on a
//!    Deployment nobody watches) measured meanwhile at the same rate.
//! 6. Correctness: every affected consumer rolled exactly once, nothing else rolled or
//!    re-recorded (the watch's history, the final objects against the records after adoption,
//!    and the controller's own counters).
//!
//! A reduced run: `ROLLSAFE_SCALE_SECRETS=10000 ROLLSAFE_SCALE_WORKLOADS=2000`. Other knobs:
//! `ROLLSAFE_SCALE_NAMESPACES` (100), `ROLLSAFE_SCALE_HELM` (a fiftieth of the Secrets),
//! `ROLLSAFE_SCALE_CHANGES` (300), `ROLLSAFE_SCALE_RATE` (changes per second, 30),
//! `ROLLSAFE_SCALE_DEBOUNCE` (`0`), `ROLLSAFE_SCALE_ADOPTIONS` (the controller's
//! `--max-adoptions-per-second`; its default when unset), `ROLLSAFE_SCALE_WATCH_LIST`
//! (`true`: the emulator serves streaming lists, as Kubernetes 1.34 does, and the controller
//! starts each watch with one; default `false`, 1.33's default, so paged lists), `ROLLSAFE_SCALE_WRAP` (a command the
//! binary runs under, for a profiling run: `heaptrack -o /tmp/watch`; the memory figures are
//! then the wrapper's); `RUST_LOG` reaches the controller (default `info`). Its log
//! goes to a temporary file, or to `ROLLSAFE_SCALE_LOG`; its warnings are counted in the table,
//! and its tail is printed if it dies.

#![expect(clippy::unwrap_used, reason = "a benchmark may unwrap")]

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::core::ObjectList;
use kube::runtime::{WatchStreamExt as _, watcher};
use rollsafe_emulator::{ADMIN_USER, Emulator, MASTERS_GROUP};
use rollsafe_testing::{TestCluster, Workload};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Deployments sharing one volume Secret.
const GROUP: usize = 5;
/// Every this many changes, one is to a shared volume Secret (its [`GROUP`] consumers roll);
/// the others change a Secret with one consumer. 300 changes reach 384 consumers.
const SHARED_EVERY: usize = 14;
/// The Helm-release value, decoded.
const HELM_VALUE_BYTES: usize = 24 * 1024;
/// The baseline list's page size, kube's watcher's too.
const PAGE: u32 = 500;
const RECORD: &str = "rollsafe.dev/config-record";
const HASH: &str = "rollsafe.dev/config-hash";
/// The namespace of the Deployment the bare patches go to; nothing in it is opted in.
const BASELINE_NS: &str = "scale-baseline";
const BASELINE_DEPLOYMENT: &str = "patch-target";

/// How often the emulator sends bookmarks. Its watch history is one window of 10,000 events
/// across every resource, and by default it bookmarks once a minute — as often as kube's
/// watcher's watches time out, so a bookmark seldom arrives before the end. A Secret watch that
/// saw no Secret event during the 20,000 adoption patches would then resume from a
/// resourceVersion out of that window and relist every Secret, however promptly it was read
/// (kube-apiserver keeps a window per resource and bookmarks before a watch's deadline). Bookmarks
/// every second keep a watch that is read inside the window; the relists rows of the table say
/// whether any happened anyway.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

/// The identity of the bench's own requests.
const BENCH_USER: &str = "scale-bench";
/// What the controller lists and watches.
const WATCHED: [&str; 5] = [
    "secrets",
    "configmaps",
    "deployments",
    "statefulsets",
    "daemonsets",
];

const STEADY_DEADLINE: Duration = Duration::from_secs(300);
const READY_DEADLINE: Duration = Duration::from_secs(600);
const ADOPTION_DEADLINE: Duration = Duration::from_secs(1800);
const ROLL_DEADLINE: Duration = Duration::from_secs(300);
const POLL: Duration = Duration::from_millis(5);

struct Scale {
    namespaces: usize,
    secrets: usize,
    helm: usize,
    workloads: usize,
    changes: usize,
    rate: f64,
    debounce: String,
    /// `--max-adoptions-per-second`; empty: the controller's default.
    adoptions: String,
    /// The emulator serves streaming lists (the `WatchList` gate, on from Kubernetes 1.34).
    watch_list: bool,
}

fn setting<T: FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(text) if !text.is_empty() => text
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} does not parse")),
        _ => default,
    }
}

impl Scale {
    fn from_env() -> Self {
        let secrets = setting("ROLLSAFE_SCALE_SECRETS", 100_000);
        Self {
            namespaces: setting("ROLLSAFE_SCALE_NAMESPACES", 100),
            secrets,
            helm: setting("ROLLSAFE_SCALE_HELM", secrets / 50),
            workloads: setting("ROLLSAFE_SCALE_WORKLOADS", 20_000),
            changes: setting("ROLLSAFE_SCALE_CHANGES", 300),
            rate: setting("ROLLSAFE_SCALE_RATE", 30.0),
            debounce: setting("ROLLSAFE_SCALE_DEBOUNCE", "0".to_owned()),
            adoptions: setting("ROLLSAFE_SCALE_ADOPTIONS", String::new()),
            watch_list: setting("ROLLSAFE_SCALE_WATCH_LIST", false),
        }
    }

    /// Namespace `n`'s share of `total` objects.
    fn share(&self, total: usize, n: usize) -> usize {
        total / self.namespaces + usize::from(n < total % self.namespaces)
    }
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

/// Deterministic bytes that do not compress (xorshift).
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

/// Deployment `j`: `password` of `app-j-config` by key, `app-j-env` whole by `envFrom`, its
/// group's `tls-g` as a volume.
fn deployment(ns: &str, j: usize) -> Value {
    let name = app(j);
    let mut object = Workload::deployment(&name)
        .namespace(ns)
        .with_replicas()
        .build();
    object["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true"});
    let spec = &mut object["spec"]["template"]["spec"];
    spec["containers"][0]["env"] = json!([{"name": "DB_PASSWORD",
        "valueFrom": {"secretKeyRef": {"name": format!("{name}-config"), "key": "password"}}}]);
    spec["containers"][0]["envFrom"] = json!([{"secretRef": {"name": format!("{name}-env")}}]);
    spec["containers"][0]["volumeMounts"] =
        json!([{"name": "tls", "mountPath": "/etc/tls", "readOnly": true}]);
    spec["volumes"] = json!([{"name": "tls", "secret": {"secretName": shared_secret(j / GROUP)}}]);
    object
}

struct Inventory {
    secrets: usize,
    helm: usize,
    workloads: usize,
    /// `namespace/name` of every opted-in Deployment.
    opted_in: Vec<String>,
}

/// Loads the inventory through the emulator's write path.
fn load(emu: &rollsafe_emulator::Handle, scale: &Scale) -> Inventory {
    let mut inventory = Inventory {
        secrets: 0,
        helm: 0,
        workloads: 0,
        opted_in: Vec::new(),
    };
    let mut seed = 0u64;
    let put = |object: Value| {
        emu.put_object(object).unwrap();
    };
    for n in 0..scale.namespaces {
        let ns = namespace(n);
        let (secrets, helm, workloads) = (
            scale.share(scale.secrets, n),
            scale.share(scale.helm, n),
            scale.share(scale.workloads, n),
        );
        let groups = workloads.div_ceil(GROUP);
        let consumed = 2 * workloads + groups;
        assert!(
            helm + consumed <= secrets,
            "{ns}: {secrets} Secrets cannot hold {helm} Helm releases and the {consumed} the {workloads} Deployments consume"
        );
        for k in 0..helm {
            seed += 1;
            put(helm_secret(&ns, k, seed));
        }
        for j in 0..workloads {
            for suffix in ["config", "env"] {
                seed += 1;
                put(small_secret(&ns, &format!("{}-{suffix}", app(j)), seed));
            }
        }
        for g in 0..groups {
            seed += 1;
            put(small_secret(&ns, &shared_secret(g), seed));
        }
        for m in 0..secrets - helm - consumed {
            seed += 1;
            put(small_secret(&ns, &format!("misc-{m:04}"), seed));
        }
        for j in 0..workloads {
            put(deployment(&ns, j));
            inventory.opted_in.push(format!("{ns}/{}", app(j)));
        }
        inventory.secrets += secrets;
        inventory.helm += helm;
        inventory.workloads += workloads;
    }
    for name in std::iter::once(BASELINE_DEPLOYMENT.to_owned()).chain(fanned_targets()) {
        let mut target = rollsafe_emulator::Handle::sample_deployment(BASELINE_NS, &name);
        target["metadata"]["annotations"] = json!({"bench": "0"});
        put(target);
    }
    inventory
}

/// One change: a key of one Secret, and the Deployments that consume it.
struct Change {
    namespace: String,
    secret: String,
    key: &'static str,
    consumers: Vec<String>,
}

/// Change `c` goes to namespace `c % namespaces` and to group `c / namespaces` there, so no
/// two changes share a consumer.
fn plan(scale: &Scale) -> Vec<Change> {
    (0..scale.changes)
        .map(|c| {
            let n = c % scale.namespaces;
            let group = c / scale.namespaces;
            let workloads = scale.share(scale.workloads, n);
            assert!(
                group < workloads.div_ceil(GROUP),
                "{} changes need more Deployments per namespace than {workloads}",
                scale.changes
            );
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

/// A Deployment as the bench's watch saw it.
#[derive(Default)]
struct Seen {
    record: Option<String>,
    hash: Option<String>,
    /// When its pod template's config-hash was seen changing.
    rolls: Vec<Instant>,
}

#[derive(Default)]
struct Tracker {
    seen: HashMap<String, Seen>,
    /// Opted-in Deployments carrying a record.
    recorded: usize,
    last_record: Option<Instant>,
}

impl Tracker {
    fn observe(&mut self, deployment: &Deployment, at: Instant) {
        let meta = &deployment.metadata;
        let key = format!(
            "{}/{}",
            meta.namespace.as_deref().unwrap_or(""),
            meta.name.as_deref().unwrap_or("")
        );
        let annotations = meta.annotations.as_ref();
        let opted_in = annotations
            .and_then(|a| a.get("rollsafe.dev/watch"))
            .is_some_and(|v| v == "true");
        let record = annotations.and_then(|a| a.get(RECORD)).cloned();
        let hash = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(HASH))
            .cloned();
        let first_sight = !self.seen.contains_key(&key);
        let seen = self.seen.entry(key).or_default();
        if opted_in {
            match (&seen.record, &record) {
                (None, Some(_)) => {
                    self.recorded += 1;
                    self.last_record = Some(at);
                }
                (Some(_), None) => self.recorded -= 1,
                _ => {}
            }
        }
        if !first_sight && hash.is_some() && hash != seen.hash {
            seen.rolls.push(at);
        }
        seen.record = record;
        seen.hash = hash;
    }
}

/// Watches every Deployment from this process, noting when each event arrived.
fn track(
    client: kube::Client,
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
                    state.lock().unwrap().observe(&d, at);
                }
                Ok(watcher::Event::InitDone) => {
                    synced_tx.send_replace(true);
                }
                Ok(watcher::Event::Init | watcher::Event::Delete(_)) => {}
                Err(error) => eprintln!("  (bench watch error, relisting: {error})"),
            }
        }
    });
    (tracker, synced, task)
}

/// Every page of `path`, decoded as `Api::list` decodes it; (objects, JSON bytes).
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

/// The child process, killed when dropped.
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Panics with the log's tail if the process has exited.
    fn check_alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(20).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "rollsafe watch exited ({status}); its log ends:\n{}",
                tail.join("\n")
            );
        }
    }

    /// (`VmRSS`, `VmHWM`) in bytes.
    fn memory(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| -> u64 {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            let kb: u64 = line
                .trim_start_matches(name)
                .trim()
                .trim_end_matches("kB")
                .trim()
                .parse()
                .unwrap();
            kb * 1024
        };
        (field("VmRSS:"), field("VmHWM:"))
    }

    /// (`RssAnon`, `RssFile`) in bytes: the process's own memory, and the pages of the binary
    /// and libraries it has touched (shared with any other process running them).
    fn resident_parts(&self) -> (u64, u64) {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find(|l| l.starts_with(name))
                .and_then(|line| {
                    line.trim_start_matches(name)
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .unwrap_or(0)
                * 1024
        };
        (field("RssAnon:"), field("RssFile:"))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn spawn_controller(kubeconfig: &Path, admin: SocketAddr, log: PathBuf, scale: &Scale) -> Process {
    let stderr = std::fs::File::create(&log).unwrap();
    // A profiling run wraps the binary (`ROLLSAFE_SCALE_WRAP="heaptrack -o /tmp/watch"`); the
    // memory figures are then the wrapper's process, not the controller's.
    let wrap = std::env::var("ROLLSAFE_SCALE_WRAP").unwrap_or_default();
    let mut words = wrap.split_whitespace();
    let mut command = match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(env!("CARGO_BIN_EXE_rollsafe"));
            command
        }
        None => Command::new(env!("CARGO_BIN_EXE_rollsafe")),
    };
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", "/nonexistent")
        .args(["watch", "--kubeconfig"])
        .arg(kubeconfig)
        .args(["--admin-listen", &admin.to_string()])
        .args(["--debounce", &scale.debounce])
        .args(["--max-rolls-per-minute", "0"])
        .args(["--instance", "scale-bench"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // The allocator's settings, for an experiment (`MIMALLOC_ALLOW_THP=0`).
    for (name, value) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("MIMALLOC_") {
            command.env(name, value);
        }
    }
    if !scale.adoptions.is_empty() {
        command.args(["--max-adoptions-per-second", &scale.adoptions]);
    }
    if let Some(filter) = std::env::var_os("RUST_LOG") {
        command.env("RUST_LOG", filter);
    }
    Process {
        child: command.spawn().unwrap(),
        log,
    }
}

/// The controller's warnings and errors, counted by message.
fn warnings(log: &Path) -> Vec<(String, usize)> {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if matches!(entry["level"].as_str(), Some("WARN" | "ERROR")) {
            let message = entry["fields"]["message"].as_str().unwrap_or("").to_owned();
            *counts.entry(message).or_default() += 1;
        }
    }
    let mut counts: Vec<_> = counts.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    counts
}

/// A free loopback port (bound, then released for the child).
fn free_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET path` over plain HTTP/1.1: (status, body); `None` when nothing answers.
async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.ok()?;
    let text = String::from_utf8_lossy(&response);
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// A sample's value in the controller's `/metrics` (0 when absent).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

async fn metrics(process: &mut Process, admin: SocketAddr) -> String {
    process.check_alive();
    http_get(admin, "/metrics").await.unwrap().1
}

fn rolls_series(result: &str) -> String {
    format!("rollsafe_watch_rolls_total{{kind=\"Deployment\",result=\"{result}\"}}")
}

/// Polls `/metrics` until the controller's queue is empty.
async fn queue_drained(process: &mut Process, admin: SocketAddr, deadline: Duration) -> String {
    let until = Instant::now() + deadline;
    loop {
        let text = metrics(process, admin).await;
        if metric(&text, "rollsafe_watch_queue_depth") == 0.0 {
            return text;
        }
        assert!(
            Instant::now() < until,
            "the controller's queue never drained"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The controller's lists started from the beginning (not a continued page, not a consistent
/// read of one object) in the request log, by resource and when each began; then empties the
/// log (it is cloned whole to be read).
fn controller_lists(emu: &rollsafe_emulator::Handle) -> Vec<(String, u64)> {
    let lists = emu
        .requests()
        .into_iter()
        .filter(|e| {
            e.user.as_deref() == Some(ADMIN_USER)
                && e.verb.as_deref() == Some("list")
                && !e.query.contains("continue=")
                && !e.query.contains("fieldSelector=metadata.name")
        })
        .map(|e| (e.resource.unwrap_or_default(), e.start_micros))
        .collect();
    emu.clear_requests();
    lists
}

/// Whether the controller has watched every kind again since the log was last emptied.
fn rewatched(emu: &rollsafe_emulator::Handle) -> bool {
    let log = emu.requests();
    WATCHED.iter().all(|resource| {
        log.iter()
            .any(|e| e.user.as_deref() == Some(ADMIN_USER) && e.is("watch", resource))
    })
}

/// Lists as `secrets +1.2 s`, from `origin` (emulator microseconds).
fn describe_lists(lists: &[(String, u64)], origin: u64) -> String {
    if lists.is_empty() {
        return "none".to_owned();
    }
    lists
        .iter()
        .map(|(resource, at)| {
            format!(
                "{resource} +{:.1} s",
                at.saturating_sub(origin) as f64 / 1e6
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The emulator's clock now, in microseconds since it started (the newest log entry's end).
fn emulator_micros(emu: &rollsafe_emulator::Handle) -> u64 {
    emu.requests().last().map_or(0, |e| e.end_micros)
}

/// A table row: `samples`' p50 / p99 beside `baseline`'s, and the p99 ratio.
fn fan_out_row(
    figure: &str,
    samples: &[Duration],
    baseline: &[Duration],
    what: &str,
) -> (String, String, String, String) {
    if samples.is_empty() || baseline.is_empty() {
        return (figure.to_owned(), "none".into(), "—".into(), "—".into());
    }
    let (s50, s99) = (percentile(samples, 0.5), percentile(samples, 0.99));
    let (b50, b99) = (percentile(baseline, 0.5), percentile(baseline, 0.99));
    (
        figure.to_owned(),
        format!("{:.1} / {:.1} ms", ms(s50), ms(s99)),
        format!("{:.1} / {:.1} ms {what}", ms(b50), ms(b99)),
        format!(
            "{:.1}× / {:.1}×",
            s50.as_secs_f64() / b50.as_secs_f64(),
            s99.as_secs_f64() / b99.as_secs_f64()
        ),
    )
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Ticks at `rate` per second that keep their schedule (open loop: a request is sent on its
/// tick whether or not the previous one was answered).
fn ticks(rate: f64) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    ticks
}

/// Changes the plan's Secrets at `rate` per second; the acknowledgement of each.
async fn churn(
    client: kube::Client,
    changes: Vec<(String, String, &'static str)>,
    rate: f64,
) -> Vec<Instant> {
    let mut ticks = ticks(rate);
    let mut sent = Vec::with_capacity(changes.len());
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

/// Bare JSON Patch round trips at `rate` per second until `stop`.
/// The Deployments a fanned-out bare write patches at once, as many as a shared Secret has
/// consumers.
fn fanned_targets() -> impl Iterator<Item = String> {
    (0..GROUP).map(|i| format!("{BASELINE_DEPLOYMENT}-{i}"))
}

/// One bare JSON Patch of `name`'s annotation; its round trip.
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

/// Bare patches at `rate` until `stop`: one per tick (its round trip), and on every
/// [`SHARED_EVERY`]th tick also [`GROUP`] at once to as many Deployments, as a shared Secret's
/// consumers are rolled (the time until the last is answered).
async fn bare_patches(
    client: kube::Client,
    rate: f64,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (Vec<Duration>, Vec<Duration>) {
    let api: Api<Deployment> = Api::namespaced(client, BASELINE_NS);
    let mut ticks = ticks(rate);
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

fn main() {
    let scale = Scale::from_env();
    // The emulator on its own threads, as a separate API server would run.
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("emulator")
        .enable_all()
        .build()
        .unwrap();
    let bench = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    bench.block_on(run(&scale, server.handle()));
}

async fn run(scale: &Scale, server: &tokio::runtime::Handle) {
    let TestCluster {
        emu,
        connection,
        kubeconfig,
        dir,
    } = TestCluster::start_on(
        server,
        Emulator::builder()
            .without_rollout_history()
            .watch_list(scale.watch_list)
            .bookmark_interval(BOOKMARK_INTERVAL)
            .identity(BENCH_USER, "scale-bench-token", &[MASTERS_GROUP]),
    )
    .await;
    drop(connection);
    // The bench's own requests under their own name, so the request log tells the
    // controller's (the kubeconfig's admin) apart.
    let client = rollsafe_kube::Connection::from_kubeconfig(Some(&kubeconfig), Some(BENCH_USER))
        .await
        .unwrap()
        .client(None);

    let started = Instant::now();
    let inventory = load(&emu, scale);
    let plan = plan(scale);
    let affected: HashSet<&str> = plan
        .iter()
        .flat_map(|c| c.consumers.iter().map(String::as_str))
        .collect();
    println!(
        "inventory: {} Secrets ({} Helm releases of {} KiB) in {} namespaces, {} opted-in Deployments (3 Secrets each), loaded in {:.1} s",
        thousands(inventory.secrets),
        thousands(inventory.helm),
        HELM_VALUE_BYTES / 1024,
        scale.namespaces,
        thousands(inventory.workloads),
        started.elapsed().as_secs_f64()
    );

    // 1. The baseline: a bare client's paged list of the five kinds.
    let started = Instant::now();
    let kinds = [
        list_all::<Secret>(&client, "/api/v1/secrets").await,
        list_all::<ConfigMap>(&client, "/api/v1/configmaps").await,
        list_all::<Deployment>(&client, "/apis/apps/v1/deployments").await,
        list_all::<StatefulSet>(&client, "/apis/apps/v1/statefulsets").await,
        list_all::<DaemonSet>(&client, "/apis/apps/v1/daemonsets").await,
    ];
    let raw_list = started.elapsed();
    let listed: usize = kinds.iter().map(|k| k.0).sum();
    let listed_bytes: usize = kinds.iter().map(|k| k.1).sum();
    println!(
        "baseline: paged list (limit={PAGE}) of {} objects, {:.1} MB of JSON, in {:.2} s",
        thousands(listed),
        listed_bytes as f64 / 1e6,
        raw_list.as_secs_f64()
    );

    // The bench's own watch on Deployments, listed before the controller starts.
    let (tracker, mut synced, watch) = track(client.clone());
    synced.wait_for(|s| *s).await.unwrap();

    // 2. Cold start.
    let admin = free_port();
    let started = Instant::now();
    let log = std::env::var_os("ROLLSAFE_SCALE_LOG")
        .map_or_else(|| dir.path().join("watch.log"), PathBuf::from);
    let mut process = spawn_controller(&kubeconfig, admin, log.clone(), scale);
    loop {
        if let Some((200, _)) = http_get(admin, "/readyz").await {
            break;
        }
        process.check_alive();
        assert!(started.elapsed() < READY_DEADLINE, "never ready");
        tokio::time::sleep(POLL).await;
    }
    let cold = started.elapsed();
    let (_, hwm_ready) = process.memory();
    // From here on the request log holds only what follows (lists are read from it).
    let ready_micros = emulator_micros(&emu);
    controller_lists(&emu);
    println!(
        "cold start: /readyz 200 after {:.2} s ({:.2}× the list)",
        cold.as_secs_f64(),
        cold.as_secs_f64() / raw_list.as_secs_f64()
    );

    // 3. Adoption.
    let workloads = inventory.opted_in.len();
    let adopted_at = loop {
        let (recorded, last) = {
            let t = tracker.lock().unwrap();
            (t.recorded, t.last_record)
        };
        if recorded == workloads {
            break last.unwrap();
        }
        process.check_alive();
        assert!(
            started.elapsed() < ADOPTION_DEADLINE,
            "{recorded} of {workloads} adopted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let adoption = adopted_at - started;
    let adoption_lists = controller_lists(&emu);
    println!(
        "adoption: every record written {:.1} s after start ({:.1} s after ready)",
        adoption.as_secs_f64(),
        adoption.saturating_sub(cold).as_secs_f64()
    );

    // Steady: every watch of the controller resumed since the adoption (relisted first if its
    // resourceVersion had left the server's window), ready, its queue empty.
    let until = Instant::now() + STEADY_DEADLINE;
    let before = loop {
        if rewatched(&emu) && matches!(http_get(admin, "/readyz").await, Some((200, _))) {
            let text = metrics(&mut process, admin).await;
            if metric(&text, "rollsafe_watch_queue_depth") == 0.0 {
                break text;
            }
        }
        process.check_alive();
        assert!(Instant::now() < until, "the controller never settled");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    let steady = adopted_at.elapsed();
    let settle_lists = [adoption_lists, controller_lists(&emu)].concat();
    println!(
        "steady {:.1} s after the last record; the controller's lists from the start since ready (s after ready): {}",
        steady.as_secs_f64(),
        describe_lists(&settle_lists, ready_micros)
    );
    let (rss_adopted, hwm_adopted) = process.memory();
    let (anon, file) = process.resident_parts();
    println!(
        "memory, steady after adoption: VmRSS {:.1} MiB ({} B per listed object; {:.1} MiB anonymous, {:.1} MiB of the binary's and libraries' pages), VmHWM {:.1} MiB (at ready {:.1} MiB)",
        mib(rss_adopted),
        thousands((rss_adopted / listed as u64) as usize),
        mib(anon),
        mib(file),
        mib(hwm_adopted),
        mib(hwm_ready)
    );
    let records_after_adoption: HashMap<String, Option<String>> = {
        let t = tracker.lock().unwrap();
        t.seen
            .iter()
            .map(|(k, s)| (k.clone(), s.record.clone()))
            .collect()
    };

    // 4. Reaction under churn, beside bare patches.
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let bare = tokio::spawn(bare_patches(client.clone(), scale.rate, stop));
    let changes = plan
        .iter()
        .map(|c| (c.namespace.clone(), c.secret.clone(), c.key))
        .collect();
    let churn_micros = emulator_micros(&emu);
    let churn_started = Instant::now();
    let acks = tokio::spawn(churn(client.clone(), changes, scale.rate))
        .await
        .unwrap();
    let churn_took = churn_started.elapsed();
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
    let after = queue_drained(&mut process, admin, Duration::from_secs(60)).await;
    let churn_lists = controller_lists(&emu);
    let (rss_end, hwm_end) = process.memory();

    let mut reactions = Vec::new();
    // Split by fan-out: a change with one consumer, and one with GROUP consumers, whose
    // patches the server answers one after another.
    let (mut single, mut shared) = (Vec::new(), Vec::new());
    {
        let t = tracker.lock().unwrap();
        for (change, ack) in plan.iter().zip(&acks) {
            for consumer in &change.consumers {
                let rolled = t.seen[consumer].rolls[0];
                let reaction = rolled.saturating_duration_since(*ack);
                reactions.push(reaction);
                if change.consumers.len() == 1 {
                    single.push(reaction);
                } else {
                    shared.push(reaction);
                }
            }
        }
    }
    println!(
        "churn: {} changes in {:.1} s ({:.1}/s) reaching {} consumers; {} bare patches meanwhile; the controller's lists from the start (s after the churn began): {}",
        plan.len(),
        churn_took.as_secs_f64(),
        plan.len() as f64 / churn_took.as_secs_f64(),
        affected.len(),
        round_trips.len(),
        describe_lists(&churn_lists, churn_micros)
    );

    // 5. Correctness: the watch's history, the objects now, the controller's counters.
    let (mut once, mut repeated, mut others_rolled) = (0, 0, 0);
    {
        let t = tracker.lock().unwrap();
        for key in &inventory.opted_in {
            let rolls = t.seen.get(key).map_or(0, |s| s.rolls.len());
            match (affected.contains(key.as_str()), rolls) {
                (true, 1) => once += 1,
                (true, _) => repeated += 1,
                (false, 0) => {}
                (false, _) => others_rolled += 1,
            }
        }
    }
    let (mut final_rolled, mut final_unchanged, mut final_wrong) = (0, 0, 0);
    for object in emu.list_objects("deployments", None) {
        let ns = object["metadata"]["namespace"].as_str().unwrap_or("");
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        let key = format!("{ns}/{name}");
        let Some(recorded) = records_after_adoption.get(&key) else {
            continue;
        };
        if ns == BASELINE_NS {
            continue;
        }
        let record = object["metadata"]["annotations"][RECORD].as_str();
        let hash = object["spec"]["template"]["metadata"]["annotations"][HASH].as_str();
        let changed = record != recorded.as_deref();
        match (affected.contains(key.as_str()), changed, hash.is_some()) {
            (true, true, true) => final_rolled += 1,
            (false, false, false) => final_unchanged += 1,
            _ => final_wrong += 1,
        }
    }
    let counter = |text: &str, result: &str| metric(text, &rolls_series(result)) as u64;
    let rolled_by_controller = counter(&after, "rolled") - counter(&before, "rolled");
    let adopted_by_controller = counter(&after, "adopted");
    let others = ["conflict", "failed", "halted", "deferred", "dry_run"]
        .iter()
        .map(|r| format!("{r} {}", counter(&after, r)))
        .collect::<Vec<_>>()
        .join(", ");
    drop(process);
    let warnings = warnings(&log);
    watch.abort();
    emu.shutdown().await;

    let (r50, r99, rmax) = (
        percentile(&reactions, 0.5),
        percentile(&reactions, 0.99),
        percentile(&reactions, 1.0),
    );
    let (b50, b99, bmax) = (
        percentile(&round_trips, 0.5),
        percentile(&round_trips, 0.99),
        percentile(&round_trips, 1.0),
    );
    let correct = repeated == 0
        && others_rolled == 0
        && final_wrong == 0
        && once == affected.len()
        && rolled_by_controller == affected.len() as u64;
    let per_object = |bytes: u64| thousands((bytes / listed as u64) as usize);
    println!();
    println!(
        "rollsafe watch at scale: {} Secrets ({} Helm-release sized), {} opted-in Deployments in {} namespaces; {} objects, {:.1} MB of JSON listed",
        thousands(inventory.secrets),
        thousands(inventory.helm),
        thousands(workloads),
        scale.namespaces,
        thousands(listed),
        listed_bytes as f64 / 1e6
    );
    let rows: Vec<(String, String, String, String)> = vec![
        (
            "cold start (start → /readyz 200)".into(),
            format!("{:.2} s", cold.as_secs_f64()),
            format!("{:.2} s paged list (limit={PAGE})", raw_list.as_secs_f64()),
            format!("{:.2}×", cold.as_secs_f64() / raw_list.as_secs_f64()),
        ),
        (
            format!("adoption ({} records written)", thousands(workloads)),
            format!(
                "{:.1} s ({:.1} s after ready)",
                adoption.as_secs_f64(),
                adoption.saturating_sub(cold).as_secs_f64()
            ),
            "—".into(),
            "—".into(),
        ),
        (
            "VmRSS steady after adoption".into(),
            format!(
                "{:.1} MiB ({} B/object)",
                mib(rss_adopted),
                per_object(rss_adopted)
            ),
            format!("{:.1} MB listed", listed_bytes as f64 / 1e6),
            format!("{:.2}×", rss_adopted as f64 / listed_bytes as f64),
        ),
        (
            "VmHWM (peak) at ready / when steady".into(),
            format!("{:.1} / {:.1} MiB", mib(hwm_ready), mib(hwm_adopted)),
            "—".into(),
            "—".into(),
        ),
        (
            "VmRSS / VmHWM after churn".into(),
            format!("{:.1} / {:.1} MiB", mib(rss_end), mib(hwm_end)),
            "—".into(),
            "—".into(),
        ),
        (
            format!(
                "reaction p50 ({} changes at {}/s, {} consumers)",
                plan.len(),
                scale.rate,
                affected.len()
            ),
            format!("{:.1} ms", ms(r50)),
            format!("{:.1} ms bare patch p50", ms(b50)),
            format!("{:.1}×", r50.as_secs_f64() / b50.as_secs_f64()),
        ),
        (
            "reaction p99".into(),
            format!("{:.1} ms", ms(r99)),
            format!("{:.1} ms bare patch p99", ms(b99)),
            format!("{:.1}×", r99.as_secs_f64() / b99.as_secs_f64()),
        ),
        (
            "reaction max".into(),
            format!("{:.1} ms", ms(rmax)),
            format!("{:.1} ms bare patch max", ms(bmax)),
            format!("{:.1}×", rmax.as_secs_f64() / bmax.as_secs_f64()),
        ),
        fan_out_row(
            &format!(
                "reaction p50 / p99, changes with one consumer ({})",
                single.len()
            ),
            &single,
            &round_trips,
            "bare patch",
        ),
        fan_out_row(
            &format!(
                "reaction p50 / p99, changes with {GROUP} consumers ({} rolls)",
                shared.len()
            ),
            &shared,
            &fanned_trips,
            &format!("{GROUP} bare patches at once, last answered"),
        ),
        (
            "steady after adoption (every watch resumed)".into(),
            format!("{:.1} s after the last record", steady.as_secs_f64()),
            "—".into(),
            "—".into(),
        ),
        (
            "relists after ready, until steady".into(),
            describe_lists(&settle_lists, ready_micros),
            "(s after ready)".into(),
            "—".into(),
        ),
        (
            "relists during the churn".into(),
            describe_lists(&churn_lists, churn_micros),
            "(s after the churn began)".into(),
            "—".into(),
        ),
        (
            "controller's warnings".into(),
            if warnings.is_empty() {
                "none".to_owned()
            } else {
                warnings
                    .iter()
                    .map(|(message, n)| format!("{n}× {message}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            },
            "—".into(),
            "—".into(),
        ),
        (
            "correctness".into(),
            format!(
                "{once}/{} rolled once, {repeated} more than once, {others_rolled} others rolled",
                affected.len()
            ),
            format!(
                "final objects: {final_rolled} rolled, {final_unchanged} unchanged, {final_wrong} wrong"
            ),
            if correct { "ok" } else { "FAILED" }.into(),
        ),
        (
            "controller's counters".into(),
            format!("adopted {adopted_by_controller}, rolled {rolled_by_controller}, {others}"),
            "—".into(),
            "—".into(),
        ),
    ];
    let widths = rows.iter().fold([6, 14, 8, 5], |w, r| {
        [
            w[0].max(r.0.chars().count()),
            w[1].max(r.1.chars().count()),
            w[2].max(r.2.chars().count()),
            w[3].max(r.3.chars().count()),
        ]
    });
    let line = |a: &str, b: &str, c: &str, d: &str| {
        println!(
            "| {a:<w0$} | {b:<w1$} | {c:<w2$} | {d:<w3$} |",
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        );
    };
    line("figure", "rollsafe watch", "baseline", "ratio");
    line(
        &"-".repeat(widths[0]),
        &"-".repeat(widths[1]),
        &"-".repeat(widths[2]),
        &"-".repeat(widths[3]),
    );
    for (a, b, c, d) in &rows {
        line(a, b, c, d);
    }
    assert!(
        correct,
        "the churn did not roll exactly the affected consumers once"
    );
}
