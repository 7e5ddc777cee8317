//! Announcements: the Kubernetes Events the controller publishes on a workload, and the same
//! outcome as a notification (`--notify-webhook`).
//!
//! kube-runtime's `events::Recorder` in a task of its own: an [`Announcement`] carries a typed
//! [`Reason`], which gives the Event's reason and action and the notification's outcome — one
//! table, no string matching. Publishing never waits: the Event is queued ([`EVENT_QUEUE`]) and
//! sent by [`publish_events`] after the patch it announces, within [`EVENT_TIMEOUT`]; a full
//! queue or a failed publish is logged and counted, never retried.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};
use rollsafe_core::rollout::{RolloutState, RolloutStatus};
use rollsafe_kube::eviction::{EvictionReport, EvictionState};
use rollsafe_notify::{Cause, Notification, Notifier, Outcome as NotifyOutcome};
use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::cache::{Cache, SourceKey, WorkloadKey};
use crate::consumption::Keys;
use crate::settings::{ControllerSettings, EVENT_QUEUE, EVENT_TIMEOUT};
use crate::status::Status;
use crate::windows::WallClock;

/// Why the controller announces something: the Event's `reason`, its `action`, and the
/// notification's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The workload was rolled.
    Rolled,
    /// The workload was rolled past the flap stop's limit as a recovery: the roll replaces a
    /// rollout that stalled (an Event of its own, not counted into earlier `Rolled` ones).
    Recovered,
    /// The pod template was updated but the pods roll later (paused, `OnDelete`, a partition,
    /// a CronJob's next run).
    RolloutDeferred,
    /// The flap stop halted the workload.
    Halted,
    /// A roll waits for a restart window or an approval.
    Pending,
    /// A progressive roll is held at a stalled earlier wave.
    RolloutHeld,
    /// A followed rollout completed.
    RolloutComplete,
    /// A followed rollout stalled.
    RolloutStalled,
    /// Another writer removed or changed rollsafe's template annotation before the rollout
    /// completed: not rolled again for that content.
    Reverted,
    /// Another writer removed the workload's record (a replace of the whole object): adopted
    /// again, without a roll. An Event only, no notification (nothing was rolled or held).
    Readopted,
}

impl Reason {
    /// Every reason.
    pub const ALL: [Reason; 10] = [
        Reason::Rolled,
        Reason::Recovered,
        Reason::RolloutDeferred,
        Reason::Halted,
        Reason::Pending,
        Reason::RolloutHeld,
        Reason::RolloutComplete,
        Reason::RolloutStalled,
        Reason::Reverted,
        Reason::Readopted,
    ];

    /// The Event's `reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Rolled => "Rolled",
            Reason::Recovered => "Recovered",
            Reason::RolloutDeferred => "RolloutDeferred",
            Reason::Halted => "Halted",
            Reason::Pending => "Pending",
            Reason::RolloutHeld => "RolloutHeld",
            Reason::RolloutComplete => "RolloutComplete",
            Reason::RolloutStalled => "RolloutStalled",
            Reason::Reverted => "Reverted",
            Reason::Readopted => "Readopted",
        }
    }

    /// The Event's `action`: what the controller did or withheld.
    pub fn action(self) -> &'static str {
        match self {
            Reason::Rolled
            | Reason::Recovered
            | Reason::RolloutDeferred
            | Reason::Pending
            | Reason::RolloutHeld
            | Reason::Reverted => "Roll",
            Reason::Readopted => "Adopt",
            Reason::Halted => "Halt",
            Reason::RolloutComplete | Reason::RolloutStalled => "Rollout",
        }
    }

    /// The outcome a notification of it carries; `None`: it is not notified.
    pub fn notification(self) -> Option<NotifyOutcome> {
        Some(match self {
            Reason::Rolled | Reason::Recovered => NotifyOutcome::Rolled,
            Reason::RolloutDeferred => NotifyOutcome::Deferred,
            Reason::Halted => NotifyOutcome::Halted,
            Reason::Pending => NotifyOutcome::Pending,
            Reason::RolloutHeld => NotifyOutcome::RolloutHeld,
            Reason::RolloutComplete => NotifyOutcome::RolloutComplete,
            Reason::RolloutStalled => NotifyOutcome::RolloutStalled,
            Reason::Reverted => NotifyOutcome::Reverted,
            Reason::Readopted => return None,
        })
    }
}

/// A Kubernetes Event about the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Announcement {
    /// Normal or Warning.
    pub type_: EventType,
    /// Why: the Event's reason and action, the notification's outcome.
    pub reason: Reason,
    /// The text: object names only, never values.
    pub note: String,
    /// The object whose change caused it (the first, by kind and name, when several did),
    /// the Event's `related`: the recorder counts a repeat into an earlier Event only when
    /// this too is the same, so a roll for another object is an Event of its own, with its
    /// own note.
    pub related: Option<SourceKey>,
    /// Every object whose change caused it (or, for a halt, whose change was not rolled for),
    /// by kind and name (the note names at most ten; notifications name them all).
    pub causes: Vec<SourceKey>,
}

impl Announcement {
    /// The Event of a rollout this replica followed to its end: `RolloutComplete` (Normal) or
    /// `RolloutStalled` (Warning, with Kubernetes' reason); `None` for any other end (another
    /// change superseded it, or the workload went), which is counted and logged only.
    pub fn rollout_finished(status: &RolloutStatus, elapsed: Duration) -> Option<Self> {
        let (type_, reason, verb) = match status.state {
            RolloutState::Complete => (EventType::Normal, Reason::RolloutComplete, "complete"),
            RolloutState::Stalled => (EventType::Warning, Reason::RolloutStalled, "stalled"),
            _ => return None,
        };
        Some(Self {
            type_,
            reason,
            note: format!(
                "Rollout {verb} after {}: {}",
                took(elapsed),
                status.describe()
            ),
            related: None,
            causes: Vec::new(),
        })
    }
}

impl Announcement {
    /// The Event of an eviction run this replica carried to its end: `RolloutComplete`
    /// (Normal), `RolloutDeferred` (Normal: not evicted, by rule), or `RolloutStalled`
    /// (Warning: a pod did not come back, a PodDisruptionBudget kept refusing, the run's time
    /// ran out or a call failed; the rest were not evicted).
    pub fn eviction_ended(report: &EvictionReport, elapsed: Duration) -> Self {
        let evicted = report.evicted.len();
        let (type_, reason, note) = match &report.state {
            EvictionState::Complete => (
                EventType::Normal,
                Reason::RolloutComplete,
                format!(
                    "Restarted by eviction after {}: {evicted} pod(s) evicted, each replacement Ready",
                    took(elapsed)
                ),
            ),
            EvictionState::Deferred { reason } => (
                EventType::Normal,
                Reason::RolloutDeferred,
                format!("Not evicted: {}", reason.text()),
            ),
            EvictionState::Stalled { reason } => (
                EventType::Warning,
                Reason::RolloutStalled,
                format!(
                    "Eviction stalled after {} and {evicted} eviction(s): {reason}; the other pods were not evicted",
                    took(elapsed)
                ),
            ),
            EvictionState::TimedOut => (
                EventType::Warning,
                Reason::RolloutStalled,
                format!(
                    "Eviction did not finish within {} ({evicted} eviction(s)); the other pods were not evicted",
                    took(elapsed)
                ),
            ),
            EvictionState::Failed { code } => (
                EventType::Warning,
                Reason::RolloutStalled,
                format!(
                    "Eviction stopped after {evicted} eviction(s): {code}; the other pods were not evicted"
                ),
            ),
        };
        Self {
            type_,
            reason,
            note,
            related: None,
            causes: Vec::new(),
        }
    }
}

/// Where announcements go: the Event queue, and the notifier when there is one.
#[derive(Clone)]
pub(crate) struct Announcer {
    events: mpsc::Sender<(WorkloadKey, ObjectReference, Event)>,
    notifier: Option<Notifier>,
    cluster_name: Option<String>,
    page_url: Option<String>,
    clock: WallClock,
    status: Arc<watch::Sender<Status>>,
}

/// The receiving end of the Event queue, until the controller's run starts [`publish_events`].
pub(crate) type EventQueue = mpsc::Receiver<(WorkloadKey, ObjectReference, Event)>;

impl Announcer {
    /// An announcer for `settings`' notifier, and the queue its Events wait in.
    pub(crate) fn new(
        settings: &ControllerSettings,
        status: Arc<watch::Sender<Status>>,
    ) -> (Self, EventQueue) {
        let (events, queue) = mpsc::channel(EVENT_QUEUE);
        let announcer = Self {
            events,
            notifier: settings.notifier.clone(),
            cluster_name: settings.cluster_name.clone(),
            page_url: settings.page_url.clone(),
            clock: settings.clock,
            status,
        };
        (announcer, queue)
    }

    /// Queues one Event on `reference` for the publishing task; a full queue drops it (logged
    /// and counted, never retried). With a notifier, the same outcome is queued as a
    /// notification (never waited for), naming the keys of each cause the workload consumes
    /// as `cache` holds them (none without one).
    pub(crate) fn publish(
        &self,
        key: &WorkloadKey,
        reference: ObjectReference,
        event: Announcement,
        cache: Option<&Cache>,
    ) {
        self.notify(key, &event, cache);
        let Announcement {
            type_,
            reason,
            note,
            related,
            causes: _,
        } = event;
        let event = Event {
            type_,
            reason: reason.as_str().to_owned(),
            note: Some(note),
            action: reason.action().to_owned(),
            secondary: related.map(|source| ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some(source.kind.as_str().to_owned()),
                namespace: Some(source.namespace.into()),
                name: Some(source.name.into()),
                ..ObjectReference::default()
            }),
        };
        if self
            .events
            .try_send((key.clone(), reference, event))
            .is_err()
        {
            warn!(workload = %key, reason = reason.as_str(), "the Event queue is full; Event dropped");
            self.status.send_modify(|s| s.event_failures += 1);
        }
    }

    /// Queues the notification of `event` on `key`: its outcome, the objects that caused it
    /// with the keys the workload consumes of each (names only, never values), the cluster
    /// and the page. Returns at once; delivery is the notifier's.
    fn notify(&self, key: &WorkloadKey, event: &Announcement, cache: Option<&Cache>) {
        let (Some(notifier), Some(outcome)) = (&self.notifier, event.reason.notification()) else {
            return;
        };
        let consumed = cache
            .and_then(|cache| cache.workload(key))
            .map(|entry| entry.consumption.expand());
        let causes = event
            .causes
            .iter()
            .map(|source| {
                let keys = consumed
                    .as_ref()
                    .and_then(|consumption| {
                        consumption.iter().find_map(|(config, keys)| {
                            (config.kind == source.kind && config.name == source.name)
                                .then_some(keys)
                        })
                    })
                    .map(|keys| match keys {
                        Keys::All => Vec::new(),
                        Keys::Some(keys) => keys.iter().cloned().collect(),
                    })
                    .unwrap_or_default();
                Cause {
                    kind: source.kind.as_str().to_owned(),
                    name: source.name.to_string(),
                    keys,
                }
            })
            .collect();
        notifier.notify(Notification {
            outcome,
            cluster: self.cluster_name.clone(),
            namespace: key.namespace.to_string(),
            workload_kind: key.kind.as_str().to_owned(),
            workload: key.name.to_string(),
            causes,
            summary: event.note.clone(),
            link: self.page_url.clone(),
            at: self.clock.now(),
        });
    }
}

/// Publishes the queued Events in order, each within [`EVENT_TIMEOUT`]; a failure is logged
/// and counted, never retried. Ends when the controller is dropped.
pub(crate) async fn publish_events(
    mut queue: EventQueue,
    recorder: Recorder,
    status: Arc<watch::Sender<Status>>,
) {
    while let Some((key, reference, event)) = queue.recv().await {
        match tokio::time::timeout(EVENT_TIMEOUT, recorder.publish(&event, &reference)).await {
            Ok(Ok(())) => status.send_modify(|s| s.events += 1),
            _ => {
                warn!(workload = %key, reason = %event.reason, "cannot publish the Event");
                status.send_modify(|s| s.event_failures += 1);
            }
        }
    }
}

/// The object reference of a workload's Events.
pub(crate) fn workload_reference(key: &WorkloadKey, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some(key.kind.api_version().to_owned()),
        kind: Some(key.kind.as_str().to_owned()),
        namespace: Some(key.namespace.to_string()),
        name: Some(key.name.to_string()),
        uid,
        ..ObjectReference::default()
    }
}

/// A rollout's duration for an Event note: `0.4s`, `42.0s`, `3m12s`.
fn took(elapsed: Duration) -> String {
    let seconds = elapsed.as_secs();
    if seconds < 60 {
        format!("{:.1}s", elapsed.as_secs_f64())
    } else {
        format!("{}m{:02}s", seconds / 60, seconds % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_one_event_reason_and_one_notification_outcome() {
        let reasons: std::collections::HashSet<&str> =
            Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(reasons.len(), Reason::ALL.len());
        let outcomes: Vec<NotifyOutcome> = Reason::ALL
            .iter()
            .filter_map(|r| r.notification())
            .collect();
        for outcome in NotifyOutcome::ALL {
            assert!(
                outcomes.contains(&outcome),
                "{outcome:?} is announced by no reason"
            );
        }
    }

    #[test]
    fn durations_read_as_seconds_then_minutes() {
        assert_eq!(took(Duration::from_millis(400)), "0.4s");
        assert_eq!(took(Duration::from_secs(192)), "3m12s");
    }
}
