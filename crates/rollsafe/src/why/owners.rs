//! Who owns the workload `why` explains, and how it is restarted when a template patch is not
//! simply the way: the consumers preview's words ([`RestartBy`]), read from the workload's own
//! metadata (its controlling owner and its `rollsafe.dev/strategy`) — nothing more is read.

use rollsafe_core::preview::RestartBy;
use rollsafe_core::strategy::{Owner, operator_owner, strategy_of};
use rollsafe_core::workload::WatchedKind;
use serde_json::Value;

/// The operator's resource that controls `object` (if one does), and how it is restarted.
/// Eviction is the three `apps/v1` kinds' only: a CronJob's or a Rollout's strategy is not
/// read.
pub(super) fn of(kind: WatchedKind, object: &Value) -> (Option<Owner>, Option<RestartBy>) {
    let owner = operator_owner(object).map(|owner| Owner {
        uid: String::new(),
        ..owner
    });
    let restart_by = kind.workload().and_then(|workload| {
        RestartBy::of(
            workload.as_str(),
            owner.as_ref(),
            strategy_of(object).transpose(),
            None,
        )
    });
    (owner, restart_by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::preview::owned_by;
    use rollsafe_core::strategy::Strategy;
    use serde_json::json;

    #[test]
    fn an_operators_workload_is_named_and_said_how_it_restarts() {
        let object = json!({"metadata": {
            "annotations": {"rollsafe.dev/strategy": "evict"},
            "ownerReferences": [{"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka",
                "name": "my-cluster", "uid": "u", "controller": true}]}});
        let (owner, by) = of(WatchedKind::StatefulSet, &object);
        let owner = owner.unwrap();
        assert_eq!(
            owned_by("StatefulSet", "kafka-0", &owner),
            "StatefulSet/kafka-0 is owned by Kafka/my-cluster"
        );
        assert!(owner.uid.is_empty());
        assert_eq!(by.and_then(|b| b.strategy), Some(Strategy::Evict));
        // A CronJob is owned, but eviction is not its way.
        let (owner, by) = of(WatchedKind::CronJob, &object);
        assert!(owner.is_some());
        assert_eq!(by, None);
        // Kubernetes' own controllers do not make a workload operator-owned.
        let plain = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "x", "uid": "u", "controller": true}]}});
        assert_eq!(of(WatchedKind::Deployment, &plain), (None, None));
    }
}
