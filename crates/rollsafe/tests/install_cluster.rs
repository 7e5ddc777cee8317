//! The chart's RBAC proven against the API, and the binary run as its pod runs it.
//!
//! The chart is rendered with Helm's own SDK; its ServiceAccount, Roles, ClusterRoles,
//! bindings and session Secret are applied to the emulator with real kubectl (the server runs
//! as the test's child rather than through the chart's Deployment, and the emulator serves no
//! PodDisruptionBudgets, NetworkPolicies or ServiceMonitors; the render tests check every
//! object the chart creates). Then `rollsafe serve` runs with
//! no kubeconfig, only `KUBERNETES_SERVICE_HOST`/`PORT` and a ServiceAccount directory
//! (token, CA, namespace) — the emulator's TLS and CA on the same port — and with the
//! ServiceAccount's identity:
//!
//! (a) a full restart run succeeds: the RBAC is sufficient;
//! (b) the same identity is refused reading Secrets and patching workloads outside its
//!     scope, deleting anything, listing Secrets, reading another ConfigMap, and
//!     impersonating a ServiceAccount — the RBAC is minimal; each denial is read from the
//!     emulator's request log;
//! (c) a rotated token file is picked up without a restart.
//!
//! With impersonation the chart is rendered with `impersonation.constrained: false`: the
//! emulator serves only the unconstrained `impersonate` check (as Kubernetes before 1.36 does);
//! constrained impersonation is proven on the real API server (`install_real.rs`).
//!
//! The controller likewise: its ServiceAccount and RBAC applied, `rollsafe watch
//! --leader-elect` run with the chart's environment and that identity adopts and rolls a
//! workload in its namespace, holds the Lease, and is refused outside its scope.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod install_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use install_common::*;
use rollsafe_emulator::{Emulator, RequestLogEntry, RunningEmulator};
use rollsafe_testing::{TestCluster, kubectl};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(60);
const SA_NAME: &str = "rs-rollsafe";
const SA_USER: &str = "system:serviceaccount:rollsafe:rs-rollsafe";
const SA_TOKEN: &str = "sa-token-first";
const ROTATED_USER: &str = "system:serviceaccount:rollsafe:rs-rollsafe-rotated";
const ROTATED_TOKEN: &str = "sa-token-rotated";
const CONTROLLER_SA: &str = "rs-rollsafe-controller";
const CONTROLLER_USER: &str = "system:serviceaccount:rollsafe:rs-rollsafe-controller";
const CONTROLLER_TOKEN: &str = "controller-token";

fn consumer(namespace: &str, name: &str, secret: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1",
                                         "envFrom": [{"secretRef": {"name": secret}}]}]}
            }
        }
    })
}

fn seeds() -> Vec<Value> {
    let secret = |namespace: &str, name: &str| {
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": name, "namespace": namespace},
               "data": {"password": "aHVudGVyMg=="}})
    };
    let mut worker = consumer("rollsafe", "worker", "db-credentials");
    worker["kind"] = json!("StatefulSet");
    worker["spec"]["serviceName"] = json!("worker");
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rollsafe"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
        secret("rollsafe", "db-credentials"),
        consumer("rollsafe", "web", "db-credentials"),
        worker,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "unrelated", "namespace": "rollsafe"},
               "data": {"a": "b"}}),
        secret("other", "db-credentials"),
        consumer("other", "web", "db-credentials"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
        secret("team-a", "db-credentials"),
        consumer("team-a", "web", "db-credentials"),
    ]
}

/// The chart objects the emulator serves, from a render in `values`' mode.
fn chart_objects(python: &Path, values: &Value) -> Vec<Value> {
    let served = [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Secret",
    ];
    objects(&render(python, values))
        .into_iter()
        .filter(|o| served.contains(&o["kind"].as_str().unwrap()))
        .collect()
}

fn kubectl_apply(kubectl: &Path, kubeconfig: &Path, objects: &[Value], dir: &Path) {
    let file = dir.join("chart-rbac.json");
    std::fs::write(
        &file,
        serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": objects}))
            .unwrap(),
    )
    .unwrap();
    let output = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--context", "admin", "apply", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "kubectl apply failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// kubectl acting with the ServiceAccount's token, as anything holding it could.
fn kubectl_as_service_account(
    kubectl: &Path,
    emulator: &RunningEmulator,
    ca: &Path,
    args: &[&str],
) -> std::process::Output {
    Command::new(kubectl)
        .env("KUBECONFIG", "/dev/null")
        .arg(format!("--server={}", emulator.https_url()))
        .arg(format!("--certificate-authority={}", ca.display()))
        .arg(format!("--token={SA_TOKEN}"))
        .args(args)
        .output()
        .unwrap()
}

fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment of a pod running `container` (its literal `env` only), in the cluster the
/// emulator stands for: the in-cluster service variables, the mounted ServiceAccount
/// directory, a home, quiet logs and discarded output.
fn as_in_cluster(
    command: &mut Command,
    container: &Value,
    emulator: &RunningEmulator,
    service_account_dir: &Path,
    home: &Path,
) {
    command.env_clear();
    for variable in container["env"].as_array().unwrap() {
        if let Some(value) = variable["value"].as_str() {
            command.env(variable["name"].as_str().unwrap(), value);
        }
    }
    command
        .env("HOME", home)
        .env("KUBERNETES_SERVICE_HOST", "127.0.0.1")
        .env(
            "KUBERNETES_SERVICE_PORT",
            emulator.addr().port().to_string(),
        )
        .env("ROLLSAFE_SERVICEACCOUNT_DIR", service_account_dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
}

/// `rollsafe serve` as the chart's Deployment runs it: the chart's environment, no
/// kubeconfig anywhere, the API server from `KUBERNETES_SERVICE_*`, credentials from the
/// ServiceAccount directory.
fn serve_in_cluster(
    deployment: &Value,
    emulator: &RunningEmulator,
    service_account_dir: &Path,
    home: &Path,
    session_secret: &str,
) -> Server {
    // The port is free when chosen, but another test may bind it before the server does: a
    // server that exits before it is ready is started again on another port.
    for _ in 0..3 {
        let port = free_port();
        let mut command = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"));
        command.arg("serve");
        as_in_cluster(
            &mut command,
            &deployment["spec"]["template"]["spec"]["containers"][0],
            emulator,
            service_account_dir,
            home,
        );
        command
            .env("SESSION_SECRET", session_secret)
            .env("ROLLSAFE_LISTEN", format!("127.0.0.1:{port}"))
            .env("ROLLSAFE_ADMIN_LISTEN", "127.0.0.1:0");
        let child = command.spawn().unwrap();
        let mut server = Server { child, port };
        let ready = poll("the server to be ready or gone", || {
            if http_status(port, "/readyz") == Some(200) {
                return Some(true);
            }
            matches!(server.child.try_wait(), Ok(Some(_))).then_some(false)
        });
        if ready {
            return server;
        }
    }
    panic!("the server exited before it was ready, three times");
}

fn session_token(secret: &str, email: &str, groups: &[&str]) -> String {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"));
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

fn restart(port: u16, token: &str, target: &str) -> (i32, Value) {
    let output = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"))
        .args([
            "restart",
            "--server",
            &format!("http://127.0.0.1:{port}"),
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

fn denied(log: &[RequestLogEntry], verb: &str, resource: &str, namespace: Option<&str>) -> bool {
    denied_to(SA_USER, log, verb, resource, namespace)
}

fn denied_to(
    user: &str,
    log: &[RequestLogEntry],
    verb: &str,
    resource: &str,
    namespace: Option<&str>,
) -> bool {
    log.iter().any(|e| {
        e.user.as_deref() == Some(user)
            && e.verb.as_deref() == Some(verb)
            && e.resource.as_deref() == Some(resource)
            && e.namespace.as_deref() == namespace
            && e.status == 403
    })
}

struct Cluster {
    emulator: RunningEmulator,
    python: PathBuf,
    kubectl: PathBuf,
    dir: tempfile::TempDir,
}

async fn cluster() -> Option<Cluster> {
    let python = helm_python()?;
    let kubectl = kubectl()?;
    let TestCluster {
        emu: emulator, dir, ..
    } = TestCluster::start_with(
        Emulator::builder()
            .seed_objects(seeds())
            .identity(
                SA_USER,
                SA_TOKEN,
                &["system:serviceaccounts", "system:serviceaccounts:rollsafe"],
            )
            .identity(
                ROTATED_USER,
                ROTATED_TOKEN,
                &["system:serviceaccounts", "system:serviceaccounts:rollsafe"],
            )
            .identity(
                CONTROLLER_USER,
                CONTROLLER_TOKEN,
                &["system:serviceaccounts", "system:serviceaccounts:rollsafe"],
            ),
    )
    .await;
    Some(Cluster {
        emulator,
        python,
        kubectl,
        dir,
    })
}

/// The server pod's ServiceAccount directory.
fn service_account_dir(cluster: &Cluster) -> PathBuf {
    service_account_dir_named(cluster, "serviceaccount", SA_TOKEN)
}

/// A pod's ServiceAccount directory `name` under the cluster's directory: `token`, the
/// cluster CA, the namespace.
fn service_account_dir_named(cluster: &Cluster, name: &str, token: &str) -> PathBuf {
    let dir = cluster.dir.path().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("token"), token).unwrap();
    std::fs::write(dir.join("ca.crt"), cluster.emulator.ca_pem()).unwrap();
    std::fs::write(dir.join("namespace"), NAMESPACE).unwrap();
    dir
}

/// The chart's `rollsafe serve` running as its Deployment would, and what a test needs
/// to call it: the session key the chart generated and the pod's ServiceAccount directory.
struct Served {
    home: tempfile::TempDir,
    sa_dir: PathBuf,
    session_secret: String,
    server: Server,
}

/// Renders the chart with `values` and starts its server against the applied release,
/// with the session key as the pod gets it: from the chart's Secret.
fn serve_chart(cluster: &Cluster, values: &Value) -> Served {
    let secret = cluster
        .emulator
        .get_object("secrets", Some(NAMESPACE), "rs-rollsafe-session")
        .unwrap();
    let session_secret = String::from_utf8(base64_decode(
        secret["data"]["session-secret"].as_str().unwrap(),
    ))
    .unwrap();
    let deployment = objects_of_render(&cluster.python, values, "Deployment");
    let sa_dir = service_account_dir(cluster);
    let home = tempfile::tempdir().unwrap();
    let server = serve_in_cluster(
        &deployment,
        &cluster.emulator,
        &sa_dir,
        home.path(),
        &session_secret,
    );
    Served {
        home,
        sa_dir,
        session_secret,
        server,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn namespace_scope_rbac_is_sufficient_and_minimal_in_cluster() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"]}});
    let objects = chart_objects(&cluster.python, &values);
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &objects, cluster.dir.path());
    let service_account = cluster
        .emulator
        .get_object("serviceaccounts", Some(NAMESPACE), SA_NAME)
        .expect("the chart's ServiceAccount was applied");
    assert_eq!(service_account["automountServiceAccountToken"], false);

    // The session key the chart generated, as the pod gets it: from the Secret.
    let secret = cluster
        .emulator
        .get_object("secrets", Some(NAMESPACE), "rs-rollsafe-session")
        .unwrap();
    let session_secret = String::from_utf8(base64_decode(
        secret["data"]["session-secret"].as_str().unwrap(),
    ))
    .unwrap();
    assert_eq!(session_secret.len(), 64);

    // Helm's lookup keeps it on the next upgrade.
    let upgrade = helm(
        &cluster.python,
        json!({"op": "lookup", "chart": chart_dir(), "values": values, "name": RELEASE,
               "namespace": NAMESPACE, "kubeconfig": kubeconfig}),
    )
    .unwrap();
    let again = upgrade["manifests"]["rollsafe/templates/session-secret.yaml"]
        .as_str()
        .unwrap();
    assert!(
        again.contains(secret["data"]["session-secret"].as_str().unwrap()),
        "an upgrade must keep the generated session key"
    );

    let deployment = objects_of_render(&cluster.python, &values, "Deployment");
    let sa_dir = service_account_dir(&cluster);
    let home = tempfile::tempdir().unwrap();
    cluster.emulator.clear_requests();
    let server = serve_in_cluster(
        &deployment,
        &cluster.emulator,
        &sa_dir,
        home.path(),
        &session_secret,
    );

    // (a) A full restart run, every call made as the ServiceAccount.
    let token = session_token(&session_secret, "alice@example.com", &["platform"]);
    let (code, result) = restart(server.port, &token, "rollsafe/db-credentials");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    assert_eq!(result["requested"].as_array().unwrap().len(), 2, "{result}");
    let mut rolled: Vec<String> = cluster
        .emulator
        .rollouts()
        .iter()
        .map(|r| format!("{}/{}/{}", r.kind, r.namespace, r.name))
        .collect();
    rolled.sort();
    assert_eq!(
        rolled,
        ["Deployment/rollsafe/web", "StatefulSet/rollsafe/worker"]
    );
    let log = cluster.emulator.requests();
    let kube_calls: Vec<&RequestLogEntry> = log.iter().filter(|e| e.verb.is_some()).collect();
    assert!(!kube_calls.is_empty());
    for entry in &kube_calls {
        assert_eq!(entry.user.as_deref(), Some(SA_USER), "{entry:?}");
        assert!(entry.impersonated_user.is_none());
        assert!(entry.status < 400, "the RBAC must allow the run: {entry:?}");
    }
    for (verb, resource) in [
        ("get", "secrets"),
        ("list", "deployments"),
        ("list", "statefulsets"),
        ("list", "daemonsets"),
        ("patch", "deployments"),
        ("patch", "statefulsets"),
    ] {
        assert!(
            kube_calls.iter().any(|e| e.is(verb, resource)),
            "{verb} {resource} was made"
        );
    }

    // The access ConfigMap: readable (missing is fine); any other ConfigMap is not.
    let ca = sa_dir.join("ca.crt");
    cluster.emulator.clear_requests();
    // Writes go straight to the API, as the server's own in-cluster client sends them
    // (kubectl would stop at the GET it makes first).
    let connection =
        rollsafe_kube::Connection::in_cluster(&rollsafe_kube::connection::InCluster::new(
            "127.0.0.1",
            cluster.emulator.addr().port(),
            &sa_dir,
        ))
        .unwrap();
    let client = connection.client(None);
    let merge = |path: &str| {
        http::Request::patch(path)
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"metadata":{"annotations":{"x":"y"}}}"#.to_vec())
            .unwrap()
    };
    let delete = |path: &str| http::Request::delete(path).body(Vec::new()).unwrap();
    for request in [
        merge("/apis/apps/v1/namespaces/other/deployments/web"),
        delete("/apis/apps/v1/namespaces/rollsafe/deployments/web"),
        delete("/api/v1/namespaces/rollsafe/secrets/db-credentials"),
    ] {
        let refused = client.request_text(request).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
            "{refused:?}"
        );
    }
    let attempts: [&[&str]; 6] = [
        &["-n", "other", "get", "secret", "db-credentials"],
        &["-n", "other", "get", "deployments"],
        &["-n", "rollsafe", "get", "secrets"],
        &["-n", "rollsafe", "get", "configmap", "unrelated"],
        &["-n", "rollsafe", "get", "leases"],
        &[
            "-n",
            "rollsafe",
            "get",
            "secrets",
            "--as",
            "system:serviceaccount:kube-system:default",
        ],
    ];
    for args in attempts {
        let output = kubectl_as_service_account(&cluster.kubectl, &cluster.emulator, &ca, args);
        assert!(!output.status.success(), "allowed: kubectl {args:?}");
    }
    let log = cluster.emulator.requests();
    assert!(
        denied(&log, "get", "secrets", Some("other")),
        "read a Secret outside scope"
    );
    assert!(
        denied(&log, "patch", "deployments", Some("other")),
        "patch outside scope"
    );
    assert!(
        denied(&log, "list", "deployments", Some("other")),
        "list outside scope"
    );
    assert!(
        denied(&log, "delete", "deployments", Some("rollsafe")),
        "delete a workload"
    );
    assert!(
        denied(&log, "delete", "secrets", Some("rollsafe")),
        "delete a Secret"
    );
    assert!(
        denied(&log, "list", "secrets", Some("rollsafe")),
        "list Secrets"
    );
    assert!(
        denied(&log, "get", "configmaps", Some("rollsafe")),
        "another ConfigMap"
    );
    assert!(
        denied(&log, "list", "leases", Some("rollsafe")),
        "leases: controller only"
    );
    assert!(
        log.iter().any(|e| e.user.as_deref() == Some(SA_USER)
            && e.impersonated_user.as_deref() == Some("system:serviceaccount:kube-system:default")
            && e.status == 403),
        "impersonating a ServiceAccount must be refused: {log:#?}"
    );
    assert!(
        cluster
            .emulator
            .get_object("deployments", Some("rollsafe"), "web")
            .is_some()
    );

    // (c) Token rotation: the file is replaced (as the kubelet does); the running server
    // sends the new token on its next call, without a restart.
    cluster.emulator.clear_requests();
    write_atomically(&sa_dir.join("token"), "a-token-the-cluster-does-not-know");
    poll("the server to send the unknown token", || {
        (http_status(server.port, "/readyz") == Some(503)).then_some(())
    });
    assert!(
        cluster
            .emulator
            .requests()
            .iter()
            .any(|e| e.path == "/version" && e.status == 401 && e.user.is_none())
    );
    write_atomically(&sa_dir.join("token"), ROTATED_TOKEN);
    poll("the server to use the rotated token", || {
        (http_status(server.port, "/readyz") == Some(200)).then_some(())
    });
    let last = cluster
        .emulator
        .requests()
        .into_iter()
        .rev()
        .find(|e| e.path == "/version")
        .unwrap();
    assert_eq!(last.user.as_deref(), Some(ROTATED_USER));
    drop(server);
    cluster.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn impersonation_rbac_is_restricted_to_the_listed_groups() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"]},
                        // The emulator checks the unconstrained rules only, as a cluster before
                        // Kubernetes 1.36 does (constrained: install_real.rs, on the real server).
                        "impersonation": {"enabled": true, "constrained": false,
                                          "groups": ["platform", "developers"]}});
    let objects = chart_objects(&cluster.python, &values);
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &objects, cluster.dir.path());
    // The callers' own rights: developers may restart in `rollsafe` only.
    kubectl_apply(
        &cluster.kubectl,
        &kubeconfig,
        &[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "developers", "namespace": "rollsafe"},
                   "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                             {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"],
                              "verbs": ["list", "patch"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "developers", "namespace": "rollsafe"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "developers"},
                   "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}]}),
        ],
        cluster.dir.path(),
    );
    let Served {
        home: _home,
        sa_dir,
        session_secret,
        server,
    } = serve_chart(&cluster, &values);

    // Sufficient: a caller in listed groups restarts; every workload call is impersonated.
    cluster.emulator.clear_requests();
    let token = session_token(&session_secret, "bob@example.com", &["developers"]);
    let (code, result) = restart(server.port, &token, "rollsafe/db-credentials");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    let log = cluster.emulator.requests();
    for entry in log
        .iter()
        .filter(|e| e.resource.as_deref().is_some_and(|r| r != "configmaps") && e.verb.is_some())
    {
        assert_eq!(entry.user.as_deref(), Some(SA_USER));
        assert_eq!(
            entry.impersonated_user.as_deref(),
            Some("bob@example.com"),
            "{entry:?}"
        );
        assert!(entry.status < 400, "{entry:?}");
    }

    // A session with a group the RBAC does not list is refused by the server itself
    // (KRYPTON_ALLOWED_GROUPS follows impersonation.groups), before any Kubernetes call.
    cluster.emulator.clear_requests();
    let outsider = session_token(
        &session_secret,
        "carol@example.com",
        &["developers", "auditors"],
    );
    let (code, refusal) = restart(server.port, &outsider, "rollsafe/db-credentials");
    assert_ne!(code, 0, "{refusal}");
    assert!(
        cluster.emulator.requests().iter().all(|e| e.verb.is_none()),
        "no Kubernetes call for a refused identity"
    );

    // Minimal: the ServiceAccount alone reads no Secret; it may not impersonate a group that
    // is not listed, nor a ServiceAccount.
    let ca = sa_dir.join("ca.crt");
    cluster.emulator.clear_requests();
    for args in [
        vec!["-n", "rollsafe", "get", "secret", "db-credentials"],
        vec![
            "-n",
            "rollsafe",
            "get",
            "secret",
            "db-credentials",
            "--as",
            "bob@example.com",
            "--as-group",
            "system:masters",
        ],
        vec![
            "-n",
            "rollsafe",
            "get",
            "secret",
            "db-credentials",
            "--as",
            "bob@example.com",
            "--as-group",
            "auditors",
        ],
        vec![
            "-n",
            "rollsafe",
            "get",
            "secret",
            "db-credentials",
            "--as",
            "system:serviceaccount:rollsafe:default",
        ],
    ] {
        let output = kubectl_as_service_account(&cluster.kubectl, &cluster.emulator, &ca, &args);
        assert!(!output.status.success(), "allowed: kubectl {args:?}");
    }
    let log = cluster.emulator.requests();
    assert!(denied(&log, "get", "secrets", Some("rollsafe")), "{log:#?}");
    let impersonation_refusals = log
        .iter()
        .filter(|e| {
            e.user.as_deref() == Some(SA_USER) && e.status == 403 && e.impersonated_user.is_some()
        })
        .count();
    assert_eq!(impersonation_refusals, 3, "{log:#?}");
    drop(server);
    cluster.emulator.shutdown().await;
}

/// `kubectl create token` as the emulator's admin: a real TokenRequest.
fn create_token(cluster: &Cluster, service_account: &str, audience: Option<&str>) -> String {
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    let mut command = Command::new(&cluster.kubectl);
    command.arg("--kubeconfig").arg(&kubeconfig).args([
        "-n",
        "rollsafe",
        "create",
        "token",
        service_account,
    ]);
    if let Some(audience) = audience {
        command.args(["--audience", audience]);
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn token_review_rbac_lets_the_listed_service_accounts_act_as_themselves_only() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"]},
                        "impersonation": {"enabled": true, "constrained": false,
                                          "groups": ["developers"]},
                        "tokenReview": {"enabled": true, "audiences": ["rollsafe"],
                                        "serviceAccounts": ["rollsafe/deployer"]}});
    let objects = chart_objects(&cluster.python, &values);
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &objects, cluster.dir.path());
    // Two CI ServiceAccounts with the same Kubernetes rights; only one is listed in the chart.
    let mut callers = Vec::new();
    for name in ["deployer", "intruder"] {
        callers.push(json!({"apiVersion": "v1", "kind": "ServiceAccount",
                            "metadata": {"name": name, "namespace": "rollsafe"}}));
    }
    callers.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "ci", "namespace": "rollsafe"},
        "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                  {"apiGroups": ["apps"], "resources": ["deployments", "statefulsets", "daemonsets"],
                   "verbs": ["list", "patch"]}]}));
    callers.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "ci", "namespace": "rollsafe"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ci"},
        "subjects": [{"kind": "ServiceAccount", "name": "deployer", "namespace": "rollsafe"},
                     {"kind": "ServiceAccount", "name": "intruder", "namespace": "rollsafe"}]}),
    );
    kubectl_apply(&cluster.kubectl, &kubeconfig, &callers, cluster.dir.path());
    let Served {
        home: _home,
        sa_dir: _sa_dir,
        session_secret: _,
        server,
    } = serve_chart(&cluster, &values);

    // Sufficient: the listed ServiceAccount's token, for rollsafe's audience, restarts as that
    // ServiceAccount; the review runs as the server.
    let deployer = create_token(&cluster, "deployer", Some("rollsafe"));
    let intruder = create_token(&cluster, "intruder", Some("rollsafe"));
    let for_the_api = create_token(&cluster, "deployer", None);
    cluster.emulator.clear_requests();
    let (code, result) = restart(server.port, &deployer, "rollsafe/db-credentials");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    let log = cluster.emulator.requests();
    let review = log.iter().find(|e| e.is("create", "tokenreviews")).unwrap();
    assert_eq!(review.user.as_deref(), Some(SA_USER));
    assert!(review.status < 400, "{review:?}");
    for entry in log.iter().filter(|e| {
        e.resource
            .as_deref()
            .is_some_and(|r| r != "configmaps" && r != "tokenreviews")
            && e.verb.is_some()
    }) {
        assert_eq!(
            entry.impersonated_user.as_deref(),
            Some("system:serviceaccount:rollsafe:deployer"),
            "{entry:?}"
        );
        assert!(entry.impersonated_groups.is_empty(), "{entry:?}");
        assert!(entry.status < 400, "{entry:?}");
    }

    // Minimal: a ServiceAccount the chart does not list cannot be impersonated, whatever its
    // own rights; nothing is patched.
    cluster.emulator.clear_requests();
    let (code, refusal) = restart(server.port, &intruder, "rollsafe/db-credentials");
    assert_ne!(code, 0, "{refusal}");
    let log = cluster.emulator.requests();
    assert!(
        log.iter().any(|e| e.status == 403
            && e.impersonated_user.as_deref() == Some("system:serviceaccount:rollsafe:intruder")),
        "{log:#?}"
    );
    assert!(log.iter().all(|e| e.verb.as_deref() != Some("patch")));

    // A token for the API server's audience is not one for rollsafe.
    cluster.emulator.clear_requests();
    let (code, _) = restart(server.port, &for_the_api, "rollsafe/db-credentials");
    assert_ne!(code, 0);
    let log = cluster.emulator.requests();
    assert!(log.iter().any(|e| e.is("create", "tokenreviews")));
    assert!(
        log.iter().all(|e| e.verb.as_deref() != Some("get")),
        "refused at authentication: {log:#?}"
    );
    drop(server);
    cluster.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_scope_with_a_namespace_list_grants_those_namespaces_only() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"],
                                   "scope": "cluster", "namespaces": ["team-a"]}});
    let objects = chart_objects(&cluster.python, &values);
    assert!(
        of_kind(&objects, "ClusterRole").is_empty(),
        "a namespace list means Roles only"
    );
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &objects, cluster.dir.path());
    let Served {
        home: _home,
        sa_dir,
        session_secret,
        server,
    } = serve_chart(&cluster, &values);

    // Sufficient in the listed namespace.
    cluster.emulator.clear_requests();
    let token = session_token(&session_secret, "alice@example.com", &["platform"]);
    let (code, result) = restart(server.port, &token, "team-a/db-credentials");
    assert_eq!(code, 0, "{result}");
    assert_eq!(result["status"], "requested", "{result}");
    let log = cluster.emulator.requests();
    assert!(log.iter().any(|e| e.is("patch", "deployments")
        && e.namespace.as_deref() == Some("team-a")
        && e.status == 200));
    // The namespace list is refused (no ClusterRole): the allow-list decides alone.
    assert!(denied(&log, "list", "namespaces", None), "{log:#?}");

    // Minimal: nothing in the release namespace or elsewhere beyond the access ConfigMap.
    let ca = sa_dir.join("ca.crt");
    cluster.emulator.clear_requests();
    for args in [
        ["-n", "rollsafe", "get", "secret", "db-credentials"],
        ["-n", "other", "get", "secret", "db-credentials"],
        ["-n", "other", "get", "deployments", "web"],
    ] {
        let output = kubectl_as_service_account(&cluster.kubectl, &cluster.emulator, &ca, &args);
        assert!(!output.status.success(), "allowed: kubectl {args:?}");
    }
    let log = cluster.emulator.requests();
    assert!(denied(&log, "get", "secrets", Some("rollsafe")));
    assert!(denied(&log, "get", "secrets", Some("other")));
    assert!(denied(&log, "get", "deployments", Some("other")));
    drop(server);
    cluster.emulator.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_scope_uses_cluster_roles_and_still_cannot_write_or_list_secrets() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"server": {"restartEnabled": true, "adminGroups": ["platform"],
                                   "scope": "cluster"}});
    let objects = chart_objects(&cluster.python, &values);
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &objects, cluster.dir.path());
    let Served {
        home: _home,
        sa_dir,
        session_secret,
        server,
    } = serve_chart(&cluster, &values);
    cluster.emulator.clear_requests();
    let token = session_token(&session_secret, "alice@example.com", &["platform"]);
    for target in ["other/db-credentials", "team-a/db-credentials"] {
        let (code, result) = restart(server.port, &token, target);
        assert_eq!(code, 0, "{target}: {result}");
        assert_eq!(result["status"], "requested", "{target}: {result}");
    }
    let log = cluster.emulator.requests();
    assert!(
        log.iter()
            .any(|e| e.is("list", "namespaces") && e.status == 200)
    );
    for entry in log.iter().filter(|e| e.verb.is_some()) {
        assert_eq!(entry.user.as_deref(), Some(SA_USER));
        assert!(entry.status < 400, "{entry:?}");
    }

    let ca = sa_dir.join("ca.crt");
    cluster.emulator.clear_requests();
    for args in [
        &["-n", "other", "get", "secrets"][..],
        &["-n", "other", "delete", "deployment", "web"],
        &["-n", "kube-system", "get", "configmaps"],
    ] {
        let output = kubectl_as_service_account(&cluster.kubectl, &cluster.emulator, &ca, args);
        assert!(!output.status.success(), "allowed: kubectl {args:?}");
    }
    let log = cluster.emulator.requests();
    assert!(denied(&log, "list", "secrets", Some("other")), "{log:#?}");
    assert!(
        denied(&log, "delete", "deployments", Some("other")),
        "{log:#?}"
    );
    assert!(
        denied(&log, "list", "configmaps", Some("kube-system")),
        "{log:#?}"
    );
    drop(server);
    cluster.emulator.shutdown().await;
}

fn objects_of_render(python: &Path, values: &Value, kind: &str) -> Value {
    objects(&render(python, values))
        .into_iter()
        .find(|o| o["kind"] == kind)
        .unwrap()
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// `rollsafe watch` as the chart's controller Deployment runs it: its arguments and
/// environment, no kubeconfig, the controller's ServiceAccount directory; the admin listener
/// on a free loopback port.
fn watch_in_cluster(
    deployment: &Value,
    emulator: &RunningEmulator,
    service_account_dir: &Path,
    home: &Path,
) -> Server {
    let port = free_port();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"));
    for arg in container["args"].as_array().unwrap() {
        command.arg(arg.as_str().unwrap());
    }
    as_in_cluster(&mut command, container, emulator, service_account_dir, home);
    command
        .env("ROLLSAFE_WATCH_ADMIN_LISTEN", format!("127.0.0.1:{port}"))
        .env("ROLLSAFE_WATCH_INSTANCE", "controller-0");
    let child = command.spawn().unwrap();
    let controller = Server { child, port };
    poll("the controller to be ready", || {
        (http_status(port, "/readyz") == Some(200)).then_some(())
    });
    controller
}

fn annotation<'a>(object: &'a Value, pointer: &str, key: &str) -> Option<&'a str> {
    object.pointer(pointer)?.get(key)?.as_str()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn controller_rbac_is_sufficient_and_minimal_in_cluster() {
    let Some(cluster) = cluster().await else {
        return;
    };
    let values = json!({"controller": {"enabled": true, "namespaces": ["team-a"], "all": true,
                                       "debounce": "100ms"}});
    let applied: Vec<Value> = chart_objects(&cluster.python, &values)
        .into_iter()
        .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == "controller")
        .collect();
    let kubeconfig = cluster.dir.path().join("kubeconfig");
    kubectl_apply(&cluster.kubectl, &kubeconfig, &applied, cluster.dir.path());
    let service_account = cluster
        .emulator
        .get_object("serviceaccounts", Some(NAMESPACE), CONTROLLER_SA)
        .expect("the controller's ServiceAccount was applied");
    assert_eq!(service_account["automountServiceAccountToken"], false);
    let deployment = objects(&render(&cluster.python, &values))
        .into_iter()
        .find(|o| {
            o["kind"] == "Deployment"
                && o["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"
        })
        .unwrap();

    let sa_dir = service_account_dir_named(&cluster, "controller-serviceaccount", CONTROLLER_TOKEN);
    let home = tempfile::tempdir().unwrap();
    cluster.emulator.clear_requests();
    let _controller = watch_in_cluster(&deployment, &cluster.emulator, &sa_dir, home.path());

    // (a) Sufficient: the workload in scope is adopted, then rolled when its Secret changes.
    let workload = || {
        cluster
            .emulator
            .get_object("deployments", Some("team-a"), "web")
            .unwrap()
    };
    poll("the adoption", || {
        annotation(
            &workload(),
            "/metadata/annotations",
            "rollsafe.dev/config-record",
        )
        .map(|_| ())
    });
    assert!(
        annotation(
            &workload(),
            "/spec/template/metadata/annotations",
            "rollsafe.dev/config-hash"
        )
        .is_none(),
        "an adoption rolls nothing"
    );
    let mut secret = cluster
        .emulator
        .get_object("secrets", Some("team-a"), "db-credentials")
        .unwrap();
    secret["data"]["password"] = json!("cm90YXRlZA==");
    cluster.emulator.put_object(secret).unwrap();
    poll("the roll", || {
        annotation(
            &workload(),
            "/spec/template/metadata/annotations",
            "rollsafe.dev/config-hash",
        )
        .map(|_| ())
    });
    let lease = cluster
        .emulator
        .get_object("leases", Some(NAMESPACE), "rollsafe-watch")
        .expect("the controller created its Lease");
    assert_eq!(lease["spec"]["holderIdentity"], "controller-0");
    assert!(
        annotation(
            &cluster
                .emulator
                .get_object("deployments", Some("other"), "web")
                .unwrap(),
            "/metadata/annotations",
            "rollsafe.dev/config-record"
        )
        .is_none(),
        "nothing outside the watched namespace"
    );
    let log = cluster.emulator.requests();
    let calls: Vec<&RequestLogEntry> = log
        .iter()
        .filter(|e| e.verb.is_some() && e.user.as_deref() == Some(CONTROLLER_USER))
        .collect();
    for entry in &calls {
        // A 404 is the missing Lease before its creation; nothing may be refused.
        assert!(
            entry.status != 401 && entry.status != 403,
            "the RBAC must allow the controller: {entry:?}"
        );
    }
    for (verb, resource) in [
        ("list", "secrets"),
        ("watch", "secrets"),
        ("list", "configmaps"),
        ("list", "deployments"),
        ("watch", "deployments"),
        ("patch", "deployments"),
        ("create", "leases"),
        ("patch", "leases"),
    ] {
        assert!(
            calls.iter().any(|e| e.is(verb, resource)),
            "{verb} {resource} was made: {calls:#?}"
        );
    }

    // (b) Minimal: the same identity outside what the chart grants.
    cluster.emulator.clear_requests();
    let connection =
        rollsafe_kube::Connection::in_cluster(&rollsafe_kube::connection::InCluster::new(
            "127.0.0.1",
            cluster.emulator.addr().port(),
            &sa_dir,
        ))
        .unwrap();
    let client = connection.client(None);
    let get = |path: &str| http::Request::get(path).body(Vec::new()).unwrap();
    let merge = |path: &str| {
        http::Request::patch(path)
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"metadata":{"annotations":{"x":"y"}}}"#.to_vec())
            .unwrap()
    };
    let delete = |path: &str| http::Request::delete(path).body(Vec::new()).unwrap();
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                       "metadata": {"name": "rollsafe-watch", "namespace": NAMESPACE}});
    let update = http::Request::put(
        "/apis/coordination.k8s.io/v1/namespaces/rollsafe/leases/rollsafe-watch",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&lease).unwrap())
    .unwrap();
    for request in [
        get("/api/v1/namespaces/team-a/secrets/db-credentials"),
        get("/apis/apps/v1/namespaces/team-a/deployments/web"),
        get("/api/v1/namespaces/other/secrets"),
        get("/api/v1/secrets"),
        merge("/apis/apps/v1/namespaces/other/deployments/web"),
        delete("/apis/apps/v1/namespaces/team-a/deployments/web"),
        get("/apis/coordination.k8s.io/v1/namespaces/rollsafe/leases/another"),
        merge("/apis/coordination.k8s.io/v1/namespaces/team-a/leases/rollsafe-watch"),
        update,
        delete("/apis/coordination.k8s.io/v1/namespaces/rollsafe/leases/rollsafe-watch"),
    ] {
        let refused = client.request_text(request).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(status)) if status.code == 403),
            "{refused:?}"
        );
    }
    let log = cluster.emulator.requests();
    let refused = |verb: &str, resource: &str, namespace: Option<&str>| {
        denied_to(CONTROLLER_USER, &log, verb, resource, namespace)
    };
    assert!(
        refused("get", "secrets", Some("team-a")),
        "no get on Secrets"
    );
    assert!(
        refused("list", "secrets", Some("other")),
        "Secrets outside scope"
    );
    assert!(refused("list", "secrets", None), "Secrets cluster-wide");
    assert!(
        refused("get", "deployments", Some("team-a")),
        "no get on workloads"
    );
    assert!(
        refused("patch", "deployments", Some("other")),
        "patch outside scope"
    );
    assert!(
        refused("delete", "deployments", Some("team-a")),
        "delete a workload"
    );
    assert!(refused("get", "leases", Some(NAMESPACE)), "another Lease");
    assert!(
        refused("patch", "leases", Some("team-a")),
        "a Lease elsewhere"
    );
    assert!(
        refused("update", "leases", Some(NAMESPACE)),
        "update the Lease"
    );
    assert!(
        refused("delete", "leases", Some(NAMESPACE)),
        "delete the Lease"
    );
}
