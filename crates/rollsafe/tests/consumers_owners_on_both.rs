//! Operator-owned workloads and pod-level consumers, as a user sees them in `rollsafe
//! consumers` and `rollsafe why`, on both substrates: a StatefulSet a custom resource
//! (`PodGroup/my-cluster`) controls is named operator-owned with how it is restarted; pods a
//! custom resource (`PodGroup/kafka`) owns directly, and a standalone pod, are consumers too;
//! the pods of the Deployment and the StatefulSet are not (on the real control plane they are
//! the real controllers' pods, owned through a real ReplicaSet), nor is a pod that has finished
//! (it runs nothing, and evicting it would only delete it); the Secret's and the
//! workload's `rollsafe.dev/strategy` say eviction; an identity that may not list pods still
//! gets the preview, its pod-level consumers said to be not readable.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

use assert_cmd::cargo::CommandCargoExt as _;
use kube::api::{Patch, PatchParams};
use rollsafe_testing::operator::{controlled_by, pod_group, pod_group_crd};
use rollsafe_testing::{
    Substrate, TestNamespace, Workload, eventually, on_both_substrates, rbac_for_group,
};
use serde_json::{Value, json};

const SECRET: &str = "db-creds";

/// What one run printed and how it exited.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|_| panic!("not JSON: {:?}; stderr: {}", self.stdout, self.stderr))
    }
}

/// Runs the rollsafe binary in the namespace with the namespace's kubeconfig (as `context`).
async fn rollsafe(ns: &TestNamespace, context: &str, args: &[&str]) -> Run {
    let kubeconfig = ns.kubeconfig.clone();
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend([
        "-n".into(),
        ns.name.clone(),
        "--context".into(),
        context.into(),
    ]);
    tokio::task::spawn_blocking(move || {
        let output = Command::cargo_bin("rollsafe")
            .unwrap()
            .args(&all)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env_remove("RUST_LOG")
            .env_remove("ROLLSAFE_NAMESPACE")
            .env_remove("ROLLSAFE_CONTEXT")
            .env_remove("ROLLSAFE_AS")
            .output()
            .unwrap();
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    })
    .await
    .unwrap()
}

/// A pod consuming the Secret (or not), owned as `owners` says (`[]`: standalone).
fn pod(name: &str, owners: Value, labels: Value, consumes: bool) -> Value {
    let mut container = json!({"name": "app", "image": "registry.example/app:1"});
    if consumes {
        container["envFrom"] = json!([{"secretRef": {"name": SECRET}}]);
    }
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": labels, "ownerReferences": owners},
        "spec": {"containers": [container]}})
}

/// The Secret; a Deployment `web` and a StatefulSet `my-cluster-kafka` that the custom resource
/// `PodGroup/my-cluster` controls (as Strimzi's `Kafka` does), both consuming it; pods `kafka-0` and `kafka-1` that `PodGroup/kafka` owns
/// directly, a standalone pod `debug`, and a pod that consumes nothing. The workloads' own pods
/// are their controllers' (the emulator's simulated ones name and label them as the real ones
/// do).
async fn arrange(ns: &TestNamespace) {
    pod_group_crd(ns).await;
    let cluster = pod_group(ns, "my-cluster").await;
    let group = json!([controlled_by(&pod_group(ns, "kafka").await)]);
    let mut kafka = Workload::stateful_set("my-cluster-kafka")
        .consuming_secret_via_env_from(SECRET)
        .with_replicas()
        .build();
    kafka["metadata"]["ownerReferences"] = json!([controlled_by(&cluster)]);
    let web = Workload::deployment("web")
        .consuming_secret_via_env_from(SECRET)
        .with_replicas()
        .build();
    ns.apply_at_rest([
        rollsafe_testing::secret(&ns.name, SECRET, "not-a-real-password"),
        kafka,
        web,
    ])
    .await;
    let pods = vec![
        pod("kafka-0", group.clone(), json!({"group": "kafka"}), true),
        pod("kafka-1", group, json!({"group": "kafka"}), true),
        pod("debug", json!([]), json!({}), true),
        pod("unrelated", json!([]), json!({}), false),
        pod("finished", json!([]), json!({}), true),
    ];
    ns.apply(pods).await;
    finish(ns, "finished").await;
}

/// Marks pod `name` finished (`Succeeded`), as its kubelet would once its containers exited.
/// On the real control plane kwok first makes the pod Running and moves only a Pending pod, so
/// the phase written after that stays.
async fn finish(ns: &TestNamespace, name: &str) {
    let api = ns
        .api_for(&json!({"apiVersion": "v1", "kind": "Pod"}))
        .await;
    eventually(
        "the pod finished",
        std::time::Duration::from_secs(60),
        || async {
            let pod = api.get(name).await.ok()?;
            let phase = pod.data.pointer("/status/phase").and_then(Value::as_str);
            match phase {
                Some("Succeeded") => return Some(()),
                Some("Pending") if ns.substrate == Substrate::Real => return None,
                _ => {}
            }
            let finished = Patch::Merge(json!({"status": {"phase": "Succeeded"}}));
            api.patch_status(name, &PatchParams::default(), &finished)
                .await
                .ok()?;
            None
        },
    )
    .await;
}

/// The pod of `prefix` its workload's controller made (the seeded one on the emulator).
async fn workload_pod(ns: &TestNamespace, prefix: &str) -> String {
    eventually(
        "the workload's pod",
        std::time::Duration::from_secs(60),
        || async {
            let api = ns
                .api_for(&json!({"apiVersion": "v1", "kind": "Pod"}))
                .await;
            api.list(&Default::default())
                .await
                .ok()?
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .find(|name| name.starts_with(prefix))
        },
    )
    .await
}

/// Each group of `podConsumers`: owner (`Kind/name`, `-` for standalone), pods, restart.
fn groups(preview: &Value) -> Vec<(String, Vec<String>, String)> {
    preview["podConsumers"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let owner = match &g["owner"] {
                Value::Null => "-".to_owned(),
                owner => format!(
                    "{}/{}",
                    owner["kind"].as_str().unwrap(),
                    owner["name"].as_str().unwrap()
                ),
            };
            let pods = g["pods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap().to_owned())
                .collect();
            (owner, pods, g["restart"].as_str().unwrap().to_owned())
        })
        .collect()
}

async fn annotate(ns: &TestNamespace, api_version: &str, kind: &str, name: &str, value: &str) {
    let api = ns
        .api_for(&json!({"apiVersion": api_version, "kind": kind}))
        .await;
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {"rollsafe.dev/strategy": value}}})),
    )
    .await
    .unwrap();
}

const OPERATOR_DEFAULT: &str = "a template patch is not the way to restart it (its operator may revert one): restart it by eviction (rollsafe.dev/strategy: evict, or rollsafe restart-consumers --strategy evict)";
const PODGROUP_REASON: &str = "owned by PodGroup/kafka (an operator's resource), not by a Deployment, StatefulSet or DaemonSet: a template patch does not reach them; rollsafe restart-consumers --strategy evict evicts them one at a time, PodDisruptionBudgets holding, and PodGroup/kafka recreates them";

on_both_substrates! {
    /// The preview names the operator of the StatefulSet and lists the pods no workload owns,
    /// by owner; the workloads' own pods are not among them.
    async fn the_preview_reports_operator_owned_and_pod_level_consumers(ns) {
        arrange(ns).await;
        // The workloads' pods exist (the real controllers'), and consume the Secret too.
        workload_pod(ns, "my-cluster-kafka-").await;
        workload_pod(ns, "web-").await;

        let run = rollsafe(ns, "admin", &["consumers", SECRET, "-o", "json"]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        let preview = run.json();
        let workloads: Vec<(&str, &str, &Value, &Value)> = preview["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| {
                (
                    w["kind"].as_str().unwrap(),
                    w["name"].as_str().unwrap(),
                    &w["operatorOwner"],
                    &w["restartBy"],
                )
            })
            .collect();
        assert_eq!(
            workloads,
            [
                ("Deployment", "web", &Value::Null, &Value::Null),
                (
                    "StatefulSet",
                    "my-cluster-kafka",
                    &json!({"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "name": "my-cluster"}),
                    &json!({"strategy": "patch", "from": "default", "reason": OPERATOR_DEFAULT}),
                ),
            ]
        );
        assert_eq!(preview["podConsumers"]["state"], "read");
        assert_eq!(
            groups(&preview),
            [
                ("PodGroup/kafka".to_owned(), vec!["kafka-0".to_owned(), "kafka-1".to_owned()], "evict".to_owned()),
                ("-".to_owned(), vec!["debug".to_owned()], "not_evicted".to_owned()),
            ]
        );
        assert_eq!(preview["podConsumers"]["groups"][0]["operator"], true);
        assert!(!run.stdout.contains("uid"), "no uid is shown: {}", run.stdout);

        let run = rollsafe(ns, "admin", &["consumers", SECRET, "-o", "text"]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        let expected = format!(
            "Secret {ns}/{SECRET}\n\
             consumer   Deployment/web; watch: not opted in (watched only under --all)\n           \
             via containers[app].envFrom\n\
             consumer   StatefulSet/my-cluster-kafka; watch: not opted in (watched only under --all)\n           \
             StatefulSet/my-cluster-kafka is owned by PodGroup/my-cluster\n           \
             restart: {OPERATOR_DEFAULT}\n           \
             via containers[app].envFrom\n\
             pods       kafka-0, kafka-1 — {PODGROUP_REASON}\n\
             pods       debug — standalone: nothing recreates it, not evicted\n",
            ns = ns.name
        );
        assert_eq!(run.stdout, expected);
    }

    /// `rollsafe why` names a workload's operator, and explains a pod by its owner: the
    /// PodGroup's, a standalone one, and the workloads' own pods (restarted with them).
    async fn why_names_the_operator_and_explains_pods_by_owner(ns) {
        arrange(ns).await;
        let run = rollsafe(ns, "admin", &["why", "statefulset/my-cluster-kafka", "-o", "text"]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.contains(&format!(
                "\nowner:     StatefulSet/my-cluster-kafka is owned by PodGroup/my-cluster\nrestart:   {OPERATOR_DEFAULT}\n"
            )),
            "{}",
            run.stdout
        );
        let json = rollsafe(ns, "admin", &["why", "sts/my-cluster-kafka"]).await.json();
        assert_eq!(
            json["operatorOwner"],
            json!({"apiVersion": "sim.rollsafe.dev/v1", "kind": "PodGroup", "name": "my-cluster"})
        );
        let plain = rollsafe(ns, "admin", &["why", "deployment/web"]).await.json();
        assert!(plain.get("operatorOwner").is_none() && plain.get("restartBy").is_none(), "{plain}");

        // A real pod also consumes what admission adds to it (the service account's projected
        // kube-root-ca.crt ConfigMap): the lines of the Secret are checked, not the whole.
        let consumes = format!(
            "\nconsumes:  Secret/{SECRET}\n             at spec.containers[app].envFrom[].secretRef\n"
        );
        let run = rollsafe(ns, "admin", &["why", "pod/kafka-0", "-o", "text"]).await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            run.stdout.starts_with(&format!(
                "Pod {}/kafka-0\nowner:     PodGroup/kafka (an operator's resource)\nconsumes:  ",
                ns.name
            )) && run.stdout.contains(&consumes)
                && run.stdout.ends_with(&format!(
                    "\nrestart:   {}\n",
                    PODGROUP_REASON.replace("them", "it")
                )),
            "{}",
            run.stdout
        );
        let run = rollsafe(ns, "admin", &["why", "pod/finished", "-o", "text"]).await;
        assert!(
            run.stdout.contains("\nowner:     none (standalone)\nconsumes:  ")
                && run.stdout.ends_with(
                    "\nrestart:   finished (Succeeded): it runs nothing, so no restart reaches it; not evicted\n"
                ),
            "{}",
            run.stdout
        );
        let run = rollsafe(ns, "admin", &["why", "pod/debug", "-o", "text"]).await;
        assert!(
            run.stdout.contains("\nowner:     none (standalone)\nconsumes:  ")
                && run.stdout.contains(&consumes)
                && run.stdout.ends_with("\nrestart:   standalone: nothing recreates it, not evicted\n"),
            "{}",
            run.stdout
        );
        for (prefix, workload) in [
            ("my-cluster-kafka-", "StatefulSet/my-cluster-kafka"),
            ("web-", "Deployment/web"),
        ] {
            let name = workload_pod(ns, prefix).await;
            let json = rollsafe(ns, "admin", &["why", &format!("pod/{name}")]).await.json();
            assert_eq!(json["workload"], workload, "{json}");
            assert_eq!(json["restart"]["by"], "workload");
            assert_eq!(
                json["restart"]["reason"],
                format!(
                    "restarted with {workload}, which it belongs to: rollsafe why {}",
                    workload.to_ascii_lowercase()
                )
            );
        }
        let missing = rollsafe(ns, "admin", &["why", "pod/nope"]).await;
        assert_eq!((missing.code, missing.stdout.as_str()), (1, ""));
        assert!(missing.stderr.contains("Pod \"nope\" not found"), "{}", missing.stderr);
    }

    /// The Secret's `rollsafe.dev/strategy: evict` says eviction for both workloads; the
    /// workload's own annotation wins over it.
    async fn the_strategy_annotations_say_eviction(ns) {
        arrange(ns).await;
        annotate(ns, "v1", "Secret", SECRET, "evict").await;
        annotate(ns, "apps/v1", "StatefulSet", "my-cluster-kafka", "patch").await;
        let preview = rollsafe(ns, "admin", &["consumers", SECRET]).await.json();
        let by: Vec<(&Value, &Value)> = preview["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| (&w["restartBy"]["strategy"], &w["restartBy"]["from"]))
            .collect();
        assert_eq!(
            by,
            [
                (&json!("evict"), &json!("secret")),
                (&json!("patch"), &json!("workload")),
            ]
        );
        assert_eq!(
            preview["workloads"][0]["restartBy"]["reason"],
            "the Secret asks for eviction (rollsafe.dev/strategy: evict on the Secret), which rollsafe watch does not read yet: put it on the Deployment, or run rollsafe restart-consumers --strategy evict"
        );
        annotate(ns, "apps/v1", "StatefulSet", "my-cluster-kafka", "evict").await;
        let run = rollsafe(ns, "admin", &["why", "statefulset/my-cluster-kafka", "-o", "text"]).await;
        assert!(
            run.stdout.contains("\nrestart:   restarted by eviction (rollsafe.dev/strategy: evict on the StatefulSet): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template\n"),
            "{}",
            run.stdout
        );
    }

    /// An identity that may list the workloads and read the Secret but not list pods gets the
    /// preview (exit 0), its pod-level consumers said to be not readable with the rule.
    async fn an_identity_without_list_pods_gets_the_preview_and_not_readable(ns) {
        arrange(ns).await;
        ns.apply(rbac_for_group(&ns.name, "devs", true)).await;
        let run = eventually("alice may read the Secret", std::time::Duration::from_secs(30), || async {
            let run = rollsafe(ns, "alice", &["consumers", SECRET]).await;
            (run.code == 0).then_some(run)
        })
        .await;
        let preview = run.json();
        assert_eq!(preview["workloads"].as_array().unwrap().len(), 2);
        assert_eq!(
            preview["podConsumers"],
            json!({"state": "not_readable", "code": "forbidden",
                "message": "not readable: the identity may not list pods in this namespace, so pods that consume the Secret outside a Deployment, StatefulSet or DaemonSet are not shown (RBAC: list pods)",
                "groups": []})
        );
        assert!(run.stderr.contains("the pods could not be read (forbidden)"), "{}", run.stderr);
        let text = rollsafe(ns, "alice", &["consumers", SECRET, "-o", "text"]).await;
        assert!(
            text.stdout.contains("\nunread     pods: forbidden: not readable: the identity may not list pods"),
            "{}",
            text.stdout
        );
        let why = rollsafe(ns, "alice", &["why", "pod/kafka-0"]).await;
        assert_eq!(why.code, 1);
        assert!(why.stderr.contains("(RBAC: get pods)"), "{}", why.stderr);
    }
}

/// A `rollsafe serve` of the namespace (authentication off, on loopback), stopped on drop.
struct Served {
    child: std::process::Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `rollsafe serve` for the namespace and waits (with a deadline) for its listener.
fn serve(ns: &TestNamespace) -> Served {
    use std::io::BufRead as _;
    let mut command = Command::cargo_bin("rollsafe").unwrap();
    for (name, _) in std::env::vars() {
        if name.starts_with("KRYPTON_") || name.starts_with("ROLLSAFE_") {
            command.env_remove(name);
        }
    }
    let mut child = command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--auth-disabled",
            "true",
            "--controller-lease",
            "none",
            "--namespace",
        ])
        .arg(&ns.name)
        .arg("--kubeconfig")
        .arg(&ns.kubeconfig)
        .env("RUST_LOG", "info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (found, listening) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["fields"]["message"] == "serving"
                && let Some(api) = event["fields"]["api"].as_str()
            {
                let _ = found.send(api.to_owned());
            }
        }
    });
    let api = listening
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("rollsafe serve listens");
    Served {
        child,
        url: format!("http://{api}"),
    }
}

on_both_substrates! {
    /// Through the server's API (the page's JSON), `rollsafe consumers --server` prints the
    /// same workloads, operator and pod-level consumers as asking Kubernetes directly.
    async fn the_served_preview_carries_the_same_owners_and_pods(ns) {
        arrange(ns).await;
        workload_pod(ns, "web-").await;
        let direct = rollsafe(ns, "admin", &["consumers", SECRET]).await.json();
        let served = serve(ns);
        let url = served.url.clone();
        let namespace = ns.name.clone();
        let output = tokio::task::spawn_blocking(move || {
            Command::cargo_bin("rollsafe")
                .unwrap()
                .args(["consumers", "--server", &url, "-n", &namespace, SECRET])
                .env_remove("ROLLSAFE_TOKEN")
                .env_remove("ROLLSAFE_SERVER")
                .env_remove("RUST_LOG")
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let mut through: Value = serde_json::from_slice(&output.stdout).unwrap();
        // The server adds its judgement under the controller's settings (none here).
        for workload in through["workloads"].as_array_mut().unwrap() {
            workload.as_object_mut().unwrap().remove("controller");
        }
        for field in ["workloads", "podConsumers"] {
            assert_eq!(through[field], direct[field], "{field}");
        }
        assert_eq!(
            groups(&through),
            [
                ("PodGroup/kafka".to_owned(), vec!["kafka-0".to_owned(), "kafka-1".to_owned()], "evict".to_owned()),
                ("-".to_owned(), vec!["debug".to_owned()], "not_evicted".to_owned()),
            ]
        );
        drop(served);
    }
}
