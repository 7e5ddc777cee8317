//! The server's validated settings: the value every part of the server reads, made of the
//! value types their owners define ([`Scope`], [`Admins`], [`AuthMode`], [`AllowedGroups`],
//! [`OidcSettings`]).
//!
//! `rollsafe serve` builds them from flags and the environment ([`crate::config`]); a server
//! built in code — the sandbox, the load benchmark, the tests — starts from [`Settings::new`]
//! and sets what differs.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use rollsafe_core::name::{AnnotationPrefix, ConfigMapName, Namespace};
use rollsafe_kube::published::LeaseRef;

use crate::acl::Admins;
use crate::identity::AllowedGroups;
use crate::impersonation::Constraint;
use crate::limits::MAX_CONCURRENT_RUNS;
use crate::oidc::OidcSettings;
use crate::scope::Scope;
use crate::session::AuthMode;

/// The default access-rules ConfigMap.
pub const DEFAULT_ACCESS_CONFIGMAP: &str = "krypton-access";
/// The default prefix of the ACL annotations and the history label.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "krypton.io";

/// The default name of the controller's Lease (the chart's `controller.leaseName`), in the
/// server's namespace.
pub const DEFAULT_CONTROLLER_LEASE: &str = "rollsafe-watch";

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// API listener.
    pub listen: SocketAddr,
    /// Admin listener.
    pub admin_listen: SocketAddr,
    /// Kubeconfig file, if any.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context, if any.
    pub context: Option<String>,
    /// Audit file, if any.
    pub audit_file: Option<PathBuf>,
    /// Whether the Restart Consumers API is enabled.
    pub restart_enabled: bool,
    /// Namespace scope.
    pub scope: Scope,
    /// The server's own namespace.
    pub server_namespace: Namespace,
    /// Admins.
    pub admins: Admins,
    /// Access-rules ConfigMap name.
    pub access_configmap: ConfigMapName,
    /// ACL annotation and history label prefix.
    pub annotation_prefix: AnnotationPrefix,
    /// Whether calls are made as the caller.
    pub impersonation: bool,
    /// With impersonation: constrained, unconstrained or decided at startup
    /// ([`crate::impersonation`]).
    pub impersonation_constrained: Constraint,
    /// Authentication.
    pub auth: AuthMode,
    /// Group patterns every session group must match (empty: any group not reserved).
    pub allowed_groups: AllowedGroups,
    /// The most restart runs in progress at once.
    pub max_concurrent_restarts: usize,
    /// TokenReview of Kubernetes bearer tokens, when on: the audiences asked for (empty: the
    /// API server's own).
    pub token_review: Option<Vec<String>>,
    /// OpenID Connect login, when configured.
    pub oidc: Option<OidcSettings>,
    /// The Lease `rollsafe watch` publishes its settings on, read as the server itself for
    /// the consumers preview; `None`: not read (the settings are unknown).
    pub controller_lease: Option<LeaseRef>,
}

impl Settings {
    /// Settings for a server of `server_namespace` whose callers authenticate by `auth`, every
    /// other setting at its default: both listeners on loopback at a port the system picks, no
    /// kubeconfig file or context (the client infers them), no audit file, the restart flag
    /// off, namespace scope, no admins (bootstrap), the default access ConfigMap and annotation
    /// prefix, no impersonation (and `auto` constraint for when it is turned on), any group not
    /// reserved, [`MAX_CONCURRENT_RUNS`], no
    /// TokenReview, no OpenID Connect, and the controller's Lease [`DEFAULT_CONTROLLER_LEASE`]
    /// in `server_namespace`. Set the public fields that differ, e.g.
    /// `Settings { restart_enabled: true, ..Settings::new(namespace, auth) }`.
    pub fn new(server_namespace: Namespace, auth: AuthMode) -> Self {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let controller_lease = Some(LeaseRef {
            namespace: server_namespace.to_string(),
            name: DEFAULT_CONTROLLER_LEASE.to_owned(),
        });
        Self {
            controller_lease,
            listen: loopback,
            admin_listen: loopback,
            kubeconfig: None,
            context: None,
            audit_file: None,
            restart_enabled: false,
            scope: Scope::Namespace,
            server_namespace,
            admins: Admins::default(),
            access_configmap: default_access_configmap(),
            annotation_prefix: default_annotation_prefix(),
            impersonation: false,
            impersonation_constrained: Constraint::Auto,
            auth,
            allowed_groups: AllowedGroups::default(),
            max_concurrent_restarts: MAX_CONCURRENT_RUNS,
            token_review: None,
            oidc: None,
        }
    }
}

#[expect(clippy::expect_used, reason = "a constant that is a valid name")]
fn default_access_configmap() -> ConfigMapName {
    DEFAULT_ACCESS_CONFIGMAP
        .parse()
        .expect("DEFAULT_ACCESS_CONFIGMAP is a DNS subdomain")
}

#[expect(clippy::expect_used, reason = "a constant that is a valid prefix")]
fn default_annotation_prefix() -> AnnotationPrefix {
    DEFAULT_ANNOTATION_PREFIX
        .parse()
        .expect("DEFAULT_ANNOTATION_PREFIX is a DNS subdomain")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionSecret;

    #[test]
    fn new_holds_the_defaults() {
        let auth = AuthMode::Session {
            secret: SessionSecret::new(b"0123456789abcdef0123456789abcdef".to_vec()),
            max_age: std::time::Duration::from_secs(60),
        };
        let settings = Settings::new("team-a".parse().unwrap(), auth);
        assert!(settings.listen.ip().is_loopback() && settings.listen.port() == 0);
        assert!(settings.admin_listen.ip().is_loopback() && settings.admin_listen.port() == 0);
        assert!(!settings.restart_enabled);
        assert_eq!(settings.scope, Scope::Namespace);
        assert_eq!(settings.server_namespace, "team-a");
        assert_eq!(settings.access_configmap, DEFAULT_ACCESS_CONFIGMAP);
        assert_eq!(settings.annotation_prefix, DEFAULT_ANNOTATION_PREFIX);
        assert!(settings.admins.is_bootstrap());
        assert!(!settings.impersonation);
        assert_eq!(settings.impersonation_constrained, Constraint::Auto);
        assert!(settings.allowed_groups.is_empty());
        assert_eq!(settings.max_concurrent_restarts, MAX_CONCURRENT_RUNS);
        assert!(settings.token_review.is_none() && settings.oidc.is_none());
        let lease = settings.controller_lease.unwrap();
        assert_eq!(
            (lease.namespace.as_str(), lease.name.as_str()),
            ("team-a", "rollsafe-watch")
        );
    }
}
