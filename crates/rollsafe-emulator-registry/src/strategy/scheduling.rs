//! PriorityClasses (`pkg/registry/scheduling/priorityclass`): `preemptionPolicy` defaulted,
//! user-defined values bounded, and `value` and `preemptionPolicy` fixed once created.

use serde_json::{Map, Value, json};

use super::{DEFAULT, Strategy};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// `HighestUserDefinablePriority`.
const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// PriorityClasses.
pub static PRIORITY_CLASSES: Strategy = Strategy {
    prepare,
    validate,
    ..DEFAULT
};

fn prepare(obj: &mut Map<String, Value>, _: Option<&Value>) {
    obj.entry("preemptionPolicy")
        .or_insert_with(|| json!("PreemptLowerPriority"));
}

fn validate(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    let value = obj.get("value").and_then(Value::as_i64).unwrap_or(0);
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if value > HIGHEST_USER_DEFINABLE_PRIORITY && !name.starts_with("system-") {
        causes.push(FieldCause::forbidden(
            "value",
            "maximum allowed value of a user defined priority is 1000000000",
        ));
    }
    let policy = obj.get("preemptionPolicy").and_then(Value::as_str);
    if let Some(policy) = policy
        && !matches!(policy, "Never" | "PreemptLowerPriority")
    {
        causes.push(FieldCause::not_supported(
            "preemptionPolicy",
            policy,
            &["Never", "PreemptLowerPriority"],
        ));
    }
    if let Some(old) = old {
        if obj.get("value") != old.get("value") {
            causes.push(FieldCause::forbidden(
                "value",
                "may not be changed in an update.",
            ));
        }
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy") {
            causes.push(FieldCause::invalid(
                "preemptionPolicy",
                policy.unwrap_or(""),
                "field is immutable",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn causes(obj: &Value, old: Option<&Value>) -> Vec<String> {
        let mut out = Vec::new();
        validate(obj, old, &mut out).unwrap();
        out.iter().map(|c| c.field.clone()).collect()
    }

    #[test]
    fn priority_classes_are_defaulted_bounded_and_fixed() {
        let mut map = Map::new();
        map.insert("value".into(), json!(1000));
        prepare(&mut map, None);
        assert_eq!(map["preemptionPolicy"], "PreemptLowerPriority");
        let obj = Value::Object(map);
        let cases: &[(Value, Option<Value>, &[&str])] = &[
            (obj.clone(), None, &[]),
            (
                json!({"metadata": {"name": "big"}, "value": 1_000_000_001}),
                None,
                &["value"],
            ),
            (
                json!({"metadata": {"name": "system-x"}, "value": 2_000_000_000}),
                None,
                &[],
            ),
            (
                json!({"value": 1, "preemptionPolicy": "Sometimes"}),
                None,
                &["preemptionPolicy"],
            ),
            (
                json!({"value": 2, "preemptionPolicy": "PreemptLowerPriority"}),
                Some(obj.clone()),
                &["value"],
            ),
            (
                json!({"value": 1000, "preemptionPolicy": "Never"}),
                Some(obj.clone()),
                &["preemptionPolicy"],
            ),
        ];
        for (obj, old, want) in cases {
            assert_eq!(causes(obj, old.as_ref()), *want, "{obj}");
        }
    }
}
