//! Splitting a YAML stream at its document markers.
//!
//! In YAML 1.2 a line that starts with `---` or `...` followed by whitespace or the end of the
//! line is always a document marker; it cannot occur inside any scalar. Splitting lines there is
//! therefore exact, and lets errors name their document.

/// One document's text (a slice of the stream) and the 0-based line of the stream it starts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Source<'a> {
    /// Lines before the document in the stream (added to parser line numbers).
    pub(crate) first_line: u64,
    /// The document's text.
    pub(crate) text: &'a str,
}

/// The documents of a stream, in order, as slices of it (nothing is copied).
pub(crate) fn documents(text: &str) -> Vec<Source<'_>> {
    let mut documents = Vec::new();
    let mut first_line = 0;
    let mut start = 0; // byte offset where the current document's text starts
    let mut offset = 0; // byte offset of the current line
    let mut started = false; // whether the current document holds anything, marker included
    for (line_number, line) in (0u64..).zip(text.split_inclusive('\n')) {
        let line_start = offset;
        offset += line.len();
        if let Some(rest) = marker(line, "---") {
            let previous = &text[start..line_start];
            if started || !is_blank(previous) {
                documents.push(Source {
                    first_line,
                    text: previous,
                });
            }
            first_line = line_number;
            start = offset - rest.len();
            started = true;
        } else if marker(line, "...").is_some() {
            documents.push(Source {
                first_line,
                text: &text[start..line_start],
            });
            first_line = line_number + 1;
            start = offset;
            started = false;
        }
    }
    let last = &text[start..];
    if started || !is_blank(last) || documents.is_empty() {
        documents.push(Source {
            first_line,
            text: last,
        });
    }
    documents
}

/// The text after a document marker on its line, if `line` is one.
pub(crate) fn marker<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
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
