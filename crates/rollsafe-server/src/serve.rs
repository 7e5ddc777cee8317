//! Listeners: the API and the admin (metrics) listener, with header limits and graceful
//! shutdown that lets in-flight requests — restarts included — finish.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use thiserror::Error;
use tokio::net::TcpListener;
use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::router::router;
use crate::state::AppState;

/// The largest request head (request line and headers) read.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// The most request headers accepted.
pub const MAX_HEADERS: usize = 64;
/// How long a client may take to send its request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// What shutdown waits beyond the longest restart run and the gates' deadline.
const SHUTDOWN_MARGIN: Duration = Duration::from_secs(5);

/// How long shutdown waits for in-flight requests and restart runs: long enough for any run
/// that has started to finish under the engine's configured `timeouts`
/// ([`rollsafe_kube::Timeouts::max_run`]), plus the gates' deadline.
pub fn shutdown_grace(timeouts: &rollsafe_kube::Timeouts) -> Duration {
    crate::gates::GATE_DEADLINE + timeouts.max_run() + SHUTDOWN_MARGIN
}

/// Why serving failed.
#[derive(Debug, Error)]
pub enum ServeError {
    /// A listener could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Bound listeners, ready to serve.
#[derive(Debug)]
pub struct BoundServer {
    api: TcpListener,
    admin: TcpListener,
    state: Arc<AppState>,
}

impl BoundServer {
    /// Binds the API and admin listeners of the state's settings.
    pub async fn bind(state: Arc<AppState>) -> Result<Self, ServeError> {
        let bind = |addr: SocketAddr| async move {
            TcpListener::bind(addr)
                .await
                .map_err(|source| ServeError::Bind { addr, source })
        };
        let api = bind(state.settings.listen).await?;
        let admin = bind(state.settings.admin_listen).await?;
        Ok(Self { api, admin, state })
    }

    /// The API listener's address.
    pub fn api_addr(&self) -> Option<SocketAddr> {
        self.api.local_addr().ok()
    }

    /// The admin listener's address.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.local_addr().ok()
    }

    /// Serves until `shutdown` resolves, then stops accepting and waits up to
    /// [`shutdown_grace`] for in-flight requests and restart runs.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let grace = shutdown_grace(&self.state.engine.timeouts());
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let api = serve(self.api, router(self.state.clone()), stop_rx.clone(), grace);
        let admin = serve(
            self.admin,
            admin_router(self.state.metrics.clone()),
            stop_rx,
            grace,
        );
        let api = tokio::spawn(api);
        let admin = tokio::spawn(admin);
        shutdown.await;
        info!("shutting down: waiting for in-flight requests");
        let _ = stop_tx.send(true);
        let _ = api.await;
        let _ = admin.await;
        // Runs outlive their connections when a client hangs up; wait for them too.
        self.state.runs.close();
        if tokio::time::timeout(grace, self.state.runs.wait())
            .await
            .is_err()
        {
            warn!("shutdown grace period ended with restart runs still in flight");
        }
    }
}

fn admin_router(metrics: Metrics) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        metrics.encode(),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route("/livez", get(|| async { "ok" }))
}

async fn serve(
    listener: TcpListener,
    router: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
    grace: Duration,
) {
    let graceful = GracefulShutdown::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        warn!(error = %error, "accept failed");
                        continue;
                    }
                };
                let service = TowerToHyperService::new(router.clone());
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .max_header_size(MAX_HEADER_BYTES)
                    .max_headers(MAX_HEADERS);
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    let _ = connection.await;
                });
            }
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        warn!("shutdown grace period ended with requests still in flight");
    }
}
