//! Restart windows applied to a roll: which windows hold it, until when, and the mark a held
//! workload carries on its own metadata.
//!
//! The grammar is the core's ([`rollsafe_core::window`]). A roll that is due is held while a
//! window that applies to it is closed:
//!
//! - the workload's own `rollsafe.dev/restart-window`, when it has one (its owner decides);
//! - else the windows of the changed objects that carry one, all open at once;
//! - else `--restart-window`.
//!
//! A window that is not understood holds the roll until it is corrected (rolling on a
//! misunderstanding at 03:00 is what the window was written to prevent). A held workload is
//! marked `rollsafe.dev/pending` (metadata only: the pods do not roll), so the hold is visible
//! to `kubectl`, survives a restart or failover without being announced again, and is removed
//! by the patch that rolls it.

use jiff::{SignedDuration, Timestamp};
use rollsafe_core::window::{self, RestartWindow};
use std::collections::BTreeSet;
use std::time::Duration;

use crate::cache::{Cache, SourceKey, WorkloadEntry};

pub use crate::annotations::WindowAnnotation;

/// The longest a held workload waits before it is looked at again, even when its window opens
/// later: the wall clock is read again (a clock stepped by NTP, a window edited).
pub const WINDOW_RECHECK: Duration = Duration::from_secs(15 * 60);

/// The wall clock windows are read against: the system's, or (for tests) one set to another
/// instant that runs on from there at the system's pace.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WallClock {
    offset: SignedDuration,
}

impl WallClock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// A clock reading `at` now, and running on from there.
    pub fn starting_at(at: Timestamp) -> Self {
        Self {
            offset: at.duration_since(Timestamp::now()),
        }
    }

    /// The time now.
    pub fn now(&self) -> Timestamp {
        Timestamp::now()
            .checked_add(self.offset)
            .unwrap_or_else(|_| Timestamp::now())
    }
}

/// Whose window holds a roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// The workload's own annotation.
    Workload,
    /// The annotations of these changed objects (`Secret/db`).
    Sources(Vec<String>),
    /// `--restart-window`.
    Flag,
}

impl Owner {
    fn describe(&self) -> String {
        match self {
            Owner::Workload => "its restart window".to_owned(),
            Owner::Sources(names) => format!("the restart window of {}", names.join(", ")),
            Owner::Flag => "the --restart-window".to_owned(),
        }
    }
}

/// A roll held by a closed window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    /// When the windows open (all of them); `None`: not within the search (windows that
    /// never overlap, or one not understood) — held until they change.
    pub until: Option<Timestamp>,
    /// Whose window it is.
    pub owner: Owner,
    /// The windows as written (or the code of the one not understood).
    pub windows: String,
    /// The window's zone shows `until` this way (`2026-12-07T09:00+01:00`).
    pub until_local: Option<String>,
}

impl Closed {
    /// The `rollsafe.dev/pending` value for a roll to `digest` (its workload part): what is
    /// held, until when (UTC, or `-`), for which content.
    pub fn mark(&self, digest: &str) -> String {
        let until = self
            .until
            .map_or_else(|| "-".to_owned(), |until| until.to_string());
        format!("window until={until} digest={digest}")
    }

    /// How long to wait before looking again: until the window opens, at most
    /// [`WINDOW_RECHECK`].
    pub fn recheck(&self, now: Timestamp) -> Duration {
        self.until
            .and_then(|until| Duration::try_from(until.duration_since(now)).ok())
            .map_or(WINDOW_RECHECK, |wait| wait.min(WINDOW_RECHECK))
    }

    /// The Event note: what is held, by whose window, until when.
    pub fn note(&self, names: &str) -> String {
        let changes = if names.is_empty() {
            String::new()
        } else {
            format!(" for changes to {names}")
        };
        let until = match &self.until_local {
            Some(local) => format!("until {local}"),
            None => "until the window is changed (it never opens)".to_owned(),
        };
        format!(
            "Roll{changes} held by {} ({}) {until}",
            self.owner.describe(),
            self.windows
        )
    }
}

/// The window holding a roll of `entry` for `changed` at `now`, the changed objects' windows
/// read from `cache`, `default` `--restart-window`.
pub fn holding(
    cache: &Cache,
    entry: &WorkloadEntry,
    changed: &BTreeSet<SourceKey>,
    default: Option<&RestartWindow>,
    now: Timestamp,
) -> Option<Closed> {
    let sources = changed.iter().filter_map(|source| {
        let window = cache.source_entry(source)?.window.as_deref()?;
        Some((format!("{}/{}", source.kind.as_str(), source.name), window))
    });
    closed(entry.window.as_deref(), sources, default, now)
}

/// The windows that hold any roll of `entry` for changes to `consumed` outside them, with the
/// precedence [`holding`] applies (its own annotation, else the consumed objects', else
/// `default`), as written and whose they are (`Sat 03:00-04:00 UTC (its restart window)`);
/// `None` when no window applies. A standing hold, said before anything is pending.
pub fn standing(
    cache: &Cache,
    entry: &WorkloadEntry,
    consumed: &BTreeSet<SourceKey>,
    default: Option<&RestartWindow>,
) -> Option<String> {
    let written = |window: &WindowAnnotation| match window {
        Ok(window) => window.to_string(),
        Err(error) => format!("not understood: {}", error.code()),
    };
    if let Some(own) = entry.window.as_deref() {
        return Some(format!("{} ({})", written(own), Owner::Workload.describe()));
    }
    let sources: Vec<(String, String)> = consumed
        .iter()
        .filter_map(|source| {
            let window = cache.source_entry(source)?.window.as_deref()?;
            Some((
                format!("{}/{}", source.kind.as_str(), source.name),
                written(window),
            ))
        })
        .collect();
    if !sources.is_empty() {
        let (names, windows): (Vec<String>, Vec<String>) = sources.into_iter().unzip();
        return Some(format!(
            "{} ({}, for changes to those)",
            windows.join(" and "),
            Owner::Sources(names).describe()
        ));
    }
    default.map(|window| format!("{window} ({})", Owner::Flag.describe()))
}

/// Whether a roll due now is held: `workload` is the workload's own annotation, `sources` the
/// annotations of the changed objects that carry one (by name), `default` `--restart-window`.
pub fn closed<'a>(
    workload: Option<&WindowAnnotation>,
    sources: impl IntoIterator<Item = (String, &'a WindowAnnotation)>,
    default: Option<&RestartWindow>,
    now: Timestamp,
) -> Option<Closed> {
    let sources: Vec<(String, &WindowAnnotation)> = sources.into_iter().collect();
    let (owner, windows): (Owner, Vec<&WindowAnnotation>) = match workload {
        Some(own) => (Owner::Workload, vec![own]),
        None if !sources.is_empty() => (
            Owner::Sources(sources.iter().map(|(name, _)| name.clone()).collect()),
            sources.iter().map(|(_, window)| *window).collect(),
        ),
        None => {
            let window = default?;
            return (!window.is_open(now)).then(|| {
                let until = window.next_open(now);
                Closed {
                    until,
                    owner: Owner::Flag,
                    windows: window.to_string(),
                    until_local: until.map(|at| window.local(at)),
                }
            });
        }
    };
    let mut valid = Vec::with_capacity(windows.len());
    for window in windows {
        match window {
            Ok(window) => valid.push(window),
            Err(error) => {
                return Some(Closed {
                    until: None,
                    owner,
                    windows: format!("not understood: {}", error.code()),
                    until_local: None,
                });
            }
        }
    }
    if valid.iter().all(|window| window.is_open(now)) {
        return None;
    }
    let until = window::next_open_all(valid.iter().copied(), now);
    let text = valid
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ");
    Some(Closed {
        until,
        owner,
        windows: text,
        until_local: until.and_then(|at| valid.first().map(|window| window.local(at))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn parsed(text: &str) -> WindowAnnotation {
        text.parse()
    }

    #[test]
    fn which_window_holds_a_roll() {
        let office = parsed("Mon-Fri 09:00-17:00 Europe/Berlin");
        let night = parsed("* 01:00-05:00 UTC");
        let bad = parsed("Mon-Fry 09:00-17:00");
        let flag: RestartWindow = "Sat 10:00-12:00 UTC".parse().unwrap();
        // Thursday 2026-12-03 06:00 UTC = 07:00 in Berlin.
        let now = at("2026-12-03T06:00:00Z");
        let held = closed(Some(&office), [], Some(&flag), now).unwrap();
        assert_eq!(held.owner, Owner::Workload);
        assert_eq!(held.until, Some(at("2026-12-03T08:00:00Z")));
        assert_eq!(
            held.note("Secret/db"),
            "Roll for changes to Secret/db held by its restart window (Mon-Fri 09:00-17:00 Europe/Berlin) until 2026-12-03T09:00+01:00"
        );
        assert_eq!(
            held.mark("v1:abc"),
            "window until=2026-12-03T08:00:00Z digest=v1:abc"
        );
        assert_eq!(held.recheck(now), WINDOW_RECHECK);
        assert_eq!(
            held.recheck(at("2026-12-03T07:59:00Z")),
            Duration::from_secs(60)
        );
        // The workload's own window wins over its sources' and the flag.
        assert_eq!(
            closed(
                Some(&night),
                [("Secret/db".to_owned(), &office)],
                Some(&flag),
                at("2026-12-03T02:00:00Z")
            ),
            None
        );
        // Sources' windows: all open at once.
        let both = closed(
            None,
            [
                ("Secret/db".to_owned(), &office),
                ("ConfigMap/c".to_owned(), &night),
            ],
            Some(&flag),
            now,
        )
        .unwrap();
        assert_eq!(both.until, None, "office hours and the night never overlap");
        assert_eq!(
            both.owner,
            Owner::Sources(vec!["Secret/db".into(), "ConfigMap/c".into()])
        );
        // The flag, when nothing else says.
        let by_flag = closed(None, [], Some(&flag), now).unwrap();
        assert_eq!(by_flag.owner, Owner::Flag);
        assert_eq!(by_flag.until, Some(at("2026-12-05T10:00:00Z")));
        assert_eq!(closed(None, [], None, now), None);
        // A window not understood holds until corrected.
        let invalid = closed(Some(&bad), [], None, now).unwrap();
        assert_eq!(invalid.until, None);
        assert_eq!(invalid.mark("v1:abc"), "window until=- digest=v1:abc");
        assert!(
            invalid
                .note("")
                .contains("not understood: restart_window_day")
        );
    }

    #[test]
    fn a_clock_set_elsewhere_runs_on() {
        let clock = WallClock::starting_at(at("2026-12-03T08:59:58Z"));
        let read = clock.now();
        assert!(read >= at("2026-12-03T08:59:58Z") && read < at("2026-12-03T09:00:58Z"));
        assert!(WallClock::system().now() > at("2026-01-01T00:00:00Z"));
    }
}
