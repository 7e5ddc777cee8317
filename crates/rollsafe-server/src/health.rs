//! The probes of the API listener: `GET /healthz` and `GET /livez` (the process answers: the
//! liveness probe under either name, as `rollsafe watch` answers them) and `GET /readyz`
//! (Kubernetes answers the server, within [`READY_TIMEOUT`]).

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::error::ApiError;
use crate::state::AppState;

/// The readiness check's time limit.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /healthz` and `GET /livez`.
pub(crate) async fn healthz() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

/// `GET /readyz`: the API server's version, read as the server.
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let client = state.connection.client(None);
    match tokio::time::timeout(READY_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => Json(json!({ "status": "ready" })).into_response(),
        _ => ApiError::NotReady.into_response(),
    }
}
