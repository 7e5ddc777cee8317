//! The config-hash render engine: which annotation each workload's pod template gets so that
//! its pods roll when the configuration rendered beside it changes.
//!
//! Pure: the input is the list of rendered objects (plus, for referenced-config rollout, the
//! previous copies of the workloads, and [`RenderSettings`]); the output is a list of [`Update`]s —
//! annotations to set or remove — or a [`RenderError`] naming the resource. [`render`] plans and
//! applies in one step; [`pipeline`] gives the pieces of a default-mode render and write of a
//! whole manifest set (the threads are the caller's choice).
//!
//! # Default mode
//!
//! Value-compatible with upstream OpenChoreo's `openchoreo.dev/dp-resource-hash`:
//!
//! - With a [`WorkloadType`], the *first* object of that kind (Deployment or StatefulSet) is the
//!   workload. Every other object is hashed except those of the workload's own kind and
//!   NetworkPolicies. Nothing else is annotated: upstream's one-workload mode, exactly.
//! - Without one, every Deployment, StatefulSet, DaemonSet and CronJob is a workload and gets
//!   the hash of the objects of the other kinds (again without NetworkPolicies). A Deployment
//!   or StatefulSet hashed into another workload's hash leaves out its pod template's
//!   `metadata` too, where this feature's own annotation lives, so rendering an output again
//!   gives the same output. A DaemonSet or CronJob is hashed as any object is (upstream hashes
//!   it so, and the Deployments' and StatefulSets' values must not change), but as it was
//!   rendered: the annotation written on it, recorded by a marker on its own metadata, is taken
//!   back before it is hashed ([`stamp`]). A CronJob's annotation is on its Jobs' pod template,
//!   `spec.jobTemplate.spec.template`.
//! - Each hashed object leaves out its top-level `metadata`; the objects are stable-sorted by
//!   kind, apiVersion, namespace and name; the list is dumped as Go's go-spew `%#v` does
//!   ([`dump`]), numbers as `float64`; FNV-1a 32-bit; decimal digits mapped through the
//!   safe-encoding alphabet ([`hash`]).
//! - When nothing is hashed, the annotation is left as it is (upstream's behaviour).
//! - A DaemonSet or CronJob that cannot take the annotation (no `spec` map, or something other
//!   than a map on the way) is left as it is, never an error: renders that succeeded before
//!   these kinds were annotated still succeed.
//!
//! # Referenced-config rollout
//!
//! The annotation changes only when a resource that matters to the pods changes: a rendered
//! ConfigMap, Secret or ExternalSecret (by its target Secret name) that the pod template
//! references, or any resource marked `openchoreo.dev/restart-on-change: "true"`; never one
//! marked `"false"`. The promises that need memory work from a state annotation kept on the
//! workload's own `metadata.annotations` (which does not roll pods), read from the previous copy
//! of the workload:
//!
//! - no previous copy is known at all (`previous` is `None`): the annotation is a hash of the
//!   resources that matter (stateless);
//! - previous copies are known but this workload is new: the default-mode hash, so turning the
//!   setting off later restarts nothing when nothing changed;
//! - the previous copy has no state (the setting was just turned on) or a state under another
//!   fingerprint key: the previous annotation is kept;
//! - otherwise the previous annotation is kept unless a resource that matters now changed since
//!   the previous render, is new and referenced, or mattered before and is no longer rendered;
//!   then it is chained from the previous value to a new one.
//!
//! A DaemonSet or CronJob follows the same rules from its own pod template's references. Two of
//! one identity are both left as they are (a Deployment or StatefulSet rendered twice is an
//! error, [`RenderError::DuplicateWorkload`]; a new kind never fails a render). Its
//! `restart-on-change` mark is read as before: a DaemonSet marked `"true"` still counts for the
//! Deployments and StatefulSets beside it, as it is rendered (its own annotation taken back).

pub mod dump;
pub mod hash;
pub mod patch;
pub mod pipeline;
pub mod setting;
mod stamp;
mod state;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};
use thiserror::Error;

use crate::annotations::{DP_RESOURCE_HASH, REFERENCED_CONFIG_STATE, RESTART_ON_CHANGE};
use crate::reference::{self, ConfigRef, TargetKind};
use dump::{NumberType, Sink, Strip};
use hash::Fnv32a;
use stamp::TemplatePath;
use state::{Digester, State, Tracked};

const NETWORK_POLICY: &str = "NetworkPolicy";
const DEPLOYMENT: &str = "Deployment";
const STATEFUL_SET: &str = "StatefulSet";
const DAEMON_SET: &str = "DaemonSet";
const CRON_JOB: &str = "CronJob";

/// Upstream's ComponentType workload types that get the annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkloadType {
    /// `deployment`: the first Deployment is the workload.
    Deployment,
    /// `statefulset`: the first StatefulSet is the workload.
    StatefulSet,
}

impl WorkloadType {
    /// The workload's Kubernetes kind.
    pub fn kind(self) -> &'static str {
        self.annotated().kind()
    }

    fn annotated(self) -> AnnotatedKind {
        match self {
            WorkloadType::Deployment => AnnotatedKind::Deployment,
            WorkloadType::StatefulSet => AnnotatedKind::StatefulSet,
        }
    }
}

/// The kinds whose pod templates get the annotation (matched by `kind` alone, as upstream
/// matches its workload kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnnotatedKind {
    /// Upstream's `deployment` workload: `spec.template`.
    Deployment,
    /// Upstream's `statefulset` workload: `spec.template`.
    StatefulSet,
    /// `spec.template`, with the [`POD_TEMPLATE_STAMP`](crate::annotations::POD_TEMPLATE_STAMP) marker; only without a [`WorkloadType`].
    DaemonSet,
    /// The Jobs' pod template `spec.jobTemplate.spec.template`, with the [`POD_TEMPLATE_STAMP`](crate::annotations::POD_TEMPLATE_STAMP)
    /// marker; only without a [`WorkloadType`].
    CronJob,
}

impl AnnotatedKind {
    const ALL: [AnnotatedKind; 4] = [
        AnnotatedKind::Deployment,
        AnnotatedKind::StatefulSet,
        AnnotatedKind::DaemonSet,
        AnnotatedKind::CronJob,
    ];

    /// The Kubernetes kind.
    pub fn kind(self) -> &'static str {
        match self {
            AnnotatedKind::Deployment => DEPLOYMENT,
            AnnotatedKind::StatefulSet => STATEFUL_SET,
            AnnotatedKind::DaemonSet => DAEMON_SET,
            AnnotatedKind::CronJob => CRON_JOB,
        }
    }

    /// The kind named by an object's `kind` field, exactly.
    pub fn of(kind: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.kind() == kind)
    }

    /// Upstream's kinds, annotated as upstream annotates them; the others carry a marker.
    fn upstream(self) -> bool {
        matches!(self, AnnotatedKind::Deployment | AnnotatedKind::StatefulSet)
    }

    /// The maps from `spec` to the pod template's annotations.
    fn path(self) -> TemplatePath {
        match self {
            AnnotatedKind::CronJob => CRON_JOB_PATH,
            _ => HASH_PATH,
        }
    }

    /// The pod template of an object of this kind.
    fn template(self, object: &Map<String, Value>) -> Option<&Value> {
        let spec = object.get("spec")?;
        match self {
            AnnotatedKind::CronJob => spec.get("jobTemplate")?.get("spec")?.get("template"),
            _ => spec.get("template"),
        }
    }

    /// JSON pointer to the pod template's annotations.
    fn annotations_pointer(self) -> &'static str {
        match self {
            AnnotatedKind::CronJob => "/spec/jobTemplate/spec/template/metadata/annotations",
            _ => "/spec/template/metadata/annotations",
        }
    }
}

/// The secret key for the state's content digests. `Debug` does not print it.
#[derive(Clone, PartialEq, Eq)]
pub struct FingerprintKey(Vec<u8>);

impl FingerprintKey {
    /// A key from raw bytes; `None` when empty.
    pub fn new(bytes: Vec<u8>) -> Option<Self> {
        (!bytes.is_empty()).then_some(Self(bytes))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for FingerprintKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FingerprintKey(<redacted>)")
    }
}

/// How to render.
#[derive(Debug, Clone, Default)]
pub struct RenderSettings {
    /// Upstream's behaviour for one workload type; `None`: every Deployment and StatefulSet.
    pub workload_type: Option<WorkloadType>,
    /// Referenced-config rollout on or off.
    pub referenced_config_rollout: bool,
    /// Key for the state's content digests; without it they are unkeyed 32-bit digests.
    pub fingerprint_key: Option<FingerprintKey>,
    /// The namespace the objects are applied into (a Helm release's namespace). An object
    /// without `metadata.namespace`, in the input or among the previous copies, is matched as
    /// being in it. `None`: such objects match only previous copies without a namespace.
    pub release_namespace: Option<String>,
}

/// What to do with one annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edit {
    /// Leave it as it is.
    Keep,
    /// Set it to this value.
    Set(String),
    /// Remove it when present.
    Remove,
}

/// Whether a workload's previous copy was looked for, and found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreviousCopy {
    /// Not looked for: default mode, or no previous copies were given at all.
    NotRead,
    /// Found (by kind, namespace as applied, and name).
    Found,
    /// Previous copies were given, but none of this workload: it is rendered as new, with the
    /// default-mode value, and its state starts now.
    Missing,
}

/// The annotations to write on one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// Index of the workload in the input list.
    pub index: usize,
    /// The workload's kind, which says where its pod template is.
    pub kind: AnnotatedKind,
    /// [`DP_RESOURCE_HASH`] under the pod template's `metadata.annotations`
    /// (`spec.template`, a CronJob's `spec.jobTemplate.spec.template`). On a DaemonSet or
    /// CronJob a value is written with its [`POD_TEMPLATE_STAMP`](crate::annotations::POD_TEMPLATE_STAMP) marker, and a removal takes
    /// back only a value this feature wrote.
    pub hash: Edit,
    /// [`REFERENCED_CONFIG_STATE`] under `metadata.annotations`.
    pub state: Edit,
    /// Whether the workload's previous copy was found.
    pub previous: PreviousCopy,
}

/// Names a resource in messages: kind, namespace and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceName {
    /// `kind`, or empty.
    pub kind: String,
    /// `metadata.namespace`, when set.
    pub namespace: Option<String>,
    /// `metadata.name`, when set.
    pub name: Option<String>,
}

impl ResourceName {
    /// The name of an object.
    pub fn of(object: &Value) -> Self {
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_owned);
        let metadata = object.get("metadata");
        Self {
            kind: text(object.get("kind")).unwrap_or_default(),
            namespace: text(metadata.and_then(|m| m.get("namespace"))).filter(|s| !s.is_empty()),
            name: text(metadata.and_then(|m| m.get("name"))),
        }
    }
}

impl fmt::Display for ResourceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.kind.is_empty() {
            "object"
        } else {
            &self.kind
        };
        let name = self.name.as_deref().unwrap_or("<unnamed>");
        match &self.namespace {
            Some(namespace) => write!(f, "{kind} {namespace}/{name}"),
            None => write!(f, "{kind} {name}"),
        }
    }
}

/// Why a render failed. Every error names the resource and its index in the input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RenderError {
    /// The workload to annotate has no `spec` map (upstream: "resource missing spec").
    #[error("{resource}: resource missing spec")]
    MissingSpec {
        /// Index in the input.
        index: usize,
        /// The workload.
        resource: ResourceName,
    },
    /// A map on the way to an annotation is something else.
    #[error("{resource}: {field} is not a map")]
    NotAMap {
        /// Index in the input.
        index: usize,
        /// The object.
        resource: ResourceName,
        /// The field, e.g. `spec.template.metadata`.
        field: &'static str,
    },
    /// `openchoreo.dev/restart-on-change` is neither the string "true" nor "false".
    #[error(
        "{resource}: invalid {RESTART_ON_CHANGE} annotation {value}: the value must be the string \"true\" or \"false\""
    )]
    InvalidRestartOnChange {
        /// Index in the input.
        index: usize,
        /// The object.
        resource: ResourceName,
        /// The bad value as shown in the message.
        value: String,
    },
    /// Referenced-config mode met two workloads of one identity (kind, namespace as applied,
    /// name): each keeps its state under that identity, so which previous copy is whose would
    /// be a guess.
    #[error(
        "{resource}: the same workload is rendered twice; referenced-config rollout keeps one state per workload"
    )]
    DuplicateWorkload {
        /// Index in the input of the second copy.
        index: usize,
        /// The workload.
        resource: ResourceName,
    },
}

impl RenderError {
    /// Index of the resource in the input.
    pub fn index(&self) -> usize {
        match self {
            RenderError::MissingSpec { index, .. }
            | RenderError::NotAMap { index, .. }
            | RenderError::InvalidRestartOnChange { index, .. }
            | RenderError::DuplicateWorkload { index, .. } => *index,
        }
    }
}

/// One input object as the engine sees it.
struct Object<'a> {
    map: &'a Map<String, Value>,
    kind: &'a str,
    api_version: &'a str,
    namespace: &'a str,
    name: &'a str,
}

impl<'a> Object<'a> {
    fn new(value: &'a Value) -> Option<Self> {
        let map = value.as_object()?;
        let text = |v: Option<&'a Value>| v.and_then(Value::as_str).unwrap_or("");
        let metadata = map.get("metadata");
        Some(Self {
            map,
            kind: text(map.get("kind")),
            api_version: text(map.get("apiVersion")),
            namespace: text(metadata.and_then(|m| m.get("namespace"))),
            name: text(metadata.and_then(|m| m.get("name"))),
        })
    }

    fn resource_name(&self) -> ResourceName {
        ResourceName {
            kind: self.kind.to_owned(),
            namespace: (!self.namespace.is_empty()).then(|| self.namespace.to_owned()),
            name: self
                .map
                .get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .map(str::to_owned),
        }
    }

    /// The namespace the object will be in: its own, else the release's.
    fn applied_namespace<'r>(&self, release_namespace: &'r str) -> &'r str
    where
        'a: 'r,
    {
        if self.namespace.is_empty() {
            release_namespace
        } else {
            self.namespace
        }
    }

    fn group(&self) -> &'a str {
        match self.api_version.rsplit_once('/') {
            Some((group, _)) => group,
            None => "",
        }
    }

    fn annotation(&self, key: &str) -> Option<&'a Value> {
        self.map.get("metadata")?.get("annotations")?.get(key)
    }

    /// The Secret or ConfigMap name a pod template would reference to consume this object.
    fn config_target(&self) -> Option<ConfigRef> {
        let (kind, name) = match (self.kind, self.group()) {
            ("ConfigMap", "") => (TargetKind::ConfigMap, self.name),
            ("Secret", "") => (TargetKind::Secret, self.name),
            ("ExternalSecret", "external-secrets.io") => {
                let target = self
                    .map
                    .get("spec")
                    .and_then(|s| s.get("target"))
                    .and_then(|t| t.get("name"))
                    .and_then(Value::as_str)
                    .filter(|n| !n.is_empty());
                (TargetKind::Secret, target.unwrap_or(self.name))
            }
            _ => return None,
        };
        (!name.is_empty()).then(|| ConfigRef {
            kind,
            name: name.to_owned(),
        })
    }
}

/// The workloads of one kind and what their hash covers.
struct Group {
    kind: AnnotatedKind,
    workloads: Vec<usize>,
    /// Indices of the objects hashed, in hash order.
    hashed: Vec<usize>,
    views: Vec<View>,
}

/// How an object is seen by every hash and digest of a render (the same in every group).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct View {
    /// What the dump leaves out.
    strip: Strip,
    /// A DaemonSet or CronJob: seen with the annotation this feature wrote taken back.
    unstamp: Option<AnnotatedKind>,
}

impl View {
    /// The view of `object`: without a workload type, a Deployment or StatefulSet leaves out
    /// its pod template's metadata and a DaemonSet or CronJob is seen as it was rendered; with
    /// one, every object is seen as it is (upstream).
    fn of(object: &Object<'_>, workload_type: Option<WorkloadType>) -> Self {
        match (workload_type, AnnotatedKind::of(object.kind)) {
            (None, Some(kind)) if kind.upstream() => View {
                strip: Strip::MetadataAndPodTemplateMetadata,
                unstamp: None,
            },
            (None, Some(kind)) => View {
                strip: Strip::Metadata,
                unstamp: Some(kind),
            },
            _ => View::default(),
        }
    }

    /// The view of each object.
    fn all(parsed: &[Option<Object<'_>>], workload_type: Option<WorkloadType>) -> Vec<Self> {
        parsed
            .iter()
            .map(|o| {
                o.as_ref()
                    .map(|o| View::of(o, workload_type))
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The object as this view sees it (before `strip`).
    fn seen<'m>(self, object: &'m Map<String, Value>) -> Cow<'m, Map<String, Value>> {
        match self.unstamp {
            Some(kind) => stamp::unstamped(object, kind.path()),
            None => Cow::Borrowed(object),
        }
    }
}

/// Plans the annotation updates for a list of rendered objects.
///
/// `previous` is the last output (or any previous copies of the workloads); `None` when no
/// previous copy is known at all. It is only read in referenced-config mode, and only for the
/// workloads' own annotations.
pub fn plan(
    objects: &[&Value],
    previous: Option<&[&Value]>,
    settings: &RenderSettings,
) -> Result<Vec<Update>, RenderError> {
    let parsed: Vec<Option<Object<'_>>> = objects.iter().map(|v| Object::new(v)).collect();
    let groups = groups(&parsed, settings);
    if settings.referenced_config_rollout {
        Referenced::new(&parsed, previous, settings, &groups)?.plan(objects)
    } else {
        plan_default(objects, &parsed, &groups)
    }
}

/// The indices of the objects [`plan`] gives an annotation to, in input order: the
/// workloads whose previous copies referenced-config mode reads.
pub fn workloads(objects: &[&Value], settings: &RenderSettings) -> Vec<usize> {
    let parsed: Vec<Option<Object<'_>>> = objects.iter().map(|v| Object::new(v)).collect();
    let mut indices: Vec<usize> = groups(&parsed, settings)
        .into_iter()
        .flat_map(|group| group.workloads)
        .collect();
    indices.sort_unstable();
    indices
}

/// Plans and applies: renders `objects` in place and returns what was done. Nothing is
/// written unless the whole plan succeeds and every update can be written.
///
/// The command line, the benchmark and the tests call it with the flattened objects of their
/// inputs in referenced-config mode; in default mode they run [`pipeline`], which takes the
/// same plan's steps ([`DefaultPlan`]) with the hash beside the writing and the same
/// [`apply_all`], and whose output the property tests hold to this function's.
pub fn render(
    objects: &mut [&mut Value],
    previous: Option<&[&Value]>,
    settings: &RenderSettings,
) -> Result<Vec<Update>, RenderError> {
    let updates = {
        let view: Vec<&Value> = objects.iter().map(|object| &**object).collect();
        plan(&view, previous, settings)?
    };
    apply_all(&updates, objects)?;
    Ok(updates)
}

/// The objects a plan was made for, by their index in it: a slice of them, or objects kept
/// elsewhere (the documents of [`pipeline::Walk`]).
pub trait IndexedObjects {
    /// The object at `index`, if any.
    fn object(&self, index: usize) -> Option<&Value>;
    /// The object at `index`, to write on.
    fn object_mut(&mut self, index: usize) -> Option<&mut Value>;
}

impl IndexedObjects for [&mut Value] {
    fn object(&self, index: usize) -> Option<&Value> {
        self.get(index).map(|object| &**object)
    }

    fn object_mut(&mut self, index: usize) -> Option<&mut Value> {
        self.get_mut(index).map(|object| &mut **object)
    }
}

/// Writes planned updates on the objects they were planned for (by their index in the
/// objects given to [`plan`]). Every update is checked before any is written.
pub fn apply_all<O>(updates: &[Update], objects: &mut O) -> Result<(), RenderError>
where
    O: IndexedObjects + ?Sized,
{
    for update in updates {
        if let Some(object) = objects.object(update.index) {
            update.check(object)?;
        }
    }
    for update in updates {
        if let Some(object) = objects.object_mut(update.index) {
            update.apply(object)?;
        }
    }
    Ok(())
}

fn groups(parsed: &[Option<Object<'_>>], settings: &RenderSettings) -> Vec<Group> {
    let kinds_of = |kind: &'static str| -> Vec<usize> {
        parsed
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.as_ref().filter(|o| o.kind == kind).map(|_| i))
            .collect()
    };
    let specs: Vec<(AnnotatedKind, Vec<usize>)> = match settings.workload_type {
        Some(workload_type) => {
            let kind = workload_type.annotated();
            vec![(kind, kinds_of(kind.kind()).into_iter().take(1).collect())]
        }
        None => AnnotatedKind::ALL
            .into_iter()
            .map(|kind| {
                let mut workloads = kinds_of(kind.kind());
                if !kind.upstream() {
                    new_kind_workloads(parsed, &mut workloads, kind, settings);
                }
                (kind, workloads)
            })
            .collect(),
    };
    let views = View::all(parsed, settings.workload_type);
    specs
        .into_iter()
        .filter(|(_, workloads)| !workloads.is_empty())
        .map(|(kind, workloads)| {
            let mut hashed: Vec<usize> = parsed
                .iter()
                .enumerate()
                .filter_map(|(i, o)| {
                    o.as_ref()
                        .filter(|o| o.kind != kind.kind() && o.kind != NETWORK_POLICY)
                        .map(|_| i)
                })
                .collect();
            hashed.sort_by(|&a, &b| hash_order_key(parsed, a).cmp(&hash_order_key(parsed, b)));
            let views = hashed.iter().map(|&i| views[i]).collect();
            Group {
                kind,
                workloads,
                hashed,
                views,
            }
        })
        .collect()
}

/// Keeps of the DaemonSets or CronJobs `workloads` those that get the annotation: the ones
/// that can take it (the others are left as they are, where a Deployment would fail the
/// render), and in referenced-config mode only those whose identity (kind, namespace as
/// applied, name) is rendered once, since each keeps one state.
fn new_kind_workloads(
    parsed: &[Option<Object<'_>>],
    workloads: &mut Vec<usize>,
    kind: AnnotatedKind,
    settings: &RenderSettings,
) {
    if settings.referenced_config_rollout {
        let release_namespace = settings.release_namespace.as_deref().unwrap_or("");
        let identity = |index: usize| {
            parsed[index]
                .as_ref()
                .map(|o| (o.applied_namespace(release_namespace), o.name))
        };
        let mut seen: HashMap<_, usize> = HashMap::new();
        for &index in workloads.iter() {
            *seen.entry(identity(index)).or_default() += 1;
        }
        workloads.retain(|&index| seen[&identity(index)] == 1);
    }
    workloads.retain(|&index| {
        parsed[index]
            .as_ref()
            .is_some_and(|o| check_map(o.map, kind).is_ok())
    });
}

/// Where an object sorts in a hashed list: kind, apiVersion, namespace, name (a stable sort,
/// so ties keep render order).
fn hash_order_key<'a>(
    parsed: &[Option<Object<'a>>],
    index: usize,
) -> Option<(&'a str, &'a str, &'a str, &'a str)> {
    parsed[index]
        .as_ref()
        .map(|o| (o.kind, o.api_version, o.namespace, o.name))
}

/// The default-mode hash of a group; `None` when nothing is hashed.
fn default_hash(parsed: &[Option<Object<'_>>], group: &Group) -> Option<String> {
    if group.hashed.is_empty() {
        return None;
    }
    let seen: Vec<(Cow<'_, Map<String, Value>>, Strip)> = group
        .hashed
        .iter()
        .zip(&group.views)
        .filter_map(|(&i, &view)| parsed[i].as_ref().map(|o| (view.seen(o.map), view.strip)))
        .collect();
    let objects = seen.iter().map(|(object, strip)| (&**object, *strip));
    Some(hash::hash_objects(objects, NumberType::Float64))
}

fn plan_default(
    objects: &[&Value],
    parsed: &[Option<Object<'_>>],
    groups: &[Group],
) -> Result<Vec<Update>, RenderError> {
    let plan = DefaultPlan::of(objects, parsed, groups)?;
    let mut hashes = plan.hashes();
    for entry in plan.order() {
        hashes.push(entry, objects[entry.index]);
    }
    Ok(plan.finish(hashes.finish()))
}

/// Default-mode planning in three steps, so that the hashing can run beside other work and
/// each hashed object can be dropped once hashed: [`DefaultPlan::new`] checks every workload
/// and fixes the hash order; the caller feeds the objects of [`DefaultPlan::order`], in that
/// order, to [`DefaultPlan::hashes`]; [`DefaultPlan::finish`] turns the hashes into the
/// updates [`plan`] returns. [`plan`] itself takes these steps.
#[derive(Debug)]
pub struct DefaultPlan {
    groups: Vec<PlannedGroup>,
    order: Vec<HashEntry>,
}

/// The workloads of one group: index, and whether a state annotation is to be removed.
#[derive(Debug)]
struct PlannedGroup {
    kind: AnnotatedKind,
    workloads: Vec<(usize, bool)>,
    /// Whether the group hashes anything (without, its workloads keep their annotation).
    hashes: bool,
}

/// An object of the hash order: its index, the groups whose lists hold it and how it is seen
/// (the same in every group).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashEntry {
    /// Index of the object in the input.
    pub index: usize,
    /// Bit `g` set: in the list of group `g`.
    groups: u8,
    view: View,
}

impl DefaultPlan {
    /// Checks the workloads of `objects` and fixes the hash order. Fails as [`plan`] does in
    /// default mode (the first workload, in plan order, that cannot take the annotation).
    pub fn new(objects: &[&Value], settings: &RenderSettings) -> Result<Self, RenderError> {
        let parsed: Vec<Option<Object<'_>>> = objects.iter().map(|v| Object::new(v)).collect();
        let groups = groups(&parsed, settings);
        Self::of(objects, &parsed, &groups)
    }

    fn of(
        objects: &[&Value],
        parsed: &[Option<Object<'_>>],
        groups: &[Group],
    ) -> Result<Self, RenderError> {
        let mut planned = Vec::with_capacity(groups.len());
        for group in groups {
            let hashes = !group.hashed.is_empty();
            let mut workloads = Vec::with_capacity(group.workloads.len());
            for &index in &group.workloads {
                if hashes {
                    check_workload(objects[index], index, group.kind)?;
                }
                let has_state = parsed[index]
                    .as_ref()
                    .is_some_and(|o| o.annotation(REFERENCED_CONFIG_STATE).is_some());
                workloads.push((index, has_state));
            }
            planned.push(PlannedGroup {
                kind: group.kind,
                workloads,
                hashes,
            });
        }
        let order = match groups {
            [group] => group
                .hashed
                .iter()
                .zip(&group.views)
                .map(|(&index, &view)| HashEntry {
                    index,
                    groups: 1,
                    view,
                })
                .collect(),
            // One order for every group: each group's list is the stable sort of its objects,
            // so the stable sort of their union holds each list in its own order.
            groups => {
                let mut membership: Vec<Option<(u8, View)>> = vec![None; parsed.len()];
                for (bit, group) in groups.iter().enumerate() {
                    for (&index, &view) in group.hashed.iter().zip(&group.views) {
                        let (groups, _) = membership[index].get_or_insert((0, view));
                        *groups |= 1 << bit;
                    }
                }
                let mut order: Vec<HashEntry> = membership
                    .iter()
                    .enumerate()
                    .filter_map(|(index, member)| {
                        member.map(|(groups, view)| HashEntry {
                            index,
                            groups,
                            view,
                        })
                    })
                    .collect();
                order.sort_by(|a, b| {
                    hash_order_key(parsed, a.index).cmp(&hash_order_key(parsed, b.index))
                });
                order
            }
        };
        Ok(Self {
            groups: planned,
            order,
        })
    }

    /// The objects to hash, in order.
    pub fn order(&self) -> &[HashEntry] {
        &self.order
    }

    /// The indices of the workloads the plan annotates, in plan order: these objects are
    /// changed by [`DefaultPlan::finish`]'s updates; every other object is only read.
    pub fn workloads(&self) -> impl Iterator<Item = usize> + '_ {
        self.groups
            .iter()
            .flat_map(|group| group.workloads.iter().map(|&(index, _)| index))
    }

    /// The hashes, empty, one list per group.
    pub fn hashes(&self) -> GroupHashes {
        GroupHashes {
            lists: self
                .groups
                .iter()
                .map(|_| dump::ListWriter::new(Fnv32a::new()))
                .collect(),
            dumped: Vec::new(),
        }
    }

    /// The updates, from the hashes of [`DefaultPlan::hashes`] fed with every object of
    /// [`DefaultPlan::order`].
    pub fn finish(self, hashes: Vec<String>) -> Vec<Update> {
        let mut updates = Vec::new();
        for (group, hash) in self.groups.into_iter().zip(hashes) {
            for (index, has_state) in group.workloads {
                updates.push(Update {
                    index,
                    kind: group.kind,
                    hash: match group.hashes {
                        true => Edit::Set(hash.clone()),
                        false => Edit::Keep,
                    },
                    state: match has_state {
                        true => Edit::Remove,
                        false => Edit::Keep,
                    },
                    previous: PreviousCopy::NotRead,
                });
            }
        }
        updates.sort_by_key(|u| u.index);
        updates
    }
}

/// The default-mode hash of each group, fed one object at a time (see [`DefaultPlan`]).
#[derive(Debug)]
pub struct GroupHashes {
    lists: Vec<dump::ListWriter<Fnv32a>>,
    /// An object dumped once for several groups.
    dumped: Vec<u8>,
}

impl GroupHashes {
    /// Adds the object of `entry` to the lists of its groups.
    pub fn push(&mut self, entry: &HashEntry, object: &Value) {
        let Some(map) = object.as_object() else {
            return;
        };
        let map = entry.view.seen(map);
        let strip = entry.view.strip;
        let mut lists = self
            .lists
            .iter_mut()
            .enumerate()
            .filter(|(bit, _)| entry.groups & (1 << bit) != 0)
            .map(|(_, list)| list);
        match (lists.next(), entry.groups.count_ones()) {
            (Some(list), 1) => list.push(&map, strip, NumberType::Float64),
            (Some(first), _) => {
                self.dumped.clear();
                dump::write_top(&mut self.dumped, &map, strip, NumberType::Float64);
                first.push_dumped(&self.dumped);
                for list in lists {
                    list.push_dumped(&self.dumped);
                }
            }
            (None, _) => {}
        }
    }

    /// The hash of each group, in group order.
    pub fn finish(self) -> Vec<String> {
        self.lists
            .into_iter()
            .map(|list| hash::safe_encode(list.finish().finish()))
            .collect()
    }
}

/// The maps from `spec` to the pod template's annotations: (key, field named in errors).
const HASH_PATH: TemplatePath = &[
    ("template", "spec.template"),
    ("metadata", "spec.template.metadata"),
    ("annotations", "spec.template.metadata.annotations"),
];
/// The maps from a CronJob's `spec` to its Jobs' pod template's annotations.
const CRON_JOB_PATH: TemplatePath = &[
    ("jobTemplate", "spec.jobTemplate"),
    ("spec", "spec.jobTemplate.spec"),
    ("template", "spec.jobTemplate.spec.template"),
    ("metadata", "spec.jobTemplate.spec.template.metadata"),
    (
        "annotations",
        "spec.jobTemplate.spec.template.metadata.annotations",
    ),
];
/// The maps from the object to its own annotations.
const STATE_PATH: [(&str, &str); 2] = [
    ("metadata", "metadata"),
    ("annotations", "metadata.annotations"),
];

/// Why a workload cannot take the annotations.
enum Unwritable {
    MissingSpec,
    /// This field is not a map.
    NotAMap(&'static str),
}

/// Whether the annotations can be written on an object of `kind`: a `spec` map, and every map
/// on the two paths a map, missing or null (null is written as a new map).
fn check_map(object: &Map<String, Value>, kind: AnnotatedKind) -> Result<(), Unwritable> {
    let Some(Value::Object(spec)) = object.get("spec") else {
        return Err(Unwritable::MissingSpec);
    };
    check_path(spec, kind.path())
        .and_then(|()| check_path(object, &STATE_PATH))
        .map_err(Unwritable::NotAMap)
}

/// Fails unless the annotations can be written on the workload ([`check_map`]).
fn check_workload(object: &Value, index: usize, kind: AnnotatedKind) -> Result<(), RenderError> {
    let checked = match object.as_object() {
        Some(map) => check_map(map, kind),
        None => Err(Unwritable::MissingSpec),
    };
    checked.map_err(|unwritable| match unwritable {
        Unwritable::MissingSpec => RenderError::MissingSpec {
            index,
            resource: ResourceName::of(object),
        },
        Unwritable::NotAMap(field) => RenderError::NotAMap {
            index,
            resource: ResourceName::of(object),
            field,
        },
    })
}

fn check_path(
    mut current: &Map<String, Value>,
    path: &[(&str, &'static str)],
) -> Result<(), &'static str> {
    for &(key, field) in path {
        match current.get(key) {
            None | Some(Value::Null) => break,
            Some(Value::Object(next)) => current = next,
            Some(_) => return Err(field),
        }
    }
    Ok(())
}

impl Update {
    /// Fails, writing nothing, when this update cannot be written on `object`.
    pub fn check(&self, object: &Value) -> Result<(), RenderError> {
        match (&self.hash, &self.state) {
            (Edit::Set(_), _) => check_workload(object, self.index, self.kind),
            (_, Edit::Set(_)) => object
                .as_object()
                .map_or(Ok(()), |map| check_path(map, &STATE_PATH))
                .map_err(|field| RenderError::NotAMap {
                    index: self.index,
                    resource: ResourceName::of(object),
                    field,
                }),
            _ => Ok(()),
        }
    }

    /// Writes this update's annotations on the workload object.
    pub fn apply(&self, object: &mut Value) -> Result<(), RenderError> {
        self.check(object)?;
        let name = ResourceName::of(object);
        let not_a_map = |field| RenderError::NotAMap {
            index: self.index,
            resource: name.clone(),
            field,
        };
        let Some(map) = object.as_object_mut() else {
            return Err(not_a_map("object"));
        };
        match (&self.hash, self.kind.upstream()) {
            (Edit::Keep, _) => {}
            // A DaemonSet or CronJob: with its marker.
            (_, false) => stamp::write(map, self.kind.path(), &self.hash).map_err(not_a_map)?,
            (_, true) => match map.get_mut("spec").and_then(Value::as_object_mut) {
                Some(spec) => edit_annotation(spec, HASH_PATH, DP_RESOURCE_HASH, &self.hash)
                    .map_err(not_a_map)?,
                None if self.hash == Edit::Remove => {}
                None => {
                    return Err(RenderError::MissingSpec {
                        index: self.index,
                        resource: name,
                    });
                }
            },
        }
        edit_annotation(map, &STATE_PATH, REFERENCED_CONFIG_STATE, &self.state).map_err(not_a_map)
    }
}

/// Sets or removes `key` in the annotations map at the end of `path` (maps created when
/// missing or null on a set; nothing created on a removal). Fails with the field that is not a
/// map.
fn edit_annotation(
    mut map: &mut Map<String, Value>,
    path: &[(&str, &'static str)],
    key: &str,
    edit: &Edit,
) -> Result<(), &'static str> {
    match edit {
        Edit::Keep => Ok(()),
        Edit::Set(value) => {
            for &(segment, field) in path {
                let entry = map
                    .entry(segment.to_owned())
                    .or_insert_with(|| Value::Object(Map::new()));
                if entry.is_null() {
                    *entry = Value::Object(Map::new());
                }
                map = entry.as_object_mut().ok_or(field)?;
            }
            map.insert(key.to_owned(), Value::String(value.clone()));
            Ok(())
        }
        Edit::Remove => {
            for &(segment, _) in path {
                match map.get_mut(segment).and_then(Value::as_object_mut) {
                    Some(next) => map = next,
                    None => return Ok(()),
                }
            }
            map.shift_remove(key);
            Ok(())
        }
    }
}

/// Reads `openchoreo.dev/restart-on-change`: `None` when unset.
fn restart_on_change(object: &Object<'_>, index: usize) -> Result<Option<bool>, RenderError> {
    let Some(annotation) = object.annotation(RESTART_ON_CHANGE) else {
        return Ok(None);
    };
    match annotation {
        Value::String(text) if text == "true" => Ok(Some(true)),
        Value::String(text) if text == "false" => Ok(Some(false)),
        other => Err(RenderError::InvalidRestartOnChange {
            index,
            resource: object.resource_name(),
            value: describe(other),
        }),
    }
}

/// Shows a bad annotation value: strings quoted (long ones cut), other types named.
fn describe(value: &Value) -> String {
    match value {
        Value::String(text) => {
            let mut shown: String = text.chars().take(64).collect();
            if shown.len() < text.len() {
                shown.push('…');
            }
            format!("{shown:?}")
        }
        Value::Bool(b) => format!("{b} (a boolean, not a string; quote it in YAML)"),
        Value::Number(n) => format!("{n} (a number, not a string)"),
        Value::Null => "null".to_owned(),
        Value::Array(_) => "(a list)".to_owned(),
        Value::Object(_) => "(a map)".to_owned(),
    }
}

/// The referenced-config planner.
struct Referenced<'a, 'p> {
    parsed: &'p [Option<Object<'a>>],
    groups: &'p [Group],
    /// Previous copies by kind, namespace as applied, and name.
    previous: Option<HashMap<(&'a str, String, &'a str), &'a Value>>,
    release_namespace: String,
    /// `restart-on-change` of each object (`None` for workloads, where it is ignored).
    marks: Vec<Option<bool>>,
    ids: Vec<String>,
    targets: Vec<Option<ConfigRef>>,
    digester: Digester,
    key_id: String,
    digests: Vec<Option<String>>,
    /// How each object is digested.
    views: Vec<View>,
}

/// What one workload's hash covers in referenced-config mode.
struct Coverage {
    /// (object index, referenced) of the resources whose changes restart the pods.
    relevant: Vec<(usize, bool)>,
    /// Referenced resources marked "false".
    off: Vec<usize>,
}

impl<'a, 'p> Referenced<'a, 'p> {
    fn new(
        parsed: &'p [Option<Object<'a>>],
        previous: Option<&[&'a Value]>,
        settings: &RenderSettings,
        groups: &'p [Group],
    ) -> Result<Self, RenderError> {
        let workload_kinds: HashSet<&str> = match settings.workload_type {
            Some(workload_type) => [workload_type.kind()].into(),
            None => [DEPLOYMENT, STATEFUL_SET].into(),
        };
        // The annotation applies to the resources rendered beside a workload: without one in
        // the input there is nothing it could restart, so it is neither read nor validated.
        let has_workload = !groups.is_empty();
        let mut marks = Vec::with_capacity(parsed.len());
        for (index, object) in parsed.iter().enumerate() {
            let mark = match object {
                Some(object) if has_workload && !workload_kinds.contains(object.kind) => {
                    restart_on_change(object, index)?
                }
                _ => None,
            };
            marks.push(mark);
        }
        let release_namespace = settings.release_namespace.clone().unwrap_or_default();
        let mut seen = HashSet::new();
        for &index in groups.iter().flat_map(|group| &group.workloads) {
            if let Some(object) = &parsed[index] {
                let id = (
                    object.kind,
                    object.applied_namespace(&release_namespace),
                    object.name,
                );
                if !seen.insert(id) {
                    return Err(RenderError::DuplicateWorkload {
                        index,
                        resource: object.resource_name(),
                    });
                }
            }
        }
        let previous = previous.map(|objects| {
            let mut by_id = HashMap::new();
            for value in objects {
                if let Some(object) = Object::new(value) {
                    by_id
                        .entry((
                            object.kind,
                            object.applied_namespace(&release_namespace).to_owned(),
                            object.name,
                        ))
                        .or_insert(*value);
                }
            }
            by_id
        });
        let digester = Digester::new(settings.fingerprint_key.as_ref());
        Ok(Self {
            parsed,
            groups,
            previous,
            release_namespace,
            marks,
            ids: parsed
                .iter()
                .map(|o| {
                    o.as_ref()
                        .map(|o| state::resource_id(o.kind, o.namespace, o.name))
                        .unwrap_or_default()
                })
                .collect(),
            targets: parsed
                .iter()
                .map(|o| o.as_ref().and_then(Object::config_target))
                .collect(),
            key_id: digester.key_id(),
            digester,
            digests: vec![None; parsed.len()],
            views: View::all(parsed, settings.workload_type),
        })
    }

    fn plan(mut self, objects: &[&Value]) -> Result<Vec<Update>, RenderError> {
        let mut updates = Vec::new();
        for group in self.groups {
            let mut all_hash: Option<Option<String>> = None;
            for &index in &group.workloads {
                let coverage = self.coverage(index, group);
                let tracked = self.tracked(&coverage);
                let previous_copy = self.previous_copy(index);
                let (hash, previous) = match (&self.previous, previous_copy) {
                    (None, _) => (self.stateless_hash(&tracked), PreviousCopy::NotRead),
                    (Some(_), None) => (
                        all_hash
                            .get_or_insert_with(|| default_hash(self.parsed, group))
                            .clone(),
                        PreviousCopy::Missing,
                    ),
                    (Some(_), Some(copy)) => (
                        self.carried_hash(copy, group, &coverage, &tracked),
                        PreviousCopy::Found,
                    ),
                };
                let hash = match hash {
                    Some(hash) => {
                        check_workload(objects[index], index, group.kind)?;
                        Edit::Set(hash)
                    }
                    None => Edit::Remove,
                };
                let state = State {
                    key_id: self.key_id.clone(),
                    tracked,
                };
                updates.push(Update {
                    index,
                    kind: group.kind,
                    hash,
                    state: Edit::Set(state.encode()),
                    previous,
                });
            }
        }
        updates.sort_by_key(|u| u.index);
        Ok(updates)
    }

    /// Which resources matter to the workload at `index`.
    fn coverage(&self, index: usize, group: &Group) -> Coverage {
        let workload = self.parsed[index].as_ref();
        let references: BTreeSet<ConfigRef> = workload
            .and_then(|w| group.kind.template(w.map))
            .map(reference::referenced_config)
            .unwrap_or_default();
        let namespace = workload.map_or("", |w| w.namespace);
        let mut coverage = Coverage {
            relevant: Vec::new(),
            off: Vec::new(),
        };
        for &candidate in &group.hashed {
            let Some(object) = self.parsed[candidate].as_ref() else {
                continue;
            };
            let same_namespace = namespace.is_empty()
                || object.namespace.is_empty()
                || namespace == object.namespace;
            let referenced = same_namespace
                && self.targets[candidate]
                    .as_ref()
                    .is_some_and(|target| references.contains(target));
            match self.marks[candidate] {
                Some(true) => coverage.relevant.push((candidate, referenced)),
                Some(false) if referenced => coverage.off.push(candidate),
                Some(false) => {}
                None if referenced => coverage.relevant.push((candidate, true)),
                None => {}
            }
        }
        coverage
    }

    fn digest(&mut self, index: usize) -> String {
        if let Some(digest) = &self.digests[index] {
            return digest.clone();
        }
        let view = self.views[index];
        let digest = self.parsed[index]
            .as_ref()
            .map(|o| self.digester.digest(&view.seen(o.map)))
            .unwrap_or_default();
        self.digests[index] = Some(digest.clone());
        digest
    }

    fn tracked(&mut self, coverage: &Coverage) -> std::collections::BTreeMap<String, Tracked> {
        let mut tracked = std::collections::BTreeMap::new();
        for &index in &coverage.off {
            let digest = self.digest(index);
            tracked.insert(
                self.ids[index].clone(),
                Tracked {
                    digest,
                    relevant: false,
                },
            );
        }
        for &(index, _) in &coverage.relevant {
            let digest = self.digest(index);
            tracked.insert(
                self.ids[index].clone(),
                Tracked {
                    digest,
                    relevant: true,
                },
            );
        }
        tracked
    }

    fn previous_copy(&self, index: usize) -> Option<&'a Value> {
        let object = self.parsed[index].as_ref()?;
        let namespace = object.applied_namespace(&self.release_namespace);
        self.previous
            .as_ref()?
            .get(&(object.kind, namespace.to_owned(), object.name))
            .copied()
    }

    /// Without any previous copy: a hash of what matters, or nothing when nothing does.
    fn stateless_hash(
        &self,
        tracked: &std::collections::BTreeMap<String, Tracked>,
    ) -> Option<String> {
        let fingerprint = fingerprint(tracked);
        (!fingerprint.is_empty()).then(|| chain(None, &fingerprint))
    }

    fn carried_hash(
        &self,
        previous: &Value,
        group: &Group,
        coverage: &Coverage,
        tracked: &std::collections::BTreeMap<String, Tracked>,
    ) -> Option<String> {
        let previous_hash = previous
            .pointer(group.kind.annotations_pointer())
            .and_then(|a| a.get(DP_RESOURCE_HASH))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let previous_state = previous
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(REFERENCED_CONFIG_STATE))
            .and_then(Value::as_str)
            .and_then(State::parse)
            .filter(|state| state.key_id == self.key_id);
        let Some(previous_state) = previous_state else {
            // Just turned on (or re-keyed): nothing restarts by itself.
            return previous_hash;
        };
        let changed_or_new = coverage.relevant.iter().any(|&(index, referenced)| {
            let id = &self.ids[index];
            match previous_state.tracked.get(id) {
                Some(before) => tracked
                    .get(id)
                    .is_some_and(|now| now.digest != before.digest),
                None => referenced,
            }
        });
        let rendered: HashSet<&str> = group.hashed.iter().map(|&i| self.ids[i].as_str()).collect();
        let removed = previous_state
            .tracked
            .iter()
            .any(|(id, before)| before.relevant && !rendered.contains(id.as_str()));
        if changed_or_new || removed {
            Some(chain(previous_hash.as_deref(), &fingerprint(tracked)))
        } else {
            previous_hash
        }
    }
}

/// The relevant entries, in id order: what a referenced-mode hash is derived from.
fn fingerprint(tracked: &std::collections::BTreeMap<String, Tracked>) -> String {
    let mut out = String::new();
    for (id, entry) in tracked.iter().filter(|(_, t)| t.relevant) {
        out.push_str(id);
        out.push(':');
        out.push_str(&entry.digest);
        out.push(',');
    }
    out
}

/// A new annotation value derived from the previous one and the current fingerprint; never
/// equal to the previous one.
fn chain(previous: Option<&str>, fingerprint: &str) -> String {
    let mut salt = 0u8;
    loop {
        let mut hasher = Fnv32a::new();
        hasher.write(b"rollsafe.dev/referenced-config\0");
        hasher.write(previous.unwrap_or("").as_bytes());
        hasher.write(b"\0");
        hasher.write(fingerprint.as_bytes());
        hasher.write(&[salt]);
        let value = hash::safe_encode(hasher.finish());
        if previous != Some(value.as_str()) || salt == u8::MAX {
            return value;
        }
        salt += 1;
    }
}

#[cfg(test)]
mod tests;
