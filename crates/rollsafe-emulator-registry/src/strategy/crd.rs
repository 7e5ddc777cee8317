//! CustomResourceDefinitions (`apiextensions-apiserver`'s strategy and its controllers'
//! status): the name is `<plural>.<group>`, exactly one served version is the storage
//! version, and a CRD is `Established` at once — the kinds it defines are served as soon as it
//! is stored (`Store::serve_definitions`).

use serde_json::{Map, Value, json};

use super::{DEFAULT, NameRule, Strategy, is_dns_label, is_dns_subdomain};
use rollsafe_emulator_types::resources::custom::Definition;
use rollsafe_emulator_types::status::{FieldCause, StatusError};
use rollsafe_emulator_types::util;

/// CustomResourceDefinitions.
pub static STRATEGY: Strategy = Strategy {
    names: NameRule::Subdomain,
    prepare,
    validate,
    ..DEFAULT
};

fn text<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// The definitions of a CRD's served versions: the storage version first (its `stored` is
/// `None`); the others' `stored` is filled by the caller with the storage version's id.
pub fn definitions(crd: &Value) -> Vec<Definition> {
    let kind = text(crd, "/spec/names/kind");
    let singular = match text(crd, "/spec/names/singular") {
        "" => kind.to_lowercase(),
        s => s.to_owned(),
    };
    let short_names: Vec<String> = crd
        .pointer("/spec/names/shortNames")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut out: Vec<(bool, Definition)> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|v| v.get("served") == Some(&Value::Bool(true)))
        .map(|v| {
            (
                v.get("storage") == Some(&Value::Bool(true)),
                Definition {
                    group: text(crd, "/spec/group").to_owned(),
                    version: text(v, "/name").to_owned(),
                    plural: text(crd, "/spec/names/plural").to_owned(),
                    singular: singular.clone(),
                    kind: kind.to_owned(),
                    namespaced: text(crd, "/spec/scope") == "Namespaced",
                    short_names: short_names.clone(),
                    status: v.pointer("/subresources/status").is_some(),
                    stored: None,
                },
            )
        })
        .collect();
    out.sort_by_key(|(storage, _)| !storage);
    out.into_iter().map(|(_, d)| d).collect()
}

fn prepare(map: &mut Map<String, Value>, old: Option<&Value>) {
    let spec = map.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut names = spec.get("names").cloned().unwrap_or_else(|| json!({}));
    if let Some(names) = names.as_object_mut() {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        names
            .entry("singular")
            .or_insert_with(|| json!(kind.to_lowercase()));
        names
            .entry("listKind")
            .or_insert_with(|| json!(format!("{kind}List")));
    }
    if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("names".into(), names.clone());
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    let storage: Vec<Value> = spec
        .get("versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    // The controllers' status, kept (timestamps too) while nothing about it changes.
    let conditions = old
        .and_then(|o| o.pointer("/status/conditions"))
        .cloned()
        .unwrap_or_else(|| {
            let now = util::now_seconds();
            json!([
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
                 "reason": "NoConflicts", "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": now,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ])
        });
    let mut stored_versions: Vec<Value> = old
        .and_then(|o| o.pointer("/status/storedVersions"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for version in storage {
        if !stored_versions.contains(&version) {
            stored_versions.push(version);
        }
    }
    map.insert(
        "status".into(),
        json!({"conditions": conditions, "acceptedNames": names, "storedVersions": stored_versions}),
    );
}

fn validate(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    let name = text(obj, "/metadata/name");
    let group = text(obj, "/spec/group");
    let plural = text(obj, "/spec/names/plural");
    if group.is_empty() {
        causes.push(FieldCause::required("spec.group", ""));
    } else if !is_dns_subdomain(group) || !group.contains('.') {
        causes.push(FieldCause::invalid(
            "spec.group",
            &format!("{group:?}"),
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        causes.push(FieldCause::required("spec.names.plural", ""));
    } else if !is_dns_label(plural) {
        causes.push(FieldCause::invalid(
            "spec.names.plural",
            &format!("{plural:?}"),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ));
    }
    if text(obj, "/spec/names/kind").is_empty() {
        causes.push(FieldCause::required("spec.names.kind", ""));
    }
    if !name.is_empty() && name != format!("{plural}.{group}") {
        causes.push(FieldCause::invalid(
            "metadata.name",
            &format!("{name:?}"),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match text(obj, "/spec/scope") {
        "Namespaced" | "Cluster" => {}
        "" => causes.push(FieldCause::required("spec.scope", "")),
        other => causes.push(FieldCause::not_supported(
            "spec.scope",
            &format!("{other:?}"),
            &["\"Cluster\"", "\"Namespaced\""],
        )),
    }
    let versions = obj
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        causes.push(FieldCause::invalid(
            "spec.versions",
            "null",
            "must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions
            .iter()
            .filter(|v| v.get("storage") == Some(&Value::Bool(true)))
            .count();
        if storage != 1 {
            causes.push(FieldCause::invalid(
                "spec.versions",
                "[]apiextensions.CustomResourceDefinitionVersion{…}",
                "must have exactly one version marked as storage version",
            ));
        }
    }
    if let Some(old) = old {
        for (field, pointer) in [
            ("spec.group", "/spec/group"),
            ("spec.names.plural", "/spec/names/plural"),
        ] {
            if text(old, pointer) != text(obj, pointer) {
                causes.push(FieldCause::invalid(
                    field,
                    &format!("{:?}", text(obj, pointer)),
                    "field is immutable",
                ));
            }
        }
    }
    Ok(())
}
