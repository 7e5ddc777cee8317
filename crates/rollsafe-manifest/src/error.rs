use thiserror::Error;

/// Why a manifest stream could not be read or written.
///
/// Messages name the document and a position, never the input text: a manifest may hold Secret data.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ManifestError {
    /// A document is not valid YAML.
    #[error("document {document}: invalid YAML{}", position(*line, *column))]
    Yaml {
        /// 1-based document number.
        document: usize,
        /// 1-based line in the whole stream, when the parser knows it.
        line: Option<u64>,
        /// 1-based column, when the parser knows it.
        column: Option<u64>,
    },
    /// A document could not be written back as YAML.
    #[error("document {document}: cannot be written as YAML")]
    Emit {
        /// 1-based document number.
        document: usize,
    },
}

fn position(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(" at line {line}, column {column}"),
        (Some(line), None) => format!(" at line {line}"),
        _ => String::new(),
    }
}

/// A [`ManifestError`] in one input of a [`crate::ManifestSet`], named by its label.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{label}: {error}")]
pub struct InputError {
    /// How the input is named in messages (a path, or `<stdin>`).
    pub label: String,
    /// What went wrong (part of this error's message, so not a separate source).
    pub error: ManifestError,
}

/// A [`crate::StreamError`] in one input of a [`crate::ManifestSet`], named by its label.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{label}: {error}")]
pub struct ReadInputError {
    /// How the input is named in messages (a path, or `<stdin>`).
    pub label: String,
    /// What went wrong (part of this error's message, so not a separate source).
    pub error: crate::StreamError,
}
