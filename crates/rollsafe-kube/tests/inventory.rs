//! The budgeted inventory against the emulator: every list corruption it offers, the object,
//! page and byte budgets, and a streamed body that never ends.

#![expect(clippy::unwrap_used, reason = "test helpers may unwrap")]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::*;
use rollsafe_core::contract::RestartStatus;
use rollsafe_core::failure::FailureCode;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_emulator::{Fault, FaultAction, ListCorruption};
use rollsafe_kube::inventory::MAX_PAGES;
use rollsafe_kube::{Budget, Incomplete, InventoryStatus, RestartEngine};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// 250 Deployments (three pages; three consumers, one on each page), one consuming
/// StatefulSet and one consuming DaemonSet.
fn three_pages() -> Vec<Value> {
    let mut seeds = Vec::new();
    for i in 0..250 {
        let consumes = [5, 120, 240].contains(&i);
        seeds.push(deployment(
            &format!("web-{i:03}"),
            consumes.then_some(SECRET),
        ));
    }
    seeds.push(stateful_set("worker", Some(SECRET)));
    seeds.push(daemon_set("agent", Some(SECRET)));
    seeds
}

fn reason(discovery: &rollsafe_kube::Discovery, kind: WorkloadKind) -> Option<Incomplete> {
    let inventory = discovery.inventories.iter().find(|i| i.kind == kind)?;
    match inventory.status {
        InventoryStatus::Incomplete { reason, .. } => Some(reason),
        InventoryStatus::Complete { .. } => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_list_corruption_makes_only_that_kind_incomplete() {
    let env = Env::start(three_pages()).await;
    // (corruption, which Deployment list request, expected reason, expected httpStatus)
    let cases = [
        (ListCorruption::ShortPage, 1, Incomplete::ShortPage, 503),
        (
            ListCorruption::OversizedPage,
            1,
            Incomplete::PageOverLimit,
            503,
        ),
        (
            ListCorruption::RepeatedContinue,
            2,
            Incomplete::RepeatedContinue,
            503,
        ),
        (
            ListCorruption::MalformedContinue,
            1,
            Incomplete::ContinueRejected,
            400,
        ),
        (
            ListCorruption::ExpiredContinue,
            2,
            Incomplete::ContinueExpired,
            410,
        ),
        (
            ListCorruption::ItemWithoutName,
            2,
            Incomplete::MissingName,
            503,
        ),
        (ListCorruption::WrongKind, 2, Incomplete::NotAList, 503),
        (ListCorruption::TruncatedJson, 3, Incomplete::NotAList, 503),
    ];
    for (corruption, nth, expected, http_status) in cases {
        let fault = || {
            Fault::on("list", "deployments")
                .namespace(NS)
                .nth(nth)
                .then(FaultAction::list(corruption))
        };
        // Dry run: the precise reason.
        env.emu.reset().unwrap();
        env.emu.add_fault(fault());
        let discovery = env.engine().discover(&ns(), &secret_name(), None).await;
        assert_eq!(
            reason(&discovery, WorkloadKind::Deployment),
            Some(expected),
            "{corruption:?}"
        );
        assert_eq!(reason(&discovery, WorkloadKind::StatefulSet), None);
        assert_eq!(reason(&discovery, WorkloadKind::DaemonSet), None);
        assert_eq!(discovery.matches().count(), 2, "{corruption:?}");

        // A run: no Deployment patched, even the consumer on an earlier good page; the other
        // kinds proceed.
        env.emu.reset().unwrap();
        env.emu.add_fault(fault());
        let result = env.run().await;
        assert_eq!(result.status, RestartStatus::Partial, "{corruption:?}");
        assert_eq!(result.matched, 2);
        assert_eq!(
            result_json(&result)["discoveryFailures"],
            json!([{
                "kind": "Deployment",
                "code": "incomplete_list",
                "message": FailureCode::IncompleteList.discovery_message(),
                "httpStatus": http_status
            }]),
            "{corruption:?}"
        );
        assert!(env.emu.requests_for("patch", "deployments").is_empty());
        assert_eq!(env.patched_names("statefulsets"), ["worker"]);
        assert_eq!(env.patched_names("daemonsets"), ["agent"]);
        env.assert_nothing_sent_twice();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_without_uid_or_resource_version_become_failures() {
    let env = Env::start(three_pages()).await;
    for corruption in [
        ListCorruption::ItemWithoutUid,
        ListCorruption::ItemWithoutResourceVersion,
    ] {
        env.emu.reset().unwrap();
        // The first item of the first StatefulSet page is the consumer "worker".
        env.emu
            .add_fault(Fault::on("list", "statefulsets").then(FaultAction::list(corruption)));
        let result = env.run().await;
        assert_eq!(result.status, RestartStatus::Partial, "{corruption:?}");
        assert_eq!(result.matched, 5);
        assert_eq!(result.failures.len(), 1);
        let failure = &result.failures[0];
        assert_eq!(
            (
                failure.kind,
                failure.name.as_str(),
                failure.code,
                failure.http_status
            ),
            (
                WorkloadKind::StatefulSet,
                "worker",
                FailureCode::IncompleteList,
                Some(503)
            )
        );
        assert!(env.emu.requests_for("patch", "statefulsets").is_empty());
        assert_eq!(env.emu.requests_for("patch", "deployments").len(), 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_error_is_classified_per_kind() {
    let env = Env::start(three_pages()).await;
    for (status, code) in [
        (401, FailureCode::Unauthenticated),
        (403, FailureCode::Forbidden),
        (429, FailureCode::RateLimited),
        (500, FailureCode::Unavailable),
        (503, FailureCode::Unavailable),
        (504, FailureCode::Unconfirmed),
    ] {
        env.emu.reset().unwrap();
        // Fail the second page: the consumer on the first page is not patched either.
        env.emu.add_fault(
            Fault::on("list", "deployments")
                .nth(2)
                .then(FaultAction::status(status)),
        );
        let result = env.run().await;
        assert_eq!(result.status, RestartStatus::Partial);
        let failure = &result.discovery_failures[0];
        assert_eq!(
            (failure.kind, failure.code, failure.http_status),
            (WorkloadKind::Deployment, code, Some(status))
        );
        assert_eq!(env.emu.requests_for("list", "deployments").len(), 2);
        assert!(env.emu.requests_for("patch", "deployments").is_empty());
        env.assert_nothing_sent_twice();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_objects_are_complete_and_2001_are_not() {
    let mut seeds: Vec<Value> = (0..2000)
        .map(|i| deployment(&format!("web-{i:04}"), (i == 1999).then_some(SECRET)))
        .collect();
    let env = Env::start(seeds.clone()).await;
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Requested);
    assert_eq!(env.emu.requests_for("list", "deployments").len(), 20);

    seeds.push(deployment("web-2000", None));
    let env = Env::start(seeds).await;
    let discovery = env.engine().discover(&ns(), &secret_name(), None).await;
    assert_eq!(
        reason(&discovery, WorkloadKind::Deployment),
        Some(Incomplete::ObjectBudget)
    );
    env.emu.reset().unwrap();
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(
        result.discovery_failures[0].code,
        FailureCode::IncompleteList
    );
    assert_eq!(result.discovery_failures[0].http_status, Some(503));
    assert!(env.patches().is_empty());
    assert_eq!(env.emu.requests_for("list", "deployments").len(), 21);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_budget_stops_before_the_page_past_it() {
    // With the contract's 100-object pages the object budget (2,000) is reached long before
    // page 101; a smaller page budget shows the page rule on its own.
    assert_eq!(MAX_PAGES, 100);
    let env = Env::start(three_pages()).await;
    let engine = env.engine().with_budget(Budget {
        max_pages: 2,
        ..Budget::default()
    });
    let discovery = engine.discover(&ns(), &secret_name(), None).await;
    assert_eq!(
        reason(&discovery, WorkloadKind::Deployment),
        Some(Incomplete::PageBudget)
    );
    // Exactly two pages were requested; the third was never asked for.
    assert_eq!(env.emu.requests_for("list", "deployments").len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_over_32_mib_is_refused_without_reading_it_all() {
    // 200 Deployments of ~300 KiB each: two pages of ~30 MiB, ~60 MiB in all.
    let padding = "x".repeat(300 * 1024);
    let seeds: Vec<Value> = (0..200)
        .map(|i| {
            let mut d = deployment(&format!("big-{i:03}"), (i == 0).then_some(SECRET));
            d["spec"]["template"]["spec"]["containers"][0]["env"] =
                json!([{"name": "PADDING", "value": padding}]);
            d
        })
        .collect();
    let env = Env::start(seeds).await;
    let discovery = env.engine().discover(&ns(), &secret_name(), None).await;
    let inventory = &discovery.inventories[0];
    assert_eq!(
        reason(&discovery, WorkloadKind::Deployment),
        Some(Incomplete::ByteBudget)
    );
    assert!(inventory.matches().is_empty());
    // The first page (~30 MiB) was read; the second, whose declared length passes the
    // budget, was not read at all.
    assert!(inventory.bytes > 29 * 1024 * 1024, "{}", inventory.bytes);
    assert!(inventory.bytes <= 32 * 1024 * 1024, "{}", inventory.bytes);
    assert_eq!(env.emu.requests_for("list", "deployments").len(), 2);

    env.emu.reset().unwrap();
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(result.discovery_failures[0].http_status, Some(503));
    assert!(env.patches().is_empty());
}

/// A fake API server whose every list response is an endless chunked JSON body. Returns its
/// URL and the bytes it managed to write per connection.
async fn endless_list_server() -> (String, Arc<Vec<AtomicU64>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let written: Arc<Vec<AtomicU64>> = Arc::new((0..8).map(|_| AtomicU64::new(0)).collect());
    let counters = written.clone();
    tokio::spawn(async move {
        let mut index = 0;
        while let Ok((mut socket, _)) = listener.accept().await {
            let counters = counters.clone();
            let slot = index;
            index += 1;
            tokio::spawn(async move {
                let mut head = vec![0u8; 4096];
                let _ = socket.read(&mut head).await;
                let start = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(start.as_bytes()).await.is_err() {
                    return;
                }
                let chunk = vec![b' '; 64 * 1024];
                let framed = [
                    format!("{:x}\r\n", chunk.len()).into_bytes(),
                    chunk,
                    b"\r\n".to_vec(),
                ]
                .concat();
                // At most 256 MiB, then give up.
                for _ in 0..4096 {
                    if socket.write_all(&framed).await.is_err() {
                        return;
                    }
                    if let Some(counter) = counters.get(slot) {
                        counter.fetch_add(64 * 1024, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    (url, written)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_streamed_body_is_cut_at_the_budget() {
    let (url, written) = endless_list_server().await;
    let config = kube::Config::new(url.parse().unwrap());
    let connection = rollsafe_kube::Connection::from_config(config).unwrap();
    let discovery = RestartEngine::new(&connection)
        .discover(&ns(), &secret_name(), None)
        .await;
    for inventory in &discovery.inventories {
        assert!(matches!(
            inventory.status,
            InventoryStatus::Incomplete {
                reason: Incomplete::ByteBudget,
                ..
            }
        ));
        // Reading stopped at the first chunk past 32 MiB.
        assert!(inventory.bytes > 32 * 1024 * 1024);
        assert!(
            inventory.bytes <= 32 * 1024 * 1024 + 1024 * 1024,
            "{}",
            inventory.bytes
        );
    }
    // The server could push only what fits in the budget plus socket buffers before the
    // client hung up — far from the 256 MiB it would have sent.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let total: u64 = written.iter().map(|c| c.load(Ordering::SeqCst)).sum();
        let snapshot: Vec<u64> = written.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        let again: Vec<u64> = written.iter().map(|c| c.load(Ordering::SeqCst)).collect();
        if snapshot == again || tokio::time::Instant::now() > deadline {
            for bytes in again {
                assert!(bytes < 64 * 1024 * 1024, "server wrote {bytes} bytes");
            }
            assert!(total >= 3 * 32 * 1024 * 1024);
            break;
        }
    }
}
