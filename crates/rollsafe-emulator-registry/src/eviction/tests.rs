//! Evictions against a store whose Deployments have simulated pods, under a driven clock.

use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::cluster::Cluster;
use crate::store::EventType;

fn store(pod_ready_millis: u64) -> Cluster {
    Cluster::on_manual_clock(pod_ready_millis)
}

fn deployment(s: &mut Cluster, name: &str, replicas: i64) {
    let web = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"replicas": replicas,
                 "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    });
    assert!(s.create(ids::DEPLOYMENTS, web).is_ok());
}

fn budget(s: &mut Cluster, name: &str, app: &str, spec: Value) {
    let mut spec = spec;
    spec["selector"] = json!({"matchLabels": {"app": app}});
    let budget = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "shop"}, "spec": spec});
    assert!(s.create(ids::PODDISRUPTIONBUDGETS, budget).is_ok());
}

/// The pods of `shop`: (name, Ready).
fn pods(s: &Cluster) -> Vec<(String, bool)> {
    s.range(ids::PODS, Some("shop"), None)
        .map(|((_, _, name), pod)| (name.clone(), pods::is_ready(pod)))
        .collect()
}

fn first_pod(s: &Cluster) -> String {
    pods(s).first().map(|(n, _)| n.clone()).unwrap_or_default()
}

fn evict_now(s: &mut Cluster, name: &str) -> Result<(), EvictionError> {
    s.evict("shop", name, &Eviction::default())
}

#[test]
fn a_pod_no_budget_selects_is_evicted_and_its_controller_replaces_it() {
    let mut s = store(0);
    deployment(&mut s, "web", 2);
    let before = pods(&s);
    let victim = first_pod(&s);
    assert_eq!(evict_now(&mut s, &victim), Ok(()));
    let after = pods(&s);
    assert_eq!(after.len(), 2);
    assert!(after.iter().all(|(name, ready)| *name != victim && *ready));
    assert_ne!(after, before);
}

#[test]
fn a_budget_of_two_over_three_allows_one_eviction_then_refuses_until_the_replacement_is_ready() {
    let mut s = store(500);
    deployment(&mut s, "web", 3);
    s.advance_clock(Duration::from_millis(500));
    budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    let [first, second, _] =
        <[String; 3]>::try_from(pods(&s).into_iter().map(|(n, _)| n).collect::<Vec<_>>()).unwrap();
    assert_eq!(evict_now(&mut s, &first), Ok(()));
    // The budget's status shows the eviction at once.
    let status = s
        .get(ids::PODDISRUPTIONBUDGETS, "shop", "web")
        .map(|b| b["status"].clone())
        .unwrap_or_default();
    assert_eq!(status["currentHealthy"], 2);
    assert_eq!(status["disruptionsAllowed"], 0);
    let refused = evict_now(&mut s, &second);
    assert_eq!(
        refused,
        Err(EvictionError::Budget {
            budget: "web".into(),
            desired: 2,
            current: 2
        })
    );
    let answer = refused.err().map(|e| e.status()).unwrap();
    assert_eq!(answer.code, 429);
    assert_eq!(
        answer.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Cannot evict pod as it would violate the pod's disruption budget.",
            "reason": "TooManyRequests",
            "details": {"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget web needs 2 healthy pods and has 2 currently"}]},
            "code": 429})
    );
    assert_eq!(answer.retry_after, None);
    assert!(pods(&s).iter().any(|(n, _)| *n == second), "not evicted");
    s.advance_clock(Duration::from_millis(500));
    assert_eq!(evict_now(&mut s, &second), Ok(()));
}

#[test]
fn a_pod_that_is_not_running_needs_no_budget() {
    let mut s = store(500);
    deployment(&mut s, "web", 2);
    budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    // Both pods still Pending: the budget allows nothing, and is not asked.
    let victim = first_pod(&s);
    assert_eq!(evict_now(&mut s, &victim), Ok(()));
    assert!(pods(&s).iter().all(|(n, _)| *n != victim));
}

#[test]
fn an_unready_running_pod_spends_nothing_from_a_healthy_budget() {
    let mut s = store(0);
    deployment(&mut s, "web", 3);
    budget(&mut s, "web", "web", json!({"minAvailable": 1}));
    let victim = first_pod(&s);
    let mut pod = (**s.get(ids::PODS, "shop", &victim).unwrap()).clone();
    for condition in pod["status"]["conditions"].as_array_mut().unwrap() {
        if condition["type"] == "Ready" {
            condition["status"] = json!("False");
        }
    }
    assert!(
        s.update(ids::PODS, "shop", &victim, pod, UpdateMode::Status)
            .is_ok()
    );
    assert_eq!(evict_now(&mut s, &victim), Ok(()));
}

#[test]
fn two_budgets_selecting_a_pod_are_the_real_500() {
    let mut s = store(0);
    deployment(&mut s, "web", 3);
    budget(&mut s, "web", "web", json!({"minAvailable": 1}));
    budget(&mut s, "other", "web", json!({"maxUnavailable": 1}));
    let victim = first_pod(&s);
    let refused = evict_now(&mut s, &victim);
    assert_eq!(refused, Err(EvictionError::MultipleBudgets));
    let answer = refused.err().map(|e| e.status()).unwrap();
    assert_eq!(answer.code, 500);
    assert_eq!(
        answer.body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            "code": 500})
    );
}

#[test]
fn a_missing_pod_and_a_failed_precondition_are_the_stores_answers() {
    let mut s = store(0);
    deployment(&mut s, "web", 1);
    let missing = evict_now(&mut s, "nope").err().map(|e| e.status()).unwrap();
    assert_eq!(missing.code, 404);
    assert_eq!(missing.body["message"], "pods \"nope\" not found");
    let victim = first_pod(&s);
    let stale = Eviction {
        preconditions: Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        },
        ..Eviction::default()
    };
    let conflict = s.evict("shop", &victim, &stale).err().unwrap();
    assert_eq!(conflict.code(), "refused_by_store");
    assert_eq!(conflict.status().code, 409);
    assert!(pods(&s).iter().any(|(n, _)| *n == victim));
}

#[test]
fn a_dry_run_checks_and_keeps_everything() {
    let mut s = store(0);
    deployment(&mut s, "web", 3);
    budget(&mut s, "web", "web", json!({"minAvailable": 2}));
    s.sync_budgets(
        &mut crate::controllers::disruption::Controller::default(),
        Some(&std::collections::BTreeSet::from(["shop".to_owned()])),
    );
    let before = pods(&s);
    let rv = s.current_rv();
    let dry = Eviction {
        write: Write::DryRun,
        ..Eviction::default()
    };
    let victim = first_pod(&s);
    assert_eq!(s.evict("shop", &victim, &dry), Ok(()));
    assert_eq!(pods(&s), before);
    assert_eq!(s.current_rv(), rv);
}

#[test]
fn the_evicted_pod_is_marked_a_disruption_target_before_it_goes() {
    let mut s = store(0);
    deployment(&mut s, "web", 1);
    let victim = first_pod(&s);
    let mut events = s.subscribe();
    assert_eq!(evict_now(&mut s, &victim), Ok(()));
    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.res == ids::PODS && meta_str(&event.object, "name") == Some(victim.as_str()) {
            let target = event.object["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == "DisruptionTarget"))
                .map(|c| (c["reason"].clone(), c["message"].clone()));
            seen.push((event.kind, target));
        }
    }
    let target = Some((
        json!("EvictionByEvictionAPI"),
        json!("Eviction API: evicting"),
    ));
    assert_eq!(
        seen,
        [
            (EventType::Modified, target.clone()),
            (EventType::Deleted, target)
        ]
    );
}

#[test]
fn a_budget_its_controller_cannot_sync_is_still_being_processed() {
    let mut s = store(0);
    let agent = json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "shop"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}},
                              "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}
    });
    assert!(s.create(ids::DAEMONSETS, agent).is_ok());
    budget(&mut s, "agent", "agent", json!({"maxUnavailable": 1}));
    let victim = first_pod(&s);
    let refused = evict_now(&mut s, &victim).err().unwrap();
    assert_eq!(refused.code(), "budget_processing");
    let answer = refused.status();
    assert_eq!(answer.code, 429);
    assert_eq!(answer.retry_after, Some(10));
    assert_eq!(
        answer.body["details"]["causes"][0]["message"],
        "The disruption budget agent is still being processed by the server."
    );
}
