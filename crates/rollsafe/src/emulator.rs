//! `rollsafe emulator`: runs the Kubernetes API emulator as a process.
//!
//! Prints exactly one line to stdout once it serves — `{"url": …, "kubeconfig": …}` — logs to
//! stderr, and exits cleanly on SIGTERM or SIGINT.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use rollsafe_emulator::{Emulator, Identity};

use crate::process;

/// Run a Kubernetes API emulator (for tests and the sandbox).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address to listen on; loopback only (`127.0.0.1:0` picks a free port).
    #[arg(long, env = "ROLLSAFE_EMULATOR_LISTEN")]
    listen: SocketAddr,

    /// Kubernetes objects to load at start (multi-document YAML); repeatable. Namespaces are
    /// created as needed.
    #[arg(long = "seed", value_name = "FILE")]
    seeds: Vec<PathBuf>,

    /// YAML list of `{name, token, groups}`: bearer tokens and the users they authenticate as.
    #[arg(long, env = "ROLLSAFE_EMULATOR_IDENTITIES", value_name = "FILE")]
    identities: Option<PathBuf>,

    /// Where to write the kubeconfig (one context per identity plus the current context
    /// `admin`). Default: a file in a new temporary directory.
    #[arg(long, env = "ROLLSAFE_EMULATOR_KUBECONFIG_OUT", value_name = "PATH")]
    kubeconfig_out: Option<PathBuf>,
}

/// Runs the emulator until SIGTERM or SIGINT.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    process::init_logging();
    if !args.listen.ip().is_loopback() {
        bail!("--listen must be a loopback address, not {}", args.listen);
    }
    let mut builder = Emulator::builder();
    for seed in &args.seeds {
        let text = std::fs::read_to_string(seed)
            .with_context(|| format!("cannot read seed file {}", seed.display()))?;
        builder = builder
            .seed_yaml(&text)
            .with_context(|| format!("seed file {}", seed.display()))?;
    }
    if let Some(path) = &args.identities {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read identities file {}", path.display()))?;
        let identities: Vec<Identity> = if text.trim().is_empty() {
            Vec::new()
        } else {
            // The file holds tokens: name the position of a problem, never its text.
            serde_saphyr::from_str(&text).map_err(|error| {
                let at = error
                    .location()
                    .map(|l| format!(" at line {}, column {}", l.line(), l.column()))
                    .unwrap_or_default();
                anyhow::anyhow!(
                    "identities file {}: not a YAML list of {{name, token, groups}}{at}: {}",
                    path.display(),
                    rollsafe_manifest::YamlCause::of(&error)
                )
            })?
        };
        builder = builder.identities(identities);
    }
    process::runtime()?.block_on(serve(builder, args))
}

async fn serve(
    builder: rollsafe_emulator::EmulatorBuilder,
    args: Args,
) -> anyhow::Result<ExitCode> {
    let emulator = builder.start(args.listen).await?;
    let (kubeconfig, temp_dir) = match args.kubeconfig_out {
        Some(path) => (path, None),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("rollsafe-emulator-")
                .tempdir()
                .context("cannot create a temporary directory for the kubeconfig")?;
            (dir.path().join("kubeconfig"), Some(dir))
        }
    };
    emulator.write_kubeconfig(&kubeconfig)?;
    let shutdown = process::ShutdownSignal::install()?;
    let ready = serde_json::json!({
        "url": emulator.url(),
        "kubeconfig": kubeconfig.display().to_string(),
    });
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{ready}").context("cannot write to stdout")?;
        stdout.flush().context("cannot write to stdout")?;
    }
    shutdown.recv().await;
    tracing::info!("shutting down");
    emulator.shutdown().await;
    drop(temp_dir);
    Ok(ExitCode::SUCCESS)
}
