//! Kubernetes manifest streams: what `kubectl apply -f` and `helm template` produce.
//!
//! A stream is a sequence of YAML documents separated by `---` lines. Each document is one of:
//!
//! - a single Kubernetes object (a mapping);
//! - a top-level YAML sequence of objects;
//! - a `kind: List` (or `kind: <Anything>List` with an `items` array) object whose `items` are objects;
//! - empty (only comments or whitespace), which is kept in place but holds no objects.
//!
//! [`Manifest::parse`] splits the stream at document markers itself, so that an error names the
//! document it is in, then parses each document with `serde-saphyr` into `serde_json::Value`
//! (YAML types are kept: an unquoted `true` is a boolean). [`Manifest::to_yaml`] writes the
//! documents back in the same order and shape. Comments and formatting are not preserved.
//!
//! Error messages carry the document number and a line/column in the whole stream, never a
//! snippet of the input:
//! a manifest may hold Secret data.

#![warn(missing_docs, unreachable_pub)]

mod error;
mod numbers;
mod set;
mod split;

pub use error::{InputError, ManifestError, ReadInputError, YamlCause};
pub use set::{ManifestSet, Origin};

use std::fmt;

use serde_json::Value;

/// What one YAML document of a stream holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Only comments, whitespace or an explicit `null`.
    Empty,
    /// One object (a mapping), or a scalar that is not an object (kept, never treated as one).
    Single(Value),
    /// A top-level YAML sequence; every element that is a mapping is an object.
    Sequence(Vec<Value>),
    /// A `kind: List` mapping; every element of `items` that is a mapping is an object.
    List(Value),
}

/// One document of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// 1-based position of the document in the stream, counting empty documents.
    pub number: usize,
    /// What the document holds.
    pub body: Body,
    /// Integers the document wrote beyond the 64-bit range, as written (see [`numbers`]).
    literals: numbers::Literals,
}

/// Where an object sits in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// 1-based document number.
    pub document: usize,
    /// 0-based indices inside a sequence or `kind: List`, one per level of nesting (a `List`
    /// inside a `List` adds one); empty for a single-object document.
    pub items: Vec<usize>,
}

impl Document {
    fn parse(number: usize, source: split::Source<'_>) -> Result<Self, ManifestError> {
        let yaml_error = |error: serde_saphyr::Error| ManifestError::Yaml {
            document: number,
            line: error.location().map(|l| l.line() + source.first_line),
            column: error.location().map(|l| l.column()),
            cause: YamlCause::of(&error),
        };
        let value: Value = if split::is_blank(source.text) {
            Value::Null
        } else {
            serde_saphyr::from_str_with_options(source.text, read_options()).map_err(yaml_error)?
        };
        let literals = if numbers::has_wide_integer(&value) {
            numbers::Literals::read(source.text, read_options()).map_err(yaml_error)?
        } else {
            numbers::Literals::default()
        };
        Ok(Document {
            number,
            body: Body::classify(value),
            literals,
        })
    }

    /// The objects of this document, in order, with their positions (see
    /// [`Manifest::objects`]).
    pub fn objects(&self) -> impl Iterator<Item = (Position, &Value)> {
        let mut out = Vec::new();
        let mut items = Vec::new();
        match &self.body {
            Body::Empty => {}
            Body::Single(value) | Body::List(value) => {
                collect(value, self.number, &mut items, &mut out);
            }
            Body::Sequence(values) => {
                for (i, value) in values.iter().enumerate() {
                    items.push(i);
                    collect(value, self.number, &mut items, &mut out);
                    items.pop();
                }
            }
        }
        out.into_iter()
    }

    /// The object at `position` (as [`Document::objects`] gives it), found without visiting
    /// the others.
    pub fn object(&self, position: &Position) -> Option<&Value> {
        let (mut value, nested) = match (&self.body, position.items.split_first()) {
            (Body::Empty, _) => return None,
            (Body::Sequence(values), Some((&first, rest))) => (values.get(first)?, rest),
            (Body::Sequence(_), None) => return None,
            (Body::Single(value) | Body::List(value), _) => (value, position.items.as_slice()),
        };
        for &index in nested {
            value = list_items(value).get(index)?;
        }
        value.is_object().then_some(value)
    }

    /// [`Document::object`], mutably.
    pub fn object_mut(&mut self, position: &Position) -> Option<&mut Value> {
        let (mut value, nested) = match (&mut self.body, position.items.split_first()) {
            (Body::Empty, _) => return None,
            (Body::Sequence(values), Some((&first, rest))) => (values.get_mut(first)?, rest),
            (Body::Sequence(_), None) => return None,
            (Body::Single(value) | Body::List(value), _) => (value, position.items.as_slice()),
        };
        for &index in nested {
            value = list_items_mut(value).get_mut(index)?;
        }
        value.is_object().then_some(value)
    }

    /// The objects of this document, mutably, in order, with their positions.
    fn objects_mut(&mut self) -> impl Iterator<Item = (Position, &mut Value)> {
        let mut out = Vec::new();
        let mut items = Vec::new();
        match &mut self.body {
            Body::Empty => {}
            Body::Single(value) | Body::List(value) => {
                collect_mut(value, self.number, &mut items, &mut out);
            }
            Body::Sequence(values) => {
                for (i, value) in values.iter_mut().enumerate() {
                    items.push(i);
                    collect_mut(value, self.number, &mut items, &mut out);
                    items.pop();
                }
            }
        }
        out.into_iter()
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "document {}", self.document)?;
        let mut items = self.items.iter();
        if let Some(first) = items.next() {
            write!(f, ", item {first}")?;
            for item in items {
                write!(f, ".{item}")?;
            }
        }
        Ok(())
    }
}

/// A parsed manifest stream.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Manifest {
    /// The documents, in input order.
    pub documents: Vec<Document>,
}

impl Manifest {
    /// Parses a multi-document YAML stream.
    pub fn parse(text: &str) -> Result<Self, ManifestError> {
        Ok(Self {
            documents: Self::documents(text).collect::<Result<_, _>>()?,
        })
    }

    /// Reads a stream from `reader` one document at a time: each document's text is parsed as
    /// soon as its end is read and then dropped, so the stream's text is never held whole.
    /// Splits and numbers documents exactly as [`Manifest::parse`]. More than `limit` bytes is an
    /// error, never a stream cut short.
    pub fn read(reader: impl std::io::BufRead, limit: u64) -> Result<Self, StreamError> {
        let mut documents = Vec::new();
        Self::read_each(reader, limit, |document| documents.push(document))?;
        Ok(Self { documents })
    }

    /// [`Manifest::read`], handing each document to `each` as soon as it is parsed instead of
    /// keeping it: a reader that needs only part of a stream holds only that part.
    pub fn read_each(
        mut reader: impl std::io::BufRead,
        limit: u64,
        mut each: impl FnMut(Document),
    ) -> Result<(), StreamError> {
        let count = std::cell::Cell::new(0);
        let mut current = String::new();
        let mut first_line = 0;
        let mut started = false;
        let mut line = String::new();
        let mut total = 0u64;
        let mut push = |text: &str, first_line: u64| {
            count.set(count.get() + 1);
            let source = split::Source { first_line, text };
            each(Document::parse(count.get(), source)?);
            Ok::<(), ManifestError>(())
        };
        for line_number in 0u64.. {
            line.clear();
            let read = reader
                .read_line(&mut line)
                .map_err(|_| StreamError::Unreadable)?;
            if read == 0 {
                break;
            }
            total = total.saturating_add(read as u64);
            if total > limit {
                return Err(StreamError::TooLarge { limit });
            }
            if let Some(rest) = split::marker(&line, "---") {
                if started || !split::is_blank(&current) {
                    push(&current, first_line)?;
                }
                current.clear();
                current.push_str(rest);
                first_line = line_number;
                started = true;
            } else if split::marker(&line, "...").is_some() {
                push(&current, first_line)?;
                current.clear();
                first_line = line_number + 1;
                started = false;
            } else {
                current.push_str(&line);
            }
        }
        if started || !split::is_blank(&current) || count.get() == 0 {
            push(&current, first_line)?;
        }
        Ok(())
    }

    /// The documents of a stream, parsed one at a time as the iterator is advanced: a reader
    /// that needs one document at a time holds one parsed document at a time.
    pub fn documents(text: &str) -> impl Iterator<Item = Result<Document, ManifestError>> + '_ {
        split::documents(text)
            .into_iter()
            .enumerate()
            .map(|(position, source)| Document::parse(position + 1, source))
    }

    /// A stream of one document per object (for objects read from elsewhere, such as the API).
    pub fn from_objects(objects: impl IntoIterator<Item = Value>) -> Self {
        let documents = objects
            .into_iter()
            .enumerate()
            .map(|(i, value)| Document {
                number: i + 1,
                body: Body::classify(value),
                literals: numbers::Literals::default(),
            })
            .collect();
        Self { documents }
    }

    /// Every object of the stream, in input order, with its position. The items of a
    /// `kind: List` are objects, also when the list is itself an item of a list (as `kubectl`
    /// reads them); the list is not.
    pub fn objects(&self) -> impl Iterator<Item = (Position, &Value)> {
        self.documents.iter().flat_map(Document::objects)
    }

    /// Every object of the stream, mutably, in input order, with its position.
    pub fn objects_mut(&mut self) -> impl Iterator<Item = (Position, &mut Value)> {
        self.documents.iter_mut().flat_map(Document::objects_mut)
    }

    /// Writes the stream back as YAML: the documents in order, separated by `---`, each in the
    /// shape it was read in. Empty documents are dropped.
    pub fn to_yaml(&self) -> Result<String, ManifestError> {
        let mut out = String::new();
        for document in &self.documents {
            document.write_to(&mut out)?;
        }
        Ok(out)
    }

    /// [`Manifest::to_yaml`], dropping each document once it is written: the parsed stream
    /// and its text are never both held whole.
    pub fn into_yaml(self) -> Result<String, ManifestError> {
        let mut out = String::new();
        for document in self.documents {
            document.write_to(&mut out)?;
        }
        Ok(out)
    }
}

impl Document {
    /// Appends this document to a stream (nothing for an empty one).
    pub(crate) fn write_to(&self, out: &mut String) -> Result<(), ManifestError> {
        if let Some(text) = self.to_yaml()? {
            push_document(out, &text);
        }
        Ok(())
    }

    /// This document as YAML (without a `---` line), ending with a line break, in a string of
    /// exactly its size; `None` for an empty one.
    pub fn to_yaml(&self) -> Result<Option<String>, ManifestError> {
        self.emit(|text| {
            let mut owned = String::with_capacity(text.len() + 1);
            owned.push_str(text);
            if !owned.ends_with('\n') {
                owned.push('\n');
            }
            owned
        })
    }

    /// [`Document::to_yaml`], appended to `out` as pieces of at most [`PIECE`] bytes
    /// (`false` for an empty document, which adds nothing). A stream written back out of input
    /// order frees its parsed documents in scattered places; pieces this small fit in the
    /// space they leave, where whole documents would grow the heap.
    pub fn write_pieces(&self, out: &mut Vec<String>) -> Result<bool, ManifestError> {
        self.emit(|text| {
            let mut rest = text;
            while !rest.is_empty() {
                let mut cut = rest.len().min(PIECE);
                while !rest.is_char_boundary(cut) {
                    cut -= 1;
                }
                out.push(rest[..cut].to_owned());
                rest = &rest[cut..];
            }
            if !text.ends_with('\n') {
                out.push("\n".to_owned());
            }
        })
        .map(|written| written.is_some())
    }

    fn emit<R>(&self, take: impl FnOnce(&str) -> R) -> Result<Option<R>, ManifestError> {
        let emit_error = |_| ManifestError::Emit {
            document: self.number,
        };
        match &self.body {
            Body::Empty => Ok(None),
            Body::Single(value) | Body::List(value) => self
                .literals
                .emit(value, take)
                .map(Some)
                .map_err(emit_error),
            Body::Sequence(items) => self
                .literals
                .emit(items, take)
                .map(Some)
                .map_err(emit_error),
        }
    }
}

/// The largest piece [`Document::write_pieces`] writes.
pub const PIECE: usize = 2048;

/// Why a stream could not be read with [`Manifest::read`].
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StreamError {
    /// The reader failed, or the text is not UTF-8.
    #[error("cannot read (is it UTF-8 text?)")]
    Unreadable,
    /// The stream is larger than the limit.
    #[error("larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// A document is invalid.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

impl StreamError {
    /// A static category, for logs.
    pub fn code(&self) -> &'static str {
        match self {
            StreamError::Unreadable => "unreadable",
            StreamError::TooLarge { .. } => "too_large",
            StreamError::Manifest(ManifestError::Yaml { .. }) => "invalid_yaml",
            StreamError::Manifest(ManifestError::Emit { .. }) => "emit",
        }
    }
}

/// Pushes `value` as an object, or descends into it when it is a `kind: List`.
fn collect<'a>(
    value: &'a Value,
    document: usize,
    items: &mut Vec<usize>,
    out: &mut Vec<(Position, &'a Value)>,
) {
    if is_kind_list(value) {
        for (i, item) in list_items(value).iter().enumerate() {
            items.push(i);
            collect(item, document, items, out);
            items.pop();
        }
    } else if value.is_object() {
        out.push((
            Position {
                document,
                items: items.clone(),
            },
            value,
        ));
    }
}

fn collect_mut<'a>(
    value: &'a mut Value,
    document: usize,
    items: &mut Vec<usize>,
    out: &mut Vec<(Position, &'a mut Value)>,
) {
    if is_kind_list(value) {
        for (i, item) in list_items_mut(value).iter_mut().enumerate() {
            items.push(i);
            collect_mut(item, document, items, out);
            items.pop();
        }
    } else if value.is_object() {
        out.push((
            Position {
                document,
                items: items.clone(),
            },
            value,
        ));
    }
}

/// How scalars are read: as Kubernetes reads manifests (go-yaml v2, YAML 1.1), so a plain
/// `0644` is the octal 420 that `kubectl apply` sends, not 644. Errors carry no snippet.
fn read_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        legacy_octal_numbers: true,
        with_snippet: false,
    }
}

fn push_document(out: &mut String, text: &str) {
    if !out.is_empty() {
        out.push_str("---\n");
    }
    out.push_str(text);
    if !text.ends_with('\n') {
        out.push('\n');
    }
}

impl Body {
    fn classify(value: Value) -> Self {
        match value {
            Value::Null => Body::Empty,
            Value::Array(items) => Body::Sequence(items),
            value if is_kind_list(&value) => Body::List(value),
            value => Body::Single(value),
        }
    }
}

/// A `kind: List` (or any `…List` kind) whose `items` is an array.
fn is_kind_list(value: &Value) -> bool {
    let kind_is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind.ends_with("List"));
    kind_is_list && value.get("items").is_some_and(Value::is_array)
}

fn list_items(list: &Value) -> &[Value] {
    list.get("items")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn list_items_mut(list: &mut Value) -> &mut [Value] {
    match list.get_mut("items").and_then(Value::as_array_mut) {
        Some(items) => items.as_mut_slice(),
        None => &mut [],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn multi_document_stream_with_empty_documents() {
        let text = "# leading comment\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
        let manifest = Manifest::parse(text).unwrap();
        let names: Vec<_> = manifest
            .objects()
            .map(|(p, v)| {
                (
                    p.document,
                    v["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(names, vec![(1, "a".to_owned()), (3, "b".to_owned())]);
    }

    #[test]
    fn top_level_sequence_and_kind_list() {
        let text =
            "- kind: A\n- 3\n- kind: B\n---\nkind: List\napiVersion: v1\nitems:\n- kind: C\n";
        let manifest = Manifest::parse(text).unwrap();
        let kinds: Vec<_> = manifest
            .objects()
            .map(|(p, v)| (p, v["kind"].as_str().unwrap().to_owned()))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (
                    Position {
                        document: 1,
                        items: vec![0]
                    },
                    "A".to_owned()
                ),
                (
                    Position {
                        document: 1,
                        items: vec![2]
                    },
                    "B".to_owned()
                ),
                (
                    Position {
                        document: 2,
                        items: vec![0]
                    },
                    "C".to_owned()
                ),
            ]
        );
    }

    #[test]
    fn yaml_types_are_kept() {
        let manifest = Manifest::parse("a: true\nb: \"true\"\nc: 1\nd: 1.5\ne: '01'\n").unwrap();
        let (_, value) = manifest.objects().next().unwrap();
        assert_eq!(
            value,
            &json!({"a": true, "b": "true", "c": 1, "d": 1.5, "e": "01"})
        );
        let again = Manifest::parse(&manifest.to_yaml().unwrap()).unwrap();
        assert_eq!(again, manifest);
    }

    #[test]
    fn scalars_are_read_as_kubernetes_reads_them() {
        let text = "defaultMode: 0644\nmode: 0600\nzero: 00\nquoted: '0644'\nport: 8080\nratio: 0.5\non: yes\n";
        let manifest = Manifest::parse(text).unwrap();
        let (_, value) = manifest.objects().next().unwrap();
        assert_eq!(
            value,
            &json!({"defaultMode": 420, "mode": 384, "zero": 0, "quoted": "0644", "port": 8080, "ratio": 0.5, "on": true})
        );
        assert!(
            value["defaultMode"].is_u64() || value["defaultMode"].is_i64(),
            "an integer, never a float"
        );
        let again = Manifest::parse(&manifest.to_yaml().unwrap()).unwrap();
        assert_eq!(again, manifest, "written back as the same values");
    }

    #[test]
    fn invalid_document_is_named_without_its_text() {
        let text = "kind: A\n---\nkind: B\n---\nkind: [unclosed secret-value\n";
        let error = Manifest::parse(text).unwrap_err();
        let ManifestError::Yaml { document, .. } = error else {
            panic!("unexpected {error:?}")
        };
        assert_eq!(document, 3);
        let ManifestError::Yaml { line, .. } = error.clone() else {
            unreachable!()
        };
        assert_eq!(line, Some(5), "lines count from the start of the stream");
        assert!(!error.to_string().contains("secret-value"), "{error}");
    }

    #[test]
    fn reading_document_by_document_is_parsing() {
        for text in [
            "",
            "# only a comment\n",
            "a: 1",
            "---\na: 1\n---\n---\nb: 2\n...\n--- c: 3\n...\n",
            "- kind: A\n---\nkind: List\nitems:\n- kind: B\n",
            "a: |\n  ---x\n  --- not a marker\nb: 100000000000000000000000000000\n",
            "kind: A\n---\nkind: [broken\n",
        ] {
            let read = Manifest::read(text.as_bytes(), 1 << 20).map_err(|e| e.to_string());
            let parsed = Manifest::parse(text).map_err(|e| e.to_string());
            assert_eq!(read, parsed, "{text:?}");
        }
        assert_eq!(
            Manifest::read("a: 1\n".repeat(10).as_bytes(), 20),
            Err(StreamError::TooLarge { limit: 20 })
        );
        assert_eq!(
            Manifest::read(&b"a: \xff\n"[..], 100),
            Err(StreamError::Unreadable)
        );
    }

    #[test]
    fn an_object_is_found_at_its_position() {
        let text = "kind: A\n---\n- kind: B\n- kind: List\n  items:\n  - kind: C\n  - kind: D\n---\nkind: List\nitems:\n- kind: E\n- 1\n- kind: F\n---\n";
        let manifest = Manifest::parse(text).unwrap();
        let mut found = 0;
        for document in &manifest.documents {
            for (position, object) in document.objects() {
                assert_eq!(document.object(&position), Some(object), "{position}");
                found += 1;
            }
        }
        let mut changed = manifest.clone();
        for document in &mut changed.documents {
            let positions: Vec<Position> = document.objects().map(|(p, _)| p).collect();
            for position in positions {
                document.object_mut(&position).unwrap()["seen"] = json!(true);
            }
        }
        assert_eq!(
            changed
                .objects()
                .filter(|(_, o)| o["seen"] == json!(true))
                .count(),
            6
        );
        assert_eq!(found, 6);
        let beyond = Position {
            document: 2,
            items: vec![1, 5],
        };
        assert_eq!(manifest.documents[1].object(&beyond), None);
    }

    #[test]
    fn pieces_are_the_document() {
        let long = "é€𝄞x".repeat(PIECE);
        let text = format!("kind: A\ndata: {{t: \"{long}\"}}\n---\nkind: B\n---\n# empty\n");
        let manifest = Manifest::parse(&text).unwrap();
        let mut wrote = Vec::new();
        for document in &manifest.documents {
            let mut pieces = Vec::new();
            let written = document.write_pieces(&mut pieces).unwrap();
            assert_eq!(written, !pieces.is_empty());
            assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= PIECE));
            let whole = document.to_yaml().unwrap();
            assert_eq!(written.then(|| pieces.concat()), whole);
            wrote.push(pieces.len());
        }
        assert!(wrote[0] > 3 && wrote[1] == 1 && wrote[2] == 0, "{wrote:?}");
    }

    #[test]
    fn round_trip_keeps_shape_and_order() {
        let text = "- kind: A\n  x: 1\n---\nkind: B\n---\nkind: List\nitems:\n- kind: C\n";
        let manifest = Manifest::parse(text).unwrap();
        let again = Manifest::parse(&manifest.to_yaml().unwrap()).unwrap();
        assert_eq!(again, manifest);
    }

    #[test]
    fn mutation_through_objects_mut() {
        let mut manifest = Manifest::parse("kind: List\nitems:\n- kind: C\n").unwrap();
        for (_, object) in manifest.objects_mut() {
            object["seen"] = json!(true);
        }
        assert_eq!(manifest.objects().next().unwrap().1["seen"], json!(true));
    }
}
