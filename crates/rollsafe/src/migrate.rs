//! `rollsafe migrate`: what moving to rollsafe from another tool changes, read from the cluster
//! or from manifests. It only reads: no patch, no create, nothing restarts.

mod reloader;

use std::process::ExitCode;

/// Show what moving to rollsafe from another tool changes, writing nothing.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    from: Tool,
}

/// The tool moved from.
#[derive(Debug, clap::Subcommand)]
enum Tool {
    /// From Stakater Reloader: for every workload with Reloader annotations, what `rollsafe
    /// watch --reloader-compat` will watch and what differs, then Reloader's Helm values as
    /// rollsafe's.
    ///
    /// Reads the cluster (GET requests only: lists of Deployments, StatefulSets, DaemonSets and
    /// CronJobs, and metadata-only lists of Secrets and ConfigMaps where Reloader's `ignore` and
    /// `match` need them — never a Secret value), or manifests with `-f`.
    #[command(after_help = reloader::EXIT_CODES)]
    Reloader(reloader::Args),
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.from {
        Tool::Reloader(args) => reloader::run(args),
    }
}
