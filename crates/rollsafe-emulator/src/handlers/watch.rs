//! WATCH: one JSON event per line, initial events, resumption from the history, bookmarks, and
//! the 410 ERROR event for a resourceVersion older than the history; a stall fault withholds
//! all of it until the fault is removed.

use std::convert::Infallible;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::faults::Release;
use crate::handlers::{Call, list_options_invalid, metadata, selectors};
use crate::state::Body;
use rollsafe_emulator_registry::store::{Event, EventType};
use rollsafe_emulator_types::query::{FieldSelector, LabelSelector};
use rollsafe_emulator_types::resources::{ResId, View, def};
use rollsafe_emulator_types::status::{self, FieldCause, StatusError};

/// Server-side watch timeout when the client gives none (the real minimum request timeout).
pub(crate) const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest a watch stays open; a larger `timeoutSeconds` is cut to it (a deadline must
/// stay representable: `timeoutSeconds=18446744073709551615` once crashed the watch task).
pub(crate) const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(366 * 24 * 3600);
/// Lines buffered per watch before the writer waits for the client.
pub(crate) const WATCH_BUFFER: usize = 256;

struct WatchSpec {
    res: ResId,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmarks: bool,
    initial_end_bookmark: bool,
    timeout: Duration,
    bookmark_interval: Duration,
    api_version: String,
    kind: &'static str,
    /// Set when the watched resource is a view of the stored one.
    view: Option<&'static View>,
    /// Set (to the `meta.k8s.io` version) when the client asked for metadata only.
    metadata_only: Option<&'static str>,
}

impl WatchSpec {
    /// Whether a stored object passes the selectors.
    fn passes(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// The line this watch sends for a change, if any (the real watch cache's
    /// `convertToWatchEvent`): an object that starts matching the selectors is ADDED, one that
    /// stops matching is DELETED (its previous state, at the change's resourceVersion).
    fn render(&self, e: &Event) -> Option<Bytes> {
        if e.res != self.res || self.namespace.as_deref().is_some_and(|n| n != e.namespace) {
            return None;
        }
        let now = e.kind != EventType::Deleted && self.passes(&e.object);
        let before = match e.kind {
            EventType::Deleted => self.passes(&e.object),
            _ => e.prev.as_deref().is_some_and(|p| self.passes(p)),
        };
        match (e.kind, now, before) {
            (EventType::Deleted, _, true) => Some(self.line("DELETED", &e.object)),
            (_, true, false) => Some(self.line("ADDED", &e.object)),
            (_, true, true) => Some(self.line("MODIFIED", &e.object)),
            (EventType::Modified, false, true) => {
                let mut last = e.prev.as_deref().cloned().unwrap_or(Value::Null);
                if let Some(meta) = last.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.insert("resourceVersion".into(), json!(e.rv.to_string()));
                }
                Some(self.line("DELETED", &last))
            }
            _ => None,
        }
    }

    /// A watch line for a stored object, in the watched resource's form.
    fn line(&self, kind: &str, object: &Value) -> Bytes {
        let shown = match self.view {
            Some(view) => std::borrow::Cow::Owned((view.to_view)(object)),
            None => std::borrow::Cow::Borrowed(object),
        };
        match self.metadata_only {
            Some(version) => line(kind, &metadata::partial(&shown, version)),
            None => line(kind, &shown),
        }
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            &json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}),
        )
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut buf = Vec::with_capacity(512);
    let _ = write!(buf, "{{\"type\":\"{kind}\",\"object\":");
    let _ = serde_json::to_writer(&mut buf, object);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

fn too_old_line(requested: u64, oldest: u64) -> Bytes {
    let status = status::status_body(
        410,
        "Expired",
        &format!("too old resource version: {requested} ({oldest})"),
        None,
    );
    line("ERROR", &status)
}

pub(crate) fn watch(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let q = c.query;
    let (labels, fields) = selectors(c)?;
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true" || v == "1");
    // The `WatchList` feature gate: beta and on in 1.32, off again in 1.33, the advertised
    // release (on from 1.34); `EmulatorBuilder::watch_list` turns it on. Off, `sendInitialEvents`
    // is refused with 422 as the real validation does.
    if send_initial.is_some() && !c.shared.watch_list {
        return Err(list_options_invalid(&[FieldCause::forbidden(
            "sendInitialEvents",
            "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        )]));
    }
    if send_initial.is_some() && q.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(list_options_invalid(&[FieldCause::invalid(
            "sendInitialEvents",
            "",
            "sendInitialEvents is forbidden unless resourceVersionMatch is NotOlderThan",
        )]));
    }
    let timeout = q
        .non_empty("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s).min(MAX_WATCH_TIMEOUT))
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let rv_param = q.non_empty("resourceVersion");
    let since =
        match rv_param {
            Some(r) if r != "0" => Some(r.parse::<u64>().map_err(|_| {
                StatusError::bad_request(&format!("invalid resource version: {r:?}"))
            })?),
            _ => None,
        };
    let initial = send_initial.unwrap_or(since.is_none());
    let metadata_only = metadata::wanted(&c.accept, metadata::OBJECT);
    let spec = WatchSpec {
        res: c.stored_res(),
        namespace: c.info.namespace.clone(),
        labels,
        fields,
        bookmarks,
        initial_end_bookmark: send_initial == Some(true) && bookmarks,
        timeout,
        bookmark_interval: c.shared.bookmark_interval,
        api_version: metadata_only.map_or_else(|| d.api_version(), str::to_owned),
        kind: if metadata_only.is_some() {
            metadata::OBJECT
        } else {
            d.kind
        },
        view: d.view,
        metadata_only,
    };
    let store = c.shared.store();
    let mut initial_lines = Vec::new();
    let (rx, replay, too_old, start_rv) = if initial {
        for (_, obj) in store.range(spec.res, c.info.namespace.as_deref(), None) {
            if spec.passes(obj) {
                initial_lines.push(spec.line("ADDED", obj));
            }
        }
        (store.subscribe(), Vec::new(), None, store.current_rv())
    } else {
        let since = since.unwrap_or(0);
        match store.watch_from(since) {
            (rx, Some(replay)) => (rx, replay, None, store.current_rv().max(since)),
            (rx, None) => (
                rx,
                Vec::new(),
                Some((since, store.history_floor().saturating_sub(1))),
                store.current_rv(),
            ),
        }
    };
    drop(store);
    let (tx, mut body_rx) = mpsc::channel::<Bytes>(WATCH_BUFFER);
    let shutdown = c.shared.shutdown.clone();
    let stall = c.stall.clone();
    tokio::spawn(async move {
        run_watch(
            tx,
            rx,
            spec,
            initial_lines,
            replay,
            too_old,
            start_rv,
            shutdown,
            stall,
        )
        .await;
    });
    let stream = futures::stream::poll_fn(move |cx| body_rx.poll_recv(cx)).map_ok_frames();
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    resp.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

type FrameStream<S> = futures::stream::Map<S, fn(Bytes) -> Result<Frame<Bytes>, Infallible>>;

trait MapOkFrames: futures::Stream<Item = Bytes> + Sized {
    fn map_ok_frames(self) -> FrameStream<Self> {
        futures::StreamExt::map(self, |b| Ok(Frame::data(b)))
    }
}

impl<S: futures::Stream<Item = Bytes>> MapOkFrames for S {}

#[expect(
    clippy::too_many_arguments,
    reason = "a watch stream takes its request's parts one by one"
)]
async fn run_watch(
    tx: mpsc::Sender<Bytes>,
    mut rx: broadcast::Receiver<Arc<Event>>,
    spec: WatchSpec,
    initial: Vec<Bytes>,
    replay: Vec<Arc<Event>>,
    too_old: Option<(u64, u64)>,
    mut last_rv: u64,
    shutdown: tokio::sync::watch::Receiver<bool>,
    stall: Option<Release>,
) {
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let stalled = stall.is_some();
    if let Some(release) = stall {
        // Nothing at all until the fault is removed, not even the end at the deadline; a
        // client that hangs up, or shutdown, still ends the watch.
        tokio::select! {
            () = release.wait() => {}
            () = tx.closed() => return,
            () = crate::state::shutdown_signal(shutdown.clone()) => return,
        }
    }
    if let Some((requested, oldest)) = too_old {
        let _ = tx.send(too_old_line(requested, oldest)).await;
        return;
    }
    for l in initial {
        if tx.send(l).await.is_err() {
            return;
        }
    }
    if spec.initial_end_bookmark && tx.send(spec.bookmark(last_rv, true)).await.is_err() {
        return;
    }
    for e in replay {
        last_rv = last_rv.max(e.rv);
        if let Some(line) = spec.render(&e)
            && tx.send(line).await.is_err()
        {
            return;
        }
    }
    if stalled {
        // The live events withheld meanwhile come first, whether or not the deadline passed.
        loop {
            match rx.try_recv() {
                Ok(e) => {
                    if !live_event(&tx, &spec, &e, &mut last_rv).await {
                        return;
                    }
                }
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Lagged(_)) => {
                    let _ = tx.send(too_old_line(last_rv, last_rv + 1)).await;
                    return;
                }
                Err(broadcast::error::TryRecvError::Closed) => return,
            }
        }
    }
    let mut ticker = tokio::time::interval(spec.bookmark_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            received = rx.recv() => match received {
                Ok(e) => {
                    if !live_event(&tx, &spec, &e, &mut last_rv).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let _ = tx.send(too_old_line(last_rv, last_rv + 1)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if spec.bookmarks => {
                if tx.send(spec.bookmark(last_rv, false)).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = crate::state::shutdown_signal(shutdown.clone()) => return,
        }
    }
}

/// Sends the line a live event makes, if it is newer than `last_rv`; false once the client is
/// gone.
async fn live_event(
    tx: &mpsc::Sender<Bytes>,
    spec: &WatchSpec,
    e: &Event,
    last_rv: &mut u64,
) -> bool {
    if e.rv <= *last_rv {
        return true;
    }
    *last_rv = e.rv;
    match spec.render(e) {
        Some(line) => tx.send(line).await.is_ok(),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::faults::{Fault, FaultAction, FaultTable};
    use rollsafe_emulator_registry::store::EventType;

    fn spec(timeout: Duration) -> WatchSpec {
        WatchSpec {
            res: 0,
            namespace: None,
            labels: LabelSelector::default(),
            fields: FieldSelector::default(),
            bookmarks: true,
            initial_end_bookmark: false,
            timeout,
            bookmark_interval: Duration::from_millis(10),
            api_version: "v1".into(),
            kind: "Secret",
            view: None,
            metadata_only: None,
        }
    }

    fn added(rv: u64) -> Arc<Event> {
        Arc::new(Event {
            rv,
            res: 0,
            namespace: "ns".into(),
            kind: EventType::Added,
            object: Arc::new(json!({"metadata": {"name": format!("s{rv}"), "namespace": "ns"}})),
            prev: None,
        })
    }

    /// A stall fault's table (kept to release it) and the release of one stalled watch.
    fn stalled() -> (FaultTable, u64, Option<Release>) {
        let mut table = FaultTable::default();
        let id = table.add(Fault::on("watch", "*").then(FaultAction::Stall));
        let release = table
            .hit("watch", "secrets", "ns", "", "u")
            .pop()
            .and_then(|f| f.release);
        assert!(release.is_some());
        (table, id, release)
    }

    /// The next line within `wait`, as text (`None` when none came or the stream ended).
    async fn next(body: &mut mpsc::Receiver<Bytes>, wait: Duration) -> Option<Option<String>> {
        tokio::time::timeout(wait, body.recv())
            .await
            .ok()
            .map(|l| l.map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// A watch stalled from its start: its fault table (kept to release it), the fault's id,
    /// the event feed, the shutdown switch, the body and the task.
    struct StalledWatch {
        table: FaultTable,
        id: u64,
        events: broadcast::Sender<Arc<Event>>,
        shutdown: tokio::sync::watch::Sender<bool>,
        body: mpsc::Receiver<Bytes>,
        task: tokio::task::JoinHandle<()>,
    }

    /// Starts a stalled watch with `capacity` events of backlog, the server-side `timeout` and
    /// `initial` lines.
    fn start_stalled(capacity: usize, timeout: Duration, initial: Vec<Bytes>) -> StalledWatch {
        let (table, id, release) = stalled();
        let (events, rx) = broadcast::channel(capacity);
        let (shutdown, shutdown_rx) = tokio::sync::watch::channel(false);
        let (tx, body) = mpsc::channel(WATCH_BUFFER);
        let task = tokio::spawn(run_watch(
            tx,
            rx,
            spec(timeout),
            initial,
            Vec::new(),
            None,
            1,
            shutdown_rx,
            release,
        ));
        StalledWatch {
            table,
            id,
            events,
            shutdown,
            body,
            task,
        }
    }

    const LONG: Duration = Duration::from_secs(5);
    const QUIET: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_stalled_watch_withholds_everything_past_its_deadline_then_delivers_it_in_order() {
        let StalledWatch {
            mut table,
            id,
            events,
            mut body,
            task,
            shutdown: _shutdown,
        } = start_stalled(
            16,
            Duration::from_millis(50),
            vec![Bytes::from_static(b"initial\n")],
        );
        let _ = events.send(added(2));
        // Nothing: no initial line, no event, no bookmark, no end at the 50 ms deadline.
        assert_eq!(next(&mut body, QUIET).await, None);
        assert!(!task.is_finished());
        assert!(table.remove(id));
        assert_eq!(next(&mut body, LONG).await, Some(Some("initial\n".into())));
        let live = next(&mut body, LONG).await.flatten().unwrap_or_default();
        assert!(live.starts_with(r#"{"type":"ADDED""#), "{live}");
        assert!(live.contains(r#""name":"s2""#), "{live}");
        // The deadline passed meanwhile: the stream ends.
        assert_eq!(next(&mut body, LONG).await, Some(None));
        assert!(tokio::time::timeout(LONG, task).await.is_ok());
    }

    #[tokio::test]
    async fn a_stalled_watch_that_lagged_ends_with_the_too_old_error() {
        let StalledWatch {
            mut table,
            id,
            events,
            mut body,
            task,
            shutdown: _shutdown,
        } = start_stalled(1, LONG, Vec::new());
        for rv in 2..5 {
            let _ = events.send(added(rv));
        }
        assert_eq!(next(&mut body, QUIET).await, None);
        table.clear();
        let error = next(&mut body, LONG).await.flatten().unwrap_or_default();
        assert!(error.starts_with(r#"{"type":"ERROR""#), "{error}");
        assert!(error.contains("too old resource version: 1 (2)"), "{error}");
        assert_eq!(next(&mut body, LONG).await, Some(None));
        assert!(tokio::time::timeout(LONG, task).await.is_ok());
        assert!(!table.remove(id));
    }

    #[tokio::test]
    async fn a_client_leaving_a_stalled_watch_ends_its_task() {
        let StalledWatch { body, task, .. } =
            start_stalled(16, LONG, vec![Bytes::from_static(b"initial\n")]);
        drop(body);
        assert!(
            tokio::time::timeout(LONG, task).await.is_ok(),
            "the fault is still registered, yet the task ends"
        );
    }

    #[tokio::test]
    async fn shutdown_ends_a_stalled_watch() {
        let StalledWatch {
            table: _table,
            events: _events,
            shutdown: shutdown_tx,
            mut body,
            task,
            ..
        } = start_stalled(16, LONG, vec![Bytes::from_static(b"initial\n")]);
        let _ = shutdown_tx.send(true);
        assert!(tokio::time::timeout(LONG, task).await.is_ok());
        assert_eq!(next(&mut body, LONG).await, Some(None), "nothing was sent");
    }
}
