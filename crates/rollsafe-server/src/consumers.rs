//! `GET /api/namespaces/{namespace}/secrets/{name}/consumers`: the consumers preview. It runs
//! the restart's gates except the restart flag (a preview changes nothing), then the engine's
//! discovery as the caller, and patches nothing.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rollsafe_core::name::{Namespace, SecretName};

use crate::auth::{identity_for, signed_in};
use crate::error::ApiError;
use crate::request::with_request_id;
use crate::restart::secret_gates;
use crate::state::AppState;

/// The preview route.
pub(crate) async fn consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("consumers", |request_id| async move {
        handle_consumers(&state, &headers, path, &request_id).await
    })
    .await
}

/// The consumers preview: the restart's gates except the restart flag, then its discovery as
/// the caller, and no patch. Refusals are not audited: the audit file records restarts, and
/// nothing here may restart anything.
async fn handle_consumers(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let user = signed_in(state, headers).await?;
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let identity = identity_for(state, &user, request_id)?;
    // Previews list as much as a restart does: they have their own server-wide limit.
    let Some(_permit) = state.previews.try_admit() else {
        return Err(ApiError::Busy);
    };
    secret_gates(
        state,
        identity.as_ref(),
        &user,
        &namespace,
        &name,
        request_id,
    )
    .await?;
    let discovery = state
        .engine
        .discover(&namespace, &name, identity.as_ref())
        .await;
    Ok(Json(discovery.preview()).into_response())
}
