//! Prometheus metrics of the controller. Every label value is a static string.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// Labels of a write decision's outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RollLabels {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: &'static str,
    /// `rolled`, `deferred`, `adopted`, `halted`, `pending` (a roll held by a restart window,
    /// marked), `unpended` (its mark removed, the change undone), `conflict`, `failed` or
    /// `dry_run`.
    pub result: &'static str,
}

/// Labels of an evaluation that wrote nothing.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SkipLabels {
    /// `unchanged`, `not_watched`, `halted`, `source_missing`, `rate_limited`, `unpatchable`,
    /// `not_leader`, `waiting_for_wave`, `stale_view` or `restart_window`.
    pub reason: &'static str,
}

/// Labels of a followed rollout's end.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RolloutLabels {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: &'static str,
    /// `complete`, `stalled`, `superseded` or `gone`.
    pub result: &'static str,
}

/// Labels of a consistent read confirming the cache before a roll.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ConfirmLabels {
    /// `current` (the cache holds what the read returned), `behind` (it does not: the
    /// object's watch is relisted, nothing rolls) or `failed` (no answer in time).
    pub result: &'static str,
}

/// Labels of the cache sizes.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ObjectLabels {
    /// `source` (Secrets and ConfigMaps) or `workload`.
    pub kind: &'static str,
}

/// The controller's metrics.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    /// Patches by workload kind and outcome.
    pub rolls: Family<RollLabels, Counter>,
    /// Evaluations that wrote nothing, by reason.
    pub skipped: Family<SkipLabels, Counter>,
    /// From the first observed change of a workload's inputs to the roll patch acknowledged,
    /// for rolls nothing held.
    pub reaction: Histogram,
    /// The same, for rolls a restart window or an approval held: the wait is the people's, not
    /// the controller's, and is kept out of `reaction`.
    pub held_roll: Histogram,
    /// Evaluations waiting in the debounce queue.
    pub queue_depth: Gauge,
    /// Cached objects.
    pub objects: Family<ObjectLabels, Gauge>,
    /// Workloads halted by the flap stop (by this process).
    pub halts: Counter,
    /// Rolls past the flap stop's limit as recoveries (each replaces a rollout that stalled).
    pub recoveries: Counter,
    /// Rolls another writer reverted before their rollout completed.
    pub reverts: Counter,
    /// Cached workloads halted now (`rollsafe.dev/halted` on them, by any replica, until a
    /// person removes it).
    pub halted: Gauge,
    /// Workloads whose roll a restart window holds now (marked `rollsafe.dev/pending`).
    pub held_by_window: Gauge,
    /// 1 once every watch has listed once.
    pub synced: Gauge,
    /// From a roll acknowledged to its rollout's end, by kind and result.
    pub rollout_seconds: Family<RolloutLabels, Histogram>,
    /// Rollouts that stalled.
    pub rollouts_stalled: Counter,
    /// Workloads a progressive roll held back (each workload and content once).
    pub held: Counter,
    /// Workloads with a Reloader annotation rollsafe does not implement (each once).
    pub reloader_unsupported: Counter,
    /// Workloads whose Reloader annotations rollsafe cannot honour (a reload entry that is
    /// neither a name nor an accepted expression, too many entries): not watched (each once).
    pub reloader_refused: Counter,
    /// Watch streams that went silent for longer than the stall bound.
    pub watch_stalls: Counter,
    /// Watch streams stale now (nothing is patched while any is).
    pub stale_watches: Gauge,
    /// Consistent reads confirming the cache before a roll, by result.
    pub confirmations: Family<ConfirmLabels, Counter>,
    /// Patches sent and not yet answered.
    pub patches_in_flight: Gauge,
    /// Workloads waiting for the adoption pace to write their first record.
    pub adoptions_queued: Gauge,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        Self {
            rolls: Family::default(),
            skipped: Family::default(),
            reaction: Histogram::new(exponential_buckets(0.005, 2.0, 16)),
            // One minute to about 11 days.
            held_roll: Histogram::new(exponential_buckets(60.0, 2.0, 15)),
            queue_depth: Gauge::default(),
            objects: Family::default(),
            halts: Counter::default(),
            recoveries: Counter::default(),
            reverts: Counter::default(),
            halted: Gauge::default(),
            held_by_window: Gauge::default(),
            synced: Gauge::default(),
            rollout_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 2.0, 12))
            }),
            rollouts_stalled: Counter::default(),
            held: Counter::default(),
            reloader_unsupported: Counter::default(),
            reloader_refused: Counter::default(),
            watch_stalls: Counter::default(),
            stale_watches: Gauge::default(),
            confirmations: Family::default(),
            patches_in_flight: Gauge::default(),
            adoptions_queued: Gauge::default(),
        }
    }
}

impl ControllerMetrics {
    /// Registers every metric under `rollsafe_watch_`.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("rollsafe_watch");
        registry.register(
            "rolls",
            "Patches by workload kind and outcome",
            self.rolls.clone(),
        );
        registry.register(
            "skipped",
            "Evaluations that wrote nothing, by reason",
            self.skipped.clone(),
        );
        registry.register_with_unit(
            "reaction",
            "From the first observed change of a workload's inputs to its roll patch acknowledged",
            Unit::Seconds,
            self.reaction.clone(),
        );
        registry.register_with_unit(
            "held_roll",
            "From the first observed change to the roll, for rolls a restart window or an approval held",
            Unit::Seconds,
            self.held_roll.clone(),
        );
        registry.register(
            "queue_depth",
            "Evaluations waiting in the debounce queue",
            self.queue_depth.clone(),
        );
        registry.register("objects", "Cached objects", self.objects.clone());
        registry.register(
            "halted",
            "Cached workloads halted now by the flap stop",
            self.halted.clone(),
        );
        registry.register(
            "held_by_window",
            "Workloads whose roll a restart window holds now",
            self.held_by_window.clone(),
        );
        registry.register(
            "halts",
            "Workloads halted by the flap stop",
            self.halts.clone(),
        );
        registry.register(
            "recoveries",
            "Rolls past the flap stop's limit as recoveries of a stalled rollout",
            self.recoveries.clone(),
        );
        registry.register(
            "reverts",
            "Rolls whose template annotation another writer removed or changed before the rollout completed",
            self.reverts.clone(),
        );
        registry.register(
            "synced",
            "1 once every watch has listed once",
            self.synced.clone(),
        );
        registry.register_with_unit(
            "rollout",
            "From a roll acknowledged to its rollout's end, by kind and result",
            Unit::Seconds,
            self.rollout_seconds.clone(),
        );
        registry.register(
            "rollouts_stalled",
            "Rollouts started by this process that stalled",
            self.rollouts_stalled.clone(),
        );
        registry.register(
            "rollouts_held",
            "Workloads a progressive roll held back at a stalled earlier wave",
            self.held.clone(),
        );
        registry.register(
            "reloader_unsupported",
            "Workloads with a Reloader annotation rollsafe does not implement",
            self.reloader_unsupported.clone(),
        );
        registry.register(
            "reloader_refused",
            "Workloads whose Reloader annotations rollsafe cannot honour, not watched",
            self.reloader_refused.clone(),
        );
        registry.register(
            "watch_stalls",
            "Watch streams that delivered nothing (no event, bookmark or page) for longer than the stall bound",
            self.watch_stalls.clone(),
        );
        registry.register(
            "stale_watches",
            "Watch streams stale now: silent beyond the stall bound, or relisting after a read found them behind",
            self.stale_watches.clone(),
        );
        registry.register(
            "confirmations",
            "Consistent reads confirming the cache before a roll, by result",
            self.confirmations.clone(),
        );
        registry.register(
            "patches_in_flight",
            "Patches sent and not yet answered",
            self.patches_in_flight.clone(),
        );
        registry.register(
            "adoptions_queued",
            "Workloads waiting for the adoption pace to write their first record",
            self.adoptions_queued.clone(),
        );
    }

    /// Records a followed rollout's end.
    pub fn rollout(&self, kind: &'static str, result: &'static str, elapsed: std::time::Duration) {
        self.rollout_seconds
            .get_or_create(&RolloutLabels { kind, result })
            .observe(elapsed.as_secs_f64());
        if result == "stalled" {
            self.rollouts_stalled.inc();
        }
    }

    /// Counts a patch outcome.
    pub fn roll(&self, kind: &'static str, result: &'static str) {
        self.rolls.get_or_create(&RollLabels { kind, result }).inc();
    }

    /// Counts an evaluation that wrote nothing.
    pub fn skip(&self, reason: &'static str) {
        self.skipped.get_or_create(&SkipLabels { reason }).inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names() {
        let metrics = ControllerMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.roll("Deployment", "rolled");
        metrics.skip("unchanged");
        metrics.reaction.observe(0.01);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for expected in [
            "rollsafe_watch_rolls_total{kind=\"Deployment\",result=\"rolled\"} 1",
            "rollsafe_watch_skipped_total{reason=\"unchanged\"} 1",
            "rollsafe_watch_reaction_seconds_count 1",
            "rollsafe_watch_queue_depth 0",
            "rollsafe_watch_halts_total 0",
            "rollsafe_watch_recoveries_total 0",
            "rollsafe_watch_reverts_total 0",
            "rollsafe_watch_rollouts_stalled_total 0",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
    }
}
