//! The reads of a Secret's consumers, behind the restart's gates except the restart flag (they
//! change nothing), each one discovery as the caller, and no patch:
//!
//! - `GET /api/namespaces/{namespace}/secrets/{name}/consumers`: the consumers preview — what a
//!   restart would patch, and whether each would roll now;
//! - `GET /api/namespaces/{namespace}/secrets/{name}/rollout`: where each consumer's rollout
//!   stands, read from the same listed objects (`ConsumersRollout`). Stateless: any replica
//!   answers, and the caller remembers what it saw.
//!
//! Both run `gated_discovery`: the same authentication, reserved-identity rule, path
//! validation, scope, live visibility, ACL and budgets ([`crate::gates`], as a read), with the
//! same refusals, under their own server-wide limit.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rollsafe_core::name::{AnnotationKey, Namespace, SecretName};
use rollsafe_kube::Discovery;

use crate::error::ApiError;
use crate::gates::SecretCheck;
use crate::request::with_request_id;
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
        Ok(Json(discovery.rollout(&AnnotationKey::restarted_at())).into_response())
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
    let check = SecretCheck::read(state, request_id);
    let user = check.caller(headers, None).await?;
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    // These reads list as much as a restart does: they share their own server-wide limit,
    // whose slot is held until the discovery is done.
    let admitted = check.secret(&user, &namespace, &name).await?;
    let discovery = state
        .engine
        .discover(&namespace, &name, admitted.identity.as_ref())
        .await;
    drop(admitted.permit);
    Ok(discovery)
}
