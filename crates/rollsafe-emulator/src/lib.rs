//! A Kubernetes API server emulator: the test substrate of rollsafe and the embedded cluster of
//! `rollsafe sandbox`.
//!
//! It serves, over plain HTTP on a loopback address, the resources rollsafe uses (namespaces,
//! Secrets, ConfigMaps, ServiceAccounts, Deployments, StatefulSets, DaemonSets, Leases, RBAC,
//! ExternalSecrets, token and access reviews) with the wire behaviour of a real kube-apiserver
//! where clients can tell: Status error bodies, paginated lists with opaque continue tokens,
//! 409/410/422 semantics, the four PATCH content types, watches, bearer-token authentication,
//! RBAC evaluated from stored objects, and impersonation. `kubectl` and the `kube` crate work
//! against it unchanged.
//!
//! On top of that it lets tests see and steer the server side: a request log, peak in-flight
//! counters per (verb, resource), recorded rollouts, and fault injection (error statuses, delays,
//! dropped connections before or after a write, list corruptions, concurrent edits, stalled
//! watches and requests).
//!
//! # In-process use
//!
//! ```no_run
//! use rollsafe_emulator::{Emulator, Fault, FaultAction};
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let emu = Emulator::builder()
//!     .seed_objects(vec![json!({
//!         "apiVersion": "v1", "kind": "Secret",
//!         "metadata": {"name": "db", "namespace": "shop"},
//!         "stringData": {"password": "hunter2"}
//!     })])
//!     .identity("alice", "alice-token", &["devs"])
//!     .start("127.0.0.1:0".parse()?)
//!     .await?;
//!
//! // Clients connect with emu.url() and a token, or through a kubeconfig:
//! emu.write_kubeconfig(std::path::Path::new("/tmp/kubeconfig"))?;
//!
//! // The 2nd PATCH of deployments/web in "shop" fails with 409.
//! emu.add_fault(
//!     Fault::on("patch", "deployments").namespace("shop").name("web").nth(2)
//!         .then(FaultAction::status(409)),
//! );
//!
//! // … run the code under test …
//!
//! let patches = emu.requests().into_iter().filter(|r| r.is("patch", "deployments")).count();
//! let peak = emu.peak_in_flight("patch", "deployments");
//! let rollouts = emu.rollouts();
//! # let _ = (patches, peak, rollouts);
//! emu.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! [`RunningEmulator`] dereferences to [`Handle`], a cheap clonable handle with every test
//! operation; the same operations are served over HTTP under `/_emulator/` (see
//! `docs/emulator.md`) for tests outside the process.
//!
//! # Identities
//!
//! Every emulator has an admin identity (user `system:admin`, group `system:masters`, token from
//! [`Handle::admin_token`]). Other identities are bearer tokens mapped to a user and groups;
//! what they may do is decided by RBAC objects (seeded, or created through the API). Requests
//! without a token are `system:anonymous`; a wrong token is a 401.
//!
//! # Fidelity notes
//!
//! - Continued list pages show the state of the first page, reconstructed from the watch
//!   history (a token older than the history is 410 Expired).
//! - Workload controllers are simulated, with real Pod objects: by default `status` follows
//!   `spec` in the same write (`observedGeneration == generation`, all replicas ready); with
//!   [`Handle::change_settings`] (`podReadyMillis`) rollouts take time, step by step as the
//!   real controllers take them, and [`FaultAction::RolloutFails`] makes a revision fail.
//! - Events expire [`EVENT_TTL`] after their last write; the request log and the rollout log
//!   keep the newest [`MAX_REQUEST_LOG`] and [`MAX_ROLLOUTS`] entries.
//! - What the emulator owes and what it deliberately does not: `docs/emulator.md`.
//!
//! # Layers
//!
//! This crate is the HTTP side (kube-apiserver's `endpoints`): shared state, the filter chain,
//! the verb handlers, discovery, the admin API and the server. It stands on
//! `rollsafe-emulator-registry` (store, strategies, field manager, simulated controllers, RBAC)
//! and `rollsafe-emulator-types` (resource metadata, routing, Status errors, decoding).

#![warn(missing_docs, unreachable_pub)]

mod admin;
mod discovery;
mod error;
mod faults;
mod filters;
mod handle;
mod handlers;
mod http_util;
mod observe;
mod server;
mod state;
mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::EmulatorError;
pub use faults::{Fault, FaultAction, FaultMatch, FaultState, ListCorruption};
pub use handle::{ADMIN_CONTEXT, ADMIN_USER, DEFAULT_NAMESPACES, Handle};
pub use handlers::list::ContinueToken;
pub use observe::{InFlightStat, RequestLogEntry};
pub use rollsafe_emulator_registry::controllers::rollout_log::MAX_ROLLOUTS;
pub use rollsafe_emulator_registry::controllers::rollout_sim::{RolloutPace, RolloutPaceChange};
pub use rollsafe_emulator_registry::identity::{Identity, MASTERS_GROUP};
pub use rollsafe_emulator_registry::nodes::NODES;
pub use rollsafe_emulator_registry::store::EVENT_TTL;
pub use rollsafe_emulator_registry::{EventType, Rollout};
pub use rollsafe_emulator_types::patch::{JsonPatchError, apply_json_patch};
pub use rollsafe_emulator_types::status::StatusError;
pub use state::{ADMIN_PREFIX, MAX_REQUEST_LOG};
pub use tls::TlsError;

use handle::{check_identity, load_base};
use observe::InFlight;
use rollsafe_emulator_registry::Cluster;
use rollsafe_emulator_types::util;
use state::Shared;

/// How often watches with `allowWatchBookmarks=true` get a bookmark, unless the builder says
/// otherwise (the real watch cache: about once a minute).
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Entry point: `Emulator::builder()`.
#[derive(Debug)]
pub struct Emulator;

impl Emulator {
    /// A builder with no seeds and no identities besides the admin.
    pub fn builder() -> EmulatorBuilder {
        EmulatorBuilder::default()
    }
}

/// Configures and starts an emulator.
#[derive(Debug, Default)]
pub struct EmulatorBuilder {
    seeds: Vec<Value>,
    identities: Vec<Identity>,
    admin_token: Option<String>,
    bookmark_interval: Option<Duration>,
    without_history: bool,
    event_ttl: Option<Duration>,
    watch_list: bool,
}

impl EmulatorBuilder {
    /// Objects created at start (and again on reset). Namespaces are created as needed; a
    /// namespaced object without a namespace goes to `default`.
    #[must_use]
    pub fn seed_objects(mut self, objects: impl IntoIterator<Item = Value>) -> Self {
        self.seeds.extend(objects);
        self
    }

    /// Objects from a multi-document YAML manifest.
    pub fn seed_yaml(mut self, text: &str) -> Result<Self, EmulatorError> {
        let manifest = rollsafe_manifest::Manifest::parse(text)?;
        self.seeds
            .extend(manifest.objects().map(|(_, v)| v.clone()));
        Ok(self)
    }

    /// A user: bearer `token` authenticates as `name` with `groups` (plus
    /// `system:authenticated`). RBAC decides what it may do.
    #[must_use]
    pub fn identity(mut self, name: &str, token: &str, groups: &[&str]) -> Self {
        self.identities.push(Identity::new(name, token, groups));
        self
    }

    /// Several identities.
    #[must_use]
    pub fn identities(mut self, identities: impl IntoIterator<Item = Identity>) -> Self {
        self.identities.extend(identities);
        self
    }

    /// The admin token (default: random).
    #[must_use]
    pub fn admin_token(mut self, token: &str) -> Self {
        self.admin_token = Some(token.to_string());
        self
    }

    /// Without the workload controllers' history objects (ReplicaSets, ControllerRevisions):
    /// for benchmarks that measure a client against the emulator, so every patch costs one
    /// write as before the history was simulated. `rollout history` and `undo` then have
    /// nothing to read.
    #[must_use]
    pub fn without_rollout_history(mut self) -> Self {
        self.without_history = true;
        self
    }

    /// How long an Event is kept after its last write (default one hour, kube-apiserver's
    /// `--event-ttl`); expired Events are deleted as etcd's leases expire them.
    #[must_use]
    pub fn event_ttl(mut self, ttl: Duration) -> Self {
        self.event_ttl = Some(ttl);
        self
    }

    /// The `WatchList` feature gate (streaming lists: a watch with `sendInitialEvents=true`).
    /// Off by default, as in kube-apiserver 1.33, whose release the emulator advertises: such a
    /// watch is refused with 422. On, as with `--feature-gates=WatchList=true` (and by default
    /// from 1.34): the current objects come as `ADDED` events, then a bookmark annotated
    /// `k8s.io/initial-events-end`, then the watch goes on.
    #[must_use]
    pub fn watch_list(mut self, enabled: bool) -> Self {
        self.watch_list = enabled;
        self
    }

    /// How often bookmarks are sent on watches that allow them.
    #[must_use]
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = Some(interval);
        self
    }

    /// Binds `addr` (loopback only; port 0 picks a free port), loads the seeds and starts
    /// serving in the background on the current tokio runtime.
    pub async fn start(self, addr: SocketAddr) -> Result<RunningEmulator, EmulatorError> {
        if !addr.ip().is_loopback() {
            return Err(EmulatorError::NotLoopback(addr));
        }
        let admin_token = self.admin_token.unwrap_or_else(util::token);
        let mut tokens = HashMap::new();
        tokens.insert(
            admin_token.clone(),
            Identity::new(ADMIN_USER, admin_token.clone(), &[MASTERS_GROUP]),
        );
        for identity in self.identities {
            check_identity(&identity, &tokens)?;
            tokens.insert(identity.token.clone(), identity);
        }
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| EmulatorError::Bind { addr, source })?;
        let bound = listener
            .local_addr()
            .map_err(|source| EmulatorError::Bind { addr, source })?;
        let tls = tls::Tls::generate()?;
        let mut store = Cluster::new();
        store.set_root_ca(tls.ca_pem.clone());
        store.set_rollout_history(!self.without_history);
        let event_ttl = self
            .event_ttl
            .unwrap_or(rollsafe_emulator_registry::store::EVENT_TTL);
        store.set_event_ttl(event_ttl);
        let rollout_waker = Arc::new(tokio::sync::Notify::new());
        store.set_rollout_waker(rollout_waker.clone());
        load_base(&mut store, &self.seeds)?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            store: Mutex::new(store),
            identities: RwLock::new(tokens),
            faults: Mutex::default(),
            log: Mutex::default(),
            next_seq: AtomicU64::new(0),
            inflight: Arc::new(InFlight::default()),
            seeds: self.seeds,
            started: Instant::now(),
            addr: bound,
            admin_token,
            bookmark_interval: self.bookmark_interval.unwrap_or(DEFAULT_BOOKMARK_INTERVAL),
            watch_list: self.watch_list,
            edit_counter: AtomicU64::new(0),
            shutdown: shutdown_rx,
            tls,
        });
        tokio::spawn(server::expire_events(shared.clone(), event_ttl));
        tokio::spawn(server::advance_rollouts(shared.clone(), rollout_waker));
        tokio::spawn(server::sync_disruption_budgets(shared.clone()));
        let task = tokio::spawn(server::accept_loop(listener, shared.clone()));
        tracing::info!(url = %format!("http://{bound}"), "emulator listening");
        Ok(RunningEmulator {
            handle: Handle { shared },
            shutdown_tx,
            task: Some(task),
        })
    }
}

/// A running emulator. Dereferences to its [`Handle`]. Dropping it stops the server (without
/// waiting); [`RunningEmulator::shutdown`] stops it and waits.
#[derive(Debug)]
pub struct RunningEmulator {
    handle: Handle,
    shutdown_tx: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

impl std::ops::Deref for RunningEmulator {
    type Target = Handle;

    fn deref(&self) -> &Handle {
        &self.handle
    }
}

impl RunningEmulator {
    /// A clonable handle, for moving into tasks.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Stops accepting, closes watches, and waits for open connections to finish (up to a
    /// few seconds).
    pub async fn shutdown(mut self) {
        let _ = self.shutdown_tx.send(true);
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningEmulator {
    fn drop(&mut self) {
        let _ = self.shutdown_tx.send(true);
    }
}
