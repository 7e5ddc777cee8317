//! One evaluation of a workload, decided without I/O.
//!
//! [`Evaluator::evaluate`] reads the cache, the changes not rolled for yet and the brakes, and
//! returns an [`Outcome`]: what to write, what to count, when to look again and which Event to
//! publish. The controller carries it out in one step, the only one that sends, publishes,
//! counts, reschedules and updates the cache. It is kube-runtime's split (a reconciler returns
//! an `Action` the runtime applies) and linkerd's (an index produces the patch that a
//! leader-only writer sends), kept inside the controller's single task.
//!
//! Leadership enters once, as the instant a patch started now must have ended by
//! ([`Evaluator::deadline`]); every interval after which a workload is evaluated again is
//! decided here. The brakes' own bookkeeping is part of deciding: a roll that goes ahead has
//! taken its token, and the flap stop drops the rolls that left its window.

use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::time::Duration;

use jiff::Timestamp;
use json_patch::Patch;
use kube::runtime::events::EventType;
use rollsafe_core::strategy::{Strategy, StrategyDefaults, eviction_instant};
use rollsafe_core::time::rfc3339_millis;
use rollsafe_core::window::RestartWindow;
use rollsafe_core::workload::{Deferral, WatchedKind};
use tokio::time::Instant;

use crate::announce::{Announcement, Reason};
use crate::approval::{self, HeldBy, PendingMark};
use crate::cache::{Cache, SourceKey, WorkloadEntry, WorkloadKey};
use crate::decision::{self, Plan, RollDecision};
use crate::digest::{self, Fingerprinter};
use crate::freshness;
use crate::limits::{FlapGuard, FlapLimit, TokenBucket};
use crate::progression::{self, Gate};
use crate::tracker::Tracker;
use crate::windows::{self, Closed};

/// The most object names an Event note lists.
const MAX_NAMES_IN_NOTE: usize = 10;

/// What one evaluation comes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Nothing is written.
    Skip {
        /// Why, as counted in `rollsafe_watch_skipped_total`; `None`: the decision writes
        /// nothing and nothing is counted.
        reason: Option<SkipReason>,
        /// Evaluate again after this long (the rate limit's wait); `None`: when something
        /// changes.
        requeue: Option<Duration>,
    },
    /// `--dry-run`: decided and counted, not sent.
    DryRun {
        /// The decision, as a static label ([`RollDecision::as_str`]).
        decision: &'static str,
        /// The objects whose changes it is for (`Secret/db, ConfigMap/settings`; empty for an
        /// adoption or when nothing was seen to change), as the Event would name them.
        changed: String,
    },
    /// A patch to send, once.
    Patch(Box<Write>),
    /// A roll is due, but the cache cannot show that its view of these objects is at least as
    /// new as the one the workload's record was written from: read each once, consistently
    /// (see [`crate::freshness`]), then evaluate again. Nothing is written.
    Confirm {
        /// The objects to read.
        sources: Vec<SourceKey>,
    },
    /// A progressive roll held at a stalled workload of an earlier wave: nothing is written;
    /// the workload is announced once (`RolloutHeld`) and looked at again after
    /// [`progression::HOLD_RECHECK`].
    Held {
        /// The digest it would roll to (to announce each hold once).
        digest: String,
        /// Its Event.
        event: Announcement,
    },
}

/// Why an evaluation writes nothing (the `reason` label of `rollsafe_watch_skipped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Not opted in.
    NotWatched {
        /// The code of an opt-in that was not understood, if so.
        opt_in_error: Option<&'static str>,
    },
    /// Halted by the flap stop, until the annotation is removed.
    Halted,
    /// The record matches what it consumes.
    Unchanged,
    /// A roll is due but an object it consumes does not exist (new pods could not start; the
    /// running ones keep what they have): the object's return decides.
    SourceMissing,
    /// The global rate limit postpones the roll.
    RateLimited,
    /// Adopt or roll, but the object cannot be patched (uid, resourceVersion or template
    /// missing).
    Unpatchable,
    /// Not leading, or the Lease is not confirmed: no patch may be started.
    NotLeader,
    /// A progressive roll waits for an earlier wave to finish.
    WaitingForWave,
    /// A watch is stale (stalled, or found behind a consistent read and relisting): nothing is
    /// patched until every watch is fresh again.
    StaleView,
    /// A restart window holds the roll, and the workload is marked pending already: looked at
    /// again when the window opens ([`crate::windows`]).
    RestartWindow,
    /// The roll awaits approval, and the workload is marked pending already: the approval (an
    /// edit of the workload) decides ([`crate::approval`]).
    AwaitingApproval,
}

impl SkipReason {
    /// The metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::NotWatched { .. } => "not_watched",
            SkipReason::Halted => "halted",
            SkipReason::Unchanged => "unchanged",
            SkipReason::SourceMissing => "source_missing",
            SkipReason::RateLimited => "rate_limited",
            SkipReason::Unpatchable => "unpatchable",
            SkipReason::NotLeader => "not_leader",
            SkipReason::WaitingForWave => "waiting_for_wave",
            SkipReason::StaleView => "stale_view",
            SkipReason::RestartWindow => "restart_window",
            SkipReason::AwaitingApproval => "awaiting_approval",
        }
    }

    /// Whether the workload is settled: there is nothing to roll for now, so the changes seen
    /// so far are not its news and are forgotten.
    pub fn settles(self) -> bool {
        matches!(
            self,
            SkipReason::NotWatched { .. } | SkipReason::Halted | SkipReason::Unchanged
        )
    }
}

/// A patch to send, and what follows once it is acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    /// The JSON Patch (its `test`s of uid and resourceVersion first).
    pub document: Patch,
    /// What it does.
    pub purpose: Purpose,
    /// When the patch must have ended: the patch timeout, cut to what remains of the Lease.
    pub deadline: Instant,
    /// The Event published on the workload once the patch is acknowledged.
    pub event: Option<Announcement>,
    /// After a failure other than a conflict: evaluate again after this long, from the cache
    /// as it then is. A conflict waits for the next observed state instead.
    pub retry_after: Duration,
    /// Once acknowledged: evaluate again after this long (a held roll, when its window
    /// opens); `None`: when something changes.
    pub recheck: Option<Duration>,
    /// A recovery roll past the flap stop's limit (it replaces a rollout that stalled): if
    /// its own rollout stalls too, the next roll past the limit halts.
    pub recovery: bool,
    /// A roll by eviction: once acknowledged, a run evicts the pods started before this
    /// instant (`rollsafe.dev/evicting`).
    pub evict_since: Option<Timestamp>,
}

/// What a patch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Writes the record, rolls nothing.
    Adopt,
    /// Sets the pod-template annotation and the record; with a deferral the pods do not roll
    /// now.
    Roll {
        /// Why the pods will not roll now, if so.
        deferred: Option<Deferral>,
    },
    /// Halts the workload (the flap stop).
    Halt,
    /// Marks a roll held by a restart window (`rollsafe.dev/pending`); rolls nothing.
    Pend,
    /// Removes a pending mark no roll is due for any more; rolls nothing.
    Unpend,
}

impl Purpose {
    /// A static label for logs ([`RollDecision::as_str`]'s, and `halt`).
    pub fn as_str(self) -> &'static str {
        match self {
            Purpose::Adopt => "adopt",
            Purpose::Roll { deferred: None } => "roll",
            Purpose::Roll { deferred: Some(_) } => "deferred",
            Purpose::Halt => "halt",
            Purpose::Pend => "pend",
            Purpose::Unpend => "unpend",
        }
    }

    /// The `result` label of `rollsafe_watch_rolls_total` once acknowledged.
    pub fn result(self) -> &'static str {
        match self {
            Purpose::Adopt => "adopted",
            Purpose::Roll { deferred: None } => "rolled",
            Purpose::Roll { deferred: Some(_) } => "deferred",
            Purpose::Halt => "halted",
            Purpose::Pend => "pending",
            Purpose::Unpend => "unpended",
        }
    }
}

/// What one evaluation reads, and the brakes it moves.
pub struct Evaluator<'a> {
    /// The caches.
    pub cache: &'a Cache,
    /// Computes the record.
    pub fingerprinter: &'a Fingerprinter,
    /// What is remembered of each workload: the changes it has not rolled for yet (named in
    /// Events), whether its rollout stalled, its baseline.
    pub tracker: &'a Tracker,
    /// Decide and count, never patch.
    pub dry_run: bool,
    /// When a patch started now must have ended; `None`: no patch may be started (this
    /// replica does not surely hold the Lease).
    pub deadline: Option<Instant>,
    /// How long after a failed patch the workload is evaluated again.
    pub retry_after: Duration,
    /// The flap stop.
    pub flap: &'a mut FlapGuard,
    /// The global token bucket.
    pub bucket: &'a mut TokenBucket,
    /// `--rollout progressive`: every source's consumers roll in waves.
    pub progressive_all: bool,
    /// A watch is stale: nothing may be patched.
    pub stale: bool,
    /// The view is a consistent read made for this evaluation (`rollsafe why` reads each object
    /// from the API server): the freshness stage has nothing to prove.
    pub consistent: bool,
    /// `--restart-window`: the window of every workload and source without its own.
    pub restart_window: Option<&'a RestartWindow>,
    /// The wall-clock time windows are read at.
    pub wall: Timestamp,
    /// `--require-approval`: the namespaces whose rolls all await approval.
    pub require_approval: &'a [String],
    /// `--strategy`: how workloads that do not choose restart, per namespace.
    pub strategy: &'a StrategyDefaults,
}

/// The stages of one evaluation, in the order they run. Each either lets the roll go on or
/// ends the evaluation with its [`Outcome`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// What the records say: not watched, halted, unchanged, adopt or roll.
    Decide,
    /// A roll only for a view at least as new as the record's.
    Freshness,
    /// A progressive roll waits for, or is held at, an earlier wave.
    Progression,
    /// An approval or a restart window holds the roll.
    Holds,
    /// Whether anything may be written now: a dry run, a stale watch, leadership.
    Permission,
    /// The flap stop and the global rate limit.
    Brakes,
    /// The patch.
    Write,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 7] = [
        Stage::Decide,
        Stage::Freshness,
        Stage::Progression,
        Stage::Holds,
        Stage::Permission,
        Stage::Brakes,
        Stage::Write,
    ];

    /// Its name, as `why` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Decide => "decide",
            Stage::Freshness => "freshness",
            Stage::Progression => "progression",
            Stage::Holds => "holds",
            Stage::Permission => "permission",
            Stage::Brakes => "brakes",
            Stage::Write => "write",
        }
    }
}

/// What one stage came to, in an [`Explanation`].
#[derive(Debug, Clone, PartialEq)]
pub struct StageReport {
    /// The stage.
    pub stage: Stage,
    /// `None`: the roll went on past it; otherwise the outcome it ended the evaluation with.
    pub stopped: Option<Outcome>,
}

/// The same evaluation as [`Evaluator::evaluate`], stage by stage: what each stage came to, up
/// to the one that ended it, and the outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The stages that ran, in order; the last one ended the evaluation.
    pub stages: Vec<StageReport>,
    /// The decision of the records, when the workload was cached.
    pub decision: Option<RollDecision>,
    /// The objects whose changes the roll is for (empty: none seen, or not a roll).
    pub changed: BTreeSet<SourceKey>,
    /// The outcome; `None` when the workload is not cached.
    pub outcome: Option<Outcome>,
}

/// What the decide stage found, for the stages after it.
struct Decided<'e> {
    entry: &'e WorkloadEntry,
    plan: &'e Plan,
    digest: String,
    baseline: bool,
    decision: RollDecision,
    purpose: Purpose,
}

/// How a roll passed the brakes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Braked {
    /// Counted by the flap stop, a token taken.
    Counted,
    /// A recovery: it replaces a rollout that stalled, and went through the flap stop past
    /// its limit (counted, not halted).
    Recovery,
    /// A CronJob: its roll restarts nothing now (its next Job starts with the new template),
    /// so neither brake applies.
    Exempt,
}

/// Runs one stage: its outcome ends the evaluation (recorded when explaining).
macro_rules! stage {
    ($trace:expr, $stage:expr, $body:expr) => {
        match $body {
            ControlFlow::Continue(value) => {
                if let Some(trace) = $trace.as_mut() {
                    trace.push(StageReport {
                        stage: $stage,
                        stopped: None,
                    });
                }
                value
            }
            ControlFlow::Break(outcome) => {
                if let Some(trace) = $trace.as_mut() {
                    trace.push(StageReport {
                        stage: $stage,
                        stopped: Some(outcome.clone()),
                    });
                }
                return Some(outcome);
            }
        }
    };
}

impl Evaluator<'_> {
    /// The outcome of evaluating `key` at `now`; `None` when it is not cached (deleted since it
    /// was scheduled).
    pub fn evaluate(self, key: &WorkloadKey, now: Instant) -> Option<Outcome> {
        self.run(key, now, &mut None, &mut BTreeSet::new(), &mut None)
    }

    /// The same evaluation, recorded stage by stage. The brakes it is given are moved as by
    /// [`Evaluator::evaluate`]: a caller explaining without acting passes its own copies.
    pub fn explain(self, key: &WorkloadKey, now: Instant) -> Explanation {
        let mut trace = Some(Vec::new());
        let mut changed = BTreeSet::new();
        let mut decision = None;
        let outcome = self.run(key, now, &mut trace, &mut changed, &mut decision);
        Explanation {
            stages: trace.unwrap_or_default(),
            decision,
            changed,
            outcome,
        }
    }

    fn run(
        mut self,
        key: &WorkloadKey,
        now: Instant,
        trace: &mut Option<Vec<StageReport>>,
        seen: &mut BTreeSet<SourceKey>,
        decision: &mut Option<RollDecision>,
    ) -> Option<Outcome> {
        let cache = self.cache;
        let entry = cache.workload(key)?;
        let digest = cache.record(key, self.fingerprinter)?;
        let decided = stage!(
            trace,
            Stage::Decide,
            self.decide(key, entry, digest, decision)
        );
        let roll = matches!(decided.purpose, Purpose::Roll { .. });
        if roll {
            stage!(trace, Stage::Freshness, self.prove_freshness(key, &decided));
        }
        let changed = self.changes(key, &decided);
        seen.clone_from(&changed);
        let names = names(&changed);
        if roll {
            stage!(
                trace,
                Stage::Progression,
                self.progression(key, &decided, &changed)
            );
            stage!(
                trace,
                Stage::Holds,
                self.holds(key, &decided, &names, &changed)
            );
        }
        let (document, deadline, evict_since) = stage!(
            trace,
            Stage::Permission,
            self.permission(key, &decided, &names)
        );
        let braked = stage!(
            trace,
            Stage::Brakes,
            self.brakes(key, &decided, now, &names, &changed)
        );
        let mut write = self.write(&decided, document, deadline, braked, &names, &changed);
        if let Outcome::Patch(patch) = &mut write {
            patch.evict_since = evict_since;
            if let Some(event) = patch.event.as_mut() {
                match (evict_since, decided.entry.operator_owner()) {
                    (Some(_), _) => event.note.push_str(
                        ". Restarting by eviction (rollsafe.dev/strategy: evict): the pods are evicted one at a time, PodDisruptionBudgets holding; the pod template is not written",
                    ),
                    (None, Some(owner)) => event.note.push_str(&format!(
                        ". Its template belongs to {owner}: if that operator reverts it, restart by eviction instead (rollsafe.dev/strategy: evict)"
                    )),
                    (None, None) => {}
                }
            }
        }
        stage!(
            trace,
            Stage::Write,
            ControlFlow::<Outcome, ()>::Break(write)
        );
        None
    }

    /// Decide: what the records say (the baseline standing in for a missing record).
    fn decide<'e>(
        &self,
        key: &WorkloadKey,
        entry: &'e WorkloadEntry,
        digest: String,
        seen: &mut Option<RollDecision>,
    ) -> ControlFlow<Outcome, Decided<'e>> {
        // Without a record, the record it had just before a consumed object changed in this
        // replica's view decides as the workload's record would, so such a change rolls (it is
        // not absorbed into the adoption).
        let baseline = self
            .tracker
            .baseline(key)
            .filter(|_| entry.facts.record.is_none());
        let decision = match baseline {
            Some(baseline) if baseline != digest => {
                let facts = decision::Facts {
                    record: Some(baseline.to_owned()),
                    ..entry.facts.clone()
                };
                decision::decide(&facts, &digest)
            }
            _ => decision::decide(&entry.facts, &digest),
        };
        *seen = Some(decision.clone());
        let purpose = match &decision {
            RollDecision::NotWatched => {
                return ControlFlow::Break(skip(SkipReason::NotWatched {
                    opt_in_error: entry.opt_in_error,
                }));
            }
            RollDecision::Halted => return ControlFlow::Break(skip(SkipReason::Halted)),
            // A pending mark no roll is due for any more (the change was undone while held)
            // is removed: it would tell of a roll that will not happen.
            RollDecision::Unchanged if entry.plan.as_ref().is_some_and(Plan::is_pending) => {
                Purpose::Unpend
            }
            RollDecision::Unchanged => return ControlFlow::Break(skip(SkipReason::Unchanged)),
            RollDecision::Adopt { .. } => Purpose::Adopt,
            RollDecision::Roll { deferred, .. } => {
                if !self.cache.sources_present(key) {
                    return ControlFlow::Break(skip(SkipReason::SourceMissing));
                }
                Purpose::Roll {
                    deferred: *deferred,
                }
            }
        };
        let Some(plan) = entry.plan.as_ref() else {
            return ControlFlow::Break(skip(SkipReason::Unpatchable));
        };
        ControlFlow::Continue(Decided {
            entry,
            plan,
            digest,
            baseline: baseline.is_some(),
            decision,
            purpose,
        })
    }

    /// Prove freshness: a roll only for a view at least as new as the record's (before the
    /// gate and the brakes: a roll that waits for a read takes no token). A baseline is this
    /// replica's own view before the change: nothing to prove.
    fn prove_freshness(&self, key: &WorkloadKey, decided: &Decided<'_>) -> ControlFlow<Outcome> {
        if decided.baseline || self.consistent {
            return ControlFlow::Continue(());
        }
        let unproven = unproven(self.cache, key, decided.entry, &decided.digest);
        if unproven.is_empty() {
            return ControlFlow::Continue(());
        }
        if self.deadline.is_none() && !self.dry_run {
            return ControlFlow::Break(skip(SkipReason::NotLeader));
        }
        // A stream already relisting (or stalled) answers this when it is fresh.
        if self.stale && !self.dry_run {
            return ControlFlow::Break(skip(SkipReason::StaleView));
        }
        ControlFlow::Break(Outcome::Confirm { sources: unproven })
    }

    /// The objects whose changes the roll is for: as the watches named them, or, when no
    /// watch event did (the change happened while this replica was not watching), as the
    /// records say.
    fn changes(&self, key: &WorkloadKey, decided: &Decided<'_>) -> BTreeSet<SourceKey> {
        if let Some(changed) = self.tracker.changed(key) {
            return changed.clone();
        }
        decided
            .entry
            .facts
            .record
            .as_deref()
            .map(|record| {
                let consumed = self.cache.consumed_objects(key, decided.entry);
                digest::changed_objects(record, &decided.digest, consumed.iter())
                    .into_iter()
                    .map(|config| SourceKey::of(&key.namespace, config))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Progression: a progressive roll waits for, or is held by, the earlier waves (before
    /// the brakes: a roll that does not go takes no token and counts for no flap).
    fn progression(
        &self,
        key: &WorkloadKey,
        decided: &Decided<'_>,
        changed: &BTreeSet<SourceKey>,
    ) -> ControlFlow<Outcome> {
        match progression::gate(
            self.cache,
            self.fingerprinter,
            key,
            changed,
            self.progressive_all,
            &|workload| self.tracker.is_stalled(workload),
        ) {
            Gate::Go => ControlFlow::Continue(()),
            Gate::Wait => ControlFlow::Break(Outcome::Skip {
                reason: Some(SkipReason::WaitingForWave),
                requeue: Some(progression::WAVE_RECHECK),
            }),
            Gate::Held { stalled, source } => ControlFlow::Break(Outcome::Held {
                digest: decided.digest.clone(),
                event: Announcement {
                    type_: EventType::Warning,
                    reason: Reason::RolloutHeld,
                    note: format!(
                        "Not rolled for changes to {}/{}: the progressive rollout stopped at {}/{}, whose rollout stalled",
                        source.kind.as_str(),
                        source.name,
                        stalled.kind.as_str(),
                        stalled.name
                    ),
                    related: Some(source.clone()),
                    causes: vec![source],
                },
            }),
        }
    }

    /// Holds: a roll that needs an approval waits for it; one outside its restart window is
    /// held (both before the brakes: a held roll takes no token and counts for no flap), the
    /// workload marked pending once per content.
    fn holds(
        &self,
        key: &WorkloadKey,
        decided: &Decided<'_>,
        names: &str,
        changed: &BTreeSet<SourceKey>,
    ) -> ControlFlow<Outcome> {
        let Decided {
            entry,
            plan,
            digest,
            ..
        } = decided;
        let due = digest::parse_record(digest).0;
        if approval::required(self.cache, key, entry, changed, self.require_approval)
            && entry.approved.as_deref() != Some(due)
        {
            return ControlFlow::Break(self.await_approval(key, entry, plan, due, names, changed));
        }
        if let Some(closed) =
            windows::holding(self.cache, entry, changed, self.restart_window, self.wall)
        {
            return ControlFlow::Break(self.hold(entry, plan, digest, &closed, names, changed));
        }
        ControlFlow::Continue(())
    }

    /// Permission: the patch document, and the deadline it must be sent by — or what to do
    /// instead: a dry run's decision, a skip while a watch is stale or this replica does not
    /// lead.
    fn permission(
        &self,
        key: &WorkloadKey,
        decided: &Decided<'_>,
        names: &str,
    ) -> ControlFlow<Outcome, (Patch, Instant, Option<Timestamp>)> {
        let Decided {
            entry,
            plan,
            decision,
            purpose,
            ..
        } = decided;
        let versions = self.cache.versions(key).unwrap_or_default();
        // The roll times the brakes read back after a failover: kept as long as either brake
        // looks back.
        let rolled_at = if matches!(purpose, Purpose::Roll { .. }) {
            let keep = self.flap.limit().window.max(self.bucket.refill_time());
            entry.rolled_at.after_roll(self.wall, keep)
        } else {
            String::new()
        };
        let evict_since = self.evicts(key, entry, *purpose);
        let document = match (purpose, evict_since) {
            (Purpose::Unpend, _) => plan.unpend_document(),
            (_, Some(since)) => {
                plan.evict_document(decision, &versions, &rolled_at, &rfc3339_millis(since))
            }
            _ => plan.document(decision, &versions, &change_cause(names), &rolled_at),
        };
        let Some(document) = document else {
            return ControlFlow::Break(nothing());
        };
        if self.dry_run {
            return ControlFlow::Break(Outcome::DryRun {
                decision: decision.as_str(),
                changed: names.to_owned(),
            });
        }
        if self.stale {
            return ControlFlow::Break(skip(SkipReason::StaleView));
        }
        match self.deadline {
            Some(deadline) => ControlFlow::Continue((document, deadline, evict_since)),
            None => ControlFlow::Break(skip(SkipReason::NotLeader)),
        }
    }

    /// The instant a roll by eviction restarts pods for, when `purpose` is a roll and the
    /// workload restarts by eviction: its own `rollsafe.dev/strategy`, else `--strategy` for
    /// its namespace. Deployments, StatefulSets and DaemonSets only: a CronJob's next Job and
    /// an Argo Rollout's pods are restarted by their template.
    fn evicts(
        &self,
        key: &WorkloadKey,
        entry: &WorkloadEntry,
        purpose: Purpose,
    ) -> Option<Timestamp> {
        let strategy = entry
            .strategy
            .unwrap_or_else(|| self.strategy.for_namespace(&key.namespace));
        (matches!(purpose, Purpose::Roll { .. })
            && strategy == Strategy::Evict
            && key.kind.workload().is_some())
        .then(|| eviction_instant(self.wall))
    }

    /// Brakes: the flap stop, then the global rate limit, for a roll.
    ///
    /// - A CronJob's roll restarts nothing now (its next Job starts with the new template), so
    ///   it cannot storm: neither brake applies to it.
    /// - A **recovery** — a roll that replaces a rollout this replica saw stall (its own
    ///   `RolloutStalled`), or one held behind such a rollout (`RolloutHeld`) — goes through
    ///   the flap stop past its limit: counted, not halted. Unless the last roll past the
    ///   limit was itself a recovery and stalled again: recoveries that keep stalling are a
    ///   storm, and halt.
    /// - Every other roll past the limit halts the workload, naming what it withheld.
    fn brakes(
        &mut self,
        key: &WorkloadKey,
        decided: &Decided<'_>,
        now: Instant,
        names: &str,
        changed: &BTreeSet<SourceKey>,
    ) -> ControlFlow<Outcome, Braked> {
        let Purpose::Roll { .. } = decided.purpose else {
            return ControlFlow::Continue(Braked::Counted);
        };
        if key.kind == WatchedKind::CronJob {
            return ControlFlow::Continue(Braked::Exempt);
        }
        // Rolls an earlier leader (or this process before a restart) made count too.
        self.flap
            .seed(key, decided.entry.rolled_at.instants(self.wall, now));
        let mut braked = Braked::Counted;
        if self.flap.would_flap(key, now) {
            let state = self.tracker.get(key);
            let recovery = state.is_some_and(|s| s.stalled || s.held.is_some());
            let recovering = state.is_some_and(|s| s.recovering);
            if recovery && !recovering {
                braked = Braked::Recovery;
            } else {
                let limit = self.flap.limit();
                let reason = format!(
                    "flapping: {} rolls within {}s; remove this annotation to resume",
                    limit.rolls,
                    limit.window.as_secs()
                );
                return ControlFlow::Break(match decided.plan.halt_document(&reason) {
                    Some(halt) => Outcome::Patch(Box::new(Write {
                        document: halt,
                        purpose: Purpose::Halt,
                        deadline: self.deadline.unwrap_or(now),
                        event: Some(halted(limit, names, changed, recovering)),
                        retry_after: self.retry_after,
                        recheck: None,
                        recovery: false,
                        evict_since: None,
                    })),
                    None => nothing(),
                });
            }
        }
        if let Err(wait) = self.bucket.take(now) {
            return ControlFlow::Break(Outcome::Skip {
                reason: Some(SkipReason::RateLimited),
                requeue: Some(wait),
            });
        }
        ControlFlow::Continue(braked)
    }

    /// Write: the patch, with its Event once acknowledged.
    fn write(
        &self,
        decided: &Decided<'_>,
        document: Patch,
        deadline: Instant,
        braked: Braked,
        names: &str,
        changed: &BTreeSet<SourceKey>,
    ) -> Outcome {
        let event = match decided.purpose {
            Purpose::Roll { deferred } => {
                let mut event = rolled(deferred, names, changed);
                if braked == Braked::Recovery {
                    event.reason = Reason::Recovered;
                    let limit = self.flap.limit();
                    event.note.push_str(&format!(
                        ". A recovery: it replaces a rollout that stalled, so the flap stop counted it ({} rolls within {}s) but did not halt it",
                        limit.rolls,
                        limit.window.as_secs()
                    ));
                }
                Some(event)
            }
            _ => None,
        };
        Outcome::Patch(Box::new(Write {
            document,
            purpose: decided.purpose,
            deadline,
            event,
            retry_after: self.retry_after,
            recheck: None,
            recovery: braked == Braked::Recovery,
            evict_since: None,
        }))
    }
}

impl Evaluator<'_> {
    /// Whether a held roll's mark may be written now: the deadline it must end by, or what to
    /// do instead — a dry run's `decision`, or a skip while a watch is stale or this replica
    /// does not lead.
    fn may_mark(&self, decision: &'static str, names: &str) -> Result<Instant, Box<Outcome>> {
        if self.dry_run {
            return Err(Box::new(Outcome::DryRun {
                decision,
                changed: names.to_owned(),
            }));
        }
        if self.stale {
            return Err(Box::new(skip(SkipReason::StaleView)));
        }
        self.deadline
            .ok_or_else(|| Box::new(skip(SkipReason::NotLeader)))
    }

    /// The outcome of a roll to `due` (its workload digest) awaiting approval: the pending mark
    /// written once per content, with a `Pending` Event saying how to approve; then nothing
    /// until the workload changes (an approval is an edit of it).
    fn await_approval(
        &self,
        key: &WorkloadKey,
        entry: &crate::cache::WorkloadEntry,
        plan: &Plan,
        due: &str,
        names: &str,
        changed: &BTreeSet<SourceKey>,
    ) -> Outcome {
        let deadline = match self.may_mark("awaiting_approval", names) {
            Ok(deadline) => deadline,
            Err(outcome) => return *outcome,
        };
        let marked = entry
            .pending
            .as_deref()
            .and_then(PendingMark::parse)
            .is_some_and(|mark| mark.held_by == HeldBy::Approval && mark.digest == due);
        if marked {
            return skip(SkipReason::AwaitingApproval);
        }
        let Some(document) = plan.pend_document(&approval::mark(self.wall, due)) else {
            return nothing();
        };
        Outcome::Patch(Box::new(Write {
            document,
            purpose: Purpose::Pend,
            deadline,
            event: Some(Announcement {
                type_: EventType::Normal,
                reason: Reason::Pending,
                note: approval::awaiting_note(key, names),
                related: changed.first().cloned(),
                causes: changed.iter().cloned().collect(),
            }),
            retry_after: self.retry_after,
            recheck: None,
            recovery: false,
            evict_since: None,
        }))
    }

    /// The outcome of a roll held by `closed`: the pending mark written once per content (and
    /// announced with a `Pending` Event), then looked at again when the window opens.
    fn hold(
        &self,
        entry: &crate::cache::WorkloadEntry,
        plan: &Plan,
        digest: &str,
        closed: &Closed,
        names: &str,
        changed: &BTreeSet<SourceKey>,
    ) -> Outcome {
        let deadline = match self.may_mark("pending", names) {
            Ok(deadline) => deadline,
            Err(outcome) => return *outcome,
        };
        let mark = closed.mark(digest::parse_record(digest).0);
        let recheck = closed.recheck(self.wall);
        if entry.pending.as_deref() == Some(mark.as_str()) {
            return Outcome::Skip {
                reason: Some(SkipReason::RestartWindow),
                requeue: Some(recheck),
            };
        }
        let Some(document) = plan.pend_document(&mark) else {
            return nothing();
        };
        Outcome::Patch(Box::new(Write {
            document,
            purpose: Purpose::Pend,
            deadline,
            event: Some(Announcement {
                type_: EventType::Normal,
                reason: Reason::Pending,
                note: closed.note(names),
                related: changed.first().cloned(),
                causes: changed.iter().cloned().collect(),
            }),
            retry_after: self.retry_after,
            recheck: Some(recheck),
            recovery: false,
            evict_since: None,
        }))
    }
}

/// The objects a roll of `key` (to `current`, its record now) is for whose cached entry is not
/// proven at least as new as what its record was written from: the objects whose recorded
/// state differs (every consumed object, for a record without per-object entries), each
/// without a recorded version the cache held ([`crate::freshness::Currency::proves`]).
fn unproven(
    cache: &Cache,
    key: &WorkloadKey,
    entry: &crate::cache::WorkloadEntry,
    current: &str,
) -> Vec<SourceKey> {
    let record = entry.facts.record.as_deref().unwrap_or_default();
    let consumed = cache.consumed_objects(key, entry);
    let changed = if digest::parse_record(record).1.is_some() {
        digest::changed_objects(record, current, consumed.iter())
    } else {
        consumed.iter().collect()
    };
    let versions = entry
        .versions
        .as_deref()
        .map(freshness::parse_versions)
        .unwrap_or_default();
    changed
        .into_iter()
        .filter(|config| {
            let recorded = versions.get(digest::record_id(config).as_str()).copied();
            cache
                .source_entry(&SourceKey::of(&key.namespace, config))
                .is_some_and(|found| !found.currency.proves(recorded))
        })
        .map(|config| SourceKey::of(&key.namespace, config))
        .collect()
}

fn skip(reason: SkipReason) -> Outcome {
    Outcome::Skip {
        reason: Some(reason),
        requeue: None,
    }
}

fn nothing() -> Outcome {
    Outcome::Skip {
        reason: None,
        requeue: None,
    }
}

/// The Event of a roll: `Rolled`, or `RolloutDeferred` when the pods do not roll now (a
/// `Warning`, except for a CronJob, whose pods always start with its next Job: `Normal`).
fn rolled(deferred: Option<Deferral>, names: &str, changed: &BTreeSet<SourceKey>) -> Announcement {
    let related = changed.first().cloned();
    let causes: Vec<SourceKey> = changed.iter().cloned().collect();
    let changes = if names.is_empty() {
        String::new()
    } else {
        format!(" for changes to {names}")
    };
    match deferred {
        Some(Deferral::NextRun) => Announcement {
            type_: EventType::Normal,
            reason: Reason::RolloutDeferred,
            note: format!(
                "Jobs' pod template updated{changes}: {}",
                Deferral::NextRun.when_it_rolls()
            ),
            related,
            causes,
        },
        None => Announcement {
            type_: EventType::Normal,
            reason: Reason::Rolled,
            note: if names.is_empty() {
                "Rolled: what it consumes changed while rollsafe was not watching".to_owned()
            } else {
                format!("Rolled for changes to {names}")
            },
            related,
            causes,
        },
        Some(deferral) => Announcement {
            type_: EventType::Warning,
            reason: Reason::RolloutDeferred,
            note: format!(
                "Pod template updated{changes} but pods do not roll now: {}",
                deferral.reason()
            ),
            related,
            causes,
        },
    }
}

/// The Event of a halt: what was not rolled, and why. `recovering`: the roll it withheld
/// would have been a recovery, but the last recovery stalled too.
fn halted(
    limit: FlapLimit,
    names: &str,
    changed: &BTreeSet<SourceKey>,
    recovering: bool,
) -> Announcement {
    let withheld = if names.is_empty() {
        "Not rolled".to_owned()
    } else {
        format!("Not rolled for changes to {names}")
    };
    let recovery = if recovering {
        " (its last recovery roll stalled too)"
    } else {
        ""
    };
    Announcement {
        type_: EventType::Warning,
        reason: Reason::Halted,
        note: format!(
            "{withheld}: it was rolled {} times within {}s{recovery}. Remove the rollsafe.dev/halted annotation to resume",
            limit.rolls,
            limit.window.as_secs()
        ),
        related: changed.first().cloned(),
        causes: changed.iter().cloned().collect(),
    }
}

/// `Secret/db, ConfigMap/settings`, at most [`MAX_NAMES_IN_NOTE`] names, then a count.
/// The `kubernetes.io/change-cause` of a roll: the objects, never their values.
fn change_cause(names: &str) -> String {
    if names.is_empty() {
        "rollsafe watch: what it consumes changed while rollsafe was not watching".to_owned()
    } else {
        format!("rollsafe watch: rolled for changes to {names}")
    }
}

fn names(changed: &BTreeSet<SourceKey>) -> String {
    let mut listed: Vec<String> = changed
        .iter()
        .take(MAX_NAMES_IN_NOTE)
        .map(|key| format!("{}/{}", key.kind.as_str(), key.name))
        .collect();
    if changed.len() > MAX_NAMES_IN_NOTE {
        listed.push(format!("and {} more", changed.len() - MAX_NAMES_IN_NOTE));
    }
    listed.join(", ")
}

#[cfg(test)]
mod tests;
