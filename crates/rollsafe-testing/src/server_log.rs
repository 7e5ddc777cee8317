//! What the API server saw, on either substrate: the emulator's request log, or the real API
//! server's audit log (`Metadata` level: workload and Secret requests, no bodies). One shape for
//! both, so a suite asserts on what reached the server — verbs, impersonation, answers and
//! overlap in time — the same way on each.

use std::path::Path;

use serde_json::Value;

/// One request as the server recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerRequest {
    /// The Kubernetes verb (`list`, `patch` …).
    pub verb: String,
    /// The resource (`deployments` …), with `/subresource` when there is one.
    pub resource: String,
    /// The namespace.
    pub namespace: Option<String>,
    /// The object's name, when the request names one.
    pub name: Option<String>,
    /// The authenticated user.
    pub user: Option<String>,
    /// The impersonated user.
    pub impersonated_user: Option<String>,
    /// The impersonated groups, in order.
    pub impersonated_groups: Vec<String>,
    /// The HTTP status answered.
    pub status: u16,
    /// When the server received it, in microseconds (an origin of the server's own).
    pub start_micros: i64,
    /// When the server completed the answer, in microseconds.
    pub end_micros: i64,
}

/// The emulator's request log entries, as [`ServerRequest`]s.
pub(crate) fn from_emulator(entries: &[rollsafe_emulator::RequestLogEntry]) -> Vec<ServerRequest> {
    entries
        .iter()
        .filter_map(|e| {
            Some(ServerRequest {
                verb: e.verb.clone()?,
                resource: e.resource.clone()?,
                namespace: e.namespace.clone(),
                name: e.name.clone(),
                user: e.user.clone(),
                impersonated_user: e.impersonated_user.clone(),
                impersonated_groups: e.impersonated_groups.clone(),
                status: e.status,
                start_micros: i64::try_from(e.start_micros).unwrap_or(i64::MAX),
                end_micros: i64::try_from(e.end_micros).unwrap_or(i64::MAX),
            })
        })
        .collect()
}

fn micros(time: &Value) -> Option<i64> {
    let stamp: jiff::Timestamp = time.as_str()?.parse().ok()?;
    Some(stamp.as_microsecond())
}

/// The completed requests of a kube-apiserver JSON audit log at `path`, in the order the
/// server completed them.
pub(crate) fn from_audit_log(path: &Path) -> Vec<ServerRequest> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter_map(|event| {
            let object = &event["objectRef"];
            let resource = object["resource"].as_str()?;
            let resource = match object["subresource"].as_str() {
                Some(sub) => format!("{resource}/{sub}"),
                None => resource.to_owned(),
            };
            let impersonated = &event["impersonatedUser"];
            Some(ServerRequest {
                verb: event["verb"].as_str()?.to_owned(),
                resource,
                namespace: object["namespace"].as_str().map(str::to_owned),
                name: object["name"].as_str().map(str::to_owned),
                user: event["user"]["username"].as_str().map(str::to_owned),
                impersonated_user: impersonated["username"].as_str().map(str::to_owned),
                impersonated_groups: impersonated["groups"]
                    .as_array()
                    .map(|g| {
                        g.iter()
                            .filter_map(|g| g.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default(),
                status: event["responseStatus"]["code"]
                    .as_u64()
                    .and_then(|c| u16::try_from(c).ok())
                    .unwrap_or(0),
                start_micros: micros(&event["requestReceivedTimestamp"])?,
                end_micros: micros(&event["stageTimestamp"])?,
            })
        })
        .collect()
}

/// The most of `requests` that overlapped in time (an end sorts before a start at the same
/// instant).
pub fn peak_overlap(requests: &[ServerRequest]) -> usize {
    let mut events: Vec<(i64, i32)> = requests
        .iter()
        .flat_map(|r| [(r.start_micros, 1), (r.end_micros, -1)])
        .collect();
    events.sort_unstable();
    let (mut current, mut peak) = (0_i32, 0_i32);
    for (_, delta) in events {
        current += delta;
        peak = peak.max(current);
    }
    usize::try_from(peak).unwrap_or(0)
}
