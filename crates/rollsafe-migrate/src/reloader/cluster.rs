//! Reading the cluster for the migration, with GET requests only: paged lists of the workload
//! kinds (all namespaces, or each `-n`; Argo Rollouts when the cluster serves them), then metadata-only lists
//! (`PartialObjectMetadataList`) of Secrets and ConfigMaps in the namespaces where a workload
//! with Reloader's annotations consumes something — no Secret value crosses the wire.

use std::future::Future;

use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectList};
use rollsafe_core::name::Namespace;
use rollsafe_core::reference::TargetKind;
use rollsafe_kube::read::{self, ReadError};
use rollsafe_kube::transport::LIST_PAGE_TIMEOUT;
use thiserror::Error;

use super::inventory::{Inventory, Kind};

/// Objects per page (`limit`).
const PAGE_SIZE: u32 = 500;
/// The most pages read of one kind in one namespace (or all of them): 100,000 objects.
const MAX_PAGES: usize = 200;

/// A list that could not be read whole. Says what, where, and a fixed cause: never
/// Kubernetes' own text.
#[derive(Debug, Error)]
#[error("cannot list {what} {place}: {cause}")]
pub struct ListError {
    what: &'static str,
    place: String,
    cause: Cause,
}

impl ListError {
    /// A stable code for logs and tests.
    pub fn code(&self) -> &'static str {
        match self.cause {
            Cause::Forbidden => "list_forbidden",
            Cause::Status(_) => "list_status",
            Cause::Transport => "list_transport",
            Cause::Timeout => "list_timeout",
            Cause::Decode => "list_decode",
            Cause::TooMany => "list_too_many",
        }
    }
}

/// Why a list could not be read.
#[derive(Debug, Clone, Copy, Error)]
enum Cause {
    #[error("Kubernetes answered HTTP 403: the identity may not list them (RBAC)")]
    Forbidden,
    #[error("Kubernetes answered HTTP {0}")]
    Status(u16),
    #[error("no response from Kubernetes")]
    Transport,
    #[error("Kubernetes did not answer in time")]
    Timeout,
    #[error("Kubernetes sent a list that cannot be read")]
    Decode,
    #[error("more than {} of them; read fewer namespaces with -n", PAGE_SIZE as usize * MAX_PAGES)]
    TooMany,
}

impl Cause {
    fn of(error: &kube::Error) -> Self {
        match error {
            kube::Error::Api(status) if status.code == 403 => Cause::Forbidden,
            kube::Error::Api(status) => Cause::Status(status.code),
            kube::Error::SerdeError(_) => Cause::Decode,
            _ => Cause::Transport,
        }
    }
}

/// Reads the workloads of `namespaces` (all when empty), keeping those with Reloader's
/// annotations, then the marks of the Secrets and ConfigMaps they need.
pub async fn read(client: &kube::Client, namespaces: &[Namespace]) -> Result<Inventory, ListError> {
    let scopes: Vec<Option<&Namespace>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.iter().map(Some).collect()
    };
    let mut inventory = Inventory::default();
    for kind in Kind::ALL {
        if kind == Kind::Rollout && !rollouts_served(client).await? {
            continue;
        }
        let (what, resource) = workload_resource(kind);
        for scope in &scopes {
            let api = api(client, &resource, *scope);
            let place = place(*scope);
            pages(
                what,
                &place,
                |params| list(&api, params),
                |object| {
                    let object = serde_json::to_value(object).map_err(|_| Cause::Decode)?;
                    inventory.add_workload(kind, object);
                    Ok(())
                },
            )
            .await?;
        }
    }
    for namespace in inventory.namespaces_needing_sources() {
        for (kind, what) in [
            (TargetKind::Secret, "Secrets (metadata)"),
            (TargetKind::ConfigMap, "ConfigMaps (metadata)"),
        ] {
            let resource = read::api_resource(kind);
            let api: Api<DynamicObject> =
                Api::namespaced_with(client.clone(), &namespace, &resource);
            let place = format!("in namespace {namespace}");
            pages(
                what,
                &place,
                |params| list_metadata(&api, params),
                |item| {
                    let metadata = item.metadata;
                    let annotations =
                        serde_json::to_value(metadata.annotations.unwrap_or_default())
                            .map_err(|_| Cause::Decode)?;
                    let name = metadata.name.unwrap_or_default();
                    inventory.add_source(&namespace, kind, &name, annotations.as_object());
                    Ok(())
                },
            )
            .await?;
        }
    }
    Ok(inventory)
}

/// Whether the cluster serves Argo Rollouts (their group's discovery lists `rollouts`).
async fn rollouts_served(client: &kube::Client) -> Result<bool, ListError> {
    let kind = Kind::Rollout;
    read::serves(client, kind.api_version(), kind.plural(), LIST_PAGE_TIMEOUT)
        .await
        .map_err(|error| ListError {
            what: "Rollouts",
            place: "(discovery of argoproj.io/v1alpha1)".to_owned(),
            cause: match error {
                ReadError::Status(403) => Cause::Forbidden,
                ReadError::Status(code) => Cause::Status(code),
                ReadError::Timeout => Cause::Timeout,
                ReadError::Decode => Cause::Decode,
                ReadError::Transport(_) => Cause::Transport,
            },
        })
}

/// What a kind is called in errors, and its resource.
fn workload_resource(kind: Kind) -> (&'static str, ApiResource) {
    let what = match kind {
        Kind::Deployment => "Deployments",
        Kind::StatefulSet => "StatefulSets",
        Kind::DaemonSet => "DaemonSets",
        Kind::CronJob => "CronJobs",
        Kind::Rollout => "Rollouts",
    };
    (what, read::workload_resource(kind))
}

fn api(
    client: &kube::Client,
    resource: &ApiResource,
    scope: Option<&Namespace>,
) -> Api<DynamicObject> {
    match scope {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace.as_str(), resource),
        None => Api::all_with(client.clone(), resource),
    }
}

fn place(scope: Option<&Namespace>) -> String {
    match scope {
        Some(namespace) => format!("in namespace {namespace}"),
        None => "in all namespaces".to_owned(),
    }
}

async fn list(
    api: &Api<DynamicObject>,
    params: ListParams,
) -> Result<ObjectList<DynamicObject>, kube::Error> {
    api.list(&params).await
}

async fn list_metadata(
    api: &Api<DynamicObject>,
    params: ListParams,
) -> Result<ObjectList<kube::core::PartialObjectMeta<DynamicObject>>, kube::Error> {
    api.list_metadata(&params).await
}

/// Reads every page `fetch` returns, `limit`ed and following `continue`, handing each item to
/// `each`; each page within [`LIST_PAGE_TIMEOUT`], at most [`MAX_PAGES`].
async fn pages<T, F, Fut>(
    what: &'static str,
    place: &str,
    fetch: F,
    mut each: impl FnMut(T) -> Result<(), Cause>,
) -> Result<(), ListError>
where
    T: Clone,
    F: Fn(ListParams) -> Fut,
    Fut: Future<Output = Result<ObjectList<T>, kube::Error>>,
{
    let failed = |cause| ListError {
        what,
        place: place.to_owned(),
        cause,
    };
    let mut params = ListParams::default().limit(PAGE_SIZE);
    for _ in 0..MAX_PAGES {
        let page = match tokio::time::timeout(LIST_PAGE_TIMEOUT, fetch(params.clone())).await {
            Ok(Ok(page)) => page,
            Ok(Err(error)) => return Err(failed(Cause::of(&error))),
            Err(_) => return Err(failed(Cause::Timeout)),
        };
        let next = page.metadata.continue_.filter(|token| !token.is_empty());
        for item in page.items {
            each(item).map_err(failed)?;
        }
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
    Err(failed(Cause::TooMany))
}
