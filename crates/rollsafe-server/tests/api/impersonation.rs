//! Calls made as the caller, and Kubernetes' own refusals.

use super::*;

#[tokio::test]
async fn impersonation_on_every_call() {
    let mut objects = seed();
    for i in 0..130 {
        objects.push(workload(
            "Deployment",
            &format!("extra-{i:03}"),
            if i % 10 == 0 { "db" } else { "other" },
        ));
    }
    let f = Fixture::start_with(objects, |s| s.impersonation = true).await;
    let caller = token("Dev@X.io", &["developers", "admins", "developers"]);
    let (status, _, body) = f.restart(NS, "db", Some(&caller)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matched"], 2 + 13);
    let requests = f.emulator.requests();
    let deployment_pages = requests
        .iter()
        .filter(|r| r.is("list", "deployments"))
        .count();
    assert_eq!(deployment_pages, 2, "more than one page of Deployments");
    let mut caller_calls = 0;
    for request in &requests {
        if request.is("get", "configmaps") {
            assert_eq!(
                request.impersonated_user, None,
                "the access ConfigMap is read as the server"
            );
            continue;
        }
        caller_calls += 1;
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("dev@x.io"),
            "{request:?}"
        );
        assert_eq!(
            request.impersonated_groups,
            ["developers", "admins", "developers"],
            "{request:?}"
        );
    }
    assert_eq!(
        caller_calls,
        1 + 2 + 1 + 1 + 15,
        "secret read, list pages and patches"
    );
    f.stop().await;
}

#[tokio::test]
async fn kubernetes_denial_of_the_secret_read() {
    let f = Fixture::start(|s| s.impersonation = true).await;
    let (status, _, body) = f
        .restart(NS, "db", Some(&token("mallory@x.io", &["nobody"])))
        .await;
    assert_eq!(status, 403);
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .starts_with("Access denied."),
        "{body}"
    );
    assert_eq!(f.workload_requests(), 0);
    f.stop().await;
}

/// Under constrained impersonation (the setting required; a state built in code takes it
/// as decided) a restart runs as the caller as before, and the server sends no call as the
/// caller that the constrained rules do not grant: the page's list of Secrets is answered as
/// Kubernetes would answer it (refused), and with an allow-list the namespaces are not listed
/// as the caller — the allow-list decides alone.
#[tokio::test]
async fn constrained_impersonation_sends_only_the_granted_calls_as_the_caller() {
    use rollsafe_server::impersonation::Constraint;
    let f = Fixture::start(|s| {
        s.impersonation = true;
        s.impersonation_constrained = Constraint::Required;
        s.scope = Scope::Cluster {
            allow_list: vec![NS.parse().unwrap()],
        };
    })
    .await;
    let (status, _, config) = f.request(Method::GET, "/api/config", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(config["impersonationMode"], "constrained", "{config}");
    let caller = token("dev@x.io", &["developers"]);
    let (status, _, body) = f.restart(NS, "db", Some(&caller)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "requested", "{body}");
    for request in f.emulator.requests() {
        if request.is("get", "configmaps") {
            continue;
        }
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("dev@x.io"),
            "{request:?}"
        );
    }
    // The restart's durable records, as in every mode: the intent before the patches, the
    // result after.
    let records: Vec<Value> = std::fs::read_to_string(&f.audit_file)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let stages: Vec<(&str, &str)> = records
        .iter()
        .map(|r| {
            (
                r["stage"].as_str().unwrap_or_default(),
                r["result"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(
        stages.first().is_some_and(|(stage, _)| *stage == "intent")
            && stages.last() == Some(&("result", "allow")),
        "{records:?}"
    );
    // A reserved identity is still refused before any Kubernetes call.
    f.emulator.clear_requests();
    let reserved = token("system:admin", &["system:masters"]);
    let (status, _, _) = f.restart(NS, "db", Some(&reserved)).await;
    assert_eq!(status, 403);
    assert!(
        f.emulator.requests().is_empty(),
        "no call for a reserved identity"
    );
    let auth = format!("Bearer {caller}");
    let (status, _, body) = f
        .request(
            Method::GET,
            &format!("/api/namespaces/{NS}/secrets"),
            &[("authorization", auth.as_str())],
        )
        .await;
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = f
        .request(
            Method::GET,
            "/api/namespaces",
            &[("authorization", auth.as_str())],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["namespaces"], json!([NS]));
    // Neither the page's Secret list nor its namespace list sent anything.
    let requests = f.emulator.requests();
    assert!(requests.is_empty(), "{requests:#?}");
    f.stop().await;
}
