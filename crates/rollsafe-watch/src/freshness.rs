//! How current the controller's view is, and what it does when the view may be behind.
//!
//! Two rules keep a replica from acting on an old view (docs/watch.md, "Stale views"):
//!
//! 1. **A roll is only ever for a state at least as new as the one the record was written
//!    from.** Every record is written with `rollsafe.dev/config-versions`: per consumed object,
//!    the resourceVersion it was computed from. Before rolling for an object whose recorded
//!    state differs from the cached one, the cache must show it is newer: it held the recorded
//!    version before its current one ([`PriorVersions`]: watch streams and consistent lists
//!    deliver one object's versions in order), or it holds that very version. When it cannot —
//!    after a takeover, a relist, a reconnect, a record from another replica — one consistent
//!    read of that object (a `list` by `metadata.name` without a resourceVersion, metadata
//!    only) decides: the same resourceVersion confirms the cache; another one means the cache
//!    is behind, and the object's watch is restarted (a relist) instead of rolling.
//! 2. **A stalled watch is noticed and replaced in bounded time.** Each watch request lasts
//!    at most [`WATCH_TIMEOUT_SECONDS`]; kube's watcher abandons one that delivers nothing for
//!    that long plus five seconds and watches again from the last resourceVersion it saw. The
//!    controller observes every stream's responses ([`observed_client`]): a stream that has
//!    delivered nothing — no event, no bookmark, no page, no clean end of a response — for
//!    [`stall_bound`] is stale; while any is, `/readyz` says not ready and nothing is patched.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http_body::{Body as HttpBody, Frame, SizeHint};
use tokio::sync::watch;
use tokio::time::Instant;

/// Versions of one object kept before its current one, to prove the cache newer than a record.
pub const PRIOR_VERSIONS: usize = 3;

/// The server-side timeout of each watch request, in seconds: a healthy stream ends and is
/// resumed at least this often, so its liveness never depends on bookmarks arriving.
pub const WATCH_TIMEOUT_SECONDS: u32 = 60;

/// How long after its last delivery kube's watcher abandons a watch beyond its timeout
/// (`kube-runtime`'s idle margin).
pub const KUBE_IDLE_MARGIN: Duration = Duration::from_secs(5);

/// What the abandoned watch's replacement is given to answer before the stream counts as stale.
pub const STALL_GRACE: Duration = Duration::from_secs(2);

/// How often the controller looks at every stream's last delivery.
pub const STALL_CHECK: Duration = Duration::from_secs(1);

/// How long one confirming read may take.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a stream may deliver nothing before it is stale: the watch timeout, kube's idle
/// margin (by then it has abandoned the silent request and watched again) and a grace for the
/// new request to answer.
pub fn stall_bound(watch_timeout_seconds: u32) -> Duration {
    Duration::from_secs(u64::from(watch_timeout_seconds)) + KUBE_IDLE_MARGIN + STALL_GRACE
}

/// A resourceVersion as a number, when it is one in canonical decimal form (etcd's revisions
/// are); `0` otherwise, which proves nothing. Only ever compared for equality.
pub fn version_number(resource_version: &str) -> u64 {
    let canonical = !resource_version.is_empty()
        && !resource_version.starts_with('0')
        && resource_version.bytes().all(|b| b.is_ascii_digit());
    if canonical {
        resource_version.parse().unwrap_or(0)
    } else {
        0
    }
}

/// The versions of one object the cache held before its current one, newest first (`0`:
/// none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PriorVersions([u64; PRIOR_VERSIONS]);

impl PriorVersions {
    /// These, after the cache moved on from `previous`.
    #[must_use]
    pub fn after(self, previous: u64) -> Self {
        if previous == 0 || self.0[0] == previous {
            return self;
        }
        let mut next = [0; PRIOR_VERSIONS];
        next[0] = previous;
        next[1..].copy_from_slice(&self.0[..PRIOR_VERSIONS - 1]);
        Self(next)
    }

    /// Whether `version` is one of them.
    pub fn contains(&self, version: u64) -> bool {
        version != 0 && self.0.contains(&version)
    }
}

/// What the cache knows of how current one object's entry is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Currency {
    /// Its resourceVersion ([`version_number`]).
    pub version: u64,
    /// The versions held before it.
    pub prior: PriorVersions,
    /// A consistent read returned this very version.
    pub confirmed: bool,
}

impl Currency {
    /// The currency of a fresh entry at `version`.
    pub fn at(version: u64) -> Self {
        Self {
            version,
            ..Self::default()
        }
    }

    /// The currency of the entry that replaces one with `self`'s currency at `version`.
    #[must_use]
    pub fn moved_to(self, version: u64) -> Self {
        if version != 0 && version == self.version {
            return self;
        }
        Self {
            version,
            prior: self.prior.after(self.version),
            confirmed: false,
        }
    }

    /// Whether the entry is proven at least as new as `recorded`, the version a record was
    /// written from.
    pub fn proves(&self, recorded: Option<u64>) -> bool {
        self.confirmed
            || recorded.is_some_and(|recorded| {
                recorded != 0 && (recorded == self.version || self.prior.contains(recorded))
            })
    }
}

/// The `rollsafe.dev/config-versions` value: `id=resourceVersion` per consumed object that
/// exists and has a numeric resourceVersion, in the record's order and with its ids.
pub fn versions_value<'a>(entries: impl Iterator<Item = (String, u64)> + 'a) -> String {
    let mut value = String::new();
    for (id, version) in entries.filter(|(_, version)| *version != 0) {
        if !value.is_empty() {
            value.push(',');
        }
        value.push_str(&id);
        value.push('=');
        value.push_str(&version.to_string());
    }
    value
}

/// A `rollsafe.dev/config-versions` value: object id → version (entries that do not parse
/// are left out: they prove nothing).
pub fn parse_versions(value: &str) -> BTreeMap<&str, u64> {
    value
        .split(',')
        .filter_map(|entry| entry.split_once('='))
        .map(|(id, version)| (id, version_number(version)))
        .filter(|(id, version)| !id.is_empty() && *version != 0)
        .collect()
}

/// When one watch stream last delivered something, shared between the client that carries
/// its requests and the controller that judges it.
#[derive(Debug, Clone)]
pub struct Activity(Arc<ActivityInner>);

#[derive(Debug)]
struct ActivityInner {
    base: Instant,
    /// Microseconds after `base` of the last delivery.
    last: AtomicU64,
    /// Watch responses dropped before their end (kube's watcher abandoning a silent one, or
    /// the controller restarting the stream).
    abandoned: AtomicU64,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new()
    }
}

impl Activity {
    /// Activity starting now.
    pub fn new() -> Self {
        Self(Arc::new(ActivityInner {
            base: Instant::now(),
            last: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
        }))
    }

    /// Something was delivered now.
    pub fn touch(&self) {
        let micros = u64::try_from(self.0.base.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.0.last.fetch_max(micros, Ordering::Relaxed);
    }

    /// How long nothing was delivered, at `now`.
    pub fn silent_for(&self, now: Instant) -> Duration {
        let last = self.0.base + Duration::from_micros(self.0.last.load(Ordering::Relaxed));
        now.saturating_duration_since(last)
    }

    /// Watch responses dropped before their end so far.
    pub fn abandoned(&self) -> u64 {
        self.0.abandoned.load(Ordering::Relaxed)
    }
}

/// `client`, with every successful response's deliveries noted in `activity`: each data frame
/// and the clean end of a body. An error status delivers nothing.
pub fn observed_client(client: &kube::Client, activity: &Activity) -> kube::Client {
    let namespace = client.default_namespace().to_owned();
    let client = client.clone();
    let activity = activity.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let client = client.clone();
        let activity = activity.clone();
        async move {
            let watch = is_watch(request.uri());
            let response = client.send(request).await?;
            let observed = response.status().is_success().then_some(activity);
            Ok::<_, kube::Error>(response.map(|body| ObservedBody {
                inner: body,
                activity: observed,
                watch,
                ended: false,
            }))
        }
    });
    kube::Client::new(service, namespace)
}

fn is_watch(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    })
}

/// A response body whose deliveries are noted.
struct ObservedBody {
    inner: kube::client::Body,
    /// `None` for an error response.
    activity: Option<Activity>,
    watch: bool,
    ended: bool,
}

impl HttpBody for ObservedBody {
    type Data = Bytes;
    type Error = kube::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if frame.data_ref().is_some_and(|data| !data.is_empty())
                    && let Some(activity) = &self.activity
                {
                    activity.touch();
                }
            }
            Poll::Ready(None) => {
                self.ended = true;
                if let Some(activity) = &self.activity {
                    activity.touch();
                }
            }
            Poll::Ready(Some(Err(_))) => self.ended = true,
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for ObservedBody {
    fn drop(&mut self) {
        if self.watch
            && !self.ended
            && let Some(activity) = &self.activity
        {
            activity.0.abandoned.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A stream that starts over from `make` whenever its [`Restart`] is pulled: the old stream is
/// dropped (its request with it) and the new one lists afresh.
pub fn restartable<T: Send + 'static>(
    make: impl Fn() -> BoxStream<'static, T> + Send + 'static,
) -> (BoxStream<'static, T>, Restart) {
    let (sender, receiver) = watch::channel(());
    let inner = make();
    let stream = futures::stream::unfold(
        (make, inner, receiver),
        |(make, mut inner, mut receiver)| async move {
            loop {
                tokio::select! {
                    biased;
                    changed = receiver.changed() => {
                        if changed.is_ok() {
                            inner = make();
                        } else {
                            // The controller is gone: finish what this stream delivers.
                            let item = inner.next().await?;
                            return Some((item, (make, inner, receiver)));
                        }
                    }
                    item = inner.next() => {
                        let item = item?;
                        return Some((item, (make, inner, receiver)));
                    }
                }
            }
        },
    );
    (stream.boxed(), Restart(sender))
}

/// Restarts one [`restartable`] stream.
#[derive(Debug)]
pub struct Restart(watch::Sender<()>);

impl Restart {
    /// Starts the stream over at its next poll.
    pub fn pull(&self) {
        self.0.send_replace(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_canonical_numbers_are_versions() {
        for (text, number) in [
            ("42", 42),
            ("1", 1),
            ("", 0),
            ("0", 0),
            ("042", 0),
            ("4a", 0),
            ("-4", 0),
            ("99999999999999999999999", 0),
        ] {
            assert_eq!(version_number(text), number, "{text:?}");
        }
    }

    #[test]
    fn what_proves_a_cache_entry_at_least_as_new_as_a_record() {
        // The entry went 10 → 11 → 12 → 13 → 14 in this cache.
        let mut currency = Currency::at(10);
        for version in [11, 12, 13, 14] {
            currency = currency.moved_to(version);
        }
        let cases = [
            (
                Some(14),
                true,
                "the record was written from this very version",
            ),
            (
                Some(13),
                true,
                "the cache held the recorded version, then moved on",
            ),
            (Some(11), true, "the oldest version still remembered"),
            (Some(10), false, "forgotten: a read decides"),
            (
                Some(15),
                false,
                "the record is newer than the cache: behind",
            ),
            (None, false, "no recorded version (an older record)"),
            (Some(0), false, "a non-numeric version proves nothing"),
        ];
        for (recorded, proven, why) in cases {
            assert_eq!(currency.proves(recorded), proven, "{why}");
        }
        let confirmed = Currency {
            confirmed: true,
            ..currency
        };
        assert!(confirmed.proves(Some(15)), "a consistent read returned it");
        assert!(
            !confirmed.moved_to(15).confirmed,
            "a new version is not confirmed"
        );
        assert_eq!(
            confirmed.moved_to(14),
            confirmed,
            "the same version again (a relist) keeps everything"
        );
    }

    #[test]
    fn versions_round_trip_and_skip_what_proves_nothing() {
        let value = versions_value(
            [
                ("0123456789ab".to_owned(), 17),
                ("123456789abc".to_owned(), 0),
                ("23456789abcd".to_owned(), 9),
            ]
            .into_iter(),
        );
        assert_eq!(value, "0123456789ab=17,23456789abcd=9");
        assert_eq!(
            parse_versions(&value),
            BTreeMap::from([("0123456789ab", 17), ("23456789abcd", 9)])
        );
        assert_eq!(
            parse_versions("x=1,y=,=3,z=07,w"),
            BTreeMap::from([("x", 1)])
        );
        assert!(parse_versions("").is_empty());
    }

    #[test]
    fn the_stall_bound_follows_the_watch_timeout() {
        assert_eq!(stall_bound(60), Duration::from_secs(67));
        assert_eq!(stall_bound(1), Duration::from_secs(8));
    }

    #[test]
    fn watch_requests_are_told_apart() {
        for (uri, watch) in [
            ("/api/v1/secrets?watch=true&resourceVersion=5", true),
            ("/api/v1/secrets?allowWatchBookmarks=true&watch=1", true),
            ("/api/v1/secrets?limit=500", false),
            ("/api/v1/secrets", false),
            ("/api/v1/secrets?watch=false", false),
        ] {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(is_watch(&uri), watch, "{uri}");
        }
    }

    #[tokio::test]
    async fn a_restarted_stream_starts_over() {
        let made = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&made);
        let (mut stream, restart) = restartable(move || {
            let generation = counter.fetch_add(1, Ordering::SeqCst);
            futures::stream::iter([generation * 10, generation * 10 + 1])
                .chain(futures::stream::pending())
                .boxed()
        });
        assert_eq!(stream.next().await, Some(0));
        restart.pull();
        assert_eq!(
            stream.next().await,
            Some(10),
            "the new stream, from its start"
        );
        assert_eq!(stream.next().await, Some(11));
        assert_eq!(made.load(Ordering::SeqCst), 2);
    }
}
