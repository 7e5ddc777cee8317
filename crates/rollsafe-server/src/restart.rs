//! `POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers`: the gate sequence of a
//! restart request, and the audited run behind it.
//!
//! The gates, in order: authentication → restart flag → path validation → namespace scope →
//! live visibility (the Secret read as the caller; a history snapshot answers exactly like a
//! missing Secret) → ACL on the live object — [`crate::gates`]'s, as a state change. A failing
//! gate answers with the `{ error }` envelope before any workload is listed or patched; a
//! gate's refusal is audited once, as [`ApiError::audit`] says. Then the run: the engine as the
//! caller in impersonation mode, inside the audit protocol ([`audit::audited`]) — no patch
//! without a durable intent record, no response without the result record.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rollsafe_core::contract::RestartResult;
use rollsafe_core::name::{AnnotationKey, Namespace, SecretName};
use rollsafe_kube::{RestartEngine, RestartRequest};
use tracing::{Instrument, info};

use crate::audit::{self, AuditBase, AuditLine, AuditSink, IntentNotWritten};
use crate::error::ApiError;
use crate::gates::SecretCheck;
use crate::metrics::Metrics;
use crate::request::{internal, with_request_id};
use crate::state::AppState;

/// The restart route.
pub(crate) async fn restart_consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("restart", |request_id| async move {
        handle_restart(&state, &headers, path, &request_id).await
    })
    .await
}

async fn handle_restart(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let check = SecretCheck::change(state, request_id, audit::ACTION);
    // 1–2. Authentication (a reserved identity is refused, and audited under the path as
    // given) and the restart flag.
    let names = path.as_ref().ok().map(|Path((ns, name))| (ns, name));
    let user = check.caller(headers, names).await?;
    // 3. Path validation, with no Kubernetes call: the names were parsed into their types by
    // the extractor, once.
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    // The server-wide run limit, then 4–6: scope, live visibility and the ACL, as the caller.
    // The permit lives until the run's result record is written.
    let admitted = check.secret(&user, &namespace, &name).await?;
    info!(decision = ?admitted.decision, %namespace, secret = %name, "restart allowed");
    // 7. The engine, as the caller, in its own task: once patches may be sent, the run, its
    // metrics and its audit lines complete even if the client hangs up or shutdown begins.
    let request = RestartRequest::new(namespace, name)
        .annotation(AnnotationKey::restarted_at())
        .acting_as(admitted.identity);
    let run = {
        let engine = state.engine.clone();
        let metrics = state.metrics.clone();
        let sink = state.audit.clone();
        let (base, permit) = (admitted.audit, admitted.permit);
        state.runs.spawn(
            async move {
                let outcome = run_audited(&engine, &sink, &metrics, &request, base).await;
                drop(permit);
                outcome
            }
            .in_current_span(),
        )
    };
    let result = match run.await {
        Ok(Ok(result)) => result,
        Ok(Err(IntentNotWritten)) => {
            return Err(internal(
                request_id,
                "the intent record could not be written; nothing was patched",
            ));
        }
        Err(_) => return Err(internal(request_id, "the restart task failed")),
    };
    let status =
        StatusCode::from_u16(result.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Ok((status, Json(result)).into_response())
}

/// One restart run inside the audit protocol, around the engine's two phases: discovery
/// settles and the patches are planned; the plan's targets are the intent, durable before the
/// first patch is sent; the result is counted and its record written before this returns.
async fn run_audited(
    engine: &RestartEngine,
    sink: &AuditSink,
    metrics: &Metrics,
    request: &RestartRequest,
    base: AuditBase,
) -> Result<RestartResult, IntentNotWritten> {
    // Discovery settles and the patches are planned; nothing is patched yet.
    let plan = engine.plan(request).await;
    let planned = plan.targets().cloned().collect();
    let run = async {
        let result = engine.execute(plan).await;
        metrics.result(&result);
        result
    };
    audit::audited(sink, base, planned, run, AuditLine::for_result).await
}
