//! One HTTP attempt: a `POST` of a JSON body to a webhook, within a time limit, classified so
//! the notifier knows whether to try again. Nothing of the answer is read but its status and
//! `Retry-After`; the sink's error text never reaches a log.

use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rollsafe_https::Roots;
use thiserror::Error;
use tracing::warn;

use crate::url::WebhookUrl;

/// The `User-Agent` of every request.
pub(crate) const NOTIFY_USER_AGENT: &str = concat!("rollsafe-notify/", env!("CARGO_PKG_VERSION"));

/// The HTTP client shared by every sink (HTTP/1.1; HTTPS with the platform's roots).
pub(crate) type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// A client for webhooks. HTTPS trusts the platform's roots; without any, HTTPS sinks fail
/// (logged once, `no_native_roots`) and HTTP sinks still work.
pub(crate) fn client() -> HttpClient {
    let (connector, roots) = rollsafe_https::https_connector();
    if roots == Roots::Missing {
        warn!(
            code = "no_native_roots",
            "no trusted root certificates found: HTTPS webhooks cannot be reached"
        );
    }
    Client::builder(TokioExecutor::new()).build(connector)
}

/// Why one attempt did not deliver. Messages are fixed.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AttemptError {
    /// No answer within the attempt's time limit.
    #[error("the webhook did not answer in time")]
    Timeout,
    /// Connecting, TLS, or the exchange failed.
    #[error("the webhook could not be reached")]
    Transport,
    /// 429.
    #[error("the webhook asked to slow down")]
    RateLimited {
        /// Its `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// 5xx.
    #[error("the webhook failed")]
    ServerError {
        /// The status.
        status: StatusCode,
        /// Its `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// A 4xx other than 429: the webhook refuses this message (wrong URL, revoked, bad body).
    #[error("the webhook refused the message")]
    Rejected {
        /// The status.
        status: StatusCode,
    },
    /// A 1xx or 3xx (redirects are not followed).
    #[error("the webhook answered with an unexpected status")]
    UnexpectedStatus {
        /// The status.
        status: StatusCode,
    },
    /// The request could not be built.
    #[error("the request could not be built")]
    Request,
}

impl AttemptError {
    /// A static code for logs.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            AttemptError::Timeout => "timeout",
            AttemptError::Transport => "transport",
            AttemptError::RateLimited { .. } => "rate_limited",
            AttemptError::ServerError { .. } => "server_error",
            AttemptError::Rejected { .. } => "rejected",
            AttemptError::UnexpectedStatus { .. } => "unexpected_status",
            AttemptError::Request => "request",
        }
    }

    /// Whether another attempt may succeed: transport errors, timeouts, 429 and 5xx.
    pub(crate) fn retryable(&self) -> bool {
        matches!(
            self,
            AttemptError::Timeout
                | AttemptError::Transport
                | AttemptError::RateLimited { .. }
                | AttemptError::ServerError { .. }
        )
    }

    /// The wait the sink asked for, uncapped.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::RateLimited { retry_after }
            | AttemptError::ServerError { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The status the sink answered, if it answered.
    pub(crate) fn status(&self) -> Option<u16> {
        match self {
            AttemptError::ServerError { status, .. }
            | AttemptError::Rejected { status }
            | AttemptError::UnexpectedStatus { status } => Some(status.as_u16()),
            AttemptError::RateLimited { .. } => Some(429),
            _ => None,
        }
    }
}

/// One `POST` of `body` to `url` within `timeout`: the 2xx status, or why not.
pub(crate) async fn post(
    client: &HttpClient,
    url: &WebhookUrl,
    body: Bytes,
    timeout: Duration,
) -> Result<StatusCode, AttemptError> {
    let request = Request::builder()
        .method(Method::POST)
        .uri(url.expose_full_url().clone())
        .header(CONTENT_TYPE, "application/json")
        .header(USER_AGENT, NOTIFY_USER_AGENT)
        .body(Full::new(body))
        .map_err(|_| AttemptError::Request)?;
    let response = tokio::time::timeout(timeout, client.request(request))
        .await
        .map_err(|_| AttemptError::Timeout)?
        .map_err(|_| AttemptError::Transport)?;
    // The body is not read: the status says everything, and the sink's text is never shown.
    classify(response.status(), response.headers())
}

/// What a status means for this attempt.
fn classify(status: StatusCode, headers: &HeaderMap) -> Result<StatusCode, AttemptError> {
    if status.is_success() {
        Ok(status)
    } else if status == StatusCode::TOO_MANY_REQUESTS {
        Err(AttemptError::RateLimited {
            retry_after: retry_after(headers, jiff::Timestamp::now()),
        })
    } else if status.is_server_error() {
        Err(AttemptError::ServerError {
            status,
            retry_after: retry_after(headers, jiff::Timestamp::now()),
        })
    } else if status.is_client_error() {
        Err(AttemptError::Rejected { status })
    } else {
        Err(AttemptError::UnexpectedStatus { status })
    }
}

/// `Retry-After` as delay-seconds or an HTTP date (RFC 9110 §10.2.3); a date in the past is
/// no wait. Anything else is ignored.
fn retry_after(headers: &HeaderMap, now: jiff::Timestamp) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // Saturates: a huge value is capped by the caller anyway.
        let seconds = value.parse::<u64>().unwrap_or(u64::MAX);
        return Some(Duration::from_secs(seconds));
    }
    let at = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = at.duration_since(now);
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_retry_after(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, value.parse().unwrap());
        headers
    }

    #[test]
    fn retry_after_forms() {
        let now: jiff::Timestamp = "2026-03-01T12:00:00Z".parse().unwrap();
        let cases = [
            ("1", Some(Duration::from_secs(1))),
            (" 30 ", Some(Duration::from_secs(30))),
            ("0", Some(Duration::ZERO)),
            (
                "99999999999999999999999",
                Some(Duration::from_secs(u64::MAX)),
            ),
            (
                "Sun, 01 Mar 2026 12:00:10 GMT",
                Some(Duration::from_secs(10)),
            ),
            ("Sun, 01 Mar 2026 11:00:00 GMT", Some(Duration::ZERO)),
            ("-1", None),
            ("1.5", None),
            ("soon", None),
        ];
        for (value, expected) in cases {
            assert_eq!(
                retry_after(&with_retry_after(value), now),
                expected,
                "{value}"
            );
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn classification() {
        let none = HeaderMap::new();
        for (status, code, retryable) in [
            (200, "", false),
            (202, "", false),
            (301, "unexpected_status", false),
            (400, "rejected", false),
            (403, "rejected", false),
            (404, "rejected", false),
            (429, "rate_limited", true),
            (500, "server_error", true),
            (503, "server_error", true),
        ] {
            let status = StatusCode::from_u16(status).unwrap();
            match classify(status, &none) {
                Ok(ok) => {
                    assert!(code.is_empty());
                    assert_eq!(ok, status);
                }
                Err(err) => {
                    assert_eq!(err.code(), code);
                    assert_eq!(err.retryable(), retryable);
                    assert_eq!(err.status(), Some(status.as_u16()));
                }
            }
        }
        assert!(AttemptError::Timeout.retryable());
        assert!(AttemptError::Transport.retryable());
        assert!(!AttemptError::Request.retryable());
    }

    #[test]
    fn user_agent_names_the_version() {
        assert_eq!(
            NOTIFY_USER_AGENT,
            format!("rollsafe-notify/{}", env!("CARGO_PKG_VERSION"))
        );
    }
}
