//! The reflector's other half: applies the streams' typed updates to the cache, follows the
//! namespace selection, forgets what goes, and schedules the workloads a change concerns.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::EventType;
use rollsafe_core::reference::TargetKind;
use rollsafe_core::rollout::RolloutState;
use rollsafe_core::rollout::follow::Observation;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{Controller, Requeue};
use crate::annotations::FIELD_MANAGER;
use crate::announce::{Announcement, Reason, workload_reference};
use crate::cache::{ReloaderNote, SourceKey, WorkloadKey};
use crate::digest;
use crate::freshness;
use crate::rollouts::Finished;
use crate::streams::{Ev, Item};
use rollsafe_kube::read::workload_resource;

impl Controller {
    /// Applies one stream item to the cache.
    pub(super) fn handle(&mut self, item: Item) {
        let now = Instant::now();
        let window = self.settings.debounce;
        match item {
            Item::Error => self.count(|s| s.watch_errors += 1),
            Item::Source(id, kind, event) => match event {
                Ev::Skip => {}
                Ev::Init => self.start_list(id),
                Ev::Page(key, _) | Ev::Apply(key, _) if !self.streams.selects(&key.namespace) => {}
                Ev::Page(key, mut entry) | Ev::Apply(key, mut entry) => {
                    entry.listed = self.streams.list(id);
                    self.keep_baselines(&key, entry.currency.version);
                    if self.cache.apply_source(key.clone(), entry) {
                        self.schedule_consumers(&key, now);
                    }
                }
                Ev::Delete(key) => {
                    if self.cache.delete_source(&key) {
                        self.schedule_consumers(&key, now);
                    }
                }
                Ev::Done => {
                    let streams = &self.streams;
                    let gone = self.cache.retain_sources(kind, |key, listed| {
                        streams.keeps(id, &key.namespace, listed)
                    });
                    for key in gone {
                        self.schedule_consumers(&key, now);
                    }
                    self.stream_listed(id);
                }
            },
            Item::Workload(id, kind, event) => match event {
                Ev::Skip => {}
                Ev::Init => self.start_list(id),
                Ev::Page(key, _) | Ev::Apply(key, _) if !self.streams.selects(&key.namespace) => {}
                Ev::Page(key, (mut entry, observation))
                | Ev::Apply(key, (mut entry, observation)) => {
                    entry.listed = self.streams.list(id);
                    self.note_reloader(&key, &entry.reloader);
                    // The template's config-hash is not the one its record says rollsafe
                    // wrote: another writer removed or changed it.
                    let written = entry
                        .facts
                        .record
                        .as_deref()
                        .map(|record| digest::parse_record(record).0);
                    let reverted = observation.marker.as_deref() != written;
                    self.rollout_observed(&key, Some(*observation), now, reverted);
                    let record_removed = entry.facts.record.is_none()
                        && self
                            .cache
                            .workload(&key)
                            .is_some_and(|old| old.facts.record.is_some());
                    if record_removed {
                        self.tracker
                            .update(&key, |state| state.record_removed = true);
                    }
                    self.cache.apply_workload(key.clone(), entry);
                    // Before the first full view, its end schedules every workload.
                    if self.status.borrow().synced {
                        self.requeue(&key, Requeue::After(window), now);
                    }
                }
                Ev::Delete(key) => {
                    self.rollout_observed(&key, None, now, false);
                    self.forget_workload(&key);
                }
                Ev::Done => {
                    let streams = &self.streams;
                    self.cache.retain_workloads(kind, |key, listed| {
                        streams.keeps(id, &key.namespace, listed)
                    });
                    self.stream_listed(id);
                }
            },
            Item::Namespace(id, event) => self.namespace_event(id, event),
        }
    }

    /// A stream starts a list (counted as a relist after its first).
    fn start_list(&mut self, id: usize) {
        if self.streams.start_list(id) {
            self.count(|s| s.relists += 1);
        }
    }

    /// Follows the selected namespaces. One leaving the selection (or deleted) is forgotten:
    /// its workloads, then its sources, dropped from the cache without a patch. One joining it
    /// starts the Secret, ConfigMap and workload watches over, so that its objects are listed
    /// (stale until those lists are done: nothing is patched from a view being rebuilt); its
    /// workloads are then decided as after a restart (adopted without a record, rolled once if
    /// what they consume changed since their record).
    fn namespace_event(&mut self, id: usize, event: Ev<String, ()>) {
        if matches!(event, Ev::Init) {
            self.start_list(id);
        }
        let change = self.streams.select(event);
        for namespace in &change.left {
            info!(namespace = %namespace, "namespace not selected: its objects are forgotten");
        }
        if !change.left.is_empty() {
            self.forget_namespaces(|namespace| change.left.iter().any(|n| n == namespace));
        }
        if let Some(selected) = &change.first_list {
            self.forget_namespaces(|namespace| !selected.contains(namespace));
        }
        if change.joined {
            info!("a namespace joined the selection: the watches list again");
            let was = self.streams.stale();
            self.streams.restart_objects();
            self.freshness_changed(was);
        }
        if change.done {
            self.stream_listed(id);
        }
    }

    /// Drops every cached workload, then every cached source, of the namespaces `gone` names
    /// (its workloads first: no consumer is left to schedule), in one pass over the cache.
    fn forget_namespaces(&mut self, gone: impl Fn(&str) -> bool) {
        let workloads: Vec<WorkloadKey> = self
            .cache
            .workload_keys()
            .filter(|key| gone(&key.namespace))
            .cloned()
            .collect();
        for key in &workloads {
            self.rollouts.forget(key);
            self.forget_workload(key);
        }
        let sources: Vec<SourceKey> = self
            .cache
            .source_keys()
            .filter(|key| gone(&key.namespace))
            .cloned()
            .collect();
        for key in &sources {
            self.cache.delete_source(key);
        }
    }

    /// What the controller keeps of a workload, forgotten (deleted, or out of the selection).
    fn forget_workload(&mut self, key: &WorkloadKey) {
        self.tracker.forget(key);
        self.cache.delete_workload(key);
        self.flap.forget(key);
        self.pool.forget(key);
        self.windows.remove(key);
        self.evictions.forget(key);
    }

    /// Says once per workload what its Reloader annotations come to, when that is not plain:
    /// honoured with an annotation rollsafe does not implement, or one left on the pod template
    /// only (`warn`, naming the annotation, counted), refused (`warn`, counted), or present
    /// without `--reloader-compat` (`info`: why nothing rolls it).
    fn note_reloader(&mut self, key: &WorkloadKey, note: &ReloaderNote) {
        if *note == ReloaderNote::None || !self.reloader_noted.insert(key.clone()) {
            return;
        }
        match note {
            ReloaderNote::Unsupported(annotation) => {
                warn!(
                    workload = %key,
                    code = "reloader_unsupported",
                    annotation = &**annotation,
                    "has a Reloader annotation rollsafe does not implement; the others are honoured"
                );
                self.metrics.reloader_unsupported.inc();
            }
            ReloaderNote::TemplateOnly(annotation) => {
                warn!(
                    workload = %key,
                    code = "reloader_unsupported",
                    annotation = &**annotation,
                    "has a Reloader annotation on its pod template only, where it is not read; put it on the workload's own metadata"
                );
                self.metrics.reloader_unsupported.inc();
            }
            ReloaderNote::Refused(code) => {
                warn!(
                    workload = %key,
                    code = *code,
                    "its Reloader annotations cannot be honoured; not watched"
                );
                self.metrics.reloader_refused.inc();
            }
            ReloaderNote::WithoutCompat => info!(
                workload = %key,
                "has Reloader annotations; pass --reloader-compat to honour them"
            ),
            ReloaderNote::None => {}
        }
    }

    /// The reference of a cached workload's Events (its uid from the cache).
    pub(super) fn reference(&self, key: &WorkloadKey) -> Option<ObjectReference> {
        let uid = self.cache.workload(key)?.plan.as_ref()?.uid().to_owned();
        Some(workload_reference(key, Some(uid)))
    }

    /// Feeds a watch event of `key` to its followed rollout, if any. `reverted`: the event shows
    /// rollsafe's template annotation removed or changed by another writer — a followed rollout
    /// it supersedes is announced as reverted ([`Controller::reverted`]).
    fn rollout_observed(
        &mut self,
        key: &WorkloadKey,
        observation: Option<Observation>,
        now: Instant,
        reverted: bool,
    ) {
        if let Some(done) = self.rollouts.observe(key, observation, now) {
            if reverted && done.status.state == RolloutState::Superseded {
                self.reverted(key, done.uid.clone());
            }
            self.finished.push(done);
        }
    }

    /// Another writer removed or changed the template annotation of a roll before its rollout
    /// completed. rollsafe does not fight it: the record it wrote still matches what the
    /// workload consumes, so nothing rolls again for this content (and without the record, the
    /// workload is adopted, not rolled). Counted, and announced by a `Reverted` Warning naming
    /// the writer — read from the workload's managedFields, off the loop (the cache does not
    /// keep them).
    fn reverted(&mut self, key: &WorkloadKey, uid: Option<String>) {
        warn!(workload = %key, code = "reverted", "another writer changed rollsafe's template annotation before the rollout completed; not rolled again for this content");
        self.metrics.reverts.inc();
        self.count(|s| s.reverts += 1);
        self.announce_writer(key, uid, Reason::Reverted, EventType::Warning, |by| {
            format!(
                "{by} removed or changed rollsafe.dev/config-hash before the rollout completed; rollsafe does not patch it again for this content. If another controller owns this workload's template, restart it by eviction instead: annotate it rollsafe.dev/strategy: evict (docs/strategies.md)"
            )
        });
    }

    /// Announces `reason` on `key`, naming the writer of its spec from its managedFields —
    /// read off the loop (the cache does not keep them) — in the note `note` makes.
    pub(super) fn announce_writer(
        &self,
        key: &WorkloadKey,
        uid: Option<String>,
        reason: Reason,
        type_: EventType,
        note: impl FnOnce(&str) -> String + Send + 'static,
    ) {
        let client = self.client.clone();
        let announcer = self.announcer.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let writers = template_writers(&client, &key).await;
            let by = match writers.as_slice() {
                [] => "another writer".to_owned(),
                [manager] => format!("another writer (field manager {manager})"),
                managers => format!(
                    "another writer (one of the field managers {})",
                    managers.join(", ")
                ),
            };
            let event = Announcement {
                type_,
                reason,
                note: note(&by),
                related: None,
                causes: Vec::new(),
            };
            announcer.publish(&key, workload_reference(&key, uid), event, None);
        });
    }

    /// Announces and counts the rollouts that became final: a `RolloutComplete` Normal Event,
    /// a `RolloutStalled` Warning Event with Kubernetes' reason; superseded and gone ones are
    /// counted and logged only (someone else's change, or no workload to write on).
    pub(super) fn finish_rollouts(&mut self) {
        for done in std::mem::take(&mut self.finished) {
            let Finished {
                key,
                uid,
                status,
                elapsed,
            } = done;
            let result = status.state.as_str();
            if status.state == RolloutState::Stalled {
                self.tracker.update(&key, |state| state.stalled = true);
                self.count(|s| s.rollouts_stalled += 1);
            }
            self.metrics.rollout(key.kind.as_str(), result, elapsed);
            info!(workload = %key, result, seconds = elapsed.as_secs(), "rollout finished");
            if let Some(event) = Announcement::rollout_finished(&status, elapsed) {
                let reference = workload_reference(&key, uid);
                self.announcer
                    .publish(&key, reference, event, Some(&self.cache));
            }
        }
    }

    /// A stream has listed: the first full view when it was the last, and fresh again when
    /// it was restarted for being behind.
    fn stream_listed(&mut self, id: usize) {
        let all = self.streams.listed(id);
        if all && !self.status.borrow().synced {
            // First full view: evaluate everything now (restart → no patch; missed change →
            // one).
            let now = Instant::now();
            self.seed_bucket(now);
            self.evaluate_all_now(now);
            self.count(|s| s.synced = true);
            info!(workloads = self.cache.len().1, "caches synced");
        }
        let was = self.streams.stale();
        if self.streams.caught_up(id) {
            self.freshness_changed(was);
        }
    }

    /// Starts over the watch of `kind` that covers `namespace` (a consistent read found it
    /// behind): stale until its new list is done.
    pub(super) fn relist(&mut self, kind: TargetKind, namespace: &str) {
        let was = self.streams.stale();
        self.streams.relist(kind, namespace);
        self.freshness_changed(was);
    }

    /// Before a change of `source` (to resourceVersion `version`) is applied: keeps the record
    /// each of its opted-in consumers without a record of its own has now — when the state of
    /// the workload this replica holds is older than the change (a smaller resourceVersion:
    /// the API server's versions are one sequence), so its pods were started before it. A
    /// workload created (or edited) after the change, even if this view saw it first (the
    /// Secret watch was behind), is adopted as before; so is any workload when the versions
    /// are not numbers. After the first list only: until then nothing was decided, and the
    /// first list is every workload's baseline. A deletion keeps none (a roll without its
    /// object is withheld anyway).
    fn keep_baselines(&mut self, source: &SourceKey, version: u64) {
        if version == 0 || !self.status.borrow().synced {
            return;
        }
        let unrecorded: Vec<WorkloadKey> = self
            .cache
            .consumers(source)
            .filter(|key| self.tracker.baseline(key).is_none())
            .filter(|key| {
                self.cache.workload(key).is_some_and(|entry| {
                    entry.facts.watched
                        && entry.facts.record.is_none()
                        && entry.plan.as_ref().is_some_and(|plan| {
                            let held = freshness::version_number(plan.resource_version());
                            held != 0 && held < version
                        })
                })
            })
            .collect();
        for key in unrecorded {
            if let Some(record) = self.cache.record(&key, &self.settings.fingerprinter) {
                self.tracker
                    .update(&key, |state| state.baseline = Some(record));
            }
        }
    }

    /// A change of `key`: its consumers are evaluated after the debounce window, and remember
    /// it as a change they have not rolled for.
    fn schedule_consumers(&mut self, key: &SourceKey, now: Instant) {
        // Before the first full view nothing is decided: its end evaluates every workload, and
        // a change made before it is named from the records. Tracking the first list's
        // objects as changes held a set per workload at the peak of the cold start.
        if !self.status.borrow().synced {
            return;
        }
        let window = self.settings.debounce;
        let consumers: Vec<WorkloadKey> = self.cache.consumers(key).collect();
        for workload in consumers {
            self.requeue(&workload, Requeue::After(window), now);
            self.tracker.changed_at(&workload, key, now);
        }
    }
}

/// The field managers that last wrote `key`, other than rollsafe's own: the newest
/// managedFields entries that own a part of its `spec` or `metadata` (not its status; several
/// when their times, kept to the second, tie). Empty when the workload cannot be read in time or names none. A writer that
/// only removed fields owns none of them and cannot be named.
async fn template_writers(client: &kube::Client, key: &WorkloadKey) -> Vec<String> {
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(client.clone(), &key.namespace, &workload_resource(key.kind));
    let Ok(Ok(Some(object))) =
        tokio::time::timeout(freshness::CONFIRM_TIMEOUT, api.get_opt(&key.name)).await
    else {
        return Vec::new();
    };
    let writers: Vec<_> = object
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter(|entry| entry.manager.as_deref() != Some(FIELD_MANAGER))
        .filter(|entry| entry.subresource.is_none())
        .filter(|entry| {
            entry.fields_v1.as_ref().is_some_and(|fields| {
                fields.0.get("f:spec").is_some() || fields.0.get("f:metadata").is_some()
            })
        })
        .collect();
    let newest = writers
        .iter()
        .filter_map(|entry| entry.time.as_ref().map(|time| time.0))
        .max();
    let mut names: Vec<String> = writers
        .into_iter()
        .filter(|entry| entry.time.as_ref().map(|time| time.0) == newest)
        .filter_map(|entry| entry.manager)
        .collect();
    names.sort();
    names.dedup();
    names
}
