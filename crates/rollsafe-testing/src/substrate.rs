//! The two substrates a suite runs on — the emulator and the real control plane — and a
//! namespace of its own on either ([`TestNamespace`], linkerd's `with_temp_ns` pattern).
//!
//! The real control plane is started once per test run by `cargo xtask test` (or by hand with
//! `cargo run -q -p rollsafe-testing --bin control-plane`), which hands its description to the
//! suites in [`CONTROL_PLANE_ENV`]. A suite asks what a substrate can do
//! ([`Substrate::capabilities`]) rather than branching on its name.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::{Scope, pinned_kind};
use rollsafe_emulator::{Emulator, RunningEmulator};
use rollsafe_kube::Connection;
use serde_json::Value;

use crate::control_plane::{ControlPlaneInfo, log_tails};
use crate::server_log::{self, ServerRequest};

/// The environment variable holding the shared control plane's description (the JSON line
/// `control-plane` prints).
pub const CONTROL_PLANE_ENV: &str = "ROLLSAFE_CONTROL_PLANE";

/// How many creates [`TestNamespace::apply`] keeps in flight (results in the objects'
/// order).
const CREATES_IN_FLIGHT: usize = 8;

/// The test users both substrates have, with their groups (alice in `devs`, bob in `ops`).
pub const USERS: [(&str, &str); 2] = [("alice", "devs"), ("bob", "ops")];

/// A substrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Substrate {
    /// The in-process emulator on `127.0.0.1:0`.
    Emulator,
    /// The real control plane built from Go modules, shared by the test run.
    Real,
}

/// What a substrate can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(clippy::struct_excessive_bools, reason = "independent capabilities")]
pub struct Capabilities {
    /// Injected faults (stalls, dropped events, 409 storms) and the emulator's admin API.
    pub faults: bool,
    /// A server-side log of every request (the real server's audit log holds the workload
    /// and Secret requests only: [`TestNamespace::server_requests`]).
    pub request_log: bool,
    /// Kubernetes' own workload controllers, scheduler and garbage collector.
    pub real_controllers: bool,
    /// Kubernetes' own authorizer (RBAC) and admission chain.
    pub real_authorizer: bool,
    /// Streaming lists (`sendInitialEvents`): off in the emulator by default (the `WatchList`
    /// gate of 1.33), on in the real 1.37 server.
    pub streaming_lists: bool,
}

impl Substrate {
    /// What this substrate can do.
    pub fn capabilities(self) -> Capabilities {
        match self {
            Self::Emulator => Capabilities {
                faults: true,
                request_log: true,
                real_controllers: false,
                real_authorizer: false,
                streaming_lists: false,
            },
            Self::Real => Capabilities {
                faults: false,
                request_log: false,
                real_controllers: true,
                real_authorizer: true,
                streaming_lists: true,
            },
        }
    }

    /// `emulator` or `real`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Emulator => "emulator",
            Self::Real => "real",
        }
    }
}

/// The shared real control plane's description, from [`CONTROL_PLANE_ENV`]. Panics with one
/// line saying how to start it when it is not there: a real-substrate test never passes
/// vacuously.
pub fn shared_control_plane() -> ControlPlaneInfo {
    let Some(text) = std::env::var_os(CONTROL_PLANE_ENV) else {
        panic!(
            "{CONTROL_PLANE_ENV} is not set: real-substrate tests run under `cargo xtask test`, which builds and starts the real control plane (it needs Go 1.26 at /usr/local/go)"
        );
    };
    serde_json::from_str(&text.to_string_lossy())
        .unwrap_or_else(|_| panic!("{CONTROL_PLANE_ENV} does not hold a control plane's JSON line"))
}

/// A namespace of a test's own on one substrate, created empty, with an admin connection, a
/// kubeconfig (contexts `admin`, `alice` and `bob`) and, on the emulator, the emulator itself.
/// On the real control plane the namespace is deleted by [`TestNamespace::finish`]; when a test
/// fails it is kept, and the tails of the components' logs are printed.
pub struct TestNamespace {
    /// The substrate.
    pub substrate: Substrate,
    /// The namespace's name.
    pub name: String,
    /// A connection as the kubeconfig's `admin` context.
    pub connection: Connection,
    /// The kubeconfig file (contexts `admin`, `alice` and `bob`).
    pub kubeconfig: PathBuf,
    client: kube::Client,
    resources: std::sync::Mutex<std::collections::HashMap<(String, String), (ApiResource, bool)>>,
    emu: Option<RunningEmulator>,
    logs: Option<PathBuf>,
    audit: Option<PathBuf>,
    /// A temporary directory for the test's files.
    pub dir: tempfile::TempDir,
}

/// A DNS-1123 label for a test: its name, shortened, and a per-process sequence number and
/// the process id, so that concurrent runs never share a namespace.
fn namespace_for(test: &str) -> String {
    static SEQUENCE: AtomicU32 = AtomicU32::new(0);
    let mut stem: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    stem.truncate(40);
    let stem = stem.trim_matches('-');
    format!(
        "t-{stem}-{}-{}",
        std::process::id(),
        SEQUENCE.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestNamespace {
    /// A new namespace for `test` on `substrate`.
    pub async fn create(substrate: Substrate, test: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (kubeconfig, emu, logs, audit) = match substrate {
            Substrate::Emulator => {
                let mut builder = Emulator::builder();
                for (user, group) in USERS {
                    builder = builder.identity(user, &format!("{user}-token"), &[group]);
                }
                let emu = builder
                    .start("127.0.0.1:0".parse().expect("a socket address"))
                    .await
                    .expect("the emulator starts");
                let kubeconfig = dir.path().join("kubeconfig");
                emu.write_kubeconfig(&kubeconfig)
                    .expect("the kubeconfig is written");
                (kubeconfig, Some(emu), None, None)
            }
            Substrate::Real => {
                let info = shared_control_plane();
                (info.kubeconfig, None, Some(info.logs), Some(info.audit))
            }
        };
        let connection = Connection::from_kubeconfig(Some(&kubeconfig), Some("admin"))
            .await
            .expect("a connection from the kubeconfig");
        let client = connection.client(None);
        let namespace = Self {
            substrate,
            name: namespace_for(test),
            connection,
            kubeconfig,
            client,
            resources: std::sync::Mutex::default(),
            emu,
            logs,
            audit,
            dir,
        };
        namespace
            .apply([serde_json::json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace.name, "labels": {"rollsafe.dev/test": "true"}}})])
            .await;
        namespace
    }

    /// What the substrate can do.
    pub fn capabilities(&self) -> Capabilities {
        self.substrate.capabilities()
    }

    /// The emulator, on the emulator substrate.
    pub fn emulator(&self) -> Option<&RunningEmulator> {
        self.emu.as_ref()
    }

    /// An admin client.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A connection as `context` of the kubeconfig (`admin`, `alice`, `bob`).
    pub async fn connection_as(&self, context: &str) -> Connection {
        Connection::from_kubeconfig(Some(&self.kubeconfig), Some(context))
            .await
            .expect("a connection from the kubeconfig")
    }

    /// The API resource of an object's `apiVersion` and `kind`, and whether it is namespaced.
    async fn resource(&self, object: &Value) -> (ApiResource, bool) {
        let api_version = object["apiVersion"].as_str().expect("an apiVersion");
        let kind = object["kind"].as_str().expect("a kind");
        let key = (api_version.to_owned(), kind.to_owned());
        if let Some(found) = self
            .resources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
        {
            return found.clone();
        }
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = pinned_kind(&self.client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{api_version} {kind} is not served: {e}"));
        let found = (resource, capabilities.scope == Scope::Namespaced);
        self.resources
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, found.clone());
        found
    }

    /// The dynamic API for an object of the same `apiVersion` and `kind` as `object`, in this
    /// namespace when the kind is namespaced.
    pub async fn api_for(&self, object: &Value) -> Api<DynamicObject> {
        let (resource, namespaced) = self.resource(object).await;
        if namespaced {
            Api::namespaced_with(self.client.clone(), &self.name, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        }
    }

    /// Creates each object, namespaced ones in this namespace (whatever namespace they name),
    /// and returns them as stored.
    pub async fn apply(&self, objects: impl IntoIterator<Item = Value>) -> Vec<Value> {
        use futures::StreamExt as _;
        futures::stream::iter(objects)
            .map(|object| self.create_one(object))
            .buffered(CREATES_IN_FLIGHT)
            .collect()
            .await
    }

    async fn create_one(&self, mut object: Value) -> Value {
        let (_, namespaced) = self.resource(&object).await;
        if namespaced {
            object["metadata"]["namespace"] = Value::String(self.name.clone());
        }
        let api = self.api_for(&object).await;
        let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
        let created = api
            .create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|e| panic!("creating {}: {e}", describe(&object)));
        serde_json::to_value(created).expect("an object")
    }

    /// The Events of this namespace about object `name` with `reason`, as stored.
    pub async fn events(&self, name: &str, reason: &str) -> Vec<Value> {
        let probe = serde_json::json!({"apiVersion": "v1", "kind": "Event"});
        self.api_for(&probe)
            .await
            .list(&kube::api::ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing Events: {e}"))
            .items
            .into_iter()
            .map(|e| serde_json::to_value(e).expect("an Event"))
            .filter(|e| e["reason"] == reason && e["involvedObject"]["name"] == name)
            .collect()
    }

    /// The names of this namespace's pods that are Ready and not being deleted.
    pub async fn ready_pods(&self) -> std::collections::BTreeSet<String> {
        let api: Api<k8s_openapi::api::core::v1::Pod> =
            Api::namespaced(self.client.clone(), &self.name);
        api.list(&kube::api::ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing pods: {e}"))
            .items
            .into_iter()
            .filter(|pod| {
                pod.metadata.deletion_timestamp.is_none()
                    && pod
                        .status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .filter_map(|pod| pod.metadata.name)
            .collect()
    }

    /// The object of `api_version`, `kind` and `name` in this namespace (or cluster-scoped),
    /// as stored, if it exists.
    pub async fn get(&self, api_version: &str, kind: &str, name: &str) -> Option<Value> {
        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind});
        let api = self.api_for(&probe).await;
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("reading {kind} {name}: {e}"))
            .map(|o| serde_json::to_value(o).expect("an object"))
    }

    /// Creates each object as [`TestNamespace::apply`] does, then waits until every
    /// Deployment, StatefulSet and DaemonSet among them is at rest ([`at_rest`]): on a real
    /// server a workload's controller writes its status for a moment after it is created, and
    /// each write changes the resourceVersion a restart's patch tests.
    pub async fn apply_at_rest(&self, objects: impl IntoIterator<Item = Value>) -> Vec<Value> {
        let stored = self.apply(objects).await;
        self.wait_all_at_rest().await;
        stored
    }

    /// Waits until workload `kind`/`name` is [`at_rest`] and its resourceVersion did not move
    /// between two reads.
    pub async fn wait_at_rest(&self, kind: &str, name: &str) {
        self.wait_until_at_rest(&[kind], Some(name)).await;
    }

    /// Waits until every Deployment, StatefulSet and DaemonSet in the namespace is
    /// [`at_rest`] and none moved between two rounds of lists.
    pub async fn wait_all_at_rest(&self) {
        self.wait_until_at_rest(&["Deployment", "StatefulSet", "DaemonSet"], None)
            .await;
    }

    async fn wait_until_at_rest(&self, kinds: &[&str], name: Option<&str>) {
        let timeout = Duration::from_secs(90);
        let deadline = tokio::time::Instant::now() + timeout;
        let mut previous: Option<Vec<Value>> = None;
        loop {
            let mut objects = Vec::new();
            for kind in kinds {
                let api = self
                    .api_for(&serde_json::json!({"apiVersion": "apps/v1", "kind": kind}))
                    .await;
                let list = api
                    .list(&kube::api::ListParams::default())
                    .await
                    .unwrap_or_else(|e| panic!("listing {kind}: {e}"));
                objects.extend(
                    list.items
                        .into_iter()
                        .map(|o| {
                            let mut v = serde_json::to_value(o).expect("an object");
                            v["kind"] = Value::String((*kind).to_owned());
                            v
                        })
                        .filter(|v| name.is_none_or(|n| v["metadata"]["name"] == n)),
                );
            }
            let versions: Vec<Value> = objects
                .iter()
                .map(|o| o["metadata"]["resourceVersion"].clone())
                .collect();
            let resting = objects.iter().all(at_rest) && (name.is_none() || !objects.is_empty());
            if resting && previous.as_ref() == Some(&versions) {
                return;
            }
            previous = Some(versions);
            if tokio::time::Instant::now() >= deadline {
                let restless: Vec<String> = objects
                    .iter()
                    .filter(|o| !at_rest(o))
                    .map(|o| format!("{} {}", describe(o), o["status"]))
                    .collect();
                panic!("workloads at rest: not within {timeout:?}: {restless:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The requests in this namespace the server recorded: the emulator's request log, or the
    /// real API server's audit log (workload and Secret requests; [`crate::control_plane`]).
    /// Either records a request once its answer is complete.
    pub fn server_requests(&self) -> Vec<ServerRequest> {
        let all = match (&self.emu, &self.audit) {
            (Some(emu), _) => server_log::from_emulator(&emu.requests()),
            (None, Some(audit)) => server_log::from_audit_log(audit),
            (None, None) => Vec::new(),
        };
        all.into_iter()
            .filter(|r| r.namespace.as_deref() == Some(self.name.as_str()))
            .collect()
    }

    /// Deletes the namespace on the real control plane (everything in it goes with it); the
    /// emulator simply stops.
    pub async fn finish(self) {
        if self.substrate == Substrate::Real {
            let api: Api<DynamicObject> = Api::all_with(
                self.client.clone(),
                &ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&()),
            );
            let _ = api.delete(&self.name, &DeleteParams::default()).await;
        }
    }
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Some(logs) = &self.logs
        {
            eprintln!(
                "namespace {} on the real control plane is kept; the components' logs end with:\n{}",
                self.name,
                log_tails(logs, 20)
            );
        }
    }
}

/// Whether a workload's controller has caught up with its spec: it observed the current
/// generation and every replica runs the current template (a paused Deployment, or a
/// StatefulSet or DaemonSet that updates `OnDelete`, once observed).
pub fn at_rest(object: &Value) -> bool {
    let status = &object["status"];
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
    if status["observedGeneration"].as_i64().unwrap_or(-1) < generation {
        return false;
    }
    let n = |field: &str| status[field].as_i64().unwrap_or(0);
    let spec = &object["spec"];
    let replicas = spec["replicas"].as_i64().unwrap_or(1);
    match object["kind"].as_str().unwrap_or_default() {
        "Deployment" => {
            spec["paused"].as_bool() == Some(true)
                || (n("updatedReplicas") == replicas
                    && n("availableReplicas") == replicas
                    && n("replicas") == replicas)
        }
        "StatefulSet" => n("readyReplicas") == replicas && n("replicas") == replicas,
        _ => n("numberReady") == n("desiredNumberScheduled"),
    }
}

fn describe(object: &Value) -> String {
    format!(
        "{} {}",
        object["kind"].as_str().unwrap_or("object"),
        object["metadata"]["name"].as_str().unwrap_or("")
    )
}

/// Polls `check` every 100 ms until it gives `Some`, for at most `timeout`; panics naming
/// `what` when it never does.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match crate::poll::poll_until(timeout, Duration::from_millis(100), check).await {
        Some(value) => value,
        None => panic!("{what}: not within {timeout:?}"),
    }
}

/// Generates, for each scenario, a module with one test per substrate: `on_emulator` and
/// `on_real`, each in a namespace of its own ([`TestNamespace`]). Filter a run with
/// `on_real` or `on_emulator`.
///
/// ```ignore
/// rollsafe_testing::on_both_substrates! {
///     /// What the scenario proves.
///     async fn rolls_each_consumer(ns) {
///         ns.apply([...]).await;
///     }
/// }
/// ```
#[macro_export]
macro_rules! on_both_substrates {
    ($( $(#[$meta:meta])* async fn $name:ident($ns:ident) $body:block )*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn scenario($ns: &$crate::TestNamespace) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_emulator() {
                let ns = $crate::TestNamespace::create($crate::Substrate::Emulator, stringify!($name)).await;
                scenario(&ns).await;
                ns.finish().await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_real() {
                let ns = $crate::TestNamespace::create($crate::Substrate::Real, stringify!($name)).await;
                scenario(&ns).await;
                ns.finish().await;
            }
        }
    )*};
}
