//! Restarting consumers by eviction: the pods that consume a Secret, found on demand, and runs
//! that evict them through the Eviction API (`pods/eviction`) the way a node drain does — a
//! PodDisruptionBudget that says "not now" (429) is waited on, each replacement must become
//! Ready before the next eviction, and a replacement that does not stops the run.
//!
//! Pods are never cached: a run lists the pods it restarts (paged, within [`MAX_POD_PAGES`] ×
//! [`POD_PAGE_SIZE`]) at each step and decides from what it reads ([`plan_step`]), so a run
//! started again with the same `since` continues where it stopped and never evicts a pod twice
//! for one change: a pod created after `since` counts as restarted.
//!
//! An eviction is sent once. A refusal by a PodDisruptionBudget is not a failed write: it is
//! the API's "not now", waited on with backoff up to [`EvictionDeadlines::disruption_budget`];
//! any other refusal ends the run. Results carry names, kinds and codes only.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, EvictParams, ListParams};
use kube::core::{Selector, SelectorExt as _};
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::reference;
use rollsafe_core::shown::shown_within;
use rollsafe_core::strategy::{
    EvictionSettings, Owner, PodView, Step, eviction_instant, eviction_settings_of, finished_phase,
    operator_owner, plan_step,
};
use rollsafe_core::workload::WorkloadKind;
use serde::Serialize;
use serde_json::Value;
use thiserror::Error;
use tokio::time::Instant;
use tracing::debug;

/// Pods per page of an eviction run's pod list.
pub const POD_PAGE_SIZE: u32 = 500;
/// The most pages of one pod list (so at most 10 000 pods).
pub const MAX_POD_PAGES: usize = 20;
/// How long one page of a pod list, one PodDisruptionBudget list or one eviction may take.
pub const EVICTION_CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a run waits between two looks at its pods.
pub const EVICTION_POLL: Duration = Duration::from_secs(1);
/// The first wait after a PodDisruptionBudget refused an eviction; it doubles up to
/// [`DISRUPTION_BACKOFF_MAX`].
pub const DISRUPTION_BACKOFF_START: Duration = Duration::from_secs(1);
/// The longest wait between two evictions a PodDisruptionBudget refused.
pub const DISRUPTION_BACKOFF_MAX: Duration = Duration::from_secs(15);

/// How long a run waits on what it does not control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvictionDeadlines {
    /// How long a replacement may take to become Ready (and a run to make any progress).
    pub progress: Duration,
    /// How long a PodDisruptionBudget may keep refusing one eviction.
    pub disruption_budget: Duration,
    /// How long a whole [`run_planned`] may take: the run in progress ends `timed_out` then and
    /// the rest are held back.
    pub whole: Duration,
}

impl Default for EvictionDeadlines {
    fn default() -> Self {
        Self {
            progress: Duration::from_secs(600),
            disruption_budget: Duration::from_secs(600),
            whole: Duration::from_secs(15 * 60),
        }
    }
}

/// Why a run stopped early or could not read what it needs. Fixed messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EvictionError {
    /// 403: the identity may not list pods or create `pods/eviction`.
    #[error("forbidden: the identity may not list or evict these pods")]
    Forbidden,
    /// Another status from the API server.
    #[error("Kubernetes answered HTTP {0}")]
    Http(u16),
    /// No answer within [`EVICTION_CALL_TIMEOUT`], or no connection.
    #[error("no answer from Kubernetes")]
    NoAnswer,
    /// More pods than [`MAX_POD_PAGES`] pages.
    #[error("more pods than one run reads")]
    TooManyPods,
}

impl EvictionError {
    /// The static code of logs, metrics and JSON.
    pub fn code(self) -> &'static str {
        match self {
            EvictionError::Forbidden => "forbidden",
            EvictionError::Http(_) => "http_error",
            EvictionError::NoAnswer => "unavailable",
            EvictionError::TooManyPods => "pod_budget",
        }
    }

    fn of(error: &kube::Error) -> Self {
        match error {
            kube::Error::Api(status) if status.code == 403 => EvictionError::Forbidden,
            kube::Error::Api(status) => EvictionError::Http(status.code),
            _ => EvictionError::NoAnswer,
        }
    }
}

/// A pod that consumes the Secret, as a run and a preview see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumingPod {
    /// The pod.
    pub view: PodView,
    /// Its controlling owner (`None`: a standalone pod).
    pub owner: Option<Owner>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// Which pods a run restarts.
#[derive(Debug, Clone)]
pub enum Selection {
    /// A workload's pods: those its label selector selects.
    Selector(Selector),
    /// Pods controlled by one owner (its uid): pods an operator's resource owns directly.
    Owner(String),
}

/// What a run restarts: a name to show and which pods.
#[derive(Debug, Clone)]
pub struct EvictionTarget {
    /// `Deployment/web`, `Kafka/my-cluster`: shown, never used to select.
    pub shown: String,
    /// Which pods.
    pub selection: Selection,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum EvictionState {
    /// Every consuming pod was started after the change and is Ready.
    Complete,
    /// Not evicted, by rule: the reason says which.
    Deferred {
        /// Why.
        reason: DeferReason,
    },
    /// A replacement did not become Ready, or a PodDisruptionBudget kept refusing, within its
    /// deadline: the rest were not evicted.
    Stalled {
        /// Why.
        #[serde(flatten)]
        reason: StallReason,
    },
    /// The whole run's time ran out first; what was evicted stays evicted.
    TimedOut,
    /// A call failed; what was evicted stays evicted.
    Failed {
        /// The error's code.
        code: &'static str,
    },
}

/// Why pods were not evicted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DeferReason {
    /// One pod, no PodDisruptionBudget protecting it, and no `rollsafe.dev/evict-unprotected`.
    Unprotected,
    /// A pod nothing owns: nothing would recreate it.
    Standalone,
}

impl DeferReason {
    /// The sentence shown.
    pub fn text(self) -> &'static str {
        match self {
            DeferReason::Unprotected => {
                "a single pod no PodDisruptionBudget protects: evicting it means downtime (rollsafe.dev/evict-unprotected: \"true\" accepts it)"
            }
            DeferReason::Standalone => {
                "a standalone pod: nothing would recreate it after an eviction"
            }
        }
    }
}

/// Why a run stalled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum StallReason {
    /// The pods did not come back Ready within the progress deadline.
    NotReady {
        /// The first pod started for the change that is not Ready, if there is one.
        pod: Option<String>,
        /// What its containers say (`CrashLoopBackOff`, …).
        waiting: Option<String>,
    },
    /// A PodDisruptionBudget refused the eviction until its deadline.
    DisruptionBudget {
        /// The pod refused.
        pod: String,
        /// The budget that selects it, when one does.
        budget: Option<String>,
    },
}

impl fmt::Display for StallReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StallReason::NotReady { pod, waiting } => {
                write!(f, "a restarted pod did not become Ready")?;
                if let Some(pod) = pod {
                    write!(f, " (pod/{pod}")?;
                    if let Some(waiting) = waiting {
                        write!(f, ": {waiting}")?;
                    }
                    write!(f, ")")?;
                }
                Ok(())
            }
            StallReason::DisruptionBudget { pod, budget } => match budget {
                Some(budget) => write!(
                    f,
                    "PodDisruptionBudget/{budget} kept refusing the eviction of pod/{pod}"
                ),
                None => write!(f, "the eviction of pod/{pod} kept being refused (HTTP 429)"),
            },
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvictionReport {
    /// What was restarted (`Deployment/web`).
    pub target: String,
    /// How it ended.
    #[serde(flatten)]
    pub state: EvictionState,
    /// The pods evicted, in order.
    pub evicted: Vec<String>,
    /// The consuming pods the run found at its start.
    pub pods: usize,
}

/// What a run reports as it goes (for a live display).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// A pod was evicted.
    Evicted {
        /// The pod.
        pod: String,
    },
    /// A PodDisruptionBudget refused an eviction; the run waits this long.
    Refused {
        /// The pod.
        pod: String,
        /// The wait before the next try.
        retry_in: Duration,
    },
}

/// The pods of a namespace that consume `secret` (by the Restart Consumers reference rules,
/// read from each pod's spec), paged; finished pods (`Succeeded`, `Failed`) are not among them.
pub async fn consuming_pods(
    client: &kube::Client,
    namespace: &Namespace,
    secret: &SecretName,
) -> Result<Vec<ConsumingPod>, EvictionError> {
    list_pods(client, namespace, None, Some(secret)).await
}

fn consuming_pod(pod: &Value) -> Option<ConsumingPod> {
    let labels = pod
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Some(ConsumingPod {
        view: PodView::of(pod)?,
        owner: Owner::controlling(pod),
        labels,
    })
}

/// The pods of `namespace` that may still run (those `selector` selects; those that consume
/// `secret`, when given), all pages, each reduced as its page is read: what is held is one
/// page of pods (at most [`POD_PAGE_SIZE`]) and the reduced ones. A finished pod is left out:
/// a run neither evicts it nor counts it among the workload's pods.
async fn list_pods(
    client: &kube::Client,
    namespace: &Namespace,
    selector: Option<&Selector>,
    secret: Option<&SecretName>,
) -> Result<Vec<ConsumingPod>, EvictionError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace.as_str());
    let mut params = ListParams::default().limit(POD_PAGE_SIZE);
    if let Some(selector) = selector {
        params = params.labels_from(selector);
    }
    let mut pods = Vec::new();
    for _ in 0..MAX_POD_PAGES {
        let page = tokio::time::timeout(EVICTION_CALL_TIMEOUT, api.list(&params))
            .await
            .map_err(|_| EvictionError::NoAnswer)?
            .map_err(|e| EvictionError::of(&e))?;
        for pod in page.items {
            let Ok(value) = serde_json::to_value(pod) else {
                continue;
            };
            // A finished pod runs nothing: it consumes nothing and no run restarts it.
            let consumes = finished_phase(&value).is_none()
                && secret.is_none_or(|secret| reference::consumes_secret(&value, secret.as_str()));
            if consumes && let Some(pod) = consuming_pod(&value) {
                pods.push(pod);
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(pods),
        }
    }
    Err(EvictionError::TooManyPods)
}

/// The PodDisruptionBudgets of a namespace, each with its selector.
async fn disruption_budgets(
    client: &kube::Client,
    namespace: &Namespace,
) -> Result<Vec<(String, Selector)>, EvictionError> {
    let api: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace.as_str());
    let list = tokio::time::timeout(EVICTION_CALL_TIMEOUT, api.list(&ListParams::default()))
        .await
        .map_err(|_| EvictionError::NoAnswer)?
        .map_err(|e| EvictionError::of(&e))?;
    Ok(list
        .items
        .into_iter()
        .filter_map(|budget| {
            let name = budget.metadata.name?;
            // A budget with an empty selector selects nothing (policy/v1).
            let selector = budget.spec?.selector?;
            let selector = Selector::try_from(selector).ok()?;
            (!selector.selects_all()).then_some((name, selector))
        })
        .collect())
}

fn protecting<'b>(
    budgets: &'b [(String, Selector)],
    labels: &BTreeMap<String, String>,
) -> Option<&'b str> {
    budgets
        .iter()
        .find(|(_, selector)| selector.matches(labels))
        .map(|(name, _)| name.as_str())
}

/// One eviction run: the pods of `target` that consume `secret`, restarted for a change at
/// `since`.
pub struct EvictionRun {
    client: kube::Client,
    namespace: Namespace,
    /// Only the pods that consume this Secret (`None`: every pod of the target).
    secret: Option<SecretName>,
    target: EvictionTarget,
    since: Timestamp,
    settings: EvictionSettings,
    deadlines: EvictionDeadlines,
}

impl fmt::Debug for EvictionRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EvictionRun")
            .field("namespace", &self.namespace)
            .field("target", &self.target.shown)
            .field("since", &self.since)
            .finish_non_exhaustive()
    }
}

impl EvictionRun {
    /// A run over `target`'s pods in `namespace`, for a change at `since` (rounded up to a
    /// whole second: [`eviction_instant`]), acting as `client`'s identity.
    pub fn new(
        client: kube::Client,
        namespace: Namespace,
        target: EvictionTarget,
        since: Timestamp,
    ) -> Self {
        Self {
            client,
            namespace,
            secret: None,
            target,
            since: eviction_instant(since),
            settings: EvictionSettings::default(),
            deadlines: EvictionDeadlines::default(),
        }
    }

    /// Restarting only the pods that consume `secret` (the others of the target stay).
    #[must_use]
    pub fn consumers_of(mut self, secret: SecretName) -> Self {
        self.secret = Some(secret);
        self
    }

    /// With these pacing settings (`rollsafe.dev/max-unavailable`, …).
    #[must_use]
    pub fn settings(mut self, settings: EvictionSettings) -> Self {
        self.settings = settings;
        self
    }

    /// With these deadlines.
    #[must_use]
    pub fn deadlines(mut self, deadlines: EvictionDeadlines) -> Self {
        self.deadlines = deadlines;
        self
    }

    async fn pods(&self) -> Result<Vec<ConsumingPod>, EvictionError> {
        let selector = match &self.target.selection {
            Selection::Selector(selector) => Some(selector),
            Selection::Owner(_) => None,
        };
        let pods = list_pods(
            &self.client,
            &self.namespace,
            selector,
            self.secret.as_ref(),
        )
        .await?;
        Ok(pods
            .into_iter()
            .filter(|pod| match &self.target.selection {
                Selection::Selector(_) => true,
                Selection::Owner(uid) => pod.owner.as_ref().is_some_and(|o| &o.uid == uid),
            })
            .collect())
    }

    /// Runs to the end (or to `end`: `timed_out`), telling `progress` what it does.
    pub async fn run(self, end: Instant, mut progress: impl FnMut(&Progress)) -> EvictionReport {
        let mut evicted = Vec::new();
        let mut pods_at_start = 0;
        let drive = self.drive(&mut evicted, &mut pods_at_start, &mut progress);
        let state = match tokio::time::timeout_at(end, drive).await {
            Ok(Ok(state)) => state,
            Ok(Err(error)) => EvictionState::Failed { code: error.code() },
            Err(_) => EvictionState::TimedOut,
        };
        EvictionReport {
            target: self.target.shown.clone(),
            state,
            evicted,
            pods: pods_at_start,
        }
    }

    async fn drive(
        &self,
        evicted: &mut Vec<String>,
        pods_at_start: &mut usize,
        progress: &mut impl FnMut(&Progress),
    ) -> Result<EvictionState, EvictionError> {
        // Creation times have whole seconds: nothing is evicted before `since` (a whole second,
        // [`eviction_instant`]), so every pod an eviction brings is created at or after it.
        if let Ok(ahead) = Duration::try_from(self.since.duration_since(Timestamp::now()))
            && !ahead.is_zero()
        {
            tokio::time::sleep(ahead.min(Duration::from_secs(1))).await;
        }
        let pods = self.pods().await?;
        let expected = pods.iter().filter(|p| !p.view.deleting).count();
        *pods_at_start = expected;
        if pods.iter().any(|p| p.owner.is_none()) {
            return Ok(EvictionState::Deferred {
                reason: DeferReason::Standalone,
            });
        }
        let budgets = disruption_budgets(&self.client, &self.namespace).await?;
        let stale_unprotected = pods
            .iter()
            .any(|p| p.view.is_stale(self.since) && protecting(&budgets, &p.labels).is_none());
        if expected == 1 && stale_unprotected && !self.settings.evict_unprotected {
            return Ok(EvictionState::Deferred {
                reason: DeferReason::Unprotected,
            });
        }
        let mut last_progress = Instant::now();
        let mut best = restarted_and_ready(&pods, self.since);
        let mut pods = pods;
        loop {
            let views: Vec<PodView> = pods.iter().map(|p| p.view.clone()).collect();
            match plan_step(&views, self.since, expected, self.settings.max_unavailable) {
                Step::Complete => return Ok(EvictionState::Complete),
                Step::Wait { .. } => {
                    if last_progress.elapsed() >= self.deadlines.progress {
                        return Ok(EvictionState::Stalled {
                            reason: self.not_ready(&views),
                        });
                    }
                    tokio::time::sleep(EVICTION_POLL).await;
                }
                Step::Evict(names) => {
                    for name in names {
                        match self.evict(&name, &budgets, progress).await? {
                            Evicted::Yes => {
                                progress(&Progress::Evicted { pod: name.clone() });
                                evicted.push(name);
                                last_progress = Instant::now();
                            }
                            Evicted::Gone => last_progress = Instant::now(),
                            Evicted::Refused(reason) => {
                                return Ok(EvictionState::Stalled { reason });
                            }
                        }
                    }
                }
            }
            pods = self.pods().await?;
            let ready = restarted_and_ready(&pods, self.since);
            if ready > best {
                best = ready;
                last_progress = Instant::now();
            }
        }
    }

    /// The stall of pods that did not come back.
    fn not_ready(&self, views: &[PodView]) -> StallReason {
        let waiting = views
            .iter()
            .find(|p| !p.ready && !p.deleting && !p.is_stale(self.since));
        StallReason::NotReady {
            pod: waiting.map(|p| p.name.clone()),
            waiting: waiting.and_then(|p| p.waiting_reason.clone()),
        }
    }

    /// Evicts one pod, waiting on PodDisruptionBudget refusals up to their deadline.
    async fn evict(
        &self,
        name: &str,
        budgets: &[(String, Selector)],
        progress: &mut impl FnMut(&Progress),
    ) -> Result<Evicted, EvictionError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), self.namespace.as_str());
        let started = Instant::now();
        let mut backoff = DISRUPTION_BACKOFF_START;
        loop {
            let answer = tokio::time::timeout(
                EVICTION_CALL_TIMEOUT,
                api.evict(name, &EvictParams::default()),
            )
            .await
            .map_err(|_| EvictionError::NoAnswer)?;
            match answer {
                Ok(_) => return Ok(Evicted::Yes),
                Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Evicted::Gone),
                Err(kube::Error::Api(status)) if status.code == 429 => {
                    debug!(pod = %shown_within(name, 253), "eviction refused: disruption budget");
                    if started.elapsed() + backoff > self.deadlines.disruption_budget {
                        let labels = self
                            .pods()
                            .await
                            .ok()
                            .and_then(|pods| pods.into_iter().find(|p| p.view.name == name))
                            .map(|p| p.labels)
                            .unwrap_or_default();
                        return Ok(Evicted::Refused(StallReason::DisruptionBudget {
                            pod: name.to_owned(),
                            budget: protecting(budgets, &labels).map(str::to_owned),
                        }));
                    }
                    progress(&Progress::Refused {
                        pod: name.to_owned(),
                        retry_in: backoff,
                    });
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(DISRUPTION_BACKOFF_MAX);
                }
                Err(error) => return Err(EvictionError::of(&error)),
            }
        }
    }
}

/// How many pods started after `since` are Ready: what a run's progress is measured by.
fn restarted_and_ready(pods: &[ConsumingPod], since: Timestamp) -> usize {
    pods.iter()
        .filter(|p| p.view.ready && !p.view.deleting && !p.view.is_stale(since))
        .count()
}

enum Evicted {
    Yes,
    Gone,
    Refused(StallReason),
}

/// One group of consuming pods and how an eviction run would restart them.
#[derive(Debug, Clone)]
pub struct PlannedEviction {
    /// Which pods, and the name shown.
    pub target: EvictionTarget,
    /// The workload that owns them, when a Deployment, StatefulSet or DaemonSet does.
    pub workload: Option<WorkloadName>,
    /// The operator's resource that controls the workload, or the pods directly.
    pub operator_owner: Option<Owner>,
    /// The pacing, from the workload's annotations (else the Secret's, else the defaults).
    pub settings: EvictionSettings,
    /// The consuming pods found.
    pub pods: usize,
    /// Why it will not be evicted, when it will not (a standalone pod).
    pub deferred: Option<DeferReason>,
}

/// The consuming pods of `secret` grouped by what restarts them: the Deployment, StatefulSet
/// or DaemonSet that owns them (through a ReplicaSet for a Deployment), the other owner that
/// controls them directly (an operator's resource), or nothing (standalone pods, deferred).
/// `secret_annotations` are the Secret's, for pacing settings a workload does not give.
pub async fn plan(
    client: &kube::Client,
    namespace: &Namespace,
    secret: &SecretName,
    secret_settings: EvictionSettings,
) -> Result<Vec<PlannedEviction>, EvictionError> {
    let pods = consuming_pods(client, namespace, secret).await?;
    // The owner that restarts each pod: a ReplicaSet's Deployment, else the pod's own owner.
    let mut replica_sets: BTreeMap<String, Option<Owner>> = BTreeMap::new();
    let mut groups: BTreeMap<(String, String), (Owner, usize)> = BTreeMap::new();
    let mut standalone = Vec::new();
    for pod in &pods {
        let Some(owner) = &pod.owner else {
            standalone.push(pod.view.name.clone());
            continue;
        };
        let owner = if owner.group() == "apps" && owner.kind == "ReplicaSet" {
            if !replica_sets.contains_key(&owner.name) {
                let read = replica_set_owner(client, namespace, &owner.name).await?;
                replica_sets.insert(owner.name.clone(), read);
            }
            replica_sets
                .get(&owner.name)
                .cloned()
                .flatten()
                .unwrap_or_else(|| owner.clone())
        } else {
            owner.clone()
        };
        groups
            .entry((owner.kind.clone(), owner.name.clone()))
            .or_insert((owner, 0))
            .1 += 1;
    }
    let mut planned = Vec::new();
    for (owner, count) in groups.into_values() {
        planned.push(plan_group(client, namespace, owner, count, secret_settings).await?);
    }
    for name in standalone {
        planned.push(PlannedEviction {
            target: EvictionTarget {
                shown: format!("Pod/{name}"),
                selection: Selection::Owner(String::new()),
            },
            workload: None,
            operator_owner: None,
            settings: secret_settings,
            pods: 1,
            deferred: Some(DeferReason::Standalone),
        });
    }
    Ok(planned)
}

async fn plan_group(
    client: &kube::Client,
    namespace: &Namespace,
    owner: Owner,
    pods: usize,
    secret_settings: EvictionSettings,
) -> Result<PlannedEviction, EvictionError> {
    let kind = (owner.group() == "apps")
        .then(|| WorkloadKind::from_kind(&owner.kind))
        .flatten();
    let Some(kind) = kind else {
        // Pods an operator's resource (or a bare ReplicaSet, a Job) controls directly.
        return Ok(PlannedEviction {
            target: EvictionTarget {
                shown: owner.to_string(),
                selection: Selection::Owner(owner.uid.clone()),
            },
            workload: None,
            operator_owner: Some(owner).filter(|o| !o.is_kubernetes_controller()),
            settings: secret_settings,
            pods,
            deferred: None,
        });
    };
    let (target, object) = workload_target(client, kind, namespace, &owner.name).await?;
    let settings = if has_eviction_settings(&object) {
        eviction_settings_of(&object).unwrap_or(secret_settings)
    } else {
        secret_settings
    };
    Ok(PlannedEviction {
        target,
        workload: Some(WorkloadName {
            kind,
            name: owner.name.clone(),
        }),
        operator_owner: operator_owner(&object),
        settings,
        pods,
        deferred: None,
    })
}

/// The pods of workload `kind`/`name` (those its `spec.selector` selects), with the workload
/// as listed by name (for its annotations and owner).
pub async fn workload_target(
    client: &kube::Client,
    kind: WorkloadKind,
    namespace: &Namespace,
    name: &str,
) -> Result<(EvictionTarget, Value), EvictionError> {
    // A list by name, not a get: the list is what the controller's RBAC already grants (its
    // watch streams), so the eviction strategy needs no `get` on workloads.
    let resource = crate::read::workload_resource(kind.into());
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), namespace.as_str(), &resource);
    let params = ListParams::default().fields(&format!("metadata.name={name}"));
    let listed = tokio::time::timeout(EVICTION_CALL_TIMEOUT, api.list(&params))
        .await
        .map_err(|_| EvictionError::NoAnswer)?
        .map_err(|e| EvictionError::of(&e))?;
    let object = listed
        .items
        .into_iter()
        .find(|o| o.metadata.name.as_deref() == Some(name))
        .and_then(|o| serde_json::to_value(o).ok())
        .ok_or(EvictionError::Http(404))?;
    let selector = object
        .get("spec")
        .and_then(|s| s.get("selector"))
        .cloned()
        .and_then(|s| serde_json::from_value::<LabelSelector>(s).ok())
        .and_then(|s| Selector::try_from(s).ok())
        .filter(|s| !s.selects_all())
        .ok_or(EvictionError::Http(422))?;
    let target = EvictionTarget {
        shown: format!("{}/{name}", kind.as_str()),
        selection: Selection::Selector(selector),
    };
    Ok((target, object))
}

fn has_eviction_settings(object: &Value) -> bool {
    rollsafe_core::object::annotations(object).is_some_and(|a| {
        a.contains_key(rollsafe_core::annotations::MAX_UNAVAILABLE)
            || a.contains_key(rollsafe_core::annotations::EVICT_UNPROTECTED)
    })
}

/// The controlling owner of ReplicaSet `name` (its Deployment, when it has one).
async fn replica_set_owner(
    client: &kube::Client,
    namespace: &Namespace,
    name: &str,
) -> Result<Option<Owner>, EvictionError> {
    let api: Api<k8s_openapi::api::apps::v1::ReplicaSet> =
        Api::namespaced(client.clone(), namespace.as_str());
    let object = tokio::time::timeout(EVICTION_CALL_TIMEOUT, api.get_opt(name))
        .await
        .map_err(|_| EvictionError::NoAnswer)?
        .map_err(|e| EvictionError::of(&e))?;
    Ok(object
        .and_then(|o| serde_json::to_value(o).ok())
        .and_then(|o| Owner::controlling(&o)))
}

/// What [`run_planned`] did, group by group.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvictionSummary {
    /// The change instant: pods created after it count as restarted (`--since` continues an
    /// interrupted run from here).
    pub since: String,
    /// Each group run (or deferred), in order.
    pub runs: Vec<EvictionReport>,
    /// The groups not started because an earlier one did not complete.
    pub held_back: Vec<String>,
}

impl EvictionSummary {
    /// Whether any run ended in this state's kind.
    pub fn any(&self, pick: impl Fn(&EvictionState) -> bool) -> bool {
        self.runs.iter().any(|r| pick(&r.state))
    }
}

/// Runs `planned` one group after the other, for a change at `since`; a group that does not
/// complete (stalled, failed, timed out) holds back the rest. Deferred groups are reported,
/// not run. `progress` hears each group's name with what its run does.
pub async fn run_planned(
    client: &kube::Client,
    namespace: &Namespace,
    secret: &SecretName,
    planned: Vec<PlannedEviction>,
    since: Timestamp,
    deadlines: EvictionDeadlines,
    mut progress: impl FnMut(&str, &Progress),
) -> EvictionSummary {
    let end = Instant::now() + deadlines.whole;
    let since = eviction_instant(since);
    let mut summary = EvictionSummary {
        since: rollsafe_core::time::rfc3339_millis(since),
        runs: Vec::new(),
        held_back: Vec::new(),
    };
    let mut stopped = false;
    for group in planned {
        if stopped {
            summary.held_back.push(group.target.shown);
            continue;
        }
        if let Some(reason) = group.deferred {
            summary.runs.push(EvictionReport {
                target: group.target.shown,
                state: EvictionState::Deferred { reason },
                evicted: Vec::new(),
                pods: group.pods,
            });
            continue;
        }
        let shown = group.target.shown.clone();
        let report = EvictionRun::new(client.clone(), namespace.clone(), group.target, since)
            .consumers_of(secret.clone())
            .settings(group.settings)
            .deadlines(deadlines)
            .run(end, |p| progress(&shown, p))
            .await;
        stopped = !matches!(
            report.state,
            EvictionState::Complete | EvictionState::Deferred { .. }
        );
        summary.runs.push(report);
    }
    summary
}
