//! Which keys of which objects a workload consumes.
//!
//! The references come from the core's extraction ([`rollsafe_core::reference::extract`]); this
//! module only adds key precision on top of each reference's origin: an env
//! `secretKeyRef`/`configMapKeyRef` consumes its one key; a `secret`/`configMap` volume or a
//! projected source with `items` consumes the listed keys; everything else (envFrom, volumes
//! without items, imagePullSecrets) consumes every key. Several references to one object merge,
//! and "every key" absorbs any key list.

use std::collections::{BTreeMap, BTreeSet};

use rollsafe_core::reference::{self, ConfigRef, Origin, Reference, TargetKind};
use serde_json::Value;

use crate::annotations::OptIn;

/// The keys of one object a workload consumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Keys {
    /// Every key the object has (whole-object references).
    All,
    /// Only these keys.
    Some(BTreeSet<String>),
}

impl Keys {
    fn merge(&mut self, other: Keys) {
        match (&mut *self, other) {
            (Keys::All, _) => {}
            (_, Keys::All) => *self = Keys::All,
            (Keys::Some(mine), Keys::Some(theirs)) => mine.extend(theirs),
        }
    }
}

/// Every object a workload consumes, and which of its keys, sorted by kind and name.
pub type Consumption = BTreeMap<ConfigRef, Keys>;

/// What a workload consumes under its opt-in: for [`OptIn::Template`], every reference of the
/// pod template (`spec.template`) with key precision; for [`OptIn::List`], the listed objects,
/// every key; nothing for [`OptIn::Off`].
pub fn consumption(opt_in: &OptIn, pod_template: Option<&Value>) -> Consumption {
    let mut out = Consumption::new();
    match opt_in {
        OptIn::Off => {}
        OptIn::List(refs) => {
            for config in refs {
                out.insert(config.clone(), Keys::All);
            }
        }
        OptIn::Template => referenced(&mut out, pod_template, |_| true),
        OptIn::Select {
            secrets,
            config_maps,
            listed,
            matched,
            // Matched against the names that exist: the cache expands them.
            patterns: _,
        } => {
            referenced(&mut out, pod_template, |kind| {
                *matched
                    || match kind {
                        TargetKind::Secret => *secrets,
                        TargetKind::ConfigMap => *config_maps,
                    }
            });
            for config in listed {
                out.insert(config.clone(), Keys::All);
            }
        }
    }
    out
}

/// The objects of `consumption` that `opt_in` watches only while they carry Reloader's
/// `match: "true"` (Reloader's `search`: neither named nor of an `auto` kind); empty for every
/// other opt-in.
pub fn match_only(opt_in: &OptIn, consumption: &Consumption) -> Vec<ConfigRef> {
    let OptIn::Select {
        secrets,
        config_maps,
        listed,
        matched: true,
        ..
    } = opt_in
    else {
        return Vec::new();
    };
    consumption
        .keys()
        .filter(|config| {
            let by_kind = match config.kind {
                TargetKind::Secret => *secrets,
                TargetKind::ConfigMap => *config_maps,
            };
            !by_kind && !listed.contains(*config)
        })
        .cloned()
        .collect()
}

/// Adds the pod template's references of the kinds `wanted` selects, with key precision.
fn referenced(
    out: &mut Consumption,
    pod_template: Option<&Value>,
    wanted: impl Fn(TargetKind) -> bool,
) {
    let Some(template) = pod_template else {
        return;
    };
    for reference in reference::extract(template) {
        if !wanted(reference.kind) {
            continue;
        }
        let keys = keys_of(template, &reference);
        let config = ConfigRef {
            kind: reference.kind,
            name: reference.name,
        };
        match out.get_mut(&config) {
            Some(existing) => existing.merge(keys),
            None => {
                out.insert(config, keys);
            }
        }
    }
}

/// The keys one reference consumes.
fn keys_of(template: &Value, reference: &Reference) -> Keys {
    match &reference.origin {
        Origin::Env { key: Some(key), .. } => Keys::Some(BTreeSet::from([key.clone()])),
        Origin::Volume {
            volume: Some(volume),
        } => volume_projection(template, volume, reference).map_or(Keys::All, items),
        Origin::ProjectedVolume {
            volume: Some(volume),
            source,
        } => volume_by_name(template, volume)
            .and_then(|v| v.get("projected"))
            .and_then(|p| p.get("sources"))
            .and_then(Value::as_array)
            .and_then(|sources| sources.get(*source))
            .and_then(|s| s.get(field_of(reference.kind)))
            .map_or(Keys::All, items),
        // envFrom, imagePullSecrets, an env ref without a key, a volume without a name.
        _ => Keys::All,
    }
}

/// The `secret`/`configMap` map of the named volume that this reference came from.
fn volume_projection<'a>(
    template: &'a Value,
    volume: &str,
    reference: &Reference,
) -> Option<&'a Value> {
    volume_by_name(template, volume)?.get(field_of(reference.kind))
}

fn volume_by_name<'a>(template: &'a Value, volume: &str) -> Option<&'a Value> {
    template
        .get("spec")?
        .get("volumes")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(volume))
}

/// The field holding a projection of `kind`: `secret`/`configMap` in both volume shapes.
fn field_of(kind: TargetKind) -> &'static str {
    match kind {
        TargetKind::Secret => "secret",
        TargetKind::ConfigMap => "configMap",
    }
}

/// `items[].key` of a projection: those keys when it lists any, else every key.
fn items(projection: &Value) -> Keys {
    let keys: BTreeSet<String> = projection
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("key").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    if keys.is_empty() {
        Keys::All
    } else {
        Keys::Some(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cref(kind: TargetKind, name: &str) -> ConfigRef {
        ConfigRef {
            kind,
            name: name.to_owned(),
        }
    }
    fn some(keys: &[&str]) -> Keys {
        Keys::Some(keys.iter().map(|k| (*k).to_owned()).collect())
    }

    #[test]
    fn key_precision_table() {
        use TargetKind::{ConfigMap, Secret};
        let env_key = |kind: &str, name: &str, key: &str| {
            json!({"spec": {"containers": [{"name": "app", "env": [
                {"name": "X", "valueFrom": {kind: {"name": name, "key": key}}}
            ]}]}})
        };
        let cases: Vec<(Value, Vec<(ConfigRef, Keys)>)> = vec![
            (
                env_key("secretKeyRef", "db", "password"),
                vec![(cref(Secret, "db"), some(&["password"]))],
            ),
            (
                env_key("configMapKeyRef", "settings", "level"),
                vec![(cref(ConfigMap, "settings"), some(&["level"]))],
            ),
            (
                json!({"spec": {"containers": [{"envFrom": [{"secretRef": {"name": "db"}}]}]}}),
                vec![(cref(Secret, "db"), Keys::All)],
            ),
            (
                json!({"spec": {"volumes": [
                    {"name": "v", "secret": {"secretName": "tls", "items": [{"key": "tls.crt", "path": "c"}]}},
                    {"name": "w", "configMap": {"name": "settings"}}
                ]}}),
                vec![
                    (cref(ConfigMap, "settings"), Keys::All),
                    (cref(Secret, "tls"), some(&["tls.crt"])),
                ],
            ),
            (
                json!({"spec": {"volumes": [{"name": "p", "projected": {"sources": [
                    {"configMap": {"name": "a", "items": [{"key": "k1", "path": "x"}, {"key": "k2", "path": "y"}]}},
                    {"secret": {"name": "b"}}
                ]}}]}}),
                vec![
                    (cref(ConfigMap, "a"), some(&["k1", "k2"])),
                    (cref(Secret, "b"), Keys::All),
                ],
            ),
            // Two key refs merge; a whole-object ref absorbs them.
            (
                json!({"spec": {"containers": [{"env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pass"}}},
                    {"name": "C", "valueFrom": {"secretKeyRef": {"name": "other", "key": "k"}}}
                ], "envFrom": [{"secretRef": {"name": "other"}}]}]}}),
                vec![
                    (cref(Secret, "db"), some(&["pass", "user"])),
                    (cref(Secret, "other"), Keys::All),
                ],
            ),
            // imagePullSecrets and ephemeral containers count.
            (
                json!({"spec": {"imagePullSecrets": [{"name": "reg"}], "ephemeralContainers": [
                    {"name": "dbg", "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "dbg", "key": "t"}}}]}
                ]}}),
                vec![
                    (cref(Secret, "dbg"), some(&["t"])),
                    (cref(Secret, "reg"), Keys::All),
                ],
            ),
            // Empty items list: every key.
            (
                json!({"spec": {"volumes": [{"name": "v", "configMap": {"name": "c", "items": []}}]}}),
                vec![(cref(ConfigMap, "c"), Keys::All)],
            ),
        ];
        for (template, expected) in cases {
            let got = consumption(&OptIn::Template, Some(&template));
            assert_eq!(
                got,
                expected.into_iter().collect::<Consumption>(),
                "{template}"
            );
        }
    }

    #[test]
    fn list_and_off() {
        let template =
            json!({"spec": {"containers": [{"envFrom": [{"secretRef": {"name": "db"}}]}]}});
        assert!(consumption(&OptIn::Off, Some(&template)).is_empty());
        let listed = OptIn::List(BTreeSet::from([cref(TargetKind::ConfigMap, "api-read")]));
        assert_eq!(
            consumption(&listed, Some(&template)),
            Consumption::from([(cref(TargetKind::ConfigMap, "api-read"), Keys::All)])
        );
        assert!(consumption(&OptIn::Template, None).is_empty());
    }
}
