//! The RBAC authorizer (the real server's `plugin/pkg/auth/authorizer/rbac`): RBAC evaluated
//! from the stored Role, ClusterRole, RoleBinding and ClusterRoleBinding objects, and the
//! bootstrap roles every cluster has. The HTTP layer's authorization filter, discovery and the
//! access reviews call it.

use serde_json::{Value, json};

use crate::identity::{AUTHENTICATED_GROUP, MASTERS_GROUP, UNAUTHENTICATED_GROUP, UserInfo};
use crate::store::Store;
use rollsafe_emulator_types::resources::{def, ids};
use rollsafe_emulator_types::route::ResourceRequest;
use rollsafe_emulator_types::status::StatusError;

/// What a request wants to do, in RBAC terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// Verb (`get`, `list`, `impersonate`, …).
    pub verb: String,
    /// API group.
    pub group: String,
    /// Resource plural (empty for non-resource requests).
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace (empty: cluster scope).
    pub namespace: String,
    /// Object name.
    pub name: String,
    /// Path, for non-resource requests.
    pub path: Option<String>,
}

impl Attributes {
    /// `deployments` or `deployments/scale`.
    pub fn full_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }

    /// The real server's forbidden sentence for this request and user.
    pub fn forbidden_message(&self, user: &str) -> String {
        if let Some(path) = &self.path {
            return format!("User {user:?} cannot {} path {path:?}", self.verb);
        }
        if self.namespace.is_empty() {
            format!(
                "User {user:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
                self.verb,
                self.full_resource(),
                self.group
            )
        } else {
            format!(
                "User {user:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
                self.verb,
                self.full_resource(),
                self.group,
                self.namespace
            )
        }
    }
}

/// The attributes of a resource request (for a namespace, its own name is the namespace).
pub fn resource_attributes(info: &ResourceRequest) -> Attributes {
    let d = def(info.res);
    let name = info.name.clone().unwrap_or_default();
    Attributes {
        verb: info.verb.to_string(),
        group: d.group.to_string(),
        resource: d.plural.to_string(),
        subresource: info.subresource.clone().unwrap_or_default(),
        namespace: if info.res == ids::NAMESPACES {
            name.clone()
        } else {
            info.namespace.clone().unwrap_or_default()
        },
        name,
        path: None,
    }
}

/// `Ok` when RBAC allows `user` to do `attrs`, else the real server's 403.
pub fn check(store: &Store, user: &UserInfo, attrs: &Attributes) -> Result<(), StatusError> {
    if authorize(store, user, attrs).is_some() {
        Ok(())
    } else {
        Err(StatusError::forbidden(
            &attrs.group,
            &attrs.resource,
            &attrs.name,
            &attrs.forbidden_message(&user.name),
        ))
    }
}

fn strs(v: Option<&Value>) -> Vec<&str> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let verbs = strs(rule.get("verbs"));
    if !verbs.iter().any(|v| *v == "*" || *v == a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return strs(rule.get("nonResourceURLs")).iter().any(|u| {
            *u == "*"
                || u == path
                || u.strip_suffix('*')
                    .is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    let groups = strs(rule.get("apiGroups"));
    if !groups.iter().any(|g| *g == "*" || *g == a.group) {
        return false;
    }
    let full = a.full_resource();
    let resources = strs(rule.get("resources"));
    let resource_ok = resources.iter().any(|r| {
        *r == "*"
            || *r == full
            || (a.subresource.is_empty() && *r == a.resource)
            || (!a.subresource.is_empty() && *r == format!("*/{}", a.subresource))
            || (!a.subresource.is_empty() && *r == format!("{}/*", a.resource))
    });
    if !resource_ok {
        return false;
    }
    let names = strs(rule.get("resourceNames"));
    names.is_empty() || names.contains(&a.name.as_str())
}

fn subject_matches(subject: &Value, user: &UserInfo, binding_ns: &str) -> bool {
    let kind = subject.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = subject.get("name").and_then(Value::as_str).unwrap_or("");
    match kind {
        "User" => user.name == name,
        "Group" => user.groups.iter().any(|g| g == name),
        "ServiceAccount" => {
            let ns = subject
                .get("namespace")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .unwrap_or(binding_ns);
            user.name == format!("system:serviceaccount:{ns}:{name}")
        }
        _ => false,
    }
}

fn role_rules<'a>(store: &'a Store, role_ref: &Value, binding_ns: &str) -> Option<&'a Value> {
    let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = role_ref.get("name").and_then(Value::as_str).unwrap_or("");
    let role = match kind {
        "ClusterRole" => store.get(ids::CLUSTERROLES, "", name),
        "Role" => store.get(ids::ROLES, binding_ns, name),
        _ => None,
    }?;
    role.get("rules")
}

/// The rules that apply to `user` in `namespace` (SelfSubjectRulesReview): those of every
/// ClusterRoleBinding naming the user, then of every RoleBinding in the namespace, as
/// (resource rules, non-resource rules) in the review's shape.
pub fn rules_for(store: &Store, user: &UserInfo, namespace: &str) -> (Vec<Value>, Vec<Value>) {
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    let mut collect = |binding: &Value, ns: &str| {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, user, ns))) {
            return;
        }
        let Some(role_ref) = binding.get("roleRef") else {
            return;
        };
        for rule in role_rules(store, role_ref, ns)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let list = |k: &str| json!(strs(rule.get(k)));
            if rule
                .get("nonResourceURLs")
                .is_some_and(|u| u.as_array().is_some_and(|a| !a.is_empty()))
            {
                non_resource_rules.push(
                    json!({"verbs": list("verbs"), "nonResourceURLs": list("nonResourceURLs")}),
                );
            } else {
                let mut r = json!({"verbs": list("verbs"), "apiGroups": list("apiGroups"), "resources": list("resources")});
                if !strs(rule.get("resourceNames")).is_empty() {
                    r["resourceNames"] = list("resourceNames");
                }
                resource_rules.push(r);
            }
        }
    };
    for (_, binding) in store.range(ids::CLUSTERROLEBINDINGS, None, None) {
        collect(binding, "");
    }
    if !namespace.is_empty() {
        for (_, binding) in store.range(ids::ROLEBINDINGS, Some(namespace), None) {
            collect(binding, namespace);
        }
    }
    (resource_rules, non_resource_rules)
}

/// RBAC: whether `user` may do `a`. `Some(reason)` when allowed.
pub fn authorize(store: &Store, user: &UserInfo, a: &Attributes) -> Option<String> {
    if user.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Some(String::new());
    }
    let check = |binding: &Value, ns: &str| -> bool {
        let subjects = binding.get("subjects").and_then(Value::as_array);
        if !subjects.is_some_and(|s| s.iter().any(|s| subject_matches(s, user, ns))) {
            return false;
        }
        let Some(role_ref) = binding.get("roleRef") else {
            return false;
        };
        role_rules(store, role_ref, ns)
            .and_then(Value::as_array)
            .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, a)))
    };
    for (_, binding) in store.range(ids::CLUSTERROLEBINDINGS, None, None) {
        if check(binding, "") {
            let (name, role) = (
                text_at(binding, "/metadata/name"),
                text_at(binding, "/roleRef/name"),
            );
            return Some(format!(
                "RBAC: allowed by ClusterRoleBinding {name:?} of ClusterRole {role:?} to User {:?}",
                user.name
            ));
        }
    }
    if !a.namespace.is_empty() && a.path.is_none() {
        for (_, binding) in store.range(ids::ROLEBINDINGS, Some(&a.namespace), None) {
            if check(binding, &a.namespace) {
                let name = text_at(binding, "/metadata/name");
                let kind = text_at(binding, "/roleRef/kind");
                let role = text_at(binding, "/roleRef/name");
                return Some(format!(
                    "RBAC: allowed by RoleBinding \"{name}/{}\" of {kind} {role:?} to User {:?}",
                    a.namespace, user.name
                ));
            }
        }
    }
    None
}

/// The cluster-level RBAC objects every real cluster has and that clients rely on: discovery
/// for authenticated users, self-reviews, and `cluster-admin` for `system:masters`.
pub fn bootstrap_objects() -> Vec<Value> {
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "cluster-admin"},
               "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                         {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "cluster-admin"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": MASTERS_GROUP}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "system:discovery"},
               "rules": [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez",
                                               "/openapi", "/openapi/*", "/readyz", "/version", "/version/"],
                          "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:discovery"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:discovery"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": AUTHENTICATED_GROUP}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "system:basic-user"},
               "rules": [{"apiGroups": ["authorization.k8s.io"],
                          "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                          "verbs": ["create"]},
                         {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"],
                          "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:basic-user"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:basic-user"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": AUTHENTICATED_GROUP}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "system:public-info-viewer"},
               "rules": [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"],
                          "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "system:public-info-viewer"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:public-info-viewer"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": AUTHENTICATED_GROUP},
                            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": UNAUTHENTICATED_GROUP}]}),
    ]
}

/// The string at a JSON pointer, or `""`.
fn text_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_messages() {
        let a = Attributes {
            verb: "list".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            namespace: "ns".into(),
            ..Default::default()
        };
        assert_eq!(
            a.forbidden_message("bob"),
            "User \"bob\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
        );
        let a = Attributes {
            verb: "impersonate".into(),
            resource: "users".into(),
            name: "bob".into(),
            ..Default::default()
        };
        assert_eq!(
            a.forbidden_message("alice"),
            "User \"alice\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
    }

    #[test]
    fn rules_match_subresources_and_names() {
        let rule = json!({"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["patch"], "resourceNames": ["web"]});
        let mut a = Attributes {
            verb: "patch".into(),
            group: "apps".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            namespace: "ns".into(),
            name: "web".into(),
            path: None,
        };
        assert!(rule_allows(&rule, &a));
        a.name = "api".into();
        assert!(!rule_allows(&rule, &a));
        a.subresource.clear();
        a.name = "web".into();
        assert!(!rule_allows(&rule, &a));
    }
}
