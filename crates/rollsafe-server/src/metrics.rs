//! Prometheus metrics, served on the admin listener. Every label value is a static string.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use rollsafe_core::contract::RestartResult;
use rollsafe_core::workload::WorkloadKind;
use rollsafe_kube::{PatchOutcome, RunObserver};

/// Labels of a served request.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The route: `restart`, `config`, `healthz`, `readyz` or `other`.
    pub route: &'static str,
    /// The HTTP status code.
    pub status: &'static str,
}

/// Labels of a restart result.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `requested`, `no_targets`, `partial` or `failed`.
    pub status: &'static str,
}

/// Labels of an error response: the [`crate::error::ApiError::code`].
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    /// The static error code.
    pub code: &'static str,
}

/// Labels of an inventory or a patch latency.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `Deployment`, `StatefulSet` or `DaemonSet`.
    pub kind: &'static str,
}

/// Latency buckets: 5 ms to about 80 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

type LatencyFamily = Family<KindLabels, Histogram, fn() -> Histogram>;

/// Labels of one patch outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PatchLabels {
    /// `acknowledged` or a failure code.
    pub code: &'static str,
}

/// The server's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    requests: Family<RequestLabels, Counter>,
    results: Family<ResultLabels, Counter>,
    patches: Family<PatchLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    run_seconds: Histogram,
    inventory_seconds: LatencyFamily,
    patch_seconds: LatencyFamily,
    patch_timeouts: Counter,
    shed: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("rollsafe");
        let requests = Family::<RequestLabels, Counter>::default();
        let results = Family::<ResultLabels, Counter>::default();
        let patches = Family::<PatchLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let run_seconds = latency_histogram();
        let inventory_seconds = LatencyFamily::new_with_constructor(latency_histogram);
        let patch_seconds = LatencyFamily::new_with_constructor(latency_histogram);
        let patch_timeouts = Counter::default();
        registry.register(
            "http_errors",
            "Error responses, by static error code",
            errors.clone(),
        );
        registry.register_with_unit(
            "restart_run_duration",
            "Restart Consumers runs, from the start of discovery to the result",
            Unit::Seconds,
            run_seconds.clone(),
        );
        registry.register_with_unit(
            "restart_inventory_duration",
            "Inventories of one workload kind, all pages, by kind",
            Unit::Seconds,
            inventory_seconds.clone(),
        );
        registry.register_with_unit(
            "restart_patch_duration",
            "Restart patches, from sending to the answer (or the timeout), by kind",
            Unit::Seconds,
            patch_seconds.clone(),
        );
        registry.register(
            "restart_patch_timeouts",
            "Restart patches without an answer within the patch timeout (counted within unconfirmed)",
            patch_timeouts.clone(),
        );
        registry.register(
            "http_requests",
            "HTTP requests served, by route and status",
            requests.clone(),
        );
        registry.register(
            "restart_results",
            "Restart Consumers results, by status",
            results.clone(),
        );
        registry.register(
            "restart_patches",
            "Workload outcomes of Restart Consumers, by code",
            patches.clone(),
        );
        let shed = Counter::default();
        registry.register(
            "restart_shed",
            "Restart requests refused with 429 because the concurrent-run limit was reached",
            shed.clone(),
        );
        registry.register(
            "audit_write_failures",
            "Audit records the audit file could not take (write or sync failed)",
            crate::audit::WRITE_FAILURES.clone(),
        );
        registry.register(
            "audit_durable_wait_seconds",
            "How long an audit record waited to be written and synced to the audit file",
            crate::audit::DURABLE_WAIT.clone(),
        );
        registry.register(
            "audit_sync_seconds",
            "How long one batch of audit records took to write and fdatasync",
            crate::audit::SYNC_DURATION.clone(),
        );
        registry.register(
            "audit_stream_dropped",
            "Audit record copies not written to stdout because it was not being read",
            crate::audit::STREAM_COPIES_DROPPED.clone(),
        );
        registry.register(
            "log_lines_dropped",
            "Log lines dropped because their stream was not being read",
            crate::output::LOG_LINES_DROPPED.clone(),
        );
        Self {
            registry: Arc::new(registry),
            requests,
            results,
            patches,
            errors,
            run_seconds,
            inventory_seconds,
            patch_seconds,
            patch_timeouts,
            shed,
        }
    }

    /// Counts a served request.
    pub fn request(&self, route: &'static str, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route,
                status: status_label(status),
            })
            .inc();
    }

    /// Counts an error response by its static code.
    pub fn error(&self, code: &'static str) {
        self.errors.get_or_create(&ErrorLabels { code }).inc();
    }

    /// Counts a restart result and its workload outcomes.
    pub fn result(&self, result: &RestartResult) {
        self.results
            .get_or_create(&ResultLabels {
                status: result.status.as_str(),
            })
            .inc();
        self.patches
            .get_or_create(&PatchLabels {
                code: "acknowledged",
            })
            .inc_by(result.requested.len() as u64);
        for failure in &result.failures {
            self.patches
                .get_or_create(&PatchLabels {
                    code: failure.code.as_str(),
                })
                .inc();
        }
    }

    /// Counts a restart request refused by the concurrent-run limit.
    pub fn restart_shed(&self) {
        self.shed.inc();
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

impl RunObserver for Metrics {
    fn inventory(&self, kind: WorkloadKind, elapsed: std::time::Duration, _complete: bool) {
        self.inventory_seconds
            .get_or_create(&KindLabels {
                kind: kind.as_str(),
            })
            .observe(elapsed.as_secs_f64());
    }

    fn patch(&self, kind: WorkloadKind, elapsed: std::time::Duration, outcome: PatchOutcome) {
        self.patch_seconds
            .get_or_create(&KindLabels {
                kind: kind.as_str(),
            })
            .observe(elapsed.as_secs_f64());
        if outcome == PatchOutcome::TimedOut {
            self.patch_timeouts.inc();
        }
    }

    fn run(&self, elapsed: std::time::Duration) {
        self.run_seconds.observe(elapsed.as_secs_f64());
    }
}

fn status_label(status: u16) -> &'static str {
    match status {
        200 => "200",
        207 => "207",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        405 => "405",
        413 => "413",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::contract::RestartOutcome;
    use rollsafe_core::failure::Failure;
    use rollsafe_core::workload::WorkloadKind;

    #[test]
    fn exposition() {
        let metrics = Metrics::new();
        metrics.request("restart", 207);
        metrics.request("restart", 999);
        let mut outcome = RestartOutcome::new();
        outcome.acknowledged(WorkloadKind::Deployment, "a");
        outcome.failed(WorkloadKind::Deployment, "b", Failure::from_status(422));
        metrics.result(&outcome.into_result());
        let text = metrics.encode();
        assert!(
            text.contains(r#"rollsafe_http_requests_total{route="restart",status="207"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rollsafe_http_requests_total{route="restart",status="other"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rollsafe_restart_results_total{status="partial"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rollsafe_restart_patches_total{code="acknowledged"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"rollsafe_restart_patches_total{code="conflict"} 1"#),
            "{text}"
        );
    }

    #[test]
    fn latencies_timeouts_and_error_codes() {
        use std::time::Duration;
        let metrics = Metrics::new();
        metrics.error("not_allowed");
        metrics.inventory(WorkloadKind::StatefulSet, Duration::from_millis(30), true);
        metrics.patch(
            WorkloadKind::Deployment,
            Duration::from_millis(20),
            PatchOutcome::Acknowledged,
        );
        metrics.patch(
            WorkloadKind::Deployment,
            Duration::from_secs(15),
            PatchOutcome::TimedOut,
        );
        metrics.run(Duration::from_millis(250));
        let text = metrics.encode();
        for expected in [
            r#"rollsafe_http_errors_total{code="not_allowed"} 1"#,
            r#"rollsafe_restart_inventory_duration_seconds_count{kind="StatefulSet"} 1"#,
            r#"rollsafe_restart_patch_duration_seconds_count{kind="Deployment"} 2"#,
            "rollsafe_restart_patch_timeouts_total 1",
            "rollsafe_restart_run_duration_seconds_count 1",
        ] {
            assert!(text.contains(expected), "{expected}\n{text}");
        }
    }
}
