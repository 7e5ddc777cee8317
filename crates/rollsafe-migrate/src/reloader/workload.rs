//! One workload with Reloader's annotations, as `rollsafe watch --reloader-compat` will see it:
//! what it watches — the watch crate's own reduction ([`WorkloadEntry`], which reads the
//! annotations with the core's `reloader_opt_in` and consumes with the watch crate's
//! consumption) — and every way that differs from what Reloader did.

use std::collections::{BTreeMap, BTreeSet};

use rollsafe_core::annotations::{RESTART_ON_CHANGE, WATCH};
use rollsafe_core::opt_in::reloader::{
    self, AUTO, CONFIGMAP_AUTO, CONFIGMAP_RELOAD, IGNORE, MAX_PATTERN_LEN, ReloaderOptIn, SEARCH,
    SECRET_AUTO, SECRET_RELOAD,
};
use rollsafe_core::opt_in::{OptIn, OptInError, workload_opt_in};
use rollsafe_core::reference::{self, ConfigRef, TargetKind};
use rollsafe_core::shown::shown;
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_watch::cache::{Watching, WorkloadEntry};
use rollsafe_watch::consumption::{Consumption, Keys};
use serde::Serialize;
use serde_json::{Map, Value};

use super::inventory::{Kind, LAST_RELOADED_FROM, MATCH, Marks, SourceId, is_reloaders};
use super::values::Scope;

/// Said of an annotation on the metadata that is not implemented: the controller logs each
/// once per workload, naming it, and counts it.
const LOGGED: &str = " (rollsafe watch logs it once as reloader_unsupported)";
/// Said of one on the pod template only, which the controller does not read.
const ON_TEMPLATE: &str = " (it is on the pod template, and would not be implemented on the \
    workload's metadata either)";
/// Why a consumed object of a searching workload does not roll it: no `match` on it.
const NOT_MATCHED: &str = "no reloader.stakater.com/match";
/// Reloader's per-workload exclusions, by kind.
const EXCLUDES: [(&str, TargetKind); 2] = [
    (
        "secrets.exclude.reloader.stakater.com/reload",
        TargetKind::Secret,
    ),
    (
        "configmaps.exclude.reloader.stakater.com/reload",
        TargetKind::ConfigMap,
    ),
];
/// Reloader's Argo Rollouts strategy.
const ROLLOUT_STRATEGY: &str = "reloader.stakater.com/rollout-strategy";
/// Reloader's pause after a restart (Deployments).
const PAUSE_PERIOD: &str = "deployment.reloader.stakater.com/pause-period";
/// Reloader's CSI annotations.
const SECRET_PROVIDER_CLASS: &str = "secretproviderclass.reloader.stakater.com/";
/// The prefix of the env vars Reloader's `env-vars` strategy adds.
const STAKATER_ENV: &str = "STAKATER_";

/// What is said of one workload.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadReport {
    /// Its kind.
    pub kind: Kind,
    /// `null` for a manifest that names none.
    pub namespace: Option<String>,
    /// Its name; `null` for a manifest object without one.
    pub name: Option<String>,
    /// Its Reloader annotations (on its metadata), by key.
    pub reloader_annotations: BTreeMap<String, String>,
    /// Reloader annotations on its pod template, which Reloader falls back to.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub template_annotations: BTreeMap<String, String>,
    /// Its own `rollsafe.dev/watch`, which takes precedence over Reloader's annotations.
    pub rollsafe_watch: Option<String>,
    /// Whether `rollsafe watch --reloader-compat` rolls it, and why.
    pub watch: Watch,
    /// What `rollsafe watch --reloader-compat` rolls it for, sorted by kind and name.
    pub consumes: Vec<Consumed>,
    /// How it differs from Reloader, in a fixed order.
    pub differences: Vec<Difference>,
    /// What Reloader left on it (`reloader.stakater.com/last-reloaded-from`, `STAKATER_*` env
    /// vars): left as they are, they cause no roll.
    pub leftovers: Vec<String>,
}

/// Whether `rollsafe watch --reloader-compat` rolls it, and why.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Watch {
    /// Whether it is rolled.
    pub state: WatchState,
    /// Which annotations decide.
    pub decided_by: DecidedBy,
    /// Words for people.
    pub reason: String,
    /// Why the opt-in is not understood, if so (`watch_entry`, `watch_too_many`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

/// Whether it is rolled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum WatchState {
    /// Rolled when what it consumes changes.
    Watched,
    /// Not rolled.
    NotWatched,
}

/// Which annotations decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DecidedBy {
    /// Its own `rollsafe.dev/watch`.
    #[serde(rename = "rollsafe.dev/watch")]
    RollsafeWatch,
    /// Reloader's annotations, with Reloader's meaning.
    #[serde(rename = "reloader")]
    Reloader,
}

/// One consumed Secret or ConfigMap.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Consumed {
    /// Secret or ConfigMap.
    pub kind: TargetKind,
    /// Its name.
    pub name: String,
    /// The consumed keys; `null`: every key.
    pub keys: Option<Vec<String>>,
    /// Whether its changes roll the workload.
    pub rolls: bool,
    /// What opted it out, when something did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opted_out_by: Option<&'static str>,
}

/// One way `rollsafe watch --reloader-compat` behaves differently from Reloader, or a fact the
/// migration should know.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// What kind of difference, as a stable code.
    pub code: DifferenceCode,
    /// The annotation it is about, if one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotation: Option<String>,
    /// The objects it is about (`Secret/db`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    /// The keys it is about.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// Words for people.
    pub message: String,
}

/// The kinds of difference, as stable codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DifferenceCode {
    /// Its `rollsafe.dev/watch` decides; Reloader's annotations are not read.
    RollsafeWatchFirst,
    /// Reloader annotations on the pod template, which `rollsafe watch` does not read.
    TemplateAnnotations,
    /// An annotation of Reloader's that `rollsafe watch` does not implement.
    UnsupportedAnnotation,
    /// A reload entry that is a regular expression, not an object name.
    RegexEntry,
    /// `reloader.stakater.com/auto: "false"` beside reload lists Reloader still honoured.
    AutoFalseWithReload,
    /// A key-level consumer: rolls only when its keys change.
    KeyLevel,
    /// Consumed where Reloader did not look (`imagePullSecrets`, ephemeral containers).
    NotSeenByReloader,
    /// A consumed object annotated `reloader.stakater.com/ignore`.
    IgnoredSource,
    /// A consumed object opted out with rollsafe's own annotation.
    OptedOutSource,
    /// A CronJob: its next scheduled Job runs with the change (Reloader started one at once).
    NextRun,
    /// An Argo Rollout: rolled only with `--argo-rollouts`.
    ArgoRollouts,
}

/// What decides a workload's opt-in, read with the core's functions in the controller's order.
enum Read {
    /// Its own `rollsafe.dev/watch`, which takes precedence.
    Rollsafe(String, Result<OptIn, OptInError>),
    /// Reloader's annotations; `None`: none of those the core reads.
    Reloader(Option<Result<ReloaderOptIn, OptInError>>),
}

impl Read {
    fn of(annotations: Option<&Map<String, Value>>) -> Self {
        match annotations
            .and_then(|a| a.get(WATCH))
            .and_then(Value::as_str)
        {
            Some(value) => Read::Rollsafe(shown(value), workload_opt_in(Some(value), false)),
            None => Read::Reloader(annotations.and_then(reloader::reloader_opt_in)),
        }
    }

    fn decided_by(&self) -> DecidedBy {
        match self {
            Read::Rollsafe(..) => DecidedBy::RollsafeWatch,
            Read::Reloader(_) => DecidedBy::Reloader,
        }
    }

    /// The opt-in, or why it is not understood.
    fn opt_in(&self) -> Option<Result<&OptIn, OptInError>> {
        match self {
            Read::Rollsafe(_, read) => Some(read.as_ref().map_err(|e| *e)),
            Read::Reloader(Some(read)) => Some(read.as_ref().map(|r| &r.opt_in).map_err(|e| *e)),
            Read::Reloader(None) => None,
        }
    }

    /// The objects named by a list, watched whole whether referenced or not.
    fn listed(&self) -> BTreeSet<ConfigRef> {
        match self.opt_in() {
            Some(Ok(OptIn::List(listed) | OptIn::Select { listed, .. })) => listed.clone(),
            _ => BTreeSet::new(),
        }
    }

    /// Words for why it is (not) watched, and the static code of an opt-in not understood.
    fn reason(&self, annotations: Option<&Map<String, Value>>) -> (String, Option<&'static str>) {
        let rollsafe = |value: &str| format!("rollsafe.dev/watch: {value:?} decides");
        match self {
            Read::Rollsafe(value, Ok(OptIn::Template)) => (
                format!(
                    "{}: every Secret and ConfigMap its pod template references",
                    rollsafe(value)
                ),
                None,
            ),
            Read::Rollsafe(value, Ok(OptIn::List(_) | OptIn::Select { .. })) => (
                format!("{}: the objects it lists, every key", rollsafe(value)),
                None,
            ),
            Read::Rollsafe(value, Ok(OptIn::Off)) => {
                (format!("{}: not watched", rollsafe(value)), None)
            }
            Read::Rollsafe(value, Err(error)) => (
                format!(
                    "{}, but its value is not understood: not watched ({})",
                    rollsafe(value),
                    error.code()
                ),
                Some(error.code()),
            ),
            Read::Reloader(Some(Ok(read))) => (reloader_reason(&read.opt_in, annotations), None),
            Read::Reloader(Some(Err(OptInError::Entry))) => (
                "not watched: a reload entry is not an object name (watch_entry)".to_owned(),
                Some(OptInError::Entry.code()),
            ),
            Read::Reloader(Some(Err(OptInError::TooMany))) => (
                "not watched: its reload annotations name more than 64 objects (watch_too_many)"
                    .to_owned(),
                Some(OptInError::TooMany.code()),
            ),
            Read::Reloader(Some(Err(OptInError::Pattern))) => (
                "not watched: a reload entry is neither an object name nor a regular expression \
                 rollsafe accepts (reload_pattern)"
                    .to_owned(),
                Some(OptInError::Pattern.code()),
            ),
            Read::Reloader(None) => (
                "not watched: none of the Reloader annotations rollsafe watch implements is on \
                 the workload's metadata"
                    .to_owned(),
                None,
            ),
        }
    }
}

/// Words for a Reloader opt-in.
fn reloader_reason(opt_in: &OptIn, annotations: Option<&Map<String, Value>>) -> String {
    let named = "the objects its reload annotations name, every key, referenced or not";
    match opt_in {
        OptIn::Template => {
            format!("every Secret and ConfigMap its pod template references ({AUTO}: \"true\")")
        }
        OptIn::List(_) => named.to_owned(),
        OptIn::Select {
            secrets,
            config_maps,
            listed,
            matched,
            patterns,
        } => {
            let mut parts = Vec::new();
            match (secrets, config_maps) {
                (true, true) => parts.push(format!(
                    "every Secret and ConfigMap its pod template references ({AUTO})"
                )),
                (true, false) => parts.push(format!(
                    "the Secrets its pod template references ({SECRET_AUTO})"
                )),
                (false, true) => parts.push(format!(
                    "the ConfigMaps its pod template references ({CONFIGMAP_AUTO})"
                )),
                (false, false) => {}
            }
            if *matched {
                parts.push(format!(
                    "the objects its pod template references that carry {MATCH}: \"true\" ({SEARCH})"
                ));
            }
            if !listed.is_empty() {
                parts.push(named.to_owned());
            }
            if !patterns.is_empty() {
                parts.push(
                    "every object of its namespace whose whole name matches a regular-expression \
                     reload entry, every key"
                        .to_owned(),
                );
            }
            parts.join(", and ")
        }
        OptIn::Off if is_false(annotations, AUTO) => {
            format!("not watched: {AUTO} is \"false\"")
        }
        OptIn::Off => "not watched: its Reloader annotations ask for nothing rollsafe watch \
                       implements"
            .to_owned(),
    }
}

/// The report of one workload, or `None` when it carries no Reloader annotation. `sources`
/// holds the marks of the Secrets and ConfigMaps read; `scope` what the chart values leave out.
pub fn analyse(
    kind: Kind,
    object: &Value,
    sources: &BTreeMap<SourceId, Marks>,
    scope: &Scope,
) -> Option<WorkloadReport> {
    let annotations = object
        .pointer("/metadata/annotations")
        .and_then(Value::as_object);
    let template = kind.template(object);
    let template_map = template
        .and_then(|t| t.pointer("/metadata/annotations"))
        .and_then(Value::as_object);
    let reloader_annotations = shown_annotations(annotations, is_reloaders);
    let template_annotations = shown_annotations(template_map, |key| {
        is_reloaders(key) && key != LAST_RELOADED_FROM
    });
    if reloader_annotations.is_empty() && template_annotations.is_empty() {
        return None;
    }
    let text = |field: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(field))
            .and_then(Value::as_str)
            .map(shown)
    };
    let read = Read::of(annotations);
    let mut report = WorkloadReport {
        kind,
        namespace: text("namespace"),
        name: text("name"),
        reloader_annotations,
        template_annotations,
        rollsafe_watch: match &read {
            Read::Rollsafe(value, _) => Some(value.clone()),
            Read::Reloader(_) => None,
        },
        watch: Watch {
            state: WatchState::NotWatched,
            decided_by: read.decided_by(),
            reason: String::new(),
            code: None,
        },
        consumes: Vec::new(),
        differences: Vec::new(),
        leftovers: leftovers(template),
    };
    if !scope.watches_namespace(report.namespace.as_deref()) {
        report.watch.reason = "not watched: its namespace is outside what rollsafe watch \
                               watches (controller.namespaces, controller.ignoreNamespaces)"
            .to_owned();
        return Some(report);
    }
    let entry = WorkloadEntry::from_object_in(
        kind,
        object,
        Watching {
            all: false,
            reloader_compat: true,
        },
    );
    let mut consumption = entry.consumption.expand();
    let namespace = report.namespace.clone().unwrap_or_default();
    // Reloader's expressions, matched against the objects read (the cluster's, or the
    // manifests' own): what the controller will match once it runs.
    for pattern in entry.patterns().into_iter().flatten() {
        for (source_namespace, kind, name) in sources.keys() {
            if *source_namespace == namespace && pattern.matches(*kind, name) {
                consumption.insert(
                    ConfigRef {
                        kind: *kind,
                        name: name.clone(),
                    },
                    Keys::All,
                );
            }
        }
    }
    let marks = |config: &ConfigRef| {
        sources
            .get(&(namespace.clone(), config.kind, config.name.clone()))
            .copied()
            .unwrap_or_default()
    };
    let (reason, code) = read.reason(annotations);
    report.watch.state = if entry.facts.watched {
        WatchState::Watched
    } else {
        WatchState::NotWatched
    };
    report.watch.reason = if entry.facts.watched {
        format!("watched: {reason}")
    } else {
        reason
    };
    report.watch.code = code;
    report.consumes = consumed(
        &consumption,
        &marks,
        scope,
        entry.match_only.as_deref().unwrap_or_default(),
    );
    let seen = Seen {
        annotations,
        template_annotations: template_map,
        template,
        consumption: &consumption,
    };
    report.differences = differences(&read, &report, &seen);
    if entry.facts.watched {
        report.differences.extend(kind_difference(kind));
    }
    Some(report)
}

/// What differs for the kinds Reloader restarts another way.
fn kind_difference(kind: Kind) -> Option<Difference> {
    let message = match kind {
        Kind::CronJob => {
            "on a change Reloader created a Job from this CronJob at once (even a suspended one); \
             rollsafe watch patches its Jobs' pod template: the next scheduled Job runs with the \
             change, running Jobs are left alone and no Job is started out of schedule"
        }
        Kind::Rollout => {
            "rolled only when rollsafe watch runs with --argo-rollouts (chart value \
             controller.argoRollouts: true), through its pod template, as Reloader's default \
             rollout strategy does"
        }
        _ => return None,
    };
    let code = match kind {
        Kind::CronJob => DifferenceCode::NextRun,
        _ => DifferenceCode::ArgoRollouts,
    };
    Some(difference(code, None, Vec::new(), message.to_owned()))
}

/// What the differences are computed from.
struct Seen<'a> {
    annotations: Option<&'a Map<String, Value>>,
    template_annotations: Option<&'a Map<String, Value>>,
    template: Option<&'a Value>,
    consumption: &'a Consumption,
}

/// The consumed objects as reported.
/// `match_only`: the objects watched only while they carry Reloader's `match` (its `search`).
fn consumed(
    consumption: &Consumption,
    marks: &dyn Fn(&ConfigRef) -> Marks,
    scope: &Scope,
    match_only: &[ConfigRef],
) -> Vec<Consumed> {
    consumption
        .iter()
        .map(|(config, keys)| {
            let marks = marks(config);
            let opted_out_by = if scope.ignore_kinds.contains(&config.kind) {
                Some("controller.ignoreKinds")
            } else if let Some(by) = marks.opted_out_by {
                Some(by)
            } else if marks.ignore {
                Some(IGNORE)
            } else {
                (match_only.contains(config) && !marks.matched).then_some(NOT_MATCHED)
            };
            Consumed {
                kind: config.kind,
                name: config.name.clone(),
                keys: match keys {
                    Keys::All => None,
                    Keys::Some(keys) => Some(keys.iter().cloned().collect()),
                },
                rolls: opted_out_by.is_none(),
                opted_out_by,
            }
        })
        .collect()
}

/// Every difference, in a fixed order: what decides, where the annotations are, what is not
/// implemented, then per consumed object.
fn differences(read: &Read, report: &WorkloadReport, seen: &Seen<'_>) -> Vec<Difference> {
    let mut out = Vec::new();
    if let Read::Rollsafe(value, _) = read {
        out.push(difference(
            DifferenceCode::RollsafeWatchFirst,
            Some(WATCH),
            Vec::new(),
            format!(
                "rollsafe.dev/watch: {value:?} takes precedence: rollsafe watch does not read \
                 its Reloader annotations"
            ),
        ));
    }
    template_annotations(report, &mut out);
    if report.reloader_annotations.is_empty() {
        // Only on the pod template: what would not be implemented there either, named too.
        unsupported(
            seen.template_annotations,
            seen.consumption,
            ON_TEMPLATE,
            &mut out,
        );
    }
    if matches!(read, Read::Reloader(_)) {
        unsupported(seen.annotations, seen.consumption, LOGGED, &mut out);
        regex_entries(seen.annotations, report.watch.code, &mut out);
        auto_false_with_reload(seen.annotations, &mut out);
        key_level(report, &mut out);
        not_seen_by_reloader(seen, &read.listed(), &mut out);
    }
    source_opt_outs(report, &mut out);
    out
}

fn difference(
    code: DifferenceCode,
    annotation: Option<&str>,
    objects: Vec<String>,
    message: String,
) -> Difference {
    Difference {
        code,
        annotation: annotation.map(str::to_owned),
        objects,
        keys: Vec::new(),
        message,
    }
}

/// Reloader annotations on the pod template: Reloader read them when the workload's metadata
/// had none of its own; `rollsafe watch` reads the metadata only.
fn template_annotations(report: &WorkloadReport, out: &mut Vec<Difference>) {
    if report.template_annotations.is_empty() {
        return;
    }
    let keys = report
        .template_annotations
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    let message = if report.reloader_annotations.is_empty() {
        format!(
            "its Reloader annotations are on the pod template ({keys}), where Reloader found \
             them because its metadata has none; rollsafe watch reads the workload's metadata \
             only, so it does not watch it: copy them to metadata.annotations (a metadata edit \
             rolls nothing)"
        )
    } else {
        format!(
            "the Reloader annotations on its pod template ({keys}) are not read by rollsafe \
             watch, which reads the workload's metadata only"
        )
    };
    out.push(difference(
        DifferenceCode::TemplateAnnotations,
        None,
        Vec::new(),
        message,
    ));
}

/// Each Reloader annotation of `annotations` (the metadata's, or the pod template's) that
/// `rollsafe watch` does not implement.
fn unsupported(
    annotations: Option<&Map<String, Value>>,
    consumption: &Consumption,
    logged: &str,
    out: &mut Vec<Difference>,
) {
    let Some(annotations) = annotations else {
        return;
    };
    // Sorted, as the API server sends them: a manifest's order would make the report differ.
    let sorted: BTreeMap<&String, &Value> = annotations.iter().collect();
    for (key, value) in sorted {
        if !is_reloaders(key)
            || key == LAST_RELOADED_FROM
            || reloader::IMPLEMENTED.contains(&key.as_str())
        {
            continue;
        }
        let (objects, message) = match key.as_str() {
            ROLLOUT_STRATEGY => (
                Vec::new(),
                format!(
                    "{key} is Reloader's for Argo Rollouts only; rollsafe watch rolls by one \
                     pod-template annotation and does not implement it{logged}"
                ),
            ),
            PAUSE_PERIOD => (
                Vec::new(),
                format!(
                    "{key}: rollsafe watch does not pause a Deployment after a roll; its \
                     debounce, rate limit and flap stop bound the rolls instead{logged}"
                ),
            ),
            MATCH | IGNORE => (
                Vec::new(),
                format!(
                    "{key} belongs on a Secret or ConfigMap; on a workload neither Reloader nor \
                     rollsafe watch acts on it"
                ),
            ),
            _ if key.starts_with(SECRET_PROVIDER_CLASS) => (
                Vec::new(),
                format!("{key}: SecretProviderClasses (CSI) are not watched by rollsafe{logged}"),
            ),
            _ => match EXCLUDES.iter().find(|(exclude, _)| key == exclude) {
                Some((_, kind)) => excluded(key, *kind, value, consumption, logged),
                None => (
                    Vec::new(),
                    format!(
                        "{key} is not implemented by rollsafe watch --reloader-compat{logged}; \
                         the Reloader annotations it implements still apply"
                    ),
                ),
            },
        };
        out.push(difference(
            DifferenceCode::UnsupportedAnnotation,
            Some(key),
            objects,
            message,
        ));
    }
}

/// An exclusion list: the consumed objects it names are rolled for now.
fn excluded(
    key: &str,
    kind: TargetKind,
    value: &Value,
    consumption: &Consumption,
    logged: &str,
) -> (Vec<String>, String) {
    let rolled: Vec<String> = entries(value.as_str().unwrap_or_default())
        .map(|name| ConfigRef {
            kind,
            name: name.to_owned(),
        })
        .filter(|config| consumption.contains_key(config))
        .map(|config| config.to_string())
        .collect();
    let message = if rolled.is_empty() {
        format!(
            "{key}: Reloader did not restart it for the objects it names; rollsafe watch does \
             not implement exclusions{logged}, though none of them is consumed here"
        )
    } else {
        format!(
            "{key}: Reloader did not restart it for {list}; rollsafe watch does not implement \
             exclusions{logged} and rolls it when {list} changes",
            list = rolled.join(", ")
        )
    };
    (rolled, message)
}

/// The entries of a reload list.
fn entries(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

/// Each reload entry that is not an object name: a regular expression to Reloader.
fn regex_entries(
    annotations: Option<&Map<String, Value>>,
    code: Option<&'static str>,
    out: &mut Vec<Difference>,
) {
    for (key, kind) in [
        (SECRET_RELOAD, TargetKind::Secret),
        (CONFIGMAP_RELOAD, TargetKind::ConfigMap),
    ] {
        let value = text(annotations, key).unwrap_or_default();
        for entry in entries(value).filter(|e| !is_dns1123_subdomain(e)) {
            let message = if code == Some(OptInError::Pattern.code()) {
                format!(
                    "entry {entry:?} of {key} is a regular expression to Reloader; rollsafe \
                     watch cannot compile it (or it is longer than {max} characters), so it does \
                     not watch this workload (reload_pattern): fix or shorten it",
                    entry = shown(entry),
                    max = MAX_PATTERN_LEN
                )
            } else {
                format!(
                    "entry {entry:?} of {key} is a regular expression, as to Reloader: every \
                     {kind} of the namespace whose whole name matches is watched, every key; one \
                     appearing or disappearing re-records the workload without a roll, and only \
                     a change of a matched one rolls it",
                    entry = shown(entry),
                    kind = kind.as_str()
                )
            };
            out.push(difference(
                DifferenceCode::RegexEntry,
                Some(key),
                Vec::new(),
                message,
            ));
        }
    }
}

/// `auto: "false"` beside reload lists: Reloader still restarted for the named objects.
fn auto_false_with_reload(annotations: Option<&Map<String, Value>>, out: &mut Vec<Difference>) {
    if !is_false(annotations, AUTO) {
        return;
    }
    let named: Vec<String> = [
        (SECRET_RELOAD, TargetKind::Secret),
        (CONFIGMAP_RELOAD, TargetKind::ConfigMap),
    ]
    .into_iter()
    .flat_map(|(key, kind)| {
        entries(text(annotations, key).unwrap_or_default())
            .map(move |name| format!("{}/{}", kind.as_str(), shown(name)))
            .collect::<Vec<_>>()
    })
    .collect();
    if named.is_empty() {
        return;
    }
    let message = format!(
        "{AUTO} is \"false\", which rollsafe watch reads as not watched whatever else it says; \
         Reloader still restarted it for the objects its reload annotations name ({})",
        named.join(", ")
    );
    out.push(difference(
        DifferenceCode::AutoFalseWithReload,
        Some(AUTO),
        named,
        message,
    ));
}

/// Each object consumed by some keys only: it rolls for those keys, Reloader for any change.
fn key_level(report: &WorkloadReport, out: &mut Vec<Difference>) {
    for consumed in &report.consumes {
        let Some(keys) = consumed.keys.as_ref().filter(|_| consumed.rolls) else {
            continue;
        };
        let (noun, verb) = if keys.len() == 1 {
            ("key", "changes")
        } else {
            ("keys", "change")
        };
        let kind = consumed.kind.as_str();
        let name = &consumed.name;
        out.push(Difference {
            code: DifferenceCode::KeyLevel,
            annotation: None,
            objects: vec![format!("{kind}/{name}")],
            keys: keys.clone(),
            message: format!(
                "rolls only when {noun} {} of {kind} {name} {verb}; Reloader restarted it on any \
                 change of {name}",
                quoted(keys)
            ),
        });
    }
}

/// Each object it consumes only where Reloader did not look: `imagePullSecrets`, ephemeral
/// containers.
fn not_seen_by_reloader(seen: &Seen<'_>, listed: &BTreeSet<ConfigRef>, out: &mut Vec<Difference>) {
    let Some(template) = seen.template else {
        return;
    };
    let mut seen_by_reloader: BTreeMap<ConfigRef, bool> = BTreeMap::new();
    for reference in reference::extract(template) {
        let seen_here = reference.is_referenced_config();
        let config = ConfigRef {
            kind: reference.kind,
            name: reference.name,
        };
        *seen_by_reloader.entry(config).or_default() |= seen_here;
    }
    for (config, by_reloader) in seen_by_reloader {
        if by_reloader || listed.contains(&config) || !seen.consumption.contains_key(&config) {
            continue;
        }
        out.push(difference(
            DifferenceCode::NotSeenByReloader,
            None,
            vec![config.to_string()],
            format!(
                "also rolls when {config} changes: its pod template uses it in imagePullSecrets \
                 or an ephemeral container, where Reloader did not look"
            ),
        ));
    }
}

/// Each consumed object opted out: by Reloader's `ignore` (as with Reloader) or by rollsafe's
/// own annotation (Reloader restarted for it).
fn source_opt_outs(report: &WorkloadReport, out: &mut Vec<Difference>) {
    for consumed in &report.consumes {
        let object = format!("{}/{}", consumed.kind.as_str(), consumed.name);
        let (code, message) = match consumed.opted_out_by {
            Some(IGNORE) => (
                DifferenceCode::IgnoredSource,
                format!(
                    "{object} is annotated {IGNORE}: \"true\": its changes roll nothing, as with \
                     Reloader — only while --reloader-compat is on (rollsafe.dev/watch: \"false\" \
                     on the object says the same without it)"
                ),
            ),
            Some(by @ (WATCH | RESTART_ON_CHANGE)) => (
                DifferenceCode::OptedOutSource,
                format!(
                    "{object} is annotated {by}: \"false\": its changes roll nothing, where \
                     Reloader restarted it for them"
                ),
            ),
            _ => continue,
        };
        out.push(difference(code, None, vec![object], message));
    }
}

/// What Reloader left on the pod template: its `last-reloaded-from` annotation and the
/// `STAKATER_*` env vars of its `env-vars` strategy.
fn leftovers(template: Option<&Value>) -> Vec<String> {
    let Some(template) = template else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if template
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_RELOADED_FROM))
        .is_some()
    {
        out.push(format!("pod-template annotation {LAST_RELOADED_FROM}"));
    }
    for list in ["containers", "initContainers"] {
        let containers = template
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for container in containers.into_iter().flatten() {
            let name = container
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| "?".to_owned(), shown);
            let env = container.get("env").and_then(Value::as_array);
            for var in env.into_iter().flatten() {
                let Some(var) = var.get("name").and_then(Value::as_str) else {
                    continue;
                };
                if var.starts_with(STAKATER_ENV) {
                    out.push(format!("env {} in container {name}", shown(var)));
                }
            }
        }
    }
    out
}

/// Keys as shown in sentences: quoted, so that a key named `level` does not read as a word.
pub fn quoted(keys: &[String]) -> String {
    keys.iter()
        .map(|key| format!("{key:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An annotation's text, trimmed.
fn text<'a>(annotations: Option<&'a Map<String, Value>>, key: &str) -> Option<&'a str> {
    annotations
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
        .map(str::trim)
}

/// Whether an annotation says `"false"`.
fn is_false(annotations: Option<&Map<String, Value>>, key: &str) -> bool {
    text(annotations, key).is_some_and(|v| v.eq_ignore_ascii_case("false"))
}

/// The annotations whose keys `keep` selects, as shown.
fn shown_annotations(
    annotations: Option<&Map<String, Value>>,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, String> {
    annotations
        .into_iter()
        .flatten()
        .filter(|(key, _)| keep(key))
        .map(|(key, value)| {
            let value = match value {
                Value::String(text) => shown(text),
                other => shown(&other.to_string()),
            };
            (shown(key), value)
        })
        .collect()
}

#[cfg(test)]
mod tests;
