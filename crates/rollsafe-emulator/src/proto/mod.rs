//! Just enough Kubernetes protobuf to read the access reviews kubectl sends that way
//! (`kubectl auth can-i` posts a protobuf SelfSubjectAccessReview). Responses are JSON, which
//! client-go decodes by the response's content type.

use serde_json::{Map, Value, json};

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
