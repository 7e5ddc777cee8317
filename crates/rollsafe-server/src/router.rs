//! The API router: every route and the handler it runs, and the one middleware that sees every
//! response.
//!
//! The router imports the state and the handlers; neither imports the router.
//!
//! - `POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers`: [`crate::restart`].
//! - `GET /api/namespaces/{namespace}/secrets/{name}/consumers` and `…/rollout`:
//!   `crate::consumers`.
//! - `POST /api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve`:
//!   `crate::approve`.
//! - `GET /api/config`, `/api/me`, `/api/namespaces`, `/api/namespaces/{namespace}/secrets`:
//!   `crate::browse`.
//! - `/auth/*`: [`crate::login`]; the page and its assets: [`crate::web`]; `/healthz`,
//!   `/readyz`: `crate::health`.
//!
//! Every response carries `Cache-Control: no-store` and the page's security headers. Every
//! error response is an [`ApiError`]: `observe` counts it by its static code and logs that
//! code.

use std::sync::Arc;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tracing::info;

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::{approve, browse, consumers, health, login, restart, web};

/// The largest request body accepted (the restart route reads none).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The API router.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/restart-consumers",
            post(restart::restart_consumers),
        )
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/consumers",
            get(consumers::consumers),
        )
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve",
            post(approve::approve),
        )
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/rollout",
            get(consumers::rollout),
        )
        .route("/api/config", get(browse::config))
        .route("/api/me", get(browse::me))
        .route("/api/namespaces", get(browse::namespaces))
        .route("/api/namespaces/{namespace}/secrets", get(browse::secrets))
        .merge(login::routes())
        .merge(web::routes())
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Refuses declared bodies over [`MAX_BODY_BYTES`], counts every response and sets
/// `Cache-Control: no-store` on it.
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = match request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
    {
        Some("/api/namespaces/{namespace}/secrets/{name}/restart-consumers") => "restart",
        Some("/api/namespaces/{namespace}/secrets/{name}/consumers") => "consumers",
        Some("/api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve") => {
            "approve"
        }
        Some("/api/namespaces/{namespace}/secrets/{name}/rollout") => "rollout",
        Some("/api/config") => "config",
        Some("/api/me") => "me",
        Some("/api/namespaces") => "namespaces",
        Some("/api/namespaces/{namespace}/secrets") => "secrets",
        Some("/auth/session") => "session",
        Some("/auth/logout") => "logout",
        Some("/auth/login") => "login",
        Some("/auth/callback") => "callback",
        Some("/" | "/app.js" | "/app.css") => "page",
        Some("/healthz") => "healthz",
        Some("/readyz") => "readyz",
        _ => "other",
    };
    let declared_length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut response = if declared_length.is_some_and(|length| length > MAX_BODY_BYTES) {
        // No route reads a large body; refuse it before any handler runs.
        ApiError::PayloadTooLarge.into_response()
    } else {
        next.run(request).await
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    web::secure(&mut response);
    let status = response.status().as_u16();
    state.metrics.request(route, status);
    if let Some(&ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        state.metrics.error(code);
        info!(route, status, code, "request refused");
    }
    response
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
