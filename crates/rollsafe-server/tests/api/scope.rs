//! Namespace scope.

use super::*;

#[tokio::test]
async fn cluster_scope() {
    let f = Fixture::start(|s| s.scope = Scope::Cluster { allow_list: vec![] }).await;
    let (status, _, body) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = f.restart("team-z", "db", Some(&admin())).await;
    assert_eq!(
        (status.as_u16(), body),
        (
            403,
            json!({"error": "Namespace \"team-z\" is not accessible"})
        )
    );
    f.stop().await;

    let f = Fixture::start(|s| {
        s.scope = Scope::Cluster {
            allow_list: vec![NS.parse().unwrap()],
        }
    })
    .await;
    let (status, _, _) = f.restart("team-b", "db", Some(&admin())).await;
    assert_eq!(status, 403, "outside the allow-list");
    let (status, _, _) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200);
    f.stop().await;
}
