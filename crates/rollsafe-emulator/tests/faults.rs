//! Every fault of the admin API, as a kube-crate client observes it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rollsafe_emulator::{Fault, FaultAction, ListCorruption, RunningEmulator};
use serde_json::{Value, json};

async fn deployments(emu: &RunningEmulator) -> Api<Deployment> {
    Api::namespaced(client(emu, "admin").await, "shop")
}

fn restart_patch(d: &Value) -> Patch<()> {
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/uid", "value": d["metadata"]["uid"]},
        {"op": "test", "path": "/metadata/resourceVersion", "value": d["metadata"]["resourceVersion"]},
        {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"krypton.io/restarted-at": "now"}}
    ]))
    .unwrap();
    Patch::Json(ops)
}

/// A raw GET of a list URL, returning (status, body text).
async fn raw_list(emu: &RunningEmulator, query: &str) -> (u16, String) {
    let client = client(emu, "admin").await;
    let req = http::Request::builder()
        .uri(format!("/apis/apps/v1/namespaces/shop/deployments?{query}"))
        .body(Vec::new())
        .unwrap();
    match client.request_text(req).await {
        Ok(text) => (200, text),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn status_fault_with_status_body_on_the_nth_patch() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    emu.add_fault(
        Fault::on("patch", "deployments")
            .namespace("shop")
            .name("d0000")
            .nth(2)
            .then(FaultAction::status(503)),
    );
    let api = deployments(&emu).await;
    let merge = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    api.patch("d0000", &PatchParams::default(), &merge)
        .await
        .unwrap();
    let err = api
        .patch("d0000", &PatchParams::default(), &merge)
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (503, "ServiceUnavailable"));
    assert_eq!(
        s.message,
        "the server is currently unable to handle the request"
    );
    api.patch("d0000", &PatchParams::default(), &merge)
        .await
        .unwrap();
    let log = emu.requests_for("patch", "deployments");
    assert_eq!(
        log.iter().map(|e| e.status).collect::<Vec<_>>(),
        vec![200, 503, 200]
    );
    assert_eq!(log[1].faults, vec!["status 503"]);
    assert_eq!(emu.faults()[0].fired, 1);
    emu.shutdown().await;
}

#[tokio::test]
async fn plain_text_429_with_retry_after() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    emu.add_fault(Fault::on("get", "deployments").then(FaultAction::Status {
        code: 429,
        reason: None,
        message: None,
        retry_after_seconds: Some(7),
        plain_text: true,
    }));
    let err = deployments(&emu).await.get("d0000").await.unwrap_err();
    let s = api_status(&err);
    assert_eq!(s.code, 429);
    assert_eq!(
        s.reason, "Failed to parse error data",
        "not a Status: kube fabricates one"
    );
    assert!(
        s.message
            .contains("Too many requests, please try again later.")
    );
    // The header, as a raw client sees it.
    emu.add_fault(Fault::on("get", "deployments").then(FaultAction::status_retry_after(429, 3)));
    let (head, body) = raw_http(&emu, "/apis/apps/v1/namespaces/shop/deployments/d0000").await;
    assert!(head.starts_with("HTTP/1.1 429"), "{head}");
    assert!(
        head.to_ascii_lowercase().contains("retry-after: 3"),
        "{head}"
    );
    let status: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["details"]["retryAfterSeconds"], 3);
    assert_eq!(status["reason"], "TooManyRequests");
    emu.shutdown().await;
}

/// A minimal HTTP/1.1 GET over plain TCP with the admin token: (head, body).
async fn raw_http(emu: &RunningEmulator, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(emu.addr()).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nConnection: close\r\n\r\n",
        emu.admin_token()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}

#[tokio::test]
async fn delay_shows_in_peak_in_flight() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    emu.add_fault(
        Fault::on("get", "deployments")
            .always()
            .then(FaultAction::Delay { millis: 200 }),
    );
    let api = deployments(&emu).await;
    let (a, b, c) = tokio::join!(api.get("d0000"), api.get("d0000"), api.get("d0000"));
    assert!(a.is_ok() && b.is_ok() && c.is_ok());
    assert_eq!(emu.peak_in_flight("get", "deployments"), 3);
    let log = emu.requests_for("get", "deployments");
    assert!(log.iter().all(|e| e.end_micros - e.start_micros >= 200_000));
    emu.shutdown().await;
}

#[tokio::test]
async fn drop_before_apply_is_a_transport_error_and_nothing_changes() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    emu.add_fault(Fault::on("patch", "deployments").then(FaultAction::DropBeforeApply));
    let err = deployments(&emu)
        .await
        .patch("d0000", &PatchParams::default(), &restart_patch(&before))
        .await
        .unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a connection error, got {err:?}"
    );
    let after = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_eq!(before, after);
    assert!(emu.rollouts().is_empty());
    assert_eq!(emu.requests_for("patch", "deployments")[0].status, 0);
    emu.shutdown().await;
}

#[tokio::test]
async fn drop_after_apply_is_a_transport_error_but_the_change_happened() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    emu.add_fault(Fault::on("patch", "deployments").then(FaultAction::DropAfterApply));
    let api = deployments(&emu).await;
    let err = api
        .patch("d0000", &PatchParams::default(), &restart_patch(&before))
        .await
        .unwrap_err();
    assert!(
        !matches!(err, kube::Error::Api(_)),
        "a connection error, got {err:?}"
    );
    let after = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_eq!(
        after["spec"]["template"]["metadata"]["annotations"]["krypton.io/restarted-at"],
        "now"
    );
    assert_eq!(emu.rollouts().len(), 1);
    // Retrying the same compare-and-swap now fails: 422.
    let err = api
        .patch("d0000", &PatchParams::default(), &restart_patch(&before))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 422);
    emu.shutdown().await;
}

#[tokio::test]
async fn list_corruptions() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 5);
    let api = deployments(&emu).await;
    let lp = ListParams::default().limit(2);

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::ShortPage)),
    );
    let page = api.list(&lp).await.unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.metadata.continue_.is_some(), "short and non-final");

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::OversizedPage)),
    );
    assert_eq!(api.list(&lp).await.unwrap().items.len(), 3);

    let first = api.list(&lp).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::RepeatedContinue)),
    );
    let second = api.list(&lp.clone().continue_token(&token)).await.unwrap();
    assert_eq!(second.metadata.continue_.as_deref(), Some(token.as_str()));

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::MalformedContinue)),
    );
    let bad = api.list(&lp).await.unwrap().metadata.continue_.unwrap();
    let err = api
        .list(&lp.clone().continue_token(&bad))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 400);

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::ExpiredContinue)),
    );
    let err = api
        .list(&lp.clone().continue_token(&token))
        .await
        .unwrap_err();
    let s = api_status(&err);
    assert_eq!((s.code, s.reason.as_str()), (410, "Expired"));
    assert!(s.metadata.as_ref().unwrap().continue_.is_some());

    for (corruption, field) in [
        (ListCorruption::ItemWithoutUid, "uid"),
        (ListCorruption::ItemWithoutName, "name"),
        (
            ListCorruption::ItemWithoutResourceVersion,
            "resourceVersion",
        ),
    ] {
        emu.add_fault(Fault::on("list", "deployments").then(FaultAction::list(corruption)));
        let (code, text) = raw_list(&emu, "limit=2").await;
        assert_eq!(code, 200);
        let list: Value = serde_json::from_str(&text).unwrap();
        assert!(
            list["items"][0]["metadata"].get(field).is_none(),
            "{corruption:?}"
        );
        assert!(list["items"][1]["metadata"].get(field).is_some());
    }

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::WrongKind)),
    );
    let err = api.list(&lp).await;
    let (_, text) = {
        emu.add_fault(
            Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::WrongKind)),
        );
        raw_list(&emu, "limit=2").await
    };
    let list: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    let _ = err; // kube does not check the list kind; the raw body shows it.

    emu.add_fault(
        Fault::on("list", "deployments").then(FaultAction::list(ListCorruption::TruncatedJson)),
    );
    let err = api.list(&lp).await.unwrap_err();
    assert!(matches!(err, kube::Error::SerdeError(_)), "{err:?}");
    emu.shutdown().await;
}

#[tokio::test]
async fn concurrent_edit_makes_a_compare_and_swap_fail() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    emu.add_fault(
        Fault::on("patch", "deployments")
            .name("d0000")
            .then(FaultAction::ConcurrentEdit { patch: None }),
    );
    let err = deployments(&emu)
        .await
        .patch("d0000", &PatchParams::default(), &restart_patch(&before))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 422);
    let after = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_eq!(after["metadata"]["uid"], before["metadata"]["uid"]);
    assert_ne!(
        after["metadata"]["resourceVersion"],
        before["metadata"]["resourceVersion"]
    );
    assert!(emu.rollouts().is_empty());
    emu.shutdown().await;
}

#[tokio::test]
async fn delete_and_recreate_changes_the_uid() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    emu.add_fault(Fault::on("patch", "deployments").then(FaultAction::DeleteAndRecreate));
    let err = deployments(&emu)
        .await
        .patch("d0000", &PatchParams::default(), &restart_patch(&before))
        .await
        .unwrap_err();
    assert_eq!(api_status(&err).code, 422);
    let after = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_ne!(after["metadata"]["uid"], before["metadata"]["uid"]);
    emu.shutdown().await;
}

#[tokio::test]
async fn many_clients_one_winner_per_resource_version() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let api = deployments(&emu).await;
    let mut winners = 0;
    let mut losers = 0;
    for round in 0..3 {
        let current = emu
            .get_object("deployments", Some("shop"), "d0000")
            .unwrap();
        let mut tasks = Vec::new();
        for i in 0..16 {
            let api = api.clone();
            let current = current.clone();
            tasks.push(tokio::spawn(async move {
                let ops: json_patch::Patch = serde_json::from_value(json!([
                    {"op": "test", "path": "/metadata/resourceVersion", "value": current["metadata"]["resourceVersion"]},
                    {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"writer": format!("{round}-{i}")}}
                ]))
                .unwrap();
                api.patch("d0000", &PatchParams::default(), &Patch::Json::<()>(ops)).await
            }));
        }
        let mut round_winners = 0;
        for t in tasks {
            match t.await.unwrap() {
                Ok(_) => round_winners += 1,
                Err(e) => {
                    assert_eq!(api_status(&e).code, 422);
                    losers += 1;
                }
            }
        }
        assert_eq!(round_winners, 1, "exactly one winner per resourceVersion");
        winners += round_winners;
    }
    assert_eq!(winners, 3);
    assert_eq!(losers, 45);
    assert_eq!(
        emu.rollouts().len(),
        3,
        "nothing lost: every winner is a rollout"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn admin_api_over_http() {
    let emu = start().await;
    seed_deployments(&emu, "shop", 1);
    let fault = json!({"verb": "get", "resource": "deployments", "name": "d0000",
                       "action": {"type": "status", "code": 500, "message": "boom"}});
    let (head, body) = admin(&emu, "POST", "/_emulator/faults", Some(fault)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head} {body}");
    let err = deployments(&emu).await.get("d0000").await.unwrap_err();
    assert_eq!(api_status(&err).message, "boom");
    let (_, body) = admin(&emu, "GET", "/_emulator/requests", None).await;
    let log: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(log.as_array().unwrap().last().unwrap()["status"], 500);
    let (_, body) = admin(&emu, "GET", "/_emulator/inflight", None).await;
    assert!(body.contains("\"peak\""));
    admin(&emu, "POST", "/_emulator/reset", None).await;
    assert!(emu.requests().is_empty());
    assert!(emu.faults().is_empty());
    assert!(
        emu.get_object("deployments", Some("shop"), "d0000")
            .is_none(),
        "reset goes back to the seeds"
    );
    emu.shutdown().await;
}

async fn admin(
    emu: &RunningEmulator,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let mut s = tokio::net::TcpStream::connect(emu.addr()).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_string(), body.to_string())
}

fn secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "shop"}, "data": {}})
}

async fn secrets(client: kube::Client) -> Api<Secret> {
    Api::namespaced(client, "shop")
}

/// Polls until `cond` holds, failing after 5 s.
async fn until(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 5 s: {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Whether a pending request is still unanswered after half a second.
async fn still_held<T>(task: &mut tokio::task::JoinHandle<T>) -> bool {
    tokio::time::timeout(Duration::from_millis(500), task)
        .await
        .is_err()
}

type SecretEvents = futures::stream::BoxStream<'static, kube::Result<WatchEvent<Secret>>>;

async fn watch(api: &Api<Secret>) -> SecretEvents {
    tokio::time::timeout(
        Duration::from_secs(5),
        api.watch(&WatchParams::default().timeout(20), "0"),
    )
    .await
    .expect("the response head arrives")
    .expect("status 200")
    .boxed()
}

/// Whether the stream stays silent for half a second (no event, no bookmark, no end).
async fn silent(stream: &mut SecretEvents) -> bool {
    tokio::time::timeout(Duration::from_millis(500), stream.try_next())
        .await
        .is_err()
}

async fn next_added(stream: &mut SecretEvents) -> Option<String> {
    loop {
        let event = tokio::time::timeout(Duration::from_secs(5), stream.try_next())
            .await
            .expect("an event within 5 s")
            .expect("a well-formed event")
            .expect("the stream goes on");
        match event {
            WatchEvent::Bookmark(_) => continue,
            WatchEvent::Added(s) => return s.metadata.name,
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The `user` filter matches the user a request acts as, after impersonation: bob's own watch
/// and the admin's watch impersonating bob stall, the admin's own watch does not.
#[tokio::test]
async fn a_user_filter_stalls_only_that_users_watch() {
    let emu = start().await;
    let id = emu.add_fault(
        Fault::on("watch", "secrets")
            .user("bob")
            .always()
            .then(FaultAction::Stall),
    );
    let mut as_bob = config(&emu, "admin").await;
    as_bob.auth_info.impersonate = Some("bob".to_owned());
    let mut admin_watch = watch(&secrets(client(&emu, "admin").await).await).await;
    let mut bob_watch = watch(&secrets(client(&emu, "bob").await).await).await;
    let mut impersonated_watch =
        watch(&secrets(kube::Client::try_from(as_bob).unwrap()).await).await;
    emu.put_object(secret("db")).unwrap();
    assert_eq!(next_added(&mut admin_watch).await.as_deref(), Some("db"));
    assert!(silent(&mut bob_watch).await, "bob's watch stalls");
    assert!(
        silent(&mut impersonated_watch).await,
        "so does one acting as bob"
    );
    let state = &emu.faults()[0];
    assert_eq!(
        (state.matched, state.fired),
        (2, 2),
        "the admin's watch is not counted"
    );
    let log = emu.requests_for("watch", "secrets");
    let stalled: Vec<_> = log
        .iter()
        .map(|e| {
            (
                e.user.as_deref(),
                e.impersonated_user.as_deref(),
                e.faults.len(),
            )
        })
        .collect();
    assert_eq!(
        stalled,
        vec![
            (Some("system:admin"), None, 0),
            (Some("bob"), None, 1),
            (Some("system:admin"), Some("bob"), 1),
        ]
    );
    assert!(emu.remove_fault(id));
    assert_eq!(next_added(&mut bob_watch).await.as_deref(), Some("db"));
    assert_eq!(
        next_added(&mut impersonated_watch).await.as_deref(),
        Some("db")
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_stalled_get_is_answered_only_after_the_fault_is_removed() {
    let emu = start().await;
    emu.put_object(secret("db")).unwrap();
    let fault = json!({"verb": "get", "resource": "secrets", "action": {"type": "stall"}});
    let (head, body) = admin(&emu, "POST", "/_emulator/faults", Some(fault)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head} {body}");
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].clone();
    let api = secrets(client(&emu, "admin").await).await;
    let mut get = tokio::spawn(async move { api.get("db").await });
    until("the fault fired", || emu.faults()[0].fired == 1).await;
    assert!(
        still_held(&mut get).await,
        "no answer while the fault is registered"
    );
    assert!(
        emu.requests_for("get", "secrets").is_empty(),
        "still in flight"
    );
    let (head, _) = admin(&emu, "DELETE", &format!("/_emulator/faults/{id}"), None).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let got = tokio::time::timeout(Duration::from_secs(5), get)
        .await
        .expect("answered once the fault is removed")
        .unwrap()
        .unwrap();
    assert_eq!(got.metadata.name.as_deref(), Some("db"));
    let log = emu.requests_for("get", "secrets");
    assert_eq!(
        (log[0].status, log[0].faults.clone()),
        (200, vec!["stall".to_owned()])
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_stalled_create_applies_nothing_until_the_fault_is_removed() {
    let emu = start().await;
    emu.add_fault(Fault::on("create", "secrets").then(FaultAction::Stall));
    let api = secrets(client(&emu, "admin").await).await;
    let object: Secret = serde_json::from_value(secret("db")).unwrap();
    let mut create = tokio::spawn(async move { api.create(&PostParams::default(), &object).await });
    until("the fault fired", || emu.faults()[0].fired == 1).await;
    assert!(still_held(&mut create).await);
    assert!(
        emu.get_object("secrets", Some("shop"), "db").is_none(),
        "nothing applied"
    );
    let (head, _) = admin(&emu, "DELETE", "/_emulator/faults", None).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::time::timeout(Duration::from_secs(5), create)
        .await
        .expect("answered once the faults are cleared")
        .unwrap()
        .unwrap();
    assert!(emu.get_object("secrets", Some("shop"), "db").is_some());
    emu.shutdown().await;
}

#[tokio::test]
async fn a_client_giving_up_on_a_stalled_request_goes_away() {
    use tokio::io::AsyncWriteExt;
    let emu = start().await;
    emu.put_object(secret("db")).unwrap();
    emu.add_fault(Fault::on("get", "secrets").then(FaultAction::Stall));
    let mut s = tokio::net::TcpStream::connect(emu.addr()).await.unwrap();
    let req = format!(
        "GET /api/v1/namespaces/shop/secrets/db HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n",
        emu.admin_token()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    until("the fault fired", || emu.faults()[0].fired == 1).await;
    drop(s);
    let entry = emu
        .wait_for_request(Duration::from_secs(5), |e| e.is("get", "secrets"))
        .await
        .expect("the request ends when its client hangs up");
    assert_eq!((entry.status, entry.faults), (0, vec!["stall".to_owned()]));
    assert_eq!(emu.faults().len(), 1, "the fault stays registered");
    emu.shutdown().await;
}
