//! An object's `metadata.uid`, kept in 16 bytes when it is the UUID the API server assigns.
//!
//! kube-apiserver writes every uid as a lowercase, hyphenated UUID (36 characters): as text it
//! costs a 24-byte string and a 48-byte block per cached object, as bytes it costs nothing
//! beyond the entry. Any other text (no API server sends it, but the cache must not depend on
//! that) is kept as it is. Either way [`Uid::with_bytes`] gives back the exact text, which the
//! digest hashes.

use std::fmt;

/// An object's uid.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub enum Uid {
    /// No uid (an object not yet stored, or a test's).
    #[default]
    None,
    /// A lowercase hyphenated UUID, as its 16 bytes.
    Uuid([u8; 16]),
    /// Any other text.
    Text(Box<str>),
}

impl Uid {
    /// The uid whose text is `text`.
    pub fn new(text: &str) -> Self {
        if text.is_empty() {
            return Uid::None;
        }
        // Kept as bytes only when formatting them gives this very text back (uppercase,
        // braces and the other forms `uuid` reads are kept as text).
        match uuid::Uuid::try_parse(text) {
            Ok(parsed)
                if parsed
                    .hyphenated()
                    .encode_lower(&mut [0; uuid::fmt::Hyphenated::LENGTH])
                    == text =>
            {
                Uid::Uuid(parsed.into_bytes())
            }
            _ => Uid::Text(text.into()),
        }
    }

    /// Calls `f` with the uid's exact text, as bytes (empty for none).
    pub fn with_bytes<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match self {
            Uid::None => f(b""),
            Uid::Uuid(bytes) => {
                let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
                f(uuid::Uuid::from_bytes(*bytes)
                    .hyphenated()
                    .encode_lower(&mut text)
                    .as_bytes())
            }
            Uid::Text(text) => f(text.as_bytes()),
        }
    }

    /// Whether the text is `text`.
    pub fn is(&self, text: &str) -> bool {
        self.with_bytes(|bytes| bytes == text.as_bytes())
    }
}

impl From<&str> for Uid {
    fn from(text: &str) -> Self {
        Uid::new(text)
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.with_bytes(|bytes| f.write_str(std::str::from_utf8(bytes).unwrap_or_default()))
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.to_string())
    }
}

impl PartialEq<&str> for Uid {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_text_is_given_back_as_it_was() {
        for (text, compact) in [
            ("0b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2b", true),
            ("00000000-0000-0000-0000-000000000000", true),
            ("ffffffff-ffff-ffff-ffff-ffffffffffff", true),
            // Uppercase would come back lowercase: kept as text.
            ("0B4C6C5E-2F3A-4D1E-9A8B-7C6D5E4F3A2B", false),
            ("0b4c6c5e2f3a4d1e9a8b7c6d5e4f3a2b0000", false),
            ("0b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2g", false),
            ("uid-db", false),
            ("é-not-ascii-but-thirty-six-bytes-xx", false),
            ("", false),
        ] {
            let uid = Uid::new(text);
            assert_eq!(matches!(uid, Uid::Uuid(_)), compact, "{text}");
            assert_eq!(uid.to_string(), text);
            assert!(uid.is(text), "{text}");
            uid.with_bytes(|bytes| assert_eq!(bytes, text.as_bytes()));
        }
    }

    #[test]
    fn equal_texts_are_equal_uids() {
        let text = "0b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2b";
        assert_eq!(Uid::new(text), Uid::new(text));
        assert_ne!(
            Uid::new(text),
            Uid::new("1b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2b")
        );
        assert_ne!(Uid::new("a"), Uid::new("b"));
        assert_eq!(std::mem::size_of::<Uid>(), 24);
    }
}
