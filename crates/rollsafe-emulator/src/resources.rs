//! The resource table: every API resource the emulator serves, with what discovery reports and
//! the registry strategy that applies to it.

use crate::registry::strategy::{
    self, Strategy, configmap, crd, event, namespace, rbac, scheduling, secret, service, workloads,
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
    res!(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        false,
        &["crd", "crds"],
        Stored,
        false,
        &["status"],
        true,
        &crd::STRATEGY
    ),
    res!(
        "",
        "v1",
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        true,
        &["quota"],
        Stored,
        false,
        &["status"],
        false,
        &strategy::DEFAULT
    ),
    res!(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        true,
        &["pdb"],
        Stored,
        false,
        &["status"],
        true,
        &strategy::DEFAULT
    ),
    res!(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        false,
        &["pc"],
        Stored,
        false,
        &[],
        false,
        &scheduling::PRIORITY_CLASSES
    ),
];

/// Index of a resource in [`RESOURCES`].
pub(crate) type ResId = u16;

/// The definition of a resource id.
pub(crate) fn def(id: ResId) -> &'static ResourceDef {
    let index = usize::from(id);
    match RESOURCES.get(index) {
        Some(d) => d,
        None => custom::get(index - RESOURCES.len()),
    }
}

/// Every resource: the built-in table, then the custom resources CRDs defined.
fn all() -> impl Iterator<Item = (ResId, &'static ResourceDef)> {
    let custom = custom::snapshot();
    RESOURCES
        .iter()
        .chain(custom)
        .enumerate()
        .map(|(i, d)| (id_of(i), d))
}

/// The resources CustomResourceDefinitions define, one per served version. Definitions are
/// kept for the process (a definition seen again gets its old id), so ids stay valid for every
/// emulator in it; which of them an emulator serves is its store's business
/// (`Store::serves`).
pub(crate) mod custom {
    use std::sync::{PoisonError, RwLock};

    use super::{RESOURCES, ResId, ResourceDef, Storage, View, id_of};
    use crate::registry::strategy;

    static DEFINED: RwLock<Vec<&'static ResourceDef>> = RwLock::new(Vec::new());

    /// The fields of a custom resource that tell two definitions apart.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Definition {
        /// API group.
        pub group: String,
        /// Version.
        pub version: String,
        /// Plural.
        pub plural: String,
        /// Singular.
        pub singular: String,
        /// Kind.
        pub kind: String,
        /// Namespaced or cluster-scoped.
        pub namespaced: bool,
        /// Short names.
        pub short_names: Vec<String>,
        /// Whether `status` is a subresource.
        pub status: bool,
        /// For a served version that is not the storage version: the storage version's id.
        pub stored: Option<ResId>,
    }

    pub(super) fn get(index: usize) -> &'static ResourceDef {
        let defined = DEFINED.read().unwrap_or_else(PoisonError::into_inner);
        defined.get(index).copied().unwrap_or(&RESOURCES[0])
    }

    /// The newest custom resource `matches` accepts.
    pub(super) fn newest(matches: &dyn Fn(&ResourceDef) -> bool) -> Option<ResId> {
        let defined = DEFINED.read().unwrap_or_else(PoisonError::into_inner);
        defined
            .iter()
            .rposition(|d| matches(d))
            .map(|i| id_of(RESOURCES.len() + i))
    }

    pub(super) fn snapshot() -> Vec<&'static ResourceDef> {
        DEFINED
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn leak(text: &str) -> &'static str {
        Box::leak(text.to_owned().into_boxed_str())
    }

    fn same(d: &ResourceDef, def: &Definition) -> bool {
        d.group == def.group
            && d.version == def.version
            && d.plural == def.plural
            && d.singular == def.singular
            && d.kind == def.kind
            && d.namespaced == def.namespaced
            && d.short_names.iter().eq(def.short_names.iter())
            && d.subresources.contains(&"status") == def.status
            && d.view.map(|v| v.stored) == def.stored
    }

    fn unchanged(obj: &serde_json::Value) -> serde_json::Value {
        obj.clone()
    }

    /// The id of a custom resource with this definition, defining it if it is new.
    pub(crate) fn define(def: &Definition) -> ResId {
        let mut defined = DEFINED.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(i) = defined.iter().position(|d| same(d, def)) {
            return id_of(RESOURCES.len() + i);
        }
        let short_names: Vec<&'static str> = def.short_names.iter().map(|s| leak(s)).collect();
        let view = def.stored.map(|stored| {
            &*Box::leak(Box::new(View {
                stored,
                to_view: unchanged,
                from_view: unchanged,
            }))
        });
        let d: &'static ResourceDef = Box::leak(Box::new(ResourceDef {
            group: leak(&def.group),
            version: leak(&def.version),
            plural: leak(&def.plural),
            singular: leak(&def.singular),
            kind: leak(&def.kind),
            namespaced: def.namespaced,
            short_names: Box::leak(short_names.into_boxed_slice()),
            storage: Storage::Stored,
            custom: true,
            subresources: if def.status { &["status"] } else { &[] },
            generation: true,
            strategy: &strategy::DEFAULT,
            view,
        }));
        defined.push(d);
        id_of(RESOURCES.len() + defined.len() - 1)
    }

    /// Whether `id` is a custom resource's.
    pub(crate) fn is_custom(id: ResId) -> bool {
        usize::from(id) >= RESOURCES.len()
    }
}

fn id_of(index: usize) -> ResId {
    // The table has far fewer than 65 536 entries.
    ResId::try_from(index).unwrap_or(ResId::MAX)
}

/// Finds a resource by group, version and plural.
pub(crate) fn find(group: &str, version: &str, plural: &str) -> Option<ResId> {
    newest(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The newest resource `matches` accepts: a CRD's definition over an older one or a built-in
/// one. Looks up without copying the custom table (this is on every request's route).
fn newest(matches: impl Fn(&ResourceDef) -> bool) -> Option<ResId> {
    custom::newest(&matches).or_else(|| RESOURCES.iter().position(&matches).map(id_of))
}

/// Finds a resource by plural alone: the first in the table, so the core group wins
/// (`events`), as kubectl's resource mapper prefers it; `events.events.k8s.io` names the other.
pub(crate) fn find_plural(plural: &str) -> Option<ResId> {
    let by_plural = all().find(|(_, r)| r.plural == plural).map(|(id, _)| id);
    let qualified = || {
        let (p, group) = plural.split_once('.')?;
        all()
            .find(|(_, r)| r.plural == p && r.group == group)
            .map(|(id, _)| id)
    };
    by_plural.or_else(qualified)
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
    newest(|r| r.kind == kind && r.api_version() == api_version)
}

/// Groups in discovery order, each with its single version.
pub(crate) fn groups() -> Vec<(&'static str, &'static str)> {
    groups_where(|_| true)
}

/// [`groups`] of the resources `serves` accepts; a custom group's preferred version is its
/// storage version's.
pub(crate) fn groups_where(serves: impl Fn(ResId) -> bool) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for (id, r) in all() {
        if !r.group.is_empty() && serves(id) && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The versions of `group` whose resources `serves` accepts, the preferred first.
pub(crate) fn versions_where(group: &str, serves: impl Fn(ResId) -> bool) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    let mut served: Vec<(bool, &'static str)> = all()
        .filter(|(id, r)| r.group == group && serves(*id))
        .map(|(_, r)| (r.view.is_some(), r.version))
        .collect();
    served.sort_by_key(|(is_view, _)| *is_view);
    for (_, version) in served {
        if !out.contains(&version) {
            out.push(version);
        }
    }
    out
}

/// Ids of the resources of one group/version.
pub(crate) fn in_group_version(group: &str, version: &str) -> Vec<ResId> {
    all()
        .filter(|(_, r)| r.group == group && r.version == version)
        .map(|(id, _)| id)
        .collect()
}

/// The resources whose objects the store keeps (not reviews, not views of another).
pub(crate) fn stored_ids() -> impl Iterator<Item = ResId> {
    all()
        .filter(|(_, d)| d.storage == Storage::Stored && d.view.is_none())
        .map(|(id, _)| id)
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
    pub(crate) const CUSTOMRESOURCEDEFINITIONS: ResId = 27;
    pub(crate) const RESOURCEQUOTAS: ResId = 28;
    pub(crate) const PODDISRUPTIONBUDGETS: ResId = 29;
    pub(crate) const PRIORITYCLASSES: ResId = 30;
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
            (ids::CUSTOMRESOURCEDEFINITIONS, "customresourcedefinitions"),
            (ids::RESOURCEQUOTAS, "resourcequotas"),
            (ids::PODDISRUPTIONBUDGETS, "poddisruptionbudgets"),
            (ids::PRIORITYCLASSES, "priorityclasses"),
        ] {
            assert_eq!(def(id).plural, plural);
        }
        assert_eq!(stored(ids::EVENTS_V1), ids::EVENTS);
    }
}
