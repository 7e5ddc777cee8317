//! Server settings: every one a flag and an environment variable, validated at startup.
//!
//! The environment names are a contract (`KRYPTON_*`, `SESSION_*`, `AUTH_DISABLED`). Booleans
//! are true for `1`, `true`, `yes`, `on` and false for `0`, `false`, `no`, `off` or empty
//! (trimmed, case-insensitive); any other value stops startup with a message naming the
//! setting, rather than silently reading as false.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use rollsafe_core::name::{AnnotationPrefix, ConfigMapName, Namespace};
use thiserror::Error;

use crate::identity::{AllowedGroups, PatternError};

/// Where the ServiceAccount namespace file is mounted in a pod.
pub const SERVICE_ACCOUNT_NAMESPACE_FILE: &str =
    "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The fewest bytes a session secret may have.
pub const MIN_SESSION_SECRET_LEN: usize = 32;

/// The server's namespace when nothing else names it.
pub const DEFAULT_SERVER_NAMESPACE: &str = "krypton";
/// The default access-rules ConfigMap.
pub const DEFAULT_ACCESS_CONFIGMAP: &str = "krypton-access";
/// The default prefix of the ACL annotations and the history label.
pub const DEFAULT_ANNOTATION_PREFIX: &str = "krypton.io";

/// The default session lifetime (8 h).
pub const DEFAULT_SESSION_MAX_AGE: Duration = Duration::from_secs(28_800);

/// `rollsafe serve` settings as given: flags and environment variables.
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
    #[arg(long, env = "KRYPTON_RESTART_ENABLED", default_value = "")]
    pub restart_enabled: String,
    /// `namespace` (only the server's namespace) or `cluster` (namespaces the caller can list).
    #[arg(long, env = "KRYPTON_SCOPE", default_value = "namespace")]
    pub scope: String,
    /// Comma-separated allow-list intersected with the listable namespaces in cluster scope.
    #[arg(long, env = "KRYPTON_NAMESPACES", default_value = "")]
    pub namespaces: String,
    /// The server's namespace outside a pod (after the ServiceAccount file and POD_NAMESPACE).
    #[arg(long, env = "KRYPTON_NAMESPACE")]
    pub namespace: Option<String>,
    /// The pod's namespace, from the downward API.
    #[arg(long, env = "POD_NAMESPACE")]
    pub pod_namespace: Option<String>,
    /// Comma-separated admin emails (case-insensitive).
    #[arg(long, env = "KRYPTON_ADMIN_USERS", default_value = "")]
    pub admin_users: String,
    /// Comma-separated admin groups (exact).
    #[arg(long, env = "KRYPTON_ADMIN_GROUPS", default_value = "")]
    pub admin_groups: String,
    /// The ConfigMap in the server's namespace holding namespace access rules (key `access.json`).
    #[arg(
        long,
        env = "KRYPTON_ACCESS_CONFIGMAP",
        default_value = DEFAULT_ACCESS_CONFIGMAP
    )]
    pub access_configmap: String,
    /// Prefix of the ACL annotations and the history label.
    #[arg(long, env = "KRYPTON_ANNOTATION_PREFIX", default_value = DEFAULT_ANNOTATION_PREFIX)]
    pub annotation_prefix: String,
    /// Make every Kubernetes call of a request as the caller (`1|true|yes|on`).
    #[arg(long, env = "KRYPTON_IMPERSONATION", default_value = "")]
    pub impersonation: String,
    /// HMAC key of session JWTs (at least 32 bytes).
    #[arg(long, env = "SESSION_SECRET", hide_env_values = true)]
    pub session_secret: Option<String>,
    /// Session lifetime in seconds.
    #[arg(long, env = "SESSION_MAX_AGE", default_value = "28800")]
    pub session_max_age: String,
    /// Skip authentication: every request is a fixed admin dev user. Loopback listeners only.
    #[arg(long, env = "AUTH_DISABLED", default_value = "")]
    pub auth_disabled: String,
    /// Comma-separated group patterns (`name` or `prefix*`) a session's groups must all match;
    /// empty allows every group that is not a reserved `system:` group (those never pass).
    #[arg(long, env = "KRYPTON_ALLOWED_GROUPS", default_value = "")]
    pub allowed_groups: String,
    /// The most restart runs in progress at once; beyond it, 429 with Retry-After.
    #[arg(long, env = "KRYPTON_MAX_CONCURRENT_RESTARTS", default_value_t = crate::limits::MAX_CONCURRENT_RUNS.to_string())]
    pub max_concurrent_restarts: String,
}

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

/// Namespace scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only the server's own namespace.
    Namespace,
    /// Namespaces the caller can list, intersected with the allow-list when it is not empty.
    Cluster {
        /// `KRYPTON_NAMESPACES`; empty means every listable namespace.
        allow_list: Vec<Namespace>,
    },
}

impl Scope {
    /// The scope's name, as `/api/config` reports it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::Namespace => "namespace",
            Scope::Cluster { .. } => "cluster",
        }
    }
}

/// The HMAC key of session JWTs. `Debug` never prints it.
#[derive(Clone)]
pub struct SessionSecret(Vec<u8>);

impl SessionSecret {
    /// Wraps a key.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The key bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionSecret(<redacted>)")
    }
}

/// How callers authenticate.
#[derive(Debug, Clone)]
pub enum AuthMode {
    /// Session JWTs (cookie or bearer) signed with this secret.
    Session {
        /// The HMAC key.
        secret: SessionSecret,
        /// Tokens minted by `rollsafe token` default to this lifetime.
        max_age: Duration,
    },
    /// `AUTH_DISABLED`: every request is the fixed dev admin user.
    Disabled,
}

impl AuthMode {
    /// The mode's name, as `/api/config` reports it.
    pub fn as_str(&self) -> &'static str {
        match self {
            AuthMode::Session { .. } => "session",
            AuthMode::Disabled => "disabled",
        }
    }
}

/// Admin users and groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admins {
    /// Lower-cased emails.
    pub users: Vec<String>,
    /// Exact group names.
    pub groups: Vec<String>,
}

impl Admins {
    /// Both lists empty: every authenticated user is an admin (bootstrap).
    pub fn is_bootstrap(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }
}

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
    /// Authentication.
    pub auth: AuthMode,
    /// Group patterns every session group must match (empty: any group not reserved).
    pub allowed_groups: AllowedGroups,
    /// The most restart runs in progress at once.
    pub max_concurrent_restarts: usize,
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
    /// `SESSION_MAX_AGE` is not a positive number of seconds.
    #[error("SESSION_MAX_AGE: {0:?} is not a positive number of seconds")]
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

/// Splits a comma-separated setting, trimming entries and dropping empty ones.
pub fn parse_csv(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ServeArgs {
    /// Validates the settings. `service_account_namespace` is the content of the ServiceAccount
    /// namespace file, when it exists.
    pub fn validate(
        &self,
        service_account_namespace: Option<&str>,
    ) -> Result<Settings, ConfigError> {
        let auth_disabled = parse_bool("AUTH_DISABLED", &self.auth_disabled)?;
        let restart_enabled = parse_bool("KRYPTON_RESTART_ENABLED", &self.restart_enabled)?;
        let impersonation = parse_bool("KRYPTON_IMPERSONATION", &self.impersonation)?;
        let scope = match self.scope.trim().to_ascii_lowercase().as_str() {
            "" | "namespace" => Scope::Namespace,
            "cluster" => Scope::Cluster {
                allow_list: parse_csv(&self.namespaces)
                    .into_iter()
                    .map(|ns| {
                        Namespace::try_from(ns.clone()).map_err(|_| ConfigError::Name {
                            name: "KRYPTON_NAMESPACES",
                            value: ns,
                        })
                    })
                    .collect::<Result<_, _>>()?,
            },
            _ => return Err(ConfigError::Scope(self.scope.clone())),
        };
        let (name, server_namespace) = [
            ("ServiceAccount namespace file", service_account_namespace),
            ("POD_NAMESPACE", self.pod_namespace.as_deref()),
            ("KRYPTON_NAMESPACE", self.namespace.as_deref()),
        ]
        .into_iter()
        .find_map(|(name, value)| {
            value
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| (name, v.to_owned()))
        })
        .unwrap_or(("KRYPTON_NAMESPACE", DEFAULT_SERVER_NAMESPACE.to_owned()));
        let server_namespace =
            Namespace::try_from(server_namespace.clone()).map_err(|_| ConfigError::Name {
                // The ServiceAccount file is reported under the setting that overrides it.
                name: if name == "POD_NAMESPACE" {
                    "POD_NAMESPACE"
                } else {
                    "KRYPTON_NAMESPACE"
                },
                value: server_namespace,
            })?;
        let access_configmap =
            ConfigMapName::try_from(self.access_configmap.clone()).map_err(|_| {
                ConfigError::Name {
                    name: "KRYPTON_ACCESS_CONFIGMAP",
                    value: self.access_configmap.clone(),
                }
            })?;
        let annotation_prefix = AnnotationPrefix::try_from(self.annotation_prefix.clone())
            .map_err(|_| ConfigError::Prefix(self.annotation_prefix.clone()))?;
        let max_age = match self.session_max_age.trim().parse::<u64>() {
            Ok(seconds) if seconds > 0 => Duration::from_secs(seconds),
            _ => return Err(ConfigError::MaxAge(self.session_max_age.clone())),
        };
        let allowed_groups =
            AllowedGroups::parse(&self.allowed_groups).map_err(ConfigError::AllowedGroups)?;
        let max_concurrent_restarts = match self.max_concurrent_restarts.trim().parse::<usize>() {
            Ok(limit) if limit > 0 => limit,
            _ => {
                return Err(ConfigError::MaxConcurrentRestarts(
                    self.max_concurrent_restarts.clone(),
                ));
            }
        };
        let auth = if auth_disabled {
            for addr in [self.listen] {
                if !addr.ip().is_loopback() {
                    return Err(ConfigError::AuthDisabledOffLoopback(addr));
                }
            }
            AuthMode::Disabled
        } else {
            match &self.session_secret {
                Some(secret) if secret.len() >= MIN_SESSION_SECRET_LEN => AuthMode::Session {
                    secret: SessionSecret::new(secret.as_bytes()),
                    max_age,
                },
                _ => return Err(ConfigError::SessionSecret),
            }
        };
        Ok(Settings {
            listen: self.listen,
            admin_listen: self.admin_listen,
            kubeconfig: self.kubeconfig.clone(),
            context: self.context.clone(),
            audit_file: self.audit_file.clone(),
            restart_enabled,
            scope,
            server_namespace,
            admins: Admins {
                users: parse_csv(&self.admin_users)
                    .into_iter()
                    .map(|u| u.to_lowercase())
                    .collect(),
                groups: parse_csv(&self.admin_groups),
            },
            access_configmap,
            annotation_prefix,
            impersonation,
            auth,
            allowed_groups,
            max_concurrent_restarts,
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
    fn csv() {
        assert_eq!(parse_csv(" a, ,b ,,c"), ["a", "b", "c"]);
        assert!(parse_csv("").is_empty());
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
    fn server_namespace_precedence() {
        let a = args(&["--pod-namespace", "pod-ns", "--namespace", "env-ns"]);
        assert_eq!(
            a.validate(Some("sa-ns\n")).unwrap().server_namespace,
            "sa-ns"
        );
        assert_eq!(a.validate(Some("  ")).unwrap().server_namespace, "pod-ns");
        let a = args(&["--namespace", "env-ns"]);
        assert_eq!(a.validate(None).unwrap().server_namespace, "env-ns");
        let a = args(&["--namespace", "Bad_NS"]);
        assert!(matches!(
            a.validate(None),
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
            (vec!["--session-max-age", "8h"], "SESSION_MAX_AGE"),
            (vec!["--impersonation", "maybe"], "KRYPTON_IMPERSONATION"),
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
            let error = args(&extra).validate(None).unwrap_err();
            assert!(error.to_string().starts_with(name), "{extra:?}: {error}");
        }
        let mut short = args(&[]);
        short.session_secret = Some("short".into());
        assert_eq!(
            short.validate(None).unwrap_err(),
            ConfigError::SessionSecret
        );
        short.session_secret = None;
        assert_eq!(
            short.validate(None).unwrap_err(),
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
        let settings = a.validate(None).unwrap();
        assert!(!format!("{settings:?}").contains("0123456789abcdef"));
    }
}
