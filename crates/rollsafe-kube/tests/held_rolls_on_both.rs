//! A restart of a workload whose roll `rollsafe watch` holds — a restart window, or an
//! approval: its `rollsafe.dev/pending` mark — settles that hold in the same patch, on both
//! substrates: the pods roll once, with the content the hold was for, and the controller then
//! finds nothing to roll for it (its record is the held digest, no mark, no approval left).
//! The contract's result is the same as for any restart.

#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

use jiff::Timestamp;
use rollsafe_core::annotations::{
    APPROVED, CONFIG_HASH, CONFIG_RECORD, PENDING, RESTART_ANNOTATION,
};
use rollsafe_core::contract::RestartStatus;
use rollsafe_kube::{RestartEngine, RestartRequest};
use rollsafe_testing::{TestNamespace, Workload, on_both_substrates};
use serde_json::{Value, json};

const SECRET: &str = "db-creds";
const NOW: &str = "2026-11-29T18:00:00.123Z";
const WINDOW: &str = "window until=2026-12-07T08:00:00Z digest=v1:held-by-window";
const APPROVAL: &str = "approval since=2026-12-03T06:00:00Z digest=v1:awaiting-approval";

/// A consumer of [`SECRET`] watched by the controller, its metadata carrying `annotations`.
fn consumer(kind: &str, name: &str, annotations: Value) -> Value {
    let mut object = Workload::of_kind(kind, name)
        .with_replicas()
        .consuming_secret_via_volume(SECRET)
        .build();
    object["metadata"]["annotations"] = annotations;
    object
}

/// The annotations of a workload's metadata and of its pod template, as stored.
async fn annotations(ns: &TestNamespace, kind: &str, name: &str) -> (Value, Value) {
    let object = ns.get("apps/v1", kind, name).await.unwrap();
    let at = |pointer: &str| object.pointer(pointer).cloned().unwrap_or(Value::Null);
    (
        at("/metadata/annotations"),
        at("/spec/template/metadata/annotations"),
    )
}

on_both_substrates! {
    /// A window's hold and an approval's (with a person's approval already written) are both
    /// settled by the restart; a workload with no hold gets the plain restart patch.
    async fn a_restart_settles_the_roll_the_controller_holds(ns) {
        ns.apply_at_rest([
            rollsafe_testing::secret(&ns.name, SECRET, "not-a-real-password"),
            consumer("Deployment", "held", json!({
                "rollsafe.dev/watch": "true",
                CONFIG_RECORD: "v1:before;0123456789ab=0123456789abcdef",
                PENDING: WINDOW,
            })),
            consumer("StatefulSet", "approved", json!({
                "rollsafe.dev/watch": "true",
                CONFIG_RECORD: "v1:before;0123456789ab=0123456789abcdef",
                PENDING: APPROVAL,
                APPROVED: "v1:awaiting-approval",
            })),
            consumer("Deployment", "plain", json!({"team": "payments"})),
        ]).await;
        let request = RestartRequest::new(ns.name.parse().unwrap(), SECRET.parse().unwrap())
            .at(NOW.parse::<Timestamp>().unwrap());
        let result = RestartEngine::new(&ns.connection).run(&request).await;
        // The contract's result, as for any restart.
        assert_eq!(result.status, RestartStatus::Requested, "{result:?}");
        assert_eq!(
            serde_json::to_value(&result).unwrap()["requested"],
            json!([
                {"kind": "Deployment", "name": "held"},
                {"kind": "Deployment", "name": "plain"},
                {"kind": "StatefulSet", "name": "approved"}
            ])
        );
        // What the controller reads: its record is the digest it held, the pods carry it, and
        // neither the mark nor the approval is left — so when the window opens (or an approval
        // would come) it finds the record matching and rolls nothing.
        for (kind, name, digest) in [
            ("Deployment", "held", "v1:held-by-window"),
            ("StatefulSet", "approved", "v1:awaiting-approval"),
        ] {
            let (metadata, template) = annotations(ns, kind, name).await;
            assert_eq!(metadata[CONFIG_RECORD], digest, "{kind}/{name}: {metadata}");
            assert_eq!(metadata.get(PENDING), None, "{kind}/{name}: {metadata}");
            assert_eq!(metadata.get(APPROVED), None, "{kind}/{name}: {metadata}");
            assert_eq!(metadata["rollsafe.dev/watch"], "true");
            assert_eq!(template[CONFIG_HASH], digest, "{kind}/{name}: {template}");
            assert_eq!(template[RESTART_ANNOTATION], NOW);
        }
        let (metadata, template) = annotations(ns, "Deployment", "plain").await;
        assert_eq!(metadata["team"], "payments");
        assert_eq!(metadata.get(CONFIG_RECORD), None, "{metadata}");
        assert_eq!(template.get(CONFIG_HASH), None, "{template}");
        assert_eq!(template[RESTART_ANNOTATION], NOW);
        // The workloads' own controllers roll them to the end.
        ns.wait_at_rest("Deployment", "held").await;
        ns.wait_at_rest("StatefulSet", "approved").await;
    }
}
