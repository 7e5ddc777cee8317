//! `--previous-from-cluster`: the live copies of the workloads the input names.
//!
//! Read-only and narrow: one `get` per workload the render annotates
//! (`/apis/apps/v1/namespaces/<namespace>/<deployments|statefulsets|daemonsets>/<name>`, a
//! CronJob's `/apis/batch/v1/namespaces/<namespace>/cronjobs/<name>`), nothing else — no list,
//! no watch, no write. A 404 means the workload is new. Every call has a time limit and is
//! sent once (the connection never retries). Errors carry the workload and the HTTP status,
//! never the server's text.

use std::time::Duration;

use rollsafe_core::name::Namespace;
use rollsafe_core::render::{AnnotatedKind, ResourceName};
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::ReadError;
use serde_json::Value;
use thiserror::Error;

/// One workload whose live copy is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The workload's kind.
    pub kind: AnnotatedKind,
    /// The namespace it is applied into (its own, else the release's).
    pub namespace: Namespace,
    /// Its `metadata.name`.
    pub name: String,
}

impl Target {
    /// The target for a workload object, or why there is none.
    pub(super) fn of(
        object: &Value,
        release_namespace: Option<&str>,
    ) -> Result<Self, ClusterError> {
        let resource = ResourceName::of(object);
        let kind = object
            .get("kind")
            .and_then(Value::as_str)
            .and_then(AnnotatedKind::of)
            .ok_or_else(|| ClusterError::NotAWorkload(resource.clone()))?;
        let namespace = resource
            .namespace
            .clone()
            .or_else(|| release_namespace.map(str::to_owned))
            .ok_or_else(|| ClusterError::NoNamespace(resource.clone()))?;
        let name = resource.name.clone().unwrap_or_default();
        let Ok(namespace) = namespace.parse::<Namespace>() else {
            return Err(ClusterError::InvalidName(resource));
        };
        if !is_dns1123_subdomain(&name) {
            return Err(ClusterError::InvalidName(resource));
        }
        Ok(Self {
            kind,
            namespace,
            name,
        })
    }

    fn resource(&self) -> ResourceName {
        ResourceName {
            kind: self.kind.kind().to_owned(),
            namespace: Some(self.namespace.as_str().to_owned()),
            name: Some(self.name.clone()),
        }
    }
}

/// Why a live copy could not be read.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub(super) enum ClusterError {
    /// Only the kinds the render annotates are read.
    #[error("{0}: not a workload kind whose live copy can be read")]
    NotAWorkload(ResourceName),
    /// No `metadata.namespace` and no release namespace.
    #[error(
        "{0}: no namespace to read the live object from (pass --namespace or set HELM_NAMESPACE)"
    )]
    NoNamespace(ResourceName),
    /// The name or namespace is not a valid object name: nothing was sent.
    #[error("{0}: not a valid object name or namespace, so no live copy can be read")]
    InvalidName(ResourceName),
    /// The API server answered with this status (404 is "new", not an error).
    #[error("{0}: cannot read the live object: Kubernetes answered HTTP {1}")]
    Status(ResourceName, u16),
    /// No answer: not sent, or the connection broke.
    #[error("{0}: cannot read the live object: no response from Kubernetes")]
    Transport(ResourceName),
    /// The call took longer than its time limit.
    #[error("{0}: cannot read the live object: Kubernetes did not answer in time")]
    Timeout(ResourceName),
    /// The body was too large or not the object asked for.
    #[error("{0}: cannot read the live object: Kubernetes sent an unreadable object")]
    Decode(ResourceName),
}

impl ClusterError {
    /// The error for `resource` when its read failed with `error`.
    fn from_read(resource: ResourceName, error: ReadError) -> Self {
        match error {
            ReadError::Status(status) => ClusterError::Status(resource, status),
            ReadError::Transport(_) => ClusterError::Transport(resource),
            ReadError::Timeout => ClusterError::Timeout(resource),
            ReadError::Decode => ClusterError::Decode(resource),
        }
    }
}

/// Reads the live copy of each target, one `get` after the other, through
/// [`rollsafe_kube::read_workload`] (a CronJob: [`rollsafe_kube::read_cron_job`]); a 404 leaves
/// it out.
pub(super) async fn read_live(
    client: &kube::Client,
    targets: &[Target],
    timeout: Duration,
) -> Result<Vec<Value>, ClusterError> {
    let mut live = Vec::new();
    for target in targets {
        live.extend(get(client, target, timeout).await?);
    }
    Ok(live)
}

async fn get(
    client: &kube::Client,
    target: &Target,
    timeout: Duration,
) -> Result<Option<Value>, ClusterError> {
    let workload = match target.kind {
        AnnotatedKind::Deployment => Some(WorkloadKind::Deployment),
        AnnotatedKind::StatefulSet => Some(WorkloadKind::StatefulSet),
        AnnotatedKind::DaemonSet => Some(WorkloadKind::DaemonSet),
        AnnotatedKind::CronJob => None,
    };
    let read = match workload {
        Some(kind) => {
            rollsafe_kube::read_workload(client, kind, &target.namespace, &target.name, timeout)
                .await
        }
        None => {
            rollsafe_kube::read_cron_job(client, &target.namespace, &target.name, timeout).await
        }
    };
    let mut object = match read {
        Ok(Some(object)) => object,
        Ok(None) => return Ok(None),
        Err(error) => return Err(ClusterError::from_read(target.resource(), error)),
    };
    let matches = object.is_object()
        && object.pointer("/metadata/name").and_then(Value::as_str) == Some(target.name.as_str());
    if !matches {
        return Err(ClusterError::Decode(target.resource()));
    }
    // The object as read is the previous copy; its kind is the one asked for.
    object["kind"] = Value::String(target.kind.kind().to_owned());
    if object.pointer("/metadata/namespace").is_none() {
        object["metadata"]["namespace"] = Value::String(target.namespace.as_str().to_owned());
    }
    Ok(Some(object))
}
