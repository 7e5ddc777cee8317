//! Who the caller is: authentication (the dev user, a session JWT, or a reviewed Kubernetes
//! token), the reserved-identity rule, and the identity Kubernetes calls then carry.

use axum::http::HeaderMap;
use rollsafe_kube::Impersonation;
use tracing::warn;

use crate::error::ApiError;
use crate::identity;
use crate::request::internal;
use crate::session::{self, AuthMode, Credentials, User};
use crate::state::{AppState, same_origin};
use crate::token_review;

/// Why authentication did not yield a caller.
pub(crate) enum Refusal {
    /// A reserved identity (or one outside the allowed groups): refused, and the restart route
    /// audits it.
    Reserved(User, identity::IdentityRefusal),
    /// No valid credentials, or the review failed.
    Error(ApiError),
}

/// Authentication for a read: the caller, reserved identities refused (unaudited: nothing here
/// can restart anything).
pub(crate) async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<User, ApiError> {
    match authenticate_caller(state, headers, false).await {
        Ok(user) => Ok(user),
        Err(Refusal::Reserved(..)) => Err(ApiError::ReservedIdentity),
        Err(Refusal::Error(error)) => Err(error),
    }
}

/// Authenticates the caller and applies the reserved-identity rule.
pub(crate) async fn authenticate_caller(
    state: &AppState,
    headers: &HeaderMap,
    changes_state: bool,
) -> Result<User, Refusal> {
    let user = authenticate(state, headers, changes_state)
        .await
        .map_err(Refusal::Error)?;
    if let Err(refused) = identity::check(&user, &state.settings.allowed_groups) {
        warn!(
            reason = refused.code(),
            "session refused: reserved identity"
        );
        return Err(Refusal::Reserved(user, refused));
    }
    Ok(user)
}

/// Authenticates a request: the dev user when authentication is off; else a session JWT (bearer
/// or cookie), or — when TokenReview is on — a Kubernetes bearer token the API server accepts.
/// A cookie-authenticated request that changes state must also pass [`same_origin`].
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    changes_state: bool,
) -> Result<User, ApiError> {
    let secret = match &state.settings.auth {
        AuthMode::Disabled => return Ok(User::dev()),
        AuthMode::Session { secret, .. } => secret,
    };
    let credentials =
        session::credentials_from_headers(headers).ok_or(ApiError::Unauthenticated)?;
    if let Credentials::Cookie(_) = credentials
        && changes_state
        && !same_origin(headers)
    {
        return Err(ApiError::CrossSite);
    }
    let token = credentials.token();
    match (&credentials, &state.reviewer) {
        (Credentials::Bearer(_), Some(reviewer)) if !token_review::is_session_token(token) => {
            reviewer
                .review(&state.connection, token)
                .await?
                .ok_or(ApiError::Unauthenticated)
        }
        _ => session::verify(token, secret).map_err(|_| ApiError::Unauthenticated),
    }
}

/// The identity Kubernetes calls carry: the caller in impersonation mode (never the dev user),
/// else the server's own.
pub(crate) fn identity_for(
    state: &AppState,
    user: &User,
    request_id: &str,
) -> Result<Option<Impersonation>, ApiError> {
    if !state.settings.impersonation || matches!(state.settings.auth, AuthMode::Disabled) {
        return Ok(None);
    }
    Impersonation::new(
        user.email.clone(),
        identity::forwarded_groups(user).cloned(),
    )
    .map(Some)
    .map_err(|_| {
        internal(
            request_id,
            "the caller's identity cannot be sent as impersonation headers",
        )
    })
}
