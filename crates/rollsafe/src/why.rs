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
//! Exit codes: 0 when the workload was explained (whatever the answer); 1, with one line on
//! stderr and nothing on stdout, when it does not exist, cannot be read, or the target, the
//! namespace or the fingerprint key is invalid.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::bail;
use jiff::Timestamp;
use rollsafe_core::name::Namespace;
use rollsafe_core::opt_in::{self, OptIn, RESTART_ON_CHANGE, WATCH};
use rollsafe_core::reference::{self, ConfigRef, ContainerList, Origin, Reference, TargetKind};
use rollsafe_core::rollout;
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::window::RestartWindow;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::EventSummary;
use rollsafe_kube::transport::{GET_TIMEOUT, LIST_PAGE_TIMEOUT};
use rollsafe_watch::Fingerprinter;
use rollsafe_watch::annotations::CONFIG_RECORD;
use rollsafe_watch::approval::{self, HeldBy, PendingMark};
use rollsafe_watch::cache::{Cache, SourceEntry, SourceKey, WorkloadEntry, WorkloadKey};
use rollsafe_watch::consumption::{self, Consumption, Keys};
use rollsafe_watch::decision::{self, CHANGE_CAUSE, RollDecision};
use rollsafe_watch::digest;
use rollsafe_watch::windows;
use serde::Serialize;
use serde_json::Value;

use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::{WorkloadTarget, namespace_flag};
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
    /// The `--restart-window` `rollsafe watch` runs with, if any: a roll due outside it is
    /// held.
    #[arg(long, value_name = "WINDOW", env = "ROLLSAFE_WATCH_RESTART_WINDOW")]
    pub restart_window: Option<String>,
    /// How to print the result (`text`: one line per fact).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The workload, as kubectl names it: `deployment/NAME` (`deploy/`), `statefulset/NAME`
    /// (`sts/`) or `daemonset/NAME` (`ds/`).
    pub workload: String,
}

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 the workload is explained (whatever the \
    answer); 1 it does not exist or cannot be read, or the target, namespace or fingerprint key \
    is invalid (one line on stderr, nothing on stdout).";

/// The Event reasons `rollsafe watch` writes on a workload.
const WATCH_EVENT_REASONS: [&str; 3] = ["Rolled", "RolloutDeferred", "Halted"];

/// The most characters of an annotation value or Event note shown.
const MAX_SHOWN: usize = 512;

/// The whole answer, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Why {
    kind: WorkloadKind,
    namespace: String,
    name: String,
    watch: Watch,
    /// `rollsafe.dev/halted`, when set.
    halted: Option<Halted>,
    /// A due roll held by a restart window, when one is.
    pending: Option<Pending>,
    /// Every consumed object, sorted by kind and name.
    consumes: Vec<Consumed>,
    roll_now: RollNow,
    last_roll: LastRoll,
    rollout: Rollout,
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
            WatchState::Invalid => {
                "not watched: its rollsafe.dev/watch value is not understood (secret/NAME or configmap/NAME entries, \"true\" or \"false\")"
            }
        }
    }

    /// Whether the controller evaluates it, under `--all` for an unset one.
    fn evaluated(self) -> bool {
        matches!(
            self,
            WatchState::OptedIn | WatchState::Listed | WatchState::Unset
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
    /// A roll (or deferred roll) is due, but a restart window holds it.
    Pending,
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
    let target = WorkloadTarget::parse(&args.workload)?;
    let namespace = namespace_flag(args.kube.namespace.as_deref())?;
    let fingerprinter = watch::fingerprinter(args.fingerprint_key_file.as_deref())?;
    let restart_window = match args.restart_window.as_deref() {
        Some(text) => match text.parse::<RestartWindow>() {
            Ok(window) => Some(window),
            Err(error) => bail!("--restart-window: {error}"),
        },
        None => None,
    };
    let identity = args.kube.identity()?;
    let why = process::runtime()?.block_on(async {
        let connection = args.kube.connect().await?;
        let namespace = match namespace {
            Some(namespace) => namespace,
            None => args.kube.context_namespace(&connection)?,
        };
        let client = connection.client(identity.as_ref());
        let settings = Settings {
            fingerprinter: &fingerprinter,
            restart_window: restart_window.as_ref(),
        };
        explain(&client, &namespace, &target, settings).await
    })?;
    let out = match args.output {
        OutputFormat::Json => restart_exit::json(&why)?,
        OutputFormat::Text => text(&why),
    };
    stdout::line(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The controller's settings the answer depends on.
#[derive(Clone, Copy)]
struct Settings<'a> {
    fingerprinter: &'a Fingerprinter,
    restart_window: Option<&'a RestartWindow>,
}

async fn explain(
    client: &kube::Client,
    namespace: &Namespace,
    target: &WorkloadTarget,
    settings: Settings<'_>,
) -> anyhow::Result<Why> {
    let Settings {
        fingerprinter,
        restart_window,
    } = settings;
    let WorkloadTarget { kind, name } = target;
    let object = read_workload(client, namespace, target).await?;
    let annotation = |key: &str| annotation(&object, key);
    let state = WatchState::of(annotation(WATCH));
    let record = annotation(CONFIG_RECORD);
    let record_state = match record {
        None => RecordState::None,
        Some(r) if digest::is_keyed(r) => RecordState::Keyed,
        Some(_) => RecordState::Unkeyed,
    };
    // An unset opt-in is evaluated as the controller would under --all.
    let entry = WorkloadEntry::from_object((*kind).into(), &object, state == WatchState::Unset);
    let consumption = entry.consumption.expand();
    // Comparable: no record, or one written with the key (or without one) as given here.
    let comparable = record_state == RecordState::None
        || (record_state == RecordState::Keyed) == fingerprinter.is_keyed();
    let read_values = state.evaluated() && comparable;
    let template = reference::pod_template(&object).unwrap_or(&Value::Null);
    let references = references_of(template, &consumption);
    let mut sources = BTreeMap::new();
    for config in references.keys() {
        let values = read_values && consumption.contains_key(config);
        let source = read_source(client, namespace, config, values).await;
        sources.insert(config.clone(), source);
    }
    let key = WorkloadKey {
        kind: (*kind).into(),
        namespace: namespace.as_str().into(),
        name: name.as_str().into(),
    };
    let evaluation = evaluate(&key, &entry, &sources, read_values.then_some(fingerprinter));
    let decision = match &evaluation.now {
        Some(_) => evaluation.decision,
        None if !state.evaluated() => Decision::NotWatched,
        None if entry.facts.halted => Decision::Halted,
        None => Decision::Unknown,
    };
    // A due roll the controller holds, by its own rules: first an approval it does not have
    // (the workload's or a changed object's rollsafe.dev/approval, or the controller's mark: its
    // --require-approval is not known here), then a closed restart window.
    let names: Vec<String> = evaluation.changed.iter().map(ToString::to_string).collect();
    let changed: BTreeSet<SourceKey> = evaluation
        .changed
        .iter()
        .map(|config| SourceKey::of(namespace.as_str(), config))
        .collect();
    let due_roll = matches!(decision, Decision::Roll | Decision::Deferred);
    let due = evaluation
        .now
        .as_deref()
        .map(|now| digest::parse_record(now).0);
    let mark = entry.pending.as_deref().and_then(PendingMark::parse);
    let marked_for_approval =
        mark.filter(|mark| mark.held_by == HeldBy::Approval && Some(mark.digest) == due);
    let awaiting = due_roll
        && (approval::required(&evaluation.cache, &key, &entry, &changed, &[])
            || marked_for_approval.is_some())
        && entry.approved.as_deref() != due;
    let pending = if awaiting {
        Some(Pending {
            held_by: "approval",
            until: None,
            since: marked_for_approval.and_then(|mark| mark.at.map(str::to_owned)),
            reason: approval::awaiting_note(&key, &names.join(", ")),
            marked: mark.is_some_and(|mark| mark.held_by == HeldBy::Approval),
        })
    } else {
        due_roll
            .then(|| {
                windows::holding(
                    &evaluation.cache,
                    &entry,
                    &changed,
                    restart_window,
                    Timestamp::now(),
                )
            })
            .flatten()
            .map(|closed| Pending {
                held_by: "window",
                until: closed.until.map(|until| until.to_string()),
                since: None,
                reason: closed.note(&names.join(", ")),
                marked: mark.is_some_and(|mark| mark.held_by == HeldBy::Window),
            })
    };
    let decision = if pending.is_some() {
        Decision::Pending
    } else {
        decision
    };
    let halted = opt_in::halted(&object).map(|reason| Halted {
        reason,
        resume: format!(
            "kubectl annotate -n {namespace} {}/{name} {}-",
            kind.as_str().to_ascii_lowercase(),
            opt_in::HALTED
        ),
    });
    let roll_now = roll_now(
        decision,
        state,
        &entry,
        record_state,
        fingerprinter,
        &evaluation,
        pending.as_ref().map(|pending| pending.reason.as_str()),
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
    Ok(Why {
        kind: *kind,
        namespace: namespace.to_string(),
        name: name.clone(),
        watch: Watch {
            state,
            value: annotation(WATCH).map(shown),
            reason: state.reason(),
        },
        halted,
        pending,
        consumes,
        roll_now,
        last_roll,
        rollout: Rollout {
            describe: status.describe(),
            status,
        },
    })
}

/// Reads the workload; a missing or unreadable one is the command's error (exit 1).
async fn read_workload(
    client: &kube::Client,
    namespace: &Namespace,
    target: &WorkloadTarget,
) -> anyhow::Result<Value> {
    let WorkloadTarget { kind, name } = target;
    match rollsafe_kube::read_workload(client, *kind, namespace, name, GET_TIMEOUT).await {
        Ok(Some(object)) => Ok(object),
        Ok(None) => bail!("{kind} \"{name}\" not found in namespace \"{namespace}\""),
        Err(error) if error.is_forbidden() => {
            bail!("not allowed to read {kind} \"{name}\" in namespace \"{namespace}\"")
        }
        Err(error) => bail!("cannot read {kind} \"{name}\" in namespace \"{namespace}\": {error}"),
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
    /// The controller's cache of the workload and what it consumes, for the holds' rules.
    cache: Cache,
}

/// Decides as the controller does: the watch crate's cache of one workload and what it
/// consumes, its record, [`decision::decide`], and its withholding of a roll while a consumed
/// object is missing. `fingerprinter` is `None` when the record cannot be compared.
fn evaluate(
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    sources: &BTreeMap<ConfigRef, Source>,
    fingerprinter: Option<&Fingerprinter>,
) -> Evaluation {
    let consumption = entry.consumption.expand();
    let unreadable = consumption
        .keys()
        .filter_map(|config| sources.get(config))
        .any(|source| source.exists.is_err());
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
    let now = fingerprinter
        .filter(|_| !unreadable)
        .and_then(|f| cache.record(key, f));
    let Some(now) = now else {
        return Evaluation {
            now: None,
            changed: Vec::new(),
            per_object: false,
            unreadable,
            decision: Decision::Unknown,
            cache,
        };
    };
    let changed = match &entry.facts.record {
        Some(record) => digest::changed_objects(record, &now, consumption.keys())
            .into_iter()
            .cloned()
            .collect(),
        None => Vec::new(),
    };
    let decision = match decision::decide(&entry.facts, &now) {
        RollDecision::NotWatched => Decision::NotWatched,
        RollDecision::Halted => Decision::Halted,
        RollDecision::Unchanged => Decision::Unchanged,
        RollDecision::Adopt { .. } => Decision::Adopt,
        RollDecision::Roll { .. } if !cache.sources_present(key) => Decision::Withheld,
        RollDecision::Roll { deferred: None, .. } => Decision::Roll,
        RollDecision::Roll {
            deferred: Some(_), ..
        } => Decision::Deferred,
    };
    let per_object = entry
        .facts
        .record
        .as_deref()
        .is_some_and(|record| digest::parse_record(record).1.is_some());
    Evaluation {
        now: Some(now),
        changed,
        per_object,
        unreadable,
        decision,
        cache,
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
            (SourceEntry::from_object(kind, object), opted_out_by)
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

/// Which opt-out annotation of a source says "false", if any.
fn opted_out_by(annotations: Option<&Value>) -> Option<&'static str> {
    let value = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
    [WATCH, RESTART_ON_CHANGE]
        .into_iter()
        .find(|key| opt_in::source_opted_out(value(key), None))
}

fn roll_now(
    decision: Decision,
    state: WatchState,
    entry: &WorkloadEntry,
    record: RecordState,
    fingerprinter: &Fingerprinter,
    evaluation: &Evaluation,
    held: Option<&str>,
) -> RollNow {
    let unreadable = evaluation.unreadable;
    let changed: Vec<String> = evaluation.changed.iter().map(ToString::to_string).collect();
    let names = changed.join(", ");
    let reason = match decision {
        Decision::Roll if names.is_empty() => {
            "would roll now: what it consumes changed since its record".to_owned()
        }
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
        Decision::Pending => format!("would not roll now: {}", held.unwrap_or("held")),
        Decision::NotWatched => format!("would not roll: {}", state.reason()),
        Decision::Unknown if unreadable => {
            "unknown: an object it consumes could not be read".to_owned()
        }
        Decision::Unknown if record == RecordState::Keyed && !fingerprinter.is_keyed() => {
            "unknown: its record was written under a fingerprint key (v1k:); pass the key rollsafe watch uses with --fingerprint-key-file".to_owned()
        }
        Decision::Unknown => {
            "unknown: its record was written without a fingerprint key (v1:), but one was given".to_owned()
        }
    };
    let (decision, under_all) = if state == WatchState::Unset {
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

/// A value shown: control characters dropped, at most [`MAX_SHOWN`] characters.
fn shown(value: &str) -> String {
    value
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_SHOWN)
        .collect()
}

/// The path of a reference in the workload, kubectl-style (`spec.template.spec.containers[app]…`).
fn path_of(origin: &Origin, kind: TargetKind) -> String {
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
    let spec = "spec.template.spec";
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

fn text(why: &Why) -> String {
    let mut out = format!("{} {}/{}", why.kind, why.namespace, why.name);
    out.push_str(&format!("\nwatch:     {}", why.watch.reason));
    // "true" and "false" are in the reason already; a list or a value not understood is shown.
    if let (WatchState::Listed | WatchState::Invalid, Some(value)) =
        (why.watch.state, &why.watch.value)
    {
        out.push_str(&format!(" [rollsafe.dev/watch: {value:?}]"));
    }
    match &why.halted {
        Some(halted) => out.push_str(&format!(
            "\nhalted:    yes ({}); to resume: {}",
            halted.reason, halted.resume
        )),
        None => out.push_str("\nhalted:    no"),
    }
    if let Some(pending) = &why.pending {
        out.push_str(&format!(
            "\npending:   {}{}",
            pending.reason,
            if pending.marked {
                " (marked rollsafe.dev/pending)"
            } else {
                ""
            }
        ));
    }
    if why.consumes.is_empty() {
        out.push_str("\nconsumes:  nothing (no Secret or ConfigMap referenced)");
    }
    for consumed in &why.consumes {
        let exists = match (consumed.exists, consumed.read_error) {
            (Some(true), _) => "exists".to_owned(),
            (Some(false), _) => "missing".to_owned(),
            (None, Some(code)) => format!("unreadable ({code})"),
            (None, None) => "unknown".to_owned(),
        };
        let keys = match &consumed.keys {
            Some(keys) => format!("keys {}", keys.join(", ")),
            None => "every key".to_owned(),
        };
        let watched = match (consumed.watched, consumed.opted_out_by) {
            (_, Some(by)) => format!("opted out ({by}: \"false\" on the object)"),
            (true, None) => "watched".to_owned(),
            (false, None) => "not watched".to_owned(),
        };
        let changed = match consumed.changed {
            Some(true) => "; changed since the record",
            Some(false) => "; unchanged since the record",
            None => "",
        };
        out.push_str(&format!(
            "\nconsumes:  {}/{} ({exists}; {keys}; {watched}{changed})",
            consumed.kind.as_str(),
            consumed.name
        ));
        for reference in &consumed.references {
            out.push_str(&format!("\n             at {}", reference.path));
        }
    }
    out.push_str(&format!("\nroll now:  {}", why.roll_now.reason));
    let last = &why.last_roll;
    match &last.event {
        Some(event) => out.push_str(&format!(
            "\nlast:      {} at {}{}: {}",
            event.reason,
            event.time.as_deref().unwrap_or("an unknown time"),
            if event.count > 1 {
                format!(" (x{})", event.count)
            } else {
                String::new()
            },
            event.note
        )),
        None => match last.events_error {
            Some(code) => out.push_str(&format!(
                "\nlast:      the Events could not be listed ({code})"
            )),
            None => out.push_str("\nlast:      no Rolled, RolloutDeferred or Halted Event"),
        },
    }
    match last.record {
        RecordState::None => out.push_str("\nrecord:    none (never adopted by rollsafe watch)"),
        RecordState::Unkeyed | RecordState::Keyed => out.push_str(&format!(
            "\nrecord:    {}{}{}",
            if last.record == RecordState::Keyed {
                "keyed; "
            } else {
                ""
            },
            if last.recorded.is_empty() {
                "no per-object entries".to_owned()
            } else {
                format!("for {}", last.recorded.join(", "))
            },
            last.change_cause
                .as_deref()
                .map(|cause| format!("; change-cause: {cause}"))
                .unwrap_or_default()
        )),
    }
    out.push_str(&format!("\nrollout:   {}", why.rollout.describe));
    out
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
