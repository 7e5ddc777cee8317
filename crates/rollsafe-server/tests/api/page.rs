//! The web page's routes: the assets and their security headers, who the caller is, the
//! namespaces and Secret names in scope, and signing a browser in and out.

use super::*;

#[tokio::test]
async fn the_page_and_every_response_carry_the_security_headers() {
    let f = Fixture::start(|_| {}).await;
    for path in ["/", "/app.js", "/app.css", "/api/me", "/nope"] {
        let (_, headers, _) = f.request(Method::GET, path, &[]).await;
        assert_eq!(
            headers["content-security-policy"],
            rollsafe_server::web::CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["cache-control"], "no-store", "{path}");
    }
    let (status, headers, _) = f.request(Method::GET, "/", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    f.stop().await;
}

#[tokio::test]
async fn the_caller_the_namespaces_and_the_secret_names() {
    let f = Fixture::start(|_| {}).await;
    let auth = format!("Bearer {}", admin());
    let (status, _, body) = f.request(Method::GET, "/api/me", &[]).await;
    assert_eq!(
        (status.as_u16(), body),
        (401, json!({"error": "Authentication required"}))
    );
    let (status, _, body) = f
        .request(Method::GET, "/api/me", &[("authorization", &auth)])
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["email"], "root@x.io");
    assert_eq!(body["source"], "session");
    let (_, _, body) = f
        .request(Method::GET, "/api/namespaces", &[("authorization", &auth)])
        .await;
    assert_eq!(body, json!({"namespaces": [NS]}));
    let (status, _, body) = f
        .request(
            Method::GET,
            &format!("/api/namespaces/{NS}/secrets"),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"namespace": NS, "secrets": [{"name": "db"}, {"name": "locked"}]}),
        "history snapshots are left out"
    );
    assert!(!body.to_string().contains(SECRET_VALUE));
    let list = f
        .emulator
        .requests()
        .into_iter()
        .find(|r| r.is("list", "secrets"))
        .unwrap();
    assert_eq!(list.status, 200, "{list:?}");
    let (status, _, _) = f
        .request(
            Method::GET,
            "/api/namespaces/team-b/secrets",
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(status, 403, "outside the scope");
    f.stop().await;
}

#[tokio::test]
async fn a_browser_signs_in_with_a_session_token_and_out() {
    let f = Fixture::start(|_| {}).await;
    let auth = format!("Bearer {}", admin());
    let page = [("x-rollsafe-csrf", "1"), ("sec-fetch-site", "same-origin")];
    let (status, _, body) = f
        .request(Method::POST, "/auth/session", &[("authorization", &auth)])
        .await;
    assert_eq!(
        (status.as_u16(), body),
        (403, json!({"error": "Cross-site request refused"}))
    );
    let mut headers = vec![("authorization", "Bearer not-a-session")];
    headers.extend(page);
    let (status, _, _) = f.request(Method::POST, "/auth/session", &headers).await;
    assert_eq!(status, 401);
    let mut headers = vec![("authorization", auth.as_str())];
    headers.extend(page);
    let (status, response, _) = f.request(Method::POST, "/auth/session", &headers).await;
    assert_eq!(status, 204);
    let cookie = response["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with(&format!(
        "krypton_session={}",
        admin().split('.').next().unwrap()
    )));
    for attribute in ["Path=/", "HttpOnly", "SameSite=Lax", "Max-Age=3600"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP on loopback: {cookie}"
    );
    let (status, response, _) = f.request(Method::POST, "/auth/logout", &page).await;
    assert_eq!(status, 204);
    assert!(
        response["set-cookie"]
            .to_str()
            .unwrap()
            .starts_with("krypton_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0")
    );
    let (status, _, _) = f.request(Method::POST, "/auth/logout", &[]).await;
    assert_eq!(status, 403, "a cross-site page cannot sign anyone out");
    f.stop().await;
}
