//! Prometheus metrics of delivery. Every label value is a static string.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::format::Format;

/// How the delivery of one message to one sink ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryResult {
    /// The sink answered 2xx.
    Sent,
    /// Every attempt failed, or the sink refused the message (a 4xx other than 429).
    Failed,
    /// The sink's queue was full: never attempted.
    Dropped,
}

impl DeliveryResult {
    /// `sent`, `failed` or `dropped`: the `result` label.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryResult::Sent => "sent",
            DeliveryResult::Failed => "failed",
            DeliveryResult::Dropped => "dropped",
        }
    }
}

/// Labels of a message's delivery.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MessageLabels {
    /// The sink's format: `json`, `slack`, `teams` or `googlechat`.
    pub format: &'static str,
    /// `sent`, `failed` or `dropped`.
    pub result: &'static str,
}

/// The notifier's metrics. Clones share the same counters.
#[derive(Debug, Clone, Default)]
pub struct NotifyMetrics {
    /// Messages by sink format and result (one per message and sink).
    pub messages: Family<MessageLabels, Counter>,
    /// Messages waiting in the sinks' queues.
    pub queue_depth: Gauge,
}

impl NotifyMetrics {
    /// Registers every metric under `rollsafe_notify_`: `rollsafe_notify_messages_total` and
    /// `rollsafe_notify_queue_depth`.
    pub fn register(&self, registry: &mut Registry) {
        let registry = registry.sub_registry_with_prefix("rollsafe_notify");
        registry.register(
            "messages",
            "Notification messages by sink format and result (sent, failed, dropped)",
            self.messages.clone(),
        );
        registry.register(
            "queue_depth",
            "Notification messages waiting in the sinks' queues",
            self.queue_depth.clone(),
        );
    }

    /// Counts one message's delivery to one sink.
    pub fn count(&self, format: Format, result: DeliveryResult) {
        self.messages
            .get_or_create(&MessageLabels {
                format: format.as_str(),
                result: result.as_str(),
            })
            .inc();
    }

    /// The messages counted so far for `format` and `result`.
    pub fn total(&self, format: Format, result: DeliveryResult) -> u64 {
        self.messages
            .get_or_create(&MessageLabels {
                format: format.as_str(),
                result: result.as_str(),
            })
            .get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_names() {
        let metrics = NotifyMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.count(Format::Slack, DeliveryResult::Sent);
        metrics.count(Format::Json, DeliveryResult::Dropped);
        metrics.count(Format::Json, DeliveryResult::Dropped);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for expected in [
            "rollsafe_notify_messages_total{format=\"slack\",result=\"sent\"} 1",
            "rollsafe_notify_messages_total{format=\"json\",result=\"dropped\"} 2",
            "rollsafe_notify_queue_depth 0",
        ] {
            assert!(text.contains(expected), "{expected} in\n{text}");
        }
        assert_eq!(metrics.total(Format::Json, DeliveryResult::Dropped), 2);
    }
}
