//! Heap kept per watched object, against a same-run baseline of the full objects as kube's
//! reflector would store them (`DynamicObject`s, without the store's map overhead, so the
//! baseline is if anything low).
//!
//! Run: `cargo bench -p rollsafe-watch --bench memory` (`ROLLSAFE_BENCH_VALUES=small` or `large`
//! for one size). The scale: 10,000 Secrets with three keys of 64-byte, then of 64 KiB
//! values, and 2,000 opted-in Deployments with three references each (one per Secret, a key, a
//! whole object, a volume); prints the heap per Secret and per workload of the controller's
//! caches (reverse index included) and of the baseline, and their ratios.

#![expect(clippy::unwrap_used, reason = "a benchmark may unwrap")]

use base64::Engine as _;
use kube::api::DynamicObject;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::WatchedKind;
use rollsafe_watch::cache::{Cache, SourceEntry, SourceKey, WorkloadEntry, WorkloadKey};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const KEYS: usize = 3;

fn secret(index: usize, value_len: usize) -> Value {
    let mut data = serde_json::Map::new();
    for key in 0..KEYS {
        // Distinct content per object and key.
        let mut bytes = vec![b'x'; value_len];
        let tag = format!("{index}-{key}");
        bytes[..tag.len()].copy_from_slice(tag.as_bytes());
        data.insert(
            format!("key-{key}"),
            json!(base64::engine::general_purpose::STANDARD.encode(&bytes)),
        );
    }
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {
            "name": format!("secret-{index:05}"), "namespace": "bench",
            "uid": format!("6f1c2a9e-0000-4000-8000-{index:012}"),
            "resourceVersion": format!("{}", 1000 + index),
            "labels": {"app": "bench"},
        },
        "type": "Opaque",
        "data": data,
    })
}

fn deployment(index: usize) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("app-{index:05}"), "namespace": "bench",
            "uid": format!("0b7e3d4c-0000-4000-8000-{index:012}"), "resourceVersion": "7",
            "annotations": {"rollsafe.dev/watch": "true",
                "rollsafe.dev/config-record": "v1:0f071164ab80d83e8371e0ef143041aa56738019f0a12018ad11dc35166202d6;0123456789ab=0123456789abcdef,123456789abc=123456789abcdef0,23456789abcd=23456789abcdef01"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "x"}}, "template": {
            "metadata": {"labels": {"app": "x"}, "annotations": {}},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": format!("secret-{:05}", index * 5), "key": "key-0"}}}],
                "envFrom": [{"secretRef": {"name": format!("secret-{:05}", index * 5 + 1)}}]}],
                "volumes": [{"name": "v", "secret": {"secretName": format!("secret-{:05}", index * 5 + 2)}}]}}}
    })
}

fn heap() -> usize {
    dhat::HeapStats::get().curr_bytes
}

const SECRETS: usize = 10_000;
const WORKLOADS: usize = 2_000;

fn secret_key(object: &Value) -> SourceKey {
    SourceKey {
        kind: TargetKind::Secret,
        namespace: "bench".into(),
        name: object["metadata"]["name"].as_str().unwrap().into(),
    }
}

fn workload_key(index: usize) -> WorkloadKey {
    WorkloadKey {
        kind: WatchedKind::Deployment,
        namespace: "bench".into(),
        name: format!("app-{index:05}").into(),
    }
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let values: Vec<usize> = match std::env::var("ROLLSAFE_BENCH_VALUES").as_deref() {
        Ok("small") => vec![64],
        Ok("large") => vec![64 * 1024],
        _ => vec![64, 64 * 1024],
    };
    println!(
        "{SECRETS} Secrets ({KEYS} keys each) + {WORKLOADS} opted-in Deployments (3 references each); heap per watched object"
    );
    println!(
        "{:>8} {:>16} {:>14} {:>8} {:>16} {:>14} {:>8}",
        "value",
        "rollsafe B/Secret",
        "full B/Secret",
        "ratio",
        "rollsafe B/workl.",
        "full B/workl.",
        "ratio"
    );
    for value_len in values {
        // Objects are generated one at a time and dropped once reduced, so only the structure
        // being measured is alive (the 64 KiB set is 2.6 GB as full objects).
        let before = heap();
        let full: Vec<DynamicObject> = (0..SECRETS)
            .map(|i| serde_json::from_value(secret(i, value_len)).unwrap())
            .collect();
        let full_secrets = heap() - before;
        drop(full);
        let before = heap();
        let full: Vec<DynamicObject> = (0..WORKLOADS)
            .map(|i| serde_json::from_value(deployment(i)).unwrap())
            .collect();
        let full_workloads = heap() - before;
        drop(full);

        let before = heap();
        let mut cache = Cache::default();
        for index in 0..SECRETS {
            let object = secret(index, value_len);
            let entry = SourceEntry::from_object(TargetKind::Secret, &object);
            cache.apply_source(secret_key(&object), entry);
        }
        let ours_secrets = heap() - before;
        let before = heap();
        for index in 0..WORKLOADS {
            let entry =
                WorkloadEntry::from_object(WatchedKind::Deployment, &deployment(index), false);
            cache.apply_workload(workload_key(index), entry);
        }
        let ours_workloads = heap() - before;
        std::hint::black_box(&cache);
        drop(cache);
        let label = if value_len >= 1024 {
            format!("{} KiB", value_len / 1024)
        } else {
            format!("{value_len} B")
        };
        println!(
            "{label:>8} {:>16} {:>14} {:>8.1} {:>16} {:>14} {:>8.1}",
            ours_secrets / SECRETS,
            full_secrets / SECRETS,
            full_secrets as f64 / ours_secrets as f64,
            ours_workloads / WORKLOADS,
            full_workloads / WORKLOADS,
            full_workloads as f64 / ours_workloads as f64,
        );
    }
}
