//! Benchmark of one Restart Consumers run over 2,000 workloads (1,000 Deployments, 500
//! StatefulSets, 500 DaemonSets; 50 consumers) in the emulator.
//!
//! Run with `cargo bench -p rollsafe-kube --bench restart`.
//!
//! 1. Wall time and peak memory of one `RestartEngine::run`, against two baselines measured in
//!    the same run with the plain kube client: the paged listing of the same objects
//!    (`Api::list`, `limit=100`, typed objects), and the fair baseline — that listing plus the
//!    same 50 JSON Patches (uid and resourceVersion tests, the annotation add) at 4 in flight
//!    (`Api::patch`). Prints the ratios.
//! 2. With 20 ms of injected latency on every patch: one run (≤ 4 patches in flight) against
//!    the same discovery followed by the 50 patches sent one at a time. Prints the speed-up
//!    (the limit is 4×).
//!
//! Each measurement runs in a fresh child process (this same binary), so its peak resident
//! memory (`VmHWM`) belongs to that measurement alone; the emulator runs in another child.

#![expect(clippy::unwrap_used, reason = "benches may unwrap")]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use rollsafe_core::name::AnnotationKey;
use rollsafe_core::patch::restart_patch;
use rollsafe_emulator::{Emulator, Fault, FaultAction};
use rollsafe_kube::{Connection, RestartEngine, RestartRequest, Timestamp};
use serde_json::{Value, json};

const NS: &str = "bench";
const SECRET: &str = "db-creds";
const ROUNDS: usize = 7;

fn workload(kind: &str, name: &str, consumes: bool) -> Value {
    let mut spec = json!({"containers": [{
        "name": "app", "image": "registry.example/app:1",
        "env": [{"name": "MODE", "value": "production"}, {"name": "PORT", "value": "8080"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}
    }]});
    if consumes {
        spec["volumes"] = json!([{"name": "creds", "secret": {"secretName": SECRET}}]);
    } else {
        spec["volumes"] = json!([{"name": "other", "secret": {"secretName": "unrelated"}}]);
    }
    let mut object = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name, "tier": "bench"}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec}
        }
    });
    if kind == "StatefulSet" {
        object["spec"]["serviceName"] = json!(name);
    }
    object
}

fn seeds() -> Vec<Value> {
    let mut seeds = vec![json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": NS}, "stringData": {"k": "v"}})];
    // Every 40th workload consumes the Secret: 25 + 12 + 13 = 50.
    let mut index = 0usize;
    for (kind, count) in [
        ("Deployment", 1000),
        ("StatefulSet", 500),
        ("DaemonSet", 500),
    ] {
        for i in 0..count {
            let consumes = index.is_multiple_of(40);
            index += 1;
            seeds.push(workload(
                kind,
                &format!("{}-{i:04}", kind.to_lowercase()),
                consumes,
            ));
        }
    }
    seeds
}

/// Child: serve the emulator until stdin closes.
fn emulator_child(kubeconfig: &Path, patch_delay_ms: u64) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let emu = Emulator::builder()
            .seed_objects(seeds())
            .without_rollout_history()
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        if patch_delay_ms > 0 {
            emu.add_fault(Fault::on("patch", "*").always().then(FaultAction::Delay {
                millis: patch_delay_ms,
            }));
        }
        emu.write_kubeconfig(kubeconfig).unwrap();
        println!("ready");
        std::io::stdout().flush().unwrap();
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            while std::io::stdin().read_line(&mut sink).unwrap_or(0) > 0 {}
        })
        .await;
        emu.shutdown().await;
    });
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The 50 consumers, as `seeds` makes them: (kind, name).
fn consumers() -> std::collections::HashSet<(&'static str, String)> {
    let mut out = std::collections::HashSet::new();
    let mut index = 0usize;
    for (kind, count) in [
        ("Deployment", 1000),
        ("StatefulSet", 500),
        ("DaemonSet", 500),
    ] {
        for i in 0..count {
            if index.is_multiple_of(40) {
                out.insert((kind, format!("{}-{i:04}", kind.to_lowercase())));
            }
            index += 1;
        }
    }
    out
}

/// The fair baseline: the plain paged listing, keeping the uid and resourceVersion of the 50
/// known consumers, then the same JSON Patch for each, 4 in flight, with `Api::patch`.
async fn plain_listing_and_patches(client: &Client) -> usize {
    use futures::StreamExt;
    use json_patch::jsonptr::PointerBuf;
    use json_patch::{AddOperation, PatchOperation, TestOperation};
    use kube::ResourceExt;

    async fn listed<K>(
        api: &Api<K>,
        kind: &'static str,
    ) -> Vec<(&'static str, String, String, String)>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let wanted = consumers();
        let mut found = Vec::new();
        let mut params = ListParams::default().limit(100);
        loop {
            let page = api.list(&params).await.unwrap();
            for item in &page.items {
                let name = item.name_any();
                if wanted.contains(&(kind, name.clone())) {
                    found.push((
                        kind,
                        name,
                        item.uid().unwrap(),
                        item.resource_version().unwrap(),
                    ));
                }
            }
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return found,
            }
        }
    }
    let deployments = Api::<Deployment>::namespaced(client.clone(), NS);
    let stateful_sets = Api::<StatefulSet>::namespaced(client.clone(), NS);
    let daemon_sets = Api::<DaemonSet>::namespaced(client.clone(), NS);
    let (d, s, ds) = tokio::join!(
        listed(&deployments, "Deployment"),
        listed(&stateful_sets, "StatefulSet"),
        listed(&daemon_sets, "DaemonSet"),
    );
    let value = rollsafe_kube::restart_value(Timestamp::now());
    let key = AnnotationKey::restarted_at();
    let patches = d
        .into_iter()
        .chain(s)
        .chain(ds)
        .map(|(kind, name, uid, version)| {
            let test = |field: &str, expected: String| {
                PatchOperation::Test(TestOperation {
                    path: PointerBuf::from_tokens(["metadata", field]),
                    value: Value::String(expected),
                })
            };
            let patch = json_patch::Patch(vec![
                test("uid", uid),
                test("resourceVersion", version),
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(["spec", "template", "metadata", "annotations"]),
                    value: json!({ key.as_str(): value }),
                }),
            ]);
            let (deployments, stateful_sets, daemon_sets) =
                (&deployments, &stateful_sets, &daemon_sets);
            async move {
                let params = PatchParams::default();
                let patch = Patch::Json::<()>(patch);
                match kind {
                    "Deployment" => deployments.patch(&name, &params, &patch).await.map(drop),
                    "StatefulSet" => stateful_sets.patch(&name, &params, &patch).await.map(drop),
                    _ => daemon_sets.patch(&name, &params, &patch).await.map(drop),
                }
                .unwrap();
            }
        });
    futures::stream::iter(patches)
        .buffer_unordered(4)
        .count()
        .await
}

async fn plain_listing(client: &Client) -> usize {
    async fn all<K>(api: Api<K>) -> usize
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let mut count = 0;
        let mut params = ListParams::default().limit(100);
        loop {
            let page = api.list(&params).await.unwrap();
            count += page.items.len();
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => return count,
            }
        }
    }
    let (d, s, ds) = tokio::join!(
        all(Api::<Deployment>::namespaced(client.clone(), NS)),
        all(Api::<StatefulSet>::namespaced(client.clone(), NS)),
        all(Api::<DaemonSet>::namespaced(client.clone(), NS)),
    );
    d + s + ds
}

/// Child: one measurement; prints `wall_micros peak_rss_kib`.
fn measure_child(mode: &str, kubeconfig: &Path) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let wall = runtime.block_on(async {
        let connection = Connection::from_kubeconfig(Some(kubeconfig), None)
            .await
            .unwrap();
        let engine = RestartEngine::new(&connection);
        let started = Instant::now();
        match mode {
            "list" | "list-and-patch" => {
                let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                    .await
                    .unwrap();
                let client = Client::try_from(config).unwrap();
                let started = Instant::now();
                if mode == "list" {
                    assert_eq!(plain_listing(&client).await, 2000);
                } else {
                    assert_eq!(plain_listing_and_patches(&client).await, 50);
                }
                return started.elapsed();
            }
            "restart" => {
                let request = RestartRequest::new(NS.parse().unwrap(), SECRET.parse().unwrap());
                let result = engine.run(&request).await;
                assert_eq!(result.requested.len(), 50, "{result:?}");
            }
            "discover" => {
                let discovery = engine
                    .discover(&NS.parse().unwrap(), &SECRET.parse().unwrap(), None)
                    .await;
                assert_eq!(discovery.matches().count(), 50);
            }
            "sequential" => {
                // The same discovery, then the 50 patches one at a time.
                let discovery = engine
                    .discover(&NS.parse().unwrap(), &SECRET.parse().unwrap(), None)
                    .await;
                let client = connection.client(None);
                let value = rollsafe_kube::restart_value(Timestamp::now());
                let key = AnnotationKey::restarted_at();
                for found in discovery.matches() {
                    let patch = restart_patch(found.object(), &key, &value).unwrap();
                    let params = PatchParams::default();
                    let patch = Patch::Json::<()>(patch);
                    match found.kind {
                        rollsafe_core::workload::WorkloadKind::Deployment => {
                            Api::<Deployment>::namespaced(client.clone(), NS)
                                .patch(&found.name, &params, &patch)
                                .await
                                .map(drop)
                        }
                        rollsafe_core::workload::WorkloadKind::StatefulSet => {
                            Api::<StatefulSet>::namespaced(client.clone(), NS)
                                .patch(&found.name, &params, &patch)
                                .await
                                .map(drop)
                        }
                        rollsafe_core::workload::WorkloadKind::DaemonSet => {
                            Api::<DaemonSet>::namespaced(client.clone(), NS)
                                .patch(&found.name, &params, &patch)
                                .await
                                .map(drop)
                        }
                    }
                    .unwrap();
                }
            }
            other => panic!("unknown mode {other}"),
        }
        started.elapsed()
    });
    println!("{} {}", wall.as_micros(), peak_rss_kib());
}

struct EmulatorProcess {
    child: Child,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

impl EmulatorProcess {
    fn start(patch_delay_ms: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "emulator",
                kubeconfig.to_str().unwrap(),
                &patch_delay_ms.to_string(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        Self {
            child,
            kubeconfig,
            _dir: dir,
        }
    }

    fn measure(&self, mode: &str) -> (Duration, u64) {
        let output = Command::new(std::env::current_exe().unwrap())
            .args(["measure", mode, self.kubeconfig.to_str().unwrap()])
            .env("KUBECONFIG", &self.kubeconfig)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{mode}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let text = String::from_utf8_lossy(&output.stdout);
        let mut parts = text.split_whitespace();
        let micros: u64 = parts.next().unwrap().parse().unwrap();
        let rss: u64 = parts.next().unwrap().parse().unwrap();
        (Duration::from_micros(micros), rss)
    }
}

impl Drop for EmulatorProcess {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn median_u64(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

fn series(emulator: &EmulatorProcess, mode: &str, rounds: usize) -> (Duration, u64) {
    let samples: Vec<_> = (0..rounds).map(|_| emulator.measure(mode)).collect();
    (
        median(samples.iter().map(|s| s.0).collect()),
        median_u64(samples.iter().map(|s| s.1).collect()),
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("emulator") => {
            let delay = args.get(3).and_then(|d| d.parse().ok()).unwrap_or(0);
            return emulator_child(Path::new(&args[2]), delay);
        }
        Some("measure") => return measure_child(&args[2], Path::new(&args[3])),
        _ => {}
    }

    println!(
        "restart-consumers benchmark: 2,000 workloads (1,000 Deployments, 500 StatefulSets, 500 DaemonSets), 50 consumers; median of {ROUNDS} runs, each in a fresh process"
    );
    let emulator = EmulatorProcess::start(0);
    let _ = emulator.measure("discover"); // warm-up
    // Interleaved rounds, each mode at each position in turn: the emulator's state grows with
    // every patch, and no mode may always come first or last.
    let modes = ["list", "list-and-patch", "discover", "restart"];
    let mut samples: [Vec<(Duration, u64)>; 4] = Default::default();
    for round in 0..ROUNDS {
        for offset in 0..modes.len() {
            let index = (round + offset) % modes.len();
            samples[index].push(emulator.measure(modes[index]));
        }
    }
    let summary = |samples: &Vec<(Duration, u64)>| {
        (
            median(samples.iter().map(|s| s.0).collect()),
            median_u64(samples.iter().map(|s| s.1).collect()),
        )
    };
    let (list_time, list_rss) = summary(&samples[0]);
    let (fair_time, fair_rss) = summary(&samples[1]);
    let (discover_time, discover_rss) = summary(&samples[2]);
    let (run_time, run_rss) = summary(&samples[3]);
    println!(
        "baseline  kube Api::list, 3 kinds, limit=100: {:>8.1} ms  peak RSS {:>7} KiB",
        ms(list_time),
        list_rss
    );
    println!(
        "fair      the same list + 50 patches, 4 in flight: {:>8.1} ms  peak RSS {:>7} KiB",
        ms(fair_time),
        fair_rss
    );
    println!(
        "engine    discovery only (no patch):          {:>8.1} ms  peak RSS {:>7} KiB",
        ms(discover_time),
        discover_rss
    );
    println!(
        "ratio     engine discovery / list baseline: wall {:.2}x, peak RSS {:.2}x",
        discover_time.as_secs_f64() / list_time.as_secs_f64(),
        discover_rss as f64 / list_rss as f64
    );
    println!(
        "engine    restart-consumers run (50 patches): {:>8.1} ms  peak RSS {:>7} KiB",
        ms(run_time),
        run_rss
    );
    println!(
        "ratio     engine / list baseline: wall {:.2}x, peak RSS {:.2}x",
        run_time.as_secs_f64() / list_time.as_secs_f64(),
        run_rss as f64 / list_rss as f64
    );
    println!(
        "ratio     engine / fair baseline (list + patches): wall {:.2}x, peak RSS {:.2}x (target <= 1.15x wall)",
        run_time.as_secs_f64() / fair_time.as_secs_f64(),
        run_rss as f64 / fair_rss as f64
    );
    drop(emulator);

    let emulator = EmulatorProcess::start(20);
    let _ = emulator.measure("discover");
    let rounds = 3;
    let (discover_time, _) = series(&emulator, "discover", rounds);
    let (run_time, _) = series(&emulator, "restart", rounds);
    let (sequential_time, _) = series(&emulator, "sequential", rounds);
    let run_patch = run_time.saturating_sub(discover_time);
    let sequential_patch = sequential_time.saturating_sub(discover_time);
    println!("with 20 ms injected latency per patch:");
    println!(
        "  discovery only:                        {:>8.1} ms",
        ms(discover_time)
    );
    println!(
        "  engine run (<= 4 in flight):           {:>8.1} ms  (patch phase ~{:.1} ms)",
        ms(run_time),
        ms(run_patch)
    );
    println!(
        "  discovery + 50 patches one at a time:  {:>8.1} ms  (patch phase ~{:.1} ms)",
        ms(sequential_time),
        ms(sequential_patch)
    );
    println!(
        "  speed-up: whole run {:.2}x, patch phase {:.2}x (limit 4x)",
        sequential_time.as_secs_f64() / run_time.as_secs_f64(),
        sequential_patch.as_secs_f64() / run_patch.as_secs_f64().max(1e-9)
    );
}
