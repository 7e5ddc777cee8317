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
    if let Some(spec) = object_at(map, "spec") {
        default(spec, "finalizers", json!(["kubernetes"]));
    }
    map.insert("status".into(), json!({"phase": "Active"}));
}
