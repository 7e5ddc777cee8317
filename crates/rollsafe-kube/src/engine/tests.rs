use super::*;
use rollsafe_core::failure::FailureCode;
use rollsafe_core::rollout::RolloutState;
use serde_json::json;

fn key() -> AnnotationKey {
    AnnotationKey::restarted_at()
}

fn inspected(resource_version: &str) -> RestartPatch {
    RestartPatch::inspect(&json!({
        "metadata": {"name": "web", "uid": "u-1", "resourceVersion": resource_version},
        "spec": {"template": {"metadata": {"annotations": {}}}}
    }))
    .unwrap()
}

fn target() -> WorkloadName {
    WorkloadName {
        kind: WorkloadKind::Deployment,
        name: "web".to_owned(),
    }
}

fn client_for(port: u16) -> kube::Client {
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    Connection::from_config(config).unwrap().client(None)
}

async fn send_to(port: u16, timeout: Duration) -> Result<(), SendError> {
    let patch = inspected("42");
    let annotation = key();
    let expected = Expected {
        annotation: &annotation,
        value: VALUE,
        preconditions: patch.preconditions(),
    };
    send_patch(
        &client_for(port),
        &"shop".parse().unwrap(),
        &target(),
        &patch.document(&annotation, VALUE),
        &expected,
        timeout,
    )
    .await
}

const VALUE: &str = "2026-11-29T18:00:00.123Z";

#[test]
fn values_are_timestamps_unique_per_request() {
    let now: Timestamp = "2026-11-29T18:00:00.123456789Z".parse().unwrap();
    let a = restart_value(now);
    let b = restart_value(now);
    assert_ne!(a, b, "two requests in the same millisecond");
    for value in [&a, &b] {
        let parsed: Timestamp = value.parse().unwrap();
        assert_eq!(value.len(), "2026-11-29T18:00:00.123Z".len(), "{value}");
        assert!(value.ends_with('Z'), "{value}");
        assert!(parsed >= "2026-11-29T18:00:00.123Z".parse().unwrap());
    }
    let (a, b): (Timestamp, Timestamp) = (a.parse().unwrap(), b.parse().unwrap());
    assert!(b > a, "later requests write later values");
    assert_eq!(
        RestartRequest::new("ns".parse().unwrap(), "db".parse().unwrap())
            .at(now)
            .value,
        "2026-11-29T18:00:00.123Z",
        "an explicit time is written as given"
    );
}

#[test]
fn only_the_patched_object_confirms() {
    let patch = inspected("42");
    let annotation = key();
    let expected = Expected {
        annotation: &annotation,
        value: VALUE,
        preconditions: patch.preconditions(),
    };
    let object = |resource_version: Value, value: Value| {
        json!({
            "metadata": {"name": "web", "resourceVersion": resource_version},
            "spec": {"template": {"metadata": {"annotations": {"krypton.io/restarted-at": value}}}}
        })
    };
    let table = [
        (object(json!("43"), json!(VALUE)), true),
        // Nothing changed: the same resourceVersion.
        (object(json!("42"), json!(VALUE)), false),
        // Another request's value.
        (
            object(json!("43"), json!("2026-11-29T18:00:00.122Z")),
            false,
        ),
        (object(json!(43), json!(VALUE)), false),
        (object(Value::Null, json!(VALUE)), false),
        (json!({}), false),
        (json!({"kind": "Status", "status": "Success"}), false),
        (json!([]), false),
    ];
    for (body, confirmed) in table {
        assert_eq!(expected.confirmed_by(&body), confirmed, "{body}");
    }
}

#[tokio::test]
async fn a_refused_patch_is_not_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let failure = send_to(port, Duration::from_secs(5)).await.unwrap_err();
    assert_eq!(
        failure,
        SendError::Failed(Failure {
            code: FailureCode::Unavailable,
            http_status: None
        })
    );
}

#[tokio::test]
async fn a_patch_that_times_out_is_unconfirmed() {
    // A server that accepts and reads but never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(socket);
    });
    let failure = send_to(port, Duration::from_millis(200)).await.unwrap_err();
    assert_eq!(failure, SendError::TimedOut);
    assert_eq!(
        failure.failure(),
        Failure {
            code: FailureCode::Unconfirmed,
            http_status: None
        }
    );
    server.abort();
}

/// A one-route HTTP server answering every request with `status` and `body`.
async fn answering(status: u16, body: &'static str) -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_request| async move {
                    let response = http::Response::builder()
                        .status(status)
                        .header("content-type", "application/json")
                        .body(http_body_util::Full::new(bytes::Bytes::from_static(
                            body.as_bytes(),
                        )))
                        .unwrap();
                    Ok::<_, std::convert::Infallible>(response)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    (port, server)
}

#[tokio::test]
async fn a_2xx_that_does_not_show_the_change_is_unconfirmed() {
    let confirming = r#"{"metadata":{"resourceVersion":"43"},"spec":{"template":{"metadata":{"annotations":{"krypton.io/restarted-at":"2026-11-29T18:00:00.123Z"}}}}}"#;
    let unchanged = r#"{"metadata":{"resourceVersion":"42"},"spec":{"template":{"metadata":{"annotations":{"krypton.io/restarted-at":"2026-11-29T18:00:00.123Z"}}}}}"#;
    let table: [(u16, &'static str, Option<u16>); 6] = [
        (200, confirming, None),
        (200, "", Some(200)),
        (204, "", Some(204)),
        (200, "{}", Some(200)),
        (200, "not json", Some(200)),
        (200, unchanged, Some(200)),
    ];
    for (status, body, unconfirmed) in table {
        let (port, server) = answering(status, body).await;
        let result = send_to(port, Duration::from_secs(10)).await;
        match unconfirmed {
            None => assert_eq!(result, Ok(()), "{status} {body}"),
            Some(http_status) => assert_eq!(
                result,
                Err(SendError::Failed(Failure {
                    code: FailureCode::Unconfirmed,
                    http_status: Some(http_status)
                })),
                "{status} {body}"
            ),
        }
        server.abort();
    }
}

// === The patch phase under paused time ===

fn planned(names: &[&str]) -> Vec<PlannedPatch> {
    names
        .iter()
        .map(|name| PlannedPatch {
            target: WorkloadName {
                kind: WorkloadKind::Deployment,
                name: (*name).to_owned(),
            },
            patch: inspected("1"),
            deferral: None,
            hold: None,
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn no_patch_starts_after_the_phase_deadline() {
    // Each patch takes 10 s; the phase allows 25 s; one slot. Patches start at 0, 10 and 20 s;
    // the fourth would start at 30 s and is never sent.
    let started = std::sync::Mutex::new(Vec::new());
    let results = patch_phase(
        planned(&["a", "b", "c", "d", "e"]),
        Duration::from_secs(25),
        1,
        |planned| {
            let started = &started;
            async move {
                started.lock().unwrap().push(planned.target.name.clone());
                tokio::time::sleep(Duration::from_secs(10)).await;
                Ok(())
            }
        },
    )
    .await;
    assert_eq!(*started.lock().unwrap(), ["a", "b", "c"]);
    let never_sent = Failure::from_transport(TransportFailure::NotSent);
    let outcomes: Vec<_> = results
        .iter()
        .map(|(target, result)| (target.name.as_str(), *result))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("a", Ok(())),
            ("b", Ok(())),
            ("c", Ok(())),
            ("d", Err(never_sent)),
            ("e", Err(never_sent)),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn at_most_the_cap_is_in_flight_and_a_slow_patch_does_not_hold_the_others() {
    let in_flight = std::sync::atomic::AtomicUsize::new(0);
    let peak = std::sync::atomic::AtomicUsize::new(0);
    let begin = Instant::now();
    let names: Vec<String> = (0..12).map(|i| format!("w{i:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let results = patch_phase(
        planned(&names),
        Duration::from_secs(60),
        MAX_PATCHES_IN_FLIGHT,
        |planned| {
            let (in_flight, peak) = (&in_flight, &peak);
            async move {
                use std::sync::atomic::Ordering::SeqCst;
                let now = in_flight.fetch_add(1, SeqCst) + 1;
                peak.fetch_max(now, SeqCst);
                // w00 is slow; every other patch takes 1 s.
                let took = if planned.target.name == "w00" { 9 } else { 1 };
                tokio::time::sleep(Duration::from_secs(took)).await;
                in_flight.fetch_sub(1, SeqCst);
                Ok(())
            }
        },
    )
    .await;
    assert_eq!(
        peak.load(std::sync::atomic::Ordering::SeqCst),
        MAX_PATCHES_IN_FLIGHT
    );
    assert!(results.iter().all(|(_, result)| result.is_ok()));
    // 11 fast patches over the 3 free slots take 4 s; the slow one ends the phase at 9 s.
    assert_eq!(begin.elapsed(), Duration::from_secs(9));
}

#[tokio::test(start_paused = true)]
async fn the_patch_timeout_is_the_engines_configured_value() {
    // A server that never answers; under paused time the configured 15 s elapse at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        std::future::pending::<()>().await;
        drop(socket);
    });
    let begin = Instant::now();
    let result = send_to(port, Timeouts::default().patch).await;
    assert_eq!(result, Err(SendError::TimedOut));
    assert_eq!(begin.elapsed(), Timeouts::default().patch);
    server.abort();
}

fn listed(kind: WorkloadKind, name: &str, object: Value) -> Match {
    Match {
        kind,
        name: name.to_owned(),
        references: Vec::new(),
        object,
    }
}

fn inventory(kind: WorkloadKind, status: InventoryStatus) -> Inventory {
    Inventory {
        kind,
        pages: 1,
        objects: 0,
        bytes: 0,
        status,
    }
}

#[test]
fn the_rollout_view_reads_each_match_and_names_no_identity() {
    let rolling = json!({
        "metadata": {"name": "api", "uid": "uid-api", "resourceVersion": "901", "generation": 4},
        "spec": {"replicas": 3, "template": {"metadata": {"annotations": {"krypton.io/restarted-at": VALUE}}}},
        "status": {"observedGeneration": 4, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3}
    });
    let stalled = json!({
        "metadata": {"name": "web", "uid": "uid-web", "resourceVersion": "902", "generation": 2},
        "spec": {"replicas": 2, "template": {"metadata": {"annotations": {"krypton.io/restarted-at": VALUE}}}},
        "status": {"observedGeneration": 2, "replicas": 3, "updatedReplicas": 1, "readyReplicas": 2, "availableReplicas": 2,
                   "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
                                   "message": "ReplicaSet \"web-7c9\" has timed out progressing."}]}
    });
    let paused = json!({
        "metadata": {"name": "paused", "uid": "uid-paused", "resourceVersion": "903", "generation": 2},
        "spec": {"replicas": 1, "paused": true, "template": {"metadata": {}}},
        "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 0, "availableReplicas": 1}
    });
    let failure = Failure::from_status(403);
    let discovery = Discovery {
        namespace: "shop".parse().unwrap(),
        secret: "db".parse().unwrap(),
        inventories: vec![
            inventory(
                WorkloadKind::Deployment,
                InventoryStatus::Complete {
                    matches: vec![
                        listed(WorkloadKind::Deployment, "api", rolling),
                        listed(WorkloadKind::Deployment, "paused", paused),
                        listed(WorkloadKind::Deployment, "web", stalled),
                    ],
                },
            ),
            inventory(
                WorkloadKind::StatefulSet,
                InventoryStatus::Incomplete {
                    reason: crate::inventory::Incomplete::Http(403),
                    failure,
                },
            ),
            inventory(
                WorkloadKind::DaemonSet,
                InventoryStatus::Complete {
                    matches: Vec::new(),
                },
            ),
        ],
    };
    let view = discovery.rollout(&key());
    assert_eq!(
        (view.namespace.as_str(), view.secret.as_str()),
        ("shop", "db")
    );
    assert_eq!(view.inventories, discovery.preview().inventories);
    assert!(!view.inventories[&WorkloadKind::StatefulSet].complete);
    let states: Vec<(&str, RolloutState, Option<&str>)> = view
        .workloads
        .iter()
        .map(|w| (w.name.as_str(), w.state, w.restarted_at.as_deref()))
        .collect();
    assert_eq!(
        states,
        [
            ("api", RolloutState::Progressing, Some(VALUE)),
            ("paused", RolloutState::Deferred, None),
            ("web", RolloutState::Stalled, Some(VALUE)),
        ]
    );
    assert_eq!(view.workloads[1].deferral, Some(Deferral::Paused));
    let reason = view.workloads[2].reason.as_ref().unwrap();
    assert_eq!(reason.reason, "ProgressDeadlineExceeded");
    assert_eq!(
        reason.message.as_deref(),
        Some("ReplicaSet \"web-7c9\" has timed out progressing.")
    );
    let progress = view.workloads[0].progress.unwrap();
    assert_eq!(
        (progress.desired, progress.updated, progress.ready),
        (3, 1, 3)
    );
    let text = serde_json::to_string(&view).unwrap();
    for identity in [
        "uid-",
        "\"901\"",
        "\"902\"",
        "\"903\"",
        "resourceVersion",
        "uid",
    ] {
        assert!(!text.contains(identity), "{identity} in {text}");
    }
}
