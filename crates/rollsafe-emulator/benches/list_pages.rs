//! Lists 2,000 Deployments in pages of 100 through HTTP (kube client, TLS, keep-alive) and
//! reports pages per second and server-side time per page, against two baselines measured in
//! the same run: a GET of one Deployment, and the same paged list with 18,000 more objects
//! (ConfigMaps) in the store, 20,000 in all. Then the same paged list as `kubectl get` asks for
//! it (a `meta.k8s.io/v1` Table), against the JSON list of the same run: tables must not cost
//! more than 20 % of list throughput.
//!
//! Run: `cargo bench -p rollsafe-emulator --bench list_pages`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use kube::config::{KubeConfigOptions, Kubeconfig};
use rollsafe_emulator::{Emulator, Handle, RunningEmulator};
use serde_json::{Value, json};

const DEPLOYMENTS: usize = 2_000;
const PAGE: usize = 100;
const ROUNDS: usize = 20;
const GETS: usize = 2_000;
const EXTRA_OBJECTS: usize = 18_000;

async fn client(emu: &RunningEmulator) -> kube::Client {
    let kc = Kubeconfig::from_yaml(&emu.kubeconfig_yaml()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

/// What `kubectl get` sends.
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

/// Every page of the list; with `accept`, as that representation (rows of a Table count as
/// items).
async fn list_all_as(client: &kube::Client, accept: Option<&str>) -> usize {
    let mut token: Option<String> = None;
    let mut items = 0;
    loop {
        let mut uri = format!("/apis/apps/v1/namespaces/bench/deployments?limit={PAGE}");
        if let Some(t) = &token {
            uri.push_str("&continue=");
            uri.push_str(t);
        }
        let mut req = http::Request::get(uri);
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        let text = client
            .request_text(req.body(Vec::new()).unwrap())
            .await
            .unwrap();
        let page: Value = serde_json::from_str(&text).unwrap();
        let field = if accept.is_some() { "rows" } else { "items" };
        items += page[field].as_array().map(Vec::len).unwrap_or(0);
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return items,
        }
    }
}

struct Figures {
    per_second: f64,
    server_micros: f64,
}

fn server_micros(handle: &Handle, verb: &str, resource: &str) -> f64 {
    let entries = handle.requests_for(verb, resource);
    let total: u64 = entries.iter().map(|e| e.end_micros - e.start_micros).sum();
    total as f64 / entries.len().max(1) as f64
}

async fn measure_lists(emu: &RunningEmulator, client: &kube::Client) -> Figures {
    measure_lists_as(emu, client, None).await
}

async fn measure_lists_as(
    emu: &RunningEmulator,
    client: &kube::Client,
    accept: Option<&str>,
) -> Figures {
    assert_eq!(list_all_as(client, accept).await, DEPLOYMENTS, "warm-up");
    emu.clear_requests();
    let start = Instant::now();
    for _ in 0..ROUNDS {
        assert_eq!(list_all_as(client, accept).await, DEPLOYMENTS);
    }
    let elapsed = start.elapsed();
    let pages = (ROUNDS * DEPLOYMENTS / PAGE) as f64;
    Figures {
        per_second: pages / elapsed.as_secs_f64(),
        server_micros: server_micros(emu, "list", "deployments"),
    }
}

async fn measure_gets(emu: &RunningEmulator, client: &kube::Client) -> Figures {
    emu.clear_requests();
    let start = Instant::now();
    for i in 0..GETS {
        let uri = format!(
            "/apis/apps/v1/namespaces/bench/deployments/d{:05}",
            i % DEPLOYMENTS
        );
        let req = http::Request::get(uri).body(Vec::new()).unwrap();
        client.request_text(req).await.unwrap();
    }
    let elapsed = start.elapsed();
    Figures {
        per_second: GETS as f64 / elapsed.as_secs_f64(),
        server_micros: server_micros(emu, "get", "deployments"),
    }
}

fn deployment(i: usize) -> Value {
    let name = format!("d{i:05}");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "bench", "labels": {"app": name, "tier": "web"},
                     "annotations": {"team": "payments"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{
                    "name": "app", "image": "registry.example/app:1",
                    "env": [{"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}],
                    "envFrom": [{"configMapRef": {"name": "settings"}}],
                    "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]
                }],
                "volumes": [{"name": "tls", "secret": {"secretName": "tls"}}]}
            }
        }
    })
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let seeds: Vec<Value> = (0..DEPLOYMENTS).map(deployment).collect();
        let emu = Emulator::builder()
            .seed_objects(seeds)
            .bookmark_interval(Duration::from_secs(60))
            .start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let client = client(&emu).await;

        let gets = measure_gets(&emu, &client).await;
        let small = measure_lists(&emu, &client).await;
        let table = measure_lists_as(&emu, &client, Some(TABLE)).await;
        for i in 0..EXTRA_OBJECTS {
            emu.put_object(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("c{i:05}"), "namespace": format!("ns{:02}", i % 50)},
                "data": {"k": "v"}
            }))
            .unwrap();
        }
        let large = measure_lists(&emu, &client).await;

        println!("list {DEPLOYMENTS} Deployments in pages of {PAGE} over HTTP ({ROUNDS} rounds)");
        println!(
            "  2,000 objects stored : {:8.0} pages/s   server {:7.1} us/page",
            small.per_second, small.server_micros
        );
        println!(
            "  20,000 objects stored: {:8.0} pages/s   server {:7.1} us/page",
            large.per_second, large.server_micros
        );
        println!(
            "  baseline GET of one Deployment: {:8.0} req/s   server {:7.1} us/request",
            gets.per_second, gets.server_micros
        );
        println!(
            "  ratio page/GET (server time): {:.1}x   ratio 20,000/2,000 objects (server time per page): {:.2}x",
            small.server_micros / gets.server_micros.max(0.001),
            large.server_micros / small.server_micros.max(0.001)
        );
        println!(
            "  as kubectl get's Table: {:8.0} pages/s   server {:7.1} us/page   throughput x{:.2} of the JSON list (budget >= 0.80)",
            table.per_second,
            table.server_micros,
            table.per_second / small.per_second.max(0.001)
        );
        emu.shutdown().await;
    });
}
