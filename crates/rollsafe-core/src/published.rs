//! The controller's effective settings, as `rollsafe watch` publishes them for every reader
//! (`rollsafe why`, the consumers preview, the page): the `rollsafe.dev/settings` annotation on
//! its Lease, JSON. Names and flags only: no Secret, no webhook URL, no fingerprint key (only
//! whether there is one). Written and read by `rollsafe_kube::published`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::reference::TargetKind;
use crate::strategy::StrategyDefaults;

/// The settings that decide what the controller rolls, as published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishedSettings {
    /// `--all`.
    pub all: bool,
    /// `--reloader-compat`.
    pub reloader_compat: bool,
    /// `--namespace` (empty: every namespace).
    pub namespaces: Vec<String>,
    /// `--selector`.
    pub selector: Option<String>,
    /// `--source-selector`.
    pub source_selector: Option<String>,
    /// `--namespace-selector`.
    pub namespace_selector: Option<String>,
    /// `--ignore-namespace`.
    pub ignore_namespaces: Vec<String>,
    /// `--ignore-kind` (`Secret`, `ConfigMap`).
    pub ignore_kinds: Vec<String>,
    /// `--require-approval`.
    pub require_approval: Vec<String>,
    /// `--restart-window`, as given.
    pub restart_window: Option<String>,
    /// `--rollout progressive`.
    pub progressive: bool,
    /// `--argo-rollouts`, as served.
    pub argo_rollouts: bool,
    /// `--flap-limit`: rolls within the window (0: off).
    pub flap_rolls: u32,
    /// `--flap-limit`: the window, in seconds.
    pub flap_window_seconds: u64,
    /// `--max-rolls-per-minute`.
    pub max_rolls_per_minute: u32,
    /// `--burst`.
    pub burst: u32,
    /// `--dry-run`.
    pub dry_run: bool,
    /// A `--fingerprint-key-file` is given (its records are keyed).
    pub keyed: bool,
    /// `--strategy` (`patch,payments=evict`), when not the default `patch` everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<String>,
    /// The replica that wrote them.
    pub instance: Option<String>,
    /// When they were written.
    pub at: Timestamp,
}

impl PublishedSettings {
    /// `--strategy` as the controller runs with it: `patch` everywhere when it publishes none
    /// (or one this reader does not understand).
    pub fn strategy_defaults(&self) -> StrategyDefaults {
        self.strategy
            .as_deref()
            .and_then(|text| text.parse().ok())
            .unwrap_or_default()
    }

    /// Whether the controller considers objects of `namespace` at all (its `--namespace` list
    /// and `--ignore-namespace`; a namespace selector is not evaluated here).
    pub fn covers(&self, namespace: &str) -> bool {
        (self.namespaces.is_empty() || self.namespaces.iter().any(|n| n == namespace))
            && !self.ignore_namespaces.iter().any(|n| n == namespace)
    }

    /// Whether objects of `kind` are watched.
    pub fn watches_kind(&self, kind: TargetKind) -> bool {
        !self.ignore_kinds.iter().any(|k| k == kind.as_str())
    }

    /// Whether every roll of `namespace` awaits approval (`--require-approval`).
    pub fn requires_approval(&self, namespace: &str) -> bool {
        self.require_approval.iter().any(|n| n == namespace)
    }
}
