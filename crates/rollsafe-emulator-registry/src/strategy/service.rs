//! Services: the defaults the real registry and scheme apply (type `ClusterIP`, a cluster IP
//! from the service range, single-stack IPv4, `sessionAffinity`, `internalTrafficPolicy`, port
//! `protocol` and `targetPort`); the cluster IP never changes once given.

use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value, json};

use super::{DEFAULT, Strategy, default, object_at};

/// Services.
pub static STRATEGY: Strategy = Strategy { prepare, ..DEFAULT };

/// Ingresses (stored only): a new one's status is the empty `IngressStatus`, as the real
/// strategy's `PrepareForCreate` sets it.
pub static INGRESS: Strategy = Strategy {
    prepare: prepare_ingress,
    ..DEFAULT
};

fn prepare_ingress(map: &mut Map<String, Value>, _old: Option<&Value>) {
    default(map, "status", json!({"loadBalancer": {}}));
}

/// The next address handed out in `10.96.0.0/12` (from `10.96.0.10`, as `10.96.0.1` is the
/// `kubernetes` Service and `.10` traditionally DNS: the first allocation is `.11`).
static NEXT_IP: AtomicU32 = AtomicU32::new(11);

fn allocate() -> String {
    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed) % (1 << 20);
    format!("10.{}.{}.{}", 96 + (n >> 16), (n >> 8) & 0xff, n & 0xff)
}

fn prepare(map: &mut Map<String, Value>, old: Option<&Value>) {
    let Some(spec) = object_at(map, "spec") else {
        return;
    };
    default(spec, "type", json!("ClusterIP"));
    let kept = old
        .and_then(|o| o.pointer("/spec/clusterIP"))
        .cloned()
        .filter(|ip| ip.as_str().is_some_and(|s| !s.is_empty()));
    let external = spec.get("type").and_then(Value::as_str) == Some("ExternalName");
    if !external {
        match kept {
            Some(ip) => {
                spec.insert("clusterIP".into(), ip);
            }
            None => {
                if spec
                    .get("clusterIP")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    spec.insert("clusterIP".into(), json!(allocate()));
                }
            }
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        spec.insert("clusterIPs".into(), json!([ip]));
        default(spec, "ipFamilies", json!(["IPv4"]));
        default(spec, "ipFamilyPolicy", json!("SingleStack"));
        default(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    default(spec, "sessionAffinity", json!("None"));
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            default(port, "protocol", json!("TCP"));
            if let Some(number) = port.get("port").cloned() {
                default(port, "targetPort", number);
            }
        }
    }
    default(map, "status", json!({"loadBalancer": {}}));
}
