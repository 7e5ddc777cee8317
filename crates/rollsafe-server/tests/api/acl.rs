//! The Secret's ACL annotations and the namespace access rules.

use super::*;

#[tokio::test]
async fn acl_branches() {
    let access = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "krypton-access", "namespace": NS},
        "data": {"access.json": "{\"team-a\": {\"groups\": [\"devs-a\"], \"users\": [\"erin@x.io\"]}}"}});
    let mut objects = seed();
    objects.push(access);
    let f = Fixture::start_with(objects, |_| {}).await;
    let cases = [
        ("admin by user", token("ROOT@X.IO", &[]), "db", 200),
        (
            "admin by group",
            token("u@x.io", &["admins"]),
            "locked",
            200,
        ),
        (
            "annotation group",
            token("u@x.io", &["platform"]),
            "locked",
            200,
        ),
        ("annotation user", token("carol@x.io", &[]), "locked", 200),
        (
            "annotations alone decide",
            token("erin@x.io", &["devs-a"]),
            "locked",
            403,
        ),
        (
            "namespace rule group",
            token("u@x.io", &["devs-a"]),
            "db",
            200,
        ),
        ("namespace rule user", token("erin@x.io", &[]), "db", 200),
        (
            "namespace rule refuses",
            token("u@x.io", &["devs-b"]),
            "db",
            403,
        ),
    ];
    for (case, token, secret, expected) in cases {
        let (status, _, body) = f.restart(NS, secret, Some(&token)).await;
        assert_eq!(status.as_u16(), expected, "{case}: {body}");
    }
    // The access ConfigMap is read once (cached 60 s), as the server itself.
    let reads: Vec<_> = f
        .emulator
        .requests()
        .into_iter()
        .filter(|r| r.is("get", "configmaps"))
        .collect();
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0].impersonated_user, None);
    f.stop().await;
}

#[tokio::test]
async fn malformed_access_rules_fail_closed_and_missing_ones_are_open() {
    let mut objects = seed();
    objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "krypton-access", "namespace": NS},
        "data": {"access.json": "{\"team-a\": [\"devs\"]}"}}));
    let f = Fixture::start_with(objects, |_| {}).await;
    let (status, _, _) = f.restart(NS, "db", Some(&token("u@x.io", &["devs"]))).await;
    assert_eq!(status, 403);
    let (status, _, _) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "admins still pass");
    f.stop().await;

    let f = Fixture::start(|_| {}).await;
    let (status, _, _) = f.restart(NS, "db", Some(&token("u@x.io", &[]))).await;
    assert_eq!(status, 200, "no ConfigMap, no annotations: open");
    f.stop().await;
}
