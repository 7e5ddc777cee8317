//! Audit records: one JSON object per line, written by one thread that owns the append-only
//! audit file, copied to stdout through a bounded, lossy queue.
//!
//! Two stages, as Kubernetes' audit events have stages:
//!
//! - `"stage": "intent"` — before the first patch of a restart run: `ts`, `app`, `action`,
//!   `stage`, `user`, `namespace`, `name`, `planned` (`[{kind, name}]`, every workload the run
//!   is about to patch) and `requestId`. Written only when something is planned.
//! - `"stage": "result"` — one per decision: `ts`, `app`, `action`, `stage`, `user`,
//!   `namespace`, `name`, `result` (`allow`, `deny` or `error`), an optional static `reason`,
//!   and, for restart results, `status`, `matched`, `requested`, `failures` and
//!   `discoveryFailures` with kind, name, code and httpStatus only — no free text. Then
//!   `requestId`.
//!
//! Never Secret values, templates, tokens, uids or upstream error text.
//!
//! **Durability.** With a file configured, [`AuditSink::write`] resolves only after the line
//! (and every line queued with it: one `fdatasync` per batch) is on disk, so the caller can
//! wait for the intent record before patching and for the result record before answering. The
//! file is written with one `write` per batch of whole lines; if a previous process died with a
//! partial line at the end, a newline is appended at open so the next record starts on its own
//! line. Stdout only ever gets a copy: when its reader stops reading, copies are dropped and
//! counted (`rollsafe_audit_stream_dropped_total`), and no request waits for it.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::LazyLock;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use rollsafe_core::contract::{RestartResult, RestartStatus, WorkloadName};
use rollsafe_core::failure::FailureCode;
use rollsafe_core::workload::WorkloadKind;
use serde::Serialize;
use thiserror::Error;
use tokio::sync::{mpsc, oneshot};
use tracing::error;

use crate::output::{self, LossyLines};

/// The audit action of a restart request.
pub const ACTION: &str = "secret.restart";
/// The audit action of an approval (the page's Approve): `name` is the Secret whose consumer
/// row it was given on, `approval` the workload and the digest approved.
pub const APPROVE_ACTION: &str = "workload.approve";
/// The `app` field.
pub const APP: &str = "krypton";

/// The stage of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Before the first patch of a run: what it is about to patch.
    Intent,
    /// A decision, or the outcome of a run.
    Result,
}

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

/// The fields that open every record, in this order: when, what, which stage, who, on which
/// Secret.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordHeader {
    /// RFC 3339 UTC with milliseconds.
    pub ts: String,
    /// Always [`APP`].
    pub app: &'static str,
    /// [`ACTION`], or [`APPROVE_ACTION`].
    pub action: &'static str,
    /// Intent or result.
    pub stage: Stage,
    /// The caller's email.
    pub user: String,
    /// Path namespace.
    pub namespace: String,
    /// Path Secret name.
    pub name: String,
}

/// One audit line.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditLine {
    /// When, who, on what; the stage is always [`Stage::Result`].
    #[serde(flatten)]
    pub header: RecordHeader,
    /// Decision class.
    pub result: AuditResult,
    /// A static reason code, for refusals that have one (a reserved identity).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Restart fields, for restart results.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartFields>,
    /// What an approval approved (or tried to), for approval results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalFields>,
    /// The request id also sent in sanitized 500s and log lines.
    pub request_id: String,
}

/// The workload and digest of an approval, as audited: no template, no value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalFields {
    /// Its kind.
    pub kind: WorkloadKind,
    /// Its name.
    pub workload: String,
    /// The workload digest approved (absent when no roll awaited approval).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
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
    /// [`ACTION`] or [`APPROVE_ACTION`].
    pub action: &'static str,
    /// For an approval, the workload it is about (the digest once known): on its result lines.
    pub approval: Option<ApprovalFields>,
}

impl AuditBase {
    /// The fields of a request by `user` about the Secret `namespace`/`name`.
    pub fn new(
        action: &'static str,
        user: &crate::session::User,
        namespace: String,
        name: String,
        request_id: &str,
    ) -> Self {
        Self {
            user: user.email.clone(),
            namespace,
            name,
            request_id: request_id.to_owned(),
            action,
            approval: None,
        }
    }

    /// A line with this decision.
    pub fn line(self, result: AuditResult, restart: Option<RestartFields>) -> AuditLine {
        let header = self.header(Stage::Result);
        AuditLine {
            header,
            result,
            reason: None,
            restart,
            approval: self.approval,
            request_id: self.request_id,
        }
    }

    /// The opening fields of a record of this request, stamped now.
    fn header(&self, stage: Stage) -> RecordHeader {
        RecordHeader {
            ts: rollsafe_core::time::rfc3339_millis(jiff::Timestamp::now()),
            app: APP,
            action: self.action,
            stage,
            user: self.user.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// A `deny` line with a static reason.
    pub fn refusal(self, reason: &'static str) -> AuditLine {
        let mut line = self.line(AuditResult::Deny, None);
        line.reason = Some(reason);
        line
    }

    /// The intent record of a run about to patch `planned`.
    pub fn intent(&self, planned: Vec<WorkloadName>) -> IntentLine {
        IntentLine {
            header: self.header(Stage::Intent),
            planned,
            request_id: self.request_id.clone(),
        }
    }
}

/// The record written, durably, before the first patch of a run.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IntentLine {
    /// When, who, on what; the stage is always [`Stage::Intent`].
    #[serde(flatten)]
    pub header: RecordHeader,
    /// Every workload the run is about to patch, by kind then name.
    pub planned: Vec<WorkloadName>,
    /// The request id of the run; its result line carries the same.
    pub request_id: String,
}

/// Writes a result line; a failure is logged (the line's stream copy is best effort too).
pub async fn record(sink: &AuditSink, line: AuditLine) {
    if let Err(error) = sink.write(&line).await {
        error!(error = error.code(), "audit line not written durably");
    }
}

/// An act that was not taken: its intent record could not be made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntentNotWritten;

/// The audit protocol around one act that may change workloads, for every route that acts:
/// the intent record naming `planned` is made durable **before** the act, and the act is not
/// taken when it cannot be ([`IntentNotWritten`]); nothing planned records no intent. After
/// the act, its result line (`result_line` of what the act returned) is written before this
/// returns, so the response waits for it.
pub async fn audited<T>(
    sink: &AuditSink,
    base: AuditBase,
    planned: Vec<WorkloadName>,
    act: impl Future<Output = T>,
    result_line: impl FnOnce(AuditBase, &T) -> AuditLine,
) -> Result<T, IntentNotWritten> {
    if !planned.is_empty() {
        let intent = base.intent(planned);
        if let Err(error) = sink.write(&intent).await {
            error!(
                error = error.code(),
                action = base.action,
                "intent record not written; nothing done"
            );
            return Err(IntentNotWritten);
        }
    }
    let outcome = act.await;
    record(sink, result_line(base, &outcome)).await;
    Ok(outcome)
}

/// Why an audit line could not be written durably.
#[derive(Debug, Error)]
pub enum AuditError {
    /// The audit file could not be opened.
    #[error("cannot open the audit file")]
    Open(#[source] std::io::Error),
    /// A line could not be written or synced.
    #[error("cannot write the audit file")]
    Write(std::io::ErrorKind),
    /// The writer thread is gone, or a line could not be serialized.
    #[error("the audit writer failed")]
    Task,
}

impl AuditError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            AuditError::Open(_) => "audit_open",
            AuditError::Write(_) => "audit_write",
            AuditError::Task => "audit_writer",
        }
    }
}

/// Records queued for the audit file before writers wait (back-pressure on restart requests
/// only: `/healthz` and `/metrics` never write audit records).
pub const AUDIT_QUEUE: usize = 1024;
/// The most records written with one `fdatasync`.
const MAX_BATCH: usize = 256;

/// Audit records the file could not take (write or sync failed), process-wide.
pub static WRITE_FAILURES: LazyLock<Counter> = LazyLock::new(Counter::default);

/// How long a record waited to be on disk — queued, written and synced, until its writer
/// resumed — process-wide, from 0.1 ms up. A run waits twice (intent, result).
pub static DURABLE_WAIT: LazyLock<Histogram> = LazyLock::new(wait_histogram);

/// How long one batch's `write` and `fdatasync` took on the writer thread, process-wide: the
/// disk's share of [`DURABLE_WAIT`] (the rest is queueing and the hand-offs to and from the
/// writer thread).
pub static SYNC_DURATION: LazyLock<Histogram> = LazyLock::new(wait_histogram);

/// Buckets from 0.1 ms, doubling, to 0.8 s.
fn wait_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0001, 2.0, 14))
}

/// Audit copies dropped because their stream was not being read, process-wide.
pub static STREAM_COPIES_DROPPED: LazyLock<Counter> = LazyLock::new(Counter::default);

/// The stream audit lines are copied to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Stream {
    /// Standard output (the default).
    #[default]
    Stdout,
    /// Standard error, when stdout is reserved for something else (`rollsafe sandbox --json`).
    Stderr,
}

/// What the writer thread answers: the outcome, and the line back for its stream copy.
type Written = (Result<(), std::io::ErrorKind>, Vec<u8>);

struct Job {
    line: Vec<u8>,
    done: oneshot::Sender<Written>,
}

/// Where audit records go: the durable file when one is configured, and a lossy copy on a
/// standard stream. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AuditSink {
    durable: Option<mpsc::Sender<Job>>,
    copy: Option<LossyLines>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Job({} bytes)", self.line.len())
    }
}

fn copy_to(stream: Stream) -> Option<LossyLines> {
    match stream {
        Stream::Stdout => output::stdout().cloned(),
        Stream::Stderr => output::stderr().cloned(),
    }
}

impl AuditSink {
    /// Stdout only: nothing durable.
    pub fn stdout() -> Self {
        Self::copy_only(copy_to(Stream::Stdout))
    }

    /// No file: records are only copied to `copy` (none: every copy counts as dropped).
    pub fn copy_only(copy: Option<LossyLines>) -> Self {
        Self {
            durable: None,
            copy,
        }
    }

    /// An append-only file, owned by its own writer thread, and a copy on stdout.
    pub fn with_file(path: &Path) -> Result<Self, AuditError> {
        Self::with_file_and_copy(path, copy_to(Stream::Stdout))
    }

    /// An append-only file and a copy on `copy` (none: every copy counts as dropped).
    pub fn with_file_and_copy(path: &Path, copy: Option<LossyLines>) -> Result<Self, AuditError> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(AuditError::Open)?;
        let torn = ends_without_newline(&mut file).map_err(AuditError::Open)?;
        let (durable, jobs) = mpsc::channel(AUDIT_QUEUE);
        let writer = DurableWriter { file, torn };
        std::thread::Builder::new()
            .name("audit-writer".to_owned())
            .spawn(move || writer.run(jobs))
            .map_err(AuditError::Open)?;
        Ok(Self {
            durable: Some(durable),
            copy,
        })
    }

    /// The same sink, copying to `stream`.
    pub fn on(mut self, stream: Stream) -> Self {
        self.copy = copy_to(stream);
        self
    }

    /// Writes a record: durably to the file when there is one (resolving once it is synced),
    /// then as a copy to the stream, which never waits.
    pub async fn write(&self, record: &impl Serialize) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(record).map_err(|_| AuditError::Task)?;
        line.push(b'\n');
        let Some(durable) = &self.durable else {
            self.copy_line(line);
            return Ok(());
        };
        let (done, written) = oneshot::channel();
        let queued = std::time::Instant::now();
        durable
            .send(Job { line, done })
            .await
            .map_err(|_| AuditError::Task)?;
        let (result, line) = written.await.map_err(|_| AuditError::Task)?;
        DURABLE_WAIT.observe(queued.elapsed().as_secs_f64());
        // The copy follows the file, even when the file failed: it is all there is then.
        self.copy_line(line);
        result.map_err(AuditError::Write)
    }

    /// Whether records are made durable.
    pub fn is_durable(&self) -> bool {
        self.durable.is_some()
    }

    fn copy_line(&self, line: Vec<u8>) {
        match &self.copy {
            Some(copy) => copy.send_or_count(line, &STREAM_COPIES_DROPPED),
            None => {
                STREAM_COPIES_DROPPED.inc();
            }
        }
    }
}

/// Whether the file's last byte is not a newline: the previous writer died mid-line.
fn ends_without_newline(file: &mut File) -> std::io::Result<bool> {
    let length = file.seek(SeekFrom::End(0))?;
    if length == 0 {
        return Ok(false);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] != b'\n')
}

struct DurableWriter {
    file: File,
    /// The file may end in a partial line; start the next write with a newline.
    torn: bool,
}

impl DurableWriter {
    fn run(mut self, mut jobs: mpsc::Receiver<Job>) {
        let mut batch = Vec::new();
        let mut buffer = Vec::new();
        while let Some(first) = jobs.blocking_recv() {
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            buffer.clear();
            if self.torn {
                buffer.push(b'\n');
            }
            for job in &batch {
                buffer.extend_from_slice(&job.line);
            }
            let syncing = std::time::Instant::now();
            let result = self
                .file
                .write_all(&buffer)
                .and_then(|()| self.file.sync_data())
                .map_err(|error| error.kind());
            SYNC_DURATION.observe(syncing.elapsed().as_secs_f64());
            self.torn = result.is_err();
            if result.is_err() {
                WRITE_FAILURES.inc_by(batch.len() as u64);
            }
            for job in batch.drain(..) {
                let _ = job.done.send((result, job.line));
            }
        }
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
            action: ACTION,
            approval: None,
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
                "ts": "T", "app": "krypton", "action": "secret.restart", "stage": "result", "user": "alice@x.io",
                "namespace": "team-a", "name": "db", "result": "error", "status": "partial", "matched": 2,
                "requested": [{"kind": "Deployment", "name": "api"}],
                "failures": [{"kind": "StatefulSet", "name": "worker", "code": "forbidden", "httpStatus": 403}],
                "discoveryFailures": [{"kind": "DaemonSet", "code": "incomplete_list", "httpStatus": 503}],
                "requestId": "r-1"
            })
        );
        let keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            &keys[..8],
            [
                "ts",
                "app",
                "action",
                "stage",
                "user",
                "namespace",
                "name",
                "result"
            ]
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

    #[test]
    fn intent_and_refusal_shapes() {
        let planned = vec![
            WorkloadName {
                kind: WorkloadKind::Deployment,
                name: "api".into(),
            },
            WorkloadName {
                kind: WorkloadKind::DaemonSet,
                name: "agent".into(),
            },
        ];
        let mut intent = serde_json::to_value(base().intent(planned)).unwrap();
        intent["ts"] = "T".into();
        assert_eq!(
            intent,
            serde_json::json!({
                "ts": "T", "app": "krypton", "action": "secret.restart", "stage": "intent",
                "user": "alice@x.io", "namespace": "team-a", "name": "db",
                "planned": [{"kind": "Deployment", "name": "api"}, {"kind": "DaemonSet", "name": "agent"}],
                "requestId": "r-1"
            })
        );
        let refusal = serde_json::to_value(base().refusal("reserved_group")).unwrap();
        assert_eq!(refusal["result"], "deny");
        assert_eq!(refusal["reason"], "reserved_group");
        assert_eq!(refusal["stage"], "result");
    }

    fn temp_file() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        (dir, path)
    }

    #[tokio::test]
    async fn file_lines_are_appended() {
        let (_dir, path) = temp_file();
        let sink = AuditSink::with_file(&path).unwrap().on(Stream::Stderr);
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

    #[tokio::test]
    async fn durable_waits_and_syncs_are_measured() {
        let count = |name: &str| {
            crate::metrics::Metrics::new()
                .encode()
                .lines()
                .find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let waits = count("rollsafe_audit_durable_wait_seconds_count");
        let syncs = count("rollsafe_audit_sync_seconds_count");
        let (_dir, path) = temp_file();
        let sink = AuditSink::with_file_and_copy(&path, None).unwrap();
        sink.write(&base().line(AuditResult::Allow, None))
            .await
            .unwrap();
        // Other tests in this process write too: at least this record is counted.
        assert!(count("rollsafe_audit_durable_wait_seconds_count") > waits);
        assert!(count("rollsafe_audit_sync_seconds_count") > syncs);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_records_are_whole_lines_and_all_durable() {
        let (_dir, path) = temp_file();
        let sink = AuditSink::with_file(&path).unwrap().on(Stream::Stderr);
        let writes = (0..500).map(|i| {
            let sink = sink.clone();
            async move {
                let mut b = base();
                b.request_id = format!("r-{i}");
                sink.write(&b.line(AuditResult::Allow, None)).await
            }
        });
        for result in futures::future::join_all(writes).await {
            result.unwrap();
        }
        // Every write resolved: every record is already in the file.
        let text = std::fs::read_to_string(&path).unwrap();
        let mut ids: Vec<String> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["requestId"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 500);
    }

    /// A stream that keeps what it is given.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_copy_goes_to_the_chosen_stream_after_the_file() {
        let (_dir, path) = temp_file();
        let captured = Captured::default();
        let copy = LossyLines::spawn("test-copy", 16, captured.clone()).unwrap();
        let sink = AuditSink::with_file_and_copy(&path, Some(copy.clone())).unwrap();
        sink.write(&base().line(AuditResult::Deny, None))
            .await
            .unwrap();
        assert!(copy.flush(std::time::Duration::from_secs(5)));
        let file = std::fs::read(&path).unwrap();
        assert_eq!(*captured.0.lock().unwrap(), file);
        // Re-pointed at another stream, the first one gets nothing more.
        let sink = sink.on(Stream::Stderr);
        sink.write(&base().line(AuditResult::Error, None))
            .await
            .unwrap();
        assert!(copy.flush(std::time::Duration::from_secs(5)));
        assert_eq!(*captured.0.lock().unwrap(), file);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    }

    #[tokio::test]
    async fn a_torn_tail_is_closed_before_the_next_record() {
        let (_dir, path) = temp_file();
        std::fs::write(&path, b"{\"whole\":1}\n{\"torn\":").unwrap();
        let sink = AuditSink::with_file(&path).unwrap().on(Stream::Stderr);
        sink.write(&base().line(AuditResult::Deny, None))
            .await
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[1], "{\"torn\":");
        let last: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(last["result"], "deny");
    }
}
