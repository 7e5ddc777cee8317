//! `rollsafe restart-consumers --strategy evict`: the consuming pods restarted by
//! PDB-respecting eviction (docs/strategies.md) — the live progress on stderr, the summary on
//! stdout (`-o json|text`) and the exit codes of `--wait`.

use std::process::ExitCode;

use jiff::Timestamp;
use rollsafe_core::name::SecretName;
use rollsafe_core::strategy::EvictionSettings;
use rollsafe_kube::eviction::{
    self, EvictionDeadlines, EvictionState, EvictionSummary, PlannedEviction, Progress,
};

use crate::follow::{EXIT_INTERRUPTED, EXIT_STALLED, EXIT_TIMEOUT, Follow};
use crate::kube_args::Session;
use crate::restart_exit::{self, OutputFormat};
use crate::stdout;

/// Runs the eviction strategy over the consumers of `secret` and prints its summary.
pub(crate) async fn run(
    session: &Session,
    secret: &SecretName,
    since: Option<Timestamp>,
    follow: Follow,
    output: OutputFormat,
) -> anyhow::Result<ExitCode> {
    let since = rollsafe_core::strategy::eviction_instant(since.unwrap_or_else(Timestamp::now));
    let namespace = &session.namespace;
    let planned = match eviction::plan(
        &session.client,
        namespace,
        secret,
        EvictionSettings::default(),
    )
    .await
    {
        Ok(planned) => planned,
        Err(error) => anyhow::bail!(
            "cannot find the pods that consume Secret \"{secret}\" in namespace \"{namespace}\": {error}"
        ),
    };
    let shown_since = rollsafe_core::time::rfc3339_millis(since);
    eprintln!(
        "rollsafe: restarting by eviction the pods that consume Secret {namespace}/{secret} and started before {shown_since} (to continue an interrupted run: --since {shown_since})",
    );
    for group in &planned {
        eprintln!("rollsafe: {}", planned_line(group));
    }
    let deadlines = EvictionDeadlines {
        progress: follow.progress_deadline,
        disruption_budget: follow.progress_deadline,
        whole: follow.timeout,
    };
    let run = eviction::run_planned(
        &session.client,
        namespace,
        secret,
        planned,
        since,
        deadlines,
        |target, progress| match progress {
            Progress::Evicted { pod } => eprintln!("rollsafe: {target}: evicted pod/{pod}"),
            Progress::Refused { pod, retry_in } => eprintln!(
                "rollsafe: {target}: a PodDisruptionBudget refused evicting pod/{pod} for now; trying again in {}s",
                retry_in.as_secs()
            ),
        },
    );
    let summary = tokio::select! {
        summary = run => summary,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("rollsafe: stopped; what was evicted stays evicted (continue with --since {shown_since})");
            return Ok(ExitCode::from(EXIT_INTERRUPTED));
        }
    };
    let out = match output {
        OutputFormat::Json => restart_exit::json(&summary)?,
        OutputFormat::Text => text(&summary),
    };
    stdout::result_line(&out)?;
    Ok(exit_code(&summary))
}

/// How a planned group is announced before the run.
fn planned_line(group: &PlannedEviction) -> String {
    let mut line = format!("{}: {} consuming pod(s)", group.target.shown, group.pods);
    if let Some(owner) = &group.operator_owner {
        line.push_str(&format!(", owned by {owner}"));
    }
    if group.settings.max_unavailable > 1 {
        line.push_str(&format!(
            ", at most {} down at once",
            group.settings.max_unavailable
        ));
    }
    line
}

/// 0 every group complete or deferred; 4 one stalled; 5 the timeout passed; 3 a call failed.
fn exit_code(summary: &EvictionSummary) -> ExitCode {
    if summary.any(|s| matches!(s, EvictionState::Failed { .. })) {
        ExitCode::from(3)
    } else if summary.any(|s| matches!(s, EvictionState::Stalled { .. })) {
        ExitCode::from(EXIT_STALLED)
    } else if summary.any(|s| matches!(s, EvictionState::TimedOut)) {
        ExitCode::from(EXIT_TIMEOUT)
    } else {
        ExitCode::SUCCESS
    }
}

/// One line per group, then the held-back ones.
fn text(summary: &EvictionSummary) -> String {
    let mut lines = Vec::new();
    for run in &summary.runs {
        let evicted = run.evicted.len();
        let line = match &run.state {
            EvictionState::Complete => {
                format!("{}: complete ({evicted} pod(s) evicted)", run.target)
            }
            EvictionState::Deferred { reason } => {
                format!("{}: deferred: {}", run.target, reason.text())
            }
            EvictionState::Stalled { reason } => format!(
                "{}: stalled after {evicted} eviction(s): {reason}; the rest were not evicted",
                run.target
            ),
            EvictionState::TimedOut => format!(
                "{}: the timeout passed after {evicted} eviction(s)",
                run.target
            ),
            EvictionState::Failed { code } => {
                format!(
                    "{}: failed ({code}) after {evicted} eviction(s)",
                    run.target
                )
            }
        };
        lines.push(line);
    }
    for held in &summary.held_back {
        lines.push(format!(
            "{held}: held back (an earlier group did not complete)"
        ));
    }
    if lines.is_empty() {
        lines.push("no pod consumes this Secret".to_owned());
    }
    lines.join("\n")
}
