//! The webhook file: one URL per line, read from a mounted Secret so the URLs stay out of the
//! command line and the environment.

use std::io::Read as _;
use std::path::Path;

use thiserror::Error;

use crate::url::{WebhookUrl, WebhookUrlError};

/// The largest webhook file read, in bytes.
pub const MAX_WEBHOOK_FILE_LEN: u64 = 64 * 1024;

/// Why the webhook file could not be used. Messages never repeat the file's content.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum WebhookFileError {
    /// It could not be opened or read.
    #[error("the webhook file could not be read")]
    Read,
    /// Larger than [`MAX_WEBHOOK_FILE_LEN`].
    #[error("the webhook file is larger than 64 KiB")]
    TooLarge,
    /// It is not UTF-8.
    #[error("the webhook file is not UTF-8 text")]
    NotUtf8,
    /// A line is not a webhook URL.
    #[error("line {line} of the webhook file: {error}")]
    Line {
        /// The line's number, from 1.
        line: usize,
        /// Why it is not a webhook URL.
        error: WebhookUrlError,
    },
}

impl WebhookFileError {
    /// A static code for logs and metrics: `read`, `too_large`, `not_utf8`, or the
    /// [`WebhookUrlError::code`] of the bad line.
    pub fn code(&self) -> &'static str {
        match self {
            WebhookFileError::Read => "read",
            WebhookFileError::TooLarge => "too_large",
            WebhookFileError::NotUtf8 => "not_utf8",
            WebhookFileError::Line { error, .. } => error.code(),
        }
    }
}

/// Reads webhook URLs from `path`: one per line; surrounding whitespace is trimmed, blank lines
/// and lines starting with `#` are ignored. A file with no URL gives an empty list.
pub fn read_webhook_file(path: &Path) -> Result<Vec<WebhookUrl>, WebhookFileError> {
    let file = std::fs::File::open(path).map_err(|_| WebhookFileError::Read)?;
    let mut bytes = Vec::new();
    file.take(MAX_WEBHOOK_FILE_LEN + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| WebhookFileError::Read)?;
    if bytes.len() as u64 > MAX_WEBHOOK_FILE_LEN {
        return Err(WebhookFileError::TooLarge);
    }
    let text = String::from_utf8(bytes).map_err(|_| WebhookFileError::NotUtf8)?;
    parse_webhook_lines(&text)
}

/// The URLs of a webhook file's text.
fn parse_webhook_lines(text: &str) -> Result<Vec<WebhookUrl>, WebhookFileError> {
    let mut urls = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line_text = line.trim();
        if line_text.is_empty() || line_text.starts_with('#') {
            continue;
        }
        let url = line_text
            .parse::<WebhookUrl>()
            .map_err(|error| WebhookFileError::Line {
                line: index + 1,
                error,
            })?;
        urls.push(url);
    }
    Ok(urls)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    fn file(content: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(content).unwrap();
        file
    }

    /// The URLs shown, or the error's code and line.
    type Expected = Result<Vec<&'static str>, (&'static str, Option<usize>)>;

    #[test]
    fn table() {
        let cases: &[(&str, Expected)] = &[
            ("", Ok(vec![])),
            ("# only a comment\n\n   \n", Ok(vec![])),
            (
                "# Slack\nhttps://hooks.slack.com/services/T/B/SECRET1\n\n  # Chat\r\n  https://chat.googleapis.com/v1/spaces/A/messages?key=K&token=SECRET2  \r\n",
                Ok(vec![
                    "https://hooks.slack.com/…",
                    "https://chat.googleapis.com/…",
                ]),
            ),
            (
                "https://example.com/ok\nnot a url SECRET3\n",
                Err(("invalid_character", Some(2))),
            ),
            (
                "# x\n\nftp://example.com/SECRET4",
                Err(("unsupported_scheme", Some(3))),
            ),
            (
                "https://user:SECRET5@example.com/",
                Err(("userinfo", Some(1))),
            ),
        ];
        for (content, expected) in cases {
            let f = file(content.as_bytes());
            let got = read_webhook_file(f.path());
            match (got, expected) {
                (Ok(urls), Ok(shown)) => {
                    let urls: Vec<String> = urls.iter().map(ToString::to_string).collect();
                    assert_eq!(&urls, shown, "{content:?}");
                }
                (Err(err), Err((code, line))) => {
                    assert_eq!(err.code(), *code, "{content:?}");
                    let text = err.to_string();
                    if let Some(line) = line {
                        assert!(text.starts_with(&format!("line {line} ")), "{text}");
                    }
                    assert!(!text.contains("SECRET"), "{text}");
                    assert!(!format!("{err:?}").contains("SECRET"));
                }
                (got, expected) => panic!("{content:?}: {got:?} vs {expected:?}"),
            }
        }
    }

    #[test]
    fn unreadable_large_and_binary() {
        let dir = tempfile::tempdir().unwrap();
        let missing = read_webhook_file(&dir.path().join("absent")).unwrap_err();
        assert_eq!(missing.code(), "read");
        let large = file(&vec![b'#'; MAX_WEBHOOK_FILE_LEN as usize + 1]);
        assert_eq!(
            read_webhook_file(large.path()).unwrap_err().code(),
            "too_large"
        );
        let binary = file(b"https://example.com/\xff\xfe");
        assert_eq!(
            read_webhook_file(binary.path()).unwrap_err().code(),
            "not_utf8"
        );
    }
}
