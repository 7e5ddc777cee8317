//! Progressive restarts: roll in waves and stop at the first stalled consumer
//! (docs/rollouts.md), beside the [`RestartEngine`] they drive, so that any front end — the
//! command line's `restart-consumers --progressive`, a server route — runs the same waves.
//!
//! The waves come from the first plan's `rollsafe.dev/rollout-wave` annotations (without
//! any: one canary, then the rest). Each wave is planned afresh — a new discovery, so its
//! patches test the workloads' resourceVersions as they are when the wave starts — kept to that
//! wave's workloads, executed under the specification's rules (tested patches, at most four in
//! flight, never resent), then followed to its end. The next wave starts only when every
//! workload of this one was requested and is `complete` or `deferred`. Otherwise the run stops:
//! the remaining waves are never patched and are reported as held back. One annotation value
//! (one timestamp) marks the whole run.
//!
//! What is shown while it runs, and how a wave is followed (a live display, Ctrl-C), is the
//! front end's: [`WaveFront`]. [`Quiet`] follows without showing anything.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use rollsafe_core::contract::{RestartResult, WorkloadName};
use rollsafe_core::rollout::waves::{InvalidWave, WaveLabel, WavePlan};
use rollsafe_core::rollout::{RolloutState, RolloutStatus};
use rollsafe_core::workload::WorkloadKind;
use serde::Serialize;
use tokio::time::Instant;

use crate::engine::{RestartEngine, RestartPlan, RestartRequest};
use crate::follow::{FOLLOW_INTERVAL, RolloutWatch};

/// How long to follow rollouts, and when a StatefulSet's or DaemonSet's rollout is stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follow {
    /// How long to follow before giving up.
    pub timeout: Duration,
    /// A StatefulSet or DaemonSet whose rollout makes no progress for this long is stalled (a
    /// Deployment has its own `progressDeadlineSeconds`).
    pub progress_deadline: Duration,
}

/// How a follow ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Every rollout is final.
    Done,
    /// The timeout passed first.
    Timeout,
    /// The front end stopped it (Ctrl-C).
    Interrupted,
}

/// One workload's rollout as reported at the end.
#[derive(Debug, Clone, Serialize)]
pub struct FollowedWorkload {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its name.
    pub name: String,
    /// Where its rollout stands.
    #[serde(flatten)]
    pub status: RolloutStatus,
}

/// The rollouts of one follow, at its end.
#[derive(Debug, Clone, Serialize)]
pub struct RolloutReport {
    /// How it ended.
    pub ended: Ending,
    /// How many workloads ended in each state.
    pub counts: BTreeMap<&'static str, usize>,
    /// Each workload, by kind then name.
    pub workloads: Vec<FollowedWorkload>,
}

impl RolloutReport {
    /// The report of `statuses` (by kind then name) at a follow's `ended`.
    pub fn new<'a>(
        statuses: impl IntoIterator<Item = (&'a WorkloadName, &'a RolloutStatus)>,
        ended: Ending,
    ) -> Self {
        let workloads: Vec<FollowedWorkload> = statuses
            .into_iter()
            .map(|(workload, status)| FollowedWorkload {
                kind: workload.kind,
                name: workload.name.clone(),
                status: status.clone(),
            })
            .collect();
        let mut counts = BTreeMap::new();
        for workload in &workloads {
            *counts.entry(workload.status.state.as_str()).or_insert(0) += 1;
        }
        Self {
            ended,
            counts,
            workloads,
        }
    }

    /// Whether any workload is in `state`.
    pub fn any(&self, state: RolloutState) -> bool {
        self.workloads.iter().any(|w| w.status.state == state)
    }
}

/// A watch of what `result` requested for `request`, each workload expected to carry the
/// run's annotation `value`.
pub fn requested(
    client: &kube::Client,
    request: &RestartRequest,
    result: &RestartResult,
    value: &str,
    progress_deadline: Duration,
) -> RolloutWatch {
    RolloutWatch::new(
        client.clone(),
        request.namespace.clone(),
        &request.annotation,
        result
            .requested
            .iter()
            .map(|w| (w.clone(), Some(value.to_owned()))),
        progress_deadline,
    )
}

/// Follows `watch` until every rollout is final or `timeout` has passed, one poll every
/// [`FOLLOW_INTERVAL`], showing nothing (what a poll could not read is read again at the
/// next).
pub async fn follow_quietly(watch: &mut RolloutWatch, timeout: Duration) -> Ending {
    let deadline = Instant::now() + timeout;
    loop {
        watch.poll().await;
        if watch.is_done() {
            return Ending::Done;
        }
        let now = Instant::now();
        if now >= deadline {
            return Ending::Timeout;
        }
        tokio::time::sleep(FOLLOW_INTERVAL.min(deadline - now)).await;
    }
}

/// The front end of a progressive run: what it shows, and how it follows a wave.
pub trait WaveFront {
    /// The run's waves, before the first is patched (its `invalid` annotations go last).
    fn planned(&mut self, _plan: &WavePlan) {}
    /// A wave is about to be patched: `targets` workloads.
    fn patching(&mut self, _wave: WaveLabel, _targets: usize) {}
    /// Follows one wave's rollouts until every one is final, `timeout` has passed or the front
    /// end stops it.
    fn follow(
        &mut self,
        watch: &mut RolloutWatch,
        timeout: Duration,
    ) -> impl Future<Output = Ending> + Send;
}

/// A front end that shows nothing and follows with [`follow_quietly`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Quiet;

impl WaveFront for Quiet {
    fn follow(
        &mut self,
        watch: &mut RolloutWatch,
        timeout: Duration,
    ) -> impl Future<Output = Ending> + Send {
        follow_quietly(watch, timeout)
    }
}

/// One wave that was patched.
#[derive(Debug, Serialize)]
pub struct WaveRun {
    /// Which wave.
    pub wave: WaveLabel,
    /// Its restart result, exactly as the API would answer for these workloads.
    pub result: RestartResult,
    /// Its rollouts at the end.
    pub rollout: RolloutReport,
}

/// Why the progression stopped before its last wave.
#[derive(Debug, Serialize)]
pub struct Stop {
    /// The wave that did not finish.
    pub wave: WaveLabel,
    /// `stalled`, `superseded`, `gone`, `not_requested` (a patch was not acknowledged),
    /// `timeout` or `interrupted`.
    pub cause: &'static str,
    /// The workload that stopped it, with its rollout (none for a timeout or Ctrl-C).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<FollowedWorkload>,
}

/// What a progressive run did.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressiveReport {
    /// The waves patched, in order.
    pub waves: Vec<WaveRun>,
    /// Workloads of the waves not started: never patched.
    pub held_back: Vec<WorkloadName>,
    /// Why it stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stop>,
    /// Wave annotations that were not used (those workloads went last).
    pub invalid_waves: Vec<InvalidWave>,
}

/// Runs `request` (its annotation value fixed) wave by wave, starting from `first`, the run's
/// first plan; each wave is followed by `front` for what is left of `follow.timeout`.
pub async fn run(
    engine: &RestartEngine,
    client: &kube::Client,
    request: &RestartRequest,
    first: RestartPlan,
    follow: Follow,
    front: &mut impl WaveFront,
) -> ProgressiveReport {
    let plan = first.waves();
    front.planned(&plan);
    let deadline = Instant::now() + follow.timeout;
    let mut report = ProgressiveReport {
        waves: Vec::new(),
        held_back: Vec::new(),
        stopped: None,
        invalid_waves: plan.invalid.clone(),
    };
    let mut first = Some(first);
    let mut waves = plan.waves.into_iter();
    for wave in waves.by_ref() {
        let planned = match first.take() {
            Some(plan) => plan,
            None => engine.plan(request).await,
        };
        let planned = planned.retain(|w| wave.workloads.contains(w));
        let value = planned.annotation_value().to_owned();
        front.patching(wave.label, planned.targets().len());
        let result = engine.execute(planned).await;
        let mut watch = requested(client, request, &result, &value, follow.progress_deadline);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let ending = front
            .follow(&mut watch, remaining.max(Duration::from_millis(1)))
            .await;
        let rollout = RolloutReport::new(watch.statuses(), ending);
        let stop = stop_of(&wave.label, &wave.workloads, &result, &rollout);
        report.waves.push(WaveRun {
            wave: wave.label,
            result,
            rollout,
        });
        if stop.is_some() {
            report.stopped = stop;
            break;
        }
    }
    report.held_back = waves.flat_map(|wave| wave.workloads).collect();
    report
}

/// Why the progression stops after this wave, if it does.
fn stop_of(
    wave: &WaveLabel,
    workloads: &[WorkloadName],
    result: &RestartResult,
    rollout: &RolloutReport,
) -> Option<Stop> {
    let stop = |cause, workload: Option<&FollowedWorkload>| {
        Some(Stop {
            wave: *wave,
            cause,
            workload: workload.cloned(),
        })
    };
    // The worst first: a stalled rollout is the evidence the progression exists to catch.
    for state in [
        RolloutState::Stalled,
        RolloutState::Superseded,
        RolloutState::Gone,
    ] {
        if let Some(workload) = rollout.workloads.iter().find(|w| w.status.state == state) {
            return stop(state.as_str(), Some(workload));
        }
    }
    match rollout.ended {
        Ending::Timeout => return stop("timeout", None),
        Ending::Interrupted => return stop("interrupted", None),
        Ending::Done => {}
    }
    let unrequested = workloads.iter().any(|w| !result.requested.contains(w));
    if unrequested {
        return stop("not_requested", None);
    }
    None
}

#[cfg(test)]
mod tests {
    use rollsafe_core::contract::RestartStatus;

    use super::*;

    fn workload(kind: WorkloadKind, name: &str) -> WorkloadName {
        WorkloadName {
            kind,
            name: name.to_owned(),
        }
    }

    fn status(state: RolloutState) -> RolloutStatus {
        RolloutStatus {
            state,
            ..RolloutStatus::pending()
        }
    }

    fn requested(workloads: &[WorkloadName]) -> RestartResult {
        RestartResult {
            status: RestartStatus::Requested,
            matched: workloads.len(),
            requested: workloads.to_vec(),
            failures: Vec::new(),
            discovery_failures: Vec::new(),
            message: String::new(),
            note: String::new(),
            error: None,
        }
    }

    #[test]
    fn the_report_counts_each_state() {
        let (api, worker, agent) = (
            workload(WorkloadKind::Deployment, "api"),
            workload(WorkloadKind::StatefulSet, "worker"),
            workload(WorkloadKind::DaemonSet, "agent"),
        );
        let (complete, stalled) = (
            status(RolloutState::Complete),
            status(RolloutState::Stalled),
        );
        let report = RolloutReport::new(
            [(&api, &complete), (&worker, &stalled), (&agent, &complete)],
            Ending::Done,
        );
        assert_eq!(
            report.counts,
            BTreeMap::from([("complete", 2), ("stalled", 1)])
        );
        assert!(report.any(RolloutState::Stalled));
        assert!(!report.any(RolloutState::Gone));
        assert_eq!(report.workloads[1].name, "worker");
    }

    #[test]
    fn a_wave_stops_the_run_at_the_worst_of_what_it_saw() {
        let (api, worker) = (
            workload(WorkloadKind::Deployment, "api"),
            workload(WorkloadKind::StatefulSet, "worker"),
        );
        let wave = WaveLabel::Canary;
        let both = [api.clone(), worker.clone()];
        let report = |states: [RolloutState; 2], ended| {
            let statuses = states.map(status);
            RolloutReport::new([(&api, &statuses[0]), (&worker, &statuses[1])], ended)
        };
        let cause = |result: &RestartResult, rollout: &RolloutReport| {
            stop_of(&wave, &both, result, rollout).map(|stop| {
                let name = stop.workload.map(|w| w.name);
                (stop.cause, name)
            })
        };
        let all = requested(&both);
        use RolloutState::{Complete, Deferred, Gone, Stalled, Superseded};
        assert_eq!(
            cause(&all, &report([Complete, Deferred], Ending::Done)),
            None
        );
        // A stall is told before anything else, with the workload that stalled.
        assert_eq!(
            cause(&all, &report([Gone, Stalled], Ending::Timeout)),
            Some(("stalled", Some("worker".to_owned())))
        );
        assert_eq!(
            cause(&all, &report([Superseded, Complete], Ending::Done)),
            Some(("superseded", Some("api".to_owned())))
        );
        assert_eq!(
            cause(&all, &report([Complete, Complete], Ending::Timeout)),
            Some(("timeout", None))
        );
        assert_eq!(
            cause(&all, &report([Complete, Complete], Ending::Interrupted)),
            Some(("interrupted", None))
        );
        // A workload of the wave whose patch was not acknowledged stops it too.
        assert_eq!(
            cause(
                &requested(std::slice::from_ref(&api)),
                &report([Complete, Complete], Ending::Done)
            ),
            Some(("not_requested", None))
        );
    }
}
