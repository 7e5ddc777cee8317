//! `rollsafe why -o text`: one line per fact.

use rollsafe_core::preview::owned_by;

use super::{RecordState, WatchState, Why};

pub(super) fn text(why: &Why) -> String {
    let mut out = format!("{} {}/{}", why.kind, why.namespace, why.name);
    out.push_str(&format!("\nsettings:  {}", why.settings.note));
    out.push_str(&format!("\nwatch:     {}", why.watch.reason));
    // "true" and "false" are in the reason already; a list or a value not understood is shown.
    if let (WatchState::Listed | WatchState::Invalid, Some(value)) =
        (why.watch.state, &why.watch.value)
    {
        out.push_str(&format!(" [rollsafe.dev/watch: {value:?}]"));
    }
    if let Some(owner) = &why.operator_owner {
        out.push_str(&format!(
            "\nowner:     {}",
            owned_by(why.kind, &why.name, owner)
        ));
    }
    if let Some(by) = &why.restart_by {
        out.push_str(&format!("\nrestart:   {}", by.reason));
    }
    if let Some(evicting) = &why.evicting {
        out.push_str(&format!(
            "\nevicting:  in progress: pods created before {} are evicted one at a time (rollsafe.dev/evicting); the controller removes the mark when the run ends, and a new leader continues it",
            evicting.since
        ));
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
    for hold in &why.holds {
        out.push_str(&format!("\nholds:     {hold}"));
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
    if let Some(stopped) = why.stages.iter().find(|stage| stage.result == "stopped") {
        out.push_str(&format!(
            "\nstopped:   at the controller's {} stage ({})",
            stopped.stage,
            stopped.outcome.unwrap_or("stopped")
        ));
    }
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
            None => out.push_str(
                "\nlast:      no Rolled, Recovered, RolloutDeferred, Halted, Reverted or Readopted Event",
            ),
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
