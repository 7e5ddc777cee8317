//! Namespaces: DNS-label names, the `kubernetes` finalizer, phase `Active`.

use serde_json::{Map, Value, json};

use super::{DEFAULT, NameRule, Strategy, default, object_at};

/// Namespaces.
pub static STRATEGY: Strategy = Strategy {
    names: NameRule::Label,
    prepare,
    ..DEFAULT
};

fn prepare(map: &mut Map<String, Value>, _old: Option<&Value>) {
    // The namespace registry always sets this label to the name (since 1.21).
    let name = map
        .get("metadata")
        .and_then(|m| m.get("name"))
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(labels) = object_at(map, "metadata").and_then(|m| object_at(m, "labels")) {
        labels.insert("kubernetes.io/metadata.name".into(), name);
    }
    if let Some(spec) = object_at(map, "spec") {
        default(spec, "finalizers", json!(["kubernetes"]));
    }
    map.insert("status".into(), json!({"phase": "Active"}));
}
