//! Leader election through a `coordination.k8s.io/v1` Lease, with `kube-lease-manager`.
//!
//! Every replica watches and keeps warm caches; only the one holding the Lease patches.
//!
//! The controller owns the safety rule, not the election crate: kube-lease-manager keeps
//! reporting the last leadership state while its renewals fail, so a partitioned holder would
//! go on believing it leads after its Lease has expired and another replica has taken it. The
//! Lease client is therefore wrapped: every Lease write acknowledged with this replica as the
//! holder records the instant its request *started* (the Lease cannot have been renewed
//! earlier). A patch may be sent only while that instant is younger than the Lease duration
//! minus [`SAFETY_MARGIN`], and only with a timeout that ends inside what remains (see
//! [`Leadership::remaining`]); otherwise the replica counts as not leading.
//!
//! Correctness does not rest on the Lease alone: every roll is a uid- and
//! resourceVersion-tested JSON Patch, so two replicas acting on the same change cannot both
//! apply it — the second is refused (409/422), and its next view shows the record already
//! matching.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use thiserror::Error;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Kept off the end of the Lease: patches stop this long before the Lease could expire, to
/// cover the clock-rate drift between replicas and the time a patch spends in flight after its
/// timeout fires here.
pub const SAFETY_MARGIN: Duration = Duration::from_secs(2);

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
    /// The grace period is not shorter than the duration, or not longer than the safety margin.
    #[error(
        "the lease grace period must be shorter than its duration and longer than the safety margin"
    )]
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

/// What the controller reads before every patch: the election's flag and when this replica's
/// hold on the Lease was last confirmed by the API server. Dropping every clone releases the
/// Lease.
#[derive(Debug, Clone)]
pub struct Leadership {
    flag: watch::Receiver<bool>,
    renewed: watch::Receiver<Option<Instant>>,
    valid_for: Duration,
}

impl Leadership {
    /// A leadership fed by hand: `flag` says whether this replica holds the Lease, `renewed`
    /// when an acquire or renewal last succeeded (its request's start), and patches stop
    /// `valid_for` after that.
    pub fn new(
        flag: watch::Receiver<bool>,
        renewed: watch::Receiver<Option<Instant>>,
        valid_for: Duration,
    ) -> Self {
        Self {
            flag,
            renewed,
            valid_for,
        }
    }

    /// What the election last said (it may lag behind an expiry: see [`Leadership::remaining`]).
    pub fn elected(&self) -> bool {
        *self.flag.borrow()
    }

    /// Until when a patch may still be sent: `None` when not elected or never confirmed.
    pub fn valid_until(&self) -> Option<Instant> {
        if !self.elected() {
            return None;
        }
        let renewed = (*self.renewed.borrow())?;
        Some(renewed + self.valid_for)
    }

    /// How long a patch started at `now` may take while the Lease is surely still held;
    /// `None` (zero time left) means it must not be started.
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        self.valid_until()
            .and_then(|until| until.checked_duration_since(now))
            .filter(|left| !left.is_zero())
    }

    pub(crate) fn flag(&self) -> watch::Receiver<bool> {
        self.flag.clone()
    }

    pub(crate) fn renewals(&self) -> watch::Receiver<Option<Instant>> {
        self.renewed.clone()
    }
}

/// A running election: the [`Leadership`] for [`crate::Controller::with_leadership`], and the
/// task that holds the Lease (dropping every [`Leadership`] releases it).
pub struct Election {
    /// Whether, and until when, this replica may patch.
    pub leader: Leadership,
    /// The task renewing the Lease.
    pub task: JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

/// Starts competing for the Lease (created when missing).
pub async fn elect(
    client: kube::Client,
    settings: &LeaseSettings,
) -> Result<Election, LeaderError> {
    // The holder renews `grace` before expiry; that must come before its own right to patch
    // lapses (`SAFETY_MARGIN` before expiry), or it would stop patching at every renewal.
    if settings.grace_seconds >= settings.duration_seconds
        || Duration::from_secs(settings.grace_seconds) <= SAFETY_MARGIN
    {
        return Err(LeaderError::Timing);
    }
    let (renewed_tx, renewed) = watch::channel(None);
    let client = observed(client, settings, renewed_tx);
    let manager = LeaseManagerBuilder::new(client, settings.name.clone())
        .with_namespace(settings.namespace.clone())
        .with_identity(settings.identity.clone())
        .with_duration(settings.duration_seconds)
        .with_grace(settings.grace_seconds)
        .with_field_manager(format!("rollsafe-watch-lease/{}", settings.identity))
        .build()
        .await
        .map_err(LeaderError::Lease)?;
    let (flag, task) = manager.watch().await;
    let valid_for = Duration::from_secs(settings.duration_seconds) - SAFETY_MARGIN;
    Ok(Election {
        leader: Leadership::new(flag, renewed, valid_for),
        task,
    })
}

/// `client`, recording in `renewed` the start of every acknowledged write of the Lease that
/// leaves this replica its holder.
fn observed(
    client: kube::Client,
    settings: &LeaseSettings,
    renewed: watch::Sender<Option<Instant>>,
) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let lease_path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
        settings.namespace, settings.name
    );
    let identity: Arc<str> = Arc::from(settings.identity.as_str());
    let renewed = Arc::new(renewed);
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let identity = Arc::clone(&identity);
        let renewed = Arc::clone(&renewed);
        let is_write =
            request.method() == http::Method::PATCH && request.uri().path() == lease_path;
        let future: BoxFuture<'static, Result<http::Response<kube::client::Body>, kube::Error>> =
            Box::pin(async move {
                let started = Instant::now();
                let response = client.send(request).await?;
                if !is_write || !response.status().is_success() {
                    return Ok(response);
                }
                let (parts, body) = response.into_parts();
                let bytes: Bytes = body.collect().await?.to_bytes();
                if holder(&bytes).as_deref() == Some(&*identity) {
                    renewed.send_replace(Some(started));
                }
                Ok(http::Response::from_parts(
                    parts,
                    kube::client::Body::from(bytes),
                ))
            });
        future
    });
    kube::Client::new(service, namespace)
}

/// The `spec.holderIdentity` of a Lease in JSON.
fn holder(body: &[u8]) -> Option<String> {
    let lease: serde_json::Value = serde_json::from_slice(body).ok()?;
    lease
        .pointer("/spec/holderIdentity")?
        .as_str()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn patches_may_start_only_while_the_last_renewal_is_younger_than_the_duration_minus_the_margin()
     {
        let (flag_tx, flag) = watch::channel(false);
        let (renewed_tx, renewed) = watch::channel(None);
        let leadership = Leadership::new(flag, renewed, Duration::from_secs(13));
        assert_eq!(leadership.remaining(Instant::now()), None, "never elected");
        flag_tx.send_replace(true);
        assert_eq!(
            leadership.remaining(Instant::now()),
            None,
            "never confirmed"
        );
        renewed_tx.send_replace(Some(Instant::now()));
        assert_eq!(
            leadership.remaining(Instant::now()),
            Some(Duration::from_secs(13))
        );
        tokio::time::advance(Duration::from_secs(12)).await;
        assert_eq!(
            leadership.remaining(Instant::now()),
            Some(Duration::from_secs(1)),
            "what remains bounds the patch's timeout"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(leadership.remaining(Instant::now()), None, "lapsed");
        renewed_tx.send_replace(Some(Instant::now()));
        assert!(leadership.remaining(Instant::now()).is_some(), "renewed");
        flag_tx.send_replace(false);
        assert_eq!(leadership.remaining(Instant::now()), None, "lost");
    }

    #[test]
    fn only_a_lease_naming_this_replica_confirms_it() {
        let lease = br#"{"kind":"Lease","spec":{"holderIdentity":"a","renewTime":"2026-01-01T00:00:00.000000Z"}}"#;
        assert_eq!(holder(lease).as_deref(), Some("a"));
        assert_eq!(holder(br#"{"spec":{}}"#), None);
        assert_eq!(holder(b"not json"), None);
    }
}
