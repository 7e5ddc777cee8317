//! The exit codes and the output rule of the restart commands.
//!
//! Every command that prints a result takes `-o json|text` (default `json`): `json` is the
//! result exactly as the API returns it, indented when stdout is a terminal and one line
//! otherwise; `text` is a summary for people, one line per workload.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;

use rollsafe_client::{ClientError, ErrorResponse};
use rollsafe_core::contract::{RestartResult, RestartStatus, WorkloadName};
use rollsafe_core::workload::Deferral;
use serde::Serialize;

/// 0 for `requested` and `no_targets`, 2 for `partial`, 3 for `failed`.
pub(crate) fn exit_code(status: RestartStatus) -> ExitCode {
    match status {
        RestartStatus::Requested | RestartStatus::NoTargets => ExitCode::SUCCESS,
        RestartStatus::Partial => ExitCode::from(2),
        RestartStatus::Failed => ExitCode::from(3),
    }
}

/// The line for an `{ error }` response from a server, on stderr. A 401 says how to
/// authenticate; the token itself is never printed.
pub(crate) fn api_error(error: &ErrorResponse) -> String {
    if error.is_authentication_required() {
        format!(
            "rollsafe: {error}: pass a session token with --token or ROLLSAFE_TOKEN (`rollsafe \
             token` mints one), or check that the one given has not expired"
        )
    } else {
        format!("rollsafe: {error}")
    }
}

/// A call to a server that got no `{ error }` envelope, as the command's error: a transport
/// failure names the server (scheme, host and port only: no user information, path or query)
/// and its fixed cause.
pub(crate) fn client_error(server: &str, error: ClientError) -> anyhow::Error {
    match error {
        ClientError::Transport(cause) => {
            anyhow::anyhow!("no response from the server at {}: {cause}", origin(server))
        }
        error => error.into(),
    }
}

/// `scheme://host[:port]` of a URL the client accepted.
fn origin(url: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return "the given URL".to_owned();
    };
    let scheme = uri.scheme_str().unwrap_or("http");
    let host = uri.host().unwrap_or("");
    match uri.port_u16() {
        Some(port) => format!("{scheme}://{host}:{port}"),
        None => format!("{scheme}://{host}"),
    }
}

/// `-o`: how a command prints its result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum OutputFormat {
    /// JSON: indented on a terminal, one line otherwise.
    #[default]
    Json,
    /// A summary for people.
    Text,
}

/// Writes `value` as JSON by the output rule.
pub(crate) fn json(value: &impl Serialize) -> anyhow::Result<String> {
    Ok(if std::io::stdout().is_terminal() {
        serde_json::to_string_pretty(value)?
    } else {
        serde_json::to_string(value)?
    })
}

/// Why requested workloads will not roll now, where known (the text marks them; the JSON is the
/// contract's and carries nothing more).
pub(crate) type Deferrals = BTreeMap<WorkloadName, Deferral>;

/// A restart result in `format`.
pub(crate) fn render_result(
    result: &RestartResult,
    format: OutputFormat,
    deferrals: &Deferrals,
) -> anyhow::Result<String> {
    match format {
        OutputFormat::Json => json(result),
        OutputFormat::Text => Ok(text(result, deferrals)),
    }
}

fn text(result: &RestartResult, deferrals: &Deferrals) -> String {
    let mut out = format!("{}: {}", result.status.as_str(), result.message);
    for workload in &result.requested {
        out.push_str(&format!("\nrequested  {}/{}", workload.kind, workload.name));
        if let Some(deferral) = deferrals.get(workload) {
            out.push_str(&format!(
                " (will not roll now: {}; {})",
                deferral.reason(),
                deferral.when_it_rolls()
            ));
        }
    }
    for failure in &result.failures {
        out.push_str(&format!(
            "\nfailed     {}/{}: {}",
            failure.kind, failure.name, failure.code
        ));
    }
    for failure in &result.discovery_failures {
        out.push_str(&format!("\nunlisted   {}: {}", failure.kind, failure.code));
    }
    // The result's own caveat, which the JSON carries too: what "requested" does not promise.
    out.push_str(&format!("\nnote: {}", result.note));
    out
}
