//! `rollsafe migrate reloader`: argument parsing, printing and exit codes over the migration
//! library ([`rollsafe_migrate::reloader`], which reads and analyses).
//!
//! Output: `-o text` (the default), a report per workload, then the values; `-o json`, the one
//! document [`Report`] serializes to, by the output rule.
//!
//! Exit codes: 0 when the report is printed; 1, with one line on stderr and nothing on stdout,
//! when the cluster, a manifest or the values file cannot be read; 2 for a usage error.

mod text;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use rollsafe_core::name::Namespace;
use rollsafe_migrate::reloader::{self, Inventory, Report, values};

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
        Some(path) => reloader::migrate_values(Some(&read_values(path)?))
            .map_err(|error| failure(format!("--reloader-values {}: {error}", path.display())))?,
        None => reloader::migrate_values(None).map_err(failure)?,
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
fn read_values(path: &Path) -> anyhow::Result<serde_json::Value> {
    let label = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|_| failure(format!("--reloader-values {label}: cannot read the file")))?;
    values::read(&text).map_err(|error| failure(format!("--reloader-values {label}: {error}")))
}

/// Reads the manifests, one input's text and one parsed document at a time.
fn read_manifests(files: &[PathBuf]) -> anyhow::Result<Inventory> {
    let mut inventory = Inventory::default();
    for path in input::paths(files) {
        let (label, text) =
            input::read_text(&path).map_err(|error| failure(process::one_line(&error)))?;
        inventory
            .add_manifest(&text)
            .map_err(|error| failure(format!("{label}: {error}")))?;
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
        let connected = connection
            .connect()
            .await
            .map_err(|error| failure(process::one_line(&error)))?;
        let client = connected.client(identity.as_ref());
        reloader::read_cluster(&client, namespaces)
            .await
            .map_err(failure)
    })
}
