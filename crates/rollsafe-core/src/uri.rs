//! Percent-encoding of URI parts (RFC 3986), one rule for both HTTP clients: the Kubernetes
//! transport encodes query values with it, the API client path segments.

/// Everything but the RFC 3986 unreserved characters (`ALPHA`, `DIGIT`, `-`, `.`, `_`, `~`) is
/// percent-encoded.
pub const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unreserved_characters_pass_through() {
        let encoded = percent_encoding::utf8_percent_encode("aZ09-._~ /?#&=%é", NOT_UNRESERVED);
        assert_eq!(encoded.to_string(), "aZ09-._~%20%2F%3F%23%26%3D%25%C3%A9");
    }
}
