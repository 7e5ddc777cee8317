//! The controller loop: kube's watchers (relist on 410, bookmarks, backoff) feed the caches;
//! changes schedule debounced evaluations of the workloads they affect. An evaluation decides
//! without I/O ([`crate::outcome`]) and one apply step carries the outcome out: at most one
//! JSON Patch, never retried blindly, its Event, the counts, a later evaluation, the cache.
//!
//! One task owns the caches: it polls every watch stream and the debounce timer in one
//! `select!`, so there is no lock and events are applied in the order each stream delivers
//! them. Nothing is decided before every stream has finished its first list (`synced`); then
//! every workload is evaluated at once, which is what makes a restart send no patch (the
//! records match) and a change made while the controller was down roll exactly once.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ObjectReference, Secret};
use kube::Resource as _;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::watcher;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::rollout::follow::Observation;
use rollsafe_core::rollout::{DEFAULT_PROGRESS_DEADLINE, RolloutState, classify};
use rollsafe_core::window::RestartWindow;
use rollsafe_core::workload::WatchedKind;
use thiserror::Error;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::annotations::CONFIG_HASH;
use crate::cache::{
    Cache, Listing, Listings, ReloaderNote, SourceEntry, SourceKey, WORKLOAD_REF, Watching,
    WorkloadEntry, WorkloadKey,
};
use crate::debounce::Debouncer;
use crate::digest::Fingerprinter;
use crate::freshness::{self, Activity, Restart};
use crate::leader::Leadership;
use crate::limits::{FlapGuard, FlapLimit, TokenBucket};
use crate::metrics::{ConfirmLabels, ControllerMetrics, ObjectLabels};
use crate::outcome::{Announcement, Evaluator, Outcome, Purpose, SkipReason, Write};
use crate::patches::{Answer, PatchPool, Sent, Unsent, workload_resource};
use crate::progression;
use crate::reduced::{ConfigMaps, Reduced, Secrets, SourceType};
use crate::rollouts::{Finished, Rollouts};
use crate::windows::WallClock;
use crate::workload_object::WorkloadObject;
use rollsafe_notify::{Cause, Notification, Notifier, Outcome as NotifyOutcome};

/// The default debounce window.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(2);
/// How long one patch may take.
pub const PATCH_TIMEOUT: Duration = Duration::from_secs(15);
/// The default global rate: rolls per minute.
pub const DEFAULT_ROLLS_PER_MINUTE: u32 = 60;
/// The default burst.
pub const DEFAULT_BURST: u32 = 10;
/// How long publishing one Event may take.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Events waiting to be published. They are sent by their own task, after the patch they
/// announce and without holding the next one; when this many wait (the events API is slow or
/// down), a further Event is dropped, logged and counted as a failure.
pub const EVENT_QUEUE: usize = 256;
/// The `reportingController` of Events.
pub const REPORTING_CONTROLLER: &str = "rollsafe.dev/watch";

/// Evaluations in one step of the loop: after this many (or once the patch pool is full) it
/// reads the watches again before it takes the next due workload, so that a burst of due
/// workloads (the first list, a new leader) never keeps the watches unread.
pub const EVALUATIONS_PER_STEP: usize = 256;

/// How long after a failed patch (not a conflict) the workload is evaluated again, from the
/// cache as it then is.
pub const FAILURE_RECHECK: Duration = Duration::from_secs(10);
/// Items each watch stream's task may decode ahead of the loop ([`decoded_apart`]).
pub const STREAM_BUFFER: usize = 256;

/// What the controller watches and how it acts.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// Namespaces to watch; empty: all.
    pub namespaces: Vec<String>,
    /// A label selector restricting the workloads considered.
    pub selector: Option<String>,
    /// A label selector restricting the Secrets and ConfigMaps watched (sent to the API
    /// server). An object outside it counts as not watched, like an opted-out one.
    pub source_selector: Option<String>,
    /// A label selector on Namespaces: only the objects of the namespaces it selects are
    /// considered, followed as namespaces gain and lose the labels.
    pub namespace_selector: Option<String>,
    /// Namespaces never watched (a field selector on every watch).
    pub ignore_namespaces: Vec<String>,
    /// Kinds of source never watched: their objects count as not watched.
    pub ignore_kinds: Vec<TargetKind>,
    /// Every workload is opted in unless it says `"false"`.
    pub all: bool,
    /// The per-workload debounce window.
    pub debounce: Duration,
    /// Decide, log and count, never patch.
    pub dry_run: bool,
    /// Computes the digests.
    pub fingerprinter: Fingerprinter,
    /// How long one patch may take.
    pub patch_timeout: Duration,
    /// Rolls per minute across everything watched (0: unlimited).
    pub max_rolls_per_minute: u32,
    /// Rolls allowed at once before the per-minute rate applies.
    pub burst: u32,
    /// First records (adoptions) written per second (0: unpaced); rolls never wait for them
    /// ([`crate::patches`]).
    pub max_adoptions_per_second: u32,
    /// The flap stop.
    pub flap_limit: FlapLimit,
    /// This replica's name in Events (`reportingInstance`); default: the host name.
    pub instance: Option<String>,
    /// The server-side timeout of each watch request, in seconds. When it ends, kube's watcher
    /// resumes from the last resourceVersion it saw (relisting on a 410); a request that
    /// delivers nothing for this long plus five seconds is abandoned and resumed the same way.
    /// A stream silent for [`freshness::stall_bound`] of it is stale.
    pub watch_timeout: u32,
    /// After it rolls a workload, how long a StatefulSet or DaemonSet may go without progress
    /// before its rollout is reported stalled (a Deployment has its own deadline).
    pub progress_deadline: Duration,
    /// `--rollout progressive`: every source's consumers roll in waves, not only those of a
    /// source annotated `rollsafe.dev/rollout: progressive`.
    pub progressive_all: bool,
    /// `--reloader-compat`: Stakater Reloader's annotations opt workloads in and sources out,
    /// with Reloader's meaning (`rollsafe_core::opt_in::reloader`).
    pub reloader_compat: bool,
    /// Argo Rollouts are watched and rolled (`--argo-rollouts`, when the API server serves
    /// `rollouts.argoproj.io`: the caller checks).
    pub argo_rollouts: bool,
    /// `--restart-window`: rolls of workloads whose own annotation and changed objects name no
    /// window happen only while it is open ([`crate::windows`]).
    pub restart_window: Option<RestartWindow>,
    /// The wall clock restart windows are read against.
    pub clock: WallClock,
    /// `--require-approval`: namespaces whose rolls all await approval ([`crate::approval`]).
    pub require_approval: Vec<String>,
    /// Where each outcome is also sent (`--notify-webhook`): every Event this controller
    /// publishes on a workload, as a notification ([`rollsafe_notify`]); `None`: none.
    pub notifier: Option<Notifier>,
    /// `--cluster-name`, named in every notification.
    pub cluster_name: Option<String>,
    /// `--page-url`: the page, linked from every notification.
    pub page_url: Option<String>,
    /// Each watch starts with a streaming list (`sendInitialEvents`: the objects as watch
    /// events, then a bookmark) instead of a paged list; only for an API server that serves
    /// them (the caller checks: `rollsafe_kube::read::serves_streaming_lists`).
    pub streaming_lists: bool,
}

impl ControllerSettings {
    /// The workload kinds watched: Deployments, StatefulSets, DaemonSets and CronJobs, and
    /// Argo Rollouts when [`ControllerSettings::argo_rollouts`].
    pub fn kinds(&self) -> impl Iterator<Item = WatchedKind> + use<> {
        let rollouts = self.argo_rollouts;
        WatchedKind::ALL
            .into_iter()
            .filter(move |kind| *kind != WatchedKind::Rollout || rollouts)
    }
}

impl Default for ControllerSettings {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            selector: None,
            source_selector: None,
            namespace_selector: None,
            ignore_namespaces: Vec::new(),
            ignore_kinds: Vec::new(),
            all: false,
            debounce: DEFAULT_DEBOUNCE,
            dry_run: false,
            fingerprinter: Fingerprinter::unkeyed(),
            patch_timeout: PATCH_TIMEOUT,
            watch_timeout: freshness::WATCH_TIMEOUT_SECONDS,
            max_rolls_per_minute: DEFAULT_ROLLS_PER_MINUTE,
            burst: DEFAULT_BURST,
            max_adoptions_per_second: crate::patches::DEFAULT_ADOPTIONS_PER_SECOND,
            flap_limit: FlapLimit::default(),
            instance: None,
            progress_deadline: DEFAULT_PROGRESS_DEADLINE,
            progressive_all: false,
            reloader_compat: false,
            argo_rollouts: false,
            restart_window: None,
            clock: WallClock::system(),
            require_approval: Vec::new(),
            notifier: None,
            cluster_name: None,
            page_url: None,
            streaming_lists: false,
        }
    }
}

/// Counters and state, published after every step of the loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Every watch has finished its first list.
    pub synced: bool,
    /// Workloads evaluated.
    pub evaluations: u64,
    /// Roll patches acknowledged (deferred ones included).
    pub rolls: u64,
    /// Of those, patched but not rolling now (paused, OnDelete, partition).
    pub deferred: u64,
    /// Adoptions acknowledged (record written, no roll).
    pub adoptions: u64,
    /// Patches refused with 409 or 422 (not retried).
    pub conflicts: u64,
    /// Patches that failed otherwise or timed out.
    pub failures: u64,
    /// Patches not sent because of `--dry-run`.
    pub dry_run: u64,
    /// Work not done yet: evaluations in the debounce queue, adoptions waiting for their pace,
    /// patches in flight (0: idle).
    pub pending: usize,
    /// Adoptions waiting for their pace ([`crate::patches`]).
    pub adoptions_queued: usize,
    /// Cached Secrets and ConfigMaps.
    pub sources: usize,
    /// Cached workloads.
    pub workloads: usize,
    /// Rolls withheld because a consumed object does not exist (new pods could not start;
    /// the running ones keep what they have). The object's return decides.
    pub withheld: u64,
    /// Workloads halted by the flap stop.
    pub halts: u64,
    /// Progressive rolls held at a stalled earlier wave (each workload and content once).
    pub held: u64,
    /// Rolls held by a restart window and marked pending (each workload and content once).
    pub pended: u64,
    /// Workloads whose roll a restart window holds now (not counted in `pending`).
    pub held_by_window: usize,
    /// Rolls postponed by the global rate limit.
    pub rate_limited: u64,
    /// Events published.
    pub events: u64,
    /// Events that could not be published (logged, never retried).
    pub event_failures: u64,
    /// This replica holds the Lease (always `true` without leader election once started).
    pub leader: bool,
    /// Lists started after the first (kube's watcher relisting, e.g. after a 410).
    pub relists: u64,
    /// Watch errors seen (each followed by kube's backoff and relist).
    pub watch_errors: u64,
    /// Watch streams stale now: silent for longer than the stall bound, or found behind a
    /// consistent read and relisting. While any is, nothing is patched and `/readyz` says not
    /// ready.
    pub stale_watches: usize,
    /// Watch responses abandoned before their end (a silent stream given up and resumed, or a
    /// stream restarted).
    pub abandoned_watches: u64,
    /// Consistent reads made to confirm the cache before a roll.
    pub confirmations: u64,
    /// Of those, reads that found the cache behind (the object's watch is relisted; nothing
    /// rolled).
    pub stale_views: u64,
}

/// Why the controller stopped.
#[derive(Debug, Error)]
pub enum ControllerError {
    /// Every watch stream ended (the client was shut down).
    #[error("the watch streams ended")]
    StreamsEnded,
}

impl ControllerError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            ControllerError::StreamsEnded => "streams_ended",
        }
    }
}

/// One watch event, already reduced to a cache entry (the object itself is dropped in the
/// stream, before it reaches the loop).
enum Ev<K, V> {
    Init,
    Page(K, V),
    Done,
    Apply(K, V),
    Delete(K),
    /// An object without a namespace or name (not expected from the API server).
    Skip,
}

enum Item {
    Source(usize, TargetKind, Ev<SourceKey, SourceEntry>),
    Workload(
        usize,
        WatchedKind,
        Ev<WorkloadKey, (WorkloadEntry, Box<Observation>)>,
    ),
    /// The Namespace watch of `--namespace-selector`: names only.
    Namespace(usize, Ev<String, ()>),
    Error,
}

/// The namespaces `--namespace-selector` selects, as the Namespace watch says.
#[derive(Debug, Default)]
struct Selection {
    /// The Namespace watch has listed once. Until then nothing is filtered; the end of its
    /// first list drops what is outside.
    known: bool,
    selected: HashSet<String>,
    /// What the current list has seen so far.
    seen: HashSet<String>,
}

/// Per watch stream: its namespace scope, whether it has listed once, which list it is in (what
/// disappeared while it was not watching is what its last list did not mark); when it last
/// delivered something, and how to start it over.
struct StreamState {
    scope: Option<String>,
    /// The kind of source it watches (`None`: a workload stream).
    source: Option<TargetKind>,
    synced: bool,
    /// Its current list ([`Listing`]): every cache entry it lists or changes is marked with it,
    /// and the end of the list drops the entries of its scope and kind marked otherwise. A mark
    /// in each entry instead of a set of every listed key, which at 100,000 Secrets held
    /// megabytes at the peak of the cold start.
    list: Listing,
    activity: Activity,
    /// Silent for longer than the stall bound at the last check.
    silent: bool,
    /// Found behind a consistent read: restarted, stale until its list is done.
    behind: bool,
    restart: Option<Restart>,
}

impl StreamState {
    fn in_scope(&self, namespace: &str) -> bool {
        self.scope.as_deref().is_none_or(|scope| scope == namespace)
    }

    fn stale(&self) -> bool {
        self.silent || self.behind
    }
}

/// The controller.
pub struct Controller {
    client: kube::Client,
    settings: ControllerSettings,
    cache: Cache,
    debouncer: Debouncer,
    /// Workloads whose roll a restart window holds, by when to look again.
    windows: Debouncer,
    streams: Vec<StreamState>,
    /// Numbers the streams' lists.
    lists: Listings,
    status: Arc<watch::Sender<Status>>,
    /// The Events to publish, in order, by the task [`Controller::run`] starts.
    events: mpsc::Sender<(WorkloadKey, ObjectReference, Event)>,
    /// Its receiving end, until `run` takes it.
    event_queue: Option<mpsc::Receiver<(WorkloadKey, ObjectReference, Event)>>,
    recorder: Recorder,
    bucket: TokenBucket,
    flap: FlapGuard,
    /// Per workload, the sources whose changes it has not rolled for yet (names for Events).
    changed: HashMap<WorkloadKey, BTreeSet<SourceKey>>,
    /// Per workload, when the first change it has not rolled for yet was observed.
    first_change: HashMap<WorkloadKey, Instant>,
    /// Per workload whose roll a window or an approval holds, since when (its first change):
    /// its roll is timed in `held_roll`, not in `reaction`.
    held_since: HashMap<WorkloadKey, Instant>,
    metrics: ControllerMetrics,
    /// Whether, and until when, this replica may patch; `None`: no leader election (always
    /// acts).
    leader: Option<Leadership>,
    /// What the published status last said about leadership (to notice a lapse or a recovery).
    leading: bool,
    /// The rollouts this replica started, followed from the workload watch.
    rollouts: Rollouts,
    /// Rollouts that became final, to announce after the step that saw them.
    finished: Vec<Finished>,
    /// Workloads whose followed rollout stalled (a StatefulSet's or DaemonSet's status cannot
    /// say so), until they roll again or go.
    stalled: HashSet<WorkloadKey>,
    /// Per held workload, the content it was announced held for.
    held: HashMap<WorkloadKey, String>,
    /// Workloads whose Reloader annotations were reported (once each).
    reloader_noted: HashSet<WorkloadKey>,
    /// `--namespace-selector`: the namespaces selected now.
    selection: Option<Selection>,
    /// The index of the Namespace watch among the streams.
    namespace_stream: Option<usize>,
    /// The patches in flight and the adoptions waiting for their pace.
    pool: PatchPool,
    /// Per workload without a record yet, the record it had just before a consumed object
    /// changed (taken from this replica's view before the change is applied): a change made
    /// while its adoption waits rolls it, it is not absorbed into its first record.
    baselines: HashMap<WorkloadKey, String>,
}

impl Controller {
    /// A controller acting through `client`.
    pub fn new(client: kube::Client, settings: ControllerSettings) -> Self {
        let (events, event_queue) = mpsc::channel(EVENT_QUEUE);
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.to_owned(),
            instance: settings.instance.clone(),
        };
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            bucket: TokenBucket::new(
                settings.max_rolls_per_minute,
                settings.burst,
                Instant::now(),
            ),
            flap: FlapGuard::new(settings.flap_limit),
            changed: HashMap::new(),
            first_change: HashMap::new(),
            held_since: HashMap::new(),
            metrics: ControllerMetrics::default(),
            leader: None,
            leading: false,
            rollouts: Rollouts::new(settings.progress_deadline),
            finished: Vec::new(),
            stalled: HashSet::new(),
            held: HashMap::new(),
            reloader_noted: HashSet::new(),
            namespace_stream: None,
            pool: PatchPool::new(settings.max_adoptions_per_second, Instant::now()),
            baselines: HashMap::new(),
            selection: settings
                .namespace_selector
                .as_ref()
                .map(|_| Selection::default()),
            cache: Cache::default().with_unwatched_when_absent(
                [TargetKind::Secret, TargetKind::ConfigMap]
                    .into_iter()
                    .filter(|kind| {
                        settings.source_selector.is_some() || settings.ignore_kinds.contains(kind)
                    })
                    .collect(),
            ),
            client,
            settings,
            debouncer: Debouncer::default(),
            windows: Debouncer::default(),
            streams: Vec::new(),
            lists: Listings::default(),
            status: Arc::new(watch::Sender::new(Status::default())),
            events,
            event_queue: Some(event_queue),
        }
    }

    /// Records into `metrics` (register them on the admin listener's registry).
    pub fn with_metrics(mut self, metrics: ControllerMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    /// Acts (patches) only while `leader` is elected and its Lease surely still held; the
    /// caches stay warm either way, and becoming leader (or confirming the Lease again after a
    /// lapse) evaluates every workload at once. See [`crate::leader`].
    pub fn with_leadership(mut self, leader: Leadership) -> Self {
        self.leader = Some(leader);
        self
    }

    fn is_leader(&self) -> bool {
        self.patch_deadline(Instant::now()).is_some()
    }

    /// When a patch started at `now` must have ended: the configured timeout, cut to what
    /// remains of the Lease; `None`: no patch may be started. The one place that reads whether
    /// this replica may patch.
    fn patch_deadline(&self, now: Instant) -> Option<Instant> {
        let timeout = self.settings.patch_timeout;
        let budget = match &self.leader {
            None => timeout,
            Some(leader) => leader.remaining(now)?.min(timeout),
        };
        Some(now + budget)
    }

    /// A receiver of the published [`Status`].
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.subscribe()
    }

    /// Runs until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), ControllerError> {
        if let Some(queue) = self.event_queue.take() {
            tokio::spawn(publish_events(
                queue,
                self.recorder.clone(),
                Arc::clone(&self.status),
            ));
        }
        let mut streams = self.watch_streams();
        let mut stall_check = tokio::time::interval(freshness::STALL_CHECK);
        stall_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut leadership = self.leader.as_ref().map(Leadership::flag);
        let mut renewals = self.leader.as_ref().map(Leadership::renewals);
        // Whether the last turn evaluated: a turn that finds evaluations already due runs them
        // at once (a timer set for an instant already past fires only at the timer's next
        // tick, up to a millisecond later, on every roll), unless the last turn did — then the
        // due ones wait for the timer and the watches are read in between, so a backlog (every
        // workload due after a restart) never keeps the loop from its streams.
        let mut evaluated = false;
        tokio::pin!(shutdown);
        let leader = self.is_leader();
        self.leading = leader;
        self.count(|s| s.leader = leader);
        info!(
            namespaces = self.settings.namespaces.len(),
            all = self.settings.all,
            dry_run = self.settings.dry_run,
            "watch controller starting"
        );
        loop {
            let synced = self.status.borrow().synced;
            // Due workloads are taken while the pool has room; an answer makes room.
            let room = synced && self.pool.has_room();
            let deadline = [self.debouncer.next_deadline(), self.windows.next_deadline()]
                .into_iter()
                .flatten()
                .min()
                .filter(|_| room);
            let adoption = self
                .pool
                .next_adoption_at(Instant::now())
                .filter(|_| synced);
            // When the Lease would lapse without a confirmed renewal: stop leading then.
            let lapse = self
                .leader
                .as_ref()
                .and_then(Leadership::valid_until)
                .filter(|_| self.leading);
            let eager = !evaluated && deadline.is_some_and(|due| due <= Instant::now());
            evaluated = false;
            let rollout_check = self.rollouts.next_deadline();
            tokio::select! {
                biased;
                () = &mut shutdown => {
                    info!("watch controller stopping");
                    return Ok(());
                }
                sent = self.pool.answered(), if !self.pool.is_empty() => self.answered(sent),
                () = async {
                    if !eager {
                        sleep_until(deadline).await;
                    }
                }, if deadline.is_some() => {
                    self.evaluate_due().await;
                    evaluated = true;
                }
                () = sleep_until(adoption), if adoption.is_some() => {
                    if let Some(key) = self.pool.next_adoption() {
                        self.evaluate(&key).await;
                    }
                }
                changed = leadership_changed(&mut leadership), if leadership.is_some() => {
                    self.leadership_changed(changed);
                }
                () = sleep_until(lapse), if lapse.is_some() => {
                    self.lease_checked();
                }
                () = sleep_until(rollout_check), if rollout_check.is_some() => {
                    let finished = self.rollouts.expire(Instant::now());
                    self.finished.extend(finished);
                }
                _ = stall_check.tick() => self.check_streams(),
                renewed = renewal(&mut renewals), if renewals.is_some() => {
                    if !renewed {
                        renewals = None;
                    }
                    self.lease_checked();
                }
                item = streams.next() => match item {
                    Some(item) => self.handle(item),
                    None => return Err(ControllerError::StreamsEnded),
                },
            }
            self.finish_rollouts().await;
            self.release_spare();
            self.publish();
        }
    }

    /// Gives back the capacity the per-workload change tables grew to in a burst (the first
    /// list records a change for every consumer) once they are empty again.
    fn release_spare(&mut self) {
        const SPARE_CAPACITY: usize = 1024;
        if self.changed.is_empty() && self.changed.capacity() > SPARE_CAPACITY {
            self.changed = HashMap::new();
        }
        if self.first_change.is_empty() && self.first_change.capacity() > SPARE_CAPACITY {
            self.first_change = HashMap::new();
        }
    }

    fn leadership_changed(&mut self, leader: Option<bool>) {
        if leader.is_none() {
            // The lease task ended: act as a follower from now on.
            warn!("the leader election stopped; no further patches");
            let never = Leadership::new(
                watch::channel(false).1,
                watch::channel(None).1,
                Duration::ZERO,
            );
            self.leader = Some(never);
        }
        self.lease_checked();
    }

    /// Re-reads whether this replica may patch (the election's flag, a renewal, or the lapse of
    /// the last one); on gaining that right, evaluates every workload at once.
    fn lease_checked(&mut self) {
        let leader = self.is_leader();
        if leader == self.leading {
            return;
        }
        self.leading = leader;
        self.count(|s| s.leader = leader);
        if !leader {
            warn!("the lease is lost or no longer confirmed: no further patches");
            return;
        }
        info!("holding the lease");
        if self.status.borrow().synced {
            let now = Instant::now();
            self.seed_bucket(now);
            let keys: Vec<WorkloadKey> = self.cache.workload_keys().cloned().collect();
            for key in &keys {
                self.debouncer.schedule(key, now, Duration::ZERO);
            }
        }
    }

    /// Rebuilds the global token bucket from the roll times recorded on every cached workload
    /// (by whichever replica rolled them): a process that starts deciding — the first full
    /// view, or a new leader — does not start with a full bucket the last leader had spent.
    fn seed_bucket(&mut self, now: Instant) {
        let wall = self.settings.clock.now();
        let rolls: Vec<Instant> = self
            .cache
            .workload_keys()
            .filter_map(|key| self.cache.workload(key))
            .flat_map(|entry| entry.rolled_at.instants(wall, now))
            .collect();
        if !rolls.is_empty() {
            debug!(
                rolls = rolls.len(),
                "token bucket seeded from the recorded roll times"
            );
        }
        self.bucket.seed(rolls, now);
    }

    fn publish(&self) {
        let (sources, workloads) = self.cache.len();
        let pending = self.debouncer.len();
        self.metrics.queue_depth.set(pending as i64);
        self.metrics.patches_in_flight.set(self.pool.len() as i64);
        self.metrics
            .adoptions_queued
            .set(self.pool.adoptions_queued() as i64);
        let gauge = |kind| {
            self.metrics
                .objects
                .get_or_create(&ObjectLabels { kind })
                .clone()
        };
        gauge("source").set(sources as i64);
        gauge("workload").set(workloads as i64);
        self.metrics.halted.set(self.cache.halted() as i64);
        let held_by_window = self.windows.len();
        self.metrics.held_by_window.set(held_by_window as i64);
        self.metrics
            .synced
            .set(i64::from(self.status.borrow().synced));
        let adoptions_queued = self.pool.adoptions_queued();
        let pending = pending + adoptions_queued + self.pool.len();
        self.status.send_modify(|status| {
            status.sources = sources;
            status.workloads = workloads;
            status.pending = pending;
            status.adoptions_queued = adoptions_queued;
            status.held_by_window = held_by_window;
        });
    }

    fn count(&self, f: impl FnOnce(&mut Status)) {
        self.status.send_modify(f);
    }

    fn watch_streams(&mut self) -> SelectAll<BoxStream<'static, Item>> {
        let scopes: Vec<Option<String>> = if self.settings.namespaces.is_empty() {
            vec![None]
        } else {
            self.settings.namespaces.iter().cloned().map(Some).collect()
        };
        let mut all = SelectAll::new();
        if let Some(selector) = &self.settings.namespace_selector {
            let config = self.initial_list(
                watcher::Config::default()
                    .timeout(self.settings.watch_timeout)
                    .labels(selector),
            );
            let stream = self.add_stream(&None, None, Api::<Namespace>::all, move |api, id| {
                watcher(api, config.clone())
                    .default_backoff()
                    .map(move |event| match event {
                        Ok(event) => Item::Namespace(
                            id,
                            reduce(event, |o: Namespace| o.metadata.name.map(|name| (name, ()))),
                        ),
                        Err(error) => {
                            warn!(error = %error, "namespace watch error; kube backs off and relists");
                            Item::Error
                        }
                    })
                    .boxed()
            });
            self.namespace_stream = Some(self.streams.len() - 1);
            all.push(stream);
        }
        for scope in scopes {
            if !self.settings.ignore_kinds.contains(&TargetKind::Secret) {
                let stream = self.source_stream::<Secrets>(&scope);
                all.push(stream);
            }
            if !self.settings.ignore_kinds.contains(&TargetKind::ConfigMap) {
                let stream = self.source_stream::<ConfigMaps>(&scope);
                all.push(stream);
            }
            for kind in self.settings.kinds() {
                let resource = workload_resource(kind);
                let mut config = self.watch_config();
                if let Some(selector) = &self.settings.selector {
                    config = config.labels(selector);
                }
                let watching = Watching {
                    all: self.settings.all,
                    reloader_compat: self.settings.reloader_compat,
                };
                let namespace = scope.clone();
                let stream = self.add_stream(
                    &scope,
                    None,
                    move |client| match &namespace {
                        Some(namespace) => {
                            Api::<WorkloadObject>::namespaced_with(client, namespace, &resource)
                        }
                        None => Api::<WorkloadObject>::all_with(client, &resource),
                    },
                    move |api, id| {
                    watcher(api, config.clone())
                        .default_backoff()
                        .map(move |event| match event {
                            Ok(event) => Item::Workload(
                                id,
                                kind,
                                reduce(event, |o| workload(kind, o, watching)),
                            ),
                            Err(error) => {
                                warn!(error = %error, "workload watch error; kube backs off and relists");
                                Item::Error
                            }
                        })
                        .boxed()
                });
                all.push(stream);
            }
        }
        all
    }

    /// The watch of one kind of source in `scope`, decoded straight into digests
    /// ([`Reduced`]).
    fn source_stream<K: SourceType>(&mut self, scope: &Option<String>) -> BoxStream<'static, Item> {
        let mut config = self.watch_config();
        if let Some(selector) = &self.settings.source_selector {
            config = config.labels(selector);
        }
        let compat = self.settings.reloader_compat;
        let kind = K::KIND;
        let namespace = scope.clone();
        self.add_stream(
            scope,
            Some(kind),
            move |client| match &namespace {
                Some(namespace) => Api::<Reduced<K>>::namespaced(client, namespace),
                None => Api::<Reduced<K>>::all(client),
            },
            move |api, id| {
                watcher(api, config.clone())
                    .default_backoff()
                    .map(move |event| match event {
                        Ok(event) => Item::Source(id, kind, reduce(event, |o| source(o, compat))),
                        Err(error) => {
                            warn!(error = %error, "source watch error; kube backs off and relists");
                            Item::Error
                        }
                    })
                    .boxed()
            },
        )
    }

    fn watch_config(&self) -> watcher::Config {
        let config =
            self.initial_list(watcher::Config::default().timeout(self.settings.watch_timeout));
        match ignored_namespaces(&self.settings.ignore_namespaces) {
            Some(fields) => config.fields(&fields),
            None => config,
        }
    }

    /// How a watch lists at its start (and after a 410): streamed when the server serves it.
    fn initial_list(&self, config: watcher::Config) -> watcher::Config {
        if self.settings.streaming_lists {
            config.streaming_lists()
        } else {
            config
        }
    }

    /// Registers one watch stream: its requests go through a client that notes their
    /// deliveries, and it can be started over ([`freshness::restartable`]).
    fn add_stream<K: Clone + Send + Sync + 'static>(
        &mut self,
        scope: &Option<String>,
        source: Option<TargetKind>,
        api: impl FnOnce(kube::Client) -> Api<K>,
        make: impl Fn(Api<K>, usize) -> BoxStream<'static, Item> + Send + 'static,
    ) -> BoxStream<'static, Item> {
        let id = self.streams.len();
        let activity = Activity::new();
        let client = freshness::observed_client(&self.client, &activity);
        let api = api(client);
        let (stream, restart) =
            freshness::restartable(move || decoded_apart(make(api.clone(), id)));
        self.streams.push(StreamState {
            scope: scope.clone(),
            source,
            synced: false,
            list: Listing::NONE,
            activity,
            silent: false,
            behind: false,
            restart: Some(restart),
        });
        stream
    }

    /// Looks at every stream's last delivery: one silent for longer than the stall bound is
    /// stale (kube's watcher has abandoned its silent request by then and watches again; its
    /// answer makes the stream fresh). Publishes the count; when the last stale stream is
    /// fresh again, every workload is evaluated at once (what was not patched meanwhile).
    fn check_streams(&mut self) {
        let now = Instant::now();
        let bound = freshness::stall_bound(self.settings.watch_timeout);
        let was = self.stale_watches();
        let mut abandoned = 0;
        for (id, stream) in self.streams.iter_mut().enumerate() {
            abandoned += stream.activity.abandoned();
            let silent = stream.activity.silent_for(now) > bound;
            if silent && !stream.silent {
                warn!(
                    stream = id,
                    code = "watch_stalled",
                    seconds = bound.as_secs(),
                    "a watch delivered nothing (no event, bookmark or page) for longer than the stall bound; not patching until it is fresh"
                );
                self.metrics.watch_stalls.inc();
            } else if !silent && stream.silent {
                info!(stream = id, "the stalled watch delivers again");
            }
            stream.silent = silent;
        }
        self.count(|s| s.abandoned_watches = abandoned);
        self.freshness_changed(was);
    }

    fn stale_watches(&self) -> usize {
        self.streams.iter().filter(|s| s.stale()).count()
    }

    /// Publishes how many streams are stale; when none is any more (and there were), evaluates
    /// every workload at once.
    fn freshness_changed(&mut self, was: usize) {
        let stale = self.stale_watches();
        self.metrics.stale_watches.set(stale as i64);
        self.count(|s| s.stale_watches = stale);
        if was > 0 && stale == 0 && self.status.borrow().synced {
            info!("every watch is fresh again");
            let now = Instant::now();
            let keys: Vec<WorkloadKey> = self.cache.workload_keys().cloned().collect();
            for key in &keys {
                self.debouncer.schedule(key, now, Duration::ZERO);
            }
        }
    }

    fn handle(&mut self, item: Item) {
        let now = Instant::now();
        let window = self.settings.debounce;
        match item {
            Item::Error => self.count(|s| s.watch_errors += 1),
            Item::Source(id, kind, event) => match event {
                Ev::Skip => {}
                Ev::Init => {
                    self.relisting(id);
                    self.streams[id].list = self.lists.start();
                }
                Ev::Page(key, _) | Ev::Apply(key, _) if !self.selects(&key.namespace) => {}
                Ev::Page(key, mut entry) | Ev::Apply(key, mut entry) => {
                    entry.listed = self.streams[id].list;
                    self.keep_baselines(&key, entry.currency.version);
                    if self.cache.apply_source(key.clone(), entry) {
                        self.schedule_consumers(&key, now, window);
                    }
                }
                Ev::Delete(key) => {
                    if self.cache.delete_source(&key) {
                        self.schedule_consumers(&key, now, window);
                    }
                }
                Ev::Done => {
                    let stream = &self.streams[id];
                    let gone = self.cache.retain_sources(kind, |key, listed| {
                        listed == stream.list || !stream.in_scope(&key.namespace)
                    });
                    for key in gone {
                        self.schedule_consumers(&key, now, window);
                    }
                    self.stream_synced(id);
                    self.caught_up(id);
                }
            },
            Item::Workload(id, kind, event) => match event {
                Ev::Skip => {}
                Ev::Init => {
                    self.relisting(id);
                    self.streams[id].list = self.lists.start();
                }
                Ev::Page(key, _) | Ev::Apply(key, _) if !self.selects(&key.namespace) => {}
                Ev::Page(key, (mut entry, observation))
                | Ev::Apply(key, (mut entry, observation)) => {
                    entry.listed = self.streams[id].list;
                    self.note_reloader(&key, entry.reloader);
                    self.rollout_observed(&key, Some(*observation), now);
                    self.cache.apply_workload(key.clone(), entry);
                    // Before the first full view, its end schedules every workload.
                    if self.status.borrow().synced {
                        self.debouncer.schedule(&key, now, window);
                    }
                }
                Ev::Delete(key) => {
                    self.rollout_observed(&key, None, now);
                    self.forget_workload(&key);
                }
                Ev::Done => {
                    let stream = &self.streams[id];
                    self.cache.retain_workloads(kind, |key, listed| {
                        listed == stream.list || !stream.in_scope(&key.namespace)
                    });
                    self.stream_synced(id);
                    self.caught_up(id);
                }
            },
            Item::Namespace(id, event) => self.namespace_event(id, event),
        }
    }

    /// Whether objects of `namespace` are considered: always without `--namespace-selector`;
    /// with it, once the Namespace watch has listed, only in the namespaces it selects.
    fn selects(&self, namespace: &str) -> bool {
        self.selection
            .as_ref()
            .is_none_or(|selection| !selection.known || selection.selected.contains(namespace))
    }

    /// Follows the selected namespaces. One leaving the selection (or deleted) is forgotten:
    /// its workloads, then its sources, dropped from the cache without a patch. One joining it
    /// starts the Secret, ConfigMap and workload watches over, so that its objects are listed
    /// (stale until those lists are done: nothing is patched from a view being rebuilt); its
    /// workloads are then decided as after a restart (adopted without a record, rolled once if
    /// what they consume changed since their record).
    fn namespace_event(&mut self, id: usize, event: Ev<String, ()>) {
        let Some(selection) = self.selection.as_mut() else {
            return;
        };
        let mut joined = false;
        let mut left = Vec::new();
        let mut first_list = None;
        let done = matches!(event, Ev::Done);
        match event {
            Ev::Skip => {}
            Ev::Init => {
                selection.seen.clear();
                self.relisting(id);
            }
            Ev::Page(name, ()) => {
                selection.seen.insert(name);
            }
            Ev::Apply(name, ()) => {
                joined = selection.selected.insert(name);
            }
            Ev::Delete(name) => {
                if selection.selected.remove(&name) {
                    left.push(name);
                }
            }
            Ev::Done => {
                let seen = std::mem::take(&mut selection.seen);
                if selection.known {
                    joined = seen.iter().any(|name| !selection.selected.contains(name));
                    left.extend(selection.selected.difference(&seen).cloned());
                    selection.selected = seen;
                } else {
                    // The first list: drop what was cached from other namespaces meanwhile.
                    selection.known = true;
                    selection.selected = seen;
                    first_list = Some(selection.selected.clone());
                }
            }
        }
        for namespace in &left {
            info!(namespace = %namespace, "namespace not selected: its objects are forgotten");
        }
        if !left.is_empty() {
            self.forget_namespaces(|namespace| left.iter().any(|n| n == namespace));
        }
        if let Some(selected) = first_list {
            self.forget_namespaces(|namespace| !selected.contains(namespace));
        }
        if joined {
            info!("a namespace joined the selection: the watches list again");
            self.restart_object_streams();
        }
        if done {
            self.stream_synced(id);
            self.caught_up(id);
        }
    }

    /// Drops every cached workload, then every cached source, of the namespaces `gone` names
    /// (its workloads first: no consumer is left to schedule), in one pass over the cache.
    fn forget_namespaces(&mut self, gone: impl Fn(&str) -> bool) {
        let workloads: Vec<WorkloadKey> = self
            .cache
            .workload_keys()
            .filter(|key| gone(&key.namespace))
            .cloned()
            .collect();
        for key in &workloads {
            self.rollouts.forget(key);
            self.forget_workload(key);
        }
        let sources: Vec<SourceKey> = self
            .cache
            .source_keys()
            .filter(|key| gone(&key.namespace))
            .cloned()
            .collect();
        for key in &sources {
            self.cache.delete_source(key);
        }
    }

    /// What the controller keeps of a workload, forgotten (deleted, or out of the selection).
    fn forget_workload(&mut self, key: &WorkloadKey) {
        self.stalled.remove(key);
        self.held.remove(key);
        self.cache.delete_workload(key);
        self.flap.forget(key);
        self.pool.forget(key);
        self.windows.remove(key);
        self.baselines.remove(key);
        self.changed.remove(key);
        self.first_change.remove(key);
        self.held_since.remove(key);
    }

    /// Starts every Secret, ConfigMap and workload watch over (a namespace joined the
    /// selection): each is stale until its new list is done.
    fn restart_object_streams(&mut self) {
        let was = self.stale_watches();
        let namespace_stream = self.namespace_stream;
        for (id, stream) in self.streams.iter_mut().enumerate() {
            if Some(id) == namespace_stream {
                continue;
            }
            // A stream still in its first list may have passed the namespace already.
            stream.behind = true;
            if let Some(restart) = &stream.restart {
                restart.pull();
            }
        }
        self.freshness_changed(was);
    }

    /// Says once per workload what its Reloader annotations come to, when that is not plain:
    /// honoured with an annotation rollsafe does not implement (`warn`, counted), or present
    /// without `--reloader-compat` (`info`: why nothing rolls it).
    fn note_reloader(&mut self, key: &WorkloadKey, note: ReloaderNote) {
        if note == ReloaderNote::None || !self.reloader_noted.insert(key.clone()) {
            return;
        }
        match note {
            ReloaderNote::Unsupported => {
                warn!(
                    workload = %key,
                    code = "reloader_unsupported",
                    "has a Reloader annotation rollsafe does not implement; the others are honoured"
                );
                self.metrics.reloader_unsupported.inc();
            }
            ReloaderNote::Refused(code) => {
                warn!(
                    workload = %key,
                    code,
                    "its Reloader annotations cannot be honoured; not watched"
                );
                self.metrics.reloader_refused.inc();
            }
            ReloaderNote::WithoutCompat => info!(
                workload = %key,
                "has Reloader annotations; pass --reloader-compat to honour them"
            ),
            ReloaderNote::None => {}
        }
    }

    /// The reference of a cached workload's Events (its uid from the cache).
    fn reference(&self, key: &WorkloadKey) -> Option<ObjectReference> {
        let uid = self.cache.workload(key)?.plan.as_ref()?.uid().to_owned();
        Some(workload_reference(key, Some(uid)))
    }

    /// Feeds a watch event of `key` to its followed rollout, if any.
    fn rollout_observed(
        &mut self,
        key: &WorkloadKey,
        observation: Option<Observation>,
        now: Instant,
    ) {
        if let Some(done) = self.rollouts.observe(key, observation, now) {
            self.finished.push(done);
        }
    }

    /// Announces and counts the rollouts that became final: a `RolloutComplete` Normal Event,
    /// a `RolloutStalled` Warning Event with Kubernetes' reason; superseded and gone ones are
    /// counted and logged only (someone else's change, or no workload to write on).
    async fn finish_rollouts(&mut self) {
        for done in std::mem::take(&mut self.finished) {
            let Finished {
                key,
                uid,
                status,
                elapsed,
            } = done;
            let result = status.state.as_str();
            if status.state == RolloutState::Stalled {
                self.stalled.insert(key.clone());
            }
            self.metrics.rollout(key.kind.as_str(), result, elapsed);
            info!(workload = %key, result, seconds = elapsed.as_secs(), "rollout finished");
            let (type_, reason, note) = match status.state {
                RolloutState::Complete => (
                    EventType::Normal,
                    "RolloutComplete",
                    format!(
                        "Rollout complete after {}: {}",
                        took(elapsed),
                        status.describe()
                    ),
                ),
                RolloutState::Stalled => (
                    EventType::Warning,
                    "RolloutStalled",
                    format!(
                        "Rollout stalled after {}: {}",
                        took(elapsed),
                        status.describe()
                    ),
                ),
                _ => continue,
            };
            let reference = workload_reference(&key, uid);
            self.publish_event(
                &key,
                reference,
                Announcement {
                    type_,
                    reason,
                    action: "Rollout",
                    note,
                    related: None,
                    causes: Vec::new(),
                },
            );
        }
    }

    /// A stream restarted for being behind has listed again: fresh.
    fn caught_up(&mut self, id: usize) {
        if self.streams[id].behind {
            let was = self.stale_watches();
            self.streams[id].behind = false;
            info!(stream = id, "the relisted watch has caught up");
            self.freshness_changed(was);
        }
    }

    /// Starts over the watch of `kind` that covers `namespace` (a consistent read found it
    /// behind): stale until its new list is done.
    fn relist(&mut self, kind: TargetKind, namespace: &str) {
        let was = self.stale_watches();
        for stream in &mut self.streams {
            if stream.source == Some(kind) && stream.in_scope(namespace) && !stream.behind {
                stream.behind = true;
                if let Some(restart) = &stream.restart {
                    restart.pull();
                }
            }
        }
        self.freshness_changed(was);
    }

    fn relisting(&self, id: usize) {
        if self.streams[id].synced {
            self.count(|s| s.relists += 1);
        }
    }

    /// Before a change of `source` (to resourceVersion `version`) is applied: keeps the record
    /// each of its opted-in consumers without a record of its own has now — when the state of
    /// the workload this replica holds is older than the change (a smaller resourceVersion:
    /// the API server's versions are one sequence), so its pods were started before it. A
    /// workload created (or edited) after the change, even if this view saw it first (the
    /// Secret watch was behind), is adopted as before; so is any workload when the versions
    /// are not numbers. After the first list only: until then nothing was decided, and the
    /// first list is every workload's baseline. A deletion keeps none (a roll without its
    /// object is withheld anyway).
    fn keep_baselines(&mut self, source: &SourceKey, version: u64) {
        if version == 0 || !self.status.borrow().synced {
            return;
        }
        let unrecorded: Vec<WorkloadKey> = self
            .cache
            .consumers(source)
            .filter(|key| !self.baselines.contains_key(key))
            .filter(|key| {
                self.cache.workload(key).is_some_and(|entry| {
                    entry.facts.watched
                        && entry.facts.record.is_none()
                        && entry.plan.as_ref().is_some_and(|plan| {
                            let held = freshness::version_number(plan.resource_version());
                            held != 0 && held < version
                        })
                })
            })
            .collect();
        for key in unrecorded {
            if let Some(record) = self.cache.record(&key, &self.settings.fingerprinter) {
                self.baselines.insert(key, record);
            }
        }
    }

    fn schedule_consumers(&mut self, key: &SourceKey, now: Instant, window: Duration) {
        // Before the first full view nothing is decided: its end evaluates every workload, and
        // a change made before it is named from the records. Tracking the first list's
        // objects as changes held a set per workload at the peak of the cold start.
        if !self.status.borrow().synced {
            return;
        }
        let consumers: Vec<WorkloadKey> = self.cache.consumers(key).collect();
        for workload in consumers {
            self.debouncer.schedule(&workload, now, window);
            self.first_change.entry(workload.clone()).or_insert(now);
            self.changed
                .entry(workload)
                .or_default()
                .insert(key.clone());
        }
    }

    fn stream_synced(&mut self, id: usize) {
        self.streams[id].synced = true;
        if self.status.borrow().synced || !self.streams.iter().all(|s| s.synced) {
            return;
        }
        // First full view: evaluate everything now (restart → no patch; missed change → one).
        let now = Instant::now();
        self.seed_bucket(now);
        let keys: Vec<WorkloadKey> = self.cache.workload_keys().cloned().collect();
        for key in &keys {
            self.debouncer.schedule(key, now, Duration::ZERO);
        }
        self.count(|s| s.synced = true);
        info!(workloads = keys.len(), "caches synced");
    }

    /// Evaluates the due workloads, earliest first, until [`EVALUATIONS_PER_STEP`] are done,
    /// the pool is full, or none is due.
    async fn evaluate_due(&mut self) {
        let now = Instant::now();
        // Held rolls whose window may be open now join the due evaluations.
        while let Some(key) = self.windows.pop_next_due(now) {
            self.debouncer.schedule(&key, now, Duration::ZERO);
        }
        for _ in 0..EVALUATIONS_PER_STEP {
            if !self.pool.has_room() {
                break;
            }
            let Some(key) = self.debouncer.pop_next_due(now) else {
                break;
            };
            self.evaluate(&key).await;
        }
    }

    /// Evaluates one workload and carries out the outcome; one whose patch is in flight is
    /// evaluated once that is answered.
    async fn evaluate(&mut self, key: &WorkloadKey) {
        if self.pool.defer_if_busy(key) {
            return;
        }
        let now = Instant::now();
        let deadline = self.patch_deadline(now);
        let stale = self.stale_watches() > 0;
        let evaluator = Evaluator {
            cache: &self.cache,
            fingerprinter: &self.settings.fingerprinter,
            changed: &self.changed,
            dry_run: self.settings.dry_run,
            deadline,
            retry_after: FAILURE_RECHECK.max(self.settings.debounce),
            flap: &mut self.flap,
            bucket: &mut self.bucket,
            progressive_all: self.settings.progressive_all,
            stalled: &self.stalled,
            stale,
            baselines: &self.baselines,
            restart_window: self.settings.restart_window.as_ref(),
            wall: self.settings.clock.now(),
            require_approval: &self.settings.require_approval,
        };
        if let Some(outcome) = evaluator.evaluate(key, now) {
            self.apply(key, outcome, now).await;
        }
    }

    /// Carries out an evaluation's outcome: the one step that sends, publishes, counts,
    /// reschedules and updates the cache.
    async fn apply(&mut self, key: &WorkloadKey, outcome: Outcome, now: Instant) {
        self.count(|s| s.evaluations += 1);
        // Whatever else it comes to, a workload no longer waits for its window.
        if !matches!(
            outcome,
            Outcome::Skip {
                reason: Some(SkipReason::RestartWindow),
                ..
            }
        ) {
            self.windows.remove(key);
        }
        let requeue = match outcome {
            Outcome::Skip {
                reason: Some(SkipReason::RestartWindow),
                requeue,
            } => {
                self.skipped(key, Some(SkipReason::RestartWindow), requeue);
                if let Some(after) = requeue {
                    self.windows.schedule(key, now, after);
                }
                None
            }
            Outcome::Skip { reason, requeue } => {
                self.skipped(key, reason, requeue);
                requeue
            }
            Outcome::DryRun { decision, changed } => {
                info!(workload = %key, decision, changed, "dry run: patch not sent");
                self.metrics.roll(key.kind.as_str(), "dry_run");
                self.count(|s| s.dry_run += 1);
                None
            }
            Outcome::Patch(write) => self.dispatch(key, *write, now),
            Outcome::Confirm { sources } => self.confirm(key, &sources).await,
            Outcome::Held { digest, event } => {
                self.metrics.skip("held");
                // Announced once per workload and content; a restart announces it once more.
                if self.held.get(key) != Some(&digest) {
                    warn!(workload = %key, note = event.note, "progressive roll held");
                    if let Some(reference) = self.reference(key) {
                        self.publish_event(key, reference, event);
                    }
                    // Counted once its Event is queued (published by its own task).
                    self.metrics.held.inc();
                    self.count(|s| s.held += 1);
                    self.held.insert(key.clone(), digest);
                }
                Some(progression::HOLD_RECHECK)
            }
        };
        if let Some(after) = requeue {
            self.debouncer.schedule(key, Instant::now(), after);
        }
    }

    /// Logs and counts an evaluation that writes nothing.
    fn skipped(
        &mut self,
        key: &WorkloadKey,
        reason: Option<SkipReason>,
        requeue: Option<Duration>,
    ) {
        let Some(reason) = reason else {
            debug!(workload = %key, "nothing to write");
            return;
        };
        self.metrics.skip(reason.as_str());
        match reason {
            SkipReason::NotWatched {
                opt_in_error: Some(WORKLOAD_REF),
            } => info!(
                workload = %key,
                code = WORKLOAD_REF,
                "a Rollout with spec.workloadRef rolls with the Deployment it references: opt that one in"
            ),
            SkipReason::NotWatched {
                opt_in_error: Some(code),
            } => debug!(workload = %key, code, "rollsafe.dev/watch not understood; not watched"),
            SkipReason::SourceMissing => {
                info!(workload = %key, "roll withheld: a consumed object does not exist");
                self.count(|s| s.withheld += 1);
            }
            SkipReason::Unpatchable => {
                warn!(workload = %key, "workload cannot be patched (uid, resourceVersion or template missing)");
            }
            SkipReason::NotLeader => debug!(workload = %key, "not the leader: patch not sent"),
            SkipReason::StaleView => {
                debug!(workload = %key, "a watch is stale: not patching until it is fresh");
            }
            SkipReason::WaitingForWave => {
                debug!(workload = %key, "progressive roll waits for an earlier wave");
            }
            SkipReason::RestartWindow => {
                debug!(workload = %key, "roll held by a restart window; marked pending");
            }
            SkipReason::AwaitingApproval => {
                debug!(workload = %key, "roll awaits approval; marked pending");
            }
            SkipReason::RateLimited => {
                let wait_ms = requeue.unwrap_or_default().as_millis();
                debug!(workload = %key, wait_ms, "roll postponed by the global rate limit");
                self.count(|s| s.rate_limited += 1);
            }
            SkipReason::NotWatched { opt_in_error: None }
            | SkipReason::Halted
            | SkipReason::Unchanged => {}
        }
        if reason.settles() {
            self.forget_changes(key);
        }
    }

    /// Starts the patch in the pool, or, for an adoption the pace or the adoption slots do
    /// not allow now, queues the workload (evaluated again when its turn comes). Rolls and
    /// halts always find a slot: the loop takes a due workload only while the pool has room,
    /// and adoptions never take the last slots.
    fn dispatch(&mut self, key: &WorkloadKey, write: Write, now: Instant) -> Option<Duration> {
        if write.purpose == Purpose::Adopt && !self.pool.may_adopt(now) {
            self.pool.queue_adoption(key);
            return None;
        }
        let tested = self
            .cache
            .workload(key)
            .and_then(|entry| entry.plan.as_ref())
            .map(|plan| plan.resource_version().to_owned())
            .unwrap_or_default();
        self.pool.start(&self.client, key, write, tested);
        None
    }

    /// Carries out a patch's answer: once acknowledged, counts it, publishes its Event and
    /// takes the acknowledged object into the cache (unless a newer state was observed
    /// meanwhile). A failure other than a conflict is evaluated again later (a 409/422 waits
    /// for the next observed state, never resent); a workload that came due while its patch
    /// was in flight is evaluated again now.
    fn answered(&mut self, answer: Answer) {
        let (key, purpose) = match &answer {
            Answer::Sent(sent) => (sent.key.clone(), sent.purpose),
            Answer::Lost { key, purpose } => (key.clone(), *purpose),
        };
        let again = self.pool.finish(&key, purpose);
        let now = Instant::now();
        let written = match answer {
            Answer::Sent(sent) => self.written(*sent, now),
            Answer::Lost { .. } => {
                warn!(workload = %key, "the patch task ended without an answer; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                Some(FAILURE_RECHECK.max(self.settings.debounce))
            }
        };
        let requeue = match written {
            Some(after) => Some(after),
            None if again => Some(Duration::ZERO),
            None => None,
        };
        if let Some(after) = requeue {
            self.debouncer.schedule(&key, now, after);
        }
    }

    fn written(&mut self, sent: Sent, now: Instant) -> Option<Duration> {
        let Sent {
            key,
            purpose,
            write,
            tested,
            result,
        } = sent;
        let key = &key;
        let object = match result {
            Ok(object) => object,
            Err(Unsent::Refused(code)) => {
                // Someone else changed the workload (or replaced it). Its next observed state
                // schedules a fresh evaluation.
                info!(workload = %key, code, "patch refused by a concurrent change; waiting for the next observed state");
                self.metrics.roll(key.kind.as_str(), "conflict");
                self.count(|s| s.conflicts += 1);
                return None;
            }
            Err(Unsent::Failed(code)) => {
                warn!(workload = %key, code, "patch failed; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                return Some(write.retry_after);
            }
            Err(Unsent::TimedOut) => {
                warn!(workload = %key, "patch timed out; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                return Some(write.retry_after);
            }
        };
        let event = write.event;
        let cause = event.as_ref().map_or("", |e| e.note.as_str());
        self.acknowledged(key, purpose, cause, now);
        if let Some(after) = write.recheck {
            self.windows.schedule(key, now, after);
        }
        if matches!(purpose, Purpose::Roll { .. }) {
            self.stalled.remove(key);
            self.held.remove(key);
        }
        if purpose == (Purpose::Roll { deferred: None })
            && let Ok(value) = serde_json::to_value(&object)
        {
            let acknowledged = Observation::of(key.kind, &value, CONFIG_HASH);
            if let Some(done) = self.rollouts.follow(key.clone(), acknowledged, now) {
                self.finished.push(done);
            }
        }
        if let Some(event) = event {
            self.announce(&object, key, event);
        }
        // The acknowledged object is an observed state: evaluations before its watch event
        // arrives see the new resourceVersion and record. While the patch was in flight the
        // watch may have delivered it, or a later state: the cache keeps what is newer.
        let unchanged = self
            .cache
            .workload(key)
            .and_then(|entry| entry.plan.as_ref())
            .is_some_and(|plan| plan.resource_version() == tested);
        let watching = Watching {
            all: self.settings.all,
            reloader_compat: self.settings.reloader_compat,
        };
        if unchanged
            && let Some(object) = WorkloadObject::from_written(&object)
            && let Some((key, (entry, _))) = workload(key.kind, object, watching)
        {
            self.cache.apply_workload(key, entry);
        }
        None
    }

    /// Counts an acknowledged patch (the metrics first: whoever waits on the status reads
    /// them complete) and updates what the brakes and the Events remember.
    /// `cause` is the Event's note (object names, never values), so the log says what
    /// changed as the Event does.
    fn acknowledged(&mut self, key: &WorkloadKey, purpose: Purpose, cause: &str, now: Instant) {
        match purpose {
            Purpose::Halt => warn!(workload = %key, "halted by the flap stop"),
            Purpose::Pend => {
                info!(workload = %key, cause, "roll held; marked pending")
            }
            _ => info!(workload = %key, decision = purpose.as_str(), cause, "patched"),
        }
        self.metrics.roll(key.kind.as_str(), purpose.result());
        // The workload has a record now.
        self.baselines.remove(key);
        match purpose {
            Purpose::Adopt => {
                // The record now covers what was seen so far (the first list included).
                self.forget_changes(key);
                self.count(|s| s.adoptions += 1);
            }
            Purpose::Roll { deferred } => {
                self.flap.rolled(key, now);
                let first = self.first_change.remove(key);
                let held_since = self.held_since.remove(key);
                // Held by this process, or marked held when it rolled (held before a restart).
                let held = held_since.is_some()
                    || self
                        .cache
                        .workload(key)
                        .and_then(|entry| entry.plan.as_ref())
                        .is_some_and(crate::decision::Plan::is_pending);
                match (held, held_since.or(first)) {
                    (true, Some(since)) => {
                        self.metrics
                            .held_roll
                            .observe(since.elapsed().as_secs_f64());
                    }
                    (false, Some(first)) => {
                        self.metrics.reaction.observe(first.elapsed().as_secs_f64());
                    }
                    (_, None) => {}
                }
                self.changed.remove(key);
                self.count(|s| {
                    s.rolls += 1;
                    if deferred.is_some() {
                        s.deferred += 1;
                    }
                });
            }
            Purpose::Halt => {
                self.flap.forget(key);
                self.held_since.remove(key);
                self.forget_changes(key);
                self.metrics.halts.inc();
                self.count(|s| s.halts += 1);
            }
            // The changes stay: the roll that follows names them.
            Purpose::Pend => {
                let since = self.first_change.get(key).copied().unwrap_or(now);
                self.held_since.entry(key.clone()).or_insert(since);
                self.count(|s| s.pended += 1);
            }
            Purpose::Unpend => {
                self.held_since.remove(key);
                self.forget_changes(key);
            }
        }
    }

    /// Forgets the changes a workload has not rolled for (they are not its news any more).
    fn forget_changes(&mut self, key: &WorkloadKey) {
        self.first_change.remove(key);
        self.changed.remove(key);
    }

    /// Reads each object once, consistently (a list by name without a resourceVersion, served
    /// from etcd, metadata only), before a roll the cache alone cannot justify. The cache holding
    /// the version read confirms it: the workload is evaluated again at once. Another version,
    /// or none, means the cache is behind: nothing rolls, the object's watch is relisted, and
    /// its end evaluates every workload. A failed read is tried again later; nothing rolls on
    /// an unconfirmed view.
    async fn confirm(&mut self, key: &WorkloadKey, sources: &[SourceKey]) -> Option<Duration> {
        let mut behind = false;
        for source in sources {
            self.count(|s| s.confirmations += 1);
            let read = self.read_version(source).await;
            let result = match read {
                Some(version) if self.cache.confirm(source, version) => "current",
                Some(_) => "behind",
                None => "failed",
            };
            self.metrics
                .confirmations
                .get_or_create(&ConfirmLabels { result })
                .inc();
            match result {
                "current" => debug!(workload = %key, source = %source, "the cache is current"),
                "behind" => {
                    warn!(
                        workload = %key,
                        source = %source,
                        code = "stale_view",
                        "the cache is behind a consistent read of an object this roll is for; not rolling, relisting its watch"
                    );
                    self.count(|s| s.stale_views += 1);
                    self.relist(source.kind, &source.namespace);
                    behind = true;
                }
                _ => {
                    warn!(workload = %key, source = %source, code = "confirm_failed", "cannot confirm the cache before a roll; trying again later");
                    return Some(FAILURE_RECHECK.max(self.settings.debounce));
                }
            }
        }
        (!behind).then_some(Duration::ZERO)
    }

    /// The resourceVersion of a source as a consistent read returns it now (`0`: it does not
    /// exist, or the version is not a number); `None` when the read fails or times out.
    async fn read_version(&self, source: &SourceKey) -> Option<u64> {
        let resource = match source.kind {
            TargetKind::Secret => ApiResource::erase::<Secret>(&()),
            TargetKind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
        };
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &source.namespace, &resource);
        let params = ListParams::default().fields(&format!("metadata.name={}", source.name));
        match tokio::time::timeout(freshness::CONFIRM_TIMEOUT, api.list_metadata(&params)).await {
            Ok(Ok(list)) => Some(
                list.items
                    .first()
                    .and_then(|object| object.metadata.resource_version.as_deref())
                    .map_or(0, freshness::version_number),
            ),
            _ => None,
        }
    }

    /// Publishes one Event on the workload; a failure is logged and counted, never retried.
    fn announce(&self, object: &DynamicObject, key: &WorkloadKey, event: Announcement) {
        let reference = object.object_ref(&workload_resource(key.kind));
        self.publish_event(key, reference, event);
    }

    /// Queues one Event on `reference` for the publishing task ([`EVENT_QUEUE`]); a full
    /// queue drops it (logged and counted, never retried). With `--notify-webhook`, the same
    /// outcome is queued as a notification (never waited for).
    fn publish_event(&self, key: &WorkloadKey, reference: ObjectReference, event: Announcement) {
        self.notify(key, &event);
        let Announcement {
            type_,
            reason,
            action,
            note,
            related,
            causes: _,
        } = event;
        let event = Event {
            type_,
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: related.map(|source| ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some(source.kind.as_str().to_owned()),
                namespace: Some(source.namespace.into()),
                name: Some(source.name.into()),
                ..ObjectReference::default()
            }),
        };
        if self
            .events
            .try_send((key.clone(), reference, event))
            .is_err()
        {
            warn!(workload = %key, reason, "the Event queue is full; Event dropped");
            self.count(|s| s.event_failures += 1);
        }
    }
}

impl Controller {
    /// Queues the notification of `event` on `key`: its outcome, the objects that caused it
    /// with the keys the workload consumes of each (names only, never values), the cluster
    /// and the page. Returns at once; delivery is the notifier's.
    fn notify(&self, key: &WorkloadKey, event: &Announcement) {
        let Some(notifier) = &self.settings.notifier else {
            return;
        };
        let outcome = match event.reason {
            "Rolled" => NotifyOutcome::Rolled,
            "RolloutDeferred" => NotifyOutcome::Deferred,
            "Halted" => NotifyOutcome::Halted,
            "Pending" => NotifyOutcome::Pending,
            "RolloutComplete" => NotifyOutcome::RolloutComplete,
            "RolloutStalled" => NotifyOutcome::RolloutStalled,
            "RolloutHeld" => NotifyOutcome::RolloutHeld,
            _ => return,
        };
        let consumed = self
            .cache
            .workload(key)
            .map(|entry| entry.consumption.expand());
        let causes = event
            .causes
            .iter()
            .map(|source| {
                let keys = consumed
                    .as_ref()
                    .and_then(|consumption| {
                        consumption.iter().find_map(|(config, keys)| {
                            (config.kind == source.kind && config.name == source.name)
                                .then_some(keys)
                        })
                    })
                    .map(|keys| match keys {
                        crate::consumption::Keys::All => Vec::new(),
                        crate::consumption::Keys::Some(keys) => keys.iter().cloned().collect(),
                    })
                    .unwrap_or_default();
                Cause {
                    kind: source.kind.as_str().to_owned(),
                    name: source.name.to_string(),
                    keys,
                }
            })
            .collect();
        notifier.notify(Notification {
            outcome,
            cluster: self.settings.cluster_name.clone(),
            namespace: key.namespace.to_string(),
            workload_kind: key.kind.as_str().to_owned(),
            workload: key.name.to_string(),
            causes,
            summary: event.note.clone(),
            link: self.settings.page_url.clone(),
            at: self.settings.clock.now(),
        });
    }
}

/// Publishes the queued Events in order, each within [`EVENT_TIMEOUT`]; a failure is logged
/// and counted, never retried. Ends when the controller is dropped.
async fn publish_events(
    mut queue: mpsc::Receiver<(WorkloadKey, ObjectReference, Event)>,
    recorder: Recorder,
    status: Arc<watch::Sender<Status>>,
) {
    while let Some((key, reference, event)) = queue.recv().await {
        match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => status.send_modify(|s| s.events += 1),
            _ => {
                warn!(workload = %key, reason = %event.reason, "cannot publish the Event");
                status.send_modify(|s| s.event_failures += 1);
            }
        }
    }
}

/// The field selector leaving out `namespaces` (`metadata.namespace!=a,metadata.namespace!=b`),
/// or `None` for none.
fn ignored_namespaces(namespaces: &[String]) -> Option<String> {
    (!namespaces.is_empty()).then(|| {
        namespaces
            .iter()
            .map(|namespace| format!("metadata.namespace!={namespace}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// The object reference of a workload's Events.
fn workload_reference(key: &WorkloadKey, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(key.kind.api_version().to_owned()),
        kind: Some(key.kind.as_str().to_owned()),
        namespace: Some(key.namespace.to_string()),
        name: Some(key.name.to_string()),
        uid,
        ..ObjectReference::default()
    }
}

/// A rollout's duration for an Event note: `0.4s`, `42.0s`, `3m12s`.
fn took(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds < 60 {
        format!("{:.1}s", elapsed.as_secs_f64())
    } else {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    }
}

/// The next leadership state; `None` when the lease task has ended.
async fn leadership_changed(leadership: &mut Option<watch::Receiver<bool>>) -> Option<bool> {
    let receiver = leadership.as_mut()?;
    match receiver.changed().await {
        Ok(()) => Some(*receiver.borrow_and_update()),
        Err(_) => {
            *leadership = None;
            None
        }
    }
}

/// Waits for the next confirmed renewal; `false` when the lease client is gone.
async fn renewal(renewals: &mut Option<watch::Receiver<Option<Instant>>>) -> bool {
    let Some(receiver) = renewals.as_mut() else {
        return std::future::pending().await;
    };
    receiver.changed().await.is_ok()
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs one watch stream in a task of its own: its pages and events are received, decoded and
/// reduced on any worker thread, beside the other watches and the loop (the cold start decodes
/// every kind at once, not one after another in the loop's task). Items reach the loop in the
/// order the stream made them, through a channel of [`STREAM_BUFFER`]. Dropping the returned
/// stream (a restart, or the controller's end) drops what was decoded ahead and stops the task,
/// and the watch request with it.
fn decoded_apart<T: Send + 'static>(mut stream: BoxStream<'static, T>) -> BoxStream<'static, T> {
    let (sender, mut receiver) = mpsc::channel(STREAM_BUFFER);
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                () = sender.closed() => return,
                item = stream.next() => item,
            };
            let Some(item) = item else { return };
            if sender.send(item).await.is_err() {
                return;
            }
        }
    });
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)).boxed()
}

/// Reduces a watcher event; an object without a namespace or name is skipped.
fn reduce<O, K, V>(event: watcher::Event<O>, convert: impl Fn(O) -> Option<(K, V)>) -> Ev<K, V> {
    match event {
        watcher::Event::Init => Ev::Init,
        watcher::Event::InitDone => Ev::Done,
        watcher::Event::InitApply(object) => match convert(object) {
            Some((key, value)) => Ev::Page(key, value),
            None => Ev::Skip,
        },
        watcher::Event::Apply(object) => match convert(object) {
            Some((key, value)) => Ev::Apply(key, value),
            None => Ev::Skip,
        },
        watcher::Event::Delete(object) => match convert(object) {
            Some((key, _)) => Ev::Delete(key),
            None => Ev::Skip,
        },
    }
}

fn source<K: SourceType>(
    mut object: Reduced<K>,
    reloader_compat: bool,
) -> Option<(SourceKey, SourceEntry)> {
    let key = SourceKey {
        kind: K::KIND,
        namespace: object.metadata.namespace.take()?.into(),
        name: object.metadata.name.take()?.into(),
    };
    Some((key, SourceEntry::from_reduced(object, reloader_compat)))
}

/// A workload event's key, its cache entry, and its rollout observation (kept only while this
/// replica follows the workload's rollout).
fn workload(
    kind: WatchedKind,
    object: WorkloadObject,
    watching: Watching,
) -> Option<(WorkloadKey, (WorkloadEntry, Box<Observation>))> {
    let WorkloadObject { metadata, object } = object;
    let key = WorkloadKey {
        kind,
        namespace: metadata.namespace?.into(),
        name: metadata.name?.into(),
    };
    // One classification for both: the cache keeps the state, a followed rollout the verdict.
    let status = classify(kind, &object);
    let entry = WorkloadEntry::classified(kind, &object, watching, status.state);
    let observation = Box::new(Observation::classified(kind, &object, CONFIG_HASH, status));
    Some((key, (entry, observation)))
}
