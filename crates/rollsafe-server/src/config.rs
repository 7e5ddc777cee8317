//! Server flags: every setting a flag and an environment variable, parsed into the value types
//! their owners define and validated at startup into [`Settings`].
//!
//! This module is the roof of the settings: it imports the value types ([`Scope`],
//! [`SessionSecret`], [`AuthMode`], [`Admins`], [`AllowedGroups`], [`OidcSettings`]) and
//! [`Settings`] from their modules, and nothing in the server imports it back; only the wiring
//! (`rollsafe serve`, the sandbox) does. The types are re-exported here for the paths the
//! command line names.
//!
//! The environment names are a contract (`KRYPTON_*`, `SESSION_*`, `AUTH_DISABLED`). Booleans
//! are true for `1`, `true`, `yes`, `on` and false for `0`, `false`, `no`, `off` or empty
//! (trimmed, case-insensitive); any other value stops startup with a message naming the
//! setting, rather than silently reading as false.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::ArgAction;
pub use rollsafe_core::duration::DurationError;
use rollsafe_core::name::{AnnotationPrefix, ConfigMapName, Namespace};
use thiserror::Error;

pub use crate::acl::Admins;
use crate::acl::parse_csv;
use crate::identity::{AllowedGroups, PatternError};
pub use crate::impersonation::Constraint;
use crate::oidc::OidcSettings;
pub use crate::scope::Scope;
pub use crate::session::{AuthMode, SessionSecret};
pub use crate::settings::{
    DEFAULT_ACCESS_CONFIGMAP, DEFAULT_ANNOTATION_PREFIX, DEFAULT_CONTROLLER_LEASE, Settings,
};
use rollsafe_kube::published::LeaseRef;

/// Where the ServiceAccount namespace file is mounted in a pod.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The fewest bytes a session secret may have.
pub const MIN_SESSION_SECRET_LEN: usize = 32;

/// The server's namespace when nothing else names it.
pub const DEFAULT_SERVER_NAMESPACE: &str = "krypton";

/// The default session lifetime (8 h).
pub const DEFAULT_SESSION_MAX_AGE: Duration = Duration::from_secs(28_800);

/// `rollsafe serve` settings, each parsed into its type by the flag's value parser, so an
/// invalid value stops startup with a message that names the environment variable.
#[derive(Clone, clap::Args)]
pub struct ServeArgs {
    /// Address of the API listener.
    #[arg(long, env = "ROLLSAFE_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Address of the admin listener (metrics).
    #[arg(long, env = "ROLLSAFE_ADMIN_LISTEN", default_value = "127.0.0.1:9090")]
    pub admin_listen: SocketAddr,
    /// Kubeconfig file; when absent, `KUBECONFIG` (a path list) or `~/.kube/config`, else the
    /// in-cluster ServiceAccount.
    #[arg(long, env = "ROLLSAFE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context.
    #[arg(long, env = "ROLLSAFE_CONTEXT")]
    pub context: Option<String>,
    /// Append audit lines to this file too, fsync'd before each response.
    #[arg(long, env = "ROLLSAFE_AUDIT_FILE")]
    pub audit_file: Option<PathBuf>,
    /// Allow the Restart Consumers API (`1|true|yes|on`).
    #[arg(long, env = "KRYPTON_RESTART_ENABLED", default_value = "", action = ArgAction::Set,
          value_parser = boolean("KRYPTON_RESTART_ENABLED"))]
    pub restart_enabled: bool,
    /// `namespace` (only the server's namespace) or `cluster` (namespaces the caller can list).
    #[arg(long, env = "KRYPTON_SCOPE", default_value = "namespace", value_parser = parse_scope)]
    pub scope: ScopeKind,
    /// Comma-separated allow-list intersected with the listable namespaces in cluster scope.
    #[arg(long, env = "KRYPTON_NAMESPACES", default_value = "", value_parser = parse_namespaces)]
    pub namespaces: NamespaceList,
    /// The server's namespace outside a pod (after the ServiceAccount file and POD_NAMESPACE).
    #[arg(long, env = "KRYPTON_NAMESPACE", value_parser = namespace("KRYPTON_NAMESPACE"))]
    pub namespace: Option<OptionalNamespace>,
    /// The pod's namespace, from the downward API.
    #[arg(long, env = "POD_NAMESPACE", value_parser = namespace("POD_NAMESPACE"))]
    pub pod_namespace: Option<OptionalNamespace>,
    /// Comma-separated admin emails (case-insensitive).
    #[arg(long, env = "KRYPTON_ADMIN_USERS", default_value = "", value_parser = parse_list)]
    pub admin_users: List,
    /// Comma-separated admin groups (exact).
    #[arg(long, env = "KRYPTON_ADMIN_GROUPS", default_value = "", value_parser = parse_list)]
    pub admin_groups: List,
    /// The ConfigMap in the server's namespace holding namespace access rules (key `access.json`).
    #[arg(long, env = "KRYPTON_ACCESS_CONFIGMAP", default_value = DEFAULT_ACCESS_CONFIGMAP,
          value_parser = parse_configmap)]
    pub access_configmap: ConfigMapName,
    /// Prefix of the ACL annotations and the history label.
    #[arg(long, env = "KRYPTON_ANNOTATION_PREFIX", default_value = DEFAULT_ANNOTATION_PREFIX,
          value_parser = parse_prefix)]
    pub annotation_prefix: AnnotationPrefix,
    /// Make every Kubernetes call of a request as the caller (`1|true|yes|on`).
    #[arg(long, env = "KRYPTON_IMPERSONATION", default_value = "", action = ArgAction::Set,
          value_parser = boolean("KRYPTON_IMPERSONATION"))]
    pub impersonation: bool,
    /// With impersonation: `auto` (constrained when the ServiceAccount holds the constrained
    /// rules and the API server serves them), `true` (constrained, or no start) or `false` (the
    /// unconstrained `impersonate` rules). See `rollsafe_server::impersonation`.
    #[arg(long, env = "KRYPTON_IMPERSONATION_CONSTRAINED", default_value = "auto",
          value_parser = parse_constraint)]
    pub impersonation_constrained: Constraint,
    /// HMAC key of session JWTs (at least 32 bytes).
    #[arg(long, env = "SESSION_SECRET", hide_env_values = true)]
    pub session_secret: Option<String>,
    /// Session lifetime: seconds (`28800`) or a duration (`8h`, `1h30m`), as `token --ttl`.
    #[arg(long, env = "SESSION_MAX_AGE", default_value = "28800", value_parser = parse_max_age)]
    pub session_max_age: Duration,
    /// Skip authentication: every request is a fixed admin dev user. Loopback listeners only.
    #[arg(long, env = "AUTH_DISABLED", default_value = "", action = ArgAction::Set,
          value_parser = boolean("AUTH_DISABLED"))]
    pub auth_disabled: bool,
    /// Comma-separated group patterns (`name` or `prefix*`) a session's groups must all match;
    /// empty allows every group that is not a reserved `system:` group (those never pass).
    #[arg(long, env = "KRYPTON_ALLOWED_GROUPS", default_value = "",
          value_parser = parse_allowed_groups)]
    pub allowed_groups: AllowedGroups,
    /// The most restart runs in progress at once; beyond it, 429 with Retry-After.
    #[arg(long, env = "KRYPTON_MAX_CONCURRENT_RESTARTS",
          default_value_t = crate::limits::MAX_CONCURRENT_RUNS,
          value_parser = parse_max_concurrent)]
    pub max_concurrent_restarts: usize,
    /// Accept Kubernetes bearer tokens (checked with a TokenReview) beside session JWTs.
    #[arg(long, env = "KRYPTON_TOKEN_REVIEW", default_value = "", action = ArgAction::Set,
          value_parser = boolean("KRYPTON_TOKEN_REVIEW"))]
    pub token_review: bool,
    /// Comma-separated audiences a reviewed token must be valid for (empty: the API server's
    /// own).
    #[arg(long, env = "KRYPTON_TOKEN_REVIEW_AUDIENCES", default_value = "",
          value_parser = parse_list)]
    pub token_review_audiences: List,
    /// The Lease `rollsafe watch` publishes its settings on (`NAMESPACE/NAME`, or `NAME` in the
    /// server's namespace; `none` reads none), read as the server itself for the consumers
    /// preview. Default: `rollsafe-watch` in the server's namespace (the chart's).
    #[arg(long, env = "ROLLSAFE_CONTROLLER_LEASE", value_parser = parse_controller_lease)]
    pub controller_lease: Option<ControllerLease>,
    /// OpenID Connect login.
    #[command(flatten)]
    pub oidc: OidcArgs,
}

/// `ROLLSAFE_CONTROLLER_LEASE` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControllerLease {
    /// `none` (or empty): the controller's settings are not read.
    None,
    /// A Lease, in this namespace or the server's.
    Lease {
        /// Its namespace; `None`: the server's.
        namespace: Option<Namespace>,
        /// Its name.
        name: String,
    },
}

/// OpenID Connect settings as given (`KRYPTON_OIDC_*`); login is on when the issuer is set.
#[derive(Clone, clap::Args)]
pub struct OidcArgs {
    /// OpenID Connect: the provider's issuer URL; login is on when it is set.
    #[arg(long, env = "KRYPTON_OIDC_ISSUER_URL")]
    pub oidc_issuer_url: Option<String>,
    /// OpenID Connect: this server's client id.
    #[arg(long, env = "KRYPTON_OIDC_CLIENT_ID")]
    pub oidc_client_id: Option<String>,
    /// OpenID Connect: the client secret (prefer the file).
    #[arg(long, env = "KRYPTON_OIDC_CLIENT_SECRET", hide_env_values = true)]
    pub oidc_client_secret: Option<String>,
    /// OpenID Connect: a file holding the client secret (trailing newline ignored).
    #[arg(long, env = "KRYPTON_OIDC_CLIENT_SECRET_FILE", value_parser = read_secret_file)]
    pub oidc_client_secret_file: Option<SecretText>,
    /// OpenID Connect: `https://<this server>/auth/callback`, as registered at the provider.
    #[arg(long, env = "KRYPTON_OIDC_REDIRECT_URL")]
    pub oidc_redirect_url: Option<String>,
    /// OpenID Connect: comma-separated scopes besides `openid`.
    #[arg(long, env = "KRYPTON_OIDC_SCOPES", default_value = "email,profile", value_parser = parse_list)]
    pub oidc_scopes: List,
    /// OpenID Connect: the ID token claim holding the email.
    #[arg(long, env = "KRYPTON_OIDC_EMAIL_CLAIM", default_value = "email")]
    pub oidc_email_claim: String,
    /// OpenID Connect: the ID token claim holding the groups.
    #[arg(long, env = "KRYPTON_OIDC_GROUPS_CLAIM", default_value = "groups")]
    pub oidc_groups_claim: String,
}

impl fmt::Debug for OidcArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcArgs")
            .field("issuer_url", &self.oidc_issuer_url)
            .field("client_id", &self.oidc_client_id)
            .finish_non_exhaustive()
    }
}

impl OidcArgs {
    /// The validated settings, or `None` when no issuer is set. `default_redirect` is used
    /// when no redirect URL is given (the sandbox knows its own address); login needs sessions,
    /// so `auth_disabled` refuses it.
    pub fn validate(
        self,
        auth_disabled: bool,
        default_redirect: Option<String>,
    ) -> Result<Option<OidcSettings>, ConfigError> {
        let OidcArgs {
            oidc_issuer_url,
            oidc_client_id,
            oidc_client_secret,
            oidc_client_secret_file,
            oidc_redirect_url,
            oidc_scopes,
            oidc_email_claim,
            oidc_groups_claim,
        } = self;
        let Some(issuer) = oidc_issuer_url.filter(|url| !url.trim().is_empty()) else {
            return Ok(None);
        };
        if auth_disabled {
            return Err(ConfigError::Oidc(
                "login needs sessions: it cannot be combined with AUTH_DISABLED",
            ));
        }
        let issuer = openidconnect::IssuerUrl::new(issuer)
            .map_err(|_| ConfigError::Oidc("KRYPTON_OIDC_ISSUER_URL is not a URL"))?;
        let client_id = oidc_client_id
            .filter(|id| !id.trim().is_empty())
            .ok_or(ConfigError::Oidc("KRYPTON_OIDC_CLIENT_ID is required"))?;
        let redirect = oidc_redirect_url
            .or(default_redirect)
            .ok_or(ConfigError::Oidc("KRYPTON_OIDC_REDIRECT_URL is required"))
            .and_then(|url| {
                openidconnect::RedirectUrl::new(url)
                    .map_err(|_| ConfigError::Oidc("KRYPTON_OIDC_REDIRECT_URL is not a URL"))
            })?;
        let client_secret = match (oidc_client_secret, oidc_client_secret_file) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Oidc(
                    "give KRYPTON_OIDC_CLIENT_SECRET or KRYPTON_OIDC_CLIENT_SECRET_FILE, not both",
                ));
            }
            (Some(secret), None) | (None, Some(SecretText(secret))) => {
                Some(openidconnect::ClientSecret::new(secret))
            }
            (None, None) => None,
        };
        Ok(Some(OidcSettings {
            issuer,
            client_id: openidconnect::ClientId::new(client_id),
            client_secret,
            redirect,
            scopes: oidc_scopes.0,
            email_claim: oidc_email_claim,
            groups_claim: oidc_groups_claim,
        }))
    }
}

/// A secret read from a file. `Debug` never prints it.
#[derive(Clone)]
pub struct SecretText(String);

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretText(<redacted>)")
    }
}

fn read_secret_file(path: &str) -> Result<SecretText, ConfigError> {
    std::fs::read_to_string(path)
        .map(|text| SecretText(text.trim_end_matches(['\n', '\r']).to_owned()))
        .map_err(|_| ConfigError::Oidc("KRYPTON_OIDC_CLIENT_SECRET_FILE cannot be read"))
}

/// `KRYPTON_SCOPE` as given; [`Scope`] adds the allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScopeKind {
    /// `namespace` (or empty).
    Namespace,
    /// `cluster`.
    Cluster,
}

/// A comma-separated list, trimmed, without empty entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct List(pub Vec<String>);

/// `KRYPTON_NAMESPACES`: comma-separated namespace names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceList(pub Vec<Namespace>);

/// A namespace setting that may be set but blank (a blank value is skipped, as if unset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionalNamespace(pub Option<Namespace>);

impl fmt::Debug for ServeArgs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeArgs")
            .field("listen", &self.listen)
            .field("scope", &self.scope)
            .field(
                "session_secret",
                &self.session_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

/// An invalid setting; the message names it.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A boolean setting has a value that is not a boolean.
    #[error("{name}: {value:?} is not a boolean (use true/false, 1/0, yes/no, on/off)")]
    NotABoolean {
        /// The environment name of the setting.
        name: &'static str,
        /// The value given.
        value: String,
    },
    /// `KRYPTON_SCOPE` is neither `namespace` nor `cluster`.
    #[error("KRYPTON_SCOPE: {0:?} is not a scope (use namespace or cluster)")]
    Scope(String),
    /// `SESSION_MAX_AGE` is not a positive duration.
    #[error("SESSION_MAX_AGE: {0:?} is not a positive duration (seconds, or e.g. 30m, 8h, 1h30m)")]
    MaxAge(String),
    /// `SESSION_SECRET` is missing or too short while authentication is on.
    #[error(
        "SESSION_SECRET: must be set to at least {MIN_SESSION_SECRET_LEN} bytes unless AUTH_DISABLED is true"
    )]
    SessionSecret,
    /// `AUTH_DISABLED` with a listener that is not loopback.
    #[error(
        "AUTH_DISABLED: refused because the server listens on {0}, which is not a loopback address"
    )]
    AuthDisabledOffLoopback(SocketAddr),
    /// A name setting is not a valid Kubernetes name.
    #[error("{name}: {value:?} is not a valid Kubernetes name")]
    Name {
        /// The environment name of the setting.
        name: &'static str,
        /// The value given.
        value: String,
    },
    /// `KRYPTON_ANNOTATION_PREFIX` is not a DNS subdomain.
    #[error("KRYPTON_ANNOTATION_PREFIX: {0:?} is not a DNS subdomain")]
    Prefix(String),
    /// `KRYPTON_ALLOWED_GROUPS` has a pattern that is malformed or would admit reserved groups.
    #[error("KRYPTON_ALLOWED_GROUPS: {0}")]
    AllowedGroups(#[source] PatternError),
    /// The OpenID Connect settings are incomplete or invalid.
    #[error("OpenID Connect: {0}")]
    Oidc(&'static str),
    /// `ROLLSAFE_CONTROLLER_LEASE` is not `NAMESPACE/NAME`, `NAME` or `none`.
    #[error("ROLLSAFE_CONTROLLER_LEASE: {0:?} is not NAMESPACE/NAME, NAME or none")]
    ControllerLease(String),
    /// `KRYPTON_IMPERSONATION_CONSTRAINED` is neither `auto` nor a boolean.
    #[error(
        "KRYPTON_IMPERSONATION_CONSTRAINED: {0:?} is neither auto nor a boolean (true/false, 1/0, yes/no, on/off)"
    )]
    Constraint(String),
    /// `KRYPTON_MAX_CONCURRENT_RESTARTS` is not a positive number.
    #[error("KRYPTON_MAX_CONCURRENT_RESTARTS: {0:?} is not a positive number")]
    MaxConcurrentRestarts(String),
}

/// Parses a boolean setting.
pub fn parse_bool(name: &'static str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(ConfigError::NotABoolean {
            name,
            value: value.to_owned(),
        }),
    }
}

/// Parses a positive duration in the one format of every flag (`rollsafe_core::duration`):
/// bare seconds (`90`), or units summed (`500ms`, `90s`, `15m`, `8h`, `1d`, `1h30m`). Zero is
/// refused.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    rollsafe_core::duration::parse(text).and_then(|duration| {
        if duration.is_zero() {
            Err(DurationError)
        } else {
            Ok(duration)
        }
    })
}

/// The value parser of a boolean setting named `name`.
fn boolean(
    name: &'static str,
) -> impl Fn(&str) -> Result<bool, ConfigError> + Clone + Send + Sync + 'static {
    move |value| parse_bool(name, value)
}

/// The value parser of a namespace setting named `name`; blank reads as unset.
fn namespace(
    name: &'static str,
) -> impl Fn(&str) -> Result<OptionalNamespace, ConfigError> + Clone + Send + Sync + 'static {
    move |value| {
        let value = value.trim();
        if value.is_empty() {
            return Ok(OptionalNamespace(None));
        }
        Namespace::try_from(value.to_owned())
            .map(|ns| OptionalNamespace(Some(ns)))
            .map_err(|_| ConfigError::Name {
                name,
                value: value.to_owned(),
            })
    }
}

fn parse_constraint(value: &str) -> Result<Constraint, ConfigError> {
    if value.trim().eq_ignore_ascii_case("auto") {
        return Ok(Constraint::Auto);
    }
    match parse_bool("KRYPTON_IMPERSONATION_CONSTRAINED", value) {
        Ok(true) => Ok(Constraint::Required),
        Ok(false) if !value.trim().is_empty() => Ok(Constraint::Off),
        _ => Err(ConfigError::Constraint(value.to_owned())),
    }
}

fn parse_scope(value: &str) -> Result<ScopeKind, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "namespace" => Ok(ScopeKind::Namespace),
        "cluster" => Ok(ScopeKind::Cluster),
        _ => Err(ConfigError::Scope(value.to_owned())),
    }
}

fn parse_namespaces(value: &str) -> Result<NamespaceList, ConfigError> {
    parse_csv(value)
        .into_iter()
        .map(|ns| {
            Namespace::try_from(ns.clone()).map_err(|_| ConfigError::Name {
                name: "KRYPTON_NAMESPACES",
                value: ns,
            })
        })
        .collect::<Result<_, _>>()
        .map(NamespaceList)
}

fn parse_list(value: &str) -> Result<List, ConfigError> {
    Ok(List(parse_csv(value)))
}

fn parse_configmap(value: &str) -> Result<ConfigMapName, ConfigError> {
    ConfigMapName::try_from(value.to_owned()).map_err(|_| ConfigError::Name {
        name: "KRYPTON_ACCESS_CONFIGMAP",
        value: value.to_owned(),
    })
}

fn parse_prefix(value: &str) -> Result<AnnotationPrefix, ConfigError> {
    AnnotationPrefix::try_from(value.to_owned()).map_err(|_| ConfigError::Prefix(value.to_owned()))
}

fn parse_max_age(value: &str) -> Result<Duration, ConfigError> {
    parse_duration(value).map_err(|_| ConfigError::MaxAge(value.to_owned()))
}

fn parse_allowed_groups(value: &str) -> Result<AllowedGroups, ConfigError> {
    AllowedGroups::parse(value).map_err(ConfigError::AllowedGroups)
}

fn parse_max_concurrent(value: &str) -> Result<usize, ConfigError> {
    match value.trim().parse::<usize>() {
        Ok(limit) if limit > 0 => Ok(limit),
        _ => Err(ConfigError::MaxConcurrentRestarts(value.to_owned())),
    }
}

fn parse_controller_lease(value: &str) -> Result<ControllerLease, ConfigError> {
    let text = value.trim();
    if text.is_empty() || text.eq_ignore_ascii_case("none") {
        return Ok(ControllerLease::None);
    }
    let refused = || ConfigError::ControllerLease(value.to_owned());
    let (namespace, name) = match text.split_once('/') {
        Some((namespace, name)) => (
            Some(Namespace::try_from(namespace.to_owned()).map_err(|_| refused())?),
            name,
        ),
        None => (None, text),
    };
    if !rollsafe_core::validation::is_dns1123_subdomain(name) {
        return Err(refused());
    }
    Ok(ControllerLease::Lease {
        namespace,
        name: name.to_owned(),
    })
}

impl ServeArgs {
    /// Validates what depends on several settings. `service_account_namespace` is the content of
    /// the ServiceAccount namespace file, when it exists.
    pub fn validate(
        self,
        service_account_namespace: Option<&str>,
    ) -> Result<Settings, ConfigError> {
        // Every field is named: a flag added to `ServeArgs` and not wired here does not compile.
        let ServeArgs {
            listen,
            admin_listen,
            kubeconfig,
            context,
            audit_file,
            restart_enabled,
            scope,
            namespaces,
            namespace,
            pod_namespace,
            admin_users,
            admin_groups,
            access_configmap,
            annotation_prefix,
            impersonation,
            impersonation_constrained,
            session_secret,
            session_max_age,
            auth_disabled,
            allowed_groups,
            max_concurrent_restarts,
            token_review,
            token_review_audiences,
            controller_lease,
            oidc,
        } = self;
        let scope = match scope {
            ScopeKind::Namespace => Scope::Namespace,
            ScopeKind::Cluster => Scope::Cluster {
                allow_list: namespaces.0,
            },
        };
        let service_account_namespace = service_account_namespace
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|value| {
                // The ServiceAccount file is reported under the setting that overrides it.
                Namespace::try_from(value.to_owned()).map_err(|_| ConfigError::Name {
                    name: "KRYPTON_NAMESPACE",
                    value: value.to_owned(),
                })
            })
            .transpose()?;
        let server_namespace = match service_account_namespace
            .or(pod_namespace.and_then(|ns| ns.0))
            .or(namespace.and_then(|ns| ns.0))
        {
            Some(namespace) => namespace,
            None => Namespace::try_from(DEFAULT_SERVER_NAMESPACE.to_owned()).map_err(|_| {
                ConfigError::Name {
                    name: "KRYPTON_NAMESPACE",
                    value: DEFAULT_SERVER_NAMESPACE.to_owned(),
                }
            })?,
        };
        let auth = if auth_disabled {
            if !listen.ip().is_loopback() {
                return Err(ConfigError::AuthDisabledOffLoopback(listen));
            }
            AuthMode::Disabled
        } else {
            match session_secret {
                Some(secret) if secret.len() >= MIN_SESSION_SECRET_LEN => AuthMode::Session {
                    secret: SessionSecret::new(secret.into_bytes()),
                    max_age: session_max_age,
                },
                _ => return Err(ConfigError::SessionSecret),
            }
        };
        let oidc = oidc.validate(matches!(auth, AuthMode::Disabled), None)?;
        let controller_lease = match controller_lease {
            Some(ControllerLease::None) => None,
            Some(ControllerLease::Lease { namespace, name }) => Some(LeaseRef {
                namespace: namespace
                    .unwrap_or_else(|| server_namespace.clone())
                    .to_string(),
                name,
            }),
            None => Some(LeaseRef {
                namespace: server_namespace.to_string(),
                name: DEFAULT_CONTROLLER_LEASE.to_owned(),
            }),
        };
        Ok(Settings {
            controller_lease,
            listen,
            admin_listen,
            kubeconfig,
            context,
            audit_file,
            restart_enabled,
            scope,
            server_namespace,
            admins: Admins {
                users: admin_users.0.iter().map(|u| u.to_lowercase()).collect(),
                groups: admin_groups.0,
            },
            access_configmap,
            annotation_prefix,
            impersonation,
            impersonation_constrained,
            auth,
            allowed_groups,
            max_concurrent_restarts,
            token_review: token_review.then_some(token_review_audiences.0),
            oidc,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ServeArgs,
    }

    fn args(extra: &[&str]) -> ServeArgs {
        let mut argv = vec![
            "serve",
            "--session-secret",
            "0123456789abcdef0123456789abcdef",
        ];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().args
    }

    /// The message of the first error, from parsing or from validation.
    fn error(extra: &[&str]) -> String {
        let mut argv = vec![
            "serve",
            "--session-secret",
            "0123456789abcdef0123456789abcdef",
        ];
        argv.extend_from_slice(extra);
        match Cli::try_parse_from(argv) {
            Ok(cli) => cli.args.validate(None).unwrap_err().to_string(),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn booleans() {
        for (value, expected) in [
            ("1", true),
            (" TRUE ", true),
            ("yes", true),
            ("On", true),
            ("", false),
            ("0", false),
            ("false", false),
            ("no", false),
            ("OFF", false),
        ] {
            assert_eq!(parse_bool("X", value), Ok(expected), "{value:?}");
        }
        assert!(matches!(
            parse_bool("KRYPTON_RESTART_ENABLED", "enabled"),
            Err(ConfigError::NotABoolean {
                name: "KRYPTON_RESTART_ENABLED",
                ..
            })
        ));
    }

    #[test]
    fn durations() {
        for (text, seconds) in [
            ("90", 90),
            ("90s", 90),
            ("15m", 900),
            ("8h", 28_800),
            ("1d", 86_400),
            ("1h30m", 5_400),
            (" 28800 ", 28_800),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(Duration::from_secs(seconds)),
                "{text}"
            );
        }
        for text in [
            "",
            "0",
            "0s",
            "8x",
            "h",
            "1.5h",
            "-1",
            "99999999999999999999",
        ] {
            assert_eq!(parse_duration(text), Err(DurationError), "{text}");
        }
        let settings = args(&["--session-max-age", "1h30m"])
            .validate(None)
            .unwrap();
        assert!(
            matches!(settings.auth, AuthMode::Session { max_age, .. } if max_age.as_secs() == 5_400)
        );
    }

    #[test]
    fn defaults() {
        let settings = args(&[]).validate(None).unwrap();
        assert!(!settings.restart_enabled);
        assert_eq!(settings.scope, Scope::Namespace);
        assert_eq!(settings.server_namespace, "krypton");
        assert_eq!(settings.access_configmap, "krypton-access");
        assert_eq!(settings.annotation_prefix, "krypton.io");
        assert!(settings.admins.is_bootstrap());
        assert!(!settings.impersonation);
        assert_eq!(settings.impersonation_constrained, Constraint::Auto);
        assert!(settings.allowed_groups.is_empty());
        assert_eq!(
            settings.max_concurrent_restarts,
            crate::limits::MAX_CONCURRENT_RUNS
        );
        assert!(
            matches!(settings.auth, AuthMode::Session { max_age, .. } if max_age == DEFAULT_SESSION_MAX_AGE)
        );
    }

    #[test]
    fn impersonation_constrained_is_auto_or_a_boolean() {
        for (value, expected) in [
            ("auto", Constraint::Auto),
            (" AUTO ", Constraint::Auto),
            ("true", Constraint::Required),
            ("on", Constraint::Required),
            ("false", Constraint::Off),
            ("0", Constraint::Off),
        ] {
            let settings = args(&["--impersonation-constrained", value])
                .validate(None)
                .unwrap();
            assert_eq!(settings.impersonation_constrained, expected, "{value:?}");
        }
    }

    #[test]
    fn server_namespace_precedence() {
        let a = args(&["--pod-namespace", "pod-ns", "--namespace", "env-ns"]);
        assert_eq!(
            a.clone()
                .validate(Some("sa-ns\n"))
                .unwrap()
                .server_namespace,
            "sa-ns"
        );
        assert_eq!(a.validate(Some("  ")).unwrap().server_namespace, "pod-ns");
        let a = args(&["--namespace", "env-ns"]);
        assert_eq!(a.validate(None).unwrap().server_namespace, "env-ns");
        let a = args(&["--pod-namespace", " ", "--namespace", "env-ns"]);
        assert_eq!(a.validate(None).unwrap().server_namespace, "env-ns");
        assert!(error(&["--namespace", "Bad_NS"]).contains("KRYPTON_NAMESPACE: \"Bad_NS\""));
        assert!(matches!(
            args(&[]).validate(Some("Bad_NS")),
            Err(ConfigError::Name {
                name: "KRYPTON_NAMESPACE",
                ..
            })
        ));
    }

    #[test]
    fn invalid_settings_name_themselves() {
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["--scope", "everything"], "KRYPTON_SCOPE"),
            (vec!["--session-max-age", "0"], "SESSION_MAX_AGE"),
            (vec!["--session-max-age", "8x"], "SESSION_MAX_AGE"),
            (
                vec!["--restart-enabled", "enabled"],
                "KRYPTON_RESTART_ENABLED",
            ),
            (vec!["--impersonation", "maybe"], "KRYPTON_IMPERSONATION"),
            (
                vec!["--impersonation-constrained", "maybe"],
                "KRYPTON_IMPERSONATION_CONSTRAINED",
            ),
            (
                vec!["--impersonation-constrained", ""],
                "KRYPTON_IMPERSONATION_CONSTRAINED",
            ),
            (
                vec!["--auth-disabled", "true", "--listen", "0.0.0.0:8080"],
                "AUTH_DISABLED",
            ),
            (
                vec!["--scope", "cluster", "--namespaces", "a,B"],
                "KRYPTON_NAMESPACES",
            ),
            (
                vec!["--access-configmap", "Bad Name"],
                "KRYPTON_ACCESS_CONFIGMAP",
            ),
            (vec!["--annotation-prefix=-x"], "KRYPTON_ANNOTATION_PREFIX"),
            (vec!["--allowed-groups", "sys*"], "KRYPTON_ALLOWED_GROUPS"),
            (
                vec!["--allowed-groups", "dev,system:masters"],
                "KRYPTON_ALLOWED_GROUPS",
            ),
            (
                vec!["--max-concurrent-restarts", "0"],
                "KRYPTON_MAX_CONCURRENT_RESTARTS",
            ),
            (
                vec!["--max-concurrent-restarts", "many"],
                "KRYPTON_MAX_CONCURRENT_RESTARTS",
            ),
        ];
        for (extra, name) in cases {
            // Clap prefixes a parser's message with the flag; the message names the variable.
            let error = error(&extra);
            assert!(error.contains(&format!("{name}: ")), "{extra:?}: {error}");
        }
        let mut short = args(&[]);
        short.session_secret = Some("short".into());
        assert_eq!(
            short.clone().validate(None).unwrap_err(),
            ConfigError::SessionSecret
        );
        short.session_secret = None;
        assert_eq!(
            short.clone().validate(None).unwrap_err(),
            ConfigError::SessionSecret
        );
    }

    #[test]
    fn auth_disabled_on_loopback() {
        let mut a = args(&["--auth-disabled", "1", "--listen", "[::1]:0"]);
        a.session_secret = None;
        assert!(matches!(a.validate(None).unwrap().auth, AuthMode::Disabled));
    }

    #[test]
    fn secrets_are_not_printed() {
        let a = args(&[]);
        assert!(!format!("{a:?}").contains("0123456789abcdef"));
        let settings = a.clone().validate(None).unwrap();
        assert!(!format!("{settings:?}").contains("0123456789abcdef"));
    }

    #[test]
    fn the_controller_lease_defaults_to_the_charts_in_the_server_namespace() {
        let lease = |extra: &[&str]| {
            args(extra)
                .validate(Some("shop"))
                .unwrap()
                .controller_lease
                .map(|l| format!("{}/{}", l.namespace, l.name))
        };
        assert_eq!(lease(&[]).as_deref(), Some("shop/rollsafe-watch"));
        assert_eq!(
            lease(&["--controller-lease", "ops/watch"]).as_deref(),
            Some("ops/watch")
        );
        assert_eq!(
            lease(&["--controller-lease", "watch"]).as_deref(),
            Some("shop/watch")
        );
        assert_eq!(lease(&["--controller-lease", "none"]), None);
        assert!(
            error(&["--controller-lease", "Ops/x"]).contains("ROLLSAFE_CONTROLLER_LEASE"),
            "{}",
            error(&["--controller-lease", "Ops/x"])
        );
    }
}
