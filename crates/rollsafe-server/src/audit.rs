//! Audit lines: one JSON object per decision, to stdout and optionally to an append-only file
//! that is fsync'd before the response is sent.
//!
//! A line carries `ts`, `app`, `action`, `user`, `namespace`, `name`, `result` (`allow`, `deny`
//! or `error`) and, for restart results, `status`, `matched`, `requested`, `failures` and
//! `discoveryFailures` with kind, name, code and httpStatus only — no free text. Then
//! `requestId`. Never Secret values, templates, tokens, uids or upstream error text.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rollsafe_core::contract::{RestartResult, RestartStatus, WorkloadName};
use rollsafe_core::failure::FailureCode;
use rollsafe_core::workload::WorkloadKind;
use serde::Serialize;
use thiserror::Error;

/// The audit action of a restart request.
pub const ACTION: &str = "secret.restart";
/// The `app` field.
pub const APP: &str = "krypton";

/// The outcome class of a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditResult {
    /// Requested or no targets.
    Allow,
    /// Refused by the ACL, the namespace scope or Kubernetes.
    Deny,
    /// Partial, failed, or an unexpected preparation error.
    Error,
}

/// A failed workload, as audited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditFailure {
    /// Kind.
    pub kind: WorkloadKind,
    /// Name; absent for a failed inventory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Code.
    pub code: FailureCode,
    /// Upstream status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http_status: Option<u16>,
}

/// The restart fields of a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartFields {
    /// Result status.
    pub status: RestartStatus,
    /// Known matches.
    pub matched: usize,
    /// Acknowledged workloads.
    pub requested: Vec<WorkloadName>,
    /// Failed workloads.
    pub failures: Vec<AuditFailure>,
    /// Failed inventories.
    pub discovery_failures: Vec<AuditFailure>,
}

impl From<&RestartResult> for RestartFields {
    fn from(result: &RestartResult) -> Self {
        Self {
            status: result.status,
            matched: result.matched,
            requested: result.requested.clone(),
            failures: result
                .failures
                .iter()
                .map(|f| AuditFailure {
                    kind: f.kind,
                    name: Some(f.name.clone()),
                    code: f.code,
                    http_status: f.http_status,
                })
                .collect(),
            discovery_failures: result
                .discovery_failures
                .iter()
                .map(|f| AuditFailure {
                    kind: f.kind,
                    name: None,
                    code: f.code,
                    http_status: f.http_status,
                })
                .collect(),
        }
    }
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditLine {
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    /// Always [`APP`].
    pub app: &'static str,
    /// Always [`ACTION`].
    pub action: &'static str,
    /// The caller's email.
    pub user: String,
    /// Path namespace.
    pub namespace: String,
    /// Path Secret name.
    pub name: String,
    /// Decision class.
    pub result: AuditResult,
    /// Restart fields, for restart results.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartFields>,
    /// The request id also sent in sanitized 500s and log lines.
    pub request_id: String,
}

impl AuditLine {
    /// A line for a restart result: `allow` for requested/no_targets, `error` otherwise.
    pub fn for_result(base: AuditBase, result: &RestartResult) -> Self {
        let class = match result.status {
            RestartStatus::Requested | RestartStatus::NoTargets => AuditResult::Allow,
            RestartStatus::Partial | RestartStatus::Failed => AuditResult::Error,
        };
        base.line(class, Some(RestartFields::from(result)))
    }
}

/// Who asked for what: the fields every line of a request shares.
#[derive(Debug, Clone)]
pub struct AuditBase {
    /// The caller's email.
    pub user: String,
    /// Path namespace.
    pub namespace: String,
    /// Path Secret name.
    pub name: String,
    /// Request id.
    pub request_id: String,
}

impl AuditBase {
    /// A line with this decision.
    pub fn line(self, result: AuditResult, restart: Option<RestartFields>) -> AuditLine {
        AuditLine {
            // RFC 3339 UTC with milliseconds, the format of the restart annotation.
            ts: rollsafe_kube::restart_timestamp(jiff::Timestamp::now()),
            app: APP,
            action: ACTION,
            user: self.user,
            namespace: self.namespace,
            name: self.name,
            result,
            restart,
            request_id: self.request_id,
        }
    }
}

/// Why an audit line could not be written durably.
#[derive(Debug, Error)]
pub enum AuditError {
    /// The audit file could not be opened.
    #[error("cannot open the audit file")]
    Open(#[source] std::io::Error),
    /// A line could not be written or synced.
    #[error("cannot write the audit file")]
    Write(#[source] std::io::Error),
    /// The writer task failed.
    #[error("the audit writer failed")]
    Task,
}

/// The stream audit lines are printed to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stream {
    /// Standard output (the default).
    #[default]
    Stdout,
    /// Standard error, when stdout is reserved for something else (`rollsafe sandbox --json`).
    Stderr,
}

/// Where audit lines go: a standard stream, and the file when one is configured.
#[derive(Debug, Clone, Default)]
pub struct AuditSink {
    stream: Stream,
    file: Option<Arc<Mutex<File>>>,
}

impl AuditSink {
    /// Stdout only.
    pub fn stdout() -> Self {
        Self::default()
    }

    /// Stdout and an append-only file.
    pub fn with_file(path: &Path) -> Result<Self, AuditError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(AuditError::Open)?;
        Ok(Self {
            stream: Stream::Stdout,
            file: Some(Arc::new(Mutex::new(file))),
        })
    }

    /// The same sink, printing to `stream`.
    pub fn on(mut self, stream: Stream) -> Self {
        self.stream = stream;
        self
    }

    /// Writes a line to the stream and, durably, to the file.
    pub async fn write(&self, line: &AuditLine) -> Result<(), AuditError> {
        let mut text = serde_json::to_string(line).map_err(|_| AuditError::Task)?;
        text.push('\n');
        // The stream is best-effort: a closed pipe must not fail the request.
        let _ = match self.stream {
            Stream::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
            Stream::Stderr => {
                let mut out = std::io::stderr().lock();
                out.write_all(text.as_bytes()).and_then(|()| out.flush())
            }
        };
        let Some(file) = self.file.clone() else {
            return Ok(());
        };
        tokio::task::spawn_blocking(move || {
            let mut file = file.lock().map_err(|_| AuditError::Task)?;
            file.write_all(text.as_bytes()).map_err(AuditError::Write)?;
            file.sync_data().map_err(AuditError::Write)
        })
        .await
        .map_err(|_| AuditError::Task)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_core::contract::RestartOutcome;
    use rollsafe_core::failure::Failure;

    fn base() -> AuditBase {
        AuditBase {
            user: "alice@x.io".into(),
            namespace: "team-a".into(),
            name: "db".into(),
            request_id: "r-1".into(),
        }
    }

    #[test]
    fn restart_line_shape() {
        let mut outcome = RestartOutcome::new();
        outcome.acknowledged(WorkloadKind::Deployment, "api");
        outcome.failed(
            WorkloadKind::StatefulSet,
            "worker",
            Failure::from_status(403),
        );
        outcome.discovery_failed(WorkloadKind::DaemonSet, Failure::incomplete_list(None));
        let line = AuditLine::for_result(base(), &outcome.into_result());
        let mut json = serde_json::to_value(&line).unwrap();
        assert!(json["ts"].as_str().unwrap().ends_with('Z'));
        json["ts"] = "T".into();
        assert_eq!(
            json,
            serde_json::json!({
                "ts": "T", "app": "krypton", "action": "secret.restart", "user": "alice@x.io",
                "namespace": "team-a", "name": "db", "result": "error", "status": "partial", "matched": 2,
                "requested": [{"kind": "Deployment", "name": "api"}],
                "failures": [{"kind": "StatefulSet", "name": "worker", "code": "forbidden", "httpStatus": 403}],
                "discoveryFailures": [{"kind": "DaemonSet", "code": "incomplete_list", "httpStatus": 503}],
                "requestId": "r-1"
            })
        );
        let keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            &keys[..7],
            ["ts", "app", "action", "user", "namespace", "name", "result"]
        );
    }

    #[test]
    fn allow_and_deny_classes() {
        let line = AuditLine::for_result(base(), &RestartOutcome::new().into_result());
        assert_eq!(line.result, AuditResult::Allow);
        let deny = serde_json::to_value(base().line(AuditResult::Deny, None)).unwrap();
        assert_eq!(deny["result"], "deny");
        assert!(deny.get("status").is_none());
    }

    #[tokio::test]
    async fn file_lines_are_appended() {
        let dir = std::env::temp_dir().join(format!("rollsafe-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let _ = std::fs::remove_file(&path);
        let sink = AuditSink::with_file(&path).unwrap();
        sink.write(&base().line(AuditResult::Deny, None))
            .await
            .unwrap();
        sink.write(&base().line(AuditResult::Error, None))
            .await
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["result"], "error");
    }
}
