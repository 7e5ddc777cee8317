//! `rollsafe restart-consumers --progressive`: the command line's front end of the wave runner
//! ([`rollsafe_kube::progressive`]): what it says on stderr while the waves run, the live
//! display of each wave's follow, and the report's exit code and text (docs/rollouts.md).

use std::process::ExitCode;
use std::time::Duration;

use rollsafe_core::contract::RestartStatus;
use rollsafe_core::rollout::waves::{WaveLabel, WavePlan};
use rollsafe_kube::RolloutWatch;
use rollsafe_kube::progressive::{Ending, ProgressiveReport, WaveFront};

use crate::follow::{self, Shown as _};

/// The waves' lines on stderr, and each wave followed with the live display and Ctrl-C.
pub(crate) struct Display;

impl WaveFront for Display {
    fn planned(&mut self, plan: &WavePlan) {
        for invalid in &plan.invalid {
            eprintln!(
                "rollsafe: {}/{}: rollsafe.dev/rollout-wave is not used ({}): it goes last",
                invalid.workload.kind, invalid.workload.name, invalid.error
            );
        }
    }

    fn patching(&mut self, wave: WaveLabel, targets: usize) {
        eprintln!(
            "rollsafe: {wave}: patching {targets} workload{}",
            if targets == 1 { "" } else { "s" }
        );
    }

    async fn follow(&mut self, watch: &mut RolloutWatch, timeout: Duration) -> Ending {
        follow::run(watch, timeout).await
    }
}

/// The exit code: the stopping wave's (stalled 4, timeout 5, lost 6, Ctrl-C 130, a failed
/// patch the restart's 2 or 3), else 0.
pub(crate) fn exit_code(report: &ProgressiveReport) -> ExitCode {
    for run in &report.waves {
        if let Some(code) = run.rollout.exit_code() {
            return code;
        }
        if !matches!(
            run.result.status,
            RestartStatus::Requested | RestartStatus::NoTargets
        ) {
            return crate::restart_exit::exit_code(run.result.status);
        }
    }
    ExitCode::SUCCESS
}

/// For `-o text`.
pub(crate) fn text(report: &ProgressiveReport) -> String {
    let mut out = String::new();
    for run in &report.waves {
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
    if let Some(stop) = &report.stopped {
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
    for workload in &report.held_back {
        out.push_str(&format!(
            "\nheld back  {}/{}: not patched",
            workload.kind, workload.name
        ));
    }
    out
}
