//! Following requested rollouts to their end: the core's [`Follower`]s fed by lists.
//!
//! A [`RolloutWatch`] follows a set of workloads of one namespace. Each [`RolloutWatch::poll`]
//! lists every kind that still has a workload whose rollout is not final — one paged list per
//! kind, never a request per workload — and classifies each workload from its listed object.
//! A workload whose rollout has just stalled has its pods read once (one list by its
//! selector, one page) for the reason its containers give (`CrashLoopBackOff`,
//! `ImagePullBackOff`, …). Following patches nothing and retries nothing: a failed list leaves
//! the kind's states as they were and is reported; the next poll lists again.

use std::collections::BTreeMap;
use std::time::Duration;

use http::{Method, Request, StatusCode};
use kube::client::Body;
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::failure::TransportFailure;
use rollsafe_core::name::{AnnotationKey, Namespace};
use rollsafe_core::rollout::follow::{Follower, Observation};
use rollsafe_core::rollout::{RolloutState, RolloutStatus};
use rollsafe_core::workload::WorkloadKind;
use serde_json::Value;
use tokio::time::Instant;
use tracing::debug;

use crate::inventory;
use crate::read::ReadError;
use crate::transport::{self, BodyError};

/// How long to wait between two polls of a [`RolloutWatch`] (the CLI's default interval).
pub const FOLLOW_INTERVAL: Duration = Duration::from_secs(2);
/// Objects per page of a follow list.
pub const FOLLOW_PAGE_SIZE: usize = 500;
/// The most pages of one follow list (so at most 10 000 objects of a kind).
pub const FOLLOW_MAX_PAGES: usize = 20;
/// The most bytes of one kind's follow list, all pages.
pub const FOLLOW_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// How long one page of a follow list may take.
pub const FOLLOW_PAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// The most pods read for a stalled workload's reason (one page).
pub const REASON_PODS: usize = 100;
/// The largest body of the pod list read for a reason.
pub const MAX_POD_LIST_BODY: u64 = 8 * 1024 * 1024;

/// One followed workload: its follower and what it said last.
#[derive(Debug, Clone)]
struct Followed {
    follower: Follower,
    status: RolloutStatus,
    /// `spec.selector.matchLabels` as a label selector, from the last listed object.
    selector: Option<String>,
    /// Whether the pods were read for the current stall already.
    reason_read: bool,
}

/// Follows the rollouts of a set of workloads of one namespace.
pub struct RolloutWatch {
    client: kube::Client,
    namespace: Namespace,
    marker_key: String,
    workloads: BTreeMap<WorkloadName, Followed>,
    started: Instant,
}

impl std::fmt::Debug for RolloutWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RolloutWatch")
            .field("namespace", &self.namespace)
            .field("workloads", &self.workloads.len())
            .finish_non_exhaustive()
    }
}

impl RolloutWatch {
    /// Follows `workloads` of `namespace` through `client`: each with the value rollsafe set
    /// on its pod-template annotation `marker_key` (`None`: the first value observed), a
    /// StatefulSet or DaemonSet stalled after `progress_deadline` without progress.
    pub fn new(
        client: kube::Client,
        namespace: Namespace,
        marker_key: &AnnotationKey,
        workloads: impl IntoIterator<Item = (WorkloadName, Option<String>)>,
        progress_deadline: Duration,
    ) -> Self {
        let workloads = workloads
            .into_iter()
            .map(|(workload, marker)| {
                let followed = Followed {
                    follower: Follower::new(workload.kind, marker, progress_deadline),
                    status: RolloutStatus::pending(),
                    selector: None,
                    reason_read: false,
                };
                (workload, followed)
            })
            .collect();
        Self {
            client,
            namespace,
            marker_key: marker_key.as_str().to_owned(),
            workloads,
            started: Instant::now(),
        }
    }

    /// Each workload's status after the last poll (`pending` before the first), by kind then
    /// name.
    pub fn statuses(&self) -> impl Iterator<Item = (&WorkloadName, &RolloutStatus)> {
        self.workloads.iter().map(|(w, f)| (w, &f.status))
    }

    /// Whether every workload's rollout is final.
    pub fn is_done(&self) -> bool {
        self.workloads.values().all(|f| f.status.state.is_final())
    }

    /// Lists each kind that has a workload not final yet and classifies its workloads. A kind
    /// that could not be listed keeps its states; its error is returned with the kind.
    pub async fn poll(&mut self) -> Vec<(WorkloadKind, ReadError)> {
        let mut errors = Vec::new();
        for kind in WorkloadKind::ALL {
            let open = self
                .workloads
                .iter()
                .any(|(w, f)| w.kind == kind && !f.status.state.is_final());
            if !open {
                continue;
            }
            match list_all(&self.client, kind, &self.namespace).await {
                Ok(objects) => self.observe(kind, &objects),
                Err(error) => {
                    debug!(
                        kind = kind.as_str(),
                        code = error.code(),
                        "follow list failed"
                    );
                    errors.push((kind, error));
                }
            }
        }
        self.read_stall_reasons().await;
        errors
    }

    /// Classifies the open workloads of `kind` from `objects`, its listed objects by name.
    fn observe(&mut self, kind: WorkloadKind, objects: &BTreeMap<String, Value>) {
        let now = self.started.elapsed();
        for (workload, followed) in &mut self.workloads {
            if workload.kind != kind || followed.status.state.is_final() {
                continue;
            }
            let object = objects.get(&workload.name);
            let observation = object.map(|o| Observation::of(kind, o, &self.marker_key));
            let mut status = followed.follower.observe(observation, now);
            if status.state == RolloutState::Stalled {
                // Keep a reason read from the pods for this stall.
                if let (Some(new), Some(old)) = (status.reason.as_mut(), &followed.status.reason) {
                    new.pod_reason = new.pod_reason.take().or_else(|| old.pod_reason.clone());
                }
            } else {
                followed.reason_read = false;
            }
            followed.selector = object.and_then(selector);
            followed.status = status;
        }
    }

    /// Reads the pods of each workload that stalled since the last poll, once per stall.
    async fn read_stall_reasons(&mut self) {
        for followed in self.workloads.values_mut() {
            if followed.status.state != RolloutState::Stalled || followed.reason_read {
                continue;
            }
            followed.reason_read = true;
            let Some(selector) = followed.selector.as_deref() else {
                continue;
            };
            let Ok(pods) = list_pods(&self.client, &self.namespace, selector).await else {
                continue;
            };
            if let Some(reason) = followed.status.reason.take() {
                followed.status.reason = Some(reason.with_pods(&pods));
            }
        }
    }
}

/// A workload's `spec.selector.matchLabels` as a label selector (`a=b,c=d`); `None` without
/// one (a selector of expressions only is not followed to its pods).
fn selector(object: &Value) -> Option<String> {
    let labels = object
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)?;
    let parts: Vec<String> = labels
        .iter()
        .filter_map(|(k, v)| Some(format!("{k}={}", v.as_str()?)))
        .collect();
    (!parts.is_empty()).then(|| parts.join(","))
}

/// Every object of `kind` in `namespace`, by name: paged, within the follow budgets.
async fn list_all(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
) -> Result<BTreeMap<String, Value>, ReadError> {
    let mut objects = BTreeMap::new();
    let mut token: Option<String> = None;
    let mut bytes = 0;
    for _ in 0..FOLLOW_MAX_PAGES {
        let path =
            inventory::page_path(kind, namespace.as_str(), FOLLOW_PAGE_SIZE, token.as_deref());
        let body = get(client, &path, FOLLOW_MAX_BYTES.saturating_sub(bytes)).await?;
        bytes += body.len() as u64;
        let mut list: Value = serde_json::from_slice(&body).map_err(|_| ReadError::Decode)?;
        let items = match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => items,
            Some(Value::Null) => Vec::new(),
            _ => return Err(ReadError::Decode),
        };
        for item in items {
            if let Some(name) = item.pointer("/metadata/name").and_then(Value::as_str) {
                objects.insert(name.to_owned(), item);
            }
        }
        token = list
            .pointer("/metadata/continue")
            .and_then(Value::as_str)
            .filter(|t| !t.is_empty())
            .map(str::to_owned);
        if token.is_none() {
            return Ok(objects);
        }
    }
    Err(ReadError::Decode)
}

/// The first page of the pods matching `selector` in `namespace`.
async fn list_pods(
    client: &kube::Client,
    namespace: &Namespace,
    selector: &str,
) -> Result<Vec<Value>, ReadError> {
    let path = format!(
        "/api/v1/namespaces/{namespace}/pods?limit={REASON_PODS}&labelSelector={}",
        transport::encode_query_value(selector)
    );
    let body = get(client, &path, MAX_POD_LIST_BODY).await?;
    let list: Value = serde_json::from_slice(&body).map_err(|_| ReadError::Decode)?;
    match list.get("items") {
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(Value::Null) => Ok(Vec::new()),
        _ => Err(ReadError::Decode),
    }
}

/// One GET within [`FOLLOW_PAGE_TIMEOUT`], its body read within `limit` bytes.
async fn get(client: &kube::Client, path: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
    let request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::empty())
        .map_err(|_| ReadError::Transport(TransportFailure::NotSent))?;
    let read = async {
        let response = transport::send_once(client, request)
            .await
            .map_err(ReadError::Transport)?;
        let status = response.status();
        if status != StatusCode::OK {
            transport::drain(response.into_body()).await;
            return Err(ReadError::Status(status.as_u16()));
        }
        transport::read_limited(response.into_body(), limit)
            .await
            .map_err(|error| match error {
                BodyError::OverLimit { .. } | BodyError::Broken => ReadError::Decode,
            })
    };
    tokio::time::timeout(FOLLOW_PAGE_TIMEOUT, read)
        .await
        .unwrap_or(Err(ReadError::Timeout))
}
