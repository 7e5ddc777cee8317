//! Kubernetes bearer tokens, checked with a TokenReview: a ServiceAccount acts as itself.

use super::*;
use rollsafe_emulator::Identity;
use rollsafe_server::session::{self, NewSession, SessionSecret};

const SA: &str = "system:serviceaccount:team-a:ci";
const SA_TOKEN: &str = "sa-token-for-rollsafe";
const API_ONLY_TOKEN: &str = "sa-token-for-the-api-only";

fn seed_with_service_account() -> Vec<Value> {
    let mut objects = seed();
    objects.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "ci", "namespace": NS}}));
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ci", "namespace": NS},
        "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": NS}],
        "roleRef": {"kind": "Role", "name": "restarter", "apiGroup": "rbac.authorization.k8s.io"}}),
    );
    objects
}

async fn start(review: Option<Vec<String>>) -> Fixture {
    let f = Fixture::start_with(seed_with_service_account(), |s| {
        s.impersonation = true;
        s.token_review = review;
    })
    .await;
    let groups = ["system:serviceaccounts", "system:serviceaccounts:team-a"];
    f.emulator
        .add_identity(Identity::new(SA, SA_TOKEN, &groups).with_audiences(vec!["rollsafe".into()]))
        .unwrap();
    f.emulator
        .add_identity(Identity::new(
            "system:serviceaccount:team-a:other",
            API_ONLY_TOKEN,
            &groups,
        ))
        .unwrap();
    f
}

fn reviews(f: &Fixture) -> Vec<rollsafe_emulator::RequestLogEntry> {
    f.emulator
        .requests()
        .into_iter()
        .filter(|r| r.is("create", "tokenreviews"))
        .collect()
}

#[tokio::test]
async fn a_service_account_token_restarts_as_that_service_account() {
    let f = start(Some(vec!["rollsafe".into()])).await;
    let (status, _, body) = f.restart(NS, "db", Some(SA_TOKEN)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["matched"], 2);
    let requests = f.emulator.requests();
    let review = reviews(&f);
    assert_eq!(review.len(), 1);
    assert_eq!(review[0].impersonated_user, None, "reviewed as the server");
    let mut caller_calls = 0;
    // The review and the access ConfigMap are read as the server; everything else as the caller.
    for request in requests
        .iter()
        .filter(|r| !r.is("create", "tokenreviews") && !r.is("get", "configmaps"))
    {
        caller_calls += 1;
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some(SA),
            "{request:?}"
        );
        assert!(
            request.impersonated_groups.is_empty(),
            "the API server adds a ServiceAccount's groups itself: {request:?}"
        );
        assert_eq!(request.status, 200, "{request:?}");
    }
    assert_eq!(
        caller_calls,
        1 + 3 + 2,
        "secret read, three lists, two patches"
    );
    assert_eq!(f.audit_lines()[0]["user"], SA);
    // The answer is cached by digest: the preview and the rollout view review nothing again.
    for read in ["consumers", "rollout"] {
        let (status, _, body) = f
            .request(
                Method::GET,
                &format!("/api/namespaces/{NS}/secrets/db/{read}"),
                &[("authorization", &format!("Bearer {SA_TOKEN}"))],
            )
            .await;
        assert_eq!(status, 200, "{read}: {body}");
    }
    assert_eq!(reviews(&f).len(), 1);
    let logs = String::from_utf8_lossy(&captured_logs().lock().unwrap()).into_owned();
    assert!(!logs.contains(SA_TOKEN), "the token is never logged");
    f.stop().await;
}

#[tokio::test]
async fn unknown_and_wrong_audience_tokens_are_refused() {
    let f = start(Some(vec!["rollsafe".into()])).await;
    for token in ["not-a-token-anyone-issued", API_ONLY_TOKEN] {
        let (status, _, body) = f.restart(NS, "db", Some(token)).await;
        assert_eq!(status, 401, "{token}: {body}");
        assert_eq!(body, json!({"error": "Authentication required"}));
    }
    assert_eq!(reviews(&f).len(), 2, "one review per token");
    assert_eq!(f.workload_requests(), 0);
    assert_eq!(f.secret_reads(), 0);
    // A session-shaped token that fails verification is never sent for review.
    let forged = session::mint(
        &NewSession {
            sub: None,
            email: "root@x.io".into(),
            name: None,
            groups: vec![],
            ttl: Duration::from_secs(60),
        },
        &SessionSecret::new(b"another-key-another-key-another-key".to_vec()),
        session::now(),
    )
    .unwrap();
    let (status, _, _) = f.restart(NS, "db", Some(&forged)).await;
    assert_eq!(status, 401);
    assert_eq!(reviews(&f).len(), 2);
    f.stop().await;
}

#[tokio::test]
async fn without_the_setting_kubernetes_tokens_are_not_reviewed() {
    let f = start(None).await;
    let (status, _, _) = f.restart(NS, "db", Some(SA_TOKEN)).await;
    assert_eq!(status, 401);
    assert!(reviews(&f).is_empty());
    f.stop().await;
}

#[tokio::test]
async fn a_review_that_fails_is_a_503_not_a_401() {
    let f = start(Some(vec!["rollsafe".into()])).await;
    f.emulator.add_fault(
        Fault::on("create", "tokenreviews")
            .always()
            .then(FaultAction::status(503)),
    );
    let (status, headers, body) = f.restart(NS, "db", Some(SA_TOKEN)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        json!({"error": "Authentication is temporarily unavailable; retry shortly"})
    );
    assert!(headers.contains_key("retry-after"));
    assert_eq!(f.workload_requests(), 0);
    f.stop().await;
}
