//! `POST /api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve`: the
//! page's **Approve** on a consumer row — the roll `rollsafe watch` holds for that workload,
//! approved as the caller.
//!
//! The gates are a restart's, in the same order — authentication (reserved identities refused
//! and audited) → restart flag → path validation → the run limit → namespace scope → the
//! Secret's live visibility → the ACL on the Secret — then two of its own: the workload, read
//! as the caller, must exist and reference the Secret (the ACL decides for the Secret's
//! consumers, never for another workload), and its `rollsafe.dev/pending` mark must be an
//! approval's. Then, inside the audit protocol: an intent record naming the workload is made
//! durable, the approval patch is sent once as the caller (impersonation mode: Kubernetes RBAC
//! decides too) — `test` the mark read, `add` `rollsafe.dev/approved` — and the result record
//! is written before the answer. The patch and its `test` are the core's
//! ([`rollsafe_core::pending::approve_document`]), the same as `rollsafe approve`'s.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::pending::{self, HeldBy, PENDING, PendingMark};
use rollsafe_core::reference::{self, TargetKind};
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::ApprovalError;
use serde::Serialize;
use tracing::info;

use crate::audit::{APPROVE_ACTION, ApprovalFields, AuditBase, AuditResult};
use crate::auth::{Refusal, authenticate_caller, identity_for};
use crate::error::ApiError;
use crate::request::{internal, with_request_id};
use crate::restart::{audit_base, read_problem, secret_gates, write_audit};
use crate::state::AppState;

/// What the route answers once the approval is written.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Approved {
    /// The workload.
    kind: WorkloadKind,
    /// Its name.
    name: String,
    /// The workload digest approved: the roll the controller makes next.
    digest: String,
    /// Since when it awaited approval, as the controller marked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
}

/// The path: namespace, Secret, workload kind (as the preview names it) and workload name.
type ApprovePath = Path<(Namespace, SecretName, String, String)>;

/// The approval route.
pub(crate) async fn approve(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<ApprovePath, PathRejection>,
) -> Response {
    with_request_id("approve", |request_id| async move {
        handle(&state, &headers, path, &request_id).await
    })
    .await
}

async fn handle(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<ApprovePath, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let names = match &path {
        Ok(Path((namespace, name, _, _))) => (namespace.to_string(), name.to_string()),
        Err(_) => (String::new(), String::new()),
    };
    // 1. Authentication; a reserved identity is refused and audited.
    let user = match authenticate_caller(state, headers, true).await {
        Ok(user) => user,
        Err(Refusal::Reserved(user, refused)) => {
            let base = approval_base(audit_base(&user, names.0, names.1, request_id));
            write_audit(&state.audit, base.refusal(refused.code())).await;
            return Err(ApiError::ReservedIdentity);
        }
        Err(Refusal::Error(error)) => return Err(error),
    };
    // 2. The restart flag: an approval makes a roll happen, as a restart does.
    if !state.settings.restart_enabled {
        return Err(ApiError::RestartDisabled);
    }
    // 3. Path validation.
    let Ok(Path((namespace, secret, kind, workload))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let Some(kind) = workload_kind(&kind) else {
        return Err(ApiError::InvalidPath);
    };
    if !is_dns1123_subdomain(&workload) {
        return Err(ApiError::InvalidPath);
    }
    let base = approval_base(audit_base(
        &user,
        namespace.to_string(),
        secret.to_string(),
        request_id,
    ));
    let audited = |digest: Option<String>| ApprovalFields {
        kind,
        workload: workload.clone(),
        digest,
    };
    let identity = identity_for(state, &user, request_id)?;
    let Some(permit) = state.limiter.try_admit() else {
        state.metrics.restart_shed();
        return Err(ApiError::Busy);
    };
    // 4–6. Scope, the Secret's live visibility and the ACL on it, as the caller.
    if let Err(error) = secret_gates(
        state,
        identity.as_ref(),
        &user,
        &namespace,
        &secret,
        request_id,
    )
    .await
    {
        if let Some(result) = error.audit() {
            let mut line = base.clone().line(result, None);
            line.approval = Some(audited(None));
            write_audit(&state.audit, line).await;
        }
        return Err(error);
    }
    // 7. The workload, as the caller: it exists, references the Secret, and awaits approval.
    let client = state.connection.client(identity.as_ref());
    let read_timeout = state.engine.timeouts().get;
    let object = match rollsafe_kube::read_workload(
        &client,
        kind,
        &namespace,
        &workload,
        read_timeout,
    )
    .await
    {
        Ok(Some(object)) => object,
        Ok(None) => return Err(ApiError::WorkloadNotFound),
        Err(error) if error.is_forbidden() => {
            let mut line = base.clone().line(AuditResult::Deny, None);
            line.approval = Some(audited(None));
            write_audit(&state.audit, line).await;
            return Err(ApiError::KubernetesDenied);
        }
        Err(error) => return Err(internal(request_id, read_problem(&error))),
    };
    let consumes = reference::pod_template(&object).is_some_and(|template| {
        reference::restart_consumers(template)
            .iter()
            .any(|found| found.kind == TargetKind::Secret && found.name == secret.as_str())
    });
    if !consumes {
        return Err(ApiError::NotAConsumer);
    }
    let mark = object
        .pointer("/metadata/annotations")
        .and_then(|annotations| annotations.get(PENDING))
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (Some(read), Some(document)) =
        (PendingMark::parse(&mark), pending::approve_document(&mark))
    else {
        return Err(ApiError::NothingToApprove);
    };
    debug_assert_eq!(read.held_by, HeldBy::Approval);
    let digest = read.digest.to_owned();
    let since = read.at.map(str::to_owned);
    // 8. The intent record, durably, before the patch.
    let intent = base.intent(vec![WorkloadName {
        kind,
        name: workload.clone(),
    }]);
    if let Err(error) = state.audit.write(&intent).await {
        tracing::error!(
            error = error.code(),
            "intent record not written; nothing approved"
        );
        return Err(internal(
            request_id,
            "the intent record could not be written; nothing was approved",
        ));
    }
    // 9. The approval, once, as the caller.
    let sent = rollsafe_kube::send_approval(
        client,
        kind,
        &namespace,
        &workload,
        document,
        state.engine.timeouts().patch,
    )
    .await;
    let outcome = match sent {
        Ok(()) => Ok(()),
        Err(ApprovalError::Superseded) => Err(ApiError::ApprovalSuperseded),
        Err(ApprovalError::Forbidden) => Err(ApiError::KubernetesDenied),
        Err(ApprovalError::NotFound) => Err(ApiError::WorkloadNotFound),
        Err(ApprovalError::Failed) => Err(internal(request_id, "the approval patch failed")),
        Err(ApprovalError::TimedOut) => Err(internal(request_id, "the approval patch timed out")),
    };
    // 10. The result record, before the answer.
    let class = match &outcome {
        Ok(()) => AuditResult::Allow,
        Err(ApiError::KubernetesDenied) => AuditResult::Deny,
        Err(_) => AuditResult::Error,
    };
    let mut line = base.line(class, None);
    line.approval = Some(audited(Some(digest.clone())));
    write_audit(&state.audit, line).await;
    drop(permit);
    outcome?;
    info!(%namespace, %secret, kind = kind.as_str(), workload, "roll approved");
    Ok((
        StatusCode::OK,
        Json(Approved {
            kind,
            name: workload,
            digest,
            since,
        }),
    )
        .into_response())
}

fn approval_base(base: AuditBase) -> AuditBase {
    AuditBase {
        action: APPROVE_ACTION,
        ..base
    }
}

/// The kind as the consumers preview names it (`Deployment`, `StatefulSet`, `DaemonSet`).
fn workload_kind(text: &str) -> Option<WorkloadKind> {
    WorkloadKind::ALL
        .into_iter()
        .find(|kind| kind.as_str() == text)
}
