//! `rollsafe restart-consumers --progressive`: roll in waves and stop at the first stalled
//! consumer (docs/rollouts.md).
//!
//! The waves come from the first plan's `rollsafe.dev/rollout-wave` annotations (without
//! any: one canary, then the rest). Each wave is planned afresh — a new discovery, so its
//! patches test the workloads' resourceVersions as they are when the wave starts — kept to that
//! wave's workloads, executed under the specification's rules (tested patches, at most four in
//! flight, never resent), then followed to its end. The next wave starts only when every
//! workload of this one was requested and is `complete` or `deferred`. Otherwise the run stops:
//! the remaining waves are never patched and are reported as held back. One annotation value
//! (one timestamp) marks the whole run.

use rollsafe_core::contract::{RestartResult, RestartStatus, WorkloadName};
use rollsafe_core::rollout::RolloutState;
use rollsafe_core::rollout::waves::{InvalidWave, WaveLabel};
use rollsafe_kube::{RestartEngine, RestartPlan, RestartRequest};
use serde::Serialize;
use tokio::time::Instant;

use crate::follow::{self, Ending, Follow, FollowedWorkload, RolloutReport};

/// One wave that was patched.
#[derive(Debug, Serialize)]
pub(crate) struct WaveRun {
    /// Which wave.
    pub wave: WaveLabel,
    /// Its restart result, exactly as the API would answer for these workloads.
    pub result: RestartResult,
    /// Its rollouts at the end.
    pub rollout: RolloutReport,
}

/// Why the progression stopped before its last wave.
#[derive(Debug, Serialize)]
pub(crate) struct Stop {
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
pub(crate) struct ProgressiveReport {
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

impl ProgressiveReport {
    /// The exit code: the stopping wave's (stalled 4, timeout 5, lost 6, Ctrl-C 130, a failed
    /// patch the restart's 2 or 3), else 0.
    pub(crate) fn exit_code(&self) -> std::process::ExitCode {
        for run in &self.waves {
            if let Some(code) = run.rollout.exit_code() {
                return code;
            }
            if run.result.status != RestartStatus::Requested
                && run.result.status != RestartStatus::NoTargets
            {
                return crate::restart_exit::exit_code(run.result.status);
            }
        }
        std::process::ExitCode::SUCCESS
    }

    /// For `-o text`.
    pub(crate) fn text(&self) -> String {
        let mut out = String::new();
        for run in &self.waves {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&format!(
                "{}: {}: {}\n{}",
                run.wave,
                run.result.status.as_str(),
                run.result.message,
                run.rollout.text()
            ));
        }
        if let Some(stop) = &self.stopped {
            out.push_str(&format!("\nstopped at {}: {}", stop.wave, stop.cause));
            if let Some(workload) = &stop.workload {
                out.push_str(&format!(
                    " ({}/{}: {})",
                    workload.kind,
                    workload.name,
                    workload.status.describe()
                ));
            }
        }
        for workload in &self.held_back {
            out.push_str(&format!(
                "\nheld back  {}/{}: not patched",
                workload.kind, workload.name
            ));
        }
        out
    }
}

/// Runs `request` (its annotation value fixed) wave by wave, starting from `first`, the run's
/// first plan.
pub(crate) async fn run(
    engine: &RestartEngine,
    client: &kube::Client,
    request: &RestartRequest,
    first: RestartPlan,
    follow: Follow,
) -> ProgressiveReport {
    let plan = first.waves();
    for invalid in &plan.invalid {
        eprintln!(
            "rollsafe: {}/{}: rollsafe.dev/rollout-wave is not used ({}): it goes last",
            invalid.workload.kind, invalid.workload.name, invalid.error
        );
    }
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
        eprintln!(
            "rollsafe: {}: patching {} workload{}",
            wave.label,
            planned.targets().len(),
            if planned.targets().len() == 1 {
                ""
            } else {
                "s"
            }
        );
        let result = engine.execute(planned).await;
        let mut watch = follow::requested(client, request, &result, &value, follow);
        let remaining = deadline.saturating_duration_since(Instant::now());
        let ending = follow::run(
            &mut watch,
            Follow {
                timeout: remaining.max(std::time::Duration::from_millis(1)),
                ..follow
            },
        )
        .await;
        let rollout = RolloutReport::of(&watch, ending);
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
