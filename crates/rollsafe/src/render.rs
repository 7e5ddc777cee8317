//! `rollsafe render`: add the config-hash annotation to the workloads of rendered manifests.
//!
//! Reads manifest streams (files or stdin), applies `--patches`, plans the annotations with the
//! core render engine and writes the streams back in the same order and shape. Nothing is
//! written to stdout unless the whole render succeeds.
//!
//! Exit codes: 0 success; 1 an input or render error (the message names the file, document and
//! resource), a live object that cannot be read, or a workload without a previous copy under
//! `--strict-previous`; 2 a usage or setting error, including the files named by `--patches`,
//! `--previous` and `--fingerprint-key-file`, an invalid `REFERENCED_CONFIG_ROLLOUT`, `--namespace`
//! or `HELM_NAMESPACE`.

mod cluster;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use crate::kube_args::KubeArgs;
use crate::{input, process};
use rollsafe_core::render::{
    self, AnnotatedKind, FingerprintKey, PreviousCopy, RenderSettings, ResourceName, Update,
    WorkloadType, patch, setting,
};
use rollsafe_core::validation::is_dns1123_label;
use rollsafe_manifest::ManifestSet;
use serde_json::Value;

/// The largest key file read.
const MAX_KEY_BYTES: u64 = 64 * 1024;
/// Add `openchoreo.dev/dp-resource-hash` to the pod templates of rendered manifests (usable as a
/// Helm post-renderer).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Annotate only the first object of this kind, as OpenChoreo's own renderer does.
    /// Without it, every Deployment, StatefulSet, DaemonSet and CronJob is annotated.
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

    /// Read the previous copies from the cluster: one `get` of each workload the input names
    /// (a 404 means new). Uses --kubeconfig, --context, --as and --as-group.
    #[arg(long, conflicts_with = "previous")]
    pub previous_from_cluster: bool,

    /// The time limit of each call to the cluster (`500ms`, `15s`, `1m`; a bare number is
    /// seconds).
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = parse_timeout)]
    pub request_timeout: std::time::Duration,

    /// In referenced-config mode, fail when a workload has no previous copy instead of
    /// rendering it as new with a warning.
    #[arg(long)]
    pub strict_previous: bool,

    /// Connection, and the release namespace (-n): objects without a namespace are matched
    /// against previous copies as being in it. Else HELM_NAMESPACE, else the kubeconfig
    /// context's namespace.
    #[command(flatten)]
    pub kube: KubeArgs,

    /// A file of OpenChoreo patch documents (kind `Trait` or `ClusterTrait`): their
    /// `spec.patches` are applied to the manifests before hashing.
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
pub(crate) enum WorkloadTypeArg {
    /// The first Deployment is the workload.
    Deployment,
    /// The first StatefulSet is the workload.
    Statefulset,
}

/// A positive time limit, in the one duration format (`rollsafe_core::duration`).
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    match rollsafe_core::duration::parse(text) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(format!(
            "{text:?} is not a positive duration (e.g. 500ms, 15s, 1m)"
        )),
    }
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

/// The environment variable Helm sets to the release namespace.
pub(crate) const HELM_NAMESPACE: &str = "HELM_NAMESPACE";

/// Runs `rollsafe render`.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let env = std::env::var_os(setting::ENV_VAR);
    let helm_namespace = std::env::var_os(HELM_NAMESPACE);
    let options = match Options::read(&args, env.as_deref(), helm_namespace.as_deref()) {
        Ok(options) => options,
        Err(UsageError(error)) => {
            eprintln!("rollsafe: {error:#}");
            return Ok(ExitCode::from(2));
        }
    };
    let stream = render_inputs(&args.files, &args.kube, args.request_timeout, options)?;
    crate::stdout::write(|out| {
        for piece in &stream {
            out.write_all(piece.as_bytes())?;
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Where the previous copies of the workloads come from.
enum Previous {
    /// Nowhere: referenced-config mode is stateless.
    None,
    /// `--previous FILE`.
    File(ManifestSet),
    /// `--previous-from-cluster`.
    Cluster,
}

/// Everything besides the inputs, read and checked before any input is.
struct Options {
    settings: RenderSettings,
    patches: Vec<patch::TraitPatch>,
    previous: Previous,
    /// `--namespace`, else `HELM_NAMESPACE`.
    release_namespace: Option<String>,
    strict_previous: bool,
}

impl Options {
    fn read(
        args: &Args,
        env: Option<&std::ffi::OsStr>,
        helm_namespace: Option<&std::ffi::OsStr>,
    ) -> Result<Self, UsageError> {
        let referenced_config_rollout = setting::resolve(args.referenced_config_rollout, env)?;
        let release_namespace = match (&args.kube.namespace, helm_namespace) {
            (Some(flag), _) => Some(namespace(flag, "--namespace")?),
            (None, Some(env)) if !env.is_empty() => {
                let text = env
                    .to_str()
                    .ok_or_else(|| anyhow::anyhow!("{HELM_NAMESPACE}: not UTF-8"))?;
                Some(namespace(text, HELM_NAMESPACE)?)
            }
            (None, _) => None,
        };
        let fingerprint_key = match &args.fingerprint_key_file {
            Some(path) => Some(read_key(path)?),
            None => None,
        };
        let patches = match &args.patches {
            Some(path) => read_patches(path)?,
            None => Vec::new(),
        };
        let previous = match (&args.previous, args.previous_from_cluster) {
            (Some(path), _) => Previous::File(read_previous(path).context("--previous")?),
            (None, true) => Previous::Cluster,
            (None, false) => Previous::None,
        };
        if referenced_config_rollout && matches!(previous, Previous::None) {
            if args.strict_previous {
                return Err(UsageError(anyhow::anyhow!(
                    "--strict-previous needs --previous or --previous-from-cluster"
                )));
            }
            eprintln!(
                "rollsafe: warning: referenced-config rollout without --previous or --previous-from-cluster: the hash covers the referenced configuration only, and turning the setting on or off, or changing restart-on-change, may restart pods"
            );
        }
        Ok(Self {
            settings: RenderSettings {
                workload_type: args.workload_type.map(|t| match t {
                    WorkloadTypeArg::Deployment => WorkloadType::Deployment,
                    WorkloadTypeArg::Statefulset => WorkloadType::StatefulSet,
                }),
                referenced_config_rollout,
                fingerprint_key,
                release_namespace: None,
            },
            patches,
            previous,
            release_namespace,
            strict_previous: args.strict_previous,
        })
    }
}

/// A namespace name given by `source`; the message names the rule, never the value.
fn namespace(text: &str, source: &str) -> anyhow::Result<String> {
    if is_dns1123_label(text) {
        Ok(text.to_owned())
    } else {
        anyhow::bail!("{source}: not a valid namespace name (a DNS-1123 label)")
    }
}

fn read_manifest(path: &Path) -> anyhow::Result<ManifestSet> {
    input::read_one(path)
}

/// The previous copies in a file: only the objects of the kinds the engine annotates are kept
/// (it looks up nothing else), one parsed document at a time.
fn read_previous(path: &Path) -> anyhow::Result<ManifestSet> {
    let (label, reader) = input::open(path)?;
    let mut workloads = Vec::new();
    rollsafe_manifest::Manifest::read_each(
        std::io::BufReader::new(reader),
        input::MAX_INPUT_BYTES,
        |document| {
            workloads.extend(
                document
                    .objects()
                    .filter(|(_, object)| {
                        object
                            .get("kind")
                            .and_then(Value::as_str)
                            .and_then(AnnotatedKind::of)
                            .is_some()
                    })
                    .map(|(_, object)| object.clone()),
            );
        },
    )
    .with_context(|| label.clone())?;
    let mut set = ManifestSet::new();
    set.push(label, rollsafe_manifest::Manifest::from_objects(workloads));
    Ok(set)
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

fn located(set: &ManifestSet, index: usize, error: &dyn std::fmt::Display) -> anyhow::Error {
    match set.locate(index) {
        Some(origin) => anyhow::anyhow!("{origin}: {error}"),
        None => anyhow::anyhow!("{error}"),
    }
}

/// Reads, patches and renders the inputs; returns the output stream in pieces, to be written
/// in order. Nothing is returned unless everything succeeded.
fn render_inputs(
    files: &[PathBuf],
    kube: &KubeArgs,
    timeout: std::time::Duration,
    options: Options,
) -> anyhow::Result<Vec<String>> {
    let Options {
        mut settings,
        patches,
        previous,
        release_namespace,
        strict_previous,
    } = options;
    let mut set = input::read_all(files)?;

    if !patches.is_empty() {
        let failed = set
            .objects_mut()
            .into_iter()
            .enumerate()
            .find_map(|(index, object)| {
                patch::apply(&patches, object, index)
                    .err()
                    .map(|error| (index, error))
            });
        if let Some((index, error)) = failed {
            return Err(located(&set, index, &error));
        }
    }

    let referenced = settings.referenced_config_rollout;
    if !referenced {
        let on_delete = on_delete_daemon_sets(&set, &settings, release_namespace.as_deref());
        // Default mode reads no previous copy: hash beside the writing.
        let stream = rollsafe_render::render_default(set, settings.workload_type)?;
        report_on_delete(&on_delete);
        return Ok(stream);
    }
    let (release_namespace, previous): (Option<String>, Option<ManifestSet>) = match previous {
        Previous::Cluster if referenced => {
            let (namespace, live) =
                read_from_cluster(&set, kube, timeout, release_namespace, &settings)?;
            let mut previous = ManifestSet::new();
            previous.push("<cluster>", rollsafe_manifest::Manifest::from_objects(live));
            (Some(namespace), Some(previous))
        }
        Previous::File(previous) if referenced && release_namespace.is_none() => {
            let namespace = context_namespace(kube);
            if namespace.is_none() && has_workload_without_namespace(&set, &settings) {
                eprintln!(
                    "rollsafe: note: no release namespace (--namespace, HELM_NAMESPACE or a kubeconfig context): workloads without a namespace match only previous copies without one"
                );
            }
            (namespace, Some(previous))
        }
        Previous::File(previous) => (release_namespace, Some(previous)),
        Previous::Cluster | Previous::None => (release_namespace, None),
    };
    settings.release_namespace = release_namespace;
    let on_delete = on_delete_daemon_sets(&set, &settings, settings.release_namespace.as_deref());

    let previous_objects: Option<Vec<&Value>> = previous.as_ref().map(ManifestSet::objects);
    let updates = match render::render(
        &mut set.objects_mut(),
        previous_objects.as_deref(),
        &settings,
    ) {
        Ok(updates) => updates,
        Err(error) => return Err(located(&set, error.index(), &error)),
    };
    report_missing_previous(&set, &updates, &settings, strict_previous)?;
    report_on_delete(&on_delete);
    drop(previous_objects);
    drop(previous);
    let documents = set.into_yaml_documents()?;
    let mut stream = Vec::with_capacity(documents.len() * 2);
    for document in documents {
        if !stream.is_empty() {
            stream.push("---\n".to_owned());
        }
        stream.push(document);
    }
    Ok(stream)
}

/// The live copies of the workloads `set` names, and the release namespace used.
fn read_from_cluster(
    set: &ManifestSet,
    kube: &KubeArgs,
    timeout: std::time::Duration,
    release_namespace: Option<String>,
    settings: &RenderSettings,
) -> anyhow::Result<(String, Vec<Value>)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        let connection = kube.connect().await?;
        let client = connection.client(kube.identity()?.as_ref());
        let namespace =
            release_namespace.unwrap_or_else(|| connection.default_namespace().to_owned());
        let objects = set.objects();
        let targets = render::workloads(&objects, settings)
            .into_iter()
            .map(|index| {
                cluster::Target::of(objects[index], Some(&namespace))
                    .map_err(|error| located(set, index, &error))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let live = cluster::read_live(&client, &targets, timeout).await?;
        Ok((namespace, live))
    })
}

/// The kubeconfig context's namespace, when a configuration can be loaded.
fn context_namespace(kube: &KubeArgs) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        rollsafe_kube::Connection::from_options(
            kube.connection.kubeconfig.as_deref(),
            kube.connection.context.as_deref(),
        )
        .await
        .ok()
        .map(|connection| connection.default_namespace().to_owned())
    })
}

fn has_workload_without_namespace(set: &ManifestSet, settings: &RenderSettings) -> bool {
    let objects = set.objects();
    render::workloads(&objects, settings)
        .into_iter()
        .any(|index| ResourceName::of(objects[index]).namespace.is_none())
}

/// The DaemonSets the render annotates whose `updateStrategy` is `OnDelete`: a new annotation
/// changes their pod template, but their pods are replaced only as they are deleted. Named as
/// applied (the release namespace when they have none and one is known).
fn on_delete_daemon_sets(
    set: &ManifestSet,
    settings: &RenderSettings,
    release_namespace: Option<&str>,
) -> Vec<ResourceName> {
    let objects = set.objects();
    let on_delete = |object: &Value| {
        object.get("kind").and_then(Value::as_str) == Some("DaemonSet")
            && object
                .pointer("/spec/updateStrategy/type")
                .and_then(Value::as_str)
                == Some("OnDelete")
    };
    // Only when there is one: the workloads are then found as the plan finds them.
    if settings.workload_type.is_some() || !objects.iter().any(|o| on_delete(o)) {
        return Vec::new();
    }
    render::workloads(&objects, settings)
        .into_iter()
        .filter(|&index| on_delete(objects[index]))
        .map(|index| {
            let mut resource = ResourceName::of(objects[index]);
            if resource.namespace.is_none() {
                resource.namespace = release_namespace.map(str::to_owned);
            }
            resource
        })
        .collect()
}

/// Says which annotated DaemonSets roll only as their pods are deleted: one warning each on
/// stderr ([`warn`]).
fn report_on_delete(resources: &[ResourceName]) {
    for resource in resources {
        warn(
            &Warning {
                warning: "rollsOnDelete",
                kind: &resource.kind,
                namespace: resource.namespace.as_deref(),
                name: resource.name.as_deref(),
            },
            &format!(
                "{resource} has updateStrategy OnDelete: its pod template's annotation is \
                 written, but its pods are replaced only as they are deleted"
            ),
        );
    }
}

/// A warning about one workload, as its JSON line on stderr says it.
#[derive(serde::Serialize)]
struct Warning<'a> {
    warning: &'static str,
    kind: &'a str,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

/// Writes one warning on stderr, once: `rollsafe: warning: <text>` for people, or — asked for
/// with `--log-format json` — the JSON object alone on a line, for programs. Best effort: a
/// closed stderr does not fail the render.
fn warn(record: &Warning<'_>, text: &str) {
    let line = if process::logs_json() {
        serde_json::to_string(record).unwrap_or_default()
    } else {
        format!("rollsafe: warning: {text}")
    };
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

/// Says which workloads had no previous copy: one warning each on stderr ([`warn`]), or an
/// error under `--strict-previous`.
fn report_missing_previous(
    set: &ManifestSet,
    updates: &[Update],
    settings: &RenderSettings,
    strict: bool,
) -> anyhow::Result<()> {
    let objects = set.objects();
    let mut missing = Vec::new();
    for update in updates
        .iter()
        .filter(|u| u.previous == PreviousCopy::Missing)
    {
        let Some(object) = objects.get(update.index) else {
            continue;
        };
        let mut resource = ResourceName::of(object);
        if resource.namespace.is_none() {
            resource.namespace = settings.release_namespace.clone();
        }
        missing.push(resource);
    }
    if missing.is_empty() {
        return Ok(());
    }
    if strict {
        let names: Vec<String> = missing.iter().map(ToString::to_string).collect();
        anyhow::bail!(
            "no previous copy of {} (--strict-previous)",
            names.join(", ")
        );
    }
    for resource in &missing {
        warn(
            &Warning {
                warning: "noPreviousCopy",
                kind: &resource.kind,
                namespace: resource.namespace.as_deref(),
                name: resource.name.as_deref(),
            },
            &format!(
                "{resource} has no previous copy: rendered as new (the default-mode value); its \
                 referenced-config state starts now"
            ),
        );
    }
    Ok(())
}
