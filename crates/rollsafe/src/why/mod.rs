//! `rollsafe why KIND/NAME`: why `rollsafe watch` would or would not roll one workload now.
//!
//! Reads the workload, each Secret and ConfigMap its pod template references (or its
//! `rollsafe.dev/watch` list names), and the workload's Events, then answers with the watch
//! crate's own reduction and decision ([`WorkloadEntry`], [`SourceEntry`], [`Cache::record`],
//! [`decision::decide`]), so the answer is the controller's and not a second reading of the
//! rules. A Secret's values are read only when the digest needs them (the workload is watched,
//! or unset, and its record is comparable), reduced to per-key digests in the read itself, and
//! never logged or printed; every other object is read as metadata only.
//!
//! Output (`-o json`, the default, by the output rule; the shape is stable, pinned by a
//! snapshot in `tests/why_cli.rs`, and documented in `docs/why.md`):
//!
//! ```json
//! { "kind": "Deployment", "namespace": "shop", "name": "api",
//!   "watch": { "state": "opted_in", "value": "true", "reason": "…" },
//!   "halted": null,
//!   "pending": null,
//!   "consumes": [ { "kind": "Secret", "name": "db", "exists": true, "keys": ["password"],
//!                   "watched": true, "changed": true,
//!                   "references": [ { "path": "…", "via": "env", … } ] } ],
//!   "rollNow": { "decision": "roll", "rolls": true, "reason": "…", "changed": ["Secret/db"] },
//!   "lastRoll": { "changeCause": "…", "recorded": ["Secret/db"], "event": { … } },
//!   "rollout": { "state": "complete", "describe": "…" } }
//! ```
//!
//! A workload an operator's resource controls says so (`"operatorOwner"`, and in text
//! `owner: StatefulSet/kafka is owned by Kafka/my-cluster`), and one that is operator-owned or
//! whose `rollsafe.dev/strategy` chooses says how it is restarted (`"restartBy"`, the consumers
//! preview's words): both absent otherwise. `rollsafe why pod/NAME` explains a pod-level
//! consumer instead (`pod`): its owner, what it consumes, and how it is restarted.
//!
//! Exit codes: 0 when the workload was explained (whatever the answer); 1, with one line on
//! stderr and nothing on stdout, when it does not exist, cannot be read, or the target, the
//! namespace or the fingerprint key is invalid.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use jiff::Timestamp;
use kube::api::DynamicObject;
use rollsafe_core::annotations::{
    self, CHANGE_CAUSE, CONFIG_RECORD, EVICTING, RESTART_ON_CHANGE, WATCH,
};
use rollsafe_core::name::Namespace;
use rollsafe_core::opt_in::{self, OptIn, reloader};
use rollsafe_core::reference::{self, ConfigRef, ContainerList, Origin, Reference, TargetKind};
use rollsafe_core::rollout;
use rollsafe_core::shown::shown;
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::window::RestartWindow;
use rollsafe_kube::EventSummary;
use rollsafe_kube::published::LeaseRef;
use rollsafe_kube::transport::{GET_TIMEOUT, LIST_PAGE_TIMEOUT};
use rollsafe_watch::approval::{self, HeldBy, PendingMark};
use rollsafe_watch::cache::{Cache, SourceEntry, SourceKey, Watching, WorkloadEntry, WorkloadKey};
use rollsafe_watch::consumption::{self, Consumption, Keys};
use rollsafe_watch::limits::{FlapGuard, TokenBucket};
use rollsafe_watch::outcome::{Evaluator, Outcome, Purpose, SkipReason, Stage, Write};
use rollsafe_watch::published::{self, PublishedSettings};
use rollsafe_watch::tracker::Tracker;
use rollsafe_watch::{Fingerprinter, digest, windows};
use serde::Serialize;
use serde_json::Value;
use tokio::time::Instant;

mod owners;
mod pod;
mod settings;
mod text;

use self::settings::{SettingsFlags, SettingsSource, SettingsUsed, parse_lease, resolve_settings};
use self::text::text;
use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::{WatchedTarget, namespace_flag};
use crate::{process, stdout, watch};

/// Explain whether `rollsafe watch` watches a workload, and whether it would roll it now.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// The fingerprint key `rollsafe watch` runs with, if any: records written under a key
    /// (`v1k:`) can only be compared with it.
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_WATCH_FINGERPRINT_KEY_FILE")]
    pub fingerprint_key_file: Option<PathBuf>,
    /// The Lease `rollsafe watch` publishes its settings on (`NAMESPACE/NAME`; default:
    /// `rollsafe-watch` in the workload's namespace). Its settings decide the answer; without
    /// them, the flags below do, and without those, what they decide is said to be unknown.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        env = "ROLLSAFE_WATCH_CONTROLLER_LEASE"
    )]
    pub controller_lease: Option<String>,
    #[command(flatten)]
    pub flags: SettingsFlags,
    /// How to print the result (`text`: one line per fact).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The workload, as kubectl names it: `deployment/NAME` (`deploy/`), `statefulset/NAME`
    /// (`sts/`), `daemonset/NAME` (`ds/`), `cronjob/NAME` (`cj/`) or `rollout/NAME` (`ro/`);
    /// or a pod, `pod/NAME` (`po/`): who owns it, what it consumes and how it is restarted.
    pub workload: String,
}

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 the workload is explained (whatever the \
    answer); 1 it does not exist or cannot be read, or the target, namespace or fingerprint key \
    is invalid (one line on stderr, nothing on stdout).";

/// The Event reasons `rollsafe watch` writes on a workload.
const WATCH_EVENT_REASONS: [&str; 6] = [
    "Rolled",
    "Recovered",
    "RolloutDeferred",
    "Halted",
    "Reverted",
    "Readopted",
];

/// The whole answer, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Why {
    kind: &'static str,
    namespace: String,
    name: String,
    /// The controller's settings the answer was evaluated with, and where they came from.
    settings: SettingsUsed,
    watch: Watch,
    /// The operator's resource that controls it, when one does (`StatefulSet/kafka is owned
    /// by Kafka/my-cluster`); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    operator_owner: Option<rollsafe_core::strategy::Owner>,
    /// How it is restarted, when it is operator-owned or its `rollsafe.dev/strategy` chooses
    /// (the consumers preview's words); absent for a template patch nobody else owns.
    #[serde(skip_serializing_if = "Option::is_none")]
    restart_by: Option<rollsafe_core::preview::RestartBy>,
    /// A restart by eviction in progress (`rollsafe.dev/evicting`), when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    evicting: Option<Evicting>,
    /// `rollsafe.dev/halted`, when set.
    halted: Option<Halted>,
    /// A due roll held by a restart window or an approval, when one is.
    pending: Option<Pending>,
    /// The holds that stand before anything is pending (a restart window, an approval
    /// requirement), in words.
    holds: Vec<String>,
    /// Every consumed object, sorted by kind and name.
    consumes: Vec<Consumed>,
    roll_now: RollNow,
    /// The controller's stages, as they ran for this workload: where the roll stopped.
    stages: Vec<StageShown>,
    last_roll: LastRoll,
    rollout: Rollout,
}

/// A restart by eviction the controller has started and not ended: the workload's
/// `rollsafe.dev/evicting`, the instant its run restarts pods for (pods created before it are
/// evicted).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Evicting {
    since: String,
}

/// What the workload's own `rollsafe.dev/watch` says.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Watch {
    state: WatchState,
    /// The annotation's value, when set.
    value: Option<String>,
    /// Fixed words for people.
    reason: &'static str,
}

/// The workload's `rollsafe.dev/watch`, as the controller reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum WatchState {
    /// `"true"`: every Secret and ConfigMap the pod template references.
    OptedIn,
    /// A list: exactly the listed objects, every key.
    Listed,
    /// `"false"` (or empty): never, even under `--all`.
    OptedOut,
    /// No annotation: watched only under `--all`.
    Unset,
    /// No annotation, and the controller runs `--all`: every Secret and ConfigMap the pod
    /// template references.
    All,
    /// No annotation of rollsafe's; Stakater Reloader's annotations opt it in (the controller
    /// runs `--reloader-compat`).
    Reloader,
    /// Not understood: not watched.
    Invalid,
}

impl WatchState {
    fn of(value: Option<&str>) -> Self {
        match value.map(|v| opt_in::workload_opt_in(Some(v), false)) {
            None => WatchState::Unset,
            Some(Ok(OptIn::Template)) => WatchState::OptedIn,
            Some(Ok(OptIn::List(_) | OptIn::Select { .. })) => WatchState::Listed,
            Some(Ok(OptIn::Off)) => WatchState::OptedOut,
            Some(Err(_)) => WatchState::Invalid,
        }
    }

    fn reason(self) -> &'static str {
        match self {
            WatchState::OptedIn => {
                "watched: rollsafe.dev/watch is \"true\" (every Secret and ConfigMap the pod template references)"
            }
            WatchState::Listed => {
                "watched: rollsafe.dev/watch lists the objects it rolls for (every key of each)"
            }
            WatchState::OptedOut => {
                "not watched: rollsafe.dev/watch is \"false\", even under --all"
            }
            WatchState::Unset => "not opted in: no rollsafe.dev/watch (watched only under --all)",
            WatchState::All => {
                "watched: no rollsafe.dev/watch, and rollsafe watch runs --all (every Secret and ConfigMap the pod template references)"
            }
            WatchState::Reloader => {
                "watched: Stakater Reloader's annotations opt it in (rollsafe watch runs --reloader-compat)"
            }
            WatchState::Invalid => {
                "not watched: its rollsafe.dev/watch value is not understood (secret/NAME or configmap/NAME entries, \"true\" or \"false\")"
            }
        }
    }

    /// Whether the controller evaluates it, under `--all` for an unset one.
    fn evaluated(self) -> bool {
        matches!(
            self,
            WatchState::OptedIn
                | WatchState::Listed
                | WatchState::Unset
                | WatchState::All
                | WatchState::Reloader
        )
    }
}

/// `rollsafe.dev/halted`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Halted {
    /// Why the flap stop halted it.
    reason: String,
    /// The command that resumes it.
    resume: String,
}

/// A roll held by a restart window.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Pending {
    /// `window` or `approval`.
    held_by: &'static str,
    /// When the window opens (UTC, RFC 3339); `null`: not within two weeks, not understood, or
    /// held by an approval.
    until: Option<String>,
    /// Since when the roll awaits approval, as the controller marked it (`null`: a window, or
    /// not marked yet).
    since: Option<String>,
    /// The Event's words: whose window, which, until when.
    reason: String,
    /// Whether the workload carries the controller's `rollsafe.dev/pending` mark already.
    marked: bool,
}

/// One consumed Secret or ConfigMap.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Consumed {
    kind: TargetKind,
    name: String,
    /// Whether it exists; `null` when it could not be read.
    exists: Option<bool>,
    /// Why it could not be read (a static code), or `invalid_name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    read_error: Option<&'static str>,
    /// The consumed keys; `null`: every key it has (a whole-object reference, or a list entry).
    keys: Option<Vec<String>>,
    /// Whether a change to it rolls the workload: the workload watches it (under `--all` when
    /// its opt-in is unset) and it has not opted out.
    watched: bool,
    /// Its own opt-out annotation, when set to "false".
    #[serde(skip_serializing_if = "Option::is_none")]
    opted_out_by: Option<&'static str>,
    /// Whether it changed since the record; `null` when unknown (no record, no per-object
    /// entries, not compared).
    changed: Option<bool>,
    /// Where the pod template references it (empty for an object only a list names).
    references: Vec<ReferenceAt>,
}

/// A reference with its path in the workload.
#[derive(Debug, Serialize)]
struct ReferenceAt {
    path: String,
    #[serde(flatten)]
    reference: Reference,
}

/// Whether the controller would roll the workload now.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct RollNow {
    decision: Decision,
    /// Whether its pods would roll now (`decision` is `roll`).
    rolls: bool,
    /// Words for people.
    reason: String,
    /// The objects whose change would roll it (`Secret/db`), from the record.
    changed: Vec<String>,
    /// For an unset opt-in: the decision under `--all`.
    #[serde(skip_serializing_if = "Option::is_none")]
    under_all: Option<Decision>,
}

/// The controller's decision, and the states it cannot reach without more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Decision {
    /// What it consumes changed: the pods roll.
    Roll,
    /// The pod template would be patched, but the pods do not roll now (paused, OnDelete,
    /// partition).
    Deferred,
    /// Changed, but a consumed object does not exist: the roll is withheld.
    Withheld,
    /// No record, or only objects joining or leaving it: the record is written, no roll.
    Adopt,
    /// The record matches what it consumes.
    Unchanged,
    /// Halted by the flap stop.
    Halted,
    /// A roll (or deferred roll) is due, but a restart window or an approval holds it.
    Pending,
    /// A progressive roll waits for an earlier wave.
    Waiting,
    /// A progressive roll is held at an earlier wave whose rollout stalled.
    Held,
    /// A roll is due, but the flap stop would halt the workload instead.
    Halt,
    /// Not watched.
    NotWatched,
    /// Not known: a keyed record without the key, or an object that could not be read.
    Unknown,
}

/// When it last rolled, and for what.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LastRoll {
    /// The workload's `kubernetes.io/change-cause`, when rollsafe watch wrote it.
    change_cause: Option<String>,
    /// Whether it has a `rollsafe.dev/config-record`, and whether that is keyed.
    record: RecordState,
    /// The consumed objects the record has an entry for (`Secret/db`).
    recorded: Vec<String>,
    /// The most recent `Rolled`, `RolloutDeferred` or `Halted` Event.
    event: Option<LastEvent>,
    /// Why the Events could not be listed, if so (a static code).
    #[serde(skip_serializing_if = "Option::is_none")]
    events_error: Option<&'static str>,
}

/// The record's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum RecordState {
    /// No record: never adopted.
    None,
    /// `v1:`.
    Unkeyed,
    /// `v1k:`: under a fingerprint key.
    Keyed,
}

/// One Event.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct LastEvent {
    reason: String,
    #[serde(rename = "type")]
    type_: String,
    note: String,
    time: Option<String>,
    count: i32,
}

/// The rollout state.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Rollout {
    #[serde(flatten)]
    status: rollout::RolloutStatus,
    describe: String,
}

/// What was read of one consumed object.
struct Source {
    /// Whether it exists, or why that is unknown (a read error's code).
    exists: Result<bool, &'static str>,
    opted_out_by: Option<&'static str>,
    /// The digests, when its values were read.
    entry: Option<SourceEntry>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    // Parsed here rather than by clap, whose usage errors exit 2: a malformed target is exit 1
    // like every other failure of this command.
    if let Some(name) = pod::target(&args.workload) {
        return pod::run(&args.kube, args.output, &name?);
    }
    let target = WatchedTarget::parse(&args.workload)?;
    let namespace = namespace_flag(args.kube.namespace.as_deref())?;
    let fingerprinter = watch::fingerprinter(args.fingerprint_key_file.as_deref())?;
    let flags = args.flags.settings()?;
    let lease = args
        .controller_lease
        .as_deref()
        .map(parse_lease)
        .transpose()?;
    let why = process::runtime()?.block_on(async {
        let session = args.kube.session(namespace).await?;
        // The controller's Lease is read as the kubeconfig's identity, not as `--as`: it says
        // how the controller runs, not what the caller may do.
        let reader = session.connection.client(None);
        let lease = lease.unwrap_or_else(|| LeaseRef {
            namespace: session.namespace.to_string(),
            name: watch::DEFAULT_LEASE_NAME.to_owned(),
        });
        let settings = resolve_settings(&reader, &lease, flags).await;
        explain(
            &session.client,
            &session.namespace,
            &target,
            &fingerprinter,
            settings,
        )
        .await
    })?;
    let out = match args.output {
        OutputFormat::Json => restart_exit::json(&why)?,
        OutputFormat::Text => text(&why),
    };
    stdout::line(&out)?;
    Ok(ExitCode::SUCCESS)
}

async fn explain(
    client: &kube::Client,
    namespace: &Namespace,
    target: &WatchedTarget,
    fingerprinter: &Fingerprinter,
    settings: SettingsUsed,
) -> anyhow::Result<Why> {
    let WatchedTarget { kind, name } = target;
    let object = read_workload(client, namespace, target).await?;
    let annotation = |key: &str| annotation(&object, key);
    let known = settings.source != SettingsSource::Unknown;
    let values = &settings.values;
    let watching = published::watching(values);
    let reloader = values.reloader_compat
        && annotation(WATCH).is_none()
        && object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|map| map.keys().any(|key| reloader::is_reloader_annotation(key)));
    let state = match WatchState::of(annotation(WATCH)) {
        WatchState::Unset if reloader => WatchState::Reloader,
        WatchState::Unset if known && values.all => WatchState::All,
        state => state,
    };
    let record = annotation(CONFIG_RECORD);
    let record_state = match record {
        None => RecordState::None,
        Some(r) if digest::is_keyed(r) => RecordState::Keyed,
        Some(_) => RecordState::Unkeyed,
    };
    // With the controller's settings unknown, an unset opt-in is evaluated as under --all and
    // said so ("under --all: …"), never taken for the answer.
    let watching = Watching {
        all: watching.all || (!known && state == WatchState::Unset),
        ..watching
    };
    let entry = WorkloadEntry::from_object_in(*kind, &object, watching);
    let mut consumption = entry.consumption.expand();
    // Reloader's regular-expression reload entries consume every existing object of the
    // namespace whose name matches: listed (names only), then read as the others.
    if let Some(patterns) = entry.patterns() {
        for config in matching_objects(client, namespace, patterns).await {
            consumption.entry(config).or_insert(Keys::All);
        }
    }
    // Comparable: no record, or one written with the key (or without one) as given here.
    let comparable = record_state == RecordState::None
        || (record_state == RecordState::Keyed) == fingerprinter.is_keyed();
    let read_values = state.evaluated() && comparable;
    let template = kind.template(&object).unwrap_or(&Value::Null);
    let references = references_of(template, &consumption);
    let mut sources = BTreeMap::new();
    for config in references.keys() {
        let values = read_values && consumption.contains_key(config);
        let source = read_source(client, namespace, config, values, watching.reloader_compat).await;
        sources.insert(config.clone(), source);
    }
    let key = WorkloadKey {
        kind: *kind,
        namespace: namespace.as_str().into(),
        name: name.as_str().into(),
    };
    let evaluation = evaluate(
        &key,
        &entry,
        &sources,
        read_values.then_some(fingerprinter),
        values,
    );
    let names: Vec<String> = evaluation.changed.iter().map(ToString::to_string).collect();
    let changed: BTreeSet<SourceKey> = evaluation
        .changed
        .iter()
        .map(|config| SourceKey::of(namespace.as_str(), config))
        .collect();
    let mark = entry.pending.as_deref().and_then(PendingMark::parse);
    let due = evaluation
        .now
        .as_deref()
        .map(|now| digest::parse_record(now).0);
    // The hold the controller's own stages stopped at, in its words.
    let pending = match evaluation.held {
        Some(HeldBy::Approval) => {
            let marked =
                mark.filter(|mark| mark.held_by == HeldBy::Approval && Some(mark.digest) == due);
            Some(Pending {
                held_by: "approval",
                until: None,
                since: marked.and_then(|mark| mark.at.map(str::to_owned)),
                reason: approval::awaiting_note(&key, &names.join(", ")),
                marked: mark.is_some_and(|mark| mark.held_by == HeldBy::Approval),
            })
        }
        Some(HeldBy::Window) => windows::holding(
            &evaluation.cache,
            &entry,
            &changed,
            values
                .restart_window
                .as_deref()
                .and_then(|w| w.parse().ok())
                .as_ref(),
            Timestamp::now(),
        )
        .map(|closed| Pending {
            held_by: "window",
            until: closed.until.map(|until| until.to_string()),
            since: None,
            reason: closed.note(&names.join(", ")),
            marked: mark.is_some_and(|mark| mark.held_by == HeldBy::Window),
        }),
        None => None,
    };
    let standing = standing_holds(&evaluation.cache, &key, &entry, values, known);
    let halted = opt_in::halted(&object).map(|reason| Halted {
        reason,
        resume: format!(
            "kubectl annotate -n {namespace} {}/{name} {}-",
            kind.as_str().to_ascii_lowercase(),
            annotations::HALTED
        ),
    });
    let roll_now = roll_now(
        state,
        &entry,
        record_state,
        fingerprinter,
        &evaluation,
        pending.as_ref().map(|pending| pending.reason.as_str()),
        known,
    );
    let consumes = consumed(
        template,
        references,
        &sources,
        &consumption,
        state,
        &evaluation,
    );
    let (event, events_error) = match rollsafe_kube::list_workload_events(
        client,
        namespace,
        *kind,
        name,
        LIST_PAGE_TIMEOUT,
    )
    .await
    {
        Ok(events) => (last_event(events), None),
        Err(error) => (None, Some(error.code())),
    };
    let last_roll = LastRoll {
        change_cause: annotation(CHANGE_CAUSE)
            .filter(|cause| cause.starts_with("rollsafe watch:"))
            .map(shown),
        record: record_state,
        recorded: record
            .map(|r| {
                digest::recorded_objects(r, consumption.keys())
                    .into_iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .unwrap_or_default(),
        event,
        events_error,
    };
    let status = rollout::classify(*kind, &object);
    let stages = evaluation.stages;
    // The controller's `--strategy`, as the Evaluator reads it below; unknown settings say
    // nothing of it.
    let controller_strategy = known.then(|| values.strategy_defaults());
    let (operator_owner, restart_by) = owners::of(
        *kind,
        &object,
        namespace.as_str(),
        controller_strategy.as_ref(),
    );
    let evicting = annotation(EVICTING).map(|since| Evicting {
        since: shown(since),
    });
    Ok(Why {
        kind: kind.as_str(),
        namespace: namespace.to_string(),
        name: name.clone(),
        settings,
        operator_owner,
        restart_by,
        evicting,
        watch: Watch {
            state,
            value: annotation(WATCH).map(shown),
            reason: state.reason(),
        },
        halted,
        pending,
        holds: standing,
        consumes,
        roll_now,
        stages,
        last_roll,
        rollout: Rollout {
            describe: status.describe(),
            status,
        },
    })
}

/// The holds that stand before anything is pending: its restart window and its approval
/// requirement, as the controller's rules read them (the workload's and the objects' it
/// consumes own annotations, and the controller's `--restart-window`/`--require-approval`).
fn standing_holds(
    cache: &Cache,
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    values: &PublishedSettings,
    known: bool,
) -> Vec<String> {
    let consumed: BTreeSet<SourceKey> = cache
        .consumed_objects(key, entry)
        .iter()
        .map(|config| SourceKey::of(&key.namespace, config))
        .collect();
    let mut holds = Vec::new();
    if approval::required(cache, key, entry, &consumed, &values.require_approval) {
        holds.push("a roll needs approval (rollsafe approve, or the page's Approve)".to_owned());
    } else if !known {
        holds.push(
            "unknown whether a roll needs approval: rollsafe watch's --require-approval is not known"
                .to_owned(),
        );
    }
    let window = values
        .restart_window
        .as_deref()
        .and_then(|text| text.parse::<RestartWindow>().ok());
    if let Some(window) = windows::standing(cache, entry, &consumed, window.as_ref()) {
        holds.push(format!("rolls only inside {window}"));
    } else if !known {
        holds.push(
            "unknown whether a restart window holds its rolls: rollsafe watch's --restart-window is not known"
                .to_owned(),
        );
    }
    holds
}

/// Reads the workload; a missing or unreadable one is the command's error (exit 1).
async fn read_workload(
    client: &kube::Client,
    namespace: &Namespace,
    target: &WatchedTarget,
) -> anyhow::Result<Value> {
    let WatchedTarget { kind, name } = target;
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(
        client.clone(),
        namespace.as_str(),
        &rollsafe_kube::read::workload_resource(*kind),
    );
    let what = Read {
        kind: kind.as_str(),
        rbac: "",
        unserved: Some(kind.plural()),
    };
    read_one(api, &what, namespace, name).await
}

/// What [`read_one`] reads, for its messages.
struct Read<'a> {
    /// The kind, as shown (`Deployment`, `Pod`).
    kind: &'a str,
    /// Said after a 403: the rule that would allow it (` (RBAC: get pods)`), or nothing.
    rbac: &'a str,
    /// For a kind that may not be served: its plural, which a 404 of the API says is not.
    unserved: Option<&'a str>,
}

/// Reads one object as JSON within [`GET_TIMEOUT`], or fails with one line naming the object
/// and what went wrong (never Kubernetes' own error text).
async fn read_one<K>(
    api: kube::Api<K>,
    what: &Read<'_>,
    namespace: &Namespace,
    name: &str,
) -> anyhow::Result<Value>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Serialize,
{
    let Read {
        kind,
        rbac,
        unserved,
    } = what;
    match tokio::time::timeout(GET_TIMEOUT, api.get_opt(name)).await {
        Ok(Ok(Some(object))) => Ok(serde_json::to_value(object)?),
        Ok(Ok(None)) => bail!("{kind} \"{name}\" not found in namespace \"{namespace}\""),
        Ok(Err(kube::Error::Api(status))) => match (status.code, unserved) {
            (403, _) => {
                bail!("not allowed to read {kind} \"{name}\" in namespace \"{namespace}\"{rbac}")
            }
            (404, Some(plural)) => bail!(
                "{kind} \"{name}\" not found in namespace \"{namespace}\": this cluster does not serve {plural}"
            ),
            (code, _) => bail!(
                "cannot read {kind} \"{name}\" in namespace \"{namespace}\": Kubernetes answered HTTP {code}"
            ),
        },
        Ok(Err(_)) => bail!(
            "cannot read {kind} \"{name}\" in namespace \"{namespace}\": no response from Kubernetes"
        ),
        Err(_) => bail!(
            "cannot read {kind} \"{name}\" in namespace \"{namespace}\": Kubernetes did not answer in time"
        ),
    }
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

/// Every object the pod template references, with where, and every object the controller
/// consumes (a `rollsafe.dev/watch` list may name objects the template does not reference).
fn references_of(
    template: &Value,
    consumption: &Consumption,
) -> BTreeMap<ConfigRef, Vec<ReferenceAt>> {
    let mut references: BTreeMap<ConfigRef, Vec<ReferenceAt>> = BTreeMap::new();
    for reference in reference::extract(template) {
        let config = ConfigRef {
            kind: reference.kind,
            name: reference.name.clone(),
        };
        references.entry(config).or_default().push(ReferenceAt {
            path: path_of(&reference.origin, reference.kind),
            reference,
        });
    }
    for config in consumption.keys() {
        references.entry(config.clone()).or_default();
    }
    references
}

/// What the controller would make of the workload now.
struct Evaluation {
    /// The record of what it consumes now; `None` when not computed (no fingerprinter to
    /// compare with, or an object could not be read).
    now: Option<String>,
    /// The objects changed since the record.
    changed: Vec<ConfigRef>,
    /// Whether per-object changes are known: both records have per-object entries.
    per_object: bool,
    /// Whether a consumed object could not be read.
    unreadable: bool,
    /// The decision, when `now` is known.
    decision: Decision,
    /// What holds the roll, when a hold stage stopped it.
    held: Option<HeldBy>,
    /// The note of the stage that stopped it, in the controller's words (a halt, a wave).
    stopped_note: Option<String>,
    /// The controller's stages, as they ran.
    stages: Vec<StageShown>,
    /// The change is progressive: whether an earlier wave holds it is not evaluated here.
    waves_unknown: bool,
    /// The controller's cache of the workload and what it consumes.
    cache: Cache,
}

/// One of the controller's stages, as `why` shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct StageShown {
    stage: &'static str,
    /// `passed`, `stopped`, `not_reached`, or `not_evaluated` (the progression of a
    /// progressive change: the earlier waves' states are not read here).
    result: &'static str,
    /// What stopped the roll there, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
}

/// Decides as the controller does: its reconciler's stages ([`Evaluator::explain`]) on a cache
/// of the workload and what it consumes, read consistently now, with the controller's settings
/// and its brakes as the workload's own roll times give them. What only the running controller
/// knows — other workloads' rolls (the global token bucket, a full one here), rollouts it
/// followed — is not guessed. `fingerprinter` is `None` when the record cannot be compared.
fn evaluate(
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    sources: &BTreeMap<ConfigRef, Source>,
    fingerprinter: Option<&Fingerprinter>,
    settings: &PublishedSettings,
) -> Evaluation {
    let mut cache = Cache::default();
    for (config, source) in sources {
        if let Some(digests) = &source.entry {
            let source_key = SourceKey {
                kind: config.kind,
                namespace: key.namespace.clone(),
                name: config.name.as_str().into(),
            };
            cache.apply_source(source_key, digests.clone());
        }
    }
    cache.apply_workload(key.clone(), entry.clone());
    // What it consumes now, as the controller reads it (regular-expression entries included).
    let consumption = cache.consumption(key, entry);
    let unreadable = consumption
        .keys()
        .filter_map(|config| sources.get(config))
        .any(|source| source.exists.is_err());
    let per_object = entry
        .facts
        .record
        .as_deref()
        .is_some_and(|record| digest::parse_record(record).1.is_some());
    let Some(fingerprinter) = fingerprinter.filter(|_| !unreadable) else {
        let decision = if entry.facts.watched {
            if entry.facts.halted {
                Decision::Halted
            } else {
                Decision::Unknown
            }
        } else {
            Decision::NotWatched
        };
        return Evaluation {
            now: None,
            changed: Vec::new(),
            per_object,
            unreadable,
            decision,
            held: None,
            stopped_note: None,
            stages: Vec::new(),
            waves_unknown: false,
            cache,
        };
    };
    let now = Instant::now();
    let wall = Timestamp::now();
    let mut flap = FlapGuard::new(published::flap_limit(settings));
    let mut bucket = TokenBucket::new(settings.max_rolls_per_minute, settings.burst, now);
    let tracker = Tracker::default();
    let restart_window = settings
        .restart_window
        .as_deref()
        .and_then(|text| text.parse::<RestartWindow>().ok());
    let strategy = settings.strategy_defaults();
    let explanation = Evaluator {
        cache: &cache,
        fingerprinter,
        tracker: &tracker,
        dry_run: false,
        deadline: Some(now + Duration::from_secs(15)),
        retry_after: Duration::from_secs(10),
        flap: &mut flap,
        bucket: &mut bucket,
        progressive_all: settings.progressive,
        stale: false,
        consistent: true,
        restart_window: restart_window.as_ref(),
        wall,
        require_approval: &settings.require_approval,
        strategy: &strategy,
    }
    .explain(key, now);
    let current = cache.record(key, fingerprinter);
    let changed: Vec<ConfigRef> = match (&entry.facts.record, &current) {
        (Some(record), Some(current)) => {
            digest::changed_objects(record, current, consumption.keys())
                .into_iter()
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    let (decision, held, stopped_note) = match &explanation.outcome {
        None => (Decision::Unknown, None, None),
        Some(outcome) => decision_of(outcome),
    };
    let stopped_at = explanation.stages.len();
    let mut stages: Vec<StageShown> = explanation
        .stages
        .iter()
        .map(|report| StageShown {
            stage: report.stage.as_str(),
            result: if report.stopped.is_some() && report.stage != Stage::Write {
                "stopped"
            } else {
                "passed"
            },
            outcome: report
                .stopped
                .as_ref()
                .filter(|_| report.stage != Stage::Write)
                .map(outcome_label),
        })
        .collect();
    // A progressive change waits for, or is held at, the earlier waves: their states are the
    // other consumers', which this command does not read. Said, not guessed.
    let waves_unknown = settings.progressive
        || changed.iter().any(|config| {
            cache
                .source_entry(&SourceKey::of(&key.namespace, config))
                .is_some_and(|source| source.progressive)
        });
    if waves_unknown {
        for stage in &mut stages {
            if stage.stage == Stage::Progression.as_str() && stage.result == "passed" {
                stage.result = "not_evaluated";
            }
        }
    }
    stages.extend(Stage::ALL.iter().skip(stopped_at).map(|stage| StageShown {
        stage: stage.as_str(),
        result: "not_reached",
        outcome: None,
    }));
    Evaluation {
        now: current,
        changed,
        per_object,
        unreadable,
        decision,
        held,
        stopped_note,
        stages,
        waves_unknown,
        cache,
    }
}

/// What an outcome of the controller's stages comes to, for `why`: the decision, what holds it,
/// and the controller's own note where it has one.
fn decision_of(outcome: &Outcome) -> (Decision, Option<HeldBy>, Option<String>) {
    let note = |write: &Write| write.event.as_ref().map(|event| event.note.clone());
    match outcome {
        Outcome::Skip { reason: None, .. } => (Decision::Unchanged, None, None),
        Outcome::Skip {
            reason: Some(reason),
            ..
        } => match reason {
            SkipReason::NotWatched { .. } => (Decision::NotWatched, None, None),
            SkipReason::Halted => (Decision::Halted, None, None),
            SkipReason::Unchanged => (Decision::Unchanged, None, None),
            SkipReason::SourceMissing => (Decision::Withheld, None, None),
            SkipReason::RestartWindow => (Decision::Pending, Some(HeldBy::Window), None),
            SkipReason::AwaitingApproval => (Decision::Pending, Some(HeldBy::Approval), None),
            SkipReason::WaitingForWave => (Decision::Waiting, None, None),
            // A full bucket here: the global rate limit is the running controller's.
            SkipReason::RateLimited => (Decision::Roll, None, None),
            SkipReason::Unpatchable | SkipReason::NotLeader | SkipReason::StaleView => {
                (Decision::Unknown, None, None)
            }
        },
        Outcome::Patch(write) => match write.purpose {
            Purpose::Adopt => (Decision::Adopt, None, None),
            Purpose::Roll { deferred: None } => (Decision::Roll, None, note(write)),
            Purpose::Roll { deferred: Some(_) } => (Decision::Deferred, None, note(write)),
            Purpose::Halt => (Decision::Halt, None, note(write)),
            Purpose::Pend => {
                let held = if write.recheck.is_some() {
                    HeldBy::Window
                } else {
                    HeldBy::Approval
                };
                (Decision::Pending, Some(held), note(write))
            }
            Purpose::Unpend => (Decision::Unchanged, None, None),
        },
        Outcome::Held { event, .. } => (Decision::Held, None, Some(event.note.clone())),
        Outcome::Confirm { .. } | Outcome::DryRun { .. } => (Decision::Unknown, None, None),
    }
}

/// A stage's stopping outcome, as a static label.
fn outcome_label(outcome: &Outcome) -> &'static str {
    match outcome {
        Outcome::Skip {
            reason: Some(reason),
            ..
        } => reason.as_str(),
        Outcome::Skip { reason: None, .. } => "nothing_to_write",
        Outcome::DryRun { .. } => "dry_run",
        Outcome::Patch(write) => write.purpose.as_str(),
        Outcome::Confirm { .. } => "confirm",
        Outcome::Held { .. } => "held",
    }
}

/// The consumed objects as printed.
fn consumed(
    template: &Value,
    references: BTreeMap<ConfigRef, Vec<ReferenceAt>>,
    sources: &BTreeMap<ConfigRef, Source>,
    consumption: &Consumption,
    state: WatchState,
    evaluation: &Evaluation,
) -> Vec<Consumed> {
    // The keys the pod template consumes, for the objects the controller does not evaluate.
    let referenced = consumption::consumption(&OptIn::Template, Some(template));
    references
        .into_iter()
        .map(|(config, references)| {
            let source = sources.get(&config);
            let keys = consumption.get(&config).or_else(|| referenced.get(&config));
            let opted_out_by = source.and_then(|s| s.opted_out_by);
            let evaluated = state.evaluated() && consumption.contains_key(&config);
            Consumed {
                exists: source.and_then(|s| s.exists.ok()),
                read_error: source.and_then(|s| s.exists.err()),
                keys: match keys {
                    Some(Keys::Some(keys)) => Some(keys.iter().cloned().collect()),
                    _ => None,
                },
                watched: evaluated && opted_out_by.is_none(),
                opted_out_by,
                changed: (evaluation.per_object && evaluated && opted_out_by.is_none())
                    .then(|| evaluation.changed.contains(&config)),
                kind: config.kind,
                name: config.name,
                references,
            }
        })
        .collect()
}

/// Reads one consumed object: in full when `values` (reduced to digests in the read), else its
/// metadata only.
async fn read_source(
    client: &kube::Client,
    namespace: &Namespace,
    config: &ConfigRef,
    values: bool,
    reloader_compat: bool,
) -> Source {
    if !is_dns1123_subdomain(&config.name) {
        return Source {
            exists: Ok(false),
            opted_out_by: None,
            entry: None,
        };
    }
    let kind = config.kind;
    let name = config.name.as_str();
    let read = if values {
        rollsafe_kube::read_source_reduced(client, kind, namespace, name, GET_TIMEOUT, |object| {
            let opted_out_by = opted_out_by(object.pointer("/metadata/annotations"));
            (
                SourceEntry::from_object_in(kind, object, reloader_compat),
                opted_out_by,
            )
        })
        .await
        .map(|read| read.map(|(entry, by)| (Some(entry), by)))
    } else {
        rollsafe_kube::read_source_metadata(client, kind, namespace, name, GET_TIMEOUT)
            .await
            .map(|read| {
                read.map(|metadata| {
                    let annotations = serde_json::to_value(metadata.annotations).ok();
                    (None, opted_out_by(annotations.as_ref()))
                })
            })
    };
    match read {
        Ok(Some((entry, opted_out_by))) => Source {
            exists: Ok(true),
            opted_out_by,
            entry,
        },
        Ok(None) => Source {
            exists: Ok(false),
            opted_out_by: None,
            entry: None,
        },
        Err(error) => Source {
            exists: Err(error.code()),
            opted_out_by: None,
            entry: None,
        },
    }
}

/// The Secrets and ConfigMaps of `namespace` whose names `patterns` match (a metadata list per
/// kind the patterns name); none when a list fails (the objects are then not shown, and what
/// they decide reads as the others').
async fn matching_objects(
    client: &kube::Client,
    namespace: &Namespace,
    patterns: &[reloader::NamePattern],
) -> Vec<ConfigRef> {
    let mut found = Vec::new();
    for kind in [TargetKind::Secret, TargetKind::ConfigMap] {
        if !patterns.iter().any(|pattern| pattern.kind == kind) {
            continue;
        }
        let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(
            client.clone(),
            namespace.as_str(),
            &rollsafe_kube::read::api_resource(kind),
        );
        let listed = tokio::time::timeout(
            LIST_PAGE_TIMEOUT,
            api.list_metadata(&kube::api::ListParams::default()),
        )
        .await;
        let Ok(Ok(list)) = listed else {
            continue;
        };
        found.extend(
            list.items
                .into_iter()
                .filter_map(|object| object.metadata.name)
                .filter(|name| patterns.iter().any(|pattern| pattern.matches(kind, name)))
                .map(|name| ConfigRef { kind, name }),
        );
    }
    found
}

/// Which opt-out annotation of a source says "false", if any.
fn opted_out_by(annotations: Option<&Value>) -> Option<&'static str> {
    let value = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    [WATCH, RESTART_ON_CHANGE]
        .into_iter()
        .find(|key| opt_in::source_opted_out(value(key), None))
}

fn roll_now(
    state: WatchState,
    entry: &WorkloadEntry,
    record: RecordState,
    fingerprinter: &Fingerprinter,
    evaluation: &Evaluation,
    held: Option<&str>,
    known: bool,
) -> RollNow {
    let decision = evaluation.decision;
    let unreadable = evaluation.unreadable;
    let changed: Vec<String> = evaluation.changed.iter().map(ToString::to_string).collect();
    let names = changed.join(", ");
    let stopped = evaluation.stopped_note.as_deref();
    let reason = match decision {
        Decision::Roll if names.is_empty() => {
            "would roll now: what it consumes changed since its record".to_owned()
        }
        Decision::Roll if evaluation.waves_unknown => format!(
            "would roll{} once the earlier waves of its progressive rollout have finished (not evaluated here)",
            if names.is_empty() { String::new() } else { format!(" for {names}") }
        ),
        Decision::Roll => format!("would roll now: {names} changed since its record"),
        Decision::Deferred => format!(
            "would patch its pod template{}, but its pods do not roll now: {}",
            if names.is_empty() {
                String::new()
            } else {
                format!(" for {names}")
            },
            entry.facts.deferral.map_or("deferred", |d| d.reason())
        ),
        Decision::Withheld => {
            "would not roll now: it changed, but an object it consumes does not exist (the roll is withheld until it does)".to_owned()
        }
        Decision::Adopt if record == RecordState::None => {
            "would not roll: no rollsafe.dev/config-record yet; rollsafe watch adopts it (writes the record) without a roll".to_owned()
        }
        Decision::Adopt => {
            "would not roll: only the set of objects it consumes changed; rollsafe watch writes the new record without a roll".to_owned()
        }
        Decision::Unchanged => {
            "would not roll: what it consumes matches its rollsafe.dev/config-record".to_owned()
        }
        Decision::Halted => {
            "would not roll: halted by the flap stop (rollsafe.dev/halted)".to_owned()
        }
        Decision::Halt => format!(
            "would not roll: the flap stop would halt it instead ({})",
            stopped.unwrap_or("rolled too often")
        ),
        Decision::Pending => format!("would not roll now: {}", held.unwrap_or("held")),
        Decision::Waiting => {
            "would not roll now: its progressive roll waits for an earlier wave to finish".to_owned()
        }
        Decision::Held => format!(
            "would not roll now: {}",
            stopped.unwrap_or("the progressive rollout is held at a stalled earlier wave")
        ),
        Decision::NotWatched => format!("would not roll: {}", state.reason()),
        Decision::Unknown if unreadable => {
            "unknown: an object it consumes could not be read".to_owned()
        }
        Decision::Unknown if record == RecordState::Keyed && !fingerprinter.is_keyed() => {
            "unknown: its record was written under a fingerprint key (v1k:); pass the key rollsafe watch uses with --fingerprint-key-file".to_owned()
        }
        Decision::Unknown if record == RecordState::Unkeyed && fingerprinter.is_keyed() => {
            "unknown: its record was written without a fingerprint key (v1:), but one was given".to_owned()
        }
        Decision::Unknown => "unknown: the workload cannot be evaluated".to_owned(),
    };
    // Without the controller's settings, an unset opt-in was evaluated as under --all: the
    // answer is both, never a guess of which.
    let (decision, under_all) = if state == WatchState::Unset && !known {
        (Decision::NotWatched, Some(decision))
    } else {
        (decision, None)
    };
    let reason = match under_all {
        Some(under_all) => format!(
            "would not roll: {} (under --all: {reason})",
            state.reason(),
            reason = if under_all == Decision::NotWatched {
                "not watched".to_owned()
            } else {
                reason
            }
        ),
        None => reason,
    };
    RollNow {
        rolls: decision == Decision::Roll,
        decision,
        reason,
        changed,
        under_all,
    }
}

/// The most recent of rollsafe watch's Events.
fn last_event(events: Vec<EventSummary>) -> Option<LastEvent> {
    events
        .into_iter()
        .filter(|event| WATCH_EVENT_REASONS.contains(&event.reason.as_str()))
        .max_by_key(|event| event.time)
        .map(|event| LastEvent {
            reason: event.reason,
            type_: event.type_,
            note: shown(&event.note),
            time: event.time.map(|t| t.to_string()),
            count: event.count,
        })
}

/// The path of a reference in the workload, kubectl-style (`spec.template.spec.containers[app]…`).
fn path_of(origin: &Origin, kind: TargetKind) -> String {
    path_in("spec.template.spec", origin, kind)
}

/// The path of a reference under the pod spec at `spec` (`spec.template.spec` in a workload,
/// `spec` in a pod).
fn path_in(spec: &str, origin: &Origin, kind: TargetKind) -> String {
    let list = |list: &ContainerList| match list {
        ContainerList::Container => "containers",
        ContainerList::InitContainer => "initContainers",
        ContainerList::EphemeralContainer => "ephemeralContainers",
    };
    let named = |name: &Option<String>| name.as_deref().unwrap_or("?").to_owned();
    let (key_ref, env_ref, volume_field) = match kind {
        TargetKind::Secret => ("secretKeyRef", "secretRef", "secret"),
        TargetKind::ConfigMap => ("configMapKeyRef", "configMapRef", "configMap"),
    };
    match origin {
        Origin::Env {
            container_list,
            container,
            env,
            ..
        } => format!(
            "{spec}.{}[{}].env[{}].valueFrom.{key_ref}",
            list(container_list),
            named(container),
            named(env)
        ),
        Origin::EnvFrom {
            container_list,
            container,
            ..
        } => format!(
            "{spec}.{}[{}].envFrom[].{env_ref}",
            list(container_list),
            named(container)
        ),
        Origin::Volume { volume } => format!("{spec}.volumes[{}].{volume_field}", named(volume)),
        Origin::ProjectedVolume { volume, source } => format!(
            "{spec}.volumes[{}].projected.sources[{source}].{volume_field}",
            named(volume)
        ),
        Origin::ImagePullSecret => format!("{spec}.imagePullSecrets[]"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_origin_has_a_path() {
        let template = json!({"spec": {
            "initContainers": [{"name": "init", "envFrom": [{"configMapRef": {"name": "c"}}]}],
            "volumes": [{"name": "p", "projected": {"sources": [{"secret": {"name": "s"}}]}}],
            "imagePullSecrets": [{"name": "reg"}]
        }});
        let paths: Vec<String> = reference::extract(&template)
            .iter()
            .map(|r| path_of(&r.origin, r.kind))
            .collect();
        assert_eq!(
            paths,
            [
                "spec.template.spec.initContainers[init].envFrom[].configMapRef",
                "spec.template.spec.volumes[p].projected.sources[0].secret",
                "spec.template.spec.imagePullSecrets[]",
            ]
        );
    }

    #[test]
    fn opt_outs_and_the_last_event() {
        assert_eq!(
            opted_out_by(Some(&json!({RESTART_ON_CHANGE: " False "}))),
            Some(RESTART_ON_CHANGE)
        );
        assert_eq!(opted_out_by(Some(&json!({WATCH: "true"}))), None);
        assert_eq!(opted_out_by(None), None);
        let event = |reason: &str, time: &str| EventSummary {
            reason: reason.to_owned(),
            type_: "Normal".to_owned(),
            note: "n\u{7}ote".to_owned(),
            time: time.parse().ok(),
            count: 1,
        };
        let last = last_event(vec![
            event("Rolled", "2026-01-01T00:00:00Z"),
            event("Halted", "2026-01-02T00:00:00Z"),
            event("ScalingReplicaSet", "2026-01-03T00:00:00Z"),
        ])
        .unwrap();
        assert_eq!(
            (last.reason.as_str(), last.note.as_str()),
            ("Halted", "note")
        );
        assert!(last_event(vec![event("Killing", "2026-01-01T00:00:00Z")]).is_none());
    }
}
