//! The Go-compatible text dump that the upstream hash is computed over.
//!
//! Upstream serializes a `[]map[string]interface{}` with go-spew's `%#v` (as configured by
//! `k8s.io/utils/dump.ForHash`: sorted keys, no pointer addresses, no capacities, one line).
//! This module writes the same bytes for `serde_json` values, straight into a [`Sink`], so the
//! hash of a large stream never needs the whole text in memory.
//!
//! Layout, for a list of objects (each already without its top-level `metadata`):
//!
//! ```text
//! ([]map[string]interface {})[map[apiVersion:(string)v1 data:(map[string]interface {})map[key:(string)value] kind:(string)ConfigMap]]
//! ```
//!
//! Keys are sorted byte-wise and printed bare. Every value sits in an interface slot, so it is
//! printed with its dynamic Go type first: `(string)` followed by the raw text (no quotes, no
//! escaping), `(bool)`, `(float64)` in Go's shortest `%g` form, `(interface {})<nil>`,
//! `(map[string]interface {})map[…]` and `([]interface {})[…]`.

use serde_json::{Map, Number, Value};

/// Something the dump is written into: a hasher, or a buffer in tests.
pub trait Sink {
    /// Appends bytes.
    fn write(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn write(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// The Go type numbers are dumped as.
///
/// Upstream numbers that come from YAML or JSON templates are `float64`; that is what rollsafe
/// hashes. The integer types exist to reproduce upstream's vectors for CEL-produced numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NumberType {
    /// Every number is a `float64` (the default, and what a JSON decoder produces).
    #[default]
    Float64,
    /// Integral numbers are `int64` (what a CEL expression produces); others `float64`.
    Int64,
    /// Integral numbers are `int`; others `float64`.
    Int,
}

/// What to leave out of each top-level object besides its `metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strip {
    /// Only the top-level `metadata` (upstream).
    #[default]
    Metadata,
    /// The top-level `metadata` and the pod template's `spec.template.metadata` (a workload
    /// hashed into another workload's hash, whose pod template carries this feature's own
    /// annotation).
    MetadataAndPodTemplateMetadata,
}

/// Writes the dump of a list of objects: `([]map[string]interface {})[…]`.
pub fn write_list<'a, S: Sink>(
    sink: &mut S,
    objects: impl IntoIterator<Item = (&'a Map<String, Value>, Strip)>,
    numbers: NumberType,
) {
    let mut list = ListWriter::new(sink);
    for (object, strip) in objects {
        list.push(object, strip, numbers);
    }
    list.finish();
}

/// The dump of a list written one object at a time, so that each object can be dropped once
/// written: [`ListWriter::new`] opens the list, [`ListWriter::push`] adds an object and
/// [`ListWriter::finish`] closes it. The bytes are those of [`write_list`].
#[derive(Debug)]
pub struct ListWriter<S: Sink> {
    sink: S,
    empty: bool,
}

impl<S: Sink> ListWriter<S> {
    /// Opens the list on `sink`.
    pub fn new(mut sink: S) -> Self {
        sink.write(b"([]map[string]interface {})[");
        Self { sink, empty: true }
    }

    /// Adds one top-level object.
    pub fn push(&mut self, object: &Map<String, Value>, strip: Strip, numbers: NumberType) {
        self.separate();
        write_top(&mut self.sink, object, strip, numbers);
    }

    /// Adds one top-level object already dumped by [`write_top`].
    pub fn push_dumped(&mut self, dumped: &[u8]) {
        self.separate();
        self.sink.write(dumped);
    }

    fn separate(&mut self) {
        if !self.empty {
            self.sink.write(b" ");
        }
        self.empty = false;
    }

    /// Closes the list and gives the sink back.
    pub fn finish(mut self) -> S {
        self.sink.write(b"]");
        self.sink
    }
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn write(&mut self, bytes: &[u8]) {
        (**self).write(bytes);
    }
}

/// Writes one top-level object (a concrete map element: no type prefix), leaving out what
/// `strip` says.
pub fn write_top<S: Sink>(
    sink: &mut S,
    object: &Map<String, Value>,
    strip: Strip,
    numbers: NumberType,
) {
    sink.write(b"map[");
    let mut first = true;
    for (key, value) in sorted(object) {
        if key == "metadata" {
            continue;
        }
        if !first {
            sink.write(b" ");
        }
        first = false;
        sink.write(key.as_bytes());
        sink.write(b":");
        match (strip, key.as_str(), value) {
            (Strip::MetadataAndPodTemplateMetadata, "spec", Value::Object(spec)) => {
                write_spec_without_pod_template_metadata(sink, spec, numbers);
            }
            _ => write_value(sink, value, numbers),
        }
    }
    sink.write(b"]");
}

fn write_spec_without_pod_template_metadata<S: Sink>(
    sink: &mut S,
    spec: &Map<String, Value>,
    numbers: NumberType,
) {
    sink.write(b"(map[string]interface {})map[");
    let mut first = true;
    for (key, value) in sorted(spec) {
        // A pod template that holds nothing but metadata (or is null) is left out as a
        // whole: writing our annotation creates `spec.template.metadata` on a workload that
        // had no template, and rendering the output again must give the same hash.
        if key == "template" && is_only_metadata(value) {
            continue;
        }
        if !first {
            sink.write(b" ");
        }
        first = false;
        sink.write(key.as_bytes());
        sink.write(b":");
        match (key.as_str(), value) {
            ("template", Value::Object(template)) => {
                sink.write(b"(map[string]interface {})map[");
                let entries = sorted(template)
                    .into_iter()
                    .filter(|(k, _)| *k != "metadata");
                write_entries(sink, entries, numbers);
                sink.write(b"]");
            }
            _ => write_value(sink, value, numbers),
        }
    }
    sink.write(b"]");
}

/// Null, or a map with no key but `metadata`.
fn is_only_metadata(template: &Value) -> bool {
    match template {
        Value::Null => true,
        Value::Object(map) => map.keys().all(|key| key == "metadata"),
        _ => false,
    }
}

/// Writes a value held in an interface slot: its Go type in parentheses, then the value.
pub fn write_value<S: Sink>(sink: &mut S, value: &Value, numbers: NumberType) {
    match value {
        Value::Null => sink.write(b"(interface {})<nil>"),
        Value::Bool(true) => sink.write(b"(bool)true"),
        Value::Bool(false) => sink.write(b"(bool)false"),
        Value::Number(number) => write_number(sink, number, numbers),
        Value::String(text) => {
            sink.write(b"(string)");
            sink.write(text.as_bytes());
        }
        Value::Array(items) => {
            sink.write(b"([]interface {})[");
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    sink.write(b" ");
                }
                write_value(sink, item, numbers);
            }
            sink.write(b"]");
        }
        Value::Object(map) => {
            sink.write(b"(map[string]interface {})map[");
            write_entries(sink, sorted(map).into_iter(), numbers);
            sink.write(b"]");
        }
    }
}

fn write_entries<'a, S: Sink>(
    sink: &mut S,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
    numbers: NumberType,
) {
    for (position, (key, value)) in entries.enumerate() {
        if position > 0 {
            sink.write(b" ");
        }
        sink.write(key.as_bytes());
        sink.write(b":");
        write_value(sink, value, numbers);
    }
}

/// The entries of a map in byte-wise key order (Rust's `str` order is byte-wise, like Go's).
fn sorted(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
    entries
}

fn write_number<S: Sink>(sink: &mut S, number: &Number, numbers: NumberType) {
    let integer = number
        .as_i64()
        .map(i128::from)
        .or_else(|| number.as_u64().map(i128::from));
    match (numbers, integer) {
        (NumberType::Int64, Some(integer)) => {
            sink.write(b"(int64)");
            sink.write(integer.to_string().as_bytes());
        }
        (NumberType::Int, Some(integer)) => {
            sink.write(b"(int)");
            sink.write(integer.to_string().as_bytes());
        }
        _ => {
            sink.write(b"(float64)");
            // A JSON number always converts; Go's decoder rounds the same way.
            let value = number.as_f64().unwrap_or(f64::NAN);
            sink.write(format_float64(value).as_bytes());
        }
    }
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 64)`: the shortest decimal that round-trips, in `%e`
/// form when the exponent is below -4 or at least 6 (Go's rule for the shortest precision),
/// else in `%f` form.
pub fn format_float64(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let negative = value.is_sign_negative();
    if value == 0.0 {
        return if negative { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the shortest round-tripping digits: "d.ddde[-]x".
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .unwrap_or((scientific.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if !(-4..6).contains(&exponent) {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        out.push_str(&magnitude.to_string());
        return out;
    }
    // %f with exactly the digits needed.
    let point = exponent + 1; // digits before the decimal point
    if point <= 0 {
        out.push_str("0.");
        for _ in 0..(-point) {
            out.push('0');
        }
        out.push_str(&digits);
    } else {
        let point = point as usize;
        if digits.len() <= point {
            out.push_str(&digits);
            for _ in digits.len()..point {
                out.push('0');
            }
        } else {
            out.push_str(&digits[..point]);
            out.push('.');
            out.push_str(&digits[point..]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dump(value: &Value, numbers: NumberType) -> String {
        let objects: Vec<_> = value
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o.as_object().unwrap(), Strip::Metadata))
            .collect();
        let mut out = Vec::new();
        write_list(&mut out, objects, numbers);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn configmap_layout() {
        let text = dump(
            &json!([{"kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "x"}, "data": {"key": "value"}}]),
            NumberType::Float64,
        );
        assert_eq!(
            text,
            "([]map[string]interface {})[map[apiVersion:(string)v1 data:(map[string]interface {})map[key:(string)value] kind:(string)ConfigMap]]"
        );
    }

    #[test]
    fn value_types() {
        let text = dump(
            &json!([{"a": null, "b": true, "c": false, "d": "", "e": [], "f": {}, "g": [1, "x", {"z": 1.5}], "h": "line\nbreak"}]),
            NumberType::Float64,
        );
        assert_eq!(
            text,
            "([]map[string]interface {})[map[a:(interface {})<nil> b:(bool)true c:(bool)false d:(string) e:([]interface {})[] f:(map[string]interface {})map[] g:([]interface {})[(float64)1 (string)x (map[string]interface {})map[z:(float64)1.5]] h:(string)line\nbreak]]"
        );
    }

    #[test]
    fn keys_sort_bytewise() {
        let text = dump(
            &json!([{"aa": 1, "a/b": 1, "a.b": 1, "a": 1, "B": 1}]),
            NumberType::Int,
        );
        assert_eq!(
            text,
            "([]map[string]interface {})[map[B:(int)1 a:(int)1 a.b:(int)1 a/b:(int)1 aa:(int)1]]"
        );
    }

    #[test]
    fn go_float_formatting() {
        let cases: &[(f64, &str)] = &[
            (80.0, "80"),
            (1.5, "1.5"),
            (1e21, "1e+21"),
            (1e-6, "1e-06"),
            (0.0001, "0.0001"),
            (0.00012, "0.00012"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.0, "1.234567e+06"),
            (123456.7, "123456.7"),
            (-7.0, "-7"),
            (-0.0, "-0"),
            (0.0, "0"),
            (0.1, "0.1"),
            (1.0 / 3.0, "0.3333333333333333"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (9007199254740993.0, "9.007199254740992e+15"),
            (12.5e100, "1.25e+101"),
        ];
        for (value, expected) in cases {
            assert_eq!(format_float64(*value), *expected, "{value:e}");
        }
    }

    #[test]
    fn integer_types_for_upstream_vectors() {
        let value = json!([{"n": 80, "x": 1.5}]);
        assert!(dump(&value, NumberType::Int64).contains("n:(int64)80 x:(float64)1.5"));
        assert!(dump(&value, NumberType::Int).contains("n:(int)80"));
        assert!(dump(&value, NumberType::Float64).contains("n:(float64)80"));
    }

    #[test]
    fn pod_template_metadata_strip() {
        let object = json!({"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"h": "1"}}, "spec": {"containers": []}}}});
        let mut out = Vec::new();
        write_top(
            &mut out,
            object.as_object().unwrap(),
            Strip::MetadataAndPodTemplateMetadata,
            NumberType::Float64,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "map[kind:(string)StatefulSet spec:(map[string]interface {})map[replicas:(float64)1 template:(map[string]interface {})map[spec:(map[string]interface {})map[containers:([]interface {})[]]]]]"
        );
    }
}
