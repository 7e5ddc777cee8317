//! `rollsafe consumers`: a dry run of Restart Consumers. Lists the three workload kinds and
//! prints which workloads reference the Secret, patching nothing — directly against Kubernetes
//! (kubectl-style connection flags), or through a rollsafe server's
//! `GET …/consumers` with `--server` (its gates and identity apply).
//!
//! Output, one JSON object — `rollsafe_core::preview::ConsumersPreview`, the API's shape:
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true },
//!                    "StatefulSet": { "complete": false, "code": "forbidden", "message": "…",
//!                                     "httpStatus": 403 },
//!                    "DaemonSet": { "complete": true } },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "references": [ … ],
//!                    "rollsNow": false, "deferral": "paused",
//!                    "deferralReason": "the Deployment is paused" } ] }
//! ```
//!
//! `references` has the shape `rollsafe refs` prints. `-o json` (default) follows the output
//! rule of the restart commands; `-o text` is one line per inventory and per workload. Exit 0
//! when the object is printed (whatever the inventories say); 1 for a preflight error or an
//! `{ error }` response from the server.

use std::process::ExitCode;

use anyhow::Context as _;
use rollsafe_client::{Client, ClientError, Token};
use rollsafe_core::preview::ConsumersPreview;
use rollsafe_kube::RestartEngine;

use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::Target;
use crate::{process, stdout};

/// Show which Deployments, StatefulSets and DaemonSets reference a Secret (dry run).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Ask this rollsafe server (base URL) instead of Kubernetes: its authentication, scope,
    /// visibility and ACL apply, and it lists as the caller when it impersonates.
    #[arg(long, env = "ROLLSAFE_SERVER", conflicts_with_all = ["kubeconfig", "context", "as_user"])]
    pub server: Option<String>,
    /// A token for `--server` (a session token, or a Kubernetes token when the server reviews
    /// them).
    #[arg(
        long,
        env = "ROLLSAFE_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    pub token: Option<String>,
    /// How to print the result (`text`: one line per inventory and per workload).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The Secret, as `NAME` (namespace from `-n` or the context) or `NAMESPACE/NAME`.
    pub secret: String,
}

fn text(preview: &ConsumersPreview) -> String {
    let mut out = format!("Secret {}/{}", preview.namespace, preview.secret);
    for (kind, inventory) in &preview.inventories {
        match inventory.code {
            None => out.push_str(&format!("\nlisted     {kind}")),
            Some(code) => out.push_str(&format!("\nunlisted   {kind}: {code}")),
        }
    }
    for workload in &preview.workloads {
        out.push_str(&format!("\nconsumer   {}/{}", workload.kind, workload.name));
        if let Some(reason) = &workload.deferral_reason {
            out.push_str(&format!(" (does not roll now: {reason})"));
        }
    }
    out
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    let Target { namespace, secret } = Target::parse(args.kube.namespace.as_deref(), &args.secret)?;
    let preview = match &args.server {
        Some(server) => {
            let Some(namespace) = namespace else {
                anyhow::bail!(
                    "the Secret's namespace is missing: give -n NAMESPACE or NAMESPACE/NAME"
                );
            };
            let client = Client::new(server, args.token.clone().map(Token::new))
                .context("invalid --server URL")?;
            match process::runtime()?.block_on(client.consumers(&namespace, &secret)) {
                Ok(preview) => preview,
                Err(ClientError::Api(error)) => {
                    eprintln!("rollsafe: {error}");
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(error.into()),
            }
        }
        None => {
            let identity = args.kube.identity()?;
            process::runtime()?.block_on(async {
                let connection = args.kube.connect().await?;
                let namespace = match namespace {
                    Some(namespace) => namespace,
                    None => args.kube.context_namespace(&connection)?,
                };
                let discovery = RestartEngine::new(&connection)
                    .discover(&namespace, &secret, identity.as_ref())
                    .await;
                anyhow::Ok(discovery.preview())
            })?
        }
    };
    let text = match args.output {
        OutputFormat::Json => restart_exit::json(&preview)?,
        OutputFormat::Text => text(&preview),
    };
    stdout::line(&text)?;
    Ok(ExitCode::SUCCESS)
}
