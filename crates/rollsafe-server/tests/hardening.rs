//! Hardening: reserved identities refused and audited, tokens' `nbf` and exact `iss`, the
//! server-wide run limit, and the intent record made durable before the first patch.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{Fixture, NS, SECRET, in_flight, token, wait_until};
use rollsafe_emulator::{Fault, FaultAction};
use serde_json::{Value, json};

fn sign(claims: &Value) -> String {
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        claims,
        &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn claims() -> Value {
    let now = rollsafe_server::session::now();
    json!({"iss": "krypton", "sub": "u1", "email": "alice@x.io", "groups": ["developers"],
           "iat": now, "exp": now + 600})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_identities_are_refused_at_authentication_and_audited() {
    let f = Fixture::start(|_| {}).await;
    let cases = [
        (
            "alice@x.io",
            vec!["developers", "system:masters"],
            "reserved_group",
        ),
        (
            "alice@x.io",
            vec!["developers", " system:masters"],
            "reserved_group",
        ),
        (
            "alice@x.io",
            vec!["system:serviceaccounts"],
            "reserved_group",
        ),
        ("system:admin", vec!["developers"], "reserved_user"),
        (
            "system:serviceaccount:kube-system:default",
            vec![],
            "reserved_user",
        ),
    ];
    for (email, groups, reason) in &cases {
        let response = f.restart("db", &token(email, groups)).await;
        assert_eq!(response.status, 403, "{email} {groups:?}");
        assert_eq!(
            response.json(),
            json!({"error": rollsafe_server::error::RESERVED_IDENTITY}),
            "a fixed message that echoes nothing"
        );
        let audit = f.audit_lines();
        let last = audit.last().unwrap();
        assert_eq!(last["result"], "deny");
        assert_eq!(last["reason"], *reason);
        assert_eq!(last["namespace"], NS);
        assert_eq!(last["name"], "db");
    }
    assert_eq!(f.audit_lines().len(), cases.len());
    assert!(
        f.emulator.requests().is_empty(),
        "no Kubernetes call is made for a reserved identity: {:?}",
        f.emulator.requests()
    );
    assert!(f.emulator.rollouts().is_empty());
    // An ordinary member of the same groups minus the reserved one still restarts.
    let response = f.restart("db", &token("alice@x.io", &["developers"])).await;
    assert_eq!(response.status, 200, "{:?}", response.json());
    assert!(f.emulator.requests().iter().all(|r| {
        !r.impersonated_groups
            .iter()
            .any(|g| g.starts_with("system:"))
    }));
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_groups_only_narrow_who_may_call() {
    let f = Fixture::start(|s| {
        s.allowed_groups = rollsafe_server::identity::AllowedGroups::parse("dev*").unwrap();
    })
    .await;
    let refused = f
        .restart("db", &token("bob@x.io", &["developers", "ops"]))
        .await;
    assert_eq!(refused.status, 403);
    assert_eq!(f.audit_lines()[0]["reason"], "group_not_allowed");
    assert!(f.emulator.requests().is_empty());
    let allowed = f.restart("db", &token("bob@x.io", &["developers"])).await;
    assert_eq!(allowed.status, 200, "{:?}", allowed.json());
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_not_yet_valid_or_with_an_issuer_array_are_401() {
    let f = Fixture::start(|_| {}).await;
    let now = rollsafe_server::session::now();
    let mut not_yet = claims();
    not_yet["nbf"] = json!(now + 300);
    let mut array_issuer = claims();
    array_issuer["iss"] = json!(["krypton"]);
    let mut mixed_issuer = claims();
    mixed_issuer["iss"] = json!(["other", "krypton"]);
    for (case, claims) in [
        ("nbf in the future", not_yet),
        ("iss [krypton]", array_issuer),
        ("iss [other, krypton]", mixed_issuer),
    ] {
        let response = f.restart("db", &sign(&claims)).await;
        assert_eq!(response.status, 401, "{case}");
        assert_eq!(response.json(), json!({"error": "Authentication required"}));
    }
    assert!(f.emulator.requests().is_empty());
    let mut valid = claims();
    valid["nbf"] = json!(now - 5);
    assert_eq!(f.restart("db", &sign(&valid)).await.status, 200);
    // The header says HS256 but the payload is re-encoded: a forgery.
    let genuine = sign(&claims());
    let mut parts: Vec<String> = genuine.split('.').map(str::to_owned).collect();
    let mut forged = claims();
    forged["groups"] = json!(["developers", "admins"]);
    parts[1] = URL_SAFE_NO_PAD.encode(forged.to_string());
    assert_eq!(f.restart("db", &parts.join(".")).await.status, 401);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_beyond_the_limit_answer_429_before_any_kubernetes_call() {
    let f = Fixture::start(|s| s.max_concurrent_restarts = 1).await;
    // Hold the first run in its patch phase.
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .times(0)
            .then(FaultAction::Delay { millis: 1_500 }),
    );
    let api = f.api.clone();
    let held_token = token("alice@x.io", &["developers"]);
    let held = tokio::spawn(async move { common::restart(&api, NS, "db", &held_token).await });
    assert!(
        wait_until(Duration::from_secs(20), || in_flight(
            &f.emulator,
            "patch",
            "deployments"
        ) > 0)
        .await,
        "the first run never reached its patches"
    );
    let before = f.emulator.requests().len();
    let shed = f.restart("db", &token("bob@x.io", &["developers"])).await;
    assert_eq!(shed.status, 429, "{:?}", shed.json());
    assert_eq!(shed.header("retry-after").as_deref(), Some("1"));
    assert_eq!(shed.json(), json!({"error": rollsafe_server::error::BUSY}));
    assert_eq!(
        f.emulator.requests().len(),
        before,
        "the shed request made no Kubernetes call"
    );
    let first = held.await.unwrap();
    assert_eq!(first.status, 200, "{:?}", first.json());
    let metrics = common::get(&f.admin, "/metrics").await.unwrap();
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(text.contains("rollsafe_restart_shed_total 1"), "{text}");
    // The slot is free again.
    f.emulator.clear_faults();
    assert_eq!(
        f.restart("db", &token("bob@x.io", &["developers"]))
            .await
            .status,
        200
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_intent_record_is_durable_before_the_first_patch() {
    let f = Fixture::start(|_| {}).await;
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .times(0)
            .then(FaultAction::Delay { millis: 1_000 }),
    );
    let api = f.api.clone();
    let alice = token("alice@x.io", &["developers"]);
    let run = tokio::spawn(async move { common::restart(&api, NS, "db", &alice).await });
    assert!(
        wait_until(Duration::from_secs(20), || in_flight(
            &f.emulator,
            "patch",
            "deployments"
        ) > 0)
        .await
    );
    // A patch is being handled; nothing has been applied yet, and the intent is on disk.
    assert!(f.emulator.rollouts().is_empty());
    let audit = f.audit_lines();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let mut intent = audit[0].clone();
    assert!(intent["ts"].as_str().unwrap().ends_with('Z'));
    intent["ts"] = "T".into();
    let request_id = intent["requestId"].as_str().unwrap().to_owned();
    intent["requestId"] = "R".into();
    assert_eq!(
        intent,
        json!({"ts": "T", "app": "krypton", "action": "secret.restart", "stage": "intent",
               "user": "alice@x.io", "namespace": NS, "name": "db",
               "planned": [{"kind": "Deployment", "name": "api"}, {"kind": "Deployment", "name": "web"}],
               "requestId": "R"})
    );
    let response = run.await.unwrap();
    assert_eq!(response.status, 200);
    // The response was sent after the result record: it is there already.
    let audit = f.audit_lines();
    assert_eq!(audit.len(), 2);
    assert_eq!(audit[1]["stage"], "result");
    assert_eq!(audit[1]["status"], "requested");
    assert_eq!(audit[1]["requestId"], request_id.as_str());
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_nothing_to_patch_writes_no_intent() {
    let f = Fixture::start(|_| {}).await;
    f.emulator
        .put_object(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "unused", "namespace": NS}, "stringData": {"k": "v"}}))
        .unwrap();
    let response = f
        .restart("unused", &token("alice@x.io", &["developers"]))
        .await;
    assert_eq!(response.json()["status"], "no_targets");
    let audit = f.audit_lines();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["stage"], "result");
    f.stop().await;
}

/// An audit file that refuses every write (`/dev/full`): no intent record, so nothing is patched.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_durable_intent_nothing_is_patched() {
    let f = Fixture::start_with_audit(Some("/dev/full".into()), |_| {}).await;
    let failures = rollsafe_server::audit::WRITE_FAILURES.get();
    let response = f.restart("db", &token("alice@x.io", &["developers"])).await;
    assert_eq!(response.status, 500, "{:?}", response.json());
    assert_eq!(response.json()["error"], "Internal server error");
    assert!(
        f.emulator.requests_for("patch", "deployments").is_empty(),
        "a patch was sent without a durable intent record"
    );
    assert!(f.emulator.rollouts().is_empty());
    assert!(
        !f.emulator.requests_for("list", "deployments").is_empty(),
        "the run got as far as its plan"
    );
    assert!(rollsafe_server::audit::WRITE_FAILURES.get() > failures);
    let metrics = common::get(&f.admin, "/metrics").await.unwrap();
    assert!(String::from_utf8_lossy(&metrics.body).contains("rollsafe_audit_write_failures_total"));
    f.stop().await;
}
