//! `rollsafe restart`: call a server's Restart Consumers API with the typed client.
//!
//! Prints the result (`-o json|text`) and exits 0 for `requested`/`no_targets`, 2 for `partial`, 3 for
//! `failed`, and 1 (message on stderr) for an `{ error }` response or no response.

use std::process::ExitCode;

use anyhow::Context as _;
use rollsafe_client::{Client, ClientError, Token};
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::preview::ConsumersPreview;

use crate::follow::{self, FollowArgs, ServerWatch, Shown as _};
use crate::restart_exit::{self, Deferrals, OutputFormat, exit_code, render_result};
use crate::target::Target;
use crate::{process, stdout};

/// Request a rollout of every workload consuming a Secret, through a rollsafe server.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    #[arg(long, env = "ROLLSAFE_SERVER")]
    server: String,
    /// A session token (see `rollsafe token`).
    #[arg(long, env = "ROLLSAFE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The Secret's namespace (or give the Secret as `NAMESPACE/NAME`).
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        env = "ROLLSAFE_NAMESPACE"
    )]
    namespace: Option<String>,
    /// How to print the result.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    output: OutputFormat,
    #[command(flatten)]
    follow: FollowArgs,
    /// Not offered here: a progression needs one owner for its whole run (use
    /// `rollsafe restart-consumers --progressive`).
    #[arg(long, hide = true)]
    progressive: bool,
    /// The Secret, as `NAME` (with `-n`) or `NAMESPACE/NAME`.
    secret: String,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Parsed here rather than by clap: a usage error exits 2, which this command reserves for
    // `partial`.
    if args.progressive {
        anyhow::bail!(
            "rollsafe restart cannot roll progressively: a progression outlives the request and \
             needs one owner for its whole run; use rollsafe restart-consumers --progressive"
        );
    }
    let follow = args.follow.parse(None)?;
    let Target { namespace, secret } = Target::parse(args.namespace.as_deref(), &args.secret)?;
    let Some(namespace) = namespace else {
        anyhow::bail!("the Secret's namespace is missing: give -n NAMESPACE or NAMESPACE/NAME");
    };
    let client =
        Client::new(&args.server, args.token.map(Token::new)).context("invalid --server URL")?;
    let runtime = process::runtime()?;
    let outcome = runtime.block_on(client.restart_consumers(&namespace, &secret));
    match outcome {
        Ok(report) => {
            // The text marks the requested workloads that will not roll now; the result does
            // not say, so the server's preview is read for it. Without the preview the marks
            // are left out: the result itself stands.
            let deferrals =
                if args.output == OutputFormat::Text && !report.result.requested.is_empty() {
                    runtime
                        .block_on(client.consumers(&namespace, &secret))
                        .map(|preview| deferrals(&preview))
                        .unwrap_or_default()
                } else {
                    Deferrals::new()
                };
            let Some(follow) = follow else {
                stdout::result_line(&render_result(&report.result, args.output, &deferrals)?)?;
                return Ok(exit_code(report.status()));
            };
            if args.output == OutputFormat::Text {
                stdout::result_line(&render_result(&report.result, args.output, &deferrals)?)?;
            }
            let mut watch = ServerWatch::new(
                client,
                namespace,
                secret,
                report.result.requested.iter().cloned(),
                follow.progress_deadline,
            );
            let ending = runtime.block_on(follow::run(&mut watch, follow.timeout));
            let rollout = follow::report(&watch, ending);
            let code = rollout
                .exit_code()
                .unwrap_or_else(|| exit_code(report.status()));
            let out = match args.output {
                OutputFormat::Json => restart_exit::json(&serde_json::json!({
                    "result": report.result,
                    "rollout": rollout,
                }))?,
                OutputFormat::Text => rollout.text(),
            };
            stdout::result_line(&out)?;
            Ok(code)
        }
        Err(ClientError::Api(error)) => {
            eprintln!("{}", restart_exit::api_error(&error));
            Ok(ExitCode::FAILURE)
        }
        Err(error) => Err(restart_exit::client_error(&args.server, error)),
    }
}

/// Why each consumer in a preview would not roll now.
fn deferrals(preview: &ConsumersPreview) -> Deferrals {
    preview
        .workloads
        .iter()
        .filter_map(|consumer| {
            let workload = WorkloadName {
                kind: consumer.kind,
                name: consumer.name.clone(),
            };
            Some((workload, consumer.deferral?))
        })
        .collect()
}
