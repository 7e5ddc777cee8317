//! TokenReview: asks the API server who a bearer token belongs to.
//!
//! One `POST /apis/authentication.k8s.io/v1/tokenreviews` with a time limit and a body limit,
//! sent once (a review stores nothing, but nothing in rollsafe retries blindly). The token is
//! only in the request body; it never reaches an error, a log line or a `Debug` output.

use http::{Method, Request};
use kube::client::Body;
use rollsafe_core::failure::TransportFailure;
use serde::Deserialize;
use serde_json::json;

use crate::read::{ReadError, send_for_object};

/// The API path of TokenReview.
const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";

/// What the API server said of a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenReview {
    /// The token is valid for one of the requested audiences (or the API server's own, when
    /// none was requested).
    Authenticated {
        /// `status.user.username`.
        username: String,
        /// `status.user.groups`.
        groups: Vec<String>,
    },
    /// Not authenticated: unknown, expired, revoked, or for another audience.
    Rejected,
}

#[derive(Deserialize)]
struct Review {
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    authenticated: bool,
    #[serde(default)]
    user: User,
    #[serde(default)]
    audiences: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
struct User {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
}

/// Reviews `token` for `audiences` (empty: the API server's own) as the client's identity,
/// within `timeout`.
///
/// An authenticated answer counts only when it names a user and, when audiences were asked for,
/// its `status.audiences` holds at least one of them (as the API documents that reviewers must
/// check).
pub async fn review_token(
    client: &kube::Client,
    token: &str,
    audiences: &[String],
    timeout: std::time::Duration,
) -> Result<TokenReview, ReadError> {
    let mut spec = json!({ "token": token });
    if !audiences.is_empty() {
        spec["audiences"] = json!(audiences);
    }
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": spec,
    });
    let body =
        serde_json::to_vec(&body).map_err(|_| ReadError::Transport(TransportFailure::NotSent))?;
    let request = Request::builder()
        .method(Method::POST)
        .uri(TOKEN_REVIEWS)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .map_err(|_| ReadError::Transport(TransportFailure::NotSent))?;
    // A 404 means the API server does not serve TokenReview: a failure, not a rejection.
    let review: Review = send_for_object(client, request, timeout)
        .await?
        .ok_or(ReadError::Status(404))?;
    Ok(judge(review.status, audiences))
}

fn judge(status: Status, audiences: &[String]) -> TokenReview {
    let audience_ok = audiences.is_empty()
        || status
            .audiences
            .as_deref()
            .is_some_and(|granted| granted.iter().any(|a| audiences.contains(a)));
    if status.authenticated && audience_ok && !status.user.username.is_empty() {
        TokenReview::Authenticated {
            username: status.user.username,
            groups: status.user.groups,
        }
    } else {
        TokenReview::Rejected
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(authenticated: bool, username: &str, audiences: Option<&[&str]>) -> Status {
        Status {
            authenticated,
            user: User {
                username: username.to_owned(),
                groups: vec!["g".to_owned()],
            },
            audiences: audiences.map(|a| a.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn an_answer_counts_only_when_authenticated_named_and_for_our_audience() {
        let ours = ["rollsafe".to_owned()];
        let cases: [(Status, &[String], bool); 7] = [
            (status(true, "u", None), &[], true),
            (status(true, "u", Some(&["rollsafe"])), &ours, true),
            (status(true, "u", Some(&["other", "rollsafe"])), &ours, true),
            // A reviewer that ignored the audiences asked for, or granted another one.
            (status(true, "u", None), &ours, false),
            (status(true, "u", Some(&["other"])), &ours, false),
            (status(false, "u", Some(&["rollsafe"])), &ours, false),
            (status(true, "", None), &[], false),
        ];
        for (index, (status, audiences, accepted)) in cases.into_iter().enumerate() {
            let review = judge(status, audiences);
            assert_eq!(
                matches!(review, TokenReview::Authenticated { .. }),
                accepted,
                "case {index}"
            );
        }
    }
}
