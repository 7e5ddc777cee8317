//! Result statuses, the sanitized 500, the other routes, metrics and the typed client.

use super::*;

#[tokio::test]
async fn sanitized_500_carries_a_request_id() {
    let f = Fixture::start(|_| {}).await;
    f.emulator
        .add_fault(Fault::on("get", "secrets").namespace(NS).name("db").then(
            FaultAction::Status {
                code: 500,
                reason: None,
                message: Some("etcd cluster is unavailable: upstream-detail-xyz".into()),
                retry_after_seconds: None,
                plain_text: false,
            },
        ));
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 500);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["error"], "Internal server error");
    let request_id = body["requestId"].as_str().unwrap();
    assert_eq!(request_id.len(), 36);
    assert!(!body.to_string().contains("upstream-detail-xyz"));
    assert_eq!(f.workload_requests(), 0);
    let audit = f.audit_lines();
    assert_eq!(audit[0]["result"], "error");
    assert_eq!(audit[0]["requestId"], request_id);
    f.stop().await;
}

#[tokio::test]
async fn failed_result_is_503_with_error_and_partial_is_207() {
    let f = Fixture::start(|_| {}).await;
    f.emulator.add_fault(
        Fault::on("list", "daemonsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(503)),
    );
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .always()
            .then(FaultAction::status(409)),
    );
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let (status, headers, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 503);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(body["status"], "failed");
    assert_eq!(body["error"], body["message"]);
    assert_eq!(
        body["discoveryFailures"],
        json!([{"kind": "DaemonSet", "code": "unavailable",
        "message": "Kubernetes was unavailable while listing this kind, so its inventory is unknown and nothing of this kind was patched. Retry later.", "httpStatus": 503}])
    );
    f.emulator.clear_faults();
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 207, "{body}");
    assert_eq!(body["status"], "partial");
    assert!(body.get("error").is_none());
    let audit = f.audit_lines();
    assert_eq!(audit[0]["result"], "error");
    assert_eq!(audit[1]["result"], "error");
    assert_eq!(
        audit[1]["failures"],
        json!([{"kind": "StatefulSet", "name": "worker", "code": "forbidden", "httpStatus": 403}])
    );
    f.stop().await;
}

#[tokio::test]
async fn other_routes_and_metrics() {
    let f = Fixture::start(|_| {}).await;
    let (status, headers, body) = f.request(Method::GET, "/api/config", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(
        body,
        json!({"restartEnabled": true, "scope": "namespace", "authMode": "session", "impersonation": false,
               "impersonationMode": "off", "tokenReview": false, "oidc": false})
    );
    assert!(!body.to_string().contains(SECRET));
    let (status, headers, _) = f.request(Method::GET, "/readyz", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    let (status, headers, _) = f.request(Method::GET, "/healthz", &[]).await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    // The liveness probe under the name `rollsafe watch` answers too.
    let (status, _, body) = f.request(Method::GET, "/livez", &[]).await;
    assert_eq!((status.as_u16(), body), (200, json!({"status": "ok"})));
    let (status, headers, body) = f.request(Method::GET, "/nope", &[]).await;
    assert_eq!(
        (status.as_u16(), body),
        (404, json!({"error": "Not found"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    let (status, headers, body) = f
        .request(
            Method::GET,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &[],
        )
        .await;
    assert_eq!(
        (status.as_u16(), body),
        (405, json!({"error": "Method not allowed"}))
    );
    assert_eq!(headers["cache-control"], "no-store");
    f.restart(NS, "db", Some(&admin())).await;
    let response = f
        .http
        .request(
            Request::get(format!("{}/metrics", f.admin_url))
                .body(Full::new(Bytes::new()))
                .unwrap(),
        )
        .await
        .unwrap();
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec(),
    )
    .unwrap();
    assert!(
        text.contains(r#"rollsafe_http_requests_total{route="restart",status="200"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rollsafe_restart_results_total{status="requested"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"rollsafe_restart_patches_total{code="acknowledged"} 2"#),
        "{text}"
    );
    // Error responses by their static code; latencies of the run, its inventories and patches.
    for expected in [
        r#"rollsafe_http_errors_total{code="not_found"} 1"#,
        r#"rollsafe_http_errors_total{code="method_not_allowed"} 1"#,
        "rollsafe_restart_run_duration_seconds_count 1",
        r#"rollsafe_restart_inventory_duration_seconds_count{kind="DaemonSet"} 1"#,
        r#"rollsafe_restart_patch_duration_seconds_count{kind="Deployment"} 1"#,
        "rollsafe_restart_patch_timeouts_total 0",
    ] {
        assert!(text.contains(expected), "{expected}\n{text}");
    }
    f.stop().await;
}

fn ns() -> rollsafe_core::name::Namespace {
    NS.parse().unwrap()
}

#[tokio::test]
async fn typed_client_reports_and_errors() {
    use rollsafe_client::{Client, ClientError, Token};
    let f = Fixture::start(|_| {}).await;
    let client = Client::new(&f.url, Some(Token::new(admin()))).unwrap();
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let report = client
        .restart_consumers(&ns(), &"db".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (report.http_status, report.result.status.as_str()),
        (207, "partial")
    );
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .always()
            .then(FaultAction::status(409)),
    );
    let report = client
        .restart_consumers(&ns(), &"db".parse().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (report.http_status, report.result.status.as_str()),
        (503, "failed")
    );
    assert_eq!(
        report.result.error.as_deref(),
        Some(report.result.message.as_str())
    );
    for (client, namespace, name, expected) in [
        (Client::new(&f.url, None).unwrap(), NS, "db", 401),
        (
            Client::new(&f.url, Some(Token::new(token("dave@x.io", &[])))).unwrap(),
            NS,
            "locked",
            403,
        ),
        (client.clone(), NS, "missing", 404),
    ] {
        let (namespace, name) = (namespace.parse().unwrap(), name.parse().unwrap());
        match client.restart_consumers(&namespace, &name).await {
            Err(ClientError::Api(error)) => {
                assert_eq!(error.status, expected, "{name}: {error}");
                assert_eq!(error.is_authentication_required(), expected == 401);
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    // A name that is not a Secret name cannot even be put into a request.
    assert!("a/b".parse::<rollsafe_core::name::SecretName>().is_err());
    f.stop().await;
}
