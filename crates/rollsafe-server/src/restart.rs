//! `POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers`: the gate sequence of a
//! restart request, and the audited run behind it.
//!
//! The gates, in order: authentication → restart flag → path validation → namespace scope →
//! live visibility (the Secret read as the caller; a history snapshot answers exactly like a
//! missing Secret) → ACL on the live object. A failing gate answers with the `{ error }`
//! envelope before any workload is listed or patched; a gate's refusal is audited once, as
//! [`ApiError::audit`] says. Then `run_audited`: the engine as the caller in impersonation
//! mode, inside the audit protocol — no patch without a durable intent record, no response
//! without the result record.
//!
//! The consumers preview and the rollout view (`crate::consumers`) run the same `secret_gates`,
//! and the rollout view reads the annotation the restart writes ([`restart_annotation`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rollsafe_core::contract::RestartResult;
use rollsafe_core::name::{AnnotationKey, AnnotationPrefix, Namespace, SecretName};
use rollsafe_kube::{
    Impersonation, ReadError, RestartEngine, RestartRequest, read_secret_metadata,
};
use tracing::{Instrument, error, info};

use crate::acl::{self, AccessRules};
use crate::audit::{AuditBase, AuditLine, AuditSink};
use crate::auth::{Refusal, authenticate_caller, identity_for};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::request::{internal, with_request_id};
use crate::scope;
use crate::session::User;
use crate::state::AppState;

/// The time limit of the gates before the engine starts. The engine bounds its own calls.
pub const GATE_DEADLINE: Duration = Duration::from_secs(30);

/// The pod-template annotation this server's restarts write (the contract's), which the
/// rollout view reads back as `restartedAt`.
pub fn restart_annotation() -> AnnotationKey {
    AnnotationKey::restarted_at()
}

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
    // 1. Authentication; reserved Kubernetes identities are refused here, and audited.
    let user = authenticate_for_restart(state, headers, &path, request_id).await?;
    // 2. The restart flag.
    if !state.settings.restart_enabled {
        return Err(ApiError::RestartDisabled);
    }
    // 3. Path validation, with no Kubernetes call: the names are parsed into their types here,
    // once.
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let base = audit_base(&user, namespace.to_string(), name.to_string(), request_id);
    let identity = identity_for(state, &user, request_id)?;
    // The server-wide run limit, before any Kubernetes call; the permit lives until the run's
    // result record is written.
    let Some(permit) = state.limiter.try_admit() else {
        state.metrics.restart_shed();
        return Err(ApiError::Busy);
    };
    // 4–6. Scope, live visibility and the ACL, as the caller.
    let gates = secret_gates(
        state,
        identity.as_ref(),
        &user,
        &namespace,
        &name,
        request_id,
    )
    .await;
    let decision = match gates {
        Ok(decision) => decision,
        Err(error) => {
            // One arm for every refusal: the error says whether and how it is audited.
            if let Some(result) = error.audit() {
                write_audit(&state.audit, base.line(result, None)).await;
            }
            return Err(error);
        }
    };
    info!(decision = ?decision, %namespace, secret = %name, "restart allowed");
    // 7. The engine, as the caller, in its own task: once patches may be sent, the run, its
    // metrics and its audit lines complete even if the client hangs up or shutdown begins.
    let request = RestartRequest::new(namespace, name)
        .annotation(restart_annotation())
        .acting_as(identity);
    let run = {
        let engine = state.engine.clone();
        let metrics = state.metrics.clone();
        let audit = state.audit.clone();
        state.runs.spawn(
            async move {
                let outcome = run_audited(&engine, &audit, &metrics, &request, base).await;
                drop(permit);
                outcome
            }
            .in_current_span(),
        )
    };
    let result = match run.await {
        Ok(Ok(result)) => result,
        Ok(Err(RunFailure::Intent)) => {
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

/// Gate 1 of a restart: the caller, or the refusal. A reserved identity is audited under the
/// path as given (empty when it does not parse).
async fn authenticate_for_restart(
    state: &AppState,
    headers: &HeaderMap,
    path: &Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<User, ApiError> {
    match authenticate_caller(state, headers, true).await {
        Ok(user) => Ok(user),
        Err(Refusal::Reserved(user, refused)) => {
            let (namespace, name) = match path {
                Ok(Path((ns, name))) => (ns.to_string(), name.to_string()),
                Err(_) => (String::new(), String::new()),
            };
            let base = audit_base(&user, namespace, name, request_id);
            write_audit(&state.audit, base.refusal(refused.code())).await;
            Err(ApiError::ReservedIdentity)
        }
        Err(Refusal::Error(error)) => Err(error),
    }
}

pub(crate) fn audit_base(
    user: &User,
    namespace: String,
    name: String,
    request_id: &str,
) -> AuditBase {
    AuditBase {
        user: user.email.clone(),
        namespace,
        name,
        request_id: request_id.to_owned(),
        action: crate::audit::ACTION,
    }
}

// === the audited run ===

/// Why a run stopped before its result.
pub(crate) enum RunFailure {
    /// The intent record could not be made durable, so nothing was patched.
    Intent,
}

/// One restart run inside the audit protocol, around the engine's two phases: discovery
/// settles and the patches are planned; the plan's targets are then recorded as the intent,
/// made durable **before the first patch** (a failed write patches nothing: `RunFailure::Intent`);
/// the patches are sent; the result is counted and its record written before this returns, so
/// the response waits for it. A plan with no targets records no intent.
pub(crate) async fn run_audited(
    engine: &RestartEngine,
    audit: &AuditSink,
    metrics: &Metrics,
    request: &RestartRequest,
    base: AuditBase,
) -> Result<RestartResult, RunFailure> {
    // Discovery settles and the patches are planned; nothing is patched yet.
    let plan = engine.plan(request).await;
    // The plan's targets are known here, before the first patch is sent: the intent record is
    // made durable first, and no patch is sent without it.
    if !plan.is_empty() {
        let intent = base.intent(plan.targets().cloned().collect());
        if let Err(error) = audit.write(&intent).await {
            error!(
                error = error.code(),
                "intent record not written; nothing patched"
            );
            return Err(RunFailure::Intent);
        }
    }
    let result = engine.execute(plan).await;
    metrics.result(&result);
    // The response waits for the result record.
    write_audit(audit, AuditLine::for_result(base, &result)).await;
    Ok(result)
}

/// Writes an audit line; a failure is logged (the line's stream copy is best effort too).
pub(crate) async fn write_audit(audit: &AuditSink, line: AuditLine) {
    if let Err(error) = audit.write(&line).await {
        error!(error = error.code(), "audit line not written durably");
    }
}

// === the gates on a Secret ===

/// The gates on a Secret after authentication and path validation: namespace scope, live
/// visibility (the Secret read as the caller; a history snapshot answers exactly like a missing
/// Secret) and the ACL on the live object, within [`GATE_DEADLINE`]. Nothing is audited here.
pub(crate) async fn secret_gates(
    state: &AppState,
    identity: Option<&Impersonation>,
    user: &User,
    namespace: &Namespace,
    name: &SecretName,
    request_id: &str,
) -> Result<acl::Decision, ApiError> {
    let settings = &state.settings;
    let client = state.connection.client(identity);
    let gates = async {
        // 4. Namespace scope.
        in_scope(state, namespace, &client).await?;
        // 5. Live visibility, as the caller. The gates need the Secret's labels and annotations
        // only, so its metadata is all that is read: no value ever reaches the server.
        let read_timeout = state.engine.timeouts().get;
        let secret = match read_secret_metadata(&client, namespace, name, read_timeout).await {
            Ok(Some(secret)) if !is_history(&secret, &settings.annotation_prefix) => secret,
            Ok(_) => return Err(ApiError::SecretNotFound(name.clone())),
            Err(error) if error.is_forbidden() => return Err(ApiError::KubernetesDenied),
            Err(error) => return Err(internal(request_id, read_problem(&error))),
        };
        // 6. The ACL on the live object. The access ConfigMap is read only when neither the
        // caller being an admin nor the Secret's own annotations decide.
        let annotations: BTreeMap<String, String> = secret.annotations.unwrap_or_default();
        let decide = |rules: &AccessRules| {
            acl::decide(
                user,
                &settings.admins,
                settings.annotation_prefix.as_str(),
                &annotations,
                namespace.as_str(),
                rules,
            )
        };
        let decision = match acl::decided_without_rules(decide(&AccessRules::Absent)) {
            Some(decision) => decision,
            None => {
                let rules = state
                    .access
                    .get(&state.connection)
                    .await
                    .map_err(|error| internal(request_id, read_problem(&error)))?;
                decide(&rules)
            }
        };
        if !decision.allowed() {
            return Err(ApiError::NotAllowed);
        }
        Ok(decision)
    };
    tokio::time::timeout(GATE_DEADLINE, gates)
        .await
        .unwrap_or_else(|_| Err(internal(request_id, "the gates exceeded their deadline")))
}

/// The namespace-scope gate, for a caller's client.
pub(crate) async fn in_scope(
    state: &AppState,
    namespace: &Namespace,
    client: &kube::Client,
) -> Result<(), ApiError> {
    let settings = &state.settings;
    if scope::allows(
        &settings.scope,
        settings.server_namespace.as_str(),
        namespace.as_str(),
        client,
    )
    .await
    {
        Ok(())
    } else {
        Err(ApiError::NamespaceNotAccessible(namespace.clone()))
    }
}

fn is_history(
    secret: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    prefix: &AnnotationPrefix,
) -> bool {
    let Some(kind_label) = prefix.key("kind") else {
        return false;
    };
    secret
        .labels
        .as_ref()
        .and_then(|labels| labels.get(kind_label.as_str()))
        .is_some_and(|kind| kind == "history")
}

/// The fixed text of a failed preflight read, for the log line of its 500.
pub(crate) fn read_problem(error: &ReadError) -> &'static str {
    match error {
        ReadError::Status(_) => "Kubernetes refused a preflight read",
        ReadError::Transport(_) => "no response from Kubernetes to a preflight read",
        ReadError::Timeout => "a preflight read timed out",
        ReadError::Decode => "a preflight read returned an unreadable object",
    }
}
