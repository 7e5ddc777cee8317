//! Several manifest streams rendered as one: flattened objects that keep their origin.

use std::fmt;

use serde_json::Value;

use crate::{InputError, Manifest, Position};

/// The inputs of one render (files or stdin), in order.
///
/// [`ManifestSet::objects`] and [`ManifestSet::objects_mut`] flatten every object of every
/// input into one list; an index into that list is what the render engine reports, and
/// [`ManifestSet::locate`] turns it back into the input and position. [`ManifestSet::to_yaml`]
/// writes the inputs back in order as one stream.
#[derive(Debug, Clone, Default)]
pub struct ManifestSet {
    inputs: Vec<(String, Manifest)>,
}

/// Where an object of a [`ManifestSet`] comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin<'a> {
    /// The input's label.
    pub label: &'a str,
    /// The position in that input.
    pub position: Position,
}

impl fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.label, self.position)
    }
}

impl ManifestSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses `text` and adds it as the next input, named `label` in messages.
    pub fn parse_input(&mut self, label: impl Into<String>, text: &str) -> Result<(), InputError> {
        let label = label.into();
        match Manifest::parse(text) {
            Ok(manifest) => {
                self.push(label, manifest);
                Ok(())
            }
            Err(error) => Err(InputError { label, error }),
        }
    }

    /// Reads the next input from `reader` one document at a time (see [`Manifest::read`]),
    /// named `label` in messages.
    pub fn read_input(
        &mut self,
        label: impl Into<String>,
        reader: impl std::io::BufRead,
        limit: u64,
    ) -> Result<(), crate::ReadInputError> {
        let label = label.into();
        match Manifest::read(reader, limit) {
            Ok(manifest) => {
                self.push(label, manifest);
                Ok(())
            }
            Err(error) => Err(crate::ReadInputError { label, error }),
        }
    }

    /// Adds a parsed input.
    pub fn push(&mut self, label: impl Into<String>, manifest: Manifest) {
        self.inputs.push((label.into(), manifest));
    }

    /// The inputs with their labels.
    pub fn inputs(&self) -> impl Iterator<Item = (&str, &Manifest)> {
        self.inputs.iter().map(|(label, m)| (label.as_str(), m))
    }

    /// Every object of every input, in order.
    pub fn objects(&self) -> Vec<&Value> {
        self.inputs
            .iter()
            .flat_map(|(_, manifest)| manifest.objects().map(|(_, object)| object))
            .collect()
    }

    /// Every object of every input, mutably, in the order of [`ManifestSet::objects`].
    pub fn objects_mut(&mut self) -> Vec<&mut Value> {
        self.inputs
            .iter_mut()
            .flat_map(|(_, manifest)| manifest.objects_mut().map(|(_, object)| object))
            .collect()
    }

    /// The set taken apart: the labels of its inputs, and every document in order with the
    /// index of its input's label. Writing each document with [`crate::Document::to_yaml`],
    /// in order and separated by `---` lines, is [`ManifestSet::into_yaml`].
    pub fn into_documents(self) -> (Vec<String>, Vec<(usize, crate::Document)>) {
        let mut labels = Vec::with_capacity(self.inputs.len());
        let mut documents = Vec::new();
        for (input, (label, manifest)) in self.inputs.into_iter().enumerate() {
            labels.push(label);
            documents.extend(manifest.documents.into_iter().map(|d| (input, d)));
        }
        (labels, documents)
    }

    /// Where the object at `index` of [`ManifestSet::objects`] comes from.
    pub fn locate(&self, index: usize) -> Option<Origin<'_>> {
        self.inputs
            .iter()
            .flat_map(|(label, manifest)| {
                manifest.objects().map(move |(position, _)| Origin {
                    label: label.as_str(),
                    position,
                })
            })
            .nth(index)
    }

    /// The inputs written back as one stream: each input's documents in order, all
    /// separated by `---`.
    pub fn to_yaml(&self) -> Result<String, InputError> {
        let mut output = String::new();
        for (label, manifest) in &self.inputs {
            for document in &manifest.documents {
                document.write_to(&mut output).map_err(|error| InputError {
                    label: label.clone(),
                    error,
                })?;
            }
        }
        Ok(output)
    }

    /// [`ManifestSet::to_yaml`], dropping each document once it is written, so that the
    /// parsed objects and the output are never both held whole.
    pub fn into_yaml(self) -> Result<String, InputError> {
        Ok(self.into_yaml_documents()?.join("---\n"))
    }

    /// The documents of [`ManifestSet::into_yaml`], each ending with a newline, to be joined by
    /// `---` lines; each parsed document is dropped once written, and no single string holds
    /// the whole output.
    pub fn into_yaml_documents(self) -> Result<Vec<String>, InputError> {
        let mut output = Vec::new();
        for (label, manifest) in self.inputs {
            for document in manifest.documents {
                let text = document.to_yaml().map_err(|error| InputError {
                    label: label.clone(),
                    error,
                })?;
                output.extend(text);
            }
        }
        Ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattens_inputs_and_locates_objects() {
        let mut set = ManifestSet::new();
        set.parse_input(
            "a.yaml",
            "kind: A\n---\nkind: List\nitems:\n- kind: B\n- kind: List\n  items:\n  - kind: C\n",
        )
        .unwrap();
        set.parse_input("<stdin>", "- kind: D\n").unwrap();
        let kinds: Vec<_> = set
            .objects()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["A", "B", "C", "D"]);
        let located: Vec<String> = (0..5)
            .map(|i| set.locate(i).map(|o| o.to_string()).unwrap_or_default())
            .collect();
        assert_eq!(
            located,
            [
                "a.yaml: document 1",
                "a.yaml: document 2, item 0",
                "a.yaml: document 2, item 1.0",
                "<stdin>: document 1, item 0",
                ""
            ]
        );
        for object in set.objects_mut() {
            object["seen"] = Value::Bool(true);
        }
        let text = set.to_yaml().unwrap();
        assert_eq!(text.matches("seen: true").count(), 4, "{text}");
        assert_eq!(text.matches("---\n").count(), 2, "{text}");
    }

    #[test]
    fn an_error_names_the_input() {
        let mut set = ManifestSet::new();
        let error = set.parse_input("x.yaml", "a: [secret-value").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("x.yaml: document 1: invalid YAML"),
            "{text}"
        );
        assert!(!text.contains("secret-value"));
    }
}
