//! Strict decoding of a JSON value as a Go type of the built-in kinds, with the findings the
//! real decoder reports: undeclared fields (their paths, in document order) and, for a value
//! of the wrong type, the Go decoder's own message. Each resource's row names its type
//! ([`typed`] of its `k8s-openapi` struct).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Decodes a value as one Go type: the paths of undeclared fields, or the decoder's message.
pub type GoType = fn(&Value) -> Result<Vec<String>, String>;

/// The [`GoType`] of `T`: strict decoding of a JSON value as `T` with the real decoder's findings.
pub fn typed<T: for<'de> Deserialize<'de>>(value: &Value) -> Result<Vec<String>, String> {
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

pub(crate) const QUANTITY_FORMAT: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
pub(crate) const QUANTITY_SUFFIX: &str = "unable to parse quantity's suffix";
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
pub fn base64_decoded_len(text: &str) -> Result<usize, usize> {
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

/// `Deserializer` methods that only hand over to another method of the same deserializer (the
/// arguments in brackets are ignored). Not serde's `forward_to_deserialize_any!`: these go to a
/// typed method, not to `deserialize_any`.
macro_rules! forward {
    ($($method:ident($($arg:ty),*) => $to:ident),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, $(_: $arg,)* visitor: V) -> Result<V::Value, Error> {
            self.$to(visitor)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Typed<'_, '_> {
    type Error = Error;

    forward! {
        deserialize_i8() => deserialize_i32,
        deserialize_i16() => deserialize_i32,
        deserialize_u8() => deserialize_u64,
        deserialize_u16() => deserialize_u64,
        deserialize_u32() => deserialize_u64,
        deserialize_f32() => deserialize_f64,
        deserialize_char() => deserialize_str,
        deserialize_string() => deserialize_str,
        deserialize_bytes() => deserialize_str,
        deserialize_byte_buf() => deserialize_str,
        deserialize_identifier() => deserialize_str,
        deserialize_tuple(usize) => deserialize_seq,
        deserialize_tuple_struct(&'static str, usize) => deserialize_seq,
    }

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

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "int32", fits_i32)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "int64", fits_i64)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.int(visitor, "uint64", fits_u64)
    }

    fn deserialize_f64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Value::Null => visitor.visit_f64(0.0),
            Value::Number(n) => visitor.visit_f64(n.as_f64().unwrap_or(0.0)),
            _ => Err(self.mismatch("float64")),
        }
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

    forward! {
        deserialize_tuple(usize) => deserialize_seq,
        deserialize_tuple_struct(&'static str, usize) => deserialize_seq,
    }

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
