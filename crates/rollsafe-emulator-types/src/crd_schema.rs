//! A CustomResourceDefinition's structural schema applied to the objects of its kind, as the
//! apiextensions apiserver applies `openAPIV3Schema` to a request's object: fields the schema
//! does not declare are found (and then refused, warned about or dropped like any undeclared
//! field, `fieldValidation` deciding), `default`s fill what is missing, and the object is
//! validated — type, `nullable`, `required`, `enum`, `minimum`/`maximum` (with their
//! `exclusive` forms), `minLength`/`maxLength` and `pattern` — with kube-openapi's messages.
//!
//! `apiVersion`, `kind` and `metadata` at the root (and in an embedded resource) are the
//! server's, not the schema's. `x-kubernetes-preserve-unknown-fields` keeps what it covers,
//! `x-kubernetes-int-or-string` takes an integer or a string.

use serde_json::{Map, Value};

use crate::status::FieldCause;

/// The paths (`spec.foo`, `spec.items[0].bar`) of the fields `obj` holds that `schema` does not
/// declare, in document order; nothing under such a field is looked at.
pub fn undeclared_fields(schema: &Value, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_undeclared(schema, obj, "", true, &mut out);
    out
}

fn walk_undeclared(schema: &Value, value: &Value, path: &str, root: bool, out: &mut Vec<String>) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = join(path, key);
                match (properties.and_then(|p| p.get(key)), additional) {
                    (Some(child_schema), _) | (None, Some(child_schema)) => {
                        walk_undeclared(child_schema, child, &child_path, false, out);
                    }
                    (None, None) if preserve => {}
                    (None, None) => out.push(child_path),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk_undeclared(item_schema, item, &format!("{path}[{i}]"), false, out);
                }
            }
        }
        _ => {}
    }
}

/// Fills every missing property that has a `default`, from the root down (a default object is
/// itself defaulted further).
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    match obj {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, child_schema) in properties {
                    if !map.contains_key(key)
                        && let Some(default) = child_schema.get("default")
                    {
                        map.insert(key.clone(), default.clone());
                    }
                }
                for (key, child) in map.iter_mut() {
                    if let Some(child_schema) = properties.get(key) {
                        apply_defaults(child_schema, child);
                    }
                }
            } else if let Some(additional) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for child in map.values_mut() {
                    apply_defaults(additional, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    apply_defaults(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

/// The validation errors of `obj` against `schema`, as 422 causes in document order.
pub fn validate(schema: &Value, obj: &Value) -> Vec<FieldCause> {
    let mut causes = Vec::new();
    if let Value::Object(map) = obj {
        validate_object(schema, map, "", true, &mut causes);
    }
    causes
}

fn validate_value(schema: &Value, value: &Value, path: &str, causes: &mut Vec<FieldCause>) {
    if value.is_null() {
        if !flag(schema, "nullable") && schema.get("type").is_some() {
            causes.push(type_error(schema, value, path));
        }
        return;
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        if !(value.is_string() || is_integer(value)) {
            causes.push(FieldCause::type_invalid(
                path,
                json_type(value),
                &format!(
                    "{path} in body must be of type integer,string: \"{}\"",
                    json_type(value)
                ),
            ));
        }
        return;
    }
    if let Some(want) = schema.get("type").and_then(Value::as_str)
        && !has_type(value, want)
    {
        causes.push(type_error(schema, value, path));
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(Value::to_string).collect();
        let supported: Vec<&str> = supported.iter().map(String::as_str).collect();
        causes.push(FieldCause::not_supported(
            path,
            &value.to_string(),
            &supported,
        ));
    }
    match value {
        Value::Object(map) => validate_object(schema, map, path, false, causes),
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    validate_value(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Number(n) => validate_bounds(schema, n, path, causes),
        Value::String(s) => validate_string(schema, s, path, causes),
        _ => {}
    }
}

fn validate_object(
    schema: &Value,
    map: &Map<String, Value>,
    path: &str,
    root: bool,
    causes: &mut Vec<FieldCause>,
) {
    let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (key, child) in map {
        if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
            validate_value(child_schema, child, &join(path, key), causes);
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                causes.push(FieldCause::required(&join(path, name), ""));
            }
        }
    }
}

/// A numeric bound: its keyword, its exclusive flag, whether a value is beyond it, and the
/// relation a value must have to it.
type Bound = (
    &'static str,
    &'static str,
    fn(f64, f64) -> bool,
    &'static str,
);

fn validate_bounds(
    schema: &Value,
    n: &serde_json::Number,
    path: &str,
    causes: &mut Vec<FieldCause>,
) {
    let Some(x) = n.as_f64() else {
        return;
    };
    let bounds: [Bound; 2] = [
        ("minimum", "exclusiveMinimum", |x, b| x < b, "greater than"),
        ("maximum", "exclusiveMaximum", |x, b| x > b, "less than"),
    ];
    for (key, exclusive_key, beyond, relation) in bounds {
        let Some(bound) = schema.get(key).and_then(Value::as_f64) else {
            continue;
        };
        let exclusive = flag(schema, exclusive_key);
        if beyond(x, bound) || (exclusive && x == bound) {
            let relation = if exclusive {
                relation.to_owned()
            } else {
                format!("{relation} or equal to")
            };
            let shown =
                serde_json::Number::from_f64(bound).map_or(bound.to_string(), |b| plain(&b));
            causes.push(FieldCause::invalid(
                path,
                &plain(n),
                &format!("{path} in body should be {relation} {shown}"),
            ));
        }
    }
}

/// `minLength`, `maxLength` and `pattern` (RE2 syntax, which Go's `regexp` and the `regex`
/// crate share; matched anywhere in the string, as Go's `MatchString`). A pattern that does not
/// compile checks nothing.
fn validate_string(schema: &Value, s: &str, path: &str, causes: &mut Vec<FieldCause>) {
    let length = s.chars().count() as u64;
    if let Some(min) = schema.get("minLength").and_then(Value::as_u64)
        && length < min
    {
        causes.push(FieldCause::invalid(
            path,
            &format!("{s:?}"),
            &format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && length > max
    {
        causes.push(FieldCause::invalid(
            path,
            &format!("{s:?}"),
            &format!("{path} in body should be at most {max} chars long"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && let Ok(re) = regex::Regex::new(pattern)
        && !re.is_match(s)
    {
        causes.push(FieldCause::invalid(
            path,
            &format!("{s:?}"),
            &format!("{path} in body should match '{pattern}'"),
        ));
    }
}

/// `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer:
/// "string"` — the value shown is the type the body had.
fn type_error(schema: &Value, value: &Value, path: &str) -> FieldCause {
    let want = schema.get("type").and_then(Value::as_str).unwrap_or("");
    let got = json_type(value);
    FieldCause::type_invalid(
        path,
        got,
        &format!("{path} in body must be of type {want}: \"{got}\""),
    )
}

fn has_type(value: &Value, want: &str) -> bool {
    match want {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "integer" => is_integer(value),
        "number" => value.is_number(),
        _ => true,
    }
}

fn is_integer(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The JSON type name kube-openapi reports for a value.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) if is_integer(value) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A number as Go's `%v` prints it (`1`, `1.5`).
fn plain(n: &serde_json::Number) -> String {
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        _ => n.to_string(),
    }
}

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key) == Some(&Value::Bool(true))
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"},
                "name": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"},
                "port": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "items": {"type": "array", "items": {"type": "object", "properties": {
                    "id": {"type": "string"}}}},
                "note": {"type": "string", "nullable": true},
                "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    #[test]
    fn undeclared_fields_are_found_in_document_order_and_preserved_where_asked() {
        let obj = json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "anything": 1},
            "spec": {"size": 1, "sise": 2, "extra": {"free": {"deep": true}},
                     "labels": {"a": "b"}, "items": [{"id": "x", "idd": "y"}]},
            "top": {"nested": 1}});
        assert_eq!(
            undeclared_fields(&schema(), &obj),
            ["spec.sise", "spec.items[0].idd", "top"]
        );
    }

    #[test]
    fn defaults_fill_what_is_missing() {
        let mut obj = json!({"spec": {"size": 1}});
        apply_defaults(&schema(), &mut obj);
        assert_eq!(obj["spec"]["mode"], "safe");
        let mut set = json!({"spec": {"size": 1, "mode": "fast"}});
        apply_defaults(&schema(), &mut set);
        assert_eq!(set["spec"]["mode"], "fast");
    }

    #[test]
    fn validation_speaks_kube_openapi() {
        let cases: &[(Value, &[&str])] = &[
            (
                json!({"spec": {"size": 3, "mode": "fast", "port": "http", "note": null}}),
                &[],
            ),
            (json!({"spec": {"size": 3, "port": 8080}}), &[]),
            (
                json!({"spec": {"size": "three"}}),
                &[
                    "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
                ],
            ),
            (
                json!({"spec": {"size": 1.5}}),
                &[
                    "spec.size: Invalid value: \"number\": spec.size in body must be of type integer: \"number\"",
                ],
            ),
            (json!({"spec": {}}), &["spec.size: Required value"]),
            (
                json!({"spec": {"size": 0}}),
                &[
                    "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
                ],
            ),
            (
                json!({"spec": {"size": 11}}),
                &[
                    "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
                ],
            ),
            (
                json!({"spec": {"size": 1, "name": "AB"}}),
                &["spec.name: Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'"],
            ),
            (
                json!({"spec": {"size": 1, "ratio": 0}}),
                &["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"],
            ),
            (json!({"spec": {"size": 1, "ratio": 0.5}}), &[]),
            (
                json!({"spec": {"size": 1, "mode": "slow"}}),
                &["spec.mode: Unsupported value: \"slow\": supported values: \"fast\", \"safe\""],
            ),
            (
                json!({"spec": {"size": 1, "name": "a"}}),
                &[
                    "spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long",
                ],
            ),
            (
                json!({"spec": {"size": 1, "port": true}}),
                &[
                    "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                ],
            ),
            (
                json!({"spec": {"size": 1, "labels": {"a": 1}}, "status": {"ready": "yes"}}),
                &[
                    "spec.labels.a: Invalid value: \"integer\": spec.labels.a in body must be of type string: \"integer\"",
                    "status.ready: Invalid value: \"string\": status.ready in body must be of type boolean: \"string\"",
                ],
            ),
            (
                json!({"spec": null}),
                &["spec: Invalid value: \"null\": spec in body must be of type object: \"null\""],
            ),
        ];
        for (obj, want) in cases {
            let got: Vec<String> = validate(&schema(), obj)
                .iter()
                .map(FieldCause::text)
                .collect();
            assert_eq!(got, *want, "{obj}");
        }
    }
}
