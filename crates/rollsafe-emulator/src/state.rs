//! What every layer of the HTTP side shares: the emulator's state (store, identities, faults,
//! request log, in-flight counters), the response body type, and the shutdown signal. It
//! imports no filter, handler or the server that dispatches to them.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use rollsafe_emulator_registry::Cluster;
use rollsafe_emulator_registry::identity::Identity;
use rollsafe_emulator_types::util;
use serde_json::Value;
use tokio::sync::{Notify, watch};

use crate::faults::FaultTable;
use crate::observe::{InFlight, RequestLogEntry};

/// Entries the request log keeps (the newest; their `seq` keeps counting), so a long sandbox
/// session or load run does not grow without end.
pub const MAX_REQUEST_LOG: usize = 100_000;

/// Response body type.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// The path prefix reserved for the admin API.
pub const ADMIN_PREFIX: &str = "/_emulator";

/// State shared by all connections and the in-process handle.
#[derive(Debug)]
pub(crate) struct Shared {
    /// The objects.
    pub store: Mutex<Cluster>,
    /// Bearer token → identity.
    pub identities: RwLock<HashMap<String, Identity>>,
    /// Registered faults.
    pub faults: Mutex<FaultTable>,
    /// The request log.
    pub log: Mutex<VecDeque<RequestLogEntry>>,
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
    /// The `WatchList` feature gate: streaming lists are served.
    pub watch_list: bool,
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
    pub(crate) fn store(&self) -> MutexGuard<'_, Cluster> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the fault table.
    pub(crate) fn faults(&self) -> MutexGuard<'_, FaultTable> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Locks the request log.
    pub(crate) fn log(&self) -> MutexGuard<'_, VecDeque<RequestLogEntry>> {
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
            user_agent: None,
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
            body_base64: None,
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
        let mut log = self.log();
        if log.len() == MAX_REQUEST_LOG {
            log.pop_front();
        }
        log.push_back(entry);
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

    /// Whether [`Killer::kill`] was called.
    pub(crate) fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Resolves once [`Killer::kill`] is called.
    pub(crate) async fn killed(&self) {
        self.notify.notified().await;
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
