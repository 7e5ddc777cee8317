//! The decision step on a cache built by hand: no API server, paused time where the brakes'
//! windows matter.

use std::time::Duration;

use base64::Engine as _;
use kube::runtime::events::EventType;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::workload::{Deferral, WatchedKind};
use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;
use crate::announce::Reason;
use crate::cache::{SourceEntry, WorkloadEntry};
use crate::limits::FlapLimit;
use crate::tracker::Tracker;
use rollsafe_core::annotations::{PENDING, RESTART_WINDOW};

const NS: &str = "shop";
/// Thursday 2026-12-03, 07:00 in Berlin.
const THURSDAY_EARLY: &str = "2026-12-03T06:00:00Z";

fn web() -> WorkloadKey {
    WorkloadKey {
        kind: WatchedKind::Deployment,
        namespace: NS.into(),
        name: "web".into(),
    }
}

fn db() -> SourceKey {
    SourceKey {
        kind: TargetKind::Secret,
        namespace: NS.into(),
        name: "db".into(),
    }
}

fn secret(password: &str) -> SourceEntry {
    secret_at(password, "3")
}

fn secret_at(password: &str, resource_version: &str) -> SourceEntry {
    let value = base64::engine::general_purpose::STANDARD.encode(password);
    SourceEntry::from_object(
        TargetKind::Secret,
        &json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "namespace": NS, "uid": "s-1",
                "resourceVersion": resource_version},
            "data": {"password": value}}),
    )
}

/// `web`, reading db/password, with these metadata annotations.
fn deployment(annotations: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "uid": "w-1", "resourceVersion": "7",
            "annotations": annotations},
        "spec": {"template": {"metadata": {"annotations": {}}, "spec": {"containers": [
            {"name": "app", "env": [{"name": "P",
                "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]}}}})
}

/// `web` as a CronJob, reading db/password, with these metadata annotations.
fn cronjob(annotations: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": "web", "namespace": NS, "uid": "w-1", "resourceVersion": "7",
            "annotations": annotations},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {
            "metadata": {"annotations": {}}, "spec": {"containers": [
            {"name": "app", "env": [{"name": "P",
                "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}]}]}}}}}})
}

/// The controller's state around one workload.
struct World {
    /// The workload: `web`, a Deployment unless [`World::cronjob`].
    key: WorkloadKey,
    cache: Cache,
    fingerprinter: Fingerprinter,
    /// What the controller remembers of `web`: changes, baseline, stall.
    tracker: Tracker,
    flap: FlapGuard,
    bucket: TokenBucket,
    dry_run: bool,
    /// How long a patch may take from now; `None`: not leading.
    budget: Option<Duration>,
    /// A watch is stale.
    stale: bool,
    /// `--restart-window`.
    restart_window: Option<RestartWindow>,
    /// The wall clock.
    wall: Timestamp,
    /// `--require-approval`.
    require_approval: Vec<String>,
    strategy: rollsafe_core::strategy::StrategyDefaults,
}

impl World {
    /// `db` exists; `web` is opted in, reads it, and has not rolled for anything yet.
    fn new() -> Self {
        Self::of(web())
    }

    /// As [`World::new`], with `web` a CronJob.
    fn cronjob() -> Self {
        Self::of(WorkloadKey {
            kind: WatchedKind::CronJob,
            ..web()
        })
    }

    fn of(key: WorkloadKey) -> Self {
        let mut world = Self {
            key,
            cache: Cache::default(),
            fingerprinter: Fingerprinter::unkeyed(),
            tracker: Tracker::default(),
            flap: FlapGuard::new(FlapLimit::default()),
            bucket: TokenBucket::new(0, 1, Instant::now()),
            dry_run: false,
            budget: Some(Duration::from_secs(15)),
            stale: false,
            restart_window: None,
            wall: THURSDAY_EARLY.parse().unwrap(),
            require_approval: Vec::new(),
            strategy: rollsafe_core::strategy::StrategyDefaults::default(),
        };
        world.cache.apply_source(db(), secret("hunter2"));
        world.workload(json!({"rollsafe.dev/watch": "true"}));
        world
    }

    fn workload(&mut self, annotations: Value) {
        self.object(self.shaped(annotations));
    }

    /// `web` of the world's kind with these annotations.
    fn shaped(&self, annotations: Value) -> Value {
        match self.key.kind {
            WatchedKind::CronJob => cronjob(annotations),
            _ => deployment(annotations),
        }
    }

    fn object(&mut self, object: Value) {
        let entry = WorkloadEntry::from_object(self.key.kind, &object, false);
        self.cache.apply_workload(self.key.clone(), entry);
    }

    /// The record of what `web` consumes now.
    fn record(&self) -> String {
        self.cache.record(&self.key, &self.fingerprinter).unwrap()
    }

    /// `web` recorded what it consumes now, then `db` changed.
    fn after_a_change(self) -> Self {
        self.after_a_change_to(|_| {})
    }

    /// As [`World::after_a_change`], with `web` edited by `edit` (its record kept): the record
    /// and its versions written from `db` at resourceVersion 3, which then moves to 4.
    fn after_a_change_to(mut self, edit: impl FnOnce(&mut Value)) -> Self {
        let record = self.record();
        let versions = self.cache.versions(&self.key).unwrap();
        let mut object = self.shaped(json!({"rollsafe.dev/watch": "true",
            "rollsafe.dev/config-record": record, "rollsafe.dev/config-versions": versions}));
        edit(&mut object);
        self.object(object);
        self.cache.apply_source(db(), secret_at("rotated", "4"));
        let key = self.key.clone();
        self.tracker.changed_at(&key, &db(), Instant::now());
        self
    }

    fn evaluate(&mut self) -> Option<Outcome> {
        let now = Instant::now();
        Evaluator {
            cache: &self.cache,
            fingerprinter: &self.fingerprinter,
            tracker: &self.tracker,
            dry_run: self.dry_run,
            deadline: self.budget.map(|budget| now + budget),
            retry_after: Duration::from_secs(10),
            flap: &mut self.flap,
            bucket: &mut self.bucket,
            progressive_all: false,
            stale: self.stale,
            consistent: false,
            restart_window: self.restart_window.as_ref(),
            wall: self.wall,
            require_approval: &self.require_approval,
            strategy: &self.strategy,
        }
        .evaluate(&self.key, now)
    }

    fn write(&mut self) -> Write {
        match self.evaluate() {
            Some(Outcome::Patch(write)) => *write,
            other => panic!("expected a patch, got {other:?}"),
        }
    }
}

fn skipped(reason: SkipReason) -> Option<Outcome> {
    Some(Outcome::Skip {
        reason: Some(reason),
        requeue: None,
    })
}

/// The annotations a patch adds, by JSON pointer.
fn additions(write: &Write) -> Vec<String> {
    let value = serde_json::to_value(&write.document).unwrap();
    value
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["op"] == "add")
        .map(|op| op["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_workload_no_longer_cached_has_no_outcome() {
    let mut world = World::new();
    world.cache.delete_workload(&web());
    assert_eq!(world.evaluate(), None);
}

#[test]
fn settled_workloads_are_skipped_and_forget_their_changes() {
    let mut world = World::new();
    world.workload(json!({}));
    let outcome = world.evaluate();
    assert_eq!(
        outcome,
        skipped(SkipReason::NotWatched { opt_in_error: None })
    );
    world.workload(json!({"rollsafe.dev/watch": "maybe"}));
    let Some(Outcome::Skip {
        reason: Some(SkipReason::NotWatched {
            opt_in_error: Some(_),
        }),
        requeue: None,
    }) = world.evaluate()
    else {
        panic!("a malformed opt-in is not watched, with its code");
    };
    world.workload(json!({"rollsafe.dev/watch": "true", "rollsafe.dev/halted": "flapping"}));
    assert_eq!(world.evaluate(), skipped(SkipReason::Halted));
    let record = world.record();
    world.workload(json!({"rollsafe.dev/watch": "true", "rollsafe.dev/config-record": record}));
    assert_eq!(world.evaluate(), skipped(SkipReason::Unchanged));
    for reason in [
        SkipReason::NotWatched { opt_in_error: None },
        SkipReason::Halted,
        SkipReason::Unchanged,
    ] {
        assert!(reason.settles(), "{reason:?}");
    }
    for reason in [
        SkipReason::SourceMissing,
        SkipReason::RateLimited,
        SkipReason::Unpatchable,
        SkipReason::NotLeader,
    ] {
        assert!(!reason.settles(), "{reason:?}");
    }
}

#[test]
fn first_sight_adopts_without_an_event() {
    let mut world = World::new();
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Adopt);
    assert_eq!(write.event, None);
    assert_eq!(write.retry_after, Duration::from_secs(10));
    assert_eq!(
        additions(&write),
        [
            "/metadata/annotations/rollsafe.dev~1config-record",
            "/metadata/annotations/rollsafe.dev~1config-versions"
        ]
    );
}

#[test]
fn a_change_before_the_first_record_rolls_from_the_baseline() {
    // `web` has no record yet (its adoption waits for the pace); `db` changes.
    let mut world = World::new();
    let record = world.record();
    world
        .tracker
        .update(&web(), |state| state.baseline = Some(record));
    world.cache.apply_source(db(), secret_at("rotated", "4"));
    world.tracker.changed_at(&web(), &db(), Instant::now());
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Roll { deferred: None });
    assert_eq!(
        write.event.map(|event| event.note),
        Some("Rolled for changes to Secret/db".to_owned())
    );
    // A baseline equal to what it consumes now: the adoption it was waiting for.
    let record = world.record();
    world
        .tracker
        .update(&web(), |state| state.baseline = Some(record));
    assert_eq!(world.write().purpose, Purpose::Adopt);
    // A record on the workload decides, never a baseline.
    let mut world = World::new().after_a_change();
    let record = world.record();
    world
        .tracker
        .update(&web(), |state| state.baseline = Some(record));
    assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
}

#[test]
fn a_change_rolls_and_names_the_changed_objects() {
    let mut world = World::new().after_a_change();
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Roll { deferred: None });
    assert_eq!(
        additions(&write),
        [
            "/spec/template/metadata/annotations/rollsafe.dev~1config-hash",
            "/metadata/annotations/rollsafe.dev~1config-record",
            "/metadata/annotations/rollsafe.dev~1config-versions",
            "/metadata/annotations/kubernetes.io~1change-cause",
            "/metadata/annotations/rollsafe.dev~1rolled-at"
        ]
    );
    // When it rolled, for the brakes of a later leader.
    assert_eq!(
        serde_json::to_value(&write.document).unwrap()[6]["value"],
        THURSDAY_EARLY
    );
    // The versions the record was read from: db at 4.
    let document = serde_json::to_value(&write.document).unwrap();
    assert!(
        document[4]["value"].as_str().unwrap().ends_with("=4"),
        "{document}"
    );
    // What `kubectl rollout history` shows: the cause, names only.
    assert_eq!(
        document[5]["value"],
        "rollsafe watch: rolled for changes to Secret/db"
    );
    assert_eq!(
        write.event,
        Some(Announcement {
            type_: EventType::Normal,
            reason: Reason::Rolled,
            note: "Rolled for changes to Secret/db".to_owned(),
            related: Some(db()),
            causes: vec![db()],
        })
    );
    // A change made before this process watched: the records name it.
    world.tracker.forget_changes(&web());
    let write = world.write();
    assert_eq!(
        write.event.as_ref().map(|event| event.note.as_str()),
        Some("Rolled for changes to Secret/db")
    );
    assert_eq!(write.event.and_then(|event| event.related), Some(db()));
}

#[test]
fn a_record_without_per_object_entries_cannot_name_its_cause() {
    let mut world = World::new();
    let record = world.record();
    let (bare, _) = record.split_once(';').unwrap();
    world.object(deployment(
        json!({"rollsafe.dev/watch": "true", "rollsafe.dev/config-record": bare}),
    ));
    world.cache.apply_source(db(), secret_at("rotated", "4"));
    // No versions to prove the cache newer than the record: a read first.
    assert_eq!(
        world.evaluate(),
        Some(Outcome::Confirm {
            sources: vec![db()]
        })
    );
    assert!(world.cache.confirm(&db(), 4));
    assert_eq!(
        world.write().event.map(|event| event.note),
        Some("Rolled: what it consumes changed while rollsafe was not watching".to_owned())
    );
}

#[test]
fn a_paused_workload_is_patched_and_the_deferral_announced() {
    let mut world = World::new().after_a_change_to(|object| object["spec"]["paused"] = json!(true));
    let write = world.write();
    assert_eq!(
        write.purpose,
        Purpose::Roll {
            deferred: Some(Deferral::Paused)
        }
    );
    assert_eq!(
        write.event,
        Some(Announcement {
            type_: EventType::Warning,
            reason: Reason::RolloutDeferred,
            note: "Pod template updated for changes to Secret/db but pods do not roll now: the Deployment is paused".to_owned(),
            related: Some(db()),
            causes: vec![db()],
        })
    );
}

#[test]
fn a_roll_without_its_objects_is_withheld() {
    let mut world = World::new().after_a_change();
    world.cache.delete_source(&db());
    assert_eq!(world.evaluate(), skipped(SkipReason::SourceMissing));
}

#[test]
fn an_object_that_cannot_be_patched_is_skipped() {
    let mut world = World::new();
    let mut object = deployment(json!({"rollsafe.dev/watch": "true"}));
    object["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    world.object(object);
    assert_eq!(world.evaluate(), skipped(SkipReason::Unpatchable));
}

#[test]
fn a_dry_run_decides_and_sends_nothing() {
    let mut world = World::new().after_a_change();
    world.dry_run = true;
    assert_eq!(
        world.evaluate(),
        Some(Outcome::DryRun {
            decision: "roll",
            changed: "Secret/db".to_owned()
        })
    );
    // Not even a follower's dry run is sent; it is counted as decided.
    world.budget = None;
    assert_eq!(
        world.evaluate(),
        Some(Outcome::DryRun {
            decision: "roll",
            changed: "Secret/db".to_owned()
        })
    );
}

#[tokio::test(start_paused = true)]
async fn only_a_leader_patches_and_the_patch_ends_inside_its_lease() {
    let mut world = World::new().after_a_change();
    world.budget = None;
    assert_eq!(world.evaluate(), skipped(SkipReason::NotLeader));
    world.budget = Some(Duration::from_secs(3));
    let write = world.write();
    assert_eq!(write.deadline, Instant::now() + Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn the_rate_limit_postpones_a_roll_until_a_token_is_due() {
    let mut world = World::new().after_a_change();
    world.bucket = TokenBucket::new(60, 1, Instant::now());
    assert!(world.bucket.take(Instant::now()).is_ok(), "the burst");
    assert_eq!(
        world.evaluate(),
        Some(Outcome::Skip {
            reason: Some(SkipReason::RateLimited),
            requeue: Some(Duration::from_secs(1)),
        })
    );
    tokio::time::advance(Duration::from_millis(400)).await;
    let Some(Outcome::Skip {
        reason: Some(SkipReason::RateLimited),
        requeue: Some(wait),
    }) = world.evaluate()
    else {
        panic!("still postponed");
    };
    assert!(wait < Duration::from_secs(1), "{wait:?}");
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
    // An adoption takes no token.
    world.bucket = TokenBucket::new(60, 1, Instant::now());
    assert!(world.bucket.take(Instant::now()).is_ok());
    world.workload(json!({"rollsafe.dev/watch": "true"}));
    assert_eq!(world.write().purpose, Purpose::Adopt);
}

#[tokio::test(start_paused = true)]
async fn a_flapping_workload_is_halted_with_an_event() {
    let mut world = World::new().after_a_change();
    world.flap = FlapGuard::new(FlapLimit {
        rolls: 2,
        window: Duration::from_secs(600),
    });
    for _ in 0..2 {
        assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
        world.flap.rolled(&web(), Instant::now());
        tokio::time::advance(Duration::from_secs(60)).await;
    }
    let halt = world.write();
    assert_eq!(halt.purpose, Purpose::Halt);
    assert_eq!(
        additions(&halt),
        ["/metadata/annotations/rollsafe.dev~1halted"]
    );
    let document = serde_json::to_value(&halt.document).unwrap();
    assert_eq!(
        document[2]["value"],
        "flapping: 2 rolls within 600s; remove this annotation to resume"
    );
    assert_eq!(
        halt.event,
        Some(Announcement {
            type_: EventType::Warning,
            reason: Reason::Halted,
            note: "Not rolled for changes to Secret/db: it was rolled 2 times within 600s. Remove the rollsafe.dev/halted annotation to resume".to_owned(),
            related: Some(db()),
            causes: vec![db()],
        })
    );
    // Once the first roll leaves the window, the workload rolls again.
    tokio::time::advance(Duration::from_secs(480)).await;
    assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
}

/// How the brakes treat one roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Braking {
    /// Rolled, counted as usual.
    Rolls,
    /// Rolled past the flap stop's limit as a recovery, and the Event says so.
    Recovers,
    /// Halted, the Event naming what was not rolled.
    Halts,
    /// Rolled while the global rate limit postpones every other roll.
    RollsUnlimited,
}

/// The brakes' rule for CronJobs and recoveries, as a table: a storm stays stopped, a fix
/// after a stall never is, a CronJob (whose roll restarts nothing) is never braked.
#[tokio::test(start_paused = true)]
async fn the_brakes_stop_storms_but_never_the_fix() {
    struct Row {
        case: &'static str,
        cronjob: bool,
        /// Rolls already inside the flap window (the limit is 2).
        rolled: usize,
        /// Its last followed rollout stalled.
        stalled: bool,
        /// A progressive roll was held behind a stalled earlier wave.
        held: bool,
        /// Its last roll was a recovery past the limit.
        recovering: bool,
        /// The global bucket is empty.
        bucket_empty: bool,
        braking: Braking,
    }
    let rows = [
        Row {
            case: "an ordinary roll under the limit",
            cronjob: false,
            rolled: 1,
            stalled: false,
            held: false,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Rolls,
        },
        Row {
            case: "an ordinary roll past the limit",
            cronjob: false,
            rolled: 2,
            stalled: false,
            held: false,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Halts,
        },
        Row {
            case: "the fix after a stall, past the limit",
            cronjob: false,
            rolled: 2,
            stalled: true,
            held: false,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Recovers,
        },
        Row {
            case: "a roll held behind a stalled wave, past the limit",
            cronjob: false,
            rolled: 2,
            stalled: false,
            held: true,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Recovers,
        },
        Row {
            case: "a recovery whose last recovery stalled too",
            cronjob: false,
            rolled: 2,
            stalled: true,
            held: false,
            recovering: true,
            bucket_empty: false,
            braking: Braking::Halts,
        },
        Row {
            case: "a recovery under the limit",
            cronjob: false,
            rolled: 1,
            stalled: true,
            held: false,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Rolls,
        },
        Row {
            case: "a CronJob past the limit",
            cronjob: true,
            rolled: 5,
            stalled: false,
            held: false,
            recovering: false,
            bucket_empty: false,
            braking: Braking::Rolls,
        },
        Row {
            case: "a CronJob with the bucket empty",
            cronjob: true,
            rolled: 0,
            stalled: false,
            held: false,
            recovering: false,
            bucket_empty: true,
            braking: Braking::RollsUnlimited,
        },
    ];
    for row in rows {
        let mut world = if row.cronjob {
            World::cronjob()
        } else {
            World::new()
        }
        .after_a_change();
        let key = world.key.clone();
        world.flap = FlapGuard::new(FlapLimit {
            rolls: 2,
            window: Duration::from_secs(600),
        });
        for _ in 0..row.rolled {
            world.flap.rolled(&key, Instant::now());
        }
        world.bucket = TokenBucket::new(1, 1, Instant::now());
        if row.bucket_empty {
            world.bucket.take(Instant::now()).unwrap();
        }
        world.tracker.update(&key, |state| {
            state.stalled = row.stalled;
            state.held = row.held.then(|| "held".to_owned());
            state.recovering = row.recovering;
        });
        let write = world.write();
        let note = write
            .event
            .as_ref()
            .map(|e| e.note.clone())
            .unwrap_or_default();
        match row.braking {
            Braking::Rolls | Braking::RollsUnlimited => {
                assert!(
                    matches!(write.purpose, Purpose::Roll { .. }),
                    "{}: {write:?}",
                    row.case
                );
                assert!(!write.recovery, "{}", row.case);
                assert!(!note.contains("recovery"), "{}: {note}", row.case);
            }
            Braking::Recovers => {
                assert_eq!(
                    write.purpose,
                    Purpose::Roll { deferred: None },
                    "{}",
                    row.case
                );
                assert!(write.recovery, "{}", row.case);
                assert_eq!(
                    write.event.as_ref().map(|e| e.reason),
                    Some(Reason::Recovered),
                    "{}",
                    row.case
                );
                assert!(
                    note.starts_with("Rolled for changes to Secret/db. A recovery: it replaces a rollout that stalled"),
                    "{}: {note}",
                    row.case
                );
            }
            Braking::Halts => {
                assert_eq!(write.purpose, Purpose::Halt, "{}", row.case);
                let event = write.event.expect("a halt is announced");
                assert_eq!(event.reason, Reason::Halted, "{}", row.case);
                assert_eq!(
                    event.causes,
                    vec![db()],
                    "{}: names what it withheld",
                    row.case
                );
                assert!(
                    note.starts_with("Not rolled for changes to Secret/db"),
                    "{}: {note}",
                    row.case
                );
                assert_eq!(
                    note.contains("its last recovery roll stalled too"),
                    row.recovering,
                    "{}: {note}",
                    row.case
                );
            }
        }
        if row.braking == Braking::RollsUnlimited {
            // The bucket was left untouched: an ordinary roll would still be postponed.
            assert!(world.bucket.take(Instant::now()).is_err(), "{}", row.case);
        }
    }
}

#[test]
fn labels() {
    assert_eq!(Purpose::Adopt.as_str(), "adopt");
    assert_eq!(Purpose::Adopt.result(), "adopted");
    assert_eq!(Purpose::Roll { deferred: None }.result(), "rolled");
    let deferred = Purpose::Roll {
        deferred: Some(Deferral::OnDelete),
    };
    assert_eq!(
        (deferred.as_str(), deferred.result()),
        ("deferred", "deferred")
    );
    assert_eq!(
        (Purpose::Halt.as_str(), Purpose::Halt.result()),
        ("halt", "halted")
    );
    assert_eq!(SkipReason::SourceMissing.as_str(), "source_missing");
    assert_eq!(SkipReason::NotLeader.as_str(), "not_leader");
}

#[test]
fn an_event_names_at_most_ten_objects() {
    let keys: BTreeSet<SourceKey> = (0..12)
        .map(|i| SourceKey {
            kind: TargetKind::Secret,
            namespace: NS.into(),
            name: format!("o{i:02}").into(),
        })
        .collect();
    let note = names(&keys);
    assert!(note.starts_with("Secret/o00, Secret/o01,"), "{note}");
    assert!(note.ends_with(", and 2 more"), "{note}");
    assert_eq!(note.matches('/').count(), 10, "{note}");
}

/// The stale-view table (docs/watch.md, "Stale views"): a roll goes ahead only when the cache
/// shows its view of the changed object at least as new as the one the record was read from;
/// otherwise one read first, and nothing else happens.
#[test]
fn a_roll_needs_a_view_at_least_as_new_as_the_records() {
    let confirm = Some(Outcome::Confirm {
        sources: vec![db()],
    });
    // (recorded version of db, what the cache did since, expected)
    type Setup = fn(&mut World);
    let cases: [(&str, Option<&str>, Setup, bool); 6] = [
        (
            "recorded at 3, the cache went 3 → 4",
            Some("3"),
            |_| {},
            true,
        ),
        (
            "recorded at 5 by another replica; this cache never held 5",
            Some("5"),
            |_| {},
            false,
        ),
        ("no versions (an older record)", None, |_| {}, false),
        (
            "no versions, but a read returned the cached 4",
            None,
            |world| assert!(world.cache.confirm(&db(), 4)),
            true,
        ),
        (
            "recorded at 5; a read returned 5: the cache is behind",
            Some("5"),
            |world| assert!(!world.cache.confirm(&db(), 5)),
            false,
        ),
        (
            "recorded at 3, the cache went 3 → 4 → 5 → 6 → 7: 3 forgotten",
            Some("3"),
            |world| {
                for version in ["5", "6", "7"] {
                    world
                        .cache
                        .apply_source(db(), secret_at("rotated", version));
                }
            },
            false,
        ),
    ];
    for (why, recorded, setup, rolls) in cases {
        let mut world = World::new().after_a_change_to(|object| {
            let annotations = object["metadata"]["annotations"].as_object_mut().unwrap();
            let id = annotations["rollsafe.dev/config-versions"]
                .as_str()
                .unwrap()
                .split_once('=')
                .unwrap()
                .0
                .to_owned();
            match recorded {
                Some(version) => {
                    annotations.insert(
                        "rollsafe.dev/config-versions".into(),
                        json!(format!("{id}={version}")),
                    );
                }
                None => {
                    annotations.remove("rollsafe.dev/config-versions");
                }
            }
        });
        setup(&mut world);
        let outcome = world.evaluate();
        if rolls {
            assert!(
                matches!(outcome, Some(Outcome::Patch(_))),
                "{why}: {outcome:?}"
            );
        } else {
            assert_eq!(outcome, confirm, "{why}");
        }
    }
    // A follower reads nothing: it would not patch anyway.
    let mut world = World::new().after_a_change_to(|object| {
        object["metadata"]["annotations"]
            .as_object_mut()
            .unwrap()
            .remove("rollsafe.dev/config-versions");
    });
    world.budget = None;
    assert_eq!(world.evaluate(), skipped(SkipReason::NotLeader));
}

#[test]
fn nothing_is_patched_while_a_watch_is_stale() {
    let mut adopting = World::new();
    adopting.stale = true;
    assert_eq!(adopting.evaluate(), skipped(SkipReason::StaleView));
    let mut rolling = World::new().after_a_change();
    rolling.stale = true;
    assert_eq!(rolling.evaluate(), skipped(SkipReason::StaleView));
    assert!(
        !SkipReason::StaleView.settles(),
        "the changes wait for the view"
    );
    // A dry run decides as ever: it patches nothing.
    rolling.dry_run = true;
    assert!(matches!(rolling.evaluate(), Some(Outcome::DryRun { .. })));
    rolling.dry_run = false;
    rolling.stale = false;
    assert!(matches!(rolling.evaluate(), Some(Outcome::Patch(_))));
}

/// The operations of a patch, as `op path`.
fn operations(write: &Write) -> Vec<String> {
    let value = serde_json::to_value(&write.document).unwrap();
    value
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            format!(
                "{} {}",
                op["op"].as_str().unwrap(),
                op["path"].as_str().unwrap()
            )
        })
        .collect()
}

/// `web` with its record (and, if given, a window and a pending mark), after `db` changed.
fn held_world(window: Option<&str>, pending: Option<&str>) -> World {
    World::new().after_a_change_to(|object| {
        let annotations = object["metadata"]["annotations"].as_object_mut().unwrap();
        if let Some(window) = window {
            annotations.insert(RESTART_WINDOW.to_owned(), json!(window));
        }
        if let Some(pending) = pending {
            annotations.insert(PENDING.to_owned(), json!(pending));
        }
    })
}

const OFFICE: &str = "Mon-Fri 09:00-17:00 Europe/Berlin";
const MARK_PREFIX: &str = "window until=2026-12-03T08:00:00Z digest=";

#[test]
fn a_roll_outside_its_window_is_marked_pending_once_and_takes_no_token() {
    let mut world = held_world(Some(OFFICE), None);
    world.bucket = TokenBucket::new(60, 1, Instant::now());
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    assert_eq!(
        operations(&write),
        [
            "test /metadata/uid",
            "test /metadata/resourceVersion",
            "add /metadata/annotations/rollsafe.dev~1pending"
        ]
    );
    let mark = serde_json::to_value(&write.document).unwrap()[2]["value"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(mark.starts_with(MARK_PREFIX), "{mark}");
    assert_eq!(write.recheck, Some(windows::WINDOW_RECHECK));
    assert_eq!(
        write.event,
        Some(Announcement {
            type_: EventType::Normal,
            reason: Reason::Pending,
            note: "Roll for changes to Secret/db held by its restart window (Mon-Fri 09:00-17:00 Europe/Berlin) until 2026-12-03T09:00+01:00".to_owned(),
            related: Some(db()),
            causes: vec![db()],
        })
    );
    assert!(world.bucket.take(Instant::now()).is_ok(), "no token taken");
    // Marked: nothing is written again; looked at again when it opens (at most the recheck).
    let mut world = held_world(Some(OFFICE), Some(&mark));
    world.wall = "2026-12-03T07:59:30Z".parse().unwrap();
    assert_eq!(
        world.evaluate(),
        Some(Outcome::Skip {
            reason: Some(SkipReason::RestartWindow),
            requeue: Some(Duration::from_secs(30)),
        })
    );
    // Once open: one roll, which removes the mark.
    world.wall = "2026-12-03T08:00:00Z".parse().unwrap();
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Roll { deferred: None });
    assert_eq!(
        operations(&write).last().map(String::as_str),
        Some("remove /metadata/annotations/rollsafe.dev~1pending")
    );
    // A dry run says it would be held.
    let mut world = held_world(Some(OFFICE), None);
    world.dry_run = true;
    assert_eq!(
        world.evaluate(),
        Some(Outcome::DryRun {
            decision: "pending",
            changed: "Secret/db".to_owned()
        })
    );
}

#[test]
fn the_workloads_window_wins_then_the_sources_then_the_flag() {
    // The flag alone holds it.
    let mut world = held_world(None, None);
    world.restart_window = Some("Sat 10:00-12:00 UTC".parse().unwrap());
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    assert!(write.event.unwrap().note.contains(
        "held by the --restart-window (Sat 10:00-12:00 UTC) until 2026-12-05T10:00+00:00"
    ));
    // The changed object's window, over the flag's.
    let mut source = secret_at("rotated", "4");
    source.window = crate::annotations::restart_window(Some("* 05:00-07:00 UTC"));
    world.cache.apply_source(db(), source);
    assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
    // The workload's own, over the object's.
    let mut world = held_world(Some(OFFICE), None);
    let mut source = secret_at("rotated", "4");
    source.window = crate::annotations::restart_window(Some("* 05:00-07:00 UTC"));
    world.cache.apply_source(db(), source);
    assert_eq!(world.write().purpose, Purpose::Pend);
    // A window not understood holds the roll until it is corrected.
    let mut world = held_world(Some("Mon-Fry 09:00-17:00"), None);
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    assert!(
        write
            .event
            .unwrap()
            .note
            .contains("(not understood: restart_window_day) until the window is changed")
    );
}

#[test]
fn a_change_undone_while_held_removes_the_mark() {
    let mut world = held_world(Some(OFFICE), Some("window until=- digest=v1:old"));
    world.cache.apply_source(db(), secret_at("hunter2", "5"));
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Unpend);
    assert_eq!(write.event, None);
    assert_eq!(
        operations(&write),
        [
            "test /metadata/uid",
            "test /metadata/resourceVersion",
            "remove /metadata/annotations/rollsafe.dev~1pending"
        ]
    );
}

/// The workload digest `web` would roll to now.
fn due(world: &World) -> String {
    digest::parse_record(&world.record()).0.to_owned()
}

#[test]
fn a_roll_that_needs_approval_waits_for_exactly_its_own() {
    let mut world = World::new().after_a_change_to(|object| {
        object["metadata"]["annotations"]["rollsafe.dev/approval"] = json!("required");
    });
    let now = due(&world);
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    let mark = format!("approval since=2026-12-03T06:00:00Z digest={now}");
    assert_eq!(
        serde_json::to_value(&write.document).unwrap()[2]["value"],
        json!(mark)
    );
    assert_eq!(write.recheck, None, "the approval decides, not a timer");
    assert_eq!(
        write.event.unwrap().note,
        "Roll for changes to Secret/db awaits approval: rollsafe approve -n shop deployment/web"
    );
    // Marked: nothing more until someone approves.
    let marked = |approved: Option<&str>| {
        let (mark, approved) = (mark.clone(), approved.map(str::to_owned));
        World::new().after_a_change_to(move |object| {
            let annotations = &mut object["metadata"]["annotations"];
            annotations["rollsafe.dev/approval"] = json!("required");
            annotations["rollsafe.dev/pending"] = json!(mark);
            if let Some(approved) = approved {
                annotations["rollsafe.dev/approved"] = json!(approved);
            }
        })
    };
    assert_eq!(
        marked(None).evaluate(),
        skipped(SkipReason::AwaitingApproval)
    );
    // An approval of an earlier roll does not approve this one.
    assert_eq!(
        marked(Some("v1:older")).evaluate(),
        skipped(SkipReason::AwaitingApproval)
    );
    // Approved: one roll, which removes the mark and the approval.
    let write = marked(Some(&now)).write();
    assert_eq!(write.purpose, Purpose::Roll { deferred: None });
    let ops = operations(&write);
    assert_eq!(
        ops[ops.len() - 2..],
        [
            "remove /metadata/annotations/rollsafe.dev~1pending",
            "remove /metadata/annotations/rollsafe.dev~1approved"
        ]
    );
    // Approved, but outside its restart window: then held by the window.
    let mut world = World::new().after_a_change_to(|object| {
        let annotations = &mut object["metadata"]["annotations"];
        annotations["rollsafe.dev/approval"] = json!("required");
        annotations["rollsafe.dev/restart-window"] = json!(OFFICE);
    });
    let now = due(&world);
    world.object({
        let mut object = deployment(json!({"rollsafe.dev/watch": "true"}));
        object["metadata"]["annotations"] = json!({
            "rollsafe.dev/watch": "true",
            "rollsafe.dev/approval": "required",
            "rollsafe.dev/restart-window": OFFICE,
            "rollsafe.dev/approved": now,
            "rollsafe.dev/config-record": world.cache.workload(&web()).unwrap().facts.record.clone(),
            "rollsafe.dev/config-versions": world.cache.workload(&web()).unwrap().versions.as_deref(),
        });
        object
    });
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    assert!(
        serde_json::to_value(&write.document).unwrap()[2]["value"]
            .as_str()
            .unwrap()
            .starts_with(MARK_PREFIX)
    );
}

#[test]
fn approval_is_required_by_the_namespace_or_a_changed_object() {
    let mut world = World::new().after_a_change();
    world.require_approval = vec![NS.to_owned()];
    assert_eq!(world.write().purpose, Purpose::Pend);
    world.require_approval = vec!["elsewhere".to_owned()];
    assert_eq!(world.write().purpose, Purpose::Roll { deferred: None });
    let mut source = secret_at("rotated", "4");
    source.approval = true;
    world.cache.apply_source(db(), source);
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Pend);
    // A dry run says it would wait.
    world.dry_run = true;
    assert_eq!(
        world.evaluate(),
        Some(Outcome::DryRun {
            decision: "awaiting_approval",
            changed: "Secret/db".to_owned()
        })
    );
}

#[tokio::test(start_paused = true)]
async fn rolls_recorded_by_an_earlier_leader_count_for_the_flap_stop() {
    // Five rolls in the last five minutes, recorded on the workload by another replica.
    let recorded = "2026-12-03T05:55:00Z,2026-12-03T05:56:00Z,2026-12-03T05:57:00Z,2026-12-03T05:58:00Z,2026-12-03T05:59:00Z";
    let mut world = World::new().after_a_change_to(|object| {
        object["metadata"]["annotations"]["rollsafe.dev/rolled-at"] = json!(recorded);
    });
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Halt);
    assert_eq!(
        operations(&write).last().map(String::as_str),
        Some("remove /metadata/annotations/rollsafe.dev~1rolled-at"),
        "resuming starts afresh"
    );
    // Older than the window: they do not count; the roll records them with itself.
    let old = "2026-12-03T04:00:00Z,2026-12-03T04:01:00Z,2026-12-03T04:02:00Z,2026-12-03T04:03:00Z,2026-12-03T05:52:00Z";
    let mut world = World::new().after_a_change_to(|object| {
        object["metadata"]["annotations"]["rollsafe.dev/rolled-at"] = json!(old);
    });
    let write = world.write();
    assert_eq!(write.purpose, Purpose::Roll { deferred: None });
    assert_eq!(
        serde_json::to_value(&write.document).unwrap()[6]["value"],
        "2026-12-03T05:52:00Z,2026-12-03T06:00:00Z"
    );
}
