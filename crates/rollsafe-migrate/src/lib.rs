//! Moving to rollsafe from another tool: what changes, read from the cluster or from manifests,
//! and never written. Migrating restarts nothing.
//!
//! - [`reloader`]: from Stakater Reloader — for every workload with Reloader's annotations, what
//!   `rollsafe watch --reloader-compat` will watch and what differs, then Reloader's Helm values
//!   as rollsafe's chart values.
//!
//! This crate sits beside the controller, below the command line: it reads a workload the way
//! `rollsafe watch` does (the watch crate's reduction and the core's reading of Reloader's
//! annotations), and leaves argument parsing, printing and exit codes to `rollsafe migrate`.
//! Errors carry fixed texts, kinds, names and positions: never Kubernetes' own text and never
//! the input's.

#![warn(missing_docs, unreachable_pub)]

pub mod reloader;
