//! The approval route: a restart's gates, then the workload's own (it references the Secret,
//! a roll awaits approval), the approval written as the caller for exactly the roll pending,
//! and audited like a restart.

use super::*;

const MARK: &str = "approval since=2026-12-03T06:00:00Z digest=v1:abc";

/// The suite's cluster, with `api` (a consumer of `db`) and `unrelated` (not one) awaiting
/// approval. Developers hold the documented caller role (`get` Secrets; `list`, `patch` the
/// three kinds): approving reads the workload as the caller with a list narrowed to its name,
/// so no `get` of workloads is needed. Readers may read Secrets and list workloads, not patch.
fn cluster() -> Vec<Value> {
    let mut objects = seed();
    for object in &mut objects {
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        if object["kind"] == "Deployment" && (name == "api" || name == "unrelated") {
            object["metadata"]["annotations"] = json!({"rollsafe.dev/pending": MARK});
        }
    }
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                  {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"], "verbs": ["list"]}]}));
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "readers", "namespace": NS},
        "subjects": [{"kind": "Group", "name": "readers", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "reader", "apiGroup": "rbac.authorization.k8s.io"}}),
    );
    objects
}

impl Fixture {
    async fn approve(
        &self,
        secret: &str,
        kind: &str,
        name: &str,
        token: &str,
    ) -> (StatusCode, Value) {
        let auth = format!("Bearer {token}");
        let (status, _, body) = self
            .request(
                Method::POST,
                &format!("/api/namespaces/{NS}/secrets/{secret}/consumers/{kind}/{name}/approve"),
                &[("authorization", auth.as_str())],
            )
            .await;
        (status, body)
    }

    fn approved(&self, name: &str) -> Option<String> {
        self.emulator
            .get_object("deployments", Some(NS), name)
            .unwrap()["metadata"]["annotations"]["rollsafe.dev/approved"]
            .as_str()
            .map(str::to_owned)
    }

    /// The approval records, intent records included.
    fn approvals(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_file)
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|line| line["action"] == "workload.approve")
            .collect()
    }
}

fn approver() -> String {
    token("root@x.io", &["developers"])
}

#[tokio::test]
async fn an_approval_is_written_as_the_caller_and_audited() {
    let f = Fixture::start_with(cluster(), |s| s.impersonation = true).await;
    let (status, body) = f.approve("db", "Deployment", "api", &approver()).await;
    assert_eq!(status, 200, "{body}");
    // What was approved: the workload, what it consumes and when, besides the digest.
    let approved_at = body["approvedAt"].as_str().unwrap_or_default().to_owned();
    assert!(
        approved_at.len() == 24 && approved_at.ends_with('Z'),
        "{body}"
    );
    assert_eq!(
        body,
        json!({"kind": "Deployment", "name": "api", "digest": "v1:abc",
               "since": "2026-12-03T06:00:00Z", "approvedAt": approved_at,
               "consumes": ["Secret/db"]})
    );
    assert_eq!(f.approved("api").as_deref(), Some("v1:abc"));
    let patch = f
        .emulator
        .requests_for("patch", "deployments")
        .into_iter()
        .next()
        .unwrap();
    assert_eq!(patch.impersonated_user.as_deref(), Some("root@x.io"));
    assert_eq!(
        patch.query_param("fieldManager").as_deref(),
        Some("rollsafe-approve")
    );
    let body: Value = serde_json::from_str(patch.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        body[0],
        json!({"op": "test", "path": "/metadata/annotations/rollsafe.dev~1pending", "value": MARK})
    );
    // The intent record before the patch, the result after, as a restart's.
    let lines = f.approvals();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["stage"], "intent");
    assert_eq!(
        lines[0]["planned"],
        json!([{"kind": "Deployment", "name": "api"}])
    );
    assert_eq!(lines[1]["stage"], "result");
    assert_eq!(lines[1]["result"], "allow");
    assert_eq!(
        (&lines[1]["namespace"], &lines[1]["name"]),
        (&json!(NS), &json!("db"))
    );
    assert_eq!(
        lines[1]["approval"],
        json!({"kind": "Deployment", "workload": "api", "digest": "v1:abc"})
    );
    f.stop().await;
}

#[tokio::test]
async fn the_secrets_acl_decides_for_its_consumers_only() {
    let f = Fixture::start_with(cluster(), |_| {}).await;
    // `unrelated` awaits approval too, but does not reference `db`: the ACL on `db` says
    // nothing about it.
    let (status, body) = f
        .approve("db", "Deployment", "unrelated", &approver())
        .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"], "The workload does not reference this Secret");
    // A consumer with nothing awaiting approval.
    let (status, body) = f.approve("db", "StatefulSet", "worker", &approver()).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"], "No roll awaits approval on this workload");
    // Not a workload kind, not a name, no such workload.
    for (kind, name, expected) in [
        ("Pod", "api", 400),
        ("Deployment", "Not_A_Name", 400),
        ("Deployment", "nope", 404),
    ] {
        let (status, body) = f.approve("db", kind, name, &approver()).await;
        assert_eq!(status, expected, "{kind}/{name}: {body}");
    }
    assert!(f.emulator.requests_for("patch", "deployments").is_empty());
    assert!(f.emulator.requests_for("patch", "statefulsets").is_empty());
    f.stop().await;
}

#[tokio::test]
async fn refusals_are_a_restarts_and_audited_as_denials() {
    let f = Fixture::start_with(cluster(), |s| s.impersonation = true).await;
    // The ACL on the Secret: a developer may not act on `locked`'s consumers.
    let developer = token("dev@x.io", &["developers"]);
    let (status, _) = f.approve("locked", "DaemonSet", "agent", &developer).await;
    assert_eq!(status, 403);
    // Kubernetes RBAC: a caller who may read the Secret and list its consumers but not patch
    // them approves nothing — the approval patch, sent as the caller, is refused.
    let no_patch = token("reader@x.io", &["readers"]);
    let (status, body) = f.approve("db", "Deployment", "api", &no_patch).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(f.approved("api"), None);
    let read = f
        .emulator
        .requests_for("list", "deployments")
        .into_iter()
        .find(|r| r.impersonated_user.as_deref() == Some("reader@x.io"))
        .expect("the workload read as the caller");
    assert_eq!(
        read.query_param("fieldSelector").as_deref(),
        Some("metadata.name=api"),
        "a list narrowed to the workload's name"
    );
    let denials: Vec<Value> = f
        .approvals()
        .into_iter()
        .filter(|line| line["result"] == "deny")
        .collect();
    assert_eq!(denials.len(), 2, "{denials:?}");
    // A reserved identity is refused at authentication, and audited.
    let reserved = token("system:admin", &["system:masters"]);
    let (status, _) = f.approve("db", "Deployment", "api", &reserved).await;
    assert_eq!(status, 403);
    assert!(
        f.approvals()
            .iter()
            .any(|line| line["user"] == "system:admin" && line["result"] == "deny")
    );
    f.stop().await;
    // With the restart flag off, nothing is approved either.
    let f = Fixture::start_with(cluster(), |s| s.restart_enabled = false).await;
    let (status, _) = f.approve("db", "Deployment", "api", &approver()).await;
    assert_eq!(status, 403);
    assert_eq!(f.approved("api"), None);
    f.stop().await;
}
