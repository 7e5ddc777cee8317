//! A cookie-authenticated restart must come from a page of this server; bearer calls are
//! unaffected, and reading is never refused for it.

use super::*;

async fn cookie_restart(f: &Fixture, extra: &[(&str, &str)]) -> (StatusCode, Value) {
    let cookie = format!("krypton_session={}", admin());
    let mut headers = vec![("cookie", cookie.as_str())];
    headers.extend_from_slice(extra);
    let (status, _, body) = f
        .request(
            Method::POST,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &headers,
        )
        .await;
    (status, body)
}

#[tokio::test]
async fn cross_site_cookie_restarts_are_refused_before_any_kubernetes_call() {
    let f = Fixture::start(|_| {}).await;
    let own = f.url.clone();
    let refused: [(&str, Vec<(&str, &str)>); 6] = [
        ("no header, no origin", vec![]),
        (
            "a cross-site form: origin, no header",
            vec![("origin", "https://evil.example")],
        ),
        (
            "header but another origin",
            vec![("x-rollsafe-csrf", "1"), ("origin", "https://evil.example")],
        ),
        (
            "header, same-site but not same-origin",
            vec![("x-rollsafe-csrf", "1"), ("sec-fetch-site", "same-site")],
        ),
        (
            "header, cross-site fetch",
            vec![
                ("x-rollsafe-csrf", "1"),
                ("sec-fetch-site", "cross-site"),
                ("origin", own.as_str()),
            ],
        ),
        (
            "header alone: neither origin nor fetch metadata",
            vec![("x-rollsafe-csrf", "1")],
        ),
    ];
    for (case, headers) in refused {
        let (status, body) = cookie_restart(&f, &headers).await;
        assert_eq!(status, 403, "{case}: {body}");
        assert_eq!(
            body,
            json!({"error": "Cross-site request refused"}),
            "{case}"
        );
    }
    assert_eq!(f.emulator.requests().len(), 0, "nothing reached Kubernetes");
    assert!(f.audit_lines().is_empty());
    f.stop().await;
}

#[tokio::test]
async fn same_origin_cookie_restarts_and_bearer_calls_pass() {
    let f = Fixture::start(|_| {}).await;
    let own = f.url.clone();
    let (status, body) =
        cookie_restart(&f, &[("x-rollsafe-csrf", "1"), ("origin", own.as_str())]).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = cookie_restart(
        &f,
        &[("x-rollsafe-csrf", "1"), ("sec-fetch-site", "same-origin")],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "bearer calls need no header: {body}");
    // Reading with the cookie needs no header: the preview, and the rollout view the page polls.
    let cookie = format!("krypton_session={}", admin());
    for read in ["consumers", "rollout"] {
        let (status, _, body) = f
            .request(
                Method::GET,
                &format!("/api/namespaces/{NS}/secrets/db/{read}"),
                &[("cookie", &cookie), ("sec-fetch-site", "cross-site")],
            )
            .await;
        assert_eq!(status, 200, "{read}: {body}");
    }
    f.stop().await;
}
