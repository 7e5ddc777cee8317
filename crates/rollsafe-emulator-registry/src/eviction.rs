//! The eviction subresource (`pkg/registry/core/pod/storage/eviction.go`): a pod is deleted
//! only when the PodDisruptionBudget that selects it allows a disruption, or when no budget
//! needs asking.
//!
//! The real handler's order is kept: a pod that is not running (`Pending`, `Succeeded`,
//! `Failed`) or already being deleted is deleted without asking; more than one budget selecting
//! the pod is the real 500; a pod that is not Ready is deleted without spending a disruption
//! when its budget is healthy (or its `unhealthyPodEvictionPolicy` is `AlwaysAllow`); otherwise
//! the budget must allow a disruption, or the answer is the real 429. The evicted pod gets the
//! `DisruptionTarget` condition (`EvictionByEvictionAPI`), then is deleted the way any pod is
//! deleted here — at once ([`Store::delete_object`]), its controller replacing it.
//!
//! Where the real handler reads the budget's status as the disruption controller last wrote it
//! (and decrements it, recording the pod in `disruptedPods`), this one is called through
//! [`crate::cluster::Cluster::evict`], which has the disruption controller sync the namespace
//! first, so the decision is on fresh counts, and again after the deletion and the
//! replacement: one lock covers the whole eviction, so there is no race to guard with a
//! resourceVersion precondition and no conflict to retry.

use serde_json::{Value, json};

use crate::controllers::rollout_sim::pods;
use crate::store::deletion::{Propagation, is_deleting};
use crate::store::{Preconditions, Store, UpdateMode, Write, meta_str};
use rollsafe_emulator_types::query::LabelSelector;
use rollsafe_emulator_types::resources::{def, ids};
use rollsafe_emulator_types::status::StatusError;
use rollsafe_emulator_types::util;

/// What the real 429 of a budget that allows no disruption says.
pub const BUDGET_VIOLATION: &str =
    "Cannot evict pod as it would violate the pod's disruption budget.";
/// The cause type of that 429 (`policyv1.DisruptionBudgetCause`).
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";
/// The message of the real 500 for a pod more than one budget selects.
pub const MULTIPLE_BUDGETS: &str = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// How long the real server asks a client to wait when a budget's spec is newer than its
/// status.
pub const PROCESSING_RETRY_SECONDS: u32 = 10;

/// An eviction as its `deleteOptions` ask for it.
#[derive(Debug, Clone, Default)]
pub struct Eviction {
    /// `deleteOptions.preconditions`.
    pub preconditions: Preconditions,
    /// `deleteOptions.propagationPolicy`.
    pub propagation: Propagation,
    /// `dryRun=All` (the query's or `deleteOptions.dryRun`): every check, nothing kept.
    pub write: Write,
}

/// Why a pod was not evicted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EvictionError {
    /// The pod is missing, or a precondition failed: the store's own answer.
    #[error("{0}")]
    Store(StatusError),
    /// The budget that selects the pod allows no disruption now.
    #[error("{BUDGET_VIOLATION}")]
    Budget {
        /// The budget.
        budget: String,
        /// Its `desiredHealthy`.
        desired: i64,
        /// Its `currentHealthy`.
        current: i64,
    },
    /// The budget's spec changed and its status does not show it yet (its controller could not
    /// sync it).
    #[error("{BUDGET_VIOLATION}")]
    Processing {
        /// The budget.
        budget: String,
    },
    /// More than one budget selects the pod.
    #[error("{MULTIPLE_BUDGETS}")]
    MultipleBudgets,
}

impl EvictionError {
    /// The static code of logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Store(_) => "refused_by_store",
            Self::Budget { .. } => "disruption_budget",
            Self::Processing { .. } => "budget_processing",
            Self::MultipleBudgets => "multiple_budgets",
        }
    }

    /// The answer, as the real server gives it.
    pub fn status(&self) -> StatusError {
        let too_many = |cause: String| {
            StatusError::new(
                429,
                "TooManyRequests",
                BUDGET_VIOLATION,
                Some(json!({"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]})),
            )
        };
        match self {
            Self::Store(status) => status.clone(),
            Self::Budget {
                budget,
                desired,
                current,
            } => too_many(format!(
                "The disruption budget {budget} needs {desired} healthy pods and has {current} currently"
            )),
            Self::Processing { budget } => too_many(format!(
                "The disruption budget {budget} is still being processed by the server."
            ))
            .with_retry_after(PROCESSING_RETRY_SECONDS),
            // Not an error but a Status the handler returns, with no reason.
            Self::MultipleBudgets => StatusError::new(500, "", MULTIPLE_BUDGETS, None),
        }
    }
}

impl From<StatusError> for EvictionError {
    fn from(status: StatusError) -> Self {
        Self::Store(status)
    }
}

/// `canIgnorePDB`: a pod that is not running, or already being deleted, has been disrupted
/// already. A pod without a phase — one a client created, which the emulator stores as given —
/// is `Pending`, the phase the real server gives every new pod.
fn needs_no_budget(pod: &Value) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("Pending");
    matches!(phase, "Pending" | "Succeeded" | "Failed") || is_deleting(pod)
}

/// The budgets of `ns` that select `pod`, as the eviction handler reads them: a budget with no
/// selector, an empty one or an invalid one selects nothing.
fn budgets_selecting(store: &Store, ns: &str, pod: &Value) -> Vec<Value> {
    store
        .range(ids::PODDISRUPTIONBUDGETS, Some(ns), None)
        .filter(|(_, budget)| {
            budget
                .pointer("/spec/selector")
                .filter(|s| !s.is_null())
                .and_then(|s| LabelSelector::from_object(s).ok())
                .is_some_and(|s| !s.is_empty() && s.matches(pod))
        })
        .map(|(_, budget)| (**budget).clone())
        .collect()
}

fn int_at(value: &Value, pointer: &str) -> i64 {
    value.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Evicts pod `name` of `ns`: `Ok` when it was deleted (or, for a dry run, would be). The
/// budgets' status is read as it is: the caller syncs it first.
pub fn evict(
    store: &mut Store,
    ns: &str,
    name: &str,
    eviction: &Eviction,
) -> Result<(), EvictionError> {
    let Some(pod) = store.get(ids::PODS, ns, name).cloned() else {
        return Err(StatusError::not_found(def(ids::PODS), name).into());
    };
    // The caller's preconditions, checked before anything is written.
    store.delete_object(
        ids::PODS,
        ns,
        name,
        &eviction.preconditions,
        eviction.propagation,
        Write::DryRun,
    )?;
    if needs_no_budget(&pod) {
        return delete(store, ns, name, eviction);
    }
    let budgets = budgets_selecting(store, ns, &pod);
    let budget = match budgets.as_slice() {
        [] => return delete(store, ns, name, eviction),
        [budget] => budget,
        _ => return Err(EvictionError::MultipleBudgets),
    };
    let budget_name = meta_str(budget, "name").unwrap_or_default().to_owned();
    let desired = int_at(budget, "/status/desiredHealthy");
    let current = int_at(budget, "/status/currentHealthy");
    let always_allow = budget
        .pointer("/spec/unhealthyPodEvictionPolicy")
        .and_then(Value::as_str)
        == Some("AlwaysAllow");
    // A pod that is not Ready does not count as healthy: evicting it spends nothing, unless
    // the budget is already short.
    if !pods::is_ready(&pod) && (always_allow || (current >= desired && desired > 0)) {
        return delete(store, ns, name, eviction);
    }
    if int_at(budget, "/status/observedGeneration") < int_at(budget, "/metadata/generation") {
        return Err(EvictionError::Processing {
            budget: budget_name,
        });
    }
    if int_at(budget, "/status/disruptionsAllowed") <= 0 {
        return Err(EvictionError::Budget {
            budget: budget_name,
            desired,
            current,
        });
    }
    delete(store, ns, name, eviction)
}

/// Marks the pod a disruption target and deletes it (a dry run only checks).
fn delete(
    store: &mut Store,
    ns: &str,
    name: &str,
    eviction: &Eviction,
) -> Result<(), EvictionError> {
    if eviction.write == Write::Commit
        && let Some(pod) = store.get(ids::PODS, ns, name).cloned()
    {
        let marked = with_disruption_target((*pod).clone());
        store.update(ids::PODS, ns, name, marked, UpdateMode::Status)?;
    }
    store.delete_object(
        ids::PODS,
        ns,
        name,
        &Preconditions::default(),
        eviction.propagation,
        eviction.write,
    )?;
    Ok(())
}

/// `pod` with the condition the eviction handler sets before it deletes it (its transition
/// time kept when the condition was already true, as `UpdatePodCondition` keeps it).
pub fn with_disruption_target(mut pod: Value) -> Value {
    let mut conditions: Vec<Value> = pod
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let previous = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some("DisruptionTarget"));
    let transition = previous
        .and_then(|i| conditions.get(i))
        .filter(|c| c.get("status").and_then(Value::as_str) == Some("True"))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(util::now_seconds()));
    let condition = json!({
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": null,
        "lastTransitionTime": transition,
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    });
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    if let Some(map) = pod.as_object_mut() {
        let status = map.entry("status").or_insert_with(|| json!({}));
        if !status.is_object() {
            *status = json!({});
        }
        status["conditions"] = json!(conditions);
    }
    pod
}

#[cfg(test)]
mod tests;
