//! The annotation on a DaemonSet's or CronJob's pod template, and the marker that lets every
//! later render see the object as it was rendered, before the annotation was written.
//!
//! A DaemonSet or CronJob rendered beside a Deployment or StatefulSet is part of their hashes
//! as an ordinary object (upstream's rule: its whole body but the top-level `metadata`), pod
//! template annotations included. Writing our annotation on it must not change their values:
//! not in the render that writes it (the hashes see the input, where it is not written yet), and
//! not in a render of that output either (a second render must give the same output). A pod
//! template's annotations cannot be told apart from what the chart rendered (an empty
//! `annotations: {}` is common in charts), so the object carries a marker,
//! [`POD_TEMPLATE_STAMP`] on its own `metadata.annotations` — left out of every hash and every
//! digest, as all top-level metadata is — saying which value was written and what its place
//! held before. While the pod template still holds that value, every hash and digest sees the
//! object with the annotation taken back ([`unstamped`]), byte for byte as it was rendered; once
//! anything else changed it, the object is seen as it is.
//!
//! Marker format: one compact JSON object, `{"hash":"<value written>"}` when the annotations map
//! existed without the key, plus `"was":<the key's previous value>` when it held one, or
//! `"missing":"<field>"` / `"null":"<field>"` when that map on the way (e.g.
//! `spec.template.metadata`) was missing or null and was created with nothing but the way down
//! to the annotation.

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::{Edit, STATE_PATH, edit_annotation};
use crate::annotations::{DP_RESOURCE_HASH, POD_TEMPLATE_STAMP};

/// The maps from `spec` down to a pod template's annotations: (key, field named in errors).
pub(crate) type TemplatePath = &'static [(&'static str, &'static str)];

/// What the annotation's place held before it was written.
#[derive(Debug, Clone, PartialEq)]
enum Before {
    /// The annotations map existed without the key.
    Absent,
    /// The key held this value.
    Was(Value),
    /// The map at this depth of the path was missing.
    Missing(usize),
    /// The map at this depth of the path was null.
    Null(usize),
}

#[derive(Debug, Clone, PartialEq)]
struct Marker {
    hash: String,
    before: Before,
}

impl Marker {
    fn encode(&self, path: TemplatePath) -> String {
        let mut record = Map::new();
        record.insert("hash".to_owned(), Value::String(self.hash.clone()));
        match &self.before {
            Before::Absent => {}
            Before::Was(value) => {
                record.insert("was".to_owned(), value.clone());
            }
            Before::Missing(depth) => {
                record.insert("missing".to_owned(), Value::from(path[*depth].1));
            }
            Before::Null(depth) => {
                record.insert("null".to_owned(), Value::from(path[*depth].1));
            }
        }
        Value::Object(record).to_string()
    }

    fn parse(text: &str, path: TemplatePath) -> Option<Self> {
        let Value::Object(record) = serde_json::from_str::<Value>(text).ok()? else {
            return None;
        };
        let hash = record.get("hash")?.as_str()?.to_owned();
        let depth = |field: &Value| {
            let field = field.as_str()?;
            path.iter().position(|&(_, f)| f == field)
        };
        let before = match (
            record.len(),
            record.get("was"),
            record.get("missing"),
            record.get("null"),
        ) {
            (1, None, None, None) => Before::Absent,
            (2, Some(value), None, None) => Before::Was(value.clone()),
            (2, None, Some(field), None) => Before::Missing(depth(field)?),
            (2, None, None, Some(field)) => Before::Null(depth(field)?),
            _ => return None,
        };
        Some(Self { hash, before })
    }
}

/// What the annotation's place holds now, under `spec`; `None` when a field on the way is
/// neither a map, missing nor null.
fn current(spec: &Map<String, Value>, path: TemplatePath) -> Option<Before> {
    let mut map = spec;
    for (depth, &(key, _)) in path.iter().enumerate() {
        match map.get(key) {
            None => return Some(Before::Missing(depth)),
            Some(Value::Null) => return Some(Before::Null(depth)),
            Some(Value::Object(next)) => map = next,
            Some(_) => return None,
        }
    }
    Some(match map.get(DP_RESOURCE_HASH) {
        Some(value) => Before::Was(value.clone()),
        None => Before::Absent,
    })
}

/// The object's marker, when it still describes the object: the pod template holds the value
/// it says was written, and a map it says was created holds nothing but the way down to it.
fn valid_marker(object: &Map<String, Value>, path: TemplatePath) -> Option<Marker> {
    let text = object
        .get("metadata")?
        .get("annotations")?
        .get(POD_TEMPLATE_STAMP)?
        .as_str()?;
    let marker = Marker::parse(text, path)?;
    let mut map = object.get("spec")?.as_object()?;
    let created = match marker.before {
        Before::Missing(depth) | Before::Null(depth) => depth,
        Before::Absent | Before::Was(_) => path.len(),
    };
    for (depth, &(key, _)) in path.iter().enumerate() {
        if depth > created && map.len() != 1 {
            return None;
        }
        map = map.get(key)?.as_object()?;
    }
    if created < path.len() && map.len() != 1 {
        return None;
    }
    match map.get(DP_RESOURCE_HASH) {
        Some(Value::String(value)) if *value == marker.hash => Some(marker),
        _ => None,
    }
}

/// Takes the annotation back under `spec` as `before` says (the marker checked).
fn undo(spec: &mut Map<String, Value>, path: TemplatePath, before: &Before) {
    let stop = match before {
        Before::Missing(depth) | Before::Null(depth) => *depth,
        Before::Absent | Before::Was(_) => path.len(),
    };
    let mut map = spec;
    for &(key, _) in &path[..stop] {
        match map.get_mut(key).and_then(Value::as_object_mut) {
            Some(next) => map = next,
            None => return,
        }
    }
    match before {
        Before::Absent => {
            map.shift_remove(DP_RESOURCE_HASH);
        }
        Before::Was(value) => {
            map.insert(DP_RESOURCE_HASH.to_owned(), value.clone());
        }
        Before::Missing(depth) => {
            map.shift_remove(path[*depth].0);
        }
        Before::Null(depth) => {
            map.insert(path[*depth].0.to_owned(), Value::Null);
        }
    }
}

/// The object as every hash and digest sees it: with the annotation taken back when its marker
/// still describes it, else as it is.
pub(crate) fn unstamped<'m>(
    object: &'m Map<String, Value>,
    path: TemplatePath,
) -> Cow<'m, Map<String, Value>> {
    let Some(marker) = valid_marker(object, path) else {
        return Cow::Borrowed(object);
    };
    let mut copy = object.clone();
    if let Some(spec) = copy.get_mut("spec").and_then(Value::as_object_mut) {
        undo(spec, path, &marker.before);
    }
    Cow::Owned(copy)
}

/// Writes `edit` on the pod template of a DaemonSet or CronJob (already checked), with its
/// marker: a value is written with a marker of what its place held before the first value
/// this feature wrote (a valid marker is carried on); a removal takes back only a value this
/// feature wrote, as its marker says, and the marker with it. Fails with the field that is not
/// a map.
pub(crate) fn write(
    object: &mut Map<String, Value>,
    path: TemplatePath,
    edit: &Edit,
) -> Result<(), &'static str> {
    let marker = valid_marker(object, path);
    match edit {
        Edit::Keep => Ok(()),
        Edit::Set(hash) => {
            let spec = object
                .get_mut("spec")
                .and_then(Value::as_object_mut)
                .ok_or("spec")?;
            let before = match marker {
                Some(marker) => marker.before,
                None => current(spec, path).ok_or("spec")?,
            };
            edit_annotation(spec, path, DP_RESOURCE_HASH, edit)?;
            let marker = Marker {
                hash: hash.clone(),
                before,
            };
            edit_annotation(
                object,
                &STATE_PATH,
                POD_TEMPLATE_STAMP,
                &Edit::Set(marker.encode(path)),
            )
        }
        Edit::Remove => {
            let Some(marker) = marker else {
                return Ok(());
            };
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                undo(spec, path, &marker.before);
            }
            edit_annotation(object, &STATE_PATH, POD_TEMPLATE_STAMP, &Edit::Remove)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DAEMON_SET: TemplatePath = &[
        ("template", "spec.template"),
        ("metadata", "spec.template.metadata"),
        ("annotations", "spec.template.metadata.annotations"),
    ];

    fn object(spec: Value) -> Map<String, Value> {
        let Value::Object(map) = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": spec})
        else {
            unreachable!()
        };
        map
    }

    fn stamped(map: &Map<String, Value>, hash: &str) -> Map<String, Value> {
        let mut out = map.clone();
        write(&mut out, DAEMON_SET, &Edit::Set(hash.to_owned())).unwrap();
        out
    }

    /// The object seen without top-level metadata, where the marker is.
    fn seen(map: &Map<String, Value>) -> Map<String, Value> {
        let mut seen = unstamped(map, DAEMON_SET).into_owned();
        seen.shift_remove("metadata");
        seen
    }

    #[test]
    fn every_shape_is_seen_as_it_was_rendered() {
        let shapes = [
            json!({}),
            json!({"template": null}),
            json!({"template": {}}),
            json!({"template": {"metadata": null}}),
            json!({"template": {"metadata": {}}}),
            json!({"template": {"metadata": {"annotations": null}}}),
            json!({"template": {"metadata": {"annotations": {}}}}),
            json!({"template": {"metadata": {"annotations": {"x": "y"}}, "spec": {}}}),
            json!({"template": {"metadata": {"annotations": {DP_RESOURCE_HASH: "theirs"}}}}),
            json!({"template": {"metadata": {"annotations": {DP_RESOURCE_HASH: 7}}}}),
        ];
        for spec in shapes {
            let rendered = object(spec.clone());
            let mut plain = rendered.clone();
            plain.shift_remove("metadata");
            let once = stamped(&rendered, "4567");
            assert_eq!(
                once.get("spec")
                    .and_then(|s| s.pointer("/template/metadata/annotations"))
                    .and_then(|a| a.get(DP_RESOURCE_HASH)),
                Some(&json!("4567")),
                "{spec}"
            );
            assert_eq!(seen(&once), plain, "{spec}");
            // Written again (the same value, or a new one), still seen as rendered; the same
            // value changes nothing.
            assert_eq!(stamped(&once, "4567"), once, "{spec}");
            let twice = stamped(&once, "89bd");
            assert_eq!(seen(&twice), plain, "{spec}");
            // A removal gives the rendered object back, marker and all.
            let mut removed = twice.clone();
            write(&mut removed, DAEMON_SET, &Edit::Remove).unwrap();
            let mut expected = rendered.clone();
            expected["metadata"]["annotations"] = json!({});
            assert_eq!(removed, expected, "{spec}");
        }
    }

    #[test]
    fn a_changed_object_is_seen_as_it_is() {
        let once = stamped(&object(json!({"template": {"spec": {}}})), "4567");
        // Another value in the annotation's place.
        let mut other = once.clone();
        other["spec"]["template"]["metadata"]["annotations"][DP_RESOURCE_HASH] = json!("5678");
        assert_eq!(unstamped(&other, DAEMON_SET), Cow::Borrowed(&other));
        // Something else added to a map the render created.
        let mut added = once.clone();
        added["spec"]["template"]["metadata"]["labels"] = json!({"a": "b"});
        assert_eq!(unstamped(&added, DAEMON_SET), Cow::Borrowed(&added));
        // A removal leaves a value it did not write.
        let mut removed = other.clone();
        write(&mut removed, DAEMON_SET, &Edit::Remove).unwrap();
        assert_eq!(removed, other);
        // An unreadable marker is no marker.
        for bad in [
            "",
            "{}",
            "[1]",
            r#"{"hash":"4567","missing":"nowhere"}"#,
            r#"{"hash":"4567","was":1,"null":"spec.template"}"#,
        ] {
            let mut broken = once.clone();
            broken["metadata"]["annotations"][POD_TEMPLATE_STAMP] = json!(bad);
            assert_eq!(
                unstamped(&broken, DAEMON_SET),
                Cow::Borrowed(&broken),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_marker_says_what_was_there() {
        let marker = |spec: Value| {
            let once = stamped(&object(spec), "4567");
            once["metadata"]["annotations"][POD_TEMPLATE_STAMP]
                .as_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            marker(json!({})),
            r#"{"hash":"4567","missing":"spec.template"}"#
        );
        assert_eq!(
            marker(json!({"template": {"metadata": null}})),
            r#"{"hash":"4567","null":"spec.template.metadata"}"#
        );
        assert_eq!(
            marker(json!({"template": {"metadata": {"annotations": {}}}})),
            r#"{"hash":"4567"}"#
        );
        assert_eq!(
            marker(json!({"template": {"metadata": {"annotations": {DP_RESOURCE_HASH: "x"}}}})),
            r#"{"hash":"4567","was":"x"}"#
        );
    }
}
