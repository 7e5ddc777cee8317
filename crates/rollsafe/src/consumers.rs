//! `rollsafe consumers`: a dry run of Restart Consumers. Lists the three workload kinds and
//! prints which workloads reference the Secret, patching nothing.
//!
//! Output, one JSON object:
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true },
//!                    "StatefulSet": { "complete": false, "code": "forbidden", "httpStatus": 403 },
//!                    "DaemonSet": { "complete": true } },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "references": [ … ] } ] }
//! ```
//!
//! `references` has the shape `rollsafe refs` prints. `-o json` (default) follows the output
//! rule of the restart commands; `-o text` is one line per inventory and per workload. Exit 0 when the object is printed
//! (whatever the inventories say); 1 for a preflight error.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::ExitCode;

use rollsafe_core::failure::FailureCode;
use rollsafe_core::reference::Reference;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::{Discovery, InventoryStatus, RestartEngine};
use serde::Serialize;

use crate::kube_args::KubeArgs;
use crate::process;
use crate::restart_exit::{self, OutputFormat};
use crate::target::Target;

/// Show which Deployments, StatefulSets and DaemonSets reference a Secret (dry run).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// How to print the result (`text`: one line per inventory and per workload).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The Secret, as `NAME` (namespace from `-n` or the context) or `NAMESPACE/NAME`.
    pub secret: String,
}

#[derive(Debug, Serialize)]
struct InventoryOut {
    complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<FailureCode>,
    #[serde(rename = "httpStatus", skip_serializing_if = "Option::is_none")]
    http_status: Option<u16>,
}

#[derive(Debug, Serialize)]
struct WorkloadOut<'a> {
    kind: WorkloadKind,
    name: &'a str,
    references: &'a [Reference],
}

#[derive(Debug, Serialize)]
struct Output<'a> {
    namespace: &'a str,
    secret: &'a str,
    /// Keyed by kind, in kind order.
    inventories: BTreeMap<WorkloadKind, InventoryOut>,
    workloads: Vec<WorkloadOut<'a>>,
}

fn render(discovery: &Discovery) -> Output<'_> {
    let inventories = discovery
        .inventories
        .iter()
        .map(|inventory| {
            let out = match &inventory.status {
                InventoryStatus::Complete { .. } => InventoryOut {
                    complete: true,
                    code: None,
                    http_status: None,
                },
                InventoryStatus::Incomplete { failure, .. } => InventoryOut {
                    complete: false,
                    code: Some(failure.code),
                    http_status: failure.http_status,
                },
            };
            (inventory.kind, out)
        })
        .collect();
    Output {
        namespace: discovery.namespace.as_str(),
        secret: discovery.secret.as_str(),
        inventories,
        workloads: discovery
            .matches()
            .map(|m| WorkloadOut {
                kind: m.kind,
                name: &m.name,
                references: &m.references,
            })
            .collect(),
    }
}

fn text(output: &Output<'_>) -> String {
    let mut out = format!("Secret {}/{}", output.namespace, output.secret);
    for (kind, inventory) in &output.inventories {
        match inventory.code {
            None => out.push_str(&format!("\nlisted     {kind}")),
            Some(code) => out.push_str(&format!("\nunlisted   {kind}: {code}")),
        }
    }
    for workload in &output.workloads {
        out.push_str(&format!("\nconsumer   {}/{}", workload.kind, workload.name));
    }
    out
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    let Target { namespace, secret } = Target::parse(args.kube.namespace.as_deref(), &args.secret)?;
    let identity = args.kube.identity()?;
    let discovery = process::runtime()?.block_on(async {
        let connection = args.kube.connect().await?;
        let namespace = match namespace {
            Some(namespace) => namespace,
            None => args.kube.context_namespace(&connection)?,
        };
        let discovery = RestartEngine::new(&connection)
            .discover(&namespace, &secret, identity.as_ref())
            .await;
        anyhow::Ok(discovery)
    })?;
    let output = render(&discovery);
    let text = match args.output {
        OutputFormat::Json => restart_exit::json(&output)?,
        OutputFormat::Text => text(&output),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    Ok(ExitCode::SUCCESS)
}
