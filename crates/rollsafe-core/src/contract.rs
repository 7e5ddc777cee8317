//! The Restart Consumers result contract.
//!
//! [`RestartOutcome`] collects what happened during one run — acknowledged patches, failed
//! patches, failed inventories — and [`RestartOutcome::into_result`] turns it into the
//! [`RestartResult`] the API returns, with its status, HTTP code, message and note:
//!
//! | status | HTTP | when |
//! |---|---|---|
//! | `requested` | 200 | ≥1 acknowledged, no patch failures, all three inventories complete |
//! | `no_targets` | 200 | all three inventories complete, zero matches, nothing attempted |
//! | `partial` | 207 | ≥1 acknowledged, plus patch and/or discovery failures |
//! | `failed` | 503 | zero acknowledged, with patch and/or discovery failures |
//!
//! A failed inventory with zero known matches is `failed`, never `no_targets`. Entries are
//! ordered by kind (Deployment, StatefulSet, DaemonSet), then name. Results never carry uids,
//! resourceVersions or upstream text.

use serde::{Deserialize, Serialize};

use crate::failure::{Failure, FailureCode};
use crate::workload::WorkloadKind;

/// The acknowledgement note sent with every result.
pub const NOTE: &str = "Only acknowledged pod-template patches are reported as requested. Rollout completion, readiness, and credential uptake are not verified.";

/// The outcome of a run, as the contract names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartStatus {
    /// At least one acknowledged patch, no patch failures, all three inventories complete.
    Requested,
    /// All three inventories complete with zero matching workloads; no patch attempted.
    NoTargets,
    /// At least one acknowledged patch, plus patch and/or discovery failures.
    Partial,
    /// Zero acknowledged patches, with patch and/or discovery failures.
    Failed,
}

impl RestartStatus {
    /// The HTTP status code of a result with this status.
    pub fn http_status(self) -> u16 {
        match self {
            RestartStatus::Requested | RestartStatus::NoTargets => 200,
            RestartStatus::Partial => 207,
            RestartStatus::Failed => 503,
        }
    }

    /// The status as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RestartStatus::Requested => "requested",
            RestartStatus::NoTargets => "no_targets",
            RestartStatus::Partial => "partial",
            RestartStatus::Failed => "failed",
        }
    }
}

/// A workload named in a result: `{ kind, name }`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkloadName {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
}

/// A matched workload whose patch was not acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchFailure {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// The classified reason.
    pub code: FailureCode,
    /// Fixed guidance for the code.
    pub message: String,
    /// The upstream HTTP status, when there was one.
    #[serde(
        rename = "httpStatus",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_status: Option<u16>,
}

/// A workload kind whose inventory failed; no workload name is invented for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveryFailure {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The classified reason.
    pub code: FailureCode,
    /// Fixed guidance for the code.
    pub message: String,
    /// The upstream HTTP status, or 503 for a locally detected incomplete inventory.
    #[serde(
        rename = "httpStatus",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_status: Option<u16>,
}

/// The body of a restart result (HTTP 200, 207 or 503).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartResult {
    /// The outcome.
    pub status: RestartStatus,
    /// Known matches from complete inventories: `requested.len() + failures.len()`.
    pub matched: usize,
    /// Workloads whose patch was acknowledged.
    pub requested: Vec<WorkloadName>,
    /// Matched workloads whose patch was not acknowledged, or that were never patched.
    pub failures: Vec<PatchFailure>,
    /// Workload kinds whose inventory failed.
    pub discovery_failures: Vec<DiscoveryFailure>,
    /// A human-readable summary. Automation should use `status` and the arrays.
    pub message: String,
    /// What an acknowledgement does and does not mean.
    pub note: String,
    /// Equal to `message` on a 503 (`failed`) result; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl RestartResult {
    /// The HTTP status code this result is sent with.
    pub fn http_status(&self) -> u16 {
        self.status.http_status()
    }
}

/// What happened during one run, collected in any order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RestartOutcome {
    requested: Vec<WorkloadName>,
    failures: Vec<(WorkloadName, Failure)>,
    discovery_failures: Vec<(WorkloadKind, Failure)>,
}

impl RestartOutcome {
    /// An empty outcome: nothing matched yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A patch of `kind`/`name` was acknowledged.
    pub fn acknowledged(&mut self, kind: WorkloadKind, name: impl Into<String>) {
        self.requested.push(WorkloadName {
            kind,
            name: name.into(),
        });
    }

    /// A matched workload was not patched, or its patch was not acknowledged.
    pub fn failed(&mut self, kind: WorkloadKind, name: impl Into<String>, failure: Failure) {
        self.failures.push((
            WorkloadName {
                kind,
                name: name.into(),
            },
            failure,
        ));
    }

    /// The inventory of `kind` failed or was incomplete.
    pub fn discovery_failed(&mut self, kind: WorkloadKind, failure: Failure) {
        self.discovery_failures.push((kind, failure));
    }

    /// The status this outcome has.
    pub fn status(&self) -> RestartStatus {
        let any_failure = !self.failures.is_empty() || !self.discovery_failures.is_empty();
        match (self.requested.is_empty(), any_failure) {
            (false, false) => RestartStatus::Requested,
            (false, true) => RestartStatus::Partial,
            (true, true) => RestartStatus::Failed,
            (true, false) => RestartStatus::NoTargets,
        }
    }

    /// The result body, entries ordered by kind then name.
    pub fn into_result(self) -> RestartResult {
        let status = self.status();
        let RestartOutcome {
            mut requested,
            mut failures,
            mut discovery_failures,
        } = self;
        requested.sort();
        failures.sort_by(|(a, _), (b, _)| a.cmp(b));
        discovery_failures.sort_by_key(|(kind, _)| *kind);
        let matched = requested.len() + failures.len();
        let message = summary(
            status,
            requested.len(),
            matched,
            failures.len(),
            discovery_failures.len(),
        );
        RestartResult {
            status,
            matched,
            requested,
            failures: failures
                .into_iter()
                .map(|(workload, failure)| PatchFailure {
                    kind: workload.kind,
                    name: workload.name,
                    code: failure.code,
                    message: failure.code.message().to_owned(),
                    http_status: failure.http_status,
                })
                .collect(),
            discovery_failures: discovery_failures
                .into_iter()
                .map(|(kind, failure)| DiscoveryFailure {
                    kind,
                    code: failure.code,
                    message: failure.code.discovery_message().to_owned(),
                    http_status: failure.http_status,
                })
                .collect(),
            error: (status == RestartStatus::Failed).then(|| message.clone()),
            message,
            note: NOTE.to_owned(),
        }
    }
}

/// `n` followed by the singular or plural noun.
fn count(n: usize, singular: &str, plural: &str) -> String {
    format!("{n} {}", if n == 1 { singular } else { plural })
}

fn summary(
    status: RestartStatus,
    requested: usize,
    matched: usize,
    failed: usize,
    failed_kinds: usize,
) -> String {
    if status == RestartStatus::NoTargets {
        return "No workloads reference this Secret.".to_owned();
    }
    let mut message = if status == RestartStatus::Failed {
        "No rollout was requested.".to_owned()
    } else {
        format!(
            "Rollout requested for {requested} of {}.",
            count(matched, "matched workload", "matched workloads")
        )
    };
    if failed > 0 {
        let verb = if failed == 1 {
            "request failed"
        } else {
            "requests failed"
        };
        message.push_str(&format!(" {failed} patch {verb}."));
    }
    if failed_kinds > 0 {
        message.push_str(&format!(
            " Discovery failed for {}.",
            count(failed_kinds, "workload kind", "workload kinds")
        ));
    }
    message
}

#[cfg(test)]
mod tests;
