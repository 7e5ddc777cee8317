//! The HTTP server: a custom accept loop over hyper, so that a fault can really close a
//! client's TCP connection (with a reset) before or after a request is applied.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio::task::JoinSet;

use rollsafe_emulator_registry::controllers::disruption;

use crate::state::{ADMIN_PREFIX, Body, Killer, Shared, shutdown_signal};
use crate::{admin, filters};

/// How long shutdown waits for open connections before closing them.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// A TCP stream that resets (SO_LINGER 0) instead of closing gracefully when killed.
struct KillableIo {
    inner: TcpStream,
    killer: Arc<Killer>,
}

impl Drop for KillableIo {
    fn drop(&mut self) {
        if self.killer.is_killed() {
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for KillableIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// How often expired Events are looked for (more often when the TTL is shorter).
const EVENT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Deletes Events as their TTL passes, until shutdown.
pub(crate) async fn expire_events(shared: Arc<Shared>, ttl: Duration) {
    let mut tick = tokio::time::interval(
        EVENT_SWEEP_INTERVAL
            .min(ttl / 2)
            .max(Duration::from_millis(10)),
    );
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                shared.store().expire_events(std::time::Instant::now());
            }
            _ = shutdown_signal(shared.shutdown.clone()) => return,
        }
    }
}

/// Advances the simulated rollouts while some are in progress: asleep until the next thing
/// is due (a pod becoming ready, a progress deadline) or the store wakes it, until shutdown.
pub(crate) async fn advance_rollouts(shared: Arc<Shared>, waker: Arc<tokio::sync::Notify>) {
    loop {
        let due = {
            let mut store = shared.store();
            store.advance_rollouts(std::time::Instant::now());
            store.next_rollout_due()
        };
        let sleep = async {
            match due {
                Some(due) => tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = sleep => {}
            () = waker.notified() => {}
            () = shutdown_signal(shared.shutdown.clone()) => return,
        }
    }
}

/// The disruption controller: keeps every PodDisruptionBudget's status current moments after
/// a change that can move it — a pod's, a budget's, a controller's scale — as the real one
/// follows its informers, until shutdown. A watcher that fell behind the store's events syncs
/// every budget.
pub(crate) async fn sync_disruption_budgets(shared: Arc<Shared>) {
    let mut events = shared.store().subscribe();
    let mut controller = disruption::Controller::default();
    shared.store().sync_budgets(&mut controller, None);
    loop {
        let first = tokio::select! {
            received = events.recv() => received,
            _ = shutdown_signal(shared.shutdown.clone()) => return,
        };
        let mut namespaces = BTreeSet::new();
        let mut everything = false;
        match first {
            Ok(event) => namespaces.extend(controller.wants(&event)),
            Err(RecvError::Lagged(_)) => everything = true,
            Err(RecvError::Closed) => return,
        }
        // What else is already there goes in the same sync.
        loop {
            match events.try_recv() {
                Ok(event) => namespaces.extend(controller.wants(&event)),
                Err(TryRecvError::Lagged(_)) => everything = true,
                Err(TryRecvError::Empty | TryRecvError::Closed) => break,
            }
        }
        if everything {
            shared.store().sync_budgets(&mut controller, None);
        } else if !namespaces.is_empty() {
            shared
                .store()
                .sync_budgets(&mut controller, Some(&namespaces));
        }
    }
}

/// Accepts connections until shutdown, then waits (up to [`SHUTDOWN_GRACE`]) for them.
pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(stream, peer, shared.clone()));
                }
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            _ = shutdown_signal(shared.shutdown.clone()) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        connections.abort_all();
    }
}

/// How long a client may take to finish a TLS handshake.
pub(crate) const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

async fn connection(stream: TcpStream, peer: SocketAddr, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut first = [0u8; 1];
    let is_tls = matches!(stream.peek(&mut first).await, Ok(1) if first[0] == 0x16);
    let killer = Arc::new(Killer::default());
    let io = KillableIo {
        inner: stream,
        killer: killer.clone(),
    };
    if is_tls {
        let handshake =
            tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, shared.tls.acceptor.accept(io)).await;
        match handshake {
            Ok(Ok(tls)) => serve_io(TokioIo::new(tls), peer, shared, killer).await,
            Ok(Err(error)) => tracing::debug!(%error, %peer, "TLS handshake failed"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        }
    } else {
        serve_io(TokioIo::new(io), peer, shared, killer).await;
    }
}

async fn serve_io<I>(io: I, peer: SocketAddr, shared: Arc<Shared>, killer: Arc<Killer>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let service = {
        let shared = shared.clone();
        let killer = killer.clone();
        service_fn(move |req: Request<Incoming>| {
            let shared = shared.clone();
            let killer = killer.clone();
            async move { Ok::<_, Infallible>(handle(req, shared, peer, killer).await) }
        })
    };
    let conn = hyper::server::conn::http1::Builder::new()
        .keep_alive(true)
        .serve_connection(io, service);
    tokio::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(error) = result {
                tracing::debug!(%error, %peer, "connection ended with an error");
            }
        }
        _ = killer.killed() => {
            tracing::debug!(%peer, "connection dropped by a fault");
        }
        _ = shutdown_signal(shared.shutdown.clone()) => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = killer.killed() => {}
                _ = tokio::time::sleep(SHUTDOWN_GRACE) => {}
            }
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    peer: SocketAddr,
    killer: Arc<Killer>,
) -> Response<Body> {
    let path = req.uri().path();
    if path == ADMIN_PREFIX || path.starts_with(&format!("{ADMIN_PREFIX}/")) {
        return admin::handle(req, &shared, peer).await;
    }
    match filters::serve(req, &shared).await {
        filters::Outcome::Respond(resp) => resp,
        filters::Outcome::Drop => {
            killer.kill();
            // The connection task drops the connection; this future is dropped with it.
            std::future::pending::<Response<Body>>().await
        }
    }
}
