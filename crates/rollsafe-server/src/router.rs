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
//! - `/auth/*`: [`crate::login`]; the page and its assets: [`crate::web`]; `/healthz`
//!   (also `/livez`), `/readyz`: `crate::health`.
//!
//! Each route is written once, in one table (path, metrics label, handler): the router is
//! built from it and the middleware labels responses from it.
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
use axum::routing::{MethodRouter, get, post};
use tracing::info;

use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::{approve, browse, consumers, health, login, restart, web};

/// The largest request body accepted (the restart route reads none).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// One route: its path, the label its responses are counted under, and its handler.
struct Route {
    path: &'static str,
    label: &'static str,
    handler: fn() -> MethodRouter<Arc<AppState>>,
}

/// Every route, once: [`router`] routes them and `observe` labels their responses from here.
const ROUTES: &[Route] = &[
    Route {
        path: "/api/namespaces/{namespace}/secrets/{name}/restart-consumers",
        label: "restart",
        handler: || post(restart::restart_consumers),
    },
    Route {
        path: "/api/namespaces/{namespace}/secrets/{name}/consumers",
        label: "consumers",
        handler: || get(consumers::consumers),
    },
    Route {
        path: "/api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve",
        label: "approve",
        handler: || post(approve::approve),
    },
    Route {
        path: "/api/namespaces/{namespace}/secrets/{name}/rollout",
        label: "rollout",
        handler: || get(consumers::rollout),
    },
    Route {
        path: "/api/config",
        label: "config",
        handler: || get(browse::config),
    },
    Route {
        path: "/api/me",
        label: "me",
        handler: || get(browse::me),
    },
    Route {
        path: "/api/namespaces",
        label: "namespaces",
        handler: || get(browse::namespaces),
    },
    Route {
        path: "/api/namespaces/{namespace}/secrets",
        label: "secrets",
        handler: || get(browse::secrets),
    },
    Route {
        path: "/auth/session",
        label: "session",
        handler: || post(login::sign_in),
    },
    Route {
        path: "/auth/logout",
        label: "logout",
        handler: || post(login::sign_out),
    },
    Route {
        path: "/auth/login",
        label: "login",
        handler: || get(login::oidc_login),
    },
    Route {
        path: "/auth/callback",
        label: "callback",
        handler: || get(login::oidc_callback),
    },
    Route {
        path: "/",
        label: "page",
        handler: || get(web::index),
    },
    Route {
        path: "/app.js",
        label: "page",
        handler: || get(web::script),
    },
    Route {
        path: "/app.css",
        label: "page",
        handler: || get(web::style),
    },
    Route {
        path: "/healthz",
        label: "healthz",
        handler: || get(health::healthz),
    },
    // The liveness probe under the name `rollsafe watch`'s admin listener also answers.
    Route {
        path: "/livez",
        label: "healthz",
        handler: || get(health::healthz),
    },
    Route {
        path: "/readyz",
        label: "readyz",
        handler: || get(health::readyz),
    },
];

/// The label of responses no route matched.
const OTHER: &str = "other";

/// The API router.
pub fn router(state: Arc<AppState>) -> Router {
    ROUTES
        .iter()
        .fold(Router::new(), |router, route| {
            router.route(route.path, (route.handler)())
        })
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Refuses declared bodies over [`MAX_BODY_BYTES`], counts every response and sets
/// `Cache-Control: no-store` on it.
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let matched = request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str);
    let route = ROUTES
        .iter()
        .find(|route| Some(route.path) == matched)
        .map_or(OTHER, |route| route.label);
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
