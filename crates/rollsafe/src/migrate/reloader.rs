//! `rollsafe migrate reloader`: for every workload with Stakater Reloader's annotations, what
//! `rollsafe watch --reloader-compat` will watch and what differs from Reloader; then Reloader's
//! Helm values as rollsafe's. It reads the cluster (GET requests only, [`cluster`]) or
//! manifests, and writes nothing: migrating restarts nothing.
//!
//! Output (`-o text`, the default, a report per workload, then the values; `-o json` one
//! document, by the output rule; the shape is stable, pinned by a snapshot in
//! `tests/migrate_cli.rs`, and documented in docs/watch.md):
//!
//! ```json
//! { "workloads": [ { "kind": "Deployment", "namespace": "shop", "name": "api",
//!                    "reloaderAnnotations": { "reloader.stakater.com/auto": "true" },
//!                    "rollsafeWatch": null,
//!                    "watch": { "state": "watched", "decidedBy": "reloader", "reason": "…" },
//!                    "consumes": [ { "kind": "Secret", "name": "db", "keys": ["password"],
//!                                    "rolls": true } ],
//!                    "differences": [ { "code": "keyLevel", "objects": ["Secret/db"],
//!                                       "keys": ["password"], "message": "…" } ],
//!                    "leftovers": [] } ],
//!   "summary": { "workloadsRead": 3, "withReloaderAnnotations": 1, … },
//!   "notes": [ "…" ],
//!   "values": { "controller": { "enabled": true, "reloaderCompat": true } },
//!   "mapped": [ { "setting": "reloader.ignoreNamespaces", "value": "kube-system",
//!                 "to": "controller.ignoreNamespaces" } ],
//!   "unmapped": [ { "setting": "reloader.reloadStrategy", "value": "env-vars",
//!                   "reason": "…" } ] }
//! ```
//!
//! Exit codes: 0 when the report is printed; 1, with one line on stderr and nothing on stdout,
//! when the cluster, a manifest or the values file cannot be read; 2 for a usage error.

mod cluster;
mod inventory;
mod text;
mod values;
mod workload;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rollsafe_core::name::Namespace;
use rollsafe_kube::Connection;
use rollsafe_manifest::Manifest;
use serde::Serialize;
use serde_json::Value;

use self::inventory::Inventory;
use self::values::{Mapped, Migration, Unmapped};
use self::workload::{WatchState, WorkloadReport};
use crate::kube_args::ConnectionArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::{input, process, stdout};

/// Show, for every workload with Reloader annotations, what `rollsafe watch --reloader-compat`
/// will watch and what differs; and Reloader's Helm values as rollsafe's. Writes nothing.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    connection: ConnectionArgs,
    /// Read only this namespace of the cluster (repeatable; the variable takes a
    /// comma-separated list). Default: all namespaces.
    #[arg(
        short = 'n',
        long = "namespace",
        value_name = "NAMESPACE",
        env = "ROLLSAFE_MIGRATE_NAMESPACE",
        value_delimiter = ',',
        value_parser = parse_namespace,
        conflicts_with = "files"
    )]
    namespaces: Vec<Namespace>,
    /// Read manifests instead of the cluster: a file of multi-document YAML, a YAML list or a
    /// `kind: List`; `-` reads stdin (repeatable, or comma-separated).
    #[arg(
        short = 'f',
        long = "filename",
        value_name = "FILE",
        env = "ROLLSAFE_MIGRATE_FILENAME",
        value_delimiter = ','
    )]
    files: Vec<PathBuf>,
    /// How to print the report (`json`: one document).
    #[arg(short = 'o', long, value_enum, default_value_t = OutputFormat::Text, env = "ROLLSAFE_MIGRATE_OUTPUT")]
    output: OutputFormat,
    /// Reloader's Helm values file (as `helm get values` prints it): its settings are mapped to
    /// rollsafe's chart values. Without it, the values for Reloader's chart defaults.
    #[arg(long, value_name = "FILE", env = "ROLLSAFE_MIGRATE_RELOADER_VALUES")]
    reloader_values: Option<PathBuf>,
}

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 the report is printed; 1 the cluster, a \
    manifest or the values file cannot be read (one line on stderr, nothing on stdout); 2 a \
    usage error. Nothing is ever written to the cluster.";

/// What is said whatever was read.
const FIRST_RUN: &str = "The first run of rollsafe watch --reloader-compat adopts every \
    workload it watches: it writes each one's record and restarts nothing. What Reloader left \
    on them (reloader.stakater.com/last-reloaded-from, STAKATER_* env vars) stays as it is and \
    causes no roll; the first roll is for the first change after that.";
/// Both controllers must not run at once.
const ONE_CONTROLLER: &str = "Run one controller: scale Reloader to zero (or uninstall it) \
    when rollsafe watch starts, or both restart the same workloads for the same change.";
/// `controller.all` beside Reloader's annotations.
const ALL: &str = "controller.all: workloads without Reloader annotations are watched too (not \
    listed here). One whose Reloader annotations name objects, or ask for search, is watched as \
    they say, where Reloader's autoReloadAll also restarted it for every referenced object.";
/// `controller.sourceSelector` is not evaluated here.
const SOURCE_SELECTOR: &str = "controller.sourceSelector is not applied in this report: \
    objects outside it count as not watched.";

/// The whole report, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    /// The workloads with Reloader annotations, by namespace, name and kind.
    workloads: Vec<WorkloadReport>,
    summary: Summary,
    notes: Vec<&'static str>,
    /// rollsafe's chart values.
    values: Value,
    mapped: Vec<Mapped>,
    unmapped: Vec<Unmapped>,
}

/// The counts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    /// Deployments, StatefulSets, DaemonSets, CronJobs and Argo Rollouts read.
    workloads_read: usize,
    /// Of those, with Reloader annotations (the workloads listed).
    with_reloader_annotations: usize,
    /// Of those, watched by `rollsafe watch --reloader-compat`.
    watched: usize,
    /// Not watched.
    not_watched: usize,
    /// Where the values come from: `file` (`--reloader-values`) or `defaults`.
    reloader_values: &'static str,
}

impl Report {
    fn new(inventory: &Inventory, migration: Migration, values_file: bool) -> Self {
        let mut workloads: Vec<WorkloadReport> = inventory
            .workloads
            .iter()
            .filter_map(|(kind, object)| {
                workload::analyse(*kind, object, &inventory.sources, &migration.scope)
            })
            .collect();
        workloads
            .sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
        let count = |state| workloads.iter().filter(|w| w.watch.state == state).count();
        let summary = Summary {
            workloads_read: inventory.read,
            with_reloader_annotations: workloads.len(),
            watched: count(WatchState::Watched),
            not_watched: count(WatchState::NotWatched),
            reloader_values: if values_file { "file" } else { "defaults" },
        };
        let mut notes = vec![FIRST_RUN, ONE_CONTROLLER];
        let mapped = |to: &str| migration.mapped.iter().any(|m| m.to == to);
        if mapped("controller.all") {
            notes.push(ALL);
        }
        if mapped("controller.sourceSelector") {
            notes.push(SOURCE_SELECTOR);
        }
        Report {
            workloads,
            summary,
            notes,
            values: migration.values,
            mapped: migration.mapped,
            unmapped: migration.unmapped,
        }
    }
}

/// A failure of this command: one line, with no upstream text and no cause chain.
fn failure(message: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::msg(message.to_string())
}

/// `-n`: a namespace name.
fn parse_namespace(text: &str) -> Result<Namespace, String> {
    text.parse::<Namespace>().map_err(|_| {
        "a namespace must be a lowercase RFC 1123 label: lower-case letters, digits and '-', \
         starting and ending with a letter or digit, at most 63 characters"
            .to_owned()
    })
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let Args {
        connection,
        namespaces,
        files,
        output,
        reloader_values,
    } = args;
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    let migration = match &reloader_values {
        Some(path) => values::migrate(Some(&read_values(path)?))
            .map_err(|error| failure(format!("--reloader-values {}: {error}", path.display())))?,
        None => values::migrate(None).map_err(failure)?,
    };
    let inventory = if files.is_empty() {
        read_cluster(&connection, &namespaces)?
    } else {
        read_manifests(&files)?
    };
    let report = Report::new(&inventory, migration, reloader_values.is_some());
    let out = match output {
        OutputFormat::Json => restart_exit::json(&report)?,
        OutputFormat::Text => text::render(&report),
    };
    stdout::line(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads Reloader's values file as YAML (a position on error, never its text).
fn read_values(path: &Path) -> anyhow::Result<Value> {
    let label = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|_| failure(format!("--reloader-values {label}: cannot read the file")))?;
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_saphyr::from_str::<Value>(&text).map_err(|error| {
        let at = error
            .location()
            .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
            .unwrap_or_default();
        failure(format!(
            "--reloader-values {label}: not a YAML values file{at}"
        ))
    })
}

/// Reads the manifests, one input's text and one parsed document at a time.
fn read_manifests(files: &[PathBuf]) -> anyhow::Result<Inventory> {
    let mut inventory = Inventory::default();
    for path in input::paths(files) {
        let (label, text) =
            input::read_text(&path).map_err(|error| failure(process::one_line(&error)))?;
        for document in Manifest::documents(&text) {
            let document = document.map_err(|error| failure(format!("{label}: {error}")))?;
            for (_, object) in document.objects() {
                inventory.add_object(object);
            }
        }
    }
    Ok(inventory)
}

/// Reads the cluster, GET requests only.
fn read_cluster(
    connection: &ConnectionArgs,
    namespaces: &[Namespace],
) -> anyhow::Result<Inventory> {
    let identity = connection
        .identity()
        .map_err(|error| failure(process::one_line(&error)))?;
    process::runtime()?.block_on(async {
        let connected = Connection::from_options(
            connection.kubeconfig.as_deref(),
            connection.context.as_deref(),
        )
        .await
        .map_err(|error| failure(format!("cannot connect to Kubernetes: {error}")))?;
        let client = connected.client(identity.as_ref());
        cluster::read(&client, namespaces).await.map_err(failure)
    })
}
