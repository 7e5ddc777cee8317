//! The resource table: every API resource the emulator serves, with what discovery reports and
//! the registry strategy that applies to it.

use crate::registry::strategy::{
    self, Strategy, configmap, event, namespace, rbac, secret, service, workloads,
};

/// How objects of a resource are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Stored objects with the usual verbs.
    Stored,
    /// A review resource: `create` only, computed on the fly, never stored.
    Review,
}

/// One API resource.
#[derive(Debug)]
pub struct ResourceDef {
    /// API group; `""` for the core group.
    pub group: &'static str,
    /// API version inside the group.
    pub version: &'static str,
    /// Lower-case plural, as in URLs (`deployments`).
    pub plural: &'static str,
    /// Lower-case singular.
    pub singular: &'static str,
    /// Kind (`Deployment`).
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Short names kubectl accepts.
    pub short_names: &'static [&'static str],
    /// Stored or review.
    pub storage: Storage,
    /// Served through the custom-resource handler (no strategic merge patch, items keep their
    /// `kind` in lists).
    pub custom: bool,
    /// Subresources served: `status`, `scale`.
    pub subresources: &'static [&'static str],
    /// `metadata.generation` is maintained (bumped on spec changes).
    pub generation: bool,
    /// Defaulting, validation and the controller simulation of this resource.
    pub strategy: &'static Strategy,
    /// Set when this resource is another version of a stored one (`events.k8s.io/v1` Events are
    /// core `v1` Events): objects are kept once, in the stored resource's form, and converted
    /// at the edges.
    pub view: Option<&'static View>,
}

/// How a resource that is a view of another converts to and from the stored form.
#[derive(Debug)]
pub struct View {
    /// The resource whose objects this one shows.
    pub stored: ResId,
    /// Stored form → this resource's form (including `apiVersion` and `kind`).
    pub to_view: fn(&serde_json::Value) -> serde_json::Value,
    /// This resource's form → stored form.
    pub from_view: fn(&serde_json::Value) -> serde_json::Value,
}

const STORED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
const REVIEW_VERBS: &[&str] = &["create"];

impl ResourceDef {
    /// `apps/v1`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `deployments.apps`, or `secrets` for the core group: how the real server names a
    /// resource in error messages.
    pub fn group_resource(&self) -> String {
        self.qualified(self.plural)
    }

    /// `Deployment.apps`, or `Secret`: how Invalid errors name a kind.
    pub fn group_kind(&self) -> String {
        self.qualified(self.kind)
    }

    /// `name.group`, or `name` for the core group.
    fn qualified(&self, name: &str) -> String {
        if self.group.is_empty() {
            name.to_owned()
        } else {
            format!("{name}.{}", self.group)
        }
    }

    /// `DeploymentList`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Verbs discovery reports.
    pub fn verbs(&self) -> &'static [&'static str] {
        match self.storage {
            Storage::Stored => STORED_VERBS,
            Storage::Review => REVIEW_VERBS,
        }
    }

    /// Whether this is a Deployment, StatefulSet or DaemonSet.
    pub fn is_workload(&self) -> bool {
        self.strategy.workload.is_some()
    }
}

macro_rules! res {
    ($group:expr, $version:expr, $plural:expr, $singular:expr, $kind:expr, $ns:expr, $short:expr, $storage:expr, $custom:expr, $sub:expr, $gen:expr, $strategy:expr) => {
        ResourceDef {
            group: $group,
            version: $version,
            plural: $plural,
            singular: $singular,
            kind: $kind,
            namespaced: $ns,
            short_names: $short,
            storage: $storage,
            custom: $custom,
            subresources: $sub,
            generation: $gen,
            strategy: $strategy,
            view: None,
        }
    };
}

use Storage::{Review, Stored};

/// Every resource served. The index into this table is the resource id used by the store.
pub(crate) static RESOURCES: &[ResourceDef] = &[
    res!(
        "",
        "v1",
        "namespaces",
        "namespace",
        "Namespace",
        false,
        &["ns"],
        Stored,
        false,
        &["status"],
        false,
        &namespace::STRATEGY
    ),
    res!(
        "",
        "v1",
        "secrets",
        "secret",
        "Secret",
        true,
        &[],
        Stored,
        false,
        &[],
        false,
        &secret::STRATEGY
    ),
    res!(
        "",
        "v1",
        "configmaps",
        "configmap",
        "ConfigMap",
        true,
        &["cm"],
        Stored,
        false,
        &[],
        false,
        &configmap::STRATEGY
    ),
    res!(
        "",
        "v1",
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        true,
        &["sa"],
        Stored,
        false,
        &["token"],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "apps",
        "v1",
        "deployments",
        "deployment",
        "Deployment",
        true,
        &["deploy"],
        Stored,
        false,
        &["status", "scale"],
        true,
        &workloads::DEPLOYMENT
    ),
    res!(
        "apps",
        "v1",
        "statefulsets",
        "statefulset",
        "StatefulSet",
        true,
        &["sts"],
        Stored,
        false,
        &["status", "scale"],
        true,
        &workloads::STATEFULSET
    ),
    res!(
        "apps",
        "v1",
        "daemonsets",
        "daemonset",
        "DaemonSet",
        true,
        &["ds"],
        Stored,
        false,
        &["status"],
        true,
        &workloads::DAEMONSET
    ),
    res!(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
        &[],
        Stored,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "roles",
        "role",
        "Role",
        true,
        &[],
        Stored,
        false,
        &[],
        false,
        &rbac::STRATEGY
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
        &[],
        Stored,
        false,
        &[],
        false,
        &rbac::STRATEGY
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
        &[],
        Stored,
        false,
        &[],
        false,
        &rbac::STRATEGY
    ),
    res!(
        "rbac.authorization.k8s.io",
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
        &[],
        Stored,
        false,
        &[],
        false,
        &rbac::STRATEGY
    ),
    res!(
        "external-secrets.io",
        "v1",
        "externalsecrets",
        "externalsecret",
        "ExternalSecret",
        true,
        &["es"],
        Stored,
        true,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "authentication.k8s.io",
        "v1",
        "tokenreviews",
        "tokenreview",
        "TokenReview",
        false,
        &[],
        Review,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "authentication.k8s.io",
        "v1",
        "selfsubjectreviews",
        "selfsubjectreview",
        "SelfSubjectReview",
        false,
        &[],
        Review,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "selfsubjectaccessreviews",
        "selfsubjectaccessreview",
        "SelfSubjectAccessReview",
        false,
        &[],
        Review,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "subjectaccessreviews",
        "subjectaccessreview",
        "SubjectAccessReview",
        false,
        &[],
        Review,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "",
        "v1",
        "events",
        "event",
        "Event",
        true,
        &["ev"],
        Stored,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "",
        "v1",
        "services",
        "service",
        "Service",
        true,
        &["svc"],
        Stored,
        false,
        &["status"],
        false,
        &service::STRATEGY
    ),
    res!(
        "",
        "v1",
        "pods",
        "pod",
        "Pod",
        true,
        &["po"],
        Stored,
        false,
        &["status"],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        true,
        &[],
        Stored,
        false,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "batch",
        "v1",
        "cronjobs",
        "cronjob",
        "CronJob",
        true,
        &["cj"],
        Stored,
        false,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "networking.k8s.io",
        "v1",
        "ingresses",
        "ingress",
        "Ingress",
        true,
        &["ing"],
        Stored,
        false,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "authorization.k8s.io",
        "v1",
        "selfsubjectrulesreviews",
        "selfsubjectrulesreview",
        "SelfSubjectRulesReview",
        false,
        &[],
        Review,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
    ResourceDef {
        view: Some(&event::EVENTS_V1),
        ..res!(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            Stored,
            false,
            &[],
            false,
            &strategy::DEFAULT
        )
    },
    res!(
        "apps",
        "v1",
        "replicasets",
        "replicaset",
        "ReplicaSet",
        true,
        &["rs"],
        Stored,
        false,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "apps",
        "v1",
        "controllerrevisions",
        "controllerrevision",
        "ControllerRevision",
        true,
        &[],
        Stored,
        false,
        &[],
        false,
        &strategy::DEFAULT
    ),
];

/// Index of a resource in [`RESOURCES`].
pub(crate) type ResId = u16;

/// The definition of a resource id.
pub(crate) fn def(id: ResId) -> &'static ResourceDef {
    &RESOURCES[usize::from(id)]
}

fn id_of(index: usize) -> ResId {
    // The table has far fewer than 65 536 entries.
    ResId::try_from(index).unwrap_or(ResId::MAX)
}

/// Finds a resource by group, version and plural.
pub(crate) fn find(group: &str, version: &str, plural: &str) -> Option<ResId> {
    RESOURCES
        .iter()
        .position(|r| r.group == group && r.version == version && r.plural == plural)
        .map(id_of)
}

/// Finds a resource by plural alone: the first in the table, so the core group wins
/// (`events`), as kubectl's resource mapper prefers it; `events.events.k8s.io` names the other.
pub(crate) fn find_plural(plural: &str) -> Option<ResId> {
    let by_plural = RESOURCES.iter().position(|r| r.plural == plural);
    let qualified = || {
        let (p, group) = plural.split_once('.')?;
        RESOURCES
            .iter()
            .position(|r| r.plural == p && r.group == group)
    };
    by_plural.or_else(qualified).map(id_of)
}

/// The field labels a resource supports in field selectors besides `metadata.name` and
/// `metadata.namespace` (the real `GetAttrs` of each registry).
pub(crate) fn field_labels(res: ResId) -> &'static [&'static str] {
    match res {
        ids::SECRETS => &["type"],
        ids::NAMESPACES => &["status.phase"],
        ids::EVENTS => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        ids::PODS => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        _ => &[],
    }
}

/// The resource whose objects a request on `res` reads and writes (itself, unless a view).
pub(crate) fn stored(res: ResId) -> ResId {
    def(res).view.map_or(res, |v| v.stored)
}

/// Finds a resource by `apiVersion` and `kind`.
pub(crate) fn find_kind(api_version: &str, kind: &str) -> Option<ResId> {
    RESOURCES
        .iter()
        .position(|r| r.kind == kind && r.api_version() == api_version)
        .map(id_of)
}

/// Groups in discovery order, each with its single version.
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for r in RESOURCES {
        if !r.group.is_empty() && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// Ids of the resources of one group/version.
pub(crate) fn in_group_version(group: &str, version: &str) -> Vec<ResId> {
    RESOURCES
        .iter()
        .enumerate()
        .filter(|(_, r)| r.group == group && r.version == version)
        .map(|(i, _)| id_of(i))
        .collect()
}

/// The resources whose objects the store keeps (not reviews, not views of another).
pub(crate) fn stored_ids() -> impl Iterator<Item = ResId> {
    RESOURCES
        .iter()
        .enumerate()
        .filter(|(_, d)| d.storage == Storage::Stored && d.view.is_none())
        .map(|(i, _)| id_of(i))
}

/// Well-known resource ids.
pub(crate) mod ids {
    use super::ResId;
    pub(crate) const NAMESPACES: ResId = 0;
    pub(crate) const SECRETS: ResId = 1;
    pub(crate) const CONFIGMAPS: ResId = 2;
    pub(crate) const SERVICEACCOUNTS: ResId = 3;
    pub(crate) const DEPLOYMENTS: ResId = 4;
    pub(crate) const STATEFULSETS: ResId = 5;
    pub(crate) const DAEMONSETS: ResId = 6;
    pub(crate) const LEASES: ResId = 7;
    pub(crate) const ROLES: ResId = 8;
    pub(crate) const CLUSTERROLES: ResId = 9;
    pub(crate) const ROLEBINDINGS: ResId = 10;
    pub(crate) const CLUSTERROLEBINDINGS: ResId = 11;
    pub(crate) const TOKENREVIEWS: ResId = 13;
    pub(crate) const SELFSUBJECTREVIEWS: ResId = 14;
    pub(crate) const SELFSUBJECTACCESSREVIEWS: ResId = 15;
    pub(crate) const SUBJECTACCESSREVIEWS: ResId = 16;
    pub(crate) const EVENTS: ResId = 17;
    pub(crate) const SERVICES: ResId = 18;
    pub(crate) const PODS: ResId = 19;
    pub(crate) const JOBS: ResId = 20;
    pub(crate) const CRONJOBS: ResId = 21;
    pub(crate) const INGRESSES: ResId = 22;
    pub(crate) const SELFSUBJECTRULESREVIEWS: ResId = 23;
    pub(crate) const EVENTS_V1: ResId = 24;
    pub(crate) const REPLICASETS: ResId = 25;
    pub(crate) const CONTROLLERREVISIONS: ResId = 26;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_ids_match_the_table() {
        assert_eq!(def(ids::NAMESPACES).plural, "namespaces");
        assert_eq!(def(ids::SECRETS).plural, "secrets");
        assert_eq!(def(ids::CONFIGMAPS).plural, "configmaps");
        assert_eq!(def(ids::DEPLOYMENTS).plural, "deployments");
        assert_eq!(def(ids::STATEFULSETS).plural, "statefulsets");
        assert_eq!(def(ids::DAEMONSETS).plural, "daemonsets");
        assert_eq!(def(ids::ROLES).plural, "roles");
        assert_eq!(def(ids::CLUSTERROLES).plural, "clusterroles");
        assert_eq!(def(ids::ROLEBINDINGS).plural, "rolebindings");
        assert_eq!(def(ids::CLUSTERROLEBINDINGS).plural, "clusterrolebindings");
        assert_eq!(def(ids::TOKENREVIEWS).plural, "tokenreviews");
        assert_eq!(def(ids::SELFSUBJECTREVIEWS).plural, "selfsubjectreviews");
        assert_eq!(
            def(ids::SELFSUBJECTACCESSREVIEWS).plural,
            "selfsubjectaccessreviews"
        );
        assert_eq!(
            def(ids::SUBJECTACCESSREVIEWS).plural,
            "subjectaccessreviews"
        );
    }

    #[test]
    fn plurals_find_the_first_resource_and_qualified_plurals_the_others() {
        for (i, r) in RESOURCES.iter().enumerate() {
            let first = RESOURCES.iter().position(|x| x.plural == r.plural);
            assert_eq!(find_plural(r.plural), first.map(id_of));
            if first != Some(i) {
                assert_eq!(
                    find_plural(&format!("{}.{}", r.plural, r.group)),
                    Some(id_of(i))
                );
            }
        }
        assert_eq!(def(ids::EVENTS).group, "");
        assert_eq!(def(ids::EVENTS_V1).group, "events.k8s.io");
        for (id, plural) in [
            (ids::SERVICEACCOUNTS, "serviceaccounts"),
            (ids::LEASES, "leases"),
            (ids::SERVICES, "services"),
            (ids::PODS, "pods"),
            (ids::JOBS, "jobs"),
            (ids::CRONJOBS, "cronjobs"),
            (ids::INGRESSES, "ingresses"),
            (ids::SELFSUBJECTRULESREVIEWS, "selfsubjectrulesreviews"),
            (ids::REPLICASETS, "replicasets"),
            (ids::CONTROLLERREVISIONS, "controllerrevisions"),
        ] {
            assert_eq!(def(id).plural, plural);
        }
        assert_eq!(stored(ids::EVENTS_V1), ids::EVENTS);
    }
}
