//! Whether `rollsafe watch` watches a workload: the opt-in and opt-out annotations users write,
//! how they are parsed, and the flap stop's halt mark — shared by the controller (which acts on
//! them) and the consumers preview (which shows them).
//!
//! | annotation | on | meaning |
//! |---|---|---|
//! | `rollsafe.dev/watch` | workload | `"true"`: every Secret and ConfigMap the pod template references; `"false"`: never (even with `--all`); `"secret/a,configmap/b"`: exactly the listed objects, every key |
//! | `rollsafe.dev/watch` | Secret, ConfigMap | `"false"`: changes to this object never roll anything |
//! | `openchoreo.dev/restart-on-change` | Secret, ConfigMap | `"false"`: the same as `rollsafe.dev/watch: "false"` |
//! | `rollsafe.dev/halted` | workload (written) | the flap stop halted it; removing the annotation resumes |

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

use crate::annotations::{HALTED, WATCH};
use crate::reference::{ConfigRef, TargetKind};

pub mod reloader;
use crate::validation::is_dns1123_subdomain;

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
    /// The pod template's references of the chosen kinds, with key precision, and these
    /// objects, every key (Reloader's per-kind annotations, [`reloader`]).
    Select {
        /// The referenced Secrets.
        secrets: bool,
        /// The referenced ConfigMaps.
        config_maps: bool,
        /// Named objects, referenced or not.
        listed: BTreeSet<ConfigRef>,
        /// The pod template's other references too, each only while the object carries
        /// Reloader's `reloader.stakater.com/match: "true"` (Reloader's `search`).
        matched: bool,
        /// Every existing object of the workload's namespace whose whole name matches one of
        /// these (Reloader's regular-expression `reload` entries), every key.
        patterns: Vec<reloader::NamePattern>,
    },
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
    /// A Reloader `reload` entry that is neither an object name nor a regular expression
    /// rollsafe accepts (too long, too large once compiled, or not a valid expression).
    #[error("a Reloader reload entry is not a name or a regular expression")]
    Pattern,
}

impl OptInError {
    /// A stable code for logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            OptInError::Entry => "watch_entry",
            OptInError::TooMany => "watch_too_many",
            OptInError::Pattern => "reload_pattern",
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
        if !is_dns1123_subdomain(name) {
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

/// Whether `rollsafe watch` rolls a workload when one object it references changes, as its own
/// `rollsafe.dev/watch` annotation says. What the controller does with [`WatchState::Unset`]
/// depends on how it runs (`--all`), which only the controller knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchState {
    /// `"true"`, or a list naming the object.
    OptedIn,
    /// A list that does not name the object: other changes roll it, this one does not.
    NotListed,
    /// `"false"` (or empty): never, even under `--all`.
    OptedOut,
    /// No annotation: watched only when the controller runs with `--all`.
    #[default]
    Unset,
    /// A value the controller does not understand: not watched (it fails closed).
    Invalid,
    /// No `rollsafe.dev/watch`, but Stakater Reloader's annotations: watched as they say when
    /// the controller runs with `--reloader-compat`, else only under `--all`.
    Reloader,
}

impl WatchState {
    /// Reads a workload object's annotation for changes to `target`.
    pub fn of(object: &Value, target: &ConfigRef) -> Self {
        let value = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(WATCH))
            .and_then(Value::as_str);
        if value.is_none() {
            let reloader = object
                .pointer("/metadata/annotations")
                .and_then(Value::as_object)
                .is_some_and(|map| map.keys().any(|key| reloader::is_reloader_annotation(key)));
            return if reloader {
                WatchState::Reloader
            } else {
                WatchState::Unset
            };
        }
        match workload_opt_in(value, false) {
            Ok(OptIn::Template) => WatchState::OptedIn,
            Ok(OptIn::List(listed)) if listed.contains(target) => WatchState::OptedIn,
            Ok(OptIn::List(_)) => WatchState::NotListed,
            Ok(OptIn::Select {
                secrets,
                config_maps,
                listed,
                ..
            }) => {
                let by_kind = match target.kind {
                    TargetKind::Secret => secrets,
                    TargetKind::ConfigMap => config_maps,
                };
                if by_kind || listed.contains(target) {
                    WatchState::OptedIn
                } else {
                    WatchState::NotListed
                }
            }
            Ok(OptIn::Off) => WatchState::OptedOut,
            Err(_) => WatchState::Invalid,
        }
    }

    /// A static label for the JSON and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            WatchState::OptedIn => "opted_in",
            WatchState::NotListed => "not_listed",
            WatchState::OptedOut => "opted_out",
            WatchState::Unset => "unset",
            WatchState::Invalid => "invalid",
            WatchState::Reloader => "reloader",
        }
    }

    /// Fixed words for people.
    pub fn describe(self) -> &'static str {
        match self {
            WatchState::OptedIn => "watched",
            WatchState::NotListed => {
                "not for this object (its rollsafe.dev/watch list does not name it)"
            }
            WatchState::OptedOut => "opted out (rollsafe.dev/watch: \"false\")",
            WatchState::Unset => "not opted in (watched only under --all)",
            WatchState::Invalid => "not watched: its rollsafe.dev/watch value is not understood",
            WatchState::Reloader => {
                "Reloader annotations: watched as they say under --reloader-compat"
            }
        }
    }
}

/// The most characters of a halt reason shown.
pub const MAX_HALT_REASON: usize = 256;

/// Why the flap stop halted a workload (the `rollsafe.dev/halted` value, control characters
/// dropped and capped at [`MAX_HALT_REASON`] characters), or `None` when it is not halted. An
/// empty value still halts: it reads as `"halted"`.
pub fn halted(object: &Value) -> Option<String> {
    let value = object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(HALTED))?;
    let text = crate::shown::shown_within(value.as_str().unwrap_or_default(), MAX_HALT_REASON);
    let text = text.trim();
    Some(if text.is_empty() {
        "halted".to_owned()
    } else {
        text.to_owned()
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
    #[test]
    fn watch_state_table() {
        let target = ConfigRef {
            kind: TargetKind::Secret,
            name: "db".to_owned(),
        };
        let cases = [
            (None, WatchState::Unset),
            (Some("true"), WatchState::OptedIn),
            (Some("secret/db,configmap/x"), WatchState::OptedIn),
            (Some("configmap/db"), WatchState::NotListed),
            (Some("false"), WatchState::OptedOut),
            (Some(""), WatchState::OptedOut),
            (Some("yes"), WatchState::Invalid),
        ];
        for (value, expected) in cases {
            let object = match value {
                Some(v) => serde_json::json!({"metadata": {"annotations": {WATCH: v}}}),
                None => serde_json::json!({"metadata": {}}),
            };
            assert_eq!(WatchState::of(&object, &target), expected, "{value:?}");
        }
        // Reloader's annotations without rollsafe's: said so; rollsafe's own still decides.
        let reloader = serde_json::json!({"metadata": {"annotations":
            {"reloader.stakater.com/auto": "true"}}});
        assert_eq!(WatchState::of(&reloader, &target), WatchState::Reloader);
        let both = serde_json::json!({"metadata": {"annotations":
            {"reloader.stakater.com/auto": "true", WATCH: "false"}}});
        assert_eq!(WatchState::of(&both, &target), WatchState::OptedOut);
        assert_eq!(WatchState::Reloader.as_str(), "reloader");
    }

    #[test]
    fn halted_reads_the_reason_without_control_characters() {
        let of = |v: serde_json::Value| {
            halted(&serde_json::json!({"metadata": {"annotations": {HALTED: v}}}))
        };
        assert_eq!(halted(&serde_json::json!({"metadata": {}})), None);
        assert_eq!(
            of("flapping\n: 5 rolls".into()).as_deref(),
            Some("flapping: 5 rolls")
        );
        assert_eq!(of("".into()).as_deref(), Some("halted"));
        assert_eq!(of(serde_json::json!(1)).as_deref(), Some("halted"));
        assert_eq!(
            of("x".repeat(1000).into()).map(|r| r.len()),
            Some(MAX_HALT_REASON)
        );
    }
}
