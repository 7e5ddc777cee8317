//! The consumers preview: which workloads reference a Secret, with the exact reference paths,
//! whether a restart would roll each one's pods now, and whether each kind's inventory is
//! complete. Nothing is patched to build it.
//!
//! One shape for `GET /api/namespaces/{ns}/secrets/{name}/consumers`, the typed client and
//! `rollsafe consumers` (local or `--server`):
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true },
//!                    "StatefulSet": { "complete": false, "code": "forbidden",
//!                                     "message": "…", "httpStatus": 403 },
//!                    "DaemonSet": { "complete": true } },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "references": [ … ],
//!                    "rollsNow": false, "deferral": "paused",
//!                    "deferralReason": "the Deployment is paused",
//!                    "watch": "opted_in", "halted": "flapping: …",
//!                    "pending": { "heldBy": "approval", "at": "…", "digest": "v1:…" } } ] }
//! ```
//!
//! `workloads` holds the matches of the complete inventories only — exactly the workloads a
//! restart would patch now — ordered by kind, then name. An incomplete kind carries the same
//! code, fixed guidance and status as the restart's `discoveryFailures` entry would.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::failure::{Failure, FailureCode};
use crate::opt_in::{self, WatchState};
use crate::pending::{HeldBy, PENDING, PendingMark};
use crate::reference::{ConfigRef, Reference, TargetKind};
use crate::workload::{Deferral, WorkloadKind};

/// The preview of one Secret's consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumersPreview {
    /// The namespace listed.
    pub namespace: String,
    /// The Secret.
    pub secret: String,
    /// One entry per kind, keyed by kind (in kind order).
    pub inventories: BTreeMap<WorkloadKind, InventoryState>,
    /// The workloads of the complete inventories that reference the Secret.
    pub workloads: Vec<Consumer>,
}

impl ConsumersPreview {
    /// Whether every kind's inventory is complete.
    pub fn is_complete(&self) -> bool {
        self.inventories.values().all(|i| i.complete)
    }

    /// How many of the workloads would roll their pods now.
    pub fn rolling_now(&self) -> usize {
        self.workloads.iter().filter(|w| w.rolls_now).count()
    }
}

/// How far one kind's inventory got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryState {
    /// Every page was read and consistent.
    pub complete: bool,
    /// Why not, when it is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<FailureCode>,
    /// The fixed guidance for `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The upstream HTTP status, or 503 for a locally detected incomplete inventory.
    #[serde(
        rename = "httpStatus",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_status: Option<u16>,
}

impl InventoryState {
    /// A complete inventory.
    pub fn complete() -> Self {
        Self {
            complete: true,
            code: None,
            message: None,
            http_status: None,
        }
    }

    /// An incomplete inventory, with the guidance of a `discoveryFailures` entry.
    pub fn incomplete(failure: Failure) -> Self {
        Self {
            complete: false,
            code: Some(failure.code),
            message: Some(failure.code.discovery_message().to_owned()),
            http_status: failure.http_status,
        }
    }
}

/// One workload that references the Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// Every reference to the Secret, in document order (container, env var, volume,
    /// imagePullSecrets …).
    pub references: Vec<Reference>,
    /// Whether a restart would roll its pods now. A paused Deployment, an `OnDelete` strategy or
    /// a partition covering every replica accept the patch but roll nothing until their own
    /// trigger.
    #[serde(rename = "rollsNow")]
    pub rolls_now: bool,
    /// Why not, when it would not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferral: Option<Deferral>,
    /// The same, in words.
    #[serde(
        rename = "deferralReason",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub deferral_reason: Option<String>,
    /// Whether `rollsafe watch` rolls it when this Secret changes, as its own
    /// `rollsafe.dev/watch` annotation says.
    #[serde(default)]
    pub watch: WatchState,
    /// Why the controller's flap stop halted it (`rollsafe.dev/halted`), if it did: the
    /// controller rolls it for nothing until the annotation is removed. A restart still rolls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// A roll the controller holds for it (`rollsafe.dev/pending`): by a restart window, or
    /// awaiting approval. A restart still rolls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingRoll>,
}

/// A roll `rollsafe watch` holds, as the workload's mark says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRoll {
    /// `window` or `approval`.
    pub held_by: HeldBy,
    /// For a window: when it opens (UTC; absent when it never does). For an approval: since
    /// when it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The workload digest of the roll held (what an approval approves).
    pub digest: String,
}

impl PendingRoll {
    /// The roll `object`'s `rollsafe.dev/pending` mark holds, if it has one that reads.
    pub fn of(object: &serde_json::Value) -> Option<Self> {
        let mark = object
            .pointer("/metadata/annotations")?
            .get(PENDING)?
            .as_str()?;
        let read = PendingMark::parse(mark)?;
        Some(Self {
            held_by: read.held_by,
            at: read.at.filter(|at| *at != "-").map(str::to_owned),
            digest: read.digest.to_owned(),
        })
    }
}

impl Consumer {
    /// A consumer of `kind` of the Secret `secret`, read from its listed `object`.
    pub fn new(
        kind: WorkloadKind,
        name: String,
        secret: &str,
        references: Vec<Reference>,
        object: &serde_json::Value,
    ) -> Self {
        let deferral = Deferral::of(kind, object);
        let target = ConfigRef {
            kind: TargetKind::Secret,
            name: secret.to_owned(),
        };
        Self {
            kind,
            name,
            references,
            rolls_now: deferral.is_none(),
            deferral,
            deferral_reason: deferral.map(|d| d.reason().to_owned()),
            watch: WatchState::of(object, &target),
            halted: opt_in::halted(object),
            pending: PendingRoll::of(object),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{TargetKind, restart_consumers};
    use serde_json::json;

    fn example() -> ConsumersPreview {
        let paused = json!({"metadata": {"annotations": {"rollsafe.dev/watch": "true",
            "rollsafe.dev/halted": "flapping: 5 rolls within 600s; remove this annotation to resume",
            "rollsafe.dev/pending": "approval since=2026-12-03T06:00:00Z digest=v1:abc"}},
            "spec": {"paused": true, "template": {"spec": {
            "imagePullSecrets": [{"name": "db-creds"}],
            "containers": [{"name": "app", "envFrom": [{"secretRef": {"name": "db-creds"}}]}]}}}});
        let worker = json!({"spec": {"template": {"spec": {"containers": [{"name": "w",
            "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]}]}}}});
        let refs = |object: &serde_json::Value| {
            restart_consumers(&object["spec"]["template"])
                .into_iter()
                .filter(|r| r.name == "db-creds")
                .collect()
        };
        ConsumersPreview {
            namespace: "shop".into(),
            secret: "db-creds".into(),
            inventories: BTreeMap::from([
                (WorkloadKind::Deployment, InventoryState::complete()),
                (
                    WorkloadKind::StatefulSet,
                    InventoryState::incomplete(Failure {
                        code: FailureCode::Forbidden,
                        http_status: Some(403),
                    }),
                ),
                (WorkloadKind::DaemonSet, InventoryState::complete()),
            ]),
            workloads: vec![
                Consumer::new(
                    WorkloadKind::Deployment,
                    "api".into(),
                    "db-creds",
                    refs(&paused),
                    &paused,
                ),
                Consumer::new(
                    WorkloadKind::DaemonSet,
                    "worker".into(),
                    "db-creds",
                    refs(&worker),
                    &worker,
                ),
            ],
        }
    }

    #[test]
    fn the_wire_shape_is_pinned_and_reads_back() {
        let preview = example();
        let value = serde_json::to_value(&preview).unwrap();
        insta::assert_json_snapshot!("consumers_preview", value);
        let back: ConsumersPreview = serde_json::from_value(value).unwrap();
        assert_eq!(back, preview);
        assert!(!preview.is_complete());
        assert_eq!(preview.rolling_now(), 1);
        assert!(
            preview.workloads[0]
                .references
                .iter()
                .all(|r| r.kind == TargetKind::Secret)
        );
    }
}
