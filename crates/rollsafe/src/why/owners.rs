//! Who owns the workload `why` explains, and how it is restarted when a template patch is not
//! simply the way: the consumers preview's words ([`RestartBy`]), read from the workload's own
//! metadata (its controlling owner and its `rollsafe.dev/strategy`) and, when it says nothing,
//! the controller's `--strategy` from the settings `why` already holds — nothing more is read.

use rollsafe_core::preview::RestartBy;
use rollsafe_core::strategy::{Owner, StrategyDefaults, operator_owner, strategy_of};
use rollsafe_core::workload::WatchedKind;
use serde_json::Value;

/// The operator's resource that controls `object` (if one does), and how it is restarted:
/// its own `rollsafe.dev/strategy`, else the controller's `--strategy` for `namespace`
/// (`controller`: from its published settings or the flags; `None` when they are unknown).
/// Eviction is the three `apps/v1` kinds' only: a CronJob's or a Rollout's strategy is not
/// read.
pub(super) fn of(
    kind: WatchedKind,
    object: &Value,
    namespace: &str,
    controller: Option<&StrategyDefaults>,
) -> (Option<Owner>, Option<RestartBy>) {
    let owner = operator_owner(object).map(|owner| Owner {
        uid: String::new(),
        ..owner
    });
    let restart_by = kind.workload().and_then(|workload| {
        let kind = workload.as_str();
        let by = RestartBy::of(kind, owner.as_ref(), strategy_of(object).transpose(), None);
        RestartBy::under_controller(by, kind, namespace, object, controller)
    });
    (owner, restart_by)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::preview::{StrategyFrom, owned_by};
    use rollsafe_core::strategy::Strategy;
    use serde_json::json;

    #[test]
    fn an_operators_workload_is_named_and_said_how_it_restarts() {
        let object = json!({"metadata": {
            "annotations": {"rollsafe.dev/strategy": "evict"},
            "ownerReferences": [{"apiVersion": "kafka.strimzi.io/v1beta2", "kind": "Kafka",
                "name": "my-cluster", "uid": "u", "controller": true}]}});
        let (owner, by) = of(WatchedKind::StatefulSet, &object, "shop", None);
        let owner = owner.unwrap();
        assert_eq!(
            owned_by("StatefulSet", "kafka-0", &owner),
            "StatefulSet/kafka-0 is owned by Kafka/my-cluster"
        );
        assert!(owner.uid.is_empty());
        assert_eq!(by.and_then(|b| b.strategy), Some(Strategy::Evict));
        // A CronJob is owned, but eviction is not its way.
        let (owner, by) = of(WatchedKind::CronJob, &object, "shop", None);
        assert!(owner.is_some());
        assert_eq!(by, None);
        // Kubernetes' own controllers do not make a workload operator-owned.
        let plain = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "x", "uid": "u", "controller": true}]}});
        assert_eq!(
            of(WatchedKind::Deployment, &plain, "shop", None),
            (None, None)
        );
    }

    #[test]
    fn the_controllers_strategy_decides_for_a_workload_that_says_nothing() {
        let defaults: StrategyDefaults = "patch,payments=evict".parse().unwrap();
        let plain = json!({"metadata": {}});
        let (_, by) = of(WatchedKind::Deployment, &plain, "payments", Some(&defaults));
        let by = by.unwrap();
        assert_eq!(
            (by.strategy, by.from),
            (Some(Strategy::Evict), StrategyFrom::Controller)
        );
        assert_eq!(
            by.reason,
            "restarted by eviction (rollsafe watch --strategy: evict in namespace payments; the Deployment says nothing): rollsafe watch evicts its pods one at a time, PodDisruptionBudgets holding, and does not write its template"
        );
        // Patch elsewhere: nothing to say for a template nobody else owns.
        assert_eq!(
            of(WatchedKind::Deployment, &plain, "shop", Some(&defaults)).1,
            None
        );
        // The workload's own choice wins; a CronJob is restarted by its template.
        let own = json!({"metadata": {"annotations": {"rollsafe.dev/strategy": "patch"}}});
        assert_eq!(
            of(WatchedKind::Deployment, &own, "payments", Some(&defaults)).1,
            None
        );
        assert_eq!(
            of(WatchedKind::CronJob, &plain, "payments", Some(&defaults)).1,
            None
        );
    }
}
