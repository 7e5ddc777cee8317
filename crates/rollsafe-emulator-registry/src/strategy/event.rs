//! The Events the controller simulation records (the `events.k8s.io/v1` view of stored Events is
//! `rollsafe_emulator_types::conversion`).

use serde_json::{Value, json};

use rollsafe_emulator_types::util;

/// A `Normal` Event about `object` from `component`, named as client-go's recorder names them
/// (`<object name>.<hex nanoseconds>`).
pub fn about(
    object: &Value,
    kind: &str,
    api_version: &str,
    component: &str,
    reason: &str,
    message: &str,
) -> Value {
    let meta = |field: &str| {
        object
            .pointer(&format!("/metadata/{field}"))
            .cloned()
            .unwrap_or(Value::Null)
    };
    let name = meta("name");
    let now = util::now_seconds();
    let nanos = jiff::Timestamp::now().as_nanosecond();
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": format!("{}.{nanos:x}", name.as_str().unwrap_or("")),
            "namespace": meta("namespace"),
        },
        "involvedObject": {
            "kind": kind,
            "namespace": meta("namespace"),
            "name": name,
            "uid": meta("uid"),
            "apiVersion": api_version,
            "resourceVersion": meta("resourceVersion"),
        },
        "reason": reason,
        "message": message,
        "source": {"component": component},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": "Normal",
        "eventTime": null,
        "reportingComponent": component,
        "reportingInstance": "",
    })
}
