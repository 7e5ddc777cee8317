//! `rollsafe render`: add the config-hash annotation to the workloads of rendered manifests.
//!
//! Reads manifest streams (files or stdin), applies `--patches`, plans the annotations with the
//! core render engine and writes the streams back in the same order and shape. Nothing is
//! written to stdout unless the whole render succeeds.
//!
//! Exit codes: 0 success; 1 an input or render error (the message names the file, document and
//! resource); 2 a usage or setting error, including the files named by `--patches`,
//! `--previous` and `--fingerprint-key-file`, and an invalid `REFERENCED_CONFIG_ROLLOUT`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::input;
use rollsafe_core::render::{self, FingerprintKey, Settings, WorkloadType, patch, setting};
use rollsafe_manifest::ManifestSet;
use serde_json::Value;

/// The largest key file read.
const MAX_KEY_BYTES: u64 = 64 * 1024;
/// Add `openchoreo.dev/dp-resource-hash` to the pod templates of rendered manifests (usable as a
/// Helm post-renderer).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Upstream's behaviour for one workload type: only the first object of that kind is
    /// annotated. Without it, every Deployment and StatefulSet is.
    #[arg(long, value_enum, value_name = "TYPE")]
    pub workload_type: Option<WorkloadTypeArg>,

    /// Hash only the configuration the pods reference (Go boolean syntax; a bare flag means
    /// true; `--flag false` is not `--flag=false`). Else REFERENCED_CONFIG_ROLLOUT, else off.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = parse_bool
    )]
    pub referenced_config_rollout: Option<bool>,

    /// The previous output of this command (or previous copies of the workloads): where the
    /// referenced-config state is read from.
    #[arg(long, value_name = "FILE")]
    pub previous: Option<PathBuf>,

    /// Trait or ClusterTrait documents whose `spec.patches` are applied before hashing.
    #[arg(long, value_name = "FILE")]
    pub patches: Option<PathBuf>,

    /// A secret key: the referenced-config state then holds keyed digests (HMAC-SHA-256).
    #[arg(long, value_name = "FILE")]
    pub fingerprint_key_file: Option<PathBuf>,

    /// Manifest files (multi-document YAML, a YAML list or a `kind: List`); `-` or none reads stdin.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

/// `--workload-type` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WorkloadTypeArg {
    /// The first Deployment is the workload.
    Deployment,
    /// The first StatefulSet is the workload.
    Statefulset,
}

fn parse_bool(text: &str) -> Result<bool, String> {
    setting::parse_go_bool(text).ok_or_else(|| {
        format!("invalid boolean value {text:?} (accepted: 1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)")
    })
}

/// A usage or setting error: exit code 2.
struct UsageError(anyhow::Error);

impl<E: Into<anyhow::Error>> From<E> for UsageError {
    fn from(error: E) -> Self {
        Self(error.into())
    }
}

/// Runs `rollsafe render`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let env = std::env::var_os(setting::ENV_VAR);
    let options = match Options::read(&args, env.as_deref()) {
        Ok(options) => options,
        Err(UsageError(error)) => {
            eprintln!("rollsafe: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let output = render_inputs(&args.files, &options)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(output.as_bytes())
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// Everything besides the inputs, read and checked before any input is.
struct Options {
    settings: Settings,
    patches: Vec<patch::TraitPatch>,
    previous: Option<ManifestSet>,
}

impl Options {
    fn read(args: &Args, env: Option<&std::ffi::OsStr>) -> Result<Self, UsageError> {
        let referenced_config_rollout = setting::resolve(args.referenced_config_rollout, env)?;
        let fingerprint_key = match &args.fingerprint_key_file {
            Some(path) => Some(read_key(path)?),
            None => None,
        };
        let patches = match &args.patches {
            Some(path) => read_patches(path)?,
            None => Vec::new(),
        };
        let previous = match &args.previous {
            Some(path) => Some(read_manifest(path).context("--previous")?),
            None => None,
        };
        if referenced_config_rollout && previous.is_none() {
            eprintln!(
                "rollsafe: warning: referenced-config rollout without --previous: the hash covers the referenced configuration only, and turning the setting on or off, or changing restart-on-change, may restart pods"
            );
        }
        Ok(Self {
            settings: Settings {
                workload_type: args.workload_type.map(|t| match t {
                    WorkloadTypeArg::Deployment => WorkloadType::Deployment,
                    WorkloadTypeArg::Statefulset => WorkloadType::StatefulSet,
                }),
                referenced_config_rollout,
                fingerprint_key,
            },
            patches,
            previous,
        })
    }
}

fn read_manifest(path: &Path) -> anyhow::Result<ManifestSet> {
    input::read_one(path)
}

fn read_key(path: &Path) -> anyhow::Result<FingerprintKey> {
    let label = path.display();
    let file = std::fs::File::open(path)
        .with_context(|| format!("--fingerprint-key-file {label}: cannot open"))?;
    let mut bytes = Vec::new();
    file.take(MAX_KEY_BYTES)
        .read_to_end(&mut bytes)
        .with_context(|| format!("--fingerprint-key-file {label}: cannot read"))?;
    while bytes.last().is_some_and(u8::is_ascii_whitespace) {
        bytes.pop();
    }
    FingerprintKey::new(bytes)
        .with_context(|| format!("--fingerprint-key-file {label}: the key is empty"))
}

fn read_patches(path: &Path) -> anyhow::Result<Vec<patch::TraitPatch>> {
    let manifest = read_manifest(path).context("--patches")?;
    let patches = patch::parse(manifest.objects())
        .with_context(|| format!("--patches {}", path.display()))?;
    Ok(patches)
}

/// Reads, patches and renders the inputs; returns the whole output text.
fn render_inputs(files: &[PathBuf], options: &Options) -> anyhow::Result<String> {
    let mut set = input::read_all(files)?;
    let located =
        |set: &ManifestSet, index: usize, error: &dyn std::fmt::Display| match set.locate(index) {
            Some(origin) => anyhow::anyhow!("{origin}: {error}"),
            None => anyhow::anyhow!("{error}"),
        };

    if !options.patches.is_empty() {
        let failed = set
            .objects_mut()
            .into_iter()
            .enumerate()
            .find_map(|(index, object)| {
                patch::apply(&options.patches, object, index)
                    .err()
                    .map(|error| (index, error))
            });
        if let Some((index, error)) = failed {
            return Err(located(&set, index, &error));
        }
    }

    let previous: Option<Vec<&Value>> = options.previous.as_ref().map(ManifestSet::objects);
    let rendered = render::render(
        &mut set.objects_mut(),
        previous.as_deref(),
        &options.settings,
    );
    if let Err(error) = rendered {
        return Err(located(&set, error.index(), &error));
    }
    Ok(set.to_yaml()?)
}
