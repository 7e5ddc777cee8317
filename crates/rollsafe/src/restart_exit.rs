//! The exit codes of the restart commands.

use std::process::ExitCode;

use rollsafe_core::contract::RestartStatus;

/// 0 for `requested` and `no_targets`, 2 for `partial`, 3 for `failed`.
pub fn exit_code(status: RestartStatus) -> ExitCode {
    match status {
        RestartStatus::Requested | RestartStatus::NoTargets => ExitCode::SUCCESS,
        RestartStatus::Partial => ExitCode::from(2),
        RestartStatus::Failed => ExitCode::from(3),
    }
}
