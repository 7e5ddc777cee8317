//! The emulator's own filter, after authorization: faults registered by tests fire here (error
//! statuses, delays, dropped connections, list corruptions, concurrent edits; a stall holds the
//! request in `filters/mod.rs`, or the watch stream in `handlers/watch.rs`).

use serde_json::{Value, json};

use crate::faults::{Fault, FaultAction};
use crate::state::Shared;
use rollsafe_emulator_registry::controllers::rollout_sim::Failure;
use rollsafe_emulator_registry::store::{Preconditions, UpdateMode};
use rollsafe_emulator_types::resources::{ResId, def};
use rollsafe_emulator_types::status::{self, StatusError};

pub(crate) fn fault_target(fault: &Fault, ns: &str, name: &str) -> (String, String) {
    let tns = if ns.is_empty() {
        fault.matcher.namespace.clone().unwrap_or_default()
    } else {
        ns.to_string()
    };
    let tname = if name.is_empty() {
        fault.matcher.name.clone().unwrap_or_default()
    } else {
        name.to_string()
    };
    (tns, tname)
}

pub(crate) fn status_fault(action: &FaultAction) -> StatusError {
    let FaultAction::Status {
        code,
        reason,
        message,
        retry_after_seconds,
        plain_text,
    } = action
    else {
        return StatusError::internal("not a status fault");
    };
    let e = if *plain_text {
        let default = if *code == 429 {
            "Too many requests, please try again later."
        } else {
            status::generic_message(*code)
        };
        StatusError::plain(*code, message.as_deref().unwrap_or(default))
    } else {
        StatusError::new(
            *code,
            reason.as_deref().unwrap_or(status::reason_for(*code)),
            message.as_deref().unwrap_or(status::generic_message(*code)),
            None,
        )
    };
    e.with_retry_after(retry_after_seconds.unwrap_or(0))
}

pub(crate) fn concurrent_edit(
    shared: &Shared,
    res: ResId,
    ns: &str,
    name: &str,
    patch: Option<&Value>,
) {
    let mut store = shared.store();
    let Some(current) = store.get(res, ns, name).cloned() else {
        tracing::warn!(ns, name, "concurrent-edit fault: no such object");
        return;
    };
    let n = shared
        .edit_counter
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let patch = patch.cloned().unwrap_or_else(|| {
        json!({"metadata": {"annotations": {"emulator.rollsafe.dev/concurrent-edit": n.to_string()}}})
    });
    let mut edited = (*current).clone();
    json_patch::merge(&mut edited, &patch);
    if let Err(e) = store.update(res, ns, name, edited, UpdateMode::Force) {
        tracing::warn!(%e, "concurrent-edit fault failed");
    }
}

/// Marks the revision the request's template change will make as failing; whether there was
/// a workload to mark.
pub(crate) fn fail_next_revision(
    shared: &Shared,
    res: ResId,
    ns: &str,
    name: &str,
    reason: &str,
    message: &str,
) -> bool {
    if name.is_empty() || !rollsafe_emulator_registry::strategy::is_workload(def(res)) {
        tracing::warn!(ns, name, "rollout-fails fault: not a workload");
        return false;
    }
    let failure = Failure {
        reason: reason.to_owned(),
        message: message.to_owned(),
    };
    shared.store().fail_next_revision(res, ns, name, failure);
    true
}

pub(crate) fn delete_and_recreate(shared: &Shared, res: ResId, ns: &str, name: &str) {
    let mut store = shared.store();
    let Some(current) = store.get(res, ns, name).cloned() else {
        tracing::warn!(ns, name, "delete-and-recreate fault: no such object");
        return;
    };
    if let Err(e) = store.delete(res, ns, name, &Preconditions::default()) {
        tracing::warn!(%e, "delete-and-recreate fault: delete failed");
        return;
    }
    let mut copy = (*current).clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
            meta.remove(field);
        }
    }
    if let Some(o) = copy.as_object_mut() {
        o.remove("status");
    }
    if let Err(e) = store.create(res, copy) {
        tracing::warn!(%e, "delete-and-recreate fault: create failed");
    }
}
