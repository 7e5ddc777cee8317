//! The controller's settings `why` evaluates with: published on its Lease, else this command's
//! flags (the same ones `rollsafe watch` takes), else unknown — said, never guessed.

use anyhow::bail;
use jiff::Timestamp;
use rollsafe_core::name::Namespace;
use rollsafe_core::strategy::StrategyDefaults;
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::window::RestartWindow;
use rollsafe_kube::published::LeaseRef;
use rollsafe_watch::ControllerSettings;
use rollsafe_watch::limits::FlapLimit;
use rollsafe_watch::published::{self, PublishedSettings};
use serde::Serialize;

/// `--controller-lease NAMESPACE/NAME`.
pub(super) fn parse_lease(text: &str) -> anyhow::Result<LeaseRef> {
    let Some((namespace, name)) = text.split_once('/') else {
        bail!("--controller-lease: give NAMESPACE/NAME, e.g. rollsafe/rollsafe-watch");
    };
    if namespace.parse::<Namespace>().is_err() || !is_dns1123_subdomain(name) {
        bail!("--controller-lease: {text:?} is not NAMESPACE/NAME of a Lease");
    }
    Ok(LeaseRef {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    })
}

/// The settings `rollsafe watch` runs with, as `why` was told them: the same flags, for a
/// controller whose published settings cannot be read.
#[derive(Debug, clap::Args)]
pub(crate) struct SettingsFlags {
    /// As `rollsafe watch --all`.
    #[arg(long)]
    all: bool,
    /// As `rollsafe watch --reloader-compat`.
    #[arg(long)]
    reloader_compat: bool,
    /// As `rollsafe watch --require-approval` (repeatable).
    #[arg(long, value_name = "NAMESPACE")]
    require_approval: Vec<String>,
    /// The `--restart-window` `rollsafe watch` runs with, if any: a roll due outside it is
    /// held.
    #[arg(long, value_name = "WINDOW", env = "ROLLSAFE_WATCH_RESTART_WINDOW")]
    restart_window: Option<String>,
    /// As `rollsafe watch --rollout progressive`.
    #[arg(long)]
    progressive: bool,
    /// As `rollsafe watch --flap-limit ROLLS/WINDOW`.
    #[arg(long, value_name = "ROLLS/WINDOW")]
    flap_limit: Option<String>,
    /// As `rollsafe watch --strategy` (`evict`, or per namespace `patch,payments=evict`).
    #[arg(long, value_name = "STRATEGY")]
    strategy: Option<String>,
}

impl SettingsFlags {
    /// The settings these flags give, when any was given.
    pub(super) fn settings(&self) -> anyhow::Result<Option<PublishedSettings>> {
        let given = self.all
            || self.reloader_compat
            || !self.require_approval.is_empty()
            || self.restart_window.is_some()
            || self.progressive
            || self.flap_limit.is_some()
            || self.strategy.is_some();
        if !given {
            return Ok(None);
        }
        let mut settings = ControllerSettings {
            all: self.all,
            reloader_compat: self.reloader_compat,
            require_approval: self.require_approval.clone(),
            progressive_all: self.progressive,
            ..ControllerSettings::default()
        };
        if let Some(text) = self.restart_window.as_deref() {
            match text.parse::<RestartWindow>() {
                Ok(window) => settings.restart_window = Some(window),
                Err(error) => bail!("--restart-window: {error}"),
            }
        }
        if let Some(text) = self.flap_limit.as_deref() {
            match FlapLimit::parse(text) {
                Ok(limit) => settings.flap_limit = limit,
                Err(error) => bail!("--flap-limit: {error}"),
            }
        }
        if let Some(text) = self.strategy.as_deref() {
            match text.parse::<StrategyDefaults>() {
                Ok(strategy) => settings.strategy = strategy,
                Err(error) => bail!("--strategy: {error}"),
            }
        }
        Ok(Some(published::of(&settings, Timestamp::now())))
    }
}

/// Where the settings the answer was evaluated with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum SettingsSource {
    /// Published by the controller on its Lease.
    Published,
    /// This command's own flags (the controller's could not be read).
    Flags,
    /// Neither: what depends on them is said to be unknown.
    Unknown,
}

/// The controller's settings the answer was evaluated with, and where they came from.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SettingsUsed {
    pub(super) source: SettingsSource,
    /// The Lease they were read from, or looked for (`NAMESPACE/NAME`).
    lease: String,
    /// When the controller published them.
    #[serde(skip_serializing_if = "Option::is_none")]
    published_at: Option<String>,
    /// Words for people.
    pub(super) note: String,
    #[serde(skip)]
    pub(super) values: PublishedSettings,
}

/// The controller's published settings, else the flags, else unknown (evaluated with the
/// defaults, and said so wherever they decide).
pub(super) async fn resolve_settings(
    client: &kube::Client,
    lease: &LeaseRef,
    flags: Option<PublishedSettings>,
) -> SettingsUsed {
    let named = format!("{}/{}", lease.namespace, lease.name);
    let read = rollsafe_kube::published::read(client, lease).await;
    let why_not = match read {
        Ok(Some(values)) => {
            return SettingsUsed {
                source: SettingsSource::Published,
                note: format!(
                    "as rollsafe watch published them on its Lease {named} at {}",
                    values.at
                ),
                published_at: Some(values.at.to_string()),
                lease: named,
                values,
            };
        }
        Ok(None) => "it publishes none there".to_owned(),
        Err(error) => format!("its Lease cannot be read ({})", error.code()),
    };
    match flags {
        Some(values) => SettingsUsed {
            source: SettingsSource::Flags,
            note: format!(
                "from this command's flags: rollsafe watch's own settings are not known ({why_not}; --controller-lease names its Lease)"
            ),
            lease: named,
            published_at: None,
            values,
        },
        None => SettingsUsed {
            source: SettingsSource::Unknown,
            note: format!(
                "unknown: rollsafe watch's settings could not be read ({why_not}; --controller-lease names its Lease, or pass the flags it runs with); what they decide is said to be unknown"
            ),
            lease: named,
            published_at: None,
            values: published::of(&ControllerSettings::default(), Timestamp::now()),
        },
    }
}
