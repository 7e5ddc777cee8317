//! Conversions between the versions of one stored resource: `events.k8s.io/v1` Events are
//! kept once in the core `v1` form and shown with renamed fields (the real
//! `pkg/apis/events/v1` conversion). The resource table's `View` rows name these functions.

use serde_json::{Map, Value, json};

/// (core `v1` field, `events.k8s.io/v1` field) for every field whose name differs.
const RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn convert(obj: &Value, api_version: &str, from_core: bool) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!("Event"));
    for (k, v) in map {
        if k == "apiVersion" || k == "kind" {
            continue;
        }
        let renamed = RENAMES.iter().find_map(|(core, v1)| {
            if from_core {
                (k == core).then_some(*v1)
            } else {
                (k == v1).then_some(*core)
            }
        });
        out.insert(renamed.unwrap_or(k).to_string(), v.clone());
    }
    Value::Object(out)
}

/// Core `v1` Event → `events.k8s.io/v1` Event.
pub fn core_to_events_v1(obj: &Value) -> Value {
    convert(obj, "events.k8s.io/v1", true)
}

/// `events.k8s.io/v1` Event → core `v1` Event.
pub fn events_v1_to_core(obj: &Value) -> Value {
    convert(obj, "v1", false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversion_round_trips() {
        let core = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
            "involvedObject": {"kind": "Deployment", "name": "web"}, "message": "m", "count": 2,
            "reason": "R", "type": "Normal", "reportingComponent": "c", "source": {"component": "c"}});
        let v1 = core_to_events_v1(&core);
        assert_eq!(v1["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v1["regarding"]["name"], "web");
        assert_eq!(v1["note"], "m");
        assert_eq!(v1["deprecatedCount"], 2);
        assert_eq!(v1["reportingController"], "c");
        assert_eq!(v1["deprecatedSource"]["component"], "c");
        assert!(v1.get("message").is_none());
        assert_eq!(events_v1_to_core(&v1), core);
    }
}
