//! Publishing and reading the controller's effective settings
//! ([`rollsafe_core::published::PublishedSettings`]) on its Lease: a merge patch of one
//! annotation (created, holding nothing, when missing), and a read of the one Lease. Every call
//! has [`PUBLISH_TIMEOUT`]; failures carry no upstream text.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use rollsafe_core::annotations::SETTINGS;
use rollsafe_core::published::PublishedSettings;
use thiserror::Error;

/// The field manager of the write.
pub const FIELD_MANAGER: &str = "rollsafe-watch";

/// How long publishing, or reading, may take.
pub const PUBLISH_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a controller publishes its settings: its Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRef {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
}

/// Why the settings could not be published or read. Carries no upstream text.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum PublishError {
    /// Kubernetes answered with this status.
    #[error("Kubernetes answered HTTP {0}")]
    Status(u16),
    /// No answer, or not in time.
    #[error("no response from Kubernetes in time")]
    NoResponse,
    /// The annotation is not the settings' JSON.
    #[error("the published settings are not readable")]
    Unreadable,
}

impl PublishError {
    /// The code of logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            PublishError::Status(403) => "forbidden",
            PublishError::Status(_) => "status",
            PublishError::NoResponse => "no_response",
            PublishError::Unreadable => "unreadable",
        }
    }
}

fn failed(error: kube::Error) -> PublishError {
    match error {
        kube::Error::Api(status) => PublishError::Status(status.code),
        _ => PublishError::NoResponse,
    }
}

/// Writes `settings` on the Lease `lease` (created, holding nothing, when missing: a
/// controller without leader election has none).
pub async fn publish(
    client: &kube::Client,
    lease: &LeaseRef,
    settings: &PublishedSettings,
) -> Result<(), PublishError> {
    let text = serde_json::to_string(settings).map_err(|_| PublishError::Unreadable)?;
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let patch = serde_json::json!({"metadata": {"annotations": {SETTINGS: text}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let patched = tokio::time::timeout(
        PUBLISH_TIMEOUT,
        api.patch(&lease.name, &params, &Patch::Merge(&patch)),
    )
    .await
    .map_err(|_| PublishError::NoResponse)?;
    match patched {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            let mut object = Lease::default();
            object.metadata.name = Some(lease.name.clone());
            object.metadata.annotations = Some([(SETTINGS.to_owned(), text)].into_iter().collect());
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PostParams::default()
            };
            tokio::time::timeout(PUBLISH_TIMEOUT, api.create(&params, &object))
                .await
                .map_err(|_| PublishError::NoResponse)?
                .map(|_| ())
                .map_err(failed)
        }
        Err(error) => Err(failed(error)),
    }
}

/// The settings published on the Lease `lease`; `None` when there is no such Lease or it
/// carries none.
pub async fn read(
    client: &kube::Client,
    lease: &LeaseRef,
) -> Result<Option<PublishedSettings>, PublishError> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &lease.namespace);
    let found = tokio::time::timeout(PUBLISH_TIMEOUT, api.get_opt(&lease.name))
        .await
        .map_err(|_| PublishError::NoResponse)?
        .map_err(failed)?;
    let Some(text) = found
        .as_ref()
        .and_then(|lease| lease.metadata.annotations.as_ref())
        .and_then(|annotations| annotations.get(SETTINGS))
    else {
        return Ok(None);
    };
    serde_json::from_str(text)
        .map(Some)
        .map_err(|_| PublishError::Unreadable)
}
