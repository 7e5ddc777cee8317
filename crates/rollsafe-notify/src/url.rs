//! Webhook URLs: parsed once, shown redacted.
//!
//! Chat webhooks authenticate by the URL itself (Slack and Microsoft Teams carry the token in
//! the path, Google Chat in the query), so a [`WebhookUrl`] shows only
//! `scheme://host[:port]/…` through [`Display`](std::fmt::Display) and
//! [`Debug`](std::fmt::Debug). The full URL is reachable through
//! [`WebhookUrl::expose_full_url`] alone, which only the sender calls.

use std::fmt;
use std::str::FromStr;

use http::Uri;
use thiserror::Error;

/// The longest webhook URL accepted, in bytes.
pub const MAX_WEBHOOK_URL_LEN: usize = 2048;

/// A chat webhook URL: `http` or `https`, with a host, without user information or fragment.
///
/// `Display` and `Debug` show `scheme://host[:port]/…` only.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct WebhookUrl {
    uri: Uri,
    /// `scheme://host[:port]/…`, computed once.
    redacted: String,
}

/// Why a string is not a [`WebhookUrl`]. Messages are fixed: they never repeat the input.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum WebhookUrlError {
    /// The string is empty.
    #[error("the webhook URL is empty")]
    Empty,
    /// Longer than [`MAX_WEBHOOK_URL_LEN`].
    #[error("the webhook URL is longer than 2048 bytes")]
    TooLong,
    /// Whitespace, a control character or a non-ASCII character.
    #[error("the webhook URL contains whitespace, a control or a non-ASCII character")]
    InvalidCharacter,
    /// Not a URL at all.
    #[error("the webhook URL is not a valid URL")]
    Invalid,
    /// No `scheme://`.
    #[error("the webhook URL has no scheme (http:// or https://)")]
    NoScheme,
    /// A scheme other than `http` or `https`.
    #[error("the webhook URL's scheme is neither http nor https")]
    UnsupportedScheme,
    /// No host.
    #[error("the webhook URL has no host")]
    NoHost,
    /// `user:password@` before the host.
    #[error("the webhook URL carries user information (user@host), which is not accepted")]
    Userinfo,
    /// A port that is not a number from 1 to 65535.
    #[error("the webhook URL's port is not valid")]
    InvalidPort,
    /// A `#fragment` (never sent to a server, so never meant).
    #[error("the webhook URL has a fragment (#…), which is not accepted")]
    Fragment,
}

impl WebhookUrlError {
    /// A static code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            WebhookUrlError::Empty => "empty",
            WebhookUrlError::TooLong => "too_long",
            WebhookUrlError::InvalidCharacter => "invalid_character",
            WebhookUrlError::Invalid => "invalid_url",
            WebhookUrlError::NoScheme => "no_scheme",
            WebhookUrlError::UnsupportedScheme => "unsupported_scheme",
            WebhookUrlError::NoHost => "no_host",
            WebhookUrlError::Userinfo => "userinfo",
            WebhookUrlError::InvalidPort => "invalid_port",
            WebhookUrlError::Fragment => "fragment",
        }
    }
}

impl FromStr for WebhookUrl {
    type Err = WebhookUrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Err(WebhookUrlError::Empty);
        }
        if s.len() > MAX_WEBHOOK_URL_LEN {
            return Err(WebhookUrlError::TooLong);
        }
        if !s.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(WebhookUrlError::InvalidCharacter);
        }
        if s.contains('#') {
            return Err(WebhookUrlError::Fragment);
        }
        let Some((scheme, rest)) = s.split_once("://") else {
            return Err(WebhookUrlError::NoScheme);
        };
        let scheme_ok = !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
        if !scheme_ok {
            return Err(WebhookUrlError::NoScheme);
        }
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(WebhookUrlError::UnsupportedScheme);
        }
        let authority = rest.split(['/', '?']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(WebhookUrlError::Userinfo);
        }
        if authority.is_empty() {
            return Err(WebhookUrlError::NoHost);
        }
        let port = port_of(authority)?;
        let uri: Uri = s.parse().map_err(|_| WebhookUrlError::Invalid)?;
        let host = match uri.host() {
            Some(host) if !host.is_empty() => host,
            _ => return Err(WebhookUrlError::NoHost),
        };
        let scheme = scheme.to_ascii_lowercase();
        let host = host.to_ascii_lowercase();
        let redacted = match port {
            Some(port) => format!("{scheme}://{host}:{port}/…"),
            None => format!("{scheme}://{host}/…"),
        };
        Ok(WebhookUrl { uri, redacted })
    }
}

/// The port written in `authority` (`host`, `host:port`, `[v6]:port`): none, or 1–65535.
fn port_of(authority: &str) -> Result<Option<u16>, WebhookUrlError> {
    let after_host = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((_, rest)) => rest,
            None => return Err(WebhookUrlError::Invalid),
        },
        None => authority.find(':').map_or("", |at| &authority[at..]),
    };
    let Some(port) = after_host.strip_prefix(':') else {
        return if after_host.is_empty() {
            Ok(None)
        } else {
            Err(WebhookUrlError::Invalid)
        };
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(WebhookUrlError::InvalidPort);
    }
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err(WebhookUrlError::InvalidPort),
        Ok(port) => Ok(Some(port)),
    }
}

impl WebhookUrl {
    /// The full URL, with its path and query — the webhook's credential. Only the request that
    /// delivers a notification uses it; never log or display it.
    pub fn expose_full_url(&self) -> &Uri {
        &self.uri
    }

    /// `scheme://host[:port]/…`, as `Display` shows it.
    pub fn redacted(&self) -> &str {
        &self.redacted
    }
}

impl fmt::Display for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted)
    }
}

impl fmt::Debug for WebhookUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WebhookUrl").field(&self.redacted).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted() {
        for (input, shown) in [
            (
                "https://hooks.slack.com/services/T000/B000/XXXXSECRET",
                "https://hooks.slack.com/…",
            ),
            (
                "https://chat.googleapis.com/v1/spaces/AAA/messages?key=KEYSECRET&token=TOKSECRET",
                "https://chat.googleapis.com/…",
            ),
            ("http://127.0.0.1:8080/hook", "http://127.0.0.1:8080/…"),
            ("HTTPS://Example.com", "https://example.com/…"),
            ("https://example.com?token=SECRET", "https://example.com/…"),
            ("http://[::1]:9000/x", "http://[::1]:9000/…"),
        ] {
            let url: WebhookUrl = input.parse().unwrap();
            assert_eq!(url.to_string(), shown, "{input}");
            assert_eq!(format!("{url:?}"), format!("WebhookUrl({shown:?})"));
            assert_eq!(url.redacted(), shown);
        }
    }

    #[test]
    fn full_url_is_kept_for_sending() {
        let url: WebhookUrl = "https://example.com/a/b?c=d".parse().unwrap();
        assert_eq!(
            url.expose_full_url().to_string(),
            "https://example.com/a/b?c=d"
        );
    }

    #[test]
    fn refused() {
        let long = format!("https://example.com/{}", "a".repeat(MAX_WEBHOOK_URL_LEN));
        for (input, code) in [
            ("", "empty"),
            (long.as_str(), "too_long"),
            ("https://example.com/a b", "invalid_character"),
            (" https://example.com/", "invalid_character"),
            ("https://example.com/\u{e9}", "invalid_character"),
            ("hooks.slack.com/services/T/B/SECRET", "no_scheme"),
            ("//example.com/x", "no_scheme"),
            ("ftp://example.com/x", "unsupported_scheme"),
            ("file:///etc/passwd", "unsupported_scheme"),
            ("https:///path/SECRET", "no_host"),
            ("https://?token=SECRET", "no_host"),
            ("https://user:SECRET@example.com/x", "userinfo"),
            ("https://SECRET@example.com/x", "userinfo"),
            ("https://example.com:0/x", "invalid_port"),
            ("https://example.com:/x", "invalid_port"),
            ("https://example.com:99999/x", "invalid_port"),
            ("https://example.com:8a/x", "invalid_port"),
            ("https://example.com/x#SECRET", "fragment"),
        ] {
            let err = input.parse::<WebhookUrl>().unwrap_err();
            assert_eq!(err.code(), code, "{input:?}");
            assert!(!err.to_string().contains("SECRET"));
        }
    }

    #[test]
    fn limit_is_inclusive() {
        let base = "https://example.com/";
        let ok = format!("{base}{}", "a".repeat(MAX_WEBHOOK_URL_LEN - base.len()));
        assert!(ok.parse::<WebhookUrl>().is_ok());
        let over = format!("{ok}a");
        assert_eq!(
            over.parse::<WebhookUrl>().unwrap_err(),
            WebhookUrlError::TooLong
        );
    }
}
