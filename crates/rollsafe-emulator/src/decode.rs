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

use k8s_openapi::api::{
    apps, batch, coordination, core, events, networking, policy, rbac, scheduling,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::query::Query;
use crate::resources::{ResId, ids};
use crate::route::Verb;
use crate::status::StatusError;

/// `?fieldValidation=`: what to do with fields the type does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum FieldValidation {
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
    pub(crate) fn of(q: &Query, verb: Verb) -> Result<Self, StatusError> {
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
pub(crate) fn decode(res: ResId, value: &Value) -> Result<Vec<String>, String> {
    match go_type(res) {
        Some(decode) => decode(value),
        None => Ok(Vec::new()),
    }
}

/// Removes the fields at `paths` (strict paths, as [`decode`] reports them) from `value`.
pub(crate) fn drop_fields(value: &mut Value, paths: &[String]) {
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
pub(crate) fn has_path(value: &Value, path: &str) -> bool {
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
pub(crate) enum StrictField {
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
pub(crate) fn strict_fields(body: &[u8], unknown: &[String]) -> Vec<StrictField> {
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
pub(crate) fn strict_error(fields: &[StrictField]) -> String {
    let fields: Vec<String> = fields.iter().map(ToString::to_string).collect();
    format!("strict decoding error: {}", fields.join(", "))
}

/// The field manager's refusal of undeclared fields in an applied configuration
/// (`.spec.x: field not declared in schema`; several as `errors:` lines).
pub(crate) fn apply_error(unknown: &[String]) -> String {
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
pub(crate) fn warning(field: &StrictField) -> String {
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

type GoType = fn(&Value) -> Result<Vec<String>, String>;

/// The Go type of each resource with one (the resource table's other half, keyed the same way).
fn go_type(res: ResId) -> Option<GoType> {
    Some(match res {
        ids::NAMESPACES => typed::<core::v1::Namespace>,
        ids::SECRETS => typed::<core::v1::Secret>,
        ids::CONFIGMAPS => typed::<core::v1::ConfigMap>,
        ids::SERVICEACCOUNTS => typed::<core::v1::ServiceAccount>,
        ids::SERVICES => typed::<core::v1::Service>,
        ids::PODS => typed::<core::v1::Pod>,
        ids::EVENTS => typed::<core::v1::Event>,
        ids::EVENTS_V1 => typed::<events::v1::Event>,
        ids::DEPLOYMENTS => typed::<apps::v1::Deployment>,
        ids::STATEFULSETS => typed::<apps::v1::StatefulSet>,
        ids::DAEMONSETS => typed::<apps::v1::DaemonSet>,
        ids::REPLICASETS => typed::<apps::v1::ReplicaSet>,
        ids::CONTROLLERREVISIONS => typed::<apps::v1::ControllerRevision>,
        ids::JOBS => typed::<batch::v1::Job>,
        ids::CRONJOBS => typed::<batch::v1::CronJob>,
        ids::INGRESSES => typed::<networking::v1::Ingress>,
        ids::LEASES => typed::<coordination::v1::Lease>,
        ids::ROLES => typed::<rbac::v1::Role>,
        ids::CLUSTERROLES => typed::<rbac::v1::ClusterRole>,
        ids::ROLEBINDINGS => typed::<rbac::v1::RoleBinding>,
        ids::CLUSTERROLEBINDINGS => typed::<rbac::v1::ClusterRoleBinding>,
        ids::CUSTOMRESOURCEDEFINITIONS => typed::<apiextensions::v1::CustomResourceDefinition>,
        ids::RESOURCEQUOTAS => typed::<core::v1::ResourceQuota>,
        ids::PODDISRUPTIONBUDGETS => typed::<policy::v1::PodDisruptionBudget>,
        ids::PRIORITYCLASSES => typed::<scheduling::v1::PriorityClass>,
        _ => return None,
    })
}

fn typed<T: for<'de> Deserialize<'de>>(value: &Value) -> Result<Vec<String>, String> {
    let mut ctx = Ctx::default();
    match T::deserialize(Typed {
        value,
        ctx: &mut ctx,
        newtype: None,
    }) {
        Ok(_) => Ok(ctx.unknown),
        Err(Error::Go(message)) => Err(message),
        // A failure no branch below words (none is known): still no Rust text.
        Err(_) => Err("json: cannot unmarshal object into Go value".to_owned()),
    }
}

/// Where the deserializer is.
#[derive(Default)]
struct Ctx {
    /// The strict-decoding path: `spec.template.spec.containers[0].image`.
    path: String,
    /// Go's field stack: the struct fields entered (no indices, no map keys).
    fields: Vec<String>,
    /// The Go structs entered; the last is the one being filled.
    structs: Vec<&'static str>,
    /// Undeclared fields, by strict path.
    unknown: Vec<String>,
}

impl Ctx {
    /// `json: cannot unmarshal <found> into Go struct field <Struct>.<fields> of type <go>`.
    fn mismatch(&self, found: &str, go: &str) -> Error {
        Error::Go(match self.structs.last() {
            Some(name) if !self.fields.is_empty() => format!(
                "json: cannot unmarshal {found} into Go struct field {name}.{} of type {go}",
                self.fields.join(".")
            ),
            _ => format!("json: cannot unmarshal {found} into Go value of type {go}"),
        })
    }

    /// Whether the value being read is one of the `[]byte` maps' values (Secret `data`,
    /// ConfigMap `binaryData`).
    fn in_bytes(&self) -> bool {
        matches!(
            (self.structs.as_slice(), self.fields.as_slice()),
            (["Secret"], [field]) if field == "data"
        ) || matches!(
            (self.structs.as_slice(), self.fields.as_slice()),
            (["ConfigMap"], [field]) if field == "binaryData"
        )
    }

    fn child(&self, segment: &str) -> String {
        if self.path.is_empty() {
            segment.to_owned()
        } else {
            format!("{}.{segment}", self.path)
        }
    }
}

#[derive(Debug)]
enum Error {
    /// The whole Go message.
    Go(String),
    /// A visitor refused a value of this JSON type (`string`, `number` …).
    Refused(&'static str),
    /// A visitor refused a value it could read (a bad time, a bad base64 text).
    Other,
    /// A probe found the Go type a value should have had.
    Probe(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Go(message) | Self::Probe(message) => f.write_str(message),
            Self::Refused(found) => write!(f, "refused {found}"),
            Self::Other => f.write_str("refused"),
        }
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Self::Other
    }

    fn invalid_type(unexpected: de::Unexpected<'_>, _: &dyn de::Expected) -> Self {
        Self::Refused(json_kind(&unexpected))
    }
}

fn json_kind(unexpected: &de::Unexpected<'_>) -> &'static str {
    match unexpected {
        de::Unexpected::Bool(_) => "bool",
        de::Unexpected::Unsigned(_) | de::Unexpected::Signed(_) | de::Unexpected::Float(_) => {
            "number"
        }
        de::Unexpected::Str(_) | de::Unexpected::Char(_) => "string",
        de::Unexpected::Seq => "array",
        de::Unexpected::Map => "object",
        _ => "null",
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's name of a type `k8s-openapi` names: every API struct lives in a package `v1`.
fn go_struct(name: &str) -> String {
    match name {
        "Quantity" => "resource.Quantity".to_owned(),
        "IntOrString" => "intstr.IntOrString".to_owned(),
        "RawExtension" => "runtime.RawExtension".to_owned(),
        _ => format!("v1.{name}"),
    }
}

const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";
const RFC3339: &str = "2006-01-02T15:04:05Z07:00";

/// `resource.ParseQuantity`'s refusal of `text`, if any.
fn quantity_error(text: &str) -> Option<&'static str> {
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    let digits = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(digits);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Some(QUANTITY_FORMAT);
    }
    let shape_ok = {
        let letters = suffix
            .find(|c: char| !"eEinumkKMGTP".contains(c))
            .unwrap_or(suffix.len());
        let (_, tail) = suffix.split_at(letters);
        let tail = tail.strip_prefix(['+', '-']).unwrap_or(tail);
        tail.bytes().all(|b| b.is_ascii_digit())
    };
    if !shape_ok {
        return Some(QUANTITY_FORMAT);
    }
    let known = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || suffix
        .strip_prefix(['e', 'E'])
        .map(|exp| exp.strip_prefix(['+', '-']).unwrap_or(exp))
        .is_some_and(|exp| !exp.is_empty() && exp.bytes().all(|b| b.is_ascii_digit()));
    (!known).then_some(QUANTITY_SUFFIX)
}

/// What Go's `base64.StdEncoding` makes of `text` (the decoder of `[]byte` fields): the decoded
/// length, or the offset it reports as `illegal base64 data at input byte N`. Newlines are
/// skipped, and non-zero trailing bits accepted, as Go does.
pub(crate) fn base64_decoded_len(text: &str) -> Result<usize, usize> {
    let bytes = text.as_bytes();
    let is_newline = |b: &u8| matches!(b, b'\n' | b'\r');
    let mut length = 0;
    let mut i = 0;
    loop {
        // One quantum of up to four symbols.
        let mut symbols = 0;
        let start = i;
        while symbols < 4 {
            while i < bytes.len() && is_newline(&bytes[i]) {
                i += 1;
            }
            if i == bytes.len() {
                return if symbols == 0 { Ok(length) } else { Err(start) };
            }
            let b = bytes[i];
            i += 1;
            if b == b'=' {
                match symbols {
                    0 | 1 => return Err(i - 1),
                    2 => {
                        // A second `=` must follow.
                        while i < bytes.len() && is_newline(&bytes[i]) {
                            i += 1;
                        }
                        if i == bytes.len() {
                            return Err(bytes.len());
                        }
                        if bytes[i] != b'=' {
                            return Err(i - 1);
                        }
                        i += 1;
                    }
                    _ => {}
                }
                while i < bytes.len() && is_newline(&bytes[i]) {
                    i += 1;
                }
                if i < bytes.len() {
                    return Err(i);
                }
                return Ok(length + symbols - 1);
            }
            if !(b.is_ascii_alphanumeric() || b == b'+' || b == b'/') {
                return Err(i - 1);
            }
            symbols += 1;
        }
        length += 3;
    }
}

/// A JSON value being read as a Go type.
struct Typed<'v, 'c> {
    value: &'v Value,
    ctx: &'c mut Ctx,
    /// The newtype being filled (`Time`, `Quantity`), for its Go wording.
    newtype: Option<&'static str>,
}

impl Typed<'_, '_> {
    fn mismatch(&self, go: &str) -> Error {
        self.ctx.mismatch(kind_of(self.value), go)
    }

    fn int<'de, V: Visitor<'de>>(
        self,
        visitor: V,
        go: &str,
        fits: fn(&serde_json::Number) -> bool,
    ) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_i64(0),
            Value::Number(n) if fits(n) => match n.as_i64() {
                Some(i) => visitor.visit_i64(i),
                None => visitor.visit_u64(n.as_u64().unwrap_or(0)),
            },
            Value::Number(n) => Err(self.ctx.mismatch(&format!("number {n}"), go)),
            _ => Err(self.mismatch(go)),
        }
    }
}

fn fits_i32(n: &serde_json::Number) -> bool {
    n.as_i64().is_some_and(|i| i32::try_from(i).is_ok())
}

fn fits_i64(n: &serde_json::Number) -> bool {
    n.as_i64().is_some()
}

fn fits_u64(n: &serde_json::Number) -> bool {
    n.as_u64().is_some()
}

impl<'de> de::Deserializer<'de> for Typed<'_, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let result = match self.value {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => match (n.as_u64(), n.as_i64()) {
                (Some(u), _) => visitor.visit_u64(u),
                (None, Some(i)) => visitor.visit_i64(i),
                _ => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            },
            Value::String(s) => {
                if self.newtype == Some("Quantity")
                    && let Some(message) = quantity_error(s)
                {
                    return Err(Error::Go(message.to_owned()));
                }
                visitor.visit_str(s)
            }
            Value::Array(items) => visitor.visit_seq(Seq {
                items: items.iter().enumerate(),
                ctx: &mut *self.ctx,
            }),
            Value::Object(map) => visitor.visit_map(Map {
                entries: map.iter(),
                pending: None,
                ctx: &mut *self.ctx,
                fields: None,
            }),
        };
        result.map_err(|error| match error {
            Error::Refused(_) if self.newtype == Some("Quantity") => {
                Error::Go(QUANTITY_FORMAT.to_owned())
            }
            // `IntOrString` reads anything but a string as its int32.
            Error::Refused(found) => Error::Go(format!(
                "json: cannot unmarshal {found} into Go value of type int32"
            )),
            other => other,
        })
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_bool(false),
            Value::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.mismatch("bool")),
        }
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i32(visitor)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_i32(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "int32", fits_i32)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "int64", fits_i64)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "uint64", fits_u64)
    }

    fn deserialize_f32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_f64(visitor)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_f64(0.0),
            Value::Number(n) => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            _ => Err(self.mismatch("float64")),
        }
    }

    fn deserialize_char<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        let text = match self.value {
            Value::Null => "",
            Value::String(s) => s.as_str(),
            _ => return Err(self.mismatch("string")),
        };
        if self.ctx.in_bytes() {
            // `[]byte`: Go's base64 rules, not the Rust engine's (which refuses newlines).
            return match base64_decoded_len(text) {
                Ok(_) => visitor.visit_str(""),
                Err(at) => Err(Error::Go(format!("illegal base64 data at input byte {at}"))),
            };
        }
        visitor.visit_str(text).map_err(|error| match error {
            Error::Other | Error::Refused(_)
                if matches!(self.newtype, Some("Time" | "MicroTime")) =>
            {
                Error::Go(format!(
                    "parsing time {text:?} as {RFC3339:?}: cannot parse {text:?} as \"2006\""
                ))
            }
            other => other,
        })
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_byte_buf<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(Typed {
            value: self.value,
            ctx: self.ctx,
            newtype: Some(name),
        })
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Array(items) => visitor.visit_seq(Seq {
                items: items.iter().enumerate(),
                ctx: &mut *self.ctx,
            }),
            Value::Null => visitor.visit_seq(Seq {
                items: [].iter().enumerate(),
                ctx: &mut *self.ctx,
            }),
            _ => Err(match visitor.visit_seq(ProbeSeq) {
                Err(Error::Probe(element)) => self.mismatch(&format!("[]{element}")),
                _ => self.mismatch("[]interface {}"),
            }),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Object(map) => visitor.visit_map(Map {
                entries: map.iter(),
                pending: None,
                ctx: &mut *self.ctx,
                fields: None,
            }),
            Value::Null => visitor.visit_map(Map {
                entries: serde_json::Map::new().iter(),
                pending: None,
                ctx: &mut *self.ctx,
                fields: None,
            }),
            _ => Err(match visitor.visit_map(ProbeMap { key_sent: false }) {
                Err(Error::Probe(element)) => self.mismatch(&format!("map[string]{element}")),
                _ => self.mismatch("map[string]interface {}"),
            }),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        let empty = serde_json::Map::new();
        let entries = match self.value {
            Value::Object(map) => map.iter(),
            Value::Null => empty.iter(),
            _ => return Err(self.mismatch(&go_struct(name))),
        };
        self.ctx.structs.push(name);
        let value = visitor.visit_map(Map {
            entries,
            pending: None,
            ctx: &mut *self.ctx,
            fields: Some(fields),
        })?;
        self.ctx.structs.pop();
        Ok(value)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Err(self.mismatch("string"))
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }
}

struct Seq<'v, 'c> {
    items: std::iter::Enumerate<std::slice::Iter<'v, Value>>,
    ctx: &'c mut Ctx,
}

impl<'de> SeqAccess<'de> for Seq<'_, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        let Some((index, value)) = self.items.next() else {
            return Ok(None);
        };
        let length = self.ctx.path.len();
        self.ctx.path.push('[');
        self.ctx.path.push_str(&index.to_string());
        self.ctx.path.push(']');
        let out = seed.deserialize(Typed {
            value,
            ctx: &mut *self.ctx,
            newtype: None,
        })?;
        self.ctx.path.truncate(length);
        Ok(Some(out))
    }
}

struct Map<'v, 'c> {
    entries: serde_json::map::Iter<'v>,
    pending: Option<(&'v String, &'v Value)>,
    ctx: &'c mut Ctx,
    /// A struct's declared fields; `None` for a map.
    fields: Option<&'static [&'static str]>,
}

impl<'de> MapAccess<'de> for Map<'_, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.entries.next() else {
            return Ok(None);
        };
        if let Some(fields) = self.fields
            && !fields.contains(&key.as_str())
        {
            let path = self.ctx.child(key);
            self.ctx.unknown.push(path);
        }
        self.pending = Some((key, value));
        let key: de::value::StrDeserializer<'_, Error> = key.as_str().into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, value)) = self.pending.take() else {
            return Err(Error::Other);
        };
        let length = self.ctx.path.len();
        if length > 0 {
            self.ctx.path.push('.');
        }
        self.ctx.path.push_str(key);
        let is_struct = self.fields.is_some();
        if is_struct {
            self.ctx.fields.push(key.clone());
        }
        let out = seed.deserialize(Typed {
            value,
            ctx: &mut *self.ctx,
            newtype: None,
        })?;
        if is_struct {
            self.ctx.fields.pop();
        }
        self.ctx.path.truncate(length);
        Ok(out)
    }
}

/// A deserializer that answers, as an error, the Go type it is asked to fill.
struct Probe;

impl Probe {
    fn found<T>(go: &str) -> Result<T, Error> {
        Err(Error::Probe(go.to_owned()))
    }
}

macro_rules! probe_as {
    ($($method:ident => $go:expr),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Probe::found($go)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Probe {
    type Error = Error;

    probe_as! {
        deserialize_any => "interface {}",
        deserialize_bool => "bool",
        deserialize_i8 => "int32",
        deserialize_i16 => "int32",
        deserialize_i32 => "int32",
        deserialize_i64 => "int64",
        deserialize_u8 => "uint8",
        deserialize_u16 => "uint64",
        deserialize_u32 => "uint64",
        deserialize_u64 => "uint64",
        deserialize_f32 => "float64",
        deserialize_f64 => "float64",
        deserialize_char => "string",
        deserialize_str => "string",
        deserialize_string => "string",
        deserialize_bytes => "[]uint8",
        deserialize_byte_buf => "[]uint8",
        deserialize_unit => "interface {}",
        deserialize_identifier => "string",
        deserialize_ignored_any => "interface {}",
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: V,
    ) -> Result<V::Value, Error> {
        Probe::found(&go_struct(name))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: V,
    ) -> Result<V::Value, Error> {
        Probe::found(&go_struct(name))
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match visitor.visit_seq(ProbeSeq) {
            Err(Error::Probe(element)) => Probe::found(&format!("[]{element}")),
            _ => Probe::found("[]interface {}"),
        }
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, _: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match visitor.visit_map(ProbeMap { key_sent: false }) {
            Err(Error::Probe(element)) => Probe::found(&format!("map[string]{element}")),
            _ => Probe::found("map[string]interface {}"),
        }
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Probe::found(&go_struct(name))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        _: V,
    ) -> Result<V::Value, Error> {
        Probe::found("string")
    }
}

/// A sequence whose first element is a [`Probe`].
struct ProbeSeq;

impl<'de> SeqAccess<'de> for ProbeSeq {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        seed.deserialize(Probe).map(Some)
    }
}

/// A map with one string key whose value is a [`Probe`].
struct ProbeMap {
    key_sent: bool,
}

impl<'de> MapAccess<'de> for ProbeMap {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        if self.key_sent {
            return Ok(None);
        }
        self.key_sent = true;
        let key: de::value::StrDeserializer<'_, Error> = "key".into_deserializer();
        seed.deserialize(key).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        seed.deserialize(Probe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
