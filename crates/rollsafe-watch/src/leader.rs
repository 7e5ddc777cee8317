//! Leader election through a `coordination.k8s.io/v1` Lease, with `kube-lease-manager`.
//!
//! Every replica watches and keeps warm caches; only the one holding the Lease patches. The
//! controller reads the leadership flag before every patch, so a replica that learns it lost the
//! Lease sends nothing more. Correctness does not rest on the Lease alone: every roll is a
//! uid- and resourceVersion-tested JSON Patch, so two replicas acting on the same change cannot
//! both apply it — the second is refused (409/422), and its next view shows the record already
//! matching.

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How the Lease is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's identity (pod name).
    pub identity: String,
    /// How long a Lease lasts without renewal, in seconds.
    pub duration_seconds: u64,
    /// How long before expiry the holder renews, in seconds (less than the duration).
    pub grace_seconds: u64,
}

/// Why the leader election could not start.
#[derive(Debug, Error)]
pub enum LeaderError {
    /// The Lease could not be created or read.
    #[error("cannot set up the Lease")]
    Lease(#[source] LeaseManagerError),
    /// The grace period is not shorter than the duration.
    #[error("the lease grace period must be shorter than its duration")]
    Timing,
}

impl LeaderError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            LeaderError::Lease(_) => "lease",
            LeaderError::Timing => "lease_timing",
        }
    }
}

/// A running election: the leadership flag for [`crate::Controller::with_leadership`], and the
/// task that holds the Lease (dropping every receiver releases it).
pub struct Election {
    /// `true` while this replica holds the Lease.
    pub leader: watch::Receiver<bool>,
    /// The task renewing the Lease.
    pub task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// Starts competing for the Lease (created when missing).
pub async fn elect(
    client: kube::Client,
    settings: &LeaseSettings,
) -> Result<Election, LeaderError> {
    if settings.grace_seconds >= settings.duration_seconds {
        return Err(LeaderError::Timing);
    }
    let manager = LeaseManagerBuilder::new(client, settings.name.clone())
        .with_namespace(settings.namespace.clone())
        .with_identity(settings.identity.clone())
        .with_duration(settings.duration_seconds)
        .with_grace(settings.grace_seconds)
        .with_field_manager(format!("rollsafe-watch-lease/{}", settings.identity))
        .build()
        .await
        .map_err(LeaderError::Lease)?;
    let (leader, task) = manager.watch().await;
    Ok(Election { leader, task })
}
