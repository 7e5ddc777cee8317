//! Talking to Kubernetes: per-caller clients, the budgeted paged inventory and the restart
//! executor.
//!
//! - [`Connection`]: one shared connection pool with the server's credentials;
//!   [`Connection::client`] gives a kube client acting as an [`Impersonation`] (or as the
//!   server itself). Nothing in this crate retries a request.
//! - [`RestartEngine`]: Restart Consumers — [`RestartEngine::discover`] (dry run) and
//!   [`RestartEngine::plan`] then [`RestartEngine::execute`] (discover and plan, then patch;
//!   [`RestartEngine::run`] does both).
//! - [`eviction`]: restarting consumers by PDB-respecting eviction, and the pods that consume
//!   a Secret.
//! - [`pod_consumers`]: what the consumers preview reads beyond the three kinds: the pods that
//!   consume a Secret and belong to no Deployment, StatefulSet or DaemonSet, and the Secret's
//!   own strategy.
//! - [`follow`]: following requested rollouts to their end ([`RolloutWatch`]): one list per kind
//!   per poll, the core's rollout model.
//! - [`inventory`]: the paged, budgeted listing of one workload kind and its consistency rules.
//! - [`read`]: single-object reads (Secret, ConfigMap) for preflight checks.
//! - [`review`]: TokenReview, for servers that accept Kubernetes bearer tokens.
//! - [`least_privilege`]: the chart's documented minimum RBAC per mode, and the review of a
//!   release's ServiceAccounts against it (`rollsafe review rbac`).
//!
//! Results and logs carry kinds, names, codes and HTTP statuses only: never upstream error
//! text, uids, resourceVersions or credentials.

#![warn(missing_docs, unreachable_pub)]

pub mod approval;
pub mod connection;
pub mod engine;
pub mod eviction;
pub mod follow;
pub mod inventory;
pub mod least_privilege;
pub mod pod_consumers;
pub mod progressive;
pub mod published;
pub mod read;
pub mod review;
pub mod transport;

pub use approval::{ApprovalError, send_approval};
pub use connection::{Connection, ConnectionError, IdentityError, Impersonation};
pub use engine::{
    Discovery, MAX_PATCHES_IN_FLIGHT, PatchOutcome, RestartEngine, RestartPlan, RestartRequest,
    RunObserver, restart_value,
};
pub use follow::{FOLLOW_INTERVAL, RolloutWatch};
pub use inventory::{Budget, Incomplete, Inventory, InventoryStatus, Match};
pub use read::{
    EventSummary, ReadError, SecretSummary, list_secrets, list_workload_events, read_config_map,
    read_cron_job, read_secret_metadata, read_source_metadata, read_source_reduced, read_workload,
};
pub use review::{TokenReview, review_token};
pub use transport::Timeouts;

/// The time type [`RestartRequest::at`] takes (`jiff::Timestamp`), re-exported for callers.
pub use jiff::Timestamp;
