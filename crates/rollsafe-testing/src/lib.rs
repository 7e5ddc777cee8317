//! Test support for rollsafe's test suites and benchmarks (never published): the two
//! substrates — the emulator and a real control plane ([`control_plane`]) — and a namespace of
//! a test's own on either ([`TestNamespace`], [`on_both_substrates!`]); a [`TestCluster`]
//! (an in-process emulator, its kubeconfig on disk and a connection from it) and builders for
//! the objects the suites seed ([`Workload`], [`secret`], [`rbac_for_group`]), and where the
//! real `kubectl` the suites read back through is ([`kubectl`]).
//!
//! Set-up failures panic with a message: this crate is only used where a panic is a failed test.

#![warn(missing_docs, unreachable_pub)]
#![expect(clippy::expect_used, reason = "a failed set-up is a failed test")]

pub mod control_plane;
pub mod http;
mod objects;
pub mod operator;
mod poll;
mod server_log;
mod substrate;

pub use objects::{Source, Workload, secret_key_ref};
pub use server_log::{ServerRequest, peak_overlap};

pub use substrate::{
    CONTROL_PLANE_ENV, Capabilities, Substrate, TestNamespace, USERS, at_rest, eventually,
    shared_control_plane,
};

use std::path::PathBuf;

use rollsafe_emulator::{Emulator, EmulatorBuilder, RunningEmulator};
use rollsafe_kube::Connection;
use serde_json::{Value, json};

/// An emulator on 127.0.0.1:0 with `seeds`, its kubeconfig in a temporary directory, and a
/// connection from that kubeconfig (context `admin`, the current one). Dropping it removes the
/// directory; a suite that keeps its own parts destructures it.
pub struct TestCluster {
    /// The emulator.
    pub emu: RunningEmulator,
    /// A connection as the kubeconfig's `admin` context.
    pub connection: Connection,
    /// The kubeconfig file (contexts `admin` and the emulator's identities).
    pub kubeconfig: PathBuf,
    /// The temporary directory the kubeconfig is in, for other files of the test.
    pub dir: tempfile::TempDir,
}

impl TestCluster {
    /// Starts the emulator with `seeds` and connects to it.
    pub async fn start(seeds: Vec<Value>) -> Self {
        Self::start_with(Emulator::builder().seed_objects(seeds)).await
    }

    /// Starts the emulator `builder` describes (seeds, identities, faults …) and connects to
    /// it.
    pub async fn start_with(builder: EmulatorBuilder) -> Self {
        let emu = builder
            .start("127.0.0.1:0".parse().expect("a socket address"))
            .await
            .expect("the emulator starts");
        Self::connect(emu).await
    }

    /// Starts the emulator `builder` describes on `runtime`, so that its tasks run on that
    /// runtime's threads and not the caller's — as a separate API server process would — and
    /// connects to it from the caller's runtime.
    pub async fn start_on(runtime: &tokio::runtime::Handle, builder: EmulatorBuilder) -> Self {
        let emu = runtime
            .spawn(builder.start("127.0.0.1:0".parse().expect("a socket address")))
            .await
            .expect("the emulator's start task")
            .expect("the emulator starts");
        Self::connect(emu).await
    }

    /// The kubeconfig and connection for a started emulator.
    async fn connect(emu: RunningEmulator) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig)
            .expect("the kubeconfig is written");
        let connection = Connection::from_kubeconfig(Some(&kubeconfig), Some("admin"))
            .await
            .expect("a connection from the kubeconfig");
        Self {
            emu,
            connection,
            kubeconfig,
            dir,
        }
    }
}

/// An Opaque Secret `name` in `namespace` with one key, `password`, holding `value`.
pub fn secret(namespace: &str, name: &str, value: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace},
        "stringData": {"password": value}
    })
}

/// Role and RoleBinding `restarter` in `namespace` letting group `group` list and patch the
/// three workload kinds, and get Secrets when `read_secrets`.
pub fn rbac_for_group(namespace: &str, group: &str, read_secrets: bool) -> Vec<Value> {
    let mut rules = vec![json!({"apiGroups": ["apps"],
               "resources": ["deployments", "statefulsets", "daemonsets"],
               "verbs": ["list", "patch"]})];
    if read_secrets {
        rules.push(json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}));
    }
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "restarter", "namespace": namespace},
            "rules": rules
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "restarter", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "restarter"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
        }),
    ]
}

/// kubectl: `$KUBECTL`, else on `PATH`, else the Cloud SDK's. `None` (saying why) when absent
/// and `CI` is not set; under `CI` a missing kubectl fails the test.
pub fn kubectl() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("KUBECTL").map(PathBuf::from)
        && path.is_file()
    {
        return Some(path);
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file());
    if on_path.is_some() {
        return on_path;
    }
    let sdk = PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl");
    if sdk.is_file() {
        return Some(sdk);
    }
    assert!(
        std::env::var_os("CI").is_none_or(|v| v.is_empty()),
        "CI is set but kubectl is missing: not in $KUBECTL, on PATH nor at {}",
        sdk.display()
    );
    eprintln!("skipping: kubectl is not installed");
    None
}

/// Every kubectl release the machine carries (`kubectl.1.27` … `kubectl.1.33` under the Cloud
/// SDK), else [`kubectl`]'s one; empty (saying why) when there is none and `CI` is not set.
pub fn kubectl_releases() -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/google-cloud-sdk/bin")
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("kubectl.1."))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    if found.is_empty() {
        found.extend(kubectl());
    }
    found
}

/// Requests of one verb on one resource being handled by the emulator now.
pub fn in_flight(emulator: &RunningEmulator, verb: &str, resource: &str) -> u32 {
    emulator
        .in_flight()
        .iter()
        .find(|s| s.verb == verb && s.resource == resource)
        .map_or(0, |s| s.current)
}
