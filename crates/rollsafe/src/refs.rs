//! `rollsafe refs`: the Secrets and ConfigMaps each workload in a manifest stream references —
//! every kind rollsafe rolls: Deployments, StatefulSets, DaemonSets, CronJobs (their Jobs' pod
//! template) and Argo Rollouts.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use rollsafe_core::reference::{self, Reference, TargetKind};
use rollsafe_core::workload::{WatchedKind, WorkloadKind};
use serde::Serialize;
use serde_json::Value;

use anyhow::Context as _;
use rollsafe_manifest::Manifest;

use crate::restart_exit::{self, OutputFormat};
use crate::{input, stdout};

/// Print, as one JSON array, every Deployment, StatefulSet, DaemonSet, CronJob and Argo Rollout
/// in the manifests with the Secrets and ConfigMaps its pod template references.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// How to print the result (`json`: the array, by the output rule; `text`: one line per
    /// workload, each object it references named once).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// Manifest files (multi-document YAML, a YAML list or a `kind: List`); `-` or none reads stdin.
    pub files: Vec<PathBuf>,
}

/// One workload's references, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkloadReferences {
    kind: WatchedKind,
    namespace: Option<String>,
    name: Option<String>,
    /// Sorted, unique Secret names under the Restart Consumers policy; empty for the kinds it
    /// does not restart (CronJobs, Rollouts).
    secret_consumers: BTreeSet<String>,
    /// Sorted, unique `ConfigMap/<name>` and `Secret/<name>` under the referenced-config policy.
    referenced_config: Vec<String>,
    /// Every reference, in document order.
    references: Vec<Reference>,
}

impl WorkloadReferences {
    /// The references of a workload object, or `None` when it is not a workload.
    pub(crate) fn of(object: &Value) -> Option<Self> {
        let kind = WatchedKind::of_object(object)?;
        let metadata = object.get("metadata");
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let template = kind.template(object).unwrap_or(&Value::Null);
        let references = reference::extract(template);
        let restarted = WorkloadKind::of_object(object).is_some();
        Some(Self {
            kind,
            namespace: text("namespace"),
            name: text("name"),
            secret_consumers: references
                .iter()
                .filter(|r| restarted && r.is_restart_consumer())
                .map(|r| r.name.clone())
                .collect(),
            referenced_config: reference::referenced_config(template)
                .iter()
                .map(ToString::to_string)
                .collect(),
            references,
        })
    }
}

/// One line per workload, naming each referenced object once, sorted:
/// `KIND NAMESPACE/NAME: ConfigMap/C, Secret/S` (`-` for none). A Secret only the Restart
/// Consumers policy counts (`imagePullSecrets`, an ephemeral container) says so.
fn text(workloads: &[WorkloadReferences]) -> String {
    workloads
        .iter()
        .map(|workload| {
            let name = workload.name.as_deref().unwrap_or("-");
            let target = match &workload.namespace {
                Some(namespace) => format!("{namespace}/{name}"),
                None => name.to_owned(),
            };
            let mut objects: BTreeSet<(TargetKind, &str, bool)> = BTreeSet::new();
            let config: BTreeSet<(TargetKind, &str)> = workload
                .references
                .iter()
                .filter(|r| r.is_referenced_config())
                .map(|r| (r.kind, r.name.as_str()))
                .collect();
            for reference in &workload.references {
                let key = (reference.kind, reference.name.as_str());
                objects.insert((key.0, key.1, config.contains(&key)));
            }
            let named: Vec<String> = objects
                .into_iter()
                .map(|(kind, name, config)| {
                    let only = if config || !workload.secret_consumers.contains(name) {
                        ""
                    } else {
                        " (restart-consumers only)"
                    };
                    format!("{}/{name}{only}", kind.as_str())
                })
                .collect();
            let named = if named.is_empty() {
                "-".to_owned()
            } else {
                named.join(", ")
            };
            format!("{} {target}: {named}", workload.kind)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    // One input's text and one parsed document at a time: only the references are kept.
    let mut workloads: Vec<WorkloadReferences> = Vec::new();
    for path in input::paths(&args.files) {
        let (label, text) = input::read_text(&path)?;
        for document in Manifest::documents(&text) {
            let document = document.with_context(|| label.clone())?;
            workloads.extend(
                document
                    .objects()
                    .filter_map(|(_, object)| WorkloadReferences::of(object)),
            );
        }
    }
    let text = match args.output {
        OutputFormat::Json => restart_exit::json(&workloads)?,
        OutputFormat::Text => text(&workloads),
    };
    stdout::write(|out| {
        if !text.is_empty() {
            writeln!(out, "{text}")?;
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
