//! The disruption controller (kube-controller-manager's `pkg/controller/disruption`), as a
//! client of the store: each PodDisruptionBudget's status — `expectedPods`, `desiredHealthy`,
//! `currentHealthy`, `disruptionsAllowed`, `observedGeneration` and the `DisruptionAllowed`
//! condition — computed from the pods its selector selects and, for a percentage or a
//! `maxUnavailable`, from the scale of their controllers, and written through `status` when it
//! changed.
//!
//! The emulator's server runs a [`Controller`] on the store's events, so a budget follows its
//! pods moments after they change, as the real controller follows its informers; the eviction
//! subresource ([`crate::eviction`]) syncs the namespace itself before it decides, so it never
//! reads a stale budget.
//!
//! Left out (docs/emulator.md): `disruptedPods` (an evicted pod is removed at once here, so
//! there is no termination to cover), the controller's Events (`NoPods`, `UnmanagedPods`,
//! `CalculateExpectedPodCountFailed`), the stale `DisruptionTarget` cleanup, and scales other
//! than a Deployment's (through its ReplicaSet), a bare ReplicaSet's and a StatefulSet's.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use crate::controllers::rollout_sim::pods;
use crate::store::deletion::is_deleting;
use crate::store::{Event, EventType, Store, UpdateMode, meta_str};
use rollsafe_emulator_types::query::LabelSelector;
use rollsafe_emulator_types::resources::{self, def, ids};
use rollsafe_emulator_types::util;

/// The budget's condition type.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

/// A budget's counts, as the controller writes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// `expectedPods`: the pods selected (integer `minAvailable`) or their controllers' scale.
    pub expected: i64,
    /// `desiredHealthy`.
    pub desired: i64,
    /// `currentHealthy`: selected pods Ready and not being deleted.
    pub current: i64,
    /// `disruptionsAllowed`.
    pub allowed: i64,
}

/// Why a budget's counts cannot be computed; the controller then writes its fail-safe status
/// (no disruption allowed, `SyncFailed`), with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// A selected pod's controller is none the controller can read a scale from.
    #[error("found no controllers for pod {0:?}")]
    NoController(String),
    /// The pod's controller is a kind without a `scale` subresource (a DaemonSet, a custom
    /// resource).
    #[error("{0} does not implement the scale subresource")]
    NoScale(String),
    /// A `minAvailable` or `maxUnavailable` string that is not a percentage.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage")]
    NotAPercentage,
    /// A percentage whose number does not parse.
    #[error("invalid value {0:?}: strconv.Atoi: parsing {1:?}: invalid syntax")]
    BadPercentage(String, String),
}

impl SyncError {
    /// The static code of logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NoController(_) => "no_controller",
            Self::NoScale(_) => "no_scale",
            Self::NotAPercentage => "not_a_percentage",
            Self::BadPercentage(..) => "bad_percentage",
        }
    }
}

/// The label selector of a budget, as the controller reads it: none (`null`, or invalid)
/// selects no pod, `{}` every pod of the namespace.
fn controller_selector(budget: &Value) -> Option<LabelSelector> {
    let selector = budget.pointer("/spec/selector").filter(|s| !s.is_null())?;
    LabelSelector::from_object(selector).ok()
}

/// The pods of `ns` that `budget` selects, in name order.
fn selected_pods(store: &Store, ns: &str, budget: &Value) -> Vec<Arc<Value>> {
    let Some(selector) = controller_selector(budget) else {
        return Vec::new();
    };
    store
        .range(ids::PODS, Some(ns), None)
        .filter(|(_, pod)| selector.matches(pod))
        .map(|(_, pod)| pod.clone())
        .collect()
}

/// `GetScaledValueFromIntOrPercent(value, total, roundUp: true)`.
fn scaled(value: &Value, total: i64) -> Result<i64, SyncError> {
    if let Some(n) = value.as_i64() {
        return Ok(n);
    }
    let text = value.as_str().unwrap_or_default();
    let digits = text.strip_suffix('%').ok_or(SyncError::NotAPercentage)?;
    let percent: i64 = digits
        .parse()
        .map_err(|_| SyncError::BadPercentage(text.to_owned(), digits.to_owned()))?;
    // Rounded up, as the controller asks.
    Ok((percent * total + 99).div_euclid(100))
}

/// The replicas of a workload, defaulted to 1.
fn replicas(workload: &Value) -> i64 {
    workload
        .pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// The controlling owner reference of `obj`.
fn controller_of(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller") == Some(&Value::Bool(true)))
}

/// The object `reference` names in `ns` when it is of `res` and has the reference's uid.
fn referenced<'s>(
    store: &'s Store,
    res: rollsafe_emulator_types::resources::ResId,
    ns: &str,
    reference: &Value,
) -> Option<&'s Arc<Value>> {
    let name = reference.get("name").and_then(Value::as_str)?;
    let object = store.get(res, ns, name)?;
    (meta_str(object, "uid") == reference.get("uid").and_then(Value::as_str)).then_some(object)
}

/// The scale of the controller of `pod`, keyed by that controller's uid: a ReplicaSet's
/// Deployment, else the ReplicaSet; a StatefulSet (`getExpectedScale`'s finders).
fn controller_scale(store: &Store, ns: &str, pod: &Value) -> Result<(String, i64), SyncError> {
    let pod_name = meta_str(pod, "name").unwrap_or_default().to_owned();
    let Some(reference) = controller_of(pod) else {
        return Err(SyncError::NoController(pod_name));
    };
    let kind = reference.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = reference
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let scale_of = |object: &Value| {
        (
            meta_str(object, "uid").unwrap_or_default().to_owned(),
            replicas(object),
        )
    };
    match (api_version, kind) {
        ("apps/v1", "ReplicaSet") => {
            let replica_set = referenced(store, ids::REPLICASETS, ns, reference)
                .ok_or_else(|| SyncError::NoController(pod_name.clone()))?;
            let deployment = controller_of(replica_set)
                .filter(|r| r.get("kind").and_then(Value::as_str) == Some("Deployment"))
                .and_then(|r| referenced(store, ids::DEPLOYMENTS, ns, r));
            Ok(scale_of(deployment.unwrap_or(replica_set)))
        }
        ("apps/v1", "StatefulSet") => referenced(store, ids::STATEFULSETS, ns, reference)
            .map(|s| scale_of(s))
            .ok_or(SyncError::NoController(pod_name)),
        _ => match resources::find_kind(api_version, kind) {
            Some(res) => Err(SyncError::NoScale(def(res).group_resource())),
            None => Err(SyncError::NoController(pod_name)),
        },
    }
}

/// The sum of the scales of the selected pods' controllers; pods without a controller are
/// left out (the real controller warns about them with an Event).
fn expected_scale(store: &Store, ns: &str, selected: &[Arc<Value>]) -> Result<i64, SyncError> {
    let mut scales: BTreeMap<String, i64> = BTreeMap::new();
    for pod in selected {
        if controller_of(pod).is_none() {
            continue;
        }
        let (uid, scale) = controller_scale(store, ns, pod)?;
        scales.insert(uid, scale);
    }
    Ok(scales.values().sum())
}

/// The counts of `budget` in `ns` now (`getExpectedPodCount`, `countHealthyPods`,
/// `updatePdbStatus`).
pub fn counts(store: &Store, ns: &str, budget: &Value) -> Result<Counts, SyncError> {
    let selected = selected_pods(store, ns, budget);
    let spec = budget.get("spec").cloned().unwrap_or_else(|| json!({}));
    let (expected, desired) = match (
        spec.get("maxUnavailable").filter(|v| !v.is_null()),
        spec.get("minAvailable").filter(|v| !v.is_null()),
    ) {
        (Some(max_unavailable), _) => {
            let expected = expected_scale(store, ns, &selected)?;
            let unavailable = scaled(max_unavailable, expected)?;
            (expected, (expected - unavailable).max(0))
        }
        (None, Some(Value::Number(min_available))) => (
            i64::try_from(selected.len()).unwrap_or(i64::MAX),
            min_available.as_i64().unwrap_or(0),
        ),
        (None, Some(min_available)) => {
            let expected = expected_scale(store, ns, &selected)?;
            (expected, scaled(min_available, expected)?)
        }
        (None, None) => (0, 0),
    };
    let current = selected
        .iter()
        .filter(|pod| !is_deleting(pod) && pods::is_ready(pod))
        .count();
    let current = i64::try_from(current).unwrap_or(i64::MAX);
    let allowed = if expected <= 0 {
        0
    } else {
        (current - desired).max(0)
    };
    Ok(Counts {
        expected,
        desired,
        current,
        allowed,
    })
}

/// `status.conditions` with the `DisruptionAllowed` condition set as `SetStatusCondition`
/// sets it: its transition time kept while its status holds.
fn with_condition(
    status: &Value,
    condition_status: &str,
    reason: &str,
    message: &str,
    observed: i64,
) -> Vec<Value> {
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let previous = conditions
        .iter()
        .position(|c| c.get("type").and_then(Value::as_str) == Some(DISRUPTION_ALLOWED));
    let transition = previous
        .and_then(|i| conditions.get(i))
        .filter(|c| c.get("status").and_then(Value::as_str) == Some(condition_status))
        .and_then(|c| c.get("lastTransitionTime").cloned())
        .unwrap_or_else(|| json!(util::now_seconds()));
    let mut condition = json!({
        "type": DISRUPTION_ALLOWED,
        "status": condition_status,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    });
    if observed != 0 {
        condition["observedGeneration"] = json!(observed);
    }
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    conditions
}

/// The status the controller writes for `budget` given what its sync found.
pub fn status_for(budget: &Value, counts: &Result<Counts, SyncError>) -> Value {
    let old = budget
        .get("status")
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    match counts {
        Ok(counts) => {
            let generation = budget
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let (condition, reason) = if counts.allowed > 0 {
                ("True", "SufficientPods")
            } else {
                ("False", "InsufficientPods")
            };
            let mut status = json!({
                "disruptionsAllowed": counts.allowed,
                "currentHealthy": counts.current,
                "desiredHealthy": counts.desired,
                "expectedPods": counts.expected,
                "conditions": with_condition(&old, condition, reason, "", generation),
            });
            if generation != 0 {
                status["observedGeneration"] = json!(generation);
            }
            status
        }
        Err(error) => {
            // `failSafe`: no disruption allowed, the rest as it was.
            let observed = old
                .get("observedGeneration")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let mut status = old.clone();
            status["disruptionsAllowed"] = json!(0);
            status["conditions"] = json!(with_condition(
                &old,
                "False",
                "SyncFailed",
                &error.to_string(),
                observed
            ));
            status
        }
    }
}

/// Writes the status of every budget in `ns` that changed.
pub fn sync_namespace(store: &mut Store, ns: &str) {
    let budgets: Vec<Arc<Value>> = store
        .range(ids::PODDISRUPTIONBUDGETS, Some(ns), None)
        .map(|(_, budget)| budget.clone())
        .collect();
    for budget in budgets {
        let found = counts(store, ns, &budget);
        if let Err(error) = &found {
            tracing::debug!(
                code = error.code(),
                "a budget's counts fell back to fail-safe"
            );
        }
        let status = status_for(&budget, &found);
        if budget.get("status") == Some(&status) {
            continue;
        }
        let name = meta_str(&budget, "name").unwrap_or_default().to_owned();
        let mut next = (*budget).clone();
        next["status"] = status;
        if let Err(error) = store.update(
            ids::PODDISRUPTIONBUDGETS,
            ns,
            &name,
            next,
            UpdateMode::Status,
        ) {
            tracing::warn!(%error, "writing a budget's status failed");
        }
    }
}

/// The namespaces that hold budgets.
fn budgeted_namespaces(store: &Store) -> BTreeSet<String> {
    store
        .range(ids::PODDISRUPTIONBUDGETS, None, None)
        .map(|((_, ns, _), _)| ns.clone())
        .collect()
}

/// Whether a change of a workload or ReplicaSet can move a budget: its scale, or its coming
/// and going.
fn scale_changed(event: &Event) -> bool {
    match (&event.kind, &event.prev) {
        (EventType::Modified, Some(prev)) => {
            prev.pointer("/spec/replicas") != event.object.pointer("/spec/replicas")
        }
        _ => true,
    }
}

/// The disruption controller as the server runs it on the store's events: which namespaces to
/// sync, knowing which hold budgets, so that changes elsewhere cost nothing.
#[derive(Debug, Default)]
pub struct Controller {
    budgeted: BTreeSet<String>,
}

impl Controller {
    /// The namespace `event` may move a budget in, if any: a budget's creation, deletion or
    /// spec change; a pod's change, or a controller's scale, where budgets are.
    pub fn wants(&self, event: &Event) -> Option<String> {
        let relevant = match event.res {
            ids::PODDISRUPTIONBUDGETS => match (&event.kind, &event.prev) {
                (EventType::Modified, Some(prev)) => {
                    prev.pointer("/metadata/generation")
                        != event.object.pointer("/metadata/generation")
                        || prev.get("spec") != event.object.get("spec")
                }
                _ => true,
            },
            ids::PODS => self.budgeted.contains(&event.namespace),
            ids::DEPLOYMENTS | ids::STATEFULSETS | ids::REPLICASETS => {
                self.budgeted.contains(&event.namespace) && scale_changed(event)
            }
            _ => false,
        };
        relevant.then(|| event.namespace.clone())
    }

    /// Syncs the budgets of `namespaces` (of every namespace when `None`) and learns again
    /// which namespaces hold budgets.
    pub fn sync(&mut self, store: &mut Store, namespaces: Option<&BTreeSet<String>>) {
        self.budgeted = budgeted_namespaces(store);
        let all;
        let namespaces = match namespaces {
            Some(namespaces) => namespaces,
            None => {
                all = self.budgeted.clone();
                &all
            }
        };
        for ns in namespaces {
            sync_namespace(store, ns);
        }
        self.budgeted = budgeted_namespaces(store);
    }
}

#[cfg(test)]
mod tests;
