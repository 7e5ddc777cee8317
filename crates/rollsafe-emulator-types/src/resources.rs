//! The resource table: every API resource the emulator serves, one row each with all of its
//! facts — what discovery reports, its Go type for decoding, its printer columns, its field
//! labels. Behaviour (defaulting, validation, the controller simulation) is bound to a row's
//! id by the registry (`rollsafe_emulator_registry::strategy::of`), as kube-apiserver wires a
//! storage to each resource.

use k8s_openapi::api::{
    apps, batch, coordination, core, events, networking, policy, rbac, scheduling,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;

use crate::conversion;
use crate::go_decode::{GoType, typed};
use crate::printers::{self, Printer};

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
    /// Its id: the index of its row (built-ins) or of its definition (custom resources).
    pub id: ResId,
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
    /// Set when this resource is another version of a stored one (`events.k8s.io/v1` Events are
    /// core `v1` Events): objects are kept once, in the stored resource's form, and converted
    /// at the edges.
    pub view: Option<&'static View>,
    /// The Go type request bodies decode as (strict field validation); `None` for custom
    /// resources and reviews.
    pub go_type: Option<GoType>,
    /// The Table columns `kubectl get` shows.
    pub printer: &'static Printer,
    /// The field labels field selectors accept besides `metadata.name` and
    /// `metadata.namespace` (the real `GetAttrs` of each registry).
    pub field_labels: &'static [&'static str],
    /// Discovery categories (`all`).
    pub categories: &'static [&'static str],
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
}

use Storage::{Review, Stored};

/// `events.k8s.io/v1` Events, shown from the stored core Events.
static EVENTS_V1_VIEW: View = View {
    stored: ids::EVENTS,
    to_view: conversion::core_to_events_v1,
    from_view: conversion::events_v1_to_core,
};

/// What a row leaves unsaid: a namespaced, stored core `v1` resource with no subresources,
/// printed as name and age.
const BASE: ResourceDef = ResourceDef {
    id: 0,
    group: "",
    version: "v1",
    plural: "",
    singular: "",
    kind: "",
    namespaced: true,
    short_names: &[],
    storage: Stored,
    custom: false,
    subresources: &[],
    generation: false,
    view: None,
    go_type: None,
    printer: &printers::DEFAULT,
    field_labels: &[],
    categories: &[],
};

const EVENT_FIELD_LABELS: &[&str] = &[
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
];

/// The Go type of a `pods/<name>/eviction` body (`policy/v1 Eviction`; `v1beta1` has the same
/// fields).
pub const EVICTION_GO_TYPE: GoType = typed::<policy::v1::Eviction>;

const POD_FIELD_LABELS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];

/// Every resource served. The index into this table is the resource id used by the store.
pub static RESOURCES: &[ResourceDef] = &[
    ResourceDef {
        id: ids::NAMESPACES,
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        namespaced: false,
        short_names: &["ns"],
        subresources: &["status"],
        go_type: Some(typed::<core::v1::Namespace>),
        printer: &printers::NAMESPACES,
        field_labels: &["status.phase"],
        ..BASE
    },
    ResourceDef {
        id: ids::SECRETS,
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        go_type: Some(typed::<core::v1::Secret>),
        printer: &printers::SECRETS,
        field_labels: &["type"],
        ..BASE
    },
    ResourceDef {
        id: ids::CONFIGMAPS,
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        short_names: &["cm"],
        go_type: Some(typed::<core::v1::ConfigMap>),
        printer: &printers::CONFIGMAPS,
        ..BASE
    },
    ResourceDef {
        id: ids::SERVICEACCOUNTS,
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        short_names: &["sa"],
        subresources: &["token"],
        go_type: Some(typed::<core::v1::ServiceAccount>),
        printer: &printers::SERVICEACCOUNTS,
        ..BASE
    },
    ResourceDef {
        id: ids::DEPLOYMENTS,
        group: "apps",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        short_names: &["deploy"],
        subresources: &["status", "scale"],
        generation: true,
        go_type: Some(typed::<apps::v1::Deployment>),
        printer: &printers::DEPLOYMENTS,
        categories: &["all"],
        ..BASE
    },
    ResourceDef {
        id: ids::STATEFULSETS,
        group: "apps",
        plural: "statefulsets",
        singular: "statefulset",
        kind: "StatefulSet",
        short_names: &["sts"],
        subresources: &["status", "scale"],
        generation: true,
        go_type: Some(typed::<apps::v1::StatefulSet>),
        printer: &printers::STATEFULSETS,
        categories: &["all"],
        ..BASE
    },
    ResourceDef {
        id: ids::DAEMONSETS,
        group: "apps",
        plural: "daemonsets",
        singular: "daemonset",
        kind: "DaemonSet",
        short_names: &["ds"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<apps::v1::DaemonSet>),
        printer: &printers::DAEMONSETS,
        categories: &["all"],
        ..BASE
    },
    ResourceDef {
        id: ids::LEASES,
        group: "coordination.k8s.io",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        go_type: Some(typed::<coordination::v1::Lease>),
        printer: &printers::LEASES,
        ..BASE
    },
    ResourceDef {
        id: ids::ROLES,
        group: "rbac.authorization.k8s.io",
        plural: "roles",
        singular: "role",
        kind: "Role",
        go_type: Some(typed::<rbac::v1::Role>),
        printer: &printers::ROLES,
        ..BASE
    },
    ResourceDef {
        id: ids::CLUSTERROLES,
        group: "rbac.authorization.k8s.io",
        plural: "clusterroles",
        singular: "clusterrole",
        kind: "ClusterRole",
        namespaced: false,
        go_type: Some(typed::<rbac::v1::ClusterRole>),
        printer: &printers::ROLES,
        ..BASE
    },
    ResourceDef {
        id: ids::ROLEBINDINGS,
        group: "rbac.authorization.k8s.io",
        plural: "rolebindings",
        singular: "rolebinding",
        kind: "RoleBinding",
        go_type: Some(typed::<rbac::v1::RoleBinding>),
        printer: &printers::ROLE_BINDINGS,
        ..BASE
    },
    ResourceDef {
        id: ids::CLUSTERROLEBINDINGS,
        group: "rbac.authorization.k8s.io",
        plural: "clusterrolebindings",
        singular: "clusterrolebinding",
        kind: "ClusterRoleBinding",
        namespaced: false,
        go_type: Some(typed::<rbac::v1::ClusterRoleBinding>),
        printer: &printers::ROLE_BINDINGS,
        ..BASE
    },
    ResourceDef {
        id: ids::EXTERNALSECRETS,
        group: "external-secrets.io",
        plural: "externalsecrets",
        singular: "externalsecret",
        kind: "ExternalSecret",
        short_names: &["es"],
        custom: true,
        subresources: &["status"],
        generation: true,
        ..BASE
    },
    ResourceDef {
        id: ids::TOKENREVIEWS,
        group: "authentication.k8s.io",
        plural: "tokenreviews",
        singular: "tokenreview",
        kind: "TokenReview",
        namespaced: false,
        storage: Review,
        ..BASE
    },
    ResourceDef {
        id: ids::SELFSUBJECTREVIEWS,
        group: "authentication.k8s.io",
        plural: "selfsubjectreviews",
        singular: "selfsubjectreview",
        kind: "SelfSubjectReview",
        namespaced: false,
        storage: Review,
        ..BASE
    },
    ResourceDef {
        id: ids::SELFSUBJECTACCESSREVIEWS,
        group: "authorization.k8s.io",
        plural: "selfsubjectaccessreviews",
        singular: "selfsubjectaccessreview",
        kind: "SelfSubjectAccessReview",
        namespaced: false,
        storage: Review,
        ..BASE
    },
    ResourceDef {
        id: ids::SUBJECTACCESSREVIEWS,
        group: "authorization.k8s.io",
        plural: "subjectaccessreviews",
        singular: "subjectaccessreview",
        kind: "SubjectAccessReview",
        namespaced: false,
        storage: Review,
        ..BASE
    },
    ResourceDef {
        id: ids::EVENTS,
        plural: "events",
        singular: "event",
        kind: "Event",
        short_names: &["ev"],
        go_type: Some(typed::<core::v1::Event>),
        printer: &printers::EVENTS,
        field_labels: EVENT_FIELD_LABELS,
        ..BASE
    },
    ResourceDef {
        id: ids::SERVICES,
        plural: "services",
        singular: "service",
        kind: "Service",
        short_names: &["svc"],
        subresources: &["status"],
        go_type: Some(typed::<core::v1::Service>),
        printer: &printers::SERVICES,
        ..BASE
    },
    ResourceDef {
        id: ids::PODS,
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        short_names: &["po"],
        subresources: &["status", "eviction"],
        go_type: Some(typed::<core::v1::Pod>),
        printer: &printers::PODS,
        field_labels: POD_FIELD_LABELS,
        ..BASE
    },
    ResourceDef {
        id: ids::JOBS,
        group: "batch",
        plural: "jobs",
        singular: "job",
        kind: "Job",
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<batch::v1::Job>),
        ..BASE
    },
    ResourceDef {
        id: ids::CRONJOBS,
        group: "batch",
        plural: "cronjobs",
        singular: "cronjob",
        kind: "CronJob",
        short_names: &["cj"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<batch::v1::CronJob>),
        ..BASE
    },
    ResourceDef {
        id: ids::INGRESSES,
        group: "networking.k8s.io",
        plural: "ingresses",
        singular: "ingress",
        kind: "Ingress",
        short_names: &["ing"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<networking::v1::Ingress>),
        ..BASE
    },
    ResourceDef {
        id: ids::SELFSUBJECTRULESREVIEWS,
        group: "authorization.k8s.io",
        plural: "selfsubjectrulesreviews",
        singular: "selfsubjectrulesreview",
        kind: "SelfSubjectRulesReview",
        namespaced: false,
        storage: Review,
        ..BASE
    },
    ResourceDef {
        id: ids::EVENTS_V1,
        group: "events.k8s.io",
        plural: "events",
        singular: "event",
        kind: "Event",
        short_names: &["ev"],
        view: Some(&EVENTS_V1_VIEW),
        go_type: Some(typed::<events::v1::Event>),
        printer: &printers::EVENTS,
        ..BASE
    },
    ResourceDef {
        id: ids::REPLICASETS,
        group: "apps",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        short_names: &["rs"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<apps::v1::ReplicaSet>),
        printer: &printers::REPLICASETS,
        ..BASE
    },
    ResourceDef {
        id: ids::CONTROLLERREVISIONS,
        group: "apps",
        plural: "controllerrevisions",
        singular: "controllerrevision",
        kind: "ControllerRevision",
        go_type: Some(typed::<apps::v1::ControllerRevision>),
        ..BASE
    },
    ResourceDef {
        id: ids::CUSTOMRESOURCEDEFINITIONS,
        group: "apiextensions.k8s.io",
        plural: "customresourcedefinitions",
        singular: "customresourcedefinition",
        kind: "CustomResourceDefinition",
        namespaced: false,
        short_names: &["crd", "crds"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<apiextensions::v1::CustomResourceDefinition>),
        ..BASE
    },
    ResourceDef {
        id: ids::RESOURCEQUOTAS,
        plural: "resourcequotas",
        singular: "resourcequota",
        kind: "ResourceQuota",
        short_names: &["quota"],
        subresources: &["status"],
        go_type: Some(typed::<core::v1::ResourceQuota>),
        printer: &printers::RESOURCEQUOTAS,
        ..BASE
    },
    ResourceDef {
        id: ids::PODDISRUPTIONBUDGETS,
        group: "policy",
        plural: "poddisruptionbudgets",
        singular: "poddisruptionbudget",
        kind: "PodDisruptionBudget",
        short_names: &["pdb"],
        subresources: &["status"],
        generation: true,
        go_type: Some(typed::<policy::v1::PodDisruptionBudget>),
        printer: &printers::PODDISRUPTIONBUDGETS,
        ..BASE
    },
    ResourceDef {
        id: ids::PRIORITYCLASSES,
        group: "scheduling.k8s.io",
        plural: "priorityclasses",
        singular: "priorityclass",
        kind: "PriorityClass",
        namespaced: false,
        short_names: &["pc"],
        go_type: Some(typed::<scheduling::v1::PriorityClass>),
        printer: &printers::PRIORITYCLASSES,
        ..BASE
    },
];

/// Index of a resource in [`RESOURCES`].
pub type ResId = u16;

/// The definition of a resource id.
pub fn def(id: ResId) -> &'static ResourceDef {
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
pub mod custom {
    use std::sync::{PoisonError, RwLock};

    use super::{BASE, RESOURCES, ResId, ResourceDef, Storage, View, id_of};

    static DEFINED: RwLock<Vec<&'static ResourceDef>> = RwLock::new(Vec::new());

    /// The fields of a custom resource that tell two definitions apart.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Definition {
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
    pub fn define(def: &Definition) -> ResId {
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
        let id = id_of(RESOURCES.len() + defined.len());
        let d: &'static ResourceDef = Box::leak(Box::new(ResourceDef {
            id,
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
            view,
            ..BASE
        }));
        defined.push(d);
        id
    }

    /// Whether `id` is a custom resource's.
    pub fn is_custom(id: ResId) -> bool {
        usize::from(id) >= RESOURCES.len()
    }
}

fn id_of(index: usize) -> ResId {
    // The table has far fewer than 65 536 entries.
    ResId::try_from(index).unwrap_or(ResId::MAX)
}

/// Finds a resource by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<ResId> {
    newest(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The newest resource `matches` accepts: a CRD's definition over an older one or a built-in
/// one. Looks up without copying the custom table (this is on every request's route).
fn newest(matches: impl Fn(&ResourceDef) -> bool) -> Option<ResId> {
    custom::newest(&matches).or_else(|| RESOURCES.iter().position(&matches).map(id_of))
}

/// Finds a resource by plural alone: the first in the table, so the core group wins
/// (`events`), as kubectl's resource mapper prefers it; `events.events.k8s.io` names the other.
pub fn find_plural(plural: &str) -> Option<ResId> {
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
/// `metadata.namespace`.
pub fn field_labels(res: ResId) -> &'static [&'static str] {
    def(res).field_labels
}

/// The resource whose objects a request on `res` reads and writes (itself, unless a view).
pub fn stored(res: ResId) -> ResId {
    def(res).view.map_or(res, |v| v.stored)
}

/// Finds a resource by `apiVersion` and `kind`.
pub fn find_kind(api_version: &str, kind: &str) -> Option<ResId> {
    newest(|r| r.kind == kind && r.api_version() == api_version)
}

/// Groups in discovery order, each with its single version.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    groups_where(|_| true)
}

/// [`groups`] of the resources `serves` accepts; a custom group's preferred version is its
/// storage version's.
pub fn groups_where(serves: impl Fn(ResId) -> bool) -> Vec<(&'static str, &'static str)> {
    let mut out: Vec<(&'static str, &'static str)> = Vec::new();
    for (id, r) in all() {
        if !r.group.is_empty() && serves(id) && !out.iter().any(|(g, _)| *g == r.group) {
            out.push((r.group, r.version));
        }
    }
    out
}

/// The versions of `group` whose resources `serves` accepts, the preferred first.
pub fn versions_where(group: &str, serves: impl Fn(ResId) -> bool) -> Vec<&'static str> {
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
pub fn in_group_version(group: &str, version: &str) -> Vec<ResId> {
    all()
        .filter(|(_, r)| r.group == group && r.version == version)
        .map(|(id, _)| id)
        .collect()
}

/// The resources whose objects the store keeps (not reviews, not views of another).
pub fn stored_ids() -> impl Iterator<Item = ResId> {
    all()
        .filter(|(_, d)| d.storage == Storage::Stored && d.view.is_none())
        .map(|(id, _)| id)
}

/// Well-known resource ids.
pub mod ids {
    use super::ResId;
    pub const NAMESPACES: ResId = 0;
    pub const SECRETS: ResId = 1;
    pub const CONFIGMAPS: ResId = 2;
    pub const SERVICEACCOUNTS: ResId = 3;
    pub const DEPLOYMENTS: ResId = 4;
    pub const STATEFULSETS: ResId = 5;
    pub const DAEMONSETS: ResId = 6;
    pub const LEASES: ResId = 7;
    pub const ROLES: ResId = 8;
    pub const CLUSTERROLES: ResId = 9;
    pub const ROLEBINDINGS: ResId = 10;
    pub const CLUSTERROLEBINDINGS: ResId = 11;
    pub const EXTERNALSECRETS: ResId = 12;
    pub const TOKENREVIEWS: ResId = 13;
    pub const SELFSUBJECTREVIEWS: ResId = 14;
    pub const SELFSUBJECTACCESSREVIEWS: ResId = 15;
    pub const SUBJECTACCESSREVIEWS: ResId = 16;
    pub const EVENTS: ResId = 17;
    pub const SERVICES: ResId = 18;
    pub const PODS: ResId = 19;
    pub const JOBS: ResId = 20;
    pub const CRONJOBS: ResId = 21;
    pub const INGRESSES: ResId = 22;
    pub const SELFSUBJECTRULESREVIEWS: ResId = 23;
    pub const EVENTS_V1: ResId = 24;
    pub const REPLICASETS: ResId = 25;
    pub const CONTROLLERREVISIONS: ResId = 26;
    pub const CUSTOMRESOURCEDEFINITIONS: ResId = 27;
    pub const RESOURCEQUOTAS: ResId = 28;
    pub const PODDISRUPTIONBUDGETS: ResId = 29;
    pub const PRIORITYCLASSES: ResId = 30;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_names_its_own_index() {
        for (i, r) in RESOURCES.iter().enumerate() {
            assert_eq!(usize::from(r.id), i, "{}", r.plural);
        }
    }

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
