//! What the controller remembers: per source, its identity, resourceVersion and per-key value
//! digests; per workload, its consumption and the few facts the decision needs; and a reverse
//! index from each source to the workloads that consume it. Never Secret or ConfigMap data,
//! never a whole object.

use std::collections::HashMap;

use compact_str::CompactString;

use rollsafe_core::annotations::{ROLLOUT, ROLLOUT_WAVE};
use rollsafe_core::object::{self, metadata_text};
use rollsafe_core::opt_in::reloader::{self, NamePattern};
use rollsafe_core::reference::{ConfigRef, TargetKind};
use rollsafe_core::rollout::{RolloutState, classify};
use rollsafe_core::workload::{Deferral, WatchedKind};
use serde_json::Value;

use rollsafe_core::annotations::{
    APPROVAL, APPROVED, CONFIG_RECORD, CONFIG_VERSIONS, EVICTING, HALTED, PENDING,
    RESTART_ON_CHANGE, RESTART_WINDOW, ROLLED_AT, STRATEGY, WATCH,
};
use rollsafe_core::shown::shown_within;
use rollsafe_core::strategy::Strategy;

use crate::annotations::{self, OptIn, PROGRESSIVE, WindowAnnotation};
use crate::consumption::{self, Consumption, Keys};
use crate::decision::{Facts, Plan};
use crate::digest::{Fingerprinter, KeyDigests, SourceDigest, record_id};
use crate::freshness::{Currency, version_number, versions_value};
use crate::reduced::{Reduced, SourceType, digest_of};
use crate::roll_times::RollTimes;
use crate::uid::Uid;

/// A Secret or ConfigMap: kind, namespace, name. Names of up to 24 bytes are held inline
/// ([`CompactString`]), so most keys allocate nothing.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceKey {
    /// Secret or ConfigMap.
    pub kind: TargetKind,
    /// Namespace.
    pub namespace: CompactString,
    /// Name.
    pub name: CompactString,
}

impl SourceKey {
    /// The key of `config` in `namespace`.
    pub fn of(namespace: &str, config: &ConfigRef) -> Self {
        Self {
            kind: config.kind,
            namespace: namespace.into(),
            name: config.name.as_str().into(),
        }
    }
}

/// A workload: kind, namespace, name (inline up to 24 bytes, as [`SourceKey`]'s).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkloadKey {
    /// Deployment, StatefulSet or DaemonSet.
    pub kind: WatchedKind,
    /// Namespace.
    pub namespace: CompactString,
    /// Name.
    pub name: CompactString,
}

impl std::fmt::Display for SourceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

impl std::fmt::Display for WorkloadKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.kind.as_str(), self.namespace, self.name)
    }
}

/// What is kept of one Secret or ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceEntry {
    /// Its resourceVersion and what proves the entry current ([`Currency`]).
    pub currency: Currency,
    /// uid, opt-out and per-key digests.
    pub digest: SourceDigest,
    /// `rollsafe.dev/rollout: progressive`: its consumers roll in waves.
    pub progressive: bool,
    /// Reloader's `reloader.stakater.com/match: "true"` (read under `--reloader-compat`): a
    /// workload's `search` watches it.
    pub reloader_match: bool,
    /// Its `rollsafe.dev/restart-window`, if any: its consumers roll for its changes only
    /// while it is open ([`crate::windows`]). Boxed: most objects have none.
    pub window: Option<Box<WindowAnnotation>>,
    /// `rollsafe.dev/approval` (any value but `"false"`): its consumers roll for its changes
    /// only once approved ([`crate::approval`]).
    pub approval: bool,
    /// The list of its watch that last listed or changed it.
    pub listed: Listing,
}

/// Which list of its watch last listed or changed a cache entry: the end of a list drops the
/// entries of its kind and scope that it did not mark — they disappeared while nothing was
/// watching. Four bytes in the entry's padding, where a set of every listed key, kept until the
/// list ends, cost megabytes at the peak of a cold start at 100,000 Secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Listing(u32);

impl Listing {
    /// Not marked by any list (an entry made outside a watch).
    pub const NONE: Self = Self(0);
}

/// Numbers the lists of every watch, from 1.
#[derive(Debug, Default)]
pub struct Listings(u32);

impl Listings {
    /// The mark of a list that starts now. After `u32::MAX` lists the numbers start over at
    /// 1: by then every entry has been marked again or dropped by a later list of its own
    /// watch.
    pub fn start(&mut self) -> Listing {
        self.0 = self.0.wrapping_add(1).max(1);
        Listing(self.0)
    }
}

impl SourceEntry {
    /// Reduces a live Secret or ConfigMap (as JSON) to its entry; the object can be dropped
    /// afterwards. A Secret's `data` values are base64-decoded before hashing; a value that is
    /// not valid base64 is hashed as its text. ConfigMap `data` is hashed as UTF-8 text and
    /// `binaryData` decoded.
    pub fn from_object(kind: TargetKind, object: &Value) -> Self {
        Self::from_object_in(kind, object, false)
    }

    /// As [`SourceEntry::from_object`]; with `reloader_compat`, Reloader's
    /// `reloader.stakater.com/ignore: "true"` opts the object out too.
    pub fn from_object_in(kind: TargetKind, object: &Value, reloader_compat: bool) -> Self {
        let text = |field: &str| metadata_text(object, field);
        let annotations = object::annotations(object);
        let mut keys = std::collections::BTreeMap::new();
        let fields: &[(&str, bool)] = match kind {
            TargetKind::Secret => &[("data", true)],
            TargetKind::ConfigMap => &[("data", false), ("binaryData", true)],
        };
        for (field, base64) in fields {
            let Some(map) = object.get(*field).and_then(Value::as_object) else {
                continue;
            };
            for (key, value) in map {
                let Some(value) = value.as_str() else {
                    continue;
                };
                keys.insert(key.clone(), digest_of(value, *base64));
            }
        }
        Self::assemble(
            text("resourceVersion"),
            Uid::new(text("uid")),
            |key| annotations.and_then(|a| a.get(key)).and_then(Value::as_str),
            keys,
            reloader_compat,
        )
    }

    /// The entry of a Secret or ConfigMap decoded as [`Reduced`] (the watch streams' form).
    pub fn from_reduced<K: SourceType>(object: Reduced<K>, reloader_compat: bool) -> Self {
        let Reduced { metadata, keys, .. } = object;
        let annotations = metadata.annotations.unwrap_or_default();
        Self::assemble(
            metadata.resource_version.as_deref().unwrap_or_default(),
            metadata.uid.as_deref().map(Uid::new).unwrap_or_default(),
            |key| annotations.get(key).map(String::as_str),
            keys,
            reloader_compat,
        )
    }

    /// The entry from what both forms give: resourceVersion, uid, annotation lookup, digests.
    fn assemble<'a>(
        resource_version: &str,
        uid: Uid,
        annotation: impl Fn(&str) -> Option<&'a str>,
        keys: std::collections::BTreeMap<String, crate::digest::ValueDigest>,
        reloader_compat: bool,
    ) -> Self {
        SourceEntry {
            currency: Currency::at(version_number(resource_version)),
            digest: SourceDigest {
                uid,
                opted_out: annotations::source_opted_out(
                    annotation(WATCH),
                    annotation(RESTART_ON_CHANGE),
                ) || (reloader_compat
                    && reloader::is_true_value(annotation(reloader::IGNORE))),
                keys: keys.into(),
            },
            progressive: annotation(ROLLOUT)
                .is_some_and(|v| v.trim().eq_ignore_ascii_case(PROGRESSIVE)),
            reloader_match: reloader_compat && reloader::is_true_value(annotation(reloader::MATCH)),
            window: annotations::restart_window(annotation(RESTART_WINDOW)),
            approval: annotations::requires_approval(annotation(APPROVAL)),
            listed: Listing::NONE,
        }
    }
}

/// What a workload consumes, kept compact: the (object, keys) pairs in one boxed slice, sorted
/// like the [`Consumption`] map it came from (a `BTreeMap` allocates a node of eleven slots
/// even for one entry). Keys `None`: every key (a whole-object reference).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Consumed(Box<[(ConfigRef, Option<KeyList>)]>);

/// The consumed keys of one object, sorted.
type KeyList = Box<[Box<str>]>;

impl Consumed {
    /// Compacts a consumption.
    pub fn new(consumption: Consumption) -> Self {
        Self(
            consumption
                .into_iter()
                .map(|(config, keys)| {
                    let keys = match keys {
                        Keys::All => None,
                        Keys::Some(keys) => Some(keys.into_iter().map(Box::from).collect()),
                    };
                    (config, keys)
                })
                .collect(),
        )
    }

    /// The consumed objects, in order.
    pub fn objects(&self) -> impl Iterator<Item = &ConfigRef> {
        self.0.iter().map(|(config, _)| config)
    }

    /// The consumption as the digest reads it.
    pub fn expand(&self) -> Consumption {
        self.0
            .iter()
            .map(|(config, keys)| {
                let keys = match keys {
                    None => Keys::All,
                    Some(keys) => Keys::Some(keys.iter().map(|k| k.to_string()).collect()),
                };
                (config.clone(), keys)
            })
            .collect()
    }

    /// Nothing consumed.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What is kept of one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    /// What it consumes (empty when not opted in).
    pub consumption: Consumed,
    /// The facts the decision needs.
    pub facts: Facts,
    /// The inspected patch preconditions and shapes; `None` when the object cannot be patched
    /// (missing uid, resourceVersion or template).
    pub plan: Option<Plan>,
    /// Why its opt-in was not understood, if so (a static code).
    pub opt_in_error: Option<&'static str>,
    /// Its `rollsafe.dev/config-versions`: the resourceVersions its record was written from.
    pub versions: Option<Box<str>>,
    /// Its `rollsafe.dev/rollout-wave` value, if any.
    pub wave: Option<Box<str>>,
    /// What to say of its Reloader annotations.
    pub reloader: ReloaderNote,
    /// The consumed objects watched only while they carry Reloader's `match: "true"` (its
    /// `search`); `None` for most.
    pub match_only: Option<Box<[ConfigRef]>>,
    /// Where its rollout stands, as its last observed object says.
    pub rollout: RolloutState,
    /// Its `rollsafe.dev/restart-window`, if any ([`crate::windows`]).
    pub window: Option<Box<WindowAnnotation>>,
    /// Its `rollsafe.dev/pending` mark: a roll held by a restart window or an approval.
    pub pending: Option<Box<str>>,
    /// Its `rollsafe.dev/approval` requires approval ([`crate::approval`]).
    pub approval: bool,
    /// Its `rollsafe.dev/approved`: the digest a person approved.
    pub approved: Option<Box<str>>,
    /// Its `rollsafe.dev/rolled-at`: when it was last rolled, by any replica.
    pub rolled_at: RollTimes,
    /// The list of its watch that last listed or changed it.
    pub listed: Listing,
    /// Its `rollsafe.dev/strategy`, if it chooses one (docs/strategies.md).
    pub strategy: Option<Strategy>,
    /// What few workloads have (an eviction run's mark, an operator's ownership), boxed so
    /// that the others pay one pointer.
    pub uncommon: Option<Box<Uncommon>>,
}

/// What few workloads have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uncommon {
    /// Its `rollsafe.dev/evicting` mark: an eviction run in progress, for this instant.
    pub evicting: Option<Box<str>>,
    /// The operator's resource that controls it (`Kafka/my-cluster`), when one does: its
    /// template is that operator's ([`rollsafe_core::strategy::operator_owner`]).
    pub operator_owner: Option<Box<str>>,
    /// Reloader's regular-expression `reload` entries: every existing object of its namespace
    /// whose name matches one is consumed, every key ([`Cache::consumption`]); `None` for most.
    pub patterns: Option<Box<[NamePattern]>>,
}

impl Uncommon {
    /// Boxed, unless empty.
    fn boxed(self) -> Option<Box<Self>> {
        (self != Self::default()).then(|| Box::new(self))
    }
}

impl WorkloadEntry {
    /// Its `rollsafe.dev/evicting` mark, if an eviction run is in progress.
    pub fn evicting(&self) -> Option<&str> {
        self.uncommon.as_ref()?.evicting.as_deref()
    }

    /// The operator's resource that controls it, if one does.
    pub fn operator_owner(&self) -> Option<&str> {
        self.uncommon.as_ref()?.operator_owner.as_deref()
    }

    /// Reloader's regular-expression `reload` entries, if it has any.
    pub fn patterns(&self) -> Option<&[NamePattern]> {
        self.uncommon.as_ref()?.patterns.as_deref()
    }

    /// Reduces a live workload (as JSON) to its entry under `--all` = `all`.
    pub fn from_object(kind: WatchedKind, object: &Value, all: bool) -> Self {
        Self::from_object_in(
            kind,
            object,
            Watching {
                all,
                reloader_compat: false,
            },
        )
    }

    /// Reduces a live workload (as JSON) to its entry under `watching`. rollsafe's own
    /// annotation comes first; with `--reloader-compat`, Reloader's annotations decide a
    /// workload without it; then `--all`.
    pub fn from_object_in(kind: WatchedKind, object: &Value, watching: Watching) -> Self {
        Self::classified(kind, object, watching, classify(kind, object).state)
    }

    /// As [`WorkloadEntry::from_object_in`], for a caller that classified the rollout already
    /// (the controller, which keeps the whole verdict for the rollout it follows).
    pub fn classified(
        kind: WatchedKind,
        object: &Value,
        watching: Watching,
        rollout: RolloutState,
    ) -> Self {
        let annotations = object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object);
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).and_then(Value::as_str);
        let reloader = match (annotation(WATCH), annotations) {
            (None, Some(map)) => reloader::reloader_opt_in(map),
            _ => None,
        };
        // Reloader reads a workload's own annotations only; one left on the pod template
        // (a common mistake) is said once, not dropped silently.
        let template_only = || {
            kind.template(object)
                .and_then(|template| template.pointer("/metadata/annotations"))
                .and_then(Value::as_object)
                .and_then(|map| map.keys().find(|key| reloader::is_reloader_annotation(key)))
                .map(|key| ReloaderNote::TemplateOnly(key.as_str().into()))
        };
        let (read, reloader_note) = match reloader {
            Some(_) if !watching.reloader_compat => (
                annotations::workload_opt_in(None, watching.all),
                ReloaderNote::WithoutCompat,
            ),
            Some(Ok(read)) => {
                let note = match read.unsupported {
                    Some(key) => ReloaderNote::Unsupported(key.into_boxed_str()),
                    None => ReloaderNote::None,
                };
                (Ok(read.opt_in), note)
            }
            Some(Err(error)) => (Err(error), ReloaderNote::Refused(error.code())),
            None => (
                annotations::workload_opt_in(annotation(WATCH), watching.all),
                template_only()
                    .filter(|_| watching.reloader_compat && annotation(WATCH).is_none())
                    .unwrap_or_default(),
            ),
        };
        let (opt_in, opt_in_error) = match read {
            // A Rollout whose pods come from a Deployment it references (`spec.workloadRef`)
            // has no template to roll: Argo Rollouts rolls it when that Deployment's template
            // changes, so the Deployment is the one to opt in.
            Ok(opt_in)
                if opt_in != OptIn::Off
                    && kind == WatchedKind::Rollout
                    && kind.template(object).is_none()
                    && object.pointer("/spec/workloadRef").is_some() =>
            {
                (OptIn::Off, Some(WORKLOAD_REF))
            }
            Ok(opt_in) => (opt_in, None),
            Err(error) => (OptIn::Off, Some(error.code())),
        };
        // A strategy that is not understood restarts nothing: neither way is what was asked.
        let strategy = annotation(STRATEGY).map(str::parse::<Strategy>);
        let (opt_in, opt_in_error) = match strategy {
            Some(Err(ref error)) if opt_in != OptIn::Off => (OptIn::Off, Some(error.code())),
            _ => (opt_in, opt_in_error),
        };
        let consumption = consumption::consumption(&opt_in, kind.template(object));
        let match_only = consumption::match_only(&opt_in, &consumption);
        let patterns = match opt_in {
            OptIn::Select { ref patterns, .. } if !patterns.is_empty() => {
                Some(patterns.clone().into_boxed_slice())
            }
            _ => None,
        };
        WorkloadEntry {
            match_only: (!match_only.is_empty()).then(|| match_only.into_boxed_slice()),
            consumption: Consumed::new(consumption),
            facts: Facts {
                watched: opt_in != OptIn::Off,
                record: annotation(CONFIG_RECORD).map(str::to_owned),
                halted: annotation(HALTED).is_some(),
                deferral: Deferral::of(kind, object),
            },
            plan: Plan::inspect_at(object, kind).ok(),
            opt_in_error,
            versions: annotation(CONFIG_VERSIONS).map(Box::from),
            wave: annotation(ROLLOUT_WAVE).map(Box::from),
            window: annotations::restart_window(annotation(RESTART_WINDOW)),
            pending: annotation(PENDING).map(Box::from),
            approval: annotations::requires_approval(annotation(APPROVAL)),
            approved: annotation(APPROVED).map(Box::from),
            rolled_at: annotation(ROLLED_AT)
                .map(RollTimes::parse)
                .unwrap_or_default(),
            rollout,
            reloader: reloader_note,
            listed: Listing::NONE,
            strategy: strategy.and_then(Result::ok),
            uncommon: Uncommon {
                patterns,
                evicting: annotation(EVICTING).map(Box::from),
                operator_owner: rollsafe_core::strategy::operator_owner(object)
                    .map(|owner| shown_within(&owner.to_string(), 256).into_boxed_str()),
            }
            .boxed(),
        }
    }
}

/// The opt-in error of an opted-in Argo Rollout that references a Deployment's template
/// (`spec.workloadRef`): the Deployment is the one to opt in.
pub const WORKLOAD_REF: &str = "workload_ref";

/// How workloads opt in: `--all`, `--reloader-compat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watching {
    /// Every workload is opted in unless it says `"false"`.
    pub all: bool,
    /// Reloader's annotations are honoured with Reloader's meaning.
    pub reloader_compat: bool,
}

/// What the controller should say, once, of a workload's Reloader annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ReloaderNote {
    /// Nothing.
    #[default]
    None,
    /// It has Reloader's annotations and no rollsafe one, and `--reloader-compat` is off.
    WithoutCompat,
    /// Honoured, but this Reloader annotation of it is not implemented.
    Unsupported(Box<str>),
    /// Under `--reloader-compat`, a Reloader annotation found only on its pod template, where
    /// neither Reloader nor rollsafe reads it: not honoured.
    TemplateOnly(Box<str>),
    /// Its Reloader annotations cannot be honoured (this code): not watched.
    Refused(&'static str),
}

/// One Secret or ConfigMap slot: its state when it exists, and the workloads consuming it (the
/// reverse index lives here, so an object's key is stored once). A slot with neither is dropped.
#[derive(Debug, Default)]
struct Slot {
    /// Boxed, like workload entries: spare table capacity then costs a pointer per slot.
    entry: Option<Box<SourceEntry>>,
    /// The consuming workloads as (kind, name), sorted: a workload consumes only objects of its
    /// own namespace, which the key holds.
    consumers: Vec<(WatchedKind, CompactString)>,
}

/// The caches and the reverse index.
#[derive(Debug, Default)]
pub struct Cache {
    sources: HashMap<SourceKey, Slot>,
    /// Slots whose object exists.
    present: usize,
    /// Entries are boxed: the table holds a key and a pointer per slot, so its spare capacity
    /// (up to half of it after a resize) costs pointers, not whole entries.
    workloads: HashMap<WorkloadKey, Box<WorkloadEntry>>,
    /// Cached workloads whose facts say halted (kept with every insert and removal: the count
    /// is published after every watch event).
    halted: usize,
    /// Per namespace, the workloads with regular-expression entries (their consumers are found
    /// by matching, not through the slots).
    pattern_consumers: HashMap<CompactString, Vec<WorkloadKey>>,
    /// Kinds whose watch is restricted (`--source-selector`) or off (`--ignore-kind`): an
    /// object of such a kind that is not cached may exist outside the selection, so it counts
    /// as not watched — left out of the digest like an opted-out object — never as missing.
    unwatched_when_absent: Vec<TargetKind>,
}

/// What an object that is not watched contributes: nothing (it is left out, as opted out).
static UNWATCHED: SourceDigest = SourceDigest {
    uid: Uid::None,
    opted_out: true,
    keys: KeyDigests::new(),
};

impl Cache {
    /// A cache in which an absent object of these kinds counts as not watched.
    #[must_use]
    pub fn with_unwatched_when_absent(mut self, kinds: Vec<TargetKind>) -> Self {
        self.unwatched_when_absent = kinds;
        self
    }

    /// What the digest reads of `config` in `namespace`: its entry's digest; for an absent
    /// object, nothing (missing) or, for a kind watched only in part, [`UNWATCHED`].
    /// For a `match_only` object (Reloader's `search`): [`UNWATCHED`] unless it exists and
    /// carries `match: "true"`.
    fn digest_of(
        &self,
        namespace: &str,
        config: &ConfigRef,
        match_only: Option<&[ConfigRef]>,
    ) -> Option<&SourceDigest> {
        let conditional = match_only.is_some_and(|objects| objects.contains(config));
        match self.source(namespace, config) {
            Some(entry) if conditional && !entry.reloader_match => Some(&UNWATCHED),
            Some(entry) => Some(&entry.digest),
            None if conditional || self.unwatched_when_absent.contains(&config.kind) => {
                Some(&UNWATCHED)
            }
            None => None,
        }
    }

    /// Records a source's current state. Returns whether anything a digest reads changed
    /// (uid, opt-out, a key or a value), i.e. whether its consumers need a new look; a
    /// label- or annotation-only change returns `false`.
    pub fn apply_source(&mut self, key: SourceKey, entry: SourceEntry) -> bool {
        let slot = self.sources.entry(key).or_default();
        match &mut slot.entry {
            Some(existing) => {
                let changed = existing.digest != entry.digest
                    || existing.reloader_match != entry.reloader_match;
                let currency = existing.currency.moved_to(entry.currency.version);
                **existing = SourceEntry { currency, ..entry };
                changed
            }
            empty => {
                *empty = Some(Box::new(entry));
                self.present += 1;
                true
            }
        }
    }

    /// Forgets a deleted source. Returns whether it was known.
    pub fn delete_source(&mut self, key: &SourceKey) -> bool {
        let Some(slot) = self.sources.get_mut(key) else {
            return false;
        };
        let known = slot.entry.take().is_some();
        if known {
            self.present -= 1;
        }
        if slot.consumers.is_empty() {
            self.sources.remove(key);
        }
        known
    }

    /// The workloads that consume a source.
    pub fn consumers<'a>(&'a self, key: &'a SourceKey) -> impl Iterator<Item = WorkloadKey> + 'a {
        let indexed = self
            .sources
            .get(key)
            .into_iter()
            .flat_map(|slot| &slot.consumers)
            .map(|(kind, name)| WorkloadKey {
                kind: *kind,
                namespace: key.namespace.clone(),
                name: name.clone(),
            });
        let by_pattern = self
            .pattern_consumers
            .get(&key.namespace)
            .into_iter()
            .flatten()
            .filter(|workload| {
                let slot = self.sources.get(key);
                let indexed = slot.is_some_and(|slot| {
                    slot.consumers
                        .iter()
                        .any(|(kind, name)| *kind == workload.kind && **name == workload.name)
                });
                !indexed
                    && self.workloads.get(*workload).is_some_and(|entry| {
                        entry
                            .patterns()
                            .into_iter()
                            .flatten()
                            .any(|p| p.matches(key.kind, &key.name))
                    })
            })
            .cloned();
        indexed.chain(by_pattern)
    }

    /// What a workload consumes now: its consumption, plus every existing object of its
    /// namespace that one of its patterns matches (every key). Objects are visited in the
    /// cache's order; the result is sorted (a `Consumption` is a sorted map).
    pub fn consumption(&self, key: &WorkloadKey, entry: &WorkloadEntry) -> Consumption {
        let mut consumption = entry.consumption.expand();
        if let Some(patterns) = entry.patterns() {
            for (source, slot) in &self.sources {
                if slot.entry.is_none()
                    || source.namespace != key.namespace
                    || !patterns
                        .iter()
                        .any(|p| p.matches(source.kind, &source.name))
                {
                    continue;
                }
                consumption.insert(
                    ConfigRef {
                        kind: source.kind,
                        name: source.name.to_string(),
                    },
                    Keys::All,
                );
            }
        }
        consumption
    }

    /// The objects a workload consumes now ([`Cache::consumption`]'s keys).
    pub fn consumed_objects(&self, key: &WorkloadKey, entry: &WorkloadEntry) -> Vec<ConfigRef> {
        match entry.patterns() {
            None => entry.consumption.objects().cloned().collect(),
            Some(_) => self.consumption(key, entry).into_keys().collect(),
        }
    }

    /// Marks a source's entry confirmed by a consistent read that returned `version`; whether
    /// the entry is at that version (else the cache is behind, or moved on since the read).
    pub fn confirm(&mut self, key: &SourceKey, version: u64) -> bool {
        let Some(entry) = self
            .sources
            .get_mut(key)
            .and_then(|slot| slot.entry.as_mut())
        else {
            return false;
        };
        let current = version != 0 && entry.currency.version == version;
        if current {
            entry.currency.confirmed = true;
        }
        current
    }

    /// A source's entry, if it exists.
    pub fn source_entry(&self, key: &SourceKey) -> Option<&SourceEntry> {
        self.sources.get(key).and_then(|slot| slot.entry.as_deref())
    }

    fn source(&self, namespace: &str, config: &ConfigRef) -> Option<&SourceEntry> {
        self.sources
            .get(&SourceKey::of(namespace, config))
            .and_then(|slot| slot.entry.as_deref())
    }

    /// Records a workload's current state and re-indexes what it consumes.
    pub fn apply_workload(&mut self, key: WorkloadKey, entry: WorkloadEntry) {
        self.unindex(&key);
        if entry.patterns().is_some() {
            self.pattern_consumers
                .entry(key.namespace.clone())
                .or_default()
                .push(key.clone());
        }
        let member = (key.kind, key.name.clone());
        for config in entry.consumption.objects() {
            let list = &mut self
                .sources
                .entry(SourceKey::of(&key.namespace, config))
                .or_default()
                .consumers;
            if let Err(at) = list.binary_search(&member) {
                list.insert(at, member.clone());
            }
        }
        if entry.facts.halted {
            self.halted += 1;
        }
        if let Some(old) = self.workloads.insert(key, Box::new(entry))
            && old.facts.halted
        {
            self.halted -= 1;
        }
    }

    /// Forgets a deleted workload.
    pub fn delete_workload(&mut self, key: &WorkloadKey) {
        self.unindex(key);
        if let Some(old) = self.workloads.remove(key)
            && old.facts.halted
        {
            self.halted -= 1;
        }
    }

    fn unindex(&mut self, key: &WorkloadKey) {
        let Some(old) = self.workloads.get(key) else {
            return;
        };
        if old.patterns().is_some()
            && let Some(keys) = self.pattern_consumers.get_mut(&key.namespace)
        {
            keys.retain(|k| k != key);
            if keys.is_empty() {
                self.pattern_consumers.remove(&key.namespace);
            }
        }
        let member = (key.kind, key.name.clone());
        for config in old.consumption.objects() {
            let source = SourceKey::of(&key.namespace, config);
            if let Some(slot) = self.sources.get_mut(&source) {
                if let Ok(at) = slot.consumers.binary_search(&member) {
                    slot.consumers.remove(at);
                }
                if slot.consumers.is_empty() && slot.entry.is_none() {
                    self.sources.remove(&source);
                }
            }
        }
    }

    /// One workload's entry.
    pub fn workload(&self, key: &WorkloadKey) -> Option<&WorkloadEntry> {
        self.workloads.get(key).map(Box::as_ref)
    }

    /// Every known workload.
    pub fn workload_keys(&self) -> impl Iterator<Item = &WorkloadKey> {
        self.workloads.keys()
    }

    /// The keys of the cached sources (those whose object exists).
    pub fn source_keys(&self) -> impl Iterator<Item = &SourceKey> {
        self.sources
            .iter()
            .filter(|(_, slot)| slot.entry.is_some())
            .map(|(key, _)| key)
    }

    /// Keeps only the sources of `kind` that `keep` says still exist (after a relist).
    /// Returns the removed ones.
    pub fn retain_sources(
        &mut self,
        kind: TargetKind,
        keep: impl Fn(&SourceKey, Listing) -> bool,
    ) -> Vec<SourceKey> {
        let gone: Vec<SourceKey> = self
            .sources
            .iter()
            .filter(|(key, slot)| {
                key.kind == kind
                    && slot
                        .entry
                        .as_ref()
                        .is_some_and(|entry| !keep(key, entry.listed))
            })
            .map(|(key, _)| key.clone())
            .collect();
        for key in &gone {
            self.delete_source(key);
        }
        gone
    }

    /// Keeps only the workloads of `kind` that `keep` says still exist (after a relist).
    pub fn retain_workloads(
        &mut self,
        kind: WatchedKind,
        keep: impl Fn(&WorkloadKey, Listing) -> bool,
    ) {
        let gone: Vec<WorkloadKey> = self
            .workloads
            .iter()
            .filter(|(key, entry)| key.kind == kind && !keep(key, entry.listed))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &gone {
            self.delete_workload(key);
        }
    }

    /// The digest of what a workload consumes now.
    pub fn digest(&self, key: &WorkloadKey, fingerprinter: &Fingerprinter) -> Option<String> {
        let entry = self.workloads.get(key)?;
        Some(
            fingerprinter.digest(&self.consumption(key, entry), |config| {
                self.digest_of(&key.namespace, config, entry.match_only.as_deref())
            }),
        )
    }

    /// The record of what a workload consumes now (see [`Fingerprinter::record`]).
    pub fn record(&self, key: &WorkloadKey, fingerprinter: &Fingerprinter) -> Option<String> {
        let entry = self.workloads.get(key)?;
        Some(
            fingerprinter.record(&self.consumption(key, entry), |config| {
                self.digest_of(&key.namespace, config, entry.match_only.as_deref())
            }),
        )
    }

    /// The `rollsafe.dev/config-versions` of what a workload consumes now: per object in the
    /// record, the resourceVersion its state was read from.
    pub fn versions(&self, key: &WorkloadKey) -> Option<String> {
        let entry = self.workloads.get(key)?;
        Some(versions_value(
            self.consumed_objects(key, entry)
                .iter()
                .filter_map(|config| {
                    let source = self.source(&key.namespace, config)?;
                    (!source.digest.opted_out).then(|| (record_id(config), source.currency.version))
                }),
        ))
    }

    /// Whether every object a workload consumes exists.
    pub fn sources_present(&self, key: &WorkloadKey) -> bool {
        self.workloads.get(key).is_some_and(|entry| {
            // Pattern-matched objects exist by construction.
            entry.consumption.objects().all(|config| {
                self.digest_of(&key.namespace, config, entry.match_only.as_deref())
                    .is_some()
            })
        })
    }

    /// Numbers of cached sources and workloads.
    pub fn len(&self) -> (usize, usize) {
        (self.present, self.workloads.len())
    }

    /// How many cached workloads are halted now.
    pub fn halted(&self) -> usize {
        self.halted
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty() && self.workloads.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::value_digest;
    use serde_json::json;

    fn secret(name: &str, uid: &str, rv: &str, data: Value, annotations: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv,
            "annotations": annotations, "labels": {"x": rv}}, "data": data})
    }
    fn skey(name: &str) -> SourceKey {
        SourceKey {
            kind: TargetKind::Secret,
            namespace: "ns".into(),
            name: name.into(),
        }
    }
    fn wkey(name: &str) -> WorkloadKey {
        WorkloadKey {
            kind: WatchedKind::Deployment,
            namespace: "ns".into(),
            name: name.into(),
        }
    }
    fn deployment(secret_key: Option<&str>) -> Value {
        let env = match secret_key {
            Some(k) => {
                json!([{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": k}}}])
            }
            None => json!([]),
        };
        json!({"metadata": {"name": "web", "namespace": "ns", "uid": "w", "resourceVersion": "1",
                "annotations": {"rollsafe.dev/watch": "true"}},
               "spec": {"template": {"spec": {"containers": [{"name": "a", "env": env}]}}}})
    }

    #[test]
    fn source_entries_keep_digests_not_data() {
        let object = secret(
            "db",
            "u1",
            "5",
            json!({"password": "aHVudGVyMg=="}),
            json!({}),
        );
        let entry = SourceEntry::from_object(TargetKind::Secret, &object);
        assert_eq!(entry.currency, Currency::at(5));
        assert_eq!(entry.digest.uid, "u1");
        assert_eq!(
            entry.digest.keys.get("password"),
            Some(&value_digest(b"hunter2"))
        );
        assert!(!format!("{entry:?}").contains("hunter2"));
        let cm = json!({"metadata": {"uid": "c"}, "data": {"a": "x"}, "binaryData": {"b": "eQ=="}});
        let entry = SourceEntry::from_object(TargetKind::ConfigMap, &cm);
        assert_eq!(entry.digest.keys.get("a"), Some(&value_digest(b"x")));
        assert_eq!(entry.digest.keys.get("b"), Some(&value_digest(b"y")));
        let out = secret(
            "db",
            "u1",
            "5",
            json!({}),
            json!({"openchoreo.dev/restart-on-change": "false"}),
        );
        assert!(
            SourceEntry::from_object(TargetKind::Secret, &out)
                .digest
                .opted_out
        );
    }

    #[test]
    fn metadata_only_changes_do_not_count() {
        let mut cache = Cache::default();
        let v = |rv: &str, data: Value, ann: Value| {
            SourceEntry::from_object(TargetKind::Secret, &secret("db", "u1", rv, data, ann))
        };
        assert!(cache.apply_source(skey("db"), v("1", json!({"k": "YQ=="}), json!({}))));
        // Labels and unrelated annotations change, data does not.
        assert!(!cache.apply_source(skey("db"), v("2", json!({"k": "YQ=="}), json!({"a": "b"}))));
        assert!(cache.apply_source(skey("db"), v("3", json!({"k": "Yg=="}), json!({"a": "b"}))));
        assert!(cache.apply_source(
            skey("db"),
            v(
                "4",
                json!({"k": "Yg=="}),
                json!({"rollsafe.dev/watch": "false"})
            )
        ));
    }

    #[test]
    fn halted_workloads_are_counted_until_the_annotation_goes() {
        let mut cache = Cache::default();
        let mut halted = deployment(Some("password"));
        halted["metadata"]["annotations"]["rollsafe.dev/halted"] = json!("flapping");
        let entry = |o: &Value| WorkloadEntry::from_object(WatchedKind::Deployment, o, false);
        cache.apply_workload(wkey("web"), entry(&halted));
        cache.apply_workload(wkey("api"), entry(&deployment(None)));
        assert_eq!(cache.halted(), 1);
        cache.apply_workload(wkey("web"), entry(&deployment(Some("password"))));
        assert_eq!(cache.halted(), 0);
        cache.apply_workload(wkey("web"), entry(&halted));
        cache.delete_workload(&wkey("web"));
        assert_eq!(cache.halted(), 0);
    }

    #[test]
    fn reverse_index_follows_the_template() {
        let mut cache = Cache::default();
        let entry = |k| WorkloadEntry::from_object(WatchedKind::Deployment, &deployment(k), false);
        cache.apply_workload(wkey("web"), entry(Some("password")));
        assert_eq!(
            cache.consumers(&skey("db")).collect::<Vec<_>>(),
            [wkey("web")]
        );
        cache.apply_workload(wkey("web"), entry(None));
        assert_eq!(cache.consumers(&skey("db")).count(), 0);
        cache.apply_workload(wkey("web"), entry(Some("password")));
        cache.delete_workload(&wkey("web"));
        assert_eq!(cache.consumers(&skey("db")).count(), 0);
        assert!(cache.is_empty());
    }

    #[test]
    fn digest_reads_the_cache() {
        let mut cache = Cache::default();
        let f = Fingerprinter::unkeyed();
        cache.apply_workload(
            wkey("web"),
            WorkloadEntry::from_object(WatchedKind::Deployment, &deployment(Some("p")), false),
        );
        let missing = cache.digest(&wkey("web"), &f);
        let s = |data| {
            SourceEntry::from_object(TargetKind::Secret, &secret("db", "u", "1", data, json!({})))
        };
        cache.apply_source(skey("db"), s(json!({"p": "YQ==", "q": "YQ=="})));
        let present = cache.digest(&wkey("web"), &f);
        assert_ne!(missing, present);
        cache.apply_source(skey("db"), s(json!({"p": "YQ==", "q": "Yg=="})));
        assert_eq!(cache.digest(&wkey("web"), &f), present, "unreferenced key");
        let gone = cache.retain_sources(TargetKind::Secret, |_, _| false);
        assert_eq!(gone, [skey("db")]);
        assert_eq!(cache.digest(&wkey("web"), &f), missing);
    }

    #[test]
    fn malformed_opt_in_is_not_watched() {
        let mut object = deployment(Some("p"));
        object["metadata"]["annotations"]["rollsafe.dev/watch"] = json!("pods/x");
        let entry = WorkloadEntry::from_object(WatchedKind::Deployment, &object, true);
        assert!(!entry.facts.watched);
        assert_eq!(entry.opt_in_error, Some("watch_entry"));
        assert!(entry.consumption.is_empty());
    }

    #[test]
    fn a_slot_keeps_consumers_of_a_missing_object_and_counts_only_existing_ones() {
        let mut cache = Cache::default();
        let entry = WorkloadEntry::from_object(
            WatchedKind::Deployment,
            &deployment(Some("password")),
            false,
        );
        cache.apply_workload(wkey("web"), entry);
        assert_eq!(cache.len(), (0, 1));
        assert_eq!(
            cache.consumers(&skey("db")).collect::<Vec<_>>(),
            [wkey("web")]
        );
        assert!(!cache.sources_present(&wkey("web")));
        let db = secret("db", "u-1", "1", json!({"password": "eA=="}), json!({}));
        assert!(cache.apply_source(
            skey("db"),
            SourceEntry::from_object(TargetKind::Secret, &db)
        ));
        assert_eq!(cache.len(), (1, 1));
        assert!(cache.sources_present(&wkey("web")));
        assert!(cache.delete_source(&skey("db")));
        assert!(!cache.delete_source(&skey("db")), "already gone");
        assert_eq!(cache.len(), (0, 1));
        assert_eq!(cache.consumers(&skey("db")).count(), 1, "still consumed");
        cache.delete_workload(&wkey("web"));
        assert!(cache.is_empty());
    }

    #[test]
    fn reloader_annotations_need_the_compat_flag_and_rollsafe_wins() {
        let object = |annotations: Value| {
            json!({"metadata": {"name": "web", "namespace": "shop", "uid": "u", "resourceVersion": "1",
                                "annotations": annotations},
                   "spec": {"template": {"spec": {"containers": [{"name": "c",
                       "envFrom": [{"secretRef": {"name": "db"}}, {"configMapRef": {"name": "cfg"}}]}]}}}})
        };
        let read = |annotations: Value, reloader_compat: bool| {
            WorkloadEntry::from_object_in(
                WatchedKind::Deployment,
                &object(annotations),
                Watching {
                    all: false,
                    reloader_compat,
                },
            )
        };
        let auto = json!({"reloader.stakater.com/auto": "true"});
        let without = read(auto.clone(), false);
        assert!(!without.facts.watched);
        assert_eq!(without.reloader, ReloaderNote::WithoutCompat);
        let with = read(auto, true);
        assert!(with.facts.watched);
        assert_eq!(with.consumption.objects().count(), 2);
        // rollsafe's own annotation decides when both are there.
        let both = read(
            json!({"reloader.stakater.com/auto": "true", "rollsafe.dev/watch": "false"}),
            true,
        );
        assert!(!both.facts.watched);
        let secrets = read(json!({"secret.reloader.stakater.com/auto": "true"}), true);
        let kinds: Vec<TargetKind> = secrets.consumption.objects().map(|c| c.kind).collect();
        assert_eq!(kinds, [TargetKind::Secret]);
        let unsupported = read(
            json!({"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"}),
            true,
        );
        assert_eq!(
            unsupported.reloader,
            ReloaderNote::Unsupported("reloader.stakater.com/rollout-strategy".into())
        );
        assert!(unsupported.facts.watched);
    }
}
