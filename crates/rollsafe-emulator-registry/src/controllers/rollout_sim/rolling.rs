//! The rolling-update arithmetic of the three controllers, without objects or time: how many
//! pods a step may add or take away (`pkg/controller/deployment/util` `ResolveFenceposts`,
//! `NewRSNewReplicas`, the rolling updater's `reconcileOldReplicaSets`; the StatefulSet
//! controller's update loop; the DaemonSet controller's `rollingUpdate`).

use serde_json::Value;

/// `intstr.GetScaledValueFromIntOrPercent`: an integer as it is, `"N%"` of `total` rounded up
/// or down; anything else (absent, malformed) is `default`.
pub fn scaled(value: Option<&Value>, total: i64, round_up: bool, default: i64) -> i64 {
    match value {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(default),
        Some(Value::String(s)) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return s.parse().unwrap_or(default);
            };
            let product = percent.saturating_mul(total);
            if round_up {
                (product + 99).div_euclid(100)
            } else {
                product.div_euclid(100)
            }
        }
        _ => default,
    }
}

/// A Deployment's `(maxSurge, maxUnavailable)` for `replicas` (`ResolveFenceposts`): surge
/// rounds up, unavailable down, and when both come to 0 one pod may be unavailable.
pub fn fenceposts(rolling_update: Option<&Value>, replicas: i64) -> (i64, i64) {
    let surge = scaled(
        rolling_update.and_then(|r| r.get("maxSurge")),
        replicas,
        true,
        0,
    )
    .max(0);
    let unavailable = scaled(
        rolling_update.and_then(|r| r.get("maxUnavailable")),
        replicas,
        false,
        0,
    )
    .max(0);
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// One ReplicaSet as the rolling updater counts it: wanted pods and available pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// `spec.replicas`.
    pub spec: i64,
    /// Available pods.
    pub available: i64,
}

/// One step of a Deployment's `RollingUpdate`: the new ReplicaSet's replicas and the old ones'
/// (oldest first), from what they want and have now. The new one grows up to
/// `replicas + maxSurge` pods in all; the old ones shrink, first by their unavailable pods,
/// then by what keeps `replicas - maxUnavailable` available.
pub fn rolling_step(
    replicas: i64,
    (surge, unavailable): (i64, i64),
    new: Counts,
    old: &[Counts],
) -> (i64, Vec<i64>) {
    let old_total: i64 = old.iter().map(|c| c.spec).sum();
    // reconcileNewReplicaSet / NewRSNewReplicas.
    let new_spec = if new.spec >= replicas {
        replicas
    } else {
        let max_total = replicas + surge;
        let current = new.spec + old_total;
        if current >= max_total {
            new.spec
        } else {
            new.spec + (max_total - current).min(replicas - new.spec)
        }
    };
    let mut old_specs: Vec<i64> = old.iter().map(|c| c.spec).collect();
    if old_total == 0 {
        return (new_spec, old_specs);
    }
    // reconcileOldReplicaSets.
    let min_available = replicas - unavailable;
    let new_unavailable = (new_spec - new.available).max(0);
    let all_pods = new_spec + old_total;
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return (new_spec, old_specs);
    }
    // cleanupUnhealthyReplicas: the old sets' unavailable pods go first.
    let mut cleaned = 0;
    for (spec, c) in old_specs.iter_mut().zip(old) {
        if cleaned >= max_scaled_down {
            break;
        }
        let unhealthy = (*spec - c.available.min(*spec)).max(0);
        let down = unhealthy.min(max_scaled_down - cleaned);
        *spec -= down;
        cleaned += down;
    }
    // scaleDownOldReplicaSetsForRollingUpdate: then as many available ones as the minimum
    // availability allows.
    let available: i64 = new.available.min(new_spec)
        + old_specs
            .iter()
            .zip(old)
            .map(|(spec, c)| c.available.min(*spec))
            .sum::<i64>();
    let mut budget = available - min_available;
    for spec in &mut old_specs {
        if budget <= 0 {
            break;
        }
        let down = (*spec).min(budget);
        *spec -= down;
        budget -= down;
    }
    (new_spec, old_specs)
}

/// What the StatefulSet controller does next to one set (`OrderedReady`), given each ordinal's
/// pod below `replicas` (`None`: missing; `Some((updated, ready))`) and the pods at or above
/// `replicas` still present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatefulStep {
    /// Create the pod of this ordinal.
    Create(i64),
    /// Delete the pod of this ordinal (scale down, or to recreate it at the update revision).
    Delete(i64),
    /// Wait: a pod is not ready yet, or nothing is left to do.
    Wait,
}

/// The StatefulSet controller's next step: create missing ordinals lowest first, each only
/// once those below are ready; remove ordinals above `replicas` highest first; then, for
/// `RollingUpdate`, replace one outdated pod at a time from the highest ordinal down to
/// `partition`, each after every pod is ready again.
pub fn stateful_step(
    pods: &[Option<(bool, bool)>],
    extra: &[i64],
    rolling: bool,
    partition: i64,
) -> StatefulStep {
    for (ordinal, pod) in (0_i64..).zip(pods) {
        match pod {
            None => return StatefulStep::Create(ordinal),
            Some((_, false)) => return StatefulStep::Wait,
            Some((_, true)) => {}
        }
    }
    if let Some(highest) = extra.iter().max() {
        return StatefulStep::Delete(*highest);
    }
    if !rolling {
        return StatefulStep::Wait;
    }
    for (ordinal, pod) in pods.iter().enumerate().rev() {
        let ordinal = ordinal as i64;
        if ordinal < partition {
            break;
        }
        if let Some((false, _)) = pod {
            return StatefulStep::Delete(ordinal);
        }
    }
    StatefulStep::Wait
}

/// The DaemonSet controller's `rollingUpdate` budget: with each node's pod as
/// `Some((updated, ready))` (`None`: no pod), which nodes' outdated pods to delete now —
/// every unavailable one, then available ones while fewer than `max_unavailable` nodes lack
/// an available pod.
pub fn daemon_deletions(nodes: &[Option<(bool, bool)>], max_unavailable: i64) -> Vec<usize> {
    let mut unavailable = nodes
        .iter()
        .filter(|n| !matches!(n, Some((_, true))))
        .count() as i64;
    let mut out: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n, Some((false, false))))
        .map(|(i, _)| i)
        .collect();
    for (i, n) in nodes.iter().enumerate() {
        if unavailable >= max_unavailable {
            break;
        }
        if matches!(n, Some((false, true))) {
            out.push(i);
            unavailable += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn percentages_round_as_the_controller_rounds_them() {
        // 25% of 10 = 2.5: surge rounds up to 3, unavailable down to 2.
        let defaults = json!({"maxSurge": "25%", "maxUnavailable": "25%"});
        assert_eq!(fenceposts(Some(&defaults), 10), (3, 2));
        // 25% of 3: surge 1, unavailable 0.
        assert_eq!(fenceposts(Some(&defaults), 3), (1, 0));
        // Both 0: one may be unavailable.
        let zero = json!({"maxSurge": 0, "maxUnavailable": "0%"});
        assert_eq!(fenceposts(Some(&zero), 5), (0, 1));
        assert_eq!(
            fenceposts(Some(&json!({"maxSurge": 2, "maxUnavailable": 1})), 5),
            (2, 1)
        );
        assert_eq!(scaled(Some(&json!("50%")), 3, true, 0), 2);
        assert_eq!(scaled(Some(&json!("50%")), 3, false, 0), 1);
        assert_eq!(scaled(Some(&json!("x%")), 3, false, 7), 7);
        assert_eq!(scaled(None, 3, false, 1), 1);
    }

    fn c(spec: i64, available: i64) -> Counts {
        Counts { spec, available }
    }

    #[test]
    fn a_rolling_update_surges_then_scales_the_old_set_down() {
        let posts = fenceposts(Some(&json!({"maxSurge": 1, "maxUnavailable": 0})), 3);
        // Start: 3 old, nothing new. The new set gets the one surge pod; nothing old goes.
        assert_eq!(rolling_step(3, posts, c(0, 0), &[c(3, 3)]), (1, vec![3]));
        // While the new pod is not available, nothing moves.
        assert_eq!(rolling_step(3, posts, c(1, 0), &[c(3, 3)]), (1, vec![3]));
        // Once it is, one old pod goes (the new set grows on the next step).
        assert_eq!(rolling_step(3, posts, c(1, 1), &[c(3, 3)]), (1, vec![2]));
        assert_eq!(rolling_step(3, posts, c(1, 1), &[c(2, 2)]), (2, vec![2]));
        assert_eq!(rolling_step(3, posts, c(3, 3), &[c(1, 1)]), (3, vec![0]));
    }

    #[test]
    fn unavailable_old_pods_go_first_and_the_budget_holds() {
        let posts = (1, 1);
        // 4 replicas, one may be unavailable: one old pod goes at once.
        assert_eq!(rolling_step(4, posts, c(0, 0), &[c(4, 4)]), (1, vec![3]));
        // Old pods that are not available go first, within what the unavailable new pod
        // leaves: one of the two broken old pods, and none of the healthy ones.
        assert_eq!(rolling_step(4, posts, c(1, 1), &[c(3, 1)]), (2, vec![2]));
        // Two old sets: the oldest shrinks first.
        assert_eq!(
            rolling_step(4, posts, c(2, 2), &[c(1, 1), c(2, 2)]),
            (2, vec![0, 1])
        );
    }

    #[test]
    fn a_stateful_set_updates_from_the_highest_ordinal_down_to_the_partition() {
        let ready_old = Some((false, true));
        let ready_new = Some((true, true));
        // All old and ready: the highest ordinal goes first.
        let pods = [ready_old, ready_old, ready_old];
        assert_eq!(stateful_step(&pods, &[], true, 0), StatefulStep::Delete(2));
        // Its replacement is created, then waited for.
        assert_eq!(
            stateful_step(&[ready_old, ready_old, None], &[], true, 0),
            StatefulStep::Create(2)
        );
        assert_eq!(
            stateful_step(&[ready_old, ready_old, Some((true, false))], &[], true, 0),
            StatefulStep::Wait
        );
        assert_eq!(
            stateful_step(&[ready_old, ready_old, ready_new], &[], true, 0),
            StatefulStep::Delete(1)
        );
        // A partition of 2 keeps ordinals 0 and 1 at the old revision.
        assert_eq!(
            stateful_step(&[ready_old, ready_old, ready_new], &[], true, 2),
            StatefulStep::Wait
        );
        // OnDelete replaces nothing.
        assert_eq!(stateful_step(&pods, &[], false, 0), StatefulStep::Wait);
        // Scaling down removes the highest extra ordinal once the rest are ready.
        assert_eq!(
            stateful_step(&[ready_new], &[1, 2], true, 0),
            StatefulStep::Delete(2)
        );
    }

    #[test]
    fn a_daemon_set_replaces_pods_node_by_node_within_max_unavailable() {
        let old = Some((false, true));
        let new = Some((true, true));
        assert_eq!(daemon_deletions(&[old, old, old], 1), vec![0]);
        assert_eq!(daemon_deletions(&[old, old, old], 2), vec![0, 1]);
        // A node whose new pod is not ready yet uses the budget up.
        assert!(daemon_deletions(&[Some((true, false)), old, old], 1).is_empty());
        assert_eq!(daemon_deletions(&[new, old, old], 1), vec![1]);
        // Broken old pods go regardless.
        assert_eq!(
            daemon_deletions(&[Some((false, false)), old, new], 1),
            vec![0]
        );
    }
}
