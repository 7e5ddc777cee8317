//! The HTTP server: a custom accept loop over hyper, so that a fault can really close a
//! client's TCP connection (with a reset) before or after a request is applied.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::faults::FaultTable;
use crate::identity::Identity;
use crate::observe::{InFlight, RequestLogEntry};
use crate::registry::Store;
use crate::{admin, filters, util};

/// Response body type.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// How long shutdown waits for open connections before closing them.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The path prefix reserved for the admin API.
pub const ADMIN_PREFIX: &str = "/_emulator";

/// State shared by all connections and the in-process handle.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The objects.
    pub store: Mutex<Store>,
    /// Bearer token → identity.
    pub identities: RwLock<HashMap<String, Identity>>,
    /// Registered faults.
    pub faults: Mutex<FaultTable>,
    /// The request log.
    pub log: Mutex<Vec<RequestLogEntry>>,
    /// Next request sequence number.
    pub next_seq: AtomicU64,
    /// In-flight counters.
    pub inflight: Arc<InFlight>,
    /// Seed objects, re-applied by reset.
    pub seeds: Vec<Value>,
    /// Start instant (request-log microsecond clock).
    pub started: Instant,
    /// Bound address.
    pub addr: SocketAddr,
    /// The admin (system:masters) token.
    pub admin_token: String,
    /// Interval of watch bookmarks.
    pub bookmark_interval: Duration,
    /// Counter for default concurrent-edit annotations.
    pub edit_counter: AtomicU64,
    /// Becomes true on shutdown.
    pub shutdown: watch::Receiver<bool>,
    /// TLS material for `https://` connections on the same port.
    pub tls: crate::tls::Tls,
}

impl Shared {
    /// Locks the store (a poisoned lock is recovered: the store has no invariants a panic can
    /// half-break that matter to a test server).
    pub(crate) fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the fault table.
    pub(crate) fn faults(&self) -> MutexGuard<'_, FaultTable> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the request log.
    pub(crate) fn log(&self) -> MutexGuard<'_, Vec<RequestLogEntry>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Microseconds since start.
    pub(crate) fn micros(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The identity a token belongs to.
    pub(crate) fn identity_for_token(&self, token: &str) -> Option<Identity> {
        self.identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(token)
            .cloned()
    }

    /// A new request-log entry, stamped with its start time.
    pub(crate) fn new_entry(&self, method: &str, path: &str, query: &str) -> RequestLogEntry {
        RequestLogEntry {
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed) + 1,
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            content_type: None,
            accept: None,
            verb: None,
            resource: None,
            namespace: None,
            name: None,
            user: None,
            groups: Vec::new(),
            impersonated_user: None,
            impersonated_groups: Vec::new(),
            impersonated_uid: None,
            status: 0,
            faults: Vec::new(),
            start: util::now_precise(),
            end: String::new(),
            start_micros: self.micros(),
            end_micros: 0,
            body: None,
        }
    }

    /// Starts the log entry of a request that reached the server. It is stored when the
    /// returned guard drops, whichever way the request ends: with the status set by
    /// [`PendingEntry::set_status`], or 0 when it was abandoned (the client hung up, or a
    /// fault dropped the connection) before an answer.
    pub(crate) fn begin_entry(
        self: &Arc<Self>,
        method: &str,
        path: &str,
        query: &str,
    ) -> PendingEntry {
        PendingEntry {
            entry: self.new_entry(method, path, query),
            status: 0,
            shared: self.clone(),
        }
    }

    /// Stamps the end time and stores the entry.
    pub(crate) fn finish_entry(&self, mut entry: RequestLogEntry, status: u16) {
        entry.status = status;
        entry.end = util::now_precise();
        entry.end_micros = self.micros();
        self.log().push(entry);
    }
}

/// A request-log entry in the making; stored when dropped (see [`Shared::begin_entry`]).
#[derive(Debug)]
pub(crate) struct PendingEntry {
    /// The entry, filled in as the request is handled.
    pub entry: RequestLogEntry,
    status: u16,
    shared: Arc<Shared>,
}

impl PendingEntry {
    /// The status the client is sent (a response head is ready).
    pub(crate) fn set_status(&mut self, status: u16) {
        self.status = status;
    }
}

impl Drop for PendingEntry {
    fn drop(&mut self) {
        let entry = std::mem::take(&mut self.entry);
        self.shared.finish_entry(entry, self.status);
    }
}

/// Closes a connection on demand.
#[derive(Debug, Default)]
pub(crate) struct Killer {
    notify: Notify,
    killed: AtomicBool,
}

impl Killer {
    /// Marks the connection for a reset and wakes its task, which drops it.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::SeqCst);
        self.notify.notify_one();
    }
}

/// A TCP stream that resets (SO_LINGER 0) instead of closing gracefully when killed.
struct KillableIo {
    inner: TcpStream,
    killer: Arc<Killer>,
}

impl Drop for KillableIo {
    fn drop(&mut self) {
        if self.killer.killed.load(Ordering::SeqCst) {
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

/// Resolves once shutdown is requested (or the emulator handle is gone).
pub(crate) async fn shutdown_signal(mut rx: watch::Receiver<bool>) {
    loop {
        if *rx.borrow_and_update() {
            return;
        }
        if rx.changed().await.is_err() {
            return;
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
        _ = killer.notify.notified() => {
            tracing::debug!(%peer, "connection dropped by a fault");
        }
        _ = shutdown_signal(shared.shutdown.clone()) => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = killer.notify.notified() => {}
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
