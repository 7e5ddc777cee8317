//! `rollsafe sandbox`: the emulator with a demo namespace, and the API server against it.
//!
//! The emulator runs in-process with `sandbox/demo.yaml` seeded; the server connects to it as
//! the emulator's admin, with the restart flag on, impersonation on, namespace scope `demo`, and
//! admins in group `platform`. Demo users: `alice@example.com` (groups `platform`,
//! `developers`: admin) and `bob@example.com` (group `developers`: not allowed on the
//! `payments-key` Secret, whose annotations admit only `platform`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rollsafe_emulator::{Emulator, RolloutPaceChange};
use rollsafe_kube::Connection;
use rollsafe_server::BoundServer;
use rollsafe_server::Settings;
use rollsafe_server::acl::Admins;
use rollsafe_server::audit::Stream;
use rollsafe_server::impersonation::Constraint;
use rollsafe_server::session::{self, AuthMode, NewSession, SessionSecret};
use serde_json::json;

use crate::process;
use crate::restart_exit::OutputFormat;

/// The demo namespace.
pub(crate) const NAMESPACE: &str = "demo";
/// The demo objects.
const DEMO: &str = include_str!("sandbox/demo.yaml");
/// Lifetime of the printed tokens.
const TOKEN_TTL: Duration = Duration::from_secs(8 * 3_600);

/// Start an embedded Kubernetes emulator with demo workloads and serve the API against it.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Address of the API listener (loopback).
    #[arg(
        long,
        env = "ROLLSAFE_SANDBOX_LISTEN",
        default_value = "127.0.0.1:8080"
    )]
    listen: SocketAddr,
    /// How to announce readiness: `text` (a banner for people) or `json` (exactly one JSON
    /// line — `url`, `token`, `kubeconfig`, `namespace`, `page` — on stdout; everything else on stderr).
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    output: OutputFormat,
    /// The same as `-o json` (kept for scripts written before `-o`).
    #[arg(long, hide = true)]
    json: bool,
    /// Sign people in with an OpenID Connect provider (`KRYPTON_OIDC_*`, as `rollsafe serve`);
    /// the redirect URL defaults to this listener's `/auth/callback`.
    #[command(flatten)]
    oidc: rollsafe_server::config::OidcArgs,
}

impl Args {
    fn json(&self) -> bool {
        self.json || self.output == OutputFormat::Json
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    process::init_logging();
    anyhow::ensure!(
        args.listen.ip().is_loopback(),
        "--listen must be a loopback address: the sandbox has no real authentication secret"
    );
    process::runtime()?.block_on(sandbox(args))
}

async fn sandbox(args: Args) -> anyhow::Result<ExitCode> {
    let cluster = DemoCluster::start().await?;
    let secret = session_secret();
    let settings = settings(&args, &cluster.kubeconfig, &secret)?;
    let server = start_server(settings, &cluster.kubeconfig, args.json()).await?;
    let url = format!(
        "http://{}",
        server
            .api_addr()
            .context("the API listener has no address")?
    );
    let metrics = format!(
        "http://{}/metrics",
        server
            .admin_addr()
            .context("the admin listener has no address")?
    );
    // `rollsafe watch` on the demo namespace, adopted before anything is announced.
    let watch = crate::watch::start_for_sandbox(&cluster.kubeconfig, NAMESPACE).await?;
    let tokens = DemoTokens::mint(&secret)?;
    let shutdown = process::ShutdownSignal::install()?;
    let controller_metrics = format!("http://{}/metrics", watch.admin_addr);
    announce(
        &args,
        &url,
        &metrics,
        &controller_metrics,
        &tokens,
        &cluster,
    )?;
    server.run(shutdown.recv()).await;
    watch.abort();
    cluster.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

/// How long each new demo pod takes to become ready.
const SANDBOX_POD_READY_MILLIS: u64 = 1_000;
/// Every Deployment's progress deadline in the sandbox, as a share of its spec: 600 s → 9 s.
const SANDBOX_PROGRESS_DEADLINE_SCALE: f64 = 0.015;

/// The progress deadline of the StatefulSets and DaemonSets followed by the banner's
/// commands (`--progress-deadline`): the default (ten minutes, the Deployments' default
/// `progressDeadlineSeconds`) scaled as the emulator scales the Deployments' own, so that
/// every kind stalls within seconds here, not only Deployments.
fn sandbox_progress_deadline() -> Duration {
    Duration::from_secs_f64(
        rollsafe_core::rollout::DEFAULT_PROGRESS_DEADLINE.as_secs_f64()
            * SANDBOX_PROGRESS_DEADLINE_SCALE,
    )
}

/// The embedded emulator with the demo objects, and the kubeconfig to reach it (in a temporary
/// directory that lives as long as the cluster).
struct DemoCluster {
    kubeconfig: PathBuf,
    dir: tempfile::TempDir,
    emulator: rollsafe_emulator::RunningEmulator,
}

impl DemoCluster {
    async fn start() -> anyhow::Result<Self> {
        let emulator = Emulator::builder()
            .seed_yaml(DEMO)
            .context("the demo objects")?
            .start("127.0.0.1:0".parse()?)
            .await
            .context("cannot start the emulator")?;
        let dir = tempfile::Builder::new()
            .prefix("rollsafe-sandbox-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let kubeconfig = dir.path().join("kubeconfig");
        emulator
            .write_kubeconfig(&kubeconfig)
            .context("cannot write the kubeconfig")?;
        // Rollouts that take time, and fail within seconds when told to: the safe-rollout
        // story of the banner.
        emulator
            .change_settings(RolloutPaceChange {
                pod_ready_millis: Some(SANDBOX_POD_READY_MILLIS),
                progress_deadline_scale: Some(SANDBOX_PROGRESS_DEADLINE_SCALE),
            })
            .context("cannot set the emulator's rollout pace")?;
        own_the_operated_workload(&kubeconfig).await?;
        Ok(Self {
            kubeconfig,
            dir,
            emulator,
        })
    }

    async fn shutdown(self) {
        self.emulator.shutdown().await;
        drop(self.dir);
    }
}

/// The operator's resource of the demo: MetricsStack `monitoring`, created once its CRD is
/// served, and set as the controller of the prometheus StatefulSet (its uid is known only now),
/// so that the StatefulSet is operator-owned as an operator's would be (docs/strategies.md).
async fn own_the_operated_workload(kubeconfig: &std::path::Path) -> anyhow::Result<()> {
    use kube::api::{
        Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
    };
    let connection = Connection::from_kubeconfig(Some(kubeconfig), None)
        .await
        .context("cannot connect to the emulator")?;
    let client = connection.client(None);
    let stacks = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("demo.rollsafe.dev", "v1", "MetricsStack"),
        "metricsstacks",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), NAMESPACE, &stacks);
    let stack: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "demo.rollsafe.dev/v1", "kind": "MetricsStack",
        "metadata": {"name": "monitoring", "namespace": NAMESPACE}
    }))?;
    let stack = api
        .create(&PostParams::default(), &stack)
        .await
        .context("cannot create the demo's MetricsStack")?;
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "demo.rollsafe.dev/v1", "kind": "MetricsStack", "name": "monitoring",
        "uid": stack.metadata.uid, "controller": true
    }]}});
    let sets = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("apps", "v1", "StatefulSet"),
        "statefulsets",
    );
    Api::<DynamicObject>::namespaced_with(client, NAMESPACE, &sets)
        .patch("prometheus", &PatchParams::default(), &Patch::Merge(owner))
        .await
        .context("cannot set the prometheus StatefulSet's owner")?;
    Ok(())
}

/// A fresh session key: the sandbox's tokens are valid only while it runs.
fn session_secret() -> SessionSecret {
    SessionSecret::new(format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    ))
}

/// The server's settings: the restart flag on, impersonation on, namespace scope `demo`,
/// admins in group `platform`, sessions under `secret`.
fn settings(
    args: &Args,
    kubeconfig: &std::path::Path,
    secret: &SessionSecret,
) -> anyhow::Result<Settings> {
    let auth = AuthMode::Session {
        secret: secret.clone(),
        max_age: TOKEN_TTL,
    };
    Ok(Settings {
        listen: args.listen,
        admin_listen: SocketAddr::new(args.listen.ip(), 0),
        kubeconfig: Some(kubeconfig.to_owned()),
        restart_enabled: true,
        admins: Admins {
            users: Vec::new(),
            groups: vec!["platform".to_owned()],
        },
        impersonation: true,
        // The emulator checks only the unconstrained `impersonate` rule (as a cluster before
        // Kubernetes 1.36 does), and the sandbox's server is its admin anyway.
        impersonation_constrained: Constraint::Off,
        oidc: args
            .oidc
            .clone()
            .validate(false, Some(format!("http://{}/auth/callback", args.listen)))?,
        ..Settings::new(NAMESPACE.parse()?, auth)
    })
}

/// The API server over the emulator, as its admin, bound and not yet serving. With `-o json`
/// stdout carries exactly one line, so audit lines go to stderr.
async fn start_server(
    settings: Settings,
    kubeconfig: &std::path::Path,
    json: bool,
) -> anyhow::Result<BoundServer> {
    let connection = Connection::from_kubeconfig(Some(kubeconfig), None)
        .await
        .context("cannot connect to the emulator")?;
    let stream = if json { Stream::Stderr } else { Stream::Stdout };
    crate::serve::bind(settings, connection, stream).await
}

/// The demo users' tokens.
struct DemoTokens {
    /// `alice@example.com`, groups `platform` and `developers`: an admin.
    alice: String,
    /// `bob@example.com`, group `developers`: not allowed on `payments-key`.
    bob: String,
}

impl DemoTokens {
    fn mint(secret: &SessionSecret) -> anyhow::Result<Self> {
        let mint = |email: &str, groups: &[&str]| {
            session::mint(
                &NewSession {
                    sub: None,
                    email: email.to_owned(),
                    name: None,
                    groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                    ttl: TOKEN_TTL,
                },
                secret,
                session::now(),
            )
        };
        let alice = mint("alice@example.com", &["platform", "developers"])
            .context("cannot mint a token")?;
        let bob = mint("bob@example.com", &["developers"]).context("cannot mint a token")?;
        Ok(Self { alice, bob })
    }
}

/// Announces readiness: one JSON line on stdout with `-o json`, else the banner on stderr.
fn announce(
    args: &Args,
    url: &str,
    metrics: &str,
    controller_metrics: &str,
    tokens: &DemoTokens,
    cluster: &DemoCluster,
) -> anyhow::Result<()> {
    if args.json() {
        let line = json!({
            "url": url,
            "token": tokens.alice,
            "kubeconfig": cluster.kubeconfig,
            "namespace": NAMESPACE,
            "page": format!("{url}/"),
            "metrics": metrics,
            "controllerMetrics": controller_metrics,
        });
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()?;
    } else {
        // The binary the user just ran, so every command shown runs as it is.
        let binary = std::env::current_exe()
            .map_or_else(|_| "rollsafe".to_owned(), |p| p.display().to_string());
        eprintln!(
            "{}",
            banner(&Banner {
                url,
                metrics,
                controller_metrics,
                binary: &binary,
                alice: &tokens.alice,
                bob: &tokens.bob,
                kubeconfig: &cluster.kubeconfig.display().to_string(),
                emulator: &cluster.emulator.url(),
            })
        );
    }
    Ok(())
}

/// What the banner names.
struct Banner<'a> {
    url: &'a str,
    metrics: &'a str,
    controller_metrics: &'a str,
    binary: &'a str,
    alice: &'a str,
    bob: &'a str,
    kubeconfig: &'a str,
    emulator: &'a str,
}

fn banner(b: &Banner<'_>) -> String {
    let Banner {
        url,
        metrics,
        controller_metrics,
        binary,
        alice,
        bob,
        kubeconfig,
        emulator,
    } = *b;
    let (rolls, minutes) = (
        crate::watch::SANDBOX_FLAP_LIMIT.rolls,
        crate::watch::SANDBOX_FLAP_LIMIT.window.as_secs() / 60,
    );
    let deadline = format!("{}s", sandbox_progress_deadline().as_secs());
    format!(
        r#"
rollsafe sandbox is ready.

  Web page    {url}/   (sign in with alice's token below)
  API         {url}
  Metrics     {metrics}   (the API server's)
  Controller  {controller_metrics}   (rollsafe watch's: rolls, halts, reaction, /readyz)
  Kubernetes  {emulator}   (kubectl --kubeconfig {kubeconfig} get deploy,sts,ds -n {NAMESPACE})

Token for alice@example.com (groups platform, developers — an admin):
  export ROLLSAFE_TOKEN={alice}
Token for bob@example.com (group developers — not allowed on payments-key):
  export BOB_TOKEN={bob}

Try (from the source tree, `cargo run -q -p rollsafe --` in place of the binary does the same):
  curl -s -X POST -H "Authorization: Bearer $ROLLSAFE_TOKEN" {url}/api/namespaces/{NAMESPACE}/secrets/db-credentials/restart-consumers
  {binary} restart --server {url} {NAMESPACE}/db-credentials
  {binary} restart --server {url} --token "$BOB_TOKEN" {NAMESPACE}/payments-key    # 403 by the ACL
  {binary} restart --server {url} {NAMESPACE}/db-credentials-v1                   # a history snapshot: 404

`rollsafe watch` runs on {NAMESPACE}: change a Secret and its consumers roll within seconds:
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} patch secret db-credentials -p '{{"stringData":{{"password":"rotated"}}}}' && sleep 2 && kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} get events
A workload rolled {rolls} times within {minutes} minutes is halted (annotation rollsafe.dev/halted); resume it with:
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} annotate deployment NAME rollsafe.dev/halted-

Safe rollouts (pods take a second to become ready here, and a rollout without progress for {deadline} is stalled:
the emulator scales Deployments' progressDeadlineSeconds so; --progress-deadline {deadline} does the same for StatefulSets
and DaemonSets). Tell the emulator the next rotation is bad for api-server — its next revision crash-loops (the fault fires
once: the revision after it is healthy) — then roll progressively: the canary stalls, the rest are held back (exit 4):
  curl -s -X POST {emulator}/_emulator/faults -H 'Content-Type: application/json' -d '{{"verb":"patch","resource":"deployments","namespace":"{NAMESPACE}","name":"api-server","action":{{"type":"rolloutFails","reason":"CrashLoopBackOff","message":"password authentication failed"}}}}'
  {binary} restart-consumers --kubeconfig {kubeconfig} --progressive --progress-deadline {deadline} -o text {NAMESPACE}/db-credentials
Fix the rotation: put a good password in the Secret. `rollsafe watch` rolls every consumer of it once for the change — the
canary's next revision, which is healthy, and the ones held back — and each rollout completes (the paused batch-reports
rolls when it is resumed):
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} patch secret db-credentials -p '{{"stringData":{{"password":"fixed"}}}}'
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} rollout status deployment/api-server

An operator owns the prometheus StatefulSet (MetricsStack/monitoring) and would revert a template patch, so it restarts by
eviction (rollsafe.dev/strategy: evict): one pod at a time through the Eviction API, its PodDisruptionBudget holding, the
template untouched (docs/strategies.md). Rotate its credentials and read the Events:
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} patch secret remote-write-credentials -p '{{"stringData":{{"password":"rotated"}}}}'
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} get events --field-selector involvedObject.name=prometheus

Press Ctrl-C to stop.
"#
    )
}
