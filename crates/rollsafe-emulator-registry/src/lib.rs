//! The emulator's registry layer (kube-apiserver's `pkg/registry` and its authorizer): the
//! store, the per-resource strategies bound by resource id, server-side apply's field manager,
//! the simulated controllers (ReplicaSets, ControllerRevisions, deletion and garbage
//! collection, CRD definitions, Event correlation, PodDisruptionBudgets), the eviction
//! subresource, the rollout log, and RBAC evaluation.
//!
//! It stands on `rollsafe-emulator-types` (resource metadata, routing, Status errors,
//! decoding) and knows nothing of HTTP: the filters and handlers of `rollsafe-emulator` call
//! it. It is an internal crate of the emulator, not a public API.

pub mod authorizer;
pub mod disruption;
pub mod event_correlation;
pub mod eviction;
pub mod fieldmanager;
pub mod identity;
pub mod nodes;
pub mod store;
pub mod strategy;

pub use store::rollouts::Rollout;
pub use store::{EventType, Store};
