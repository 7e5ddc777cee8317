//! A restart of a workload whose roll `rollsafe watch` holds (a restart window, an approval)
//! settles that hold, through the API (a bearer token) and through the page's route (the
//! cookie and the page's same-origin proof): the response is the contract's, and afterwards
//! the controller finds its record at the held digest, no mark and no approval — nothing left
//! to roll when the window opens, nothing left to approve.

use super::*;

const WINDOW: &str = "window until=2026-12-07T08:00:00Z digest=v1:held-by-window";
const APPROVAL: &str = "approval since=2026-12-03T06:00:00Z digest=v1:awaiting-approval";
const RECORD: &str = "v1:before;0123456789ab=0123456789abcdef";

/// The suite's cluster with `api` held by a restart window and `worker` awaiting approval.
fn cluster() -> Vec<Value> {
    let mut objects = seed();
    for object in &mut objects {
        let held = match object["metadata"]["name"].as_str() {
            Some("api") => WINDOW,
            Some("worker") => APPROVAL,
            _ => continue,
        };
        object["metadata"]["annotations"] = json!({
            "rollsafe.dev/watch": "true",
            "rollsafe.dev/config-record": RECORD,
            "rollsafe.dev/pending": held,
        });
    }
    objects
}

impl Fixture {
    /// The annotations of a workload's metadata and of its pod template, as stored.
    fn annotations(&self, resource: &str, name: &str) -> (Value, Value) {
        let object = self.emulator.get_object(resource, Some(NS), name).unwrap();
        (
            object["metadata"]["annotations"].clone(),
            object["spec"]["template"]["metadata"]["annotations"].clone(),
        )
    }

    /// What the controller reads on both workloads: its record at the digest it held, the
    /// pods rolled for it, no mark, no approval.
    fn assert_settled(&self) {
        for (resource, name, digest) in [
            ("deployments", "api", "v1:held-by-window"),
            ("statefulsets", "worker", "v1:awaiting-approval"),
        ] {
            let (metadata, template) = self.annotations(resource, name);
            assert_eq!(
                metadata["rollsafe.dev/config-record"], digest,
                "{name}: {metadata}"
            );
            assert_eq!(
                metadata.get("rollsafe.dev/pending"),
                None,
                "{name}: {metadata}"
            );
            assert_eq!(
                metadata.get("rollsafe.dev/approved"),
                None,
                "{name}: {metadata}"
            );
            assert_eq!(
                template["rollsafe.dev/config-hash"], digest,
                "{name}: {template}"
            );
            assert!(
                template["krypton.io/restarted-at"].is_string(),
                "{template}"
            );
        }
    }
}

/// The contract's answer, unchanged by the settling.
fn assert_requested(status: StatusCode, body: &Value) {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "requested", "{body}");
    assert_eq!(
        body["requested"],
        json!([
            {"kind": "Deployment", "name": "api"},
            {"kind": "StatefulSet", "name": "worker"}
        ])
    );
    assert_eq!(
        body["message"],
        "Rollout requested for 2 of 2 matched workloads."
    );
}

#[tokio::test]
async fn a_restart_through_the_api_settles_the_held_rolls() {
    let f = Fixture::start_with(cluster(), |_| {}).await;
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_requested(status, &body);
    f.assert_settled();
    // Nothing is left to approve: the page's Approve answers so.
    let auth = format!("Bearer {}", admin());
    let (status, _, body) = f
        .request(
            Method::POST,
            &format!("/api/namespaces/{NS}/secrets/db/consumers/StatefulSet/worker/approve"),
            &[("authorization", auth.as_str())],
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(
        body,
        json!({"error": "No roll awaits approval on this workload"})
    );
    // And the preview no longer shows a held roll.
    let (status, _, body) = f
        .request(
            Method::GET,
            &format!("/api/namespaces/{NS}/secrets/db/consumers"),
            &[("authorization", auth.as_str())],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let consumers = body["workloads"].as_array().unwrap();
    assert_eq!(consumers.len(), 2, "{body}");
    assert!(
        consumers
            .iter()
            .all(|consumer| consumer.get("pending").is_none()),
        "{body}"
    );
    f.stop().await;
}

#[tokio::test]
async fn a_restart_from_the_page_settles_the_held_rolls() {
    let f = Fixture::start_with(cluster(), |_| {}).await;
    let cookie = format!("krypton_session={}", admin());
    let own = f.url.clone();
    let (status, _, body) = f
        .request(
            Method::POST,
            &format!("/api/namespaces/{NS}/secrets/db/restart-consumers"),
            &[
                ("cookie", cookie.as_str()),
                ("x-rollsafe-csrf", "1"),
                ("origin", own.as_str()),
            ],
        )
        .await;
    assert_requested(status, &body);
    f.assert_settled();
    f.stop().await;
}
