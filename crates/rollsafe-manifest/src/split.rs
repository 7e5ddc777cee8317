//! Splitting a YAML stream at its document markers.
//!
//! In YAML 1.2 a line that starts with `---` or `...` followed by whitespace or the end of the
//! line is always a document marker; it cannot occur inside any scalar. Splitting lines there is
//! therefore exact, and lets errors name their document. Lines of later documents are padded
//! with blank lines so that parser line numbers stay those of the whole stream.

/// The documents of a stream, each padded with leading newlines to its original line offset.
pub(crate) fn documents(text: &str) -> Vec<String> {
    let mut documents = Vec::new();
    let mut current = String::new();
    let mut started = false; // whether the current document holds anything, marker included
    for (line_number, line) in text.split_inclusive('\n').enumerate() {
        if let Some(rest) = marker(line, "---") {
            if started || !is_blank(&current) {
                documents.push(std::mem::take(&mut current));
            }
            current = "\n".repeat(line_number);
            current.push_str(rest);
            started = true;
        } else if marker(line, "...").is_some() {
            documents.push(std::mem::take(&mut current));
            current = "\n".repeat(line_number + 1);
            started = false;
        } else {
            current.push_str(line);
        }
    }
    if started || !is_blank(&current) || documents.is_empty() {
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
        assert!(docs[1].contains("--- not a marker"));
        assert_eq!(docs[2].trim(), "c: 2");
    }

    #[test]
    fn leading_marker_does_not_make_an_empty_document() {
        assert_eq!(documents("---\na: 1\n").len(), 1);
        assert_eq!(documents("# c\n---\na: 1\n").len(), 1);
        assert_eq!(documents("").len(), 1);
    }
}
