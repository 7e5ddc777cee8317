//! The Restart Consumers engine: discovery of the three workload kinds, then one
//! optimistic-concurrency JSON Patch per match, then the contract result.
//!
//! ```text
//!   Deployment ─┐
//!   StatefulSet ├─ inventories (concurrent, budgeted) ── all settle ──┐
//!   DaemonSet ──┘                                                     │
//!                     matches of complete kinds, by kind then name ◄──┘
//!                                   │
//!                     RestartPatch::inspect (core) ── malformed identity → incomplete_list
//!                     pending::Hold::of (core) ── a roll `rollsafe watch` holds, settled by
//!                                   │             the same patch (document_settling)
//!                     RestartPlan  ◄── RestartEngine::plan returns here: nothing patched yet
//!                                   │
//!                     PATCH × n, ≤ MAX_PATCHES_IN_FLIGHT at once, each sent once,
//!                     each answer checked for our annotation value and a new resourceVersion
//!                                   │
//!                     RestartOutcome (core) → RestartResult
//! ```
//!
//! A run has two phases so that a caller can record what it is about to do between them:
//! [`RestartEngine::plan`] (discovery, settled, and the planned patches) and
//! [`RestartEngine::execute`] (the patches). [`RestartEngine::run`] composes the two. Every
//! argument is a validated name, so a run cannot fail: every problem is a classified entry of
//! its result.
//!
//! A match whose roll `rollsafe watch` holds (a restart window, an approval: its
//! `rollsafe.dev/pending` mark) is restarted with the hold settled in the same patch — the
//! record set to the held digest, the mark and any approval removed, as the controller's own
//! roll does ([`rollsafe_core::pending`]) — so the controller never rolls that content again.
//! Every front end (the API, the page, `rollsafe restart-consumers`, the progressive runner)
//! goes through [`RestartEngine::execute`] and gets it; the result is the contract's, unchanged.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use http::{Method, Request};
use jiff::Timestamp;
use kube::client::Body;
use rollsafe_core::annotations::ROLLOUT_WAVE;
use rollsafe_core::contract::{RestartOutcome, RestartResult, WorkloadName};
use rollsafe_core::failure::{Failure, FailureCode, TransportFailure};
use rollsafe_core::name::{AnnotationKey, Namespace, SecretName};
use rollsafe_core::patch::{Preconditions, RestartPatch};
use rollsafe_core::pending::Hold;
use rollsafe_core::preview::{Consumer, ConsumersPreview, InventoryState};
use rollsafe_core::rollout::waves::WavePlan;
use rollsafe_core::rollout::{ConsumersRollout, WorkloadRollout};
use rollsafe_core::workload::{Deferral, WorkloadKind};
use serde_json::Value;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::connection::{Connection, Impersonation};
use crate::inventory::{self, Budget, Inventory, InventoryStatus, Match};
use crate::transport::{self, BodyError, MAX_OBJECT_BODY, Timeouts};

/// The most patches of one run in flight at once, across all kinds.
pub const MAX_PATCHES_IN_FLIGHT: usize = 4;
/// The field manager named on every patch.
pub const FIELD_MANAGER: &str = "rollsafe";
/// The content type of the restart patch.
pub const JSON_PATCH: &str = "application/json-patch+json";

/// The annotation value of one request: its RFC 3339 UTC timestamp with milliseconds
/// (`2026-11-29T18:00:00.123Z`), strictly later than the value of every earlier call in this
/// process. Two requests in the same millisecond therefore write different values (the second
/// one a millisecond later), so each patch that is applied changes the object and requests a
/// rollout instead of being a no-op; the value stays a plain timestamp for every reader.
pub fn restart_value(now: Timestamp) -> String {
    static LAST_MILLISECOND: AtomicI64 = AtomicI64::new(i64::MIN);
    let wanted = now.as_millisecond();
    let previous = LAST_MILLISECOND
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |last| {
            Some(wanted.max(last.saturating_add(1)))
        })
        .unwrap_or_else(|last| last);
    let unique = wanted.max(previous.saturating_add(1));
    let at = Timestamp::from_millisecond(unique).unwrap_or(now);
    rollsafe_core::time::rfc3339_millis(at)
}

/// What to restart, as whom: the input of [`RestartEngine::plan`] and [`RestartEngine::run`].
#[derive(Debug, Clone)]
pub struct RestartRequest {
    /// The namespace whose workloads are listed and patched.
    pub namespace: Namespace,
    /// The Secret the workloads must reference.
    pub secret: SecretName,
    /// The pod-template annotation set by the patch.
    pub annotation: AnnotationKey,
    /// The value written into it, unique per request ([`restart_value`]).
    pub value: String,
    /// The caller every list and patch acts as; `None` for the server's own identity.
    pub identity: Option<Impersonation>,
}

impl RestartRequest {
    /// A request for the consumers of `secret` in `namespace`, as the server itself, with the
    /// contract's annotation and a value for now.
    pub fn new(namespace: Namespace, secret: SecretName) -> Self {
        Self {
            namespace,
            secret,
            annotation: AnnotationKey::restarted_at(),
            value: restart_value(Timestamp::now()),
            identity: None,
        }
    }

    /// Acts as `identity` (impersonation), or as the server itself for `None`.
    pub fn acting_as(mut self, identity: Option<Impersonation>) -> Self {
        self.identity = identity;
        self
    }

    /// Sets another annotation key.
    pub fn annotation(mut self, annotation: AnnotationKey) -> Self {
        self.annotation = annotation;
        self
    }

    /// The value for exactly the time `now` (for callers that choose the time, such as
    /// tests; [`RestartRequest::new`] takes the clock through [`restart_value`]).
    pub fn at(mut self, now: Timestamp) -> Self {
        self.value = rollsafe_core::time::rfc3339_millis(now);
        self
    }
}

/// The dry-run result: each kind's inventory and the matches of the complete ones.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovery {
    /// The namespace listed.
    pub namespace: Namespace,
    /// The Secret matched.
    pub secret: SecretName,
    /// One inventory per kind, in kind order (Deployment, StatefulSet, DaemonSet).
    pub inventories: Vec<Inventory>,
}

impl Discovery {
    /// Every match of the complete inventories, by kind then name.
    pub fn matches(&self) -> impl Iterator<Item = &Match> {
        self.inventories.iter().flat_map(Inventory::matches)
    }

    /// Each kind's inventory state, as the preview and the rollout view give it.
    pub fn inventory_states(&self) -> BTreeMap<WorkloadKind, InventoryState> {
        self.inventories
            .iter()
            .map(|inventory| {
                let state = match &inventory.status {
                    InventoryStatus::Complete { .. } => InventoryState::complete(),
                    InventoryStatus::Incomplete { failure, .. } => {
                        InventoryState::incomplete(*failure)
                    }
                };
                (inventory.kind, state)
            })
            .collect()
    }

    /// The consumers preview: every match with its references and whether a restart would
    /// roll it now, and each kind's inventory state.
    pub fn preview(&self) -> ConsumersPreview {
        ConsumersPreview {
            namespace: self.namespace.to_string(),
            secret: self.secret.to_string(),
            inventories: self.inventory_states(),
            workloads: self
                .matches()
                .map(|m| {
                    Consumer::new(
                        m.kind,
                        m.name.clone(),
                        self.secret.as_str(),
                        m.references.clone(),
                        &m.object,
                    )
                })
                .collect(),
            pod_consumers: None,
        }
    }

    /// The rollout state of every match, read from the listed objects, whose restart
    /// annotation is `annotation`, and each kind's inventory state: the rollout route's
    /// answer. No uid, resourceVersion or Secret value is in it.
    pub fn rollout(&self, annotation: &AnnotationKey) -> ConsumersRollout {
        ConsumersRollout {
            namespace: self.namespace.to_string(),
            secret: self.secret.to_string(),
            inventories: self.inventory_states(),
            workloads: self
                .matches()
                .map(|m| {
                    WorkloadRollout::of(m.kind, m.name.clone(), &m.object, annotation.as_str())
                })
                .collect(),
        }
    }
}

/// Timings and outcomes of a run, reported as they happen (for latency histograms). Every
/// method has an empty default.
pub trait RunObserver: fmt::Debug + Send + Sync {
    /// One kind's inventory settled after `elapsed`.
    fn inventory(&self, _kind: WorkloadKind, _elapsed: Duration, _complete: bool) {}
    /// One patch was answered, failed or timed out after `elapsed` (never called for a patch
    /// that was not started).
    fn patch(&self, _kind: WorkloadKind, _elapsed: Duration, _outcome: PatchOutcome) {}
    /// A run finished, `elapsed` after its plan started.
    fn run(&self, _elapsed: Duration) {}
}

/// How a sent patch ended, for a [`RunObserver`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchOutcome {
    /// Acknowledged and confirmed by the patched object.
    Acknowledged,
    /// Not acknowledged, or not confirmed, with this code (a timeout is [`PatchOutcome::TimedOut`]).
    Failed(FailureCode),
    /// No answer within the patch timeout (reported as `unconfirmed`).
    TimedOut,
}

#[derive(Debug)]
struct NoObserver;

impl RunObserver for NoObserver {}

/// Runs Restart Consumers over a shared [`Connection`].
#[derive(Debug, Clone)]
pub struct RestartEngine {
    connection: Connection,
    budget: Budget,
    timeouts: Timeouts,
    observer: Arc<dyn RunObserver>,
}

impl RestartEngine {
    /// An engine with the contract's budgets and the default timeouts.
    pub fn new(connection: &Connection) -> Self {
        Self {
            connection: connection.clone(),
            budget: Budget::default(),
            timeouts: Timeouts::default(),
            observer: Arc::new(NoObserver),
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

    /// Reports timings and outcomes to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// The timeouts this engine was configured with; callers that must agree with them (a
    /// preflight read, a shutdown grace) read them here.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The inventories and matches, patching nothing. Every list page carries `identity`.
    pub async fn discover(
        &self,
        namespace: &Namespace,
        secret: &SecretName,
        identity: Option<&Impersonation>,
    ) -> Discovery {
        let client = self.connection.client(identity);
        let span = info_span!("discover", %namespace, %secret);
        self.discover_with(&client, namespace, secret)
            .instrument(span)
            .await
    }

    /// Discovers, then requests a rollout of every match of the complete inventories with one
    /// JSON Patch each, at most [`MAX_PATCHES_IN_FLIGHT`] at once, and returns the contract
    /// result. Every request carries the request's identity and is sent at most once. The same
    /// as [`RestartEngine::plan`] then [`RestartEngine::execute`].
    pub async fn run(&self, request: &RestartRequest) -> RestartResult {
        let plan = self.plan(request).await;
        self.execute(plan).await
    }

    /// The first phase of a run: discovery, settled completely, and the patch planned for every
    /// match of the complete inventories. Nothing is patched. The plan names its targets (for an
    /// intent record made before [`RestartEngine::execute`]); the inspected uid and
    /// resourceVersion each patch will test stay inside it.
    pub async fn plan(&self, request: &RestartRequest) -> RestartPlan {
        let started = Instant::now();
        let RestartRequest {
            namespace,
            secret,
            annotation,
            value,
            identity,
        } = request;
        let client = self.connection.client(identity.as_ref());
        let span = info_span!("restart_consumers", %namespace, %secret);
        let discovery = self
            .discover_with(&client, namespace, secret)
            .instrument(span.clone())
            .await;
        let mut targets = Vec::new();
        let mut unpatchable = Vec::new();
        let mut discovery_failures = Vec::new();
        let mut waves = BTreeMap::new();
        for inventory in &discovery.inventories {
            if let InventoryStatus::Incomplete { failure, .. } = inventory.status {
                discovery_failures.push((inventory.kind, failure));
            }
            for found in inventory.matches() {
                let target = WorkloadName {
                    kind: found.kind,
                    name: found.name.clone(),
                };
                let wave = found
                    .object
                    .pointer("/metadata/annotations")
                    .and_then(|a| a.get(ROLLOUT_WAVE))
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                waves.insert(target.clone(), wave);
                match RestartPatch::inspect(&found.object) {
                    Ok(patch) => targets.push(PlannedPatch {
                        target,
                        patch,
                        deferral: Deferral::of(found.kind, &found.object),
                        hold: Hold::of(&found.object),
                    }),
                    Err(error) => {
                        span.in_scope(|| {
                            warn!(
                                kind = found.kind.as_str(),
                                name = found.name,
                                problem = error.code(),
                                "match not patched: listed object is malformed"
                            );
                        });
                        unpatchable.push(target);
                    }
                }
            }
        }
        targets.sort_by(|a, b| a.target.cmp(&b.target));
        let outcome = planned_outcome(&discovery_failures, &unpatchable);
        RestartPlan {
            namespace: namespace.clone(),
            secret: secret.clone(),
            annotation: annotation.clone(),
            value: value.clone(),
            client,
            targets,
            unpatchable,
            discovery_failures,
            waves,
            outcome,
            span,
            started,
        }
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
        namespace: &Namespace,
        secret: &SecretName,
    ) -> Discovery {
        let observer = &self.observer;
        let [deployments, stateful_sets, daemon_sets] = WorkloadKind::ALL.map(|kind| async move {
            let started = Instant::now();
            let inventory =
                inventory::list_kind(client, kind, namespace, secret, self.budget, self.timeouts)
                    .await;
            observer.inventory(kind, started.elapsed(), inventory.is_complete());
            inventory
        });
        let (deployments, stateful_sets, daemon_sets) =
            tokio::join!(deployments, stateful_sets, daemon_sets);
        Discovery {
            namespace: namespace.clone(),
            secret: secret.clone(),
            inventories: vec![deployments, stateful_sets, daemon_sets],
        }
    }

    async fn execute_plan(&self, plan: RestartPlan) -> RestartResult {
        let RestartPlan {
            namespace,
            annotation,
            value,
            client,
            targets,
            mut outcome,
            started,
            ..
        } = plan;
        let patch_timeout = self.timeouts.patch;
        let observer = &*self.observer;
        let send = |planned: PlannedPatch| {
            let (client, namespace, annotation, value) = (&client, &namespace, &annotation, &value);
            async move {
                let PlannedPatch {
                    target,
                    patch,
                    hold,
                    ..
                } = planned;
                if let Some(hold) = &hold {
                    debug!(
                        kind = target.kind.as_str(),
                        name = target.name,
                        held_by = ?hold.held_by(),
                        "the restart settles the roll rollsafe watch holds"
                    );
                }
                let document = patch.document_settling(annotation, value, hold.as_ref());
                let sent = Instant::now();
                let expected = Expected {
                    annotation,
                    value,
                    preconditions: patch.preconditions(),
                };
                let result = send_patch(
                    client,
                    namespace,
                    &target,
                    &document,
                    &expected,
                    patch_timeout,
                )
                .await;
                let observed = match &result {
                    Ok(()) => PatchOutcome::Acknowledged,
                    Err(SendError::TimedOut) => PatchOutcome::TimedOut,
                    Err(SendError::Failed(failure)) => PatchOutcome::Failed(failure.code),
                };
                observer.patch(target.kind, sent.elapsed(), observed);
                result.map_err(SendError::failure)
            }
        };
        let results = patch_phase(
            targets,
            self.timeouts.patch_phase,
            MAX_PATCHES_IN_FLIGHT,
            send,
        )
        .await;
        for (target, result) in results {
            match result {
                Ok(()) => outcome.acknowledged(target.kind, target.name),
                Err(failure) => outcome.failed(target.kind, target.name, failure),
            }
        }
        let result = outcome.into_result();
        observer.run(started.elapsed());
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

/// The outcome a plan starts from: its kinds whose inventory failed, and its matches that cannot
/// be patched (listed malformed, reported as `incomplete_list`).
fn planned_outcome(
    discovery_failures: &[(WorkloadKind, Failure)],
    unpatchable: &[WorkloadName],
) -> RestartOutcome {
    let mut outcome = RestartOutcome::new();
    for (kind, failure) in discovery_failures {
        outcome.discovery_failed(*kind, *failure);
    }
    for workload in unpatchable {
        outcome.failed(
            workload.kind,
            &workload.name,
            Failure::incomplete_list(None),
        );
    }
    outcome
}

/// The patch phase, generic over how one patch is sent: at most `in_flight` at once; no patch
/// starts after `phase` has elapsed — one not started by then was never sent and is
/// `unavailable`. Results come back in completion order.
async fn patch_phase<F, Fut>(
    targets: Vec<PlannedPatch>,
    phase: Duration,
    in_flight: usize,
    send: F,
) -> Vec<(WorkloadName, Result<(), Failure>)>
where
    F: Fn(PlannedPatch) -> Fut,
    Fut: Future<Output = Result<(), Failure>>,
{
    // No patch starts after the phase deadline: the run as a whole stays bounded
    // (`Timeouts::max_run`).
    let phase_deadline = Instant::now() + phase;
    let send = &send;
    // Built eagerly (a Vec, not a lazy iterator adapter) so the run stays `Send` for callers
    // that spawn it. `buffer_unordered` polls each future first when a slot frees up, so the
    // deadline check below runs when the patch would start.
    let sends: Vec<_> = targets
        .into_iter()
        .map(|planned| async move {
            let target = planned.target.clone();
            if Instant::now() >= phase_deadline {
                warn!(
                    kind = target.kind.as_str(),
                    name = target.name,
                    "patch not started: the patch phase ran out of time"
                );
                let never_sent = Failure::from_transport(TransportFailure::NotSent);
                return (target, Err(never_sent));
            }
            (target, send(planned).await)
        })
        .collect();
    futures::stream::iter(sends)
        .buffer_unordered(in_flight.max(1))
        .collect()
        .await
}

/// The planned patch of one match: the target, and what the patch tests and where it adds the
/// annotation (private: uids and resourceVersions never leave the engine).
#[derive(Debug, Clone)]
struct PlannedPatch {
    target: WorkloadName,
    patch: RestartPatch,
    /// Why its pods would not roll now, as listed.
    deferral: Option<Deferral>,
    /// The roll `rollsafe watch` holds on it, as listed: the patch settles it.
    hold: Option<Hold>,
}

/// A run between its two phases: what discovery found and what [`RestartEngine::execute`] will
/// patch. Made by [`RestartEngine::plan`]; it carries the caller's client, so the patches go out
/// as the identity that listed. Its public view holds kinds, names, classified failures and the
/// annotation value only — never uids, resourceVersions or upstream text — so it can be
/// recorded as it is.
pub struct RestartPlan {
    namespace: Namespace,
    secret: SecretName,
    annotation: AnnotationKey,
    value: String,
    client: kube::Client,
    targets: Vec<PlannedPatch>,
    unpatchable: Vec<WorkloadName>,
    discovery_failures: Vec<(WorkloadKind, Failure)>,
    /// Each match's `rollsafe.dev/rollout-wave`, as listed.
    waves: BTreeMap<WorkloadName, Option<String>>,
    outcome: RestartOutcome,
    span: tracing::Span,
    started: Instant,
}

impl RestartPlan {
    /// The namespace listed and patched.
    pub fn namespace(&self) -> &Namespace {
        &self.namespace
    }

    /// The Secret the matches reference.
    pub fn secret(&self) -> &SecretName {
        &self.secret
    }

    /// The annotation value the patches write (unique to this request).
    pub fn annotation_value(&self) -> &str {
        &self.value
    }

    /// The workloads [`RestartEngine::execute`] will send a patch to, by kind then name.
    pub fn targets(&self) -> impl ExactSizeIterator<Item = &WorkloadName> {
        self.targets.iter().map(|planned| &planned.target)
    }

    /// The targets whose pods will not roll now though their patch is accepted (a paused
    /// Deployment, `OnDelete`, a partition covering every replica), as listed, with why.
    pub fn deferrals(&self) -> impl Iterator<Item = (&WorkloadName, Deferral)> {
        self.targets
            .iter()
            .filter_map(|planned| Some((&planned.target, planned.deferral?)))
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

    /// The waves of a progressive restart of every match (targets and unpatchable ones), from
    /// their `rollsafe.dev/rollout-wave` annotations; without annotations the canary is one
    /// that rolls now.
    pub fn waves(&self) -> WavePlan {
        let rolls = |workload: &WorkloadName| {
            self.targets
                .iter()
                .any(|planned| planned.target == *workload && planned.deferral.is_none())
        };
        WavePlan::new(self.waves.clone()).prefer_canary(rolls)
    }

    /// The plan for the matches `keep` selects only: the other targets are not patched and the
    /// other unpatchable matches not reported. The kinds whose inventory failed stay in it:
    /// what this run could not list, it could not list for any part of it.
    pub fn retain(mut self, keep: impl Fn(&WorkloadName) -> bool) -> Self {
        self.targets.retain(|planned| keep(&planned.target));
        self.unpatchable.retain(|workload| keep(workload));
        self.waves.retain(|workload, _| keep(workload));
        self.outcome = planned_outcome(&self.discovery_failures, &self.unpatchable);
        self
    }

    /// Whether executing the plan sends no patch at all.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }
}

impl fmt::Debug for RestartPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestartPlan")
            .field("namespace", &self.namespace)
            .field("secret", &self.secret)
            .field("targets", &self.targets().collect::<Vec<_>>())
            .field("unpatchable", &self.unpatchable)
            .field("discovery_failures", &self.discovery_failures)
            .finish_non_exhaustive()
    }
}

/// What the answer to a patch must show for the patch to count as `requested`.
struct Expected<'a> {
    annotation: &'a AnnotationKey,
    value: &'a str,
    preconditions: &'a Preconditions,
}

impl Expected<'_> {
    /// Whether `object` (the body of a 2xx answer) is the patched object: it carries our value
    /// and a resourceVersion other than the one the patch tested. A 2xx without such an object
    /// does not show that anything changed.
    fn confirmed_by(&self, object: &Value) -> bool {
        let value = object
            .pointer("/spec/template/metadata/annotations")
            .and_then(|annotations| annotations.get(self.annotation.as_str()))
            .and_then(Value::as_str);
        let resource_version = object
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str);
        value == Some(self.value)
            && resource_version
                .is_some_and(|version| version != self.preconditions.resource_version())
    }
}

/// Why a patch is not `requested`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendError {
    /// Classified: a status, a transport failure, or an answer that does not confirm.
    Failed(Failure),
    /// No answer within the patch timeout: `unconfirmed`, counted apart.
    TimedOut,
}

impl SendError {
    fn failure(self) -> Failure {
        match self {
            SendError::Failed(failure) => failure,
            SendError::TimedOut => Failure::from_transport(TransportFailure::AfterSend),
        }
    }
}

/// Sends one restart patch, once. `Ok` only for a 2xx whose body is the patched object with our
/// annotation value and a new resourceVersion; a 2xx without it is `unconfirmed` with that
/// status.
async fn send_patch(
    client: &kube::Client,
    namespace: &Namespace,
    target: &WorkloadName,
    document: &json_patch::Patch,
    expected: &Expected<'_>,
    timeout: Duration,
) -> Result<(), SendError> {
    let WorkloadName { kind, name } = target;
    let never_sent = SendError::Failed(Failure::from_transport(TransportFailure::NotSent));
    let path = format!(
        "/apis/apps/v1/namespaces/{namespace}/{}/{name}?fieldManager={FIELD_MANAGER}",
        kind.plural()
    );
    let body = serde_json::to_vec(document).map_err(|_| never_sent)?;
    let request = Request::builder()
        .method(Method::PATCH)
        .uri(path)
        .header(http::header::CONTENT_TYPE, JSON_PATCH)
        .header(http::header::ACCEPT, "application/json")
        .body(Body::from(body))
        .map_err(|_| never_sent)?;
    let deadline = Instant::now() + timeout;
    let sent = tokio::time::timeout_at(deadline, transport::send_once(client, request)).await;
    let response = match sent {
        Ok(Ok(response)) => response,
        Ok(Err(failure)) => {
            debug!(kind = kind.as_str(), name, ?failure, "patch not answered");
            return Err(SendError::Failed(Failure::from_transport(failure)));
        }
        Err(_) => {
            debug!(kind = kind.as_str(), name, "patch timed out");
            return Err(SendError::TimedOut);
        }
    };
    let status = response.status();
    debug!(
        kind = kind.as_str(),
        name,
        status = status.as_u16(),
        "patch answered"
    );
    if !status.is_success() {
        // The status line decides; the body is only drained so the connection can be reused.
        let _ = tokio::time::timeout_at(deadline, transport::drain(response.into_body())).await;
        return Err(SendError::Failed(Failure::from_status(status.as_u16())));
    }
    let unconfirmed = SendError::Failed(Failure {
        code: FailureCode::Unconfirmed,
        http_status: Some(status.as_u16()),
    });
    let body = match tokio::time::timeout_at(
        deadline,
        transport::read_limited(response.into_body(), MAX_OBJECT_BODY),
    )
    .await
    {
        Ok(Ok(body)) => body,
        Ok(Err(BodyError::OverLimit { .. } | BodyError::Broken)) => return Err(unconfirmed),
        Err(_) => return Err(SendError::TimedOut),
    };
    let confirmed =
        serde_json::from_slice::<Value>(&body).is_ok_and(|object| expected.confirmed_by(&object));
    if confirmed {
        Ok(())
    } else {
        warn!(
            kind = kind.as_str(),
            name,
            status = status.as_u16(),
            "patch acknowledged without the patched object: reported unconfirmed"
        );
        Err(unconfirmed)
    }
}

#[cfg(test)]
mod tests;
