//! Simulated rollouts read by every real kubectl release on the machine (`kubectl.1.27` …
//! `kubectl.1.33` under the Cloud SDK, else the one on PATH): slow rollouts that `rollout
//! status` waits for, a failing revision that exceeds its progress deadline, a paused
//! Deployment, a StatefulSet partition, a DaemonSet, and the pods `kubectl get pods` shows.
//! Nothing sleeps a fixed time: kubectl waits on its own watch, the rest polls with a deadline.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::*;
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};

/// A kubeconfig and cache for kubectl against one emulator.
struct Kubectl {
    dir: tempfile::TempDir,
}

impl Kubectl {
    fn new(emu: &RunningEmulator) -> Self {
        let dir = tempfile::tempdir().unwrap();
        emu.write_kubeconfig(&dir.path().join("kubeconfig"))
            .unwrap();
        Self { dir }
    }

    fn command(&self, binary: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(binary);
        cmd.arg("--kubeconfig")
            .arg(self.dir.path().join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.path().join("cache"))
            .args(args)
            .env("HOME", self.dir.path())
            .env_remove("KUBECONFIG");
        cmd
    }

    fn run(&self, binary: &Path, args: &[&str]) -> Output {
        self.command(binary, args).output().unwrap()
    }

    fn ok(&self, binary: &Path, args: &[&str]) -> String {
        let out = self.run(binary, args);
        assert!(
            out.status.success(),
            "{} {args:?}: {}",
            binary.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

/// An admin API call: (status, JSON body).
async fn admin(emu: &RunningEmulator, method: &str, path: &str, body: &Value) -> (u16, Value) {
    let body = body.to_string();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let (status, _, body) = exchange(emu, request.as_bytes()).await;
    let start = body.find(['{', '[']).unwrap_or(0);
    let end = body.rfind(['}', ']']).map_or(body.len(), |i| i + 1);
    (
        status,
        serde_json::from_str(&body[start..end]).unwrap_or(Value::Null),
    )
}

async fn set_pod_ready_millis(emu: &RunningEmulator, millis: u64) {
    let (status, body) = admin(
        emu,
        "POST",
        "/_emulator/settings",
        &json!({"podReadyMillis": millis}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

fn deployment(ns: &str, name: &str, replicas: i64, strategy: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": replicas, "strategy": strategy,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    })
}

/// Polls `check` until it holds or `timeout` passes.
async fn eventually(timeout: Duration, what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + timeout;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn ready_pods(emu: &RunningEmulator, ns: &str, app: &str) -> usize {
    emu.list_objects("pods", Some(ns))
        .iter()
        .filter(|p| p["metadata"]["labels"]["app"] == app)
        .filter(|p| {
            p["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_are_read_changed_and_refused_with_a_reason() {
    let emu = start().await;
    let (status, body) = admin(&emu, "GET", "/_emulator/settings", &Value::Null).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"podReadyMillis": 0, "progressDeadlineScale": 1.0})
    );
    let (status, body) = admin(
        &emu,
        "POST",
        "/_emulator/settings",
        &json!({"podReadyMillis": 300}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"podReadyMillis": 300, "progressDeadlineScale": 1.0})
    );
    let (status, body) = admin(
        &emu,
        "POST",
        "/_emulator/settings",
        &json!({"podReadyMilis": 1}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `podReadyMilis`"),
        "{body}"
    );
    let (status, body) = admin(
        &emu,
        "POST",
        "/_emulator/settings",
        &json!({"progressDeadlineScale": 0}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(
        emu.settings().pod_ready_millis,
        300,
        "a refused change changes nothing"
    );
    emu.reset().unwrap();
    assert_eq!(emu.settings().pod_ready_millis, 0);
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout_status_waits_for_slow_pods_through_a_pause_and_a_resume() {
    let releases = kubectl_releases();
    if releases.is_empty() {
        return;
    }
    let emu = start().await;
    let k = Kubectl::new(&emu);
    set_pod_ready_millis(&emu, 300).await;
    for (round, binary) in releases.iter().enumerate() {
        let label = binary.display().to_string();
        let name = format!("slow-{round}");
        let reference = format!("deployment/{name}");
        // Every old pod may go at once, so the last wait is for the new pods' readiness.
        emu.put_object(deployment(
            "shop",
            &name,
            2,
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": "100%"}}),
        ))
        .unwrap();
        let out = k.ok(
            binary,
            &[
                "-n",
                "shop",
                "rollout",
                "status",
                &reference,
                "--timeout=30s",
            ],
        );
        assert!(out.contains("successfully rolled out"), "{label}: {out}");
        assert_eq!(ready_pods(&emu, "shop", &name), 2, "{label}");

        // Paused, the template change waits; rollout status waits with it.
        k.ok(binary, &["-n", "shop", "rollout", "pause", &reference]);
        k.ok(
            binary,
            &["-n", "shop", "set", "image", &reference, "app=app:2"],
        );
        let d = emu.get_object("deployments", Some("shop"), &name).unwrap();
        assert_eq!(
            d["status"]["conditions"][1]["reason"], "DeploymentPaused",
            "{label}"
        );
        assert_eq!(d["status"]["conditions"][1]["status"], "Unknown", "{label}");
        let mut watching = k
            .command(
                binary,
                &[
                    "-n",
                    "shop",
                    "rollout",
                    "status",
                    &reference,
                    "--timeout=30s",
                ],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(watching.stdout.take().unwrap()).lines();
        let first = lines.next().unwrap().unwrap();
        assert!(
            first.contains("0 out of 2 new replicas have been updated"),
            "{label}: {first}"
        );
        k.ok(binary, &["-n", "shop", "rollout", "resume", &reference]);
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = watching.wait().unwrap();
        let mut stderr = String::new();
        watching
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        assert!(status.success(), "{label}: {rest:?} {stderr}");
        assert!(
            rest.iter().any(|l| l.contains(&format!(
                "Waiting for deployment \"{name}\" rollout to finish: 0 of 2 updated replicas are available..."
            ))),
            "{label}: {rest:?}"
        );
        assert!(
            rest.last()
                .is_some_and(|l| l.contains("successfully rolled out")),
            "{label}: {rest:?}"
        );
        let d = emu.get_object("deployments", Some("shop"), &name).unwrap();
        assert_eq!(
            d["status"]["conditions"][1]["reason"],
            "NewReplicaSetAvailable"
        );
        assert_eq!(
            d["status"]["observedGeneration"],
            d["metadata"]["generation"]
        );
    }
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_revision_exceeds_its_progress_deadline_and_a_fix_recovers() {
    let releases = kubectl_releases();
    if releases.is_empty() {
        return;
    }
    let emu = start().await;
    let k = Kubectl::new(&emu);
    let (status, _) = admin(
        &emu,
        "POST",
        "/_emulator/settings",
        &json!({"podReadyMillis": 100, "progressDeadlineScale": 0.01}),
    )
    .await;
    assert_eq!(status, 200);
    for (round, binary) in releases.iter().enumerate() {
        let label = binary.display().to_string();
        let name = format!("api-server-{round}");
        let reference = format!("deployment/{name}");
        let mut api = deployment("demo", &name, 2, json!({"type": "RollingUpdate"}));
        api["spec"]["progressDeadlineSeconds"] = json!(150);
        emu.put_object(api).unwrap();
        k.ok(
            binary,
            &[
                "-n",
                "demo",
                "rollout",
                "status",
                &reference,
                "--timeout=30s",
            ],
        );
        let (status, body) = admin(
            &emu,
            "POST",
            "/_emulator/faults",
            &json!({"verb": "patch", "resource": "deployments", "namespace": "demo", "name": name,
                    "action": {"type": "rolloutFails", "reason": "CrashLoopBackOff",
                               "message": "secret \"db\" not found"}}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        k.ok(
            binary,
            &["-n", "demo", "set", "image", &reference, "app=app:2"],
        );
        let out = k.run(
            binary,
            &[
                "-n",
                "demo",
                "rollout",
                "status",
                &reference,
                "--timeout=30s",
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{label}: a stuck rollout fails");
        assert!(
            stderr.contains(&format!(
                "deployment \"{name}\" exceeded its progress deadline"
            )),
            "{label}: {stderr}"
        );
        let d = emu.get_object("deployments", Some("demo"), &name).unwrap();
        let new_rs = d["status"]["conditions"][1]["message"]
            .as_str()
            .unwrap()
            .split('"')
            .nth(1)
            .unwrap()
            .to_owned();
        assert_eq!(
            d["status"]["conditions"][1],
            json!({"type": "Progressing", "status": "False",
                   "reason": "ProgressDeadlineExceeded",
                   "message": format!("ReplicaSet \"{new_rs}\" has timed out progressing."),
                   "lastUpdateTime": d["status"]["conditions"][1]["lastUpdateTime"],
                   "lastTransitionTime": d["status"]["conditions"][1]["lastTransitionTime"]}),
            "{label}"
        );
        let rs = emu
            .get_object("replicasets", Some("demo"), &new_rs)
            .unwrap();
        assert_eq!(rs["status"]["readyReplicas"], 0, "{label}");
        // kubectl get pods shows the failing pod as kubectl's pod printer does.
        let table = k.ok(
            binary,
            &["-n", "demo", "get", "pods", "-l", &format!("app={name}")],
        );
        let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
        assert_eq!(
            header,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            "{label}"
        );
        let failing: Vec<&str> = table.lines().filter(|l| l.starts_with(&new_rs)).collect();
        assert_eq!(failing.len(), 1, "{label}: {table}");
        let cells: Vec<&str> = failing[0].split_whitespace().collect();
        assert_eq!(
            &cells[1..3],
            ["0/1", "CrashLoopBackOff"],
            "{label}: {table}"
        );
        assert_eq!(
            table
                .lines()
                .filter(|l| l.contains(" 1/1 ") && l.contains("Running"))
                .count(),
            2,
            "{label}: the old pods keep serving: {table}"
        );
        let pod = emu
            .list_objects("pods", Some("demo"))
            .into_iter()
            .find(|p| {
                p["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&new_rs))
            })
            .unwrap();
        assert_eq!(
            pod["status"]["containerStatuses"][0]["state"]["waiting"],
            json!({"reason": "CrashLoopBackOff", "message": "secret \"db\" not found"})
        );
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["name"],
            new_rs.as_str()
        );
        // The fixed template rolls out without the fault; the failing pod is replaced.
        k.ok(
            binary,
            &["-n", "demo", "set", "image", &reference, "app=app:3"],
        );
        let out = k.ok(
            binary,
            &[
                "-n",
                "demo",
                "rollout",
                "status",
                &reference,
                "--timeout=30s",
            ],
        );
        assert!(out.contains("successfully rolled out"), "{label}: {out}");
        let pods = emu.list_objects("pods", Some("demo"));
        let mine: Vec<&Value> = pods
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == name.as_str())
            .collect();
        assert_eq!(mine.len(), 2, "{label}");
        assert!(
            mine.iter()
                .all(|p| p["spec"]["containers"][0]["image"] == "app:3"),
            "{label}"
        );
    }
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_partitions_and_daemonsets_roll_one_pod_at_a_time() {
    let releases = kubectl_releases();
    if releases.is_empty() {
        return;
    }
    let emu = start().await;
    let k = Kubectl::new(&emu);
    set_pod_ready_millis(&emu, 200).await;
    for (round, binary) in releases.iter().enumerate() {
        let label = binary.display().to_string();
        let db = format!("db-{round}");
        emu.put_object(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": db, "namespace": "shop"},
            "spec": {"replicas": 3, "serviceName": db,
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}},
                     "selector": {"matchLabels": {"app": db}},
                     "template": {"metadata": {"labels": {"app": db}},
                                  "spec": {"containers": [{"name": "db", "image": "db:1"}]}}}}))
            .unwrap();
        let agent = format!("agent-{round}");
        emu.put_object(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": agent, "namespace": "shop"},
            "spec": {"selector": {"matchLabels": {"app": agent}},
                     "template": {"metadata": {"labels": {"app": agent}},
                                  "spec": {"containers": [{"name": "agent", "image": "agent:1"}]}}}}))
        .unwrap();
        let sts = format!("statefulset/{db}");
        let ds = format!("daemonset/{agent}");
        let out = k.ok(
            binary,
            &["-n", "shop", "rollout", "status", &sts, "--timeout=30s"],
        );
        assert!(
            out.contains("partitioned roll out complete"),
            "{label}: {out}"
        );
        k.ok(
            binary,
            &["-n", "shop", "rollout", "status", &ds, "--timeout=30s"],
        );

        k.ok(binary, &["-n", "shop", "set", "image", &sts, "db=db:2"]);
        k.ok(
            binary,
            &["-n", "shop", "set", "image", &ds, "agent=agent:2"],
        );
        let out = k.ok(
            binary,
            &["-n", "shop", "rollout", "status", &sts, "--timeout=30s"],
        );
        assert!(
            out.contains("partitioned roll out complete: 2 new pods have been updated"),
            "{label}: {out}"
        );
        let image = |ordinal: i64| {
            emu.get_object("pods", Some("shop"), &format!("{db}-{ordinal}"))
                .map(|p| p["spec"]["containers"][0]["image"].clone())
        };
        assert_eq!(
            (image(0), image(1), image(2)),
            (
                Some(json!("db:1")),
                Some(json!("db:2")),
                Some(json!("db:2"))
            ),
            "{label}: the partition keeps ordinal 0"
        );
        let s = emu.get_object("statefulsets", Some("shop"), &db).unwrap();
        assert_eq!(
            emu.get_object("pods", Some("shop"), &format!("{db}-2"))
                .unwrap()["metadata"]["labels"]["controller-revision-hash"],
            s["status"]["updateRevision"],
            "{label}"
        );
        assert_eq!(s["status"]["currentReplicas"], 1, "{label}");

        let out = k.ok(
            binary,
            &["-n", "shop", "rollout", "status", &ds, "--timeout=30s"],
        );
        assert!(out.contains("successfully rolled out"), "{label}: {out}");
        let d = emu.get_object("daemonsets", Some("shop"), &agent).unwrap();
        assert_eq!(d["status"]["desiredNumberScheduled"], 3, "{label}");
        assert_eq!(d["status"]["updatedNumberScheduled"], 3, "{label}");
        let nodes: std::collections::BTreeSet<String> = emu
            .list_objects("pods", Some("shop"))
            .iter()
            .filter(|p| p["metadata"]["labels"]["app"] == agent.as_str())
            .map(|p| p["spec"]["nodeName"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(nodes.len(), 3, "{label}: one pod per node");
        // The selector finds the workload's pods, ready.
        let table = k.ok(
            binary,
            &["-n", "shop", "get", "pods", "-l", &format!("app={agent}")],
        );
        assert_eq!(
            table
                .lines()
                .filter(|l| l.contains(" 1/1 ") && l.contains("Running"))
                .count(),
            3,
            "{label}: {table}"
        );
    }
    emu.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_steps_are_writes_watchers_see_without_a_generation_bump() {
    let emu = start().await;
    set_pod_ready_millis(&emu, 150).await;
    let client = client(&emu, "admin").await;
    let api: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(client, "shop");
    let rv = emu.resource_version().to_string();
    emu.put_object(deployment(
        "shop",
        "web",
        2,
        json!({"type": "RollingUpdate"}),
    ))
    .unwrap();
    eventually(Duration::from_secs(10), "two ready pods", || {
        ready_pods(&emu, "shop", "web") == 2
    })
    .await;
    eventually(Duration::from_secs(10), "an available Deployment", || {
        emu.get_object("deployments", Some("shop"), "web").unwrap()["status"]["availableReplicas"]
            == 2
    })
    .await;
    use futures::StreamExt;
    let params = kube::api::WatchParams::default().timeout(1);
    let mut stream = api.watch(&params, &rv).await.unwrap().boxed();
    let mut seen = Vec::new();
    while let Some(event) = stream.next().await {
        let Ok(event) = event else { break };
        if let kube::core::WatchEvent::Modified(d) = event {
            let status = d.status.clone().unwrap_or_default();
            seen.push((
                d.metadata.generation,
                d.metadata.resource_version.clone(),
                status.ready_replicas.unwrap_or(0),
            ));
        }
    }
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(
        seen.iter().all(|(generation, _, _)| *generation == Some(1)),
        "{seen:?}"
    );
    let versions: Vec<u64> = seen
        .iter()
        .filter_map(|(_, rv, _)| rv.as_deref().and_then(|v| v.parse().ok()))
        .collect();
    assert!(versions.windows(2).all(|w| w[0] < w[1]), "{versions:?}");
    assert_eq!(seen.last().map(|s| s.2), Some(2), "{seen:?}");
    emu.shutdown().await;
}
