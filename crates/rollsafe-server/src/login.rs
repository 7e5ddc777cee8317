//! Signing a browser in and out with the `krypton_session` cookie.
//!
//! - `POST /auth/session` with `Authorization: Bearer <session JWT>`: the token is verified as
//!   any session is (a Kubernetes token is not accepted here), then set as the cookie —
//!   `HttpOnly`, `SameSite=Lax`, `Path=/`, `Max-Age` of `SESSION_MAX_AGE`, and `Secure` unless
//!   the server listens on loopback. 204, no body.
//! - `POST /auth/logout`: the cookie cleared (`Max-Age=0`). 204.
//! - `GET /auth/login` and `GET /auth/callback`: OpenID Connect login, when configured, as
//!   [`crate::oidc`] describes; it ends in the same cookie.
//!
//! The two `POST`s change what the browser holds, so both need the page's same-origin proof
//! ([`crate::state::same_origin`]): a cross-site page can neither sign a person into someone
//! else's session nor sign them out.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tracing::{info, warn};

use crate::error::ApiError;
use crate::identity;
use crate::oidc::{LOGIN_COOKIE, LOGIN_TTL, LoginError, LoginState};
use crate::session::{self, AuthMode, COOKIE, Credentials, NewSession};
use crate::state::{AppState, same_origin};

/// `POST /auth/session`.
pub(crate) async fn sign_in(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
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

/// `POST /auth/logout`.
pub(crate) async fn sign_out(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
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

/// `GET /auth/login`: OpenID Connect, to the provider.
/// `GET /auth/login`.
pub(crate) async fn oidc_login(State(state): State<Arc<AppState>>) -> Response {
    let (Some(oidc), AuthMode::Session { secret, .. }) = (&state.oidc, &state.settings.auth) else {
        return ApiError::NotFound.into_response();
    };
    let started = match oidc.start().await {
        Ok(started) => started,
        Err(error) => return failure(&state, error),
    };
    let (url, login) = started;
    let Ok(sealed) = login.seal(secret, session::now()) else {
        return failure(&state, LoginError::Session);
    };
    let cookie = format!(
        "{LOGIN_COOKIE}={sealed}; Path=/auth; HttpOnly; SameSite=Lax; Max-Age={}{}",
        LOGIN_TTL.as_secs(),
        secure_flag(&state)
    );
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let (Ok(location), Ok(cookie)) =
        (HeaderValue::from_str(&url), HeaderValue::from_str(&cookie))
    {
        headers.insert(header::LOCATION, location);
        headers.insert(header::SET_COOKIE, cookie);
        response
    } else {
        failure(&state, LoginError::Discovery)
    }
}

/// The query of `/auth/callback`.
#[derive(Debug, Deserialize)]
pub(crate) struct Callback {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

/// `GET /auth/callback`: OpenID Connect, back from the provider.
/// `GET /auth/callback`.
pub(crate) async fn oidc_callback(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<Callback>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (Some(oidc), AuthMode::Session { secret, max_age }) = (&state.oidc, &state.settings.auth)
    else {
        return ApiError::NotFound.into_response();
    };
    let outcome = async {
        let Query(callback) = query.map_err(|_| LoginError::NoLoginState)?;
        let cookie = login_cookie(&headers).ok_or(LoginError::NoLoginState)?;
        let login = LoginState::open(&cookie, secret)?;
        if callback.error.is_some() {
            return Err(LoginError::ProviderError);
        }
        let given = callback.state.ok_or(LoginError::StateMismatch)?;
        if !constant_time_eq(given.as_bytes(), login.state.as_bytes()) {
            return Err(LoginError::StateMismatch);
        }
        let code = callback.code.ok_or(LoginError::Exchange)?;
        let (email, groups) = oidc.finish(&login, &code).await?;
        let session = NewSession {
            sub: None,
            email,
            name: None,
            groups,
            ttl: *max_age,
        };
        let token =
            session::mint(&session, secret, session::now()).map_err(|_| LoginError::Session)?;
        let user = session::verify(&token, secret).map_err(|_| LoginError::Session)?;
        if identity::check(&user, &state.settings.allowed_groups).is_err() {
            return Err(LoginError::Reserved);
        }
        info!(user = %user.email, "signed in through OpenID Connect");
        Ok(token)
    };
    match outcome.await {
        Ok(token) => {
            let mut response = StatusCode::SEE_OTHER.into_response();
            let secure = secure_flag(&state);
            let session_cookie = format!(
                "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Lax; Max-Age={}{secure}",
                max_age.as_secs()
            );
            let headers = response.headers_mut();
            headers.insert(header::LOCATION, HeaderValue::from_static("/"));
            for cookie in [session_cookie, clear_login_cookie(secure)] {
                if let Ok(value) = HeaderValue::from_str(&cookie) {
                    headers.append(header::SET_COOKIE, value);
                }
            }
            response
        }
        Err(error) => failure(&state, error),
    }
}

/// A failed OpenID Connect login: the fixed text, and the login cookie cleared.
fn failure(state: &AppState, error: LoginError) -> Response {
    warn!(code = error.code(), "sign-in failed");
    let mut response = (error.status(), error.message()).into_response();
    if let Ok(value) = HeaderValue::from_str(&clear_login_cookie(secure_flag(state))) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

fn clear_login_cookie(secure: &str) -> String {
    format!("{LOGIN_COOKIE}=; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=0{secure}")
}

fn login_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == LOGIN_COOKIE)
        .map(|(_, value)| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_compare_in_full() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
