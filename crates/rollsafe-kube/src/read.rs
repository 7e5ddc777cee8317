//! Single-object reads (a Secret's metadata, a ConfigMap, a workload, a CronJob) with a
//! timeout, a body limit and the real HTTP status line, for preflight checks and
//! `render --previous-from-cluster`.

use http::{Method, Request, StatusCode};
use k8s_openapi::api::core::v1::{ConfigMap, Event, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, GroupVersionKind};
use kube::client::Body;
use rollsafe_core::failure::TransportFailure;
use rollsafe_core::name::{ConfigMapName, Namespace, SecretName};
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::{WatchedKind, WorkloadKind};
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::transport::{self, BodyError, MAX_OBJECT_BODY};

/// Why a single-object read failed. Carries no upstream text.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum ReadError {
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

impl ReadError {
    /// A static category, for logs.
    pub fn code(&self) -> &'static str {
        match self {
            ReadError::Status(403) => "forbidden",
            ReadError::Status(_) => "status",
            ReadError::Transport(_) => "transport",
            ReadError::Timeout => "timeout",
            ReadError::Decode => "decode",
        }
    }

    /// Whether Kubernetes refused the read to the effective identity (403).
    pub fn is_forbidden(&self) -> bool {
        matches!(self, ReadError::Status(403))
    }
}

/// The `Accept` of a metadata-only read: `PartialObjectMetadata` (served since Kubernetes 1.15).
const METADATA_ONLY: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// What a metadata-only read keeps of the answer. Any other field — a Secret's `data`, were a
/// server to send it regardless — is skipped by the decoder, never held.
#[derive(serde::Deserialize)]
struct MetadataOnly {
    metadata: ObjectMeta,
}

/// Reads a Secret's metadata (labels, annotations, uid …) and nothing else: the request asks
/// for `PartialObjectMetadata`, so no Secret value crosses the wire, and none would be kept if
/// one did. `Ok(None)` when the Secret does not exist (404). Kubernetes authorizes it as a `get`
/// of the Secret.
pub async fn read_secret_metadata(
    client: &kube::Client,
    namespace: &Namespace,
    name: &SecretName,
    timeout: std::time::Duration,
) -> Result<Option<ObjectMeta>, ReadError> {
    let path = format!("/api/v1/namespaces/{namespace}/secrets/{name}");
    let read: Option<MetadataOnly> = read_object(client, path, METADATA_ONLY, timeout).await?;
    Ok(read.map(|object| object.metadata))
}

/// Reads a ConfigMap; `Ok(None)` when it does not exist (404).
pub async fn read_config_map(
    client: &kube::Client,
    namespace: &Namespace,
    name: &ConfigMapName,
    timeout: std::time::Duration,
) -> Result<Option<ConfigMap>, ReadError> {
    let path = format!("/api/v1/namespaces/{namespace}/configmaps/{name}");
    read_object(client, path, "application/json", timeout).await
}

/// Reads an `apps/v1` workload as JSON; `Ok(None)` when it does not exist (404). `name` must
/// be a valid object name (a DNS-1123 subdomain): the caller checks it before asking.
pub async fn read_workload(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<serde_json::Value>, ReadError> {
    let plural = kind.plural();
    let path = format!("/apis/apps/v1/namespaces/{namespace}/{plural}/{name}");
    read_object(client, path, "application/json", timeout).await
}

/// Reads an `apps/v1` workload as JSON through a list narrowed to its name
/// (`fieldSelector=metadata.name=<name>`), so that Kubernetes authorizes it as a `list` — what
/// a restart needs anyway, and, under constrained impersonation, the only read of a workload
/// the server may make as the caller. `Ok(None)` when nothing of that name is listed. The
/// object gets its `apiVersion` and `kind` back (a list's items carry none).
pub async fn read_workload_listed(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<serde_json::Value>, ReadError> {
    #[derive(serde::Deserialize)]
    struct Listed {
        #[serde(default)]
        items: Vec<serde_json::Value>,
    }
    let plural = kind.plural();
    let selector = transport::encode_query_value(&format!("metadata.name={name}"));
    let path = format!("/apis/apps/v1/namespaces/{namespace}/{plural}?fieldSelector={selector}");
    let listed: Option<Listed> = read_object(client, path, "application/json", timeout).await?;
    let found = listed.and_then(|listed| {
        listed
            .items
            .into_iter()
            .find(|item| item.pointer("/metadata/name").and_then(|n| n.as_str()) == Some(name))
    });
    Ok(found.map(|mut object| {
        if let Some(fields) = object.as_object_mut() {
            fields.insert("apiVersion".to_owned(), "apps/v1".into());
            fields.insert("kind".to_owned(), kind.as_str().into());
        }
        object
    }))
}

/// Reads a `batch/v1` CronJob as JSON; `Ok(None)` when it does not exist (404). `name` must be
/// a valid object name (a DNS-1123 subdomain): the caller checks it before asking.
pub async fn read_cron_job(
    client: &kube::Client,
    namespace: &Namespace,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<serde_json::Value>, ReadError> {
    let path = format!("/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}");
    read_object(client, path, "application/json", timeout).await
}

/// Whether the API server serves `resource` (a plural, e.g. `rollouts`) in `group_version`
/// (e.g. `argoproj.io/v1alpha1`): its discovery document lists it. A group version it does not
/// serve (404) is `false`.
pub async fn serves(
    client: &kube::Client,
    group_version: &str,
    resource: &str,
    timeout: std::time::Duration,
) -> Result<bool, ReadError> {
    let path = format!("/apis/{group_version}");
    let list: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList> =
        read_object(client, path, "application/json", timeout).await?;
    Ok(list.is_some_and(|list| list.resources.iter().any(|r| r.name == resource)))
}

/// The bookmark annotation that ends a streaming list's initial events.
pub const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// Whether the API server serves streaming lists: a watch with `sendInitialEvents=true` (the
/// `WatchList` feature gate — on in 1.32, off in 1.33, on again from 1.34). One metadata-only
/// watch of `kind` in `namespace` (all namespaces for `None`), narrowed by a field selector to
/// one name, read until the bookmark annotated [`INITIAL_EVENTS_END`]: `true` when it comes,
/// `false` when the server refuses the request with 422 (the gate off) or ends the watch
/// without it (a server that ignores the parameter sends no such bookmark). No Secret value
/// crosses the wire (metadata only), and at most the one named object is sent.
pub async fn serves_streaming_lists(
    client: &kube::Client,
    kind: TargetKind,
    namespace: Option<&str>,
    timeout: std::time::Duration,
) -> Result<bool, ReadError> {
    use futures::{StreamExt as _, TryStreamExt as _};
    use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};

    // Bounded by the caller's timeout too; the server ends the watch by then at the latest.
    let server_timeout = u32::try_from(timeout.as_secs().max(1)).unwrap_or(u32::MAX);
    let params = WatchParams::streaming_lists()
        .fields("metadata.name=rollsafe-streaming-list-check")
        .timeout(server_timeout);
    let probe = async {
        let resource = api_resource(kind);
        let api: Api<DynamicObject> = match namespace {
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let mut events = api
            .watch_metadata(&params, "0")
            .await
            .map_err(|error| kube_error(&error))?
            .boxed();
        while let Some(event) = events
            .try_next()
            .await
            .map_err(|error| kube_error(&error))?
        {
            if let WatchEvent::Bookmark(bookmark) = event
                && bookmark
                    .metadata
                    .annotations
                    .contains_key(INITIAL_EVENTS_END)
            {
                return Ok(true);
            }
        }
        Ok(false)
    };
    match tokio::time::timeout(timeout, probe).await {
        Ok(Err(ReadError::Status(422))) => Ok(false),
        Ok(answer) => answer,
        Err(_) => Err(ReadError::Timeout),
    }
}

/// The API resource of a Secret or ConfigMap, for dynamic (`DynamicObject`, metadata-only)
/// requests: the one mapping of [`TargetKind`] to its resource.
pub fn api_resource(kind: TargetKind) -> ApiResource {
    match kind {
        TargetKind::Secret => ApiResource::erase::<Secret>(&()),
        TargetKind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
    }
}

/// The API resource of a kind of workload `rollsafe watch` rolls (Argo Rollouts included).
pub fn workload_resource(kind: WatchedKind) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(kind.group(), kind.version(), kind.as_str()),
        kind.plural(),
    )
}

/// A kube call's failure, without its upstream text: the status the API server answered, or
/// when the transport failed ([`transport::classify_error`]).
fn kube_error(error: &kube::Error) -> ReadError {
    match error {
        kube::Error::Api(status) => ReadError::Status(status.code),
        _ => ReadError::Transport(transport::classify_error(error)),
    }
}

/// Reads a Secret's or ConfigMap's metadata and nothing else (`PartialObjectMetadata`, as
/// [`read_secret_metadata`]); `Ok(None)` when it does not exist (404). `name` must be a valid
/// object name (a DNS-1123 subdomain): the caller checks it before asking.
pub async fn read_source_metadata(
    client: &kube::Client,
    kind: TargetKind,
    namespace: &Namespace,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Option<ObjectMeta>, ReadError> {
    let path = source_path(kind, namespace, name);
    let read: Option<MetadataOnly> = read_object(client, path, METADATA_ONLY, timeout).await?;
    Ok(read.map(|object| object.metadata))
}

/// Reads a Secret or ConfigMap in full and hands it to `reduce`, returning only what `reduce`
/// keeps: the object, a Secret's values with it, is dropped before this returns and never
/// leaves this function (the caller reduces it to digests). `Ok(None)` when it does not exist
/// (404). `name` must be a valid object name: the caller checks it before asking.
pub async fn read_source_reduced<T>(
    client: &kube::Client,
    kind: TargetKind,
    namespace: &Namespace,
    name: &str,
    timeout: std::time::Duration,
    reduce: impl FnOnce(&serde_json::Value) -> T,
) -> Result<Option<T>, ReadError> {
    let path = source_path(kind, namespace, name);
    let read: Option<serde_json::Value> =
        read_object(client, path, "application/json", timeout).await?;
    Ok(read.map(|object| reduce(&object)))
}

fn source_path(kind: TargetKind, namespace: &Namespace, name: &str) -> String {
    let plural = match kind {
        TargetKind::Secret => "secrets",
        TargetKind::ConfigMap => "configmaps",
    };
    format!("/api/v1/namespaces/{namespace}/{plural}/{name}")
}

/// Reads the object at `path`, built from validated names so it cannot be malformed, in the
/// form `accept` asks for.
async fn read_object<K: DeserializeOwned>(
    client: &kube::Client,
    path: String,
    accept: &'static str,
    timeout: std::time::Duration,
) -> Result<Option<K>, ReadError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(http::header::ACCEPT, accept)
        .body(Body::empty())
        .map_err(|_| ReadError::Transport(TransportFailure::NotSent))?;
    send_for_object(client, request, timeout).await
}

/// Sends `request` once and reads the object it answers with, within `timeout` and
/// [`MAX_OBJECT_BODY`]; `Ok(None)` for a 404.
pub(crate) async fn send_for_object<K: DeserializeOwned>(
    client: &kube::Client,
    request: Request<Body>,
    timeout: std::time::Duration,
) -> Result<Option<K>, ReadError> {
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

/// One Secret of a namespace, by metadata only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretSummary {
    /// Its name.
    pub name: String,
    /// Its labels.
    pub labels: std::collections::BTreeMap<String, String>,
}

/// Page size of a Secret list.
const SECRET_PAGE_SIZE: u32 = 500;
/// The most Secret pages read (10,000 Secrets).
const MAX_SECRET_PAGES: usize = 20;

/// The Secrets of `namespace`, read as metadata only (`PartialObjectMetadataList`), so no
/// Secret value ever crosses the wire; each page within `timeout`. Past the page budget the
/// list is cut (the caller sees the first 10,000).
pub async fn list_secrets(
    client: &kube::Client,
    namespace: &Namespace,
    timeout: std::time::Duration,
) -> Result<Vec<SecretSummary>, ReadError> {
    let api: kube::Api<Secret> = kube::Api::namespaced(client.clone(), namespace.as_str());
    let mut params = kube::api::ListParams::default().limit(SECRET_PAGE_SIZE);
    let mut out = Vec::new();
    for _ in 0..MAX_SECRET_PAGES {
        let page = match tokio::time::timeout(timeout, api.list_metadata(&params)).await {
            Ok(Ok(page)) => page,
            Ok(Err(error)) => return Err(kube_error(&error)),
            Err(_) => return Err(ReadError::Timeout),
        };
        out.extend(page.items.into_iter().filter_map(|item| {
            Some(SecretSummary {
                name: item.metadata.name?,
                labels: item.metadata.labels.unwrap_or_default(),
            })
        }));
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    Ok(out)
}

/// One Event about an object, as `kubectl describe` shows it: never more than these fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSummary {
    /// `reason` (`Rolled`, `Halted` …).
    pub reason: String,
    /// `Normal` or `Warning`.
    pub type_: String,
    /// The note (core `message`).
    pub note: String,
    /// When it last happened: the series' last observation, else `eventTime`, else
    /// `lastTimestamp`, else `firstTimestamp`, else the object's creation.
    pub time: Option<jiff::Timestamp>,
    /// How many times it happened (1 unless the recorder counted repeats into it).
    pub count: i32,
}

/// The most Events read about one object.
const EVENT_PAGE_SIZE: u32 = 500;

/// The Events about workload `name` of `kind` in `namespace` (core `v1` Events selected by
/// `involvedObject.kind` and `involvedObject.name`, which every API server serves for Events
/// written through `events.k8s.io/v1` too), at most 500, within `timeout`, in no particular
/// order.
pub async fn list_workload_events(
    client: &kube::Client,
    namespace: &Namespace,
    kind: impl Into<WatchedKind>,
    name: &str,
    timeout: std::time::Duration,
) -> Result<Vec<EventSummary>, ReadError> {
    let kind: WatchedKind = kind.into();
    let api: kube::Api<Event> = kube::Api::namespaced(client.clone(), namespace.as_str());
    let fields = format!(
        "involvedObject.kind={},involvedObject.name={name}",
        kind.as_str()
    );
    let params = kube::api::ListParams::default()
        .fields(&fields)
        .limit(EVENT_PAGE_SIZE);
    let list = match tokio::time::timeout(timeout, api.list(&params)).await {
        Ok(Ok(list)) => list,
        Ok(Err(error)) => return Err(kube_error(&error)),
        Err(_) => return Err(ReadError::Timeout),
    };
    Ok(list.items.into_iter().map(summary).collect())
}

fn summary(event: Event) -> EventSummary {
    let series = event.series.as_ref();
    let time = series
        .and_then(|s| s.last_observed_time.as_ref())
        .map(|t| t.0)
        .or(event.event_time.as_ref().map(|t| t.0))
        .or(event.last_timestamp.as_ref().map(|t| t.0))
        .or(event.first_timestamp.as_ref().map(|t| t.0))
        .or(event.metadata.creation_timestamp.as_ref().map(|t| t.0));
    EventSummary {
        reason: event.reason.unwrap_or_default(),
        type_: event.type_.unwrap_or_default(),
        note: event.message.unwrap_or_default(),
        time,
        count: series.map_or(event.count.unwrap_or(1), |s| s.count.unwrap_or(1)),
    }
}
