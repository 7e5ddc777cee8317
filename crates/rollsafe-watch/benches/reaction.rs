//! Reaction time and cold start against the in-process emulator, each with a same-run baseline.
//!
//! Run: `cargo bench -p rollsafe-watch --bench reaction`.
//!
//! The scale: 10,000 Secrets (one key of 64 bytes, or `ROLLSAFE_BENCH_VALUE_BYTES`) and
//! 2,000 opted-in Deployments, each consuming one of them by key.
//!
//! - Reaction: debounce 0; 200 consumed Secrets are changed in turn (the change acknowledged by
//!   the API server), and the time until the roll patch is acknowledged is recorded: p50/p99,
//!   against the p50/p99 of a bare JSON Patch round trip to the same server.
//! - Cold start: from the controller's start to ready (every watch listed once), against a raw
//!   paged list (`limit=500`) of the same Secrets, ConfigMaps and workloads.

#![expect(clippy::unwrap_used, reason = "a benchmark may unwrap")]

use std::time::{Duration, Instant};

use base64::Engine as _;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams, Patch, PatchParams};
use rollsafe_testing::{TestCluster, Workload};
use rollsafe_watch::{Controller, ControllerSettings};
use serde_json::{Value, json};

const NS: &str = "bench";
/// Changes measured.
const N: usize = 200;
const SECRETS: usize = 10_000;
const WORKLOADS: usize = 2_000;
/// Secrets per workload in the index space (workload `i` consumes Secret `i * STRIDE`).
const STRIDE: usize = SECRETS / WORKLOADS;

fn secret(index: usize, value: &str, len: usize) -> Value {
    let mut bytes = value.as_bytes().to_vec();
    bytes.resize(len.max(bytes.len()), b'x');
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("s-{index:05}"), "namespace": NS},
        "data": {"k": base64::engine::general_purpose::STANDARD.encode(&bytes)}})
}

fn deployment(index: usize) -> Value {
    let mut object = Workload::deployment(&format!("app-{index:05}"))
        .namespace(NS)
        .with_replicas()
        .build();
    object["metadata"]["annotations"] = json!({"rollsafe.dev/watch": "true"});
    object["spec"]["template"]["spec"]["containers"][0]["env"] = json!([
        {"name": "K", "valueFrom": {"secretKeyRef": {"name": format!("s-{:05}", index * STRIDE), "key": "k"}}}
    ]);
    object
}

fn percentile(samples: &mut [Duration], p: f64) -> Duration {
    samples.sort();
    let index = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[index]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main]
async fn main() {
    let len: usize = std::env::var("ROLLSAFE_BENCH_VALUE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let mut seeds: Vec<Value> = (0..SECRETS).map(|i| secret(i, "0", len)).collect();
    seeds.extend((0..WORKLOADS).map(deployment));
    let TestCluster {
        emu,
        connection,
        dir: _dir,
        ..
    } = TestCluster::start(seeds).await;
    let client = connection.client(None);

    // Baseline for the cold start: a raw paged list of what the controller lists.
    let started = Instant::now();
    let params = ListParams::default().limit(500);
    let mut listed = 0;
    macro_rules! list_all {
        ($kind:ty) => {{
            let api: Api<$kind> = Api::all(client.clone());
            let mut params = params.clone();
            loop {
                let page = api.list(&params).await.unwrap();
                listed += page.items.len();
                match page.metadata.continue_.filter(|c| !c.is_empty()) {
                    Some(token) => params = params.continue_token(&token),
                    None => break,
                }
            }
        }};
    }
    list_all!(Secret);
    list_all!(ConfigMap);
    list_all!(Deployment);
    list_all!(StatefulSet);
    list_all!(DaemonSet);
    let raw_list = started.elapsed();

    // Cold start: controller start → ready; then it adopts everything.
    let started = Instant::now();
    let controller = Controller::new(
        client.clone(),
        ControllerSettings {
            debounce: Duration::ZERO,
            max_rolls_per_minute: 0,
            flap_limit: rollsafe_watch::limits::FlapLimit::parse("0").unwrap(),
            ..ControllerSettings::default()
        },
    );
    let mut status = controller.status();
    let task = tokio::spawn(controller.run(std::future::pending()));
    status.wait_for(|s| s.synced).await.unwrap();
    let cold = started.elapsed();
    status
        .wait_for(|s| s.adoptions == WORKLOADS as u64 && s.pending == 0)
        .await
        .unwrap();

    // Reaction: one change at a time.
    let mut reaction = Vec::with_capacity(N);
    for index in 0..N {
        let rolls = status.borrow().rolls;
        let changed = Instant::now();
        emu.put_object(secret(index * STRIDE, "1", len)).unwrap();
        status.wait_for(|s| s.rolls > rolls).await.unwrap();
        reaction.push(changed.elapsed());
    }
    let confirmations = status.borrow().confirmations;
    task.abort();

    // Baseline: a bare JSON Patch round trip to the same server.
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let mut round_trip = Vec::with_capacity(N);
    for index in 0..N {
        let patch: json_patch::Patch = serde_json::from_value(json!([
            {"op": "add", "path": "/metadata/annotations/bench", "value": format!("{index}")}
        ]))
        .unwrap();
        let sent = Instant::now();
        api.patch(
            &format!("app-{index:05}"),
            &PatchParams::default(),
            &Patch::Json::<()>(patch),
        )
        .await
        .unwrap();
        round_trip.push(sent.elapsed());
    }

    let (r50, r99) = (
        percentile(&mut reaction, 0.5),
        percentile(&mut reaction, 0.99),
    );
    let (b50, b99) = (
        percentile(&mut round_trip, 0.5),
        percentile(&mut round_trip, 0.99),
    );
    println!(
        "{SECRETS} Secrets ({len} B values), {WORKLOADS} opted-in Deployments; reaction over {N} Secret changes, debounce 0 (change acknowledged → roll patch acknowledged):"
    );
    println!(
        "  p50 {:.1} ms, p99 {:.1} ms; bare JSON Patch round trip p50 {:.1} ms, p99 {:.1} ms; ratio p50 {:.1}, p99 {:.1}",
        ms(r50),
        ms(r99),
        ms(b50),
        ms(b99),
        r50.as_secs_f64() / b50.as_secs_f64(),
        r99.as_secs_f64() / b99.as_secs_f64()
    );
    println!(
        "  consistent reads before those rolls: {confirmations} (each change was seen arriving)"
    );
    println!(
        "cold start ({listed} objects): controller ready in {:.1} ms; raw paged list {:.1} ms; ratio {:.1}",
        ms(cold),
        ms(raw_list),
        cold.as_secs_f64() / raw_list.as_secs_f64()
    );
    emu.shutdown().await;
}
