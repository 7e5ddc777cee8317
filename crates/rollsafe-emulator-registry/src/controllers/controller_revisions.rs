//! The StatefulSet and DaemonSet controllers' ControllerRevisions, so `kubectl rollout history`
//! and `rollout undo` work for them as for Deployments: one revision per distinct pod template,
//! named `<name>-<hash>`, owned by the workload (controller reference), labelled with the
//! template's labels and `controller.kubernetes.io/hash`, holding in `data` the strategic merge
//! patch that restores the template (`{"spec":{"template":{…,"$patch":"replace"}}}`, what
//! kubectl applies on undo) and numbered by `revision`.
//!
//! On every write of the workload, the revision of its current template becomes the newest —
//! created, or renumbered when an older template came back (a rollback); beyond
//! `revisionHistoryLimit` (default 10) the oldest are deleted. Deleting the workload deletes its
//! revisions. A new revision carries the workload's annotations, as the real controllers copy
//! them (so `kubectl rollout history` shows `kubernetes.io/change-cause`).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::store::{Store, meta_str};
use crate::strategy::workloads::template_hash;
use rollsafe_emulator_types::resources::{ResId, ids};

/// The label with the template's hash.
const HASH_LABEL: &str = "controller.kubernetes.io/hash";

/// The patch a revision holds: the workload's template, to be put back whole.
fn restore_patch(workload: &Value) -> Value {
    let mut template = workload
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    template["$patch"] = json!("replace");
    json!({"spec": {"template": template}})
}

fn owned_by(revision: &Value, uid: &str) -> bool {
    revision
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(uid)
                    && r.get("controller") == Some(&Value::Bool(true))
            })
        })
}

fn number(revision: &Value) -> i64 {
    revision
        .get("revision")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

/// Brings the ControllerRevisions of a StatefulSet or DaemonSet (`kind`) in line with it.
pub fn sync(store: &mut Store, kind: &str, workload: &Value) {
    let (Some(ns), Some(uid), Some(name)) = (
        meta_str(workload, "namespace"),
        meta_str(workload, "uid"),
        meta_str(workload, "name"),
    ) else {
        return;
    };
    let (ns, name) = (ns.to_owned(), name.to_owned());
    let data = restore_patch(workload);
    let owned: Vec<Arc<Value>> = store
        .named_with_prefix(ids::CONTROLLERREVISIONS, &ns, &format!("{name}-"))
        .into_iter()
        .filter(|r| owned_by(r, uid))
        .collect();
    let newest = owned.iter().map(|r| number(r)).max().unwrap_or(0);
    let existing = owned
        .iter()
        .map(|r| &**r)
        .find(|r| r.get("data") == Some(&data));
    let wanted = match existing {
        Some(r) if number(r) == newest => return,
        _ => newest + 1,
    };
    let hash = template_hash(workload);
    let revision_name = existing
        .and_then(|r| meta_str(r, "name"))
        .map_or_else(|| format!("{name}-{hash}"), str::to_owned);
    let mut labels = workload
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    labels[HASH_LABEL] = json!(hash);
    // As the StatefulSet and DaemonSet controllers do, a new revision carries the
    // workload's annotations (`kubernetes.io/change-cause` is what `rollout history`
    // shows); a revision brought back keeps its own.
    let annotations = existing
        .map_or(workload, |r| r)
        .pointer("/metadata/annotations")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let revision = json!({
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": revision_name,
            "namespace": ns,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "data": data,
        "revision": wanted,
    });
    store.put_controlled(
        ids::CONTROLLERREVISIONS,
        &ns,
        &revision_name,
        revision,
        existing,
    );
}

/// Whether writes of `res` keep ControllerRevisions, and the owner kind they name.
pub fn revisioned_kind(res: ResId) -> Option<&'static str> {
    match res {
        ids::STATEFULSETS => Some("StatefulSet"),
        ids::DAEMONSETS => Some("DaemonSet"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_holds_the_patch_that_puts_the_template_back() {
        let sts = json!({"spec": {"template": {"metadata": {"labels": {"app": "db"}},
                                                "spec": {"containers": [{"name": "c"}]}}}});
        assert_eq!(
            restore_patch(&sts),
            json!({"spec": {"template": {"$patch": "replace",
                                          "metadata": {"labels": {"app": "db"}},
                                          "spec": {"containers": [{"name": "c"}]}}}})
        );
    }
}
