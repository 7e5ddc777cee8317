//! The watch streams (the reflector's place): kube's watchers of Secrets, ConfigMaps, the
//! workload kinds and, with `--namespace-selector`, Namespaces — each decoded in a task of its
//! own straight into typed cache updates ([`Item`]), restartable, its deliveries noted for the
//! stall check ([`crate::freshness`]), and the namespaces the selector selects now.
//!
//! The loop owns a [`Streams`] and applies each [`Item`] to the cache; what a stream's state
//! says (listed once, which list it is in, silent, behind a consistent read) is kept here.

use std::collections::HashSet;

use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::rollout::classify;
use rollsafe_core::rollout::follow::Observation;
use rollsafe_core::workload::WatchedKind;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::cache::{
    Listing, Listings, SourceEntry, SourceKey, Watching, WorkloadEntry, WorkloadKey,
};
use crate::freshness::{self, Activity, Restart};
use crate::metrics::ControllerMetrics;
use crate::reduced::{ConfigMaps, Reduced, Secrets, SourceType};
use crate::settings::{ControllerSettings, STREAM_BUFFER};
use crate::workload_object::WorkloadObject;
use rollsafe_core::annotations::CONFIG_HASH;
use rollsafe_kube::read::workload_resource;

/// One watch event, already reduced to a cache entry (the object itself is dropped in the
/// stream, before it reaches the loop).
pub(crate) enum Ev<K, V> {
    Init,
    Page(K, V),
    Done,
    Apply(K, V),
    Delete(K),
    /// An object without a namespace or name (not expected from the API server).
    Skip,
}

/// What a stream delivers to the loop: its index among the streams and its reduced event.
pub(crate) enum Item {
    Source(usize, TargetKind, Ev<SourceKey, SourceEntry>),
    Workload(
        usize,
        WatchedKind,
        Ev<WorkloadKey, (WorkloadEntry, Box<Observation>)>,
    ),
    /// The Namespace watch of `--namespace-selector`: names only.
    Namespace(usize, Ev<String, ()>),
    Error,
}

/// The namespaces `--namespace-selector` selects, as the Namespace watch says.
#[derive(Debug, Default)]
struct Selection {
    /// The Namespace watch has listed once. Until then nothing is filtered; the end of its
    /// first list drops what is outside.
    known: bool,
    selected: HashSet<String>,
    /// What the current list has seen so far.
    seen: HashSet<String>,
}

/// What one Namespace watch event changed in the selection.
#[derive(Debug, Default)]
pub(crate) struct SelectionChange {
    /// A namespace joined: the object watches must list again.
    pub(crate) joined: bool,
    /// Namespaces that left the selection (or were deleted): their objects are forgotten.
    pub(crate) left: Vec<String>,
    /// The end of the first list: what is selected; objects cached from other namespaces
    /// meanwhile are forgotten.
    pub(crate) first_list: Option<HashSet<String>>,
    /// The end of a list.
    pub(crate) done: bool,
}

/// Per watch stream: its namespace scope, whether it has listed once, which list it is in (what
/// disappeared while it was not watching is what its last list did not mark); when it last
/// delivered something, and how to start it over.
struct StreamState {
    scope: Option<String>,
    /// The kind of source it watches (`None`: a workload or the Namespace stream).
    source: Option<TargetKind>,
    synced: bool,
    /// Its current list ([`Listing`]): every cache entry it lists or changes is marked with it,
    /// and the end of the list drops the entries of its scope and kind marked otherwise. A mark
    /// in each entry instead of a set of every listed key, which at 100,000 Secrets held
    /// megabytes at the peak of the cold start.
    list: Listing,
    activity: Activity,
    /// Silent for longer than the stall bound at the last check.
    silent: bool,
    /// Found behind a consistent read: restarted, stale until its list is done.
    behind: bool,
    restart: Option<Restart>,
}

impl StreamState {
    fn in_scope(&self, namespace: &str) -> bool {
        self.scope.as_deref().is_none_or(|scope| scope == namespace)
    }

    fn stale(&self) -> bool {
        self.silent || self.behind
    }
}

/// Every watch stream's state, and the namespace selection.
pub(crate) struct Streams {
    states: Vec<StreamState>,
    /// Numbers the streams' lists.
    lists: Listings,
    /// The index of the Namespace watch among the streams.
    namespace_stream: Option<usize>,
    /// `--namespace-selector`: the namespaces selected now.
    selection: Option<Selection>,
}

impl Streams {
    /// No stream yet; with `settings`' namespace selector, nothing selected yet.
    pub(crate) fn new(settings: &ControllerSettings) -> Self {
        Self {
            states: Vec::new(),
            lists: Listings::default(),
            namespace_stream: None,
            selection: settings
                .namespace_selector
                .as_ref()
                .map(|_| Selection::default()),
        }
    }

    /// Starts every watch `settings` asks for, through `client`.
    pub(crate) fn open(
        &mut self,
        client: &kube::Client,
        settings: &ControllerSettings,
    ) -> SelectAll<BoxStream<'static, Item>> {
        let scopes: Vec<Option<String>> = if settings.namespaces.is_empty() {
            vec![None]
        } else {
            settings.namespaces.iter().cloned().map(Some).collect()
        };
        let mut all = SelectAll::new();
        if let Some(selector) = &settings.namespace_selector {
            let config = initial_list(
                settings,
                watcher::Config::default()
                    .timeout(settings.watch_timeout)
                    .labels(selector),
            );
            let stream = self.add(
                client,
                &None,
                None,
                Api::<Namespace>::all,
                move |api, id| {
                    watcher(api, config.clone())
                        .default_backoff()
                        .map(move |event| match event {
                            Ok(event) => Item::Namespace(
                                id,
                                reduce(event, |o: Namespace| {
                                    o.metadata.name.map(|name| (name, ()))
                                }),
                            ),
                            Err(error) => {
                                let (code, status) = failure(&error);
                                warn!(
                                    code,
                                    status, "namespace watch error; kube backs off and relists"
                                );
                                Item::Error
                            }
                        })
                        .boxed()
                },
            );
            self.namespace_stream = Some(self.states.len() - 1);
            all.push(stream);
        }
        for scope in scopes {
            if !settings.ignore_kinds.contains(&TargetKind::Secret) {
                all.push(self.source_stream::<Secrets>(client, settings, &scope));
            }
            if !settings.ignore_kinds.contains(&TargetKind::ConfigMap) {
                all.push(self.source_stream::<ConfigMaps>(client, settings, &scope));
            }
            for kind in settings.kinds() {
                all.push(self.workload_stream(client, settings, &scope, kind));
            }
        }
        all
    }

    /// The watch of one kind of source in `scope`, decoded straight into digests
    /// ([`Reduced`]).
    fn source_stream<K: SourceType>(
        &mut self,
        client: &kube::Client,
        settings: &ControllerSettings,
        scope: &Option<String>,
    ) -> BoxStream<'static, Item> {
        let mut config = watch_config(settings);
        if let Some(selector) = &settings.source_selector {
            config = config.labels(selector);
        }
        let compat = settings.reloader_compat;
        let kind = K::KIND;
        let namespace = scope.clone();
        self.add(
            client,
            scope,
            Some(kind),
            move |client| match &namespace {
                Some(namespace) => Api::<Reduced<K>>::namespaced(client, namespace),
                None => Api::<Reduced<K>>::all(client),
            },
            move |api, id| {
                watcher(api, config.clone())
                    .default_backoff()
                    .map(move |event| match event {
                        Ok(event) => Item::Source(id, kind, reduce(event, |o| source(o, compat))),
                        Err(error) => {
                            let (code, status) = failure(&error);
                            warn!(
                                code,
                                status, "source watch error; kube backs off and relists"
                            );
                            Item::Error
                        }
                    })
                    .boxed()
            },
        )
    }

    /// The watch of one workload kind in `scope`.
    fn workload_stream(
        &mut self,
        client: &kube::Client,
        settings: &ControllerSettings,
        scope: &Option<String>,
        kind: WatchedKind,
    ) -> BoxStream<'static, Item> {
        let resource = workload_resource(kind);
        let mut config = watch_config(settings);
        if let Some(selector) = &settings.selector {
            config = config.labels(selector);
        }
        let watching = watching(settings);
        let namespace = scope.clone();
        self.add(
            client,
            scope,
            None,
            move |client| match &namespace {
                Some(namespace) => {
                    Api::<WorkloadObject>::namespaced_with(client, namespace, &resource)
                }
                None => Api::<WorkloadObject>::all_with(client, &resource),
            },
            move |api, id| {
                watcher(api, config.clone())
                    .default_backoff()
                    .map(move |event| match event {
                        Ok(event) => {
                            Item::Workload(id, kind, reduce(event, |o| workload(kind, o, watching)))
                        }
                        Err(error) => {
                            let (code, status) = failure(&error);
                            warn!(
                                code,
                                status, "workload watch error; kube backs off and relists"
                            );
                            Item::Error
                        }
                    })
                    .boxed()
            },
        )
    }

    /// Registers one watch stream: its requests go through a client that notes their
    /// deliveries, and it can be started over ([`freshness::restartable`]).
    fn add<K: Clone + Send + Sync + 'static>(
        &mut self,
        client: &kube::Client,
        scope: &Option<String>,
        source: Option<TargetKind>,
        api: impl FnOnce(kube::Client) -> Api<K>,
        make: impl Fn(Api<K>, usize) -> BoxStream<'static, Item> + Send + 'static,
    ) -> BoxStream<'static, Item> {
        let id = self.states.len();
        let activity = Activity::new();
        let client = freshness::observed_client(client, &activity);
        let api = api(client);
        let (stream, restart) =
            freshness::restartable(move || decoded_apart(make(api.clone(), id)));
        self.states.push(StreamState {
            scope: scope.clone(),
            source,
            synced: false,
            list: Listing::NONE,
            activity,
            silent: false,
            behind: false,
            restart: Some(restart),
        });
        stream
    }

    /// Streams stale now (silent, or behind and relisting).
    pub(crate) fn stale(&self) -> usize {
        self.states.iter().filter(|s| s.stale()).count()
    }

    /// Looks at every stream's last delivery at `now`: one silent for longer than `bound` is
    /// stale (kube's watcher has abandoned its silent request by then and watches again; its
    /// answer makes the stream fresh). Returns the watch responses abandoned so far.
    pub(crate) fn check(
        &mut self,
        now: Instant,
        bound: std::time::Duration,
        metrics: &ControllerMetrics,
    ) -> u64 {
        let mut abandoned = 0;
        for (id, stream) in self.states.iter_mut().enumerate() {
            abandoned += stream.activity.abandoned();
            let silent = stream.activity.silent_for(now) > bound;
            if silent && !stream.silent {
                warn!(
                    stream = id,
                    code = "watch_stalled",
                    seconds = bound.as_secs(),
                    "a watch delivered nothing (no event, bookmark or page) for longer than the stall bound; not patching until it is fresh"
                );
                metrics.watch_stalls.inc();
            } else if !silent && stream.silent {
                info!(stream = id, "the stalled watch delivers again");
            }
            stream.silent = silent;
        }
        abandoned
    }

    /// A stream starts a list: marks what it lists from now on. Returns whether it had listed
    /// before (a relist).
    pub(crate) fn start_list(&mut self, id: usize) -> bool {
        let stream = &mut self.states[id];
        stream.list = self.lists.start();
        stream.synced
    }

    /// The list stream `id` is in.
    pub(crate) fn list(&self, id: usize) -> Listing {
        self.states[id].list
    }

    /// Whether an entry of `namespace` marked `listed` is kept at the end of stream `id`'s
    /// list: it was listed by it, or it is outside the stream's scope.
    pub(crate) fn keeps(&self, id: usize, namespace: &str, listed: Listing) -> bool {
        let stream = &self.states[id];
        listed == stream.list || !stream.in_scope(namespace)
    }

    /// Stream `id` has listed; returns whether every stream has.
    pub(crate) fn listed(&mut self, id: usize) -> bool {
        self.states[id].synced = true;
        self.states.iter().all(|s| s.synced)
    }

    /// A stream restarted for being behind has listed again; returns whether it was behind.
    pub(crate) fn caught_up(&mut self, id: usize) -> bool {
        let was = self.states[id].behind;
        if was {
            self.states[id].behind = false;
            info!(stream = id, "the relisted watch has caught up");
        }
        was
    }

    /// Starts over the watch of `kind` that covers `namespace` (a consistent read found it
    /// behind): stale until its new list is done.
    pub(crate) fn relist(&mut self, kind: TargetKind, namespace: &str) {
        for stream in &mut self.states {
            if stream.source == Some(kind) && stream.in_scope(namespace) && !stream.behind {
                stream.behind = true;
                if let Some(restart) = &stream.restart {
                    restart.pull();
                }
            }
        }
    }

    /// Starts every Secret, ConfigMap and workload watch over (a namespace joined the
    /// selection): each is stale until its new list is done.
    pub(crate) fn restart_objects(&mut self) {
        let namespace_stream = self.namespace_stream;
        for (id, stream) in self.states.iter_mut().enumerate() {
            if Some(id) == namespace_stream {
                continue;
            }
            // A stream still in its first list may have passed the namespace already.
            stream.behind = true;
            if let Some(restart) = &stream.restart {
                restart.pull();
            }
        }
    }

    /// Whether objects of `namespace` are considered: always without `--namespace-selector`;
    /// with it, once the Namespace watch has listed, only in the namespaces it selects.
    pub(crate) fn selects(&self, namespace: &str) -> bool {
        self.selection
            .as_ref()
            .is_none_or(|selection| !selection.known || selection.selected.contains(namespace))
    }

    /// Follows the selected namespaces through one Namespace watch event.
    pub(crate) fn select(&mut self, event: Ev<String, ()>) -> SelectionChange {
        let mut change = SelectionChange {
            done: matches!(event, Ev::Done),
            ..SelectionChange::default()
        };
        let Some(selection) = self.selection.as_mut() else {
            return change;
        };
        match event {
            Ev::Skip => {}
            Ev::Init => selection.seen.clear(),
            Ev::Page(name, ()) => {
                selection.seen.insert(name);
            }
            Ev::Apply(name, ()) => {
                change.joined = selection.selected.insert(name);
            }
            Ev::Delete(name) => {
                if selection.selected.remove(&name) {
                    change.left.push(name);
                }
            }
            Ev::Done => {
                let seen = std::mem::take(&mut selection.seen);
                if selection.known {
                    change.joined = seen.iter().any(|name| !selection.selected.contains(name));
                    change
                        .left
                        .extend(selection.selected.difference(&seen).cloned());
                    selection.selected = seen;
                } else {
                    // The first list: drop what was cached from other namespaces meanwhile.
                    selection.known = true;
                    selection.selected = seen;
                    change.first_list = Some(selection.selected.clone());
                }
            }
        }
        change
    }
}

/// What a watch error is, for its log line: a static code and, when the API server answered,
/// its HTTP status — never the API server's text, nor a debug rendering of its Status.
fn failure(error: &watcher::Error) -> (&'static str, Option<u16>) {
    fn status(error: &kube::Error) -> Option<u16> {
        match error {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        }
    }
    match error {
        watcher::Error::InitialListFailed(error) => ("list_failed", status(error)),
        watcher::Error::WatchStartFailed(error) => ("watch_start_failed", status(error)),
        watcher::Error::WatchError(answer) => ("watch_error", Some(answer.code)),
        watcher::Error::WatchFailed(error) => ("watch_failed", status(error)),
        watcher::Error::NoResourceVersion => ("no_resource_version", None),
    }
}

/// How workloads are read for opt-in, from `settings`.
pub(crate) fn watching(settings: &ControllerSettings) -> Watching {
    Watching {
        all: settings.all,
        reloader_compat: settings.reloader_compat,
    }
}

fn watch_config(settings: &ControllerSettings) -> watcher::Config {
    let config = initial_list(
        settings,
        watcher::Config::default().timeout(settings.watch_timeout),
    );
    match ignored_namespaces(&settings.ignore_namespaces) {
        Some(fields) => config.fields(&fields),
        None => config,
    }
}

/// How a watch lists at its start (and after a 410): streamed when the server serves it.
fn initial_list(settings: &ControllerSettings, config: watcher::Config) -> watcher::Config {
    if settings.streaming_lists {
        config.streaming_lists()
    } else {
        config
    }
}

/// The field selector leaving out `namespaces` (`metadata.namespace!=a,metadata.namespace!=b`),
/// or `None` for none.
fn ignored_namespaces(namespaces: &[String]) -> Option<String> {
    (!namespaces.is_empty()).then(|| {
        namespaces
            .iter()
            .map(|namespace| format!("metadata.namespace!={namespace}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// Runs one watch stream in a task of its own: its pages and events are received, decoded and
/// reduced on any worker thread, beside the other watches and the loop (the cold start decodes
/// every kind at once, not one after another in the loop's task). Items reach the loop in the
/// order the stream made them, through a channel of [`STREAM_BUFFER`]. Dropping the returned
/// stream (a restart, or the controller's end) drops what was decoded ahead and stops the task,
/// and the watch request with it.
fn decoded_apart<T: Send + 'static>(mut stream: BoxStream<'static, T>) -> BoxStream<'static, T> {
    let (sender, mut receiver) = mpsc::channel(STREAM_BUFFER);
    tokio::spawn(async move {
        loop {
            let item = tokio::select! {
                () = sender.closed() => return,
                item = stream.next() => item,
            };
            let Some(item) = item else { return };
            if sender.send(item).await.is_err() {
                return;
            }
        }
    });
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)).boxed()
}

/// Reduces a watcher event; an object without a namespace or name is skipped.
fn reduce<O, K, V>(event: watcher::Event<O>, convert: impl Fn(O) -> Option<(K, V)>) -> Ev<K, V> {
    match event {
        watcher::Event::Init => Ev::Init,
        watcher::Event::InitDone => Ev::Done,
        watcher::Event::InitApply(object) => match convert(object) {
            Some((key, value)) => Ev::Page(key, value),
            None => Ev::Skip,
        },
        watcher::Event::Apply(object) => match convert(object) {
            Some((key, value)) => Ev::Apply(key, value),
            None => Ev::Skip,
        },
        watcher::Event::Delete(object) => match convert(object) {
            Some((key, _)) => Ev::Delete(key),
            None => Ev::Skip,
        },
    }
}

fn source<K: SourceType>(
    mut object: Reduced<K>,
    reloader_compat: bool,
) -> Option<(SourceKey, SourceEntry)> {
    let key = SourceKey {
        kind: K::KIND,
        namespace: object.metadata.namespace.take()?.into(),
        name: object.metadata.name.take()?.into(),
    };
    Some((key, SourceEntry::from_reduced(object, reloader_compat)))
}

/// A workload event's key, its cache entry, and its rollout observation (kept only while this
/// replica follows the workload's rollout).
pub(crate) fn workload(
    kind: WatchedKind,
    object: WorkloadObject,
    watching: Watching,
) -> Option<(WorkloadKey, (WorkloadEntry, Box<Observation>))> {
    let WorkloadObject { metadata, object } = object;
    let key = WorkloadKey {
        kind,
        namespace: metadata.namespace?.into(),
        name: metadata.name?.into(),
    };
    // One classification for both: the cache keeps the state, a followed rollout the verdict.
    let status = classify(kind, &object);
    let entry = WorkloadEntry::classified(kind, &object, watching, status.state);
    let observation = Box::new(Observation::classified(kind, &object, CONFIG_HASH, status));
    Some((key, (entry, observation)))
}
