//! Stakater Reloader's annotations, read with Reloader's meaning when `rollsafe watch` runs with
//! `--reloader-compat`: a workload Reloader would reload becomes one rollsafe watches, decided by
//! rollsafe's engine (its record, key precision, the brakes).
//!
//! | Reloader annotation | on | rollsafe meaning |
//! |---|---|---|
//! | `reloader.stakater.com/auto: "true"` | workload | every referenced Secret and ConfigMap ([`OptIn::Template`]) |
//! | `secret.reloader.stakater.com/auto: "true"` | workload | the referenced Secrets only |
//! | `configmap.reloader.stakater.com/auto: "true"` | workload | the referenced ConfigMaps only |
//! | `secret.reloader.stakater.com/reload: "a,b"` | workload | these Secrets, whole, referenced or not; an entry that is not an object name is a regular expression matched against whole names ([`NamePattern`]) |
//! | `configmap.reloader.stakater.com/reload: "x"` | workload | these ConfigMaps, whole |
//! | `reloader.stakater.com/search: "true"` | workload | the referenced objects that carry `reloader.stakater.com/match: "true"` |
//! | `reloader.stakater.com/auto: "false"` | workload | not watched, whatever else it says |
//! | `reloader.stakater.com/ignore: "true"` | Secret, ConfigMap | changes never roll anything |
//! | `reloader.stakater.com/match: "true"` | Secret, ConfigMap | eligible for `search` |
//!
//! As in Reloader, the annotations add up: an object is watched when it is named, of an `auto`
//! kind, or (with `search`) matched; `auto: "true"` watches every reference, `search` or not.
//! Any other annotation under Reloader's domains (`reloader.stakater.com/rollout-strategy`,
//! `deployment.reloader.stakater.com/pause-period`, …) is not implemented: [`ReloaderOptIn::unsupported`]
//! names the first, so the controller reports it — never a silent default.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::{MAX_LIST_ENTRIES, OptIn, OptInError};
use crate::reference::{ConfigRef, TargetKind};
use crate::validation::is_dns1123_subdomain;

/// Every referenced Secret and ConfigMap.
pub const AUTO: &str = "reloader.stakater.com/auto";
/// The referenced Secrets.
pub const SECRET_AUTO: &str = "secret.reloader.stakater.com/auto";
/// The referenced ConfigMaps.
pub const CONFIGMAP_AUTO: &str = "configmap.reloader.stakater.com/auto";
/// Named Secrets.
pub const SECRET_RELOAD: &str = "secret.reloader.stakater.com/reload";
/// Named ConfigMaps.
pub const CONFIGMAP_RELOAD: &str = "configmap.reloader.stakater.com/reload";
/// On a Secret or ConfigMap: never reload for it.
pub const IGNORE: &str = "reloader.stakater.com/ignore";
/// On a workload: the referenced objects that carry [`MATCH`].
pub const SEARCH: &str = "reloader.stakater.com/search";
/// On a Secret or ConfigMap: eligible for a workload's [`SEARCH`].
pub const MATCH: &str = "reloader.stakater.com/match";

/// The workload annotations of Reloader's that `rollsafe watch --reloader-compat` implements.
pub const IMPLEMENTED: [&str; 6] = [
    AUTO,
    SECRET_AUTO,
    CONFIGMAP_AUTO,
    SECRET_RELOAD,
    CONFIGMAP_RELOAD,
    SEARCH,
];

/// The domain of Reloader's annotations; its subdomains (`secret.`, `configmap.`,
/// `secrets.exclude.`, `deployment.`, …) are Reloader's too.
const DOMAIN: &str = "reloader.stakater.com";

/// The longest `reload` entry read as a regular expression.
pub const MAX_PATTERN_LEN: usize = 256;
/// The most memory one compiled entry may take (the `regex` crate's size limit).
const PATTERN_SIZE_LIMIT: usize = 64 * 1024;

/// A `reload` entry that is not an object name: as in Reloader, a regular expression that an
/// object's whole name must match (`^(?:entry)$`). Reloader also reads an entry that is a valid
/// name as an expression (`db.prod` matching `db-prod`); rollsafe takes such an entry as that
/// exact name.
#[derive(Debug, Clone)]
pub struct NamePattern {
    /// The kind of the objects it matches.
    pub kind: TargetKind,
    entry: Box<str>,
    regex: regex::Regex,
}

impl NamePattern {
    /// Compiles `entry`, bounded in length and compiled size.
    pub fn new(kind: TargetKind, entry: &str) -> Result<Self, OptInError> {
        if entry.len() > MAX_PATTERN_LEN {
            return Err(OptInError::Pattern);
        }
        let regex = regex::RegexBuilder::new(&format!("^(?:{entry})$"))
            .size_limit(PATTERN_SIZE_LIMIT)
            .dfa_size_limit(PATTERN_SIZE_LIMIT)
            .build()
            .map_err(|_| OptInError::Pattern)?;
        Ok(Self {
            kind,
            entry: entry.into(),
            regex,
        })
    }

    /// Whether an object of `kind` named `name` matches.
    pub fn matches(&self, kind: TargetKind, name: &str) -> bool {
        kind == self.kind && self.regex.is_match(name)
    }

    /// The entry as written.
    pub fn as_str(&self) -> &str {
        &self.entry
    }
}

impl PartialEq for NamePattern {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind && self.entry == other.entry
    }
}

impl Eq for NamePattern {}

/// What a workload's Reloader annotations ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReloaderOptIn {
    /// The opt-in, in rollsafe's terms.
    pub opt_in: OptIn,
    /// The first Reloader annotation on it that rollsafe does not implement, if any.
    pub unsupported: Option<String>,
}

/// Whether `key` is one of Reloader's annotations.
pub fn is_reloader_annotation(key: &str) -> bool {
    key.split_once('/').is_some_and(|(prefix, _)| {
        prefix == DOMAIN
            || prefix
                .strip_suffix(DOMAIN)
                .is_some_and(|sub| sub.ends_with('.'))
    })
}

/// Reads a workload's Reloader annotations; `None` when it has none.
pub fn reloader_opt_in(
    annotations: &Map<String, Value>,
) -> Option<Result<ReloaderOptIn, OptInError>> {
    if !annotations.keys().any(|key| is_reloader_annotation(key)) {
        return None;
    }
    let text = |key: &str| annotations.get(key).and_then(Value::as_str).map(str::trim);
    let flag = |key: &str| text(key).map(|v| v.eq_ignore_ascii_case("true"));
    let unsupported = annotations
        .keys()
        .filter(|key| is_reloader_annotation(key))
        .find(|key| !IMPLEMENTED.contains(&key.as_str()))
        .cloned();
    let done = |opt_in| {
        Some(Ok(ReloaderOptIn {
            opt_in,
            unsupported: unsupported.clone(),
        }))
    };
    if flag(AUTO) == Some(false) {
        return done(OptIn::Off);
    }
    let all = flag(AUTO) == Some(true);
    let secrets = all || flag(SECRET_AUTO) == Some(true);
    let config_maps = all || flag(CONFIGMAP_AUTO) == Some(true);
    let mut listed = BTreeSet::new();
    let mut patterns = Vec::new();
    for (key, kind) in [
        (SECRET_RELOAD, TargetKind::Secret),
        (CONFIGMAP_RELOAD, TargetKind::ConfigMap),
    ] {
        let Some(value) = text(key) else {
            continue;
        };
        for entry in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            if is_dns1123_subdomain(entry) {
                listed.insert(ConfigRef {
                    kind,
                    name: entry.to_owned(),
                });
            } else {
                match NamePattern::new(kind, entry) {
                    Ok(pattern) => patterns.push(pattern),
                    Err(error) => return Some(Err(error)),
                }
            }
            if listed.len() + patterns.len() > MAX_LIST_ENTRIES {
                return Some(Err(OptInError::TooMany));
            }
        }
    }
    let matched = flag(SEARCH) == Some(true) && !(secrets && config_maps);
    let opt_in = match (
        secrets,
        config_maps,
        listed.is_empty(),
        matched,
        patterns.is_empty(),
    ) {
        (true, true, true, _, true) => OptIn::Template,
        (false, false, true, false, true) => OptIn::Off,
        (false, false, false, false, true) => OptIn::List(listed),
        _ => OptIn::Select {
            secrets,
            config_maps,
            listed,
            matched,
            patterns,
        },
    };
    done(opt_in)
}

/// Whether a Secret or ConfigMap carries Reloader's `match: "true"`.
pub fn reloader_matched(annotations: Option<&Map<String, Value>>) -> bool {
    is_true(annotations, MATCH)
}

/// Whether a Secret or ConfigMap opted out with Reloader's `ignore`.
pub fn reloader_ignored(annotations: Option<&Map<String, Value>>) -> bool {
    is_true(annotations, IGNORE)
}

/// Whether annotation `key` is `"true"` (any case, surrounding space ignored).
fn is_true(annotations: Option<&Map<String, Value>>, key: &str) -> bool {
    is_true_value(annotations.and_then(|a| a.get(key)).and_then(Value::as_str))
}

/// Whether an annotation's value is `"true"` as Reloader's flags read it (any case, surrounding
/// space ignored); for callers holding the annotations another way than a JSON map.
pub fn is_true_value(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refs(entries: &[(TargetKind, &str)]) -> BTreeSet<ConfigRef> {
        entries
            .iter()
            .map(|(kind, name)| ConfigRef {
                kind: *kind,
                name: (*name).to_owned(),
            })
            .collect()
    }

    #[test]
    fn reloaders_domains_are_told_apart() {
        for (key, reloaders) in [
            ("reloader.stakater.com/auto", true),
            ("secret.reloader.stakater.com/reload", true),
            ("secrets.exclude.reloader.stakater.com/reload", true),
            ("deployment.reloader.stakater.com/pause-period", true),
            ("notreloader.stakater.com/x", false),
            ("reloader.stakater.com.evil/x", false),
            ("rollsafe.dev/watch", false),
            ("reloader.stakater.com", false),
        ] {
            assert_eq!(is_reloader_annotation(key), reloaders, "{key}");
        }
    }

    #[test]
    fn reloader_annotations_table() {
        use TargetKind::{ConfigMap, Secret};
        let ok = |opt_in| {
            Some(Ok(ReloaderOptIn {
                opt_in,
                unsupported: None,
            }))
        };
        let cases = [
            (json!({"team": "a"}), None),
            (json!({AUTO: "true"}), ok(OptIn::Template)),
            (json!({AUTO: "false", SECRET_RELOAD: "db"}), ok(OptIn::Off)),
            (
                json!({SECRET_AUTO: "true"}),
                ok(OptIn::Select {
                    secrets: true,
                    config_maps: false,
                    listed: BTreeSet::new(),
                    matched: false,
                    patterns: Vec::new(),
                }),
            ),
            (
                json!({CONFIGMAP_AUTO: "true", SECRET_RELOAD: "db, tls"}),
                ok(OptIn::Select {
                    secrets: false,
                    config_maps: true,
                    listed: refs(&[(Secret, "db"), (Secret, "tls")]),
                    matched: false,
                    patterns: Vec::new(),
                }),
            ),
            (
                json!({SECRET_RELOAD: "db", CONFIGMAP_RELOAD: "settings"}),
                ok(OptIn::List(refs(&[
                    (Secret, "db"),
                    (ConfigMap, "settings"),
                ]))),
            ),
            (
                json!({SECRET_RELOAD: "db-.*, api"}),
                ok(OptIn::Select {
                    secrets: false,
                    config_maps: false,
                    listed: refs(&[(Secret, "api")]),
                    matched: false,
                    patterns: vec![NamePattern::new(Secret, "db-.*").unwrap()],
                }),
            ),
            (
                json!({CONFIGMAP_RELOAD: "(unclosed"}),
                Some(Err(OptInError::Pattern)),
            ),
            (
                json!({CONFIGMAP_RELOAD: "a".repeat(MAX_PATTERN_LEN) + "*"}),
                Some(Err(OptInError::Pattern)),
            ),
            (json!({SECRET_AUTO: "false"}), ok(OptIn::Off)),
            (
                json!({SEARCH: "true"}),
                ok(OptIn::Select {
                    secrets: false,
                    config_maps: false,
                    listed: BTreeSet::new(),
                    matched: true,
                    patterns: Vec::new(),
                }),
            ),
            (
                json!({SEARCH: "true", SECRET_AUTO: "true", CONFIGMAP_RELOAD: "x"}),
                ok(OptIn::Select {
                    secrets: true,
                    config_maps: false,
                    listed: refs(&[(ConfigMap, "x")]),
                    matched: true,
                    patterns: Vec::new(),
                }),
            ),
            (json!({SEARCH: "true", AUTO: "true"}), ok(OptIn::Template)),
            (json!({SEARCH: "false"}), ok(OptIn::Off)),
            (json!({SEARCH: "true", AUTO: "false"}), ok(OptIn::Off)),
        ];
        for (annotations, expected) in cases {
            let map = annotations.as_object().unwrap().clone();
            assert_eq!(reloader_opt_in(&map), expected, "{annotations}");
        }
        let map = json!({AUTO: "true", "reloader.stakater.com/rollout-strategy": "restart"});
        let read = reloader_opt_in(map.as_object().unwrap()).unwrap().unwrap();
        assert_eq!(read.opt_in, OptIn::Template);
        assert_eq!(
            read.unsupported.as_deref(),
            Some("reloader.stakater.com/rollout-strategy")
        );
    }

    #[test]
    fn a_pattern_matches_whole_names_of_its_kind_only() {
        let pattern = NamePattern::new(TargetKind::Secret, "db-.*").unwrap();
        for (kind, name, expected) in [
            (TargetKind::Secret, "db-main", true),
            (TargetKind::Secret, "db-", true),
            (TargetKind::Secret, "old-db-main", false),
            (TargetKind::Secret, "db", false),
            (TargetKind::ConfigMap, "db-main", false),
        ] {
            assert_eq!(pattern.matches(kind, name), expected, "{kind:?} {name}");
        }
        // An alternation stays inside the anchors.
        let either = NamePattern::new(TargetKind::Secret, "a|b.*").unwrap();
        assert!(either.matches(TargetKind::Secret, "a"));
        assert!(!either.matches(TargetKind::Secret, "xa"));
        assert!(!either.matches(TargetKind::Secret, "ab"));
        assert!(either.matches(TargetKind::Secret, "bcd"));
    }

    #[test]
    fn ignore_is_reloaders_opt_out() {
        let map = |v: &str| json!({IGNORE: v}).as_object().unwrap().clone();
        assert!(reloader_ignored(Some(&map("true"))));
        assert!(reloader_ignored(Some(&map(" TRUE "))));
        assert!(!reloader_ignored(Some(&map("false"))));
        assert!(!reloader_ignored(None));
    }
}
