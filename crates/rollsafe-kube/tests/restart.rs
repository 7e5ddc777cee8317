//! Restart Consumers against the emulator: the result table, the seed's 207 example, every
//! failure code, transport failures, conflicts, the in-flight cap, impersonation and the
//! acknowledged-is-not-rolled limit.

mod common;

use common::*;
use rollsafe_core::contract::RestartStatus;
use rollsafe_core::failure::FailureCode;
use rollsafe_emulator::{Fault, FaultAction};
use rollsafe_kube::{Impersonation, MAX_PATCHES_IN_FLIGHT, restart_value};
use serde_json::json;

/// The seed's 207 example, verbatim: one copy for every suite that checks it.
const SEED_207_EXAMPLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/seed-207-example.json"
));

// ---------------------------------------------------------------------------------------------
// One test per row of the result table.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requested_when_every_match_is_acknowledged() {
    let env = Env::start(vec![
        deployment("api-server", Some(SECRET)),
        deployment("unrelated", Some("other-secret")),
        stateful_set("worker", Some(SECRET)),
        daemon_set("agent", None),
    ])
    .await;
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Requested);
    assert_eq!(result.http_status(), 200);
    assert_eq!(
        result_json(&result),
        json!({
            "status": "requested",
            "matched": 2,
            "requested": [
                {"kind": "Deployment", "name": "api-server"},
                {"kind": "StatefulSet", "name": "worker"}
            ],
            "failures": [],
            "discoveryFailures": [],
            "message": "Rollout requested for 2 of 2 matched workloads.",
            "note": "Only acknowledged pod-template patches are reported as requested. Rollout completion, readiness, and credential uptake are not verified."
        })
    );
    assert_eq!(
        env.annotation("deployments", "api-server").as_deref(),
        Some(NOW)
    );
    assert_eq!(
        env.annotation("statefulsets", "worker").as_deref(),
        Some(NOW)
    );
    assert_eq!(env.annotation("deployments", "unrelated"), None);
    // One patch each, JSON Patch, testing uid and resourceVersion first.
    let patches = env.patches();
    assert_eq!(patches.len(), 2);
    for patch in &patches {
        assert_eq!(
            patch.content_type.as_deref(),
            Some("application/json-patch+json")
        );
        let body: serde_json::Value = serde_json::from_str(patch.body.as_deref().unwrap()).unwrap();
        assert_eq!(body[0]["op"], "test");
        assert_eq!(body[0]["path"], "/metadata/uid");
        assert_eq!(body[1]["op"], "test");
        assert_eq!(body[1]["path"], "/metadata/resourceVersion");
        assert_eq!(body[2]["op"], "add");
    }
    // Lists: limit=100, no resourceVersion.
    for kind in ["deployments", "statefulsets", "daemonsets"] {
        let lists = env.emu.requests_for("list", kind);
        assert_eq!(lists.len(), 1, "{kind}");
        assert_eq!(lists[0].query_param("limit").as_deref(), Some("100"));
        assert_eq!(lists[0].query_param("resourceVersion"), None);
    }
    // Discovery settled before the first patch.
    let last_list_end = env
        .emu
        .requests()
        .iter()
        .filter(|r| r.verb.as_deref() == Some("list"))
        .map(|r| r.end_micros)
        .max()
        .unwrap();
    assert!(patches.iter().all(|p| p.start_micros >= last_list_end));
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_names_its_targets_and_patches_nothing_until_executed() {
    let env = Env::start(vec![
        stateful_set("worker", Some(SECRET)),
        deployment("api-server", Some(SECRET)),
        deployment("unrelated", Some("other-secret")),
    ])
    .await;
    env.emu.add_fault(
        Fault::on("list", "daemonsets")
            .namespace(NS)
            .then(FaultAction::status(403)),
    );
    let engine = env.engine();
    let plan = engine.plan(&request()).await;
    let targets: Vec<_> = plan
        .targets()
        .map(|t| (t.kind.as_str(), t.name.as_str()))
        .collect();
    assert_eq!(
        targets,
        [("Deployment", "api-server"), ("StatefulSet", "worker")]
    );
    let failures: Vec<_> = plan
        .discovery_failures()
        .map(|(kind, failure)| (kind.as_str(), failure.code))
        .collect();
    assert_eq!(failures, [("DaemonSet", FailureCode::Forbidden)]);
    assert_eq!(plan.unpatchable().len(), 0);
    // Between the phases nothing has been patched: an intent record can be made here.
    assert!(env.patches().is_empty());
    assert_eq!(env.annotation("deployments", "api-server"), None);

    let result = engine.execute(plan).await;
    assert_eq!(result.status, RestartStatus::Partial);
    assert_eq!(env.patched_names("deployments"), ["api-server"]);
    assert_eq!(env.patched_names("statefulsets"), ["worker"]);
    assert_eq!(result.discovery_failures.len(), 1);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_targets_when_nothing_references_the_secret() {
    let env = Env::start(vec![
        deployment("web", Some("db-creds-old")),
        stateful_set("db", None),
    ])
    .await;
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::NoTargets);
    assert_eq!(result.http_status(), 200);
    assert_eq!(result.matched, 0);
    assert_eq!(result.message, "No workloads reference this Secret.");
    assert!(env.patches().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_reproduces_the_seed_207_example() {
    let env = Env::start(vec![
        deployment("api-server", Some(SECRET)),
        stateful_set("worker", Some(SECRET)),
    ])
    .await;
    env.emu.add_fault(
        Fault::on("patch", "statefulsets")
            .name("worker")
            .then(FaultAction::status(403)),
    );
    let result = env.run().await;
    assert_eq!(result.http_status(), 207);
    let seed_example: serde_json::Value = serde_json::from_str(SEED_207_EXAMPLE).unwrap();
    assert_eq!(result_json(&result), seed_example);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_when_a_kind_fails_discovery() {
    let env = Env::start(vec![
        deployment("api-server", Some(SECRET)),
        daemon_set("agent", Some(SECRET)),
    ])
    .await;
    env.emu
        .add_fault(Fault::on("list", "daemonsets").then(FaultAction::status(403)));
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Partial);
    assert_eq!(result.http_status(), 207);
    assert_eq!(result.matched, 1);
    assert_eq!(
        result_json(&result)["discoveryFailures"],
        json!([{
            "kind": "DaemonSet", "code": "forbidden",
            "message": "Access denied. Check Kubernetes permissions for the effective identity and, when enabled, ServiceAccount impersonation permissions.",
            "httpStatus": 403
        }])
    );
    assert_eq!(
        result.message,
        "Rollout requested for 1 of 1 matched workload. Discovery failed for 1 workload kind."
    );
    assert_eq!(env.patched_names("daemonsets"), Vec::<String>::new());
    assert_eq!(env.annotation("daemonsets", "agent"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_when_no_patch_is_acknowledged() {
    let env = Env::start(vec![
        deployment("api-server", Some(SECRET)),
        stateful_set("worker", Some(SECRET)),
    ])
    .await;
    env.emu.add_fault(
        Fault::on("patch", "*")
            .always()
            .then(FaultAction::status(500)),
    );
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(result.http_status(), 503);
    let body = result_json(&result);
    assert_eq!(
        body["message"],
        "No rollout was requested. 2 patch requests failed."
    );
    assert_eq!(body["error"], body["message"]);
    assert_eq!(body["matched"], 2);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_not_no_targets_when_discovery_fails_with_zero_matches() {
    let env = Env::start(vec![deployment("web", None)]).await;
    env.emu
        .add_fault(Fault::on("list", "statefulsets").then(FaultAction::status(503)));
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(result.matched, 0);
    assert_eq!(
        result.message,
        "No rollout was requested. Discovery failed for 1 workload kind."
    );
    assert_eq!(result.discovery_failures[0].code, FailureCode::Unavailable);
    assert_eq!(result.discovery_failures[0].http_status, Some(503));
    // 503 is not retried.
    assert_eq!(env.emu.requests_for("list", "statefulsets").len(), 1);
}

// ---------------------------------------------------------------------------------------------
// One test per failure code.

async fn single_patch_failure(
    action: FaultAction,
) -> (Env, rollsafe_core::contract::RestartResult) {
    let env = Env::start(vec![
        deployment("web", Some(SECRET)),
        deployment("api", Some(SECRET)),
    ])
    .await;
    env.emu
        .add_fault(Fault::on("patch", "deployments").name("web").then(action));
    let result = env.run().await;
    (env, result)
}

async fn assert_patch_status(status: u16, code: FailureCode) {
    let (env, result) = single_patch_failure(FaultAction::status(status)).await;
    assert_eq!(result.status, RestartStatus::Partial, "HTTP {status}");
    assert_eq!(result.failures.len(), 1);
    let failure = &result.failures[0];
    assert_eq!(
        (failure.name.as_str(), failure.code, failure.http_status),
        ("web", code, Some(status)),
        "HTTP {status}"
    );
    assert_eq!(failure.message, code.message());
    assert_eq!(env.patched_names("deployments"), ["api", "web"]);
    assert_eq!(env.annotation("deployments", "web"), None);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_401_is_unauthenticated() {
    assert_patch_status(401, FailureCode::Unauthenticated).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_403_is_forbidden() {
    assert_patch_status(403, FailureCode::Forbidden).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_404_is_not_found() {
    assert_patch_status(404, FailureCode::NotFound).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_409_is_conflict() {
    assert_patch_status(409, FailureCode::Conflict).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_422_is_conflict() {
    assert_patch_status(422, FailureCode::Conflict).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_400_is_invalid_request() {
    assert_patch_status(400, FailureCode::InvalidRequest).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_500_is_unavailable() {
    assert_patch_status(500, FailureCode::Unavailable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_503_is_unavailable_and_not_retried() {
    assert_patch_status(503, FailureCode::Unavailable).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_504_is_unconfirmed_and_not_retried() {
    assert_patch_status(504, FailureCode::Unconfirmed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_429_with_retry_after_is_rate_limited_and_not_retried() {
    let (env, result) = single_patch_failure(FaultAction::status_retry_after(429, 1)).await;
    let failure = &result.failures[0];
    assert_eq!(
        (failure.code, failure.http_status),
        (FailureCode::RateLimited, Some(429))
    );
    assert_eq!(env.emu.requests_for("patch", "deployments").len(), 2);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_text_429_uses_the_status_line() {
    let (env, result) = single_patch_failure(FaultAction::plain_text(
        429,
        "Too many requests, please try again later.",
    ))
    .await;
    let failure = &result.failures[0];
    assert_eq!(
        (failure.code, failure.http_status),
        (FailureCode::RateLimited, Some(429))
    );
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_error_text_never_reaches_the_result() {
    // The status line decides the code; the upstream message is dropped.
    let action = FaultAction::Status {
        code: 409,
        reason: Some("Conflict".into()),
        message: Some("anything".into()),
        retry_after_seconds: None,
        plain_text: false,
    };
    let (_env, result) = single_patch_failure(action).await;
    assert_eq!(result.failures[0].http_status, Some(409));
    assert!(!serde_json::to_string(&result).unwrap().contains("anything"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_after_the_patch_was_applied_is_unconfirmed() {
    let (env, result) = single_patch_failure(FaultAction::DropAfterApply).await;
    let failure = &result.failures[0];
    assert_eq!(
        (failure.name.as_str(), failure.code, failure.http_status),
        ("web", FailureCode::Unconfirmed, None)
    );
    // The object really did change.
    assert_eq!(env.annotation("deployments", "web").as_deref(), Some(NOW));
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_before_apply_is_still_unconfirmed_from_the_client_side() {
    // The request was written before the reset: the client cannot know it was not applied.
    let (env, result) = single_patch_failure(FaultAction::DropBeforeApply).await;
    assert_eq!(result.failures[0].code, FailureCode::Unconfirmed);
    assert_eq!(env.annotation("deployments", "web"), None);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_is_unavailable_not_unconfirmed() {
    // A port with nothing listening: every request is refused before it is sent.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    config.default_namespace = NS.into();
    let connection = rollsafe_kube::Connection::from_config(config).unwrap();
    let result = rollsafe_kube::RestartEngine::new(&connection)
        .run(&request())
        .await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(result.discovery_failures.len(), 3);
    for failure in &result.discovery_failures {
        assert_eq!(
            (failure.code, failure.http_status),
            (FailureCode::Unavailable, None)
        );
    }
    // The patch path is covered by the engine's unit test `a_refused_patch_is_not_sent`.
}

// ---------------------------------------------------------------------------------------------
// Changes between list and patch.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_edited_between_list_and_patch_is_a_conflict() {
    let (env, result) = single_patch_failure(FaultAction::ConcurrentEdit { patch: None }).await;
    let failure = &result.failures[0];
    assert_eq!(failure.code, FailureCode::Conflict);
    assert_eq!(failure.http_status, Some(422));
    assert_eq!(env.annotation("deployments", "web"), None);
    assert!(!env.emu.rollouts().iter().any(|r| r.name == "web"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_same_name_replacement_is_a_conflict() {
    let (env, result) = single_patch_failure(FaultAction::DeleteAndRecreate).await;
    let failure = &result.failures[0];
    assert_eq!(failure.code, FailureCode::Conflict);
    assert_eq!(failure.http_status, Some(422));
    assert_eq!(env.annotation("deployments", "web"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_deleted_after_discovery_is_not_found() {
    let env = Env::start(vec![
        deployment("web", Some(SECRET)),
        deployment("api", Some(SECRET)),
    ])
    .await;
    // Hold the DaemonSet list so there is a window between the Deployment list and the patches.
    env.emu
        .add_fault(Fault::on("list", "daemonsets").then(FaultAction::Delay { millis: 400 }));
    let engine = env.engine();
    let run = tokio::spawn(async move { engine.run(&request()).await });
    let listed = env
        .emu
        .wait_for_request(std::time::Duration::from_secs(10), |r| {
            r.is("list", "deployments") && r.status == 200
        })
        .await;
    assert!(listed.is_some());
    assert!(env.patches().is_empty(), "discovery must settle first");
    env.emu
        .delete_object("deployments", Some(NS), "web")
        .unwrap();
    let result = run.await.unwrap();
    assert_eq!(result.status, RestartStatus::Partial);
    let failure = &result.failures[0];
    assert_eq!(
        (failure.name.as_str(), failure.code, failure.http_status),
        ("web", FailureCode::NotFound, Some(404))
    );
}

// ---------------------------------------------------------------------------------------------
// Concurrency, identity, and what "requested" means.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_four_patches_are_in_flight() {
    let mut seeds = Vec::new();
    for i in 0..30 {
        seeds.push(deployment(&format!("web-{i:02}"), Some(SECRET)));
    }
    for i in 0..10 {
        seeds.push(stateful_set(&format!("db-{i:02}"), Some(SECRET)));
        seeds.push(daemon_set(&format!("agent-{i:02}"), Some(SECRET)));
    }
    let env = Env::start(seeds).await;
    env.emu.add_fault(
        Fault::on("patch", "*")
            .always()
            .then(FaultAction::Delay { millis: 40 }),
    );
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Requested);
    assert_eq!(result.requested.len(), 50);
    let patches = env.patches();
    assert_eq!(patches.len(), 50);
    let peak = peak_overlap(&patches);
    assert_eq!(peak, MAX_PATCHES_IN_FLIGHT, "peak across kinds");
    assert!(env.emu.peak_in_flight("patch", "deployments") <= 4);
    assert_eq!(env.emu.peak_in_flight("patch", "deployments"), 4);
    env.assert_nothing_sent_twice();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_headers_are_on_every_request() {
    let mut seeds = rbac_for_group("devs");
    for i in 0..150 {
        seeds.push(deployment(
            &format!("web-{i:03}"),
            (i % 50 == 0).then_some(SECRET),
        ));
    }
    seeds.push(stateful_set("worker", Some(SECRET)));
    let env = Env::start(seeds).await;
    let identity = Impersonation::new("ada@example.com", ["devs", "ops", "devs"]).unwrap();
    let result = env.run_as(Some(&identity)).await;
    assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
    assert_eq!(result.requested.len(), 4);
    let requests = env.emu.requests();
    // Two Deployment pages, one each for the others, four patches.
    assert_eq!(requests.len(), 2 + 1 + 1 + 4);
    for request in &requests {
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("ada@example.com")
        );
        assert_eq!(request.impersonated_groups, ["devs", "ops", "devs"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_impersonated_identity_without_rights_gets_classified_failures() {
    let env = Env::start(vec![deployment("web", Some(SECRET))]).await;
    let identity = Impersonation::new("mallory@example.com", ["nobody"]).unwrap();
    let result = env.run_as(Some(&identity)).await;
    assert_eq!(result.status, RestartStatus::Failed);
    assert_eq!(result.discovery_failures.len(), 3);
    assert!(
        result
            .discovery_failures
            .iter()
            .all(|f| f.code == FailureCode::Forbidden && f.http_status == Some(403))
    );
    assert!(env.patches().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_and_on_delete_workloads_are_requested_but_do_not_roll() {
    let mut paused = deployment("paused", Some(SECRET));
    paused["spec"]["paused"] = json!(true);
    let mut sts = stateful_set("ondelete", Some(SECRET));
    sts["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let mut ds = daemon_set("ondelete", Some(SECRET));
    ds["spec"]["updateStrategy"] = json!({"type": "OnDelete"});
    let env = Env::start(vec![paused, sts, ds, deployment("rolling", Some(SECRET))]).await;
    env.emu.clear_rollouts();
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Requested);
    assert_eq!(result.requested.len(), 4);
    let rollouts = env.emu.rollouts();
    assert_eq!(rollouts.len(), 4);
    for rollout in rollouts {
        let expect_rolled = rollout.name == "rolling";
        assert_eq!(rollout.rolled, expect_rolled, "{rollout:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listed_match_without_uid_is_never_patched() {
    let env = Env::start(vec![
        deployment("a-first", Some(SECRET)),
        deployment("b-second", Some(SECRET)),
    ])
    .await;
    env.emu
        .add_fault(Fault::on("list", "deployments").then(FaultAction::list(
            rollsafe_emulator::ListCorruption::ItemWithoutUid,
        )));
    let result = env.run().await;
    assert_eq!(result.status, RestartStatus::Partial);
    let failure = &result.failures[0];
    assert_eq!(
        (failure.name.as_str(), failure.code, failure.http_status),
        ("a-first", FailureCode::IncompleteList, Some(503))
    );
    assert_eq!(env.patched_names("deployments"), ["b-second"]);
}

/// Against the emulator, with no race on the machine's speed: every patch is held twice as long
/// as the phase, so the first [`MAX_PATCHES_IN_FLIGHT`] start at once, hold every slot until the
/// phase is over, and are the only ones sent; everything else is `unavailable`. The exact
/// deadline and cap are pinned under paused time in the engine's unit tests
/// (`no_patch_starts_after_the_phase_deadline`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patches_not_started_within_the_patch_phase_are_never_sent() {
    let seeds: Vec<serde_json::Value> = (0..20)
        .map(|i| deployment(&format!("web-{i:02}"), Some(SECRET)))
        .collect();
    let env = Env::start(seeds).await;
    env.emu.add_fault(
        Fault::on("patch", "*")
            .always()
            .then(FaultAction::Delay { millis: 600 }),
    );
    let timeouts = rollsafe_kube::Timeouts {
        patch_phase: std::time::Duration::from_millis(300),
        ..Default::default()
    };
    let result = env.engine().with_timeouts(timeouts).run(&request()).await;
    assert_eq!(result.status, RestartStatus::Partial);
    let sent = env.patches().len();
    assert_eq!(
        result.requested.len(),
        sent,
        "everything sent was acknowledged"
    );
    assert_eq!(sent, MAX_PATCHES_IN_FLIGHT, "the patches sent");
    assert_eq!(result.failures.len(), 20 - sent);
    for failure in &result.failures {
        assert_eq!(
            (failure.code, failure.http_status),
            (FailureCode::Unavailable, None)
        );
    }
    env.assert_nothing_sent_twice();
}

// ---------------------------------------------------------------------------------------------
// "Requested" means the patch changed the object.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_requests_in_the_same_millisecond_both_change_the_workload() {
    let env = Env::start(vec![deployment("web", Some(SECRET))]).await;
    let engine = env.engine();
    let version = || {
        env.emu
            .get_object("deployments", Some(NS), "web")
            .unwrap()
            .pointer("/metadata/resourceVersion")
            .unwrap()
            .clone()
    };
    // Two requests stamped for the same instant: the second value is a millisecond later.
    let stamped = || {
        let mut request = request();
        request.value = restart_value(now());
        request
    };
    let (first_request, second_request) = (stamped(), stamped());
    assert_ne!(first_request.value, second_request.value);
    let before = version();
    let first = engine.run(&first_request).await;
    let after_first = version();
    let second = engine.run(&second_request).await;
    let after_second = version();
    assert_eq!(first.status, RestartStatus::Requested);
    assert_eq!(second.status, RestartStatus::Requested);
    assert_ne!(before, after_first);
    assert_ne!(after_first, after_second, "the second patch was a no-op");
    assert_eq!(
        env.annotation("deployments", "web").as_deref(),
        Some(second_request.value.as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_that_changes_nothing_is_not_reported_requested() {
    let env = Env::start(vec![deployment("web", Some(SECRET))]).await;
    let engine = env.engine();
    // The same value twice (as two replicas of the server could write in one millisecond): the
    // second patch applies and changes nothing.
    let mut same = request();
    same.value = NOW.to_owned();
    assert_eq!(engine.run(&same).await.status, RestartStatus::Requested);
    let second = engine.run(&same).await;
    assert_eq!(second.status, RestartStatus::Failed, "{second:?}");
    let failure = &second.failures[0];
    assert_eq!(
        (failure.name.as_str(), failure.code, failure.http_status),
        ("web", FailureCode::Unconfirmed, Some(200))
    );
    assert_eq!(env.patches().len(), 2);
}
