use thiserror::Error;

/// Why a manifest stream could not be read or written.
///
/// Messages name the document and a position, never the input text: a manifest may hold Secret data.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ManifestError {
    /// A document is not valid YAML.
    #[error("document {document}: invalid YAML{}: {cause}", position(*line, *column))]
    Yaml {
        /// 1-based document number.
        document: usize,
        /// 1-based line in the whole stream, when the parser knows it.
        line: Option<u64>,
        /// 1-based column, when the parser knows it.
        column: Option<u64>,
        /// Why, in fixed words.
        cause: YamlCause,
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

/// Why a YAML document could not be read, in fixed words: the parser's own message may quote
/// the input (a manifest may hold Secret data), so only its kind is told.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum YamlCause {
    /// `key: value` where only a value may stand (often a missing indent, or a value with `: `
    /// that needs quotes).
    #[error(
        "a mapping is not allowed here (check the indentation, or quote a value holding \": \")"
    )]
    MappingNotAllowed,
    /// A flow list or mapping (`[`, `{`) or a block is not closed, or an entry is missing.
    #[error("a list or mapping is not closed, or an entry in it is missing")]
    NotClosed,
    /// A quoted string is not closed.
    #[error("a quoted string is not closed")]
    UnclosedQuote,
    /// A quoted string holds an escape YAML does not know.
    #[error("a quoted string holds an escape sequence YAML does not know")]
    BadEscape,
    /// A character that cannot start a YAML token (a tab in the indentation, `@`, a backquote).
    #[error("a character that cannot start a value (a tab used for indentation, '@' or '`')")]
    BadCharacter,
    /// The indentation does not match the block it is in.
    #[error("the indentation does not match the block it is in")]
    Indentation,
    /// A key appears twice in one mapping.
    #[error("a key appears twice in one mapping")]
    DuplicateKey,
    /// The document ends in the middle of a value.
    #[error("the document ends in the middle of a value")]
    UnexpectedEnd,
    /// An alias names no anchor, or aliases expand beyond the limits.
    #[error("an alias names no anchor, or aliases expand too far")]
    Alias,
    /// The document is beyond the parser's size or nesting limits.
    #[error("the document is too large or too deeply nested")]
    TooLarge,
    /// Any other syntax error.
    #[error("the YAML syntax is broken")]
    Syntax,
}

impl YamlCause {
    /// The cause of a parser error, from its kind only (its text is never kept).
    pub fn of(error: &serde_saphyr::Error) -> Self {
        use serde_saphyr::Error as E;
        match error {
            E::DuplicateMappingKey { .. } => YamlCause::DuplicateKey,
            E::IndentationError { .. } => YamlCause::Indentation,
            E::Eof { .. } => YamlCause::UnexpectedEnd,
            E::UnknownAnchor { .. }
            | E::AliasError { .. }
            | E::AliasReplayCounterOverflow { .. }
            | E::AliasReplayLimitExceeded { .. }
            | E::AliasExpansionLimitExceeded { .. }
            | E::AliasReplayStackDepthExceeded { .. } => YamlCause::Alias,
            E::Budget { .. } => YamlCause::TooLarge,
            E::WithSnippet { error, .. } => YamlCause::of(error),
            E::ExternalMessage { msg, .. } | E::Message { msg, .. } => {
                YamlCause::of_parser_message(msg)
            }
            _ => YamlCause::Syntax,
        }
    }

    /// The cause a parser message names, matched against the parser's fixed phrases.
    fn of_parser_message(message: &str) -> Self {
        let has = |phrase: &str| message.contains(phrase);
        if has("mapping values are not allowed") || has("block sequence entries are not allowed") {
            YamlCause::MappingNotAllowed
        } else if has("unclosed quote") {
            YamlCause::UnclosedQuote
        } else if has("tab") || has("cannot start any token") {
            YamlCause::BadCharacter
        } else if has("indent") {
            YamlCause::Indentation
        } else if has("quoted scalar") || has("escape") || has("surrogate") {
            YamlCause::BadEscape
        } else if has("bracket") || has("did not find expected") || has("flow") {
            YamlCause::NotClosed
        } else if has("end of stream") || has("unexpected end") {
            YamlCause::UnexpectedEnd
        } else if has("duplicate") {
            YamlCause::DuplicateKey
        } else {
            YamlCause::Syntax
        }
    }
}

#[cfg(test)]
mod tests {
    use super::YamlCause;

    #[test]
    fn the_cause_of_each_kind_of_broken_yaml_is_told_without_its_text() {
        for (yaml, cause) in [
            ("kind: [unclosed-secret-value\n", YamlCause::NotClosed),
            ("a: {b: c\n", YamlCause::NotClosed),
            ("a: \"unclosed-secret-value\n", YamlCause::UnclosedQuote),
            ("a: b: c\n", YamlCause::MappingNotAllowed),
            ("a: 1\na: 2\n", YamlCause::DuplicateKey),
            ("a:\n\t- b\n", YamlCause::BadCharacter),
            ("a: *nope\n", YamlCause::Alias),
            ("a: \"\\q\"\n", YamlCause::BadEscape),
        ] {
            let error = serde_saphyr::from_str::<serde_json::Value>(yaml).unwrap_err();
            let told = YamlCause::of(&error);
            assert_eq!(told, cause, "{yaml:?}");
            assert!(!told.to_string().contains("secret-value"));
        }
    }
}
