//! Progressive rolls: the consumers of a `rollsafe.dev/rollout: progressive` source (or of
//! every source under `--rollout progressive`) roll in waves, each only once every earlier wave
//! has rolled for the source's current content and come back `complete` (or `deferred`).
//!
//! Pure, and stateless: the progression's state is on the workloads — each one's record (has
//! it rolled for what it consumes now?) and its status (where its rollout stands) — so a
//! controller restart or a leader change in the middle of a progression neither rolls a held
//! workload nor forgets one. The waves are the CLI's ([`WavePlan`]): `rollsafe.dev/rollout-wave`
//! ascending, the unannotated last, or without annotations a canary that rolls now, then the
//! rest. The members are the consumers the controller would roll: watched and not halted.
//!
//! For a workload of a later wave, every member of an earlier wave decides:
//! - it has not rolled for the current content yet, or its rollout is `pending` or
//!   `progressing`: **wait** (evaluate again after [`WAVE_RECHECK`]);
//! - it rolled for the current content and its rollout `stalled`: **hold** (no patch; one
//!   `RolloutHeld` Event naming it), until the source changes again (the fixed Secret starts
//!   the progression over from the first wave) or that rollout recovers;
//! - `complete` or `deferred`: the next member.

use std::collections::BTreeSet;
use std::time::Duration;

use rollsafe_core::rollout::RolloutState;
use rollsafe_core::rollout::waves::WavePlan;

use crate::cache::{Cache, SourceKey, WorkloadKey};
use crate::decision::{self, RollDecision};
use crate::digest::Fingerprinter;

/// How long a workload waiting for an earlier wave waits before it looks again.
pub const WAVE_RECHECK: Duration = Duration::from_secs(2);
/// How long a held workload waits before it looks again (the stalled rollout may recover).
pub const HOLD_RECHECK: Duration = Duration::from_secs(30);

/// What a progression says of one workload's roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Not progressive, or its wave's turn: roll.
    Go,
    /// An earlier wave has not finished.
    Wait,
    /// An earlier wave stalled at this workload.
    Held {
        /// The stalled workload.
        stalled: WorkloadKey,
        /// The progressive source it is held for.
        source: SourceKey,
    },
}

/// The gate of `key`'s roll for `changed`, its sources that changed. `progressive_all`:
/// every source is progressive (`--rollout progressive`). `stalled`: workloads this replica saw
/// stall that their status cannot show (a StatefulSet or DaemonSet without progress).
pub fn gate(
    cache: &Cache,
    fingerprinter: &Fingerprinter,
    key: &WorkloadKey,
    changed: &BTreeSet<SourceKey>,
    progressive_all: bool,
    stalled: &dyn Fn(&WorkloadKey) -> bool,
) -> Gate {
    for source in changed {
        let progressive = progressive_all
            || cache
                .source_entry(source)
                .is_some_and(|entry| entry.progressive);
        if !progressive {
            continue;
        }
        match gate_for(cache, fingerprinter, key, source, stalled) {
            Gate::Go => {}
            other => return other,
        }
    }
    Gate::Go
}

fn gate_for(
    cache: &Cache,
    fingerprinter: &Fingerprinter,
    key: &WorkloadKey,
    source: &SourceKey,
    stalled: &dyn Fn(&WorkloadKey) -> bool,
) -> Gate {
    // Keys of one namespace (a workload consumes only its own namespace's objects): their
    // order is result order, kind then name.
    let members: Vec<WorkloadKey> = cache
        .consumers(source)
        .filter(|member| {
            cache
                .workload(member)
                .is_some_and(|entry| entry.facts.watched && !entry.facts.halted)
        })
        .collect();
    let wave_of = |member: &WorkloadKey| {
        cache
            .workload(member)
            .and_then(|entry| entry.wave.as_deref().map(str::to_owned))
    };
    let rolls_now = |member: &WorkloadKey| {
        cache
            .workload(member)
            .is_some_and(|entry| entry.facts.deferral.is_none())
    };
    let plan = WavePlan::new(
        members
            .iter()
            .map(|member| (member.clone(), wave_of(member))),
    )
    .prefer_canary(rolls_now);
    for wave in &plan.waves {
        if wave.workloads.contains(key) {
            return Gate::Go;
        }
        for member in &wave.workloads {
            let Some(entry) = cache.workload(member) else {
                continue;
            };
            let Some(digest) = cache.record(member, fingerprinter) else {
                return Gate::Wait;
            };
            if decision::decide(&entry.facts, &digest) != RollDecision::Unchanged {
                // It has yet to roll for what it consumes now.
                return Gate::Wait;
            }
            if entry.rollout == RolloutState::Stalled || stalled(member) {
                return Gate::Held {
                    stalled: member.clone(),
                    source: source.clone(),
                };
            }
            // An eviction run in progress (its mark on the workload) is a rollout in progress.
            if entry.evicting().is_some()
                || !matches!(
                    entry.rollout,
                    RolloutState::Complete | RolloutState::Deferred
                )
            {
                return Gate::Wait;
            }
        }
    }
    // Not a member (not watched, or halted): the progression does not hold it.
    Gate::Go
}
