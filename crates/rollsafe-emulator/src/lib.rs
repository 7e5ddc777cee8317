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
mod faults;
mod filters;
mod handlers;
mod http_util;
mod observe;
mod server;
mod state;
mod tls;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use faults::{Fault, FaultAction, FaultMatch, FaultState, ListCorruption};
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

use observe::InFlight;
use rollsafe_emulator_registry::Cluster;
use rollsafe_emulator_types::{resources, util};
use state::Shared;

/// The user name of the admin identity.
pub const ADMIN_USER: &str = "system:admin";
/// The kubeconfig context (and user entry) of the admin identity.
pub const ADMIN_CONTEXT: &str = "admin";
/// How often watches with `allowWatchBookmarks=true` get a bookmark, unless the builder says
/// otherwise (the real watch cache: about once a minute).
pub const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// Namespaces every emulator starts with.
pub const DEFAULT_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// Errors of the emulator's library API.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The listen address is not a loopback address.
    #[error("the emulator listens on loopback addresses only, not {0}")]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// A seed manifest did not parse.
    #[error("seed manifest: {0}")]
    Manifest(#[from] rollsafe_manifest::ManifestError),
    /// A seed object was refused.
    #[error("seed object {index} ({kind} {name:?}): {source}")]
    Seed {
        /// 0-based position among the seed objects.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        source: Box<StatusError>,
    },
    /// A settings change was refused.
    #[error("{0}")]
    Settings(String),
    /// An identity is invalid (reserved name, duplicate token, empty token).
    #[error("identity {name:?}: {reason}")]
    Identity {
        /// Identity name.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The resource plural is not served.
    #[error("unknown resource {0:?}")]
    UnknownResource(String),
    /// A write was refused, as the API would refuse it.
    #[error("{0}")]
    Api(Box<StatusError>),
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl From<StatusError> for EmulatorError {
    fn from(e: StatusError) -> Self {
        Self::Api(Box::new(e))
    }
}

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

fn check_identity(
    identity: &Identity,
    tokens: &HashMap<String, Identity>,
) -> Result<(), EmulatorError> {
    let fail = |reason| {
        Err(EmulatorError::Identity {
            name: identity.name.clone(),
            reason,
        })
    };
    if identity.name.is_empty() {
        return fail("the name is empty");
    }
    if identity.name == ADMIN_CONTEXT || identity.name == ADMIN_USER {
        return fail("the name is reserved for the admin identity");
    }
    if identity.token.is_empty() {
        return fail("the token is empty");
    }
    if tokens.contains_key(&identity.token) {
        return fail("the token is already in use");
    }
    if tokens.values().any(|i| i.name == identity.name) {
        return fail("the name is already in use");
    }
    Ok(())
}

fn load_base(store: &mut Cluster, seeds: &[Value]) -> Result<(), EmulatorError> {
    for ns in DEFAULT_NAMESPACES {
        store.ensure_namespace(ns)?;
    }
    for obj in rollsafe_emulator_registry::authorizer::bootstrap_objects() {
        store.upsert(obj)?;
    }
    for (index, obj) in seeds.iter().enumerate() {
        store
            .upsert(obj.clone())
            .map_err(|source| EmulatorError::Seed {
                index,
                kind: obj
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name: obj
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                source: Box::new(source),
            })?;
    }
    Ok(())
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

/// Test-side access to a running emulator: the in-process equivalent of the admin API.
#[derive(Debug, Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

fn resource_id(plural: &str) -> Result<resources::ResId, EmulatorError> {
    resources::find_plural(plural).ok_or_else(|| EmulatorError::UnknownResource(plural.to_string()))
}

/// Tokens made by TokenRequest authenticate ServiceAccounts; they are not configured
/// identities (no kubeconfig entry, not listed).
fn is_service_account_token(identity: &Identity) -> bool {
    identity.name.starts_with("system:serviceaccount:")
}

fn yaml_str(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

impl Handle {
    /// `http://127.0.0.1:<port>`: plain HTTP (the kube crate sends tokens over it).
    pub fn url(&self) -> String {
        format!("http://{}", self.shared.addr)
    }

    /// `https://127.0.0.1:<port>`: the same port with TLS, verified with [`Handle::ca_pem`].
    /// kubectl needs it: client-go sends no credentials to an `http://` server.
    pub fn https_url(&self) -> String {
        format!("https://{}", self.shared.addr)
    }

    /// The PEM of the CA that signed the emulator's server certificate.
    pub fn ca_pem(&self) -> &str {
        &self.shared.tls.ca_pem
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// The token of the admin identity (`system:admin`, group `system:masters`).
    pub fn admin_token(&self) -> &str {
        &self.shared.admin_token
    }

    /// Names of the configured identities (without the admin), sorted.
    pub fn identity_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|i| i.name != ADMIN_USER && !is_service_account_token(i))
            .map(|i| i.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The token of an identity (`"admin"` or [`ADMIN_USER`] for the admin).
    pub fn token_for(&self, name: &str) -> Option<String> {
        let wanted = if name == ADMIN_CONTEXT {
            ADMIN_USER
        } else {
            name
        };
        self.shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .find(|i| i.name == wanted)
            .map(|i| i.token.clone())
    }

    /// Adds an identity while running.
    pub fn add_identity(&self, identity: Identity) -> Result<(), EmulatorError> {
        let mut map = self
            .shared
            .identities
            .write()
            .unwrap_or_else(|e| e.into_inner());
        check_identity(&identity, &map)?;
        map.insert(identity.token.clone(), identity);
        Ok(())
    }

    /// A kubeconfig with one cluster (the `https://` URL and the CA), a user and a context per
    /// identity (named after it), and the context `admin` (current) for the admin identity.
    /// Namespace of every context: `default`.
    pub fn kubeconfig_yaml(&self) -> String {
        let mut entries: Vec<(String, String)> =
            vec![(ADMIN_CONTEXT.to_string(), self.shared.admin_token.clone())];
        let mut others: Vec<(String, String)> = self
            .shared
            .identities
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .filter(|i| i.name != ADMIN_USER && !is_service_account_token(i))
            .map(|i| (i.name.clone(), i.token.clone()))
            .collect();
        others.sort();
        entries.extend(others);
        let mut out = String::new();
        out.push_str("apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n");
        out.push_str(&format!("    server: {}\n", yaml_str(&self.https_url())));
        out.push_str(&format!(
            "    certificate-authority-data: {}\n",
            yaml_str(&base64::engine::general_purpose::STANDARD.encode(self.ca_pem()))
        ));
        out.push_str("contexts:\n");
        for (name, _) in &entries {
            out.push_str(&format!(
                "- name: {n}\n  context:\n    cluster: emulator\n    user: {n}\n    namespace: default\n",
                n = yaml_str(name)
            ));
        }
        out.push_str(&format!(
            "current-context: {}\nusers:\n",
            yaml_str(ADMIN_CONTEXT)
        ));
        for (name, token) in &entries {
            out.push_str(&format!(
                "- name: {}\n  user:\n    token: {}\n",
                yaml_str(name),
                yaml_str(token)
            ));
        }
        out.push_str("preferences: {}\n");
        out
    }

    /// Writes [`Handle::kubeconfig_yaml`] to a file (mode 0600 on Unix).
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), EmulatorError> {
        let write_err = |source| EmulatorError::Write {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(path, self.kubeconfig_yaml()).map_err(write_err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(write_err)?;
        }
        Ok(())
    }

    /// Registers a fault; returns its id.
    pub fn add_fault(&self, fault: Fault) -> u64 {
        self.shared.faults().add(fault)
    }

    /// Removes a fault; whether it existed.
    pub fn remove_fault(&self, id: u64) -> bool {
        self.shared.faults().remove(id)
    }

    /// Removes all faults.
    pub fn clear_faults(&self) {
        self.shared.faults().clear();
    }

    /// Registered faults with their counters.
    pub fn faults(&self) -> Vec<FaultState> {
        self.shared.faults().list()
    }

    /// The request log (API requests only, not the admin API), in arrival order.
    pub fn requests(&self) -> Vec<RequestLogEntry> {
        let mut entries: Vec<RequestLogEntry> = self.shared.log().iter().cloned().collect();
        entries.sort_by_key(|e| e.seq);
        entries
    }

    /// Log entries of one verb on one resource (`"deployments"`, `"deployments/scale"`).
    pub fn requests_for(&self, verb: &str, resource: &str) -> Vec<RequestLogEntry> {
        self.requests()
            .into_iter()
            .filter(|e| e.is(verb, resource))
            .collect()
    }

    /// Empties the request log.
    pub fn clear_requests(&self) {
        self.shared.log().clear();
    }

    /// Polls the request log until an entry satisfies `pred` or `timeout` passes.
    pub async fn wait_for_request(
        &self,
        timeout: Duration,
        pred: impl Fn(&RequestLogEntry) -> bool,
    ) -> Option<RequestLogEntry> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(e) = self.requests().into_iter().find(|e| pred(e)) {
                return Some(e);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The most requests of one verb on one resource ever handled at once (since the last
    /// reset). Watches count only while their request is being set up.
    pub fn peak_in_flight(&self, verb: &str, resource: &str) -> u32 {
        self.shared.inflight.peak(verb, resource)
    }

    /// All in-flight counters.
    pub fn in_flight(&self) -> Vec<InFlightStat> {
        self.shared.inflight.stats()
    }

    /// Resets the peaks.
    pub fn reset_in_flight(&self) {
        self.shared.inflight.reset();
    }

    /// Recorded rollouts (pod-template changes of workloads), in order.
    pub fn rollouts(&self) -> Vec<Rollout> {
        self.shared.store().rollouts()
    }

    /// Forgets recorded rollouts.
    pub fn clear_rollouts(&self) {
        self.shared.store().clear_rollouts();
    }

    /// How the simulated cluster paces rollouts.
    pub fn settings(&self) -> RolloutPace {
        self.shared.store().rollout_settings()
    }

    /// Changes the settings the change names (the others stay); the new settings, or why the
    /// change is refused (a `progressDeadlineScale` that is not a number above 0).
    pub fn change_settings(&self, change: RolloutPaceChange) -> Result<RolloutPace, EmulatorError> {
        let mut store = self.shared.store();
        let settings = store
            .rollout_settings()
            .with(change)
            .map_err(EmulatorError::Settings)?;
        store.set_rollout_settings(settings);
        Ok(settings)
    }

    /// Back to the start state: objects from the seeds, no faults, empty request log, no
    /// rollouts, default settings, peaks reset. Identities and the resourceVersion counter are
    /// kept.
    pub fn reset(&self) -> Result<(), EmulatorError> {
        {
            let mut store = self.shared.store();
            store.clear();
            load_base(&mut store, &self.shared.seeds)?;
            store.clear_rollouts();
        }
        self.clear_faults();
        self.clear_requests();
        self.reset_in_flight();
        Ok(())
    }

    /// Every continue token issued so far becomes expired (410 on use).
    pub fn expire_continue_tokens(&self) {
        self.shared.store().expire_continue_tokens();
    }

    /// Expires continue tokens and forgets the watch history (watches from an older
    /// resourceVersion get a 410 ERROR event).
    pub fn compact(&self) {
        self.shared.store().compact();
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store().current_rv()
    }

    /// One object, by resource plural (`"deployments"`), namespace (`None` for cluster-scoped)
    /// and name. Bypasses authorization and faults.
    pub fn get_object(&self, resource: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let res = resources::find_plural(resource)?;
        self.shared
            .store()
            .get(res, namespace.unwrap_or(""), name)
            .map(|o| (**o).clone())
    }

    /// Objects of a resource, in one namespace or all, in key order.
    pub fn list_objects(&self, resource: &str, namespace: Option<&str>) -> Vec<Value> {
        let Some(res) = resources::find_plural(resource) else {
            return Vec::new();
        };
        self.shared
            .store()
            .range(res, namespace, None)
            .map(|(_, o)| (**o).clone())
            .collect()
    }

    /// Creates or replaces an object (by `apiVersion`/`kind`), without a resourceVersion
    /// check; namespaces are created as needed. Goes through the same write path as the API
    /// (uid, resourceVersion, generation, rollouts, watch events, validation).
    pub fn put_object(&self, object: Value) -> Result<Value, EmulatorError> {
        Ok((*self.shared.store().upsert(object)?).clone())
    }

    /// Deletes an object.
    pub fn delete_object(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), EmulatorError> {
        let res = resource_id(resource)?;
        self.shared.store().delete(
            res,
            namespace.unwrap_or(""),
            name,
            &rollsafe_emulator_registry::store::Preconditions::default(),
        )?;
        Ok(())
    }

    /// A ready-made object for tests: a Deployment with one container that references
    /// nothing, labelled and selected by `app=<name>`.
    pub fn sample_deployment(namespace: &str, name: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}
                }
            }
        })
    }
}
