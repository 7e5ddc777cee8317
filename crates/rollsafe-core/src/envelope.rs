//! The `{ "error": "…" }` envelope of every refused or failed API request, and its fixed texts.
//!
//! The server serializes [`ErrorEnvelope`]; the client deserializes the same type. Texts are
//! fixed (plus the path names the caller sent in two of them); upstream text never reaches an
//! envelope. Clients decide what an error is from the HTTP status, never from the text.

use serde::{Deserialize, Serialize};

use crate::failure::FailureCode;

/// 401: no valid session. The exact text browsers key on for a session bounce.
pub const AUTHENTICATION_REQUIRED: &str = "Authentication required";
/// 403: the restart flag is off.
pub const RESTART_DISABLED: &str = "Restarting apps is disabled on this deployment";
/// 400: the path names are not valid Kubernetes names.
pub const INVALID_PATH: &str = "Invalid namespace or Secret name";
/// 403: the ACL refused.
pub const NOT_ALLOWED: &str = "You are not allowed to modify this secret";
/// 403: Kubernetes refused to let the effective identity read the Secret. The same guidance as
/// a `forbidden` workload.
pub const KUBERNETES_DENIED: &str = FailureCode::Forbidden.message();
/// 500: the sanitized internal error; the envelope carries a request id.
pub const INTERNAL: &str = "Internal server error";
/// 404: no such route.
pub const NOT_FOUND: &str = "Not found";
/// 405: the route exists, the method does not.
pub const METHOD_NOT_ALLOWED: &str = "Method not allowed";
/// 413: a declared body over the limit.
pub const PAYLOAD_TOO_LARGE: &str = "Request body too large";
/// 503 from `/readyz`.
pub const NOT_READY: &str = "The Kubernetes API is not reachable";

/// `403 Namespace "<ns>" is not accessible` (the allowed namespaces are never listed).
pub fn namespace_not_accessible(namespace: &str) -> String {
    format!("Namespace \"{namespace}\" is not accessible")
}

/// `404 Secret "<name>" not found` (a history snapshot answers the same).
pub fn secret_not_found(name: &str) -> String {
    format!("Secret \"{name}\" not found")
}

/// The body of every error response: `{ "error": "…" }`, plus `requestId` on a sanitized 500.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEnvelope {
    /// The fixed text.
    pub error: String,
    /// The request id of a sanitized 500, also in the server's log line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

impl ErrorEnvelope {
    /// An envelope with this text and no request id.
    pub fn new(error: impl Into<String>) -> Self {
        Self {
            error: error.into(),
            request_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape() {
        assert_eq!(
            serde_json::to_value(ErrorEnvelope::new(AUTHENTICATION_REQUIRED)).unwrap(),
            serde_json::json!({"error": "Authentication required"})
        );
        let internal = ErrorEnvelope {
            error: INTERNAL.to_owned(),
            request_id: Some("r1".to_owned()),
        };
        let text = serde_json::to_string(&internal).unwrap();
        assert_eq!(
            text,
            r#"{"error":"Internal server error","requestId":"r1"}"#
        );
        assert_eq!(
            serde_json::from_str::<ErrorEnvelope>(&text).unwrap(),
            internal
        );
    }
}
