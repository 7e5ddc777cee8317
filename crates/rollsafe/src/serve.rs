//! `rollsafe serve`: the Restart Consumers HTTP API.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use rollsafe_kube::Connection;
use rollsafe_server::audit::{AuditSink, Stream};
use rollsafe_server::config::{ServeArgs, Settings};
use rollsafe_server::impersonation::{self, ImpersonationMode};
use rollsafe_server::metrics::Metrics;
use rollsafe_server::{AppState, BoundServer};
use tracing::{info, warn};

use crate::process;

/// Serve the Restart Consumers API. Every setting is also an environment variable.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    serve: ServeArgs,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    process::init_logging();
    // The same directory the in-cluster connection reads (`ROLLSAFE_SERVICEACCOUNT_DIR`).
    let service_account_namespace =
        std::fs::read_to_string(rollsafe_kube::connection::service_account_dir().join("namespace"))
            .ok();
    let settings = args
        .serve
        .validate(service_account_namespace.as_deref())
        .context("invalid configuration")?;
    process::runtime()?.block_on(async {
        let connection =
            Connection::from_options(settings.kubeconfig.as_deref(), settings.context.as_deref())
                .await
                .context("cannot connect to Kubernetes")?;
        let server = bind(settings, connection, Stream::Stdout).await?;
        server.run(shutdown_on_signal()).await;
        Ok(ExitCode::SUCCESS)
    })
}

/// Builds the state and binds both listeners; logs where they listen. Audit lines are printed
/// to `stream`.
pub(crate) async fn bind(
    settings: Settings,
    connection: Connection,
    stream: Stream,
) -> anyhow::Result<BoundServer> {
    if settings.admins.is_bootstrap() {
        warn!(
            "KRYPTON_ADMIN_USERS and KRYPTON_ADMIN_GROUPS are empty: every authenticated user is an admin"
        );
    }
    let audit = match &settings.audit_file {
        Some(path) => AuditSink::with_file(path)
            .with_context(|| format!("cannot open the audit file {}", path.display()))?,
        None => AuditSink::stdout(),
    }
    .on(stream);
    // With impersonation, which rules the calls run under: asked of the API server once, before
    // the listeners open (a stop is one fixed line: rollsafe_server::impersonation).
    let mode = if settings.impersonation {
        impersonation::resolve(
            settings.impersonation_constrained,
            settings.server_namespace.as_str(),
            &connection,
        )
        .await
        .map_err(|error| anyhow::anyhow!("{error} ({})", error.code()))?
    } else {
        ImpersonationMode::Off
    };
    let state = AppState::new(settings, connection, audit, Metrics::new()).with_impersonation(mode);
    let state = Arc::new(state);
    let server = BoundServer::bind(state).await?;
    if let (Some(api), Some(admin)) = (server.api_addr(), server.admin_addr()) {
        info!(%api, %admin, "serving");
    }
    Ok(server)
}

async fn shutdown_on_signal() {
    if let Err(error) = process::wait_for_signal().await {
        warn!(error = %error, "cannot wait for signals; shutting down");
    }
}
