//! The Restart Consumers engine: discovery of the three workload kinds, then one
//! optimistic-concurrency JSON Patch per match, then the contract result.
//!
//! ```text
//!   Deployment ─┐
//!   StatefulSet ├─ inventories (concurrent, budgeted) ── all settle ──┐
//!   DaemonSet ──┘                                                     │
//!                     matches of complete kinds, by kind then name ◄──┘
//!                                   │
//!                     restart_patch (core) ── malformed identity → incomplete_list
//!                                   │
//!                     PATCH × n, ≤ MAX_PATCHES_IN_FLIGHT at once, each sent once
//!                                   │
//!                     RestartOutcome (core) → RestartResult
//! ```

use futures::StreamExt;
use http::{Method, Request};
use jiff::Timestamp;
use kube::client::Body;
use rollsafe_core::contract::{RestartOutcome, RestartResult, WorkloadName};
use rollsafe_core::failure::{Failure, TransportFailure};
use rollsafe_core::patch::{self, PatchError};
use rollsafe_core::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use rollsafe_core::workload::WorkloadKind;
use serde_json::Value;
use thiserror::Error;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::connection::{Connection, Impersonation};
use crate::inventory::{self, Budget, Inventory, Match};
use crate::transport::{self, Timeouts};

/// The most patches of one run in flight at once, across all kinds.
pub const MAX_PATCHES_IN_FLIGHT: usize = 4;
/// The annotation set on the pod template to request a rollout.
pub const DEFAULT_ANNOTATION_KEY: &str = "krypton.io/restarted-at";
/// The field manager named on every patch.
pub const FIELD_MANAGER: &str = "rollsafe";
/// The content type of the restart patch.
pub const JSON_PATCH: &str = "application/json-patch+json";

/// Arguments the engine refuses before any request is sent.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RunError {
    /// The namespace is not a DNS-1123 label.
    #[error("invalid namespace name")]
    InvalidNamespace,
    /// The Secret name is not a DNS-1123 subdomain.
    #[error("invalid Secret name")]
    InvalidSecretName,
    /// The annotation key is not a qualified name.
    #[error("invalid annotation key")]
    InvalidAnnotationKey,
}

/// The dry-run result: each kind's inventory and the matches of the complete ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The namespace listed.
    pub namespace: String,
    /// The Secret matched.
    pub secret: String,
    /// One inventory per kind, in kind order (Deployment, StatefulSet, DaemonSet).
    pub inventories: Vec<Inventory>,
}

impl Discovery {
    /// Every match of the complete inventories, by kind then name.
    pub fn matches(&self) -> impl Iterator<Item = &Match> {
        self.inventories.iter().flat_map(Inventory::matches)
    }
}

/// The RFC 3339 UTC timestamp with milliseconds written into the annotation.
pub fn restart_timestamp(now: Timestamp) -> String {
    now.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Runs Restart Consumers over a shared [`Connection`].
#[derive(Debug, Clone)]
pub struct RestartEngine {
    connection: Connection,
    budget: Budget,
    timeouts: Timeouts,
}

impl RestartEngine {
    /// An engine with the contract's budgets and the default timeouts.
    pub fn new(connection: &Connection) -> Self {
        Self {
            connection: connection.clone(),
            budget: Budget::default(),
            timeouts: Timeouts::default(),
        }
    }

    /// Replaces the inventory budget (tests and benchmarks).
    pub fn with_budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// Replaces the timeouts.
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The inventories and matches, patching nothing. Every list page carries `identity`.
    pub async fn discover(
        &self,
        namespace: &str,
        secret: &str,
        identity: Option<&Impersonation>,
    ) -> Result<Discovery, RunError> {
        validate(namespace, secret)?;
        let client = self.connection.client(identity);
        let span = info_span!("discover", namespace, secret);
        Ok(self
            .discover_with(&client, namespace, secret)
            .instrument(span)
            .await)
    }

    /// Discovers, then requests a rollout of every match of the complete inventories with one
    /// JSON Patch each, at most [`MAX_PATCHES_IN_FLIGHT`] at once, and returns the contract
    /// result. Every request carries `identity` and is sent at most once. `now` is the one
    /// timestamp of the run. The same as [`RestartEngine::plan`] then [`RestartEngine::execute`].
    pub async fn run(
        &self,
        namespace: &str,
        secret: &str,
        identity: Option<&Impersonation>,
        annotation_key: &str,
        now: Timestamp,
    ) -> Result<RestartResult, RunError> {
        let plan = self
            .plan(namespace, secret, identity, annotation_key, now)
            .await?;
        Ok(self.execute(plan).await)
    }

    /// The first phase of a run: discovery, settled completely, and the patch planned for every
    /// match of the complete inventories. Nothing is patched. The plan names its targets (for an
    /// intent record made before [`RestartEngine::execute`]); the inspected uid and
    /// resourceVersion each patch will test stay inside it.
    pub async fn plan(
        &self,
        namespace: &str,
        secret: &str,
        identity: Option<&Impersonation>,
        annotation_key: &str,
        now: Timestamp,
    ) -> Result<RestartPlan, RunError> {
        validate(namespace, secret)?;
        if !is_qualified_name(annotation_key) {
            return Err(RunError::InvalidAnnotationKey);
        }
        let client = self.connection.client(identity);
        let span = info_span!("restart_consumers", namespace, secret);
        let discovery = self
            .discover_with(&client, namespace, secret)
            .instrument(span.clone())
            .await;
        let timestamp = restart_timestamp(now);
        let mut outcome = RestartOutcome::new();
        let mut targets = Vec::new();
        let mut unpatchable = Vec::new();
        let mut discovery_failures = Vec::new();
        for inventory in &discovery.inventories {
            if let inventory::InventoryStatus::Incomplete { failure, .. } = inventory.status {
                outcome.discovery_failed(inventory.kind, failure);
                discovery_failures.push((inventory.kind, failure));
            }
            for found in inventory.matches() {
                match patch::restart_patch(&found.object, annotation_key, &timestamp) {
                    Ok(document) => targets.push(PlannedPatch {
                        target: WorkloadName {
                            kind: found.kind,
                            name: found.name.clone(),
                        },
                        document,
                    }),
                    Err(error) => {
                        span.in_scope(|| {
                            warn!(
                                kind = found.kind.as_str(),
                                name = found.name,
                                problem = problem(&error),
                                "match not patched: listed object is malformed"
                            );
                        });
                        outcome.failed(found.kind, &found.name, Failure::incomplete_list(None));
                        unpatchable.push(WorkloadName {
                            kind: found.kind,
                            name: found.name.clone(),
                        });
                    }
                }
            }
        }
        targets.sort_by(|a, b| a.target.cmp(&b.target));
        Ok(RestartPlan {
            namespace: discovery.namespace,
            secret: discovery.secret,
            client,
            targets,
            unpatchable,
            discovery_failures,
            outcome,
            span,
        })
    }

    /// The second phase of a run: sends the plan's patches, each once, at most
    /// [`MAX_PATCHES_IN_FLIGHT`] at once, as the identity the plan was made for, and returns the
    /// contract result (discovery failures and unpatchable matches included).
    pub async fn execute(&self, plan: RestartPlan) -> RestartResult {
        let span = plan.span.clone();
        self.execute_plan(plan).instrument(span).await
    }

    async fn discover_with(
        &self,
        client: &kube::Client,
        namespace: &str,
        secret: &str,
    ) -> Discovery {
        let [deployments, stateful_sets, daemon_sets] = WorkloadKind::ALL.map(|kind| {
            inventory::list_kind(client, kind, namespace, secret, self.budget, self.timeouts)
        });
        let (deployments, stateful_sets, daemon_sets) =
            tokio::join!(deployments, stateful_sets, daemon_sets);
        Discovery {
            namespace: namespace.to_owned(),
            secret: secret.to_owned(),
            inventories: vec![deployments, stateful_sets, daemon_sets],
        }
    }

    async fn execute_plan(&self, plan: RestartPlan) -> RestartResult {
        let RestartPlan {
            namespace,
            client,
            targets,
            mut outcome,
            ..
        } = plan;
        let patch_timeout = self.timeouts.patch;
        // No patch starts after the phase deadline: the run as a whole stays bounded
        // (`Timeouts::max_run`). A match not started by then was never sent: `unavailable`.
        let phase_deadline = tokio::time::Instant::now() + self.timeouts.patch_phase;
        let (client, namespace) = (&client, namespace.as_str());
        // Built eagerly (a Vec, not a lazy iterator adapter) so the run stays `Send` for callers
        // that spawn it. `buffer_unordered` polls each future first when a slot frees up, so the
        // deadline check below runs when the patch would start.
        let sends: Vec<_> = targets
            .into_iter()
            .map(|PlannedPatch { target, document }| async move {
                let WorkloadName { kind, name } = target;
                if tokio::time::Instant::now() >= phase_deadline {
                    warn!(
                        kind = kind.as_str(),
                        name, "patch not started: the patch phase ran out of time"
                    );
                    let never_sent = Failure::from_transport(TransportFailure::NotSent);
                    return (kind, name, Err(never_sent));
                }
                let result =
                    send_patch(client, namespace, kind, &name, &document, patch_timeout).await;
                (kind, name, result)
            })
            .collect();
        let mut results = futures::stream::iter(sends).buffer_unordered(MAX_PATCHES_IN_FLIGHT);
        while let Some((kind, name, result)) = results.next().await {
            match result {
                Ok(()) => outcome.acknowledged(kind, name),
                Err(failure) => outcome.failed(kind, name, failure),
            }
        }
        drop(results);
        let result = outcome.into_result();
        info!(
            status = result.status.as_str(),
            matched = result.matched,
            requested = result.requested.len(),
            failures = result.failures.len(),
            discovery_failures = result.discovery_failures.len(),
            "restart consumers finished"
        );
        result
    }
}

/// The planned patch of one match: the target and the document that tests the inspected uid and
/// resourceVersion (kept private: they never leave the engine).
#[derive(Debug, Clone)]
struct PlannedPatch {
    target: WorkloadName,
    document: Value,
}

/// A run between its two phases: what discovery found and what [`RestartEngine::execute`] will
/// patch. Made by [`RestartEngine::plan`]; it carries the caller's client, so the patches go out
/// as the identity that listed. Its public view holds kinds, names and classified failures
/// only — never uids, resourceVersions or upstream text — so it can be recorded as it is.
pub struct RestartPlan {
    namespace: String,
    secret: String,
    client: kube::Client,
    targets: Vec<PlannedPatch>,
    unpatchable: Vec<WorkloadName>,
    discovery_failures: Vec<(WorkloadKind, Failure)>,
    outcome: RestartOutcome,
    span: tracing::Span,
}

impl RestartPlan {
    /// The namespace listed and patched.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The Secret the matches reference.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The workloads [`RestartEngine::execute`] will send a patch to, by kind then name.
    pub fn targets(&self) -> impl ExactSizeIterator<Item = &WorkloadName> {
        self.targets.iter().map(|planned| &planned.target)
    }

    /// Matches that will not be patched because the listed object was malformed (reported as
    /// `incomplete_list` failures).
    pub fn unpatchable(&self) -> impl ExactSizeIterator<Item = &WorkloadName> {
        self.unpatchable.iter()
    }

    /// The kinds whose inventory failed, with the classified failure; nothing of these kinds is
    /// patched.
    pub fn discovery_failures(&self) -> impl ExactSizeIterator<Item = (WorkloadKind, &Failure)> {
        self.discovery_failures
            .iter()
            .map(|(kind, failure)| (*kind, failure))
    }

    /// Whether executing the plan sends no patch at all.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

impl std::fmt::Debug for RestartPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestartPlan")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .field("targets", &self.targets().collect::<Vec<_>>())
            .field("unpatchable", &self.unpatchable)
            .field("discovery_failures", &self.discovery_failures)
            .finish_non_exhaustive()
    }
}

fn validate(namespace: &str, secret: &str) -> Result<(), RunError> {
    if !is_dns1123_label(namespace) {
        return Err(RunError::InvalidNamespace);
    }
    if !is_dns1123_subdomain(secret) {
        return Err(RunError::InvalidSecretName);
    }
    Ok(())
}

fn problem(error: &PatchError) -> &'static str {
    match error {
        PatchError::MissingUid => "uid",
        PatchError::MissingResourceVersion => "resource_version",
        PatchError::MalformedTemplate => "template",
    }
}

/// Sends one restart patch, once. `Ok` only for a 2xx status line.
async fn send_patch(
    client: &kube::Client,
    namespace: &str,
    kind: WorkloadKind,
    name: &str,
    document: &Value,
    timeout: std::time::Duration,
) -> Result<(), Failure> {
    let path = format!(
        "/apis/apps/v1/namespaces/{namespace}/{}/{name}?fieldManager={FIELD_MANAGER}",
        kind.plural()
    );
    let body = serde_json::to_vec(document)
        .map_err(|_| Failure::from_transport(TransportFailure::NotSent))?;
    let request = Request::builder()
        .method(Method::PATCH)
        .uri(path)
        .header(http::header::CONTENT_TYPE, JSON_PATCH)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(body))
        .map_err(|_| Failure::from_transport(TransportFailure::NotSent))?;
    let sent = tokio::time::timeout(timeout, transport::send_once(client, request)).await;
    let response = match sent {
        Ok(Ok(response)) => response,
        Ok(Err(failure)) => {
            debug!(kind = kind.as_str(), name, ?failure, "patch not answered");
            return Err(Failure::from_transport(failure));
        }
        Err(_) => {
            debug!(kind = kind.as_str(), name, "patch timed out");
            return Err(Failure::from_transport(TransportFailure::AfterSend));
        }
    };
    let status = response.status();
    debug!(
        kind = kind.as_str(),
        name,
        status = status.as_u16(),
        "patch answered"
    );
    // The status line decides; the body is only drained so the connection can be reused.
    let _ = tokio::time::timeout(timeout, transport::drain(response.into_body())).await;
    if status.is_success() {
        Ok(())
    } else {
        Err(Failure::from_status(status.as_u16()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        let now: Timestamp = "2026-11-29T18:00:00.123456789Z".parse().unwrap();
        assert_eq!(restart_timestamp(now), "2026-11-29T18:00:00.123Z");
        let now: Timestamp = "2026-11-29T18:00:00Z".parse().unwrap();
        assert_eq!(restart_timestamp(now), "2026-11-29T18:00:00.000Z");
    }

    #[tokio::test]
    async fn a_refused_patch_is_not_sent() {
        use rollsafe_core::failure::FailureCode;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let connection = Connection::from_config(config).unwrap();
        let client = connection.client(None);
        let document = serde_json::json!([]);
        let failure = send_patch(
            &client,
            "shop",
            WorkloadKind::Deployment,
            "web",
            &document,
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert_eq!(failure.code, FailureCode::Unavailable);
        assert_eq!(failure.http_status, None);
    }

    #[tokio::test]
    async fn a_patch_that_times_out_is_unconfirmed() {
        use rollsafe_core::failure::FailureCode;
        // A server that accepts and reads but never answers.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            drop(socket);
        });
        let config = kube::Config::new(format!("http://127.0.0.1:{port}").parse().unwrap());
        let connection = Connection::from_config(config).unwrap();
        let client = connection.client(None);
        let failure = send_patch(
            &client,
            "shop",
            WorkloadKind::Deployment,
            "web",
            &serde_json::json!([]),
            std::time::Duration::from_millis(200),
        )
        .await
        .unwrap_err();
        assert_eq!(failure.code, FailureCode::Unconfirmed);
        assert_eq!(failure.http_status, None);
        server.abort();
    }

    #[test]
    fn arguments_are_validated() {
        assert_eq!(validate("team-a", "db-creds"), Ok(()));
        assert_eq!(validate("Team", "db"), Err(RunError::InvalidNamespace));
        assert_eq!(validate("a/b", "db"), Err(RunError::InvalidNamespace));
        assert_eq!(validate("team", "../x"), Err(RunError::InvalidSecretName));
    }
}
