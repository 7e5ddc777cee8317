//! Kubernetes names that can only hold valid values.
//!
//! A [`Namespace`], a [`SecretName`], a [`ConfigMapName`], a [`WorkloadObjectName`], an
//! [`AnnotationKey`] and an [`AnnotationPrefix`] are validated once, where they enter the program (an HTTP path, a
//! command-line argument, a setting, a deserialized document), and are trusted everywhere after:
//! the engine and the reads take them and never validate again.
//!
//! Each type offers [`FromStr`], `TryFrom<String>`, `TryFrom<&str>`, `AsRef<str>`, `Display`,
//! `Serialize` (as the plain string) and a `Deserialize` that validates. A refused value gives a
//! [`NameError`] whose message names the rule, never the input.
//!
//! | type | rule |
//! |---|---|
//! | [`Namespace`] | DNS-1123 label |
//! | [`SecretName`], [`ConfigMapName`], [`WorkloadObjectName`] | DNS-1123 subdomain |
//! | [`AnnotationKey`] | qualified name (optional subdomain prefix and `/`, then a name) |
//! | [`AnnotationPrefix`] | DNS-1123 subdomain |

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use crate::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};

/// A value refused by one of the name types. The message names the rule, never the value.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// Not a DNS-1123 label.
    #[error("not a valid namespace name (a DNS-1123 label)")]
    Namespace,
    /// Not a DNS-1123 subdomain.
    #[error("not a valid Secret name (a DNS-1123 subdomain)")]
    SecretName,
    /// Not a DNS-1123 subdomain.
    #[error("not a valid ConfigMap name (a DNS-1123 subdomain)")]
    ConfigMapName,
    /// Not a DNS-1123 subdomain.
    #[error("not a valid workload name (a DNS-1123 subdomain)")]
    WorkloadObjectName,
    /// Not a qualified name.
    #[error("not a valid annotation key (a qualified name such as example.com/name)")]
    AnnotationKey,
    /// Not a DNS-1123 subdomain.
    #[error("not a valid annotation prefix (a DNS subdomain)")]
    AnnotationPrefix,
}

impl NameError {
    /// A static category, for logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            NameError::Namespace => "invalid_namespace",
            NameError::SecretName => "invalid_secret_name",
            NameError::ConfigMapName => "invalid_configmap_name",
            NameError::WorkloadObjectName => "invalid_workload_name",
            NameError::AnnotationKey => "invalid_annotation_key",
            NameError::AnnotationPrefix => "invalid_annotation_prefix",
        }
    }
}

macro_rules! name_type {
    ($(#[$doc:meta])* $name:ident, $valid:path, $error:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// The name as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The name as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl FromStr for $name {
            type Err = NameError;

            fn from_str(value: &str) -> Result<Self, NameError> {
                if $valid(value) {
                    Ok(Self(value.to_owned()))
                } else {
                    Err(NameError::$error)
                }
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;

            fn try_from(value: String) -> Result<Self, NameError> {
                if $valid(&value) {
                    Ok(Self(value))
                } else {
                    Err(NameError::$error)
                }
            }
        }

        impl TryFrom<&str> for $name {
            type Error = NameError;

            fn try_from(value: &str) -> Result<Self, NameError> {
                value.parse()
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let value = String::deserialize(deserializer)?;
                Self::try_from(value).map_err(serde::de::Error::custom)
            }
        }
    };
}

name_type!(
    /// A namespace name: a DNS-1123 label.
    Namespace,
    is_dns1123_label,
    Namespace
);
name_type!(
    /// A Secret name: a DNS-1123 subdomain.
    SecretName,
    is_dns1123_subdomain,
    SecretName
);
name_type!(
    /// A ConfigMap name: a DNS-1123 subdomain.
    ConfigMapName,
    is_dns1123_subdomain,
    ConfigMapName
);
name_type!(
    /// The name of a Deployment, StatefulSet or DaemonSet: a DNS-1123 subdomain. (The
    /// `{kind, name}` pair of a result is [`crate::contract::WorkloadName`].)
    WorkloadObjectName,
    is_dns1123_subdomain,
    WorkloadObjectName
);
name_type!(
    /// An annotation (or label) key: a qualified name.
    AnnotationKey,
    is_qualified_name,
    AnnotationKey
);
name_type!(
    /// The DNS-subdomain prefix of an annotation family (`krypton.io` in
    /// `krypton.io/allowed-groups`).
    AnnotationPrefix,
    is_dns1123_subdomain,
    AnnotationPrefix
);

impl AnnotationKey {
    /// The contract's restart annotation, [`crate::annotations::RESTART_ANNOTATION`].
    pub fn restarted_at() -> Self {
        Self(crate::annotations::RESTART_ANNOTATION.to_owned())
    }
}

impl AnnotationPrefix {
    /// The key `<prefix>/<name>`. `name` is a fixed, valid name part (`kind`,
    /// `allowed-groups`, …); an invalid one gives `None`.
    pub fn key(&self, name: &str) -> Option<AnnotationKey> {
        format!("{}/{name}", self.0).parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row per value: whether each type accepts it.
    #[test]
    fn each_type_accepts_exactly_its_rule() {
        let long_label = "a".repeat(63);
        let too_long_label = "a".repeat(64);
        let long_subdomain = "a".repeat(253);
        let too_long_subdomain = "a".repeat(254);
        // value, Namespace, SecretName/ConfigMapName/AnnotationPrefix, AnnotationKey
        let table: &[(&str, bool, bool, bool)] = &[
            ("team-a", true, true, true),
            ("a", true, true, true),
            (&long_label, true, true, true),
            (&too_long_label, false, true, false),
            ("db.creds", false, true, true),
            (&long_subdomain, false, true, false),
            (&too_long_subdomain, false, false, false),
            ("krypton.io/restarted-at", false, false, true),
            ("example.com/X_y.z", false, false, true),
            ("", false, false, false),
            ("Team", false, false, true),
            ("-a", false, false, false),
            ("a-", false, false, false),
            ("a/b/c", false, false, false),
            ("../x", false, false, false),
            ("a%2Fb", false, false, false),
            ("a b", false, false, false),
            ("ä", false, false, false),
            ("/a", false, false, false),
        ];
        for &(value, namespace, subdomain, key) in table {
            assert_eq!(value.parse::<Namespace>().is_ok(), namespace, "{value:?}");
            assert_eq!(value.parse::<SecretName>().is_ok(), subdomain, "{value:?}");
            assert_eq!(
                value.parse::<ConfigMapName>().is_ok(),
                subdomain,
                "{value:?}"
            );
            assert_eq!(
                value.parse::<AnnotationPrefix>().is_ok(),
                subdomain,
                "{value:?}"
            );
            assert_eq!(
                value.parse::<WorkloadObjectName>().is_ok(),
                subdomain,
                "{value:?}"
            );
            assert_eq!(value.parse::<AnnotationKey>().is_ok(), key, "{value:?}");
        }
    }

    #[test]
    fn every_constructor_validates() {
        assert_eq!(
            Namespace::try_from("Team".to_owned()),
            Err(NameError::Namespace)
        );
        assert_eq!(SecretName::try_from("a/b"), Err(NameError::SecretName));
        assert_eq!(
            serde_json::from_str::<Namespace>(r#""a_b""#)
                .unwrap_err()
                .to_string(),
            "not a valid namespace name (a DNS-1123 label)"
        );
        assert_eq!(
            serde_json::from_str::<AnnotationKey>(r#""krypton.io/restarted-at""#).unwrap(),
            AnnotationKey::restarted_at()
        );
    }

    #[test]
    fn serialized_and_displayed_as_the_plain_string() {
        let namespace: Namespace = "shop".parse().unwrap();
        assert_eq!(serde_json::to_string(&namespace).unwrap(), r#""shop""#);
        assert_eq!(namespace.to_string(), "shop");
        assert_eq!(namespace, "shop");
        assert_eq!(namespace.as_ref(), "shop");
    }

    #[test]
    fn errors_never_echo_the_input() {
        for error in [
            "SECRET-VALUE".parse::<Namespace>().unwrap_err(),
            "SECRET-VALUE".parse::<SecretName>().unwrap_err(),
            "SECRET-VALUE".parse::<WorkloadObjectName>().unwrap_err(),
            "SECRET VALUE".parse::<AnnotationKey>().unwrap_err(),
        ] {
            assert!(!error.to_string().contains("SECRET"), "{error}");
            assert!(error.code().starts_with("invalid_"));
        }
    }

    #[test]
    fn the_restart_annotation_and_prefixed_keys_are_valid() {
        assert!(
            crate::annotations::RESTART_ANNOTATION
                .parse::<AnnotationKey>()
                .is_ok()
        );
        let prefix: AnnotationPrefix = "krypton.io".parse().unwrap();
        assert_eq!(prefix.key("kind").unwrap().as_str(), "krypton.io/kind");
        assert_eq!(prefix.key("a/b"), None);
    }
}
