//! The simulation under a driven clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::cluster::Cluster;
use crate::store::UpdateMode;

const MILLIS: u64 = 300;

fn store() -> Cluster {
    Cluster::on_manual_clock(MILLIS)
}

fn workload(kind: &str, name: &str, replicas: i64, strategy: Value) -> Value {
    let strategy_key = if kind == "Deployment" {
        "strategy"
    } else {
        "updateStrategy"
    };
    let mut obj = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": replicas, strategy_key: strategy,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    });
    if kind == "DaemonSet" {
        obj["spec"].as_object_mut().map(|s| s.remove("replicas"));
    }
    obj
}

fn res_of(kind: &str) -> ResId {
    match kind {
        "Deployment" => ids::DEPLOYMENTS,
        "StatefulSet" => ids::STATEFULSETS,
        _ => ids::DAEMONSETS,
    }
}

fn create(s: &mut Cluster, obj: Value) {
    let res = res_of(obj["kind"].as_str().unwrap_or(""));
    assert!(s.create(res, obj).is_ok());
}

fn set_image(s: &mut Cluster, kind: &str, name: &str, image: &str) {
    let res = res_of(kind);
    let mut obj = (**s.get(res, "shop", name).unwrap()).clone();
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = json!(image);
    assert!(s.update(res, "shop", name, obj, UpdateMode::Put).is_ok());
}

fn status(s: &Cluster, kind: &str, name: &str) -> Value {
    s.get(res_of(kind), "shop", name).unwrap()["status"].clone()
}

fn pods(s: &Cluster) -> Vec<Value> {
    s.range(ids::PODS, Some("shop"), None)
        .map(|(_, p)| (**p).clone())
        .collect()
}

fn images(s: &Cluster, ready: bool) -> Vec<String> {
    let mut out: Vec<String> = pods(s)
        .iter()
        .filter(|p| pods::is_ready(p) == ready)
        .map(|p| {
            p["spec"]["containers"][0]["image"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    out.sort();
    out
}

fn tick(s: &mut Cluster) {
    s.advance_clock(Duration::from_millis(MILLIS));
}

#[test]
fn a_deployment_rolls_within_surge_and_unavailability_one_step_per_readiness() {
    let mut s = store();
    create(
        &mut s,
        workload(
            "Deployment",
            "web",
            3,
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}),
        ),
    );
    // Created: three pods starting, none ready.
    assert_eq!(images(&s, false).len(), 3);
    assert_eq!(status(&s, "Deployment", "web")["readyReplicas"], 0);
    assert_eq!(
        status(&s, "Deployment", "web")["conditions"][0]["reason"],
        "MinimumReplicasUnavailable"
    );
    tick(&mut s);
    assert_eq!(images(&s, true).len(), 3);
    let done = status(&s, "Deployment", "web");
    assert_eq!(done["availableReplicas"], 3);
    assert_eq!(done["conditions"][1]["reason"], "NewReplicaSetAvailable");
    assert!(!s.rollouts_in_progress());

    set_image(&mut s, "Deployment", "web", "app:2");
    // One surge pod; no old pod goes while it is not ready (maxUnavailable 0).
    assert_eq!(images(&s, true), ["app:1", "app:1", "app:1"]);
    assert_eq!(images(&s, false), ["app:2"]);
    let rolling = status(&s, "Deployment", "web");
    assert_eq!(rolling["observedGeneration"], 2);
    assert_eq!(rolling["updatedReplicas"], 1);
    assert_eq!(rolling["replicas"], 4);
    assert_eq!(rolling["conditions"][1]["reason"], "NewReplicaSetCreated");
    tick(&mut s);
    // The new pod is ready: one old pod goes, the next new one starts.
    assert_eq!(images(&s, true), ["app:1", "app:1", "app:2"]);
    assert_eq!(images(&s, false), ["app:2"]);
    let rolling = status(&s, "Deployment", "web");
    assert_eq!(rolling["conditions"][1]["reason"], "ReplicaSetUpdated");
    assert_eq!(
        rolling["conditions"][1]["message"],
        format!(
            "ReplicaSet \"{}\" is progressing.",
            revision_name(
                ids::DEPLOYMENTS,
                s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()
            )
        )
    );
    tick(&mut s);
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:2", "app:2", "app:2"]);
    let done = status(&s, "Deployment", "web");
    assert_eq!(done["updatedReplicas"], 3);
    assert_eq!(done["replicas"], 3);
    assert_eq!(done["conditions"][1]["reason"], "NewReplicaSetAvailable");
    assert!(!s.rollouts_in_progress());
}

#[test]
fn a_failing_revision_times_out_and_a_fixed_template_recovers() {
    let mut s = store();
    let mut web = workload("Deployment", "web", 2, json!({"type": "RollingUpdate"}));
    web["spec"]["progressDeadlineSeconds"] = json!(2);
    create(&mut s, web);
    tick(&mut s);
    s.fail_next_revision(
        ids::DEPLOYMENTS,
        "shop",
        "web",
        Failure {
            reason: "CrashLoopBackOff".into(),
            message: "secret db has no key password".into(),
        },
    );
    set_image(&mut s, "Deployment", "web", "app:2");
    let failing_rs = revision_name(
        ids::DEPLOYMENTS,
        s.get(ids::DEPLOYMENTS, "shop", "web").unwrap(),
    );
    for _ in 0..5 {
        tick(&mut s);
    }
    let progressing = &status(&s, "Deployment", "web")["conditions"][1];
    assert_eq!(progressing["status"], "True", "not yet past the deadline");
    for _ in 0..3 {
        tick(&mut s);
    }
    // Old pods stay; the new one crash-loops and the new ReplicaSet has nothing ready.
    assert_eq!(images(&s, true), ["app:1", "app:1"]);
    let broken: Vec<Value> = pods(&s)
        .into_iter()
        .filter(|p| !pods::is_ready(p))
        .collect();
    assert_eq!(broken.len(), 1);
    let container = &broken[0]["status"]["containerStatuses"][0];
    assert_eq!(container["state"]["waiting"]["reason"], "CrashLoopBackOff");
    assert_eq!(
        container["state"]["waiting"]["message"],
        "secret db has no key password"
    );
    let rs = s.get(ids::REPLICASETS, "shop", &failing_rs).unwrap();
    assert_eq!(rs["status"]["readyReplicas"], 0);
    let progressing = &status(&s, "Deployment", "web")["conditions"][1];
    assert_eq!(progressing["status"], "False");
    assert_eq!(progressing["reason"], "ProgressDeadlineExceeded");
    assert_eq!(
        progressing["message"],
        format!("ReplicaSet \"{failing_rs}\" has timed out progressing.")
    );
    // A later template change without the fault rolls out and replaces the failing pod.
    set_image(&mut s, "Deployment", "web", "app:3");
    for _ in 0..6 {
        tick(&mut s);
    }
    assert_eq!(images(&s, true), ["app:3", "app:3"]);
    assert!(images(&s, false).is_empty());
    assert_eq!(
        status(&s, "Deployment", "web")["conditions"][1]["reason"],
        "NewReplicaSetAvailable"
    );
}

#[test]
fn a_paused_deployment_waits_for_the_resume() {
    let mut s = store();
    create(
        &mut s,
        workload("Deployment", "web", 2, json!({"type": "RollingUpdate"})),
    );
    tick(&mut s);
    let mut web = (**s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()).clone();
    web["spec"]["paused"] = json!(true);
    web["spec"]["template"]["spec"]["containers"][0]["image"] = json!("app:2");
    assert!(
        s.update(ids::DEPLOYMENTS, "shop", "web", web, UpdateMode::Put)
            .is_ok()
    );
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:1", "app:1"]);
    let paused = status(&s, "Deployment", "web");
    assert_eq!(paused["conditions"][1]["reason"], "DeploymentPaused");
    assert_eq!(paused["conditions"][1]["status"], "Unknown");
    assert_eq!(paused["updatedReplicas"], 0);
    let mut web = (**s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()).clone();
    web["spec"]["paused"] = json!(false);
    assert!(
        s.update(ids::DEPLOYMENTS, "shop", "web", web, UpdateMode::Put)
            .is_ok()
    );
    for _ in 0..4 {
        tick(&mut s);
    }
    assert_eq!(images(&s, true), ["app:2", "app:2"]);
}

#[test]
fn a_stateful_set_replaces_ordinals_from_the_highest_down_to_the_partition() {
    let mut s = store();
    create(
        &mut s,
        workload(
            "StatefulSet",
            "db",
            3,
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}),
        ),
    );
    // OrderedReady: one ordinal at a time.
    assert_eq!(pods(&s).len(), 1);
    tick(&mut s);
    tick(&mut s);
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:1", "app:1", "app:1"]);
    set_image(&mut s, "StatefulSet", "db", "app:2");
    let image_of = |s: &Cluster, ordinal: usize| {
        s.get(ids::PODS, "shop", &format!("db-{ordinal}"))
            .map(|p| p["spec"]["containers"][0]["image"].clone())
    };
    // db-2 first.
    assert_eq!(image_of(&s, 2), Some(json!("app:2")));
    assert_eq!(image_of(&s, 1), Some(json!("app:1")));
    tick(&mut s);
    assert_eq!(image_of(&s, 1), Some(json!("app:2")));
    tick(&mut s);
    tick(&mut s);
    // The partition keeps db-0 at the old revision.
    assert_eq!(image_of(&s, 0), Some(json!("app:1")));
    let st = status(&s, "StatefulSet", "db");
    assert_eq!(st["updatedReplicas"], 2);
    assert_eq!(st["currentReplicas"], 1);
    assert_ne!(st["currentRevision"], st["updateRevision"]);
    assert_eq!(
        s.get(ids::PODS, "shop", "db-2").unwrap()["metadata"]["labels"]["controller-revision-hash"],
        st["updateRevision"]
    );
    // A deleted ordinal below the partition comes back at the old revision.
    assert!(
        s.delete(ids::PODS, "shop", "db-0", &Default::default())
            .is_ok()
    );
    assert_eq!(image_of(&s, 0), Some(json!("app:1")));
}

#[test]
fn on_delete_replaces_only_deleted_pods() {
    let mut s = store();
    create(
        &mut s,
        workload("StatefulSet", "db", 2, json!({"type": "OnDelete"})),
    );
    tick(&mut s);
    tick(&mut s);
    set_image(&mut s, "StatefulSet", "db", "app:2");
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:1", "app:1"]);
    assert!(
        s.delete(ids::PODS, "shop", "db-1", &Default::default())
            .is_ok()
    );
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:1", "app:2"]);
    assert_eq!(status(&s, "StatefulSet", "db")["updatedReplicas"], 1);
}

#[test]
fn a_daemon_set_runs_one_pod_per_node_and_replaces_them_within_max_unavailable() {
    let mut s = store();
    create(
        &mut s,
        workload("DaemonSet", "agent", 0, json!({"type": "RollingUpdate"})),
    );
    let nodes: Vec<Value> = pods(&s)
        .iter()
        .map(|p| p["spec"]["nodeName"].clone())
        .collect();
    assert_eq!(nodes.len(), NODES.len());
    tick(&mut s);
    assert_eq!(status(&s, "DaemonSet", "agent")["numberReady"], 3);
    set_image(&mut s, "DaemonSet", "agent", "app:2");
    // maxUnavailable 1: one node at a time.
    assert_eq!(images(&s, true), ["app:1", "app:1"]);
    assert_eq!(images(&s, false), ["app:2"]);
    let st = status(&s, "DaemonSet", "agent");
    assert_eq!(st["numberUnavailable"], 1);
    assert_eq!(st["updatedNumberScheduled"], 1);
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:1", "app:2"]);
    tick(&mut s);
    tick(&mut s);
    assert_eq!(images(&s, true), ["app:2", "app:2", "app:2"]);
    assert_eq!(
        status(&s, "DaemonSet", "agent")["updatedNumberScheduled"],
        3
    );
}

#[test]
fn with_no_delay_status_is_final_in_the_write_and_pods_follow() {
    let mut s = Cluster::new();
    assert!(s.ensure_namespace("shop").is_ok());
    create(
        &mut s,
        workload("Deployment", "web", 2, json!({"type": "RollingUpdate"})),
    );
    let rv = s.current_rv();
    assert_eq!(images(&s, true), ["app:1", "app:1"]);
    set_image(&mut s, "Deployment", "web", "app:2");
    assert_eq!(images(&s, true), ["app:2", "app:2"]);
    assert!(!s.rollouts_in_progress());
    assert!(s.current_rv() > rv);
    // Deleting the Deployment collects its ReplicaSets and their pods.
    assert!(
        s.delete(ids::DEPLOYMENTS, "shop", "web", &Default::default())
            .is_ok()
    );
    assert!(pods(&s).is_empty());
}

#[test]
fn every_status_step_is_a_watch_event_without_a_generation_bump() {
    let mut s = store();
    let since = s.current_rv();
    create(
        &mut s,
        workload("Deployment", "web", 2, json!({"type": "RollingUpdate"})),
    );
    tick(&mut s);
    let (_, replay) = s.watch_from(since);
    let events: Vec<(EventType_, i64, i64)> = replay
        .unwrap_or_default()
        .iter()
        .filter(|e| e.res == ids::DEPLOYMENTS)
        .map(|e| {
            (
                e.kind,
                e.object["metadata"]["generation"].as_i64().unwrap_or(0),
                e.object["status"]["readyReplicas"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    use crate::store::EventType::{Added, Modified};
    assert_eq!(events, [(Added, 1, -1), (Modified, 1, 0), (Modified, 1, 2)]);
}

type EventType_ = crate::store::EventType;
