//! Deletion as the generic registry and the garbage collector do it.
//!
//! - An object with `metadata.finalizers` is not removed by a DELETE: it is marked
//!   (`deletionTimestamp`, `deletionGracePeriodSeconds: 0`) and stays until an update removes
//!   its last finalizer; then that update removes it (watchers see `DELETED`). While it is
//!   being deleted no finalizer may be added.
//! - `propagationPolicy` decides what happens to its dependents (objects whose
//!   `ownerReferences` name its uid): `Background` (the default) removes the owner and then
//!   each dependent; `Foreground` marks the owner with the `foregroundDeletion` finalizer,
//!   deletes the dependents, then lifts the finalizer; `Orphan` marks it with `orphan`, removes
//!   the owner reference from each dependent, then lifts the finalizer. The real garbage
//!   collector does its part moments later; here it is done before the DELETE is answered.
//! - A namespace's deletion deletes what it holds; while anything in it is still held by a
//!   finalizer, the namespace stays `Terminating` and refuses new content, and it goes with the
//!   last of it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{EventType, Key, Preconditions, Store, Write, meta_mut, meta_str};
use rollsafe_emulator_types::resources::{self, ResId, def, ids};
use rollsafe_emulator_types::status::{FieldCause, StatusError};
use rollsafe_emulator_types::util;

/// The garbage collector's finalizer of a foreground deletion.
pub const FOREGROUND: &str = "foregroundDeletion";
/// The garbage collector's finalizer of an orphaning deletion.
pub const ORPHAN: &str = "orphan";

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// The owner goes now, its dependents after it.
    #[default]
    Background,
    /// The dependents go first; the owner waits for them.
    Foreground,
    /// The dependents stay, without their owner reference.
    Orphan,
}

impl Propagation {
    /// `propagationPolicy` (or the deprecated `orphanDependents: true`) of a DeleteOptions
    /// body, or the query; an unknown policy is the real 422.
    pub fn of(options: &Value, query: Option<&str>) -> Result<Self, StatusError> {
        let policy = options
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .or(query);
        match policy {
            None => Ok(
                if options.get("orphanDependents") == Some(&Value::Bool(true)) {
                    Self::Orphan
                } else {
                    Self::Background
                },
            ),
            Some("Background") => Ok(Self::Background),
            Some("Foreground") => Ok(Self::Foreground),
            Some("Orphan") => Ok(Self::Orphan),
            Some(other) => {
                let detail = format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                );
                Err(StatusError::new(
                    422,
                    "Invalid",
                    &format!(
                        "DeleteOptions.meta.k8s.io \"\" is invalid: propagationPolicy: {detail}"
                    ),
                    Some(json!({"group": "meta.k8s.io", "kind": "DeleteOptions",
                        "causes": [{"reason": "FieldValueNotSupported", "message": detail, "field": "propagationPolicy"}]})),
                ))
            }
        }
    }
}

/// What a DELETE did.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone (its last state).
    Gone(Arc<Value>),
    /// The object is marked for deletion and held by finalizers (its state now).
    Marked(Arc<Value>),
}

impl Deleted {
    /// The object, gone or marked.
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Self::Gone(obj) | Self::Marked(obj) => obj,
        }
    }
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the object is marked for deletion.
pub fn is_deleting(obj: &Value) -> bool {
    obj.pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null())
}

/// `ValidateObjectMetaUpdate`'s rule for an object being deleted: no new finalizers.
pub fn check_no_new_finalizers(old: &Value, new: &Value) -> Option<FieldCause> {
    if !is_deleting(old) {
        return None;
    }
    let before = finalizers(old);
    let added: Vec<String> = finalizers(new)
        .into_iter()
        .filter(|f| !before.contains(f))
        .collect();
    if added.is_empty() {
        return None;
    }
    let shown: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    Some(FieldCause::forbidden(
        "metadata.finalizers",
        &format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            shown.join(", ")
        ),
    ))
}

/// The refusal of a create in a namespace being deleted.
pub fn namespace_terminating(resource: &str, name: &str, ns: &str) -> StatusError {
    StatusError::new(
        403,
        "Forbidden",
        &format!(
            "{resource} {name:?} is forbidden: unable to create new content in namespace {ns} because it is being terminated"
        ),
        Some(json!({"name": name, "kind": resource, "causes": [{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {ns} is being terminated"),
            "field": "metadata.namespace"}]})),
    )
}

impl Store {
    /// DELETE of one object: preconditions, then removal or marking as the finalizers and the
    /// propagation policy say. A dry run checks and answers, keeping nothing.
    pub fn delete_object(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        propagation: Propagation,
        write: Write,
    ) -> Result<Deleted, StatusError> {
        let d = def(res);
        let key: Key = (res, ns.to_owned(), name.to_owned());
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(StatusError::not_found(d, name));
        };
        check_preconditions(d, name, &old, pre)?;
        let mut held = finalizers(&old);
        match propagation {
            Propagation::Foreground if !held.iter().any(|f| f == FOREGROUND) => {
                held.push(FOREGROUND.to_owned());
            }
            Propagation::Orphan if !held.iter().any(|f| f == ORPHAN) => {
                held.push(ORPHAN.to_owned());
            }
            _ => {}
        }
        if held.is_empty() {
            if write == Write::DryRun {
                return Ok(Deleted::Gone(old));
            }
            return Ok(self.remove_with_dependents(&key, &old));
        }
        let mut marked = (*old).clone();
        {
            let meta = meta_mut(&mut marked);
            if !is_deleting(&old) {
                meta.insert("deletionTimestamp".into(), json!(util::now_seconds()));
                meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            meta.insert("finalizers".into(), json!(held));
        }
        if write == Write::DryRun {
            return Ok(Deleted::Marked(Arc::new(marked)));
        }
        let marked = self.replace_held(&key, marked, &old);
        // The garbage collector's part.
        let uid = meta_str(&old, "uid").unwrap_or("").to_owned();
        if held.iter().any(|f| f == FOREGROUND) {
            self.delete_dependents(res, ns, &uid);
            self.lift_finalizer(&key, FOREGROUND);
        }
        if held.iter().any(|f| f == ORPHAN) {
            for dependent in self.dependents(res, ns, &uid) {
                self.orphan(&dependent, &uid);
            }
            self.lift_finalizer(&key, ORPHAN);
        }
        Ok(Deleted::Marked(marked))
    }

    /// Stores a changed marking of a held object (new resourceVersion, `MODIFIED`).
    fn replace_held(&mut self, key: &Key, mut obj: Value, old: &Arc<Value>) -> Arc<Value> {
        if let Some(rv) = old.pointer("/metadata/resourceVersion") {
            meta_mut(&mut obj).insert("resourceVersion".into(), rv.clone());
        }
        if obj == **old {
            return old.clone();
        }
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let stored = Arc::new(obj);
        self.objects.insert(key.clone(), stored.clone());
        self.emit(
            key.0,
            &key.1,
            EventType::Modified,
            stored.clone(),
            Some(old.clone()),
            rv,
        );
        stored
    }

    /// Removes `finalizer` from a held object; the object goes with its last finalizer.
    fn lift_finalizer(&mut self, key: &Key, finalizer: &str) {
        let Some(old) = self.objects.get(key).cloned() else {
            return;
        };
        let rest: Vec<String> = finalizers(&old)
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        if rest.is_empty() {
            self.remove_with_dependents(key, &old);
            return;
        }
        let mut next = (*old).clone();
        meta_mut(&mut next).insert("finalizers".into(), json!(rest));
        self.replace_held(key, next, &old);
    }

    /// The objects in `ns` (or cluster-scoped, for a cluster-scoped owner) whose owner
    /// references name `uid`.
    /// The garbage collector's background deletion of every dependent of the owner `uid`.
    fn delete_dependents(&mut self, owner: ResId, ns: &str, uid: &str) {
        for (res, ns, name) in self.dependents(owner, ns, uid) {
            let _ = self.delete_object(
                res,
                &ns,
                &name,
                &Preconditions::default(),
                Propagation::Background,
                Write::Commit,
            );
        }
    }

    fn dependents(&self, owner: ResId, ns: &str, uid: &str) -> Vec<Key> {
        if uid.is_empty() {
            return Vec::new();
        }
        let scope = def(owner).namespaced.then_some(ns);
        resources::stored_ids()
            .filter(|res| def(*res).namespaced == scope.is_some())
            .flat_map(|res| {
                self.range(res, scope, None)
                    .filter(|(_, obj)| owned_by(obj, uid))
                    .map(|(k, _)| k.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Drops the owner reference to `uid` from a dependent.
    fn orphan(&mut self, key: &Key, uid: &str) {
        let Some(old) = self.objects.get(key).cloned() else {
            return;
        };
        let mut next = (*old).clone();
        let meta = meta_mut(&mut next);
        let remaining: Vec<Value> = meta
            .get("ownerReferences")
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .filter(|r| r.get("uid").and_then(Value::as_str) != Some(uid))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        if remaining.is_empty() {
            meta.remove("ownerReferences");
        } else {
            meta.insert("ownerReferences".into(), json!(remaining));
        }
        self.replace_held(key, next, &old);
    }

    /// Removes the object now, then what it owns (background propagation); a namespace first
    /// deletes its content and waits for any that finalizers hold.
    pub fn remove_with_dependents(&mut self, key: &Key, old: &Arc<Value>) -> Deleted {
        let (res, ns, name) = key.clone();
        if res == ids::NAMESPACES {
            let inside: Vec<Key> = self
                .objects
                .keys()
                .filter(|(r, n, _)| *r != ids::NAMESPACES && *n == name)
                .cloned()
                .collect();
            for k in inside {
                let _ = self.delete_object(
                    k.0,
                    &k.1,
                    &k.2,
                    &Preconditions::default(),
                    Propagation::Background,
                    Write::Commit,
                );
            }
            if self.holds_anything(&name) {
                let mut marked = (**old).clone();
                meta_mut(&mut marked)
                    .entry("deletionTimestamp")
                    .or_insert_with(|| json!(util::now_seconds()));
                if let Some(obj) = marked.as_object_mut() {
                    obj.insert("status".into(), json!({"phase": "Terminating"}));
                }
                return Deleted::Marked(self.replace_held(key, marked, old));
            }
        }
        let Some(removed) = self.remove_key(key) else {
            return Deleted::Gone(old.clone());
        };
        if Self::is_definition(res) {
            self.withdraw_definitions(&name);
        }
        if let Some(uid) = meta_str(old, "uid") {
            self.delete_dependents(res, &ns, uid);
        }
        // The last object of a terminating namespace lets it go.
        if res != ids::NAMESPACES
            && !ns.is_empty()
            && let Some(namespace) = self.get(ids::NAMESPACES, "", &ns).cloned()
            && is_deleting(&namespace)
            && !self.holds_anything(&ns)
        {
            self.remove_key(&(ids::NAMESPACES, String::new(), ns.clone()));
        }
        Deleted::Gone(removed)
    }

    /// Whether anything is left in namespace `ns`.
    fn holds_anything(&self, ns: &str) -> bool {
        self.objects
            .keys()
            .any(|(r, n, _)| *r != ids::NAMESPACES && n == ns)
    }

    /// Whether `ns` is being deleted.
    pub fn namespace_terminating(&self, ns: &str) -> bool {
        self.get(ids::NAMESPACES, "", ns)
            .is_some_and(|namespace| is_deleting(namespace))
    }
}

fn check_preconditions(
    d: &rollsafe_emulator_types::resources::ResourceDef,
    name: &str,
    old: &Value,
    pre: &Preconditions,
) -> Result<(), StatusError> {
    let checks = [
        ("UID", "uid", pre.uid.as_deref()),
        (
            "ResourceVersion",
            "resourceVersion",
            pre.resource_version.as_deref(),
        ),
    ];
    for (label, field, required) in checks {
        let Some(required) = required else {
            continue;
        };
        let actual = meta_str(old, field).unwrap_or("");
        if required != actual {
            return Err(StatusError::conflict(
                d,
                name,
                &format!(
                    "Precondition failed: {label} in precondition: {required}, {label} in object meta: {actual}"
                ),
            ));
        }
    }
    Ok(())
}

/// Whether one of `obj`'s owner references names `uid`.
fn owned_by(obj: &Value, uid: &str) -> bool {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .is_some_and(|refs| {
            refs.iter()
                .any(|r| r.get("uid").and_then(Value::as_str) == Some(uid))
        })
}
