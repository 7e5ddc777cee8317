//! The `scale` subresource (`autoscaling/v1 Scale`) of Deployments and StatefulSets.

use serde_json::{Value, json};

pub(crate) fn scale_of(obj: &Value) -> Value {
    let selector = rollsafe_emulator_types::util::join_string_map(
        obj.pointer("/spec/selector/matchLabels"),
        "=",
        ",",
    );
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        // `ScaleSpec.replicas` is `omitempty`: 0 is not written.
        "spec": match obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1)) {
            zero if zero == json!(0) => json!({}),
            replicas => json!({"replicas": replicas}),
        },
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        }
    })
}
