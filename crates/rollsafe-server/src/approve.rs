//! `POST /api/namespaces/{namespace}/secrets/{name}/consumers/{kind}/{workload}/approve`: the
//! page's **Approve** on a consumer row — the roll `rollsafe watch` holds for that workload,
//! approved as the caller.
//!
//! The gates are a restart's ([`crate::gates`], as a state change), in the same order —
//! authentication (reserved identities refused and audited) → restart flag → path validation
//! (the workload's kind and name typed, parsed once) → the run limit → namespace scope → the
//! Secret's live visibility → the ACL on the Secret — then two of its own: the workload, read
//! as the caller (a list narrowed to its name: the `list` every restart needs), must exist and reference the Secret (the ACL decides for the Secret's
//! consumers, never for another workload), and its `rollsafe.dev/pending` mark must be an
//! approval's. Then, inside the audit protocol ([`crate::audit::audited`]): an intent record naming the workload is made
//! durable, the approval patch is sent once as the caller (impersonation mode: Kubernetes RBAC
//! decides too) — `test` the mark read, `add` `rollsafe.dev/approved` — and the result record
//! is written before the answer, which says what was approved: the workload, the digest, since
//! when it waited, when it was approved, and the objects it consumes (the roll is for their
//! content). The patch and its `test` are the core's
//! ([`rollsafe_core::pending::approve_document`]), the same as `rollsafe approve`'s.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rollsafe_core::annotations::PENDING;
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::name::{Namespace, SecretName, WorkloadObjectName};
use rollsafe_core::pending::{self, HeldBy, PendingMark};
use rollsafe_core::reference::{self, TargetKind};
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::ApprovalError;
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::audit::{self, APPROVE_ACTION, ApprovalFields, AuditResult, IntentNotWritten};
use crate::error::ApiError;
use crate::gates::{SecretCheck, read_problem};
use crate::request::{internal, with_request_id};
use crate::state::AppState;

/// What the route answers once the approval is written.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Approved {
    /// The workload.
    kind: WorkloadKind,
    /// Its name.
    name: WorkloadObjectName,
    /// The workload digest approved: the roll the controller makes next.
    digest: String,
    /// Since when it awaited approval, as the controller marked it.
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<String>,
    /// When it was approved (RFC 3339 UTC, milliseconds).
    approved_at: String,
    /// What the roll is for: the Secrets and ConfigMaps the workload consumes
    /// (`Secret/db`), by kind then name — the controller rolls it for their content now.
    consumes: Vec<String>,
}

/// The path: namespace, Secret, workload kind (as the preview names it: `Deployment`,
/// `StatefulSet`, `DaemonSet`) and workload name, each parsed into its type.
#[derive(Debug, Deserialize)]
pub(crate) struct ApprovePath {
    namespace: Namespace,
    name: SecretName,
    kind: WorkloadKind,
    workload: WorkloadObjectName,
}

/// The path's Secret alone, for the audit line of a refused reserved identity.
#[derive(Debug, Deserialize)]
pub(crate) struct SecretPath {
    namespace: Namespace,
    name: SecretName,
}

/// The approval route.
pub(crate) async fn approve(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    secret: Result<Path<SecretPath>, PathRejection>,
    path: Result<Path<ApprovePath>, PathRejection>,
) -> Response {
    with_request_id("approve", |request_id| async move {
        handle(&state, &headers, secret, path, &request_id).await
    })
    .await
}

async fn handle(
    state: &AppState,
    headers: &HeaderMap,
    secret: Result<Path<SecretPath>, PathRejection>,
    path: Result<Path<ApprovePath>, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let check = SecretCheck::change(state, request_id, APPROVE_ACTION);
    // 1–2. Authentication (a reserved identity is refused and audited) and the restart flag:
    // an approval makes a roll happen, as a restart does.
    let names = secret
        .as_ref()
        .ok()
        .map(|Path(secret)| (&secret.namespace, &secret.name));
    let user = check.caller(headers, names).await?;
    // 3. Path validation.
    let Ok(Path(ApprovePath {
        namespace,
        name: secret,
        kind,
        workload,
    })) = path
    else {
        return Err(ApiError::InvalidPath);
    };
    let audited = |digest: Option<String>| ApprovalFields {
        kind,
        workload: workload.to_string(),
        digest,
    };
    // 4–6. The run limit, then scope, the Secret's live visibility and the ACL on it, as the
    // caller; refusals audited with the workload.
    let admitted = check
        .on_workload(audited(None))
        .secret(&user, &namespace, &secret)
        .await?;
    // 7. The workload, as the caller: it exists, references the Secret, and awaits approval.
    let client = state.connection.client(admitted.identity.as_ref());
    let read_timeout = state.engine.timeouts().get;
    // Read with a list narrowed to its name: authorized as the `list` a restart needs, so no
    // `get` of workloads is granted to the caller's impersonation or the server itself.
    let object = match rollsafe_kube::read::read_workload_listed(
        &client,
        kind,
        &namespace,
        workload.as_str(),
        read_timeout,
    )
    .await
    {
        Ok(Some(object)) => object,
        Ok(None) => return Err(ApiError::WorkloadNotFound),
        Err(error) if error.is_forbidden() => {
            let line = admitted.audit.line(AuditResult::Deny, None);
            audit::record(&state.audit, line).await;
            return Err(ApiError::KubernetesDenied);
        }
        Err(error) => return Err(internal(request_id, read_problem(&error))),
    };
    let template = reference::pod_template(&object);
    let references_secret = template.is_some_and(|template| {
        reference::restart_consumers(template)
            .iter()
            .any(|found| found.kind == TargetKind::Secret && found.name == secret.as_str())
    });
    if !references_secret {
        return Err(ApiError::NotAConsumer);
    }
    let consumes: Vec<String> = template
        .map(reference::referenced_config)
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect();
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
    // 8–10. The approval, once, as the caller, inside the audit protocol: the intent record
    // durably before the patch, the result record before the answer.
    let planned = vec![WorkloadName {
        kind,
        name: workload.to_string(),
    }];
    let send = async {
        let sent = rollsafe_kube::send_approval(
            client,
            kind,
            &namespace,
            workload.as_str(),
            document,
            state.engine.timeouts().patch,
        )
        .await;
        match sent {
            Ok(()) => Ok(()),
            Err(ApprovalError::Superseded) => Err(ApiError::ApprovalSuperseded),
            Err(ApprovalError::Forbidden) => Err(ApiError::KubernetesDenied),
            Err(ApprovalError::NotFound) => Err(ApiError::WorkloadNotFound),
            Err(ApprovalError::Failed) => Err(internal(request_id, "the approval patch failed")),
            Err(ApprovalError::TimedOut) => {
                Err(internal(request_id, "the approval patch timed out"))
            }
        }
    };
    let result_line = |base: audit::AuditBase, outcome: &Result<(), ApiError>| {
        let class = match outcome {
            Ok(()) => AuditResult::Allow,
            Err(ApiError::KubernetesDenied) => AuditResult::Deny,
            Err(_) => AuditResult::Error,
        };
        let mut line = base.line(class, None);
        line.approval = Some(audited(Some(digest.clone())));
        line
    };
    let outcome = audit::audited(&state.audit, admitted.audit, planned, send, result_line).await;
    drop(admitted.permit);
    match outcome {
        Ok(outcome) => outcome?,
        Err(IntentNotWritten) => {
            return Err(internal(
                request_id,
                "the intent record could not be written; nothing was approved",
            ));
        }
    }
    info!(%namespace, %secret, kind = kind.as_str(), %workload, "roll approved");
    Ok((
        StatusCode::OK,
        Json(Approved {
            kind,
            name: workload,
            digest,
            since,
            approved_at: rollsafe_core::time::rfc3339_millis(jiff::Timestamp::now()),
            consumes,
        }),
    )
        .into_response())
}
