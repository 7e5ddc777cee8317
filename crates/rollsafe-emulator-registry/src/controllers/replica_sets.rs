//! The deployment controller's ReplicaSets, so `kubectl rollout history` and `rollout undo`
//! have something to read: one ReplicaSet per distinct pod template of a Deployment, named
//! `<name>-<pod-template-hash>`, owned by it (controller reference), labelled and selected with
//! the hash, and numbered by `deployment.kubernetes.io/revision`.
//!
//! On every write of a Deployment that is not paused, the ReplicaSet of its current template
//! becomes the newest revision — created, or renumbered when an older revision's template came
//! back (a rollback) — with all the replicas; every other one is scaled to 0. While paused, no
//! ReplicaSet is created and revisions stay (the real controller's `sync` without creating).
//! Old ReplicaSets beyond `revisionHistoryLimit` (default 10) are deleted, oldest first.
//! Deleting a Deployment deletes its ReplicaSets (the garbage collector's background cascade).
//! The current ReplicaSet's revision is the Deployment's own `deployment.kubernetes.io/revision`.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::store::{Store, meta_str};
use crate::strategy::workloads::replica_set_name;
use rollsafe_emulator_types::resources::ids;

/// The revision annotation.
pub const REVISION: &str = "deployment.kubernetes.io/revision";
/// The label that ties a ReplicaSet and its pods to one template.
pub const HASH_LABEL: &str = "pod-template-hash";
/// The default `revisionHistoryLimit` of workloads.
pub const DEFAULT_HISTORY_LIMIT: u64 = 10;
/// The Deployment annotation copied to the ReplicaSet (what `rollout history` shows).
const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// An object's `deployment.kubernetes.io/revision`, 0 when absent or not a number.
pub(crate) fn revision(rs: &Value) -> u64 {
    rs.pointer("/metadata/annotations")
        .and_then(|a| a.get(REVISION))
        .and_then(Value::as_str)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn owned_by(rs: &Value, uid: &str) -> bool {
    rs.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter().any(|r| {
                r.get("uid").and_then(Value::as_str) == Some(uid)
                    && r.get("controller") == Some(&Value::Bool(true))
            })
        })
}

/// Whether a ReplicaSet's template is `template`, the hash label aside (compared in place:
/// this runs on every Deployment write).
pub(crate) fn same_template(rs: &Value, template: Option<&Value>) -> bool {
    let (Some(Value::Object(own)), Some(Value::Object(template))) =
        (rs.pointer("/spec/template"), template)
    else {
        return false;
    };
    if own.len() != template.len() {
        return false;
    }
    own.iter()
        .all(|(key, value)| match (key.as_str(), template.get(key)) {
            ("metadata", Some(Value::Object(theirs))) => {
                let Value::Object(ours) = value else {
                    return false;
                };
                ours.len() == theirs.len()
                    && ours.iter().all(|(k, v)| match (k.as_str(), theirs.get(k)) {
                        ("labels", Some(Value::Object(their_labels))) => {
                            let Value::Object(our_labels) = v else {
                                return false;
                            };
                            our_labels.len() == their_labels.len() + 1
                                && our_labels
                                    .iter()
                                    .filter(|(label, _)| label.as_str() != HASH_LABEL)
                                    .all(|(label, l)| their_labels.get(label) == Some(l))
                        }
                        (_, theirs) => theirs == Some(v),
                    })
            }
            (_, theirs) => theirs == Some(value),
        })
}

fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

/// The ReplicaSet of `deployment`'s current template, at `revision` with `replicas`.
fn replica_set(deployment: &Value, name: &str, revision: u64, replicas: i64) -> Value {
    let hash = name
        .rsplit_once('-')
        .map(|(_, hash)| hash)
        .unwrap_or_default();
    let mut template = deployment
        .pointer("/spec/template")
        .cloned()
        .unwrap_or_else(|| json!({}));
    template["metadata"]["labels"][HASH_LABEL] = json!(hash);
    let labels = template["metadata"]["labels"].clone();
    let mut selector = deployment
        .pointer("/spec/selector")
        .cloned()
        .unwrap_or_else(|| json!({}));
    selector["matchLabels"][HASH_LABEL] = json!(hash);
    let mut annotations = Map::new();
    annotations.insert(REVISION.into(), json!(revision.to_string()));
    annotations.insert(
        "deployment.kubernetes.io/desired-replicas".into(),
        json!(replicas.to_string()),
    );
    if let Some(cause) = deployment
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(CHANGE_CAUSE))
    {
        annotations.insert(CHANGE_CAUSE.into(), cause.clone());
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": meta_str(deployment, "namespace").unwrap_or(""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "name": meta_str(deployment, "name").unwrap_or(""),
                "uid": meta_str(deployment, "uid").unwrap_or(""),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
        "status": {"replicas": replicas, "fullyLabeledReplicas": replicas,
                   "readyReplicas": replicas, "availableReplicas": replicas,
                   "observedGeneration": 1},
    })
}

/// Brings `deployment`'s ReplicaSets in line with it, as its controller would; whether it
/// created the ReplicaSet of the current template. `rolling`: the rollout scales them step
/// by step (`rollout_sim`), so a new ReplicaSet starts at 0 replicas, the others keep
/// theirs, and only old ones scaled to 0 are cleaned up; else the current one has all the
/// replicas at once and every other one none.
pub fn sync(store: &mut Store, deployment: &Value, rolling: bool) -> bool {
    let (Some(ns), Some(uid)) = (
        meta_str(deployment, "namespace"),
        meta_str(deployment, "uid"),
    ) else {
        return false;
    };
    let ns = ns.to_owned();
    let prefix = format!("{}-", meta_str(deployment, "name").unwrap_or(""));
    let owned: Vec<Arc<Value>> = store
        .named_with_prefix(ids::REPLICASETS, &ns, &prefix)
        .into_iter()
        .filter(|rs| owned_by(rs, uid))
        .collect();
    let paused = deployment.pointer("/spec/paused") == Some(&Value::Bool(true));
    // The ReplicaSet of this template, compared without the hash label (the controller's
    // `EqualIgnoreHash`): a rollback finds the revision it came from.
    let existing = owned
        .iter()
        .find(|rs| same_template(rs, deployment.pointer("/spec/template")));
    let current = existing
        .and_then(|rs| meta_str(rs, "name"))
        .map_or_else(|| replica_set_name(deployment), str::to_owned);
    let existing = existing.map(|rs| &**rs);
    if paused && existing.is_none() {
        return false;
    }
    // The Deployment's own revision (its strategy counts the rolls) is the current
    // ReplicaSet's, so `rollout history` and the Deployment agree.
    let newest = owned.iter().map(|rs| revision(rs)).max().unwrap_or(0);
    let wanted_revision = match (existing, revision(deployment)) {
        (Some(rs), _) if paused => revision(rs),
        (_, 0) => newest + 1,
        (_, own) => own,
    };
    let cause = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(CHANGE_CAUSE))
            .cloned()
    };
    // Rolling, the rollout scales the ReplicaSets; a new one starts empty.
    let wanted_replicas = if rolling {
        existing.map_or(0, replicas)
    } else {
        replicas(deployment)
    };
    let up_to_date = existing.is_some_and(|rs| {
        revision(rs) == wanted_revision
            && replicas(rs) == wanted_replicas
            && cause(rs) == cause(deployment)
    });
    if !up_to_date {
        let mut want = replica_set(deployment, &current, wanted_revision, wanted_replicas);
        if rolling && let Some(rs) = existing {
            // Its pods are what they are: the rollout writes the status it counts.
            want["status"] = rs.get("status").cloned().unwrap_or_else(|| json!({}));
        }
        store.put_controlled(ids::REPLICASETS, &ns, &current, want, existing);
    }
    if paused {
        return existing.is_none();
    }
    let mut old: Vec<&Value> = owned
        .iter()
        .map(|rs| &**rs)
        .filter(|rs| meta_str(rs, "name") != Some(&current))
        .collect();
    // `revisionHistoryLimit`: the oldest of the old ReplicaSets beyond it are deleted (only
    // those scaled to 0, while rolling).
    old.sort_by_key(|rs| revision(rs));
    let limit = deployment
        .pointer("/spec/revisionHistoryLimit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_HISTORY_LIMIT);
    let (mut cleanable, _scaling): (Vec<&Value>, Vec<&Value>) = old
        .into_iter()
        .partition(|rs| !rolling || replicas(rs) == 0);
    let excess = cleanable
        .len()
        .saturating_sub(usize::try_from(limit).unwrap_or(usize::MAX));
    for rs in cleanable.drain(..excess) {
        let name = meta_str(rs, "name").unwrap_or("").to_owned();
        store.remove_controlled(&(ids::REPLICASETS, ns.clone(), name));
    }
    if rolling {
        return existing.is_none();
    }
    for rs in cleanable {
        if replicas(rs) != 0 {
            let mut scaled = rs.clone();
            scaled["spec"]["replicas"] = json!(0);
            for field in [
                "replicas",
                "fullyLabeledReplicas",
                "readyReplicas",
                "availableReplicas",
            ] {
                scaled["status"][field] = json!(0);
            }
            let name = meta_str(rs, "name").unwrap_or("").to_owned();
            store.put_controlled(ids::REPLICASETS, &ns, &name, scaled, Some(rs));
        }
    }
    existing.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_set_carries_the_hash_the_owner_and_the_revision() {
        let deployment = json!({"metadata": {"name": "web", "namespace": "shop", "uid": "u1",
                                              "annotations": {CHANGE_CAUSE: "bump"}},
                                 "spec": {"replicas": 3,
                                          "selector": {"matchLabels": {"app": "web"}},
                                          "template": {"metadata": {"labels": {"app": "web"}},
                                                       "spec": {"containers": [{"name": "c"}]}}}});
        let name = replica_set_name(&deployment);
        let rs = replica_set(&deployment, &name, 2, 3);
        assert!(same_template(&rs, deployment.pointer("/spec/template")));
        let hash = name.strip_prefix("web-").unwrap();
        assert_eq!(
            rs["metadata"]["labels"],
            json!({"app": "web", HASH_LABEL: hash})
        );
        assert_eq!(rs["spec"]["selector"]["matchLabels"][HASH_LABEL], hash);
        assert_eq!(
            rs["spec"]["template"]["metadata"]["labels"][HASH_LABEL],
            hash
        );
        assert_eq!(revision(&rs), 2);
        assert!(owned_by(&rs, "u1") && !owned_by(&rs, "u2"));
        assert_eq!(rs["metadata"]["annotations"][CHANGE_CAUSE], "bump");
    }
}
