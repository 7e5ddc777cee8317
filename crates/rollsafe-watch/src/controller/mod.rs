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
//!
//! kube-runtime's shape, one concept per file: the streams ([`crate::streams`], the
//! reflector's place) yield typed updates that [`reflect`] applies to the cache; what is
//! remembered per workload is one [`crate::tracker::Tracker`]; [`applier`] carries out an
//! [`Outcome`] and a patch's answer, and every later evaluation goes through its one
//! [`Requeue`]; Events and notifications are [`crate::announce`]'s. This file keeps the loop
//! and the wiring.

mod applier;
mod reflect;

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::events::{Recorder, Reporter};
use rollsafe_core::reference::TargetKind;
use thiserror::Error;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use crate::announce::{self, Announcement, Announcer, EventQueue, workload_reference};
use crate::cache::{Cache, WorkloadKey};
use crate::debounce::Debouncer;
use crate::evictions::{Ended, Evictions};
use crate::freshness;
use crate::leader::Leadership;
use crate::limits::{FlapGuard, TokenBucket};
use crate::metrics::{ControllerMetrics, ObjectLabels};
use crate::outcome::Evaluator;
use crate::patches::PatchPool;
use crate::published;
use crate::rollouts::{Finished, Rollouts};
use crate::streams::Streams;
use crate::tracker::Tracker;
use rollsafe_kube::eviction::EvictionState;

pub use crate::settings::ControllerSettings;
use crate::settings::{EVALUATIONS_PER_STEP, FAILURE_RECHECK, REPORTING_CONTROLLER};
pub use crate::status::Status;

pub(crate) use applier::Requeue;

/// Why the controller stopped.
#[derive(Debug, Error)]
pub enum ControllerError {
    /// Every watch stream ended (the client was shut down).
    #[error("the watch streams ended")]
    StreamsEnded,
    /// The task it ran on ended abnormally.
    #[error("the controller's task ended abnormally")]
    TaskEnded,
}

impl ControllerError {
    /// The code of logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            ControllerError::StreamsEnded => "streams_ended",
            ControllerError::TaskEnded => "task_ended",
        }
    }
}

/// A controller running on a task of its own ([`Controller::spawn`]): its published status,
/// and a stop.
pub struct Spawned {
    status: watch::Receiver<Status>,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ControllerError>>,
}

impl Spawned {
    /// A receiver of its published [`Status`].
    pub fn status(&self) -> watch::Receiver<Status> {
        self.status.clone()
    }

    /// Waits until its status satisfies `done`, at most `limit`: the status then, or, when the
    /// time is up (or it stopped), the last one published.
    pub async fn wait_for(
        &mut self,
        limit: Duration,
        done: impl Fn(&Status) -> bool,
    ) -> Result<Status, Status> {
        let waited = tokio::time::timeout(limit, self.status.wait_for(|s| done(s)))
            .await
            .map(|status| status.map(|s| s.clone()));
        match waited {
            Ok(Ok(status)) => Ok(status),
            _ => Err(self.status.borrow().clone()),
        }
    }

    /// Stops it and waits for its end.
    pub async fn stop(self) -> Result<(), ControllerError> {
        let _ = self.stop.send(());
        self.task.await.unwrap_or(Err(ControllerError::TaskEnded))
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
    /// The watch streams' states and the namespace selection.
    streams: Streams,
    status: Arc<watch::Sender<Status>>,
    /// Where Events and notifications go.
    announcer: Announcer,
    /// The Event queue's receiving end, until `run` starts its publishing task.
    event_queue: Option<EventQueue>,
    recorder: Recorder,
    bucket: TokenBucket,
    flap: FlapGuard,
    /// What is remembered of each workload between evaluations.
    tracker: Tracker,
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
    /// Workloads whose Reloader annotations were reported (once each).
    reloader_noted: HashSet<WorkloadKey>,
    /// The patches in flight and the adoptions waiting for their pace.
    pool: PatchPool,
    /// The eviction runs of workloads that restart by eviction.
    evictions: Evictions,
}

impl Controller {
    /// A controller acting through `client`.
    pub fn new(client: kube::Client, settings: ControllerSettings) -> Self {
        let reporter = Reporter {
            controller: REPORTING_CONTROLLER.to_owned(),
            instance: settings.instance.clone(),
        };
        let status = Arc::new(watch::Sender::new(Status::default()));
        let (announcer, event_queue) = Announcer::new(&settings, Arc::clone(&status));
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            bucket: TokenBucket::new(
                settings.max_rolls_per_minute,
                settings.burst,
                Instant::now(),
            ),
            flap: FlapGuard::new(settings.flap_limit),
            tracker: Tracker::default(),
            metrics: ControllerMetrics::default(),
            leader: None,
            leading: false,
            rollouts: Rollouts::new(settings.progress_deadline),
            finished: Vec::new(),
            reloader_noted: HashSet::new(),
            pool: PatchPool::new(settings.max_adoptions_per_second, Instant::now()),
            evictions: Evictions::new(settings.progress_deadline),
            streams: Streams::new(&settings),
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
            status,
            announcer,
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

    /// Runs on a task of its own until [`Spawned::stop`].
    pub fn spawn(self) -> Spawned {
        let status = self.status();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(self.run(async {
            let _ = stopped.await;
        }));
        Spawned { status, stop, task }
    }

    /// Runs until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), ControllerError> {
        if let Some(queue) = self.event_queue.take() {
            tokio::spawn(announce::publish_events(
                queue,
                self.recorder.clone(),
                Arc::clone(&self.status),
            ));
        }
        let mut streams = self.streams.open(&self.client, &self.settings);
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
        if self.leader.is_none() {
            self.publish_settings();
        }
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
                ended = self.evictions.ended(&self.client), if !self.evictions.is_empty() => {
                    if let Some(ended) = ended {
                        self.eviction_ended(ended);
                    }
                }
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
            self.finish_rollouts();
            self.tracker.release_spare();
            self.publish();
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
        self.publish_settings();
        if self.status.borrow().synced {
            let now = Instant::now();
            self.seed_bucket(now);
            self.evaluate_all_now(now);
        }
    }

    /// Publishes the effective settings on the Lease ([`crate::published`]), off the loop; a
    /// failure is logged, and readers fall back to their own flags.
    fn publish_settings(&self) {
        let Some(lease) = self.settings.publish_on.clone() else {
            return;
        };
        let client = self.client.clone();
        let settings = published::of(&self.settings, self.settings.clock.now());
        tokio::spawn(async move {
            match rollsafe_kube::published::publish(&client, &lease, &settings).await {
                Ok(()) => info!(
                    lease = %lease.name,
                    namespace = %lease.namespace,
                    "settings published on the Lease"
                ),
                Err(error) => warn!(
                    code = error.code(),
                    "cannot publish the settings on the Lease; readers fall back to their own flags"
                ),
            }
        });
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

    /// Looks at every stream's last delivery (a silent one is stale), publishes the count of
    /// abandoned watch responses, and what the freshness change implies.
    fn check_streams(&mut self) {
        let was = self.streams.stale();
        let bound = freshness::stall_bound(self.settings.watch_timeout);
        let abandoned = self.streams.check(Instant::now(), bound, &self.metrics);
        self.count(|s| s.abandoned_watches = abandoned);
        self.freshness_changed(was);
    }

    /// Publishes how many streams are stale; when none is any more (and there were), evaluates
    /// every workload at once.
    fn freshness_changed(&mut self, was: usize) {
        let stale = self.streams.stale();
        self.metrics.stale_watches.set(stale as i64);
        self.count(|s| s.stale_watches = stale);
        if was > 0 && stale == 0 && self.status.borrow().synced {
            info!("every watch is fresh again");
            self.evaluate_all_now(Instant::now());
        }
    }

    /// Evaluates every cached workload as soon as the loop can (the first full view, a new
    /// leader, every watch fresh again).
    fn evaluate_all_now(&mut self, now: Instant) {
        let keys: Vec<WorkloadKey> = self.cache.workload_keys().cloned().collect();
        for key in &keys {
            self.requeue(key, Requeue::After(Duration::ZERO), now);
        }
        self.resume_evictions(&keys);
    }

    /// Continues the eviction runs the workloads' marks say are in progress (started by an
    /// earlier leader, or by this process before a restart), when this replica may act.
    fn resume_evictions(&mut self, keys: &[WorkloadKey]) {
        if self.settings.dry_run || !self.is_leader() {
            return;
        }
        for key in keys {
            if self.evictions.has(key) {
                continue;
            }
            let since = self
                .cache
                .workload(key)
                .and_then(|entry| entry.evicting())
                .and_then(|mark| mark.parse::<jiff::Timestamp>().ok());
            if let Some(since) = since {
                info!(workload = %key, "continuing the eviction run its mark records");
                self.evictions.start(&self.client, key, since);
            }
        }
    }

    /// Announces and counts an eviction run that ended, as a followed rollout's end is.
    fn eviction_ended(&mut self, ended: Ended) {
        let Ended {
            key,
            report,
            elapsed,
        } = ended;
        let result = match &report.state {
            EvictionState::Complete => "complete",
            EvictionState::Deferred { .. } => "deferred",
            EvictionState::Stalled { .. }
            | EvictionState::TimedOut
            | EvictionState::Failed { .. } => "stalled",
        };
        if result == "stalled" {
            self.tracker.update(&key, |state| state.stalled = true);
            self.count(|s| s.rollouts_stalled += 1);
        }
        self.metrics.rollout(key.kind.as_str(), result, elapsed);
        info!(
            workload = %key,
            result,
            evicted = report.evicted.len(),
            seconds = elapsed.as_secs(),
            "eviction run finished"
        );
        let uid = self
            .cache
            .workload(&key)
            .and_then(|entry| entry.plan.as_ref())
            .map(|plan| plan.uid().to_owned());
        let event = Announcement::eviction_ended(&report, elapsed);
        self.announcer.publish(
            &key,
            workload_reference(&key, uid),
            event,
            Some(&self.cache),
        );
    }

    /// Evaluates the due workloads, earliest first, until [`EVALUATIONS_PER_STEP`] are done,
    /// the pool is full, or none is due.
    async fn evaluate_due(&mut self) {
        let now = Instant::now();
        // Held rolls whose window may be open now join the due evaluations.
        while let Some(key) = self.windows.pop_next_due(now) {
            self.requeue(&key, Requeue::After(Duration::ZERO), now);
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
        let stale = self.streams.stale() > 0;
        let evaluator = Evaluator {
            cache: &self.cache,
            fingerprinter: &self.settings.fingerprinter,
            tracker: &self.tracker,
            dry_run: self.settings.dry_run,
            deadline,
            retry_after: FAILURE_RECHECK.max(self.settings.debounce),
            flap: &mut self.flap,
            bucket: &mut self.bucket,
            progressive_all: self.settings.progressive_all,
            stale,
            consistent: false,
            restart_window: self.settings.restart_window.as_ref(),
            wall: self.settings.clock.now(),
            require_approval: &self.settings.require_approval,
            strategy: &self.settings.strategy,
        };
        if let Some(outcome) = evaluator.evaluate(key, now) {
            self.apply(key, outcome, now).await;
        }
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
