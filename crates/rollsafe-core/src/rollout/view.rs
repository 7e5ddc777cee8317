//! The rollout state of a Secret's consumers, as one read answers it: the shape of
//! `GET /api/namespaces/{ns}/secrets/{name}/rollout`, the typed client and the CLI's `--wait`
//! through a server.
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true }, … },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "state": "progressing",
//!                    "progress": { "desired": 3, "updated": 1, "ready": 3, "available": 3 },
//!                    "restartedAt": "2026-12-02T19:04:21.120Z" } ] }
//! ```
//!
//! A read is stateless — any replica answers — so it cannot know a workload's past: it gives
//! the restart annotation's current value (`restartedAt`, a time rollsafe wrote), and the
//! caller's [`super::Follower`] pins the first value it sees after its restart and calls a later
//! one superseded. No uid, resourceVersion or Secret value is in it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::follow::{Observation, template_annotation};
use super::{Progress, RolloutState, RolloutStatus, StallReason, classify};
use crate::preview::InventoryState;
use crate::workload::{Deferral, WorkloadKind};

/// The rollout state of one Secret's consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumersRollout {
    /// The namespace listed.
    pub namespace: String,
    /// The Secret.
    pub secret: String,
    /// One entry per kind, as in the consumers preview.
    pub inventories: BTreeMap<WorkloadKind, InventoryState>,
    /// The consumers of the complete inventories, by kind, then name.
    pub workloads: Vec<WorkloadRollout>,
}

/// One consumer's rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadRollout {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// Where the rollout stands, from this read alone (never `superseded` or `gone`: those
    /// need the caller's memory).
    pub state: RolloutState,
    /// Replica counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// Why a deferred workload does not roll now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferral: Option<Deferral>,
    /// The same, in words.
    #[serde(
        rename = "deferralReason",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub deferral_reason: Option<String>,
    /// Why a stalled workload does not move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<StallReason>,
    /// `status.observedGeneration`, so a follower sees the controller move.
    #[serde(rename = "observedGeneration", default)]
    pub observed_generation: i64,
    /// The restart annotation's value on the pod template, if it has one.
    #[serde(
        rename = "restartedAt",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub restarted_at: Option<String>,
}

impl WorkloadRollout {
    /// Reads a listed `object` of `kind`, whose restart annotation is `annotation`.
    pub fn of(kind: WorkloadKind, name: String, object: &Value, annotation: &str) -> Self {
        let status = classify(kind, object);
        Self {
            kind,
            name,
            state: status.state,
            progress: status.progress,
            deferral: status.deferral,
            deferral_reason: status.deferral.map(|d| d.reason().to_owned()),
            reason: status.reason,
            observed_generation: object
                .pointer("/status/observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            restarted_at: template_annotation(object, annotation).map(str::to_owned),
        }
    }

    /// What a follower needs of it (no uid, no template: the route has neither).
    pub fn observation(&self) -> Observation {
        Observation {
            uid: None,
            marker: self.restarted_at.clone(),
            template: None,
            observed_generation: self.observed_generation,
            status: RolloutStatus {
                state: self.state,
                progress: self.progress,
                deferral: self.deferral,
                reason: self.reason.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_wire_shape_is_pinned_and_reads_back() {
        let object = json!({"metadata": {"uid": "secret-uid", "resourceVersion": "77", "generation": 4},
            "spec": {"replicas": 3, "template": {"metadata": {"annotations": {"krypton.io/restarted-at": "2026-12-02T19:04:21.120Z"}}}},
            "status": {"observedGeneration": 4, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3}});
        let view = ConsumersRollout {
            namespace: "shop".into(),
            secret: "db-creds".into(),
            inventories: BTreeMap::from([(WorkloadKind::Deployment, InventoryState::complete())]),
            workloads: vec![WorkloadRollout::of(
                WorkloadKind::Deployment,
                "api".into(),
                &object,
                "krypton.io/restarted-at",
            )],
        };
        let value = serde_json::to_value(&view).unwrap();
        let text = value.to_string();
        assert!(
            !text.contains("secret-uid") && !text.contains("\"77\""),
            "{text}"
        );
        insta::assert_json_snapshot!("consumers_rollout", value);
        let back: ConsumersRollout = serde_json::from_value(value).unwrap();
        assert_eq!(back, view);
        assert_eq!(back.workloads[0].state, RolloutState::Progressing);
    }
}
