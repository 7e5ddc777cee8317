//! The consumers preview: which workloads reference a Secret, with the exact reference paths,
//! whether a restart would roll each one's pods now, and whether each kind's inventory is
//! complete. Nothing is patched to build it.
//!
//! One shape for `GET /api/namespaces/{ns}/secrets/{name}/consumers`, the typed client and
//! `rollsafe consumers` (local or `--server`):
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true },
//!                    "StatefulSet": { "complete": false, "code": "forbidden",
//!                                     "message": "…", "httpStatus": 403 },
//!                    "DaemonSet": { "complete": true } },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "references": [ … ],
//!                    "rollsNow": false, "deferral": "paused",
//!                    "deferralReason": "the Deployment is paused",
//!                    "watch": "opted_in", "halted": "flapping: …",
//!                    "pending": { "heldBy": "approval", "since": "…", "digest": "v1:…" } } ] }
//! ```
//!
//! `workloads` holds the matches of the complete inventories only — exactly the workloads a
//! restart would patch now — ordered by kind, then name. An incomplete kind carries the same
//! code, fixed guidance and status as the restart's `discoveryFailures` entry would.
//!
//! Each workload an operator's resource controls names it (`"operatorOwner": {"apiVersion":
//! "kafka.strimzi.io/v1beta2", "kind": "Kafka", "name": "my-cluster"}`), and a workload that
//! is operator-owned or whose `rollsafe.dev/strategy` (its own, else the Secret's,
//! [`ConsumersPreview::secret_strategy`]) chooses says how it is restarted (`"restartBy":
//! {"strategy": "evict", "from": "workload", "reason": "…"}`, [`RestartBy`]). Both are absent
//! for the ordinary workload a template patch restarts.
//!
//! Beside the workloads, `podConsumers` ([`PodConsumers`]) holds the pods that consume the
//! Secret and belong to no Deployment, StatefulSet or DaemonSet — owned by an operator's
//! resource, another controller, or nothing — grouped by owner with how each group is
//! restarted, or why they could not be read (`"state": "not_readable"` when the identity may
//! not list pods). Absent where nobody read the pods. A restart through the API still patches
//! the three kinds only (the contract); `rollsafe restart-consumers --strategy evict` restarts
//! the others.
//!
//! The server adds what the controller does with each consumer ([`ControllerRoll`], judged by
//! [`Consumer::judge`] from its annotations, its `pending` mark and the controller's published
//! settings, [`crate::published`]) and where those settings came from ([`ControllerSettings`]),
//! in [`ServedPreview`]: `"controller": {"settings": "published", "at": …}` at the top, and
//! `"controller": {"watched": "yes", "because": "all", …}` on each workload. Without the
//! published settings nothing that depends on them is guessed: it is `unknown`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

mod owners;

pub use self::owners::{
    ConsumingPodRef, MAX_PODS_NAMED, POD_TEMPLATE_HASH, PodConsumer, PodConsumers, PodRestart,
    PodsRead, PodsUnread, RestartBy, StrategyFrom, owned_by, workload_of_pod,
};

use crate::annotations::{APPROVAL, PENDING, RESTART_WINDOW};
use crate::failure::{Failure, FailureCode};
use crate::opt_in::reloader::reloader_opt_in;
use crate::opt_in::{self, OptIn, WatchState};
use crate::pending::{self, HeldBy, PendingMark};
use crate::published::PublishedSettings;
use crate::reference::{ConfigRef, Reference, TargetKind};
use crate::strategy::{Owner, Strategy, StrategyError, operator_owner, strategy_of};
use crate::workload::{Deferral, WorkloadKind};

/// The preview of one Secret's consumers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumersPreview {
    /// The namespace listed.
    pub namespace: String,
    /// The Secret.
    pub secret: String,
    /// One entry per kind, keyed by kind (in kind order).
    pub inventories: BTreeMap<WorkloadKind, InventoryState>,
    /// The workloads of the complete inventories that reference the Secret.
    pub workloads: Vec<Consumer>,
    /// The pods that consume the Secret and belong to no Deployment, StatefulSet or DaemonSet
    /// (or why they could not be read); absent where they were not read.
    #[serde(
        rename = "podConsumers",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pod_consumers: Option<PodConsumers>,
}

impl ConsumersPreview {
    /// Applies the Secret's own `rollsafe.dev/strategy` (`None`: it has none) to the
    /// workloads whose own annotation does not choose.
    pub fn secret_strategy(&mut self, secret: Option<Result<Strategy, StrategyError>>) {
        let Some(secret) = secret else {
            return;
        };
        for workload in &mut self.workloads {
            let own = workload
                .restart_by
                .as_ref()
                .is_some_and(|by| by.from == StrategyFrom::Workload);
            if !own {
                workload.restart_by = RestartBy::of(
                    workload.kind.as_str(),
                    workload.operator_owner.as_ref(),
                    None,
                    Some(secret.clone()),
                );
            }
        }
    }

    /// Whether every kind's inventory is complete.
    pub fn is_complete(&self) -> bool {
        self.inventories.values().all(|i| i.complete)
    }

    /// How many of the workloads would roll their pods now.
    pub fn rolling_now(&self) -> usize {
        self.workloads.iter().filter(|w| w.rolls_now).count()
    }
}

/// How far one kind's inventory got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryState {
    /// Every page was read and consistent.
    pub complete: bool,
    /// Why not, when it is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<FailureCode>,
    /// The fixed guidance for `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The upstream HTTP status, or 503 for a locally detected incomplete inventory.
    #[serde(
        rename = "httpStatus",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub http_status: Option<u16>,
}

impl InventoryState {
    /// A complete inventory.
    pub fn complete() -> Self {
        Self {
            complete: true,
            code: None,
            message: None,
            http_status: None,
        }
    }

    /// An incomplete inventory, with the guidance of a `discoveryFailures` entry.
    pub fn incomplete(failure: Failure) -> Self {
        Self {
            complete: false,
            code: Some(failure.code),
            message: Some(failure.code.discovery_message().to_owned()),
            http_status: failure.http_status,
        }
    }
}

/// One workload that references the Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WorkloadKind,
    /// The workload's name.
    pub name: String,
    /// Every reference to the Secret, in document order (container, env var, volume,
    /// imagePullSecrets …).
    pub references: Vec<Reference>,
    /// Whether a restart would roll its pods now. A paused Deployment, an `OnDelete` strategy or
    /// a partition covering every replica accept the patch but roll nothing until their own
    /// trigger.
    #[serde(rename = "rollsNow")]
    pub rolls_now: bool,
    /// Why not, when it would not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deferral: Option<Deferral>,
    /// The same, in words.
    #[serde(
        rename = "deferralReason",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub deferral_reason: Option<String>,
    /// Whether `rollsafe watch` rolls it when this Secret changes, as its own
    /// `rollsafe.dev/watch` annotation says.
    #[serde(default)]
    pub watch: WatchState,
    /// Why the controller's flap stop halted it (`rollsafe.dev/halted`), if it did: the
    /// controller rolls it for nothing until the annotation is removed. A restart still rolls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// A roll the controller holds for it (`rollsafe.dev/pending`): by a restart window, or
    /// awaiting approval. A restart still rolls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingRoll>,
    /// What the controller does with it when this Secret changes, under its published
    /// settings ([`Consumer::judge`]); absent where no one judged it (`rollsafe consumers`
    /// asking Kubernetes directly).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerRoll>,
    /// The operator's resource that controls it (its controlling owner, when that is not one
    /// of Kubernetes' own controllers): its template is that operator's.
    #[serde(
        rename = "operatorOwner",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub operator_owner: Option<Owner>,
    /// How it is restarted, when it is operator-owned or a `rollsafe.dev/strategy` chooses;
    /// absent for a template patch nobody else owns.
    #[serde(rename = "restartBy", default, skip_serializing_if = "Option::is_none")]
    pub restart_by: Option<RestartBy>,
}

/// A roll `rollsafe watch` holds, as the workload's mark says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRoll {
    /// `window` or `approval`.
    pub held_by: HeldBy,
    /// For an approval: since when it waits (UTC; absent when not said). The same name
    /// `rollsafe why` and the page use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// For a window: when it opens (UTC; absent when it never does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// The workload digest of the roll held (what an approval approves).
    pub digest: String,
}

impl PendingRoll {
    /// The roll `object`'s `rollsafe.dev/pending` mark holds, if it has one that reads.
    pub fn of(object: &serde_json::Value) -> Option<Self> {
        let mark = object
            .pointer("/metadata/annotations")?
            .get(PENDING)?
            .as_str()?;
        let read = PendingMark::parse(mark)?;
        let at = read.at.filter(|at| *at != "-").map(str::to_owned);
        let (since, until) = match read.held_by {
            HeldBy::Approval => (at, None),
            HeldBy::Window => (None, at),
        };
        Some(Self {
            held_by: read.held_by,
            since,
            until,
            digest: read.digest.to_owned(),
        })
    }
}

impl Consumer {
    /// A consumer of `kind` of the Secret `secret`, read from its listed `object`.
    pub fn new(
        kind: WorkloadKind,
        name: String,
        secret: &str,
        references: Vec<Reference>,
        object: &serde_json::Value,
    ) -> Self {
        let deferral = Deferral::of(kind, object);
        let target = ConfigRef {
            kind: TargetKind::Secret,
            name: secret.to_owned(),
        };
        let operator = operator_owner(object).map(owners::shown_owner);
        let restart_by = RestartBy::of(
            kind.as_str(),
            operator.as_ref(),
            strategy_of(object).transpose(),
            None,
        );
        Self {
            kind,
            name,
            references,
            rolls_now: deferral.is_none(),
            deferral,
            deferral_reason: deferral.map(|d| d.reason().to_owned()),
            watch: WatchState::of(object, &target),
            halted: opt_in::halted(object),
            pending: PendingRoll::of(object),
            controller: None,
            operator_owner: operator,
            restart_by,
        }
    }

    /// `StatefulSet/kafka is owned by Kafka/my-cluster`, when an operator's resource owns it.
    pub fn owned_by(&self) -> Option<String> {
        self.operator_owner
            .as_ref()
            .map(|owner| owned_by(self.kind.as_str(), &self.name, owner))
    }

    /// Judges what `rollsafe watch` does with this consumer of the Secret `secret` in
    /// `namespace` (read from its listed `object`) when the Secret changes, under the
    /// controller's published `settings` (`None`: unknown, and so is everything that depends
    /// on them).
    pub fn judge(
        &mut self,
        namespace: &str,
        secret: &str,
        object: &serde_json::Value,
        settings: Option<&PublishedSettings>,
    ) {
        let target = ConfigRef {
            kind: TargetKind::Secret,
            name: secret.to_owned(),
        };
        self.controller = Some(ControllerRoll::of(
            namespace, &target, self.watch, object, settings,
        ));
        // Where neither the workload nor the Secret chooses, the controller's `--strategy`
        // for the namespace decides how `rollsafe watch` restarts it.
        let controller = settings.map(PublishedSettings::strategy_defaults);
        self.restart_by = RestartBy::under_controller(
            self.restart_by.take(),
            self.kind.as_str(),
            namespace,
            object,
            controller.as_ref(),
        );
    }
}

/// Whether the controller rolls a workload when the Secret changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Watched {
    /// It does.
    Yes,
    /// It does not.
    No,
    /// It depends on settings that are not known.
    Unknown,
}

/// Why [`Watched`] says what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchedBecause {
    /// Its `rollsafe.dev/watch` names this Secret (or is `"true"`).
    OptedIn,
    /// No annotation, and the controller runs with `--all`.
    All,
    /// Its Reloader annotations name this Secret, and the controller runs with
    /// `--reloader-compat`.
    ReloaderCompat,
    /// No annotation, and the controller runs without `--all`.
    NotOptedIn,
    /// Reloader annotations only, and the controller runs without `--reloader-compat` or
    /// `--all`.
    ReloaderIgnored,
    /// Its Reloader annotations do not name this Secret (or say `auto: "false"`).
    ReloaderNotListed,
    /// Its Reloader annotations name Secrets by Reloader's `search`: whether this one carries
    /// `reloader.stakater.com/match` is not read here.
    ReloaderSearch,
    /// `rollsafe.dev/watch: "false"`.
    OptedOut,
    /// Its `rollsafe.dev/watch` list does not name this Secret.
    NotListed,
    /// Its `rollsafe.dev/watch` (or Reloader) value is not understood: not watched.
    Invalid,
    /// The controller does not watch this namespace (`--namespace`, `--ignore-namespace`).
    NamespaceNotWatched,
    /// The controller ignores Secrets (`--ignore-kind Secret`).
    KindIgnored,
    /// The controller's settings are unknown.
    SettingsUnknown,
}

/// Who requires an approval before the controller rolls a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalBy {
    /// Its namespace is in the controller's `--require-approval`.
    Namespace,
    /// The workload's own `rollsafe.dev/approval`.
    Workload,
}

/// Where the restart window the controller's rolls of a workload wait for comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowFrom {
    /// The workload's own `rollsafe.dev/restart-window`.
    Workload,
    /// The controller's `--restart-window`.
    Controller,
}

/// The restart window the controller's rolls of a workload wait for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestartWindow {
    /// The window, as written.
    pub window: String,
    /// Where it comes from.
    pub from: WindowFrom,
}

/// What `rollsafe watch` does with one consumer when the Secret changes: whether it rolls it,
/// why, and what its rolls wait for (an approval, a restart window). A restart from the API,
/// the page or the CLI waits for neither: asking for a restart is the approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRoll {
    /// `yes`, `no` or `unknown`.
    pub watched: Watched,
    /// Why.
    pub because: WatchedBecause,
    /// Each roll awaits an approval, required by this (when watched, and known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalBy>,
    /// Each roll waits for this restart window (when watched, and known; a Secret that names
    /// its own window is not read here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_window: Option<RestartWindow>,
}

impl ControllerRoll {
    /// The judgement for a workload `object` of `namespace` whose `rollsafe.dev/watch` reads
    /// `state` for `target`, under `settings`.
    pub fn of(
        namespace: &str,
        target: &ConfigRef,
        state: WatchState,
        object: &serde_json::Value,
        settings: Option<&PublishedSettings>,
    ) -> Self {
        let annotation = |key: &str| {
            object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(key))
                .and_then(serde_json::Value::as_str)
        };
        let (watched, because) = match (state, settings) {
            (WatchState::OptedOut, _) => (Watched::No, WatchedBecause::OptedOut),
            (WatchState::NotListed, _) => (Watched::No, WatchedBecause::NotListed),
            (WatchState::Invalid, _) => (Watched::No, WatchedBecause::Invalid),
            (_, None) => (Watched::Unknown, WatchedBecause::SettingsUnknown),
            (_, Some(s)) if !s.covers(namespace) => {
                (Watched::No, WatchedBecause::NamespaceNotWatched)
            }
            (_, Some(s)) if !s.watches_kind(target.kind) => {
                (Watched::No, WatchedBecause::KindIgnored)
            }
            (WatchState::OptedIn, Some(_)) => (Watched::Yes, WatchedBecause::OptedIn),
            (WatchState::Unset, Some(s)) if s.all => (Watched::Yes, WatchedBecause::All),
            (WatchState::Unset, Some(_)) => (Watched::No, WatchedBecause::NotOptedIn),
            (WatchState::Reloader, Some(s)) if s.reloader_compat => reloader(object, target),
            (WatchState::Reloader, Some(s)) if s.all => (Watched::Yes, WatchedBecause::All),
            (WatchState::Reloader, Some(_)) => (Watched::No, WatchedBecause::ReloaderIgnored),
        };
        let mut roll = Self {
            watched,
            because,
            approval: None,
            restart_window: None,
        };
        if watched == Watched::No {
            return roll;
        }
        roll.approval = if settings.is_some_and(|s| s.requires_approval(namespace)) {
            Some(ApprovalBy::Namespace)
        } else if pending::requires(annotation(APPROVAL)) {
            Some(ApprovalBy::Workload)
        } else {
            None
        };
        roll.restart_window = match annotation(RESTART_WINDOW).map(str::trim) {
            Some(window) if !window.is_empty() => Some(RestartWindow {
                window: window.to_owned(),
                from: WindowFrom::Workload,
            }),
            _ => settings
                .and_then(|s| s.restart_window.clone())
                .map(|window| RestartWindow {
                    window,
                    from: WindowFrom::Controller,
                }),
        };
        roll
    }
}

/// A workload with Reloader's annotations only, under `--reloader-compat`: as they say.
fn reloader(object: &serde_json::Value, target: &ConfigRef) -> (Watched, WatchedBecause) {
    let Some(read) = object
        .pointer("/metadata/annotations")
        .and_then(serde_json::Value::as_object)
        .and_then(reloader_opt_in)
    else {
        return (Watched::No, WatchedBecause::ReloaderNotListed);
    };
    let yes = (Watched::Yes, WatchedBecause::ReloaderCompat);
    match read.map(|read| read.opt_in) {
        Err(_) => (Watched::No, WatchedBecause::Invalid),
        Ok(OptIn::Template) => yes,
        Ok(OptIn::List(listed)) if listed.contains(target) => yes,
        Ok(OptIn::Select {
            secrets,
            config_maps,
            listed,
            matched,
            patterns,
        }) => {
            let by_kind = match target.kind {
                TargetKind::Secret => secrets,
                TargetKind::ConfigMap => config_maps,
            };
            if by_kind
                || listed.contains(target)
                || patterns
                    .iter()
                    .any(|p| p.matches(target.kind, &target.name))
            {
                yes
            } else if matched {
                (Watched::Unknown, WatchedBecause::ReloaderSearch)
            } else {
                (Watched::No, WatchedBecause::ReloaderNotListed)
            }
        }
        Ok(OptIn::List(_) | OptIn::Off) => (Watched::No, WatchedBecause::ReloaderNotListed),
    }
}

/// Why the controller's settings are unknown to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsUnknown {
    /// No Lease is configured to read them from.
    NotConfigured,
    /// The Lease is missing, or carries none.
    NotPublished,
    /// Kubernetes answered the read with this HTTP status.
    Status(u16),
    /// No answer in time.
    NoResponse,
    /// The annotation is not the settings' JSON.
    Unreadable,
}

impl SettingsUnknown {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            SettingsUnknown::NotConfigured => "not_configured",
            SettingsUnknown::NotPublished => "not_published",
            SettingsUnknown::Status(403) => "forbidden",
            SettingsUnknown::Status(_) => "status",
            SettingsUnknown::NoResponse => "no_response",
            SettingsUnknown::Unreadable => "unreadable",
        }
    }

    /// A fixed sentence for people (never upstream text).
    pub fn message(self, lease: Option<&str>) -> String {
        let lease = lease.unwrap_or("-");
        match self {
            SettingsUnknown::NotConfigured => {
                "no controller Lease is configured (--controller-lease)".to_owned()
            }
            SettingsUnknown::NotPublished => format!(
                "the Lease {lease} carries no rollsafe.dev/settings: is rollsafe watch running with that Lease?"
            ),
            SettingsUnknown::Status(403) => {
                format!("could not read its Lease {lease}: the server may not read it (HTTP 403)")
            }
            SettingsUnknown::Status(status) => {
                format!("could not read its Lease {lease}: Kubernetes answered HTTP {status}")
            }
            SettingsUnknown::NoResponse => {
                format!("could not read its Lease {lease}: no response from Kubernetes in time")
            }
            SettingsUnknown::Unreadable => format!(
                "could not read its Lease {lease}: its rollsafe.dev/settings is not readable"
            ),
        }
    }
}

/// Whether the controller's settings are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettingsState {
    /// Read from the controller's Lease.
    Published,
    /// Not known: what depends on them is `unknown`.
    Unknown,
}

/// Where the controller's settings of a preview came from, and those the page words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerSettings {
    /// `published` or `unknown`.
    pub settings: SettingsState,
    /// The Lease read, `namespace/name` (absent when none is configured).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// When the controller published them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// Why they are unknown: `not_configured`, `not_published`, `forbidden`, `status`,
    /// `no_response`, `unreadable`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// The same, a fixed sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `--all`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
    /// `--reloader-compat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reloader_compat: Option<bool>,
    /// `--dry-run`: the controller decides and patches nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// `--selector`: only the workloads it matches are watched (not evaluated here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// `--source-selector`: only the Secrets it matches are watched (not evaluated here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_selector: Option<String>,
    /// `--namespace-selector`: only the namespaces it matches (not evaluated here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<String>,
}

impl ControllerSettings {
    /// Settings read from the Lease `lease`.
    pub fn published(lease: &str, settings: &PublishedSettings) -> Self {
        Self {
            settings: SettingsState::Published,
            lease: Some(lease.to_owned()),
            at: Some(settings.at.to_string()),
            code: None,
            message: None,
            all: Some(settings.all),
            reloader_compat: Some(settings.reloader_compat),
            dry_run: Some(settings.dry_run),
            selector: settings.selector.clone(),
            source_selector: settings.source_selector.clone(),
            namespace_selector: settings.namespace_selector.clone(),
        }
    }

    /// Settings not known, from the Lease `lease` (if one is configured), because of `why`.
    pub fn unknown(lease: Option<&str>, why: SettingsUnknown) -> Self {
        Self {
            settings: SettingsState::Unknown,
            lease: lease.map(str::to_owned),
            at: None,
            code: Some(why.code().to_owned()),
            message: Some(why.message(lease)),
            all: None,
            reloader_compat: None,
            dry_run: None,
            selector: None,
            source_selector: None,
            namespace_selector: None,
        }
    }
}

/// The preview as the server answers it: the consumers, each judged under the controller's
/// settings, and where those came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedPreview {
    /// The preview.
    #[serde(flatten)]
    pub preview: ConsumersPreview,
    /// Where the controller's settings came from.
    pub controller: ControllerSettings,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::{TargetKind, restart_consumers};
    use serde_json::json;

    fn example() -> ConsumersPreview {
        let paused = json!({"metadata": {"annotations": {"rollsafe.dev/watch": "true",
            "rollsafe.dev/halted": "flapping: 5 rolls within 600s; remove this annotation to resume",
            "rollsafe.dev/pending": "approval since=2026-12-03T06:00:00Z digest=v1:abc"}},
            "spec": {"paused": true, "template": {"spec": {
            "imagePullSecrets": [{"name": "db-creds"}],
            "containers": [{"name": "app", "envFrom": [{"secretRef": {"name": "db-creds"}}]}]}}}});
        let worker = json!({"spec": {"template": {"spec": {"containers": [{"name": "w",
            "env": [{"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db-creds", "key": "password"}}}]}]}}}});
        let refs = |object: &serde_json::Value| {
            restart_consumers(&object["spec"]["template"])
                .into_iter()
                .filter(|r| r.name == "db-creds")
                .collect()
        };
        ConsumersPreview {
            namespace: "shop".into(),
            secret: "db-creds".into(),
            inventories: BTreeMap::from([
                (WorkloadKind::Deployment, InventoryState::complete()),
                (
                    WorkloadKind::StatefulSet,
                    InventoryState::incomplete(Failure {
                        code: FailureCode::Forbidden,
                        http_status: Some(403),
                    }),
                ),
                (WorkloadKind::DaemonSet, InventoryState::complete()),
            ]),
            workloads: vec![
                Consumer::new(
                    WorkloadKind::Deployment,
                    "api".into(),
                    "db-creds",
                    refs(&paused),
                    &paused,
                ),
                Consumer::new(
                    WorkloadKind::DaemonSet,
                    "worker".into(),
                    "db-creds",
                    refs(&worker),
                    &worker,
                ),
            ],
            pod_consumers: None,
        }
    }

    #[test]
    fn the_wire_shape_is_pinned_and_reads_back() {
        let preview = example();
        let value = serde_json::to_value(&preview).unwrap();
        insta::assert_json_snapshot!("consumers_preview", value);
        let back: ConsumersPreview = serde_json::from_value(value).unwrap();
        assert_eq!(back, preview);
        assert!(!preview.is_complete());
        assert_eq!(preview.rolling_now(), 1);
        assert!(
            preview.workloads[0]
                .references
                .iter()
                .all(|r| r.kind == TargetKind::Secret)
        );
    }

    /// A preview of a Secret consumed by an operator's StatefulSet, a workload that chooses
    /// eviction, and pods no workload owns.
    fn with_owners() -> ConsumersPreview {
        let mut preview = example();
        preview.workloads.truncate(1);
        let kafka = json!({"metadata": {"ownerReferences": [
                {"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka", "name": "my-cluster",
                 "uid": "never-shown-uid", "controller": true}]},
            "spec": {"template": {"spec": {"containers": [{"name": "kafka",
                "envFrom": [{"secretRef": {"name": "db-creds"}}]}]}}}});
        let mut evicted = kafka.clone();
        evicted["metadata"] = json!({"annotations": {"rollsafe.dev/strategy": "evict"}});
        for (name, object) in [("kafka-0", &kafka), ("search", &evicted)] {
            preview.workloads.push(Consumer::new(
                WorkloadKind::StatefulSet,
                name.into(),
                "db-creds",
                restart_consumers(&object["spec"]["template"]),
                object,
            ));
        }
        let group = crate::strategy::Owner {
            api_version: "sim.rollsafe.dev/v1".into(),
            kind: "PodGroup".into(),
            name: "kafka".into(),
            uid: "never-shown-uid".into(),
        };
        let pod = |name, owner| ConsumingPodRef {
            name,
            owner,
            pod_template_hash: None,
        };
        preview.pod_consumers = Some(PodConsumers::of([
            pod("kafka-1", Some(&group)),
            pod("kafka-0", Some(&group)),
            pod("debug", None),
        ]));
        preview
    }

    #[test]
    fn operator_owned_and_pod_level_consumers_are_added_fields() {
        let preview = with_owners();
        let value = serde_json::to_value(&preview).unwrap();
        insta::assert_json_snapshot!("consumers_preview_owners", value);
        assert!(!value.to_string().contains("never-shown-uid"));
        let back: ConsumersPreview = serde_json::from_value(value).unwrap();
        assert_eq!(back, preview);
        assert_eq!(
            preview.workloads[1].owned_by().as_deref(),
            Some("StatefulSet/kafka-0 is owned by Kafka/my-cluster")
        );
        // A reader of the earlier shape reads this one: every new field is optional.
        let old = serde_json::to_value(example()).unwrap();
        assert!(old.get("podConsumers").is_none());
        assert!(
            old["workloads"]
                .as_array()
                .unwrap()
                .iter()
                .all(|w| w.get("operatorOwner").is_none() && w.get("restartBy").is_none())
        );
    }

    #[test]
    fn the_secrets_strategy_applies_where_the_workload_does_not_choose() {
        let mut preview = with_owners();
        preview.secret_strategy(Some(Ok(Strategy::Evict)));
        let by: Vec<(Option<Strategy>, StrategyFrom)> = preview
            .workloads
            .iter()
            .map(|w| {
                let by = w.restart_by.as_ref().unwrap();
                (by.strategy, by.from)
            })
            .collect();
        assert_eq!(
            by,
            [
                (Some(Strategy::Evict), StrategyFrom::Secret),
                (Some(Strategy::Evict), StrategyFrom::Secret),
                (Some(Strategy::Evict), StrategyFrom::Workload),
            ]
        );
        let mut preview = with_owners();
        preview.secret_strategy(Some(Ok(Strategy::Patch)));
        assert_eq!(
            preview.workloads[0].restart_by, None,
            "a patch nobody reverts"
        );
        assert_eq!(
            preview.workloads[1].restart_by.as_ref().map(|b| b.from),
            Some(StrategyFrom::Secret)
        );
        let mut unchanged = with_owners();
        unchanged.secret_strategy(None);
        assert_eq!(unchanged, with_owners());
    }

    #[test]
    fn the_controllers_strategy_decides_where_nothing_else_chooses() {
        let mut evicting = settings(true, false);
        evicting.strategy = Some("patch,shop=evict".into());
        let judged = |ns: &str, s: Option<&PublishedSettings>| {
            let mut preview = with_owners();
            let objects = [
                json!({"metadata": {}}),
                json!({"metadata": {"ownerReferences": [{"apiVersion": "kafka.strimzi.io/v1beta2",
                    "kind": "Kafka", "name": "my-cluster", "uid": "u", "controller": true}]}}),
                json!({"metadata": {"annotations": {"rollsafe.dev/strategy": "evict"}}}),
            ];
            for (workload, object) in preview.workloads.iter_mut().zip(&objects) {
                workload.judge(ns, "db-creds", object, s);
            }
            preview
                .workloads
                .iter()
                .map(|w| w.restart_by.as_ref().map(|by| (by.strategy, by.from)))
                .collect::<Vec<_>>()
        };
        let evict = Some(Strategy::Evict);
        assert_eq!(
            judged("shop", Some(&evicting)),
            [
                Some((evict, StrategyFrom::Controller)),
                Some((evict, StrategyFrom::Controller)),
                Some((evict, StrategyFrom::Workload)),
            ]
        );
        // Patch in this namespace, or settings unknown: as the workloads' metadata says.
        let as_read = judged("shop", None);
        assert_eq!(judged("other", Some(&evicting)), as_read);
        assert_eq!(as_read[0], None);
        assert_eq!(
            as_read[1],
            Some((Some(Strategy::Patch), StrategyFrom::Default))
        );
    }

    fn settings(all: bool, reloader_compat: bool) -> PublishedSettings {
        serde_json::from_value(json!({"all": all, "reloaderCompat": reloader_compat,
            "namespaces": [], "selector": null, "sourceSelector": null,
            "namespaceSelector": null, "ignoreNamespaces": ["kube-system"],
            "ignoreKinds": [], "requireApproval": ["payments"],
            "restartWindow": "Sat 03:00-04:00 UTC", "progressive": false,
            "argoRollouts": false, "flapRolls": 5, "flapWindowSeconds": 600,
            "maxRollsPerMinute": 60, "burst": 10, "dryRun": false, "keyed": false,
            "instance": null, "at": "2026-12-07T06:00:00Z"}))
        .unwrap()
    }

    #[test]
    fn the_controller_roll_follows_the_annotations_and_the_published_settings() {
        let target = ConfigRef {
            kind: TargetKind::Secret,
            name: "db".into(),
        };
        let judge = |annotations: serde_json::Value, ns: &str, s: Option<&PublishedSettings>| {
            let object = json!({"metadata": {"annotations": annotations}});
            let state = WatchState::of(&object, &target);
            let roll = ControllerRoll::of(ns, &target, state, &object, s);
            (roll.watched, roll.because)
        };
        let all = settings(true, false);
        let none = settings(false, false);
        let compat = settings(false, true);
        use WatchedBecause as B;
        let cases = [
            (json!({}), "shop", Some(&all), (Watched::Yes, B::All)),
            (json!({}), "shop", Some(&none), (Watched::No, B::NotOptedIn)),
            (
                json!({}),
                "shop",
                None,
                (Watched::Unknown, B::SettingsUnknown),
            ),
            (
                json!({"rollsafe.dev/watch": "true"}),
                "shop",
                None,
                (Watched::Unknown, B::SettingsUnknown),
            ),
            (
                json!({"rollsafe.dev/watch": "true"}),
                "shop",
                Some(&none),
                (Watched::Yes, B::OptedIn),
            ),
            (
                json!({"rollsafe.dev/watch": "false"}),
                "shop",
                Some(&all),
                (Watched::No, B::OptedOut),
            ),
            (
                json!({"rollsafe.dev/watch": "false"}),
                "shop",
                None,
                (Watched::No, B::OptedOut),
            ),
            (
                json!({"rollsafe.dev/watch": "secret/other"}),
                "shop",
                Some(&all),
                (Watched::No, B::NotListed),
            ),
            (
                json!({}),
                "kube-system",
                Some(&all),
                (Watched::No, B::NamespaceNotWatched),
            ),
            (
                json!({"secret.reloader.stakater.com/reload": "db"}),
                "shop",
                Some(&compat),
                (Watched::Yes, B::ReloaderCompat),
            ),
            (
                json!({"secret.reloader.stakater.com/reload": "other"}),
                "shop",
                Some(&compat),
                (Watched::No, B::ReloaderNotListed),
            ),
            (
                json!({"reloader.stakater.com/auto": "true"}),
                "shop",
                Some(&none),
                (Watched::No, B::ReloaderIgnored),
            ),
            (
                json!({"reloader.stakater.com/auto": "true"}),
                "shop",
                Some(&all),
                (Watched::Yes, B::All),
            ),
            (
                json!({"reloader.stakater.com/search": "true"}),
                "shop",
                Some(&compat),
                (Watched::Unknown, B::ReloaderSearch),
            ),
        ];
        for (annotations, ns, s, expected) in cases {
            assert_eq!(
                judge(annotations.clone(), ns, s),
                expected,
                "{annotations} in {ns}"
            );
        }
        // The holds: the namespace's approval, else the workload's; its own window, else the
        // controller's.
        let object = json!({"metadata": {"annotations": {"rollsafe.dev/approval": "required",
            "rollsafe.dev/restart-window": "Mon-Fri 09:00-17:00 Europe/Berlin"}}});
        let roll = ControllerRoll::of("payments", &target, WatchState::Unset, &object, Some(&all));
        assert_eq!(roll.approval, Some(ApprovalBy::Namespace));
        assert_eq!(
            roll.restart_window,
            Some(RestartWindow {
                window: "Mon-Fri 09:00-17:00 Europe/Berlin".into(),
                from: WindowFrom::Workload
            })
        );
        let roll = ControllerRoll::of("shop", &target, WatchState::Unset, &object, Some(&all));
        assert_eq!(roll.approval, Some(ApprovalBy::Workload));
        let roll = ControllerRoll::of("shop", &target, WatchState::Unset, &json!({}), Some(&all));
        assert_eq!(roll.approval, None);
        assert_eq!(
            roll.restart_window.map(|w| (w.window, w.from)),
            Some(("Sat 03:00-04:00 UTC".to_owned(), WindowFrom::Controller))
        );
        // Not watched: no holds said.
        let roll = ControllerRoll::of("payments", &target, WatchState::Unset, &object, Some(&none));
        assert_eq!((roll.approval, roll.restart_window), (None, None));
        // Unknown settings: a workload's own annotations still say.
        let roll = ControllerRoll::of("shop", &target, WatchState::Unset, &object, None);
        assert_eq!(roll.approval, Some(ApprovalBy::Workload));
    }

    #[test]
    fn the_served_preview_carries_where_the_settings_came_from() {
        let mut preview = example();
        let s = settings(true, false);
        preview.workloads[1].judge("shop", "db-creds", &json!({}), Some(&s));
        let served = ServedPreview {
            preview,
            controller: ControllerSettings::published("shop/rollsafe-watch", &s),
        };
        let value = serde_json::to_value(&served).unwrap();
        assert_eq!(value["controller"]["settings"], "published");
        assert_eq!(value["controller"]["at"], "2026-12-07T06:00:00Z");
        assert_eq!(value["workloads"][1]["controller"]["watched"], "yes");
        assert_eq!(value["workloads"][1]["controller"]["because"], "all");
        assert!(value["workloads"][0].get("controller").is_none());
        let back: ServedPreview = serde_json::from_value(value).unwrap();
        assert_eq!(back, served);
        let unknown =
            ControllerSettings::unknown(Some("shop/rollsafe-watch"), SettingsUnknown::Status(403));
        assert_eq!(
            unknown.message.as_deref(),
            Some(
                "could not read its Lease shop/rollsafe-watch: the server may not read it (HTTP 403)"
            )
        );
        assert_eq!(unknown.code.as_deref(), Some("forbidden"));
    }
}
