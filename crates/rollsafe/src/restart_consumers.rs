//! `rollsafe restart-consumers`: Restart Consumers run directly against Kubernetes.
//!
//! Reads the Secret first (as the chosen identity); a missing or unreadable Secret, an invalid
//! name or annotation key, or no usable configuration is a preflight error: a message on
//! stderr and exit 1, nothing listed or patched. Otherwise runs the engine and prints the
//! result (`-o json`: the JSON exactly as the API returns it; `-o text`), exiting 0 for `requested`/`no_targets`, 2 for
//! `partial`, 3 for `failed`.

use std::process::ExitCode;

use anyhow::bail;
use rollsafe_core::annotations::RESTART_ANNOTATION;
use rollsafe_core::contract::RestartResult;
use rollsafe_core::name::AnnotationKey;
use rollsafe_kube::progressive::{self, Follow, ProgressiveReport, RolloutReport};
use rollsafe_kube::{RestartEngine, RestartPlan, RestartRequest};
use serde::Serialize;

use crate::follow::{self, FollowArgs, Shown as _};
use crate::kube_args::KubeArgs;
use crate::progressive::Display;
use crate::restart_exit::{self, Deferrals, OutputFormat, exit_code, render_result};
use crate::target::Target;
use crate::{process, stdout};

/// Request a rollout of every Deployment, StatefulSet and DaemonSet that references a Secret.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// The pod-template annotation that requests the rollout.
    #[arg(long, value_name = "KEY", default_value = RESTART_ANNOTATION, env = "ROLLSAFE_ANNOTATION")]
    pub annotation: String,
    /// How to print the result.
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    #[command(flatten)]
    pub follow: FollowArgs,
    /// Roll in waves: the workloads annotated `rollsafe.dev/rollout-wave: "N"` in ascending N,
    /// the others last (without annotations: one canary, then the rest), each wave followed to
    /// its end; stop at the first that does not complete, leaving the rest unpatched. Implies
    /// --wait.
    #[arg(long, env = "ROLLSAFE_PROGRESSIVE", conflicts_with = "strategy")]
    pub progressive: bool,
    /// How to restart: `patch` a pod-template annotation (the default), or `evict` the
    /// consuming pods through the Eviction API one at a time, each replacement Ready before the
    /// next, so PodDisruptionBudgets hold (operator-owned workloads, pods no workload owns;
    /// docs/strategies.md). `evict` implies --wait.
    #[arg(long, value_enum, default_value_t, env = "ROLLSAFE_STRATEGY")]
    pub strategy: StrategyArg,
    /// With --strategy evict: the change instant (RFC 3339) — pods started after it count as
    /// restarted. An interrupted run prints it; passing it again continues that run without
    /// evicting any pod twice. Default: now.
    #[arg(long, value_name = "TIME", requires = "strategy")]
    pub since: Option<String>,
    /// The Secret, as `NAME` (namespace from `-n` or the context) or `NAMESPACE/NAME`.
    pub secret: String,
}

/// `--strategy`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StrategyArg {
    /// A pod-template annotation.
    #[default]
    Patch,
    /// PodDisruptionBudget-respecting eviction of the consuming pods.
    Evict,
}

/// What a run printed at its end: the contract result, with its rollouts when followed, or a
/// progression.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Report {
    Followed {
        result: RestartResult,
        rollout: RolloutReport,
    },
    Progressive(ProgressiveReport),
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    // The names are parsed here rather than by clap: a usage error exits 2, which this command
    // reserves for `partial`; an invalid name is a preflight error (exit 1).
    let Ok(annotation) = args.annotation.parse::<AnnotationKey>() else {
        bail!(
            "invalid --annotation {:?}: not a Kubernetes annotation key",
            args.annotation
        );
    };
    let Target { namespace, secret } = Target::parse(args.kube.namespace.as_deref(), &args.secret)?;
    let evict = args.strategy == StrategyArg::Evict;
    let since = match &args.since {
        None => None,
        Some(text) => match text.parse::<jiff::Timestamp>() {
            Ok(since) => Some(since),
            Err(_) => bail!("invalid --since {text:?}: not an RFC 3339 time"),
        },
    };
    let required = if evict {
        Some("--strategy evict")
    } else {
        args.progressive.then_some("--progressive")
    };
    let follow = args.follow.parse(required)?;
    process::runtime()?.block_on(async {
        let session = args.kube.session(namespace).await?;
        let engine = session.engine();
        session.read_secret(&engine, &secret).await?;
        if let (true, Some(follow)) = (evict, follow) {
            return crate::evict::run(&session, &secret, since, follow, args.output).await;
        }
        let request = RestartRequest::new(session.namespace.clone(), secret)
            .annotation(annotation)
            .acting_as(session.identity.clone());
        let plan = engine.plan(&request).await;
        let Some(follow) = follow else {
            let deferrals = deferrals(&plan);
            let result = engine.execute(plan).await;
            stdout::result_line(&render_result(&result, args.output, &deferrals)?)?;
            return Ok(exit_code(result.status));
        };
        let client = &session.client;
        let report = if args.progressive {
            Report::Progressive(
                progressive::run(&engine, client, &request, plan, follow, &mut Display).await,
            )
        } else {
            followed(&engine, client, &request, plan, follow, args.output).await?
        };
        let (code, text) = match &report {
            Report::Followed { result, rollout } => (
                rollout
                    .exit_code()
                    .unwrap_or_else(|| exit_code(result.status)),
                rollout.text(),
            ),
            Report::Progressive(progression) => (
                crate::progressive::exit_code(progression),
                crate::progressive::text(progression),
            ),
        };
        let out = match args.output {
            OutputFormat::Json => restart_exit::json(&report)?,
            OutputFormat::Text => text,
        };
        stdout::result_line(&out)?;
        anyhow::Ok(code)
    })
}

/// Why each target of `plan` will not roll now, for the text.
fn deferrals(plan: &RestartPlan) -> Deferrals {
    plan.deferrals()
        .map(|(workload, deferral)| (workload.clone(), deferral))
        .collect()
}

/// Executes `plan`, prints the result at once in text mode, and follows what it requested.
async fn followed(
    engine: &RestartEngine,
    client: &kube::Client,
    request: &RestartRequest,
    plan: RestartPlan,
    follow: Follow,
    output: OutputFormat,
) -> anyhow::Result<Report> {
    let deferrals = deferrals(&plan);
    let value = plan.annotation_value().to_owned();
    let result = engine.execute(plan).await;
    if output == OutputFormat::Text {
        stdout::result_line(&render_result(&result, output, &deferrals)?)?;
    }
    let mut watch =
        progressive::requested(client, request, &result, &value, follow.progress_deadline);
    let ending = follow::run(&mut watch, follow.timeout).await;
    Ok(Report::Followed {
        result,
        rollout: follow::report(&watch, ending),
    })
}
