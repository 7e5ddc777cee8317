//! Splitting a YAML stream at its document markers.
//!
//! In YAML 1.2 a line that starts with `---` or `...` followed by whitespace or the end of the
//! line is always a document marker; it cannot occur inside any scalar. Splitting lines there is
//! therefore exact, and lets errors name their document.

/// One document's text and the 0-based line of the stream it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Source {
    /// Lines before the document in the stream (added to parser line numbers).
    pub(crate) first_line: u64,
    /// The document's text.
    pub(crate) text: String,
}

/// The documents of a stream, in order.
pub(crate) fn documents(text: &str) -> Vec<Source> {
    let mut documents = Vec::new();
    let mut current = Source {
        first_line: 0,
        text: String::new(),
    };
    let mut started = false; // whether the current document holds anything, marker included
    for (line_number, line) in (0u64..).zip(text.split_inclusive('\n')) {
        if let Some(rest) = marker(line, "---") {
            if started || !is_blank(&current.text) {
                documents.push(current);
            }
            current = Source {
                first_line: line_number,
                text: rest.to_owned(),
            };
            started = true;
        } else if marker(line, "...").is_some() {
            documents.push(current);
            current = Source {
                first_line: line_number + 1,
                text: String::new(),
            };
            started = false;
        } else {
            current.text.push_str(line);
        }
    }
    if started || !is_blank(&current.text) || documents.is_empty() {
        documents.push(current);
    }
    documents
}

/// The text after a document marker on its line, if `line` is one.
fn marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(marker)?;
    match rest.chars().next() {
        None => Some(""),
        Some(c) if c.is_whitespace() => Some(rest),
        Some(_) => None,
    }
}

/// Whether a document holds only whitespace and comments.
pub(crate) fn is_blank(source: &str) -> bool {
    source
        .lines()
        .map(str::trim)
        .all(|line| line.is_empty() || line.starts_with('#'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_markers_only() {
        let docs = documents("a: 1\n---\nb: |\n  ---x\n  --- not a marker\n--- c: 2\n...\n");
        assert_eq!(docs.len(), 3, "{docs:?}");
        assert!(docs[1].text.contains("--- not a marker"));
        assert_eq!(docs[1].first_line, 1);
        assert_eq!(docs[2].text.trim(), "c: 2");
        assert_eq!(docs[2].first_line, 5);
    }

    #[test]
    fn leading_marker_does_not_make_an_empty_document() {
        assert_eq!(documents("---\na: 1\n").len(), 1);
        assert_eq!(documents("# c\n---\na: 1\n").len(), 1);
        assert_eq!(documents("").len(), 1);
    }

    #[test]
    fn linear_in_the_number_of_documents() {
        let stream = "a: 1\n---\n".repeat(50_000);
        let docs = documents(&stream);
        assert_eq!(docs.len(), 50_001);
        assert_eq!(docs[49_999].first_line, 99_997);
    }
}
