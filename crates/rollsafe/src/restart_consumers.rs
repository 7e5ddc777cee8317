//! `rollsafe restart-consumers`: Restart Consumers run directly against Kubernetes.
//!
//! Reads the Secret first (as the chosen identity); a missing or unreadable Secret, an invalid
//! name or annotation key, or no usable configuration is a preflight error: a message on
//! stderr and exit 1, nothing listed or patched. Otherwise runs the engine and prints the
//! result (`-o json`: the JSON exactly as the API returns it; `-o text`), exiting 0 for `requested`/`no_targets`, 2 for
//! `partial`, 3 for `failed`.

use std::process::ExitCode;

use anyhow::bail;
use rollsafe_core::contract::RESTART_ANNOTATION;
use rollsafe_core::name::{AnnotationKey, Namespace, SecretName};
use rollsafe_kube::{RestartEngine, RestartRequest, read_secret_metadata};

use crate::kube_args::KubeArgs;
use crate::restart_exit::{Deferrals, OutputFormat, exit_code, render_result};
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
    /// The Secret, as `NAME` (namespace from `-n` or the context) or `NAMESPACE/NAME`.
    pub secret: String,
}

/// The preflight of the kube commands: the Secret must exist and be readable by the identity
/// (a missing namespace reads as a missing Secret). An error here is exit 1.
pub(crate) async fn read_secret(
    client: &kube::Client,
    engine: &RestartEngine,
    namespace: &Namespace,
    secret: &SecretName,
) -> anyhow::Result<()> {
    match read_secret_metadata(client, namespace, secret, engine.timeouts().get).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => bail!("Secret \"{secret}\" not found in namespace \"{namespace}\""),
        Err(error) if error.is_forbidden() => {
            bail!("not allowed to read Secret \"{secret}\" in namespace \"{namespace}\"")
        }
        Err(error) => {
            bail!("cannot read Secret \"{secret}\" in namespace \"{namespace}\": {error}")
        }
    }
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
    let identity = args.kube.identity()?;
    let result = process::runtime()?.block_on(async {
        let connection = args.kube.connect().await?;
        let namespace = match namespace {
            Some(namespace) => namespace,
            None => args.kube.context_namespace(&connection)?,
        };
        let engine = RestartEngine::new(&connection);
        let client = connection.client(identity.as_ref());
        read_secret(&client, &engine, &namespace, &secret).await?;
        let request = RestartRequest::new(namespace, secret)
            .annotation(annotation)
            .acting_as(identity);
        let plan = engine.plan(&request).await;
        let deferrals: Deferrals = plan
            .deferrals()
            .map(|(workload, deferral)| (workload.clone(), deferral))
            .collect();
        anyhow::Ok((engine.execute(plan).await, deferrals))
    })?;
    let (result, deferrals) = result;
    stdout::result_line(&render_result(&result, args.output, &deferrals)?)?;
    Ok(exit_code(result.status))
}
