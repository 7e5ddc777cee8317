//! Kubernetes protobuf request bodies: the `k8s\0` envelope (`runtime.Unknown`) around an
//! object, decoded into the JSON the store keeps — for the built-in kinds that clients send as
//! protobuf (`kubectl create namespace|secret|configmap|deployment|role|…` from kubectl 1.32 on),
//! by the field tables in [`schema`], and for the access reviews `kubectl auth can-i` posts.
//! Responses are always JSON, which client-go decodes by the response's content type.

pub mod schema;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use schema::{Message, Ty};

/// Why a protobuf body was not decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// Not the `k8s\0` envelope, or a malformed wire encoding.
    #[error("the body is not a well-formed Kubernetes protobuf message")]
    Malformed,
    /// An envelope with a content encoding (the real server accepts none either).
    #[error("the body has a content encoding")]
    Encoded,
    /// A kind the emulator does not accept as protobuf.
    #[error("{api_version} {kind} is not accepted as protobuf")]
    Kind {
        /// `apiVersion` of the envelope.
        api_version: String,
        /// `kind` of the envelope.
        kind: String,
    },
    /// A field outside the decoded subset: refused rather than dropped.
    #[error("field {tag} of {message} is not decoded")]
    Field {
        /// The message's Go type name.
        message: &'static str,
        /// The field number.
        tag: u64,
    },
}

impl ProtoError {
    /// A static category, for logs.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Malformed => "malformed",
            Self::Encoded => "encoded",
            Self::Kind { .. } => "kind",
            Self::Field { .. } => "field",
        }
    }
}

/// The content type of Kubernetes protobuf.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// The envelope's magic prefix.
const MAGIC: &[u8] = b"k8s\0";

/// Whether a content type is Kubernetes protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type
        .trim()
        .to_ascii_lowercase()
        .starts_with(PROTOBUF)
}

enum Field<'a> {
    Varint,
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*pos)?;
        *pos += 1;
        out |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

fn fields(buf: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos)?;
        let (number, wire) = (key >> 3, key & 7);
        match wire {
            0 => {
                varint(buf, &mut pos)?;
                out.push((number, Field::Varint));
            }
            1 => pos += 8,
            2 => {
                let len = usize::try_from(varint(buf, &mut pos)?).ok()?;
                let end = pos.checked_add(len).filter(|e| *e <= buf.len())?;
                out.push((number, Field::Bytes(&buf[pos..end])));
                pos = end;
            }
            5 => pos += 4,
            _ => return None,
        }
    }
    Some(out)
}

fn bytes_of<'a>(fs: &'a [(u64, Field<'a>)], n: u64) -> Option<&'a [u8]> {
    fs.iter().find_map(|(k, f)| match f {
        Field::Bytes(b) if *k == n => Some(*b),
        _ => None,
    })
}

fn strings_of(fs: &[(u64, Field<'_>)], n: u64) -> Vec<String> {
    fs.iter()
        .filter_map(|(k, f)| match f {
            Field::Bytes(b) if *k == n => Some(String::from_utf8_lossy(b).into_owned()),
            _ => None,
        })
        .collect()
}

fn string_map(buf: &[u8], names: &[(u64, &str)]) -> Option<Value> {
    let fs = fields(buf)?;
    let mut m = Map::new();
    for (n, name) in names {
        if let Some(v) = strings_of(&fs, *n).into_iter().next() {
            m.insert((*name).to_string(), json!(v));
        }
    }
    Some(Value::Object(m))
}

/// Decodes a protobuf SelfSubjectAccessReview or SubjectAccessReview into its JSON form.
pub fn decode_access_review(body: &[u8]) -> Option<Value> {
    let envelope = fields(body.strip_prefix(MAGIC)?)?;
    let type_meta = fields(bytes_of(&envelope, 1)?)?;
    let api_version = strings_of(&type_meta, 1)
        .into_iter()
        .next()
        .unwrap_or_default();
    let kind = strings_of(&type_meta, 2)
        .into_iter()
        .next()
        .unwrap_or_default();
    let object = fields(bytes_of(&envelope, 2)?)?;
    let spec_fields = fields(bytes_of(&object, 2).unwrap_or(&[]))?;
    let mut spec = Map::new();
    if let Some(ra) = bytes_of(&spec_fields, 1) {
        spec.insert(
            "resourceAttributes".into(),
            string_map(
                ra,
                &[
                    (1, "namespace"),
                    (2, "verb"),
                    (3, "group"),
                    (4, "version"),
                    (5, "resource"),
                    (6, "subresource"),
                    (7, "name"),
                ],
            )?,
        );
    }
    if let Some(nra) = bytes_of(&spec_fields, 2) {
        spec.insert(
            "nonResourceAttributes".into(),
            string_map(nra, &[(1, "path"), (2, "verb")])?,
        );
    }
    if kind == "SubjectAccessReview" {
        if let Some(user) = strings_of(&spec_fields, 3).into_iter().next() {
            spec.insert("user".into(), json!(user));
        }
        spec.insert("groups".into(), json!(strings_of(&spec_fields, 4)));
        if let Some(uid) = strings_of(&spec_fields, 6).into_iter().next() {
            spec.insert("uid".into(), json!(uid));
        }
    }
    Some(json!({"apiVersion": api_version, "kind": kind, "metadata": {}, "spec": spec}))
}

/// One field value on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed,
    Bytes(&'a [u8]),
}

/// The fields of a message, in wire order.
fn wire(buf: &[u8]) -> Result<Vec<(u64, Wire<'_>)>, ProtoError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        let key = varint(buf, &mut pos).ok_or(ProtoError::Malformed)?;
        let (number, kind) = (key >> 3, key & 7);
        let value = match kind {
            0 => Wire::Varint(varint(buf, &mut pos).ok_or(ProtoError::Malformed)?),
            1 | 5 => {
                let width = if kind == 1 { 8 } else { 4 };
                pos = pos
                    .checked_add(width)
                    .filter(|p| *p <= buf.len())
                    .ok_or(ProtoError::Malformed)?;
                Wire::Fixed
            }
            2 => {
                let len = varint(buf, &mut pos)
                    .and_then(|l| usize::try_from(l).ok())
                    .ok_or(ProtoError::Malformed)?;
                let end = pos
                    .checked_add(len)
                    .filter(|e| *e <= buf.len())
                    .ok_or(ProtoError::Malformed)?;
                let bytes = &buf[pos..end];
                pos = end;
                Wire::Bytes(bytes)
            }
            _ => return Err(ProtoError::Malformed),
        };
        out.push((number, value));
    }
    Ok(out)
}

fn bytes(w: Wire<'_>) -> Result<&[u8], ProtoError> {
    match w {
        Wire::Bytes(b) => Ok(b),
        _ => Err(ProtoError::Malformed),
    }
}

fn text(w: Wire<'_>) -> Result<String, ProtoError> {
    String::from_utf8(bytes(w)?.to_vec()).map_err(|_| ProtoError::Malformed)
}

fn number(w: Wire<'_>) -> Result<u64, ProtoError> {
    match w {
        Wire::Varint(v) => Ok(v),
        _ => Err(ProtoError::Malformed),
    }
}

/// `int32`/`int64`: negative values travel as 64-bit two's complement.
fn signed(w: Wire<'_>) -> Result<i64, ProtoError> {
    number(w).map(|v| v as i64)
}

fn base64_of(b: &[u8]) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(b))
}

/// A `map<string, V>` entry: (key, value wire).
fn map_entry(w: Wire<'_>) -> Result<(String, Option<Wire<'_>>), ProtoError> {
    let mut key = String::new();
    let mut value = None;
    for (tag, v) in wire(bytes(w)?)? {
        match tag {
            1 => key = text(v)?,
            2 => value = Some(v),
            _ => return Err(ProtoError::Malformed),
        }
    }
    Ok((key, value))
}

fn quantity(w: Wire<'_>) -> Result<Value, ProtoError> {
    let mut out = String::new();
    for (tag, v) in wire(bytes(w)?)? {
        if tag == 1 {
            out = text(v)?;
        }
    }
    Ok(json!(out))
}

fn time(w: Wire<'_>) -> Result<Value, ProtoError> {
    let (mut seconds, mut nanos) = (0i64, 0i64);
    for (tag, v) in wire(bytes(w)?)? {
        match tag {
            1 => seconds = signed(v)?,
            2 => nanos = signed(v)?,
            _ => return Err(ProtoError::Malformed),
        }
    }
    if seconds == 0 && nanos == 0 {
        return Ok(Value::Null);
    }
    let t = jiff::Timestamp::from_second(seconds).map_err(|_| ProtoError::Malformed)?;
    Ok(json!(t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn int_or_string(w: Wire<'_>) -> Result<Value, ProtoError> {
    let (mut is_string, mut int, mut string) = (false, 0i64, String::new());
    for (tag, v) in wire(bytes(w)?)? {
        match tag {
            1 => is_string = number(v)? == 1,
            2 => int = i64::from(signed(v)? as i32),
            3 => string = text(v)?,
            _ => return Err(ProtoError::Malformed),
        }
    }
    Ok(if is_string { json!(string) } else { json!(int) })
}

/// The JSON of one value of type `ty`.
fn value(ty: Ty, w: Wire<'_>) -> Result<Value, ProtoError> {
    Ok(match ty {
        Ty::Str => json!(text(w)?),
        Ty::Int => json!(signed(w)?),
        Ty::Bool => json!(number(w)? != 0),
        Ty::Msg(m) | Ty::Inline(m) => Value::Object(message(bytes(w)?, m)?),
        Ty::Time => time(w)?,
        Ty::IntOrString => int_or_string(w)?,
        Ty::MapStr | Ty::MapBytes | Ty::MapQuantity => {
            return Err(ProtoError::Malformed);
        }
    })
}

/// Whether Go's JSON encoding leaves a non-pointer field with this value out (`omitempty`).
fn is_empty_scalar(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// Decodes a message by its field table.
fn message(buf: &[u8], m: &'static Message) -> Result<Map<String, Value>, ProtoError> {
    let mut out = Map::new();
    for (tag, w) in wire(buf)? {
        let field = m
            .fields
            .iter()
            .find(|f| f.tag == tag)
            .ok_or(ProtoError::Field {
                message: m.name,
                tag,
            })?;
        match field.ty {
            Ty::MapStr | Ty::MapBytes | Ty::MapQuantity => {
                let (key, v) = map_entry(w)?;
                let v = match (field.ty, v) {
                    (_, None) => json!(""),
                    (Ty::MapStr, Some(v)) => json!(text(v)?),
                    (Ty::MapBytes, Some(v)) => base64_of(bytes(v)?),
                    (_, Some(v)) => quantity(v)?,
                };
                let map = out
                    .entry(field.json)
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Some(map) = map.as_object_mut() {
                    map.insert(key, v);
                }
            }
            Ty::Inline(_) => {
                if let Value::Object(inner) = value(field.ty, w)? {
                    out.extend(inner);
                }
            }
            ty if field.repeated => {
                let v = value(ty, w)?;
                let list = out.entry(field.json).or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(v);
                }
            }
            ty => {
                let v = value(ty, w)?;
                if field.optional || !is_empty_scalar(&v) {
                    out.insert(field.json.to_string(), v);
                } else {
                    out.remove(field.json);
                }
            }
        }
    }
    Ok(out)
}

/// Decodes a protobuf object body (the `k8s\0` envelope) of a kind in [`schema::KINDS`] into
/// its JSON form.
pub fn decode_object(body: &[u8]) -> Result<Value, ProtoError> {
    let envelope = wire(body.strip_prefix(MAGIC).ok_or(ProtoError::Malformed)?)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (tag, w) in envelope {
        match tag {
            1 => {
                for (tag, w) in wire(bytes(w)?)? {
                    match tag {
                        1 => api_version = text(w)?,
                        2 => kind = text(w)?,
                        _ => return Err(ProtoError::Malformed),
                    }
                }
            }
            2 => raw = bytes(w)?,
            3 => {
                if !bytes(w)?.is_empty() {
                    return Err(ProtoError::Encoded);
                }
            }
            4 => {}
            _ => return Err(ProtoError::Malformed),
        }
    }
    let Some((_, _, m)) = schema::KINDS
        .iter()
        .find(|(v, k, _)| *v == api_version && *k == kind)
    else {
        return Err(ProtoError::Kind { api_version, kind });
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    out.extend(message(raw, m)?);
    Ok(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![u8::try_from((n << 3) | 2).unwrap_or(0)];
        out.push(u8::try_from(bytes.len()).unwrap_or(0));
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn decodes_a_self_subject_access_review() {
        let type_meta = [
            field(1, b"authorization.k8s.io/v1"),
            field(2, b"SelfSubjectAccessReview"),
        ]
        .concat();
        let attrs = [
            field(1, b"shop"),
            field(2, b"list"),
            field(3, b"apps"),
            field(5, b"deployments"),
        ]
        .concat();
        let spec = field(1, &attrs);
        let object = [field(1, b""), field(2, &spec)].concat();
        let body = [MAGIC.to_vec(), field(1, &type_meta), field(2, &object)].concat();
        let v = decode_access_review(&body).unwrap_or_default();
        assert_eq!(v["kind"], "SelfSubjectAccessReview");
        assert_eq!(v["spec"]["resourceAttributes"]["verb"], "list");
        assert_eq!(v["spec"]["resourceAttributes"]["resource"], "deployments");
        assert_eq!(v["spec"]["resourceAttributes"]["namespace"], "shop");
    }
}
