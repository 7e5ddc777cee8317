//! Who owns a consumer, and how it is restarted when a template patch is not simply the way:
//! the part of the consumers preview that `rollsafe why` and the page share.
//!
//! - [`RestartBy`]: a workload an operator's resource controls
//!   ([`crate::strategy::operator_owner`]), or whose `rollsafe.dev/strategy` (its own, else the
//!   Secret's) chooses, says how it is restarted, in fixed words. The controller reads the
//!   workload's strategy only (docs/strategies.md): the Secret's is said as asked, not as done.
//! - [`PodConsumers`]: the pods that consume the Secret and belong to no Deployment,
//!   StatefulSet or DaemonSet — owned by another resource (an operator's, a Job, a bare
//!   ReplicaSet) or by nothing — grouped by their controlling owner, with how each group is
//!   restarted; or why they could not be read ([`PodsUnread`]). A pod belongs to a workload
//!   when a StatefulSet or DaemonSet controls it, or a ReplicaSet the Deployment controller
//!   named `<deployment>-<pod-template-hash>` ([`workload_of_pod`]): nothing else is read to
//!   tell.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::strategy::{Owner, Strategy, StrategyDefaults, StrategyError, strategy_of};
use crate::workload::WorkloadKind;

/// The most pod names one group of [`PodConsumers`] lists (its `count` has them all).
pub const MAX_PODS_NAMED: usize = 20;

/// The label the Deployment controller puts on a ReplicaSet's pods, the suffix of the
/// ReplicaSet's name.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// Where the strategy of a consumer comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StrategyFrom {
    /// The workload's own `rollsafe.dev/strategy`.
    Workload,
    /// The Secret's `rollsafe.dev/strategy` (the workload says nothing).
    Secret,
    /// Neither says: a template patch.
    Default,
    /// Neither says, and the controller's `--strategy` for the namespace (from its published
    /// settings) does: `rollsafe why` only, which reads those settings.
    Controller,
}

/// How a workload is restarted, when that is not simply a patch of a template nobody else
/// owns: an operator's resource controls it, or a `rollsafe.dev/strategy` chooses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartBy {
    /// `patch` or `evict`; absent when the `rollsafe.dev/strategy` that decides is not
    /// understood.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<Strategy>,
    /// Where that comes from: `workload`, `secret` or `default`.
    pub from: StrategyFrom,
    /// The same, in fixed words.
    pub reason: String,
}

impl RestartBy {
    /// How the workload `kind` is restarted: controlled by `operator` (if an operator's
    /// resource controls it), with its own `rollsafe.dev/strategy` (`workload`) and the
    /// Secret's (`secret`; `None` where either says nothing or was not read). `None`: a template
    /// patch, and nobody else owns the template.
    pub fn of(
        kind: &str,
        operator: Option<&Owner>,
        workload: Option<Result<Strategy, StrategyError>>,
        secret: Option<Result<Strategy, StrategyError>>,
    ) -> Option<RestartBy> {
        let (chosen, from) = match (workload, secret) {
            (Some(chosen), _) => (Some(chosen), StrategyFrom::Workload),
            (None, Some(chosen)) => (Some(chosen), StrategyFrom::Secret),
            (None, None) => (None, StrategyFrom::Default),
        };
        let on = match from {
            StrategyFrom::Workload => kind,
            StrategyFrom::Secret | StrategyFrom::Default | StrategyFrom::Controller => "Secret",
        };
        let (strategy, reason) = match (chosen, operator) {
            (Some(Err(_)), _) => (
                None,
                match from {
                    StrategyFrom::Workload => format!(
                        "rollsafe.dev/strategy on the {on} is not understood (\"patch\" or \"evict\"): rollsafe watch restarts it neither way"
                    ),
                    _ => format!(
                        "rollsafe.dev/strategy on the {on} is not understood (\"patch\" or \"evict\")"
                    ),
                },
            ),
            (Some(Ok(Strategy::Evict)), _) if from == StrategyFrom::Workload => (
                Some(Strategy::Evict),
                format!(
                    "restarted by eviction (rollsafe.dev/strategy: evict on the {on}): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template"
                ),
            ),
            // Recorded in docs/strategies.md: the controller reads the workload's strategy
            // only, so the Secret's is said as asked, not as done.
            (Some(Ok(Strategy::Evict)), _) => (
                Some(Strategy::Evict),
                format!(
                    "the Secret asks for eviction (rollsafe.dev/strategy: evict on the Secret), which rollsafe watch does not read yet: put it on the {kind}, or run rollsafe restart-consumers --strategy evict"
                ),
            ),
            (Some(Ok(Strategy::Patch)), Some(_)) => (
                Some(Strategy::Patch),
                format!(
                    "restarted by a template patch (rollsafe.dev/strategy: patch on the {on}), which its operator may revert"
                ),
            ),
            (None, Some(_)) => (
                Some(Strategy::Patch),
                "a template patch is not the way to restart it (its operator may revert one): restart it by eviction (rollsafe.dev/strategy: evict, or rollsafe restart-consumers --strategy evict)".to_owned(),
            ),
            (Some(Ok(Strategy::Patch)) | None, None) => return None,
        };
        Some(RestartBy {
            strategy,
            from,
            reason,
        })
    }
}

impl RestartBy {
    /// `by` — how the workload `kind` (its listed `object`) is restarted as its own metadata
    /// and the Secret say — or, where neither chooses (`by` absent or `from: default`) and the
    /// controller's `--strategy` (`controller`) evicts in `namespace`, by eviction, as
    /// `rollsafe watch` restarts the three `apps/v1` kinds.
    pub fn under_controller(
        by: Option<RestartBy>,
        kind: &str,
        namespace: &str,
        object: &serde_json::Value,
        controller: Option<&StrategyDefaults>,
    ) -> Option<RestartBy> {
        let says_nothing = matches!(strategy_of(object), Ok(None))
            && by
                .as_ref()
                .is_none_or(|by| by.from == StrategyFrom::Default);
        let evicts =
            controller.is_some_and(|defaults| defaults.for_namespace(namespace) == Strategy::Evict);
        if says_nothing && evicts {
            Some(Self::controller_evicts(kind, namespace))
        } else {
            by
        }
    }

    /// How the workload `kind` in `namespace` is restarted when it says nothing and the
    /// controller's `--strategy` evicts there.
    fn controller_evicts(kind: &str, namespace: &str) -> RestartBy {
        RestartBy {
            strategy: Some(Strategy::Evict),
            from: StrategyFrom::Controller,
            reason: format!(
                "restarted by eviction (rollsafe watch --strategy: evict in namespace {namespace}; the {kind} says nothing): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template"
            ),
        }
    }
}

/// The owner as the preview shows it: its uid (never shown) dropped, so that what is shown
/// reads back the same.
pub(crate) fn shown_owner(owner: Owner) -> Owner {
    Owner {
        uid: String::new(),
        ..owner
    }
}

/// The sentence naming a workload's operator: `StatefulSet/kafka is owned by Kafka/my-cluster`.
pub fn owned_by(kind: &str, name: &str, owner: &Owner) -> String {
    format!("{kind}/{name} is owned by {owner}")
}

/// The Deployment, StatefulSet or DaemonSet a pod belongs to: the StatefulSet or DaemonSet
/// that controls it, or the Deployment whose ReplicaSet does (the Deployment controller names
/// it `<deployment>-<pod-template-hash>`, the pod carrying that label). `None`: another owner,
/// or none.
pub fn workload_of_pod(
    owner: Option<&Owner>,
    pod_template_hash: Option<&str>,
) -> Option<(WorkloadKind, String)> {
    let owner = owner.filter(|owner| owner.group() == "apps")?;
    match owner.kind.as_str() {
        "StatefulSet" => Some((WorkloadKind::StatefulSet, owner.name.clone())),
        "DaemonSet" => Some((WorkloadKind::DaemonSet, owner.name.clone())),
        "ReplicaSet" => {
            let hash = pod_template_hash.filter(|hash| !hash.is_empty())?;
            let deployment = owner.name.strip_suffix(hash)?.strip_suffix('-')?;
            (!deployment.is_empty()).then(|| (WorkloadKind::Deployment, deployment.to_owned()))
        }
        _ => None,
    }
}

/// Whether the pods of [`PodConsumers`] were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodsRead {
    /// Listed, every page.
    Read,
    /// The identity may not list pods (403), or the server does not list them as the caller
    /// (constrained impersonation): pod-level consumers are unknown.
    NotReadable,
    /// No answer in time, another status, or more pods than one preview reads.
    NotRead,
}

/// Why the pods were not read. Fixed words, never upstream text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodsUnread {
    /// 403.
    Forbidden,
    /// Not asked: the server runs under constrained impersonation, whose rules grant no list
    /// of pods as the caller.
    NotGranted,
    /// Another HTTP status.
    Status(u16),
    /// No answer in time, or no connection.
    NoAnswer,
    /// More pods than this many, the most one read takes.
    TooMany(usize),
}

impl PodsUnread {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            PodsUnread::Forbidden => "forbidden",
            PodsUnread::NotGranted => "not_granted",
            PodsUnread::Status(_) => "http_error",
            PodsUnread::NoAnswer => "unavailable",
            PodsUnread::TooMany(_) => "pod_budget",
        }
    }

    /// A fixed sentence for people.
    pub fn message(self) -> String {
        const UNKNOWN: &str = "pods that consume the Secret outside a Deployment, StatefulSet or DaemonSet are not shown";
        match self {
            PodsUnread::Forbidden => format!(
                "not readable: the identity may not list pods in this namespace, so {UNKNOWN} (RBAC: list pods)"
            ),
            PodsUnread::NotGranted => format!(
                "not readable: under constrained impersonation the server lists pods as no caller (its rules grant no impersonate-on:user-info:list on pods), so {UNKNOWN}"
            ),
            PodsUnread::Status(status) => {
                format!(
                    "the pods could not be listed (Kubernetes answered HTTP {status}), so {UNKNOWN}"
                )
            }
            PodsUnread::NoAnswer => {
                format!(
                    "the pods could not be listed (no answer from Kubernetes in time), so {UNKNOWN}"
                )
            }
            PodsUnread::TooMany(most) => {
                format!("the namespace has more pods than one preview reads ({most}), so {UNKNOWN}")
            }
        }
    }
}

impl fmt::Display for PodsUnread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// How a group of pod-level consumers is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodRestart {
    /// By eviction (`rollsafe restart-consumers --strategy evict`): their owner recreates them.
    Evict,
    /// Not at all: nothing would recreate them.
    NotEvicted,
}

/// The consuming pods one owner controls (or the standalone ones).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodConsumer {
    /// The controlling owner (`apiVersion`, `kind`, `name`); absent: standalone pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<Owner>,
    /// Whether that owner is an operator's resource (not one of Kubernetes' own controllers).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
    /// The pods' names, sorted; at most [`MAX_PODS_NAMED`].
    pub pods: Vec<String>,
    /// How many pods (all of them).
    pub count: usize,
    /// `evict` or `not_evicted`.
    pub restart: PodRestart,
    /// The same, in fixed words naming the owner.
    pub reason: String,
}

/// The pods that consume the Secret and belong to no Deployment, StatefulSet or DaemonSet,
/// or why they could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodConsumers {
    /// `read`, `not_readable` (403) or `not_read`.
    pub state: PodsRead,
    /// Why not, when not read: `forbidden`, `not_granted`, `http_error`, `unavailable`,
    /// `pod_budget`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The same, a fixed sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// One group per controlling owner, by kind then name, then the standalone pods.
    pub groups: Vec<PodConsumer>,
}

/// One consuming pod, as [`PodConsumers::of`] groups it.
#[derive(Debug, Clone, Copy)]
pub struct ConsumingPodRef<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its controlling owner.
    pub owner: Option<&'a Owner>,
    /// Its `pod-template-hash` label.
    pub pod_template_hash: Option<&'a str>,
}

impl PodConsumers {
    /// The pod-level consumers among `pods` (every pod that consumes the Secret): those that
    /// belong to no Deployment, StatefulSet or DaemonSet, grouped by owner.
    pub fn of<'a>(pods: impl IntoIterator<Item = ConsumingPodRef<'a>>) -> Self {
        let mut owned: BTreeMap<(String, String, String), (Owner, Vec<String>)> = BTreeMap::new();
        let mut standalone = Vec::new();
        for pod in pods {
            if workload_of_pod(pod.owner, pod.pod_template_hash).is_some() {
                continue;
            }
            match pod.owner {
                Some(owner) => {
                    owned
                        .entry((
                            owner.kind.clone(),
                            owner.name.clone(),
                            owner.api_version.clone(),
                        ))
                        .or_insert_with(|| (shown_owner(owner.clone()), Vec::new()))
                        .1
                        .push(pod.name.to_owned());
                }
                None => standalone.push(pod.name.to_owned()),
            }
        }
        let mut groups: Vec<PodConsumer> = owned
            .into_values()
            .map(|(owner, pods)| group(Some(owner), pods))
            .collect();
        if !standalone.is_empty() {
            groups.push(group(None, standalone));
        }
        Self {
            state: PodsRead::Read,
            code: None,
            message: None,
            groups,
        }
    }

    /// Pods that could not be read, and why.
    pub fn unread(why: PodsUnread) -> Self {
        Self {
            state: if matches!(why, PodsUnread::Forbidden | PodsUnread::NotGranted) {
                PodsRead::NotReadable
            } else {
                PodsRead::NotRead
            },
            code: Some(why.code().to_owned()),
            message: Some(why.message()),
            groups: Vec::new(),
        }
    }

    /// How many pod-level consumers were found.
    pub fn count(&self) -> usize {
        self.groups.iter().map(|g| g.count).sum()
    }
}

fn group(owner: Option<Owner>, mut pods: Vec<String>) -> PodConsumer {
    pods.sort();
    let count = pods.len();
    pods.truncate(MAX_PODS_NAMED);
    let operator = owner
        .as_ref()
        .is_some_and(|owner| !owner.is_kubernetes_controller());
    let (restart, reason) = match &owner {
        None if count == 1 => (
            PodRestart::NotEvicted,
            "standalone: nothing recreates it, not evicted".to_owned(),
        ),
        None => (
            PodRestart::NotEvicted,
            "standalone: nothing recreates them, not evicted".to_owned(),
        ),
        Some(owner) => (
            PodRestart::Evict,
            format!(
                "owned by {owner}{}, not by a Deployment, StatefulSet or DaemonSet: a template patch does not reach {them}; rollsafe restart-consumers --strategy evict evicts {them} one at a time, PodDisruptionBudgets holding, and {owner} recreates {them}",
                if operator {
                    " (an operator's resource)"
                } else {
                    ""
                },
                them = if count == 1 { "it" } else { "them" },
            ),
        ),
    };
    PodConsumer {
        owner,
        operator,
        pods,
        count,
        restart,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(api_version: &str, kind: &str, name: &str) -> Owner {
        Owner {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            uid: "u-1".into(),
        }
    }

    #[test]
    fn the_workload_a_pod_belongs_to() {
        let rs = owner("apps/v1", "ReplicaSet", "web-api-5d8f7c");
        let cases = [
            (
                Some(&rs),
                Some("5d8f7c"),
                Some((WorkloadKind::Deployment, "web-api")),
            ),
            // A bare ReplicaSet (or one whose name is not the Deployment controller's).
            (Some(&rs), Some("other"), None),
            (Some(&rs), None, None),
            (
                Some(&owner("apps/v1", "ReplicaSet", "-5d8f7c")),
                Some("5d8f7c"),
                None,
            ),
        ];
        for (owner, hash, expected) in cases {
            assert_eq!(
                workload_of_pod(owner, hash),
                expected.map(|(k, n)| (k, n.to_owned())),
                "{owner:?} {hash:?}"
            );
        }
        let sts = owner("apps/v1", "StatefulSet", "kafka");
        assert_eq!(
            workload_of_pod(Some(&sts), None),
            Some((WorkloadKind::StatefulSet, "kafka".into()))
        );
        let ds = owner("apps/v1", "DaemonSet", "agent");
        assert_eq!(
            workload_of_pod(Some(&ds), None),
            Some((WorkloadKind::DaemonSet, "agent".into()))
        );
        // The same kind in another group is not Kubernetes' workload.
        let other = owner("example.io/v1", "StatefulSet", "kafka");
        assert_eq!(workload_of_pod(Some(&other), None), None);
        assert_eq!(workload_of_pod(None, Some("5d8f7c")), None);
    }

    #[test]
    fn pods_are_grouped_by_owner_and_the_workloads_pods_left_out() {
        let group_owner = owner("sim.rollsafe.dev/v1", "PodGroup", "kafka");
        let job = owner("batch/v1", "Job", "migrate");
        let rs = owner("apps/v1", "ReplicaSet", "web-5d8f7c");
        let pod = |name, owner, hash| ConsumingPodRef {
            name,
            owner,
            pod_template_hash: hash,
        };
        let found = PodConsumers::of([
            pod("kafka-1", Some(&group_owner), None),
            pod("web-5d8f7c-abcde", Some(&rs), Some("5d8f7c")),
            pod("debug", None, None),
            pod("kafka-0", Some(&group_owner), None),
            pod("migrate-x1", Some(&job), None),
        ]);
        assert_eq!(found.state, PodsRead::Read);
        assert_eq!(found.count(), 4);
        let shown: Vec<(Option<String>, bool, Vec<String>, PodRestart)> = found
            .groups
            .iter()
            .map(|g| {
                (
                    g.owner.as_ref().map(ToString::to_string),
                    g.operator,
                    g.pods.clone(),
                    g.restart,
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    Some("Job/migrate".into()),
                    false,
                    vec!["migrate-x1".into()],
                    PodRestart::Evict
                ),
                (
                    Some("PodGroup/kafka".into()),
                    true,
                    vec!["kafka-0".into(), "kafka-1".into()],
                    PodRestart::Evict
                ),
                (None, false, vec!["debug".into()], PodRestart::NotEvicted),
            ]
        );
        assert_eq!(
            found.groups[2].reason,
            "standalone: nothing recreates it, not evicted"
        );
        assert_eq!(
            found.groups[1].reason,
            "owned by PodGroup/kafka (an operator's resource), not by a Deployment, StatefulSet or DaemonSet: a template patch does not reach them; rollsafe restart-consumers --strategy evict evicts them one at a time, PodDisruptionBudgets holding, and PodGroup/kafka recreates them"
        );
        assert!(
            found
                .groups
                .iter()
                .all(|g| g.owner.as_ref().is_none_or(|o| o.uid.is_empty())),
            "no uid is shown"
        );
    }

    #[test]
    fn a_group_names_a_bounded_number_of_pods() {
        let names: Vec<String> = (0..50).map(|i| format!("p-{i:02}")).collect();
        let found = PodConsumers::of(names.iter().map(|name| ConsumingPodRef {
            name,
            owner: None,
            pod_template_hash: None,
        }));
        assert_eq!(found.groups[0].count, 50);
        assert_eq!(found.groups[0].pods.len(), MAX_PODS_NAMED);
        assert_eq!(found.groups[0].pods[0], "p-00");
    }

    #[test]
    fn unread_pods_say_why_in_fixed_words() {
        let forbidden = PodConsumers::unread(PodsUnread::Forbidden);
        assert_eq!(forbidden.state, PodsRead::NotReadable);
        assert_eq!(forbidden.code.as_deref(), Some("forbidden"));
        assert!(
            forbidden
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("not readable:") && m.ends_with("(RBAC: list pods)")),
            "{forbidden:?}"
        );
        let constrained = PodConsumers::unread(PodsUnread::NotGranted);
        assert_eq!(
            (constrained.state, constrained.code.as_deref()),
            (PodsRead::NotReadable, Some("not_granted"))
        );
        let budget = PodConsumers::unread(PodsUnread::TooMany(10_000));
        assert_eq!(
            (budget.state, budget.code.as_deref()),
            (PodsRead::NotRead, Some("pod_budget"))
        );
    }

    #[test]
    fn how_a_workload_is_restarted() {
        let kafka = owner("kafka.strimzi.io/v1beta2", "Kafka", "my-cluster");
        let evict = || Some(Ok(Strategy::Evict));
        let patch = || Some(Ok(Strategy::Patch));
        let bad = || Some(Err(StrategyError::UnknownStrategy));
        let shown = |by: Option<RestartBy>| by.map(|b| (b.strategy, b.from, b.reason));
        // Nothing to say: a patch of a template nobody else owns.
        assert_eq!(RestartBy::of("Deployment", None, None, None), None);
        assert_eq!(RestartBy::of("Deployment", None, patch(), None), None);
        assert_eq!(RestartBy::of("Deployment", None, None, patch()), None);
        let cases = [
            (
                None,
                None,
                Some(&kafka),
                (
                    Some(Strategy::Patch),
                    StrategyFrom::Default,
                    "a template patch is not the way to restart it (its operator may revert one): restart it by eviction (rollsafe.dev/strategy: evict, or rollsafe restart-consumers --strategy evict)",
                ),
            ),
            (
                evict(),
                None,
                Some(&kafka),
                (
                    Some(Strategy::Evict),
                    StrategyFrom::Workload,
                    "restarted by eviction (rollsafe.dev/strategy: evict on the StatefulSet): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template",
                ),
            ),
            (
                None,
                evict(),
                None,
                (
                    Some(Strategy::Evict),
                    StrategyFrom::Secret,
                    "the Secret asks for eviction (rollsafe.dev/strategy: evict on the Secret), which rollsafe watch does not read yet: put it on the StatefulSet, or run rollsafe restart-consumers --strategy evict",
                ),
            ),
            // The workload's own choice wins over the Secret's.
            (
                patch(),
                evict(),
                Some(&kafka),
                (
                    Some(Strategy::Patch),
                    StrategyFrom::Workload,
                    "restarted by a template patch (rollsafe.dev/strategy: patch on the StatefulSet), which its operator may revert",
                ),
            ),
            (
                bad(),
                evict(),
                None,
                (
                    None,
                    StrategyFrom::Workload,
                    "rollsafe.dev/strategy on the StatefulSet is not understood (\"patch\" or \"evict\"): rollsafe watch restarts it neither way",
                ),
            ),
            (
                None,
                bad(),
                None,
                (
                    None,
                    StrategyFrom::Secret,
                    "rollsafe.dev/strategy on the Secret is not understood (\"patch\" or \"evict\")",
                ),
            ),
        ];
        for (workload, secret, operator, (strategy, from, reason)) in cases {
            assert_eq!(
                shown(RestartBy::of(
                    "StatefulSet",
                    operator,
                    workload.clone(),
                    secret.clone()
                )),
                Some((strategy, from, reason.to_owned())),
                "{workload:?} {secret:?} {operator:?}"
            );
        }
        assert_eq!(
            owned_by("StatefulSet", "kafka-0", &kafka),
            "StatefulSet/kafka-0 is owned by Kafka/my-cluster"
        );
    }
}
