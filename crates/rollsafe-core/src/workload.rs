//! The workload kinds rollsafe restarts: the three the Restart Consumers API names
//! ([`WorkloadKind`]), and the wider set `rollsafe watch` rolls ([`WatchedKind`]).

use serde::{Deserialize, Serialize};

/// A workload kind whose pod template rollsafe can patch. The order of the variants is the
/// order of entries in results: Deployment, StatefulSet, DaemonSet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WorkloadKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
}

impl WorkloadKind {
    /// All kinds, in result order.
    pub const ALL: [WorkloadKind; 3] = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
    ];

    /// The `kind` field value (case-sensitive).
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
        }
    }

    /// The resource name in API paths (`/apis/apps/v1/namespaces/<ns>/<plural>`).
    pub fn plural(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "deployments",
            WorkloadKind::StatefulSet => "statefulsets",
            WorkloadKind::DaemonSet => "daemonsets",
        }
    }

    /// The kind of the list object a list request returns.
    pub fn list_kind(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "DeploymentList",
            WorkloadKind::StatefulSet => "StatefulSetList",
            WorkloadKind::DaemonSet => "DaemonSetList",
        }
    }

    /// The kind named by a manifest's `kind` field, if it is a workload kind. Exact and
    /// case-sensitive, as the API server is.
    pub fn from_kind(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == kind)
    }

    /// The kind of a manifest object, if it is a workload: `apps/v1`, the retired
    /// `apps/v1beta1`, `apps/v1beta2` and `extensions/v1beta1` versions that old manifests still
    /// carry, or no `apiVersion` at all. Same-named kinds of other groups are not workloads.
    pub fn of_object(object: &serde_json::Value) -> Option<Self> {
        const GROUP_VERSIONS: [&str; 4] = [
            "apps/v1",
            "apps/v1beta2",
            "apps/v1beta1",
            "extensions/v1beta1",
        ];
        let api_version = object.get("apiVersion").and_then(serde_json::Value::as_str);
        if api_version.is_some_and(|v| !GROUP_VERSIONS.contains(&v)) {
            return None;
        }
        object
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .and_then(Self::from_kind)
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A kind `rollsafe watch` rolls: the API's three workload kinds, `batch/v1` CronJobs (their
/// Jobs' pod template) and Argo Rollouts (`argoproj.io/v1alpha1`, a custom resource). The
/// Restart Consumers API keeps to [`WorkloadKind`]: the contract names three kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum WatchedKind {
    /// `apps/v1` Deployment.
    Deployment,
    /// `apps/v1` StatefulSet.
    StatefulSet,
    /// `apps/v1` DaemonSet.
    DaemonSet,
    /// `batch/v1` CronJob: its pod template is `spec.jobTemplate.spec.template`.
    CronJob,
    /// `argoproj.io/v1alpha1` Rollout with an inline `spec.template`.
    Rollout,
}

impl WatchedKind {
    /// All kinds, in result order.
    pub const ALL: [WatchedKind; 5] = [
        WatchedKind::Deployment,
        WatchedKind::StatefulSet,
        WatchedKind::DaemonSet,
        WatchedKind::CronJob,
        WatchedKind::Rollout,
    ];

    /// The `kind` field value.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchedKind::Deployment => "Deployment",
            WatchedKind::StatefulSet => "StatefulSet",
            WatchedKind::DaemonSet => "DaemonSet",
            WatchedKind::CronJob => "CronJob",
            WatchedKind::Rollout => "Rollout",
        }
    }

    /// The API group (`apps`, `batch`, `argoproj.io`).
    pub fn group(self) -> &'static str {
        match self {
            WatchedKind::Deployment | WatchedKind::StatefulSet | WatchedKind::DaemonSet => "apps",
            WatchedKind::CronJob => "batch",
            WatchedKind::Rollout => "argoproj.io",
        }
    }

    /// The served version.
    pub fn version(self) -> &'static str {
        match self {
            WatchedKind::Rollout => "v1alpha1",
            _ => "v1",
        }
    }

    /// `group/version`, as an object's `apiVersion` says it.
    pub fn api_version(self) -> &'static str {
        match self {
            WatchedKind::Deployment | WatchedKind::StatefulSet | WatchedKind::DaemonSet => {
                "apps/v1"
            }
            WatchedKind::CronJob => "batch/v1",
            WatchedKind::Rollout => "argoproj.io/v1alpha1",
        }
    }

    /// The resource name in API paths.
    pub fn plural(self) -> &'static str {
        match self {
            WatchedKind::Deployment => "deployments",
            WatchedKind::StatefulSet => "statefulsets",
            WatchedKind::DaemonSet => "daemonsets",
            WatchedKind::CronJob => "cronjobs",
            WatchedKind::Rollout => "rollouts",
        }
    }

    /// The API's kind, for the three it restarts.
    pub fn workload(self) -> Option<WorkloadKind> {
        match self {
            WatchedKind::Deployment => Some(WorkloadKind::Deployment),
            WatchedKind::StatefulSet => Some(WorkloadKind::StatefulSet),
            WatchedKind::DaemonSet => Some(WorkloadKind::DaemonSet),
            WatchedKind::CronJob | WatchedKind::Rollout => None,
        }
    }

    /// The fields from the object down to its pod template.
    pub fn template_path(self) -> &'static [&'static str] {
        match self {
            WatchedKind::CronJob => &["spec", "jobTemplate", "spec", "template"],
            _ => &["spec", "template"],
        }
    }

    /// The pod template of `object`, an object of this kind, if it has one.
    pub fn template(self, object: &serde_json::Value) -> Option<&serde_json::Value> {
        self.template_path()
            .iter()
            .try_fold(object, |value, field| value.get(*field))
    }

    /// The kind of a manifest object, by its `apiVersion` and `kind`: the API's kinds as
    /// [`WorkloadKind::of_object`] reads them, `batch/v1` CronJobs (the retired
    /// `batch/v1beta1`, or no `apiVersion`, as for the others) and `argoproj.io/v1alpha1`
    /// Rollouts (a `Rollout` names nothing without its group).
    pub fn of_object(object: &serde_json::Value) -> Option<Self> {
        if let Some(kind) = WorkloadKind::of_object(object) {
            return Some(kind.into());
        }
        let field = |name: &str| object.get(name).and_then(serde_json::Value::as_str);
        match (field("apiVersion"), field("kind")?) {
            (None | Some("batch/v1" | "batch/v1beta1"), "CronJob") => Some(WatchedKind::CronJob),
            (Some("argoproj.io/v1alpha1"), "Rollout") => Some(WatchedKind::Rollout),
            _ => None,
        }
    }
}

impl From<WorkloadKind> for WatchedKind {
    fn from(kind: WorkloadKind) -> Self {
        match kind {
            WorkloadKind::Deployment => WatchedKind::Deployment,
            WorkloadKind::StatefulSet => WatchedKind::StatefulSet,
            WorkloadKind::DaemonSet => WatchedKind::DaemonSet,
        }
    }
}

impl std::fmt::Display for WatchedKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a workload whose pod template is patched does not roll its pods now. The patch is still
/// accepted (and reported as requested): the rollout waits for the workload's own trigger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Deferral {
    /// A Deployment with `spec.paused: true`: it rolls when resumed.
    Paused,
    /// A StatefulSet or DaemonSet with `updateStrategy.type: OnDelete`: each pod is replaced
    /// only when it is deleted.
    OnDelete,
    /// A StatefulSet whose `rollingUpdate.partition` is at least its replicas: no ordinal is
    /// updated until the partition is lowered.
    Partition,
    /// An Argo Rollout with `spec.paused: true`: it rolls when resumed.
    PausedRollout,
    /// A CronJob: its next Job runs with the new pod template; Jobs already running are left
    /// alone (no Job is started out of schedule).
    NextRun,
}

impl Deferral {
    /// A static label for Events, logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Deferral::Paused => "Paused",
            Deferral::OnDelete => "OnDelete",
            Deferral::Partition => "Partition",
            Deferral::PausedRollout => "Paused",
            Deferral::NextRun => "NextRun",
        }
    }

    /// Fixed words for people: why the pods do not roll now.
    pub fn reason(self) -> &'static str {
        match self {
            Deferral::Paused => "the Deployment is paused",
            Deferral::OnDelete => "its update strategy is OnDelete",
            Deferral::Partition => "its rollingUpdate partition covers every replica",
            Deferral::PausedRollout => "the Rollout is paused",
            Deferral::NextRun => "a CronJob's pods start only when a Job is scheduled",
        }
    }

    /// Fixed words for people: when its pods do roll.
    pub fn when_it_rolls(self) -> &'static str {
        match self {
            Deferral::Paused | Deferral::PausedRollout => "it rolls when it is resumed",
            Deferral::OnDelete => "each pod is replaced only when that pod is deleted",
            Deferral::Partition => "it rolls only when its rollingUpdate partition is lowered",
            Deferral::NextRun => "its next scheduled Job runs with it; running Jobs are left alone",
        }
    }

    /// Reads a workload object of `kind` as the API server holds it (`spec.replicas` unset is
    /// 1, a partition unset is 0). A CronJob always defers; a Rollout defers when paused.
    pub fn of(kind: impl Into<WatchedKind>, object: &serde_json::Value) -> Option<Deferral> {
        use serde_json::Value;
        let kind = kind.into();
        let spec = object.get("spec")?;
        match kind {
            WatchedKind::Deployment => (spec.get("paused").and_then(Value::as_bool) == Some(true))
                .then_some(Deferral::Paused),
            WatchedKind::Rollout => (spec.get("paused").and_then(Value::as_bool) == Some(true))
                .then_some(Deferral::PausedRollout),
            WatchedKind::CronJob => Some(Deferral::NextRun),
            WatchedKind::StatefulSet | WatchedKind::DaemonSet => {
                let strategy = spec.get("updateStrategy");
                let type_ = strategy.and_then(|s| s.get("type")).and_then(Value::as_str);
                if type_ == Some("OnDelete") {
                    return Some(Deferral::OnDelete);
                }
                if kind == WatchedKind::StatefulSet {
                    let partition = strategy
                        .and_then(|s| s.pointer("/rollingUpdate/partition"))
                        .and_then(Value::as_i64)
                        .unwrap_or(0);
                    let replicas = spec.get("replicas").and_then(Value::as_i64).unwrap_or(1);
                    if partition > 0 && partition >= replicas {
                        return Some(Deferral::Partition);
                    }
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kinds_are_exact_and_ordered() {
        assert_eq!(
            WorkloadKind::from_kind("Deployment"),
            Some(WorkloadKind::Deployment)
        );
        assert_eq!(WorkloadKind::from_kind("deployment"), None);
        assert!(WorkloadKind::Deployment < WorkloadKind::StatefulSet);
        assert!(WorkloadKind::StatefulSet < WorkloadKind::DaemonSet);
    }

    #[test]
    fn objects_of_other_groups_are_not_workloads() {
        let object = json!({"apiVersion": "apps.openshift.io/v1", "kind": "Deployment"});
        assert_eq!(WorkloadKind::of_object(&object), None);
        let object = json!({"apiVersion": "extensions/v1beta1", "kind": "Deployment"});
        assert_eq!(
            WorkloadKind::of_object(&object),
            Some(WorkloadKind::Deployment)
        );
        let object = json!({"apiVersion": "apps/v1", "kind": "DaemonSet"});
        assert_eq!(
            WorkloadKind::of_object(&object),
            Some(WorkloadKind::DaemonSet)
        );
        assert_eq!(
            WorkloadKind::of_object(&json!({"kind": "StatefulSet"})),
            Some(WorkloadKind::StatefulSet)
        );
    }

    #[test]
    fn deferral_table() {
        let cases = [
            (
                WorkloadKind::Deployment,
                json!({"spec": {"paused": true}}),
                Some(Deferral::Paused),
            ),
            (
                WorkloadKind::Deployment,
                json!({"spec": {"paused": false}}),
                None,
            ),
            (WorkloadKind::Deployment, json!({"spec": {}}), None),
            (
                WorkloadKind::DaemonSet,
                json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
                Some(Deferral::OnDelete),
            ),
            (
                WorkloadKind::StatefulSet,
                json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}),
                Some(Deferral::OnDelete),
            ),
            (
                WorkloadKind::StatefulSet,
                json!({"spec": {"replicas": 3, "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 3}}}}),
                Some(Deferral::Partition),
            ),
            (
                WorkloadKind::StatefulSet,
                json!({"spec": {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}}}),
                None,
            ),
            (
                WorkloadKind::StatefulSet,
                json!({"spec": {"updateStrategy": {"rollingUpdate": {"partition": 1}}}}),
                Some(Deferral::Partition),
            ),
            (
                WorkloadKind::StatefulSet,
                json!({"spec": {"replicas": 0}}),
                None,
            ),
        ];
        for (kind, object, expected) in cases {
            assert_eq!(Deferral::of(kind, &object), expected, "{kind} {object}");
        }
        let watched = [
            (
                WatchedKind::CronJob,
                json!({"spec": {"schedule": "* * * * *"}}),
                Some(Deferral::NextRun),
            ),
            (
                WatchedKind::CronJob,
                json!({"spec": {"suspend": true}}),
                Some(Deferral::NextRun),
            ),
            (
                WatchedKind::Rollout,
                json!({"spec": {"paused": true}}),
                Some(Deferral::PausedRollout),
            ),
            (WatchedKind::Rollout, json!({"spec": {}}), None),
        ];
        for (kind, object, expected) in watched {
            assert_eq!(Deferral::of(kind, &object), expected, "{kind} {object}");
        }
    }

    #[test]
    fn watched_kinds_are_read_by_group_and_find_their_pod_template() {
        let cases = [
            (
                json!({"apiVersion": "apps/v1", "kind": "Deployment"}),
                Some(WatchedKind::Deployment),
            ),
            (
                json!({"apiVersion": "batch/v1", "kind": "CronJob"}),
                Some(WatchedKind::CronJob),
            ),
            (
                json!({"apiVersion": "batch/v1beta1", "kind": "CronJob"}),
                Some(WatchedKind::CronJob),
            ),
            (
                json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout"}),
                Some(WatchedKind::Rollout),
            ),
            (
                json!({"apiVersion": "example.com/v1", "kind": "Rollout"}),
                None,
            ),
            (json!({"apiVersion": "batch/v1", "kind": "Job"}), None),
            (json!({"kind": "CronJob"}), Some(WatchedKind::CronJob)),
            (json!({"kind": "Rollout"}), None),
        ];
        for (object, expected) in cases {
            assert_eq!(WatchedKind::of_object(&object), expected, "{object}");
        }
        for kind in WorkloadKind::ALL {
            assert_eq!(WatchedKind::from(kind).workload(), Some(kind));
            assert_eq!(WatchedKind::from(kind).as_str(), kind.as_str());
            assert_eq!(WatchedKind::from(kind).plural(), kind.plural());
        }
        let cron = json!({"spec": {"jobTemplate": {"spec": {"template": {"metadata": {}}}}}});
        assert_eq!(
            WatchedKind::CronJob.template(&cron),
            Some(&json!({"metadata": {}}))
        );
        assert_eq!(WatchedKind::Deployment.template(&cron), None);
    }
}
