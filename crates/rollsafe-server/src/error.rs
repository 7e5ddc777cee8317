//! The one error edge of the API: every refused or failed request is an [`ApiError`].
//!
//! A variant decides the HTTP status, the `{ "error": "…" }` body (the shared
//! [`ErrorEnvelope`] with the fixed texts of `rollsafe_core::envelope`), a static
//! [`ApiError::code`] used as the metrics label and the log field, and whether the refusal is
//! audited ([`ApiError::audit`]). Upstream text never reaches a response. Unexpected errors give
//! the shared sanitized 500 with a request id that also appears in the server's log line.
//!
//! | variant | status | code | audited as |
//! |---|---|---|---|
//! | `Unauthenticated` | 401 | `unauthenticated` | — |
//! | `RestartDisabled` | 403 | `restart_disabled` | — |
//! | `InvalidPath` | 400 | `invalid_path` | — |
//! | `NamespaceNotAccessible` | 403 | `namespace_not_accessible` | `deny` |
//! | `SecretNotFound` | 404 | `secret_not_found` | — (a history snapshot answers the same) |
//! | `KubernetesDenied` | 403 | `kubernetes_denied` | `deny` |
//! | `NotAllowed` | 403 | `not_allowed` | `deny` |
//! | `Internal` | 500 | `internal` | `error` |
//! | `NotFound` | 404 | `not_found` | — |
//! | `MethodNotAllowed` | 405 | `method_not_allowed` | — |
//! | `PayloadTooLarge` | 413 | `payload_too_large` | — |
//! | `NotReady` | 503 | `not_ready` | — |
//! | `ReservedIdentity` | 403 | `reserved_identity` | `deny` |
//! | `Busy` | 429 + `Retry-After` | `busy` | — |
//! | `CrossSite` | 403 | `cross_site` | — (refused before authentication counts) |
//! | `AuthenticationUnavailable` | 503 + `Retry-After` | `authentication_unavailable` | — |
//! | `WorkloadNotFound` | 404 | `workload_not_found` | — |
//! | `NotAConsumer` | 404 | `not_a_consumer` | — (the ACL was the Secret's; it decides for its consumers only) |
//! | `NothingToApprove` | 409 | `nothing_to_approve` | — |
//! | `ApprovalSuperseded` | 409 | `approval_superseded` | `error` (written with the approval's result) |

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rollsafe_core::envelope::{self, ErrorEnvelope};
use rollsafe_core::name::{Namespace, SecretName};

use crate::audit::AuditResult;

pub use rollsafe_core::envelope::{
    AUTHENTICATION_REQUIRED, INTERNAL, INVALID_PATH, KUBERNETES_DENIED, NOT_ALLOWED,
    RESTART_DISABLED,
};

/// 403: the session's identity is reserved by Kubernetes or outside the allowed groups.
pub const RESERVED_IDENTITY: &str =
    "This identity cannot be used here: reserved Kubernetes users and groups are refused";
/// 403: a cookie-authenticated state-changing request that is not from the page itself.
pub const CROSS_SITE: &str = "Cross-site request refused";
/// 503: a Kubernetes token could not be reviewed now.
pub const AUTHENTICATION_UNAVAILABLE: &str =
    "Authentication is temporarily unavailable; retry shortly";
/// 404: the workload of an approval does not exist.
pub const WORKLOAD_NOT_FOUND: &str = "Workload not found";
/// 404: the workload of an approval does not reference the Secret whose row it was given on.
pub const NOT_A_CONSUMER: &str = "The workload does not reference this Secret";
/// 409: no roll awaits approval on the workload.
pub const NOTHING_TO_APPROVE: &str = "No roll awaits approval on this workload";
/// 409: the roll awaiting approval changed between the read and the write.
pub const APPROVAL_SUPERSEDED: &str =
    "The roll awaiting approval changed meanwhile; nothing was approved";
/// 429: the server-wide limit on concurrent restarts is reached.
pub const BUSY: &str = "Too many restarts in progress; retry shortly";

/// A refused or failed request, answered before any workload was listed or patched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 401: no valid session.
    Unauthenticated,
    /// 403: the restart flag is off.
    RestartDisabled,
    /// 400: the path names are invalid.
    InvalidPath,
    /// 403: the namespace is outside the scope.
    NamespaceNotAccessible(Namespace),
    /// 404: the Secret does not exist or is a history snapshot.
    SecretNotFound(SecretName),
    /// 403: Kubernetes refused the Secret read.
    KubernetesDenied,
    /// 403: the ACL refused.
    NotAllowed,
    /// 500 with a request id.
    Internal {
        /// The request id, also logged.
        request_id: String,
    },
    /// 404: no such route.
    NotFound,
    /// 405: the route does not take this method.
    MethodNotAllowed,
    /// 413: a declared body over the limit.
    PayloadTooLarge,
    /// 503 from `/readyz`: Kubernetes is not reachable.
    NotReady,
    /// 403: a reserved identity, refused at authentication.
    ReservedIdentity,
    /// 429 with `Retry-After`: the concurrent-run limit is reached.
    Busy,
    /// 403: a cookie-authenticated state-changing request failed the same-origin check.
    CrossSite,
    /// 503 with `Retry-After`: a Kubernetes token could not be reviewed (the API server did not
    /// answer, or too many reviews are in flight).
    AuthenticationUnavailable,
    /// 404: the workload of an approval does not exist.
    WorkloadNotFound,
    /// 404: the workload of an approval does not reference the Secret.
    NotAConsumer,
    /// 409: no roll awaits approval on the workload.
    NothingToApprove,
    /// 409: the roll awaiting approval changed between the read and the write.
    ApprovalSuperseded,
}

impl ApiError {
    /// Every variant once, for tests that pin the wire shape.
    #[cfg(test)]
    fn examples() -> Vec<ApiError> {
        vec![
            ApiError::Unauthenticated,
            ApiError::RestartDisabled,
            ApiError::InvalidPath,
            ApiError::NamespaceNotAccessible("team-a".parse().unwrap()),
            ApiError::SecretNotFound("db-creds".parse().unwrap()),
            ApiError::KubernetesDenied,
            ApiError::NotAllowed,
            ApiError::Internal {
                request_id: "00000000-0000-4000-8000-000000000000".to_owned(),
            },
            ApiError::NotFound,
            ApiError::MethodNotAllowed,
            ApiError::PayloadTooLarge,
            ApiError::NotReady,
            ApiError::ReservedIdentity,
            ApiError::Busy,
            ApiError::CrossSite,
            ApiError::AuthenticationUnavailable,
            ApiError::WorkloadNotFound,
            ApiError::NotAConsumer,
            ApiError::NothingToApprove,
            ApiError::ApprovalSuperseded,
        ]
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Unauthenticated => StatusCode::UNAUTHORIZED,
            ApiError::InvalidPath => StatusCode::BAD_REQUEST,
            ApiError::SecretNotFound(_)
            | ApiError::NotFound
            | ApiError::WorkloadNotFound
            | ApiError::NotAConsumer => StatusCode::NOT_FOUND,
            ApiError::NothingToApprove | ApiError::ApprovalSuperseded => StatusCode::CONFLICT,
            ApiError::Internal { .. } => StatusCode::INTERNAL_SERVER_ERROR,
            ApiError::RestartDisabled
            | ApiError::NamespaceNotAccessible(_)
            | ApiError::KubernetesDenied
            | ApiError::NotAllowed
            | ApiError::ReservedIdentity
            | ApiError::CrossSite => StatusCode::FORBIDDEN,
            ApiError::Busy => StatusCode::TOO_MANY_REQUESTS,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotReady | ApiError::AuthenticationUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        }
    }

    /// A static category: the metrics label and the log field.
    pub fn code(&self) -> &'static str {
        match self {
            ApiError::Unauthenticated => "unauthenticated",
            ApiError::RestartDisabled => "restart_disabled",
            ApiError::InvalidPath => "invalid_path",
            ApiError::NamespaceNotAccessible(_) => "namespace_not_accessible",
            ApiError::SecretNotFound(_) => "secret_not_found",
            ApiError::KubernetesDenied => "kubernetes_denied",
            ApiError::NotAllowed => "not_allowed",
            ApiError::Internal { .. } => "internal",
            ApiError::NotFound => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::NotReady => "not_ready",
            ApiError::ReservedIdentity => "reserved_identity",
            ApiError::Busy => "busy",
            ApiError::CrossSite => "cross_site",
            ApiError::AuthenticationUnavailable => "authentication_unavailable",
            ApiError::WorkloadNotFound => "workload_not_found",
            ApiError::NotAConsumer => "not_a_consumer",
            ApiError::NothingToApprove => "nothing_to_approve",
            ApiError::ApprovalSuperseded => "approval_superseded",
        }
    }

    /// How a restart gate's refusal is audited: `deny` for a decision about the caller's access,
    /// `error` for a failure, nothing for refusals that reveal nothing about access (a missing
    /// Secret, a bad path, no session).
    pub fn audit(&self) -> Option<AuditResult> {
        match self {
            ApiError::NamespaceNotAccessible(_)
            | ApiError::KubernetesDenied
            | ApiError::NotAllowed
            | ApiError::ReservedIdentity => Some(AuditResult::Deny),
            ApiError::Internal { .. } | ApiError::ApprovalSuperseded => Some(AuditResult::Error),
            ApiError::WorkloadNotFound | ApiError::NotAConsumer | ApiError::NothingToApprove => {
                None
            }
            ApiError::Unauthenticated
            | ApiError::RestartDisabled
            | ApiError::InvalidPath
            | ApiError::SecretNotFound(_)
            | ApiError::NotFound
            | ApiError::MethodNotAllowed
            | ApiError::PayloadTooLarge
            | ApiError::NotReady
            | ApiError::Busy
            | ApiError::CrossSite
            | ApiError::AuthenticationUnavailable => None,
        }
    }

    /// The `error` text.
    pub fn message(&self) -> String {
        match self {
            ApiError::Unauthenticated => envelope::AUTHENTICATION_REQUIRED.to_owned(),
            ApiError::RestartDisabled => envelope::RESTART_DISABLED.to_owned(),
            ApiError::InvalidPath => envelope::INVALID_PATH.to_owned(),
            ApiError::NamespaceNotAccessible(ns) => envelope::namespace_not_accessible(ns.as_str()),
            ApiError::SecretNotFound(name) => envelope::secret_not_found(name.as_str()),
            ApiError::KubernetesDenied => envelope::KUBERNETES_DENIED.to_owned(),
            ApiError::NotAllowed => envelope::NOT_ALLOWED.to_owned(),
            ApiError::Internal { .. } => envelope::INTERNAL.to_owned(),
            ApiError::NotFound => envelope::NOT_FOUND.to_owned(),
            ApiError::MethodNotAllowed => envelope::METHOD_NOT_ALLOWED.to_owned(),
            ApiError::PayloadTooLarge => envelope::PAYLOAD_TOO_LARGE.to_owned(),
            ApiError::NotReady => envelope::NOT_READY.to_owned(),
            ApiError::ReservedIdentity => RESERVED_IDENTITY.to_owned(),
            ApiError::Busy => BUSY.to_owned(),
            ApiError::CrossSite => CROSS_SITE.to_owned(),
            ApiError::AuthenticationUnavailable => AUTHENTICATION_UNAVAILABLE.to_owned(),
            ApiError::WorkloadNotFound => WORKLOAD_NOT_FOUND.to_owned(),
            ApiError::NotAConsumer => NOT_A_CONSUMER.to_owned(),
            ApiError::NothingToApprove => NOTHING_TO_APPROVE.to_owned(),
            ApiError::ApprovalSuperseded => APPROVAL_SUPERSEDED.to_owned(),
        }
    }

    /// The body.
    pub fn envelope(&self) -> ErrorEnvelope {
        ErrorEnvelope {
            error: self.message(),
            request_id: match self {
                ApiError::Internal { request_id } => Some(request_id.clone()),
                _ => None,
            },
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut response = (status, Json(self.envelope())).into_response();
        // The code travels with the response so the one middleware that counts responses can
        // label it without parsing the body.
        response.extensions_mut().insert(ErrorCode(self.code()));
        if matches!(self, ApiError::Busy | ApiError::AuthenticationUnavailable) {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(crate::limits::RETRY_AFTER_SECONDS),
            );
        }
        response
    }
}

/// The [`ApiError::code`] of an error response, as a response extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorCode(pub &'static str);

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant's status, code, audit result and body, pinned once.
    #[test]
    fn every_variant_on_the_wire() {
        let table: Vec<_> = ApiError::examples()
            .into_iter()
            .map(|error| {
                serde_json::json!({
                    "code": error.code(),
                    "status": error.status().as_u16(),
                    "audit": error.audit().map(|result| serde_json::to_value(result).unwrap()),
                    "body": error.envelope(),
                })
            })
            .collect();
        insta::assert_json_snapshot!("api_errors", table);
    }

    #[test]
    fn the_response_carries_its_code() {
        for error in ApiError::examples() {
            let code = error.code();
            let response = error.into_response();
            assert_eq!(
                response.extensions().get::<ErrorCode>(),
                Some(&ErrorCode(code))
            );
        }
    }
}
