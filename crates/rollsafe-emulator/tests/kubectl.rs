//! Real kubectl against the emulator. kubectl is found on PATH or under
//! /usr/lib/google-cloud-sdk/bin; without one these tests skip, saying why, unless `CI` is set
//! (CI installs it): then they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};

fn kubectl_binary() -> PathBuf {
    if let Ok(path) = std::env::var("KUBECTL") {
        return PathBuf::from(path);
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("kubectl");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    let sdk = Path::new("/usr/lib/google-cloud-sdk/bin");
    let mut found: Vec<PathBuf> = std::fs::read_dir(sdk)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("kubectl"))
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort();
    found
        .pop()
        .expect("kubectl not found on PATH or under /usr/lib/google-cloud-sdk/bin")
}

/// Whether kubectl is missing and the test should return early; fails instead under `CI`.
fn skip_without_kubectl() -> bool {
    let found = std::env::var_os("KUBECTL").is_some()
        || std::env::var_os("PATH").is_some_and(|paths| {
            std::env::split_paths(&paths).any(|dir| dir.join("kubectl").is_file())
        })
        || std::fs::read_dir("/usr/lib/google-cloud-sdk/bin").is_ok_and(|mut entries| {
            entries.any(|e| e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("kubectl")))
        });
    if found {
        return false;
    }
    assert!(
        std::env::var_os("CI").is_none_or(|v| v.is_empty()),
        "CI is set but kubectl is missing (not on PATH nor under /usr/lib/google-cloud-sdk/bin)"
    );
    eprintln!(
        "skipping: kubectl is not installed (not on PATH nor under /usr/lib/google-cloud-sdk/bin)"
    );
    true
}

struct Kubectl {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn new(emu: &RunningEmulator) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kubeconfig");
        emu.write_kubeconfig(&kubeconfig).unwrap();
        Self { dir, kubeconfig }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(kubectl_binary());
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG");
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "kubectl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn fails(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(!out.status.success(), "kubectl {args:?} should fail");
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn file(&self, name: &str, content: &str) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        path.display().to_string()
    }
}

async fn setup() -> (RunningEmulator, Kubectl) {
    let emu = start().await;
    let k = Kubectl::new(&emu);
    (emu, k)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_from_a_multi_document_file() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let file = k.file(
        "objects.yaml",
        r#"apiVersion: v1
kind: Namespace
metadata: {name: store}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: store}
data: {a: "1"}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: store}
stringData: {password: hunter2}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: store}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: app, image: nginx}]}
"#,
    );
    let out = k.ok(&["create", "-f", &file]);
    assert!(out.contains("deployment.apps/web created"), "{out}");
    assert!(
        emu.get_object("deployments", Some("store"), "web")
            .is_some()
    );
    assert!(emu.get_object("secrets", Some("store"), "db").is_some());
    assert_eq!(emu.requests_for("create", "configmaps").len(), 1);
    // Creating again: AlreadyExists, as kubectl prints it.
    let err = k.fails(&["create", "-f", &file]);
    assert!(
        err.contains("AlreadyExists") || err.contains("already exists"),
        "{err}"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_in_chunks_follows_continue_tokens() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    seed_deployments(&emu, "shop", 5);
    emu.clear_requests();
    let out = k.ok(&[
        "get",
        "deployments",
        "-n",
        "shop",
        "-o",
        "json",
        "--chunk-size=2",
    ]);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 5);
    let pages = emu.requests_for("list", "deployments");
    assert_eq!(pages.len(), 3, "{pages:#?}");
    assert!(
        pages
            .iter()
            .all(|p| p.query_param("limit").as_deref() == Some("2"))
    );
    assert_eq!(pages[0].query_param("continue"), None);
    assert!(pages[1].query_param("continue").is_some());
    assert!(pages[2].query_param("continue").is_some());
    assert_ne!(
        pages[1].query_param("continue"),
        pages[2].query_param("continue")
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_json_with_a_failing_test_is_422() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    seed_deployments(&emu, "shop", 1);
    let err = k.fails(&[
        "patch", "deployment", "d0000", "-n", "shop", "--type=json", "-p",
        r#"[{"op":"test","path":"/metadata/resourceVersion","value":"1"},{"op":"add","path":"/metadata/labels/x","value":"y"}]"#,
    ]);
    assert!(
        err.contains("the server rejected our request due to an error in our request"),
        "{err}"
    );
    let patches = emu.requests_for("patch", "deployments");
    assert_eq!(patches.last().unwrap().status, 422);
    let ok = k.ok(&[
        "patch",
        "deployment",
        "d0000",
        "-n",
        "shop",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"tier":"web"}}}"#,
    ]);
    assert!(ok.contains("patched"), "{ok}");
    let d = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_eq!(d["metadata"]["labels"]["tier"], "web");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_restart_annotate_scale_set_image_delete() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    seed_deployments(&emu, "shop", 1);
    k.ok(&["rollout", "restart", "deployment/d0000", "-n", "shop"]);
    let rollouts = emu.rollouts();
    assert_eq!(rollouts.len(), 1);
    assert!(rollouts[0].rolled);
    assert!(rollouts[0].template_annotations["kubectl.kubernetes.io/restartedAt"].is_string());
    let restart = emu.requests_for("patch", "deployments");
    assert_eq!(
        restart[0].content_type.as_deref(),
        Some("application/strategic-merge-patch+json")
    );

    k.ok(&["annotate", "deployment/d0000", "-n", "shop", "team=web"]);
    k.ok(&["scale", "deployment/d0000", "-n", "shop", "--replicas=4"]);
    k.ok(&[
        "set",
        "image",
        "deployment/d0000",
        "-n",
        "shop",
        "app=registry.example/app:2",
    ]);
    let d = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    assert_eq!(d["metadata"]["annotations"]["team"], "web");
    assert_eq!(d["spec"]["replicas"], 4);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.example/app:2"
    );
    assert_eq!(
        d["status"]["observedGeneration"],
        d["metadata"]["generation"]
    );
    assert_eq!(
        emu.rollouts().len(),
        2,
        "set image rolls, annotate and scale do not"
    );
    let status = k.ok(&[
        "rollout",
        "status",
        "deployment/d0000",
        "-n",
        "shop",
        "--timeout=10s",
    ]);
    assert!(status.contains("successfully rolled out"), "{status}");

    let out = k.ok(&["delete", "deployment", "d0000", "-n", "shop"]);
    assert!(out.contains("deleted"), "{out}");
    assert!(
        emu.get_object("deployments", Some("shop"), "d0000")
            .is_none()
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_answers_from_rbac() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    assert!(
        k.run(&["auth", "can-i", "delete", "secrets", "-n", "shop"])
            .status
            .success()
    );
    let bob = k.run(&[
        "--context",
        "bob",
        "auth",
        "can-i",
        "patch",
        "deployments",
        "-n",
        "shop",
    ]);
    assert!(bob.status.success());
    let alice = k.run(&[
        "--context",
        "alice",
        "auth",
        "can-i",
        "patch",
        "deployments",
        "-n",
        "shop",
    ]);
    assert_eq!(alice.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&alice.stdout).trim(), "no");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_receives_events() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    seed_deployments(&emu, "shop", 1);
    let mut child = k
        .command(&[
            "get",
            "deployments",
            "-n",
            "shop",
            "--watch",
            "-o",
            "json",
            "--output-watch-events",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let handle = emu.handle();
    // Wait until the watch request is open, then change the object.
    emu.wait_for_request(Duration::from_secs(10), |r| r.is("watch", "deployments"))
        .await
        .expect("kubectl opened a watch");
    let mut d = handle
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    d["metadata"]["labels"]["changed"] = json!("yes");
    handle.put_object(d).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < deadline && !seen.contains("\"MODIFIED\"") {
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push_str(&line);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(seen.contains("\"ADDED\""), "{seen}");
    assert!(seen.contains("\"MODIFIED\""), "{seen}");
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_allowed_and_denied() {
    if skip_without_kubectl() {
        return;
    }
    let emu = start_with(rollsafe_emulator::Emulator::builder().seed_objects(vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": "impersonator"},
               "rules": [{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": "alice-impersonates"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "impersonator"},
               "subjects": [{"kind": "User", "name": "alice"}]}),
    ]))
    .await;
    let k = Kubectl::new(&emu);
    seed_deployments(&emu, "shop", 1);
    // alice may impersonate bob, who may list deployments in shop.
    let out = k.ok(&[
        "--context",
        "alice",
        "--as",
        "bob",
        "--as-group",
        "ops",
        "--as-group",
        "qa",
        "get",
        "deployments",
        "-n",
        "shop",
        "-o",
        "name",
    ]);
    assert!(out.contains("deployment.apps/d0000"), "{out}");
    let entry = emu.requests_for("list", "deployments").pop().unwrap();
    assert_eq!(entry.user.as_deref(), Some("alice"));
    assert_eq!(entry.impersonated_user.as_deref(), Some("bob"));
    assert_eq!(entry.impersonated_groups, vec!["ops", "qa"]);
    // bob may not impersonate.
    let err = k.fails(&[
        "--context",
        "bob",
        "--as",
        "alice",
        "get",
        "deployments",
        "-n",
        "shop",
    ]);
    assert!(
        err.contains(r#"users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );
    // alice impersonating herself-without-rights: RBAC runs for the impersonated user.
    let err = k.fails(&[
        "--context",
        "alice",
        "--as",
        "carol",
        "get",
        "deployments",
        "-n",
        "shop",
    ]);
    assert!(
        err.contains(r#"User "carol" cannot list resource "deployments" in API group "apps" in the namespace "shop""#),
        "{err}"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_rbac_is_denied_with_the_real_message() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let err = k.fails(&["--context", "alice", "get", "secrets", "-n", "shop"]);
    assert!(
        err.contains(r#"Error from server (Forbidden): secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" in the namespace "shop""#),
        "{err}"
    );
    let err = k.fails(&[
        "--context",
        "alice",
        "get",
        "deployment",
        "web",
        "-n",
        "shop",
    ]);
    assert!(
        err.contains(r#"deployments.apps "web" is forbidden: User "alice" cannot get resource "deployments" in API group "apps" in the namespace "shop""#),
        "{err}"
    );
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_on_the_machine_rolls_a_deployment() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let releases = kubectl_releases();
    // One Deployment per release: kubectl refuses two restarts of one object within a second.
    let mut manifest = "apiVersion: v1\nkind: Namespace\nmetadata: {name: matrix}\n".to_owned();
    for round in 0..releases.len() {
        manifest.push_str(&format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web-{round}, namespace: matrix}}\n\
             spec:\n  replicas: 1\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    \
             metadata: {{labels: {{app: web}}}}\n    spec: {{containers: [{{name: web, image: nginx}}]}}\n"
        ));
    }
    let file = k.file("web.yaml", &manifest);
    k.ok(&["create", "-f", &file]);
    for (round, binary) in releases.into_iter().enumerate() {
        let deployment = format!("deployment/web-{round}");
        let name = format!("web-{round}");
        let run = |args: &[&str]| {
            let cmd = k.command(args);
            let mut real = Command::new(&binary);
            real.args(cmd.get_args())
                .env("HOME", k.dir.path())
                .env_remove("KUBECONFIG");
            real.output().unwrap()
        };
        let label = binary.display().to_string();
        let out = run(&["-n", "matrix", "rollout", "restart", &deployment]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            emu.rollouts().len(),
            round + 1,
            "{label}: a rollout is recorded"
        );
        let out = run(&[
            "-n",
            "matrix",
            "get",
            "deployments",
            "-o",
            "json",
            "--chunk-size=1",
        ]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            list["items"]
                .as_array()
                .unwrap()
                .iter()
                .any(|d| d["metadata"]["name"] == name.as_str()),
            "{label}"
        );
        let out = run(&[
            "-n",
            "matrix",
            "patch",
            "deployment",
            &name,
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/metadata/uid","value":"not-the-uid"}]"#,
        ]);
        assert!(
            !out.status.success(),
            "{label}: a failing test must not apply"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("Invalid") || stderr.contains("422") || stderr.contains("invalid"),
            "{label}: {stderr}"
        );
    }
}

/// A kubectl command of one release in namespace `shop`, which must succeed; its stdout.
fn in_shop(k: &Kubectl, binary: &Path, args: &[&str]) -> String {
    let mut all = vec!["-n", "shop"];
    all.extend_from_slice(args);
    let out = run_release(k, binary, &all);
    assert!(
        out.status.success(),
        "{} {args:?}: {}",
        binary.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A kubectl command of one release, with the suite's kubeconfig and cache.
fn run_release(k: &Kubectl, binary: &Path, args: &[&str]) -> Output {
    let cmd = k.command(args);
    let mut real = Command::new(binary);
    real.args(cmd.get_args())
        .env("HOME", k.dir.path())
        .env_remove("KUBECONFIG");
    real.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_creates_the_built_in_kinds_imperatively() {
    if skip_without_kubectl() {
        return;
    }
    // From 1.32 on these commands send protobuf bodies.
    let (emu, k) = setup().await;
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["web.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let cert_file = k.file("tls.crt", &cert.pem());
    let key_file = k.file("tls.key", &key.serialize_pem());
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let release = binary
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kubectl")
            .replace('.', "-");
        let ns = format!("ns-{release}");
        let ok = |args: &[&str]| {
            let out = run_release(&k, &binary, args);
            assert!(
                out.status.success(),
                "{label} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        ok(&["create", "namespace", &ns]);
        let n = |args: &[&str]| {
            let mut all = vec!["-n", ns.as_str()];
            all.extend_from_slice(args);
            ok(&all);
        };
        n(&[
            "create",
            "secret",
            "generic",
            "db",
            "--from-literal=password=hunter2",
            "--from-literal=user=app",
        ]);
        n(&[
            "create", "secret", "tls", "web-tls", "--cert", &cert_file, "--key", &key_file,
        ]);
        n(&[
            "create",
            "secret",
            "docker-registry",
            "pull",
            "--docker-server=registry.example",
            "--docker-username=u",
            "--docker-password=p",
        ]);
        n(&["create", "configmap", "cfg", "--from-literal=mode=fast"]);
        n(&[
            "create",
            "deployment",
            "web",
            "--image=nginx:1.27",
            "--replicas=3",
            "--port=8080",
        ]);
        n(&[
            "create",
            "deployment",
            "worker",
            "--image=busybox",
            "--",
            "sleep",
            "3600",
        ]);
        n(&["create", "serviceaccount", "robot"]);
        n(&[
            "create",
            "role",
            "reader",
            "--verb=get,list",
            "--resource=secrets,deployments.apps",
            "--resource-name=db",
        ]);
        n(&[
            "create",
            "rolebinding",
            "robot-reads",
            "--role=reader",
            "--serviceaccount",
            &format!("{ns}:robot"),
            "--user=alice",
        ]);
        n(&["create", "service", "clusterip", "web", "--tcp=80:8080"]);
        n(&["create", "service", "nodeport", "web-np", "--tcp=80:8080"]);
        n(&[
            "create",
            "service",
            "externalname",
            "db-ext",
            "--external-name=db.example.com",
        ]);
        n(&[
            "create",
            "job",
            "once",
            "--image=busybox",
            "--",
            "echo",
            "hi",
        ]);
        n(&[
            "create",
            "cronjob",
            "hourly",
            "--image=busybox",
            "--schedule=0 * * * *",
            "--",
            "date",
        ]);
        n(&[
            "create",
            "ingress",
            "web",
            "--class=nginx",
            "--rule=web.example/api*=web:80,tls=web-tls",
        ]);
        n(&[
            "create",
            "quota",
            "small",
            "--hard=pods=4,requests.cpu=2,limits.memory=1Gi",
            "--scopes=NotBestEffort",
        ]);
        n(&[
            "create",
            "poddisruptionbudget",
            "web",
            "--selector=app=web",
            "--min-available=50%",
        ]);
        let priority_class = format!("batch-{release}");
        ok(&[
            "create",
            "priorityclass",
            &priority_class,
            "--value=1000",
            "--description=batch jobs",
            "--preemption-policy=Never",
        ]);
        let cluster_role = format!("viewer-{release}");
        ok(&[
            "create",
            "clusterrole",
            &cluster_role,
            "--verb=get",
            "--resource=namespaces",
            "--non-resource-url=/healthz",
        ]);
        ok(&[
            "create",
            "clusterrolebinding",
            &cluster_role,
            &format!("--clusterrole={cluster_role}"),
            "--group=devs",
        ]);

        let get = |resource: &str, name: &str| {
            emu.get_object(resource, Some(&ns), name)
                .unwrap_or_else(|| panic!("{label}: {resource}/{name} was created"))
        };
        let secret = get("secrets", "db");
        assert_eq!(secret["type"], "Opaque", "{label}");
        assert_eq!(secret["data"]["password"], "aHVudGVyMg==", "{label}");
        assert_eq!(secret["data"]["user"], "YXBw", "{label}");
        let tls = get("secrets", "web-tls");
        assert_eq!(tls["type"], "kubernetes.io/tls", "{label}");
        assert!(
            tls["data"]["tls.crt"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{label}"
        );
        assert!(
            tls["data"]["tls.key"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{label}"
        );
        let pull = get("secrets", "pull");
        assert_eq!(pull["type"], "kubernetes.io/dockerconfigjson", "{label}");
        assert!(pull["data"][".dockerconfigjson"].is_string(), "{label}");
        assert_eq!(
            get("configmaps", "cfg")["data"],
            json!({"mode": "fast"}),
            "{label}"
        );
        let web = get("deployments", "web");
        assert_eq!(web["spec"]["replicas"], 3, "{label}");
        let service = get("services", "web");
        assert_eq!(service["spec"]["type"], "ClusterIP", "{label}");
        assert_eq!(service["spec"]["ports"][0]["port"], 80, "{label}");
        assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080, "{label}");
        assert_eq!(
            service["spec"]["selector"],
            json!({"app": "web"}),
            "{label}"
        );
        assert_eq!(
            get("services", "web-np")["spec"]["type"],
            "NodePort",
            "{label}"
        );
        assert_eq!(
            get("services", "db-ext")["spec"]["externalName"],
            "db.example.com",
            "{label}"
        );
        let job = get("jobs", "once");
        assert_eq!(
            job["spec"]["template"]["spec"]["containers"][0]["command"],
            json!(["echo", "hi"]),
            "{label}"
        );
        assert_eq!(
            job["spec"]["template"]["spec"]["restartPolicy"], "Never",
            "{label}"
        );
        let cron = get("cronjobs", "hourly");
        assert_eq!(cron["spec"]["schedule"], "0 * * * *", "{label}");
        assert_eq!(
            cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"],
            json!(["date"]),
            "{label}"
        );
        let ingress = get("ingresses", "web");
        assert_eq!(ingress["spec"]["ingressClassName"], "nginx", "{label}");
        assert_eq!(
            ingress["spec"]["rules"][0],
            json!({"host": "web.example", "http": {"paths": [{"path": "/api", "pathType": "Prefix",
                   "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}),
            "{label}"
        );
        assert_eq!(
            ingress["spec"]["tls"],
            json!([{"hosts": ["web.example"], "secretName": "web-tls"}]),
            "{label}"
        );
        assert_eq!(
            web["spec"]["selector"]["matchLabels"],
            json!({"app": "web"}),
            "{label}"
        );
        let container = &web["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], "nginx:1.27", "{label}");
        assert_eq!(container["ports"][0]["containerPort"], 8080, "{label}");
        assert_eq!(web["status"]["readyReplicas"], 3, "{label}");
        let worker = get("deployments", "worker");
        assert_eq!(
            worker["spec"]["template"]["spec"]["containers"][0]["command"],
            json!(["sleep", "3600"]),
            "{label}"
        );
        assert!(
            get("serviceaccounts", "robot")["metadata"]["uid"].is_string(),
            "{label}"
        );
        let role = get("roles", "reader");
        assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]), "{label}");
        assert_eq!(role["rules"][0]["resourceNames"], json!(["db"]), "{label}");
        let binding = get("rolebindings", "robot-reads");
        assert_eq!(binding["roleRef"]["name"], "reader", "{label}");
        assert_eq!(
            binding["subjects"].as_array().map(Vec::len),
            Some(2),
            "{label}"
        );
        let cr = emu.get_object("clusterroles", None, &cluster_role).unwrap();
        assert!(
            cr["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["nonResourceURLs"] == json!(["/healthz"])),
            "{label}: {cr}"
        );
        let quota = get("resourcequotas", "small");
        assert_eq!(
            quota["spec"],
            json!({"hard": {"pods": "4", "requests.cpu": "2", "limits.memory": "1Gi"},
                   "scopes": ["NotBestEffort"]}),
            "{label}"
        );
        let pdb = get("poddisruptionbudgets", "web");
        assert_eq!(pdb["spec"]["minAvailable"], "50%", "{label}");
        assert_eq!(
            pdb["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}}),
            "{label}"
        );
        let pc = emu
            .get_object("priorityclasses", None, &priority_class)
            .unwrap();
        assert_eq!(
            (&pc["value"], &pc["description"], &pc["preemptionPolicy"]),
            (&json!(1000), &json!("batch jobs"), &json!("Never")),
            "{label}: {pc}"
        );
        let crb = emu
            .get_object("clusterrolebindings", None, &cluster_role)
            .unwrap();
        assert_eq!(crb["subjects"][0]["name"], "devs", "{label}");
        // The RBAC just created is in force: alice may now get the Secret "db".
        let out = run_release(
            &k,
            &binary,
            &[
                "--context",
                "alice",
                "-n",
                &ns,
                "get",
                "secret",
                "db",
                "-o",
                "name",
            ],
        );
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let protobuf_creates = emu
        .requests()
        .into_iter()
        .filter(|r| r.verb.as_deref() == Some("create"))
        .filter(|r| {
            r.content_type
                .as_deref()
                .is_some_and(|c| c.contains("protobuf"))
        })
        .count();
    let sends_protobuf = kubectl_releases().iter().any(|b| {
        b.file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("kubectl.1."))
            .and_then(|minor| minor.parse::<u32>().ok())
            .is_some_and(|minor| minor >= 32)
    });
    if sends_protobuf {
        assert!(
            protobuf_creates >= 10,
            "{protobuf_creates} protobuf creates"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_server_and_diff_change_nothing() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    seed_deployments(&emu, "shop", 1);
    let before = emu
        .get_object("deployments", Some("shop"), "d0000")
        .unwrap();
    let rv = emu.resource_version();
    let out = k.ok(&[
        "-n",
        "shop",
        "create",
        "deployment",
        "dry",
        "--image=nginx",
        "--dry-run=server",
        "-o",
        "json",
    ]);
    let answer: Value = serde_json::from_str(&out).unwrap();
    assert!(answer["metadata"]["uid"].is_string());
    assert!(emu.get_object("deployments", Some("shop"), "dry").is_none());

    let mut changed = before.clone();
    changed["spec"]["template"]["metadata"]["annotations"] = json!({"changed": "yes"});
    changed["metadata"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| k == "name" || k == "namespace" || k == "labels");
    changed.as_object_mut().unwrap().remove("status");
    let file = k.file("changed.json", &changed.to_string());
    k.ok(&["apply", "--dry-run=server", "-f", &file]);
    k.ok(&[
        "-n",
        "shop",
        "scale",
        "deployment",
        "d0000",
        "--replicas=5",
        "--dry-run=server",
    ]);
    k.ok(&[
        "-n",
        "shop",
        "delete",
        "deployment",
        "d0000",
        "--dry-run=server",
    ]);
    // diff: exit 1 with the change shown, nothing written.
    let out = k.run(&["diff", "-f", &file]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("changed: \"yes\""));

    assert_eq!(
        emu.get_object("deployments", Some("shop"), "d0000")
            .unwrap(),
        before
    );
    assert_eq!(emu.resource_version(), rv);
    assert!(emu.rollouts().is_empty());
    let dry_runs = emu
        .requests()
        .iter()
        .filter(|r| r.query_param("dryRun").as_deref() == Some("All"))
        .count();
    assert!(dry_runs >= 4, "{dry_runs} dry-run requests");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_applies_replaces_and_diffs_files() {
    if skip_without_kubectl() {
        return;
    }
    // kubectl 1.27 and 1.28 read /openapi/v2 before apply, create -f, replace -f and diff.
    let (emu, k) = setup().await;
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let release = binary
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("kubectl")
            .replace('.', "-");
        let run = |args: &[&str]| run_release(&k, &binary, args);
        let ok = |args: &[&str]| {
            let out = run(args);
            assert!(
                out.status.success(),
                "{label} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let manifest = |image: &str, replicas: u32| {
            format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {release}, namespace: shop}}\n\
                 spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {release}}}}}\n  template:\n    \
                 metadata: {{labels: {{app: {release}}}}}\n    spec: {{containers: [{{name: app, image: \"{image}\"}}]}}\n\
                 ---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {release}, namespace: shop}}\ndata: {{image: \"{image}\"}}\n"
            )
        };
        let v1 = k.file(&format!("{release}-1.yaml"), &manifest("app:1", 1));
        let v2 = k.file(&format!("{release}-2.yaml"), &manifest("app:2", 2));
        let v3 = k.file(&format!("{release}-3.yaml"), &manifest("app:3", 3));
        ok(&["create", "-f", &v1]);
        ok(&["apply", "-f", &v2]);
        let d = emu
            .get_object("deployments", Some("shop"), &release)
            .unwrap();
        assert_eq!(d["spec"]["replicas"], 2, "{label}");
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"], "app:2",
            "{label}"
        );
        let out = run(&["diff", "-f", &v3]);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        ok(&["replace", "-f", &v3]);
        let d = emu
            .get_object("deployments", Some("shop"), &release)
            .unwrap();
        assert_eq!(
            d["spec"]["template"]["spec"]["containers"][0]["image"], "app:3",
            "{label}"
        );
        let cm = emu
            .get_object("configmaps", Some("shop"), &release)
            .unwrap();
        assert_eq!(cm["data"]["image"], "app:3", "{label}");
        // replace leaves the last-applied annotation behind; apply records it, then nothing differs.
        ok(&["apply", "-f", &v3]);
        let out = run(&["diff", "-f", &v3]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{label}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_shows_events() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let mut web = deployment("shop", "web");
    web["spec"]["replicas"] = json!(2);
    emu.put_object(web).unwrap();
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let out = run_release(&k, &binary, &["-n", "shop", "events"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("ScalingReplicaSet"), "{label}: {stdout}");
        assert!(
            stdout.contains("deployment/web") || stdout.contains("Deployment/web"),
            "{label}: {stdout}"
        );
        assert!(stdout.contains("from 0 to 2"), "{label}: {stdout}");
        let out = run_release(&k, &binary, &["-n", "shop", "get", "events", "-o", "name"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.trim().starts_with("event/web."), "{label}: {stdout}");
        let out = run_release(
            &k,
            &binary,
            &[
                "-n",
                "shop",
                "get",
                "events.v1.events.k8s.io",
                "-o",
                "jsonpath={.items[0].note}",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains("from 0 to 2"), "{label}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_prints_the_real_get_columns() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let mut web = deployment("shop", "web");
    web["spec"]["replicas"] = json!(3);
    emu.put_object(web).unwrap();
    emu.put_object(json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "tls", "namespace": "shop"}, "data": {"tls.crt": "eA==", "tls.key": "eA=="}}))
        .unwrap();
    emu.put_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "namespace": "shop"}, "data": {"a": "1", "b": "2", "c": "3"}}))
        .unwrap();
    // A quota as the quota controller leaves it, a budget and a priority class.
    emu.put_object(json!({"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "small", "namespace": "shop"},
        "spec": {"hard": {"pods": "4", "limits.memory": "1Gi"}},
        "status": {"hard": {"pods": "4", "limits.memory": "1Gi"}, "used": {"pods": "1", "limits.memory": "0"}}}))
        .unwrap();
    emu.put_object(
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}),
    )
    .unwrap();
    // The disruption controller counts the three pods moments later: one may go.
    rollsafe_testing::eventually("the budget's status", Duration::from_secs(30), || async {
        let budget = emu.get_object("poddisruptionbudgets", Some("shop"), "web")?;
        (budget["status"]["disruptionsAllowed"] == 1).then_some(())
    })
    .await;
    emu.put_object(
        json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 100000, "globalDefault": false}),
    )
    .unwrap();
    // Each row's words, by the header's columns.
    let rows = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let get = |args: &[&str]| {
            let out = run_release(&k, &binary, args);
            assert!(
                out.status.success(),
                "{label} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            rows(&String::from_utf8_lossy(&out.stdout))
        };
        let d = get(&["-n", "shop", "get", "deployments"]);
        assert_eq!(
            d[0],
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
            "{label}"
        );
        assert_eq!(&d[1][..4], ["web", "3/3", "3", "3"], "{label}");
        let wide = get(&["-n", "shop", "get", "deployments", "-o", "wide"]);
        assert_eq!(
            wide[0],
            [
                "NAME",
                "READY",
                "UP-TO-DATE",
                "AVAILABLE",
                "AGE",
                "CONTAINERS",
                "IMAGES",
                "SELECTOR"
            ],
            "{label}"
        );
        assert_eq!(
            &wide[1][5..],
            ["app", "registry.example/app:1", "app=web"],
            "{label}"
        );
        let one = get(&["-n", "shop", "get", "deployment", "web"]);
        assert_eq!(&one[1][..2], ["web", "3/3"], "{label}");
        let s = get(&["-n", "shop", "get", "secret", "tls"]);
        assert_eq!(s[0], ["NAME", "TYPE", "DATA", "AGE"], "{label}");
        assert_eq!(&s[1][..3], ["tls", "kubernetes.io/tls", "2"], "{label}");
        let c = get(&["-n", "shop", "get", "configmap", "cfg"]);
        assert_eq!(c[0], ["NAME", "DATA", "AGE"], "{label}");
        assert_eq!(&c[1][..2], ["cfg", "3"], "{label}");
        let ns = get(&["get", "namespace", "shop"]);
        assert_eq!(ns[0], ["NAME", "STATUS", "AGE"], "{label}");
        assert_eq!(&ns[1][..2], ["shop", "Active"], "{label}");
        let rb = get(&["-n", "shop", "get", "rolebindings", "-o", "wide"]);
        assert_eq!(
            rb[0],
            ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
            "{label}"
        );
        assert_eq!(&rb[1][..2], ["bob-edits", "Role/editor"], "{label}");
        assert_eq!(rb[1][3], "bob", "{label}");
        let ev = get(&["-n", "shop", "get", "events"]);
        assert_eq!(
            ev[0],
            ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
            "{label}"
        );
        assert!(
            ev[1].contains(&"ScalingReplicaSet".to_string()),
            "{label}: {ev:?}"
        );
        assert!(
            ev[1].contains(&"deployment/web".to_string()),
            "{label}: {ev:?}"
        );
        let q = get(&["-n", "shop", "get", "quota", "small"]);
        assert_eq!(q[0], ["NAME", "AGE", "REQUEST", "LIMIT"], "{label}");
        assert_eq!(
            q[1][2..],
            ["pods:", "1/4", "limits.memory:", "0/1Gi"],
            "{label}"
        );
        let pdb = get(&["-n", "shop", "get", "pdb", "web"]);
        assert_eq!(
            pdb[0],
            [
                "NAME",
                "MIN",
                "AVAILABLE",
                "MAX",
                "UNAVAILABLE",
                "ALLOWED",
                "DISRUPTIONS",
                "AGE"
            ],
            "{label}"
        );
        assert_eq!(pdb[1][..4], ["web", "N/A", "1", "1"], "{label}");
        let pc = get(&["get", "priorityclass", "high"]);
        assert_eq!(
            pc[0],
            ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
            "{label}"
        );
        assert_eq!(pc[1][..3], ["high", "100000", "false"], "{label}");
        assert_eq!(pc[1][4], "PreemptLowerPriority", "{label}");
        // Chunked listing keeps working with tables.
        let all = get(&["get", "namespaces", "--chunk-size=1"]);
        assert!(all.len() >= 6, "{label}: {all:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_waits_for_available_and_follows_paused_rollouts() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    for (round, binary) in kubectl_releases().into_iter().enumerate() {
        let label = binary.display().to_string();
        let name = format!("web-{round}");
        let deployment_ref = format!("deployment/{name}");
        let mut web = deployment("shop", &name);
        web["spec"]["replicas"] = json!(2);
        emu.put_object(web).unwrap();
        let run = |args: &[&str]| in_shop(&k, &binary, args);
        run(&[
            "wait",
            "--for=condition=Available",
            &deployment_ref,
            "--timeout=20s",
        ]);
        run(&[
            "wait",
            "--for=condition=Progressing",
            &deployment_ref,
            "--timeout=20s",
        ]);
        let done = run(&["rollout", "status", &deployment_ref, "--timeout=20s"]);
        assert!(done.contains("successfully rolled out"), "{label}: {done}");

        // Paused with a template change: the rollout waits for the resume.
        run(&["rollout", "pause", &deployment_ref]);
        run(&[
            "set",
            "image",
            &deployment_ref,
            "app=registry.example/app:2",
        ]);
        let waiting = run(&["rollout", "status", &deployment_ref, "--watch=false"]);
        assert!(
            waiting.contains("0 out of 2 new replicas have been updated"),
            "{label}: {waiting}"
        );
        let d = emu.get_object("deployments", Some("shop"), &name).unwrap();
        assert_eq!(
            d["status"]["conditions"][1]["reason"], "DeploymentPaused",
            "{label}"
        );
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
        run(&["rollout", "resume", &deployment_ref]);
        let done = run(&["rollout", "status", &deployment_ref, "--timeout=20s"]);
        assert!(done.contains("successfully rolled out"), "{label}: {done}");
        let d = emu.get_object("deployments", Some("shop"), &name).unwrap();
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "2"
        );
        assert_eq!(
            d["status"]["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_partitions_and_on_delete_hold_pods_back() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let sts = |name: &str, strategy: serde_json::Value| {
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
               "metadata": {"name": name, "namespace": "shop"},
               "spec": {"replicas": 3, "serviceName": name, "updateStrategy": strategy,
                        "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"containers": [{"name": "db", "image": "db:1"}]}}}})
    };
    emu.put_object(sts(
        "part",
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 2}}),
    ))
    .unwrap();
    emu.put_object(sts("ondel", json!({"type": "OnDelete"})))
        .unwrap();
    for name in ["part", "ondel"] {
        k.ok(&[
            "-n",
            "shop",
            "set",
            "image",
            &format!("statefulset/{name}"),
            "db=db:2",
        ]);
    }
    let part = emu
        .get_object("statefulsets", Some("shop"), "part")
        .unwrap();
    assert_eq!(part["status"]["updatedReplicas"], 1);
    assert_eq!(part["status"]["currentReplicas"], 2);
    assert_ne!(
        part["status"]["currentRevision"],
        part["status"]["updateRevision"]
    );
    let out = k.ok(&[
        "-n",
        "shop",
        "rollout",
        "status",
        "statefulset/part",
        "--timeout=20s",
    ]);
    assert!(out.contains("partitioned roll out complete"), "{out}");
    let ondel = emu
        .get_object("statefulsets", Some("shop"), "ondel")
        .unwrap();
    assert_eq!(ondel["status"]["updatedReplicas"], 0);
    // Lowering the partition to 0 completes the rollout.
    k.ok(&[
        "-n",
        "shop",
        "patch",
        "statefulset",
        "part",
        "-p",
        r#"{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}"#,
    ]);
    let part = emu
        .get_object("statefulsets", Some("shop"), "part")
        .unwrap();
    assert_eq!(part["status"]["updatedReplicas"], 3);
    assert_eq!(
        part["status"]["currentRevision"],
        part["status"]["updateRevision"]
    );
    let out = k.ok(&[
        "-n",
        "shop",
        "rollout",
        "status",
        "statefulset/part",
        "--timeout=20s",
    ]);
    assert!(out.contains("roll out complete"), "{out}");
}

const MIXED_MANIFEST: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: shopfront, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: shopfront}}
  template:
    metadata: {labels: {app: shopfront}}
    spec: {containers: [{name: web, image: "shopfront:1", ports: [{containerPort: 8080}]}]}
---
apiVersion: v1
kind: Service
metadata: {name: shopfront, namespace: shop}
spec:
  selector: {app: shopfront}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shopfront, namespace: shop}
spec:
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: shopfront, port: {number: 80}}}}
---
apiVersion: batch/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: migrate, image: "shopfront:1", command: [migrate]}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report, namespace: shop}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: report, image: "shopfront:1"}]
---
apiVersion: v1
kind: Pod
metadata: {name: debug, namespace: shop}
spec: {containers: [{name: sh, image: busybox}]}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: gadget, namespace: shop}
spec: {size: 3}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_reads_rollout_history_and_undoes() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    for (round, binary) in kubectl_releases().into_iter().enumerate() {
        let label = binary.display().to_string();
        let name = format!("hist-{round}");
        let deployment_ref = format!("deployment/{name}");
        let run = |args: &[&str]| in_shop(&k, &binary, args);
        run(&[
            "create",
            "deployment",
            &name,
            "--image=nginx:1.26",
            "--replicas=2",
        ]);
        run(&["set", "image", &deployment_ref, "nginx=nginx:1.27"]);
        run(&[
            "annotate",
            &deployment_ref,
            "kubernetes.io/change-cause=to 1.28",
        ]);
        run(&["set", "image", &deployment_ref, "nginx=nginx:1.28"]);
        let revisions = |history: &str| -> Vec<String> {
            history
                .lines()
                .skip_while(|l| !l.starts_with("REVISION"))
                .skip(1)
                .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
                .collect()
        };
        let history = run(&["rollout", "history", &deployment_ref]);
        assert_eq!(revisions(&history), ["1", "2", "3"], "{label}: {history}");
        assert!(history.contains("to 1.28"), "{label}: {history}");
        let sets = run(&["get", "rs", "-l", &format!("app={name}")]);
        assert!(sets.contains("DESIRED"), "{label}: {sets}");
        let image = |emu: &rollsafe_emulator::RunningEmulator| {
            emu.get_object("deployments", Some("shop"), &name).unwrap()["spec"]["template"]["spec"]
                ["containers"][0]["image"]
                .clone()
        };
        // Undo: the previous revision's template comes back as the newest revision.
        run(&["rollout", "undo", &deployment_ref]);
        assert_eq!(image(&emu), "nginx:1.27", "{label}");
        let history = run(&["rollout", "history", &deployment_ref]);
        assert_eq!(revisions(&history), ["1", "3", "4"], "{label}: {history}");
        run(&["rollout", "undo", &deployment_ref, "--to-revision=1"]);
        assert_eq!(image(&emu), "nginx:1.26", "{label}");
        let detail = run(&["rollout", "history", &deployment_ref, "--revision=5"]);
        assert!(detail.contains("nginx:1.26"), "{label}: {detail}");
        let d = emu.get_object("deployments", Some("shop"), &name).unwrap();
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"], "5",
            "{label}: the Deployment and its ReplicaSets agree"
        );
        let done = run(&["rollout", "status", &deployment_ref, "--timeout=20s"]);
        assert!(done.contains("successfully rolled out"), "{label}: {done}");
        // Deleting the Deployment deletes its ReplicaSets.
        run(&["delete", &deployment_ref]);
        let left = run(&["get", "rs", "-l", &format!("app={name}"), "-o", "name"]);
        assert!(left.trim().is_empty(), "{label}: {left}");

        // StatefulSets and DaemonSets keep ControllerRevisions.
        for kind in ["StatefulSet", "DaemonSet"] {
            let workload_name = format!("{}-{round}", kind.to_lowercase());
            let mut workload = deployment("shop", &workload_name);
            workload["kind"] = json!(kind);
            workload["spec"]["serviceName"] = json!(workload_name);
            if kind == "DaemonSet" {
                workload["spec"].as_object_mut().unwrap().remove("replicas");
            }
            emu.put_object(workload).unwrap();
            let reference = format!("{}/{workload_name}", kind.to_lowercase());
            run(&[
                "annotate",
                &reference,
                "kubernetes.io/change-cause=to app 2",
            ]);
            run(&["set", "image", &reference, "app=registry.example/app:2"]);
            let history = run(&["rollout", "history", &reference]);
            assert_eq!(revisions(&history), ["1", "2"], "{label} {kind}: {history}");
            // A new revision carries the workload's annotations, as the real controllers copy
            // them: CHANGE-CAUSE of the revision the annotation was set for.
            assert!(history.contains("to app 2"), "{label} {kind}: {history}");
            run(&["rollout", "undo", &reference]);
            let image = emu
                .get_object(
                    &format!("{}s", kind.to_lowercase()),
                    Some("shop"),
                    &workload_name,
                )
                .unwrap()["spec"]["template"]["spec"]["containers"][0]["image"]
                .clone();
            assert_ne!(
                image, "registry.example/app:2",
                "{label} {kind}: rolled back"
            );
            let history = run(&["rollout", "history", &reference]);
            assert_eq!(revisions(&history), ["2", "3"], "{label} {kind}: {history}");
            run(&["delete", &reference]);
            let left = run(&["get", "controllerrevisions", "-o", "name"]);
            assert!(!left.contains(&workload_name), "{label} {kind}: {left}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_applies_what_a_mixed_manifest_holds() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let file = k.file("mixed.yaml", MIXED_MANIFEST);
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let out = run_release(&k, &binary, &["apply", "-f", &file]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "{label}: the unknown kind fails the command"
        );
        assert!(
            stderr.contains(r#"no matches for kind "Widget" in version "example.com/v1""#),
            "{label}: {stderr}"
        );
        for (resource, name) in [
            ("deployments", "shopfront"),
            ("services", "shopfront"),
            ("ingresses", "shopfront"),
            ("jobs", "migrate"),
            ("cronjobs", "report"),
            ("pods", "debug"),
        ] {
            assert!(
                emu.get_object(resource, Some("shop"), name).is_some(),
                "{label}: {resource}/{name} applied; {stderr}"
            );
        }
        let svc = emu
            .get_object("services", Some("shop"), "shopfront")
            .unwrap();
        assert_eq!(svc["spec"]["type"], "ClusterIP", "{label}");
        assert!(
            svc["spec"]["clusterIP"]
                .as_str()
                .is_some_and(|ip| ip.starts_with("10.96.")),
            "{label}"
        );
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP", "{label}");
        let out = run_release(&k, &binary, &["-n", "shop", "get", "services"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout
                .lines()
                .next()
                .is_some_and(|h| h.split_whitespace().collect::<Vec<_>>()
                    == [
                        "NAME",
                        "TYPE",
                        "CLUSTER-IP",
                        "EXTERNAL-IP",
                        "PORT(S)",
                        "AGE"
                    ]),
            "{label}: {stdout}"
        );
        assert!(stdout.contains("80/TCP"), "{label}: {stdout}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_lists_what_a_user_can_do() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let out = run_release(
            &k,
            &binary,
            &["--context", "bob", "-n", "shop", "auth", "can-i", "--list"],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let rows: Vec<Vec<&str>> = stdout
            .lines()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows[0],
            [
                "Resources",
                "Non-Resource",
                "URLs",
                "Resource",
                "Names",
                "Verbs"
            ],
            "{label}: {stdout}"
        );
        // bob's Role in "shop": everything in the core and apps groups.
        assert!(
            rows.iter()
                .any(|r| r.first() == Some(&"*.apps") && r.last() == Some(&"[*]")),
            "{label}: {stdout}"
        );
        // The bootstrap roles every authenticated user has.
        assert!(
            stdout.contains("selfsubjectaccessreviews.authorization.k8s.io"),
            "{label}: {stdout}"
        );
        assert!(stdout.contains("[/api/*]"), "{label}: {stdout}");
        // alice has no Role in "shop".
        let out = run_release(
            &k,
            &binary,
            &[
                "--context",
                "alice",
                "-n",
                "shop",
                "auth",
                "can-i",
                "--list",
            ],
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{label}");
        assert!(!stdout.contains("*.apps"), "{label}: {stdout}");
    }
    let rules_reviews = emu.requests_for("create", "selfsubjectrulesreviews").len();
    assert!(rules_reviews >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_creates_service_account_tokens() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    emu.put_object(json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "robot", "namespace": "shop"}}))
        .unwrap();
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let out = run_release(
            &k,
            &binary,
            &["-n", "shop", "create", "token", "robot", "--duration=20m"],
        );
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(!token.is_empty(), "{label}");
        // The token authenticates as the ServiceAccount, which RBAC does not let read Secrets.
        let out = run_release(
            &k,
            &binary,
            &["--token", &token, "-n", "shop", "get", "secrets"],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{label}");
        assert!(
            stderr.contains(
                r#"User "system:serviceaccount:shop:robot" cannot list resource "secrets""#
            ),
            "{label}: {stderr}"
        );
        let out = run_release(&k, &binary, &["-n", "shop", "create", "token", "nobody"]);
        assert!(!out.status.success(), "{label}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(r#"serviceaccounts "nobody" not found"#),
            "{label}"
        );
    }
    assert!(
        !emu.kubeconfig_yaml().contains("system:serviceaccount"),
        "tokens are not kubeconfig users"
    );
}

const WIDGET_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"#;

const WIDGET: &str = r#"apiVersion: example.com/v1
kind: Widget
metadata: {name: gear, namespace: shop}
spec: {size: 3}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kubectl_release_serves_a_kind_its_crd_defines() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let crd = k.file("crd.yaml", WIDGET_CRD);
    let widget = k.file("widget.yaml", WIDGET);
    for binary in kubectl_releases() {
        let label = binary.display().to_string();
        let out = run_release(&k, &binary, &["apply", "-f", &crd]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let out = run_release(&k, &binary, &["apply", "-f", &widget]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = in_shop(&k, &binary, &["get", "wd", "-o", "name"]);
        assert_eq!(listed.trim(), "widget.example.com/gear", "{label}");
        let out = run_release(&k, &binary, &["delete", "crd", "widgets.example.com"]);
        assert!(
            out.status.success(),
            "{label}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            emu.list_objects("widgets", Some("shop")).is_empty(),
            "{label}: the CRD's objects go with it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_side_apply_conflicts_then_force_conflicts_takes_over() {
    if skip_without_kubectl() {
        return;
    }
    let (emu, k) = setup().await;
    let manifest = |name: &str, replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}, namespace: shop}}\n\
             spec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    \
             metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers:\n      - {{name: app, image: nginx}}\n"
        )
    };
    let web = k.file("web.yaml", &manifest("web", 1));
    k.ok(&["apply", "--server-side", "-f", &web]);
    let shown = |args: &[&str]| -> Value {
        let mut all = vec!["-n", "shop", "get", "deployment", "web", "-o", "json"];
        all.extend_from_slice(args);
        serde_json::from_str(&k.ok(&all)).unwrap()
    };
    // kubectl strips managedFields unless asked to show them.
    assert!(shown(&[])["metadata"].get("managedFields").is_none());
    let with = shown(&["--show-managed-fields"]);
    let entries = with["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries[0]["manager"], "kubectl");
    assert_eq!(entries[0]["operation"], "Apply");
    assert_eq!(entries[0]["fieldsV1"]["f:spec"]["f:replicas"], json!({}));

    k.ok(&[
        "-n",
        "shop",
        "patch",
        "deployment",
        "web",
        "-p",
        r#"{"spec":{"replicas":3}}"#,
    ]);
    let err = k.fails(&["apply", "--server-side", "-f", &web]);
    assert!(
        err.contains(
            "Apply failed with 1 conflict: conflict with \"kubectl-patch\" using apps/v1: .spec.replicas"
        ),
        "{err}"
    );
    k.ok(&["apply", "--server-side", "--force-conflicts", "-f", &web]);
    let after = shown(&["--show-managed-fields"]);
    assert_eq!(after["spec"]["replicas"], 1);
    let managers: Vec<&str> = after["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["manager"].as_str())
        .filter(|m| *m != "kube-controller-manager")
        .collect();
    assert_eq!(managers, ["kubectl"], "kubectl-patch owned only replicas");

    // From client-side apply to server-side apply: kubectl takes over the fields its
    // last-applied configuration lists, without a conflict.
    let api = k.file("api.yaml", &manifest("api", 1));
    k.ok(&["apply", "-f", &api]);
    let api = k.file("api.yaml", &manifest("api", 2));
    k.ok(&["apply", "--server-side", "-f", &api]);
    let out = k.ok(&[
        "-n",
        "shop",
        "get",
        "deployment",
        "api",
        "-o",
        "jsonpath={.spec.replicas}",
    ]);
    assert_eq!(out, "2");
    // The server-side apply kept the last-applied configuration in step.
    let got: Value =
        serde_json::from_str(&k.ok(&["-n", "shop", "get", "deployment", "api", "-o", "json"]))
            .unwrap();
    let last = got["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
        .as_str()
        .unwrap();
    let last: Value = serde_json::from_str(last).unwrap();
    assert_eq!(last["spec"]["replicas"], 2);
    emu.shutdown().await;
}
