//! The rollout log: every pod-template change of a workload, and whether pods would roll.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::store::meta_str;
use crate::strategy::workloads;
use rollsafe_emulator_types::resources::ResourceDef;
use rollsafe_emulator_types::util;

/// A pod-template change of a Deployment, StatefulSet or DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rollout {
    /// Order of recording, from 1.
    pub seq: u64,
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: String,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// uid of the workload.
    pub uid: String,
    /// `metadata.generation` after the change.
    pub generation: i64,
    /// `metadata.resourceVersion` after the change.
    pub resource_version: String,
    /// Whether pods would roll. `false`: the template changed but nothing rolls (paused
    /// Deployment, `OnDelete` strategy, StatefulSet partition ≥ replicas).
    pub rolled: bool,
    /// Why nothing rolls: `Paused`, `OnDelete` or `Partition`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The annotations of the new pod template.
    pub template_annotations: Value,
    /// When it was recorded (RFC 3339).
    pub time: String,
}

impl Rollout {
    /// The record of a template change of `obj` (as stored), the `seq`-th.
    pub fn record(seq: u64, d: &ResourceDef, obj: &Value) -> Self {
        let reason = workloads::held_back(d, obj);
        Self {
            seq,
            kind: d.kind.to_string(),
            namespace: meta_str(obj, "namespace").unwrap_or("").to_string(),
            name: meta_str(obj, "name").unwrap_or("").to_string(),
            uid: meta_str(obj, "uid").unwrap_or("").to_string(),
            generation: obj
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0),
            resource_version: meta_str(obj, "resourceVersion").unwrap_or("").to_string(),
            rolled: reason.is_none(),
            reason: reason.map(str::to_string),
            template_annotations: obj
                .pointer("/spec/template/metadata/annotations")
                .cloned()
                .unwrap_or_else(|| json!({})),
            time: util::now_precise(),
        }
    }
}

/// Rollouts the log keeps (the newest; their `seq` keeps counting), so a long sandbox session
/// or load run does not grow without end.
pub const MAX_ROLLOUTS: usize = 10_000;

/// The newest [`MAX_ROLLOUTS`] rollouts, oldest first.
#[derive(Debug, Default)]
pub struct RolloutLog {
    rollouts: VecDeque<Rollout>,
    seq: u64,
}

impl RolloutLog {
    /// Records a pod-template change of `obj` (a `d`, as stored).
    pub fn record(&mut self, d: &ResourceDef, obj: &Value) {
        self.seq += 1;
        if self.rollouts.len() == MAX_ROLLOUTS {
            self.rollouts.pop_front();
        }
        self.rollouts.push_back(Rollout::record(self.seq, d, obj));
    }

    /// The rollouts kept, oldest first.
    pub fn rollouts(&self) -> Vec<Rollout> {
        self.rollouts.iter().cloned().collect()
    }

    /// Forgets the rollouts (their `seq` keeps counting).
    pub fn clear(&mut self) {
        self.rollouts.clear();
    }
}
