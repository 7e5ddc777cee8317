//! The optimistic-concurrency JSON Patch that requests a rollout.
//!
//! For an inspected workload object, [`restart_patch`] builds the RFC 6902 document:
//!
//! 1. `test /metadata/uid` — the object is the one that was listed, not a same-name replacement;
//! 2. `test /metadata/resourceVersion` — nothing edited it since it was listed;
//! 3. `add` of the annotation under `spec.template.metadata.annotations`, creating the
//!    `annotations` map, or the whole `metadata` map, when the inspected object lacks it. The
//!    `resourceVersion` test makes that shape decision safe: if the object changed, the patch
//!    fails before any operation applies.
//!
//! The annotation key is escaped per RFC 6901 (`~` → `~0`, `/` → `~1`). The result is a
//! `serde_json::Value` array; the Kubernetes layer sends it as `application/json-patch+json`.

use serde_json::{Map, Value, json};
use thiserror::Error;

/// Why no patch can be built for an object.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PatchError {
    /// `metadata.uid` is missing, not a string, empty or malformed.
    #[error("the workload's metadata.uid is missing or malformed")]
    MissingUid,
    /// `metadata.resourceVersion` is missing, not a string, empty or malformed.
    #[error("the workload's metadata.resourceVersion is missing or malformed")]
    MissingResourceVersion,
    /// `spec.template` is missing or not an object, or its `metadata`/`annotations` is not an object.
    #[error("the workload's pod template is missing or malformed")]
    MalformedTemplate,
}

/// The longest uid or resourceVersion accepted as well-formed.
const MAX_IDENTITY_LEN: usize = 128;

/// Escapes one JSON Pointer reference token (RFC 6901).
pub fn escape_pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// The listed identity of a workload: its uid and resourceVersion, both well-formed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity<'a> {
    /// `metadata.uid`.
    pub uid: &'a str,
    /// `metadata.resourceVersion`.
    pub resource_version: &'a str,
}

/// Reads the uid and resourceVersion of a listed object; an error when either is missing or
/// malformed (not a non-empty string of printable characters, at most 128 long).
pub fn identity(object: &Value) -> Result<Identity<'_>, PatchError> {
    let metadata = object.get("metadata");
    let field = |name: &str| {
        metadata
            .and_then(|m| m.get(name))
            .and_then(Value::as_str)
            .filter(|v| well_formed(v))
    };
    let uid = field("uid").ok_or(PatchError::MissingUid)?;
    let resource_version = field("resourceVersion").ok_or(PatchError::MissingResourceVersion)?;
    Ok(Identity {
        uid,
        resource_version,
    })
}

fn well_formed(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_IDENTITY_LEN
        && value.chars().all(|c| c.is_ascii_graphic())
}

/// Builds the restart patch for an inspected workload object.
pub fn restart_patch(
    object: &Value,
    annotation_key: &str,
    timestamp: &str,
) -> Result<Value, PatchError> {
    let Identity {
        uid,
        resource_version,
    } = identity(object)?;
    let template = object
        .get("spec")
        .and_then(|spec| spec.get("template"))
        .filter(|t| t.is_object())
        .ok_or(PatchError::MalformedTemplate)?;
    let add = match present(template.get("metadata")) {
        None => json!({
            "op": "add",
            "path": "/spec/template/metadata",
            "value": { "annotations": { annotation_key: timestamp } },
        }),
        Some(metadata) if metadata.is_object() => match present(metadata.get("annotations")) {
            None => json!({
                "op": "add",
                "path": "/spec/template/metadata/annotations",
                "value": { annotation_key: timestamp },
            }),
            Some(annotations) if annotations.is_object() => json!({
                "op": "add",
                "path": format!(
                    "/spec/template/metadata/annotations/{}",
                    escape_pointer_token(annotation_key)
                ),
                "value": timestamp,
            }),
            Some(_) => return Err(PatchError::MalformedTemplate),
        },
        Some(_) => return Err(PatchError::MalformedTemplate),
    };
    let mut test_uid = Map::new();
    test_uid.insert("op".into(), "test".into());
    test_uid.insert("path".into(), "/metadata/uid".into());
    test_uid.insert("value".into(), uid.into());
    Ok(json!([
        test_uid,
        { "op": "test", "path": "/metadata/resourceVersion", "value": resource_version },
        add,
    ]))
}

/// A JSON value that is present and not `null` (the API server omits or nulls empty maps).
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "krypton.io/restarted-at";
    const TS: &str = "2026-11-29T18:00:00.000Z";

    fn workload(template: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "42"},
            "spec": {"replicas": 1, "template": template}
        })
    }

    fn apply(object: &Value, patch: &Value) -> Result<Value, json_patch::PatchError> {
        let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
        let mut target = object.clone();
        json_patch::patch(&mut target, &patch)?;
        Ok(target)
    }

    /// Applies the patch and checks that exactly the one annotation changed.
    fn sets_exactly_the_annotation(template: Value) {
        let object = workload(template);
        let patch = restart_patch(&object, KEY, TS).unwrap();
        let patched = apply(&object, &patch).unwrap();
        assert_eq!(
            patched["spec"]["template"]["metadata"]["annotations"][KEY],
            TS
        );
        let mut expected = object.clone();
        let template = &mut expected["spec"]["template"];
        if template.get("metadata").is_none_or(Value::is_null) {
            template["metadata"] = json!({});
        }
        if template["metadata"]
            .get("annotations")
            .is_none_or(Value::is_null)
        {
            template["metadata"]["annotations"] = json!({});
        }
        template["metadata"]["annotations"][KEY] = json!(TS);
        assert_eq!(patched, expected);
    }

    #[test]
    fn template_shapes() {
        sets_exactly_the_annotation(json!({"spec": {"containers": []}}));
        sets_exactly_the_annotation(json!({"metadata": null, "spec": {}}));
        sets_exactly_the_annotation(json!({"metadata": {"labels": {"app": "web"}}, "spec": {}}));
        sets_exactly_the_annotation(json!({"metadata": {"annotations": null}, "spec": {}}));
        sets_exactly_the_annotation(
            json!({"metadata": {"annotations": {"a": "b", KEY: "old"}}, "spec": {}}),
        );
    }

    #[test]
    fn patch_document_shape() {
        let object = workload(json!({"metadata": {"annotations": {}}}));
        assert_eq!(
            restart_patch(&object, "example.com/a~b", TS).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/spec/template/metadata/annotations/example.com~1a~0b", "value": TS}
            ])
        );
    }

    #[test]
    fn changed_uid_or_resource_version_fails_to_apply() {
        let object = workload(json!({"metadata": {"annotations": {}}}));
        let patch = restart_patch(&object, KEY, TS).unwrap();
        let mut replaced = object.clone();
        replaced["metadata"]["uid"] = json!("u-2");
        assert!(apply(&replaced, &patch).is_err());
        let mut edited = object.clone();
        edited["metadata"]["resourceVersion"] = json!("43");
        assert!(apply(&edited, &patch).is_err());
        // An edit that removed the template metadata is caught by the resourceVersion test,
        // not by the shape of the add.
        let mut reshaped = workload(json!({}));
        reshaped["metadata"]["resourceVersion"] = json!("43");
        assert!(apply(&reshaped, &patch).is_err());
    }

    #[test]
    fn missing_or_malformed_identity_is_an_error() {
        let cases = [
            (
                json!({"metadata": {"resourceVersion": "1"}}),
                PatchError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "", "resourceVersion": "1"}}),
                PatchError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": 5, "resourceVersion": "1"}}),
                PatchError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "a b", "resourceVersion": "1"}}),
                PatchError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "u"}}),
                PatchError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": 7}}),
                PatchError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "x".repeat(129)}}),
                PatchError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}}),
                PatchError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": []}}),
                PatchError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": {"metadata": "x"}}}),
                PatchError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": {"metadata": {"annotations": []}}}}),
                PatchError::MalformedTemplate,
            ),
            (json!(null), PatchError::MissingUid),
        ];
        for (object, error) in cases {
            assert_eq!(restart_patch(&object, KEY, TS), Err(error), "{object}");
        }
    }
}
