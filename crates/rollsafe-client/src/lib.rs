//! A typed client of the Restart Consumers API.
//!
//! [`Client::restart_consumers`] returns a [`RestartReport`] for every response whose body is a
//! restart result — 200, 207 and 503 alike: a failed attempt is data, not an error. Every
//! `{ "error": … }` response (401, 403, 404, 400, 500, …) is an [`ErrorResponse`] with its HTTP
//! status; what kind of error it is follows from the status, never from the text.
//! [`Client::consumers`] returns the [`ConsumersPreview`] of a Secret (200), or the same
//! [`ErrorResponse`] for a refusal; [`Client::rollout`] the [`ConsumersRollout`] of its
//! consumers, the same way.
//! The session token is wrapped so that `Debug` never prints it.

#![warn(missing_docs, unreachable_pub)]

use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rollsafe_core::contract::{RestartResult, RestartStatus};
use rollsafe_core::envelope::ErrorEnvelope;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::preview::ConsumersPreview;
use rollsafe_core::rollout::ConsumersRollout;
use thiserror::Error;

/// How long one API call may take, end to end.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest response body read.
pub const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// A session token. `Debug` and `Display` never print it.
#[derive(Clone)]
pub struct Token(String);

impl Token {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> Self {
        Self(token.into())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A restart result and the HTTP status it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestartReport {
    /// 200, 207 or 503.
    pub http_status: u16,
    /// The result body.
    pub result: RestartResult,
}

impl RestartReport {
    /// The result's status.
    pub fn status(&self) -> RestartStatus {
        self.result.status
    }
}

/// An `{ "error": … }` response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("HTTP {status}: {message}")]
pub struct ErrorResponse {
    /// The HTTP status.
    pub status: u16,
    /// The `error` text.
    pub message: String,
    /// The request id of a sanitized 500.
    pub request_id: Option<String>,
}

impl ErrorResponse {
    /// Whether this is the session-expiry 401 (the server answers every missing or invalid
    /// session with 401 and only then).
    pub fn is_authentication_required(&self) -> bool {
        self.status == 401
    }
}

/// Why a call did not produce a report.
#[derive(Debug, Error)]
pub enum ClientError {
    /// The server answered with the `{ error }` envelope.
    #[error(transparent)]
    Api(#[from] ErrorResponse),
    /// The server URL or the path names cannot form a request.
    #[error("invalid server URL or name")]
    InvalidRequest,
    /// No response arrived (connection, TLS or timeout).
    #[error("no response from the server: {0}")]
    Transport(TransportCause),
    /// The response is neither a restart result nor an error envelope.
    #[error("unexpected response from the server (HTTP {0})")]
    Unexpected(u16),
}

/// Why no response arrived, as a fixed sentence: never the upstream error's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum TransportCause {
    /// Nothing listens at the address.
    #[error("the connection was refused")]
    Refused,
    /// The host name did not resolve.
    #[error("the host name did not resolve (DNS)")]
    Dns,
    /// The TLS handshake failed, e.g. an untrusted certificate.
    #[error("the TLS handshake failed (is the certificate trusted, and is it an https server?)")]
    Tls,
    /// No complete response within [`REQUEST_TIMEOUT`].
    #[error("it did not answer in time")]
    Timeout,
    /// The connection failed or closed before a complete response.
    #[error("the connection failed or closed before a response")]
    Connection,
}

impl TransportCause {
    /// Classifies an error of the HTTP stack by its types, walking its sources.
    fn of(error: &(dyn std::error::Error + 'static)) -> Self {
        let mut cause = Some(error);
        while let Some(error) = cause {
            if error.is::<rustls::Error>() {
                return TransportCause::Tls;
            }
            if let Some(io) = error.downcast_ref::<std::io::Error>() {
                match io.kind() {
                    std::io::ErrorKind::ConnectionRefused => return TransportCause::Refused,
                    std::io::ErrorKind::TimedOut => return TransportCause::Timeout,
                    _ => {}
                }
                // An I/O error's `source` skips the error it wraps (rustls' is wrapped twice).
                if let Some(inner) = io.get_ref() {
                    cause = Some(inner as &(dyn std::error::Error + 'static));
                    continue;
                }
            }
            // hyper-util's connector reports a failed lookup as a `ConnectError` whose text
            // starts with "dns error"; the text is read here, never printed.
            if error.to_string().starts_with("dns error") {
                return TransportCause::Dns;
            }
            cause = error.source();
        }
        TransportCause::Connection
    }
}

/// A client of one rollsafe server.
#[derive(Clone)]
pub struct Client {
    base: String,
    token: Option<Token>,
    http: HyperClient<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token)
            .finish()
    }
}

impl Client {
    /// A client of the server at `base` (`http://…` or `https://…`), authenticating with `token`.
    pub fn new(base: &str, token: Option<Token>) -> Result<Self, ClientError> {
        let uri: Uri = base.parse().map_err(|_| ClientError::InvalidRequest)?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(ClientError::InvalidRequest);
        }
        let (connector, _roots) = rollsafe_https::https_connector();
        Ok(Self {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http: HyperClient::builder(TokioExecutor::new()).build(connector),
        })
    }

    /// `POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers`.
    pub async fn restart_consumers(
        &self,
        namespace: &Namespace,
        name: &SecretName,
    ) -> Result<RestartReport, ClientError> {
        let (status, body) = self
            .call(Method::POST, namespace, name, "restart-consumers")
            .await?;
        interpret(status, &body)
    }

    /// `GET /api/namespaces/{namespace}/secrets/{name}/consumers`: the workloads a restart
    /// would patch, with their references and whether each would roll now. Nothing is patched.
    pub async fn consumers(
        &self,
        namespace: &Namespace,
        name: &SecretName,
    ) -> Result<ConsumersPreview, ClientError> {
        self.read(namespace, name, "consumers").await
    }

    /// `GET /api/namespaces/{namespace}/secrets/{name}/rollout`: where the rollout of each
    /// workload a restart would patch stands, from one read (its `restartedAt` is the restart
    /// annotation's current value: pin it with a [`rollsafe_core::rollout::Follower`] to tell a
    /// later rollout). Nothing is patched.
    pub async fn rollout(
        &self,
        namespace: &Namespace,
        name: &SecretName,
    ) -> Result<ConsumersRollout, ClientError> {
        self.read(namespace, name, "rollout").await
    }

    /// A `GET` of a Secret's sub-resource `action`: its body as `T` on 200, else the error
    /// envelope.
    async fn read<T: serde::de::DeserializeOwned>(
        &self,
        namespace: &Namespace,
        name: &SecretName,
        action: &str,
    ) -> Result<T, ClientError> {
        let (status, body) = self.call(Method::GET, namespace, name, action).await?;
        let code = status.as_u16();
        if status == StatusCode::OK {
            return serde_json::from_slice(&body).map_err(|_| ClientError::Unexpected(code));
        }
        Err(error_envelope(status, &body))
    }

    /// One call on a Secret's sub-resource `action`, within [`REQUEST_TIMEOUT`], its body
    /// read up to [`MAX_RESPONSE_BYTES`].
    async fn call(
        &self,
        method: Method,
        namespace: &Namespace,
        name: &SecretName,
        action: &str,
    ) -> Result<(StatusCode, Bytes), ClientError> {
        // Valid names are path-safe; encoding keeps the path right should the rules widen.
        let uri = format!(
            "{}/api/namespaces/{}/secrets/{}/{action}",
            self.base,
            encode_segment(namespace.as_str()),
            encode_segment(name.as_str())
        );
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::ACCEPT, "application/json");
        if let Some(Token(token)) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::new()))
            .map_err(|_| ClientError::InvalidRequest)?;
        let call = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|error| ClientError::Transport(TransportCause::of(&error)))?;
            let status = response.status();
            let body = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|_| ClientError::Transport(TransportCause::Connection))?
                .to_bytes();
            Ok::<_, ClientError>((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, call)
            .await
            .map_err(|_| ClientError::Transport(TransportCause::Timeout))?
    }
}

/// Turns a response into a report or an error: a body with `status` on 200/207/503 is a report.
fn interpret(status: StatusCode, body: &[u8]) -> Result<RestartReport, ClientError> {
    let code = status.as_u16();
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|_| ClientError::Unexpected(code))?;
    if matches!(code, 200 | 207 | 503) && value.get("status").is_some() {
        let result: RestartResult =
            serde_json::from_value(value).map_err(|_| ClientError::Unexpected(code))?;
        return Ok(RestartReport {
            http_status: code,
            result,
        });
    }
    Err(error_envelope(status, body))
}

/// An `{ error }` response as [`ClientError::Api`]; anything else is unexpected.
fn error_envelope(status: StatusCode, body: &[u8]) -> ClientError {
    let code = status.as_u16();
    match serde_json::from_slice::<ErrorEnvelope>(body) {
        Ok(envelope) if !status.is_success() => ClientError::Api(ErrorResponse {
            status: code,
            message: envelope.error,
            request_id: envelope.request_id,
        }),
        _ => ClientError::Unexpected(code),
    }
}

/// Percent-encodes one path segment (RFC 3986 unreserved characters pass through).
fn encode_segment(segment: &str) -> String {
    percent_encoding::utf8_percent_encode(segment, rollsafe_core::uri::NOT_UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::contract::RestartOutcome;
    use rollsafe_core::failure::Failure;
    use rollsafe_core::workload::WorkloadKind;

    fn body<T: serde::Serialize>(value: &T) -> Vec<u8> {
        serde_json::to_vec(value).unwrap()
    }

    #[test]
    fn reports_are_data() {
        let mut outcome = RestartOutcome::new();
        outcome.failed(WorkloadKind::Deployment, "web", Failure::from_status(409));
        let failed = outcome.into_result();
        let report = interpret(StatusCode::SERVICE_UNAVAILABLE, &body(&failed)).unwrap();
        assert_eq!(
            report,
            RestartReport {
                http_status: 503,
                result: failed
            }
        );

        let mut outcome = RestartOutcome::new();
        outcome.acknowledged(WorkloadKind::Deployment, "a");
        outcome.failed(WorkloadKind::Deployment, "b", Failure::from_status(403));
        let partial = outcome.into_result();
        assert_eq!(
            interpret(StatusCode::MULTI_STATUS, &body(&partial))
                .unwrap()
                .status(),
            RestartStatus::Partial
        );
        let none = RestartOutcome::new().into_result();
        assert_eq!(
            interpret(StatusCode::OK, &body(&none)).unwrap().status(),
            RestartStatus::NoTargets
        );
    }

    #[test]
    fn envelopes_are_api_errors() {
        use rollsafe_core::envelope;
        for (status, text) in [
            (401, envelope::AUTHENTICATION_REQUIRED.to_owned()),
            (403, envelope::RESTART_DISABLED.to_owned()),
            (404, envelope::secret_not_found("x")),
            (400, envelope::INVALID_PATH.to_owned()),
        ] {
            let error = interpret(
                StatusCode::from_u16(status).unwrap(),
                &body(&ErrorEnvelope::new(text.clone())),
            )
            .unwrap_err();
            let ClientError::Api(error) = error else {
                panic!("{error:?}")
            };
            assert_eq!(
                (error.status, error.message.as_str()),
                (status, text.as_str())
            );
            assert_eq!(error.is_authentication_required(), status == 401);
        }
        let error = interpret(
            StatusCode::INTERNAL_SERVER_ERROR,
            &body(&serde_json::json!({"error": "Internal server error", "requestId": "r1"})),
        )
        .unwrap_err();
        assert!(
            matches!(error, ClientError::Api(ErrorResponse { status: 500, request_id: Some(ref id), .. }) if id == "r1")
        );
    }

    #[test]
    fn session_bounce_is_recognised_by_status_not_text() {
        let error = ErrorResponse {
            status: 401,
            message: "any wording".into(),
            request_id: None,
        };
        assert!(error.is_authentication_required());
    }

    #[test]
    fn unexpected_bodies() {
        assert!(matches!(
            interpret(StatusCode::OK, b"<html>"),
            Err(ClientError::Unexpected(200))
        ));
        assert!(matches!(
            interpret(StatusCode::OK, br#"{"error": "x"}"#),
            Err(ClientError::Unexpected(200))
        ));
        assert!(matches!(
            interpret(StatusCode::BAD_GATEWAY, br#"{"status": "failed"}"#),
            Err(ClientError::Unexpected(502))
        ));
    }

    #[test]
    fn segments_are_encoded_and_tokens_hidden() {
        assert_eq!(encode_segment("a/b c"), "a%2Fb%20c");
        let client = Client::new("http://127.0.0.1:1", Some(Token::new("sekrit"))).unwrap();
        assert!(!format!("{client:?}").contains("sekrit"));
        assert!(Client::new("ftp://x", None).is_err());
    }
}
