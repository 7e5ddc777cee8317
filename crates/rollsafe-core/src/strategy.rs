//! How a consumer is restarted, and which consumers must not be patched.
//!
//! Two strategies (docs/strategies.md):
//!
//! - [`Strategy::Patch`], the default: a pod-template annotation; the workload's own controller
//!   rolls the pods.
//! - [`Strategy::Evict`]: the consuming pods are evicted through the Eviction API, one at a time
//!   by default, each replacement Ready before the next, so PodDisruptionBudgets hold and
//!   nothing writes the template — for workloads an operator or a GitOps tool reconciles, and
//!   for pods no workload owns.
//!
//! [`Owner::controlling`] reads who controls an object; a workload or pod whose controller is
//! not one of Kubernetes' own workload controllers is operator-owned. [`plan_step`] decides,
//! from the pods as they are, what one step of an eviction run does: it holds no state, so a
//! run that is interrupted and started again with the same `since` continues where it was —
//! a pod created after `since` counts as restarted and is never evicted for that change.

use std::fmt;
use std::str::FromStr;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::annotations::{EVICT_UNPROTECTED, MAX_UNAVAILABLE, STRATEGY};
use crate::object;

/// The most pods one `rollsafe.dev/max-unavailable` lets an eviction run take down at once.
pub const MAX_UNAVAILABLE_LIMIT: u32 = 100;

/// How a consumer is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Strategy {
    /// A pod-template annotation: the workload's controller rolls the pods.
    #[default]
    Patch,
    /// The consuming pods are evicted through the Eviction API, PodDisruptionBudgets holding.
    Evict,
}

impl Strategy {
    /// `patch` or `evict`, as written in `rollsafe.dev/strategy`.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Patch => "patch",
            Strategy::Evict => "evict",
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A value of `rollsafe.dev/strategy`, `rollsafe.dev/max-unavailable` or
/// `rollsafe.dev/evict-unprotected` that is not one of the accepted ones.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StrategyError {
    /// `rollsafe.dev/strategy` is neither `patch` nor `evict`.
    #[error("rollsafe.dev/strategy must be \"patch\" or \"evict\"")]
    UnknownStrategy,
    /// `rollsafe.dev/max-unavailable` is not a whole number from 1 to 100.
    #[error("rollsafe.dev/max-unavailable must be a whole number from 1 to 100")]
    MaxUnavailable,
    /// `rollsafe.dev/evict-unprotected` is neither `true` nor `false`.
    #[error("rollsafe.dev/evict-unprotected must be \"true\" or \"false\"")]
    EvictUnprotected,
}

impl StrategyError {
    /// The stable code (logs, metrics, JSON).
    pub fn code(&self) -> &'static str {
        match self {
            StrategyError::UnknownStrategy => "invalid_strategy",
            StrategyError::MaxUnavailable => "invalid_max_unavailable",
            StrategyError::EvictUnprotected => "invalid_evict_unprotected",
        }
    }
}

impl FromStr for Strategy {
    type Err = StrategyError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value.trim() {
            "patch" => Ok(Strategy::Patch),
            "evict" => Ok(Strategy::Evict),
            _ => Err(StrategyError::UnknownStrategy),
        }
    }
}

/// The strategy of workloads that do not choose one, per namespace: `--strategy evict`, or
/// `--strategy patch,payments=evict` (a default, then `NAMESPACE=STRATEGY` entries).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrategyDefaults {
    /// Where no entry names the namespace.
    pub default: Strategy,
    /// Per namespace.
    pub namespaces: std::collections::BTreeMap<String, Strategy>,
}

impl StrategyDefaults {
    /// The strategy of a workload in `namespace` that does not choose one.
    pub fn for_namespace(&self, namespace: &str) -> Strategy {
        self.namespaces
            .get(namespace)
            .copied()
            .unwrap_or(self.default)
    }
}

impl fmt::Display for StrategyDefaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.default)?;
        for (namespace, strategy) in &self.namespaces {
            write!(f, ",{namespace}={strategy}")?;
        }
        Ok(())
    }
}

impl FromStr for StrategyDefaults {
    type Err = StrategyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut defaults = StrategyDefaults::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            match entry.split_once('=') {
                Some((namespace, strategy)) => {
                    let namespace = namespace.trim();
                    if !crate::validation::is_dns1123_label(namespace) {
                        return Err(StrategyError::UnknownStrategy);
                    }
                    defaults
                        .namespaces
                        .insert(namespace.to_owned(), strategy.parse()?);
                }
                None => defaults.default = entry.parse()?,
            }
        }
        Ok(defaults)
    }
}

/// How an eviction run paces itself, read from an object's annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionSettings {
    /// The most consuming pods down at once (evicted and not yet replaced, or not Ready).
    pub max_unavailable: u32,
    /// Whether a single pod no PodDisruptionBudget protects may be evicted (downtime accepted).
    pub evict_unprotected: bool,
}

impl Default for EvictionSettings {
    fn default() -> Self {
        Self {
            max_unavailable: 1,
            evict_unprotected: false,
        }
    }
}

/// The strategy an object's annotations ask for (`None`: they say nothing).
pub fn strategy_of(object: &Value) -> Result<Option<Strategy>, StrategyError> {
    annotation(object, STRATEGY).map(str::parse).transpose()
}

/// The eviction settings of an object's annotations, the defaults where they say nothing.
pub fn eviction_settings_of(object: &Value) -> Result<EvictionSettings, StrategyError> {
    let mut settings = EvictionSettings::default();
    if let Some(value) = annotation(object, MAX_UNAVAILABLE) {
        settings.max_unavailable = value
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_UNAVAILABLE_LIMIT).contains(n))
            .ok_or(StrategyError::MaxUnavailable)?;
    }
    if let Some(value) = annotation(object, EVICT_UNPROTECTED) {
        settings.evict_unprotected = match value.trim() {
            "true" => true,
            "false" => false,
            _ => return Err(StrategyError::EvictUnprotected),
        };
    }
    Ok(settings)
}

fn annotation<'v>(object: &'v Value, key: &str) -> Option<&'v str> {
    object::annotations(object)?.get(key)?.as_str()
}

/// The controlling owner of an object: its `ownerReferences` entry with `controller: true`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// `apiVersion` of the owner (`apps/v1`, `kafka.strimzi.io/v1beta2`).
    pub api_version: String,
    /// Its kind.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// Its uid (to match pods to the owner they belong to; never shown).
    #[serde(skip)]
    pub uid: String,
}

/// Kubernetes' own controllers of pods and workloads: what owns a pod or a workload without
/// making it operator-owned.
const KUBERNETES_CONTROLLERS: [(&str, &str); 7] = [
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "ReplicationController"),
];

impl Owner {
    /// The `ownerReferences` entry of `object` with `controller: true`, if it has one with a
    /// kind and a name.
    pub fn controlling(object: &Value) -> Option<Owner> {
        object
            .get("metadata")?
            .get("ownerReferences")?
            .as_array()?
            .iter()
            .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
            .and_then(|r| {
                let text = |field: &str| r.get(field).and_then(Value::as_str).map(str::to_owned);
                Some(Owner {
                    api_version: text("apiVersion")?,
                    kind: text("kind")?,
                    name: text("name")?,
                    uid: text("uid").unwrap_or_default(),
                })
            })
    }

    /// The API group of the owner (`""` for the core group).
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// Whether the owner is one of Kubernetes' own workload controllers (Deployment,
    /// ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, ReplicationController), or a Node (a
    /// static pod's mirror).
    pub fn is_kubernetes_controller(&self) -> bool {
        (self.group().is_empty() && self.kind == "Node")
            || KUBERNETES_CONTROLLERS
                .iter()
                .any(|(group, kind)| *group == self.group() && *kind == self.kind)
    }
}

impl fmt::Display for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind, self.name)
    }
}

/// The owner that makes `object` operator-owned: its controlling owner, when that is not one of
/// Kubernetes' own controllers.
pub fn operator_owner(object: &Value) -> Option<Owner> {
    Owner::controlling(object).filter(|owner| !owner.is_kubernetes_controller())
}

/// The instant an eviction run restarts pods for: `change` rounded up to a whole second.
/// A pod's `creationTimestamp` has whole seconds, so a run must not evict before this instant
/// (at most a second's wait): every pod created before it is stale, every pod the run's
/// evictions bring is created at or after it.
pub fn eviction_instant(change: Timestamp) -> Timestamp {
    change
        .round(
            jiff::TimestampRound::new()
                .smallest(jiff::Unit::Second)
                .mode(jiff::RoundMode::Ceil),
        )
        .unwrap_or(change)
}

/// The phase a finished pod is in (`Succeeded` or `Failed`), `None` for a pod that may still
/// run. A finished pod runs nothing: it consumes nothing now, and no restart reaches it —
/// evicting one would only delete it (a completed Job's pod and its logs), and nothing would
/// recreate it.
pub fn finished_phase(pod: &Value) -> Option<&'static str> {
    match pod.pointer("/status/phase").and_then(Value::as_str) {
        Some("Succeeded") => Some("Succeeded"),
        Some("Failed") => Some("Failed"),
        _ => None,
    }
}

/// A consuming pod as an eviction run sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// Its name.
    pub name: String,
    /// `metadata.creationTimestamp`.
    pub created: Timestamp,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// Whether it is being deleted (`metadata.deletionTimestamp` set).
    pub deleting: bool,
    /// The first waiting reason its containers give (`CrashLoopBackOff`, …), shown capped.
    pub waiting_reason: Option<String>,
}

impl PodView {
    /// The pod as an eviction run sees it; `None` without a name or a creation time.
    pub fn of(pod: &Value) -> Option<PodView> {
        let name = object::metadata_text(pod, "name");
        let created = object::metadata_text(pod, "creationTimestamp")
            .parse::<Timestamp>()
            .ok()?;
        if name.is_empty() {
            return None;
        }
        let status = pod.get("status");
        let ready = status
            .and_then(|s| s.get("conditions"))
            .and_then(Value::as_array)
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("Ready")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            });
        let deleting = pod
            .get("metadata")
            .and_then(|m| m.get("deletionTimestamp"))
            .is_some_and(|t| !t.is_null());
        let waiting_reason = status
            .and_then(|s| s.get("containerStatuses"))
            .and_then(Value::as_array)
            .and_then(|statuses| {
                statuses.iter().find_map(|c| {
                    c.get("state")?
                        .get("waiting")?
                        .get("reason")?
                        .as_str()
                        .map(|r| crate::shown::shown_within(r, 64))
                })
            });
        Some(PodView {
            name: name.to_owned(),
            created,
            ready,
            deleting,
            waiting_reason,
        })
    }

    /// The trailing ordinal of a StatefulSet-like name (`kafka-2` → 2).
    pub fn ordinal(&self) -> Option<u64> {
        let (_, digits) = self.name.rsplit_once('-')?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }

    /// Whether the pod was started before the change and still runs: it must be restarted.
    pub fn is_stale(&self, since: Timestamp) -> bool {
        !self.deleting && self.created < since
    }
}

/// What one step of an eviction run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every consuming pod was started after the change and is Ready: the run is complete.
    Complete,
    /// Evict these pods now (in this order).
    Evict(Vec<String>),
    /// Wait: `unavailable` pods are down (evicted and not yet replaced, or not Ready), as many as
    /// the run allows.
    Wait {
        /// Pods down now, counting a pod evicted and not yet recreated.
        unavailable: usize,
    },
}

/// The next step of a run that restarts, for a change at `since`, the consuming pods of one
/// owner, `expected` of them when all are present (a pod evicted and not yet recreated counts
/// as down), at most `max_unavailable` down at once. Pods with a StatefulSet-like ordinal go
/// from the highest down; the others oldest first.
pub fn plan_step(
    pods: &[PodView],
    since: Timestamp,
    expected: usize,
    max_unavailable: u32,
) -> Step {
    let up = pods.iter().filter(|p| !p.deleting && p.ready).count();
    let down = expected.saturating_sub(up);
    let mut stale: Vec<&PodView> = pods.iter().filter(|p| p.is_stale(since)).collect();
    if stale.is_empty() {
        return if down == 0 {
            Step::Complete
        } else {
            Step::Wait { unavailable: down }
        };
    }
    let room = usize::try_from(max_unavailable)
        .unwrap_or(usize::MAX)
        .saturating_sub(down);
    if room == 0 {
        return Step::Wait { unavailable: down };
    }
    stale.sort_by(|a, b| {
        b.ordinal()
            .cmp(&a.ordinal())
            .then(a.created.cmp(&b.created))
            .then(a.name.cmp(&b.name))
    });
    Step::Evict(
        stale
            .into_iter()
            .take(room)
            .map(|p| p.name.clone())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_has_finished_when_it_succeeded_or_failed() {
        let phase = |phase: Value| json!({"status": {"phase": phase}});
        assert_eq!(
            finished_phase(&phase(json!("Succeeded"))),
            Some("Succeeded")
        );
        assert_eq!(finished_phase(&phase(json!("Failed"))), Some("Failed"));
        for running in [
            json!("Running"),
            json!("Pending"),
            json!("Unknown"),
            json!(7),
        ] {
            assert_eq!(finished_phase(&phase(running)), None);
        }
        assert_eq!(finished_phase(&json!({"metadata": {"name": "p"}})), None);
    }

    fn pod(name: &str, created: &str, ready: bool) -> PodView {
        PodView {
            name: name.to_owned(),
            created: created.parse().unwrap_or_default(),
            ready,
            deleting: false,
            waiting_reason: None,
        }
    }

    const BEFORE: &str = "2026-12-07T10:00:00Z";
    const AFTER: &str = "2026-12-07T10:05:00Z";

    fn since() -> Timestamp {
        "2026-12-07T10:01:00Z".parse().unwrap_or_default()
    }

    #[test]
    fn the_instant_is_the_next_whole_second() {
        let at = |t: &str| t.parse::<Timestamp>().unwrap_or_default();
        assert_eq!(
            eviction_instant(at("2026-12-07T10:01:00.001Z")),
            at("2026-12-07T10:01:01Z")
        );
        assert_eq!(
            eviction_instant(at("2026-12-07T10:01:00Z")),
            at("2026-12-07T10:01:00Z")
        );
        // A replacement created in the second the run started is not stale.
        let replacement = pod("kafka-2", "2026-12-07T10:01:01Z", true);
        assert!(!replacement.is_stale(eviction_instant(at("2026-12-07T10:01:00.500Z"))));
    }

    #[test]
    fn ordinals_go_from_the_highest_down_one_at_a_time() {
        let pods = [
            pod("kafka-0", BEFORE, true),
            pod("kafka-2", BEFORE, true),
            pod("kafka-1", BEFORE, true),
        ];
        assert_eq!(
            plan_step(&pods, since(), 3, 1),
            Step::Evict(vec!["kafka-2".into()])
        );
        assert_eq!(
            plan_step(&pods, since(), 3, 2),
            Step::Evict(vec!["kafka-2".into(), "kafka-1".into()])
        );
    }

    #[test]
    fn a_pod_evicted_and_not_yet_recreated_counts_as_down() {
        let pods = [pod("kafka-0", BEFORE, true), pod("kafka-1", BEFORE, true)];
        assert_eq!(
            plan_step(&pods, since(), 3, 1),
            Step::Wait { unavailable: 1 }
        );
    }

    #[test]
    fn a_replacement_not_ready_holds_the_next_eviction() {
        let pods = [
            pod("kafka-0", BEFORE, true),
            pod("kafka-1", BEFORE, true),
            pod("kafka-2", AFTER, false),
        ];
        assert_eq!(
            plan_step(&pods, since(), 3, 1),
            Step::Wait { unavailable: 1 }
        );
    }

    #[test]
    fn pods_started_after_the_change_are_never_evicted_for_it() {
        let pods = [pod("web-abc", AFTER, true), pod("web-def", AFTER, true)];
        assert_eq!(plan_step(&pods, since(), 2, 1), Step::Complete);
        let mut terminating = pod("web-old", BEFORE, true);
        terminating.deleting = true;
        let pods = [pod("web-abc", AFTER, true), terminating];
        assert_eq!(
            plan_step(&pods, since(), 2, 1),
            Step::Wait { unavailable: 1 }
        );
    }

    #[test]
    fn without_ordinals_the_oldest_goes_first() {
        let pods = [
            pod("web-zz", "2026-12-07T09:00:00Z", true),
            pod("web-aa", "2026-12-07T09:30:00Z", true),
        ];
        assert_eq!(
            plan_step(&pods, since(), 2, 1),
            Step::Evict(vec!["web-zz".into()])
        );
    }

    #[test]
    fn operator_owners_are_told_from_kubernetes_controllers() {
        let owned = |api_version: &str, kind: &str| {
            json!({"metadata": {"ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "not-controller", "uid": "0"},
                {"apiVersion": api_version, "kind": kind, "name": "my-cluster", "uid": "1", "controller": true}
            ]}})
        };
        let kafka = operator_owner(&owned("kafka.strimzi.io/v1beta2", "Kafka"));
        assert_eq!(
            kafka.map(|o| o.to_string()),
            Some("Kafka/my-cluster".into())
        );
        assert_eq!(operator_owner(&owned("apps/v1", "ReplicaSet")), None);
        assert_eq!(operator_owner(&owned("batch/v1", "Job")), None);
        assert_eq!(operator_owner(&owned("v1", "Node")), None);
        // A kind named like Kubernetes' own in another group is an operator's.
        assert!(operator_owner(&owned("example.com/v1", "Deployment")).is_some());
        assert_eq!(operator_owner(&json!({"metadata": {}})), None);
    }

    #[test]
    fn defaults_name_a_strategy_per_namespace() {
        let defaults: StrategyDefaults = "patch, payments=evict".parse().unwrap_or_default();
        assert_eq!(defaults.for_namespace("payments"), Strategy::Evict);
        assert_eq!(defaults.for_namespace("shop"), Strategy::Patch);
        let evict: StrategyDefaults = "evict".parse().unwrap_or_default();
        assert_eq!(evict.for_namespace("shop"), Strategy::Evict);
        assert!("payments=delete".parse::<StrategyDefaults>().is_err());
        assert_eq!(defaults.to_string(), "patch,payments=evict");
        assert!("Bad_NS=evict".parse::<StrategyDefaults>().is_err());
    }

    #[test]
    fn settings_are_parsed_and_refused_whole() {
        let with = |annotations: Value| json!({"metadata": {"annotations": annotations}});
        assert_eq!(
            strategy_of(&with(json!({STRATEGY: "evict"}))),
            Ok(Some(Strategy::Evict))
        );
        assert_eq!(strategy_of(&with(json!({}))), Ok(None));
        assert_eq!(
            strategy_of(&with(json!({STRATEGY: "delete"}))),
            Err(StrategyError::UnknownStrategy)
        );
        assert_eq!(
            eviction_settings_of(&with(
                json!({MAX_UNAVAILABLE: "2", EVICT_UNPROTECTED: "true"})
            )),
            Ok(EvictionSettings {
                max_unavailable: 2,
                evict_unprotected: true
            })
        );
        for bad in ["0", "-1", "101", "two", ""] {
            assert_eq!(
                eviction_settings_of(&with(json!({MAX_UNAVAILABLE: bad}))),
                Err(StrategyError::MaxUnavailable),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_pod_reads_its_readiness_deletion_and_waiting_reason() {
        let view = PodView::of(&json!({
            "metadata": {"name": "kafka-1", "creationTimestamp": BEFORE, "deletionTimestamp": AFTER},
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [{"state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
            }
        }));
        let view = view.unwrap_or_else(|| pod("missing", BEFORE, false));
        assert_eq!(view.ordinal(), Some(1));
        assert!(view.deleting && !view.ready);
        assert_eq!(view.waiting_reason.as_deref(), Some("CrashLoopBackOff"));
        assert_eq!(PodView::of(&json!({"metadata": {"name": "x"}})), None);
    }
}
