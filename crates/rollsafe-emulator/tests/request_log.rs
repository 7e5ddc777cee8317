//! The request log records every request that reached the server, including those whose client
//! hung up before the answer (status 0): "never sent twice" must be provable from the log alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use rollsafe_emulator::{Fault, FaultAction};
use serde_json::json;

#[tokio::test]
async fn a_request_abandoned_during_a_delay_fault_is_logged_with_status_0() {
    let emu = start().await;
    emu.put_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop"}, "stringData": {"k": "v"}}))
        .unwrap();
    // Long enough that the fault is still holding the request when the log is read.
    let held = Duration::from_secs(60);
    emu.add_fault(
        Fault::on("get", "secrets")
            .name("db")
            .then(FaultAction::Delay {
                millis: u64::try_from(held.as_millis()).unwrap(),
            }),
    );
    let mut config = config(&emu, "admin").await;
    config.read_timeout = Some(Duration::from_millis(200));
    let api: Api<Secret> = Api::namespaced(kube::Client::try_from(config).unwrap(), "shop");
    let err = api.get("db").await.unwrap_err();
    assert!(!matches!(err, kube::Error::Api(_)), "{err:?}");

    // The fault counted it, and the log has it, abandoned.
    assert_eq!(emu.faults()[0].fired, 1);
    let entry = emu
        .wait_for_request(Duration::from_secs(20), |e| e.is("get", "secrets"))
        .await
        .expect("the abandoned request is logged");
    assert_eq!(entry.status, 0, "{entry:?}");
    assert_eq!(entry.name.as_deref(), Some("db"));
    assert_eq!(entry.faults.len(), 1, "{entry:?}");
    assert!(entry.end_micros >= entry.start_micros);
    assert!(
        Duration::from_micros(entry.end_micros - entry.start_micros) < held,
        "logged when abandoned, not when the delay ended"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn every_request_gets_one_entry_with_its_status() {
    let emu = start().await;
    let api: Api<Secret> = Api::namespaced(client(&emu, "admin").await, "shop");
    assert!(api.get("missing").await.is_err());
    let alice: Api<Secret> = Api::namespaced(client(&emu, "alice").await, "shop");
    assert!(alice.get("missing").await.is_err());
    let log = emu.requests_for("get", "secrets");
    assert_eq!(
        log.iter().map(|e| e.status).collect::<Vec<_>>(),
        vec![404, 403]
    );
    let seqs: Vec<u64> = emu.requests().iter().map(|e| e.seq).collect();
    let mut sorted = seqs.clone();
    sorted.dedup();
    assert_eq!(seqs, sorted, "one entry per request, in order");
    emu.shutdown().await;
}
