//! The emulator's registry layer (kube-apiserver's `pkg/registry` and its authorizer) and the
//! controllers a cluster runs beside it: the store (with deletion and garbage collection and
//! CRD definitions), the per-resource strategies bound by resource id, server-side apply's
//! field manager, the eviction subresource and RBAC evaluation; in [`controllers`] (the
//! controller-manager's place) the simulated workload controllers and kubelet, ReplicaSets,
//! ControllerRevisions, their Event recorder, the disruption controller and the rollout log,
//! each a client of the store's public interface; and [`Cluster`], which runs the two under
//! one lock.
//!
//! It stands on `rollsafe-emulator-types` (resource metadata, routing, Status errors,
//! decoding) and knows nothing of HTTP: the filters and handlers of `rollsafe-emulator` call
//! it. It is an internal crate of the emulator, not a public API.

pub mod authorizer;
pub mod cluster;
pub mod controllers;
pub mod eviction;
pub mod fieldmanager;
pub mod identity;
pub mod nodes;
pub mod store;
pub mod strategy;

pub use cluster::Cluster;
pub use controllers::rollout_log::Rollout;
pub use store::{EventType, Store};
