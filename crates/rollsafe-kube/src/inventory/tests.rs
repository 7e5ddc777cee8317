use super::*;
use serde_json::json;

const SECRET: &str = "db-creds";

fn workload(name: &str, secret: Option<&str>) -> Value {
    let volumes = match secret {
        Some(secret) => json!([{ "name": "creds", "secret": { "secretName": secret } }]),
        None => json!([]),
    };
    json!({
        "metadata": { "name": name, "uid": format!("uid-{name}"), "resourceVersion": "7" },
        "spec": { "template": { "spec": { "containers": [{ "name": "app" }], "volumes": volumes } } }
    })
}

fn page(kind: WorkloadKind, items: Vec<Value>, token: Option<&str>, rv: &str) -> Vec<u8> {
    let mut metadata = json!({ "resourceVersion": rv });
    if let Some(token) = token {
        metadata["continue"] = json!(token);
    }
    serde_json::to_vec(&json!({
        "kind": kind.list_kind(),
        "apiVersion": "apps/v1",
        "metadata": metadata,
        "items": items,
    }))
    .unwrap()
}

fn names(prefix: &str, range: std::ops::Range<usize>) -> Vec<Value> {
    range
        .map(|i| workload(&format!("{prefix}-{i:05}"), None))
        .collect()
}

fn checker() -> PageChecker {
    PageChecker::new(WorkloadKind::Deployment, SECRET, Budget::default())
}

const D: WorkloadKind = WorkloadKind::Deployment;

#[test]
fn a_single_page_with_matches_is_complete() {
    let mut checker = checker();
    let items = vec![
        workload("web", Some(SECRET)),
        workload("other", Some("db-creds-old")),
        workload("api", Some(SECRET)),
        workload("plain", None),
    ];
    assert_eq!(checker.accept(&page(D, items, None, "10")), Ok(Next::Done));
    let inventory = checker.complete();
    assert!(inventory.is_complete());
    assert_eq!(inventory.pages, 1);
    assert_eq!(inventory.objects, 4);
    let matched: Vec<_> = inventory
        .matches()
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(matched, ["api", "web"]);
    assert_eq!(inventory.matches()[0].references.len(), 1);
}

#[test]
fn full_pages_are_followed_to_an_empty_final_page() {
    let mut checker = checker();
    assert_eq!(
        checker.accept(&page(D, names("a", 0..100), Some("t1"), "10")),
        Ok(Next::Continue("t1".into()))
    );
    assert_eq!(
        checker.accept(&page(D, names("a", 100..200), Some("t2"), "10")),
        Ok(Next::Continue("t2".into()))
    );
    assert_eq!(checker.accept(&page(D, vec![], None, "10")), Ok(Next::Done));
    let inventory = checker.complete();
    assert_eq!((inventory.pages, inventory.objects), (3, 200));
}

#[test]
fn an_empty_continue_token_ends_the_list() {
    let mut checker = checker();
    assert_eq!(
        checker.accept(&page(D, names("a", 0..3), Some(""), "1")),
        Ok(Next::Done)
    );
}

#[test]
fn a_page_over_the_limit_is_incomplete() {
    let mut checker = checker();
    assert_eq!(
        checker.accept(&page(D, names("a", 0..101), None, "1")),
        Err(Incomplete::PageOverLimit)
    );
}

#[test]
fn a_short_non_final_page_is_incomplete() {
    let mut checker = checker();
    assert_eq!(
        checker.accept(&page(D, names("a", 0..99), Some("t"), "1")),
        Err(Incomplete::ShortPage)
    );
    let mut checker = self::checker();
    assert_eq!(
        checker.accept(&page(D, vec![], Some("t"), "1")),
        Err(Incomplete::ShortPage)
    );
}

#[test]
fn a_repeated_continue_token_is_incomplete() {
    let mut checker = checker();
    assert!(
        checker
            .accept(&page(D, names("a", 0..100), Some("t"), "1"))
            .is_ok()
    );
    assert_eq!(
        checker.accept(&page(D, names("a", 100..200), Some("t"), "1")),
        Err(Incomplete::RepeatedContinue)
    );
}

#[test]
fn malformed_continue_tokens_are_incomplete() {
    for token in [
        json!(5),
        json!({"a": 1}),
        json!("two words"),
        json!("tab\t"),
    ] {
        let mut body: Value =
            serde_json::from_slice(&page(D, names("a", 0..100), None, "1")).unwrap();
        body["metadata"]["continue"] = token.clone();
        let mut checker = checker();
        assert_eq!(
            checker.accept(&serde_json::to_vec(&body).unwrap()),
            Err(Incomplete::MalformedContinue),
            "{token}"
        );
    }
    let long = "a".repeat(MAX_CONTINUE_TOKEN_LEN + 1);
    let mut checker = checker();
    assert_eq!(
        checker.accept(&page(D, names("a", 0..100), Some(&long), "1")),
        Err(Incomplete::MalformedContinue)
    );
}

#[test]
fn bodies_that_are_not_a_list_of_the_kind_are_incomplete() {
    let bodies = [
        b"not json".to_vec(),
        b"[]".to_vec(),
        page(WorkloadKind::StatefulSet, vec![], None, "1"),
        serde_json::to_vec(&json!({"kind": "DeploymentList", "apiVersion": "apps/v1"})).unwrap(),
        serde_json::to_vec(&json!({"kind": "DeploymentList", "apiVersion": "v1", "items": []}))
            .unwrap(),
        serde_json::to_vec(&json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "items": {}}))
            .unwrap(),
        serde_json::to_vec(
            &json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "items": [1]}),
        )
        .unwrap(),
        serde_json::to_vec(
            &json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": [], "items": []}),
        )
        .unwrap(),
        serde_json::to_vec(&json!({"kind": "Status", "apiVersion": "v1", "code": 200})).unwrap(),
    ];
    for body in bodies {
        let mut checker = checker();
        assert_eq!(
            checker.accept(&body),
            Err(Incomplete::NotAList),
            "{}",
            String::from_utf8_lossy(&body)
        );
    }
}

#[test]
fn null_items_are_an_empty_list() {
    let body = serde_json::to_vec(
        &json!({"kind": "DeploymentList", "apiVersion": "apps/v1", "metadata": {}, "items": null}),
    )
    .unwrap();
    assert_eq!(checker().accept(&body), Ok(Next::Done));
}

#[test]
fn items_without_a_valid_name_are_incomplete() {
    for metadata in [
        json!({}),
        json!({"name": ""}),
        json!({"name": 3}),
        json!({"name": "Upper"}),
        json!({"name": "a/b"}),
    ] {
        let items = vec![json!({ "metadata": metadata.clone(), "spec": {} })];
        let mut checker = checker();
        assert_eq!(
            checker.accept(&page(D, items, None, "1")),
            Err(Incomplete::MissingName),
            "{metadata}"
        );
    }
    let items = vec![json!({ "spec": {} })];
    assert_eq!(
        checker().accept(&page(D, items, None, "1")),
        Err(Incomplete::MissingName)
    );
}

#[test]
fn duplicate_names_are_incomplete_within_and_across_pages() {
    let items = vec![workload("web", None), workload("web", None)];
    assert_eq!(
        checker().accept(&page(D, items, None, "1")),
        Err(Incomplete::DuplicateName)
    );
    let mut checker = checker();
    assert!(
        checker
            .accept(&page(D, names("a", 0..100), Some("t"), "1"))
            .is_ok()
    );
    assert_eq!(
        checker.accept(&page(D, names("a", 99..100), None, "1")),
        Err(Incomplete::DuplicateName)
    );
}

#[test]
fn a_changed_list_resource_version_is_incomplete() {
    let mut checker = checker();
    assert!(
        checker
            .accept(&page(D, names("a", 0..100), Some("t"), "1"))
            .is_ok()
    );
    assert_eq!(
        checker.accept(&page(D, names("a", 100..101), None, "2")),
        Err(Incomplete::ResourceVersionChanged)
    );
}

#[test]
fn the_object_budget_allows_2000_and_refuses_2001() {
    let mut checker = checker();
    for p in 0..20 {
        let token = format!("t{p}");
        assert!(
            checker
                .accept(&page(
                    D,
                    names("a", p * 100..p * 100 + 100),
                    Some(&token),
                    "1"
                ))
                .is_ok()
        );
    }
    let mut at_limit = checker;
    assert_eq!(at_limit.accept(&page(D, vec![], None, "1")), Ok(Next::Done));
    assert_eq!(at_limit.complete().objects, 2000);

    let mut checker = self::checker();
    for p in 0..20 {
        let token = format!("t{p}");
        assert!(
            checker
                .accept(&page(
                    D,
                    names("a", p * 100..p * 100 + 100),
                    Some(&token),
                    "1"
                ))
                .is_ok()
        );
    }
    assert_eq!(
        checker.accept(&page(D, names("a", 2000..2001), None, "1")),
        Err(Incomplete::ObjectBudget)
    );
}

#[test]
fn the_page_budget_refuses_to_follow_past_the_last_page() {
    let budget = Budget {
        page_size: 2,
        max_pages: 3,
        ..Budget::default()
    };
    let mut checker = PageChecker::new(D, SECRET, budget);
    assert!(
        checker
            .accept(&page(D, names("a", 0..2), Some("t1"), "1"))
            .is_ok()
    );
    assert!(
        checker
            .accept(&page(D, names("a", 2..4), Some("t2"), "1"))
            .is_ok()
    );
    // The third page is the last allowed; its continue token would need a fourth.
    assert_eq!(
        checker.accept(&page(D, names("a", 4..6), Some("t3"), "1")),
        Err(Incomplete::PageBudget)
    );
    let mut checker = PageChecker::new(D, SECRET, budget);
    assert!(
        checker
            .accept(&page(D, names("a", 0..2), Some("t1"), "1"))
            .is_ok()
    );
    assert!(
        checker
            .accept(&page(D, names("a", 2..4), Some("t2"), "1"))
            .is_ok()
    );
    assert_eq!(
        checker.accept(&page(D, names("a", 4..5), None, "1")),
        Ok(Next::Done)
    );
}

#[test]
fn the_byte_budget_counts_every_page() {
    let first = page(D, names("a", 0..100), Some("t"), "1");
    let second = page(D, names("a", 100..101), None, "1");
    let budget = Budget {
        max_bytes: (first.len() + second.len()) as u64,
        ..Budget::default()
    };
    let mut checker = PageChecker::new(D, SECRET, budget);
    assert!(checker.accept(&first).is_ok());
    assert_eq!(checker.remaining_bytes(), second.len() as u64);
    assert_eq!(checker.accept(&second), Ok(Next::Done));

    let budget = Budget {
        max_bytes: (first.len() + second.len() - 1) as u64,
        ..Budget::default()
    };
    let mut checker = PageChecker::new(D, SECRET, budget);
    assert!(checker.accept(&first).is_ok());
    assert_eq!(checker.accept(&second), Err(Incomplete::ByteBudget));
}

#[test]
fn an_incomplete_inventory_drops_its_matches() {
    let mut checker = checker();
    let mut items = vec![workload("web", Some(SECRET))];
    items.extend(names("a", 0..99));
    assert!(checker.accept(&page(D, items, Some("t"), "1")).is_ok());
    assert_eq!(
        checker.accept(&page(D, vec![], Some("u"), "1")),
        Err(Incomplete::ShortPage)
    );
    let inventory = checker.incomplete(Incomplete::ShortPage);
    assert!(!inventory.is_complete());
    assert!(inventory.matches().is_empty());
    assert_eq!(
        inventory.status,
        InventoryStatus::Incomplete {
            reason: Incomplete::ShortPage,
            failure: Failure::incomplete_list(None),
        }
    );
}

#[test]
fn failures_are_classified() {
    use rollsafe_core::failure::FailureCode;
    let cases = [
        (Incomplete::Http(403), FailureCode::Forbidden, Some(403)),
        (
            Incomplete::Http(401),
            FailureCode::Unauthenticated,
            Some(401),
        ),
        (Incomplete::Http(500), FailureCode::Unavailable, Some(500)),
        (
            Incomplete::ContinueExpired,
            FailureCode::IncompleteList,
            Some(410),
        ),
        (
            Incomplete::ContinueRejected,
            FailureCode::IncompleteList,
            Some(400),
        ),
        (
            Incomplete::ByteBudget,
            FailureCode::IncompleteList,
            Some(503),
        ),
        (
            Incomplete::Transport(TransportFailure::AfterSend),
            FailureCode::Unconfirmed,
            None,
        ),
        (
            Incomplete::Transport(TransportFailure::NotSent),
            FailureCode::Unavailable,
            None,
        ),
        (Incomplete::Timeout, FailureCode::Unconfirmed, None),
    ];
    for (reason, code, status) in cases {
        let failure = reason.failure();
        assert_eq!(
            (failure.code, failure.http_status),
            (code, status),
            "{reason:?}"
        );
    }
}

#[test]
fn page_paths() {
    assert_eq!(
        page_path(WorkloadKind::StatefulSet, "team-a", 100, None),
        "/apis/apps/v1/namespaces/team-a/statefulsets?limit=100"
    );
    assert_eq!(
        page_path(D, "team-a", 100, Some("ab+/=")),
        "/apis/apps/v1/namespaces/team-a/deployments?limit=100&continue=ab%2B%2F%3D"
    );
}

#[test]
fn escaped_names_still_match_and_near_names_do_not() {
    // Page text with the Secret name written with a JSON escape in one item and only as a
    // prefix of another name in a second: the fast path must not lose the first.
    let items = r#"
        {"metadata":{"name":"web","uid":"u1","resourceVersion":"1"},"spec":{"template":{"spec":{"containers":[],"volumes":[{"name":"c","secret":{"secretName":"db\u002dcreds"}}]}}}},
        {"metadata":{"name":"old","uid":"u2","resourceVersion":"1"},"spec":{"template":{"spec":{"containers":[],"volumes":[{"name":"c","secret":{"secretName":"db-creds-old"}}]}}}},
        {"metadata":{"name":"api","uid":"u3","resourceVersion":"1"},"spec":{"template":{"spec":{"containers":[{"name":"a","envFrom":[{"secretRef":{"name":"db-creds"}}]}]}}}}"#;
    let page = |items: &str| {
        format!(
            r#"{{"kind":"DeploymentList","apiVersion":"apps/v1","metadata":{{"resourceVersion":"1"}},"items":[{items}]}}"#
        )
    };
    let mut checker = checker();
    assert_eq!(checker.accept(page(items).as_bytes()), Ok(Next::Done));
    let inventory = checker.complete();
    let matched: Vec<_> = inventory
        .matches()
        .iter()
        .map(|m| m.name.as_str())
        .collect();
    assert_eq!(matched, ["api", "web"]);
    // A duplicate name is caught whichever path each of the two items took.
    let duplicated = format!(r#"{items}, {{"metadata":{{"name":"web"}}}}"#);
    assert_eq!(
        super::tests::checker().accept(page(&duplicated).as_bytes()),
        Err(Incomplete::DuplicateName)
    );
}

// === Time limits under paused time ===

/// A server that accepts connections and never answers.
async fn silent_server() -> (kube::Client, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
    let client = crate::Connection::from_config(config).unwrap().client(None);
    (client, server)
}

#[tokio::test(start_paused = true)]
async fn a_silent_page_ends_the_inventory_at_the_page_timeout() {
    let (client, server) = silent_server().await;
    let timeouts = Timeouts::default();
    let begin = tokio::time::Instant::now();
    let inventory = list_kind(
        &client,
        D,
        &"shop".parse().unwrap(),
        &SECRET.parse().unwrap(),
        Budget::default(),
        timeouts,
    )
    .await;
    assert!(matches!(
        inventory.status,
        InventoryStatus::Incomplete {
            reason: Incomplete::Timeout,
            ..
        }
    ));
    // The page's own limit ends it, well inside the inventory's.
    assert_eq!(begin.elapsed(), timeouts.list_page);
    assert_eq!(
        Incomplete::Timeout.failure().code,
        rollsafe_core::failure::FailureCode::Unconfirmed
    );
    server.abort();
}

#[tokio::test(start_paused = true)]
async fn a_silent_read_ends_at_the_configured_get_timeout() {
    let (client, server) = silent_server().await;
    let timeout = Timeouts::default().get;
    let begin = tokio::time::Instant::now();
    let read = crate::read_secret_metadata(
        &client,
        &"shop".parse().unwrap(),
        &SECRET.parse().unwrap(),
        timeout,
    )
    .await;
    assert_eq!(read.unwrap_err(), crate::ReadError::Timeout);
    assert_eq!(begin.elapsed(), timeout);
    server.abort();
}
