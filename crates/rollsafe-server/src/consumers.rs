//! The reads of a Secret's consumers, behind the restart's gates except the restart flag (they
//! change nothing), each one discovery as the caller, and no patch:
//!
//! - `GET /api/namespaces/{namespace}/secrets/{name}/consumers`: the consumers preview — what a
//!   restart would patch, and whether each would roll now;
//! - `GET /api/namespaces/{namespace}/secrets/{name}/rollout`: where each consumer's rollout
//!   stands, read from the same listed objects (`ConsumersRollout`). Stateless: any replica
//!   answers, and the caller remembers what it saw.
//!
//! The preview also holds what only more reads give ([`rollsafe_kube::pod_consumers`]): the
//! Secret's own `rollsafe.dev/strategy` (from the metadata the gates read) and the pods that
//! consume the Secret outside the three kinds, listed as the caller on demand (paged, within
//! the eviction reader's budget; never cached). A caller who may not list pods still gets the
//! preview, its pod-level consumers said to be not readable; under constrained impersonation,
//! whose rules grant no list of pods as the caller, none is sent and the same is said
//! (`not_granted`).
//!
//! The preview also says what `rollsafe watch` does with each consumer, under the settings the
//! controller published on its Lease (`--controller-lease`), read as the server itself — never
//! as the caller, who need not be allowed to read Leases — beside the discovery; without them,
//! what depends on them is `unknown`, and the reason is a fixed sentence.
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
use rollsafe_core::preview::{
    ConsumersPreview, ControllerSettings, ServedPreview, SettingsUnknown,
};
use rollsafe_core::published::PublishedSettings;
use rollsafe_kube::published::{self, PublishError};
use rollsafe_kube::{Discovery, pod_consumers};
use tracing::warn;

use crate::error::ApiError;
use crate::gates::{Admitted, SecretCheck};
use crate::impersonation::CallerList;
use crate::pods;
use crate::request::{internal, with_request_id};
use crate::state::AppState;

/// The preview route.
pub(crate) async fn consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("consumers", |request_id| async move {
        let (discovery, admitted) = gated_discovery(&state, &headers, path, &request_id).await?;
        // Only once the caller passed every gate: a refused request reads nothing more.
        let client = state.connection.client(admitted.identity.as_ref());
        // Under constrained impersonation no list of pods is sent as the caller.
        let lists = state
            .impersonation
            .lists_as_caller(CallerList::Pods, &state.settings.scope);
        let (preview, controller) = tokio::join!(
            pod_consumers::preview(
                &discovery,
                lists.then_some(&client),
                Some(&admitted.secret_annotations)
            ),
            controller_settings(&state)
        );
        drop(admitted);
        Ok(Json(served(preview, &discovery, controller)).into_response())
    })
    .await
}

/// The `preview` of `discovery`, each consumer judged under the controller's settings.
fn served(
    mut preview: ConsumersPreview,
    discovery: &Discovery,
    (controller, settings): (ControllerSettings, Option<PublishedSettings>),
) -> ServedPreview {
    let namespace = discovery.namespace.as_str();
    let secret = discovery.secret.as_str();
    // The preview's workloads are the matches, in the same order.
    for (consumer, found) in preview.workloads.iter_mut().zip(discovery.matches()) {
        if consumer.kind == found.kind && consumer.name == found.name {
            consumer.judge(namespace, secret, found.object(), settings.as_ref());
        }
    }
    ServedPreview {
        preview,
        controller,
    }
}

/// The controller's published settings, read from its Lease as the server itself, and where
/// they came from. Failures are logged as a code and said as a fixed sentence.
async fn controller_settings(state: &AppState) -> (ControllerSettings, Option<PublishedSettings>) {
    let Some(lease) = &state.settings.controller_lease else {
        return (
            ControllerSettings::unknown(None, SettingsUnknown::NotConfigured),
            None,
        );
    };
    let name = format!("{}/{}", lease.namespace, lease.name);
    // As the server itself: the caller's identity is never used for this read.
    let read = published::read(&state.connection.client(None), lease).await;
    let why = match read {
        Ok(Some(settings)) => {
            return (
                ControllerSettings::published(&name, &settings),
                Some(settings),
            );
        }
        Ok(None) => SettingsUnknown::NotPublished,
        Err(PublishError::Status(status)) => SettingsUnknown::Status(status),
        Err(PublishError::NoResponse) => SettingsUnknown::NoResponse,
        Err(PublishError::Unreadable) => SettingsUnknown::Unreadable,
    };
    if !matches!(why, SettingsUnknown::NotPublished) {
        warn!(
            code = why.code(),
            lease = %name,
            "cannot read the controller's settings from its Lease; the preview says they are unknown"
        );
    }
    (ControllerSettings::unknown(Some(&name), why), None)
}

/// The rollout route: each consumer's rollout state, with the restart annotation this server
/// writes (`restartedAt`), so a caller can pin its own restart's value and tell a later one;
/// and, beside a rollout in progress, what its new pods say ([`crate::pods`]), read as the
/// caller.
pub(crate) async fn rollout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("rollout", |request_id| async move {
        let (discovery, admitted) = gated_discovery(&state, &headers, path, &request_id).await?;
        let view = discovery.rollout(&AnnotationKey::restarted_at());
        let namespace = view.namespace.parse::<Namespace>();
        let Ok(mut body) = serde_json::to_value(&view) else {
            return Err(internal(
                &request_id,
                "the rollout view could not be encoded",
            ));
        };
        if let Ok(namespace) = namespace {
            let client = state.connection.client(admitted.identity.as_ref());
            let timeout = state.engine.timeouts().get;
            let lists = state
                .impersonation
                .lists_as_caller(CallerList::Pods, &state.settings.scope);
            let client = lists.then_some(&client);
            pods::add_notes(&mut body, &discovery, client, &namespace, timeout).await;
        }
        drop(admitted);
        Ok(Json(body).into_response())
    })
    .await
}

/// The restart's gates except the restart flag, then its discovery as the caller, and no
/// patch. Refusals are not audited: the audit file records restarts, and nothing here may
/// restart anything. The admission is returned with the discovery: its slot of the reads'
/// server-wide limit is held until the caller drops it.
async fn gated_discovery(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<(Discovery, Admitted), ApiError> {
    let check = SecretCheck::read(state, request_id);
    let user = check.caller(headers, None).await?;
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    // These reads list as much as a restart does: they share their own server-wide limit.
    let admitted = check.secret(&user, &namespace, &name).await?;
    let discovery = state
        .engine
        .discover(&namespace, &name, admitted.identity.as_ref())
        .await;
    Ok((discovery, admitted))
}
