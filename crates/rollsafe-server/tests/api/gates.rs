//! The gate sequence: which gate answers, and that no later gate is reached.

use super::*;

#[tokio::test]
async fn allowed_request_restarts_consumers() {
    let f = Fixture::start(|_| {}).await;
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["status"], "requested");
    assert_eq!(
        body["requested"],
        json!([{"kind": "Deployment", "name": "api"}, {"kind": "StatefulSet", "name": "worker"}])
    );
    assert!(body.get("error").is_none());
    let rolled: Vec<_> = f.emulator.rollouts().into_iter().map(|r| r.name).collect();
    assert_eq!(rolled, ["api", "worker"]);
    assert!(
        f.emulator.requests_for("get", "configmaps").is_empty(),
        "an admin's decision needs no access rules"
    );
    // The live-visibility gate reads the Secret's metadata only: its values never reach the
    // server (the emulator answers such a read without them, tests/metadata.rs there).
    let reads = f.emulator.requests_for("get", "secrets");
    assert_eq!(reads.len(), 1);
    assert_eq!(
        reads[0].accept.as_deref(),
        Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    );
    let audit = f.audit_lines();
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0]["result"], "allow");
    assert_eq!(audit[0]["status"], "requested");
    assert_eq!(audit[0]["user"], "root@x.io");
    f.stop().await;
}

#[tokio::test]
async fn gate_order_reaches_no_later_gate() {
    let f = Fixture::start(|_| {}).await;
    // 1. Authentication, before the restart flag and path validation.
    let (status, headers, body) = f.restart("Bad_NS", "db", None).await;
    assert_eq!(
        (status.as_u16(), body.clone()),
        (401, json!({"error": "Authentication required"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    let (status, _, _) = f.restart(NS, "db", Some("not-a-token")).await;
    assert_eq!(status, 401);
    let (status, _, _) = f
        .request(
            Method::POST,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &[
                ("cookie", &format!("krypton_session={}", admin())),
                // What the page sends; a cross-site request is refused (see csrf.rs).
                ("x-rollsafe-csrf", "1"),
                ("sec-fetch-site", "same-origin"),
            ],
        )
        .await;
    assert_eq!(status, 200, "the cookie authenticates too");
    f.emulator.clear_requests();
    // 3. Path validation: no Kubernetes call at all.
    let long = "a".repeat(254);
    for (ns, name) in [
        ("Bad_NS", "db"),
        (NS, "a%2Fb"),
        (NS, "A"),
        (NS, long.as_str()),
        ("a%2Fb", "db"),
        (&"n".repeat(64), "db"),
    ] {
        let (status, headers, body) = f.restart(ns, name, Some(&admin())).await;
        assert_eq!(
            (status.as_u16(), body),
            (400, json!({"error": "Invalid namespace or Secret name"})),
            "{ns}/{name}"
        );
        assert_eq!(headers["cache-control"], "no-store");
    }
    assert!(
        f.emulator.requests().is_empty(),
        "path validation makes no Kubernetes call"
    );
    // 4. Namespace scope: no Secret read.
    let (status, _, body) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Namespace \"team-b\" is not accessible"})
        )
    );
    assert_eq!(f.secret_reads(), 0);
    // 5. Live visibility: missing and history answer alike; no workload list.
    let (missing_status, _, missing) = f.restart(NS, "nope", Some(&admin())).await;
    let (history_status, _, history) = f.restart(NS, "db-v1", Some(&admin())).await;
    assert_eq!(
        (missing_status.as_u16(), missing),
        (404, json!({"error": "Secret \"nope\" not found"}))
    );
    assert_eq!(
        (history_status.as_u16(), history),
        (404, json!({"error": "Secret \"db-v1\" not found"}))
    );
    // 6. ACL: denied and audited.
    let (status, _, body) = f
        .restart(NS, "locked", Some(&token("dave@x.io", &["developers"])))
        .await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "You are not allowed to modify this secret"})
        )
    );
    assert_eq!(
        f.workload_requests(),
        0,
        "no gate failure lists or patches workloads"
    );
    assert!(
        f.emulator.rollouts().len() == 2,
        "only the cookie request rolled"
    );
    let audit = f.audit_lines();
    let results: Vec<_> = audit
        .iter()
        .map(|l| l["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        results,
        ["allow", "deny", "deny"],
        "namespace and ACL refusals are audited as deny"
    );
    assert!(audit[2].get("status").is_none());
    f.stop().await;
}

#[tokio::test]
async fn restart_flag_comes_after_authentication() {
    let f = Fixture::start(|s| s.restart_enabled = false).await;
    let (status, _, _) = f.restart(NS, "db", None).await;
    assert_eq!(status, 401);
    let (status, headers, body) = f.restart("Bad_NS", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Restarting apps is disabled on this deployment"})
        )
    );
    assert_eq!(headers["cache-control"], "no-store");
    assert!(f.emulator.requests().is_empty());
    f.stop().await;
}

#[tokio::test]
async fn request_size_limits() {
    let f = Fixture::start(|_| {}).await;
    let big_header = "x".repeat(40 * 1024);
    let (status, _, _) = f
        .request(Method::GET, "/healthz", &[("x-padding", &big_header)])
        .await;
    assert_eq!(status, 431, "request heads over 32 KiB are refused");
    let request = Request::post(format!(
        "{}/api/namespaces/{NS}/secrets/db/restart-consumers",
        f.url
    ))
    .header("authorization", format!("Bearer {}", admin()))
    .body(Full::new(Bytes::from(vec![b'{'; 20 * 1024])))
    .unwrap();
    let response = f.http.request(request).await.unwrap();
    assert_eq!(response.status(), 413);
    assert_eq!(response.headers()["cache-control"], "no-store");
    assert!(f.emulator.requests().is_empty(), "refused before any gate");
    f.stop().await;
}
