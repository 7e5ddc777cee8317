//! The disruption controller's counts and status, against a store whose workloads have
//! simulated pods.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::cluster::Cluster;
use crate::controllers::rollout_sim::RolloutPace;

fn store(pod_ready_millis: u64) -> Cluster {
    Cluster::on_manual_clock(pod_ready_millis)
}

/// One pass of the disruption controller over the namespace `shop`.
fn sync(s: &mut Cluster) {
    let shop = BTreeSet::from(["shop".to_owned()]);
    s.sync_budgets(&mut Controller::default(), Some(&shop));
}

fn workload(kind: &str, name: &str, replicas: i64) -> Value {
    let mut obj = json!({
        "apiVersion": "apps/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    });
    if kind == "DaemonSet"
        && let Some(spec) = obj["spec"].as_object_mut()
    {
        spec.remove("replicas");
    }
    obj
}

fn create_workload(s: &mut Cluster, kind: &str, name: &str, replicas: i64) {
    let res = match kind {
        "Deployment" => ids::DEPLOYMENTS,
        "StatefulSet" => ids::STATEFULSETS,
        _ => ids::DAEMONSETS,
    };
    assert!(s.create(res, workload(kind, name, replicas)).is_ok());
}

fn create_budget(s: &mut Cluster, name: &str, app: &str, spec: Value) {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    let budget = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "shop"}, "spec": spec});
    assert!(s.create(ids::PODDISRUPTIONBUDGETS, budget).is_ok());
}

fn budget(s: &Cluster, name: &str) -> Value {
    s.get(ids::PODDISRUPTIONBUDGETS, "shop", name)
        .map(|b| (**b).clone())
        .unwrap_or_default()
}

/// (expectedPods, desiredHealthy, currentHealthy, disruptionsAllowed) as stored.
fn numbers(s: &Cluster, name: &str) -> (i64, i64, i64, i64) {
    let status = &budget(s, name)["status"];
    let n = |f: &str| status[f].as_i64().unwrap_or(-1);
    (
        n("expectedPods"),
        n("desiredHealthy"),
        n("currentHealthy"),
        n("disruptionsAllowed"),
    )
}

fn condition(s: &Cluster, name: &str) -> Value {
    budget(s, name)["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == DISRUPTION_ALLOWED))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn a_new_budget_starts_at_zero_and_the_sync_counts_its_pods() {
    let mut s = store(0);
    create_workload(&mut s, "Deployment", "web", 3);
    create_budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    assert_eq!(numbers(&s, "web"), (0, 0, 0, 0));
    sync(&mut s);
    assert_eq!(numbers(&s, "web"), (3, 2, 3, 1));
    assert_eq!(budget(&s, "web")["status"]["observedGeneration"], 1);
    let allowed = condition(&s, "web");
    assert_eq!(allowed["status"], "True");
    assert_eq!(allowed["reason"], "SufficientPods");
    assert_eq!(allowed["message"], "");
    assert_eq!(allowed["observedGeneration"], 1);
}

#[test]
fn percentages_and_max_unavailable_are_taken_of_the_controllers_scale_rounded_up() {
    for (spec, want) in [
        (json!({"minAvailable": 3}), (3, 3, 3, 0)),
        (json!({"minAvailable": "50%"}), (3, 2, 3, 1)),
        (json!({"minAvailable": "100%"}), (3, 3, 3, 0)),
        (json!({"maxUnavailable": 1}), (3, 2, 3, 1)),
        (json!({"maxUnavailable": "34%"}), (3, 1, 3, 2)),
        (json!({"maxUnavailable": "100%"}), (3, 0, 3, 3)),
        (json!({}), (0, 0, 3, 0)),
    ] {
        for kind in ["Deployment", "StatefulSet"] {
            let mut s = store(0);
            create_workload(&mut s, kind, "web", 3);
            create_budget(&mut s, "web", "web", spec.clone());
            sync(&mut s);
            assert_eq!(numbers(&s, "web"), want, "{kind} {spec}");
        }
    }
}

#[test]
fn the_scale_is_the_controllers_not_the_pods_there_are() {
    let mut s = store(0);
    create_workload(&mut s, "Deployment", "web", 3);
    create_budget(&mut s, "web", "web", json!({"maxUnavailable": 1}));
    let mut web = (**s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()).clone();
    web["spec"]["replicas"] = json!(5);
    s.set_rollout_settings(RolloutPace {
        pod_ready_millis: 1_000,
        progress_deadline_scale: 1.0,
    });
    assert!(
        s.update(ids::DEPLOYMENTS, "shop", "web", web, UpdateMode::Put)
            .is_ok()
    );
    sync(&mut s);
    // Five expected, two of them still starting.
    assert_eq!(numbers(&s, "web"), (5, 4, 3, 0));
    s.advance_clock(Duration::from_millis(1_000));
    sync(&mut s);
    assert_eq!(numbers(&s, "web"), (5, 4, 5, 1));
}

#[test]
fn pods_that_are_not_ready_are_not_healthy() {
    let mut s = store(300);
    create_workload(&mut s, "Deployment", "web", 3);
    create_budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    sync(&mut s);
    assert_eq!(numbers(&s, "web"), (3, 2, 0, 0));
    assert_eq!(condition(&s, "web")["reason"], "InsufficientPods");
    s.advance_clock(Duration::from_millis(300));
    sync(&mut s);
    assert_eq!(numbers(&s, "web"), (3, 2, 3, 1));
}

#[test]
fn a_controller_without_a_scale_fails_safe_and_an_integer_budget_does_not_need_one() {
    let mut s = store(0);
    create_workload(&mut s, "DaemonSet", "agent", 0);
    create_budget(&mut s, "scaled", "agent", json!({"maxUnavailable": 1}));
    create_budget(&mut s, "counted", "agent", json!({"minAvailable": 2}));
    sync(&mut s);
    let failed = budget(&s, "scaled")["status"].clone();
    assert_eq!(failed["disruptionsAllowed"], 0);
    assert_eq!(failed.get("observedGeneration"), None, "{failed}");
    let condition = condition(&s, "scaled");
    assert_eq!(condition["status"], "False");
    assert_eq!(condition["reason"], "SyncFailed");
    assert_eq!(
        condition["message"],
        "daemonsets.apps does not implement the scale subresource"
    );
    assert_eq!(numbers(&s, "counted"), (3, 2, 3, 1));
}

#[test]
fn nothing_is_written_when_nothing_changed_and_a_held_condition_keeps_its_time() {
    let mut s = store(0);
    create_workload(&mut s, "Deployment", "web", 3);
    create_budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    sync(&mut s);
    // A time the sync could not have written: kept while the condition holds.
    let mut stored = budget(&s, "web");
    stored["status"]["conditions"][0]["lastTransitionTime"] = json!("2020-01-01T00:00:00Z");
    assert!(
        s.update(
            ids::PODDISRUPTIONBUDGETS,
            "shop",
            "web",
            stored,
            UpdateMode::Status
        )
        .is_ok()
    );
    let rv = s.current_rv();
    sync(&mut s);
    assert_eq!(s.current_rv(), rv, "an unchanged budget is not written");
    let mut web = budget(&s, "web");
    web["spec"]["minAvailable"] = json!(1);
    assert!(
        s.update(
            ids::PODDISRUPTIONBUDGETS,
            "shop",
            "web",
            web,
            UpdateMode::Put
        )
        .is_ok()
    );
    sync(&mut s);
    assert_eq!(numbers(&s, "web"), (3, 1, 3, 2));
    assert_eq!(budget(&s, "web")["status"]["observedGeneration"], 2);
    assert_eq!(
        condition(&s, "web")["lastTransitionTime"],
        "2020-01-01T00:00:00Z"
    );
    assert_eq!(condition(&s, "web")["observedGeneration"], 2);
}

#[test]
fn scaled_values_round_up_and_refuse_what_is_not_a_percentage() {
    assert_eq!(scaled(&json!(2), 3), Ok(2));
    assert_eq!(scaled(&json!("50%"), 3), Ok(2));
    assert_eq!(scaled(&json!("34%"), 3), Ok(2));
    assert_eq!(scaled(&json!("0%"), 3), Ok(0));
    assert_eq!(scaled(&json!("2"), 3), Err(SyncError::NotAPercentage));
    assert_eq!(
        scaled(&json!("x%"), 3),
        Err(SyncError::BadPercentage("x%".into(), "x".into()))
    );
    assert_eq!(
        SyncError::BadPercentage("x%".into(), "x".into()).to_string(),
        "invalid value \"x%\": strconv.Atoi: parsing \"x\": invalid syntax"
    );
}

#[test]
fn the_controller_wants_the_changes_that_can_move_a_budget_where_budgets_are() {
    let mut s = store(0);
    let mut events = s.subscribe();
    let mut controller = Controller::default();
    let mut wanted = |controller: &Controller| {
        let mut out = Vec::new();
        while let Ok(event) = events.try_recv() {
            if let Some(ns) = controller.wants(&event) {
                out.push((event.res, ns));
            }
        }
        out
    };
    create_workload(&mut s, "Deployment", "web", 2);
    assert_eq!(wanted(&controller), [], "no budget in shop yet");
    create_budget(&mut s, "web", "web", json!({"minAvailable": 1}));
    assert_eq!(
        wanted(&controller),
        [(ids::PODDISRUPTIONBUDGETS, "shop".to_owned())]
    );
    s.sync_budgets(&mut controller, None);
    assert_eq!(numbers(&s, "web"), (2, 1, 2, 1));
    assert_eq!(
        wanted(&controller),
        [],
        "its own status write moves nothing"
    );
    let pod = s
        .range(ids::PODS, Some("shop"), None)
        .map(|(k, _)| k.2.clone())
        .next()
        .unwrap_or_default();
    assert!(
        s.delete(
            ids::PODS,
            "shop",
            &pod,
            &crate::store::Preconditions::default()
        )
        .is_ok()
    );
    let after_delete = wanted(&controller);
    assert!(
        after_delete.contains(&(ids::PODS, "shop".to_owned())),
        "{after_delete:?}"
    );
    // A Deployment's status write is not a scale change.
    let web = (**s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()).clone();
    let mut restatused = web;
    restatused["status"]["observedGeneration"] = json!(7);
    assert!(
        s.update(
            ids::DEPLOYMENTS,
            "shop",
            "web",
            restatused,
            UpdateMode::Status
        )
        .is_ok()
    );
    assert_eq!(wanted(&controller), []);
    let mut scaled_up = (**s.get(ids::DEPLOYMENTS, "shop", "web").unwrap()).clone();
    scaled_up["spec"]["replicas"] = json!(3);
    assert!(
        s.update(ids::DEPLOYMENTS, "shop", "web", scaled_up, UpdateMode::Put)
            .is_ok()
    );
    assert!(wanted(&controller).contains(&(ids::DEPLOYMENTS, "shop".to_owned())));
}
