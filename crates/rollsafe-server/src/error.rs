//! The `{ "error": "…" }` envelope and the fixed messages of every gate.
//!
//! Messages are fixed strings (plus the path names the caller sent); upstream text never
//! reaches a response. Unexpected errors give the shared sanitized 500 with a request id that
//! also appears in the server's log line.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The exact text clients key on for a session bounce.
pub const AUTHENTICATION_REQUIRED: &str = "Authentication required";
/// The restart flag is off.
pub const RESTART_DISABLED: &str = "Restarting apps is disabled on this deployment";
/// The path names are not valid Kubernetes names.
pub const INVALID_PATH: &str = "Invalid namespace or Secret name";
/// The ACL refused.
pub const NOT_ALLOWED: &str = "You are not allowed to modify this secret";
/// Kubernetes refused to let the caller read the Secret.
pub const KUBERNETES_DENIED: &str = "Access denied. Check Kubernetes permissions for the effective identity and, when enabled, ServiceAccount impersonation permissions.";
/// A session whose identity is reserved by Kubernetes or outside the allowed groups.
pub const RESERVED_IDENTITY: &str =
    "This identity cannot be used here: reserved Kubernetes users and groups are refused";
/// The server-wide limit on concurrent restarts is reached.
pub const BUSY: &str = "Too many restarts in progress; retry shortly";
/// The sanitized 500.
pub const INTERNAL: &str = "Internal server error";

/// A refused or failed request, before any workload was listed or patched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 401.
    Unauthenticated,
    /// 403: the restart flag is off.
    RestartDisabled,
    /// 400: the path names are invalid.
    InvalidPath,
    /// 403: the namespace is outside the scope.
    NamespaceNotAccessible(String),
    /// 404: the Secret does not exist or is a history snapshot.
    SecretNotFound(String),
    /// 403: Kubernetes refused the Secret read.
    KubernetesDenied,
    /// 403: the ACL refused.
    NotAllowed,
    /// 403: the session's identity is reserved (or outside the allowed groups).
    ReservedIdentity,
    /// 429 with `Retry-After`: the concurrent-run limit is reached.
    Busy,
    /// 500 with a request id.
    Internal {
        /// The request id, also logged.
        request_id: String,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    error: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

impl ApiError {
    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::InvalidPath => StatusCode::BAD_REQUEST,
            ApiError::SecretNotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::Busy => StatusCode::TOO_MANY_REQUESTS,
            ApiError::ReservedIdentity => StatusCode::FORBIDDEN,
            ApiError::RestartDisabled
            | ApiError::NamespaceNotAccessible(_)
            | ApiError::KubernetesDenied
            | ApiError::NotAllowed => StatusCode::FORBIDDEN,
        }
    }

    /// The `error` text.
    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthenticated => AUTHENTICATION_REQUIRED.to_owned(),
            ApiError::RestartDisabled => RESTART_DISABLED.to_owned(),
            ApiError::InvalidPath => INVALID_PATH.to_owned(),
            ApiError::NamespaceNotAccessible(ns) => format!("Namespace \"{ns}\" is not accessible"),
            ApiError::SecretNotFound(name) => format!("Secret \"{name}\" not found"),
            ApiError::KubernetesDenied => KUBERNETES_DENIED.to_owned(),
            ApiError::NotAllowed => NOT_ALLOWED.to_owned(),
            ApiError::Internal { .. } => INTERNAL.to_owned(),
            ApiError::ReservedIdentity => RESERVED_IDENTITY.to_owned(),
            ApiError::Busy => BUSY.to_owned(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let request_id = match &self {
            ApiError::Internal { request_id } => Some(request_id.clone()),
            _ => None,
        };
        let body = Envelope {
            error: self.message(),
            request_id,
        };
        let busy = self == ApiError::Busy;
        let mut response = (self.status(), Json(body)).into_response();
        if busy {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(crate::limits::RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}
