//! Reading an object's metadata from its JSON, the one way every reader does (the controller's
//! cache, the migration inventory): a missing field reads as empty.

use serde_json::{Map, Value};

/// A text field of the object's `metadata` (`name`, `namespace`, `uid`, `resourceVersion`…);
/// empty when absent or not a string.
pub fn metadata_text<'v>(object: &'v Value, field: &str) -> &'v str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The object's `metadata.annotations`, when it has any.
pub fn annotations(object: &Value) -> Option<&Map<String, Value>> {
    object
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Value::as_object)
}
