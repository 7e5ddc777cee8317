//! Fault injection: what can go wrong, and which requests it hits.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

/// Which requests a fault hits. Unset fields match anything.
///
/// Counting: every request that matches the verb/resource/namespace/name/user filters is counted.
/// The fault fires on the `occurrence`-th matching request (1-based) and on the next
/// `times - 1` matching requests after it; `times: 0` means on every matching request from the
/// `occurrence`-th on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultMatch {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verb: Option<String>,
    /// Resource plural, optionally with a subresource: `deployments`, `deployments/scale`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// Namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Object name (requests that name no object, such as lists, never match a name filter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The user the request acts as, after authentication and impersonation (the user it is
    /// authorized as).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The first matching request the fault fires on (1-based).
    #[serde(default = "one")]
    pub occurrence: u32,
    /// How many matching requests it fires on; 0 = all from `occurrence` on.
    #[serde(default = "one")]
    pub times: u32,
}

fn one() -> u32 {
    1
}

impl Default for FaultMatch {
    fn default() -> Self {
        Self {
            verb: None,
            resource: None,
            namespace: None,
            name: None,
            user: None,
            occurrence: 1,
            times: 1,
        }
    }
}

impl FaultMatch {
    /// Matches requests with this verb on this resource (`"*"` for either matches anything).
    pub fn new(verb: &str, resource: &str) -> Self {
        Self {
            verb: (verb != "*").then(|| verb.to_string()),
            resource: (resource != "*").then(|| resource.to_string()),
            ..Self::default()
        }
    }

    /// Only in this namespace.
    #[must_use]
    pub fn namespace(mut self, namespace: &str) -> Self {
        self.namespace = Some(namespace.to_string());
        self
    }

    /// Only for this object name.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(name.to_string());
        self
    }

    /// Only for requests acting as this user (after impersonation).
    #[must_use]
    pub fn user(mut self, user: &str) -> Self {
        self.user = Some(user.to_string());
        self
    }

    /// Fire on the n-th matching request (1-based).
    #[must_use]
    pub fn nth(mut self, occurrence: u32) -> Self {
        self.occurrence = occurrence.max(1);
        self
    }

    /// Fire on this many matching requests (0 = all).
    #[must_use]
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    /// Fire on every matching request.
    #[must_use]
    pub fn always(self) -> Self {
        self.times(0)
    }

    /// Completes the fault with an action.
    pub fn then(self, action: FaultAction) -> Fault {
        Fault {
            matcher: self,
            action,
        }
    }

    /// Whether a request matches the filters (ignoring counting); `user` is the user it acts
    /// as.
    pub fn filters(
        &self,
        verb: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        user: &str,
    ) -> bool {
        self.verb.as_deref().is_none_or(|v| v == verb)
            && self.resource.as_deref().is_none_or(|r| r == resource)
            && self.namespace.as_deref().is_none_or(|n| n == namespace)
            && self.name.as_deref().is_none_or(|n| n == name)
            && self.user.as_deref().is_none_or(|u| u == user)
    }
}

/// A corruption of a list response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ListCorruption {
    /// A non-final page with fewer than `limit` items (the last item is left out; the
    /// continue token still points past it).
    ShortPage,
    /// A page with one item more than `limit`.
    OversizedPage,
    /// The response carries the continue token the request sent.
    RepeatedContinue,
    /// The response carries a continue token the server cannot decode.
    MalformedContinue,
    /// The request's continue token is treated as expired: 410 Expired with a fresh token.
    ExpiredContinue,
    /// The first item has no `metadata.uid`.
    ItemWithoutUid,
    /// The first item has no `metadata.name`.
    ItemWithoutName,
    /// The first item has no `metadata.resourceVersion`.
    ItemWithoutResourceVersion,
    /// The list's `kind` is wrong (`StatusList` … see `wrong_list_kind` below).
    WrongKind,
    /// The JSON body is cut in half (status 200).
    TruncatedJson,
}

/// The wrong list kind used by [`ListCorruption::WrongKind`]: a real kind of another resource.
pub(crate) fn wrong_list_kind(actual: &str) -> &'static str {
    if actual == "ConfigMapList" {
        "SecretList"
    } else {
        "ConfigMapList"
    }
}

/// What a fault does to the request it hits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum FaultAction {
    /// Answer with this status instead of handling the request. The body is a Status (reason
    /// from the code unless given; message the real server's generic sentence unless given), or
    /// plain text when `plainText` is set (the flow-control 429 shape, with
    /// `Too many requests, please try again later.` as the default text).
    #[serde(rename_all = "camelCase")]
    Status {
        /// HTTP status code.
        code: u16,
        /// Status `reason`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Status `message` or the plain-text body.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// `Retry-After` header (and `details.retryAfterSeconds` in a Status body).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        retry_after_seconds: Option<u32>,
        /// Plain-text body instead of a Status.
        #[serde(default)]
        plain_text: bool,
    },
    /// Wait, then handle the request normally.
    Delay {
        /// Milliseconds.
        millis: u64,
    },
    /// Close the connection (TCP reset) before the request is applied: nothing happens.
    DropBeforeApply,
    /// Apply the request, then close the connection (TCP reset) instead of answering: the client
    /// sees a transport error, but the change was made.
    DropAfterApply,
    /// Corrupt a list response.
    List {
        /// Which corruption.
        corruption: ListCorruption,
    },
    /// Just before the request is handled, change the target object as another client would:
    /// apply `patch` (a merge patch; default: set the annotation
    /// `emulator.rollsafe.dev/concurrent-edit` to a counter) and bump its resourceVersion.
    ConcurrentEdit {
        /// Merge patch to apply.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        patch: Option<Value>,
    },
    /// Just before the request is handled, delete the target object and create it again
    /// (same content, new uid and resourceVersion).
    DeleteAndRecreate,
    /// The request is handled normally, but the workload revision its template change makes
    /// never becomes ready: its pods' containers wait with `reason` and `message` (a
    /// Deployment then exceeds its progress deadline). A request that changes no pod template
    /// marks nothing.
    RolloutFails {
        /// The containers' waiting reason (default `CrashLoopBackOff`).
        #[serde(default = "crash_loop")]
        reason: String,
        /// Its message.
        #[serde(default = "crash_loop_message")]
        message: String,
    },
    /// The stream silently stops, as a half-open connection or a stuck HTTP/2 stream looks to
    /// a client, for as long as the fault stays registered. A watch is answered (status and
    /// headers) but its body then delivers nothing — no events, no bookmarks, no end at its
    /// timeout; once the fault is removed it delivers what it withheld, in order, and goes on
    /// as a normal watch. Any other request is held before it is handled (nothing applied,
    /// nothing answered) until the fault is removed, then handled normally.
    Stall,
}

fn crash_loop() -> String {
    "CrashLoopBackOff".to_owned()
}

fn crash_loop_message() -> String {
    "back-off restarting failed container".to_owned()
}

impl FaultAction {
    /// A Status response with the real server's reason and generic message for `code`.
    pub fn status(code: u16) -> Self {
        Self::Status {
            code,
            reason: None,
            message: None,
            retry_after_seconds: None,
            plain_text: false,
        }
    }

    /// A Status response with a `Retry-After`.
    pub fn status_retry_after(code: u16, seconds: u32) -> Self {
        Self::Status {
            code,
            reason: None,
            message: None,
            retry_after_seconds: Some(seconds),
            plain_text: false,
        }
    }

    /// A plain-text response.
    pub fn plain_text(code: u16, text: &str) -> Self {
        Self::Status {
            code,
            reason: None,
            message: Some(text.to_string()),
            retry_after_seconds: None,
            plain_text: true,
        }
    }

    /// A list corruption.
    pub fn list(corruption: ListCorruption) -> Self {
        Self::List { corruption }
    }

    /// The patched workload's new revision never becomes ready, its containers waiting with
    /// `reason` and `message`.
    pub fn rollout_fails(reason: &str, message: &str) -> Self {
        Self::RolloutFails {
            reason: reason.to_owned(),
            message: message.to_owned(),
        }
    }

    /// A short description for the request log.
    pub fn describe(&self) -> String {
        match self {
            Self::Status {
                code, plain_text, ..
            } => {
                if *plain_text {
                    format!("status {code} (plain text)")
                } else {
                    format!("status {code}")
                }
            }
            Self::Delay { millis } => format!("delay {millis}ms"),
            Self::DropBeforeApply => "drop before apply".into(),
            Self::DropAfterApply => "drop after apply".into(),
            Self::List { corruption } => format!("list {corruption:?}"),
            Self::ConcurrentEdit { .. } => "concurrent edit".into(),
            Self::DeleteAndRecreate => "delete and recreate".into(),
            Self::RolloutFails { reason, .. } => format!("rollout fails ({reason})"),
            Self::Stall => "stall".into(),
        }
    }
}

/// A fault: which requests, and what happens to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// Which requests.
    #[serde(flatten)]
    pub matcher: FaultMatch,
    /// What happens.
    pub action: FaultAction,
}

impl Fault {
    /// Starts a fault on `verb` requests for `resource` (`"*"` matches any).
    pub fn on(verb: &str, resource: &str) -> FaultMatch {
        FaultMatch::new(verb, resource)
    }
}

/// A registered fault and its counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FaultState {
    /// Id to remove it by.
    pub id: u64,
    /// The fault.
    #[serde(flatten)]
    pub fault: Fault,
    /// Matching requests seen.
    pub matched: u32,
    /// Times it fired.
    pub fired: u32,
}

/// Held by a request a [`FaultAction::Stall`] fired on: [`Release::wait`] resolves once the
/// fault is removed (its sender in the table is dropped).
#[derive(Debug, Clone)]
pub(crate) struct Release(watch::Receiver<()>);

impl Release {
    /// Waits until the stall fault is removed.
    pub(crate) async fn wait(mut self) {
        // Nothing is ever sent: `changed` fails once the sender is dropped.
        while self.0.changed().await.is_ok() {}
    }
}

/// A fault that fired on a request.
#[derive(Debug)]
pub(crate) struct Fired {
    /// The fault.
    pub(crate) fault: Fault,
    /// For a stall fault: resolves when the fault is removed.
    pub(crate) release: Option<Release>,
}

/// The table of registered faults.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    next_id: u64,
    faults: Vec<FaultState>,
    /// Per stall fault that fired: the sender its stalled requests wait on, dropped (which
    /// releases them) when the fault is removed.
    stalls: HashMap<u64, watch::Sender<()>>,
}

impl FaultTable {
    /// Registers a fault.
    pub(crate) fn add(&mut self, fault: Fault) -> u64 {
        self.next_id += 1;
        self.faults.push(FaultState {
            id: self.next_id,
            fault,
            matched: 0,
            fired: 0,
        });
        self.next_id
    }

    /// Removes one fault; whether it existed.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let before = self.faults.len();
        self.faults.retain(|f| f.id != id);
        self.stalls.remove(&id);
        before != self.faults.len()
    }

    /// Removes all faults.
    pub(crate) fn clear(&mut self) {
        self.faults.clear();
        self.stalls.clear();
    }

    /// Registered faults.
    pub(crate) fn list(&self) -> Vec<FaultState> {
        self.faults.clone()
    }

    /// Counts the request (acting as `user`) against every fault whose filters match, and
    /// returns those that fire, in registration order.
    pub(crate) fn hit(
        &mut self,
        verb: &str,
        resource: &str,
        namespace: &str,
        name: &str,
        user: &str,
    ) -> Vec<Fired> {
        let mut out = Vec::new();
        for f in &mut self.faults {
            if !f
                .fault
                .matcher
                .filters(verb, resource, namespace, name, user)
            {
                continue;
            }
            f.matched += 1;
            let m = &f.fault.matcher;
            let fires = f.matched >= m.occurrence && (m.times == 0 || f.fired < m.times);
            if fires {
                f.fired += 1;
                let release = matches!(f.fault.action, FaultAction::Stall).then(|| {
                    let sender = self
                        .stalls
                        .entry(f.id)
                        .or_insert_with(|| watch::channel(()).0);
                    Release(sender.subscribe())
                });
                out.push(Fired {
                    fault: f.fault.clone(),
                    release,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_on_the_nth_match_only() {
        let mut t = FaultTable::default();
        t.add(
            Fault::on("patch", "deployments")
                .name("web")
                .nth(2)
                .then(FaultAction::status(500)),
        );
        assert!(t.hit("patch", "deployments", "ns", "web", "u").is_empty());
        assert!(t.hit("patch", "deployments", "ns", "api", "u").is_empty());
        assert_eq!(t.hit("patch", "deployments", "ns", "web", "u").len(), 1);
        assert!(t.hit("patch", "deployments", "ns", "web", "u").is_empty());
    }

    #[test]
    fn always_fires_forever() {
        let mut t = FaultTable::default();
        t.add(
            Fault::on("*", "secrets")
                .always()
                .then(FaultAction::DropBeforeApply),
        );
        for _ in 0..5 {
            assert_eq!(t.hit("get", "secrets", "ns", "s", "u").len(), 1);
        }
        assert!(t.hit("get", "configmaps", "ns", "s", "u").is_empty());
    }

    #[test]
    fn json_shape() {
        let f: Fault = serde_json::from_str(
            r#"{"verb":"list","resource":"deployments","occurrence":2,
                "action":{"type":"list","corruption":"shortPage"}}"#,
        )
        .unwrap_or_else(|_| Fault::on("x", "y").then(FaultAction::DropAfterApply));
        assert_eq!(
            f,
            Fault::on("list", "deployments")
                .nth(2)
                .then(FaultAction::list(ListCorruption::ShortPage))
        );
        let f: Result<Fault, _> = serde_json::from_str(
            r#"{"verb":"patch","action":{"type":"status","code":429,"retryAfterSeconds":2,"plainText":true}}"#,
        );
        assert!(f.is_ok());
        let f: Result<Fault, _> = serde_json::from_str(
            r#"{"verb":"patch","resource":"deployments","namespace":"demo","name":"api-server",
                "action":{"type":"rolloutFails","reason":"CrashLoopBackOff","message":"no key"}}"#,
        );
        assert_eq!(
            f.ok().map(|f| f.action),
            Some(FaultAction::rollout_fails("CrashLoopBackOff", "no key"))
        );
        let text =
            r#"{"verb":"watch","resource":"secrets","user":"replica-b","action":{"type":"stall"}}"#;
        let f: Result<Fault, _> = serde_json::from_str(text);
        let stall = Fault::on("watch", "secrets")
            .user("replica-b")
            .then(FaultAction::Stall);
        assert_eq!(f.as_ref().ok(), Some(&stall));
        let back = serde_json::to_value(&stall).ok();
        assert_eq!(
            back,
            Some(
                serde_json::json!({"verb": "watch", "resource": "secrets", "user": "replica-b",
                "occurrence": 1, "times": 1, "action": {"type": "stall"}})
            )
        );
        // Unset, the user is left out.
        let any = serde_json::to_value(Fault::on("watch", "secrets").then(FaultAction::Stall));
        assert!(any.is_ok_and(|v| v.get("user").is_none()));
        assert_eq!(FaultAction::Stall.describe(), "stall");
    }

    #[test]
    fn a_user_filter_matches_and_counts_that_user_only() {
        let mut t = FaultTable::default();
        t.add(
            Fault::on("watch", "secrets")
                .user("replica-b")
                .then(FaultAction::Stall),
        );
        assert!(t.hit("watch", "secrets", "ns", "", "replica-a").is_empty());
        assert_eq!(t.list()[0].matched, 0, "another user is not counted");
        assert_eq!(t.hit("watch", "secrets", "ns", "", "replica-b").len(), 1);
        assert!(t.hit("watch", "secrets", "ns", "", "replica-b").is_empty());
        assert_eq!((t.list()[0].matched, t.list()[0].fired), (2, 1));
    }

    #[test]
    fn a_stall_is_released_when_its_fault_is_removed() {
        use futures::FutureExt as _;
        let mut t = FaultTable::default();
        let id = t.add(
            Fault::on("get", "secrets")
                .always()
                .then(FaultAction::Stall),
        );
        let other = t.add(Fault::on("get", "secrets").then(FaultAction::status(500)));
        let mut fired = t.hit("get", "secrets", "ns", "s", "u");
        assert_eq!(fired.len(), 2);
        assert!(fired[1].release.is_none(), "only stalls are held");
        let first = fired.remove(0).release;
        let second = t
            .hit("get", "secrets", "ns", "s", "u")
            .pop()
            .and_then(|f| f.release);
        let (Some(first), Some(second)) = (first, second) else {
            panic!("a stall fault fired without a release");
        };
        assert!(first.clone().wait().now_or_never().is_none(), "held");
        assert!(t.remove(other));
        assert!(first.clone().wait().now_or_never().is_none(), "still held");
        assert!(t.remove(id));
        assert!(first.wait().now_or_never().is_some(), "released");
        assert!(second.wait().now_or_never().is_some(), "released");

        t.add(Fault::on("*", "*").then(FaultAction::Stall));
        let held = t
            .hit("get", "secrets", "ns", "s", "u")
            .pop()
            .and_then(|f| f.release);
        assert!(
            held.as_ref()
                .is_some_and(|h| h.clone().wait().now_or_never().is_none())
        );
        t.clear();
        assert!(held.is_some_and(|h| h.wait().now_or_never().is_some()));
    }
}
