//! Kubernetes name and annotation-key rules (apimachinery `validation`).

/// The longest DNS-1123 label.
pub const DNS1123_LABEL_MAX: usize = 63;
/// The longest DNS-1123 subdomain.
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;

/// A DNS-1123 label: lower-case alphanumerics and `-`, starting and ending alphanumeric, ≤ 63.
/// Namespaces are labels.
pub fn is_dns1123_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= DNS1123_LABEL_MAX
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// A DNS-1123 subdomain: dot-separated labels, ≤ 253. Secret names are subdomains.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= DNS1123_SUBDOMAIN_MAX
        && value.split('.').all(|part| {
            // Each part follows the label rules, without the label length limit.
            let bytes = part.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

/// A qualified name, as annotation and label keys are: an optional DNS-1123 subdomain prefix
/// and `/`, then a name of ≤ 63 characters: alphanumerics, `-`, `_`, `.`, starting and ending
/// alphanumeric.
pub fn is_qualified_name(value: &str) -> bool {
    let (prefix, name) = match value.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, value),
    };
    if prefix.is_some_and(|p| !is_dns1123_subdomain(p)) {
        return false;
    }
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        for ok in ["a", "krypton", "team-a", "a1", &"a".repeat(63)] {
            assert!(is_dns1123_label(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a.b",
            "a_b",
            &"a".repeat(64),
            "a%2Fb",
            "ä",
        ] {
            assert!(!is_dns1123_label(bad), "{bad}");
        }
    }

    #[test]
    fn subdomains() {
        for ok in [
            "a",
            "db-creds",
            "a.b.c",
            "tls.example.com",
            &"a".repeat(253),
        ] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "A",
            "a/b",
            "..",
            &"a".repeat(254),
            "a b",
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn qualified_names() {
        for ok in [
            "krypton.io/restarted-at",
            "restarted-at",
            "a_b.C",
            "example.com/X",
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "Krypton.io/a",
            "a/b/c",
            "-a",
            "a b",
            &format!("x/{}", "a".repeat(64)),
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
