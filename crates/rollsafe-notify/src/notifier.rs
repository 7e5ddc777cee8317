//! Delivery: a bounded queue and a task per sink, bounded retries.
//!
//! [`Notifier::notify`] never waits: it puts the message into each sink's queue
//! ([`NOTIFY_QUEUE`] each) and returns; a full queue drops the message for that sink, counted
//! `dropped` and logged. Each sink's task sends its messages in order, each attempt within
//! [`NOTIFY_TIMEOUT`], at most [`NOTIFY_ATTEMPTS`] attempts, waiting [`NOTIFY_BACKOFF`]
//! (doubling) between them — or the sink's `Retry-After`, capped at [`NOTIFY_RETRY_AFTER_MAX`].
//! Only transport errors, timeouts, 429 and 5xx are tried again. Sinks do not wait for each
//! other: a sink that never answers delays only its own messages.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::format::Format;
use crate::metrics::{DeliveryResult, NotifyMetrics};
use crate::notification::Notification;
use crate::payload::payload;
use crate::transport::{HttpClient, client, post};
use crate::url::WebhookUrl;

/// Messages waiting per sink; a further one is dropped.
pub const NOTIFY_QUEUE: usize = 256;
/// The time limit of one attempt (connecting, TLS, request and status).
pub const NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Attempts per message and sink.
pub const NOTIFY_ATTEMPTS: u32 = 3;
/// The wait after the first failed attempt; it doubles after each further one.
pub const NOTIFY_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait a sink's `Retry-After` obtains.
pub const NOTIFY_RETRY_AFTER_MAX: Duration = Duration::from_secs(30);

/// Where messages go and in what shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sink {
    /// The webhook.
    pub url: WebhookUrl,
    /// The body's shape.
    pub format: Format,
}

/// The timings of delivery: [`Timing::default`] is the documented one ([`NOTIFY_TIMEOUT`],
/// [`NOTIFY_BACKOFF`], [`NOTIFY_RETRY_AFTER_MAX`]); tests shorten them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// The time limit of one attempt.
    pub timeout: Duration,
    /// The wait after the first failed attempt, doubling.
    pub backoff: Duration,
    /// The cap on a sink's `Retry-After`.
    pub retry_after_max: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            timeout: NOTIFY_TIMEOUT,
            backoff: NOTIFY_BACKOFF,
            retry_after_max: NOTIFY_RETRY_AFTER_MAX,
        }
    }
}

/// A handle to the delivery tasks. Clones are cheap and share the queues; the tasks end once
/// every handle is dropped and their queues are empty.
#[derive(Debug, Clone)]
pub struct Notifier {
    queues: Arc<[SinkQueue]>,
    metrics: NotifyMetrics,
}

/// The sending end of one sink's queue.
#[derive(Debug)]
struct SinkQueue {
    /// `scheme://host[:port]/…`.
    redacted: String,
    format: Format,
    sender: mpsc::Sender<Arc<Notification>>,
}

impl Notifier {
    /// Starts one delivery task per sink on the current tokio runtime, with the documented
    /// timings. No sinks: [`Notifier::notify`] does nothing.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start(sinks: Vec<Sink>, metrics: NotifyMetrics) -> Notifier {
        Notifier::start_with(sinks, metrics, Timing::default())
    }

    /// [`Notifier::start`] with other timings.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn start_with(sinks: Vec<Sink>, metrics: NotifyMetrics, timing: Timing) -> Notifier {
        let mut queues = Vec::with_capacity(sinks.len());
        if !sinks.is_empty() {
            let http = client();
            for sink in sinks {
                let (sender, receiver) = mpsc::channel(NOTIFY_QUEUE);
                queues.push(SinkQueue {
                    redacted: sink.url.redacted().to_owned(),
                    format: sink.format,
                    sender,
                });
                tokio::spawn(deliver_all(
                    sink,
                    receiver,
                    http.clone(),
                    metrics.clone(),
                    timing,
                ));
            }
        }
        Notifier {
            queues: queues.into(),
            metrics,
        }
    }

    /// Queues `n` for every sink and returns at once. A sink whose queue is full does not get
    /// it: counted `dropped`, logged at `warn` (`queue_full`).
    pub fn notify(&self, n: Notification) {
        if self.queues.is_empty() {
            return;
        }
        let n = Arc::new(n);
        for queue in self.queues.iter() {
            self.metrics.queue_depth.inc();
            if let Err(err) = queue.sender.try_send(Arc::clone(&n)) {
                self.metrics.queue_depth.dec();
                self.metrics.count(queue.format, DeliveryResult::Dropped);
                let (code, why) = match err {
                    mpsc::error::TrySendError::Full(_) => {
                        ("queue_full", "the sink's queue is full")
                    }
                    mpsc::error::TrySendError::Closed(_) => {
                        ("notifier_stopped", "the sink's delivery task has ended")
                    }
                };
                warn!(
                    code,
                    sink = %queue.redacted,
                    format = queue.format.as_str(),
                    outcome = n.outcome.as_str(),
                    namespace = %n.namespace,
                    workload = %n.workload,
                    "notification dropped: {why}"
                );
            }
        }
    }

    /// How many sinks messages go to.
    pub fn sinks(&self) -> usize {
        self.queues.len()
    }
}

/// One sink's task: its messages in order, until every [`Notifier`] is dropped.
async fn deliver_all(
    sink: Sink,
    mut receiver: mpsc::Receiver<Arc<Notification>>,
    http: HttpClient,
    metrics: NotifyMetrics,
    timing: Timing,
) {
    while let Some(n) = receiver.recv().await {
        metrics.queue_depth.dec();
        let result = deliver(&http, &sink, &n, timing).await;
        metrics.count(sink.format, result);
    }
}

/// One message to one sink, with the retries the rules allow.
async fn deliver(
    http: &HttpClient,
    sink: &Sink,
    n: &Notification,
    timing: Timing,
) -> DeliveryResult {
    let body = match serde_json::to_vec(&payload(sink.format, n)) {
        Ok(body) => Bytes::from(body),
        Err(_) => {
            warn!(
                code = "encode",
                sink = %sink.url,
                format = sink.format.as_str(),
                outcome = n.outcome.as_str(),
                "notification not delivered: its body could not be encoded"
            );
            return DeliveryResult::Failed;
        }
    };
    let mut backoff = timing.backoff;
    for attempt in 1..=NOTIFY_ATTEMPTS {
        let err = match post(http, &sink.url, body.clone(), timing.timeout).await {
            Ok(status) => {
                debug!(
                    sink = %sink.url,
                    format = sink.format.as_str(),
                    outcome = n.outcome.as_str(),
                    status = status.as_u16(),
                    attempt,
                    "notification delivered"
                );
                return DeliveryResult::Sent;
            }
            Err(err) => err,
        };
        if !err.retryable() {
            warn!(
                code = err.code(),
                sink = %sink.url,
                format = sink.format.as_str(),
                outcome = n.outcome.as_str(),
                status = err.status(),
                attempt,
                "notification refused by the webhook, not retried"
            );
            return DeliveryResult::Failed;
        }
        if attempt == NOTIFY_ATTEMPTS {
            warn!(
                code = err.code(),
                sink = %sink.url,
                format = sink.format.as_str(),
                outcome = n.outcome.as_str(),
                status = err.status(),
                attempts = attempt,
                "notification not delivered: every attempt failed"
            );
            return DeliveryResult::Failed;
        }
        let wait = err
            .retry_after()
            .map_or(backoff, |asked| asked.min(timing.retry_after_max));
        debug!(
            code = err.code(),
            sink = %sink.url,
            format = sink.format.as_str(),
            status = err.status(),
            attempt,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            "notification attempt failed, trying again"
        );
        tokio::time::sleep(wait).await;
        backoff = backoff.saturating_mul(2);
    }
    DeliveryResult::Failed
}
