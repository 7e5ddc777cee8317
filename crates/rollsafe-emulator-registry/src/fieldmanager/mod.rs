//! Field ownership (`metadata.managedFields`), as the real server's field manager keeps it
//! (structured-merge-diff v4, `FieldsV1`): every write records which manager set which fields;
//! server-side apply merges an applied configuration into the live object, fails with a
//! `Conflict` when it would change a field another manager owns (unless forced), and removes
//! the fields its manager applied before and no longer applies when nobody else owns them.
//!
//! The schema the real server reads from the OpenAPI types is approximated by field names:
//! keyed lists come from the strategic-merge table in [`rollsafe_emulator_types::patch`], a few label selectors
//! and references are atomic, every other list is atomic and every other object granular.

pub mod fieldset;

use serde_json::{Map, Value, json};

use crate::strategy;
use fieldset::{FieldSet, display_path};
use rollsafe_emulator_types::resources::ResourceDef;
use rollsafe_emulator_types::status::StatusError;
use rollsafe_emulator_types::util;

/// The annotation `kubectl apply` (client-side) keeps its last configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
/// The manager whose applies take over `kubectl-client-side-apply`'s fields (as the real
/// server's last-applied manager does for `kubectl apply --server-side`).
const KUBECTL: &str = "kubectl";

/// Who writes, as the field manager records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    /// `fieldManager`, or the User-Agent up to its first `/`.
    pub name: String,
    /// `status` or `scale` for writes through those subresources.
    pub subresource: Option<String>,
    /// The group/version the write was made in.
    pub api_version: String,
}

impl Manager {
    /// The manager of a request: `fieldManager` when given, else the product of the User-Agent
    /// (`kubectl/v1.33.0 (linux/amd64) …` → `kubectl`), else `unknown`.
    pub fn from_request(
        field_manager: Option<&str>,
        user_agent: &str,
        subresource: Option<&str>,
        api_version: String,
    ) -> Self {
        let name = field_manager
            .map(str::to_owned)
            .unwrap_or_else(|| user_agent.split('/').next().unwrap_or("").to_owned());
        Self {
            name: if name.is_empty() {
                "unknown".into()
            } else {
                name
            },
            subresource: subresource.map(str::to_owned),
            api_version,
        }
    }
}

/// How a write's managedFields come about.
#[derive(Debug, Clone, Copy)]
pub enum Tracking<'a> {
    /// An `Update` entry of this manager owns what the write set or changed.
    Update(&'a Manager),
    /// Computed already by [`apply`]: kept as given.
    Applied,
    /// The emulator's own setup writes: the managedFields stay as they were.
    Keep,
}

/// Takes `metadata.managedFields` out of an object.
pub fn take(obj: &mut Value) -> Option<Value> {
    obj.get_mut("metadata")
        .and_then(Value::as_object_mut)
        .and_then(|m| m.remove("managedFields"))
}

fn put(obj: &mut Value, managed: Option<Value>) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    match managed {
        Some(m) => meta.insert("managedFields".into(), m),
        None => meta.remove("managedFields"),
    };
}

/// Sets the managedFields of `new` (already without them; `given` is what the request carried)
/// for a write of `d` over `old` (`None`: a create).
pub fn track(
    d: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    given: Option<Value>,
    tracking: Tracking<'_>,
) {
    match tracking {
        Tracking::Applied => put(
            new,
            given.filter(|g| g.as_array().is_some_and(|a| !a.is_empty())),
        ),
        Tracking::Keep => put(
            new,
            old.and_then(|o| o.pointer("/metadata/managedFields"))
                .cloned(),
        ),
        Tracking::Update(m) => update(d, old, new, given, m),
    }
}

// ---------------------------------------------------------------------------------------------
// Entries.

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    manager: String,
    operation: &'static str,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    set: FieldSet,
}

impl Entry {
    /// Whether two entries are the same manager (applies are one manager across versions).
    fn same(&self, other: &Entry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == "Apply" || self.api_version == other.api_version)
    }

    fn encode(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        if let Some(t) = &self.time {
            m.insert("time".into(), json!(t));
        }
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }

    fn decode(v: &Value) -> Option<Entry> {
        let operation = match v.get("operation").and_then(Value::as_str)? {
            "Apply" => "Apply",
            "Update" => "Update",
            _ => return None,
        };
        let api_version = v.get("apiVersion").and_then(Value::as_str)?;
        if api_version.is_empty() || v.get("fieldsType").and_then(Value::as_str)? != "FieldsV1" {
            return None;
        }
        let set = match v.get("fieldsV1") {
            Some(f) => FieldSet::from_fields_v1(f)?,
            None => FieldSet::default(),
        };
        Some(Entry {
            manager: v
                .get("manager")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            operation,
            api_version: api_version.to_owned(),
            time: v.get("time").and_then(Value::as_str).map(str::to_owned),
            subresource: v
                .get("subresource")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned),
            set,
        })
    }

    /// How conflicts name the manager: `"m"`, `"m" with subresource "status"`, and for an
    /// Update entry `… using apps/v1`.
    fn printed(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// A managedFields list; `None` when it is not a valid one.
fn decode_all(v: &Value) -> Option<Vec<Entry>> {
    let mut out: Vec<Entry> = Vec::new();
    for item in v.as_array()? {
        let e = Entry::decode(item)?;
        out.retain(|o| !o.same(&e));
        out.push(e);
    }
    Some(out)
}

fn decode_of(obj: Option<&Value>) -> Vec<Entry> {
    obj.and_then(|o| o.pointer("/metadata/managedFields"))
        .and_then(decode_all)
        .unwrap_or_default()
}

/// The list, in the real server's order: applies first, then by time, manager, version.
fn encode_all(mut entries: Vec<Entry>) -> Option<Value> {
    entries.retain(|e| !e.set.is_empty());
    if entries.is_empty() {
        return None;
    }
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    Some(Value::Array(entries.iter().map(Entry::encode).collect()))
}

// ---------------------------------------------------------------------------------------------
// Schema.

/// How a list is tracked.
enum ListKind {
    Atomic,
    Set,
    Map(&'static [&'static str]),
}

/// Objects tracked as one value (`+structType=atomic`, `+mapType=atomic`).
fn atomic_object(field: &str) -> bool {
    matches!(
        field,
        "selector"
            | "nodeSelector"
            | "labelSelector"
            | "namespaceSelector"
            | "podSelector"
            | "roleRef"
            // An Event's `ObjectReference` and an Ingress backend's `ServiceBackendPort`
            // (`+structType=atomic`).
            | "involvedObject"
            | "port"
    )
}

fn last_field(path: &[String]) -> &str {
    path.last()
        .and_then(|pe| pe.strip_prefix("f:"))
        .unwrap_or("")
}

fn list_kind(kind: &str, path: &[String]) -> ListKind {
    let field = last_field(path);
    if rollsafe_emulator_types::patch::is_primitive_merge_list(field) {
        return ListKind::Set;
    }
    if kind == "Service" && path.len() == 2 && path[0] == "f:spec" && field == "ports" {
        return ListKind::Map(&["port", "protocol"]);
    }
    match rollsafe_emulator_types::patch::list_map_keys(field) {
        Some(keys) => ListKind::Map(keys),
        None => ListKind::Atomic,
    }
}

/// The `k:` element of a list item (a missing `protocol` is its default `TCP`).
fn item_key(item: &Value, keys: &[&str]) -> Option<String> {
    let obj = item.as_object()?;
    let mut sorted: Vec<&str> = keys.to_vec();
    sorted.sort_unstable();
    let mut key = Map::new();
    for k in sorted {
        let v = match obj.get(k) {
            Some(v) if !v.is_null() => v.clone(),
            _ if k == "protocol" => json!("TCP"),
            _ => return None,
        };
        key.insert(k.to_owned(), v);
    }
    Some(format!("k:{}", Value::Object(key)))
}

fn value_pe(v: &Value) -> String {
    format!("v:{v}")
}

/// The keyed elements of a list's items, or `None` when some item has no key or two share
/// one (such a list is tracked as a whole).
fn keyed<'v>(items: &'v [Value], keys: &[&str]) -> Option<Vec<(String, &'v Value)>> {
    let mut out: Vec<(String, &Value)> = Vec::with_capacity(items.len());
    for item in items {
        let k = item_key(item, keys)?;
        if out.iter().any(|(o, _)| *o == k) {
            return None;
        }
        out.push((k, item));
    }
    Some(out)
}

/// Objects that exist (empty) in every object of their kind, so writing their fields never
/// makes the object itself owned (the real server's typed objects always carry them).
fn implicit(path: &[String], field: &str) -> bool {
    let parent: Vec<&str> = path.iter().map(String::as_str).collect();
    match parent.as_slice() {
        // An Event's `source` is a struct, not a pointer.
        [] => matches!(field, "metadata" | "spec" | "status" | "source"),
        ["f:spec"] => matches!(
            field,
            "template" | "strategy" | "updateStrategy" | "containers"
        ),
        ["f:spec", "f:template"] => matches!(field, "metadata" | "spec"),
        _ => field == "containers",
    }
}

// ---------------------------------------------------------------------------------------------
// Field sets of values, comparison, merge and prune.

/// The fields an applied configuration sets.
fn fields_of(kind: &str, v: &Value, path: &mut Vec<String>, out: &mut FieldSet) {
    match v {
        Value::Object(map) if path.is_empty() || !atomic_object(last_field(path)) => {
            for (k, child) in map {
                path.push(format!("f:{k}"));
                fields_of(kind, child, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_kind(kind, path) {
            ListKind::Set => {
                for item in items {
                    path.push(value_pe(item));
                    out.insert(path);
                    path.pop();
                }
            }
            ListKind::Map(keys) => match keyed(items, keys) {
                Some(keyed) => {
                    for (pe, item) in keyed {
                        path.push(pe);
                        out.insert(path);
                        fields_of(kind, item, path, out);
                        path.pop();
                    }
                }
                None => out.insert(path),
            },
            ListKind::Atomic => out.insert(path),
        },
        _ => out.insert(path),
    }
}

/// What changed between two objects.
#[derive(Debug, Default)]
struct Diff {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

impl Diff {
    fn changed(&self) -> FieldSet {
        self.added.union(&self.modified)
    }
}

/// Marks `v` and everything under it; `implicit_here`: `v` is an object every object of the
/// kind has (so only what is under it counts).
fn mark_all(
    kind: &str,
    v: &Value,
    path: &mut Vec<String>,
    out: &mut FieldSet,
    implicit_here: bool,
) {
    match v {
        Value::Object(map) if path.is_empty() || !atomic_object(last_field(path)) => {
            for (k, child) in map {
                if child.is_null() {
                    continue;
                }
                let here = implicit_here && implicit(path, k);
                path.push(format!("f:{k}"));
                mark_all(kind, child, path, out, here);
                path.pop();
            }
            if !path.is_empty() && !implicit_here {
                out.insert(path);
            }
        }
        Value::Array(items) => {
            match list_kind(kind, path) {
                ListKind::Set => {
                    for item in items {
                        path.push(value_pe(item));
                        out.insert(path);
                        path.pop();
                    }
                }
                ListKind::Map(keys) => {
                    if let Some(list) = keyed(items, keys) {
                        for (pe, item) in list {
                            path.push(pe);
                            mark_all(kind, item, path, out, false);
                            path.pop();
                        }
                    }
                }
                ListKind::Atomic => {}
            }
            if !implicit_here {
                out.insert(path);
            }
        }
        _ => out.insert(path),
    }
}

/// Compares `old` with `new` at `path`; `top` is set while every parent is an implicit object.
fn compare(
    kind: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    path: &mut Vec<String>,
    top: bool,
    diff: &mut Diff,
) {
    // A null field is an absent one (as in the real server's typed objects).
    let old = old.filter(|v| !v.is_null());
    let new = new.filter(|v| !v.is_null());
    match (old, new) {
        (None, None) => {}
        (None, Some(n)) => mark_all(kind, n, path, &mut diff.added, top),
        (Some(o), None) => mark_all(kind, o, path, &mut diff.removed, top),
        (Some(Value::Object(o)), Some(Value::Object(n)))
            if path.is_empty() || !atomic_object(last_field(path)) =>
        {
            for (k, ov) in o {
                path.push(format!("f:{k}"));
                let here = top && implicit(&path[..path.len() - 1], k);
                compare(kind, Some(ov), n.get(k), path, here, diff);
                path.pop();
            }
            for (k, nv) in n {
                if !o.contains_key(k) {
                    path.push(format!("f:{k}"));
                    let here = top && implicit(&path[..path.len() - 1], k);
                    compare(kind, None, Some(nv), path, here, diff);
                    path.pop();
                }
            }
        }
        (Some(Value::Array(o)), Some(Value::Array(n))) => {
            let (ol, nl) = match list_kind(kind, path) {
                ListKind::Set => (
                    Some(o.iter().map(|i| (value_pe(i), i)).collect::<Vec<_>>()),
                    Some(n.iter().map(|i| (value_pe(i), i)).collect::<Vec<_>>()),
                ),
                ListKind::Map(keys) => (keyed(o, keys), keyed(n, keys)),
                ListKind::Atomic => (None, None),
            };
            let (Some(ol), Some(nl)) = (ol, nl) else {
                if o != n {
                    diff.modified.insert(path);
                }
                return;
            };
            let set_list = matches!(list_kind(kind, path), ListKind::Set);
            for (pe, ov) in &ol {
                path.push(pe.clone());
                let nv = nl.iter().find(|(k, _)| k == pe).map(|(_, v)| *v);
                if set_list {
                    if nv.is_none() {
                        diff.removed.insert(path);
                    }
                } else {
                    compare(kind, Some(ov), nv, path, false, diff);
                }
                path.pop();
            }
            for (pe, nv) in &nl {
                if !ol.iter().any(|(k, _)| k == pe) {
                    path.push(pe.clone());
                    if set_list {
                        diff.added.insert(path);
                    } else {
                        compare(kind, None, Some(nv), path, false, diff);
                    }
                    path.pop();
                }
            }
        }
        (Some(o), Some(n)) => {
            if o != n {
                diff.modified.insert(path);
            }
        }
    }
}

/// Merges an applied configuration into the live object.
fn merge(kind: &str, live: Option<&Value>, config: &Value, path: &mut Vec<String>) -> Value {
    match config {
        Value::Object(cm) if path.is_empty() || !atomic_object(last_field(path)) => {
            let mut out = live.and_then(Value::as_object).cloned().unwrap_or_default();
            for (k, cv) in cm {
                if cv.is_null() {
                    out.remove(k);
                    continue;
                }
                path.push(format!("f:{k}"));
                let merged = merge(kind, out.get(k), cv, path);
                path.pop();
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        Value::Array(citems) => {
            let litems: &[Value] = live.and_then(Value::as_array).map_or(&[], Vec::as_slice);
            match list_kind(kind, path) {
                ListKind::Atomic => config.clone(),
                ListKind::Set => {
                    let mut out = litems.to_vec();
                    for item in citems {
                        if !out.contains(item) {
                            out.push(item.clone());
                        }
                    }
                    Value::Array(out)
                }
                ListKind::Map(keys) => match (keyed(litems, keys), keyed(citems, keys)) {
                    (Some(l), Some(c)) => Value::Array(merge_keyed(kind, &l, &c, path)),
                    _ => config.clone(),
                },
            }
        }
        other => other.clone(),
    }
}

/// A keyed list merge: live items keep their places, applied items their order among
/// themselves, new items come where the configuration puts them.
fn merge_keyed(
    kind: &str,
    live: &[(String, &Value)],
    config: &[(String, &Value)],
    path: &mut Vec<String>,
) -> Vec<Value> {
    let in_config = |k: &str| config.iter().any(|(c, _)| c == k);
    let live_item = |k: &str| live.iter().find(|(l, _)| l == k).map(|(_, v)| *v);
    let mut done: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(live.len() + config.len());
    let (mut l, mut r) = (0, 0);
    while l < live.len() || r < config.len() {
        if l < live.len() && r < config.len() && live[l].0 == config[r].0 {
            path.push(config[r].0.clone());
            out.push(merge(kind, Some(live[l].1), config[r].1, path));
            path.pop();
            done.push(&config[r].0);
            l += 1;
            r += 1;
            continue;
        }
        if l < live.len() {
            let key = live[l].0.as_str();
            if !in_config(key) {
                out.push(live[l].1.clone());
                l += 1;
                continue;
            }
            if done.contains(&key) {
                l += 1;
                continue;
            }
        }
        if r < config.len() {
            let key = config[r].0.as_str();
            path.push(key.to_owned());
            out.push(merge(kind, live_item(key), config[r].1, path));
            path.pop();
            done.push(key);
            r += 1;
        } else {
            l += 1;
        }
    }
    out
}

/// Removes from `v` what the applier owned before (`last`) and nobody owns now (`owned`).
fn prune(
    kind: &str,
    v: &mut Value,
    last: &FieldSet,
    owned: Option<&FieldSet>,
    path: &mut Vec<String>,
) {
    let empty = FieldSet::default();
    let owned = owned.unwrap_or(&empty);
    match v {
        Value::Object(map) if path.is_empty() || !atomic_object(last_field(path)) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let pe = format!("f:{k}");
                let Some(lc) = last.child(&pe) else {
                    continue;
                };
                match owned.child(&pe) {
                    None => {
                        map.remove(&k);
                    }
                    Some(oc) => {
                        if let Some(child) = map.get_mut(&k) {
                            path.push(pe);
                            prune(kind, child, lc, Some(oc), path);
                            path.pop();
                        }
                    }
                }
            }
        }
        Value::Array(items) => {
            let kind_here = list_kind(kind, path);
            let pes: Option<Vec<String>> = match kind_here {
                ListKind::Set => Some(items.iter().map(value_pe).collect()),
                ListKind::Map(keys) => {
                    keyed(items, keys).map(|k| k.into_iter().map(|(pe, _)| pe).collect())
                }
                ListKind::Atomic => None,
            };
            let Some(pes) = pes else {
                return;
            };
            let mut kept = Vec::with_capacity(items.len());
            for (pe, mut item) in pes.into_iter().zip(std::mem::take(items)) {
                match (last.child(&pe), owned.child(&pe)) {
                    (Some(_), None) => {}
                    (Some(lc), Some(oc)) => {
                        path.push(pe);
                        prune(kind, &mut item, lc, Some(oc), path);
                        path.pop();
                        kept.push(item);
                    }
                    (None, _) => kept.push(item),
                }
            }
            *items = kept;
        }
        _ => {}
    }
}

/// Fields no manager owns (server-set metadata, `apiVersion`, `kind`), and what a write
/// through one part of the object cannot own (the status subresource splits the object).
fn filter(d: &ResourceDef, sub: Option<&str>, mut set: FieldSet) -> FieldSet {
    for path in [
        &["f:apiVersion"][..],
        &["f:kind"],
        &["f:metadata"],
        &["f:metadata", "f:name"],
        &["f:metadata", "f:namespace"],
        &["f:metadata", "f:creationTimestamp"],
        &["f:metadata", "f:selfLink"],
        &["f:metadata", "f:uid"],
        &["f:metadata", "f:generation"],
        &["f:metadata", "f:resourceVersion"],
        &["f:metadata", "f:deletionTimestamp"],
        &["f:metadata", "f:deletionGracePeriodSeconds"],
    ] {
        set.remove_member(path);
    }
    // A Service's cluster IPs and IP families are allocated by its REST storage after the
    // field manager ran: nobody owns them.
    if d.kind == "Service" {
        for field in [
            "f:clusterIP",
            "f:clusterIPs",
            "f:ipFamilies",
            "f:ipFamilyPolicy",
        ] {
            set.remove_member(&["f:spec", field]);
        }
    }
    // A Namespace's spec is its `kubernetes` finalizer, the namespace strategy's, set after
    // the field manager ran too.
    if d.kind == "Namespace" {
        set.remove_subtree("f:spec");
    }
    if d.subresources.contains(&"status") {
        if sub == Some("status") {
            set.retain_subtree("f:status");
        } else {
            set.remove_subtree("f:status");
        }
    }
    set
}

fn diff_of(d: &ResourceDef, sub: Option<&str>, old: &Value, new: &Value) -> Diff {
    let mut diff = Diff::default();
    compare(
        d.kind,
        Some(old),
        Some(new),
        &mut Vec::new(),
        true,
        &mut diff,
    );
    Diff {
        added: filter(d, sub, diff.added),
        modified: filter(d, sub, diff.modified),
        removed: filter(d, sub, diff.removed),
    }
}

fn without_managed(v: &Value) -> Value {
    let mut v = v.clone();
    take(&mut v);
    v
}

// ---------------------------------------------------------------------------------------------
// Update and apply.

/// The managedFields after a create, update or non-apply patch: the manager's `Update` entry
/// gains what the write added or changed, and every other manager loses it; whatever the
/// write removed nobody owns any more. Given managedFields replace the recorded ones when
/// they are a valid list (`[{}]`, a list of empty entries, clears them); an empty or invalid
/// list, or a subresource write, keeps the recorded ones.
fn update(
    d: &ResourceDef,
    old: Option<&Value>,
    new: &mut Value,
    given: Option<Value>,
    m: &Manager,
) {
    let recorded = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let replaced: Option<Vec<Entry>> = match (&m.subresource, given.as_ref()) {
        (None, Some(Value::Array(list))) if !list.is_empty() => {
            if list
                .iter()
                .all(|e| e.as_object().is_some_and(Map::is_empty))
            {
                Some(Vec::new())
            } else {
                given.as_ref().and_then(decode_all)
            }
        }
        _ => None,
    };
    let from_recorded = replaced.is_none();
    let mut entries = replaced.unwrap_or_else(|| decode_of(old));
    let empty = json!({});
    let diff = diff_of(
        d,
        m.subresource.as_deref(),
        &old.map(without_managed).unwrap_or_else(|| empty.clone()),
        new,
    );
    let changed = diff.changed();
    if from_recorded && changed.is_empty() && diff.removed.is_empty() {
        put(new, recorded.cloned());
        return;
    }
    record(&mut entries, &diff, m);
    put(new, encode_all(entries));
}

/// An Update by `m` that made `diff`: every manager loses what it changed or removed, `m`'s
/// entry gains what it changed (and its time when that is anything).
fn record(entries: &mut Vec<Entry>, diff: &Diff, m: &Manager) {
    let changed = diff.changed();
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&diff.removed);
    }
    let me = Entry {
        manager: m.name.clone(),
        operation: "Update",
        api_version: m.api_version.clone(),
        time: None,
        subresource: m.subresource.clone(),
        set: FieldSet::default(),
    };
    let previous = entries.iter().position(|e| e.same(&me));
    let mut mine = match previous {
        Some(i) => entries.remove(i),
        None => me,
    };
    if !changed.is_empty() {
        mine.set = mine.set.union(&changed);
        mine.time = Some(util::now_seconds());
    }
    entries.push(mine);
    cap_updates(entries);
}

/// The most Update entries an object keeps (the API server's `maxUpdateManagers`).
const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager the oldest Update entries are merged into beyond that (one per API version).
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Merges the oldest Update entries (by time, then manager) into an `ancient-changes` entry of
/// their API version until at most [`MAX_UPDATE_MANAGERS`] remain, as the API server's
/// `capManagersManager` does, so an object written by many managers keeps a bounded list.
/// Entries that own nothing are not counted (they are not stored).
fn cap_updates(entries: &mut Vec<Entry>) {
    let is_update = |e: &Entry| e.operation == "Update" && !e.set.is_empty();
    let mut count = entries.iter().filter(|e| is_update(e)).count();
    if count <= MAX_UPDATE_MANAGERS {
        return;
    }
    let mut oldest: Vec<(Option<String>, String, usize)> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| is_update(e) && e.manager != ANCIENT_CHANGES)
        .map(|(i, e)| (e.time.clone(), e.manager.clone(), i))
        .collect();
    oldest.sort();
    let mut merged = Vec::new();
    for (_, _, index) in oldest {
        if count <= MAX_UPDATE_MANAGERS {
            break;
        }
        let entry = &entries[index];
        let bucket = entries.iter().position(|b| {
            b.manager == ANCIENT_CHANGES
                && b.operation == "Update"
                && b.subresource.is_none()
                && b.api_version == entry.api_version
        });
        match bucket {
            Some(b) => {
                let set = entries[b].set.union(&entry.set);
                let time = entries[b].time.clone().max(entry.time.clone());
                entries[b].set = set;
                entries[b].time = time;
                merged.push(index);
                count -= 1;
            }
            None => {
                // The entry becomes its version's bucket: the count stays.
                let entry = &mut entries[index];
                entry.manager = ANCIENT_CHANGES.to_owned();
                entry.subresource = None;
            }
        }
    }
    merged.sort_unstable();
    for index in merged.into_iter().rev() {
        entries.remove(index);
    }
}

/// The manager the emulator's controllers write as.
const CONTROLLER_MANAGER: &str = "kube-controller-manager";

fn controller(d: &ResourceDef, subresource: Option<&str>) -> Manager {
    Manager {
        name: CONTROLLER_MANAGER.into(),
        subresource: subresource.map(str::to_owned),
        api_version: d.api_version(),
    }
}

/// What a controller's write changed from `old` to `new`, recorded as the real controllers'
/// `kube-controller-manager` entries: one for the object, one for its status subresource.
fn record_controller(d: &ResourceDef, entries: &mut Vec<Entry>, old: &Value, new: &Value) {
    record(entries, &diff_of(d, None, old, new), &controller(d, None));
    if d.subresources.contains(&"status") {
        record(
            entries,
            &diff_of(d, Some("status"), old, new),
            &controller(d, Some("status")),
        );
    }
}

/// Runs the controller simulation of a workload write (`sync`) over `obj` and records what it
/// changed as `kube-controller-manager`'s, as the real deployment, statefulset and daemonset
/// controllers' own writes would be. When the write then changes nothing but managedFields
/// times, `old`'s managedFields stay (the real store ignores timestamp-only changes). The
/// emulator's own setup writes ([`Tracking::Keep`]) record nothing.
pub fn as_controller(
    d: &ResourceDef,
    old: Option<&Value>,
    obj: &mut Value,
    tracking: Tracking<'_>,
    sync: impl FnOnce(&mut Value),
) {
    if !strategy::is_workload(d) || matches!(tracking, Tracking::Keep) {
        sync(obj);
        return;
    }
    let before = obj.clone();
    sync(obj);
    let recorded = take(obj);
    let mut entries = recorded.as_ref().and_then(decode_all).unwrap_or_default();
    let before_clean = without_managed(&before);
    if before_clean != *obj {
        record_controller(d, &mut entries, &before_clean, obj);
        put(obj, encode_all(entries));
    } else {
        put(obj, recorded);
    }
    keep_times_of(old, obj);
}

/// A controller's write of a whole object (`old`: the object it replaces).
pub fn controller_write(d: &ResourceDef, old: Option<&Value>, obj: &mut Value) {
    take(obj);
    let empty = json!({});
    let old_clean = old.map(without_managed).unwrap_or_else(|| empty.clone());
    if old_clean == *obj {
        put(
            obj,
            old.and_then(|o| o.pointer("/metadata/managedFields"))
                .cloned(),
        );
        return;
    }
    let mut entries = decode_of(old);
    record_controller(d, &mut entries, &old_clean, obj);
    put(obj, encode_all(entries));
    keep_times_of(old, obj);
}

/// `old`'s managedFields on `obj` when the two differ in managedFields times only.
fn keep_times_of(old: Option<&Value>, obj: &mut Value) {
    let Some(old) = old else {
        return;
    };
    let (Some(a), Some(b)) = (
        old.pointer("/metadata/managedFields"),
        obj.pointer("/metadata/managedFields"),
    ) else {
        return;
    };
    if a == b {
        return;
    }
    let untimed = |v: &Value| -> Option<Vec<Entry>> {
        let mut list = decode_all(v)?;
        for e in &mut list {
            e.time = None;
        }
        list.sort_by(|x, y| {
            (x.operation, &x.manager, &x.api_version, &x.subresource).cmp(&(
                y.operation,
                &y.manager,
                &y.api_version,
                &y.subresource,
            ))
        });
        Some(list)
    };
    if untimed(a) != untimed(b) || without_managed(old) != without_managed(obj) {
        return;
    }
    let a = a.clone();
    put(obj, Some(a));
}

/// Server-side apply of `config` by `m` over `live` (`None`: the apply creates): the merged
/// object with its managedFields, or the real server's 409 when the apply would change fields
/// other managers own and `force` is not set.
pub fn apply(
    d: &ResourceDef,
    live: Option<&Value>,
    config: &Value,
    m: &Manager,
    force: bool,
) -> Result<Value, StatusError> {
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|v| !v.is_null())
    {
        return Err(StatusError::bad_request(
            "metadata.managedFields must be nil",
        ));
    }
    let empty = json!({});
    let live_clean = live.map(without_managed).unwrap_or_else(|| empty.clone());
    let mut entries = decode_of(live);
    let sub = m.subresource.as_deref();
    let mut applied = FieldSet::default();
    fields_of(d.kind, config, &mut Vec::new(), &mut applied);
    let applied = filter(d, sub, applied);
    let me = Entry {
        manager: m.name.clone(),
        operation: "Apply",
        api_version: m.api_version.clone(),
        time: None,
        subresource: m.subresource.clone(),
        set: applied.clone(),
    };
    let previous = entries
        .iter()
        .position(|e| e.same(&me))
        .map(|i| entries.remove(i));
    let mut merged = merge(d.kind, Some(&live_clean), config, &mut Vec::new());
    if let Some(last) = previous.as_ref().map(|p| &p.set) {
        let owned = entries
            .iter()
            .fold(applied.clone(), |acc, e| acc.union(&e.set));
        prune(d.kind, &mut merged, last, Some(&owned), &mut Vec::new());
    }
    let diff = diff_of(d, sub, &live_clean, &merged);
    let changed = diff.changed();
    let conflicts: Vec<(usize, FieldSet)> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| (i, e.set.intersection(&changed)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    if !force && !conflicts.is_empty() {
        let allowed = if m.name == KUBECTL && sub.is_none() {
            last_applied_fields(d, &live_clean)
        } else {
            None
        };
        let remaining: Vec<(usize, FieldSet)> = match &allowed {
            Some(allowed) => conflicts
                .iter()
                .map(|(i, c)| (*i, c.difference(allowed)))
                .filter(|(_, c)| !c.is_empty())
                .collect(),
            None => conflicts.clone(),
        };
        if !remaining.is_empty() {
            return Err(conflict_error(&entries, &remaining));
        }
    }
    for e in &mut entries {
        e.set = e.set.difference(&changed).difference(&diff.removed);
    }
    let object_changed = merged != live_clean;
    let mut mine = me;
    // Stamped only when the object changed; otherwise the entry keeps its previous time, and
    // a new entry has none (measured against kube-apiserver 1.37 by the differential suite).
    mine.time = if object_changed {
        Some(util::now_seconds())
    } else {
        previous.and_then(|p| p.time)
    };
    entries.push(mine);
    if m.name == KUBECTL && sub.is_none() {
        update_last_applied(&mut merged, config);
    }
    put(&mut merged, encode_all(entries));
    Ok(merged)
}

/// The fields of the live object's `last-applied-configuration` (client-side `kubectl apply`):
/// `kubectl apply --server-side` takes those over from other managers without a conflict, as
/// the real server allows for the upgrade from client-side apply.
fn last_applied_fields(d: &ResourceDef, live: &Value) -> Option<FieldSet> {
    let text = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())?;
    let last: Value = serde_json::from_str(text).ok()?;
    let mut set = FieldSet::default();
    fields_of(d.kind, &last, &mut Vec::new(), &mut set);
    Some(filter(d, None, set))
}

/// Keeps an existing `last-applied-configuration` in step with what `kubectl` applies
/// server-side (so a later client-side apply computes from it).
fn update_last_applied(merged: &mut Value, config: &Value) {
    let Some(annotations) = merged
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if !annotations.contains_key(LAST_APPLIED) {
        return;
    }
    let mut last = config.clone();
    if let Some(a) = last
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
        if a.is_empty()
            && let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut)
        {
            meta.remove("annotations");
        }
    }
    // As kubectl writes it: keys sorted, a newline at the end.
    annotations.insert(LAST_APPLIED.into(), json!(format!("{}\n", sorted(&last))));
}

fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The real server's apply conflict: `Apply failed with 1 conflict: conflict with "m" using
/// apps/v1: .spec.replicas`, or for several, one `conflicts with …:` block per manager.
fn conflict_error(entries: &[Entry], conflicts: &[(usize, FieldSet)]) -> StatusError {
    let mut by_manager: Vec<(&Entry, Vec<String>)> = conflicts
        .iter()
        .filter_map(|(i, set)| {
            let e = entries.get(*i)?;
            Some((e, set.paths().iter().map(|p| display_path(p)).collect()))
        })
        .collect();
    by_manager.sort_by(|a, b| {
        (
            &a.0.manager,
            a.0.operation,
            &a.0.subresource,
            &a.0.api_version,
        )
            .cmp(&(
                &b.0.manager,
                b.0.operation,
                &b.0.subresource,
                &b.0.api_version,
            ))
    });
    let total: usize = by_manager.iter().map(|(_, p)| p.len()).sum();
    let mut causes = Vec::new();
    for (e, paths) in &by_manager {
        for p in paths {
            causes.push(json!({"reason": "FieldManagerConflict",
                               "message": format!("conflict with {}", e.printed()),
                               "field": p}));
        }
    }
    let message = match by_manager.as_slice() {
        [(e, paths)] if paths.len() == 1 => {
            format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                e.printed(),
                paths[0]
            )
        }
        _ => {
            let mut lines = Vec::new();
            for (e, paths) in &by_manager {
                lines.push(format!("conflicts with {}:", e.printed()));
                for p in paths {
                    lines.push(format!("- {p}"));
                }
            }
            format!("Apply failed with {total} conflicts: {}", lines.join("\n"))
        }
    };
    StatusError::new(409, "Conflict", &message, Some(json!({"causes": causes})))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_emulator_types::resources::{def, ids};

    fn manager(name: &str) -> Manager {
        Manager::from_request(Some(name), "", None, "apps/v1".into())
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
               "metadata": {"name": "web", "namespace": "ns", "labels": {"app": "web"}},
               "spec": {"replicas": replicas,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web"}},
                                     "spec": {"containers": [{"name": "web", "image": image,
                                              "ports": [{"containerPort": 80}]}]}}}})
    }

    #[test]
    fn apply_owns_exactly_the_applied_fields() {
        let d = def(ids::DEPLOYMENTS);
        let out = apply(d, None, &deployment(1, "nginx"), &manager("a"), false);
        let out = out.unwrap_or_default();
        let mf = &out["metadata"]["managedFields"][0];
        assert_eq!(mf["manager"], "a");
        assert_eq!(mf["operation"], "Apply");
        assert_eq!(mf["fieldsType"], "FieldsV1");
        let port = r#"k:{"containerPort":80,"protocol":"TCP"}"#;
        assert_eq!(
            mf["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:app": {}}},
                   "f:spec": {"f:replicas": {}, "f:selector": {},
                     "f:template": {"f:metadata": {"f:labels": {"f:app": {}}},
                       "f:spec": {"f:containers": {r#"k:{"name":"web"}"#: {
                         ".": {}, "f:image": {}, "f:name": {},
                         "f:ports": {port: {".": {}, "f:containerPort": {}}}}}}}}})
        );
    }

    #[test]
    fn update_owns_what_it_changed_and_takes_it_over() {
        let d = def(ids::DEPLOYMENTS);
        let live =
            apply(d, None, &deployment(1, "nginx"), &manager("a"), false).unwrap_or_default();
        let mut new = without_managed(&live);
        new["spec"]["replicas"] = json!(3);
        update(d, Some(&live), &mut new, None, &manager("scaler"));
        let mf = new["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(mf.len(), 2);
        assert_eq!(mf[1]["manager"], "scaler");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:spec": {"f:replicas": {}}}));
        assert!(mf[0]["fieldsV1"]["f:spec"].get("f:replicas").is_none());
        // The applier setting it back conflicts with the Update manager.
        let err = apply(d, Some(&new), &deployment(1, "nginx"), &manager("a"), false).err();
        assert_eq!(err.as_ref().map(|e| e.code), Some(409));
        assert_eq!(
            err.map(|e| e.body["message"].clone()),
            Some(json!(
                "Apply failed with 1 conflict: conflict with \"scaler\" using apps/v1: .spec.replicas"
            ))
        );
    }

    #[test]
    fn no_change_keeps_managed_fields_verbatim() {
        let d = def(ids::DEPLOYMENTS);
        let live =
            apply(d, None, &deployment(1, "nginx"), &manager("a"), false).unwrap_or_default();
        let mut new = without_managed(&live);
        update(d, Some(&live), &mut new, None, &manager("b"));
        assert_eq!(new, live);
        let again = apply(
            d,
            Some(&live),
            &deployment(1, "nginx"),
            &manager("a"),
            false,
        )
        .unwrap_or_default();
        assert_eq!(again, live);
    }

    #[test]
    fn create_update_entry_shape() {
        let d = def(ids::DEPLOYMENTS);
        let mut new = deployment(1, "nginx");
        update(d, None, &mut new, None, &manager("kubectl-create"));
        let f = &new["metadata"]["managedFields"][0]["fieldsV1"];
        assert_eq!(f["f:metadata"]["f:labels"], json!({".": {}, "f:app": {}}));
        assert!(f["f:spec"].get(".").is_none());
        assert!(f["f:spec"]["f:template"].get(".").is_none());
        assert_eq!(f["f:spec"]["f:selector"], json!({}));
        assert!(f.get("f:apiVersion").is_none());
        assert!(f["f:metadata"].get("f:name").is_none());
    }

    #[test]
    fn service_ports_key_by_port_and_lists_merge_in_place() {
        let d = def(ids::SERVICES);
        let config = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                            "spec": {"ports": [{"port": 80}]}});
        let out = apply(d, None, &config, &manager("a"), false).unwrap_or_default();
        assert_eq!(
            out["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"],
            json!({"f:ports": {r#"k:{"port":80,"protocol":"TCP"}"#: {".": {}, "f:port": {}}}})
        );
        let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "b", "image": "1"}]}});
        let config = json!({"spec": {"containers": [{"name": "b", "image": "2"}, {"name": "c"}]}});
        let merged = merge("Pod", Some(&live), &config, &mut Vec::new());
        assert_eq!(
            merged["spec"]["containers"],
            json!([{"name": "a"}, {"name": "b", "image": "2"}, {"name": "c"}])
        );
    }

    #[test]
    fn a_dropped_list_item_goes_with_what_it_holds() {
        let d = def(ids::DEPLOYMENTS);
        let two = {
            let mut v = deployment(1, "nginx");
            if let Some(c) = v["spec"]["template"]["spec"]["containers"].as_array_mut() {
                c.push(json!({"name": "side", "image": "busybox"}));
            }
            v
        };
        let live = apply(d, None, &two, &manager("a"), false).unwrap_or_default();
        // A default the server added inside the sidecar belongs to nobody: it goes too.
        let mut live = live;
        live["spec"]["template"]["spec"]["containers"][1]["imagePullPolicy"] = json!("Always");
        let out = apply(
            d,
            Some(&live),
            &deployment(1, "nginx"),
            &manager("a"),
            false,
        )
        .unwrap_or_default();
        let containers = out["spec"]["template"]["spec"]["containers"]
            .as_array()
            .cloned();
        assert_eq!(containers.map(|c| c.len()), Some(1));
        // Finalizers are a set: values, dropped one by one.
        let mut with = deployment(1, "nginx");
        with["metadata"]["finalizers"] = json!(["x/a", "x/b"]);
        let live = apply(d, None, &with, &manager("a"), false).unwrap_or_default();
        with["metadata"]["finalizers"] = json!(["x/b"]);
        let out = apply(d, Some(&live), &with, &manager("a"), false).unwrap_or_default();
        assert_eq!(out["metadata"]["finalizers"], json!(["x/b"]));
        assert_eq!(
            out["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:finalizers"],
            json!({"v:\"x/b\"": {}})
        );
    }
}
