//! The annotations `rollsafe watch` reads and writes, and how the ones users write are parsed.
//!
//! | annotation | on | meaning |
//! |---|---|---|
//! | `rollsafe.dev/watch` | workload | `"true"`: every Secret and ConfigMap the pod template references; `"false"`: never (even with `--all`); `"secret/a,configmap/b"`: exactly the listed objects, every key |
//! | `rollsafe.dev/watch` | Secret, ConfigMap | `"false"`: changes to this object never roll anything |
//! | `openchoreo.dev/restart-on-change` | Secret, ConfigMap | `"false"`: the same as `rollsafe.dev/watch: "false"` |
//! | `rollsafe.dev/config-hash` | pod template (written) | the digest the pods were rolled for |
//! | `rollsafe.dev/config-record` | workload metadata (written) | the digest last rolled for or adopted |

use std::collections::BTreeSet;

use rollsafe_core::reference::{ConfigRef, TargetKind};
use thiserror::Error;

/// The opt-in/opt-out annotation, on workloads and on sources.
pub const WATCH: &str = "rollsafe.dev/watch";
/// OpenChoreo's per-object opt-out, honoured on live sources.
pub const RESTART_ON_CHANGE: &str = "openchoreo.dev/restart-on-change";
/// The pod-template annotation a roll sets.
pub const CONFIG_HASH: &str = "rollsafe.dev/config-hash";
/// The workload-metadata annotation recording the digest last rolled for (or adopted).
pub const CONFIG_RECORD: &str = "rollsafe.dev/config-record";
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "rollsafe-watch";

/// The most entries a `rollsafe.dev/watch` list may name.
pub const MAX_LIST_ENTRIES: usize = 64;

/// What a workload's `rollsafe.dev/watch` annotation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OptIn {
    /// Not watched.
    Off,
    /// Every Secret and ConfigMap the pod template references, with key precision.
    Template,
    /// Exactly these objects, every key.
    List(BTreeSet<ConfigRef>),
}

/// Why a `rollsafe.dev/watch` value on a workload is not understood. The workload is then not
/// watched (fail closed: rolling on a typo would be worse than not rolling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum OptInError {
    /// An entry is not `secret/<name>` or `configmap/<name>`.
    #[error("a rollsafe.dev/watch entry is not secret/<name> or configmap/<name>")]
    Entry,
    /// More than [`MAX_LIST_ENTRIES`] entries.
    #[error("a rollsafe.dev/watch list names too many objects")]
    TooMany,
}

impl OptInError {
    /// A stable code for logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            OptInError::Entry => "watch_entry",
            OptInError::TooMany => "watch_too_many",
        }
    }
}

/// Parses a workload's `rollsafe.dev/watch` value (`None`: absent). With `all` (`--all`), a
/// workload without the annotation is watched as `"true"`. Values are trimmed; `true`/`false`
/// are case-insensitive; list kinds are case-insensitive (`secret`, `configmap`), names exact.
pub fn workload_opt_in(value: Option<&str>, all: bool) -> Result<OptIn, OptInError> {
    let Some(value) = value.map(str::trim) else {
        return Ok(if all { OptIn::Template } else { OptIn::Off });
    };
    if value.eq_ignore_ascii_case("true") {
        return Ok(OptIn::Template);
    }
    if value.eq_ignore_ascii_case("false") || value.is_empty() {
        return Ok(OptIn::Off);
    }
    let mut refs = BTreeSet::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (kind, name) = entry.split_once('/').ok_or(OptInError::Entry)?;
        let kind = if kind.eq_ignore_ascii_case("secret") {
            TargetKind::Secret
        } else if kind.eq_ignore_ascii_case("configmap") {
            TargetKind::ConfigMap
        } else {
            return Err(OptInError::Entry);
        };
        if !is_object_name(name) {
            return Err(OptInError::Entry);
        }
        refs.insert(ConfigRef {
            kind,
            name: name.to_owned(),
        });
        if refs.len() > MAX_LIST_ENTRIES {
            return Err(OptInError::TooMany);
        }
    }
    if refs.is_empty() {
        return Err(OptInError::Entry);
    }
    Ok(OptIn::List(refs))
}

/// Whether a source (Secret or ConfigMap) opted out: `rollsafe.dev/watch` or
/// `openchoreo.dev/restart-on-change` is `"false"` (trimmed, case-insensitive).
pub fn source_opted_out(watch: Option<&str>, restart_on_change: Option<&str>) -> bool {
    [watch, restart_on_change]
        .into_iter()
        .flatten()
        .any(|value| value.trim().eq_ignore_ascii_case("false"))
}

/// A DNS-1123 subdomain: what Secret and ConfigMap names are.
fn is_object_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(entries: &[(TargetKind, &str)]) -> OptIn {
        OptIn::List(
            entries
                .iter()
                .map(|(kind, name)| ConfigRef {
                    kind: *kind,
                    name: (*name).to_owned(),
                })
                .collect(),
        )
    }

    #[test]
    fn workload_opt_in_table() {
        use TargetKind::{ConfigMap, Secret};
        let cases: Vec<(Option<&str>, bool, Result<OptIn, OptInError>)> = vec![
            (None, false, Ok(OptIn::Off)),
            (None, true, Ok(OptIn::Template)),
            (Some("true"), false, Ok(OptIn::Template)),
            (Some(" TRUE "), false, Ok(OptIn::Template)),
            (Some("false"), true, Ok(OptIn::Off)),
            (Some("False"), false, Ok(OptIn::Off)),
            (Some(""), true, Ok(OptIn::Off)),
            (
                Some("secret/db-creds,configmap/settings"),
                false,
                Ok(list(&[(Secret, "db-creds"), (ConfigMap, "settings")])),
            ),
            (
                Some(" Secret/a , ConfigMap/b.c ,"),
                true,
                Ok(list(&[(Secret, "a"), (ConfigMap, "b.c")])),
            ),
            (Some("secret/a,secret/a"), false, Ok(list(&[(Secret, "a")]))),
            (Some("yes"), false, Err(OptInError::Entry)),
            (Some("pod/a"), false, Err(OptInError::Entry)),
            (Some("secret/"), false, Err(OptInError::Entry)),
            (Some("secret/A"), false, Err(OptInError::Entry)),
            (Some("secret/a/b"), false, Err(OptInError::Entry)),
            (Some(","), false, Err(OptInError::Entry)),
        ];
        for (value, all, expected) in cases {
            assert_eq!(workload_opt_in(value, all), expected, "{value:?} all={all}");
        }
        let many = (0..=MAX_LIST_ENTRIES)
            .map(|i| format!("secret/s{i}"))
            .collect::<Vec<_>>()
            .join(",");
        assert_eq!(
            workload_opt_in(Some(&many), false),
            Err(OptInError::TooMany)
        );
    }

    #[test]
    fn source_opt_out_table() {
        let cases = [
            (None, None, false),
            (Some("false"), None, true),
            (Some(" FALSE "), None, true),
            (Some("true"), None, false),
            (None, Some("false"), true),
            (None, Some("true"), false),
            (Some("true"), Some("false"), true),
            (Some("no"), None, false),
        ];
        for (watch, restart, expected) in cases {
            assert_eq!(
                source_opted_out(watch, restart),
                expected,
                "{watch:?} {restart:?}"
            );
        }
    }
}
