//! Shared by the controller suites: a controller running on a task of its own, its published
//! status waited on with a deadline, and its log lines read for debug renderings of errors.

#![allow(dead_code, reason = "shared by several test crates; each uses a part")]
#![expect(clippy::unwrap_used, reason = "tests may unwrap")]

pub mod scenario;

use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use rollsafe_watch::{Controller, Spawned, Status};
use tokio::sync::watch;

/// How long a suite waits for a published status (generous: the real control plane shares two
/// cores with the tests).
pub const DEADLINE: Duration = Duration::from_secs(90);

pub struct Running {
    pub status: watch::Receiver<Status>,
    spawned: Spawned,
}

impl Running {
    /// Runs `controller` on its own task until `stop` is called.
    pub fn spawn(controller: Controller) -> Running {
        capture_logs();
        let spawned = controller.spawn();
        Running {
            status: spawned.status(),
            spawned,
        }
    }

    /// Waits (on the published status, with a deadline) until `done` holds.
    pub async fn until(&mut self, what: &str, done: impl Fn(&Status) -> bool) -> Status {
        match self.spawned.wait_for(DEADLINE, done).await {
            Ok(status) => status,
            Err(last) => panic!("timed out waiting for {what}: {last:?}"),
        }
    }

    /// Synced, and nothing pending.
    pub async fn settled(&mut self) -> Status {
        self.until("synced and idle", |s| s.synced && s.pending == 0)
            .await
    }

    /// Stops the controller; then no log line any controller of this test binary wrote so far
    /// renders an error with `Debug`.
    pub async fn stop(self) {
        self.spawned.stop().await.unwrap();
        assert_no_debug_renderings();
    }
}

/// What a log line, an Event or a message must never show: a Rust `Debug` rendering of an
/// error or of the API server's Status (its fixed sentence and code instead).
pub const DEBUG_RENDERINGS: [&str; 3] = ["Status {", "Some(", "ApiError:"];

/// The log lines (JSON, as `rollsafe watch` writes them, every level from debug) that showed a
/// [`DEBUG_RENDERINGS`] pattern, since the first controller of this test binary started.
static OFFENDING: OnceLock<Mutex<Vec<String>>> = OnceLock::new();

/// Every warning logged since the first controller of this test binary started.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The warnings logged so far (JSON lines) that contain `needle`.
pub fn warnings(needle: &str) -> Vec<String> {
    WARNINGS
        .lock()
        .unwrap()
        .iter()
        .filter(|line| line.contains(needle))
        .cloned()
        .collect()
}

/// Captures every rollsafe log line of this test binary from now on (once per binary), keeping
/// only those that show a debug rendering.
fn capture_logs() {
    OFFENDING.get_or_init(|| {
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "rollsafe_watch=debug,rollsafe_kube=debug,rollsafe_notify=debug",
            ))
            .with_writer(|| LineCheck)
            .finish();
        let _ = tracing::subscriber::set_global_default(subscriber);
        Mutex::new(Vec::new())
    });
}

/// Fails with the offending lines, if any was written.
pub fn assert_no_debug_renderings() {
    if let Some(offending) = OFFENDING.get() {
        let lines = offending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        assert!(
            lines.is_empty(),
            "log lines render errors with Debug:\n{}",
            lines.join("\n")
        );
    }
}

/// A log writer that checks each line and keeps the offending ones.
struct LineCheck;

impl Write for LineCheck {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let line = String::from_utf8_lossy(buf);
        if line.contains("\"level\":\"WARN\"") {
            WARNINGS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line.trim_end().to_owned());
        }
        for empty in ["\":\"\"", "\":\"\","] {
            if line.contains(empty)
                && let Some(offending) = OFFENDING.get()
            {
                offending
                    .lock()
                    .unwrap()
                    .push(format!("an empty field: {}", line.trim_end()));
            }
        }
        if DEBUG_RENDERINGS
            .iter()
            .any(|pattern| line.contains(pattern))
            && let Some(offending) = OFFENDING.get()
        {
            offending
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line.trim_end().to_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
