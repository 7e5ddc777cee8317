//! Classifying why a Kubernetes request did not succeed into a contract failure code.
//!
//! | upstream | code | `httpStatus` |
//! |---|---|---|
//! | 401 | `unauthenticated` | 401 |
//! | 403 | `forbidden` | 403 |
//! | 404 | `not_found` | 404 |
//! | 409 | `conflict` | 409 |
//! | 422 (a failed JSON Patch `test`: the workload changed or was replaced) | `conflict` | 422 |
//! | 400 | `invalid_request` | 400 |
//! | 429 | `rate_limited` | 429 |
//! | 500, 502, 503 | `unavailable` | the status |
//! | 504 | `unconfirmed` | 504 |
//! | any other 4xx | `invalid_request` | the status |
//! | any other 5xx, or another non-2xx | `unavailable` | the status |
//! | connection refused or failed before the request was sent | `unavailable` | — |
//! | reset, EOF or timeout after the request was sent | `unconfirmed` | — |
//! | an inventory problem detected locally | `incomplete_list` | 503, or the upstream status |

use serde::{Deserialize, Serialize};

/// The classified reason a workload or an inventory failed. Serialized in `snake_case`, as the
/// contract spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// Kubernetes did not accept the credentials (401).
    Unauthenticated,
    /// The effective identity may not do this (403).
    Forbidden,
    /// The object does not exist (404).
    NotFound,
    /// The workload changed or was replaced after discovery (409, or 422 from a failed `test`).
    Conflict,
    /// Kubernetes rejected the request as malformed (400 and other 4xx).
    InvalidRequest,
    /// Kubernetes is throttling (429).
    RateLimited,
    /// Kubernetes could not serve the request, and it did not take effect (5xx, or no connection).
    Unavailable,
    /// The request may have taken effect, but no answer confirms it (timeout, reset, 504).
    Unconfirmed,
    /// The inventory was inconsistent, malformed or over budget; nothing was patched from it.
    IncompleteList,
}

impl FailureCode {
    /// The code as the contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::Unauthenticated => "unauthenticated",
            FailureCode::Forbidden => "forbidden",
            FailureCode::NotFound => "not_found",
            FailureCode::Conflict => "conflict",
            FailureCode::InvalidRequest => "invalid_request",
            FailureCode::RateLimited => "rate_limited",
            FailureCode::Unavailable => "unavailable",
            FailureCode::Unconfirmed => "unconfirmed",
            FailureCode::IncompleteList => "incomplete_list",
        }
    }

    /// The fixed, sanitized guidance for a workload (`failures`) entry with this code: what
    /// happened to that workload's patch. Never upstream text.
    pub const fn message(self) -> &'static str {
        match self {
            FailureCode::Unauthenticated => {
                "Kubernetes rejected the credentials of the effective identity. Check the server's Kubernetes credentials."
            }
            FailureCode::Forbidden => {
                "Access denied. Check Kubernetes permissions for the effective identity and, when enabled, ServiceAccount impersonation permissions."
            }
            FailureCode::NotFound => {
                "The workload no longer exists. Reload the workloads before retrying."
            }
            FailureCode::Conflict => {
                "The workload changed or was replaced after discovery, so it was not patched. Reload it and retry only if a rollout is still wanted."
            }
            FailureCode::InvalidRequest => {
                "Kubernetes rejected the request as invalid. Review the workload before retrying."
            }
            FailureCode::RateLimited => {
                "Kubernetes is rate limiting requests. Wait before retrying."
            }
            FailureCode::Unavailable => {
                "Kubernetes was unavailable and did not apply the request. Retry later."
            }
            FailureCode::Unconfirmed => {
                "No response confirmed the request; the rollout may or may not have been requested. Review the workload before retrying."
            }
            FailureCode::IncompleteList => {
                "The workload was listed without a usable uid, resourceVersion or pod template, so it was not patched. Review the workload before retrying."
            }
        }
    }
}

impl FailureCode {
    /// The fixed, sanitized guidance for a `discoveryFailures` entry with this code. A list is not
    /// a patch: whatever failed, the kind's inventory is unknown and nothing of that kind was
    /// patched. The `forbidden` text is the seed's, shared with patch failures.
    pub const fn discovery_message(self) -> &'static str {
        match self {
            FailureCode::Unauthenticated => {
                "Kubernetes rejected the credentials of the effective identity while listing this kind, so its inventory is unknown and nothing of this kind was patched. Check the server's Kubernetes credentials."
            }
            FailureCode::Forbidden => FailureCode::Forbidden.message(),
            FailureCode::NotFound => {
                "Kubernetes did not find the list of this kind, so its inventory is unknown and nothing of this kind was patched. Check that the namespace and the apps/v1 API exist."
            }
            FailureCode::Conflict => {
                "Kubernetes reported a conflict while listing this kind, so its inventory is unknown and nothing of this kind was patched. Retry later."
            }
            FailureCode::InvalidRequest => {
                "Kubernetes rejected the list request as invalid, so this kind's inventory is unknown and nothing of this kind was patched. Check the cluster's Kubernetes version."
            }
            FailureCode::RateLimited => {
                "Kubernetes is rate limiting requests, so this kind's inventory is unknown and nothing of this kind was patched. Wait before retrying."
            }
            FailureCode::Unavailable => {
                "Kubernetes was unavailable while listing this kind, so its inventory is unknown and nothing of this kind was patched. Retry later."
            }
            FailureCode::Unconfirmed => {
                "No response completed the list of this kind, so its inventory is unknown and nothing of this kind was patched. Retry later."
            }
            FailureCode::IncompleteList => {
                "The inventory of this kind was incomplete, inconsistent or over budget, so nothing of this kind was patched. Review the workloads before retrying."
            }
        }
    }
}

impl std::fmt::Display for FailureCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A classified failure: the code and, when there is one, the HTTP status behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The contract code.
    pub code: FailureCode,
    /// The upstream HTTP status, or 503 for a locally detected incomplete inventory.
    pub http_status: Option<u16>,
}

/// The HTTP status used for an inventory problem detected locally.
pub const LOCAL_INCOMPLETE_LIST_STATUS: u16 = 503;

/// A failure to get an HTTP response at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportFailure {
    /// The request was never sent: the connection was refused or could not be made.
    NotSent,
    /// The request was (or may have been) sent, then the connection was reset or closed, or
    /// the call timed out, before a response arrived.
    AfterSend,
}

impl Failure {
    /// Classifies a non-2xx HTTP status.
    pub fn from_status(status: u16) -> Self {
        let code = match status {
            401 => FailureCode::Unauthenticated,
            403 => FailureCode::Forbidden,
            404 => FailureCode::NotFound,
            409 | 422 => FailureCode::Conflict,
            429 => FailureCode::RateLimited,
            504 => FailureCode::Unconfirmed,
            400..=499 => FailureCode::InvalidRequest,
            _ => FailureCode::Unavailable,
        };
        Failure {
            code,
            http_status: Some(status),
        }
    }

    /// Classifies a transport failure.
    pub fn from_transport(failure: TransportFailure) -> Self {
        let code = match failure {
            TransportFailure::NotSent => FailureCode::Unavailable,
            TransportFailure::AfterSend => FailureCode::Unconfirmed,
        };
        Failure {
            code,
            http_status: None,
        }
    }

    /// An inventory problem: with the upstream status when one caused it, else 503.
    pub fn incomplete_list(upstream_status: Option<u16>) -> Self {
        Failure {
            code: FailureCode::IncompleteList,
            http_status: Some(upstream_status.unwrap_or(LOCAL_INCOMPLETE_LIST_STATUS)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_table() {
        let table = [
            (401, FailureCode::Unauthenticated),
            (403, FailureCode::Forbidden),
            (404, FailureCode::NotFound),
            (409, FailureCode::Conflict),
            (422, FailureCode::Conflict),
            (400, FailureCode::InvalidRequest),
            (413, FailureCode::InvalidRequest),
            (415, FailureCode::InvalidRequest),
            (429, FailureCode::RateLimited),
            (500, FailureCode::Unavailable),
            (502, FailureCode::Unavailable),
            (503, FailureCode::Unavailable),
            (504, FailureCode::Unconfirmed),
            (501, FailureCode::Unavailable),
            (302, FailureCode::Unavailable),
        ];
        for (status, code) in table {
            assert_eq!(
                Failure::from_status(status),
                Failure {
                    code,
                    http_status: Some(status)
                },
                "HTTP {status}"
            );
        }
    }

    #[test]
    fn transport_table() {
        assert_eq!(
            Failure::from_transport(TransportFailure::NotSent),
            Failure {
                code: FailureCode::Unavailable,
                http_status: None
            }
        );
        assert_eq!(
            Failure::from_transport(TransportFailure::AfterSend),
            Failure {
                code: FailureCode::Unconfirmed,
                http_status: None
            }
        );
    }

    #[test]
    fn incomplete_list_status() {
        assert_eq!(Failure::incomplete_list(None).http_status, Some(503));
        assert_eq!(Failure::incomplete_list(Some(410)).http_status, Some(410));
    }

    #[test]
    fn codes_serialize_as_the_contract_spells_them() {
        for code in [
            FailureCode::Unauthenticated,
            FailureCode::Forbidden,
            FailureCode::NotFound,
            FailureCode::Conflict,
            FailureCode::InvalidRequest,
            FailureCode::RateLimited,
            FailureCode::Unavailable,
            FailureCode::Unconfirmed,
            FailureCode::IncompleteList,
        ] {
            assert_eq!(
                serde_json::to_value(code).unwrap(),
                serde_json::json!(code.as_str())
            );
            assert!(!code.message().is_empty());
            // A list is not a patch: discovery guidance never speaks of a patched workload.
            let discovery = code.discovery_message();
            if code != FailureCode::Forbidden {
                assert!(
                    discovery.contains("nothing of this kind was patched"),
                    "{code}"
                );
            }
            for patch_wording in [
                "may or may not have been requested",
                "no longer exists",
                "did not apply the request",
            ] {
                assert!(!discovery.contains(patch_wording), "{code}: {discovery}");
            }
        }
    }
}
