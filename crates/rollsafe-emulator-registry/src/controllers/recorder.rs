//! The workload controllers' event recorder: the Events a controller records for a committed
//! change, through client-go's correlation ([`super::event_correlation`]), stored as any client
//! stores them.

use serde_json::Value;

use super::event_correlation::{Correlated, EventCorrelator};
use crate::store::{Store, UpdateMode, meta_str};
use crate::strategy;
use rollsafe_emulator_types::resources::{ResourceDef, ids};
use rollsafe_emulator_types::status::StatusError;

/// What the recorder remembers: counted, combined and rate-limited Events, as client-go's
/// recorder keeps them.
#[derive(Debug, Default)]
pub struct Recorder {
    correlator: EventCorrelator,
}

impl Recorder {
    /// Stores the Events a workload's controller would record for a committed change of `obj`
    /// (a `d`; `old` before it).
    pub fn record(
        &mut self,
        store: &mut Store,
        d: &ResourceDef,
        obj: &Value,
        old: Option<&Value>,
        template_changed: bool,
    ) {
        let Some(workload) = strategy::of(d.id).workload else {
            return;
        };
        let now = std::time::Instant::now();
        for event in (workload.events)(obj, old, template_changed) {
            let recorded = match self.correlator.correlate(event, now) {
                Correlated::Dropped => continue,
                Correlated::New(event) => store.create(ids::EVENTS, event).map(drop),
                Correlated::Repeat(event) => record_repeat(store, event),
            };
            if let Err(error) = recorded {
                tracing::warn!(%error, "recording an Event failed");
            }
        }
    }
}

/// Updates the stored Event `event` repeats with its count, last timestamp and message; if
/// that Event is gone (deleted), stores `event` instead, as the recorder does when its patch
/// finds nothing.
fn record_repeat(store: &mut Store, event: Value) -> Result<(), StatusError> {
    let ns = meta_str(&event, "namespace").unwrap_or_default().to_owned();
    let name = meta_str(&event, "name").unwrap_or_default().to_owned();
    let Some(stored) = store.get(ids::EVENTS, &ns, &name) else {
        return store.create(ids::EVENTS, event).map(drop);
    };
    let mut updated = (**stored).clone();
    for field in ["count", "lastTimestamp", "message"] {
        if let Some(value) = event.get(field) {
            updated[field] = value.clone();
        }
    }
    store
        .update(ids::EVENTS, &ns, &name, updated, UpdateMode::Force)
        .map(drop)
}
