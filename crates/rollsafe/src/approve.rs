//! `rollsafe approve KIND/NAME`: approve the roll `rollsafe watch` holds for one workload
//! (`rollsafe.dev/approval`, `--require-approval`).
//!
//! Reads the workload's `rollsafe.dev/pending` mark and sends one JSON Patch, as the caller
//! (the kubeconfig's identity, or `--as`): `test` that the mark is still exactly what was read,
//! then `add` `rollsafe.dev/approved` with the digest it holds. Kubernetes RBAC (`patch` on the
//! workload) decides who may approve, and the API server's audit log records who did. A change
//! made since the mark was read fails the `test` (409/422): nothing is approved that the caller
//! did not see. The controller rolls once the approved digest is still the one due.
//!
//! Output, by the output rule of the other commands (`-o json`, the default: one object,
//! `{"kind": "Deployment", "namespace": "shop", "name": "api", "approved": "<digest>",
//! "pendingSince": "…"}`; `-o text`: one line).
//!
//! Exit codes: 0 approved; 1, with one line on stderr and nothing on stdout, when nothing
//! awaits approval, the workload does not exist or cannot be read or patched, or the pending
//! roll changed meanwhile.

use std::process::ExitCode;

use anyhow::bail;
use rollsafe_core::annotations::PENDING;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::ApprovalError;
use rollsafe_kube::transport::{GET_TIMEOUT, PATCH_TIMEOUT};
use rollsafe_watch::approval::{self, HeldBy, PendingMark};
use serde::Serialize;

use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::{WorkloadTarget, namespace_flag};
use crate::{process, stdout};

/// Approve the roll rollsafe watch holds for a workload.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// How to print the result (`text`: one line).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The workload, as kubectl names it: `deployment/NAME` (`deploy/`), `statefulset/NAME`
    /// (`sts/`) or `daemonset/NAME` (`ds/`).
    pub workload: String,
}

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 approved; 1 nothing awaits approval, the \
    workload does not exist or cannot be read or patched, or the pending roll changed meanwhile \
    (one line on stderr, nothing on stdout).";

/// What was approved.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Approved {
    kind: WorkloadKind,
    namespace: String,
    name: String,
    /// The digest of the roll approved.
    approved: String,
    /// Since when it awaited approval (`-` when the mark does not say).
    pending_since: String,
}

impl Approved {
    fn text(&self) -> String {
        format!(
            "approved {}/{} in {}: the roll to {} pending since {}",
            self.kind.as_str().to_ascii_lowercase(),
            self.name,
            self.namespace,
            self.approved,
            self.pending_since
        )
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let target = WorkloadTarget::parse(&args.workload)?;
    let namespace = namespace_flag(args.kube.namespace.as_deref())?;
    let approved = process::runtime()?.block_on(async {
        let session = args.kube.session(namespace).await?;
        let (namespace, client) = (session.namespace, session.client);
        let WorkloadTarget { kind, name } = &target;
        let shown = format!("{}/{name}", kind.as_str().to_ascii_lowercase());
        let object = match rollsafe_kube::read_workload(&client, *kind, &namespace, name, GET_TIMEOUT)
            .await
        {
            Ok(Some(object)) => object,
            Ok(None) => bail!("{shown} not found in namespace {namespace}"),
            Err(error) => bail!("cannot read {shown} ({})", error.code()),
        };
        let mark = object
            .pointer("/metadata/annotations")
            .and_then(|annotations| annotations.get(PENDING))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let (Some(read), Some(document)) = (PendingMark::parse(mark), approval::approve_document(mark))
        else {
            if let Some(PendingMark {
                held_by: HeldBy::Window,
                at,
                ..
            }) = PendingMark::parse(mark)
            {
                bail!(
                    "{shown} has no roll awaiting approval: its roll is held by a restart window until {}",
                    at.unwrap_or("-")
                );
            }
            bail!("{shown} has no roll awaiting approval");
        };
        let sent = rollsafe_kube::send_approval(
            client,
            *kind,
            &namespace,
            name,
            document,
            PATCH_TIMEOUT,
        )
        .await;
        match sent {
            Ok(()) => Ok(Approved {
                kind: *kind,
                namespace: namespace.to_string(),
                name: name.clone(),
                approved: read.digest.to_owned(),
                pending_since: read.at.unwrap_or("-").to_owned(),
            }),
            Err(ApprovalError::Superseded) => bail!(
                "the roll awaiting approval on {shown} changed meanwhile; nothing was approved (see rollsafe why {shown})"
            ),
            Err(ApprovalError::Forbidden) => bail!("forbidden: approving needs patch on {shown}"),
            Err(ApprovalError::NotFound) => bail!("{shown} not found in namespace {namespace}"),
            Err(ApprovalError::TimedOut) => bail!("cannot patch {shown}: timed out"),
            Err(ApprovalError::Failed) => bail!("cannot patch {shown}"),
        }
    })?;
    let out = match args.output {
        OutputFormat::Json => restart_exit::json(&approved)?,
        OutputFormat::Text => approved.text(),
    };
    stdout::line(&out)?;
    Ok(ExitCode::SUCCESS)
}
