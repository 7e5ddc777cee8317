//! The pure domain of rollsafe. No I/O, no async: everything here is a function of its inputs.
//!
//! - [`workload`]: the workload kinds rollsafe restarts (Deployment, StatefulSet, DaemonSet).
//! - [`reference`]: which Secrets and ConfigMaps a pod template references, and the two policies
//!   built on that (Restart Consumers and referenced-config).
//! - [`contract`]: the Restart Consumers result contract — its JSON, status and messages.
//! - [`failure`]: classifying an HTTP status or a transport failure into a contract code.
//! - [`patch`]: the optimistic-concurrency JSON Patch that requests a rollout.
//! - [`validation`]: Kubernetes name and annotation-key rules.

pub mod contract;
pub mod failure;
pub mod patch;
pub mod reference;
pub mod render;
pub mod validation;
pub mod workload;
