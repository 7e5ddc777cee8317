//! `rollsafe migrate reloader`: for every workload with Stakater Reloader's annotations, what
//! `rollsafe watch --reloader-compat` will watch and what differs from Reloader; then Reloader's
//! Helm values as rollsafe's. It reads the cluster (GET requests only, [`cluster`]) or
//! manifests ([`Inventory::add_manifest`]), and writes nothing: migrating restarts nothing.
//!
//! The report ([`Report`]) serializes to the one JSON document `rollsafe migrate reloader -o
//! json` prints (the shape is stable, pinned by a snapshot in the CLI's `tests/migrate_cli.rs`,
//! and documented in docs/watch.md):
//!
//! ```json
//! { "workloads": [ { "kind": "Deployment", "namespace": "shop", "name": "api",
//!                    "reloaderAnnotations": { "reloader.stakater.com/auto": "true" },
//!                    "rollsafeWatch": null,
//!                    "watch": { "state": "watched", "decidedBy": "reloader", "reason": "…" },
//!                    "consumes": [ { "kind": "Secret", "name": "db", "keys": ["password"],
//!                                    "rolls": true } ],
//!                    "differences": [ { "code": "keyLevel", "objects": ["Secret/db"],
//!                                       "keys": ["password"], "message": "…" } ],
//!                    "leftovers": [] } ],
//!   "summary": { "workloadsRead": 3, "withReloaderAnnotations": 1, … },
//!   "notes": [ "…" ],
//!   "values": { "controller": { "enabled": true, "reloaderCompat": true } },
//!   "mapped": [ { "setting": "reloader.ignoreNamespaces", "value": "kube-system",
//!                 "to": "controller.ignoreNamespaces" } ],
//!   "unmapped": [ { "setting": "reloader.reloadStrategy", "value": "env-vars",
//!                   "reason": "…" } ] }
//! ```
//!
//! How a workload's annotations are read is not this crate's: [`workload`] reduces each one
//! with the controller's own reduction (`rollsafe_watch::cache::WorkloadEntry`, which reads
//! Reloader's annotations with the core's `rollsafe_core::opt_in::reloader`), so the report
//! says what the controller will do, not what a second reading of the rules says.

pub mod cluster;
pub mod inventory;
pub mod values;
pub mod workload;

use serde::Serialize;
use serde_json::Value;

pub use self::cluster::{ListError, read as read_cluster};
pub use self::inventory::Inventory;
pub use self::values::{Mapped, Migration, Unmapped, ValuesError, migrate as migrate_values};
pub use self::workload::{WatchState, WorkloadReport};

/// What is said whatever was read.
const FIRST_RUN: &str = "The first run of rollsafe watch --reloader-compat adopts every \
    workload it watches: it writes each one's record and restarts nothing. What Reloader left \
    on them (reloader.stakater.com/last-reloaded-from, STAKATER_* env vars) stays as it is and \
    causes no roll; the first roll is for the first change after that.";
/// Both controllers must not run at once.
const ONE_CONTROLLER: &str = "Run one controller: scale Reloader to zero (or uninstall it) \
    when rollsafe watch starts, or both restart the same workloads for the same change.";
/// `controller.all` beside Reloader's annotations.
const ALL: &str = "controller.all: workloads without Reloader annotations are watched too (not \
    listed here). One whose Reloader annotations name objects, or ask for search, is watched as \
    they say, where Reloader's autoReloadAll also restarted it for every referenced object.";
/// `controller.sourceSelector` is not evaluated here.
const SOURCE_SELECTOR: &str = "controller.sourceSelector is not applied in this report: \
    objects outside it count as not watched.";

/// The whole report, as printed.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The workloads with Reloader annotations, by namespace, name and kind.
    pub workloads: Vec<WorkloadReport>,
    /// The counts.
    pub summary: Summary,
    /// What to know whatever was read.
    pub notes: Vec<&'static str>,
    /// rollsafe's chart values.
    pub values: Value,
    /// Reloader's settings moved to rollsafe's chart.
    pub mapped: Vec<Mapped>,
    /// Reloader's settings not moved, with why.
    pub unmapped: Vec<Unmapped>,
}

/// The counts.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    /// Deployments, StatefulSets, DaemonSets, CronJobs and Argo Rollouts read.
    pub workloads_read: usize,
    /// Of those, with Reloader annotations (the workloads listed).
    pub with_reloader_annotations: usize,
    /// Of those, watched by `rollsafe watch --reloader-compat`.
    pub watched: usize,
    /// Not watched.
    pub not_watched: usize,
    /// Where the values come from: `file` (`--reloader-values`) or `defaults`.
    pub reloader_values: &'static str,
}

impl Report {
    /// The report of what was read, with the values migrated (`values_file`: from a file, not
    /// Reloader's chart defaults).
    pub fn new(inventory: &Inventory, migration: Migration, values_file: bool) -> Self {
        let mut workloads: Vec<WorkloadReport> = inventory
            .workloads
            .iter()
            .filter_map(|(kind, object)| {
                workload::analyse(*kind, object, &inventory.sources, &migration.scope)
            })
            .collect();
        workloads
            .sort_by(|a, b| (&a.namespace, &a.name, a.kind).cmp(&(&b.namespace, &b.name, b.kind)));
        let count = |state| workloads.iter().filter(|w| w.watch.state == state).count();
        let summary = Summary {
            workloads_read: inventory.read,
            with_reloader_annotations: workloads.len(),
            watched: count(WatchState::Watched),
            not_watched: count(WatchState::NotWatched),
            reloader_values: if values_file { "file" } else { "defaults" },
        };
        let mut notes = vec![FIRST_RUN, ONE_CONTROLLER];
        let mapped = |to: &str| migration.mapped.iter().any(|m| m.to == to);
        if mapped("controller.all") {
            notes.push(ALL);
        }
        if mapped("controller.sourceSelector") {
            notes.push(SOURCE_SELECTOR);
        }
        Report {
            workloads,
            summary,
            notes,
            values: migration.values,
            mapped: migration.mapped,
            unmapped: migration.unmapped,
        }
    }
}
