//! Integers beyond the 64-bit range, written back as the input wrote them.
//!
//! A YAML integer that fits neither `i64` nor `u64` is read as the nearest `f64` (as
//! Kubernetes' own readers do), and writing that `f64` back would change the text
//! (`100000000000000000000000000000000000000000000` would come out as `1.0e+44`). For a
//! document that holds such a number, the literal text of each one is kept beside the
//! parsed value, found through the parser's spans; the document is written with a unique plain
//! marker in each number's place, and the marker is then replaced by the literal. Values read
//! elsewhere (hashing) still see the `f64`, as upstream's JSON decoding does.

use serde::Serialize;
use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::Spanned;

/// The smallest magnitude an `f64` read from an integer literal can have when the literal did
/// not fit `i64` or `u64`.
const WIDE: f64 = 9_223_372_036_854_775_808.0; // 2^63

/// Whether `value` is a number that came from (or could have come from) a wide integer.
fn is_wide(value: &Value) -> Option<f64> {
    let number = value.as_number()?;
    if number.is_i64() || number.is_u64() {
        return None;
    }
    let float = number.as_f64()?;
    is_wide_float(float).then_some(float)
}

fn is_wide_float(float: f64) -> bool {
    float.is_finite() && float.fract() == 0.0 && float.abs() >= WIDE
}

/// Whether a parsed value holds any number [`Literals`] would keep.
pub(crate) fn has_wide_integer(value: &Value) -> bool {
    match value {
        Value::Array(items) => items.iter().any(has_wide_integer),
        Value::Object(map) => map.values().any(has_wide_integer),
        other => is_wide(other).is_some(),
    }
}

/// The literal texts of a document's wide numbers, in document order, with their `f64` bits.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Literals(Vec<(u64, String)>);

impl Literals {
    /// Reads the literals of one document's text (parsed again, with spans).
    pub(crate) fn read(
        text: &str,
        options: serde_saphyr::Options,
    ) -> Result<Self, serde_saphyr::Error> {
        let root: Spanned<Node> = serde_saphyr::from_str_with_options(text, options)?;
        let mut out = Vec::new();
        walk(&root, text, &mut out);
        Ok(Self(out))
    }

    /// Writes `value` as YAML with every kept literal in its number's place, and hands the
    /// text to `take`.
    pub(crate) fn emit<T: Serialize + ToValue, R>(
        &self,
        value: &T,
        take: impl FnOnce(&str) -> R,
    ) -> Result<R, serde_saphyr::ser::Error> {
        if self.0.is_empty() {
            return emit_scratch(value, take);
        }
        let mut copy = value.to_value();
        for attempt in 0u32.. {
            let prefix = format!("rollsafe-literal-{attempt:x}-");
            let mut used = vec![false; self.0.len()];
            let mut markers = Vec::new();
            substitute(&mut copy, &self.0, &mut used, &prefix, &mut markers);
            let text = serde_saphyr::to_string(&copy)?;
            // The prefix must occur exactly where a marker was put, each as a plain scalar.
            if text.matches(prefix.as_str()).count() == markers.len()
                && markers
                    .iter()
                    .all(|(marker, _)| text.matches(marker.as_str()).count() == 1)
            {
                let mut text = text;
                for (marker, literal) in &markers {
                    text = text.replacen(marker.as_str(), literal, 1);
                }
                return Ok(take(&text));
            }
            // A string of the document holds the prefix: undo and try another one.
            copy = value.to_value();
            if attempt > 16 {
                break;
            }
        }
        emit_scratch(value, take)
    }
}

/// The largest scratch buffer kept between documents.
const SCRATCH_KEPT: usize = 1 << 20;

thread_local! {
    /// Where documents are emitted before being copied out at their exact size.
    static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// `value` as YAML in a buffer kept between documents, handed to `take`: the emitter grows its
/// buffer by doubling, and the caller copies out only what it keeps.
fn emit_scratch<T: Serialize, R>(
    value: &T,
    take: impl FnOnce(&str) -> R,
) -> Result<R, serde_saphyr::ser::Error> {
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        let emitted = serde_saphyr::to_fmt_writer(scratch, value).map(|()| take(scratch));
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = String::new();
        }
        emitted
    })
}

/// Owned copies of what a document writes.
pub(crate) trait ToValue {
    fn to_value(&self) -> Value;
}

impl ToValue for Value {
    fn to_value(&self) -> Value {
        self.clone()
    }
}

impl ToValue for Vec<Value> {
    fn to_value(&self) -> Value {
        Value::Array(self.clone())
    }
}

fn substitute(
    value: &mut Value,
    literals: &[(u64, String)],
    used: &mut [bool],
    prefix: &str,
    markers: &mut Vec<(String, String)>,
) {
    match value {
        Value::Array(items) => {
            for item in items {
                substitute(item, literals, used, prefix, markers);
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                substitute(item, literals, used, prefix, markers);
            }
        }
        other => {
            let Some(float) = is_wide(other) else { return };
            let bits = float.to_bits();
            let found = literals
                .iter()
                .zip(used.iter_mut())
                .find(|((b, _), used)| *b == bits && !**used);
            if let Some(((_, literal), used)) = found {
                *used = true;
                let marker = format!("{prefix}{:08}", markers.len());
                *other = Value::String(marker.clone());
                markers.push((marker, literal.clone()));
            }
        }
    }
}

fn walk(node: &Spanned<Node>, text: &str, out: &mut Vec<(u64, String)>) {
    match &node.value {
        Node::Float(float) => {
            let span = node.defined.span();
            let (Some(start), Some(len)) = (span.byte_offset(), span.byte_len()) else {
                return;
            };
            let (Ok(start), Ok(len)) = (usize::try_from(start), usize::try_from(len)) else {
                return;
            };
            let literal = text
                .get(start..start.saturating_add(len))
                .map(str::trim)
                .filter(|l| is_plain_number(l));
            if let Some(literal) = literal.filter(|_| is_wide_float(*float)) {
                out.push((float.to_bits(), literal.to_owned()));
            }
        }
        Node::Seq(items) => items.iter().for_each(|item| walk(item, text, out)),
        Node::Map(values) => values.iter().for_each(|item| walk(item, text, out)),
        Node::Other => {}
    }
}

/// A plain YAML number: digits, signs, a point, an exponent, base prefixes and underscores.
fn is_plain_number(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().any(|b| b.is_ascii_digit())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.' | b'_'))
}

/// A parsed document reduced to what [`Literals`] needs: floats with their spans.
enum Node {
    Float(f64),
    Seq(Vec<Spanned<Node>>),
    Map(Vec<Spanned<Node>>),
    Other,
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Float(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Other)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut values = Vec::new();
        while let Some((IgnoredAny, value)) = map.next_entry::<IgnoredAny, Spanned<Node>>()? {
            values.push(value);
        }
        Ok(Node::Map(values))
    }
}

#[cfg(test)]
mod tests {
    use crate::Manifest;

    #[test]
    fn wide_integers_are_written_as_the_input_wrote_them() {
        let text = "kind: ConfigMap\nbig: 100000000000000000000000000000000000000000000\nneg: -123456789012345678901234567890\nsmall: 12\nfloat: 1.5\nexp: 1e44\nlist:\n- 340282366920938463463374607431768211457\n- 100000000000000000000000000000000000000000000\nkey: rollsafe-literal-0-00000000\n";
        let manifest = Manifest::parse(text).unwrap();
        let out = manifest.to_yaml().unwrap();
        for literal in [
            "big: 100000000000000000000000000000000000000000000",
            "neg: -123456789012345678901234567890",
            "small: 12",
            "exp: 1e44",
            "- 340282366920938463463374607431768211457",
            "- 100000000000000000000000000000000000000000000",
            "key: rollsafe-literal-0-00000000",
        ] {
            assert!(out.contains(literal), "{literal} in {out}");
        }
        assert!(!out.contains("e+"), "{out}");
        assert_eq!(Manifest::parse(&out).unwrap().to_yaml().unwrap(), out);
    }

    #[test]
    fn wide_integers_in_a_sequence_document_and_an_alias() {
        let text = "- kind: A\n  n: &n 99999999999999999999999\n  m: *n\n";
        let out = Manifest::parse(text).unwrap().to_yaml().unwrap();
        assert_eq!(out.matches("99999999999999999999999").count(), 2, "{out}");
    }
}
