//! Single-object reads (a Secret, a ConfigMap) with a timeout, a body limit and the real HTTP
//! status line, for preflight checks.

use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::client::Body;
use rollsafe_core::failure::TransportFailure;
use rollsafe_core::validation::{is_dns1123_label, is_dns1123_subdomain};
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::transport::{self, BodyError, MAX_OBJECT_BODY};

/// Why a single-object read failed. Carries no upstream text.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
    /// The namespace or name is not a valid object name; nothing was sent.
    #[error("invalid namespace or object name")]
    InvalidName,
    /// The API server answered with this non-2xx status (404 is `Ok(None)` instead).
    #[error("Kubernetes answered HTTP {0}")]
    Status(u16),
    /// No response: the request was not sent, or no answer arrived.
    #[error("no response from Kubernetes")]
    Transport(TransportFailure),
    /// The call took longer than its time limit.
    #[error("Kubernetes did not answer in time")]
    Timeout,
    /// The body was too large, broken, or not the expected object.
    #[error("Kubernetes sent an unreadable object")]
    Decode,
}

/// Reads a Secret; `Ok(None)` when it does not exist (404).
pub async fn read_secret(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<Secret>, ReadError> {
    read_object(client, "/api/v1", "secrets", namespace, name, timeout).await
}

/// Reads a ConfigMap; `Ok(None)` when it does not exist (404).
pub async fn read_config_map(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<ConfigMap>, ReadError> {
    read_object(client, "/api/v1", "configmaps", namespace, name, timeout).await
}

async fn read_object<K: DeserializeOwned>(
    client: &kube::Client,
    group_version_path: &str,
    plural: &str,
    namespace: &str,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<K>, ReadError> {
    if !is_dns1123_label(namespace) || !is_dns1123_subdomain(name) {
        return Err(ReadError::InvalidName);
    }
    let path = format!("{group_version_path}/namespaces/{namespace}/{plural}/{name}");
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::empty())
        .map_err(|_| ReadError::InvalidName)?;
    let call = async {
        let response = transport::send_once(client, request)
            .await
            .map_err(ReadError::Transport)?;
        let status = response.status();
        if status == StatusCode::NOT_FOUND {
            transport::drain(response.into_body()).await;
            return Ok(None);
        }
        if !status.is_success() {
            transport::drain(response.into_body()).await;
            return Err(ReadError::Status(status.as_u16()));
        }
        let body = transport::read_limited(response.into_body(), MAX_OBJECT_BODY)
            .await
            .map_err(|error| match error {
                BodyError::OverLimit { .. } => ReadError::Decode,
                BodyError::Broken => ReadError::Transport(TransportFailure::AfterSend),
            })?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|_| ReadError::Decode)
    };
    tokio::time::timeout(timeout, call)
        .await
        .unwrap_or(Err(ReadError::Timeout))
}
