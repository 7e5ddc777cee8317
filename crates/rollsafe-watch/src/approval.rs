//! Approvals in the controller: a due roll that needs one waits, marked pending, until
//! `rollsafe approve` writes it. The marks, the approval patch and what requires approval are
//! the core's ([`rollsafe_core::pending`]), shared with `rollsafe why`, `rollsafe approve`, the
//! consumers preview and the page.

use std::collections::BTreeSet;

use crate::cache::{Cache, SourceKey, WorkloadEntry, WorkloadKey};

pub use rollsafe_core::pending::{
    APPROVE_FIELD_MANAGER, HeldBy, PendingMark, approve_document, mark, requires,
};

/// Whether a roll of `key` for `changed` needs an approval: the workload's or a changed
/// object's `rollsafe.dev/approval`, or `--require-approval` (`namespaces`) for its namespace.
pub fn required(
    cache: &Cache,
    key: &WorkloadKey,
    entry: &WorkloadEntry,
    changed: &BTreeSet<SourceKey>,
    namespaces: &[String],
) -> bool {
    entry.approval
        || namespaces
            .iter()
            .any(|namespace| *namespace == key.namespace)
        || changed.iter().any(|source| {
            cache
                .source_entry(source)
                .is_some_and(|found| found.approval)
        })
}

/// The `Pending` Event's note of a roll awaiting approval, for changes to `names`
/// (`Secret/db, ConfigMap/settings`; empty when not known), naming the command that approves.
pub fn awaiting_note(key: &WorkloadKey, names: &str) -> String {
    let changes = if names.is_empty() {
        String::new()
    } else {
        format!(" for changes to {names}")
    };
    format!(
        "Roll{changes} awaits approval: rollsafe approve -n {} {}/{}",
        key.namespace,
        key.kind.as_str().to_ascii_lowercase(),
        key.name
    )
}
