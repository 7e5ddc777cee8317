//! What tests observe from the server side: the request log and concurrency peaks.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use rollsafe_emulator_types::query::Query;

/// Request bodies kept in the log are cut at this many bytes.
pub(crate) const MAX_LOGGED_BODY: usize = 64 * 1024;

/// One API request as the server saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestLogEntry {
    /// Arrival order, from 1.
    pub seq: u64,
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Raw query string (without `?`), possibly empty.
    pub query: String,
    /// `Content-Type` of the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// `Accept` of the request: the form the client asked the answer in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept: Option<String>,
    /// `User-Agent` of the request (the default field manager's name comes from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_agent: Option<String>,
    /// Kubernetes verb, for resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Resource (with `/subresource`), for resource requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Namespace, for namespaced requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name, when the request names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Authenticated user (`system:anonymous` without credentials; absent on a 401).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Groups of the authenticated user.
    #[serde(default)]
    pub groups: Vec<String>,
    /// `Impersonate-User`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<String>,
    /// `Impersonate-Group` values, in order.
    #[serde(default)]
    pub impersonated_groups: Vec<String>,
    /// `Impersonate-Uid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impersonated_uid: Option<String>,
    /// HTTP status sent; 0 when no answer was sent: a fault dropped the connection, or the
    /// client hung up first (then `end` is when the server noticed).
    pub status: u16,
    /// The faults applied, described.
    #[serde(default)]
    pub faults: Vec<String>,
    /// Start time (RFC 3339, nanoseconds).
    pub start: String,
    /// End time: when the response head was ready (RFC 3339, nanoseconds).
    pub end: String,
    /// Start, in microseconds since the emulator started (for ordering and overlap checks).
    pub start_micros: u64,
    /// End, in microseconds since the emulator started.
    pub end_micros: u64,
    /// The request's body, when it has one (a write's object or patch, DeleteOptions …), cut at
    /// 64 KiB, when it is UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// The request's body when it is not UTF-8 (a protobuf body), base64, cut at 64 KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_base64: Option<String>,
}

impl RequestLogEntry {
    /// A query parameter of the request, decoded.
    pub fn query_param(&self, key: &str) -> Option<String> {
        Query::parse(&self.query).get(key).map(str::to_string)
    }

    /// Whether this request is a `verb` on `resource`.
    pub fn is(&self, verb: &str, resource: &str) -> bool {
        self.verb.as_deref() == Some(verb) && self.resource.as_deref() == Some(resource)
    }
}

/// Concurrency counters for one (verb, resource).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InFlightCounter {
    /// Requests being handled now.
    pub current: u32,
    /// The most ever handled at once since the last reset.
    pub peak: u32,
}

/// Counters of one (verb, resource), for listings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightStat {
    /// Verb.
    pub verb: String,
    /// Resource (with `/subresource`).
    pub resource: String,
    /// Requests being handled now.
    pub current: u32,
    /// Peak since the last reset.
    pub peak: u32,
}

/// In-flight counters keyed by (verb, resource).
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    counters: Mutex<BTreeMap<(String, String), InFlightCounter>>,
}

/// Decrements its counter when dropped.
#[derive(Debug)]
pub(crate) struct InFlightGuard {
    owner: Arc<InFlight>,
    key: (String, String),
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if let Ok(mut map) = self.owner.counters.lock()
            && let Some(c) = map.get_mut(&self.key)
        {
            c.current = c.current.saturating_sub(1);
        }
    }
}

impl InFlight {
    /// Counts a request in until the guard drops.
    pub(crate) fn enter(self: &Arc<Self>, verb: &str, resource: &str) -> InFlightGuard {
        let key = (verb.to_string(), resource.to_string());
        if let Ok(mut map) = self.counters.lock() {
            let c = map.entry(key.clone()).or_default();
            c.current += 1;
            c.peak = c.peak.max(c.current);
        }
        InFlightGuard {
            owner: self.clone(),
            key,
        }
    }

    /// Peak for one (verb, resource).
    pub(crate) fn peak(&self, verb: &str, resource: &str) -> u32 {
        self.counters
            .lock()
            .ok()
            .and_then(|m| {
                m.get(&(verb.to_string(), resource.to_string()))
                    .map(|c| c.peak)
            })
            .unwrap_or(0)
    }

    /// All counters.
    pub(crate) fn stats(&self) -> Vec<InFlightStat> {
        self.counters
            .lock()
            .map(|m| {
                m.iter()
                    .map(|((verb, resource), c)| InFlightStat {
                        verb: verb.clone(),
                        resource: resource.clone(),
                        current: c.current,
                        peak: c.peak,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Resets peaks to the current values.
    pub(crate) fn reset(&self) {
        if let Ok(mut m) = self.counters.lock() {
            for c in m.values_mut() {
                c.peak = c.current;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peaks_follow_overlap() {
        let f = Arc::new(InFlight::default());
        let a = f.enter("patch", "deployments");
        let b = f.enter("patch", "deployments");
        drop(a);
        let c = f.enter("patch", "deployments");
        drop(b);
        drop(c);
        assert_eq!(f.peak("patch", "deployments"), 2);
        assert_eq!(f.stats()[0].current, 0);
        f.reset();
        assert_eq!(f.peak("patch", "deployments"), 0);
    }
}
