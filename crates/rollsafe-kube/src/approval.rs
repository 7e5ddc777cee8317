//! Sending an approval: the core's tested patch (`rollsafe_core::pending::approve_document`),
//! once, as the given client's identity, with field manager `rollsafe-approve`. Shared by
//! `rollsafe approve` and the server's approval route.

use std::time::Duration;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use rollsafe_core::name::Namespace;
use rollsafe_core::pending::APPROVE_FIELD_MANAGER;
use rollsafe_core::workload::WorkloadKind;
use thiserror::Error;

/// Why an approval was not written.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalError {
    /// 409/422: the pending mark the patch tests changed meanwhile.
    #[error("the roll awaiting approval changed meanwhile")]
    Superseded,
    /// 403: the identity may not patch the workload.
    #[error("forbidden")]
    Forbidden,
    /// 404: the workload is gone.
    #[error("not found")]
    NotFound,
    /// Another status, or no answer.
    #[error("the approval patch failed")]
    Failed,
    /// No answer within the timeout.
    #[error("the approval patch timed out")]
    TimedOut,
}

impl ApprovalError {
    /// The static code of logs and metrics.
    pub fn code(self) -> &'static str {
        match self {
            ApprovalError::Superseded => "approval_superseded",
            ApprovalError::Forbidden => "forbidden",
            ApprovalError::NotFound => "not_found",
            ApprovalError::Failed => "approval_failed",
            ApprovalError::TimedOut => "timeout",
        }
    }
}

/// Sends `document` (an approval patch) to the workload, once, within `timeout`.
pub async fn send_approval(
    client: kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
    name: &str,
    document: json_patch::Patch,
    timeout: Duration,
) -> Result<(), ApprovalError> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", kind.as_str()),
        kind.plural(),
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, namespace.as_str(), &resource);
    let params = PatchParams {
        field_manager: Some(APPROVE_FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    match tokio::time::timeout(
        timeout,
        api.patch(name, &params, &Patch::Json::<()>(document)),
    )
    .await
    {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(status))) => Err(match status.code {
            409 | 422 => ApprovalError::Superseded,
            403 => ApprovalError::Forbidden,
            404 => ApprovalError::NotFound,
            _ => ApprovalError::Failed,
        }),
        Ok(Err(_)) => Err(ApprovalError::Failed),
        Err(_) => Err(ApprovalError::TimedOut),
    }
}
