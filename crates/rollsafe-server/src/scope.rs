//! Namespace scope: which namespaces a caller may address.
//!
//! Namespace scope allows only the server's own namespace. Cluster scope allows the namespaces
//! the caller can list (with the caller's identity in impersonation mode), intersected with
//! `KRYPTON_NAMESPACES` when it is set; when listing fails, the allow-list (or else the server's
//! namespace) is used instead. The refusal never lists the allowed namespaces.

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use tracing::warn;

/// Namespace scope, from `KRYPTON_SCOPE` and `KRYPTON_NAMESPACES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Only the server's own namespace.
    Namespace,
    /// Namespaces the caller can list, intersected with the allow-list when it is not empty.
    Cluster {
        /// `KRYPTON_NAMESPACES`; empty means every listable namespace.
        allow_list: Vec<rollsafe_core::name::Namespace>,
    },
}

impl Scope {
    /// The scope's name, as `/api/config` reports it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Scope::Namespace => "namespace",
            Scope::Cluster { .. } => "cluster",
        }
    }
}

/// Page size of the namespace list.
const NAMESPACE_PAGE_SIZE: u32 = 500;
/// The most namespace pages read.
const MAX_NAMESPACE_PAGES: usize = 20;
/// One namespace page's time limit.
const NAMESPACE_PAGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `namespace` is within the scope for this caller. `client` lists the namespaces as
/// the caller; `None` lists nothing (constrained impersonation with an allow-list: the
/// allow-list decides alone, as when the list is refused).
pub async fn allows(
    scope: &Scope,
    server_namespace: &str,
    namespace: &str,
    client: Option<&kube::Client>,
) -> bool {
    match scope {
        Scope::Namespace => namespace == server_namespace,
        Scope::Cluster { allow_list } => {
            if !allow_list.is_empty() && !allow_list.iter().any(|ns| ns == namespace) {
                return false;
            }
            let listed = match client {
                Some(client) => listable(client, namespace).await,
                None => None,
            };
            match listed {
                Some(listed) => listed,
                None if allow_list.is_empty() => namespace == server_namespace,
                None => true,
            }
        }
    }
}

/// The namespaces within the scope for this caller, sorted: what [`allows`] would allow, as a
/// list (for the web page's namespace picker). `client` as for [`allows`].
pub async fn namespaces(
    scope: &Scope,
    server_namespace: &str,
    client: Option<&kube::Client>,
) -> Vec<String> {
    let mut namespaces = match scope {
        Scope::Namespace => vec![server_namespace.to_owned()],
        Scope::Cluster { allow_list } => {
            let mut listed = Vec::new();
            let found = match client {
                Some(client) => {
                    each_namespace(client, |name| {
                        if allow_list.is_empty() || allow_list.iter().any(|ns| ns == name) {
                            listed.push(name.to_owned());
                        }
                        false
                    })
                    .await
                }
                None => None,
            };
            match found {
                Some(_) => listed,
                None if allow_list.is_empty() => vec![server_namespace.to_owned()],
                None => allow_list.iter().map(ToString::to_string).collect(),
            }
        }
    };
    namespaces.sort();
    namespaces.dedup();
    namespaces
}

/// Whether the caller's namespace list contains `namespace`; `None` when listing failed.
async fn listable(client: &kube::Client, namespace: &str) -> Option<bool> {
    each_namespace(client, |name| name == namespace).await
}

/// Walks the caller's namespace list, page by page, until `stop` says so: `Some(true)` when it
/// did, `Some(false)` at the end of the list, `None` when listing failed or ran over its budget.
async fn each_namespace(client: &kube::Client, mut stop: impl FnMut(&str) -> bool) -> Option<bool> {
    let api: Api<Namespace> = Api::all(client.clone());
    let mut params = ListParams::default().limit(NAMESPACE_PAGE_SIZE);
    for _ in 0..MAX_NAMESPACE_PAGES {
        let page =
            match tokio::time::timeout(NAMESPACE_PAGE_TIMEOUT, api.list_metadata(&params)).await {
                Ok(Ok(page)) => page,
                Ok(Err(_)) | Err(_) => {
                    warn!("namespace list failed; falling back to the configured namespaces");
                    return None;
                }
            };
        if page
            .items
            .iter()
            .filter_map(|item| item.metadata.name.as_deref())
            .any(&mut stop)
        {
            return Some(true);
        }
        match page.metadata.continue_.filter(|token| !token.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Some(false),
        }
    }
    warn!("namespace list exceeded its page budget; falling back to the configured namespaces");
    None
}
