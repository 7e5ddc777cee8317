//! `rollsafe sandbox`: the emulator with a demo namespace, and the API server against it.
//!
//! The emulator runs in-process with `sandbox/demo.yaml` seeded; the server connects to it as
//! the emulator's admin, with the restart flag on, impersonation on, namespace scope `demo`, and
//! admins in group `platform`. Demo users: `alice@example.com` (groups `platform`,
//! `developers`: admin) and `bob@example.com` (group `developers`: not allowed on the
//! `payments-key` Secret, whose annotations admit only `platform`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use rollsafe_emulator::Emulator;
use rollsafe_kube::Connection;
use rollsafe_server::audit::Stream;
use rollsafe_server::config::{AuthMode, SessionSecret};
use rollsafe_server::session::{self, NewSession};
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

    let secret = SessionSecret::new(format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    ));
    let settings = rollsafe_server::config::Settings {
        listen: args.listen,
        admin_listen: SocketAddr::new(args.listen.ip(), 0),
        kubeconfig: Some(kubeconfig.clone()),
        context: None,
        audit_file: None,
        restart_enabled: true,
        scope: rollsafe_server::config::Scope::Namespace,
        server_namespace: NAMESPACE.parse()?,
        admins: rollsafe_server::config::Admins {
            users: Vec::new(),
            groups: vec!["platform".to_owned()],
        },
        access_configmap: rollsafe_server::config::DEFAULT_ACCESS_CONFIGMAP.parse()?,
        annotation_prefix: rollsafe_server::config::DEFAULT_ANNOTATION_PREFIX.parse()?,
        impersonation: true,
        auth: AuthMode::Session {
            secret: secret.clone(),
            max_age: TOKEN_TTL,
        },
        allowed_groups: Default::default(),
        max_concurrent_restarts: rollsafe_server::limits::MAX_CONCURRENT_RUNS,
        token_review: None,
        oidc: args
            .oidc
            .clone()
            .validate(false, Some(format!("http://{}/auth/callback", args.listen)))?,
    };
    let connection = Connection::from_kubeconfig(Some(&kubeconfig), None)
        .await
        .context("cannot connect to the emulator")?;
    // With -o json, stdout carries exactly one line: audit lines go to stderr.
    let stream = if args.json() {
        Stream::Stderr
    } else {
        Stream::Stdout
    };
    let server = crate::serve::bind(settings, connection, stream).await?;
    let url = format!(
        "http://{}",
        server
            .api_addr()
            .context("the API listener has no address")?
    );
    // `rollsafe watch` on the demo namespace, adopted before anything is announced.
    let watch = crate::watch::start_for_sandbox(&kubeconfig, NAMESPACE).await?;
    let mint = |email: &str, groups: &[&str]| {
        session::mint(
            &NewSession {
                sub: None,
                email: email.to_owned(),
                name: None,
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
                ttl: TOKEN_TTL,
            },
            &secret,
            session::now(),
        )
    };
    let alice =
        mint("alice@example.com", &["platform", "developers"]).context("cannot mint a token")?;
    let bob = mint("bob@example.com", &["developers"]).context("cannot mint a token")?;

    let shutdown = process::ShutdownSignal::install()?;
    if args.json() {
        let line = json!({
            "url": url,
            "token": alice,
            "kubeconfig": kubeconfig,
            "namespace": NAMESPACE,
            "page": format!("{url}/"),
        });
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{line}")?;
        stdout.flush()?;
    } else {
        eprintln!(
            "{}",
            banner(
                &url,
                &alice,
                &bob,
                &kubeconfig.display().to_string(),
                &emulator.url()
            )
        );
    }

    server.run(shutdown.recv()).await;
    watch.abort();
    emulator.shutdown().await;
    drop(dir);
    Ok(ExitCode::SUCCESS)
}

fn banner(url: &str, alice: &str, bob: &str, kubeconfig: &str, emulator: &str) -> String {
    format!(
        r#"
rollsafe sandbox is ready.

  Web page    {url}/   (sign in with alice's token below)
  API         {url}
  Kubernetes  {emulator}   (kubectl --kubeconfig {kubeconfig} get deploy,sts,ds -n {NAMESPACE})

Token for alice@example.com (groups platform, developers — an admin):
  export ROLLSAFE_TOKEN={alice}
Token for bob@example.com (group developers — not allowed on payments-key):
  export BOB_TOKEN={bob}

Try:
  curl -s -X POST -H "Authorization: Bearer $ROLLSAFE_TOKEN" {url}/api/namespaces/{NAMESPACE}/secrets/db-credentials/restart-consumers
  cargo run -q -p rollsafe -- restart --server {url} {NAMESPACE}/db-credentials
  cargo run -q -p rollsafe -- restart --server {url} --token "$BOB_TOKEN" {NAMESPACE}/payments-key    # 403 by the ACL
  cargo run -q -p rollsafe -- restart --server {url} {NAMESPACE}/db-credentials-v1                   # a history snapshot: 404

`rollsafe watch` runs on {NAMESPACE}: change a Secret and its consumers roll within seconds:
  kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} patch secret db-credentials -p '{{"stringData":{{"password":"rotated"}}}}' && sleep 2 && kubectl --kubeconfig {kubeconfig} -n {NAMESPACE} get events

Press Ctrl-C to stop.
"#
    )
}
