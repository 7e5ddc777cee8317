//! PodDisruptionBudgets (`pkg/registry/policy/poddisruptionbudget`): a new budget starts with
//! the zero status, and a write to the main resource keeps the stored status — the disruption
//! controller (`crate::disruption`) writes it through `status`.

use serde_json::{Map, Value, json};

use super::{DEFAULT, Strategy};

/// PodDisruptionBudgets.
pub static PODDISRUPTIONBUDGETS: Strategy = Strategy { prepare, ..DEFAULT };

/// `PrepareForCreate` / `PrepareForUpdate`.
fn prepare(obj: &mut Map<String, Value>, old: Option<&Value>) {
    let status = match old {
        None => Some(json!({
            "disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0
        })),
        Some(old) => old.get("status").cloned(),
    };
    match status {
        Some(status) => obj.insert("status".into(), status),
        None => obj.remove("status"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_budget_has_the_zero_status_and_writes_keep_the_stored_one() {
        let mut created = Map::new();
        created.insert("status".into(), json!({"disruptionsAllowed": 7}));
        prepare(&mut created, None);
        assert_eq!(
            created["status"],
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
        );
        let stored = json!({"status": {"disruptionsAllowed": 1, "currentHealthy": 3}});
        let mut updated = Map::new();
        updated.insert("status".into(), json!({"disruptionsAllowed": 9}));
        prepare(&mut updated, Some(&stored));
        assert_eq!(updated["status"], stored["status"]);
    }
}
