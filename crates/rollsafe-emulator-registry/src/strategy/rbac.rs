//! RBAC objects: names are path segments, not DNS names (`system:basic-user`).

use super::{DEFAULT, NameRule, Strategy};

/// Roles, ClusterRoles, RoleBindings and ClusterRoleBindings.
pub static STRATEGY: Strategy = Strategy {
    names: NameRule::PathSegment,
    ..DEFAULT
};
