//! The pure domain of rollsafe. No I/O, no async: everything here is a function of its inputs.
//!
//! - [`annotations`]: every annotation rollsafe reads or writes, with its meaning: the
//!   contract table.
//! - [`object`]: reading an object's metadata from its JSON.
//! - [`workload`]: the workload kinds rollsafe restarts (Deployment, StatefulSet, DaemonSet),
//!   and why a patched one may not roll now ([`workload::Deferral`]).
//! - [`reference`]: which Secrets and ConfigMaps a pod template references, and the two policies
//!   built on that (Restart Consumers and referenced-config).
//! - [`duration`]: the one duration format of every flag and setting.
//! - [`contract`]: the Restart Consumers result contract — its JSON, status and messages.
//! - [`failure`]: classifying an HTTP status or a transport failure into a contract code.
//! - [`patch`]: the optimistic-concurrency JSON Patch that requests a rollout.
//! - [`opt_in`]: whether `rollsafe watch` watches a workload (`rollsafe.dev/watch`), and its
//!   flap-stop halt mark.
//! - [`pending`]: the `rollsafe.dev/pending` mark of a roll the controller holds (a restart
//!   window, an approval), and the approval's patch.
//! - [`preview`]: the consumers preview — references, whether each workload rolls now, and the
//!   inventories — shared by the API, the client and the CLI.
//! - [`rollout`]: where a workload's rollout stands (pending, progressing, complete, stalled,
//!   deferred, superseded, gone), following it, and the waves of a progressive restart.
//! - [`name`]: validated Kubernetes names ([`name::Namespace`], [`name::SecretName`],
//!   [`name::AnnotationKey`], …), parsed once at the edges.
//! - [`envelope`]: the `{ "error" }` envelope and its fixed texts, shared by server and client.
//! - [`shown`]: text read from the cluster as it is shown: control characters dropped, capped.
//! - [`strategy`]: how a consumer is restarted (template patch or PDB-respecting eviction),
//!   who owns it, and the steps of an eviction run.
//! - [`time`]: the one RFC 3339 millisecond timestamp format.
//! - [`uri`]: the one percent-encoding rule of URI parts, shared by the HTTP clients.
//! - [`validation`]: Kubernetes name and annotation-key rules.
//! - [`render`]: the config-hash renderer.
//! - [`window`]: restart windows (`Mon-Fri 09:00-17:00 Europe/Berlin`): when `rollsafe watch`
//!   may roll.

#![warn(missing_docs, unreachable_pub)]

pub mod annotations;
pub mod contract;
pub mod duration;
pub mod envelope;
pub mod failure;
pub mod name;
pub mod object;
pub mod opt_in;
pub mod patch;
pub mod pending;
pub mod preview;
pub mod published;
pub mod reference;
pub mod render;
pub mod rollout;
pub mod shown;
pub mod strategy;
pub mod time;
pub mod uri;
pub mod validation;
pub mod window;
pub mod workload;
