//! The documented minimum RBAC of the Helm chart's ServiceAccounts, per mode, and a review of
//! what each ServiceAccount of a release is actually granted (`rollsafe review rbac`).
//!
//! [`RULES`] is the one table: docs/install.md's "RBAC, generated from the mode" and "The
//! controller" list the same rules (a test checks each row is there), `rollsafe review rbac`
//! compares a live install with it, and the real-control-plane tests compare the chart with it.
//!
//! A grant is one line of `kubectl auth can-i --list` expanded: resource (`resource.group`),
//! non-resource URL, resource name, verb. The effective grants of a ServiceAccount come from a
//! SelfSubjectRulesReview sent while impersonating `system:serviceaccount:NS:NAME` (what
//! `kubectl auth can-i --list --as` does); what every ServiceAccount of that namespace may do
//! anyway (the baseline: an unbound ServiceAccount name, reviewed the same way) is set aside.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authorization::v1::{
    SelfSubjectRulesReview, SelfSubjectRulesReviewSpec, SubjectRulesReviewStatus,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, ListParams, PostParams};
use serde::Serialize;
use thiserror::Error;

use crate::connection::{Connection, Impersonation};

/// One permission as `kubectl auth can-i --list` shows it, expanded to one verb and one name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Grant {
    /// `resource` for the core group, else `resource.group`; empty for a non-resource URL.
    pub resource: String,
    /// The non-resource URL; empty for a resource.
    pub url: String,
    /// The resource name; empty: any.
    pub name: String,
    /// The verb.
    pub verb: String,
}

impl Grant {
    /// A resource grant.
    pub fn resource(resource: &str, name: &str, verb: &str) -> Self {
        Self {
            resource: resource.to_owned(),
            url: String::new(),
            name: name.to_owned(),
            verb: verb.to_owned(),
        }
    }
}

impl std::fmt::Display for Grant {
    /// `verb resource[/name]`, or `verb URL`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.resource.as_str(), self.name.as_str()) {
            ("", _) => write!(f, "{} {}", self.verb, self.url),
            (resource, "") => write!(f, "{} {resource}", self.verb),
            (resource, name) => write!(f, "{} {resource}/{name}", self.verb),
        }
    }
}

/// Which ServiceAccount of the chart a rule belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Component {
    /// `rollsafe serve` (`app.kubernetes.io/component: server`).
    Server,
    /// `rollsafe watch` (`app.kubernetes.io/component: controller`).
    Controller,
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The release namespace only.
    Release,
    /// The namespaces whose workloads are served or watched: a Role in each listed one, or
    /// everywhere (a ClusterRole) when the mode has no list.
    Workloads,
    /// Cluster-wide (a ClusterRole; visible in every namespace).
    Cluster,
}

/// Which resource names a rule is limited to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Any name.
    Any,
    /// The server's access ConfigMap (`server.accessConfigMap`).
    AccessConfigMap,
    /// The controller's Lease (`controller.leaseName`).
    Lease,
    /// Names the values list (`impersonation.users`, `impersonation.groups`,
    /// `tokenReview.serviceAccounts`) or any: the review shows them, it cannot know the values.
    FromValues,
}

/// When a rule is part of the minimum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Always (for its component).
    Always,
    /// The server makes the calls as itself (impersonation off).
    NoImpersonation,
    /// Cluster scope without `server.namespaces`, impersonation off.
    ClusterScopeNoList,
    /// Impersonation on, with the unconstrained `impersonate` rules (the fallback for clusters
    /// that do not serve constrained impersonation).
    Impersonation,
    /// Impersonation on, constrained (KEP-5284): `impersonate:user-info` on who may be
    /// impersonated, `impersonate-on:user-info:<verb>` on what may be done so.
    ConstrainedImpersonation,
    /// Constrained impersonation in cluster scope without `server.namespaces`.
    ConstrainedClusterScopeNoList,
    /// `tokenReview.enabled`.
    TokenReview,
    /// `tokenReview.enabled` with unconstrained impersonation.
    TokenReviewImpersonation,
    /// `tokenReview.enabled` with constrained impersonation: reviewed ServiceAccounts are
    /// impersonated in the API server's `serviceaccount` mode.
    TokenReviewConstrained,
    /// `tokenReview.enabled` with constrained impersonation, cluster scope without a list.
    TokenReviewConstrainedClusterScopeNoList,
    /// `controller.argoRollouts`.
    ArgoRollouts,
    /// `controller.namespaceSelector`.
    NamespaceSelector,
}

/// One documented rule.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Whose.
    pub component: Component,
    /// When it is granted.
    pub when: When,
    /// Where.
    pub place: Place,
    /// `resource.group` names (`resource` for the core group).
    pub resources: &'static [&'static str],
    /// The names it is limited to.
    pub names: Names,
    /// The verbs.
    pub verbs: &'static [&'static str],
    /// The rule's cell in docs/install.md (a test checks the row is there).
    pub doc: &'static str,
    /// The code that needs it.
    pub needed_by: &'static str,
}

const WORKLOADS: &[&str] = &["deployments.apps", "statefulsets.apps", "daemonsets.apps"];

/// The verb of constrained impersonation's user-info mode, on `users` and `groups` of
/// `authentication.k8s.io` (KEP-5284; `k8s.io/apiserver`'s `impersonation` filter).
pub const USER_INFO: &str = "impersonate:user-info";
/// The verb of constrained impersonation's serviceaccount mode, on `serviceaccounts` of
/// `authentication.k8s.io`.
pub const SERVICE_ACCOUNT: &str = "impersonate:serviceaccount";

/// The documented minimum of every mode (docs/install.md, "RBAC, generated from the mode" and
/// "The controller").
pub const RULES: &[Rule] = &[
    Rule {
        component: Component::Server,
        when: When::NoImpersonation,
        place: Place::Workloads,
        resources: &["secrets"],
        names: Names::Any,
        verbs: &["get"],
        doc: "`secrets: get` (no `list`, no `watch`)",
        needed_by: "rollsafe_kube::read_secret_metadata (gate 5, the live Secret read)",
    },
    Rule {
        component: Component::Server,
        when: When::NoImpersonation,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &["list"],
        doc: "`apps deployments, statefulsets, daemonsets: list`",
        needed_by: "crates/rollsafe-kube/src/inventory.rs (the paged inventory)",
    },
    Rule {
        component: Component::Server,
        when: When::NoImpersonation,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &["patch"],
        doc: "`apps deployments, statefulsets, daemonsets: patch`",
        needed_by: "crates/rollsafe-kube/src/engine.rs (send_patch)",
    },
    Rule {
        component: Component::Server,
        when: When::ClusterScopeNoList,
        place: Place::Cluster,
        resources: &["namespaces"],
        names: Names::Any,
        verbs: &["list"],
        doc: "`namespaces: list` (cluster scope without a list only)",
        needed_by: "crates/rollsafe-server/src/scope.rs (the scope gate)",
    },
    Rule {
        component: Component::Server,
        when: When::Always,
        place: Place::Release,
        resources: &["configmaps"],
        names: Names::AccessConfigMap,
        verbs: &["get"],
        doc: "`configmaps: get`, `resourceNames: [<accessConfigMap>]`, release namespace",
        needed_by: "crates/rollsafe-server/src/access.rs (read_config_map)",
    },
    Rule {
        component: Component::Server,
        when: When::Always,
        place: Place::Release,
        resources: &["leases.coordination.k8s.io"],
        names: Names::Lease,
        verbs: &["get"],
        doc: "`coordination.k8s.io leases: get`, `resourceNames: [<controller.leaseName>]`, release namespace (in Role `<fullname>-access-rules`)",
        needed_by: "crates/rollsafe-server/src/consumers.rs (controller_settings)",
    },
    Rule {
        component: Component::Server,
        when: When::Impersonation,
        place: Place::Cluster,
        resources: &["users"],
        names: Names::FromValues,
        verbs: &["impersonate"],
        doc: "`users: impersonate` (`resourceNames` = `impersonation.users` when set)",
        needed_by: "crates/rollsafe-kube/src/connection.rs (Impersonate-User)",
    },
    Rule {
        component: Component::Server,
        when: When::Impersonation,
        place: Place::Cluster,
        resources: &["groups"],
        names: Names::FromValues,
        verbs: &["impersonate"],
        doc: "`groups: impersonate` (`resourceNames` = `impersonation.groups` when set)",
        needed_by: "crates/rollsafe-kube/src/connection.rs (Impersonate-Group)",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReview,
        place: Place::Cluster,
        resources: &["tokenreviews.authentication.k8s.io"],
        names: Names::Any,
        verbs: &["create"],
        doc: "`authentication.k8s.io tokenreviews: create` (`tokenReview.enabled` only; ClusterRole `<fullname>-tokenreview`)",
        needed_by: "crates/rollsafe-kube/src/review.rs (review_token)",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReviewImpersonation,
        place: Place::Cluster,
        resources: &["serviceaccounts"],
        names: Names::FromValues,
        verbs: &["impersonate"],
        doc: "`serviceaccounts: impersonate` (`tokenReview.enabled` with impersonation only; a Role per `tokenReview.serviceAccounts` entry with `resourceNames: [<name>]`, else a rule in `<fullname>-impersonate`)",
        needed_by: "crates/rollsafe-server/src/identity.rs (forwarded_groups)",
    },
    Rule {
        component: Component::Server,
        when: When::ConstrainedImpersonation,
        place: Place::Cluster,
        resources: &["users.authentication.k8s.io"],
        names: Names::FromValues,
        verbs: &[USER_INFO],
        doc: "`authentication.k8s.io users: impersonate:user-info` (`resourceNames` = `impersonation.users` when set)",
        needed_by: "crates/rollsafe-kube/src/connection.rs (Impersonate-User, the API server's user-info mode)",
    },
    Rule {
        component: Component::Server,
        when: When::ConstrainedImpersonation,
        place: Place::Cluster,
        resources: &["groups.authentication.k8s.io"],
        names: Names::FromValues,
        verbs: &[USER_INFO],
        doc: "`authentication.k8s.io groups: impersonate:user-info` (`resourceNames` = `impersonation.groups` when set)",
        needed_by: "crates/rollsafe-kube/src/connection.rs (one Impersonate-Group per group)",
    },
    Rule {
        component: Component::Server,
        when: When::ConstrainedImpersonation,
        place: Place::Workloads,
        resources: &["secrets"],
        names: Names::Any,
        verbs: &["impersonate-on:user-info:get"],
        doc: "`secrets: impersonate-on:user-info:get`",
        needed_by: "rollsafe_kube::read_secret_metadata as the caller (gate 5, the live Secret read)",
    },
    Rule {
        component: Component::Server,
        when: When::ConstrainedImpersonation,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &[
            "impersonate-on:user-info:list",
            "impersonate-on:user-info:patch",
        ],
        doc: "`apps deployments, statefulsets, daemonsets: impersonate-on:user-info:list, impersonate-on:user-info:patch`",
        needed_by: "crates/rollsafe-kube/src/inventory.rs and engine.rs (send_patch) as the caller; crates/rollsafe-server/src/approve.rs (the workload read, a list by name, and the approval patch)",
    },
    Rule {
        component: Component::Server,
        when: When::ConstrainedClusterScopeNoList,
        place: Place::Cluster,
        resources: &["namespaces"],
        names: Names::Any,
        verbs: &["impersonate-on:user-info:list"],
        doc: "`namespaces: impersonate-on:user-info:list` (cluster scope without a list only)",
        needed_by: "crates/rollsafe-server/src/scope.rs (the scope gate, as the caller)",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReviewConstrained,
        place: Place::Cluster,
        resources: &["serviceaccounts.authentication.k8s.io"],
        names: Names::FromValues,
        verbs: &[SERVICE_ACCOUNT],
        doc: "`authentication.k8s.io serviceaccounts: impersonate:serviceaccount` (`tokenReview.enabled` only; a Role per `tokenReview.serviceAccounts` entry with `resourceNames: [<name>]`, else a rule in `<fullname>-impersonate`)",
        needed_by: "crates/rollsafe-server/src/identity.rs (forwarded_groups: a ServiceAccount by name alone, the API server's serviceaccount mode)",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReviewConstrained,
        place: Place::Workloads,
        resources: &["secrets"],
        names: Names::Any,
        verbs: &["impersonate-on:serviceaccount:get"],
        doc: "`secrets: impersonate-on:serviceaccount:get` (`tokenReview.enabled` only)",
        needed_by: "rollsafe_kube::read_secret_metadata as a reviewed ServiceAccount",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReviewConstrained,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &[
            "impersonate-on:serviceaccount:list",
            "impersonate-on:serviceaccount:patch",
        ],
        doc: "`apps deployments, statefulsets, daemonsets: impersonate-on:serviceaccount:list, impersonate-on:serviceaccount:patch` (`tokenReview.enabled` only)",
        needed_by: "the inventory, the patches and the approval as a reviewed ServiceAccount",
    },
    Rule {
        component: Component::Server,
        when: When::TokenReviewConstrainedClusterScopeNoList,
        place: Place::Cluster,
        resources: &["namespaces"],
        names: Names::Any,
        verbs: &["impersonate-on:serviceaccount:list"],
        doc: "`namespaces: impersonate-on:serviceaccount:list` (`tokenReview.enabled`, cluster scope without a list)",
        needed_by: "crates/rollsafe-server/src/scope.rs (the scope gate, as a reviewed ServiceAccount)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["secrets", "configmaps"],
        names: Names::Any,
        verbs: &["list", "watch"],
        doc: "`secrets, configmaps: list, watch` (no `get`)",
        needed_by: "crates/rollsafe-watch/src/controller.rs (watch_streams)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &["list", "watch"],
        doc: "`apps deployments, statefulsets, daemonsets: list, watch`",
        needed_by: "crates/rollsafe-watch/src/controller.rs (the workload watch streams)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: WORKLOADS,
        names: Names::Any,
        verbs: &["patch"],
        doc: "`apps deployments, statefulsets, daemonsets: patch`",
        needed_by: "crates/rollsafe-watch/src/controller.rs (send)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["cronjobs.batch"],
        names: Names::Any,
        verbs: &["list", "watch", "patch"],
        doc: "`batch cronjobs: list, watch, patch`",
        needed_by: "crates/rollsafe-watch/src/controller.rs (ControllerSettings::kinds, send)",
    },
    Rule {
        component: Component::Controller,
        when: When::ArgoRollouts,
        place: Place::Workloads,
        resources: &["rollouts.argoproj.io"],
        names: Names::Any,
        verbs: &["list", "watch", "patch"],
        doc: "`argoproj.io rollouts: list, watch, patch` (only with `controller.argoRollouts`)",
        needed_by: "crates/rollsafe-watch/src/controller.rs (the Rollout stream and patch)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["events.events.k8s.io"],
        names: Names::Any,
        verbs: &["create", "patch"],
        doc: "`events.k8s.io events: create, patch`",
        needed_by: "crates/rollsafe-watch/src/controller.rs (kube's Recorder)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["pods"],
        names: Names::Any,
        verbs: &["list"],
        doc: "`pods: list` (the eviction strategy; no `get`, no `watch`: pods are read on demand, never cached)",
        needed_by: "crates/rollsafe-kube/src/eviction.rs (list_pods: a run's pods, page by page)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["pods/eviction"],
        names: Names::Any,
        verbs: &["create"],
        doc: "`pods/eviction: create` (the eviction strategy; PodDisruptionBudgets hold)",
        needed_by: "crates/rollsafe-kube/src/eviction.rs (EvictionRun::evict)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Workloads,
        resources: &["poddisruptionbudgets.policy"],
        names: Names::Any,
        verbs: &["list"],
        doc: "`policy poddisruptionbudgets: list` (the eviction strategy)",
        needed_by: "crates/rollsafe-kube/src/eviction.rs (disruption_budgets: the unprotected-pod deferral, the budget a stall names)",
    },
    Rule {
        component: Component::Controller,
        when: When::NamespaceSelector,
        place: Place::Cluster,
        resources: &["namespaces"],
        names: Names::Any,
        verbs: &["list", "watch"],
        doc: "`namespaces: list, watch` (only with `controller.namespaceSelector`; ClusterRole `<fullname>-controller-namespaces`)",
        needed_by: "crates/rollsafe-watch (the Namespace watch of namespaceSelector)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Release,
        resources: &["leases.coordination.k8s.io"],
        names: Names::Lease,
        verbs: &["get", "patch"],
        doc: "`coordination.k8s.io leases: get, patch`, `resourceNames: [<leaseName>]`, release namespace",
        needed_by: "crates/rollsafe-watch/src/leader.rs (elect)",
    },
    Rule {
        component: Component::Controller,
        when: When::Always,
        place: Place::Release,
        resources: &["leases.coordination.k8s.io"],
        names: Names::Any,
        verbs: &["create"],
        doc: "`coordination.k8s.io leases: create`, release namespace",
        needed_by: "crates/rollsafe-watch/src/leader.rs (elect, a missing Lease)",
    },
];

/// The settings of one ServiceAccount's workload that shape its RBAC, as the chart's
/// Deployment sets them in its environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mode {
    /// Whose.
    pub component: Component,
    /// The release namespace.
    pub release_namespace: String,
    /// Server: `KRYPTON_SCOPE=cluster`. Controller: no `ROLLSAFE_WATCH_NAMESPACE`.
    pub cluster_wide: bool,
    /// The listed namespaces (`KRYPTON_NAMESPACES`, `ROLLSAFE_WATCH_NAMESPACE`).
    pub namespaces: Vec<String>,
    /// `KRYPTON_IMPERSONATION=true`.
    pub impersonation: bool,
    /// With impersonation, `KRYPTON_IMPERSONATION_CONSTRAINED=true`: the constrained rules
    /// (the chart resolves `impersonation.constrained: auto` to `true` or `false`; anything
    /// else, or no variable, is the unconstrained rules).
    pub constrained: bool,
    /// `KRYPTON_TOKEN_REVIEW=true`.
    pub token_review: bool,
    /// `ROLLSAFE_WATCH_ARGO_ROLLOUTS=true`.
    pub argo_rollouts: bool,
    /// `ROLLSAFE_WATCH_NAMESPACE_SELECTOR` set.
    pub namespace_selector: bool,
    /// `KRYPTON_ACCESS_CONFIGMAP`.
    pub access_config_map: String,
    /// The Lease name (`ROLLSAFE_CONTROLLER_LEASE`'s name, `ROLLSAFE_WATCH_LEASE_NAME`).
    pub lease: String,
}

impl Mode {
    /// The mode of `component` from its container's literal environment variables.
    pub fn from_env<'a>(
        component: Component,
        release_namespace: &str,
        env: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        let env: BTreeMap<&str, &str> = env.into_iter().collect();
        let get = |name: &str| env.get(name).copied().unwrap_or_default();
        let list = |name: &str| -> Vec<String> {
            get(name)
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let on = |name: &str| get(name).eq_ignore_ascii_case("true");
        match component {
            Component::Server => Self {
                component,
                release_namespace: release_namespace.to_owned(),
                cluster_wide: get("KRYPTON_SCOPE") == "cluster",
                namespaces: list("KRYPTON_NAMESPACES"),
                impersonation: on("KRYPTON_IMPERSONATION"),
                constrained: on("KRYPTON_IMPERSONATION") && on("KRYPTON_IMPERSONATION_CONSTRAINED"),
                token_review: on("KRYPTON_TOKEN_REVIEW"),
                argo_rollouts: false,
                namespace_selector: false,
                access_config_map: non_empty(get("KRYPTON_ACCESS_CONFIGMAP"), "krypton-access"),
                lease: non_empty(
                    get("ROLLSAFE_CONTROLLER_LEASE")
                        .rsplit('/')
                        .next()
                        .unwrap_or_default(),
                    "rollsafe-watch",
                ),
            },
            Component::Controller => {
                let namespaces = list("ROLLSAFE_WATCH_NAMESPACE");
                Self {
                    component,
                    release_namespace: release_namespace.to_owned(),
                    cluster_wide: namespaces.is_empty(),
                    namespaces,
                    impersonation: false,
                    constrained: false,
                    token_review: false,
                    argo_rollouts: on("ROLLSAFE_WATCH_ARGO_ROLLOUTS"),
                    namespace_selector: !get("ROLLSAFE_WATCH_NAMESPACE_SELECTOR").is_empty(),
                    access_config_map: String::new(),
                    lease: non_empty(get("ROLLSAFE_WATCH_LEASE_NAME"), "rollsafe-watch"),
                }
            }
        }
    }

    /// The mode in a few words (`namespace scope`, `cluster scope with a list`, …).
    pub fn describe(&self) -> String {
        let mut words = match self.component {
            Component::Server => match (self.cluster_wide, self.namespaces.is_empty()) {
                (false, _) => "namespace scope".to_owned(),
                (true, false) => format!("cluster scope with [{}]", self.namespaces.join(", ")),
                (true, true) => "cluster scope".to_owned(),
            },
            Component::Controller if self.cluster_wide => "cluster-wide".to_owned(),
            Component::Controller => format!("watching [{}]", self.namespaces.join(", ")),
        };
        for (on, what) in [
            (
                self.impersonation && self.constrained,
                "constrained impersonation",
            ),
            (self.impersonation && !self.constrained, "impersonation"),
            (self.token_review, "token review"),
            (self.argo_rollouts, "Argo Rollouts"),
            (self.namespace_selector, "namespace selector"),
        ] {
            if on {
                words.push_str(", ");
                words.push_str(what);
            }
        }
        words
    }

    fn applies(&self, when: When) -> bool {
        match when {
            When::Always => true,
            When::NoImpersonation => !self.impersonation,
            When::ClusterScopeNoList => {
                !self.impersonation && self.cluster_wide && self.namespaces.is_empty()
            }
            When::Impersonation => self.impersonation && !self.constrained,
            When::ConstrainedImpersonation => self.impersonation && self.constrained,
            When::ConstrainedClusterScopeNoList => {
                self.impersonation
                    && self.constrained
                    && self.cluster_wide
                    && self.namespaces.is_empty()
            }
            When::TokenReview => self.token_review,
            When::TokenReviewImpersonation => {
                self.token_review && self.impersonation && !self.constrained
            }
            When::TokenReviewConstrained => {
                self.token_review && self.impersonation && self.constrained
            }
            When::TokenReviewConstrainedClusterScopeNoList => {
                self.applies(When::TokenReviewConstrained)
                    && self.applies(When::ConstrainedClusterScopeNoList)
            }
            When::ArgoRollouts => self.argo_rollouts,
            When::NamespaceSelector => self.namespace_selector,
        }
    }

    /// The namespaces whose Roles the mode grants workload rules in (empty: cluster-wide).
    fn workload_namespaces(&self) -> Vec<String> {
        match self.component {
            Component::Server if !self.cluster_wide => vec![self.release_namespace.clone()],
            _ => self.namespaces.clone(),
        }
    }

    /// Every namespace the minimum names (the release namespace first).
    pub fn namespaces_named(&self) -> Vec<String> {
        let mut named = vec![self.release_namespace.clone()];
        for namespace in self.workload_namespaces() {
            if !named.contains(&namespace) {
                named.push(namespace);
            }
        }
        named
    }

    /// The documented rules of this mode.
    pub fn rules(&self) -> impl Iterator<Item = &'static Rule> + '_ {
        RULES
            .iter()
            .filter(|rule| rule.component == self.component && self.applies(rule.when))
    }

    /// The documented minimum in `namespace`, as grants (cluster-wide rules appear in every
    /// namespace, as a SelfSubjectRulesReview reports them). Rules whose names come from the
    /// values ([`Names::FromValues`]) are returned apart, by resource and verb: any name of
    /// theirs is accepted and shown.
    pub fn minimum(&self, namespace: &str) -> Minimum {
        let workloads = self.workload_namespaces();
        let mut minimum = Minimum::default();
        for rule in self.rules() {
            let here = match rule.place {
                Place::Release => namespace == self.release_namespace,
                Place::Cluster => true,
                Place::Workloads => {
                    workloads.is_empty() || workloads.iter().any(|w| w == namespace)
                }
            };
            if !here {
                continue;
            }
            let name = match rule.names {
                Names::Any => "",
                Names::AccessConfigMap => &self.access_config_map,
                Names::Lease => &self.lease,
                Names::FromValues => {
                    for resource in rule.resources {
                        for verb in rule.verbs {
                            minimum
                                .named_by_values
                                .insert(((*resource).to_owned(), (*verb).to_owned()));
                        }
                    }
                    continue;
                }
            };
            for resource in rule.resources {
                for verb in rule.verbs {
                    minimum.grants.insert(Grant::resource(resource, name, verb));
                }
            }
        }
        minimum
    }
}

fn non_empty(value: &str, default: &str) -> String {
    if value.is_empty() { default } else { value }.to_owned()
}

/// The documented minimum in one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Minimum {
    /// Grants that must be there, exactly.
    pub grants: BTreeSet<Grant>,
    /// `(resource, verb)` whose names the values decide: any name is accepted (and shown).
    pub named_by_values: BTreeSet<(String, String)>,
}

/// The comparison of one ServiceAccount's grants in one namespace with the minimum.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// Granted beyond the baseline and beyond the documented minimum.
    pub extra: Vec<Grant>,
    /// Documented but not granted.
    pub missing: Vec<Grant>,
    /// Granted under a rule whose names come from the values (accepted; shown for review).
    pub named_by_values: Vec<Grant>,
}

impl Difference {
    /// No extra and no missing grant.
    pub fn is_empty(&self) -> bool {
        self.extra.is_empty() && self.missing.is_empty()
    }
}

/// Compares what was granted with the baseline (what every ServiceAccount of the namespace
/// may do) and the minimum.
pub fn compare(
    granted: &BTreeSet<Grant>,
    baseline: &BTreeSet<Grant>,
    minimum: &Minimum,
) -> Difference {
    let mut difference = Difference::default();
    for grant in granted.difference(baseline) {
        if minimum.grants.contains(grant) {
            continue;
        }
        if minimum
            .named_by_values
            .contains(&(grant.resource.clone(), grant.verb.clone()))
        {
            difference.named_by_values.push(grant.clone());
        } else {
            difference.extra.push(grant.clone());
        }
    }
    difference.missing = minimum.grants.difference(granted).cloned().collect();
    difference
}

/// The grants of a SelfSubjectRulesReview's status, expanded as `kubectl auth can-i --list`
/// prints them.
pub fn grants_of(status: &SubjectRulesReviewStatus) -> BTreeSet<Grant> {
    let mut grants = BTreeSet::new();
    for rule in &status.resource_rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        let names = match rule.resource_names.as_deref() {
            None | Some([]) => vec![String::new()],
            Some(names) => names.to_vec(),
        };
        for group in &groups {
            for resource in &resources {
                let resource = if group.is_empty() {
                    resource.clone()
                } else {
                    format!("{resource}.{group}")
                };
                for name in &names {
                    for verb in &rule.verbs {
                        grants.insert(Grant::resource(&resource, name, verb));
                    }
                }
            }
        }
    }
    for rule in &status.non_resource_rules {
        for url in rule.non_resource_urls.clone().unwrap_or_default() {
            for verb in &rule.verbs {
                grants.insert(Grant {
                    resource: String::new(),
                    url: url.clone(),
                    name: String::new(),
                    verb: verb.clone(),
                });
            }
        }
    }
    grants
}

/// Which impersonation rules a set of grants holds: what `rollsafe serve` reads of its own
/// SelfSubjectRulesReview at startup to choose between constrained and unconstrained
/// impersonation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldImpersonation {
    /// A constrained rule: [`USER_INFO`] on `users` or [`SERVICE_ACCOUNT`] on `serviceaccounts`
    /// of `authentication.k8s.io` (or a wildcard there).
    pub constrained: bool,
    /// The unconstrained rule: `impersonate` (or `*`) on `users`, `groups` or
    /// `serviceaccounts` of the core group (or a wildcard): whoever holds it may impersonate
    /// for any verb on anything.
    pub unconstrained: bool,
}

/// Which impersonation rules `grants` (as [`grants_of`] expands them) hold.
pub fn held_impersonation(grants: &BTreeSet<Grant>) -> HeldImpersonation {
    let mut held = HeldImpersonation::default();
    for grant in grants.iter().filter(|g| !g.resource.is_empty()) {
        let (resource, group) = grant
            .resource
            .split_once('.')
            .unwrap_or((grant.resource.as_str(), ""));
        let any_group = group == "*";
        let verb = grant.verb.as_str();
        if matches!(verb, "impersonate" | "*")
            && matches!(resource, "users" | "groups" | "serviceaccounts" | "*")
            && (group.is_empty() || any_group)
        {
            held.unconstrained = true;
        }
        if matches!(verb, USER_INFO | SERVICE_ACCOUNT | "*")
            && matches!(resource, "users" | "serviceaccounts" | "*")
            && (group == "authentication.k8s.io" || any_group)
        {
            held.constrained = true;
        }
    }
    held
}

/// Why a review could not be made. Messages are fixed; the source says more.
#[derive(Debug, Error)]
pub enum ReviewError {
    /// Listing the release's ServiceAccounts or Deployments failed.
    #[error("cannot list the release's ServiceAccounts and Deployments")]
    List(#[source] kube::Error),
    /// No ServiceAccount carries the chart's labels in the namespace.
    #[error(
        "no ServiceAccount of the chart in the namespace (labels app.kubernetes.io/part-of=rollsafe)"
    )]
    NoServiceAccount,
    /// A ServiceAccount has no Deployment of the chart running as it: its mode is unknown.
    #[error("a ServiceAccount of the chart has no Deployment of the chart running as it")]
    NoDeployment,
    /// A SelfSubjectRulesReview was refused or failed (impersonating a ServiceAccount needs
    /// `impersonate` on `serviceaccounts`).
    #[error("the SelfSubjectRulesReview as a ServiceAccount failed")]
    RulesReview(#[source] kube::Error),
    /// The authorizer could not enumerate every rule.
    #[error(
        "the API server could not enumerate every rule of a ServiceAccount (incomplete review)"
    )]
    Incomplete,
    /// An identity could not be built from a ServiceAccount name.
    #[error("a ServiceAccount name cannot be impersonated")]
    Identity(#[source] crate::connection::IdentityError),
}

impl ReviewError {
    /// A stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ReviewError::List(_) => "list",
            ReviewError::NoServiceAccount => "no_service_account",
            ReviewError::NoDeployment => "no_deployment",
            ReviewError::RulesReview(_) => "rules_review",
            ReviewError::Incomplete => "incomplete",
            ReviewError::Identity(_) => "identity",
        }
    }
}

/// The review of one namespace for one ServiceAccount.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceReview {
    /// The namespace.
    pub namespace: String,
    /// Everything the ServiceAccount may do there beyond the baseline.
    pub granted: Vec<Grant>,
    /// How many grants the baseline holds (what every ServiceAccount of the namespace may do).
    pub baseline: usize,
    /// The difference from the documented minimum.
    pub difference: Difference,
}

/// The review of one ServiceAccount.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountReview {
    /// `system:serviceaccount:NS:NAME`.
    pub user: String,
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The chart's release (`app.kubernetes.io/instance`).
    pub release: String,
    /// Its mode, read from its Deployment.
    pub mode: Mode,
    /// The mode in words.
    pub described: String,
    /// Per namespace reviewed.
    pub namespaces: Vec<NamespaceReview>,
}

impl AccountReview {
    /// No namespace shows a difference.
    pub fn is_minimal(&self) -> bool {
        self.namespaces.iter().all(|n| n.difference.is_empty())
    }
}

/// What the review could not check (printed as warnings).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Notes {
    /// One line each.
    pub warnings: Vec<String>,
}

/// The name of the ServiceAccount whose rules are the baseline: nothing binds it (a review
/// never creates it; impersonation does not need it to exist).
pub const BASELINE_ACCOUNT: &str = "rollsafe-review-unbound";

/// The namespace reviewed for cluster-wide grants beyond the minimum: one the mode names
/// nothing in (a name no list holds; it need not exist).
pub const ELSEWHERE: &str = "rollsafe-review-elsewhere";

/// Reviews every ServiceAccount of the chart in `namespace` (of `release` when given): its
/// mode from the chart's Deployment running as it, its grants by SelfSubjectRulesReview as it
/// in the release namespace, in every namespace the mode names, in every namespace where a
/// RoleBinding names it, and in one namespace the mode names nothing in.
pub async fn review(
    connection: &Connection,
    namespace: &str,
    release: Option<&str>,
    notes: &mut Notes,
) -> Result<Vec<AccountReview>, ReviewError> {
    let client = connection.client(None);
    let mut selector = "app.kubernetes.io/part-of=rollsafe".to_owned();
    if let Some(release) = release {
        selector.push_str(",app.kubernetes.io/instance=");
        selector.push_str(release);
    }
    let params = ListParams::default().labels(&selector);
    let accounts = Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(ReviewError::List)?;
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&params)
        .await
        .map_err(ReviewError::List)?;
    if accounts.items.is_empty() {
        return Err(ReviewError::NoServiceAccount);
    }
    let bindings = match Api::<RoleBinding>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        Err(_) => {
            notes.warnings.push(
                "cannot list RoleBindings cluster-wide: only the namespaces the mode names \
                 were reviewed"
                    .to_owned(),
            );
            Vec::new()
        }
    };
    let mut reviews = Vec::new();
    for account in &accounts.items {
        let Some(name) = account.metadata.name.clone() else {
            continue;
        };
        let labels = account.metadata.labels.clone().unwrap_or_default();
        let component = match labels
            .get("app.kubernetes.io/component")
            .map(String::as_str)
        {
            Some("controller") => Component::Controller,
            _ => Component::Server,
        };
        let deployment = deployments
            .items
            .iter()
            .find(|d| {
                d.spec
                    .as_ref()
                    .and_then(|s| s.template.spec.as_ref())
                    .and_then(|p| p.service_account_name.as_deref())
                    == Some(name.as_str())
            })
            .ok_or(ReviewError::NoDeployment)?;
        let env: Vec<(&str, &str)> = deployment
            .spec
            .iter()
            .filter_map(|s| s.template.spec.as_ref())
            .flat_map(|p| p.containers.first())
            .flat_map(|c| c.env.iter().flatten())
            .filter_map(|e| Some((e.name.as_str(), e.value.as_deref()?)))
            .collect();
        let mode = Mode::from_env(component, namespace, env);
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let mut reviewed = mode.namespaces_named();
        for binding in &bindings {
            let names_it = binding.subjects.iter().flatten().any(|s| {
                s.kind == "ServiceAccount"
                    && s.name == name
                    && s.namespace.as_deref() == Some(namespace)
            });
            if let Some(ns) = binding.metadata.namespace.as_ref()
                && names_it
                && !reviewed.contains(ns)
            {
                reviewed.push(ns.clone());
            }
        }
        let mut elsewhere = ELSEWHERE.to_owned();
        while reviewed.contains(&elsewhere) {
            elsewhere.push('-');
            elsewhere.push('x');
        }
        reviewed.push(elsewhere);
        let identity = Impersonation::new(user.clone(), Vec::<String>::new())
            .map_err(ReviewError::Identity)?;
        let baseline_identity = Impersonation::new(
            format!("system:serviceaccount:{namespace}:{BASELINE_ACCOUNT}"),
            Vec::<String>::new(),
        )
        .map_err(ReviewError::Identity)?;
        let mut namespaces = Vec::new();
        for ns in reviewed {
            let granted = rules_review(connection, &identity, &ns).await?;
            let baseline = rules_review(connection, &baseline_identity, &ns).await?;
            let difference = compare(&granted, &baseline, &mode.minimum(&ns));
            namespaces.push(NamespaceReview {
                granted: granted.difference(&baseline).cloned().collect(),
                baseline: baseline.len(),
                namespace: ns,
                difference,
            });
        }
        reviews.push(AccountReview {
            user,
            namespace: namespace.to_owned(),
            name,
            release: labels
                .get("app.kubernetes.io/instance")
                .cloned()
                .unwrap_or_default(),
            described: mode.describe(),
            mode,
            namespaces,
        });
    }
    reviews.sort_by(|a, b| (&a.release, &a.name).cmp(&(&b.release, &b.name)));
    Ok(reviews)
}

/// Everything `identity` may do in `namespace`, by SelfSubjectRulesReview.
async fn rules_review(
    connection: &Connection,
    identity: &Impersonation,
    namespace: &str,
) -> Result<BTreeSet<Grant>, ReviewError> {
    let api = Api::<SelfSubjectRulesReview>::all(connection.client(Some(identity)));
    let request = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace.to_owned()),
        },
        ..Default::default()
    };
    let answer = api
        .create(&PostParams::default(), &request)
        .await
        .map_err(ReviewError::RulesReview)?;
    let status = answer.status.unwrap_or_default();
    if status.incomplete {
        return Err(ReviewError::Incomplete);
    }
    Ok(grants_of(&status))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(env: &[(&str, &str)]) -> Mode {
        Mode::from_env(Component::Server, "rel", env.iter().copied())
    }

    #[test]
    fn namespace_scope_is_the_five_rules_in_the_release_namespace_only() {
        let mode = server(&[("KRYPTON_SCOPE", "namespace")]);
        let here = mode.minimum("rel");
        assert!(here.grants.contains(&Grant::resource("secrets", "", "get")));
        assert!(
            here.grants
                .contains(&Grant::resource("configmaps", "krypton-access", "get"))
        );
        assert!(here.grants.contains(&Grant::resource(
            "leases.coordination.k8s.io",
            "rollsafe-watch",
            "get"
        )));
        assert_eq!(here.grants.len(), 9);
        assert!(mode.minimum("other").grants.is_empty());
    }

    #[test]
    fn cluster_scope_without_a_list_grants_everywhere_and_lists_namespaces() {
        let mode = server(&[("KRYPTON_SCOPE", "cluster")]);
        let other = mode.minimum("other");
        assert!(
            other
                .grants
                .contains(&Grant::resource("namespaces", "", "list"))
        );
        assert!(
            other
                .grants
                .contains(&Grant::resource("secrets", "", "get"))
        );
        let listed = server(&[("KRYPTON_SCOPE", "cluster"), ("KRYPTON_NAMESPACES", "a,b")]);
        assert!(listed.minimum("other").grants.is_empty());
        assert_eq!(listed.minimum("a").grants.len(), 7);
        assert_eq!(listed.minimum("rel").grants.len(), 2);
    }

    #[test]
    fn impersonation_accepts_the_names_of_the_values_and_nothing_else() {
        let mode = server(&[("KRYPTON_IMPERSONATION", "true")]);
        let minimum = mode.minimum("rel");
        let granted = BTreeSet::from([
            Grant::resource("users", "alice", "impersonate"),
            Grant::resource("configmaps", "krypton-access", "get"),
            Grant::resource("leases.coordination.k8s.io", "rollsafe-watch", "get"),
            Grant::resource("secrets", "", "get"),
        ]);
        let difference = compare(&granted, &BTreeSet::new(), &minimum);
        assert_eq!(
            difference.extra,
            vec![Grant::resource("secrets", "", "get")]
        );
        assert_eq!(
            difference.named_by_values,
            vec![Grant::resource("users", "alice", "impersonate")]
        );
        assert!(difference.missing.is_empty());
    }

    #[test]
    fn constrained_impersonation_is_the_impersonate_on_verbs_in_the_workload_namespaces() {
        let mode = server(&[
            ("KRYPTON_IMPERSONATION", "true"),
            ("KRYPTON_IMPERSONATION_CONSTRAINED", "true"),
        ]);
        assert_eq!(
            mode.describe(),
            "namespace scope, constrained impersonation"
        );
        let here = mode.minimum("rel");
        for (resource, verb) in [
            ("secrets", "impersonate-on:user-info:get"),
            ("deployments.apps", "impersonate-on:user-info:list"),
            ("daemonsets.apps", "impersonate-on:user-info:patch"),
        ] {
            assert!(here.grants.contains(&Grant::resource(resource, "", verb)));
        }
        // The access ConfigMap and the Lease as the server, and the four impersonate-on
        // grants per kind: nothing the server itself may read or patch.
        assert_eq!(here.grants.len(), 2 + 1 + 6);
        assert!(
            !here
                .grants
                .iter()
                .any(|g| g.verb == "get" && g.resource == "secrets")
        );
        assert_eq!(
            here.named_by_values,
            BTreeSet::from([
                (
                    "users.authentication.k8s.io".to_owned(),
                    USER_INFO.to_owned()
                ),
                (
                    "groups.authentication.k8s.io".to_owned(),
                    USER_INFO.to_owned()
                ),
            ])
        );
        // Nothing to do as the caller outside the release namespace.
        assert!(mode.minimum("other").grants.is_empty());
        let unconstrained = server(&[("KRYPTON_IMPERSONATION", "true")]);
        assert!(!unconstrained.constrained);
        assert!(
            unconstrained
                .minimum("rel")
                .named_by_values
                .contains(&("users".to_owned(), "impersonate".to_owned()))
        );
        // `constrained` alone means nothing without impersonation.
        let off = server(&[("KRYPTON_IMPERSONATION_CONSTRAINED", "true")]);
        assert!(!off.constrained && !off.impersonation);
    }

    #[test]
    fn constrained_cluster_scope_without_a_list_lists_namespaces_as_the_caller() {
        let mode = server(&[
            ("KRYPTON_SCOPE", "cluster"),
            ("KRYPTON_IMPERSONATION", "true"),
            ("KRYPTON_IMPERSONATION_CONSTRAINED", "true"),
            ("KRYPTON_TOKEN_REVIEW", "true"),
        ]);
        let other = mode.minimum("other");
        for (resource, verb) in [
            ("namespaces", "impersonate-on:user-info:list"),
            ("namespaces", "impersonate-on:serviceaccount:list"),
            ("secrets", "impersonate-on:serviceaccount:get"),
            ("tokenreviews.authentication.k8s.io", "create"),
        ] {
            assert!(
                other.grants.contains(&Grant::resource(resource, "", verb)),
                "{resource} {verb}"
            );
        }
        assert!(other.named_by_values.contains(&(
            "serviceaccounts.authentication.k8s.io".to_owned(),
            SERVICE_ACCOUNT.to_owned()
        )));
        let listed = server(&[
            ("KRYPTON_SCOPE", "cluster"),
            ("KRYPTON_NAMESPACES", "a"),
            ("KRYPTON_IMPERSONATION", "true"),
            ("KRYPTON_IMPERSONATION_CONSTRAINED", "true"),
        ]);
        assert!(listed.minimum("other").grants.is_empty());
        assert_eq!(listed.minimum("a").grants.len(), 7);
    }

    #[test]
    fn held_impersonation_tells_the_two_rule_sets_apart() {
        let held = |grants: &[(&str, &str)]| {
            held_impersonation(
                &grants
                    .iter()
                    .map(|(resource, verb)| Grant::resource(resource, "alice", verb))
                    .collect(),
            )
        };
        assert_eq!(
            held(&[("users.authentication.k8s.io", USER_INFO)]),
            HeldImpersonation {
                constrained: true,
                unconstrained: false
            }
        );
        assert_eq!(
            held(&[("users", "impersonate"), ("secrets", "get")]),
            HeldImpersonation {
                constrained: false,
                unconstrained: true
            }
        );
        // cluster-admin holds both.
        assert_eq!(
            held(&[("*.*", "*")]),
            HeldImpersonation {
                constrained: true,
                unconstrained: true
            }
        );
        // The impersonate-on verbs alone say nothing about who may be impersonated.
        assert_eq!(
            held(&[("secrets", "impersonate-on:user-info:get")]),
            HeldImpersonation::default()
        );
        assert_eq!(
            held(&[("groups.authentication.k8s.io", USER_INFO)]),
            HeldImpersonation::default(),
            "groups without users: no user can be impersonated"
        );
    }

    #[test]
    fn the_controller_follows_its_namespaces() {
        let mode = Mode::from_env(
            Component::Controller,
            "rel",
            [
                ("ROLLSAFE_WATCH_NAMESPACE", "a"),
                ("ROLLSAFE_WATCH_LEASE_NAME", "l"),
            ],
        );
        assert_eq!(mode.minimum("rel").grants.len(), 3);
        assert!(mode.minimum("other").grants.is_empty());
        assert!(
            mode.minimum("a")
                .grants
                .contains(&Grant::resource("cronjobs.batch", "", "patch"))
        );
        assert!(
            mode.minimum("a")
                .grants
                .contains(&Grant::resource("pods/eviction", "", "create"))
        );
        let wide = Mode::from_env(Component::Controller, "rel", []);
        // 18, and the eviction strategy's list pods, create pods/eviction, list budgets.
        assert_eq!(wide.minimum("other").grants.len(), 21);
    }
}
