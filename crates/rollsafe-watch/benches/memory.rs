//! Heap kept per watched object, against a same-run baseline of the full objects as kube's
//! reflector would store them (`DynamicObject`s, without the store's map overhead, so the
//! baseline is if anything low).
//!
//! Run: `cargo bench -p rollsafe-watch --bench memory`. Prints, for Secrets with three keys of
//! 64-byte and of 64 KiB values, the heap per object of the controller's source cache and of the
//! baseline, their ratio, and the heap per cached opted-in workload.

#![expect(clippy::unwrap_used, reason = "a benchmark may unwrap")]

use base64::Engine as _;
use kube::api::DynamicObject;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::WorkloadKind;
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
                "rollsafe.dev/config-record": "v1:0f071164ab80d83e8371e0ef143041aa56738019f0a12018ad11dc35166202d6"}},
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

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    println!("heap per watched Secret ({KEYS} keys each)");
    println!(
        "{:>8} {:>8} {:>14} {:>14} {:>8}",
        "value", "objects", "rollsafe B/obj", "full B/obj", "ratio"
    );
    for (label, value_len, count) in [("64 B", 64, 10_000), ("64 KiB", 64 * 1024, 1_000)] {
        let objects: Vec<Value> = (0..count).map(|i| secret(i, value_len)).collect();

        let before = heap();
        let full: Vec<DynamicObject> = objects
            .iter()
            .map(|o| serde_json::from_value(o.clone()).unwrap())
            .collect();
        let full_bytes = heap() - before;
        drop(full);

        let before = heap();
        let mut cache = Cache::default();
        for object in &objects {
            let key = SourceKey {
                kind: TargetKind::Secret,
                namespace: "bench".to_owned(),
                name: object["metadata"]["name"].as_str().unwrap().to_owned(),
            };
            cache.apply_source(key, SourceEntry::from_object(TargetKind::Secret, object));
        }
        let ours = heap() - before;
        std::hint::black_box(&cache);
        drop(cache);
        println!(
            "{label:>8} {count:>8} {:>14} {:>14} {:>8.1}",
            ours / count,
            full_bytes / count,
            full_bytes as f64 / ours as f64
        );
    }

    let workloads = 2_000;
    let objects: Vec<Value> = (0..workloads).map(deployment).collect();
    let before = heap();
    let mut cache = Cache::default();
    for (index, object) in objects.iter().enumerate() {
        let key = WorkloadKey {
            kind: WorkloadKind::Deployment,
            namespace: "bench".to_owned(),
            name: format!("app-{index:05}"),
        };
        cache.apply_workload(
            key,
            WorkloadEntry::from_object(WorkloadKind::Deployment, object, false),
        );
    }
    let ours = heap() - before;
    std::hint::black_box(&cache);
    let before = heap();
    let full: Vec<DynamicObject> = objects
        .iter()
        .map(|o| serde_json::from_value(o.clone()).unwrap())
        .collect();
    let full_bytes = heap() - before;
    std::hint::black_box(&full);
    println!(
        "heap per opted-in Deployment (3 references, reverse index included): rollsafe {} B, full {} B, ratio {:.1}",
        ours / workloads,
        full_bytes / workloads,
        full_bytes as f64 / ours as f64
    );
}
