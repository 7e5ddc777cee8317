//! The optimistic-concurrency JSON Patch that requests a rollout.
//!
//! A listed workload object is inspected once ([`RestartPatch::inspect`]): its uid and
//! resourceVersion become the patch's [`Preconditions`], and the shape of its pod template decides
//! where the annotation is added. [`RestartPatch::document`] then builds the RFC 6902 document:
//!
//! 1. `test /metadata/uid` — the object is the one that was listed, not a same-name replacement;
//! 2. `test /metadata/resourceVersion` — nothing edited it since it was listed;
//! 3. `add` of the annotation under `spec.template.metadata.annotations`, creating the
//!    `annotations` map, or the whole `metadata` map, when the inspected object lacks it. The
//!    `resourceVersion` test makes that shape decision safe: if the object changed, the patch
//!    fails before any operation applies;
//! 4. for a workload whose roll `rollsafe watch` holds (its `rollsafe.dev/pending` mark), the
//!    operations that settle the hold, as [`crate::pending`] says
//!    ([`RestartPatch::document_settling`]): the restart rolls the pods with that content, so
//!    the controller must not roll them for it again.
//!
//! The document is a typed [`json_patch::Patch`]; the annotation key is escaped per RFC 6901
//! (`~` → `~0`, `/` → `~1`) by its JSON Pointer. The Kubernetes layer sends it as
//! `application/json-patch+json`.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, TestOperation};
use serde_json::{Map, Value};
use thiserror::Error;

use crate::name::AnnotationKey;
use crate::pending::Hold;

/// Why no restart patch can be built for a listed object.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum InspectError {
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

impl InspectError {
    /// A static category, for logs.
    pub fn code(self) -> &'static str {
        match self {
            InspectError::MissingUid => "uid",
            InspectError::MissingResourceVersion => "resource_version",
            InspectError::MalformedTemplate => "template",
        }
    }
}

/// The longest uid or resourceVersion accepted as well-formed.
const MAX_IDENTITY_LEN: usize = 128;

/// The uid and resourceVersion a patch tests before it changes anything (as kube-core's
/// `Preconditions`). Never part of a result, an audit record or a log line.
#[derive(Clone, PartialEq, Eq)]
pub struct Preconditions {
    uid: String,
    resource_version: String,
}

impl std::fmt::Debug for Preconditions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Preconditions(<internal>)")
    }
}

impl Preconditions {
    /// Reads the uid and resourceVersion of a listed object; an error when either is missing or
    /// malformed (not a non-empty string of printable characters, at most 128 long).
    pub fn of(object: &Value) -> Result<Self, InspectError> {
        let metadata = object.get("metadata");
        let field = |name: &str| {
            metadata
                .and_then(|m| m.get(name))
                .and_then(Value::as_str)
                .filter(|v| well_formed(v))
        };
        let uid = field("uid").ok_or(InspectError::MissingUid)?;
        let resource_version =
            field("resourceVersion").ok_or(InspectError::MissingResourceVersion)?;
        Ok(Self {
            uid: uid.to_owned(),
            resource_version: resource_version.to_owned(),
        })
    }

    /// The inspected `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        &self.resource_version
    }

    /// The inspected `metadata.uid` (for an Event's object reference; never printed).
    pub fn uid(&self) -> &str {
        &self.uid
    }
}

fn well_formed(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= MAX_IDENTITY_LEN
        && value.chars().all(|c| c.is_ascii_graphic())
}

/// Which maps the inspected pod template already has on the way to the annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TemplateShape {
    /// No `spec.template.metadata` (or `null`): add the whole map.
    NoMetadata,
    /// `metadata` without `annotations` (or `null`): add the annotations map.
    NoAnnotations,
    /// `annotations` is a map: add the one key.
    Annotations,
}

/// What an inspected workload needs for its restart patch: the preconditions and the template
/// shape. Small, and free of the object itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartPatch {
    preconditions: Preconditions,
    shape: TemplateShape,
    /// The fields from the object down to the pod template.
    template: &'static [&'static str],
}

/// Where the pod template of a Deployment, StatefulSet or DaemonSet is.
const POD_TEMPLATE: &[&str] = &["spec", "template"];

impl RestartPatch {
    /// Inspects a listed workload object.
    pub fn inspect(object: &Value) -> Result<Self, InspectError> {
        Self::inspect_at(object, POD_TEMPLATE)
    }

    /// Inspects an object whose pod template is at `template` (the fields from the object
    /// down, e.g. a CronJob's `spec`, `jobTemplate`, `spec`, `template`).
    pub fn inspect_at(
        object: &Value,
        template: &'static [&'static str],
    ) -> Result<Self, InspectError> {
        let preconditions = Preconditions::of(object)?;
        let path = template;
        let template = path
            .iter()
            .try_fold(object, |value, field| value.get(*field))
            .filter(|t| t.is_object())
            .ok_or(InspectError::MalformedTemplate)?;
        let shape = match present(template.get("metadata")) {
            None => TemplateShape::NoMetadata,
            Some(metadata) if metadata.is_object() => match present(metadata.get("annotations")) {
                None => TemplateShape::NoAnnotations,
                Some(annotations) if annotations.is_object() => TemplateShape::Annotations,
                Some(_) => return Err(InspectError::MalformedTemplate),
            },
            Some(_) => return Err(InspectError::MalformedTemplate),
        };
        Ok(Self {
            preconditions,
            shape,
            template: path,
        })
    }

    /// The preconditions the patch tests.
    pub fn preconditions(&self) -> &Preconditions {
        &self.preconditions
    }

    /// The JSON Patch setting `key` to `value`.
    pub fn document(&self, key: &AnnotationKey, value: &str) -> Patch {
        let test = |field: &str, expected: &str| {
            PatchOperation::Test(TestOperation {
                path: PointerBuf::from_tokens(["metadata", field]),
                value: Value::String(expected.to_owned()),
            })
        };
        let one =
            |key: &str, value: Value| Value::Object(Map::from_iter([(key.to_owned(), value)]));
        let annotation = Value::String(value.to_owned());
        let (below, value) = match self.shape {
            TemplateShape::NoMetadata => (
                &["metadata"][..],
                one("annotations", one(key.as_str(), annotation)),
            ),
            TemplateShape::NoAnnotations => (
                &["metadata", "annotations"][..],
                one(key.as_str(), annotation),
            ),
            TemplateShape::Annotations => {
                (&["metadata", "annotations", key.as_str()][..], annotation)
            }
        };
        let path = PointerBuf::from_tokens(self.template.iter().chain(below).copied());
        Patch(vec![
            test("uid", &self.preconditions.uid),
            test("resourceVersion", &self.preconditions.resource_version),
            PatchOperation::Add(AddOperation { path, value }),
        ])
    }
}

impl RestartPatch {
    /// [`RestartPatch::document`], then, for a workload whose roll `rollsafe watch` holds, the
    /// operations settling that hold ([`Hold::settlement`]): the restart rolls the pods with the
    /// content the hold was for, so the controller must not roll them again for it. The
    /// resourceVersion test covers the hold as read.
    pub fn document_settling(
        &self,
        key: &AnnotationKey,
        value: &str,
        hold: Option<&Hold>,
    ) -> Patch {
        let Patch(mut operations) = self.document(key, value);
        if let Some(hold) = hold {
            let annotations: Vec<&str> = self
                .template
                .iter()
                .copied()
                .chain(["metadata", "annotations"])
                .collect();
            operations.extend(hold.settlement(&annotations));
        }
        Patch(operations)
    }
}

/// Inspects `object` and builds its restart patch setting `key` to `value`.
pub fn restart_patch(
    object: &Value,
    key: &AnnotationKey,
    value: &str,
) -> Result<Patch, InspectError> {
    RestartPatch::inspect(object).map(|patch| patch.document(key, value))
}

/// A JSON value that is present and not `null` (the API server omits or nulls empty maps).
fn present(value: Option<&Value>) -> Option<&Value> {
    value.filter(|v| !v.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEY: &str = "krypton.io/restarted-at";

    fn key(text: &str) -> AnnotationKey {
        text.parse().unwrap()
    }
    const TS: &str = "2026-11-29T18:00:00.000Z";

    fn workload(template: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "u-1", "resourceVersion": "42"},
            "spec": {"replicas": 1, "template": template}
        })
    }

    fn apply(object: &Value, patch: &Patch) -> Result<Value, json_patch::PatchError> {
        let mut target = object.clone();
        json_patch::patch(&mut target, patch)?;
        Ok(target)
    }

    /// Applies the patch and checks that exactly the one annotation changed.
    fn sets_exactly_the_annotation(template: Value) {
        let object = workload(template);
        let patch = restart_patch(&object, &key(KEY), TS).unwrap();
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
    fn each_shape_adds_the_smallest_map() {
        let table = [
            (
                json!({}),
                "/spec/template/metadata",
                json!({"annotations": {KEY: TS}}),
            ),
            (
                json!({"metadata": null}),
                "/spec/template/metadata",
                json!({"annotations": {KEY: TS}}),
            ),
            (
                json!({"metadata": {}}),
                "/spec/template/metadata/annotations",
                json!({KEY: TS}),
            ),
            (
                json!({"metadata": {"annotations": null}}),
                "/spec/template/metadata/annotations",
                json!({KEY: TS}),
            ),
            (
                json!({"metadata": {"annotations": {}}}),
                "/spec/template/metadata/annotations/krypton.io~1restarted-at",
                json!(TS),
            ),
        ];
        for (template, path, value) in table {
            let patch = restart_patch(&workload(template.clone()), &key(KEY), TS).unwrap();
            let add = serde_json::to_value(&patch.0[2]).unwrap();
            assert_eq!(
                add,
                json!({"op": "add", "path": path, "value": value}),
                "{template}"
            );
        }
    }

    #[test]
    fn preconditions_never_print() {
        let patch = RestartPatch::inspect(&workload(json!({}))).unwrap();
        let printed = format!("{patch:?}");
        assert!(
            !printed.contains("u-1") && !printed.contains("42"),
            "{printed}"
        );
        assert_eq!(patch.preconditions().resource_version(), "42");
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
            serde_json::to_value(restart_patch(&object, &key("example.com/a_b"), TS).unwrap())
                .unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "u-1"},
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/spec/template/metadata/annotations/example.com~1a_b", "value": TS}
            ])
        );
    }

    #[test]
    fn changed_uid_or_resource_version_fails_to_apply() {
        let object = workload(json!({"metadata": {"annotations": {}}}));
        let patch = restart_patch(&object, &key(KEY), TS).unwrap();
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
                InspectError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "", "resourceVersion": "1"}}),
                InspectError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": 5, "resourceVersion": "1"}}),
                InspectError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "a b", "resourceVersion": "1"}}),
                InspectError::MissingUid,
            ),
            (
                json!({"metadata": {"uid": "u"}}),
                InspectError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": 7}}),
                InspectError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "x".repeat(129)}}),
                InspectError::MissingResourceVersion,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}}),
                InspectError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": []}}),
                InspectError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": {"metadata": "x"}}}),
                InspectError::MalformedTemplate,
            ),
            (
                json!({"metadata": {"uid": "u", "resourceVersion": "1"}, "spec": {"template": {"metadata": {"annotations": []}}}}),
                InspectError::MalformedTemplate,
            ),
            (json!(null), InspectError::MissingUid),
        ];
        for (object, error) in cases {
            assert_eq!(
                restart_patch(&object, &key(KEY), TS),
                Err(error),
                "{object}"
            );
        }
    }

    #[test]
    fn a_restart_settles_the_hold_the_controller_keeps() {
        use crate::pending::{HeldBy, Hold};
        let held = |template: Value, approved: bool| {
            let mut object = workload(template);
            let mut annotations = json!({
                "rollsafe.dev/watch": "true",
                "rollsafe.dev/config-record": "v1:old;a=1",
                "rollsafe.dev/pending": "window until=2026-12-07T08:00:00Z digest=v1:new",
            });
            if approved {
                annotations["rollsafe.dev/pending"] =
                    json!("approval since=2026-12-03T06:00:00Z digest=v1:new");
                annotations["rollsafe.dev/approved"] = json!("v1:new");
            }
            object["metadata"]["annotations"] = annotations;
            object
        };
        for template in [
            json!({"spec": {}}),
            json!({"metadata": {}, "spec": {}}),
            json!({"metadata": {"annotations": {"a": "b"}}, "spec": {}}),
        ] {
            for approved in [false, true] {
                let object = held(template.clone(), approved);
                let hold = Hold::of(&object).unwrap();
                let by = if approved {
                    HeldBy::Approval
                } else {
                    HeldBy::Window
                };
                assert_eq!((hold.held_by(), hold.digest()), (by, "v1:new"));
                let patch = RestartPatch::inspect(&object).unwrap();
                let document = patch.document_settling(&key(KEY), TS, Some(&hold));
                let patched = apply(&object, &document).unwrap();
                let template = &patched["spec"]["template"]["metadata"]["annotations"];
                assert_eq!(template[KEY], TS);
                assert_eq!(template["rollsafe.dev/config-hash"], "v1:new");
                let metadata = &patched["metadata"]["annotations"];
                assert_eq!(metadata["rollsafe.dev/config-record"], "v1:new");
                assert_eq!(metadata["rollsafe.dev/watch"], "true");
                assert!(metadata.get("rollsafe.dev/pending").is_none());
                assert!(metadata.get("rollsafe.dev/approved").is_none());
                // The restart's own part is unchanged: the same tests, the same first add.
                let Patch(settling) = &document;
                let Patch(plain) = patch.document(&key(KEY), TS);
                assert_eq!(settling[..3], plain[..]);
            }
        }
        // No mark, or one that does not read: nothing to settle, the plain restart patch.
        let plain = workload(json!({"spec": {}}));
        assert_eq!(Hold::of(&plain), None);
        let mut odd = plain.clone();
        odd["metadata"]["annotations"] = json!({"rollsafe.dev/pending": "later"});
        assert_eq!(Hold::of(&odd), None);
        let patch = RestartPatch::inspect(&plain).unwrap();
        assert_eq!(
            patch.document_settling(&key(KEY), TS, None),
            patch.document(&key(KEY), TS)
        );
    }
}
