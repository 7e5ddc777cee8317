//! The admin listener: `/metrics` (Prometheus text), `/healthz` and `/livez` (the process runs:
//! the liveness probe charts expect under either name) and `/readyz` (every watch has listed
//! once, and none is stale).

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::controller::Status;

#[derive(Clone)]
struct AdminState {
    registry: Arc<Registry>,
    status: watch::Receiver<Status>,
}

/// The admin routes over a registry and the controller's status.
pub fn router(registry: Arc<Registry>, status: watch::Receiver<Status>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .with_state(AdminState { registry, status })
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut text = String::new();
    match prometheus_client::encoding::text::encode(&mut text, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

async fn readyz(State(state): State<AdminState>) -> impl IntoResponse {
    let status = state.status.borrow();
    if !status.synced {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
    } else if status.stale_watches > 0 {
        (StatusCode::SERVICE_UNAVAILABLE, "a watch is stale")
    } else {
        (StatusCode::OK, "ok")
    }
}

/// Serves the admin routes on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    registry: Arc<Registry>,
    status: watch::Receiver<Status>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(registry, status))
        .with_graceful_shutdown(shutdown)
        .await
}
