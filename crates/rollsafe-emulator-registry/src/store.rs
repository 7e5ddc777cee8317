//! The generic registry store (the real server's `registry/generic/registry/store.go`): one
//! ordered map keyed by (resource, namespace, name), a global resourceVersion counter, a
//! bounded watch-event history, preconditions and optimistic concurrency. What differs per
//! resource — defaulting, validation, the status an instant write carries — is in
//! [`strategy`], one entry per resource in the resource table.
//!
//! The store stores and validates; it drives no controller. A write answers with what it
//! committed ([`Written`]), and the simulated controllers ([`crate::controllers`]) react to that
//! as clients of this interface, run by [`crate::cluster::Cluster`]. The one question a write
//! asks them first is [`Pacing`]: whether a workload's status is left to its rollout.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::fieldmanager::{self, Tracking};
use rollsafe_emulator_types::resources::{ResId, ResourceDef, def, ids};
use rollsafe_emulator_types::status::{FieldCause, OPTIMISTIC_LOCK, StatusError};
use rollsafe_emulator_types::util;

pub mod definitions;
pub mod deletion;

use crate::strategy;

/// Watch events kept for watches that resume from an older resourceVersion.
pub const HISTORY_CAPACITY: usize = 10_000;
/// Capacity of the live event channel; a watcher that falls further behind is closed with a
/// 410 ERROR event, as the real watch cache does.
pub const EVENT_CHANNEL_CAPACITY: usize = 16_384;
/// How long an Event is kept after its last write: kube-apiserver's `--event-ttl` default.
pub const EVENT_TTL: Duration = Duration::from_secs(3600);
/// The etcd request limit (stored object size).
pub const MAX_STORED_OBJECT_SIZE: usize = 3 * 512 * 1024;

/// A store key: resource id, namespace (`""` for cluster-scoped), name.
pub type Key = (ResId, String, String);

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed.
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Resource id.
    pub res: ResId,
    /// Namespace of the object.
    pub namespace: String,
    /// Event type.
    pub kind: EventType,
    /// The object after the change (for DELETED: the last state, with the deletion's RV).
    pub object: Arc<Value>,
    /// For MODIFIED and DELETED: the object before the change, so a selector-filtered watch can
    /// tell an object that started or stopped matching (ADDED / DELETED), as the real watch
    /// cache does, and a continued list can read the state of its first page.
    pub prev: Option<Arc<Value>>,
}

/// A key range at an older resourceVersion (see [`Store::range_at`]).
#[derive(Debug)]
pub enum Snapshot {
    /// Nothing in the range changed since: read the current objects.
    Current,
    /// The range as it was, in key order.
    Changed(Vec<(Key, Arc<Value>)>),
    /// The history no longer reaches back that far (the real server's compacted revision).
    Expired,
}

/// Preconditions carried by a write.
#[derive(Debug, Clone, Default)]
pub struct Preconditions {
    /// Required uid.
    pub uid: Option<String>,
    /// Required resourceVersion.
    pub resource_version: Option<String>,
}

/// Whether a write is kept (`dryRun=All` runs every check and returns the result, but keeps
/// nothing: no resourceVersion, no event, no rollout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Write {
    /// Store it.
    #[default]
    Commit,
    /// `dryRun=All`.
    DryRun,
}

/// How an update arrived; it decides which checks apply and how they fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// PUT of the main resource.
    Put,
    /// PATCH of the main resource.
    Patch,
    /// PUT or PATCH of the `status` subresource.
    Status,
    /// Test setup through the handle or admin API: no resourceVersion check.
    Force,
}

/// What the workload controllers say of a workload write before it is stored: whether its
/// status is left to them (a paced rollout moves it) or is final in the write.
pub trait Pacing {
    /// Whether the write of `workload` (as it would be stored, at `key`) is paced.
    fn paced(&self, key: &Key, workload: &Value) -> bool;
}

/// No controller paces anything: a workload's status is final in its write.
#[derive(Debug, Clone, Copy, Default)]
pub struct AtOnce;

impl Pacing for AtOnce {
    fn paced(&self, _key: &Key, _workload: &Value) -> bool {
        false
    }
}

/// An update of one object: what arrives, how, and whether it is kept.
#[derive(Debug)]
pub struct Update<'a> {
    /// Resource id.
    pub res: ResId,
    /// Namespace (`""` for cluster-scoped).
    pub ns: &'a str,
    /// Name.
    pub name: &'a str,
    /// The object as the request would have it.
    pub object: Value,
    /// How it arrived.
    pub mode: UpdateMode,
    /// Kept or a dry run.
    pub write: Write,
    /// How field ownership is recorded.
    pub tracking: Tracking<'a>,
}

impl<'a> Update<'a> {
    /// An update that is kept, with field ownership recorded as before
    /// ([`Tracking::Keep`]): test setup, the controllers' and the recorder's own writes.
    pub fn kept(res: ResId, ns: &'a str, name: &'a str, object: Value, mode: UpdateMode) -> Self {
        Self {
            res,
            ns,
            name,
            object,
            mode,
            write: Write::Commit,
            tracking: Tracking::Keep,
        }
    }
}

/// A committed write, as the controllers see it.
#[derive(Debug, Clone)]
pub struct Committed {
    /// Resource id.
    pub res: ResId,
    /// The object as stored.
    pub object: Arc<Value>,
    /// The object before (an update).
    pub old: Option<Arc<Value>>,
    /// A workload's pod template changed (never for a write of the status subresource).
    pub template_changed: bool,
    /// The workload's status is left to its controllers ([`Pacing`], asked before the write).
    pub paced: bool,
}

/// What a create or an update did.
#[derive(Debug, Clone)]
pub enum Written {
    /// Stored: a new resourceVersion and its watch event.
    Stored(Committed),
    /// Nothing would change: the stored object, untouched.
    Unchanged(Arc<Value>),
    /// A dry run: the object as it would be stored, nothing kept.
    DryRun(Arc<Value>),
    /// The update lifted the last finalizer of an object being deleted: removed, with its last
    /// state.
    Removed(Arc<Value>),
}

impl Written {
    /// The object the request answers with.
    pub fn object(&self) -> &Arc<Value> {
        match self {
            Self::Stored(committed) => &committed.object,
            Self::Unchanged(object) | Self::DryRun(object) | Self::Removed(object) => object,
        }
    }

    /// Whether the write changed (or, for a dry run, would change) the object.
    pub fn changed(&self) -> bool {
        !matches!(self, Self::Unchanged(_))
    }
}

/// The object store.
#[derive(Debug)]
pub struct Store {
    objects: BTreeMap<Key, Arc<Value>>,
    rv: u64,
    history: VecDeque<Arc<Event>>,
    /// Watches may resume from any RV ≥ this.
    history_floor: u64,
    /// Continue tokens pinned to an RV below this are expired.
    token_floor: u64,
    /// The custom resources each stored CRD defines (by CRD name): what this store serves
    /// besides the built-in table.
    definitions: BTreeMap<String, Vec<ResId>>,
    events: broadcast::Sender<Arc<Event>>,
    /// How long an Event lives after its last write.
    event_ttl: Duration,
    /// When each stored Event expires (its last write plus the TTL), as etcd's lease on it.
    event_expiry: HashMap<(String, String), Instant>,
    /// The same deadlines in write order; an entry whose Event was written again later is
    /// skipped when it comes up.
    event_deadlines: VecDeque<(Instant, (String, String))>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

pub use rollsafe_emulator_types::util::{meta_mut, meta_str};

/// The TTL bookkeeping's key of an Event: namespace and name.
fn event_key(ns: &str, object: &Value) -> (String, String) {
    (
        ns.to_owned(),
        meta_str(object, "name").unwrap_or("").to_owned(),
    )
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(EVENT_CHANNEL_CAPACITY);
        Self {
            objects: BTreeMap::new(),
            rv: 1,
            history: VecDeque::new(),
            history_floor: 1,
            token_floor: 0,
            events,
            definitions: BTreeMap::new(),
            event_ttl: EVENT_TTL,
            event_expiry: HashMap::new(),
            event_deadlines: VecDeque::new(),
        }
    }

    /// How long Events live after their last write (default [`EVENT_TTL`]).
    pub fn set_event_ttl(&mut self, ttl: Duration) {
        self.event_ttl = ttl;
    }

    /// Deletes the Events whose TTL has passed by `now`, as etcd does when an Event's lease
    /// expires: watchers see `DELETED`. Returns how many were deleted.
    pub fn expire_events(&mut self, now: Instant) -> usize {
        let mut expired = 0;
        while let Some((deadline, _)) = self.event_deadlines.front() {
            if *deadline > now {
                break;
            }
            let Some((deadline, key)) = self.event_deadlines.pop_front() else {
                break;
            };
            if self.event_expiry.get(&key) != Some(&deadline) {
                continue;
            }
            self.event_expiry.remove(&key);
            let (ns, name) = key;
            if self
                .delete(ids::EVENTS, &ns, &name, &Preconditions::default())
                .is_ok()
            {
                expired += 1;
            }
        }
        expired
    }

    /// Starts or renews the TTL of the Event just written under `key`.
    fn renew_event_ttl(&mut self, key: (String, String)) {
        let deadline = Instant::now() + self.event_ttl;
        self.event_expiry.insert(key.clone(), deadline);
        self.event_deadlines.push_back((deadline, key));
    }

    /// Empties the store (keeping the counter moving forward, as a real cluster would).
    pub fn clear(&mut self) {
        self.objects.clear();
        self.history.clear();
        self.history_floor = self.rv;
        self.definitions.clear();
        self.event_expiry.clear();
        self.event_deadlines.clear();
    }

    /// The latest resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.rv
    }

    /// Continue tokens with an RV below this are expired.
    pub fn token_floor(&self) -> u64 {
        self.token_floor
    }

    /// Expires every continue token issued so far.
    pub fn expire_continue_tokens(&mut self) {
        self.token_floor = self.rv + 1;
    }

    /// Forgets the watch history: watches from any RV issued so far get 410.
    pub fn compact(&mut self) {
        self.expire_continue_tokens();
        self.history.clear();
        self.history_floor = self.rv + 1;
    }

    /// Number of stored objects.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// One object.
    pub fn get(&self, res: ResId, ns: &str, name: &str) -> Option<&Arc<Value>> {
        self.objects.get(&(res, ns.to_string(), name.to_string()))
    }

    /// Whether a namespace exists.
    pub fn namespace_exists(&self, ns: &str) -> bool {
        self.get(ids::NAMESPACES, "", ns).is_some()
    }

    /// The key range of a resource, optionally within one namespace, starting after `after`
    /// (a key of the same range) when given.
    pub fn range(
        &self,
        res: ResId,
        ns: Option<&str>,
        after: Option<&Key>,
    ) -> Box<dyn Iterator<Item = (&Key, &Arc<Value>)> + '_> {
        let (first, end) = match ns {
            Some(ns) => (
                (res, ns.to_string(), String::new()),
                (res, format!("{ns}\u{0}"), String::new()),
            ),
            None => (
                (res, String::new(), String::new()),
                (res.saturating_add(1), String::new(), String::new()),
            ),
        };
        let lower = match after {
            Some(k) if *k >= first => {
                if *k >= end {
                    return Box::new(std::iter::empty());
                }
                Bound::Excluded(k.clone())
            }
            _ => Bound::Included(first),
        };
        Box::new(self.objects.range((lower, Bound::Excluded(end))))
    }

    /// The objects of a key range as they were at resourceVersion `rv`, for a continued list
    /// (every page shows the state of the first, as the real server reads etcd at the token's
    /// revision): the current objects with every change after `rv` undone from the history.
    pub fn range_at(&self, res: ResId, ns: Option<&str>, after: Option<&Key>, rv: u64) -> Snapshot {
        if rv + 1 < self.history_floor {
            return Snapshot::Expired;
        }
        // Newest first: the last override written for a key is its state just before the
        // first change after `rv`.
        let mut undo: BTreeMap<Key, Option<Arc<Value>>> = BTreeMap::new();
        for e in self.history.iter().rev() {
            if e.rv <= rv {
                break;
            }
            if e.res != res || ns.is_some_and(|n| n != e.namespace) {
                continue;
            }
            let name = meta_str(&e.object, "name").unwrap_or("").to_string();
            let key = (e.res, e.namespace.clone(), name);
            if after.is_some_and(|a| key <= *a) {
                continue;
            }
            let before = match e.kind {
                EventType::Added => None,
                EventType::Modified | EventType::Deleted => e.prev.clone(),
            };
            undo.insert(key, before);
        }
        if undo.is_empty() {
            return Snapshot::Current;
        }
        let mut objects: BTreeMap<Key, Arc<Value>> = self
            .range(res, ns, after)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (key, before) in undo {
            match before {
                Some(v) => objects.insert(key, v),
                None => objects.remove(&key),
            };
        }
        Snapshot::Changed(objects.into_iter().collect())
    }

    /// Subscribes to live events and returns the retained history after `since`, atomically
    /// (the caller holds the lock). `None`: `since` is older than the retained history.
    pub fn watch_from(
        &self,
        since: u64,
    ) -> (broadcast::Receiver<Arc<Event>>, Option<Vec<Arc<Event>>>) {
        let rx = self.events.subscribe();
        if since + 1 < self.history_floor {
            return (rx, None);
        }
        let replay = self
            .history
            .iter()
            .filter(|e| e.rv > since)
            .cloned()
            .collect();
        (rx, Some(replay))
    }

    /// A subscription to live events only.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// The oldest RV a watch can resume from.
    pub fn history_floor(&self) -> u64 {
        self.history_floor
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(
        &mut self,
        res: ResId,
        ns: &str,
        kind: EventType,
        object: Arc<Value>,
        prev: Option<Arc<Value>>,
        rv: u64,
    ) {
        if res == ids::EVENTS {
            let key = event_key(ns, &object);
            if kind == EventType::Deleted {
                self.event_expiry.remove(&key);
            } else {
                self.renew_event_ttl(key);
            }
        }
        let event = Arc::new(Event {
            rv,
            res,
            prev,
            namespace: ns.to_string(),
            kind,
            object,
        });
        self.history.push_back(event.clone());
        while self.history.len() > HISTORY_CAPACITY {
            if let Some(old) = self.history.pop_front() {
                self.history_floor = old.rv + 1;
            }
        }
        let _ = self.events.send(event);
    }

    /// Creates an object. The object's namespace must already be set for namespaced resources.
    /// A workload's status is final in the write ([`AtOnce`]); no controller sees it.
    pub fn create(&mut self, res: ResId, obj: Value) -> Result<Arc<Value>, StatusError> {
        self.create_managed(res, obj, Write::Commit, Tracking::Keep, &AtOnce)
            .map(|written| written.object().clone())
    }

    /// Creates an object, recording field ownership as `tracking` says; with
    /// [`Write::DryRun`] everything but the write: the object as it would be stored (uid and
    /// creationTimestamp set, no resourceVersion), nothing kept. `pacing` says whether a
    /// workload's status is left to its controllers.
    pub fn create_managed(
        &mut self,
        res: ResId,
        mut obj: Value,
        write: Write,
        tracking: Tracking<'_>,
        pacing: &dyn Pacing,
    ) -> Result<Written, StatusError> {
        let d = def(res);
        let given = fieldmanager::take(&mut obj);
        let ns = if d.namespaced {
            meta_str(&obj, "namespace").unwrap_or("").to_string()
        } else {
            String::new()
        };
        if d.namespaced && res != ids::NAMESPACES && !self.namespace_exists(&ns) {
            return Err(StatusError::namespace_not_found(&ns));
        }
        if d.namespaced && self.namespace_terminating(&ns) {
            let name = meta_str(&obj, "name").unwrap_or("");
            return Err(deletion::namespace_terminating(d.plural, name, &ns));
        }
        let name = new_object_meta(d.namespaced, &mut obj);
        if name.is_empty() {
            return Err(StatusError::invalid(
                d,
                "",
                &[FieldCause::required(
                    "metadata.name",
                    "name or generateName is required",
                )],
            ));
        }
        strategy::prepare(d, &mut obj, None)?;
        strategy::validate(d, &name, &obj, None)?;
        let key = (res, ns.clone(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(StatusError::already_exists(d, &name));
        }
        {
            let meta = meta_mut(&mut obj);
            meta.insert("uid".into(), json!(util::uuid()));
            meta.insert("creationTimestamp".into(), json!(util::now_seconds()));
            if d.generation {
                meta.insert("generation".into(), json!(1));
            }
        }
        fieldmanager::track(d, None, &mut obj, given, tracking);
        let paced = strategy::is_workload(d) && pacing.paced(&key, &obj);
        fieldmanager::as_controller(d, None, &mut obj, tracking, |o| {
            strategy::sync(d, o, None, false);
            if paced {
                // The controllers write the status as the rollout moves.
                if let Some(o) = o.as_object_mut() {
                    o.remove("status");
                }
            }
        });
        check_stored_size(&obj)?;
        if write == Write::DryRun {
            return Ok(Written::DryRun(Arc::new(obj)));
        }
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let stored = Arc::new(obj);
        self.objects.insert(key, stored.clone());
        self.emit(res, &ns, EventType::Added, stored.clone(), None, rv);
        if Self::is_definition(res) {
            self.serve_definitions(&stored);
        }
        Ok(Written::Stored(Committed {
            res,
            object: stored,
            old: None,
            template_changed: false,
            paced,
        }))
    }

    /// Replaces an existing object with `new` (after the checks `mode` calls for). Returns the
    /// stored object and whether anything changed (a no-op writes nothing). A workload's status
    /// is final in the write ([`AtOnce`]); no controller sees it.
    pub fn update(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        new: Value,
        mode: UpdateMode,
    ) -> Result<(Arc<Value>, bool), StatusError> {
        self.update_managed(Update::kept(res, ns, name, new, mode), &AtOnce)
            .map(|written| (written.object().clone(), written.changed()))
    }

    /// Carries out `update`: the checks its mode calls for, the strategy's preparation and
    /// validation, field ownership, then the write (none for a no-op or a dry run). `pacing`
    /// says whether a workload's status is left to its controllers.
    pub fn update_managed(
        &mut self,
        update: Update<'_>,
        pacing: &dyn Pacing,
    ) -> Result<Written, StatusError> {
        let Update {
            res,
            ns,
            name,
            object: mut new,
            mode,
            write,
            tracking,
        } = update;
        let d = def(res);
        let key = (res, ns.to_string(), name.to_string());
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(StatusError::not_found(d, name));
        };
        let given = fieldmanager::take(&mut new);
        if mode != UpdateMode::Force {
            check_update_preconditions(d, name, &old, &new, mode)?;
        }
        carry_over(d, name, &old, &mut new, mode);
        if mode != UpdateMode::Status {
            strategy::prepare(d, &mut new, Some(&old))?;
            strategy::validate(d, name, &new, Some(&old))?;
        }
        if let Some(cause) = deletion::check_no_new_finalizers(&old, &new) {
            return Err(StatusError::invalid(d, name, &[cause]));
        }
        if mode != UpdateMode::Status {
            bump_generation(d, &old, &mut new);
        }
        let template_changed = strategy::is_workload(d)
            && old.pointer("/spec/template") != new.pointer("/spec/template");
        fieldmanager::track(d, Some(&old), &mut new, given, tracking);
        let paced =
            strategy::is_workload(d) && mode != UpdateMode::Status && pacing.paced(&key, &new);
        if mode != UpdateMode::Status {
            fieldmanager::as_controller(d, Some(&old), &mut new, tracking, |o| {
                strategy::sync(d, o, Some(&old), template_changed);
                if paced && let Some(o) = o.as_object_mut() {
                    // The controllers write the status as the rollout moves.
                    match old.get("status") {
                        Some(status) => o.insert("status".into(), status.clone()),
                        None => o.remove("status"),
                    };
                }
            });
        }
        if new == *old {
            return Ok(Written::Unchanged(old));
        }
        check_stored_size(&new)?;
        if write == Write::DryRun {
            return Ok(Written::DryRun(Arc::new(new)));
        }
        if deletion::is_deleting(&new) && deletion::finalizers(&new).is_empty() {
            // The last finalizer lifted: the update removes the object.
            self.objects.insert(key.clone(), Arc::new(new));
            let deleted = self.remove_with_dependents(&key, &old);
            return Ok(Written::Removed(deleted.object().clone()));
        }
        let rv = self.next_rv();
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
        let stored = Arc::new(new);
        self.objects.insert(key, stored.clone());
        self.emit(
            res,
            ns,
            EventType::Modified,
            stored.clone(),
            Some(old.clone()),
            rv,
        );
        if Self::is_definition(res) {
            self.serve_definitions(&stored);
        }
        Ok(Written::Stored(Committed {
            res,
            object: stored,
            old: Some(old),
            template_changed: template_changed && mode != UpdateMode::Status,
            paced,
        }))
    }

    /// Deletes an object (and, for a namespace, everything in it).
    pub fn delete(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        pre: &Preconditions,
    ) -> Result<Arc<Value>, StatusError> {
        self.delete_with(res, ns, name, pre, Write::Commit)
    }

    /// [`Store::delete`], or with [`Write::DryRun`] the checks only: the object as it is,
    /// nothing removed. Background propagation; an object with finalizers is marked, not
    /// removed (see [`deletion`]).
    pub fn delete_with(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        pre: &Preconditions,
        write: Write,
    ) -> Result<Arc<Value>, StatusError> {
        self.delete_object(res, ns, name, pre, deletion::Propagation::Background, write)
            .map(|deleted| deleted.object().clone())
    }

    /// The objects of `res` in `ns` whose names start with `prefix`, in name order (a
    /// controller's objects named after their owner).
    pub fn named_with_prefix(&self, res: ResId, ns: &str, prefix: &str) -> Vec<Arc<Value>> {
        let start = (res, ns.to_owned(), prefix.to_owned());
        self.objects
            .range(start..)
            .take_while(|((r, n, name), _)| *r == res && n == ns && name.starts_with(prefix))
            .map(|(_, object)| object.clone())
            .collect()
    }

    /// A controller's own write: `obj` stored at (`res`, `ns`, `name`) as created (`old` absent:
    /// uid and creationTimestamp set) or replaced, with a new resourceVersion and its watch
    /// event. No admission, no precondition: the controller owns the object.
    pub fn put_controlled(
        &mut self,
        res: ResId,
        ns: &str,
        name: &str,
        mut obj: Value,
        old: Option<&Value>,
    ) {
        {
            let meta = meta_mut(&mut obj);
            match old {
                Some(old) => {
                    for field in ["uid", "creationTimestamp"] {
                        if let Some(v) = old.pointer(&format!("/metadata/{field}")) {
                            meta.insert(field.into(), v.clone());
                        }
                    }
                }
                None => {
                    meta.insert("uid".into(), json!(util::uuid()));
                    meta.insert("creationTimestamp".into(), json!(util::now_seconds()));
                }
            }
            if def(res).generation {
                meta.insert("generation".into(), json!(1));
            }
        }
        fieldmanager::controller_write(def(res), old, &mut obj);
        if let Some(old) = old {
            // Unchanged but for the resourceVersion the write would give it: nothing to write.
            if let Some(rv) = old.pointer("/metadata/resourceVersion") {
                meta_mut(&mut obj).insert("resourceVersion".into(), rv.clone());
            }
            if obj == *old {
                return;
            }
        }
        let rv = self.next_rv();
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(rv.to_string()));
        let stored = Arc::new(obj);
        let previous = self
            .objects
            .insert((res, ns.to_owned(), name.to_owned()), stored.clone());
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.emit(res, ns, kind, stored, previous, rv);
    }

    /// A controller's own delete: the object at `key` removed at once (no precondition,
    /// finalizer or dependent), with its watch event; its last state.
    pub fn remove_controlled(&mut self, key: &Key) -> Option<Arc<Value>> {
        self.remove_key(key)
    }

    fn remove_key(&mut self, key: &Key) -> Option<Arc<Value>> {
        let old = self.objects.remove(key)?;
        let rv = self.next_rv();
        let mut last = (*old).clone();
        meta_mut(&mut last).insert("resourceVersion".into(), json!(rv.to_string()));
        let last = Arc::new(last);
        self.emit(
            key.0,
            &key.1,
            EventType::Deleted,
            last.clone(),
            Some(old),
            rv,
        );
        Some(last)
    }

    /// Creates a namespace when it does not exist.
    pub fn ensure_namespace(&mut self, ns: &str) -> Result<(), StatusError> {
        if !self.namespace_exists(ns) {
            self.create(
                ids::NAMESPACES,
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
            )?;
        }
        Ok(())
    }
}

/// The metadata a create sets before the strategy sees the object: a name from
/// `generateName`, no namespace for a cluster-scoped resource, none of the fields only the
/// server writes. Returns the name (empty when there is none).
fn new_object_meta(namespaced: bool, obj: &mut Value) -> String {
    let meta = meta_mut(obj);
    let has_name = meta
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    if !has_name
        && let Some(prefix) = meta.get("generateName").and_then(Value::as_str)
        && !prefix.is_empty()
    {
        let name = format!("{prefix}{}", util::name_suffix());
        meta.insert("name".into(), json!(name));
    }
    if !namespaced {
        meta.remove("namespace");
    }
    for field in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
    ] {
        meta.remove(field);
    }
    meta.get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned()
}

/// An update's optimistic concurrency: the resourceVersion and uid it carries, if any, must
/// be the stored object's (a PATCH that changes the uid is invalid, any other write conflicts).
fn check_update_preconditions(
    d: &ResourceDef,
    name: &str,
    old: &Value,
    new: &Value,
    mode: UpdateMode,
) -> Result<(), StatusError> {
    let old_rv = meta_str(old, "resourceVersion").unwrap_or("");
    let new_rv = meta_str(new, "resourceVersion").unwrap_or("");
    if !new_rv.is_empty() && new_rv != old_rv {
        return Err(StatusError::conflict(d, name, OPTIMISTIC_LOCK));
    }
    let old_uid = meta_str(old, "uid").unwrap_or("");
    let new_uid = meta_str(new, "uid").unwrap_or("");
    if new_uid.is_empty() || new_uid == old_uid {
        return Ok(());
    }
    Err(match mode {
        UpdateMode::Patch => StatusError::invalid(
            d,
            name,
            &[FieldCause::invalid(
                "metadata.uid",
                &format!("{new_uid:?}"),
                "field is immutable",
            )],
        ),
        _ => StatusError::conflict(
            d,
            name,
            &format!(
                "Precondition failed: UID in precondition: {new_uid}, UID in object meta: {old_uid}"
            ),
        ),
    })
}

/// What an update keeps of the stored object `old`: everything but the status for a write of
/// the status subresource; the server-written metadata for any write; a workload's status for
/// a write of the main resource (the status subresource owns it).
fn carry_over(d: &ResourceDef, name: &str, old: &Value, new: &mut Value, mode: UpdateMode) {
    if mode == UpdateMode::Status {
        let status = new.get("status").cloned();
        *new = old.clone();
        if let Some(obj) = new.as_object_mut() {
            match status {
                Some(s) => obj.insert("status".into(), s),
                None => obj.remove("status"),
            };
        }
    }
    let old_meta = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let meta = meta_mut(new);
    for field in [
        "uid",
        "creationTimestamp",
        "generation",
        "namespace",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        match old_meta.get(field) {
            Some(v) => meta.insert(field.into(), v.clone()),
            None => meta.remove(field),
        };
    }
    meta.insert("name".into(), json!(name));
    let old_rv = meta_str(old, "resourceVersion").unwrap_or("");
    meta.insert("resourceVersion".into(), json!(old_rv));
    meta.remove("managedFields");
    if strategy::is_workload(d)
        && mode != UpdateMode::Status
        && let Some(obj) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => obj.insert("status".into(), s.clone()),
            None => obj.remove("status"),
        };
    }
}

/// `metadata.generation` moves on with a change of the spec (or, for the kinds that count
/// them, of the annotations).
fn bump_generation(d: &ResourceDef, old: &Value, new: &mut Value) {
    let spec_changed = old.get("spec") != new.get("spec")
        || (strategy::of(d.id)
            .workload
            .is_some_and(|w| w.generation_on_annotations)
            && old.pointer("/metadata/annotations") != new.pointer("/metadata/annotations"));
    if d.generation && spec_changed {
        let generation = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0)
            + 1;
        meta_mut(new).insert("generation".into(), json!(generation));
    }
}

fn check_stored_size(obj: &Value) -> Result<(), StatusError> {
    let size = serde_json::to_vec(obj).map(|v| v.len()).unwrap_or(0);
    if size > MAX_STORED_OBJECT_SIZE {
        return Err(StatusError::new(
            500,
            "",
            "etcdserver: request is too large",
            None,
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(ns: &str, name: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        })
    }

    #[test]
    fn create_assigns_metadata_and_status() {
        let mut s = Store::new();
        assert!(s.ensure_namespace("ns").is_ok());
        let d = s.create(ids::DEPLOYMENTS, deployment("ns", "web"));
        let d = d.unwrap_or_default();
        assert_eq!(d["metadata"]["generation"], 1);
        assert_eq!(d["status"]["observedGeneration"], 1);
        assert!(d["metadata"]["uid"].is_string());
        assert_eq!(
            d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
    }

    #[test]
    fn a_template_change_bumps_the_generation() {
        let mut s = Store::new();
        assert!(s.ensure_namespace("ns").is_ok());
        let d = s
            .create(ids::DEPLOYMENTS, deployment("ns", "web"))
            .unwrap_or_default();
        let mut changed = (*d).clone();
        changed["spec"]["template"]["metadata"]["annotations"] = json!({"x": "1"});
        let (after, wrote) = s
            .update(ids::DEPLOYMENTS, "ns", "web", changed, UpdateMode::Put)
            .unwrap_or_else(|_| (d.clone(), false));
        assert!(wrote);
        assert_eq!(after["metadata"]["generation"], 2);
        assert_eq!(after["status"]["observedGeneration"], 2);
    }

    #[test]
    fn stale_resource_version_conflicts() {
        let mut s = Store::new();
        assert!(s.ensure_namespace("ns").is_ok());
        let d = s
            .create(ids::DEPLOYMENTS, deployment("ns", "web"))
            .unwrap_or_default();
        let mut stale = (*d).clone();
        stale["metadata"]["resourceVersion"] = json!("1");
        let err = s.update(ids::DEPLOYMENTS, "ns", "web", stale, UpdateMode::Put);
        assert_eq!(err.err().map(|e| e.code), Some(409));
    }

    #[test]
    fn no_op_update_writes_nothing() {
        let mut s = Store::new();
        assert!(s.ensure_namespace("ns").is_ok());
        let d = s
            .create(ids::DEPLOYMENTS, deployment("ns", "web"))
            .unwrap_or_default();
        let rv = s.current_rv();
        let r = s.update(ids::DEPLOYMENTS, "ns", "web", (*d).clone(), UpdateMode::Put);
        assert_eq!(r.ok().map(|(_, w)| w), Some(false));
        assert_eq!(s.current_rv(), rv);
    }

    #[test]
    fn ranges_respect_namespaces() {
        let mut s = Store::new();
        for ns in ["a", "ab", "b"] {
            assert!(s.ensure_namespace(ns).is_ok());
            assert!(s.create(ids::DEPLOYMENTS, deployment(ns, "x")).is_ok());
        }
        assert_eq!(s.range(ids::DEPLOYMENTS, Some("a"), None).count(), 1);
        assert_eq!(s.range(ids::DEPLOYMENTS, None, None).count(), 3);
        let first = (ids::DEPLOYMENTS, "a".to_string(), "x".to_string());
        assert_eq!(s.range(ids::DEPLOYMENTS, None, Some(&first)).count(), 2);
    }
}
