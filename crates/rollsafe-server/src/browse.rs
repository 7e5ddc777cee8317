//! The read-only routes the web page browses with: `GET /api/config` (what this deployment
//! allows), `GET /api/me` (who the caller is), `GET /api/namespaces` (the namespaces in scope)
//! and `GET /api/namespaces/{namespace}/secrets` (the Secrets there the caller may list; under
//! constrained impersonation none is listed, [`crate::impersonation`]).
//! Nothing here is audited: nothing here can restart anything.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use rollsafe_core::name::Namespace;
use rollsafe_kube::list_secrets;
use serde_json::json;

use crate::auth::{identity_for, signed_in};
use crate::error::ApiError;
use crate::gates::{in_scope, is_history_label, read_problem};
use crate::impersonation::CallerList;
use crate::request::{internal, with_request_id};
use crate::scope;
use crate::state::AppState;

/// `GET /api/config`: the settings the page adapts to.
pub(crate) async fn config(State(state): State<Arc<AppState>>) -> Response {
    let settings = &state.settings;
    Json(json!({
        "restartEnabled": settings.restart_enabled,
        "scope": settings.scope.as_str(),
        "authMode": settings.auth.as_str(),
        "impersonation": settings.impersonation,
        "impersonationMode": state.impersonation.as_str(),
        "tokenReview": settings.token_review.is_some(),
        "oidc": settings.oidc.is_some(),
    }))
    .into_response()
}

/// `GET /api/me`: who the caller is (for the page's header).
pub(crate) async fn me(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    match signed_in(&state, &headers).await {
        Ok(user) => Json(json!({
            "email": user.email,
            "name": user.name,
            "groups": user.groups,
            "source": user.source,
        }))
        .into_response(),
        Err(error) => error.into_response(),
    }
}

/// `GET /api/namespaces`: the namespaces in scope for the caller, sorted.
pub(crate) async fn namespaces(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    with_request_id("namespaces", |request_id| async move {
        let user = signed_in(&state, &headers).await?;
        let identity = identity_for(&state, &user, &request_id)?;
        let client = state.connection.client(identity.as_ref());
        let settings = &state.settings;
        let lists = state
            .impersonation
            .lists_as_caller(CallerList::Namespaces, &settings.scope);
        let namespaces = scope::namespaces(
            &settings.scope,
            settings.server_namespace.as_str(),
            lists.then_some(&client),
        )
        .await;
        Ok(Json(json!({ "namespaces": namespaces })).into_response())
    })
    .await
}

/// `GET /api/namespaces/{namespace}/secrets`: the names of the Secrets of a namespace in scope
/// that the caller may list, read as metadata only; history snapshots are left out.
pub(crate) async fn secrets(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<Namespace>, PathRejection>,
) -> Response {
    with_request_id("secrets", |request_id| async move {
        let user = signed_in(&state, &headers).await?;
        let Ok(Path(namespace)) = path else {
            return Err(ApiError::InvalidPath);
        };
        let identity = identity_for(&state, &user, &request_id)?;
        let client = state.connection.client(identity.as_ref());
        let settings = &state.settings;
        in_scope(&state, &namespace, &client).await?;
        if !state
            .impersonation
            .lists_as_caller(CallerList::Secrets, &settings.scope)
        {
            // Constrained impersonation grants no list of Secrets as anyone: Kubernetes would
            // refuse it, as it refuses the server's own list without impersonation.
            return Err(ApiError::KubernetesDenied);
        }
        let listed = list_secrets(&client, &namespace, state.engine.timeouts().get)
            .await
            .map_err(|error| match error {
                error if error.is_forbidden() => ApiError::KubernetesDenied,
                error => internal(&request_id, read_problem(&error)),
            })?;
        let names: Vec<_> = listed
            .into_iter()
            .filter(|secret| !is_history_label(&secret.labels, &settings.annotation_prefix))
            .map(|secret| json!({ "name": secret.name }))
            .collect();
        Ok(Json(json!({ "namespace": namespace, "secrets": names })).into_response())
    })
    .await
}
