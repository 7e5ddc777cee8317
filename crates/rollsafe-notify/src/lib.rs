//! Outcome notifications of `rollsafe watch` to chat webhooks.
//!
//! The controller builds a [`Notification`] for each outcome it announces (the same moments it
//! publishes a Kubernetes Event) and hands it to [`Notifier::notify`], which never waits. Each
//! [`Sink`] — a redacted [`WebhookUrl`] and a [`Format`] — gets its own bounded queue and
//! delivery task ([`notifier`]); the bodies are built by [`payload()`]. Webhook URLs are
//! credentials: they are shown as `scheme://host[:port]/…` everywhere but in the request
//! itself. See docs/notifications.md.

#![warn(missing_docs, unreachable_pub)]

pub mod file;
pub mod format;
pub mod metrics;
pub mod notification;
pub mod notifier;
pub mod payload;
mod transport;
pub mod url;

pub use file::{MAX_WEBHOOK_FILE_LEN, WebhookFileError, read_webhook_file};
pub use format::{Format, FormatError};
pub use metrics::{DeliveryResult, MessageLabels, NotifyMetrics};
pub use notification::{Cause, Notification, Outcome};
pub use notifier::{
    NOTIFY_ATTEMPTS, NOTIFY_BACKOFF, NOTIFY_QUEUE, NOTIFY_RETRY_AFTER_MAX, NOTIFY_TIMEOUT,
    Notifier, Sink, Timing,
};
pub use payload::payload;
pub use url::{MAX_WEBHOOK_URL_LEN, WebhookUrl, WebhookUrlError};
