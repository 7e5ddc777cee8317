//! `rollsafe watch`: a controller that rolls opted-in workloads when the live Secrets and
//! ConfigMaps they consume change.
//!
//! Layers, bottom up: [`annotations`] (what users write), [`consumption`] (which keys of which
//! objects a pod template consumes, on top of the core's reference extraction), [`digest`] (the
//! content-addressed digest), [`reduced`] (Secrets and ConfigMaps decoded straight into digests), [`roll_times`] (the recent roll times on a workload), [`decision`] (adopt, unchanged, roll, deferred, halted, and the
//! patch), [`cache`] (digests and references, never data), [`debounce`] and [`limits`] (per
//! workload coalescing, the global token bucket, the flap stop), [`outcome`] (one evaluation,
//! decided without I/O: what to write, count, reschedule and announce), [`windows`] and [`approval`] (restart windows and approvals holding a roll, and the pending mark), [`freshness`] (what proves
//! the view current, and stalled watches), [`patches`] (the patches in flight, bounded, one per workload, rolls ahead of paced adoptions), [`evictions`] (the eviction runs of `rollsafe.dev/strategy: evict`, durable through their mark), [`controller`] (kube's watchers, and the one step that carries an outcome out: patches, Events), [`leader`] (the
//! Lease), [`metrics`] and [`admin`] (the admin listener). See docs/watch.md.

#![warn(missing_docs, unreachable_pub)]

pub mod admin;
pub mod annotations;
pub mod announce;
pub mod approval;
pub mod cache;
pub mod consumption;
pub mod controller;
pub mod debounce;
pub mod decision;
pub mod digest;
pub mod evictions;
pub mod freshness;
pub mod leader;
pub mod limits;
pub mod metrics;
pub mod outcome;
pub mod patches;
pub mod preflight;
pub mod progression;
pub mod published;
pub mod reduced;
pub mod roll_times;
pub mod rollouts;
pub mod settings;
pub mod status;
pub(crate) mod streams;
pub mod tracker;
pub mod uid;
pub mod windows;
pub mod workload_object;

pub use controller::{Controller, ControllerError, Spawned};
pub use digest::Fingerprinter;
pub use settings::ControllerSettings;
pub use status::Status;
