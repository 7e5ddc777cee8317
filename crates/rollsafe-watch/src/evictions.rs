//! The eviction runs the controller started (`rollsafe.dev/strategy: evict`,
//! docs/strategies.md): each on a task of its own, at most [`EVICTION_CONCURRENCY`] at once,
//! the rest queued.
//!
//! A roll by eviction writes the record and the `rollsafe.dev/evicting` mark (the instant the
//! run restarts pods for) on the workload's metadata, never its template; then a run evicts
//! its pods ([`rollsafe_kube::eviction`]). The mark is the run's durable state: a new leader, or
//! this process after a restart, finds it on the workload and continues the run — pods created
//! after the instant count as restarted, so none is evicted twice for one change. When the run
//! ends (complete, stalled, deferred or failed) the mark is removed, tested against the value
//! the run started with, so a newer run's mark stays.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use rollsafe_core::annotations::EVICTING;
use rollsafe_core::name::Namespace;
use rollsafe_core::strategy::eviction_settings_of;
use rollsafe_kube::eviction::{
    EvictionDeadlines, EvictionReport, EvictionRun, EvictionState, workload_target,
};
use rollsafe_kube::read::workload_resource;
use serde_json::json;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::warn;

use crate::annotations::FIELD_MANAGER;
use crate::cache::WorkloadKey;

/// Eviction runs at once; more wait in a queue.
pub const EVICTION_CONCURRENCY: usize = 4;
/// How long removing a run's mark may take.
pub const MARK_REMOVAL_TIMEOUT: Duration = Duration::from_secs(15);
/// How many progress deadlines one run may take in all.
pub const RUN_LIMIT_FACTOR: u32 = 3;

/// A run that ended.
#[derive(Debug, Clone)]
pub struct Ended {
    /// The workload.
    pub key: WorkloadKey,
    /// What the run did.
    pub report: EvictionReport,
    /// From its start to its end.
    pub elapsed: Duration,
}

/// The runs in progress and waiting.
pub struct Evictions {
    running: JoinSet<Ended>,
    keys: HashSet<WorkloadKey>,
    queued: VecDeque<(WorkloadKey, Timestamp)>,
    deadlines: EvictionDeadlines,
}

impl Evictions {
    /// No runs; each run's replacement pods may take `progress_deadline` to become Ready.
    pub fn new(progress_deadline: Duration) -> Self {
        Self {
            running: JoinSet::new(),
            keys: HashSet::new(),
            queued: VecDeque::new(),
            deadlines: EvictionDeadlines {
                progress: progress_deadline,
                disruption_budget: progress_deadline,
                whole: progress_deadline * RUN_LIMIT_FACTOR,
            },
        }
    }

    /// Whether `key` has a run in progress or queued.
    pub fn has(&self, key: &WorkloadKey) -> bool {
        self.keys.contains(key)
    }

    /// Runs in progress or queued.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.running.is_empty()
    }

    /// Starts (or queues) the run of `key` for `since`, through `client`; nothing when it has
    /// one already (a run continues what an earlier one began: same mark, same pods).
    pub fn start(&mut self, client: &kube::Client, key: &WorkloadKey, since: Timestamp) {
        if !self.keys.insert(key.clone()) {
            return;
        }
        if self.running.len() >= EVICTION_CONCURRENCY {
            self.queued.push_back((key.clone(), since));
            return;
        }
        self.spawn(client, key.clone(), since);
    }

    fn spawn(&mut self, client: &kube::Client, key: WorkloadKey, since: Timestamp) {
        let client = client.clone();
        let deadlines = self.deadlines;
        self.running.spawn(async move {
            let started = Instant::now();
            let report = run(&client, &key, since, deadlines).await;
            remove_mark(&client, &key, since).await;
            Ended {
                key,
                report,
                elapsed: started.elapsed(),
            }
        });
    }

    /// The next run to end; pending while none runs. Starts a queued one in its place.
    pub async fn ended(&mut self, client: &kube::Client) -> Option<Ended> {
        let ended = match self.running.join_next().await? {
            Ok(ended) => ended,
            // A run task that panicked: its mark stays, and the next look at the workload
            // continues it.
            Err(_) => return None,
        };
        self.keys.remove(&ended.key);
        if let Some((key, since)) = self.queued.pop_front() {
            self.spawn(client, key, since);
        }
        Some(ended)
    }

    /// Forgets a queued run of a workload that is gone (a running one ends on its own).
    pub fn forget(&mut self, key: &WorkloadKey) {
        let before = self.queued.len();
        self.queued.retain(|(queued, _)| queued != key);
        if self.queued.len() != before {
            self.keys.remove(key);
        }
    }
}

/// One run: the workload read for its selector and pacing, then its pods evicted.
async fn run(
    client: &kube::Client,
    key: &WorkloadKey,
    since: Timestamp,
    deadlines: EvictionDeadlines,
) -> EvictionReport {
    let failed = |code: &'static str| EvictionReport {
        target: format!("{}/{}", key.kind.as_str(), key.name),
        state: EvictionState::Failed { code },
        evicted: Vec::new(),
        pods: 0,
    };
    let (Some(kind), Ok(namespace)) = (key.kind.workload(), key.namespace.parse::<Namespace>())
    else {
        return failed("not_evictable");
    };
    let (target, object) = match workload_target(client, kind, &namespace, &key.name).await {
        Ok(found) => found,
        Err(error) => return failed(error.code()),
    };
    let settings = eviction_settings_of(&object).unwrap_or_default();
    EvictionRun::new(client.clone(), namespace, target, since)
        .settings(settings)
        .deadlines(deadlines)
        .run(Instant::now() + deadlines.whole, |_| {})
        .await
}

/// Removes the run's mark, if it still holds `since` (a newer run's mark stays).
async fn remove_mark(client: &kube::Client, key: &WorkloadKey, since: Timestamp) {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &key.namespace, &workload_resource(key.kind));
    let path = format!("/metadata/annotations/{}", EVICTING.replace('/', "~1"));
    let Ok(document) = serde_json::from_value::<json_patch::Patch>(json!([
        {"op": "test", "path": path, "value": rollsafe_core::time::rfc3339_millis(since)},
        {"op": "remove", "path": path},
    ])) else {
        return;
    };
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let removed = tokio::time::timeout(
        MARK_REMOVAL_TIMEOUT,
        api.patch(&key.name, &params, &Patch::Json::<()>(document)),
    )
    .await;
    match removed {
        Ok(Ok(_)) => {}
        // 422: the test failed — a newer run's mark, or none; nothing to remove.
        Ok(Err(kube::Error::Api(status))) if matches!(status.code, 404 | 409 | 422) => {}
        Ok(Err(kube::Error::Api(status))) => {
            warn!(workload = %key, code = status.code, "cannot remove the eviction mark; the next leader continues the run (it finds nothing left to evict)");
        }
        _ => warn!(workload = %key, "removing the eviction mark got no answer"),
    }
}
