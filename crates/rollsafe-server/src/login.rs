//! Signing a browser in and out with the `krypton_session` cookie.
//!
//! - `POST /auth/session` with `Authorization: Bearer <session JWT>`: the token is verified as
//!   any session is (a Kubernetes token is not accepted here), then set as the cookie —
//!   `HttpOnly`, `SameSite=Lax`, `Path=/`, `Max-Age` of `SESSION_MAX_AGE`, and `Secure` unless
//!   the server listens on loopback. 204, no body.
//! - `POST /auth/logout`: the cookie cleared (`Max-Age=0`). 204.
//!
//! Both change what the browser holds, so both need the page's same-origin proof
//! ([`crate::app::same_origin`]): a cross-site page can neither sign a person into someone
//! else's session nor sign them out.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::app::{AppState, same_origin};
use crate::config::AuthMode;
use crate::error::ApiError;
use crate::identity;
use crate::session::{self, COOKIE, Credentials};

/// The sign-in routes.
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/auth/session", post(sign_in))
        .route("/auth/logout", post(sign_out))
        .route("/auth/login", get(crate::oidc::login))
        .route("/auth/callback", get(crate::oidc::callback))
}

async fn sign_in(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return ApiError::CrossSite.into_response();
    }
    let AuthMode::Session { secret, max_age } = &state.settings.auth else {
        // Authentication is off: every request is already the dev user.
        return StatusCode::NO_CONTENT.into_response();
    };
    let Some(Credentials::Bearer(token)) = session::credentials_from_headers(&headers) else {
        return ApiError::Unauthenticated.into_response();
    };
    let Ok(user) = session::verify(&token, secret) else {
        return ApiError::Unauthenticated.into_response();
    };
    if identity::check(&user, &state.settings.allowed_groups).is_err() {
        return ApiError::ReservedIdentity.into_response();
    }
    let cookie = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{}",
        max_age.as_secs(),
        secure_flag(&state),
    );
    with_cookie(cookie)
}

async fn sign_out(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    if !same_origin(&headers) {
        return ApiError::CrossSite.into_response();
    }
    with_cookie(format!(
        "{COOKIE}=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0{}",
        secure_flag(&state)
    ))
}

/// `; Secure` unless the server listens on loopback (where browsers accept plain HTTP).
pub(crate) fn secure_flag(state: &AppState) -> &'static str {
    if state.settings.listen.ip().is_loopback() {
        ""
    } else {
        "; Secure"
    }
}

fn with_cookie(cookie: String) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    match HeaderValue::from_str(&cookie) {
        Ok(value) => {
            response.headers_mut().insert(header::SET_COOKIE, value);
            response
        }
        // A verified session JWT is always a valid header value; anything else is refused.
        Err(_) => ApiError::Unauthenticated.into_response(),
    }
}
