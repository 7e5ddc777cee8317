//! The classification table: one row per state and kind, in the order kubectl's viewers check.

use serde_json::{Value, json};

use super::*;
use crate::workload::WorkloadKind;

fn deployment(spec: Value, status: Value) -> Value {
    json!({"metadata": {"generation": 3}, "spec": spec, "status": status})
}

fn sts(spec: Value, status: Value) -> Value {
    json!({"metadata": {"generation": 2}, "spec": spec, "status": status})
}

fn ds(spec: Value, status: Value) -> Value {
    json!({"metadata": {"generation": 2}, "spec": spec, "status": status})
}

const ROLLING: &str = "RollingUpdate";

#[test]
fn classification_table() {
    use RolloutState::*;
    use WorkloadKind::*;
    let rolling =
        |partition: i64| json!({"type": ROLLING, "rollingUpdate": {"partition": partition}});
    let cases: Vec<(&str, WorkloadKind, Value, RolloutState, Option<Deferral>)> = vec![
        // Deployments (kubectl: DeploymentStatusViewer).
        (
            "not observed",
            Deployment,
            deployment(
                json!({"replicas": 2}),
                json!({"observedGeneration": 2, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
            ),
            Pending,
            None,
        ),
        (
            "new replicas not all updated",
            Deployment,
            deployment(
                json!({"replicas": 3}),
                json!({"observedGeneration": 3, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3}),
            ),
            Progressing,
            None,
        ),
        (
            "old replicas pending termination",
            Deployment,
            deployment(
                json!({"replicas": 3}),
                json!({"observedGeneration": 3, "replicas": 4, "updatedReplicas": 3, "availableReplicas": 3}),
            ),
            Progressing,
            None,
        ),
        (
            "updated but not available",
            Deployment,
            deployment(
                json!({"replicas": 3}),
                json!({"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "availableReplicas": 2}),
            ),
            Progressing,
            None,
        ),
        (
            "rolled out",
            Deployment,
            deployment(
                json!({"replicas": 3}),
                json!({"observedGeneration": 3, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}),
            ),
            Complete,
            None,
        ),
        (
            "scaled to zero",
            Deployment,
            deployment(json!({"replicas": 0}), json!({"observedGeneration": 3})),
            Complete,
            None,
        ),
        (
            "past its progress deadline",
            Deployment,
            deployment(
                json!({"replicas": 3}),
                json!({"observedGeneration": 3, "replicas": 4, "updatedReplicas": 1, "availableReplicas": 3,
                "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"a-1\" has timed out progressing."}]}),
            ),
            Stalled,
            None,
        ),
        (
            "paused with the change waiting",
            Deployment,
            deployment(
                json!({"replicas": 2, "paused": true}),
                json!({"observedGeneration": 3, "replicas": 2, "updatedReplicas": 0, "availableReplicas": 2}),
            ),
            Deferred,
            Some(Deferral::Paused),
        ),
        (
            "paused after it rolled out",
            Deployment,
            deployment(
                json!({"replicas": 2, "paused": true}),
                json!({"observedGeneration": 3, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
            ),
            Complete,
            None,
        ),
        // StatefulSets (kubectl: StatefulSetStatusViewer).
        (
            "never observed",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(0)}),
                json!({}),
            ),
            Pending,
            None,
        ),
        (
            "pods not ready",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(0)}),
                json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Progressing,
            None,
        ),
        (
            "partition 0, not all updated",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(0)}),
                json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 2, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Progressing,
            None,
        ),
        (
            "partition 0, all updated",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(0)}),
                json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 3, "currentReplicas": 3, "currentRevision": "b", "updateRevision": "b"}),
            ),
            Complete,
            None,
        ),
        (
            "partition 1 of 3, the two above it updated",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(1)}),
                json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 2, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Complete,
            None,
        ),
        (
            "partition covering every replica",
            StatefulSet,
            sts(
                json!({"replicas": 3, "updateStrategy": rolling(3)}),
                json!({"observedGeneration": 2, "readyReplicas": 3, "updatedReplicas": 0, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Deferred,
            Some(Deferral::Partition),
        ),
        (
            "OnDelete with old pods",
            StatefulSet,
            sts(
                json!({"replicas": 2, "updateStrategy": {"type": "OnDelete"}}),
                json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 0, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Deferred,
            Some(Deferral::OnDelete),
        ),
        (
            "OnDelete with every pod replaced",
            StatefulSet,
            sts(
                json!({"replicas": 2, "updateStrategy": {"type": "OnDelete"}}),
                json!({"observedGeneration": 2, "readyReplicas": 2, "updatedReplicas": 2, "currentRevision": "b", "updateRevision": "b"}),
            ),
            Complete,
            None,
        ),
        (
            "no rollingUpdate block, revisions differ",
            StatefulSet,
            sts(
                json!({"replicas": 1, "updateStrategy": {"type": ROLLING}}),
                json!({"observedGeneration": 2, "readyReplicas": 1, "updatedReplicas": 1, "currentRevision": "a", "updateRevision": "b"}),
            ),
            Progressing,
            None,
        ),
        // DaemonSets (kubectl: DaemonSetStatusViewer).
        (
            "not observed",
            DaemonSet,
            ds(
                json!({"updateStrategy": {"type": ROLLING}}),
                json!({"observedGeneration": 1, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 3}),
            ),
            Pending,
            None,
        ),
        (
            "nodes not all updated",
            DaemonSet,
            ds(
                json!({"updateStrategy": {"type": ROLLING}}),
                json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 1, "numberAvailable": 2}),
            ),
            Progressing,
            None,
        ),
        (
            "updated, not all available",
            DaemonSet,
            ds(
                json!({"updateStrategy": {"type": ROLLING}}),
                json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberAvailable": 2}),
            ),
            Progressing,
            None,
        ),
        (
            "rolled out",
            DaemonSet,
            ds(
                json!({"updateStrategy": {"type": ROLLING}}),
                json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 3, "numberReady": 3, "numberAvailable": 3}),
            ),
            Complete,
            None,
        ),
        (
            "OnDelete with old pods",
            DaemonSet,
            ds(
                json!({"updateStrategy": {"type": "OnDelete"}}),
                json!({"observedGeneration": 2, "desiredNumberScheduled": 3, "updatedNumberScheduled": 0, "numberAvailable": 3}),
            ),
            Deferred,
            Some(Deferral::OnDelete),
        ),
    ];
    for (case, kind, object, state, deferral) in cases {
        let status = classify(kind, &object);
        assert_eq!(status.state, state, "{kind} {case}");
        assert_eq!(status.deferral, deferral, "{kind} {case}");
        assert_eq!(
            status.reason.is_some(),
            state == Stalled,
            "{kind} {case}: a reason exactly when stalled"
        );
    }
}

#[test]
fn final_and_successful_states() {
    let finals: Vec<RolloutState> = RolloutState::ALL
        .into_iter()
        .filter(|s| s.is_final())
        .collect();
    assert_eq!(
        finals,
        vec![
            RolloutState::Complete,
            RolloutState::Stalled,
            RolloutState::Deferred,
            RolloutState::Superseded,
            RolloutState::Gone
        ]
    );
    assert!(RolloutState::Deferred.is_success() && RolloutState::Complete.is_success());
    assert!(!RolloutState::Stalled.is_success() && !RolloutState::Gone.is_success());
}

#[test]
fn the_wire_shape_is_pinned() {
    let status = classify(
        WorkloadKind::Deployment,
        &deployment(
            json!({"replicas": 3}),
            json!({"observedGeneration": 3, "replicas": 4, "updatedReplicas": 1, "readyReplicas": 3, "availableReplicas": 3,
                "conditions": [{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet \"a-1\" has timed out progressing."}]}),
        ),
    );
    insta::assert_json_snapshot!("rollout_status_stalled", status);
    assert_eq!(
        status.describe(),
        "stalled: progress deadline exceeded — ReplicaSet \"a-1\" has timed out progressing. (1 updated, 3 ready of 3)"
    );
    let counts = StateCounts::of(&[
        RolloutState::Complete,
        RolloutState::Complete,
        RolloutState::Stalled,
    ]);
    assert_eq!(
        serde_json::to_value(&counts).unwrap(),
        json!({"complete": 2, "stalled": 1})
    );
}

#[test]
fn argo_rollouts_and_cron_jobs_are_classified_by_their_own_status() {
    use crate::workload::WatchedKind;
    let rollout = |phase: &str, updated: i64, available: i64, observed: Value| {
        json!({"metadata": {"generation": 4},
               "spec": {"replicas": 3},
               "status": {"observedGeneration": observed, "phase": phase, "replicas": 3,
                          "updatedReplicas": updated, "availableReplicas": available}})
    };
    let cases = [
        (rollout("Healthy", 3, 3, json!("4")), RolloutState::Complete),
        (rollout("Healthy", 3, 3, json!(4)), RolloutState::Complete),
        (
            rollout("Progressing", 3, 3, json!("4")),
            RolloutState::Progressing,
        ),
        (
            rollout("Paused", 1, 3, json!("4")),
            RolloutState::Progressing,
        ),
        (rollout("Healthy", 3, 3, json!("3")), RolloutState::Pending),
        (rollout("Degraded", 1, 2, json!("4")), RolloutState::Stalled),
    ];
    for (object, expected) in cases {
        assert_eq!(
            classify(WatchedKind::Rollout, &object).state,
            expected,
            "{object}"
        );
    }
    let degraded = classify(WatchedKind::Rollout, &rollout("Degraded", 1, 2, json!("4")));
    assert_eq!(
        degraded.reason.unwrap().describe(),
        "the Rollout is degraded (aborted or failed analysis)"
    );
    let mut paused = rollout("Paused", 1, 3, json!("4"));
    paused["spec"]["paused"] = json!(true);
    assert_eq!(
        classify(WatchedKind::Rollout, &paused).deferral,
        Some(Deferral::PausedRollout)
    );
    let cron = json!({"spec": {"schedule": "0 3 * * *"}, "status": {}});
    let status = classify(WatchedKind::CronJob, &cron);
    assert_eq!(status.state, RolloutState::Deferred);
    assert_eq!(status.deferral, Some(Deferral::NextRun));
}
