//! Decoding a request's object into its kind's Go type, as the API server's codec does
//! (`sigs.k8s.io/json` under the serializer's strict mode):
//!
//! - a value of the wrong JSON type is the decoder's error in Go's words (`json: cannot
//!   unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`), so no
//!   client that lists the namespace later fails to read what was stored;
//! - a field the type does not declare is collected with its path (`spec.ports[0].nodeport`),
//!   for `fieldValidation` to refuse, warn about or ignore — and it is dropped from the object in
//!   every mode, as decoding into a Go struct drops it;
//! - Go's leniencies are kept: `null` is "not set" anywhere, numbers and strings both make a
//!   quantity or an int-or-string.
//!
//! The Go types are `k8s-openapi`'s (their field lists are the API's), walked by a deserializer
//! over the JSON value that knows where it is: the Go struct being filled, the field path, the
//! strict path. Nothing here allocates the typed object beyond what serde builds and drops.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::query::Query;
use crate::resources::ResId;
use crate::route::Verb;
use crate::status::StatusError;

/// `?fieldValidation=`: what to do with fields the type does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop them silently.
    Ignore,
    /// Drop them and say so in `Warning` headers (the default, as on the real server).
    #[default]
    Warn,
    /// Refuse the request (400), as kubectl asks.
    Strict,
}

impl FieldValidation {
    /// The directive of a write, or the real 422 on the verb's options kind.
    pub fn of(q: &Query, verb: Verb) -> Result<Self, StatusError> {
        match q.get("fieldValidation").unwrap_or("") {
            "" | "Warn" => Ok(Self::Warn),
            "Ignore" => Ok(Self::Ignore),
            "Strict" => Ok(Self::Strict),
            other => {
                let kind = match verb {
                    Verb::Create => "CreateOptions",
                    Verb::Update => "UpdateOptions",
                    _ => "PatchOptions",
                };
                let detail = format!(
                    "Unsupported value: {other:?}: supported values: \"Ignore\", \"Strict\", \"Warn\""
                );
                Err(StatusError::new(
                    422,
                    "Invalid",
                    &format!("{kind}.meta.k8s.io \"\" is invalid: fieldValidation: {detail}"),
                    Some(serde_json::json!({"group": "meta.k8s.io", "kind": kind,
                        "causes": [{"reason": "FieldValueNotSupported", "message": detail, "field": "fieldValidation"}]})),
                ))
            }
        }
    }
}

/// Decodes `value` as its resource's Go type: `Ok` with the paths of undeclared fields (in
/// document order), or `Err` with the decoder's Go message. Resources without a Go type here
/// (custom resources, reviews) decode to no unknown fields.
pub fn decode(res: ResId, value: &Value) -> Result<Vec<String>, String> {
    match crate::resources::def(res).go_type {
        Some(decode) => decode(value),
        None => Ok(Vec::new()),
    }
}

/// Removes the fields at `paths` (strict paths, as [`decode`] reports them) from `value`.
pub fn drop_fields(value: &mut Value, paths: &[String]) {
    for path in paths {
        remove_at(value, &split_path(path));
    }
}

fn remove_at(value: &mut Value, segments: &[Segment]) {
    match segments {
        [] => {}
        [Segment::Field(name)] => {
            if let Some(map) = value.as_object_mut() {
                map.shift_remove(name.as_str());
            }
        }
        [first, rest @ ..] => {
            let next = match first {
                Segment::Field(name) => value.get_mut(name.as_str()),
                Segment::Index(i) => value.get_mut(*i),
            };
            if let Some(next) = next {
                remove_at(next, rest);
            }
        }
    }
}

/// Whether the strict path exists in `value`.
pub fn has_path(value: &Value, path: &str) -> bool {
    let mut at = value;
    for segment in split_path(path) {
        let next = match segment {
            Segment::Field(name) => at.get(name.as_str()),
            Segment::Index(i) => at.get(i),
        };
        match next {
            Some(next) => at = next,
            None => return false,
        }
    }
    true
}

/// A field the strict decoder reports: one the type does not declare, or one given more than
/// once in the same object (the last value is the one kept, as Go keeps it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrictField {
    /// Not declared by the type (dropped from the object).
    Unknown(String),
    /// A key repeated in one JSON object; reported once per path.
    Duplicate(String),
}

impl fmt::Display for StrictField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unknown(path) => write!(f, "unknown field {path:?}"),
            Self::Duplicate(path) => write!(f, "duplicate field {path:?}"),
        }
    }
}

/// The strict findings of a JSON body, in the order Go's decoder meets them: `unknown` (the
/// paths [`decode`] reported) and every key repeated in an object, each at the point in the
/// document where it is met — an undeclared field where it starts, a duplicate at its second
/// occurrence. Nothing under an undeclared field is looked at, as Go skips its value. A body
/// that is not JSON (protobuf) has no duplicates.
pub fn strict_fields(body: &[u8], unknown: &[String]) -> Vec<StrictField> {
    let mut walk = KeyWalk {
        path: String::new(),
        unknown,
        found: Vec::new(),
    };
    let mut reader = serde_json::Deserializer::from_slice(body);
    if de::Deserializer::deserialize_any(&mut reader, &mut walk).is_err() {
        walk.found.clear();
    }
    // Anything the walk did not meet (it cannot happen for a JSON body) still counts.
    for path in unknown {
        walk.note(StrictField::Unknown(path.clone()));
    }
    walk.found
}

/// A walk over a JSON document's keys that knows each key's strict path and notes, in
/// document order, the undeclared fields (whose values it skips) and the keys an object
/// already had.
struct KeyWalk<'u> {
    path: String,
    unknown: &'u [String],
    found: Vec<StrictField>,
}

impl KeyWalk<'_> {
    /// Notes a finding once.
    fn note(&mut self, finding: StrictField) {
        if !self.found.contains(&finding) {
            self.found.push(finding);
        }
    }
}

impl<'de> Visitor<'de> for &mut KeyWalk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let parent = self.path.len();
        let mut index = 0usize;
        loop {
            self.path.truncate(parent);
            self.path.push_str(&format!("[{index}]"));
            if seq.next_element_seed(&mut *self)?.is_none() {
                break;
            }
            index += 1;
        }
        self.path.truncate(parent);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let parent = self.path.len();
        let mut seen: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            self.path.truncate(parent);
            if parent > 0 {
                self.path.push('.');
            }
            self.path.push_str(&key);
            let repeated = seen.iter().any(|k| *k == key);
            if !repeated {
                seen.push(key.into_owned());
            }
            if self.unknown.contains(&self.path) {
                // Go skips an undeclared field's value: nothing under it is looked at.
                self.note(StrictField::Unknown(self.path.clone()));
                map.next_value::<de::IgnoredAny>()?;
                continue;
            }
            if repeated {
                self.note(StrictField::Duplicate(self.path.clone()));
            }
            map.next_value_seed(&mut *self)?;
        }
        self.path.truncate(parent);
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for &mut KeyWalk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// `strict decoding error: unknown field "a", duplicate field "b"`.
pub fn strict_error(fields: &[StrictField]) -> String {
    let fields: Vec<String> = fields.iter().map(ToString::to_string).collect();
    format!("strict decoding error: {}", fields.join(", "))
}

/// The field manager's refusal of undeclared fields in an applied configuration
/// (`.spec.x: field not declared in schema`; several as `errors:` lines).
pub fn apply_error(unknown: &[String]) -> String {
    let lines: Vec<String> = unknown
        .iter()
        .map(|p| format!(".{p}: field not declared in schema"))
        .collect();
    match lines.as_slice() {
        [one] => one.clone(),
        _ => format!("errors:\n  {}", lines.join("\n  ")),
    }
}

/// The `Warning` header value for one finding (`299 - "unknown field \"spec.x\""`).
pub fn warning(field: &StrictField) -> String {
    format!("299 - {:?}", field.to_string())
}

enum Segment {
    Field(String),
    Index(usize),
}

fn split_path(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (name, rest) = part.split_once('[').unwrap_or((part, ""));
        if !name.is_empty() {
            out.push(Segment::Field(name.to_owned()));
        }
        for index in rest.split('[') {
            if let Ok(i) = index.trim_end_matches(']').parse() {
                out.push(Segment::Index(i));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::go_decode::{QUANTITY_FORMAT, QUANTITY_SUFFIX, base64_decoded_len};
    use crate::resources::ids;
    use serde_json::json;

    fn deployment(spec: Value) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec})
    }

    fn template(container: Value) -> Value {
        json!({"selector": {"matchLabels": {"app": "web"}},
               "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [container]}}})
    }

    #[test]
    fn go_messages_for_values_of_the_wrong_type() {
        let cases: &[(&str, Value, &str)] = &[
            (
                "a string for an int32",
                json!({"replicas": "three"}),
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "a fraction for an int32",
                json!({"replicas": 1.5}),
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "an int32 overflow",
                json!({"replicas": 3_000_000_000_u64}),
                "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32",
            ),
            (
                "a string for a struct",
                json!({"template": "x"}),
                "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec",
            ),
            (
                "an object for a slice of structs",
                json!({"template": {"spec": {"containers": {"name": "x"}}}}),
                "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers of type []v1.Container",
            ),
            (
                "a number for a string inside a slice",
                template(json!({"name": "web", "image": 7})),
                "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string",
            ),
            (
                "a string for a slice of strings",
                template(json!({"name": "web", "image": "nginx", "args": "-v"})),
                "json: cannot unmarshal string into Go struct field Container.spec.template.spec.containers.args of type []string",
            ),
            (
                "an array for a map",
                json!({"selector": {"matchLabels": ["app"]}}),
                "json: cannot unmarshal array into Go struct field LabelSelector.spec.selector.matchLabels of type map[string]string",
            ),
            (
                "a number for a label value",
                json!({"template": {"metadata": {"labels": {"app": 1}}}}),
                "json: cannot unmarshal number into Go struct field ObjectMeta.spec.template.metadata.labels of type string",
            ),
            (
                "a bool for an int-or-string",
                json!({"strategy": {"rollingUpdate": {"maxSurge": true}}}),
                "json: cannot unmarshal bool into Go value of type int32",
            ),
            (
                "a malformed quantity",
                template(
                    json!({"name": "web", "image": "nginx", "resources": {"limits": {"cpu": "lots"}}}),
                ),
                QUANTITY_FORMAT,
            ),
            (
                "an unknown quantity suffix",
                template(
                    json!({"name": "web", "image": "nginx", "resources": {"limits": {"memory": "1mM"}}}),
                ),
                QUANTITY_SUFFIX,
            ),
        ];
        for (label, spec, want) in cases {
            assert_eq!(
                decode(ids::DEPLOYMENTS, &deployment(spec.clone())),
                Err((*want).to_owned()),
                "{label}"
            );
        }
    }

    #[test]
    fn go_leniencies_are_kept() {
        let lenient = template(json!({"name": "web", "image": "nginx", "args": null,
            "resources": {"limits": {"cpu": 1, "memory": "128Mi"}, "requests": {"cpu": "250m"}},
            "ports": [{"containerPort": 80}]}));
        let mut spec = lenient;
        spec["replicas"] = Value::Null;
        spec["strategy"] = json!({"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0}});
        assert_eq!(decode(ids::DEPLOYMENTS, &deployment(spec)), Ok(vec![]));
        let time = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-02T03:04:05Z"}});
        assert_eq!(decode(ids::CONFIGMAPS, &time), Ok(vec![]));
    }

    #[test]
    fn unknown_fields_are_reported_with_their_paths_in_document_order() {
        let mut spec = template(json!({"name": "web", "image": "nginx", "imagePolicy": "x"}));
        spec["replica"] = json!(3);
        let mut obj = deployment(spec);
        obj["metadata"]["app"] = json!("web");
        let unknown = decode(ids::DEPLOYMENTS, &obj).unwrap_or_default();
        assert_eq!(
            unknown,
            [
                "metadata.app",
                "spec.template.spec.containers[0].imagePolicy",
                "spec.replica"
            ]
        );
        assert_eq!(
            strict_error(&[StrictField::Unknown(unknown[0].clone())]),
            "strict decoding error: unknown field \"metadata.app\""
        );
        assert_eq!(
            warning(&StrictField::Unknown("spec.replica".into())),
            r#"299 - "unknown field \"spec.replica\"""#
        );
        drop_fields(&mut obj, &unknown);
        assert_eq!(decode(ids::DEPLOYMENTS, &obj), Ok(vec![]));
        assert_eq!(
            obj["spec"]["template"]["spec"]["containers"][0]["image"],
            "nginx"
        );
        assert!(!has_path(&obj, "spec.replica"));
        assert!(has_path(&obj, "spec.template.spec.containers[0].name"));
    }

    #[test]
    fn duplicate_keys_are_reported_once_each_in_document_order() {
        // (body, unknown paths from the typed decode, findings)
        type Case = (
            &'static str,
            &'static [&'static str],
            &'static [(&'static str, bool)],
        );
        let cases: &[Case] = &[
            (r#"{"a":1,"b":2}"#, &[], &[]),
            // As sigs.k8s.io/json's own table: each repeated key once, with its path.
            (
                r#"{"a":1,"a":2,"a":3,"b":4,"b":5,"e":[{"f":1,"f":1}]}"#,
                &[],
                &[("a", true), ("b", true), ("e[0].f", true)],
            ),
            (
                r#"{"c":{"c":"","c":""},"d":{"e":{"f":1,"f":1}}}"#,
                &[],
                &[("c.c", true), ("d.e.f", true)],
            ),
            // The same key in two objects is not a duplicate.
            (r#"{"x":{"k":1},"y":{"k":1}}"#, &[], &[]),
            (r#"[{"k":1},{"k":1}]"#, &[], &[]),
            // Unknown and duplicate interleaved as met; nothing under an unknown field counts.
            (
                r#"{"spec":{"replicas":1,"bogus":{"z":1,"z":2},"replicas":2},"metadata":{"name":"a","name":"b"}}"#,
                &["spec.bogus"],
                &[
                    ("spec.bogus", false),
                    ("spec.replicas", true),
                    ("metadata.name", true),
                ],
            ),
            // A repeated unknown field is reported as unknown, once.
            (r#"{"q":1,"q":2}"#, &["q"], &[("q", false)]),
        ];
        for (body, unknown, want) in cases {
            let unknown: Vec<String> = unknown.iter().map(|s| (*s).to_owned()).collect();
            let got = strict_fields(body.as_bytes(), &unknown);
            let want: Vec<StrictField> = want
                .iter()
                .map(|(p, dup)| {
                    if *dup {
                        StrictField::Duplicate((*p).to_owned())
                    } else {
                        StrictField::Unknown((*p).to_owned())
                    }
                })
                .collect();
            assert_eq!(got, want, "{body}");
        }
        assert_eq!(
            strict_error(&[
                StrictField::Unknown("spec.x".into()),
                StrictField::Duplicate("spec.replicas".into())
            ]),
            "strict decoding error: unknown field \"spec.x\", duplicate field \"spec.replicas\""
        );
        assert_eq!(
            warning(&StrictField::Duplicate("spec.replicas".into())),
            r#"299 - "duplicate field \"spec.replicas\"""#
        );
    }

    #[test]
    fn secrets_bad_base64_is_worded_as_go_reports_it() {
        let cases: &[(&str, Result<usize, usize>)] = &[
            ("aGVsbG8=", Ok(5)),
            ("aGVs\nbG8=", Ok(5)),
            ("aGVsbG9=", Ok(5)),
            ("aGVsbA==", Ok(4)),
            ("", Ok(0)),
            ("aGVsbG8", Err(4)),
            ("a", Err(0)),
            ("aGV!", Err(3)),
            ("aG==x", Err(4)),
            ("a===", Err(1)),
            ("aG=x", Err(2)),
            ("aG=", Err(3)),
        ];
        for (text, want) in cases {
            assert_eq!(base64_decoded_len(text), *want, "{text:?}");
        }
        let secret = json!({"metadata": {"name": "s"}, "data": {"k": "aGVsbG8"}});
        assert_eq!(
            decode(ids::SECRETS, &secret),
            Err("illegal base64 data at input byte 4".to_owned())
        );
    }

    #[test]
    fn a_bad_time_is_a_go_parse_error() {
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "yesterday"}});
        assert_eq!(
            decode(ids::CONFIGMAPS, &obj),
            Err("parsing time \"yesterday\" as \"2006-01-02T15:04:05Z07:00\": cannot parse \"yesterday\" as \"2006\"".to_owned())
        );
    }
}
