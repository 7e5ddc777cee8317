//! Trait-style patches, applied to rendered resources before hashing.
//!
//! A patches document is a Trait or ClusterTrait (`spec.patches`), an object with a top-level
//! `patches` list, or one bare patch (`target` + `operations`). Each patch selects resources by
//! `target.group`, `target.version` and `target.kind` (missing or empty: any) and applies RFC
//! 6902 operations in order:
//!
//! - `add` sets a map key (overwriting) or inserts into a list (`-` appends); missing or null
//!   parents are created as maps (as a list when the next segment is `-`);
//! - `replace` requires the key or index to exist;
//! - `remove` of a missing map key, or below a missing parent, does nothing.
//!
//! Paths are RFC 6901 pointers: `~1` is `/`, then `~0` is `~`. A segment addresses a list item
//! by index when its parent is a list, else a map key. Upstream's path filters
//! (`[?(@.x=='y')]`, `[*]`, `[N]`), `where` conditions, CEL `${…}` expressions and the
//! internal `mergeShallow` operation are not supported: filters, `where` and `mergeShallow`
//! are refused when the file is read, and `${…}` is kept as literal text.

use serde_json::{Map, Value};
use thiserror::Error;

use super::ResourceName;

/// An operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// RFC 6902 `add`, creating missing parents.
    Add,
    /// RFC 6902 `replace`.
    Replace,
    /// RFC 6902 `remove`, a no-op when the target is missing.
    Remove,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Add => "add",
            Op::Replace => "replace",
            Op::Remove => "remove",
        }
    }
}

/// One operation of a patch.
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    /// What to do.
    pub op: Op,
    /// The JSON Pointer as written.
    pub path: String,
    segments: Vec<String>,
    /// The value for `add` and `replace`.
    pub value: Option<Value>,
}

/// Which resources a patch applies to; `None` matches anything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Target {
    /// API group (`""` for the core group counts as "any", as upstream does).
    pub group: Option<String>,
    /// API version.
    pub version: Option<String>,
    /// Kind.
    pub kind: Option<String>,
}

/// One patch: a target and its operations.
#[derive(Debug, Clone, PartialEq)]
pub struct TraitPatch {
    /// Where it came from, for messages: e.g. `ClusterTrait no-restart, patch 2`.
    pub source: String,
    /// The resources it applies to.
    pub target: Target,
    /// The operations, in order.
    pub operations: Vec<Operation>,
}

/// A patches document that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{location}: {message}")]
pub struct PatchFileError {
    /// Where: e.g. `object 1, patch 2, operation 1`.
    pub location: String,
    /// What is wrong.
    pub message: String,
}

/// A trait patch operation failed on a resource.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{resource}: {source_name}: {op} {path}: {reason}")]
pub struct TraitPatchError {
    /// Index of the resource in the input.
    pub index: usize,
    /// The resource.
    pub resource: ResourceName,
    /// The patch.
    pub source_name: String,
    /// The operation.
    pub op: &'static str,
    /// The path as written.
    pub path: String,
    /// Why it failed.
    pub reason: String,
}

/// Reads patches from the objects of a patches document, in order.
pub fn parse<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> Result<Vec<TraitPatch>, PatchFileError> {
    let mut out = Vec::new();
    for (number, object) in objects.into_iter().enumerate() {
        let location = format!("object {}", number + 1);
        let error = |message: &str| PatchFileError {
            location: location.clone(),
            message: message.to_owned(),
        };
        let name = object
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str);
        let kind = object.get("kind").and_then(Value::as_str);
        let label = match (kind, name) {
            (Some(kind), Some(name)) => format!("{kind} {name}"),
            _ => location.clone(),
        };
        if let Some(patches) = object.get("spec").and_then(|s| s.get("patches")) {
            let patches = patches
                .as_array()
                .ok_or_else(|| error("spec.patches is not a list"))?;
            for (i, patch) in patches.iter().enumerate() {
                out.push(parse_patch(patch, &format!("{label}, patch {}", i + 1))?);
            }
        } else if let Some(patches) = object.get("patches") {
            let patches = patches
                .as_array()
                .ok_or_else(|| error("patches is not a list"))?;
            for (i, patch) in patches.iter().enumerate() {
                out.push(parse_patch(patch, &format!("{label}, patch {}", i + 1))?);
            }
        } else if object.get("target").is_some() {
            out.push(parse_patch(object, &label)?);
        } else {
            return Err(error(
                "not a Trait or ClusterTrait with spec.patches, a patches list, or a patch with a target",
            ));
        }
    }
    Ok(out)
}

fn parse_patch(patch: &Value, source: &str) -> Result<TraitPatch, PatchFileError> {
    let error = |message: String| PatchFileError {
        location: source.to_owned(),
        message,
    };
    let target = patch
        .get("target")
        .ok_or_else(|| error("missing target".to_owned()))?;
    let target_map = target
        .as_object()
        .ok_or_else(|| error("target is not a map".to_owned()))?;
    if target_map.contains_key("where") {
        return Err(error(
            "target.where (a CEL condition) is not supported".to_owned(),
        ));
    }
    if let Some(plane) = target_map.get("targetPlane")
        && plane.as_str() != Some("dataplane")
    {
        return Err(error(
            "only targetPlane \"dataplane\" is supported".to_owned(),
        ));
    }
    let field = |name: &str| -> Result<Option<String>, PatchFileError> {
        match target_map.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if text.is_empty() => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(error(format!("target.{name} is not a string"))),
        }
    };
    let target = Target {
        group: field("group")?,
        version: field("version")?,
        kind: field("kind")?,
    };
    let operations = patch
        .get("operations")
        .and_then(Value::as_array)
        .ok_or_else(|| error("operations is missing or not a list".to_owned()))?;
    let operations = operations
        .iter()
        .enumerate()
        .map(|(i, operation)| {
            parse_operation(operation).map_err(|message| PatchFileError {
                location: format!("{source}, operation {}", i + 1),
                message,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(TraitPatch {
        source: source.to_owned(),
        target,
        operations,
    })
}

fn parse_operation(operation: &Value) -> Result<Operation, String> {
    let op = operation
        .get("op")
        .and_then(Value::as_str)
        .ok_or("op is missing or not a string")?;
    let op = match op.to_ascii_lowercase().as_str() {
        "add" => Op::Add,
        "replace" => Op::Replace,
        "remove" => Op::Remove,
        _ => return Err(format!("unsupported patch operation {op:?}")),
    };
    let path = operation
        .get("path")
        .and_then(Value::as_str)
        .ok_or("path is missing or not a string")?;
    let segments = split_pointer(path)?;
    let value = operation.get("value").cloned();
    if op != Op::Remove && value.is_none() {
        return Err(format!("{} needs a value", op.as_str()));
    }
    Ok(Operation {
        op,
        path: path.to_owned(),
        segments,
        value,
    })
}

/// Splits an RFC 6901 pointer into unescaped segments (`~1` → `/` first, then `~0` → `~`).
pub fn split_pointer(path: &str) -> Result<Vec<String>, String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("path {path:?} does not start with /"));
    };
    let segments: Vec<String> = rest
        .split('/')
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"))
        .collect();
    if segments
        .iter()
        .any(|s| s.contains("[?(") || s.contains("[*]") || (s.ends_with(']') && s.contains('[')))
    {
        return Err(format!(
            "path {path:?} uses a filter or index expression, which is not supported"
        ));
    }
    Ok(segments)
}

impl Target {
    /// Whether an object matches.
    pub fn matches(&self, object: &Value) -> bool {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let ok = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        ok(&self.group, group) && ok(&self.version, version) && ok(&self.kind, kind)
    }
}

/// Applies every matching patch to one object, in order.
pub fn apply(
    patches: &[TraitPatch],
    object: &mut Value,
    index: usize,
) -> Result<(), Box<TraitPatchError>> {
    for patch in patches {
        if !patch.target.matches(object) {
            continue;
        }
        for operation in &patch.operations {
            let result = match operation.op {
                Op::Add => add(
                    object,
                    &operation.segments,
                    operation.value.clone().unwrap_or(Value::Null),
                ),
                Op::Replace => replace(
                    object,
                    &operation.segments,
                    operation.value.clone().unwrap_or(Value::Null),
                ),
                Op::Remove => remove(object, &operation.segments),
            };
            result.map_err(|reason| {
                Box::new(TraitPatchError {
                    index,
                    resource: ResourceName::of(object),
                    source_name: patch.source.clone(),
                    op: operation.op.as_str(),
                    path: operation.path.clone(),
                    reason,
                })
            })?;
        }
    }
    Ok(())
}

fn is_index(segment: &str) -> bool {
    !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit())
}

fn index_of(segment: &str, len: usize) -> Result<usize, String> {
    if !is_index(segment) {
        return Err(format!("{segment:?} is not a list index"));
    }
    segment
        .parse::<usize>()
        .ok()
        .filter(|&i| i < len)
        .ok_or_else(|| format!("list index {segment} out of bounds"))
}

/// `add`: walks to the parent, creating missing or null maps on the way.
fn add(root: &mut Value, segments: &[String], value: Value) -> Result<(), String> {
    let Some((last, parents)) = segments.split_last() else {
        return Err("cannot add at the document root".to_owned());
    };
    let mut current = root;
    for (position, segment) in parents.iter().enumerate() {
        let next = &segments[position + 1];
        let child = match current {
            Value::Object(map) => {
                if map.get(segment).is_none_or(Value::is_null) {
                    let fresh = if next == "-" {
                        Value::Array(Vec::new())
                    } else if is_index(next) {
                        return Err(format!("list index {next} out of bounds"));
                    } else {
                        Value::Object(Map::new())
                    };
                    map.insert(segment.clone(), fresh);
                }
                map.get_mut(segment)
            }
            Value::Array(items) => {
                let i = index_of(segment, items.len())?;
                items.get_mut(i)
            }
            _ => {
                return Err(format!(
                    "cannot traverse {segment:?}: its parent is not a map or list"
                ));
            }
        };
        current = child.ok_or_else(|| format!("cannot traverse {segment:?}"))?;
    }
    match current {
        Value::Object(map) => {
            map.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(items) if last == "-" => {
            items.push(value);
            Ok(())
        }
        Value::Array(items) => {
            if !is_index(last) {
                return Err(format!("{last:?} is not a list index"));
            }
            match last.parse::<usize>() {
                Ok(i) if i <= items.len() => {
                    items.insert(i, value);
                    Ok(())
                }
                _ => Err(format!("list index {last} out of bounds")),
            }
        }
        _ => Err(format!("parent of {last:?} is not a map or list")),
    }
}

/// Walks to the parent without creating anything; `None` when something is missing.
fn parent_mut<'v>(
    root: &'v mut Value,
    parents: &[String],
) -> Result<Option<&'v mut Value>, String> {
    let mut current = root;
    for segment in parents {
        let child = match current {
            Value::Object(map) => map.get_mut(segment),
            Value::Array(items) => {
                if !is_index(segment) {
                    return Err(format!("{segment:?} is not a list index"));
                }
                segment.parse::<usize>().ok().and_then(|i| items.get_mut(i))
            }
            _ => None,
        };
        match child {
            Some(child) => current = child,
            None => return Ok(None),
        }
    }
    Ok(Some(current))
}

fn replace(root: &mut Value, segments: &[String], value: Value) -> Result<(), String> {
    let Some((last, parents)) = segments.split_last() else {
        return Err("cannot replace the document root".to_owned());
    };
    let missing = || format!("{last:?} does not exist");
    match parent_mut(root, parents)?.ok_or_else(missing)? {
        Value::Object(map) => match map.get_mut(last) {
            Some(slot) => {
                *slot = value;
                Ok(())
            }
            None => Err(missing()),
        },
        Value::Array(items) => {
            let i = index_of(last, items.len())?;
            items[i] = value;
            Ok(())
        }
        _ => Err(missing()),
    }
}

fn remove(root: &mut Value, segments: &[String]) -> Result<(), String> {
    let Some((last, parents)) = segments.split_last() else {
        return Err("cannot remove the document root".to_owned());
    };
    match parent_mut(root, parents)? {
        Some(Value::Object(map)) => {
            map.shift_remove(last);
            Ok(())
        }
        Some(Value::Array(items)) => {
            let i = index_of(last, items.len())?;
            items.remove(i);
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(op: &str, path: &str, value: Option<Value>) -> Value {
        let mut o = json!({"op": op, "path": path});
        if let Some(v) = value {
            o["value"] = v;
        }
        o
    }

    fn run(object: Value, operations: Vec<Value>) -> Result<Value, Box<TraitPatchError>> {
        let patch = json!({"target": {"kind": "ConfigMap"}, "operations": operations});
        let patches = parse([&patch]).unwrap();
        let mut object = object;
        apply(&patches, &mut object, 0)?;
        Ok(object)
    }

    fn cm(annotations: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "annotations": annotations}})
    }

    #[test]
    fn escaped_keys() {
        let out = run(
            cm(json!({"keep": "1"})),
            vec![
                op(
                    "add",
                    "/metadata/annotations/app.kubernetes.io~1name",
                    Some(json!("myapp")),
                ),
                op(
                    "add",
                    "/metadata/annotations/special~0key",
                    Some(json!("t")),
                ),
                op(
                    "add",
                    "/metadata/annotations/app~0test.io~1name",
                    Some(json!("b")),
                ),
                op("add", "/metadata/annotations/x~01", Some(json!("order"))),
            ],
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"keep": "1", "app.kubernetes.io/name": "myapp", "special~key": "t", "app~test.io/name": "b", "x~1": "order"})
        );
        let out = run(
            out,
            vec![
                op(
                    "replace",
                    "/metadata/annotations/app.kubernetes.io~1name",
                    Some(json!("other")),
                ),
                op("remove", "/metadata/annotations/special~0key", None),
            ],
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"]["app.kubernetes.io/name"],
            json!("other")
        );
        assert!(out["metadata"]["annotations"].get("special~key").is_none());
        assert_eq!(out["metadata"]["annotations"]["keep"], json!("1"));
    }

    #[test]
    fn add_creates_parents() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let out = run(
            object,
            vec![
                op(
                    "add",
                    "/metadata/annotations/openchoreo.dev~1restart-on-change",
                    Some(json!("false")),
                ),
                op("add", "/spec/containers/-", Some(json!({"name": "x"}))),
                op("add", "/data/null", Some(json!(null))),
                op("add", "/data/null/deeper", Some(json!(1))),
            ],
        )
        .unwrap();
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"openchoreo.dev/restart-on-change": "false"})
        );
        assert_eq!(out["spec"]["containers"], json!([{"name": "x"}]));
        assert_eq!(out["data"]["null"], json!({"deeper": 1}));
    }

    #[test]
    fn list_operations() {
        let object = json!({"kind": "ConfigMap", "items": [1, 2, 3]});
        let out = run(
            object.clone(),
            vec![
                op("add", "/items/0", Some(json!(0))),
                op("replace", "/items/3", Some(json!(30))),
                op("remove", "/items/1", None),
                op("add", "/items/3", Some(json!(4))),
            ],
        )
        .unwrap();
        assert_eq!(out["items"], json!([0, 2, 30, 4]));
        assert!(run(object.clone(), vec![op("add", "/items/9", Some(json!(1)))]).is_err());
        assert!(run(object.clone(), vec![op("remove", "/items/3", None)]).is_err());
        assert!(run(object, vec![op("add", "/missing/0/x", Some(json!(1)))]).is_err());
    }

    #[test]
    fn replace_and_remove_of_missing() {
        let object = cm(json!({}));
        let error = run(
            object.clone(),
            vec![op("replace", "/metadata/annotations/x", Some(json!("1")))],
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap c: object 1: replace /metadata/annotations/x: \"x\" does not exist"
        );
        let out = run(
            object.clone(),
            vec![
                op("remove", "/metadata/annotations/x", None),
                op("remove", "/no/such/parent", None),
            ],
        )
        .unwrap();
        assert_eq!(out, object);
        assert!(
            run(
                cm(json!("text")),
                vec![op("add", "/metadata/annotations/x", Some(json!("1")))]
            )
            .is_err()
        );
    }

    #[test]
    fn targets_match_group_version_kind() {
        let trait_doc = json!({
            "apiVersion": "openchoreo.dev/v1alpha1", "kind": "ClusterTrait",
            "metadata": {"name": "no-restart"},
            "spec": {"patches": [
                {"target": {"group": "", "version": "v1", "kind": "Secret"}, "operations": [op("add", "/x", Some(json!(1)))]},
                {"target": {"group": "external-secrets.io", "version": "v1", "kind": "ExternalSecret"}, "operations": [op("ADD", "/y", Some(json!(2)))]},
            ]}
        });
        let patches = parse([&trait_doc]).unwrap();
        assert_eq!(patches[0].source, "ClusterTrait no-restart, patch 1");
        let mut secret = json!({"apiVersion": "v1", "kind": "Secret"});
        let mut es_v1 = json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret"});
        let mut es_beta =
            json!({"apiVersion": "external-secrets.io/v1beta1", "kind": "ExternalSecret"});
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        for object in [&mut secret, &mut es_v1, &mut es_beta, &mut cm] {
            apply(&patches, object, 0).unwrap();
        }
        assert_eq!(secret["x"], json!(1));
        assert_eq!(es_v1["y"], json!(2));
        assert!(es_beta.get("y").is_none());
        assert!(cm.get("x").is_none());
    }

    #[test]
    fn unsupported_features_are_refused() {
        for patch in [
            json!({"target": {"kind": "A", "where": "true"}, "operations": []}),
            json!({"target": {"kind": "A"}, "operations": [op("mergeShallow", "/a", Some(json!({})))]}),
            json!({"target": {"kind": "A"}, "operations": [op("add", "/a[?(@.x=='y')]/b", Some(json!(1)))]}),
            json!({"target": {"kind": "A"}, "operations": [op("add", "/a/[*]/b", Some(json!(1)))]}),
            json!({"target": {"kind": "A"}, "operations": [op("add", "a", Some(json!(1)))]}),
            json!({"target": {"kind": "A"}, "operations": [op("add", "/a", None)]}),
            json!({"kind": "Nothing"}),
        ] {
            assert!(parse([&patch]).is_err(), "{patch}");
        }
    }
}
