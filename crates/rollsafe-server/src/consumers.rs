//! The reads of a Secret's consumers, behind the restart's gates except the restart flag (they
//! change nothing), each one discovery as the caller, and no patch:
//!
//! - `GET /api/namespaces/{namespace}/secrets/{name}/consumers`: the consumers preview — what a
//!   restart would patch, and whether each would roll now;
//! - `GET /api/namespaces/{namespace}/secrets/{name}/rollout`: where each consumer's rollout
//!   stands, read from the same listed objects (`ConsumersRollout`). Stateless: any replica
//!   answers, and the caller remembers what it saw.
//!
//! Both run [`gated_discovery`]: the same authentication, reserved-identity rule, path
//! validation, server-wide limit, scope, live visibility, ACL and budgets, with the same
//! refusals.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_kube::Discovery;

use crate::auth::{identity_for, signed_in};
use crate::error::ApiError;
use crate::request::with_request_id;
use crate::restart::{restart_annotation, secret_gates};
use crate::state::AppState;

/// The preview route.
pub(crate) async fn consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("consumers", |request_id| async move {
        let discovery = gated_discovery(&state, &headers, path, &request_id).await?;
        Ok(Json(discovery.preview()).into_response())
    })
    .await
}

/// The rollout route: each consumer's rollout state, with the restart annotation this server
/// writes (`restartedAt`), so a caller can pin its own restart's value and tell a later one.
pub(crate) async fn rollout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("rollout", |request_id| async move {
        let discovery = gated_discovery(&state, &headers, path, &request_id).await?;
        Ok(Json(discovery.rollout(&restart_annotation())).into_response())
    })
    .await
}

/// The restart's gates except the restart flag, then its discovery as the caller, and no
/// patch. Refusals are not audited: the audit file records restarts, and nothing here may
/// restart anything.
async fn gated_discovery(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<Discovery, ApiError> {
    let user = signed_in(state, headers).await?;
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let identity = identity_for(state, &user, request_id)?;
    // These reads list as much as a restart does: they share their own server-wide limit.
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
    Ok(state
        .engine
        .discover(&namespace, &name, identity.as_ref())
        .await)
}
