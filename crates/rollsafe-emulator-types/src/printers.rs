//! The printer columns of each resource (the real server's
//! `pkg/printers/internalversion/printers.go`): what a `meta.k8s.io/v1` Table shows for it,
//! with `priority: 1` for the columns `-o wide` adds. Each resource's row in
//! [`crate::resources`] names its printer.

use serde_json::{Map, Value, json};

/// A column: name, type, format, priority.
pub type Column = (&'static str, &'static str, &'static str, u8);

const NAME: Column = ("Name", "string", "name", 0);
const AGE: Column = ("Age", "string", "", 0);
const CONTAINERS: Column = ("Containers", "string", "", 1);
const IMAGES: Column = ("Images", "string", "", 1);
const SELECTOR: Column = ("Selector", "string", "", 1);

/// The columns and the row cells of one resource.
#[derive(Debug)]
pub struct Printer {
    /// The column definitions, in order.
    pub columns: &'static [Column],
    /// One row's cells, at `now` (ages are relative).
    pub cells: fn(&Value, jiff::Timestamp) -> Vec<Value>,
}

impl Printer {
    const fn new(
        columns: &'static [Column],
        cells: fn(&Value, jiff::Timestamp) -> Vec<Value>,
    ) -> Self {
        Self { columns, cells }
    }
}

/// The columns of namespaces.
pub static NAMESPACES: Printer =
    Printer::new(&[NAME, ("Status", "string", "", 0), AGE], |o, now| {
        vec![name(o), text(o, "/status/phase"), age(o, now)]
    });

/// The columns of secrets.
pub static SECRETS: Printer = Printer::new(
    &[
        NAME,
        ("Type", "string", "", 0),
        ("Data", "string", "", 0),
        AGE,
    ],
    |o, now| {
        vec![
            name(o),
            text(o, "/type"),
            json!(count(o, &["/data"])),
            age(o, now),
        ]
    },
);

/// The columns of configmaps.
pub static CONFIGMAPS: Printer = Printer::new(&[NAME, ("Data", "string", "", 0), AGE], |o, now| {
    vec![
        name(o),
        json!(count(o, &["/data", "/binaryData"])),
        age(o, now),
    ]
});

/// The columns of serviceaccounts.
pub static SERVICEACCOUNTS: Printer =
    Printer::new(&[NAME, ("Secrets", "string", "", 0), AGE], |o, now| {
        let secrets = o
            .get("secrets")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        vec![name(o), json!(secrets), age(o, now)]
    });

/// The columns of deployments.
pub static DEPLOYMENTS: Printer = Printer::new(
    &[
        NAME,
        ("Ready", "string", "", 0),
        ("Up-to-date", "string", "", 0),
        ("Available", "string", "", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    |o, now| {
        let ready = format!(
            "{}/{}",
            int(o, "/status/readyReplicas"),
            int(o, "/spec/replicas")
        );
        vec![
            name(o),
            json!(ready),
            json!(int(o, "/status/updatedReplicas")),
            json!(int(o, "/status/availableReplicas")),
            age(o, now),
            containers(o),
            images(o),
            selector(o),
        ]
    },
);

/// The columns of statefulsets.
pub static STATEFULSETS: Printer = Printer::new(
    &[NAME, ("Ready", "string", "", 0), AGE, CONTAINERS, IMAGES],
    |o, now| {
        let ready = format!(
            "{}/{}",
            int(o, "/status/readyReplicas"),
            int(o, "/spec/replicas")
        );
        vec![name(o), json!(ready), age(o, now), containers(o), images(o)]
    },
);

/// The columns of pods (`printPod`): ready containers, the status kubectl derives from the
/// phase and the containers' states, restarts (with the last one's age), and for `-o wide`
/// the IP, node, nominated node and readiness gates.
pub static PODS: Printer = Printer::new(
    &[
        NAME,
        ("Ready", "string", "", 0),
        ("Status", "string", "", 0),
        ("Restarts", "string", "", 0),
        AGE,
        ("IP", "string", "", 1),
        ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1),
        ("Readiness Gates", "string", "", 1),
    ],
    pod_cells,
);

fn pod_cells(o: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let total = o
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let mut reason = match str_at(o, "/status/reason") {
        "" => str_at(o, "/status/phase").to_owned(),
        given => given.to_owned(),
    };
    let mut ready = 0;
    let mut restarts = 0;
    let mut last_restart: Option<jiff::Timestamp> = None;
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    for c in statuses.iter().rev() {
        restarts += int(c, "/restartCount");
        if let Ok(finished) = str_at(c, "/lastState/terminated/finishedAt").parse() {
            last_restart =
                Some(last_restart.map_or(finished, |t: jiff::Timestamp| t.max(finished)));
        }
        let waiting = str_at(c, "/state/waiting/reason");
        let terminated = str_at(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_owned();
        } else if !terminated.is_empty() {
            reason = terminated.to_owned();
        } else if c.get("ready") == Some(&Value::Bool(true))
            && c.pointer("/state/running").is_some()
        {
            ready += 1;
        }
    }
    if o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
    {
        reason = "Terminating".to_owned();
    }
    let restarts = match last_restart {
        Some(t) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.as_second() - t.as_second())
        ),
        _ => restarts.to_string(),
    };
    let or_none = |pointer: &str| match str_at(o, pointer) {
        "" => json!("<none>"),
        value => json!(value),
    };
    vec![
        name(o),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts),
        age(o, now),
        or_none("/status/podIP"),
        or_none("/spec/nodeName"),
        or_none("/status/nominatedNodeName"),
        json!("<none>"),
    ]
}

/// The columns of replicasets.
pub static REPLICASETS: Printer = Printer::new(
    &[
        NAME,
        ("Desired", "integer", "", 0),
        ("Current", "integer", "", 0),
        ("Ready", "integer", "", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    |o, now| {
        vec![
            name(o),
            json!(int(o, "/spec/replicas")),
            json!(int(o, "/status/replicas")),
            json!(int(o, "/status/readyReplicas")),
            age(o, now),
            containers(o),
            images(o),
            selector(o),
        ]
    },
);

/// The columns of daemonsets.
pub static DAEMONSETS: Printer = Printer::new(
    &[
        NAME,
        ("Desired", "integer", "", 0),
        ("Current", "integer", "", 0),
        ("Ready", "integer", "", 0),
        ("Up-to-date", "integer", "", 0),
        ("Available", "integer", "", 0),
        ("Node Selector", "string", "", 0),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    |o, now| {
        vec![
            name(o),
            json!(int(o, "/status/desiredNumberScheduled")),
            json!(int(o, "/status/currentNumberScheduled")),
            json!(int(o, "/status/numberReady")),
            json!(int(o, "/status/updatedNumberScheduled")),
            json!(int(o, "/status/numberAvailable")),
            json!(pairs(
                o.pointer("/spec/template/spec/nodeSelector"),
                "<none>"
            )),
            age(o, now),
            containers(o),
            images(o),
            selector(o),
        ]
    },
);

/// Roles and ClusterRoles.
pub static ROLES: Printer = Printer::new(&[NAME, ("Created At", "date", "", 0)], |o, _| {
    vec![name(o), text(o, "/metadata/creationTimestamp")]
});

/// RoleBindings and ClusterRoleBindings.
pub static ROLE_BINDINGS: Printer = Printer::new(
    &[
        NAME,
        ("Role", "string", "", 0),
        AGE,
        ("Users", "string", "", 1),
        ("Groups", "string", "", 1),
        ("ServiceAccounts", "string", "", 1),
    ],
    |o, now| {
        let role = format!(
            "{}/{}",
            str_at(o, "/roleRef/kind"),
            str_at(o, "/roleRef/name")
        );
        vec![
            name(o),
            json!(role),
            age(o, now),
            json!(subjects(o, "User")),
            json!(subjects(o, "Group")),
            json!(subjects(o, "ServiceAccount")),
        ]
    },
);

/// The columns of services.
pub static SERVICES: Printer = Printer::new(
    &[
        NAME,
        ("Type", "string", "", 0),
        ("Cluster-IP", "string", "", 0),
        ("External-IP", "string", "", 0),
        ("Port(s)", "string", "", 0),
        AGE,
        ("Selector", "string", "", 1),
    ],
    |o, now| {
        let ports = o
            .pointer("/spec/ports")
            .and_then(Value::as_array)
            .map(|ps| {
                ps.iter()
                    .map(|p| {
                        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                        let protocol = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                        match p.get("nodePort").and_then(Value::as_i64) {
                            Some(node) => format!("{port}:{node}/{protocol}"),
                            None => format!("{port}/{protocol}"),
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "<none>".into());
        let external = o
            .pointer("/spec/externalIPs")
            .and_then(Value::as_array)
            .map(|ips| {
                ips.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| match str_at(o, "/spec/type") {
                "LoadBalancer" => "<pending>".into(),
                "ExternalName" => str_at(o, "/spec/externalName").into(),
                _ => "<none>".into(),
            });
        let cluster_ip = match str_at(o, "/spec/clusterIP") {
            "" => "<none>".to_string(),
            ip => ip.to_string(),
        };
        vec![
            name(o),
            text(o, "/spec/type"),
            json!(cluster_ip),
            json!(external),
            json!(ports),
            age(o, now),
            json!(pairs(o.pointer("/spec/selector"), "<none>")),
        ]
    },
);

/// The columns of resourcequotas.
pub static RESOURCEQUOTAS: Printer = Printer::new(
    &[
        NAME,
        AGE,
        ("Request", "string", "", 0),
        ("Limit", "string", "", 0),
    ],
    |o, now| {
        let (request, limit) = quota_columns(o);
        vec![name(o), age(o, now), json!(request), json!(limit)]
    },
);

/// The columns of poddisruptionbudgets.
pub static PODDISRUPTIONBUDGETS: Printer = Printer::new(
    &[
        NAME,
        ("Min Available", "string", "", 0),
        ("Max Unavailable", "string", "", 0),
        ("Allowed Disruptions", "integer", "", 0),
        AGE,
    ],
    |o, now| {
        let budget = |pointer| match o.pointer(pointer) {
            Some(Value::Number(n)) => json!(n.to_string()),
            Some(Value::String(s)) => json!(s),
            _ => json!("N/A"),
        };
        vec![
            name(o),
            budget("/spec/minAvailable"),
            budget("/spec/maxUnavailable"),
            json!(
                o.pointer("/status/disruptionsAllowed")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            ),
            age(o, now),
        ]
    },
);

/// The columns of priorityclasses.
pub static PRIORITYCLASSES: Printer = Printer::new(
    &[
        NAME,
        ("Value", "integer", "", 0),
        ("Global-Default", "boolean", "", 0),
        AGE,
        ("PreemptionPolicy", "string", "", 0),
    ],
    |o, now| {
        vec![
            name(o),
            json!(o.get("value").and_then(Value::as_i64).unwrap_or(0)),
            json!(
                o.get("globalDefault")
                    .and_then(Value::as_bool)
                    .unwrap_or(false)
            ),
            age(o, now),
            text(o, "/preemptionPolicy"),
        ]
    },
);

/// The columns of leases.
pub static LEASES: Printer = Printer::new(&[NAME, ("Holder", "string", "", 0), AGE], |o, now| {
    vec![name(o), text(o, "/spec/holderIdentity"), age(o, now)]
});

/// The columns of events.
pub static EVENTS: Printer = Printer::new(
    &[
        ("Last Seen", "string", "", 0),
        ("Type", "string", "", 0),
        ("Reason", "string", "", 0),
        ("Object", "string", "", 0),
        ("Subobject", "string", "", 1),
        ("Source", "string", "", 1),
        ("Message", "string", "", 0),
        ("First Seen", "string", "", 1),
        ("Count", "string", "", 1),
        ("Name", "string", "name", 1),
    ],
    |o, now| {
        let object = format!(
            "{}/{}",
            str_at(o, "/involvedObject/kind").to_ascii_lowercase(),
            str_at(o, "/involvedObject/name")
        );
        let source = [str_at(o, "/source/component"), str_at(o, "/source/host")]
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        // `printEvent`: no creationTimestamp fallback; an Event without times is `<unknown>`.
        let last = ["/lastTimestamp", "/firstTimestamp", "/eventTime"]
            .iter()
            .find_map(|p| o.pointer(p).and_then(Value::as_str))
            .unwrap_or("");
        let first = ["/firstTimestamp", "/eventTime"]
            .iter()
            .find_map(|p| o.pointer(p).and_then(Value::as_str))
            .unwrap_or("");
        // An Event series (what kube's recorder and client-go's new events API write) is
        // shown by its own count and last observation, as `printEvent` does.
        let series = o.get("series").filter(|s| s.is_object());
        let last = series
            .and_then(|s| s.get("lastObservedTime"))
            .and_then(Value::as_str)
            .unwrap_or(last);
        let count = match series {
            Some(s) => s.get("count").and_then(Value::as_i64).unwrap_or(0),
            None => o
                .get("count")
                .and_then(Value::as_i64)
                .filter(|c| *c != 0)
                .unwrap_or(1),
        };
        vec![
            json!(since(last, now)),
            text(o, "/type"),
            text(o, "/reason"),
            json!(object),
            text(o, "/involvedObject/fieldPath"),
            json!(source),
            text(o, "/message"),
            json!(since(first, now)),
            json!(count),
            name(o),
        ]
    },
);

/// Custom resources without printer columns, and anything else: name and age.
pub static DEFAULT: Printer = Printer::new(&[NAME, AGE], |o, now| vec![name(o), age(o, now)]);

/// A ResourceQuota's REQUEST and LIMIT cells: `resource: used/hard` for each resource in
/// `status.hard` in name order, the `limits.*` ones under LIMIT (as `printResourceQuota`).
fn quota_columns(o: &Value) -> (String, String) {
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    if let Some(Value::Object(hard)) = o.pointer("/status/hard") {
        let mut names: Vec<&String> = hard.keys().collect();
        names.sort();
        for resource in names {
            let quantity = |map: &str| {
                o.pointer(&format!("/status/{map}"))
                    .and_then(|m| m.get(resource.as_str()))
                    .map(|q| match q {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| "0".to_owned())
            };
            let cell = format!("{resource}: {}/{}", quantity("used"), quantity("hard"));
            match resource.split_once('.') {
                Some(("limits", _)) => limit.push(cell),
                _ => request.push(cell),
            }
        }
    }
    (request.join(", "), limit.join(", "))
}

fn str_at<'a>(o: &'a Value, pointer: &str) -> &'a str {
    o.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn text(o: &Value, pointer: &str) -> Value {
    json!(str_at(o, pointer))
}

fn name(o: &Value) -> Value {
    text(o, "/metadata/name")
}

fn int(o: &Value, pointer: &str) -> i64 {
    o.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn count(o: &Value, pointers: &[&str]) -> usize {
    pointers
        .iter()
        .filter_map(|p| o.pointer(p).and_then(Value::as_object))
        .map(Map::len)
        .sum()
}

fn pairs(map: Option<&Value>, empty: &str) -> String {
    let joined = crate::util::join_string_map(map, "=", ",");
    if joined.is_empty() {
        empty.to_string()
    } else {
        joined
    }
}

fn container_field(o: &Value, field: &str) -> Value {
    let list = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| c.get(field).and_then(Value::as_str).unwrap_or(""))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    json!(list)
}

fn containers(o: &Value) -> Value {
    container_field(o, "name")
}

fn images(o: &Value) -> Value {
    container_field(o, "image")
}

fn selector(o: &Value) -> Value {
    json!(pairs(o.pointer("/spec/selector/matchLabels"), "<none>"))
}

fn subjects(o: &Value, kind: &str) -> String {
    o.get("subjects")
        .and_then(Value::as_array)
        .map(|s| {
            s.iter()
                .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
                .map(|s| {
                    let name = s.get("name").and_then(Value::as_str).unwrap_or("");
                    match s.get("namespace").and_then(Value::as_str) {
                        Some(ns) if kind == "ServiceAccount" => format!("{ns}/{name}"),
                        _ => name.to_string(),
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn age(o: &Value, now: jiff::Timestamp) -> Value {
    json!(since(str_at(o, "/metadata/creationTimestamp"), now))
}

/// `translateTimestampSince`: the human duration since an RFC 3339 time, `<unknown>` without one.
fn since(timestamp: &str, now: jiff::Timestamp) -> String {
    match timestamp.parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(now.as_second() - t.as_second()),
        Err(_) => "<unknown>".to_string(),
    }
}

/// `k8s.io/apimachinery/pkg/util/duration.HumanDuration`, over whole seconds.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_series_shows_its_own_count_and_last_observation() {
        let now: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().unwrap_or_default();
        let event = |extra: Value| {
            let mut e = json!({
                "metadata": {"name": "web.1", "creationTimestamp": "2026-12-02T11:00:00Z"},
                "involvedObject": {"kind": "Deployment", "name": "web"},
                "type": "Normal", "reason": "Rolled", "message": "m",
                "firstTimestamp": "2026-12-02T11:00:00Z",
                "lastTimestamp": "2026-12-02T11:00:00Z",
            });
            if let (Some(map), Value::Object(more)) = (e.as_object_mut(), extra) {
                map.extend(more);
            }
            (EVENTS.cells)(&e, now)
        };
        // (extra fields, LAST SEEN, COUNT)
        let cases = [
            (json!({}), "60m", 1),
            (json!({"count": 3}), "60m", 3),
            (
                json!({"count": 1, "series": {"count": 5, "lastObservedTime": "2026-12-02T11:59:30.000000Z"}}),
                "30s",
                5,
            ),
        ];
        for (extra, last_seen, count) in cases {
            let cells = event(extra.clone());
            assert_eq!(cells[0], json!(last_seen), "{extra}");
            assert_eq!(cells[8], json!(count), "{extra}");
        }
    }

    #[test]
    fn a_pod_row_shows_ready_containers_and_the_waiting_reason() {
        let now: jiff::Timestamp = "2026-12-01T10:00:00Z".parse().unwrap();
        let pod = json!({
            "metadata": {"name": "web-abc-x1", "creationTimestamp": "2026-12-01T09:59:00Z"},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app"}]},
            "status": {"phase": "Running", "podIP": "10.244.0.5", "containerStatuses": [{
                "name": "app", "ready": false, "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {"terminated": {"finishedAt": "2026-12-01T09:59:50Z"}}}]}
        });
        assert_eq!(
            pod_cells(&pod, now),
            [
                json!("web-abc-x1"),
                json!("0/1"),
                json!("CrashLoopBackOff"),
                json!("3 (10s ago)"),
                json!("60s"),
                json!("10.244.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("<none>")
            ]
        );
        let running = json!({"spec": {"containers": [{"name": "app"}]},
            "status": {"phase": "Running", "containerStatuses": [{
                "ready": true, "restartCount": 0, "state": {"running": {}}}]}});
        let cells = pod_cells(&running, now);
        assert_eq!(
            (&cells[1], &cells[2], &cells[3]),
            (&json!("1/1"), &json!("Running"), &json!("0"))
        );
    }

    #[test]
    fn human_durations_match_the_real_rounding() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60 * 7, "3h7m"),
            (47 * 3600, "47h"),
            (2 * 86400 + 3 * 3600, "2d3h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400 + 86400, "3y1d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (seconds, want) in cases {
            assert_eq!(human_duration(seconds), want, "{seconds}");
        }
    }
}
