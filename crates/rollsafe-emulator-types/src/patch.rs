//! The four PATCH flavours: RFC 6902 JSON patch (with the real server's engine quirks), RFC 7386
//! merge patch, strategic merge patch (what kubectl sends) and server-side apply (merged and
//! tracked by `crate::fieldmanager`).

use serde_json::{Map, Value};

use crate::status::StatusError;

/// The most operations one JSON patch may hold.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// A PATCH content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml`.
    Apply,
}

impl PatchKind {
    /// Reads a `Content-Type` header value (a `;charset=…` suffix is ignored).
    pub fn from_content_type(ct: &str) -> Option<Self> {
        let base = ct
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        match base.as_str() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// A decoded patch document, ready to apply to any object.
#[derive(Debug, Clone)]
pub enum Decoded {
    /// JSON patch operations, kept raw: an op that does not decode fails at apply time (422),
    /// as it does in the real server's engine.
    Json(Vec<Value>),
    /// A merge, strategic or apply document (an object).
    Document(PatchKind, Value),
}

/// Decodes a patch body. Errors are the real server's 400/413s.
pub fn decode(kind: PatchKind, body: &[u8]) -> Result<Decoded, StatusError> {
    match kind {
        PatchKind::Json => {
            let ops: Vec<Value> = serde_json::from_slice(body)
                .map_err(|e| StatusError::bad_request(&format!("error decoding patch: {e}")))?;
            if ops.len() > MAX_JSON_PATCH_OPERATIONS {
                return Err(StatusError::too_large(&format!(
                    "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
                    ops.len()
                )));
            }
            Ok(Decoded::Json(ops))
        }
        PatchKind::Merge | PatchKind::Strategic => {
            let doc: Map<String, Value> = serde_json::from_slice(body)
                .map_err(|e| StatusError::bad_request(&format!("error decoding patch: {e}")))?;
            Ok(Decoded::Document(kind, Value::Object(doc)))
        }
        PatchKind::Apply => {
            let text = std::str::from_utf8(body)
                .map_err(|e| StatusError::bad_request(&format!("error decoding YAML: {e}")))?;
            let doc: Value = serde_saphyr::from_str(text)
                .map_err(|e| StatusError::bad_request(&format!("error decoding YAML: {e}")))?;
            if !doc.is_object() {
                return Err(StatusError::bad_request(
                    "error decoding YAML: the patch is not an object",
                ));
            }
            Ok(Decoded::Document(kind, doc))
        }
    }
}

/// Applies a decoded patch to a copy of `target`. JSON-patch failures are the generic 422.
pub fn apply(decoded: &Decoded, target: &Value) -> Result<Value, StatusError> {
    match decoded {
        Decoded::Json(ops) => {
            apply_json_patch(target, ops).map_err(|_| StatusError::json_patch_failed())
        }
        Decoded::Document(PatchKind::Merge, doc) => {
            let mut out = target.clone();
            json_patch::merge(&mut out, doc);
            Ok(out)
        }
        Decoded::Document(_, doc) => {
            let mut out = target.clone();
            strategic_merge(&mut out, doc, "");
            Ok(out)
        }
    }
}

/// Why a JSON patch failed (kept for logs; the client only ever sees the generic 422).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JsonPatchError {
    /// An operation object did not decode (unknown `op`, missing `path` or `value`).
    #[error("operation {index} is malformed: {message}")]
    Malformed {
        /// Position of the op.
        index: usize,
        /// Decoder text.
        message: String,
    },
    /// An operation could not be applied.
    #[error("operation {index} does not apply: {message}")]
    Apply {
        /// Position of the op.
        index: usize,
        /// Engine text.
        message: String,
    },
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Applies RFC 6902 operations atomically, with the two quirks of the real server's engine
/// (evanphx/json-patch v4): `replace` of a missing object key adds it, and `test` of a missing
/// key against `null` succeeds.
pub fn apply_json_patch(target: &Value, ops: &[Value]) -> Result<Value, JsonPatchError> {
    let mut doc = target.clone();
    for (index, raw) in ops.iter().enumerate() {
        let mut op = raw.clone();
        let kind = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let path = op
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if kind == "test" && op.get("value") == Some(&Value::Null) && doc.pointer(&path).is_none() {
            continue;
        }
        if kind == "replace"
            && let Some(slash) = path.rfind('/')
        {
            let (parent, key) = (&path[..slash], unescape(&path[slash + 1..]));
            if let Some(Value::Object(map)) = doc.pointer(parent)
                && !map.contains_key(&key)
                && let Some(o) = op.as_object_mut()
            {
                o.insert("op".into(), Value::String("add".into()));
            }
        }
        let parsed: json_patch::PatchOperation =
            serde_json::from_value(op).map_err(|e| JsonPatchError::Malformed {
                index,
                message: e.to_string(),
            })?;
        json_patch::patch(&mut doc, std::slice::from_ref(&parsed)).map_err(|e| {
            JsonPatchError::Apply {
                index,
                message: e.to_string(),
            }
        })?;
    }
    Ok(doc)
}

/// The patch merge key of a list field, by field name (the emulator's resources use these names
/// consistently). `None`: the list is replaced as a whole.
fn merge_key(field: &str) -> Option<&'static str> {
    list_map_keys(field).and_then(|keys| keys.first().copied())
}

/// The key fields of a list field that the real schema keys by (`+listType=map`), the first
/// being its strategic-merge key; server-side apply tracks the items by all of them. `None`:
/// an atomic list (or a set, see [`is_primitive_merge_list`]). Service ports, keyed by `port`,
/// are told apart by the field manager.
pub fn list_map_keys(field: &str) -> Option<&'static [&'static str]> {
    match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "env"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => Some(&["name"]),
        "volumeMounts" => Some(&["mountPath"]),
        "volumeDevices" => Some(&["devicePath"]),
        "ports" => Some(&["containerPort", "protocol"]),
        "hostAliases" => Some(&["ip"]),
        "conditions" => Some(&["type"]),
        "topologySpreadConstraints" => Some(&["topologyKey", "whenUnsatisfiable"]),
        "ownerReferences" => Some(&["uid"]),
        _ => None,
    }
}

/// Primitive lists merged as sets.
pub fn is_primitive_merge_list(field: &str) -> bool {
    field == "finalizers"
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

fn key_of<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|o| o.get(key))
}

/// Applies a strategic merge patch (the subset kubectl produces: maps merge, `null` deletes,
/// lists with a merge key merge element-wise, `$patch: delete|replace`, `$retainKeys`,
/// `$setElementOrder/…`, `$deleteFromPrimitiveList/…`).
pub fn strategic_merge(target: &mut Value, patch: &Value, _field: &str) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if patch_map.get("$patch").and_then(Value::as_str) == Some("replace") {
        *target = strip_directives(patch);
        return;
    }
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(out) = target else {
        return;
    };
    for (k, v) in patch_map {
        if k.starts_with('$') {
            continue;
        }
        match v {
            Value::Null => {
                out.remove(k);
            }
            Value::Object(inner) => {
                if inner.get("$patch").and_then(Value::as_str) == Some("delete") {
                    out.remove(k);
                } else {
                    let slot = out.entry(k.clone()).or_insert(Value::Null);
                    strategic_merge(slot, v, k);
                }
            }
            Value::Array(items) => merge_list(out, k, items),
            scalar => {
                out.insert(k.clone(), scalar.clone());
            }
        }
    }
    for (k, v) in patch_map {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(remove)) = (out.get_mut(field), v) {
                list.retain(|x| !remove.contains(x));
            }
        } else if let Some(field) = k.strip_prefix("$setElementOrder/") {
            if let (Some(Value::Array(list)), Value::Array(order)) = (out.get_mut(field), v) {
                reorder(list, order, merge_key(field));
            }
        } else if k == "$retainKeys"
            && let Value::Array(keep) = v
        {
            out.retain(|key, _| keep.iter().any(|x| x.as_str() == Some(key)));
        }
    }
}

fn merge_list(out: &mut Map<String, Value>, field: &str, items: &[Value]) {
    if is_primitive_merge_list(field) {
        let list = out
            .entry(field.to_string())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            for item in items {
                if !list.contains(item) {
                    list.push(item.clone());
                }
            }
        }
        return;
    }
    let Some(mkey) = merge_key(field) else {
        out.insert(
            field.to_string(),
            strip_directives(&Value::Array(items.to_vec())),
        );
        return;
    };
    if items
        .iter()
        .any(|i| key_of(i, "$patch").and_then(Value::as_str) == Some("replace"))
    {
        let kept: Vec<Value> = items
            .iter()
            .filter(|i| key_of(i, "$patch").is_none())
            .map(strip_directives)
            .collect();
        out.insert(field.to_string(), Value::Array(kept));
        return;
    }
    let list = out
        .entry(field.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !list.is_array() {
        *list = Value::Array(Vec::new());
    }
    let Value::Array(list) = list else {
        return;
    };
    for item in items {
        let key = key_of(item, mkey).cloned();
        let existing = key
            .as_ref()
            .and_then(|k| list.iter().position(|e| key_of(e, mkey) == Some(k)));
        let delete = key_of(item, "$patch").and_then(Value::as_str) == Some("delete");
        match (existing, delete) {
            (Some(pos), true) => {
                list.remove(pos);
            }
            (None, true) => {}
            (Some(pos), false) => strategic_merge(&mut list[pos], item, field),
            (None, false) => list.push(strip_directives(item)),
        }
    }
}

fn reorder(list: &mut [Value], order: &[Value], mkey: Option<&str>) {
    let position = |v: &Value| -> usize {
        let id = match mkey {
            Some(k) => key_of(v, k),
            None => Some(v),
        };
        id.and_then(|id| {
            order.iter().position(|o| match mkey {
                Some(k) => key_of(o, k) == Some(id),
                None => o == id,
            })
        })
        .unwrap_or(usize::MAX)
    };
    list.sort_by_key(|v| position(v));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"uid": "u1", "resourceVersion": "5"}})
    }

    #[test]
    fn json_patch_test_and_add() {
        let ops = vec![
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "5"}),
            json!({"op": "add", "path": "/metadata/annotations", "value": {"a": "b"}}),
        ];
        let out = apply_json_patch(&obj(), &ops).unwrap_or_default();
        assert_eq!(out["metadata"]["annotations"]["a"], "b");
    }

    #[test]
    fn json_patch_failed_test_is_an_error() {
        let ops = vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": "6"})];
        assert!(matches!(
            apply_json_patch(&obj(), &ops),
            Err(JsonPatchError::Apply { .. })
        ));
        let ops = vec![json!({"op": "add", "path": "/metadata/annotations/a", "value": "x"})];
        assert!(apply_json_patch(&obj(), &ops).is_err());
        let ops = vec![json!({"op": "frobnicate", "path": "/metadata"})];
        assert!(matches!(
            apply_json_patch(&obj(), &ops),
            Err(JsonPatchError::Malformed { .. })
        ));
    }

    #[test]
    fn json_patch_engine_quirks() {
        let ops = vec![json!({"op": "replace", "path": "/metadata/nope", "value": "x"})];
        assert_eq!(
            apply_json_patch(&obj(), &ops)
                .ok()
                .map(|o| o["metadata"]["nope"].clone()),
            Some(json!("x"))
        );
        let ops = vec![json!({"op": "test", "path": "/metadata/nope", "value": null})];
        assert!(apply_json_patch(&obj(), &ops).is_ok());
    }

    #[test]
    fn json_patch_is_atomic() {
        let ops = vec![
            json!({"op": "add", "path": "/metadata/x", "value": "1"}),
            json!({"op": "test", "path": "/metadata/uid", "value": "other"}),
        ];
        assert!(apply_json_patch(&obj(), &ops).is_err());
    }

    #[test]
    fn strategic_merge_of_containers() {
        let mut target = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}
        ]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
            "containers": [{"name": "b", "image": "b:2"}]
        }});
        strategic_merge(&mut target, &patch, "");
        assert_eq!(
            target,
            json!({"spec": {"containers": [
                {"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}
            ]}})
        );
        let patch = json!({"spec": {"containers": [{"name": "a", "$patch": "delete"}]}});
        strategic_merge(&mut target, &patch, "");
        assert_eq!(
            target["spec"]["containers"].as_array().map(Vec::len),
            Some(1)
        );
    }

    #[test]
    fn strategic_merge_null_deletes_and_maps_merge() {
        let mut target = json!({"metadata": {"annotations": {"a": "1", "b": "2"}}});
        strategic_merge(
            &mut target,
            &json!({"metadata": {"annotations": {"a": null, "c": "3"}}}),
            "",
        );
        assert_eq!(
            target,
            json!({"metadata": {"annotations": {"b": "2", "c": "3"}}})
        );
    }
}
