//! The applier: carries out an evaluation's [`Outcome`] and a patch's [`Answer`] — sends,
//! counts, announces, updates the cache and what is remembered of the workload — and decides
//! when the workload is looked at again through one function, [`Controller::requeue`]
//! (kube-runtime's `RescheduleReconciliation`).

use std::time::Duration;

use kube::Resource as _;
use kube::api::{Api, DynamicObject, ListParams};
use kube::runtime::events::EventType;
use rollsafe_core::rollout::follow::Observation;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::Controller;
use crate::announce::Reason;
use crate::cache::{SourceKey, WORKLOAD_REF, WorkloadKey};
use crate::freshness;
use crate::metrics::ConfirmLabels;
use crate::outcome::{Outcome, Purpose, SkipReason, Write};
use crate::patches::{Answer, Sent, Unsent};
use crate::progression;
use crate::settings::FAILURE_RECHECK;
use crate::streams::{watching, workload};
use crate::workload_object::WorkloadObject;
use rollsafe_core::annotations::CONFIG_HASH;
use rollsafe_kube::read::{api_resource, workload_resource};

/// When a workload is evaluated again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Requeue {
    /// After this long (the debounce window, a rate-limit wait, a recheck after a failure;
    /// zero: as soon as the loop can).
    After(Duration),
    /// When its restart window may have opened, after this long: it waits in the window
    /// queue (counted as held by a window, not as pending work).
    WindowOpens(Duration),
    /// Only when something it consumes, or the workload itself, changes.
    OnChange,
}

impl Requeue {
    fn after(delay: Option<Duration>) -> Self {
        delay.map_or(Requeue::OnChange, Requeue::After)
    }
}

impl Controller {
    /// The one place a later evaluation of `key` is scheduled.
    pub(crate) fn requeue(&mut self, key: &WorkloadKey, requeue: Requeue, now: Instant) {
        match requeue {
            Requeue::After(delay) => self.debouncer.schedule(key, now, delay),
            Requeue::WindowOpens(delay) => self.windows.schedule(key, now, delay),
            Requeue::OnChange => {}
        }
    }

    /// Carries out an evaluation's outcome: the one step that sends, publishes, counts,
    /// reschedules and updates the cache.
    pub(super) async fn apply(&mut self, key: &WorkloadKey, outcome: Outcome, now: Instant) {
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
                requeue.map_or(Requeue::OnChange, Requeue::WindowOpens)
            }
            Outcome::Skip { reason, requeue } => {
                self.skipped(key, reason, requeue);
                Requeue::after(requeue)
            }
            Outcome::DryRun { decision, changed } => {
                if changed.is_empty() {
                    info!(workload = %key, decision, "dry run: patch not sent");
                } else {
                    info!(workload = %key, decision, changed, "dry run: patch not sent");
                }
                self.metrics.roll(key.kind.as_str(), "dry_run");
                self.count(|s| s.dry_run += 1);
                Requeue::OnChange
            }
            Outcome::Patch(write) => self.dispatch(key, *write, now),
            Outcome::Confirm { sources } => self.confirm(key, &sources).await,
            Outcome::Held { digest, event } => {
                self.metrics.skip("held");
                // Announced once per workload and content; a restart announces it once more.
                let announced =
                    self.tracker.get(key).and_then(|state| state.held.as_ref()) == Some(&digest);
                if !announced {
                    warn!(workload = %key, note = event.note, "progressive roll held");
                    if let Some(reference) = self.reference(key) {
                        self.announcer
                            .publish(key, reference, event, Some(&self.cache));
                    }
                    // Counted once its Event is queued (published by its own task).
                    self.metrics.held.inc();
                    self.count(|s| s.held += 1);
                    self.tracker.update(key, |state| state.held = Some(digest));
                }
                Requeue::After(progression::HOLD_RECHECK)
            }
        };
        self.requeue(key, requeue, Instant::now());
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
            self.tracker.forget_changes(key);
        }
    }

    /// Starts the patch in the pool, or, for an adoption the pace or the adoption slots do
    /// not allow now, queues the workload (evaluated again when its turn comes). Rolls and
    /// halts always find a slot: the loop takes a due workload only while the pool has room,
    /// and adoptions never take the last slots.
    fn dispatch(&mut self, key: &WorkloadKey, write: Write, now: Instant) -> Requeue {
        if write.purpose == Purpose::Adopt && !self.pool.may_adopt(now) {
            self.pool.queue_adoption(key);
            return Requeue::OnChange;
        }
        let tested = self
            .cache
            .workload(key)
            .and_then(|entry| entry.plan.as_ref())
            .map(|plan| plan.resource_version().to_owned())
            .unwrap_or_default();
        self.pool.start(&self.client, key, write, tested);
        Requeue::OnChange
    }

    /// Carries out a patch's answer: once acknowledged, counts it, publishes its Event and
    /// takes the acknowledged object into the cache (unless a newer state was observed
    /// meanwhile). A failure other than a conflict is evaluated again later (a 409/422 waits
    /// for the next observed state, never resent); a workload that came due while its patch
    /// was in flight is evaluated again now.
    pub(super) fn answered(&mut self, answer: Answer) {
        let (key, purpose) = match &answer {
            Answer::Sent(sent) => (sent.key.clone(), sent.purpose),
            Answer::Lost { key, purpose } => (key.clone(), *purpose),
        };
        let again = self.pool.finish(&key, purpose);
        let now = Instant::now();
        let requeue = match answer {
            Answer::Sent(sent) => self.written(*sent, now),
            Answer::Lost { .. } => {
                warn!(workload = %key, "the patch task ended without an answer; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                Requeue::After(FAILURE_RECHECK.max(self.settings.debounce))
            }
        };
        let requeue = match requeue {
            Requeue::OnChange if again => Requeue::After(Duration::ZERO),
            requeue => requeue,
        };
        self.requeue(&key, requeue, now);
    }

    fn written(&mut self, sent: Sent, now: Instant) -> Requeue {
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
                return Requeue::OnChange;
            }
            Err(Unsent::Failed(code)) => {
                warn!(workload = %key, code, "patch failed; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                return Requeue::After(write.retry_after);
            }
            Err(Unsent::TimedOut) => {
                warn!(workload = %key, "patch timed out; re-evaluating later from the cache");
                self.metrics.roll(key.kind.as_str(), "failed");
                self.count(|s| s.failures += 1);
                return Requeue::After(write.retry_after);
            }
        };
        let evict_since = write.evict_since;
        let event = write.event;
        let cause = event.as_ref().map_or("", |e| e.note.as_str());
        self.acknowledged(key, purpose, cause, now);
        if let Some(after) = write.recheck {
            self.requeue(key, Requeue::WindowOpens(after), now);
        }
        if matches!(purpose, Purpose::Roll { .. }) {
            let recovery = write.recovery;
            if recovery {
                self.metrics.recoveries.inc();
                self.count(|s| s.recoveries += 1);
            }
            self.tracker.update(key, |state| {
                state.stalled = false;
                state.held = None;
                state.recovering = recovery;
            });
        }
        if let (Purpose::Roll { .. }, Some(since)) = (purpose, evict_since) {
            // The template is not written: a run evicts the pods, and says how it ended.
            self.evictions.start(&self.client, key, since);
        } else if purpose == (Purpose::Roll { deferred: None })
            && let Ok(value) = serde_json::to_value(&object)
        {
            let acknowledged = Observation::of(key.kind, &value, CONFIG_HASH);
            if let Some(done) = self.rollouts.follow(key.clone(), acknowledged, now) {
                self.finished.push(done);
            }
        }
        if let Some(event) = event {
            let reference = object.object_ref(&workload_resource(key.kind));
            self.announcer
                .publish(key, reference, event, Some(&self.cache));
        }
        // The acknowledged object is an observed state: evaluations before its watch event
        // arrives see the new resourceVersion and record. While the patch was in flight the
        // watch may have delivered it, or a later state: the cache keeps what is newer.
        let unchanged = self
            .cache
            .workload(key)
            .and_then(|entry| entry.plan.as_ref())
            .is_some_and(|plan| plan.resource_version() == tested);
        if unchanged
            && let Some(object) = WorkloadObject::from_written(&object)
            && let Some((key, (entry, _))) = workload(key.kind, object, watching(&self.settings))
        {
            self.cache.apply_workload(key, entry);
        }
        Requeue::OnChange
    }

    /// Counts an acknowledged patch (the metrics first: whoever waits on the status reads
    /// them complete) and updates what the brakes and the Events remember.
    /// `cause` is the Event's note (object names, never values), so the log says what
    /// changed as the Event does.
    fn acknowledged(&mut self, key: &WorkloadKey, purpose: Purpose, cause: &str, now: Instant) {
        // A workload with a record already whose adoption was decided: its record is written
        // again (what it consumes changed in no way that rolls it), not adopted.
        let rerecord = purpose == Purpose::Adopt
            && self
                .cache
                .workload(key)
                .is_some_and(|entry| entry.facts.record.is_some());
        match purpose {
            Purpose::Halt => warn!(workload = %key, cause, "halted by the flap stop"),
            Purpose::Pend => info!(workload = %key, cause, "roll held; marked pending"),
            Purpose::Adopt if rerecord => info!(
                workload = %key,
                decision = "rerecord",
                "record rewritten: nothing it consumes changed in a way that rolls it"
            ),
            Purpose::Adopt => info!(
                workload = %key,
                decision = "adopt",
                "adopted: record written, nothing rolled"
            ),
            Purpose::Unpend => info!(
                workload = %key,
                decision = "unpend",
                "pending mark removed: no roll is due any more"
            ),
            Purpose::Roll { .. } => {
                info!(workload = %key, decision = purpose.as_str(), cause, "patched")
            }
        }
        self.metrics.roll(key.kind.as_str(), purpose.result());
        // The workload has a record now.
        self.tracker.update(key, |state| state.baseline = None);
        match purpose {
            Purpose::Adopt => {
                // The record now covers what was seen so far (the first list included).
                self.tracker.forget_changes(key);
                self.count(|s| s.adoptions += 1);
                let record_removed = self
                    .tracker
                    .update(key, |state| std::mem::take(&mut state.record_removed));
                if record_removed {
                    let uid = self
                        .cache
                        .workload(key)
                        .and_then(|entry| entry.plan.as_ref())
                        .map(|plan| plan.uid().to_owned());
                    self.announce_writer(key, uid, Reason::Readopted, EventType::Normal, |by| {
                        format!(
                            "Adopted again, without a roll: {by} removed rollsafe.dev/config-record (a replace of the whole object); the record is written anew for what it consumes now"
                        )
                    });
                }
            }
            Purpose::Roll { deferred } => {
                self.flap.rolled(key, now);
                let (first, held_since) = self.tracker.update(key, |state| {
                    state.changed.clear();
                    (state.first_change.take(), state.held_since.take())
                });
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
                self.count(|s| {
                    s.rolls += 1;
                    if deferred.is_some() {
                        s.deferred += 1;
                    }
                });
            }
            Purpose::Halt => {
                self.flap.forget(key);
                self.tracker.update(key, |state| {
                    state.held_since = None;
                    state.first_change = None;
                    state.changed.clear();
                });
                self.metrics.halts.inc();
                self.count(|s| s.halts += 1);
            }
            // The changes stay: the roll that follows names them.
            Purpose::Pend => {
                self.tracker.update(key, |state| {
                    let since = state.first_change.unwrap_or(now);
                    state.held_since.get_or_insert(since);
                });
                self.count(|s| s.pended += 1);
            }
            Purpose::Unpend => {
                self.tracker.update(key, |state| {
                    state.held_since = None;
                    state.first_change = None;
                    state.changed.clear();
                });
            }
        }
    }

    /// Reads each object once, consistently (a list by name without a resourceVersion, served
    /// from etcd, metadata only), before a roll the cache alone cannot justify. The cache holding
    /// the version read confirms it: the workload is evaluated again at once. Another version,
    /// or none, means the cache is behind: nothing rolls, the object's watch is relisted, and
    /// its end evaluates every workload. A failed read is tried again later; nothing rolls on
    /// an unconfirmed view.
    async fn confirm(&mut self, key: &WorkloadKey, sources: &[SourceKey]) -> Requeue {
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
                    return Requeue::After(FAILURE_RECHECK.max(self.settings.debounce));
                }
            }
        }
        if behind {
            Requeue::OnChange
        } else {
            Requeue::After(Duration::ZERO)
        }
    }

    /// The resourceVersion of a source as a consistent read returns it now (`0`: it does not
    /// exist, or the version is not a number); `None` when the read fails or times out.
    async fn read_version(&self, source: &SourceKey) -> Option<u64> {
        let resource = api_resource(source.kind);
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
}
