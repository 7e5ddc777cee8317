//! `rollsafe watch`: the controller that rolls opted-in workloads when the live Secrets and
//! ConfigMaps they consume change. Every flag is also a `ROLLSAFE_WATCH_*` environment
//! variable.

use rollsafe_core::strategy::StrategyDefaults;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use prometheus_client::registry::Registry;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::window::RestartWindow;
use rollsafe_kube::published::LeaseRef;
use rollsafe_notify::{Format as NotifyFormat, Notifier, NotifyMetrics, Sink, WebhookUrl};
use rollsafe_watch::leader::{self, LeaseSettings};
use rollsafe_watch::limits::FlapLimit;
use rollsafe_watch::metrics::ControllerMetrics;
use rollsafe_watch::{Controller, ControllerSettings, Fingerprinter};
use rollsafe_watch::{admin, preflight};
use tracing::{info, warn};

use crate::kube_args::ConnectionArgs;
use crate::process;

/// Watch Secrets and ConfigMaps and roll the workloads that opted in when what they consume
/// changes.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The kubeconfig file (default: $ROLLSAFE_KUBECONFIG, as every other command reads it,
    /// then $KUBECONFIG or ~/.kube/config, else the in-cluster ServiceAccount).
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_WATCH_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: $ROLLSAFE_CONTEXT, then the current context).
    #[arg(long, value_name = "NAME", env = "ROLLSAFE_WATCH_CONTEXT")]
    context: Option<String>,
    /// Watch only this namespace (repeatable; the variable takes a comma-separated list).
    /// Default: all namespaces.
    #[arg(
        long = "namespace",
        short = 'n',
        value_name = "NAMESPACE",
        env = "ROLLSAFE_WATCH_NAMESPACE",
        value_delimiter = ','
    )]
    namespaces: Vec<String>,
    /// Consider only workloads matching this label selector.
    #[arg(long, value_name = "SELECTOR", env = "ROLLSAFE_WATCH_SELECTOR")]
    selector: Option<String>,
    /// Watch only the Secrets and ConfigMaps matching this label selector (sent to the API
    /// server, so the others are neither transferred nor held). An object outside it counts
    /// as not watched, like one annotated rollsafe.dev/watch: "false".
    #[arg(long, value_name = "SELECTOR", env = "ROLLSAFE_WATCH_SOURCE_SELECTOR")]
    source_selector: Option<String>,
    /// Watch only the namespaces whose labels match this selector, followed as namespaces gain
    /// and lose the labels (needs list and watch on namespaces).
    #[arg(
        long,
        value_name = "SELECTOR",
        env = "ROLLSAFE_WATCH_NAMESPACE_SELECTOR"
    )]
    namespace_selector: Option<String>,
    /// Never watch this namespace (repeatable; the variable takes a comma-separated list).
    #[arg(
        long = "ignore-namespace",
        value_name = "NAMESPACE",
        env = "ROLLSAFE_WATCH_IGNORE_NAMESPACE",
        value_delimiter = ',',
        value_parser = parse_namespace
    )]
    ignore_namespaces: Vec<String>,
    /// Never watch this kind of source, `Secret` or `ConfigMap` (repeatable); its objects count
    /// as not watched.
    #[arg(
        long = "ignore-kind",
        value_name = "KIND",
        env = "ROLLSAFE_WATCH_IGNORE_KIND",
        value_delimiter = ',',
        value_parser = parse_source_kind
    )]
    ignore_kinds: Vec<TargetKind>,
    /// Every workload is opted in unless it says rollsafe.dev/watch: "false".
    #[arg(long, env = "ROLLSAFE_WATCH_ALL")]
    all: bool,
    /// Changes to one workload's inputs within this window become one roll (e.g. 2s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_duration, env = "ROLLSAFE_WATCH_DEBOUNCE")]
    debounce: Duration,
    /// After a roll, a StatefulSet or DaemonSet rollout without progress for this long is
    /// reported stalled (a RolloutStalled Event); a Deployment has its own
    /// progressDeadlineSeconds.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_progress_deadline, env = "ROLLSAFE_WATCH_PROGRESS_DEADLINE")]
    progress_deadline: Duration,
    /// How a change's consumers roll: `all-at-once`, or `progressive` (in waves, each only once
    /// the earlier ones completed) for every source — not only those annotated
    /// `rollsafe.dev/rollout: progressive`.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = RolloutMode::AllAtOnce, env = "ROLLSAFE_WATCH_ROLLOUT")]
    rollout: RolloutMode,
    /// How workloads that do not choose (`rollsafe.dev/strategy`) restart: `patch` a
    /// pod-template annotation, or `evict` their pods one at a time through the Eviction API,
    /// PodDisruptionBudgets holding (docs/strategies.md); per namespace as
    /// `patch,payments=evict`.
    #[arg(long, value_name = "STRATEGY", default_value = "patch", value_parser = parse_strategy, env = "ROLLSAFE_WATCH_STRATEGY")]
    strategy: StrategyDefaults,
    /// Honour Stakater Reloader's annotations with Reloader's meaning (reloader.stakater.com/auto,
    /// secret.reloader.stakater.com/reload, reloader.stakater.com/ignore, …) on workloads and
    /// sources without a rollsafe.dev/watch annotation.
    #[arg(long, env = "ROLLSAFE_WATCH_RELOADER_COMPAT")]
    reloader_compat: bool,
    /// Watch and roll Argo Rollouts (argoproj.io/v1alpha1) too, when the cluster serves them
    /// (checked at startup; needs list, watch and patch on rollouts.argoproj.io).
    #[arg(long, env = "ROLLSAFE_WATCH_ARGO_ROLLOUTS")]
    argo_rollouts: bool,
    /// Decide, log and count, but never patch.
    #[arg(long, env = "ROLLSAFE_WATCH_DRY_RUN")]
    dry_run: bool,
    /// Key the published digests with HMAC-SHA-256 under this file's content (at least 16
    /// bytes), so digests of low-entropy Secret values cannot be checked against guesses.
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_WATCH_FINGERPRINT_KEY_FILE")]
    fingerprint_key_file: Option<PathBuf>,
    /// Rolls per minute across everything watched (0: unlimited).
    #[arg(long, value_name = "N", default_value_t = rollsafe_watch::settings::DEFAULT_ROLLS_PER_MINUTE, env = "ROLLSAFE_WATCH_MAX_ROLLS_PER_MINUTE")]
    max_rolls_per_minute: u32,
    /// Rolls allowed at once before the per-minute rate applies.
    #[arg(long, value_name = "N", default_value_t = rollsafe_watch::settings::DEFAULT_BURST, env = "ROLLSAFE_WATCH_BURST")]
    burst: u32,
    /// First records written per second while adopting workloads (0: unpaced). Rolls never
    /// wait for adoptions: they have patch slots of their own.
    #[arg(long, value_name = "N", default_value_t = rollsafe_watch::settings::DEFAULT_ADOPTIONS_PER_SECOND, env = "ROLLSAFE_WATCH_MAX_ADOPTIONS_PER_SECOND")]
    max_adoptions_per_second: u32,
    /// Roll only inside this restart window, unless a workload or a changed object names its
    /// own with rollsafe.dev/restart-window (`Mon-Fri 09:00-17:00 Europe/Berlin`; see
    /// docs/watch.md). A roll outside it is held, marked rollsafe.dev/pending, and rolled once
    /// when it opens.
    #[arg(long, value_name = "WINDOW", value_parser = parse_window, env = "ROLLSAFE_WATCH_RESTART_WINDOW")]
    restart_window: Option<RestartWindow>,
    /// Also send every outcome (roll, deferral, halt, held roll, rollout end) to this webhook
    /// (repeatable). Such URLs carry tokens: prefer --notify-webhook-file.
    #[arg(
        long = "notify-webhook",
        value_name = "URL",
        env = "ROLLSAFE_WATCH_NOTIFY_WEBHOOK",
        value_delimiter = ',',
        hide_env_values = true
    )]
    notify_webhooks: Vec<String>,
    /// A file of webhook URLs, one per line (`#` comments), e.g. mounted from a Secret.
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_WATCH_NOTIFY_WEBHOOK_FILE")]
    notify_webhook_file: Option<PathBuf>,
    /// The payload every webhook gets: json, slack, teams or googlechat.
    #[arg(long, value_name = "FORMAT", default_value = "json", value_parser = parse_format, env = "ROLLSAFE_WATCH_NOTIFY_FORMAT")]
    notify_format: NotifyFormat,
    /// The cluster's name, in every notification.
    #[arg(long, value_name = "NAME", env = "ROLLSAFE_WATCH_CLUSTER_NAME")]
    cluster_name: Option<String>,
    /// The page's URL, linked from every notification.
    #[arg(long, value_name = "URL", env = "ROLLSAFE_WATCH_PAGE_URL")]
    page_url: Option<String>,
    /// How each watch lists at its start: "auto" streams the list (sendInitialEvents, one
    /// watch request instead of pages) when the API server serves it, checked once at
    /// startup (Kubernetes 1.34 and later by default), and pages it otherwise; "off" always
    /// pages.
    #[arg(
        long,
        value_name = "MODE",
        default_value = "auto",
        value_enum,
        env = "ROLLSAFE_WATCH_STREAMING_LISTS"
    )]
    streaming_lists: StreamingLists,
    /// Every roll of a workload in this namespace waits for an approval (`rollsafe approve
    /// KIND/NAME`), as if it carried rollsafe.dev/approval: "required" (repeatable).
    #[arg(
        long = "require-approval",
        value_name = "NAMESPACE",
        env = "ROLLSAFE_WATCH_REQUIRE_APPROVAL",
        value_delimiter = ',',
        value_parser = parse_namespace
    )]
    require_approval: Vec<String>,
    /// Halt a workload rolled this many times within the window (`5/10m`; `0` disables).
    #[arg(long, value_name = "ROLLS/WINDOW", default_value = "5/10m", value_parser = FlapLimit::parse, env = "ROLLSAFE_WATCH_FLAP_LIMIT")]
    flap_limit: FlapLimit,
    /// This replica's name in Events (default: the host name).
    #[arg(long, value_name = "NAME", env = "ROLLSAFE_WATCH_INSTANCE")]
    instance: Option<String>,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9090",
        env = "ROLLSAFE_WATCH_ADMIN_LISTEN"
    )]
    admin_listen: SocketAddr,
    /// Run with several replicas: only the holder of a coordination.k8s.io/v1 Lease patches.
    #[arg(long, env = "ROLLSAFE_WATCH_LEADER_ELECT")]
    leader_elect: bool,
    /// The Lease's namespace (default: the connection's namespace — the ServiceAccount's in a
    /// pod).
    #[arg(long, value_name = "NAMESPACE", env = "ROLLSAFE_WATCH_LEASE_NAMESPACE")]
    lease_namespace: Option<String>,
    /// The Lease's name.
    #[arg(
        long,
        value_name = "NAME",
        default_value = DEFAULT_LEASE_NAME,
        env = "ROLLSAFE_WATCH_LEASE_NAME"
    )]
    lease_name: String,
}

/// The Lease the controller competes for, and publishes its settings on, by default.
pub(crate) const DEFAULT_LEASE_NAME: &str = "rollsafe-watch";

/// How long the Lease lasts without renewal.
const LEASE_DURATION_SECONDS: u64 = 15;
/// How long before expiry the holder renews.
const LEASE_GRACE_SECONDS: u64 = 5;

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    process::init_logging();
    let Args {
        kubeconfig,
        context,
        namespaces,
        selector,
        source_selector,
        namespace_selector,
        ignore_namespaces,
        ignore_kinds,
        all,
        debounce,
        progress_deadline,
        rollout,
        strategy,
        reloader_compat,
        argo_rollouts,
        dry_run,
        fingerprint_key_file,
        max_rolls_per_minute,
        burst,
        max_adoptions_per_second,
        restart_window,
        require_approval,
        notify_webhooks,
        notify_webhook_file,
        notify_format,
        cluster_name,
        page_url,
        streaming_lists,
        flap_limit,
        instance,
        admin_listen,
        leader_elect,
        lease_namespace,
        lease_name,
    } = args;
    let lease = leader_elect.then(|| Lease {
        namespace: lease_namespace,
        name: lease_name,
        identity: identity(instance.clone()),
    });
    let settings = ControllerSettings {
        namespaces,
        selector,
        source_selector,
        namespace_selector,
        ignore_namespaces,
        ignore_kinds,
        all,
        debounce,
        dry_run,
        fingerprinter: fingerprinter(fingerprint_key_file.as_deref())?,
        max_rolls_per_minute,
        burst,
        max_adoptions_per_second,
        flap_limit,
        instance,
        progress_deadline,
        progressive_all: rollout == RolloutMode::Progressive,
        strategy,
        reloader_compat,
        argo_rollouts,
        restart_window,
        require_approval,
        cluster_name,
        page_url,
        ..ControllerSettings::default()
    };
    // Parsed here, not by clap, whose error would repeat the value: a webhook URL carries a
    // token. A bad one is a usage error (exit 2), one line naming the flag and a code.
    let mut webhooks = Vec::with_capacity(notify_webhooks.len());
    for (index, text) in notify_webhooks.iter().enumerate() {
        match text.parse::<WebhookUrl>() {
            Ok(url) => webhooks.push(url),
            Err(error) => {
                eprintln!(
                    "rollsafe: --notify-webhook (entry {}): {error} ({})",
                    index + 1,
                    error.code()
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    if let Some(path) = notify_webhook_file.as_deref() {
        match rollsafe_notify::read_webhook_file(path) {
            Ok(read) => webhooks.extend(read),
            Err(error) => {
                eprintln!(
                    "rollsafe: --notify-webhook-file: {error} ({})",
                    error.code()
                );
                return Ok(ExitCode::from(2));
            }
        }
    }
    let sinks: Vec<Sink> = webhooks
        .into_iter()
        .map(|url| Sink {
            url,
            format: notify_format,
        })
        .collect();
    let kube = ConnectionArgs {
        kubeconfig: kubeconfig.or_else(|| shared_setting(SHARED_KUBECONFIG).map(PathBuf::from)),
        context: context
            .or_else(|| shared_setting(SHARED_CONTEXT).and_then(|c| c.into_string().ok())),
        as_user: None,
        as_group: Vec::new(),
    };
    process::runtime()?.block_on(watch(
        kube,
        settings,
        streaming_lists,
        sinks,
        lease,
        admin_listen,
    ))
}

/// `--notify-format`.
fn parse_format(text: &str) -> Result<NotifyFormat, String> {
    text.parse::<NotifyFormat>()
        .map_err(|error| error.to_string())
}

/// `--restart-window`: the core's grammar, its error text as clap's message.
fn parse_window(text: &str) -> Result<RestartWindow, String> {
    text.parse()
        .map_err(|error: rollsafe_core::window::WindowError| error.to_string())
}

/// The variables every other command reads for its kubeconfig and context. `rollsafe watch`
/// takes its own (`ROLLSAFE_WATCH_KUBECONFIG`, `ROLLSAFE_WATCH_CONTEXT`) first, then these: a
/// flag wins over its `ROLLSAFE_WATCH_*` variable, which wins over these.
const SHARED_KUBECONFIG: &str = "ROLLSAFE_KUBECONFIG";
const SHARED_CONTEXT: &str = "ROLLSAFE_CONTEXT";

/// A shared variable's value, unless unset or empty (as clap treats an empty variable).
fn shared_setting(name: &str) -> Option<std::ffi::OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// The Lease `--leader-elect` competes for.
struct Lease {
    /// `--lease-namespace`; default: the connection's namespace.
    namespace: Option<String>,
    name: String,
    /// This replica's identity.
    identity: String,
}

/// The Lease identity and the Events' reporting instance: --instance, else the pod's host
/// name, else a random one.
fn identity(instance: Option<String>) -> String {
    instance
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| format!("rollsafe-watch-{}", uuid::Uuid::new_v4()))
}

/// The fingerprinter of `--fingerprint-key-file` (unkeyed without one); `why` reads the same flag.
pub(crate) fn fingerprinter(key_file: Option<&Path>) -> anyhow::Result<Fingerprinter> {
    match key_file {
        Some(path) => Fingerprinter::from_key_file(path)
            .with_context(|| format!("cannot use the fingerprint key file {}", path.display())),
        None => Ok(Fingerprinter::unkeyed()),
    }
}

/// Connects, competes for the Lease when asked, serves the admin listener and runs the
/// controller until a signal; then releases the Lease.
async fn watch(
    kube: ConnectionArgs,
    settings: ControllerSettings,
    streaming_lists: StreamingLists,
    sinks: Vec<Sink>,
    lease: Option<Lease>,
    admin_listen: SocketAddr,
) -> anyhow::Result<ExitCode> {
    let connection = kube.connect().await?;
    let mut settings = settings;
    let streaming = match streaming_lists {
        StreamingLists::Auto => preflight::StreamingLists::Auto,
        StreamingLists::Off => preflight::StreamingLists::Off,
    };
    match preflight::run(&connection.client(None), &mut settings, streaming).await {
        Ok(()) => {}
        Err(error) if error.is_usage() => {
            eprintln!("rollsafe: {error}");
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    }
    let metrics = ControllerMetrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    if !sinks.is_empty() {
        let notify_metrics = NotifyMetrics::default();
        notify_metrics.register(&mut registry);
        info!(sinks = sinks.len(), "notifying webhooks");
        settings.notifier = Some(Notifier::start(sinks, notify_metrics));
    }
    // The leader publishes the effective settings on its Lease, for `why`, the preview and the
    // page (rollsafe_kube::published).
    settings.publish_on = lease.as_ref().map(|lease| LeaseRef {
        namespace: lease
            .namespace
            .clone()
            .unwrap_or_else(|| connection.default_namespace().to_owned()),
        name: lease.name.clone(),
    });
    let mut controller = Controller::new(connection.client(None), settings).with_metrics(metrics);
    let election = match lease {
        Some(lease) => Some(elect(&connection, lease).await?),
        None => None,
    };
    if let Some(election) = &election {
        controller = controller.with_leadership(election.leader.clone());
    }
    let admin = serve_admin(admin_listen, registry, controller.status()).await?;
    let result = controller
        .run(shutdown_on_signal())
        .await
        .context("the controller stopped");
    admin.abort();
    release(election).await;
    result?;
    Ok(ExitCode::SUCCESS)
}

/// `--streaming-lists`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum StreamingLists {
    /// Streamed when the API server serves it, else paged.
    Auto,
    /// Always paged.
    Off,
}

/// `--ignore-namespace`: a namespace name.
fn parse_namespace(text: &str) -> Result<String, String> {
    rollsafe_core::name::Namespace::try_from(text.to_owned())
        .map(rollsafe_core::name::Namespace::into_string)
        .map_err(|error| error.to_string())
}

/// `--ignore-kind`: `Secret` or `ConfigMap` (any case).
fn parse_source_kind(text: &str) -> Result<TargetKind, String> {
    match text.to_ascii_lowercase().as_str() {
        "secret" | "secrets" => Ok(TargetKind::Secret),
        "configmap" | "configmaps" => Ok(TargetKind::ConfigMap),
        _ => Err("a kind of source: Secret or ConfigMap".to_owned()),
    }
}

/// Starts competing for `lease` (created when missing).
async fn elect(
    connection: &rollsafe_kube::Connection,
    lease: Lease,
) -> anyhow::Result<leader::Election> {
    let lease = LeaseSettings {
        namespace: lease
            .namespace
            .unwrap_or_else(|| connection.default_namespace().to_owned()),
        name: lease.name,
        identity: lease.identity,
        duration_seconds: LEASE_DURATION_SECONDS,
        grace_seconds: LEASE_GRACE_SECONDS,
    };
    let election = leader::elect(connection.client(None), &lease)
        .await
        .context("cannot start the leader election")?;
    info!(lease = %lease.name, namespace = %lease.namespace, "competing for the lease");
    Ok(election)
}

/// Serves /metrics, /healthz and /readyz on `listen` until aborted.
async fn serve_admin(
    listen: SocketAddr,
    registry: Registry,
    status: tokio::sync::watch::Receiver<rollsafe_watch::Status>,
) -> anyhow::Result<tokio::task::JoinHandle<std::io::Result<()>>> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    info!(admin = %listen, "serving /metrics, /healthz and /readyz");
    Ok(tokio::spawn(admin::serve(
        listener,
        Arc::new(registry),
        status,
        std::future::pending(),
    )))
}

/// Dropping the receivers makes the lease task release the Lease; waits for it a while.
async fn release(election: Option<leader::Election>) {
    if let Some(leader::Election { leader, task }) = election {
        drop(leader);
        let _ = tokio::time::timeout(Duration::from_secs(5), task).await;
    }
}

async fn shutdown_on_signal() {
    if let Err(error) = process::wait_for_signal().await {
        warn!(error = %error, "cannot wait for signals; shutting down");
    }
}

/// The debounce window, in the one duration format (`rollsafe_core::duration`); at most 1 h.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = rollsafe_core::duration::parse(text).map_err(|error| error.to_string())?;
    if duration > Duration::from_secs(3600) {
        return Err("the debounce window is at most 1h".to_owned());
    }
    Ok(duration)
}

/// `--rollout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum RolloutMode {
    /// Every consumer of a change at once (a source annotated `rollsafe.dev/rollout:
    /// progressive` still rolls in waves).
    AllAtOnce,
    /// Every source's consumers in waves.
    Progressive,
}

/// The progress deadline, in the one duration format: longer than zero.
fn parse_strategy(text: &str) -> Result<StrategyDefaults, String> {
    text.parse::<StrategyDefaults>().map_err(|_| {
        "expected `patch`, `evict`, or a default then NAMESPACE=STRATEGY entries (`patch,payments=evict`)".to_owned()
    })
}

fn parse_progress_deadline(text: &str) -> Result<Duration, String> {
    match rollsafe_core::duration::parse(text) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        Ok(_) => Err("the progress deadline must be longer than zero".to_owned()),
        Err(error) => Err(error.to_string()),
    }
}

/// The sandbox controller's flap stop: looser than the default (5 in 10 minutes), so a few
/// minutes of play do not halt a demo workload; the banner says how to resume one.
pub(crate) const SANDBOX_FLAP_LIMIT: rollsafe_watch::limits::FlapLimit =
    rollsafe_watch::limits::FlapLimit {
        rolls: 20,
        window: Duration::from_secs(600),
    };

/// How long the sandbox waits for the controller's first adoptions before it reports ready.
const SANDBOX_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The sandbox's controller, running: its task, and where its admin listener (`/metrics`,
/// `/healthz`, `/readyz`) answers.
pub(crate) struct SandboxController {
    task: tokio::task::JoinHandle<()>,
    admin: tokio::task::JoinHandle<std::io::Result<()>>,
    /// The admin listener's address (loopback, a free port).
    pub(crate) admin_addr: SocketAddr,
}

impl SandboxController {
    /// Stops the controller and its listener.
    pub(crate) fn abort(&self) {
        self.task.abort();
        self.admin.abort();
    }
}

/// Starts the controller for `rollsafe sandbox`: every workload of `namespace` opted in
/// (`--all`), a one-second debounce, its metrics on a loopback admin listener of its own.
/// Returns once it has listed everything and adopted what it watches, so the sandbox's own
/// restart demo never races an adoption patch.
pub(crate) async fn start_for_sandbox(
    kubeconfig: &std::path::Path,
    namespace: &str,
) -> anyhow::Result<SandboxController> {
    let connection = rollsafe_kube::Connection::from_kubeconfig(Some(kubeconfig), None)
        .await
        .context("cannot connect the controller to the emulator")?;
    let metrics = ControllerMetrics::default();
    let mut registry = Registry::default();
    metrics.register(&mut registry);
    let controller = Controller::new(
        connection.client(None),
        ControllerSettings {
            namespaces: vec![namespace.to_owned()],
            all: true,
            debounce: Duration::from_secs(1),
            flap_limit: SANDBOX_FLAP_LIMIT,
            publish_on: Some(LeaseRef {
                namespace: namespace.to_owned(),
                name: DEFAULT_LEASE_NAME.to_owned(),
            }),
            ..ControllerSettings::default()
        },
    )
    .with_metrics(metrics);
    let mut status = controller.status();
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .context("cannot listen for the controller's metrics")?;
    let admin_addr = listener
        .local_addr()
        .context("the controller's listener has no address")?;
    let admin = tokio::spawn(admin::serve(
        listener,
        Arc::new(registry),
        controller.status(),
        std::future::pending(),
    ));
    let task = tokio::spawn(async move {
        if let Err(error) = controller.run(std::future::pending()).await {
            warn!(code = error.code(), "the sandbox controller stopped");
        }
    });
    tokio::time::timeout(
        SANDBOX_READY_TIMEOUT,
        status.wait_for(|s| s.synced && s.pending == 0),
    )
    .await
    .context("the controller did not become ready")?
    .context("the controller stopped")?;
    Ok(SandboxController {
        task,
        admin,
        admin_addr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let cases = [
            ("2s", Ok(Duration::from_secs(2))),
            ("500ms", Ok(Duration::from_millis(500))),
            ("0", Ok(Duration::ZERO)),
            ("1m", Ok(Duration::from_secs(60))),
            ("7", Ok(Duration::from_secs(7))),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_duration(text), expected, "{text}");
        }
        for bad in ["", "s", "2h", "-1s", "1.5s", "2 s", "61m", "1h1s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
