//! Least privilege, proven by the real authorizer: the chart's RBAC on the real control plane
//! (kube-apiserver v1.37 with `--authorization-mode=Node,RBAC`, shared by the test run through
//! `ROLLSAFE_CONTROL_PLANE`; docs/install.md, "Least privilege on the real API server").
//!
//! Each scenario renders the chart with real Helm (the SDK driver the chart tests use), applies
//! its ServiceAccounts, Roles, ClusterRoles and bindings with real kubectl as the admin, mints
//! the ServiceAccounts' tokens with the TokenRequest API (`kubectl create token`) and runs the
//! real binary with them:
//!
//! - `rollsafe serve` (namespace scope) as its pod runs it — no kubeconfig, the API server from
//!   `KUBERNETES_SERVICE_*`, the token in a ServiceAccount directory: a restart through it is
//!   `requested` and both consumers carry the restart annotation; after its first token is
//!   invalidated (the Secret it is bound to deleted) the server turns unready, and a second
//!   token of the same ServiceAccount written over the file brings it back without a restart;
//! - `rollsafe watch --leader-elect` with the chart's arguments and environment and a
//!   kubeconfig whose user is the controller's token, once with `controller.namespaces` (Roles)
//!   and once cluster-wide (a ClusterRole, the workloads chosen by a label of the test's own so
//!   that nothing of a concurrent test is touched): it takes the Lease, adopts the workload,
//!   rolls it when its Secret changes and records an Event.
//!
//! Then minimality: `kubectl auth can-i --list` with each ServiceAccount's token, per
//! namespace, parsed and compared — minus what every ServiceAccount of the cluster is granted
//! (measured with an unbound ServiceAccount) — with the rule tables of docs/install.md, which
//! are `rollsafe_kube::least_privilege::RULES`; and explicit requests the real authorizer
//! refuses with 403.
//!
//! Then `rollsafe review rbac`, the reviewer's command (docs/security.md, "For a reviewer"), for
//! every chart mode: an empty difference (exit 0), and exit 1 naming the rule when one is
//! granted beyond the minimum or a documented one is missing.
//!
//! The real server keeps no request log for the suites, so "every call was allowed" is read from
//! the outcome (the runs succeed) and from the binaries' own logs (no `forbidden` in them).
//!
//! Every test here but the two that need no cluster ends in `_on_real`: `cargo xtask test --substrate emulator` skips them, and
//! without `ROLLSAFE_CONTROL_PLANE` they fail rather than pass vacuously. Without the Helm SDK's
//! python or kubectl they say so and stop, as the chart tests do (and fail under `CI`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_common;

use std::collections::BTreeSet;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use install_common::{free_port, helm_python, http_status, objects, render_as};
use kube::api::{Api, ListParams, Patch, PatchParams};
use rollsafe_core::annotations::{APPROVED, PENDING, RESTART_ANNOTATION};
use rollsafe_kube::least_privilege::{Component, Mode};
use rollsafe_testing::control_plane::ControlPlaneInfo;
use rollsafe_testing::{Substrate, TestNamespace, Workload, eventually, shared_control_plane};
use serde_json::{Value, json};

/// How long a step may take on a loaded two-core machine running a control plane.
const SETTLE: Duration = Duration::from_secs(120);
const SECRET: &str = "db-credentials";
const LEASE: &str = "rollsafe-watch";
const INSTANCE: &str = "controller-0";

// ---------------------------------------------------------------------------------------------
// The documented minimum (docs/install.md) is `rollsafe_kube::least_privilege::RULES`, the table
// `rollsafe review rbac` compares an install with; the mode is read from the rendered
// Deployment's environment, as the command reads it from the installed one.

/// One permission of `kubectl auth can-i --list`: resource, non-resource URL, resource name,
/// verb (empty strings where a column is empty).
type Grant = (String, String, String, String);

/// The documented minimum of the ServiceAccount of `deployment` (its mode read from its
/// environment) in `namespace`, as `kubectl auth can-i --list` grants.
fn documented(deployment: &Value, component: Component, namespace: &str) -> BTreeSet<Grant> {
    let release_namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    let literal = env
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v["value"].as_str()?)));
    let mode = Mode::from_env(component, release_namespace, literal);
    let minimum = mode.minimum(namespace);
    assert!(minimum.named_by_values.is_empty(), "{mode:?}");
    minimum
        .grants
        .into_iter()
        .map(|g| (g.resource, g.url, g.name, g.verb))
        .collect()
}

/// Parses the table `kubectl auth can-i --list` prints (kubectl 1.33 has no `-o json` for it):
/// `Resources  Non-Resource URLs  Resource Names  Verbs`, the last three bracketed lists.
fn parse_can_i_list(text: &str) -> BTreeSet<Grant> {
    let mut grants = BTreeSet::new();
    let mut lines = text.lines();
    let header = lines.next().unwrap_or_default();
    assert!(
        header.starts_with("Resources") && header.contains("Verbs"),
        "not a can-i table: {text}"
    );
    for line in lines.map(str::trim).filter(|l| !l.is_empty()) {
        let (resource, rest) = if line.starts_with('[') {
            ("", line)
        } else {
            line.split_once(char::is_whitespace)
                .unwrap_or_else(|| panic!("a can-i line without columns: {line:?}"))
        };
        let lists: Vec<Vec<&str>> = rest
            .split('[')
            .skip(1)
            .map(|part| {
                part.split(']')
                    .next()
                    .unwrap_or_default()
                    .split_whitespace()
                    .collect()
            })
            .collect();
        assert_eq!(lists.len(), 3, "a can-i line of three lists: {line:?}");
        let or_empty = |list: &Vec<&str>| -> Vec<String> {
            if list.is_empty() {
                vec![String::new()]
            } else {
                list.iter().map(|s| (*s).to_owned()).collect()
            }
        };
        for url in or_empty(&lists[0]) {
            for name in or_empty(&lists[1]) {
                for verb in &lists[2] {
                    grants.insert((
                        resource.to_owned(),
                        url.clone(),
                        name.clone(),
                        (*verb).to_owned(),
                    ));
                }
            }
        }
    }
    grants
}

/// A permission as one word: `verb resource[/name]`, or `verb URL`.
fn show(grant: &Grant) -> String {
    let (resource, url, name, verb) = grant;
    match (resource.as_str(), name.as_str()) {
        ("", _) => format!("{verb} {url}"),
        (resource, "") => format!("{verb} {resource}"),
        (resource, name) => format!("{verb} {resource}/{name}"),
    }
}

/// Asserts that `granted` is exactly `baseline` plus `documented`.
fn assert_exactly(
    who: &str,
    namespace: &str,
    granted: &BTreeSet<Grant>,
    baseline: &BTreeSet<Grant>,
    documented: &BTreeSet<Grant>,
) {
    let beyond_baseline: BTreeSet<Grant> = granted.difference(baseline).cloned().collect();
    let extra: Vec<String> = beyond_baseline.difference(documented).map(show).collect();
    let missing: Vec<String> = documented.difference(granted).map(show).collect();
    let lost: Vec<String> = baseline.difference(granted).map(show).collect();
    assert!(
        extra.is_empty() && missing.is_empty() && lost.is_empty(),
        "{who} in {namespace}: granted beyond the documented minimum {extra:?}; documented but \
         not granted {missing:?}; a ServiceAccount's baseline not granted {lost:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The real control plane, kubectl and Helm.

/// kubectl: the newest release the machine carries (1.33), else whichever `kubectl` the other
/// suites use (missing: skipped with a message, failed under `CI`).
fn newest_kubectl() -> Option<PathBuf> {
    let newest = PathBuf::from("/usr/lib/google-cloud-sdk/bin/kubectl.1.33");
    if newest.is_file() {
        return Some(newest);
    }
    rollsafe_testing::kubectl()
}

struct Real {
    info: ControlPlaneInfo,
    kubectl: PathBuf,
    python: PathBuf,
    /// The cluster CA (the admin kubeconfig's `certificate-authority`).
    ca: PathBuf,
    /// The API server's port on 127.0.0.1.
    port: u16,
}

impl Real {
    /// The shared control plane (panics in one line when `ROLLSAFE_CONTROL_PLANE` is not set:
    /// these tests never pass vacuously), kubectl and the Helm SDK's python (as for every chart
    /// test: when either is missing the test says so and stops, and fails under `CI`).
    fn new() -> Option<Self> {
        Self::of(shared_control_plane())
    }

    /// As [`Real::new`], for the control plane `info` describes.
    fn of(info: ControlPlaneInfo) -> Option<Self> {
        let python = helm_python()?;
        let kubectl = newest_kubectl()?;
        let kubeconfig: Value =
            serde_json::from_slice(&std::fs::read(&info.kubeconfig).unwrap()).unwrap();
        let ca = PathBuf::from(
            kubeconfig["clusters"][0]["cluster"]["certificate-authority"]
                .as_str()
                .expect("the admin kubeconfig names its CA file"),
        );
        let port = info
            .server
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("the API server's port");
        Some(Self {
            info,
            kubectl,
            python,
            ca,
            port,
        })
    }

    /// kubectl as the admin (`system:masters`).
    fn admin(&self, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .arg("--kubeconfig")
            .arg(&self.info.kubeconfig)
            .args(["--context", "admin"])
            .args(args)
            .output()
            .unwrap()
    }

    /// kubectl as the admin; its stdout, the command failing the test otherwise.
    fn admin_ok(&self, args: &[&str]) -> String {
        let output = self.admin(args);
        assert!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// kubectl with nothing but a bearer token, as anything holding it could.
    fn with_token(&self, token: &str, args: &[&str]) -> Output {
        Command::new(&self.kubectl)
            .env("KUBECONFIG", "/dev/null")
            .arg(format!("--server={}", self.info.server))
            .arg(format!("--certificate-authority={}", self.ca.display()))
            .arg(format!("--token={token}"))
            .args(args)
            .output()
            .unwrap()
    }

    /// `kubectl apply` of `objects` as the admin; what kubectl said on stderr (warnings).
    fn apply(&self, objects: &[Value], dir: &Path) -> String {
        let file = dir.join("chart-rbac.json");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
        std::fs::write(&file, serde_json::to_string(&list).unwrap()).unwrap();
        let output = self.admin(&["apply", "-f", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "kubectl apply failed: {stderr}");
        stderr
    }

    /// A token for ServiceAccount `namespace/name` from the TokenRequest API, optionally bound
    /// to a Secret (it stops authenticating when that Secret is deleted).
    fn token(&self, namespace: &str, name: &str, bound_to_secret: Option<&str>) -> String {
        let mut args = vec!["-n", namespace, "create", "token", name, "--duration=1h"];
        if let Some(secret) = bound_to_secret {
            args.extend([
                "--bound-object-kind",
                "Secret",
                "--bound-object-name",
                secret,
            ]);
        }
        let token = self.admin_ok(&args).trim().to_owned();
        assert_eq!(token.split('.').count(), 3, "a JWT: {token}");
        token
    }

    /// The user a token authenticates as (`kubectl auth whoami`, a SelfSubjectReview).
    fn whoami(&self, token: &str) -> String {
        let output = self.with_token(token, &["auth", "whoami", "-o", "json"]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let review: Value = serde_json::from_slice(&output.stdout).unwrap();
        review["status"]["userInfo"]["username"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// Everything a token may do in `namespace`, as `kubectl auth can-i --list` reports it.
    fn can_i_list(&self, token: &str, namespace: &str) -> BTreeSet<Grant> {
        let output = self.with_token(token, &["auth", "can-i", "--list", "-n", namespace]);
        assert!(
            output.status.success(),
            "can-i --list: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        parse_can_i_list(&String::from_utf8_lossy(&output.stdout))
    }

    /// A kubeconfig whose only user is `token`, in `namespace`.
    fn token_kubeconfig(&self, path: &Path, token: &str, namespace: &str) {
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "real", "cluster": {"server": self.info.server,
                                                      "certificate-authority": self.ca}}],
            "users": [{"name": "sa", "user": {"token": token}}],
            "contexts": [{"name": "sa", "context": {"cluster": "real", "user": "sa",
                                                    "namespace": namespace}}],
            "current-context": "sa"
        });
        std::fs::write(path, serde_json::to_vec_pretty(&config).unwrap()).unwrap();
    }
}

/// The kinds applied from a render: the identities and their RBAC (the processes run as the
/// test's children, not through the chart's Deployments).
const RBAC_KINDS: [&str; 5] = [
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
];

/// A release of the chart, rendered with real Helm under a name of the test's own (its
/// ClusterRoles and ClusterRoleBindings are cluster-wide names on a shared cluster).
struct Release {
    name: String,
    fullname: String,
    objects: Vec<Value>,
}

impl Release {
    fn render(real: &Real, values: &Value, namespace: &str) -> Self {
        static SEQUENCE: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rsr-{}-{}",
            std::process::id(),
            SEQUENCE.fetch_add(1, Ordering::Relaxed)
        );
        let manifests = render_as(&real.python, values, &name, namespace);
        Self {
            fullname: format!("{name}-rollsafe"),
            name,
            objects: objects(&manifests),
        }
    }

    /// The objects of `kinds` whose component is `component`.
    fn of(&self, component: &str, kinds: &[&str]) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|o| {
                kinds.contains(&o["kind"].as_str().unwrap_or_default())
                    && o["metadata"]["labels"]["app.kubernetes.io/component"] == component
            })
            .cloned()
            .collect()
    }

    /// The Deployment of `component`.
    fn deployment(&self, component: &str) -> Value {
        self.of(component, &["Deployment"]).pop().unwrap()
    }
}

/// Deletes the cluster-scoped objects a test applied, whether it passes or fails (namespaced
/// ones go with their namespace).
struct ClusterScoped<'a> {
    real: &'a Real,
    objects: Vec<(String, String)>,
}

impl<'a> ClusterScoped<'a> {
    fn of(real: &'a Real, applied: &[Value]) -> Self {
        let objects = applied
            .iter()
            .filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "ClusterRoleBinding")
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_lowercase(),
                    o["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        Self { real, objects }
    }
}

impl Drop for ClusterScoped<'_> {
    fn drop(&mut self) {
        for (kind, name) in &self.objects {
            let _ = self
                .real
                .admin(&["delete", kind, name, "--ignore-not-found", "--wait=false"]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads.

fn consumer(kind: &str, name: &str, labels: &Value) -> Value {
    let mut object = Workload::of_kind(kind, name)
        .with_replicas()
        .consuming_secret_via_env_from(SECRET)
        .build();
    object["metadata"]["labels"] = labels.clone();
    object
}

/// Whether the workload's controller has rolled every replica to its current template, by the
/// status fields `kubectl rollout status` reads.
fn rolled_out(object: &Value) -> bool {
    let status = &object["status"];
    let generation = object["metadata"]["generation"].as_i64().unwrap_or(0);
    let observed = status["observedGeneration"].as_i64().unwrap_or(-1) >= generation;
    let n = |field: &str| status[field].as_i64().unwrap_or(0);
    let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
    observed
        && match object["kind"].as_str().unwrap_or_default() {
            "Deployment" => n("updatedReplicas") == replicas && n("availableReplicas") == replicas,
            "StatefulSet" => {
                status["updateRevision"].is_string()
                    && status["updateRevision"] == status["currentRevision"]
                    && n("readyReplicas") == replicas
            }
            _ => n("updatedNumberScheduled") == n("desiredNumberScheduled"),
        }
}

/// Waits until the workload settled: on a real server its controller writes its status for a
/// moment after each change, and each write changes the resourceVersion a restart's patch
/// tests.
async fn wait_rolled_out(ns: &TestNamespace, kind: &str, name: &str) {
    eventually(
        &format!("{kind} {}/{name} rolled out", ns.name),
        SETTLE,
        || async { rolled_out(&ns.get("apps/v1", kind, name).await?).then_some(()) },
    )
    .await;
}

fn template_annotation(object: &Value, key: &str) -> Option<String> {
    object
        .pointer("/spec/template/metadata/annotations")?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

fn metadata_annotation(object: &Value, key: &str) -> Option<String> {
    object
        .pointer("/metadata/annotations")?
        .get(key)?
        .as_str()
        .map(str::to_owned)
}

// ---------------------------------------------------------------------------------------------
// The processes.

/// A child process of the test, stopped when dropped; its stderr in `log`.
struct Process {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Process {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Polls `/readyz` until it answers `status`; `false` if the process exited first.
    async fn wait_ready(&mut self, status: u16) -> bool {
        let deadline = tokio::time::Instant::now() + SETTLE;
        loop {
            if http_status(self.port, "/readyz") == Some(status) {
                return true;
            }
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return false;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "/readyz did not answer {status} within {SETTLE:?}; the process logged:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment a pod running `container` gets in `namespace`: its literal values and the
/// downward API's `metadata.namespace`. (Secret references are the caller's.)
fn pod_env(command: &mut Command, container: &Value, namespace: &str, home: &Path) {
    command.env_clear().env("HOME", home);
    for variable in container["env"].as_array().unwrap() {
        let name = variable["name"].as_str().unwrap();
        if let Some(value) = variable["value"].as_str() {
            command.env(name, value);
        } else if variable["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace" {
            command.env(name, namespace);
        }
    }
}

/// The rollsafe binary with the arguments and environment of the first container of the
/// chart's `deployment`, as its pod would run it.
fn container_command(deployment: &Value, dir: &Path) -> Command {
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let namespace = deployment["metadata"]["namespace"].as_str().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command.args(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap()),
    );
    pod_env(&mut command, container, namespace, dir);
    command
}

/// [`container_command`] for the server, in the cluster: the real API server from
/// `KUBERNETES_SERVICE_*`, the ServiceAccount directory, the session secret, listening on
/// `port` (the admin listener on any free port).
fn serve_command(
    real: &Real,
    deployment: &Value,
    sa_dir: &Path,
    session_secret: &str,
    dir: &Path,
    port: u16,
) -> Command {
    let mut command = container_command(deployment, dir);
    command
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env("KUBERNETES_SERVICE_PORT", real.port.to_string())
        .env("ROLLSAFE_SERVICEACCOUNT_DIR", sa_dir)
        .env("SESSION_SECRET", session_secret)
        .env("ROLLSAFE_LISTEN", format!("127.0.0.1:{port}"))
        .env("ROLLSAFE_ADMIN_LISTEN", "127.0.0.1:0");
    command
}

/// `rollsafe serve` as the chart's server Deployment runs it: the chart's environment, no
/// kubeconfig, the API server from `KUBERNETES_SERVICE_*`, the token, CA and namespace from
/// the ServiceAccount directory.
async fn serve_in_cluster(
    real: &Real,
    deployment: &Value,
    sa_dir: &Path,
    session_secret: &str,
    dir: &Path,
) -> Process {
    // The port is free when chosen, but another test may bind it first: a server that exits
    // before it is ready is started again on another port.
    for attempt in 0..3 {
        let port = free_port();
        let log = dir.join(format!("serve-{attempt}.log"));
        let mut command = serve_command(real, deployment, sa_dir, session_secret, dir, port);
        command
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut server = Process {
            child: command.spawn().unwrap(),
            port,
            log,
        };
        if server.wait_ready(200).await {
            return server;
        }
    }
    panic!("the server exited before it was ready, three times");
}

/// `rollsafe watch` as the chart's controller Deployment runs it (its arguments and
/// environment), with a kubeconfig whose user is the controller's token, and the admin
/// listener on a free loopback port.
async fn watch_with_kubeconfig(deployment: &Value, kubeconfig: &Path, dir: &Path) -> Process {
    for attempt in 0..3 {
        let port = free_port();
        let log = dir.join(format!("watch-{attempt}.log"));
        let mut command = container_command(deployment, dir);
        command.arg("--kubeconfig").arg(kubeconfig);
        command
            .env("ROLLSAFE_WATCH_ADMIN_LISTEN", format!("127.0.0.1:{port}"))
            .env("ROLLSAFE_WATCH_INSTANCE", INSTANCE)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap());
        let mut controller = Process {
            child: command.spawn().unwrap(),
            port,
            log,
        };
        if controller.wait_ready(200).await {
            return controller;
        }
    }
    panic!("the controller exited before it was ready, three times");
}

fn session_token(secret: &str, email: &str, groups: &[&str]) -> String {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command
        .args(["token", "--email", email, "--ttl", "10m"])
        .env("SESSION_SECRET", secret);
    for group in groups {
        command.args(["--group", group]);
    }
    let output = command.output().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// `rollsafe restart` through the server: the exit code and the result.
fn restart(port: u16, token: &str, target: &str) -> (i32, Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args([
            "restart",
            "--server",
            &format!("http://127.0.0.1:{port}"),
            "-o",
            "json",
            target,
        ])
        .env("ROLLSAFE_TOKEN", token)
        .output()
        .unwrap();
    let body = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), body)
}

fn write_atomically(path: &Path, text: &str) {
    let next = path.with_extension("next");
    std::fs::write(&next, text).unwrap();
    std::fs::rename(&next, path).unwrap();
}

fn base64_decode(text: &str) -> String {
    use base64::Engine as _;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap(),
    )
    .unwrap()
}

/// Asserts a binary's log holds no refusal by the API server.
fn assert_never_refused(who: &str, log: &str) {
    assert!(
        !log.to_lowercase().contains("forbidden"),
        "{who} was refused by the API server:\n{log}"
    );
}

// ---------------------------------------------------------------------------------------------
// Refusals, sent straight to the API with a ServiceAccount's credentials.

fn get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

fn merge(path: &str) -> http::Request<Vec<u8>> {
    http::Request::patch(path)
        .header("content-type", "application/merge-patch+json")
        .body(br#"{"metadata":{"annotations":{"x":"y"}}}"#.to_vec())
        .unwrap()
}

fn delete(path: &str) -> http::Request<Vec<u8>> {
    http::Request::delete(path).body(Vec::new()).unwrap()
}

/// Each request is refused with 403 by the real authorizer.
async fn assert_forbidden(client: &kube::Client, requests: Vec<http::Request<Vec<u8>>>) {
    for request in requests {
        let what = format!("{} {}", request.method(), request.uri());
        let refused = client.request_text(request).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
            "{what} must be refused with 403: {refused:?}"
        );
    }
}

/// Records, once per run, what kubectl says about its skew against the 1.37 server.
fn note_kubectl_skew(real: &Real) {
    let output = real.admin(&["version", "-o", "json"]);
    let versions: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    eprintln!(
        "kubectl {} against kube-apiserver {}: {}",
        versions["clientVersion"]["gitVersion"],
        versions["serverVersion"]["gitVersion"],
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

// ---------------------------------------------------------------------------------------------
// The server.

/// Namespace scope: the chart's server RBAC is sufficient for a restart run through the real
/// `rollsafe serve` with its ServiceAccount's TokenRequest token, and it is exactly the
/// documented minimum: in the release namespace the five rules of docs/install.md and nothing
/// more, elsewhere nothing but what every ServiceAccount has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_namespace_scope_is_the_documented_minimum_on_real() {
    let Some(real) = Real::new() else {
        return;
    };
    note_kubectl_skew(&real);
    let release_ns = TestNamespace::create(Substrate::Real, "rbac-server").await;
    let other = TestNamespace::create(Substrate::Real, "rbac-server-other").await;
    let r = release_ns.name.clone();
    let dir = release_ns.dir.path();

    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"]}});
    let release = Release::render(&real, &values, &r);
    let mut applied = release.of("server", &RBAC_KINDS);
    assert!(
        applied.iter().all(|o| o["kind"] != "ClusterRole"),
        "namespace scope renders no ClusterRole"
    );
    applied.extend(release.of("server", &["Secret"]));
    let _cluster_scoped = ClusterScoped::of(&real, &applied);
    let warnings = real.apply(&applied, dir);
    eprintln!("kubectl apply (server's RBAC) warned: {warnings:?}");
    let sa = release.fullname.clone();
    let sa_user = format!("system:serviceaccount:{r}:{sa}");
    let stored_sa = release_ns.get("v1", "ServiceAccount", &sa).await.unwrap();
    assert_eq!(stored_sa["automountServiceAccountToken"], false);

    // Workloads: two consumers in the release namespace, one in another namespace.
    let labels = json!({"app.kubernetes.io/part-of": "rbac-test"});
    release_ns
        .apply([
            rollsafe_testing::secret(&r, SECRET, "hunter2"),
            rollsafe_testing::secret(&r, "token-binding", "unused"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "unrelated"}, "data": {"a": "b"}}),
            consumer("Deployment", "web", &labels),
            consumer("StatefulSet", "worker", &labels),
        ])
        .await;
    other
        .apply([
            rollsafe_testing::secret(&other.name, SECRET, "hunter2"),
            consumer("Deployment", "web", &labels),
        ])
        .await;
    wait_rolled_out(&release_ns, "Deployment", "web").await;
    wait_rolled_out(&release_ns, "StatefulSet", "worker").await;
    wait_rolled_out(&other, "Deployment", "web").await;

    // The pod's ServiceAccount directory, with a token bound to a Secret of the test's own.
    let first = real.token(&r, &sa, Some("token-binding"));
    assert_eq!(real.whoami(&first), sa_user);
    let sa_dir = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa_dir).unwrap();
    std::fs::write(sa_dir.join("token"), &first).unwrap();
    std::fs::copy(&real.ca, sa_dir.join("ca.crt")).unwrap();
    std::fs::write(sa_dir.join("namespace"), &r).unwrap();

    let session = release_ns
        .get("v1", "Secret", &format!("{}-session", release.fullname))
        .await
        .expect("the chart's session Secret was applied");
    let session_secret = base64_decode(session["data"]["session-secret"].as_str().unwrap());
    let mut server = serve_in_cluster(
        &real,
        &release.deployment("server"),
        &sa_dir,
        &session_secret,
        dir,
    )
    .await;

    // Sufficient: a restart run, every call made as the ServiceAccount.
    let caller = session_token(&session_secret, "alice@example.com", &["platform"]);
    let target = format!("{r}/{SECRET}");
    let (code, result) = restart(server.port, &caller, &target);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    assert_eq!(result["matched"], 2, "{result}");
    assert_eq!(result["failures"], json!([]), "{result}");
    assert_eq!(result["discoveryFailures"], json!([]), "{result}");
    let mut first_marks = Vec::new();
    for kind in ["Deployment", "StatefulSet"] {
        let name = if kind == "Deployment" {
            "web"
        } else {
            "worker"
        };
        let object = release_ns.get("apps/v1", kind, name).await.unwrap();
        let mark = template_annotation(&object, RESTART_ANNOTATION)
            .unwrap_or_else(|| panic!("{kind} {name} carries the restart annotation"));
        first_marks.push(mark);
    }
    let untouched = other.get("apps/v1", "Deployment", "web").await.unwrap();
    assert_eq!(template_annotation(&untouched, RESTART_ANNOTATION), None);
    // The preview reads the controller's Lease as the ServiceAccount: allowed by name (no
    // controller runs here, so the Lease is missing and the settings are unknown), never refused.
    let request = format!(
        "GET /api/namespaces/{r}/secrets/{SECRET}/consumers HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {caller}\r\nConnection: close\r\n\r\n"
    );
    let response = rollsafe_testing::http::exchange(
        &format!("127.0.0.1:{}", server.port),
        request.as_bytes(),
        SETTLE,
    )
    .await
    .expect("the preview answered");
    let preview = response.json();
    assert_eq!(preview["controller"]["settings"], "unknown", "{preview}");
    assert_eq!(preview["controller"]["code"], "not_published", "{preview}");

    // Minimal: exactly the documented rules, as the real authorizer evaluates them.
    let baseline_sa = "rbac-baseline";
    real.admin_ok(&["-n", &r, "create", "serviceaccount", baseline_sa]);
    let baseline_token = real.token(&r, baseline_sa, None);
    let server_deployment = release.deployment("server");
    for namespace in [&r, &other.name] {
        let expected = &documented(&server_deployment, Component::Server, namespace);
        let baseline = real.can_i_list(&baseline_token, namespace);
        // `/readyz` asks for `/version`: every authenticated user may (docs/install.md), so
        // the chart grants nothing for it.
        let version = (
            String::new(),
            "/version".to_owned(),
            String::new(),
            "get".to_owned(),
        );
        assert!(baseline.contains(&version), "{baseline:?}");
        eprintln!(
            "what every ServiceAccount may do in {namespace} on kube-apiserver {}: {:?}",
            real.info.version,
            baseline.iter().map(show).collect::<Vec<_>>()
        );
        let granted = real.can_i_list(&first, namespace);
        assert_exactly(&sa_user, namespace, &granted, &baseline, expected);
    }
    // And the operations the suites' runs perform, one by one (docs/install.md's "needed by").
    for (verb, resource) in [
        ("get", "secrets"),
        ("list", "deployments.apps"),
        ("list", "statefulsets.apps"),
        ("list", "daemonsets.apps"),
        ("patch", "deployments.apps"),
        ("patch", "statefulsets.apps"),
        ("patch", "daemonsets.apps"),
        ("get", "configmaps/krypton-access"),
        ("get", "leases.coordination.k8s.io/rollsafe-watch"),
    ] {
        let output = real.with_token(&first, &["auth", "can-i", verb, resource, "-n", &r]);
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "yes",
            "{verb} {resource}"
        );
    }

    // Refused by the real authorizer, with 403.
    let connection = rollsafe_kube::Connection::in_cluster(
        &rollsafe_kube::connection::InCluster::new("127.0.0.1", real.port, &sa_dir),
    )
    .unwrap();
    let client = connection.client(None);
    let o = &other.name;
    let impersonating = http::Request::get(format!("/api/v1/namespaces/{r}/secrets/{SECRET}"))
        .header(
            "Impersonate-User",
            "system:serviceaccount:kube-system:default",
        )
        .body(Vec::new())
        .unwrap();
    assert_forbidden(
        &client,
        vec![
            get(&format!("/api/v1/namespaces/{r}/secrets")),
            get("/api/v1/secrets"),
            delete(&format!("/apis/apps/v1/namespaces/{r}/deployments/web")),
            delete(&format!("/api/v1/namespaces/{r}/secrets/{SECRET}")),
            get(&format!("/api/v1/namespaces/{r}/configmaps/unrelated")),
            get(&format!(
                "/apis/coordination.k8s.io/v1/namespaces/{r}/leases"
            )),
            get(&format!("/api/v1/namespaces/{o}/secrets/{SECRET}")),
            get(&format!("/apis/apps/v1/namespaces/{o}/deployments")),
            merge(&format!("/apis/apps/v1/namespaces/{o}/deployments/web")),
            get("/api/v1/namespaces"),
            impersonating,
        ],
    )
    .await;
    assert_never_refused("rollsafe serve", &server.log());

    // A bound token stops authenticating when its Secret goes: the server turns unready, and a
    // second token of the same ServiceAccount written over the file brings it back — the same
    // identity (the emulator needed a second identity for a second token).
    real.admin_ok(&["-n", &r, "delete", "secret", "token-binding"]);
    let deleted = std::time::Instant::now();
    assert!(server.wait_ready(503).await, "the server exited");
    eprintln!(
        "the bound token was refused {:?} after its Secret was deleted",
        deleted.elapsed()
    );
    let second = real.token(&r, &sa, None);
    assert_eq!(real.whoami(&second), sa_user);
    write_atomically(&sa_dir.join("token"), &second);
    assert!(server.wait_ready(200).await, "the server exited");
    wait_rolled_out(&release_ns, "Deployment", "web").await;
    wait_rolled_out(&release_ns, "StatefulSet", "worker").await;
    let (code, result) = restart(server.port, &caller, &target);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    let web = release_ns
        .get("apps/v1", "Deployment", "web")
        .await
        .unwrap();
    assert_ne!(
        template_annotation(&web, RESTART_ANNOTATION).as_ref(),
        first_marks.first(),
        "the second run patched again"
    );
    assert_never_refused("rollsafe serve", &server.log());

    drop(server);
    other.finish().await;
    release_ns.finish().await;
}

// ---------------------------------------------------------------------------------------------
// The controller.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watching {
    /// `controller.namespaces: [A]`: a Role in A, nothing cluster-wide.
    Namespaces,
    /// No list: a ClusterRole; the workloads chosen by a label of the test's own.
    Cluster,
}

async fn controller_scenario(mode: Watching) {
    let Some(real) = Real::new() else {
        return;
    };
    note_kubectl_skew(&real);
    let release_ns = TestNamespace::create(Substrate::Real, "rbac-controller").await;
    let watched = TestNamespace::create(Substrate::Real, "rbac-controller-watched").await;
    let other = TestNamespace::create(Substrate::Real, "rbac-controller-other").await;
    let (r, a, o) = (
        release_ns.name.clone(),
        watched.name.clone(),
        other.name.clone(),
    );
    let dir = release_ns.dir.path();

    // The selection label names this test alone: on a shared cluster a cluster-wide controller
    // must never touch a concurrent test's workloads.
    let run = a.clone();
    let mut controller_values = json!({"enabled": true, "all": true, "debounce": "100ms",
                                       "selector": format!("rollsafe.dev/run={run}")});
    if mode == Watching::Namespaces {
        controller_values["namespaces"] = json!([a]);
    }
    let release = Release::render(&real, &json!({"controller": controller_values}), &r);
    let applied = release.of("controller", &RBAC_KINDS);
    let cluster_roles = applied
        .iter()
        .filter(|o| o["kind"] == "ClusterRole")
        .count();
    assert_eq!(
        cluster_roles,
        usize::from(mode == Watching::Cluster),
        "{mode:?}"
    );
    let _cluster_scoped = ClusterScoped::of(&real, &applied);
    let warnings = real.apply(&applied, dir);
    eprintln!("kubectl apply (controller's RBAC, {mode:?}) warned: {warnings:?}");
    let sa = format!("{}-controller", release.fullname);
    let sa_user = format!("system:serviceaccount:{r}:{sa}");

    let selected = json!({"rollsafe.dev/run": run});
    // Restarted by eviction (docs/strategies.md), under a budget: the chart's rules must be
    // enough for a run — its pods listed, evicted, the budgets read — as the ServiceAccount.
    let mut evicted = consumer("Deployment", "evicted", &selected);
    evicted["metadata"]["annotations"] = json!({"rollsafe.dev/strategy": "evict"});
    evicted["spec"]["replicas"] = json!(2);
    let evicted_budget = json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "evicted"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "evicted"}}}
    });
    watched
        .apply([
            rollsafe_testing::secret(&a, SECRET, "hunter2"),
            consumer("Deployment", "web", &selected),
            evicted,
            evicted_budget,
        ])
        .await;
    // Outside the selection: another namespace (namespaces mode, where the label is
    // irrelevant) or unlabelled (cluster mode).
    let outside = if mode == Watching::Namespaces {
        selected.clone()
    } else {
        json!({"app": "web"})
    };
    other
        .apply([
            rollsafe_testing::secret(&o, SECRET, "hunter2"),
            consumer("Deployment", "web", &outside),
        ])
        .await;
    wait_rolled_out(&watched, "Deployment", "web").await;
    wait_rolled_out(&watched, "Deployment", "evicted").await;
    wait_rolled_out(&other, "Deployment", "web").await;

    let token = real.token(&r, &sa, None);
    assert_eq!(real.whoami(&token), sa_user);
    let kubeconfig = dir.join("controller.kubeconfig");
    real.token_kubeconfig(&kubeconfig, &token, &r);
    let controller =
        watch_with_kubeconfig(&release.deployment("controller"), &kubeconfig, dir).await;

    // Sufficient: it takes the Lease, adopts the workload in scope and rolls it when its
    // Secret changes, and records the roll as an Event.
    let lease = eventually("the controller holds its Lease", SETTLE, || async {
        let lease = release_ns
            .get("coordination.k8s.io/v1", "Lease", LEASE)
            .await?;
        (lease["spec"]["holderIdentity"] == INSTANCE).then_some(lease)
    })
    .await;
    assert_eq!(lease["metadata"]["namespace"], r.as_str());
    eventually("the adoption", SETTLE, || async {
        let web = watched.get("apps/v1", "Deployment", "web").await?;
        metadata_annotation(&web, "rollsafe.dev/config-record")
    })
    .await;
    let adopted = watched.get("apps/v1", "Deployment", "web").await.unwrap();
    assert_eq!(
        template_annotation(&adopted, "rollsafe.dev/config-hash"),
        None,
        "an adoption rolls nothing"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(watched.client(), &a);
    secrets
        .patch(
            SECRET,
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "rotated"}})),
        )
        .await
        .unwrap();
    eventually("the roll", SETTLE, || async {
        let web = watched.get("apps/v1", "Deployment", "web").await?;
        template_annotation(&web, "rollsafe.dev/config-hash")
    })
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(watched.client(), &a);
    eventually("the Rolled Event", SETTLE, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Rolled")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("web")
            })
            .then_some(())
    })
    .await;
    // The run as the ServiceAccount: both pods evicted and replaced, the template untouched.
    eventually("the eviction run's RolloutComplete", SETTLE, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("RolloutComplete")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("evicted")
                    && e.note.as_deref().is_some_and(|n| {
                        n.starts_with("Restarted by eviction") && n.contains("2 pod(s) evicted")
                    })
            })
            .then_some(())
    })
    .await;
    let evicted = watched
        .get("apps/v1", "Deployment", "evicted")
        .await
        .unwrap();
    assert_eq!(
        template_annotation(&evicted, "rollsafe.dev/config-hash"),
        None,
        "a roll by eviction writes no template"
    );
    let untouched = other.get("apps/v1", "Deployment", "web").await.unwrap();
    assert_eq!(
        metadata_annotation(&untouched, "rollsafe.dev/config-record"),
        None,
        "nothing outside the selection is adopted"
    );
    assert_never_refused("rollsafe watch", &controller.log());

    // Minimal: exactly the documented rules, per namespace.
    let baseline_sa = "rbac-baseline";
    real.admin_ok(&["-n", &r, "create", "serviceaccount", baseline_sa]);
    let baseline_token = real.token(&r, baseline_sa, None);
    let controller_deployment = release.deployment("controller");
    for namespace in [&r, &a, &o] {
        let expected = &documented(&controller_deployment, Component::Controller, namespace);
        let baseline = real.can_i_list(&baseline_token, namespace);
        let granted = real.can_i_list(&token, namespace);
        assert_exactly(&sa_user, namespace, &granted, &baseline, expected);
    }

    // Refused by the real authorizer, with 403.
    let connection = rollsafe_kube::Connection::from_kubeconfig(Some(&kubeconfig), None)
        .await
        .unwrap();
    let client = connection.client(None);
    let lease_json = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                            "metadata": {"name": LEASE, "namespace": r}});
    let update_lease = http::Request::put(format!(
        "/apis/coordination.k8s.io/v1/namespaces/{r}/leases/{LEASE}"
    ))
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&lease_json).unwrap())
    .unwrap();
    let mut refusals = vec![
        get(&format!("/api/v1/namespaces/{a}/secrets/{SECRET}")),
        get(&format!("/apis/apps/v1/namespaces/{a}/deployments/web")),
        delete(&format!("/apis/apps/v1/namespaces/{a}/deployments/web")),
        get(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{r}/leases/another"
        )),
        merge(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{a}/leases/{LEASE}"
        )),
        update_lease,
        delete(&format!(
            "/apis/coordination.k8s.io/v1/namespaces/{r}/leases/{LEASE}"
        )),
        get("/api/v1/namespaces"),
    ];
    if mode == Watching::Namespaces {
        refusals.extend([
            get(&format!("/api/v1/namespaces/{o}/secrets")),
            get("/api/v1/secrets"),
            merge(&format!("/apis/apps/v1/namespaces/{o}/deployments/web")),
        ]);
    }
    assert_forbidden(&client, refusals).await;
    if mode == Watching::Cluster {
        // The ClusterRole's list is cluster-wide, as documented.
        client
            .request_text(get("/api/v1/secrets?limit=1"))
            .await
            .expect("a cluster-wide controller lists Secrets everywhere");
    }
    assert_never_refused("rollsafe watch", &controller.log());

    drop(controller);
    other.finish().await;
    watched.finish().await;
    release_ns.finish().await;
}

/// The controller with `controller.namespaces`: Roles in the watched namespace, the Lease Role
/// in the release namespace, nothing elsewhere — and enough to lead, adopt, roll and record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_with_namespaces_is_the_documented_minimum_on_real() {
    controller_scenario(Watching::Namespaces).await;
}

/// The controller cluster-wide: the ClusterRole's rules in every namespace, the Lease Role in
/// the release namespace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_cluster_wide_is_the_documented_minimum_on_real() {
    controller_scenario(Watching::Cluster).await;
}

/// The parser the comparisons depend on (no cluster needed).
#[test]
fn can_i_tables_are_parsed() {
    let text = "Resources                                       Non-Resource URLs   Resource Names     Verbs\n\
                configmaps                                      []                  [krypton-access]   [get]\n\
                deployments.apps                                []                  []                 [list patch]\n\
                                                                [/version]          []                 [get]\n";
    let grants = parse_can_i_list(text);
    let g = |r: &str, u: &str, n: &str, v: &str| {
        (r.to_owned(), u.to_owned(), n.to_owned(), v.to_owned())
    };
    assert_eq!(
        grants,
        BTreeSet::from([
            g("configmaps", "", "krypton-access", "get"),
            g("deployments.apps", "", "", "list"),
            g("deployments.apps", "", "", "patch"),
            g("", "/version", "", "get"),
        ])
    );
}

// ---------------------------------------------------------------------------------------------
// `rollsafe review rbac`: the reviewer's one command, run on the real control plane for every
// chart mode (docs/security.md, "For a reviewer").

/// Renders the chart with `values` in a release namespace of its own, applies every
/// ServiceAccount, Role, ClusterRole and binding and the Deployments (at zero replicas: the
/// review reads a Deployment's environment for the mode, nothing needs to run), then runs
/// `rollsafe review rbac` as the admin. Each namespace of `listed` exists (Roles go there) and
/// replaces `{A}` in `values`. `tamper` may grant more before the review. The exit code, the
/// JSON report, the text report and stderr.
async fn review_release(
    values: &str,
    tamper: impl AsyncFnOnce(&Real, &str, &Release),
) -> Option<(i32, Value, String, String)> {
    let real = Real::new()?;
    let release_ns = TestNamespace::create(Substrate::Real, "review-rbac").await;
    let listed = TestNamespace::create(Substrate::Real, "review-rbac-a").await;
    let r = release_ns.name.clone();
    let values: Value = serde_json::from_str(&values.replace("{A}", &listed.name)).unwrap();
    let release = Release::render(&real, &values, &r);
    let mut applied: Vec<Value> = release
        .objects
        .iter()
        .filter(|o| RBAC_KINDS.contains(&o["kind"].as_str().unwrap_or_default()))
        .cloned()
        .collect();
    for mut deployment in release
        .objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .cloned()
    {
        deployment["spec"]["replicas"] = json!(0);
        applied.push(deployment);
    }
    let _cluster_scoped = ClusterScoped::of(&real, &applied);
    real.apply(&applied, release_ns.dir.path());
    tamper(&real, &r, &release).await;
    let review = |output: &str| {
        Command::new(env!("CARGO_BIN_EXE_rollsafe"))
            .args([
                "review",
                "rbac",
                "-n",
                &r,
                "--release",
                &release.name,
                "-o",
                output,
            ])
            .arg("--kubeconfig")
            .arg(&real.info.kubeconfig)
            .args(["--context", "admin"])
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let json_run = review("json");
    let text_run = review("text");
    assert_eq!(json_run.status.code(), text_run.status.code());
    let report: Value = serde_json::from_slice(&json_run.stdout).unwrap_or_else(|_| {
        panic!(
            "review rbac printed no JSON: {}",
            String::from_utf8_lossy(&json_run.stderr)
        )
    });
    let text = String::from_utf8(text_run.stdout).unwrap();
    eprintln!("rollsafe review rbac:\n{text}");
    let stderr = String::from_utf8(json_run.stderr).unwrap();
    // Every ServiceAccount the chart created was reviewed, by name.
    let created: BTreeSet<String> = release
        .objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    let reviewed: BTreeSet<String> = report["serviceAccounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(created, reviewed, "{report}");
    listed.finish().await;
    release_ns.finish().await;
    Some((json_run.status.code().unwrap_or(-1), report, text, stderr))
}

/// Asserts a review found the install minimal: exit 0, `minimal`, no difference anywhere,
/// nothing on stderr.
fn assert_minimal(outcome: Option<(i32, Value, String, String)>) -> Option<Value> {
    let (code, report, text, stderr) = outcome?;
    assert_eq!(code, 0, "{report}\n{stderr}");
    assert_eq!(report["minimal"], true, "{report}");
    for account in report["serviceAccounts"].as_array().unwrap() {
        for ns in account["namespaces"].as_array().unwrap() {
            assert_eq!(ns["difference"]["extra"], json!([]), "{ns}");
            assert_eq!(ns["difference"]["missing"], json!([]), "{ns}");
        }
    }
    assert!(
        text.trim_end()
            .ends_with("every ServiceAccount is the documented minimum"),
        "{text}"
    );
    assert_eq!(stderr, "", "stderr");
    Some(report)
}

fn account<'a>(report: &'a Value, component: &str) -> &'a Value {
    report["serviceAccounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["mode"]["component"] == component)
        .unwrap_or_else(|| panic!("no {component} in {report}"))
}

/// Namespace scope, and the controller per namespace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_namespace_scope_and_controller_per_namespace_on_real() {
    let values = r#"{"server": {"scope": "namespace"},
                     "controller": {"enabled": true, "namespaces": ["{A}"]}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    assert_eq!(account(&report, "server")["described"], "namespace scope");
    assert!(
        account(&report, "controller")["described"]
            .as_str()
            .unwrap()
            .starts_with("watching [")
    );
}

/// Cluster scope with a list, and the controller cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_cluster_scope_with_a_list_and_controller_cluster_wide_on_real() {
    let values = r#"{"server": {"scope": "cluster", "namespaces": ["{A}"]},
                     "controller": {"enabled": true}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    assert!(
        account(&report, "server")["described"]
            .as_str()
            .unwrap()
            .starts_with("cluster scope with [")
    );
    assert_eq!(account(&report, "controller")["described"], "cluster-wide");
}

/// Cluster scope without a list (a ClusterRole with `list namespaces`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_cluster_scope_on_real() {
    let values = r#"{"server": {"scope": "cluster"}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(server["described"], "cluster scope");
    let elsewhere = server["namespaces"].as_array().unwrap().last().unwrap();
    assert!(
        elsewhere["granted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["resource"] == "namespaces" && g["verb"] == "list"),
        "{elsewhere}"
    );
}

/// Unconstrained impersonation (the fallback) bounded by `impersonation.users`/`groups`: the
/// names are accepted and shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_impersonation_with_names_on_real() {
    let values = r#"{"impersonation": {"enabled": true, "constrained": false,
                                       "users": ["alice@example.com"],
                                       "groups": ["platform", "developers"]}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(server["described"], "namespace scope, impersonation");
    let shown: BTreeSet<String> = server["namespaces"][0]["difference"]["namedByValues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            format!(
                "{}/{}",
                g["resource"].as_str().unwrap(),
                g["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        shown,
        BTreeSet::from([
            "users/alice@example.com".to_owned(),
            "groups/platform".to_owned(),
            "groups/developers".to_owned()
        ])
    );
}

/// Unconstrained impersonation with no names (any user, any group), in cluster scope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_impersonation_without_names_on_real() {
    let values = r#"{"server": {"scope": "cluster"},
                     "impersonation": {"enabled": true, "constrained": false}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(server["described"], "cluster scope, impersonation");
    let shown = &server["namespaces"][0]["difference"]["namedByValues"];
    assert_eq!(shown.as_array().unwrap().len(), 2, "{shown}");
}

/// Token review with impersonation, the callers listed: a Role in the listed ServiceAccount's
/// namespace (found through its RoleBinding) with `impersonate` on that name, shown; the
/// TokenReview rule cluster-wide.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_token_review_with_impersonation_on_real() {
    let values = r#"{"impersonation": {"enabled": true, "constrained": false,
                                       "groups": ["platform"]},
                     "tokenReview": {"enabled": true, "serviceAccounts": ["{A}/caller"]}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(
        server["described"],
        "namespace scope, impersonation, token review"
    );
    let shown: Vec<String> = server["namespaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|ns| ns["difference"]["namedByValues"].as_array().unwrap())
        .map(|g| {
            format!(
                "{}/{}",
                g["resource"].as_str().unwrap(),
                g["name"].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        shown.contains(&"serviceaccounts/caller".to_owned()),
        "{shown:?}"
    );
    assert!(
        server["namespaces"][0]["granted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["resource"] == "tokenreviews.authentication.k8s.io"),
        "{server}"
    );
}

/// Constrained impersonation bounded by names, in namespace scope: `impersonate:user-info` on
/// the listed user and groups (shown as names from the values), the `impersonate-on` verbs in
/// the release namespace only, nothing elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_constrained_impersonation_with_names_on_real() {
    let values = r#"{"impersonation": {"enabled": true, "constrained": true,
                                       "users": ["alice@example.com"],
                                       "groups": ["platform", "developers"]}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(
        server["described"],
        "namespace scope, constrained impersonation"
    );
    let release_ns = &server["namespaces"][0];
    let shown: BTreeSet<String> = release_ns["difference"]["namedByValues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| format!("{} {}/{}", g["verb"], g["resource"], g["name"]).replace('"', ""))
        .collect();
    assert_eq!(
        shown,
        BTreeSet::from([
            "impersonate:user-info users.authentication.k8s.io/alice@example.com".to_owned(),
            "impersonate:user-info groups.authentication.k8s.io/platform".to_owned(),
            "impersonate:user-info groups.authentication.k8s.io/developers".to_owned(),
        ])
    );
    let granted = granted(release_ns);
    for grant in [
        "impersonate-on:user-info:get secrets",
        "impersonate-on:user-info:list deployments.apps",
        "impersonate-on:user-info:patch daemonsets.apps",
    ] {
        assert!(granted.contains(grant), "{grant}: {granted:?}");
    }
    assert!(
        !granted.iter().any(|g| g.starts_with("impersonate ")),
        "no unconstrained rule: {granted:?}"
    );
    // Elsewhere: only the cluster-wide `impersonate:user-info` (who), never what.
    let elsewhere = server["namespaces"].as_array().unwrap().last().unwrap();
    assert!(
        elsewhere["granted"]
            .as_array()
            .unwrap()
            .iter()
            .all(|g| g["verb"] == "impersonate:user-info"),
        "{elsewhere}"
    );
}

/// What the review says one namespace grants: `verb resource` each.
fn granted(namespace: &Value) -> BTreeSet<String> {
    namespace["granted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| format!("{} {}", g["verb"], g["resource"]).replace('"', ""))
        .collect()
}

/// Constrained impersonation in cluster scope with token review and no names: the
/// `impersonate-on` verbs everywhere (a ClusterRole) with the namespace list, for users and
/// for reviewed ServiceAccounts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_constrained_impersonation_cluster_scope_with_token_review_on_real() {
    let values = r#"{"server": {"scope": "cluster"},
                     "impersonation": {"enabled": true, "constrained": true},
                     "tokenReview": {"enabled": true}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    assert_eq!(
        server["described"],
        "cluster scope, constrained impersonation, token review"
    );
    let elsewhere = server["namespaces"].as_array().unwrap().last().unwrap();
    let granted = granted(elsewhere);
    for grant in [
        "impersonate-on:user-info:list namespaces",
        "impersonate-on:serviceaccount:list namespaces",
        "impersonate-on:serviceaccount:get secrets",
        "impersonate:serviceaccount serviceaccounts.authentication.k8s.io",
    ] {
        assert!(granted.contains(grant), "{grant}: {granted:?}");
    }
}

/// Constrained impersonation in cluster scope with a list: the `impersonate-on` Roles in the
/// listed namespace only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_constrained_impersonation_cluster_scope_with_a_list_on_real() {
    let values = r#"{"server": {"scope": "cluster", "namespaces": ["{A}"]},
                     "impersonation": {"enabled": true, "constrained": true}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    let server = account(&report, "server");
    let has_on = |ns: &Value| {
        ns["granted"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["verb"].as_str().unwrap().starts_with("impersonate-on:"))
    };
    let namespaces = server["namespaces"].as_array().unwrap();
    let with_on: Vec<&Value> = namespaces.iter().filter(|ns| has_on(ns)).collect();
    assert_eq!(with_on.len(), 1, "{server}");
    assert!(
        with_on[0]["namespace"]
            .as_str()
            .unwrap()
            .starts_with("t-review-rbac-a"),
        "{server}"
    );
}

/// The controller with `controller.namespaceSelector` (a ClusterRole listing and watching
/// namespaces) and `controller.argoRollouts` (Rollouts among the watched kinds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_controller_namespace_selector_and_argo_rollouts_on_real() {
    let values = r#"{"controller": {"enabled": true, "namespaceSelector": "team=a",
                                    "argoRollouts": true}}"#;
    let Some(report) = assert_minimal(review_release(values, async |_, _, _| {}).await) else {
        return;
    };
    assert_eq!(
        account(&report, "controller")["described"],
        "cluster-wide, Argo Rollouts, namespace selector"
    );
}

/// A rule granted beyond the chart (a Role the operator added, bound to the server's
/// ServiceAccount): exit 1, the rule named in both outputs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_reports_an_extra_rule_on_real() {
    let values = r#"{"server": {"scope": "namespace"}}"#;
    let outcome = review_release(values, async |real: &Real, r: &str, release: &Release| {
        real.admin_ok(&[
            "-n",
            r,
            "create",
            "role",
            "widened",
            "--verb=delete",
            "--resource=secrets",
        ]);
        real.admin_ok(&[
            "-n",
            r,
            "create",
            "rolebinding",
            "widened",
            "--role=widened",
            &format!("--serviceaccount={r}:{}", release.fullname),
        ]);
    })
    .await;
    let Some((code, report, text, stderr)) = outcome else {
        return;
    };
    assert_eq!(code, 1, "{report}\n{stderr}");
    assert_eq!(report["minimal"], false, "{report}");
    let release_ns = &account(&report, "server")["namespaces"][0];
    assert_eq!(
        release_ns["difference"]["extra"],
        json!([{"resource": "secrets", "url": "", "name": "", "verb": "delete"}]),
        "{release_ns}"
    );
    assert_eq!(
        release_ns["difference"]["missing"],
        json!([]),
        "{release_ns}"
    );
    assert!(
        text.contains("+ delete secrets  (beyond the documented minimum)"),
        "{text}"
    );
    assert!(text.contains("NOT minimal"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("difference from the documented minimum found"),
        "{text}"
    );
    assert_eq!(stderr, "");
}

/// A documented rule removed (the access-rules Role deleted): exit 1, both rules named as
/// missing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_reports_a_missing_rule_on_real() {
    let values = r#"{"server": {"scope": "namespace"}}"#;
    let outcome = review_release(values, async |real: &Real, r: &str, release: &Release| {
        let role = format!("{}-access-rules", release.fullname);
        real.admin_ok(&["-n", r, "delete", "role", &role]);
    })
    .await;
    let Some((code, report, text, stderr)) = outcome else {
        return;
    };
    assert_eq!(code, 1, "{report}\n{stderr}");
    let release_ns = &account(&report, "server")["namespaces"][0];
    assert_eq!(release_ns["difference"]["extra"], json!([]), "{release_ns}");
    assert_eq!(
        release_ns["difference"]["missing"],
        json!([
            {"resource": "configmaps", "url": "", "name": "krypton-access", "verb": "get"},
            {"resource": "leases.coordination.k8s.io", "url": "", "name": LEASE, "verb": "get"}
        ]),
        "{release_ns}"
    );
    assert!(
        text.contains("- get configmaps/krypton-access  (documented, not granted)"),
        "{text}"
    );
    assert_eq!(stderr, "");
}

/// Nothing of the chart in the namespace: exit 2, a fixed message on stderr, nothing on stdout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_rbac_without_a_release_is_exit_2_on_real() {
    let Some(real) = Real::new() else {
        return;
    };
    let empty = TestNamespace::create(Substrate::Real, "review-rbac-empty").await;
    let output = Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(["review", "rbac", "-n", &empty.name])
        .arg("--kubeconfig")
        .arg(&real.info.kubeconfig)
        .args(["--context", "admin"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr).trim(),
        "rollsafe: cannot review the RBAC (no_service_account)"
    );
    empty.finish().await;
}

// ---------------------------------------------------------------------------------------------
// Impersonation: constrained (KEP-5284) and the unconstrained fallback.

/// The impersonated callers' names (session e-mails) and groups.
const ALICE: &str = "alice@example.com";
const BOB: &str = "bob@example.com";
/// An approval's hold, as `rollsafe watch` marks it.
const APPROVAL_MARK: &str = "approval since=2026-12-03T06:00:00Z digest=v1:awaiting-approval";

/// One request of the stolen-token table: what it is, and the request (sent with the
/// ServiceAccount's token, impersonating alice in `platform`).
struct Attempt {
    what: &'static str,
    request: http::Request<Vec<u8>>,
}

/// The requests a stolen ServiceAccount token is tried with, impersonating a powerful user
/// (alice: `admin` in the release namespace and in `other`). The writes are server-side dry
/// runs (`dryRun=All`): authorized exactly as the real write, never stored.
fn stolen_token_attempts(r: &str, o: &str) -> Vec<Attempt> {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "stolen"},
        "spec": {"containers": [{"name": "x", "image": "registry.example/x:1"}]}});
    let post = |path: String, body: &Value| {
        http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(body).unwrap())
            .unwrap()
    };
    let dry_merge = |path: String| {
        http::Request::patch(path)
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"metadata":{"annotations":{"stolen":"yes"}}}"#.to_vec())
            .unwrap()
    };
    vec![
        Attempt {
            what: "delete a Deployment",
            request: http::Request::delete(format!(
                "/apis/apps/v1/namespaces/{r}/deployments/web?dryRun=All"
            ))
            .body(Vec::new())
            .unwrap(),
        },
        Attempt {
            what: "get a Secret in another namespace",
            request: get(&format!("/api/v1/namespaces/{o}/secrets/{SECRET}")),
        },
        Attempt {
            what: "create a pod",
            request: post(format!("/api/v1/namespaces/{r}/pods?dryRun=All"), &pod),
        },
        Attempt {
            what: "list Secrets",
            request: get(&format!("/api/v1/namespaces/{r}/secrets")),
        },
        Attempt {
            what: "get a ConfigMap",
            request: get(&format!(
                "/api/v1/namespaces/{r}/configmaps/kube-root-ca.crt"
            )),
        },
        Attempt {
            what: "patch a Deployment in another namespace",
            request: dry_merge(format!(
                "/apis/apps/v1/namespaces/{o}/deployments/web?dryRun=All"
            )),
        },
        // What rollsafe itself does as the caller: the same in both columns.
        Attempt {
            what: "get a Secret in a namespace in scope (rollsafe's read)",
            request: get(&format!("/api/v1/namespaces/{r}/secrets/{SECRET}")),
        },
        Attempt {
            what: "patch a Deployment in a namespace in scope (rollsafe's patch)",
            request: dry_merge(format!(
                "/apis/apps/v1/namespaces/{r}/deployments/web?dryRun=All"
            )),
        },
    ]
}

/// The attempts rollsafe never makes (refused when constrained, allowed when not).
const NOT_ROLLSAFES: usize = 6;

/// Sends `request` with `client`; the HTTP status.
async fn status_of(client: &kube::Client, request: http::Request<Vec<u8>>) -> u16 {
    let response = client
        .send(request.map(kube::client::Body::from))
        .await
        .expect("the API server answered");
    response.status().as_u16()
}

/// `rollsafe serve` with the chart's environment (and `overrides`), as the pod runs it, until
/// it exits or `limit` passes: its exit code (`None`: still running, then stopped) and log.
async fn serve_until_exit(
    real: &Real,
    deployment: &Value,
    sa_dir: &Path,
    session_secret: &str,
    dir: &Path,
    overrides: &[(&str, &str)],
) -> (Option<i32>, String) {
    let log = dir.join("serve-refused.log");
    let mut command = serve_command(real, deployment, sa_dir, session_secret, dir, free_port());
    command
        .envs(overrides.iter().copied())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + SETTLE;
    let code = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    (code, std::fs::read_to_string(&log).unwrap_or_default())
}

/// A request to the server with a bearer session: its status and JSON body.
async fn call(port: u16, method: &str, path: &str, token: &str) -> (u16, Value) {
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let response =
        rollsafe_testing::http::exchange(&format!("127.0.0.1:{port}"), request.as_bytes(), SETTLE)
            .await
            .expect("the server answered");
    (response.status, response.json())
}

/// The chart with impersonation (`constrained` or the unconstrained fallback) on the real
/// server, `rollsafe serve` running with its ServiceAccount's token: approvals, previews and
/// restarts work as the caller; the caller's own RBAC decides (bob, who may read the Secret and
/// list the workloads but not patch them, restarts and approves nothing); then the stolen-token
/// table — the ServiceAccount's token used directly, impersonating alice (who may do all of it
/// herself) — each attempt's status, returned for the before/after table.
async fn impersonation_scenario(constrained: bool) -> Option<Vec<(&'static str, u16)>> {
    let real = Real::new()?;
    let label = if constrained {
        "imp-constrained"
    } else {
        "imp-unconstrained"
    };
    let release_ns = TestNamespace::create(Substrate::Real, label).await;
    let other = TestNamespace::create(Substrate::Real, &format!("{label}-other")).await;
    let (r, o) = (release_ns.name.clone(), other.name.clone());
    let dir = release_ns.dir.path();

    // Every authenticated user is an admin of the server (no admin lists): only Kubernetes
    // decides between alice and bob.
    let values = json!({"server": {"restartEnabled": true},
                        "impersonation": {"enabled": true, "constrained": constrained,
                                          "groups": ["platform", "ops"]}});
    let release = Release::render(&real, &values, &r);
    let mut applied = release.of("server", &RBAC_KINDS);
    applied.extend(release.of("server", &["Secret"]));
    let _cluster_scoped = ClusterScoped::of(&real, &applied);
    real.apply(&applied, dir);
    let deployment = release.deployment("server");
    let told = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "KRYPTON_IMPERSONATION_CONSTRAINED")
        .map(|e| e["value"].clone());
    assert_eq!(told, Some(json!(constrained.to_string())));

    // The callers' own rights: alice may do anything in both namespaces (ClusterRole `admin`);
    // bob may read Secrets and list workloads in the release namespace, not patch.
    for ns in [&r, &o] {
        real.admin_ok(&[
            "-n",
            ns,
            "create",
            "rolebinding",
            "alice-admin",
            "--clusterrole=admin",
            &format!("--user={ALICE}"),
        ]);
    }
    real.admin_ok(&[
        "-n",
        &r,
        "create",
        "role",
        "reader",
        "--verb=get",
        "--resource=secrets",
    ]);
    real.admin_ok(&[
        "-n",
        &r,
        "create",
        "role",
        "lister",
        "--verb=list",
        "--resource=deployments.apps,statefulsets.apps,daemonsets.apps",
    ]);
    for role in ["reader", "lister"] {
        real.admin_ok(&[
            "-n",
            &r,
            "create",
            "rolebinding",
            &format!("bob-{role}"),
            &format!("--role={role}"),
            &format!("--user={BOB}"),
        ]);
    }

    let labels = json!({"app.kubernetes.io/part-of": "imp-test"});
    let mut held = consumer("Deployment", "held", &labels);
    held["metadata"]["annotations"] = json!({PENDING: APPROVAL_MARK});
    release_ns
        .apply([
            rollsafe_testing::secret(&r, SECRET, "hunter2"),
            consumer("Deployment", "web", &labels),
            consumer("StatefulSet", "worker", &labels),
            held,
        ])
        .await;
    other
        .apply([
            rollsafe_testing::secret(&o, SECRET, "hunter2"),
            consumer("Deployment", "web", &labels),
        ])
        .await;
    for (kind, name) in [
        ("Deployment", "web"),
        ("StatefulSet", "worker"),
        ("Deployment", "held"),
    ] {
        wait_rolled_out(&release_ns, kind, name).await;
    }

    let sa = release.fullname.clone();
    let token = real.token(&r, &sa, None);
    let sa_dir = dir.join("serviceaccount");
    std::fs::create_dir_all(&sa_dir).unwrap();
    std::fs::write(sa_dir.join("token"), &token).unwrap();
    std::fs::copy(&real.ca, sa_dir.join("ca.crt")).unwrap();
    std::fs::write(sa_dir.join("namespace"), &r).unwrap();
    let session = release_ns
        .get("v1", "Secret", &format!("{}-session", release.fullname))
        .await
        .unwrap();
    let session_secret = base64_decode(session["data"]["session-secret"].as_str().unwrap());

    // Holding the unconstrained rules, a server told to run constrained stops at once with one
    // fixed line (and never logs its token).
    if !constrained {
        let (code, log) = serve_until_exit(
            &real,
            &deployment,
            &sa_dir,
            &session_secret,
            dir,
            &[("KRYPTON_IMPERSONATION_CONSTRAINED", "true")],
        )
        .await;
        assert_eq!(code, Some(1), "{log}");
        assert!(log.contains("unconstrained_rule_held"), "{log}");
        assert!(!log.contains(&token), "the token is never logged");
    }
    let server = serve_in_cluster(&real, &deployment, &sa_dir, &session_secret, dir).await;
    let mode = if constrained {
        "constrained"
    } else {
        "unconstrained"
    };
    let (status, config) = call(server.port, "GET", "/api/config", "").await;
    assert_eq!(status, 200);
    assert_eq!(config["impersonationMode"], mode, "{config}");
    assert!(
        server.log().contains(&format!("impersonation: {mode}")),
        "{}",
        server.log()
    );

    let alice = session_token(&session_secret, ALICE, &["platform"]);
    let bob = session_token(&session_secret, BOB, &["ops"]);
    let approve = format!("/api/namespaces/{r}/secrets/{SECRET}/consumers/Deployment/held/approve");
    // The caller's own RBAC decides: bob may not patch, so he approves nothing …
    let (status, body) = call(server.port, "POST", &approve, &bob).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        body["error"],
        rollsafe_server::error::KUBERNETES_DENIED,
        "{body}"
    );
    let object = release_ns
        .get("apps/v1", "Deployment", "held")
        .await
        .unwrap();
    assert_eq!(metadata_annotation(&object, APPROVED), None);
    // … alice approves, as herself.
    let (status, body) = call(server.port, "POST", &approve, &alice).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["digest"], "v1:awaiting-approval", "{body}");
    let object = release_ns
        .get("apps/v1", "Deployment", "held")
        .await
        .unwrap();
    assert_eq!(
        metadata_annotation(&object, APPROVED).as_deref(),
        Some("v1:awaiting-approval")
    );
    // The preview, as alice.
    let preview_path = format!("/api/namespaces/{r}/secrets/{SECRET}/consumers");
    let (status, preview) = call(server.port, "GET", &preview_path, &alice).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["workloads"].as_array().map(Vec::len),
        Some(3),
        "{preview}"
    );
    // The restart, as alice: every consumer patched.
    wait_rolled_out(&release_ns, "Deployment", "held").await;
    let target = format!("{r}/{SECRET}");
    let (code, result) = restart(server.port, &alice, &target);
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    assert_eq!(result["matched"], 3, "{result}");
    assert_eq!(result["failures"], json!([]), "{result}");
    assert_never_refused("rollsafe serve", &server.log());
    let mut marks = Vec::new();
    for (kind, name) in [
        ("Deployment", "web"),
        ("StatefulSet", "worker"),
        ("Deployment", "held"),
    ] {
        let object = release_ns.get("apps/v1", kind, name).await.unwrap();
        marks.push(
            template_annotation(&object, RESTART_ANNOTATION)
                .unwrap_or_else(|| panic!("{kind} {name} restarted")),
        );
        wait_rolled_out(&release_ns, kind, name).await;
    }
    // Bob's restart: he may read the Secret and list, so the run happens, and every patch is
    // refused by Kubernetes — nothing restarts.
    let (code, result) = restart(server.port, &bob, &target);
    assert_ne!(code, 0, "{result}");
    assert_eq!(result["status"], "failed", "{result}");
    assert!(
        result["failures"].to_string().contains("forbidden"),
        "{result}"
    );
    let web = release_ns
        .get("apps/v1", "Deployment", "web")
        .await
        .unwrap();
    assert_eq!(
        template_annotation(&web, RESTART_ANNOTATION).as_ref(),
        marks.first()
    );
    drop(server);

    // The stolen token: the ServiceAccount's credentials used directly, impersonating alice
    // (a group the chart lists).
    let connection = rollsafe_kube::Connection::in_cluster(
        &rollsafe_kube::connection::InCluster::new("127.0.0.1", real.port, &sa_dir),
    )
    .unwrap();
    let as_alice = rollsafe_kube::Impersonation::new(ALICE, ["platform"]).unwrap();
    let stolen = connection.client(Some(&as_alice));
    let mut measured = Vec::new();
    for attempt in stolen_token_attempts(&r, &o) {
        measured.push((attempt.what, status_of(&stolen, attempt.request).await));
    }
    // And acting as someone the chart does not list, for rollsafe's own read: refused in both
    // modes (the names bound either rule).
    let unlisted = rollsafe_kube::Impersonation::new(ALICE, ["auditors"]).unwrap();
    let read = get(&format!("/api/v1/namespaces/{r}/secrets/{SECRET}"));
    measured.push((
        "get a Secret in scope as an unlisted group",
        status_of(&connection.client(Some(&unlisted)), read).await,
    ));
    eprintln!("the stolen token, impersonation {mode}:");
    for (what, status) in &measured {
        eprintln!("  {status}  {what}");
    }
    for (index, (what, status)) in measured.iter().enumerate() {
        let allowed = (200..300).contains(status);
        let expected = match index {
            i if i < NOT_ROLLSAFES => !constrained,
            i if i < NOT_ROLLSAFES + 2 => true,
            _ => false,
        };
        assert_eq!(allowed, expected, "{mode}: {what} answered {status}");
        if !allowed {
            assert_eq!(*status, 403, "{mode}: {what}");
        }
    }
    // What a dry run would have done was not stored.
    assert!(release_ns.get("v1", "Pod", "stolen").await.is_none());
    assert!(
        release_ns
            .get("apps/v1", "Deployment", "web")
            .await
            .is_some()
    );
    other.finish().await;
    release_ns.finish().await;
    Some(measured)
}

/// Where the API server does not serve constrained impersonation — a kube-apiserver v1.37.2 of
/// its own, started with `--feature-gates=ConstrainedImpersonation=false` (etcd and the API
/// server only) — a server holding the chart's constrained rules does not start: told `true`
/// (the chart) or `auto`, it stops at once with one fixed line naming the fallback, and never
/// logs its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_impersonation_stops_where_the_api_server_does_not_serve_it_on_real() {
    use rollsafe_testing::control_plane::{ControlPlane, Options, binaries};
    // The shared control plane is not used, but a run without one fails as every test here.
    if Real::new().is_none() {
        return;
    }
    let bin = tokio::task::spawn_blocking(binaries::build)
        .await
        .unwrap()
        .expect("the control plane's binaries");
    let options = Options {
        api_server_flags: vec!["--feature-gates=ConstrainedImpersonation=false".to_owned()],
        api_server_only: true,
    };
    let plane = ControlPlane::start_with(&bin, &options)
        .await
        .expect("an API server without constrained impersonation");
    let real = Real::of(plane.info().clone()).unwrap();
    eprintln!(
        "kube-apiserver {} with ConstrainedImpersonation=false",
        real.info.version
    );
    let dir = tempfile::tempdir().unwrap();
    let r = "rollsafe";
    real.admin_ok(&["create", "namespace", r]);
    let values = json!({"impersonation": {"enabled": true, "constrained": true,
                                          "groups": ["platform"]}});
    let release = Release::render(&real, &values, r);
    let mut applied = release.of("server", &RBAC_KINDS);
    applied.extend(release.of("server", &["Secret"]));
    real.apply(&applied, dir.path());
    let token = real.token(r, &release.fullname, None);
    let sa_dir = dir.path().join("serviceaccount");
    std::fs::create_dir_all(&sa_dir).unwrap();
    std::fs::write(sa_dir.join("token"), &token).unwrap();
    std::fs::copy(&real.ca, sa_dir.join("ca.crt")).unwrap();
    std::fs::write(sa_dir.join("namespace"), r).unwrap();
    let session = real.admin_ok(&[
        "-n",
        r,
        "get",
        "secret",
        &format!("{}-session", release.fullname),
        "-o",
        "jsonpath={.data.session-secret}",
    ]);
    let session_secret = base64_decode(session.trim());
    let deployment = release.deployment("server");
    for told in ["true", "auto"] {
        let (code, log) = serve_until_exit(
            &real,
            &deployment,
            &sa_dir,
            &session_secret,
            dir.path(),
            &[("KRYPTON_IMPERSONATION_CONSTRAINED", told)],
        )
        .await;
        eprintln!("told {told}, rollsafe serve logged:\n{log}");
        assert_eq!(code, Some(1), "told {told}: {log}");
        assert!(
            log.contains("does not serve constrained impersonation")
                && log.contains("constrained_impersonation_not_served")
                && log.contains("impersonation.constrained=false"),
            "told {told}: {log}"
        );
        assert!(!log.contains(&token), "the token is never logged");
    }
    drop(plane);
}

/// Constrained impersonation, the chart's default on Kubernetes 1.36+: everything rollsafe does
/// as the caller works, and the ServiceAccount's token can do nothing else as anyone — each
/// attempt refused with 403 by the real API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constrained_impersonation_works_as_the_caller_and_refuses_a_stolen_token_on_real() {
    impersonation_scenario(true).await;
}

/// The unconstrained fallback (`impersonation.constrained: false`): the same restarts,
/// previews and approvals work — and the same token, impersonating the same user, may do every
/// one of those things (the "before" column; the constrained test's refusals come from the
/// constraint, not from alice's rights).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconstrained_impersonation_fallback_lets_a_stolen_token_act_as_anyone_on_real() {
    impersonation_scenario(false).await;
}

/// The documented table and docs/install.md agree: every rule of
/// `rollsafe_kube::least_privilege::RULES` is a row of the install guide's RBAC tables.
#[test]
fn every_documented_rule_is_a_row_of_the_install_guide() {
    let guide = std::fs::read_to_string(install_common::repo().join("docs/install.md")).unwrap();
    for rule in rollsafe_kube::least_privilege::RULES {
        assert!(
            guide.contains(&format!("| {} |", rule.doc)),
            "docs/install.md has no row `| {} |`",
            rule.doc
        );
    }
}
