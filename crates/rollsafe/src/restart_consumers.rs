//! `rollsafe restart-consumers`: Restart Consumers run directly against Kubernetes.
//!
//! Reads the Secret first (as the chosen identity); a missing or unreadable Secret, an invalid
//! name or annotation key, or no usable configuration is a preflight error: a message on
//! stderr and exit 1, nothing listed or patched. Otherwise runs the engine and prints the
//! result JSON exactly as the API returns it, exiting 0 for `requested`/`no_targets`, 2 for
//! `partial`, 3 for `failed`.

use std::process::ExitCode;

use anyhow::bail;
use rollsafe_core::validation::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name};
use rollsafe_kube::{
    DEFAULT_ANNOTATION_KEY, ReadError, RestartEngine, Timeouts, Timestamp, read_secret,
};

use crate::kube_args::KubeArgs;
use crate::process;
use crate::restart_exit::exit_code;

/// Request a rollout of every Deployment, StatefulSet and DaemonSet that references a Secret.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// The pod-template annotation that requests the rollout.
    #[arg(long, value_name = "KEY", default_value = DEFAULT_ANNOTATION_KEY, env = "ROLLSAFE_ANNOTATION")]
    pub annotation: String,
    /// The Secret's name.
    pub secret: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    if !is_qualified_name(&args.annotation) {
        bail!(
            "invalid --annotation {:?}: not a Kubernetes annotation key",
            args.annotation
        );
    }
    if !is_dns1123_subdomain(&args.secret) {
        bail!("invalid Secret name {:?}", args.secret);
    }
    let identity = args.kube.identity()?;
    let result = process::runtime()?.block_on(async {
        let connection = args.kube.connect().await?;
        let namespace = args.kube.namespace(&connection);
        if !is_dns1123_label(&namespace) {
            bail!("invalid namespace {namespace:?}");
        }
        let client = connection.client(identity.as_ref());
        let timeouts = Timeouts::default();
        match read_secret(&client, &namespace, &args.secret, timeouts.get).await {
            Ok(Some(_)) => {}
            Ok(None) => bail!(
                "Secret {:?} not found in namespace {namespace:?}",
                args.secret
            ),
            Err(ReadError::Status(403)) => bail!(
                "not allowed to read Secret {:?} in namespace {namespace:?}",
                args.secret
            ),
            Err(error) => bail!("cannot read Secret {:?}: {error}", args.secret),
        }
        let result = RestartEngine::new(&connection)
            .with_timeouts(timeouts)
            .run(
                &namespace,
                &args.secret,
                identity.as_ref(),
                &args.annotation,
                Timestamp::now(),
            )
            .await?;
        anyhow::Ok(result)
    })?;
    println!("{}", serde_json::to_string(&result)?);
    Ok(exit_code(result.status))
}
