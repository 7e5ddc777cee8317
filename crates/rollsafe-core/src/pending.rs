//! Rolls `rollsafe watch` holds, as the workload's `rollsafe.dev/pending` mark says, and
//! approvals: rolls that wait for a person to say "go". Shared by the controller, `rollsafe
//! why`, `rollsafe approve`, the consumers preview and the page.
//!
//! A roll is due, and approval is required — `rollsafe.dev/approval` on the workload or on a
//! changed object, or `--require-approval` for its namespace. The controller marks the workload
//! `rollsafe.dev/pending: approval since=… digest=…` (metadata only) and rolls nothing. A person
//! approves with `rollsafe approve KIND/NAME`, which writes `rollsafe.dev/approved: <digest>`
//! **as that person** (their kubeconfig identity, or `--as`, so Kubernetes RBAC — `patch` on
//! the workload — decides who may approve) in a JSON Patch that first tests the pending mark:
//! what is approved is exactly the roll pending, never a newer one. The controller rolls once
//! while the approved digest is still the one due; a newer change needs a new approval. The
//! roll's patch removes both annotations.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, TestOperation};
use serde_json::Value;

/// The workload-metadata annotation marking a roll the controller holds (a restart window, or
/// an approval): `window until=… digest=…` or `approval since=… digest=…`.
pub const PENDING: &str = "rollsafe.dev/pending";
/// The annotation (workload, Secret, ConfigMap) requiring approval before a roll.
pub const APPROVAL: &str = "rollsafe.dev/approval";
/// The workload-metadata annotation `rollsafe approve` writes: the digest approved.
pub const APPROVED: &str = "rollsafe.dev/approved";
/// The field manager of an approval.
pub const APPROVE_FIELD_MANAGER: &str = "rollsafe-approve";

/// Whether an `rollsafe.dev/approval` value requires approval: every value but `"false"` does
/// (`"required"` is the documented one; a typo fails closed).
pub fn requires(value: Option<&str>) -> bool {
    value.is_some_and(|value| !value.trim().eq_ignore_ascii_case("false"))
}

/// What holds a pending roll.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeldBy {
    /// A restart window ([`crate::window`]).
    Window,
    /// An approval.
    Approval,
}

/// A `rollsafe.dev/pending` mark, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingMark<'a> {
    /// What holds it.
    pub held_by: HeldBy,
    /// The workload digest of the roll held.
    pub digest: &'a str,
    /// `since=` (approval) or `until=` (window), as written.
    pub at: Option<&'a str>,
}

impl<'a> PendingMark<'a> {
    /// Reads a mark: `window until=… digest=…` or `approval since=… digest=…`.
    pub fn parse(mark: &'a str) -> Option<Self> {
        let mut words = mark.split_whitespace();
        let held_by = match words.next()? {
            "window" => HeldBy::Window,
            "approval" => HeldBy::Approval,
            _ => return None,
        };
        let (mut digest, mut at) = (None, None);
        for word in words {
            match word.split_once('=')? {
                ("digest", value) => digest = Some(value),
                ("until" | "since", value) => at = Some(value),
                _ => return None,
            }
        }
        Some(Self {
            held_by,
            digest: digest?,
            at,
        })
    }
}

/// The mark of a roll to `digest` awaiting approval since `since`.
pub fn mark(since: jiff::Timestamp, digest: &str) -> String {
    let since = since.round(jiff::Unit::Second).unwrap_or(since).to_string();
    format!("approval since={since} digest={digest}")
}

/// The patch approving the roll `mark` holds: `test` that the workload's pending mark is
/// exactly `mark`, then set `rollsafe.dev/approved` to its digest. `None` when `mark` is not
/// an approval's.
pub fn approve_document(mark: &str) -> Option<Patch> {
    let read = PendingMark::parse(mark)?;
    if read.held_by != HeldBy::Approval {
        return None;
    }
    let path = |key: &str| PointerBuf::from_tokens(["metadata", "annotations", key]);
    Some(Patch(vec![
        PatchOperation::Test(TestOperation {
            path: path(PENDING),
            value: Value::String(mark.to_owned()),
        }),
        PatchOperation::Add(AddOperation {
            path: path(APPROVED),
            value: Value::String(read.digest.to_owned()),
        }),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn what_requires_approval() {
        for (value, required) in [
            (None, false),
            (Some("required"), true),
            (Some(" Required "), true),
            (Some("requird"), true),
            (Some("false"), false),
            (Some("FALSE"), false),
        ] {
            assert_eq!(requires(value), required, "{value:?}");
        }
    }

    #[test]
    fn marks_and_the_approval_patch() {
        let since: jiff::Timestamp = "2026-12-03T06:00:00.25Z".parse().unwrap();
        let written = mark(since, "v1:abc");
        assert_eq!(written, "approval since=2026-12-03T06:00:00Z digest=v1:abc");
        assert_eq!(
            PendingMark::parse(&written),
            Some(PendingMark {
                held_by: HeldBy::Approval,
                digest: "v1:abc",
                at: Some("2026-12-03T06:00:00Z"),
            })
        );
        assert_eq!(
            PendingMark::parse("window until=- digest=v1:d").map(|m| (m.held_by, m.digest)),
            Some((HeldBy::Window, "v1:d"))
        );
        for bad in [
            "",
            "approval",
            "approval since=x",
            "other digest=v1:a",
            "approval x",
        ] {
            assert_eq!(PendingMark::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            serde_json::to_value(approve_document(&written).unwrap()).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/annotations/rollsafe.dev~1pending", "value": written},
                {"op": "add", "path": "/metadata/annotations/rollsafe.dev~1approved", "value": "v1:abc"}
            ])
        );
        assert_eq!(approve_document("window until=- digest=v1:d"), None);
    }
}
