//! The controller's startup checks (linkerd's `api_resource_exists`): what only the API server
//! can judge is asked once, before any watch starts, so that a value it refuses is a usage
//! error at startup — one line naming the flag, exit 2 — and never a watch failing over and
//! over; what it serves decides how the watches run.
//!
//! - `--selector`, `--source-selector` and `--namespace-selector`: each sent with the first
//!   request its watch would make (a list, here of one object). A 400 is the flag's refusal.
//! - Streaming lists (`--streaming-lists auto`): served or not, from one request.
//! - `--argo-rollouts`: whether `rollouts.argoproj.io/v1alpha1` is served (not served: a warning,
//!   and Rollouts are not watched).
//!
//! Every check has [`STARTUP_CHECK_TIMEOUT`]; a failure says which check, never the API
//! server's own text.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::WatchedKind;
use thiserror::Error;
use tracing::{info, warn};

use crate::settings::ControllerSettings;
use rollsafe_kube::read::{api_resource, workload_resource};

/// How long each startup check may take.
pub const STARTUP_CHECK_TIMEOUT: Duration = Duration::from_secs(15);

/// A label-selector flag the API server judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorFlag {
    /// `--selector`: the workloads considered.
    Selector,
    /// `--source-selector`: the Secrets and ConfigMaps watched.
    SourceSelector,
    /// `--namespace-selector`: the namespaces watched.
    NamespaceSelector,
}

impl SelectorFlag {
    /// The flag, as typed.
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorFlag::Selector => "--selector",
            SelectorFlag::SourceSelector => "--source-selector",
            SelectorFlag::NamespaceSelector => "--namespace-selector",
        }
    }
}

/// Why the controller does not start.
#[derive(Debug, Error)]
pub enum PreflightError {
    /// The API server refuses the selector (a usage error).
    #[error(
        "{} {value:?} is not a label selector the API server accepts (e.g. app=web,tier in (a,b),!legacy)",
        flag.as_str()
    )]
    SelectorRefused {
        /// The flag.
        flag: SelectorFlag,
        /// Its value, as given.
        value: String,
    },
    /// A check was answered with another error status.
    #[error("cannot check {check}: Kubernetes answered HTTP {status}")]
    Status {
        /// What was being checked.
        check: &'static str,
        /// The HTTP status.
        status: u16,
    },
    /// A check got no answer.
    #[error("cannot check {check}: no response from Kubernetes")]
    NoResponse {
        /// What was being checked.
        check: &'static str,
    },
    /// A check's answer could not be read.
    #[error("cannot check {check}: Kubernetes sent an unreadable answer")]
    Unreadable {
        /// What was being checked.
        check: &'static str,
    },
    /// A check took longer than [`STARTUP_CHECK_TIMEOUT`].
    #[error("cannot check {check}: the API server did not answer in time")]
    TimedOut {
        /// What was being checked.
        check: &'static str,
    },
}

impl PreflightError {
    /// The code of logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            PreflightError::SelectorRefused { .. } => "selector_refused",
            PreflightError::Status { status: 403, .. } => "forbidden",
            PreflightError::Status { .. } => "status",
            PreflightError::NoResponse { .. } => "no_response",
            PreflightError::Unreadable { .. } => "unreadable",
            PreflightError::TimedOut { .. } => "timeout",
        }
    }

    /// Whether it is a usage error (the value given is wrong: exit 2), not the cluster's.
    pub fn is_usage(&self) -> bool {
        matches!(self, PreflightError::SelectorRefused { .. })
    }
}

/// Whether the watches start with streaming lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamingLists {
    /// Streamed when the API server serves it, else paged.
    Auto,
    /// Always paged.
    Off,
}

/// Runs every startup check for `settings`, through `client`, and settles what they decide:
/// `settings.streaming_lists` (with [`StreamingLists::Auto`]) and `settings.argo_rollouts`
/// (cleared when Rollouts are not served).
pub async fn run(
    client: &kube::Client,
    settings: &mut ControllerSettings,
    streaming: StreamingLists,
) -> Result<(), PreflightError> {
    let namespace = settings.namespaces.first().cloned();
    if let Some(selector) = settings.selector.clone() {
        let kind = settings.kinds().next().unwrap_or(WatchedKind::Deployment);
        let api = scoped(client, namespace.as_deref(), &workload_resource(kind));
        check_selector(SelectorFlag::Selector, &api, &selector).await?;
    }
    if let Some(selector) = settings.source_selector.clone() {
        let api = scoped(
            client,
            namespace.as_deref(),
            &api_resource(first_source_kind(settings)),
        );
        check_selector(SelectorFlag::SourceSelector, &api, &selector).await?;
    }
    if let Some(selector) = settings.namespace_selector.clone() {
        let api = Api::all_with(client.clone(), &ApiResource::erase::<Namespace>(&()));
        check_selector(SelectorFlag::NamespaceSelector, &api, &selector).await?;
    }
    if streaming == StreamingLists::Auto {
        settings.streaming_lists = streaming_lists_served(client, settings).await;
    }
    if settings.argo_rollouts && !rollouts_served(client).await? {
        warn!(
            code = "rollouts_not_served",
            "--argo-rollouts: this cluster does not serve rollouts.argoproj.io/v1alpha1; Rollouts are not watched"
        );
        settings.argo_rollouts = false;
    }
    Ok(())
}

fn scoped(
    client: &kube::Client,
    namespace: Option<&str>,
    resource: &ApiResource,
) -> Api<DynamicObject> {
    match namespace {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        None => Api::all_with(client.clone(), resource),
    }
}

/// The kind of source a startup check asks about: Secrets, unless they are not watched.
fn first_source_kind(settings: &ControllerSettings) -> TargetKind {
    if settings.ignore_kinds.contains(&TargetKind::Secret) {
        TargetKind::ConfigMap
    } else {
        TargetKind::Secret
    }
}

/// Lists one object of `api` with `selector`: the API server's refusal (400) is the flag's.
async fn check_selector(
    flag: SelectorFlag,
    api: &Api<DynamicObject>,
    selector: &str,
) -> Result<(), PreflightError> {
    let params = ListParams::default().labels(selector).limit(1);
    let check = flag.as_str();
    match tokio::time::timeout(STARTUP_CHECK_TIMEOUT, api.list_metadata(&params)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(kube::Error::Api(status))) if status.code == 400 => {
            Err(PreflightError::SelectorRefused {
                flag,
                value: selector.to_owned(),
            })
        }
        Ok(Err(kube::Error::Api(status))) => Err(PreflightError::Status {
            check,
            status: status.code,
        }),
        Ok(Err(_)) => Err(PreflightError::NoResponse { check }),
        Err(_) => Err(PreflightError::TimedOut { check }),
    }
}

/// Whether the watches can start with streaming lists: one check against the kind of source
/// watched first, in the first watched namespace. A failed check is logged once and the
/// watches page their lists, as they always could.
async fn streaming_lists_served(client: &kube::Client, settings: &ControllerSettings) -> bool {
    let served = rollsafe_kube::read::serves_streaming_lists(
        client,
        first_source_kind(settings),
        settings.namespaces.first().map(String::as_str),
        STARTUP_CHECK_TIMEOUT,
    )
    .await;
    match served {
        Ok(true) => {
            info!("the API server serves streaming lists: each watch starts with one");
            true
        }
        Ok(false) => {
            info!(
                "the API server does not serve streaming lists: each watch starts with a paged list"
            );
            false
        }
        Err(error) => {
            warn!(
                code = error.code(),
                "cannot check whether the API server serves streaming lists: each watch starts with a paged list"
            );
            false
        }
    }
}

/// Whether the API server serves Argo Rollouts (`rollouts` in the discovery document of
/// `argoproj.io/v1alpha1`).
async fn rollouts_served(client: &kube::Client) -> Result<bool, PreflightError> {
    let kind = WatchedKind::Rollout;
    let check = "--argo-rollouts";
    rollsafe_kube::read::serves(
        client,
        kind.api_version(),
        kind.plural(),
        STARTUP_CHECK_TIMEOUT,
    )
    .await
    .map_err(|error| match error {
        rollsafe_kube::read::ReadError::Status(status) => PreflightError::Status { check, status },
        rollsafe_kube::read::ReadError::Timeout => PreflightError::TimedOut { check },
        rollsafe_kube::read::ReadError::Decode => PreflightError::Unreadable { check },
        rollsafe_kube::read::ReadError::Transport(_) => PreflightError::NoResponse { check },
    })
}
