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
//!
//! **A restart settles a hold.** A restart of the workload by anything else — the Restart
//! Consumers API, the page, `rollsafe restart-consumers` — rolls its pods with the content the
//! hold was for, so the same patch settles the hold ([`Hold`], used by the core's restart patch,
//! [`crate::patch::RestartPatch::document_settling`]): as the controller's own roll does, the
//! pod template's `rollsafe.dev/config-hash` and the metadata `rollsafe.dev/config-record` are
//! set to the held digest, and `rollsafe.dev/pending` and `rollsafe.dev/approved` are removed.
//! The controller then finds the record matching what the workload consumes and rolls nothing
//! when the window opens, and there is nothing left to approve: the same content is never
//! rolled twice. The record is the workload digest alone (the mark does not carry the
//! per-object part), which the controller compares by its digest; its next roll writes the
//! full record again.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation, RemoveOperation, TestOperation};
use serde_json::Value;

use crate::annotations::{APPROVED, CONFIG_HASH, CONFIG_RECORD, PENDING};

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

/// A roll `rollsafe watch` holds on a workload (its `rollsafe.dev/pending` mark), as read from
/// the listed object a restart patches: what the restart's patch settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// What holds it.
    held_by: HeldBy,
    /// The workload digest of the roll held.
    digest: String,
    /// The workload carries `rollsafe.dev/approved` too.
    approved: bool,
}

impl Hold {
    /// The hold `object` carries: a `rollsafe.dev/pending` mark that reads, in a metadata
    /// annotations map. `None` otherwise (a mark that does not read is left as it is).
    pub fn of(object: &Value) -> Option<Self> {
        let annotations = object.pointer("/metadata/annotations")?.as_object()?;
        let mark = PendingMark::parse(annotations.get(PENDING)?.as_str()?)?;
        Some(Self {
            held_by: mark.held_by,
            digest: mark.digest.to_owned(),
            approved: annotations.contains_key(APPROVED),
        })
    }

    /// What held the roll.
    pub fn held_by(&self) -> HeldBy {
        self.held_by
    }

    /// The workload digest of the roll held.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The operations that settle it, as the controller's roll does: the pod template's
    /// `rollsafe.dev/config-hash` and the metadata `rollsafe.dev/config-record` set to the held
    /// digest, the mark removed, and an approval removed (it approved that roll only).
    /// `template` is the pointer of the pod template's annotations map, which must exist when
    /// these apply (they follow the restart annotation's `add`, which creates it).
    pub fn settlement(&self, template_annotations: &[&str]) -> Vec<PatchOperation> {
        let metadata = |key: &str| PointerBuf::from_tokens(["metadata", "annotations", key]);
        let digest = Value::String(self.digest.clone());
        let mut operations = vec![
            PatchOperation::Add(AddOperation {
                path: PointerBuf::from_tokens(
                    template_annotations.iter().copied().chain([CONFIG_HASH]),
                ),
                value: digest.clone(),
            }),
            PatchOperation::Add(AddOperation {
                path: metadata(CONFIG_RECORD),
                value: digest,
            }),
            PatchOperation::Remove(RemoveOperation {
                path: metadata(PENDING),
            }),
        ];
        if self.approved {
            operations.push(PatchOperation::Remove(RemoveOperation {
                path: metadata(APPROVED),
            }));
        }
        operations
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
