//! The controller's side of its published settings ([`rollsafe_core::published`], written by
//! `rollsafe_kube::published` on its Lease): what a [`ControllerSettings`] comes to, and how a
//! reader of the published settings reads workloads for opt-in and the flap stop's limit.

use std::time::Duration;

use jiff::Timestamp;
pub use rollsafe_core::published::PublishedSettings;

use crate::cache::Watching;
use crate::limits::FlapLimit;
use crate::settings::ControllerSettings;

/// What `settings` come to, written at `at`.
pub fn of(settings: &ControllerSettings, at: Timestamp) -> PublishedSettings {
    PublishedSettings {
        all: settings.all,
        reloader_compat: settings.reloader_compat,
        namespaces: settings.namespaces.clone(),
        selector: settings.selector.clone(),
        source_selector: settings.source_selector.clone(),
        namespace_selector: settings.namespace_selector.clone(),
        ignore_namespaces: settings.ignore_namespaces.clone(),
        ignore_kinds: settings
            .ignore_kinds
            .iter()
            .map(|kind| kind.as_str().to_owned())
            .collect(),
        require_approval: settings.require_approval.clone(),
        restart_window: settings.restart_window.as_ref().map(ToString::to_string),
        progressive: settings.progressive_all,
        argo_rollouts: settings.argo_rollouts,
        flap_rolls: settings.flap_limit.rolls,
        flap_window_seconds: settings.flap_limit.window.as_secs(),
        max_rolls_per_minute: settings.max_rolls_per_minute,
        burst: settings.burst,
        dry_run: settings.dry_run,
        keyed: settings.fingerprinter.is_keyed(),
        strategy: (settings.strategy != rollsafe_core::strategy::StrategyDefaults::default())
            .then(|| settings.strategy.to_string()),
        instance: settings.instance.clone(),
        at,
    }
}

/// How workloads are read for opt-in under `published`.
pub fn watching(published: &PublishedSettings) -> Watching {
    Watching {
        all: published.all,
        reloader_compat: published.reloader_compat,
    }
}

/// The flap stop's limit under `published`.
pub fn flap_limit(published: &PublishedSettings) -> FlapLimit {
    FlapLimit {
        rolls: published.flap_rolls,
        window: Duration::from_secs(published.flap_window_seconds),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_carry_no_secret() {
        let settings = ControllerSettings {
            all: true,
            require_approval: vec!["payments".to_owned()],
            restart_window: Some("Sat 03:00-04:00 UTC".parse().unwrap()),
            ..ControllerSettings::default()
        };
        let published = of(&settings, Timestamp::UNIX_EPOCH);
        let text = serde_json::to_string(&published).unwrap();
        let read: PublishedSettings = serde_json::from_str(&text).unwrap();
        assert_eq!(read, published);
        assert!(watching(&read).all);
        assert!(read.requires_approval("payments"));
        assert_eq!(read.restart_window.as_deref(), Some("Sat 03:00-04:00 UTC"));
        assert_eq!(flap_limit(&read), FlapLimit::default());
        assert!(
            !text.contains("webhook") && !text.contains("key\":\""),
            "{text}"
        );
    }
}
