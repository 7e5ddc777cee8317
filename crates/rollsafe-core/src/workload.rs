//! The workload kinds rollsafe restarts.

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
}
