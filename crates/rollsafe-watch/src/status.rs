//! The controller's counters and state, published after every step of the loop (what
//! `/readyz`, the tests and the admin listener read).

/// Counters and state, published after every step of the loop.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// Every watch has finished its first list.
    pub synced: bool,
    /// Workloads evaluated.
    pub evaluations: u64,
    /// Roll patches acknowledged (deferred ones included).
    pub rolls: u64,
    /// Of those, patched but not rolling now (paused, OnDelete, partition).
    pub deferred: u64,
    /// Adoptions acknowledged (record written, no roll).
    pub adoptions: u64,
    /// Patches refused with 409 or 422 (not retried).
    pub conflicts: u64,
    /// Patches that failed otherwise or timed out.
    pub failures: u64,
    /// Patches not sent because of `--dry-run`.
    pub dry_run: u64,
    /// Work not done yet: evaluations in the debounce queue, adoptions waiting for their pace,
    /// patches in flight (0: idle).
    pub pending: usize,
    /// Adoptions waiting for their pace ([`crate::patches`]).
    pub adoptions_queued: usize,
    /// Cached Secrets and ConfigMaps.
    pub sources: usize,
    /// Cached workloads.
    pub workloads: usize,
    /// Rolls withheld because a consumed object does not exist (new pods could not start;
    /// the running ones keep what they have). The object's return decides.
    pub withheld: u64,
    /// Workloads halted by the flap stop.
    pub halts: u64,
    /// Rolls past the flap stop's limit as recoveries (each replaces a rollout that stalled).
    pub recoveries: u64,
    /// Rollouts this replica followed that stalled.
    pub rollouts_stalled: u64,
    /// Rolls whose template annotation another writer removed or changed before the rollout
    /// completed (announced `Reverted`; not rolled again for that content).
    pub reverts: u64,
    /// Progressive rolls held at a stalled earlier wave (each workload and content once).
    pub held: u64,
    /// Rolls held by a restart window and marked pending (each workload and content once).
    pub pended: u64,
    /// Workloads whose roll a restart window holds now (not counted in `pending`).
    pub held_by_window: usize,
    /// Rolls postponed by the global rate limit.
    pub rate_limited: u64,
    /// Events published.
    pub events: u64,
    /// Events that could not be published (logged, never retried).
    pub event_failures: u64,
    /// This replica holds the Lease (always `true` without leader election once started).
    pub leader: bool,
    /// Lists started after the first (kube's watcher relisting, e.g. after a 410).
    pub relists: u64,
    /// Watch errors seen (each followed by kube's backoff and relist).
    pub watch_errors: u64,
    /// Watch streams stale now: silent for longer than the stall bound, or found behind a
    /// consistent read and relisting. While any is, nothing is patched and `/readyz` says not
    /// ready.
    pub stale_watches: usize,
    /// Watch responses abandoned before their end (a silent stream given up and resumed, or a
    /// stream restarted).
    pub abandoned_watches: u64,
    /// Consistent reads made to confirm the cache before a roll.
    pub confirmations: u64,
    /// Of those, reads that found the cache behind (the object's watch is relisted; nothing
    /// rolled).
    pub stale_views: u64,
}
