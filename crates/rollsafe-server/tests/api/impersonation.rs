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
