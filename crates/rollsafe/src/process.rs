//! Process plumbing shared by the long-running subcommands (`serve`, `emulator`, `sandbox`,
//! `consumers`, and the controller to come): logging to stderr, the async runtime, and waiting
//! for SIGTERM or SIGINT.
//!
//! Log lines never reach stderr from the thread that logged them: they go through a bounded
//! queue to one writer thread ([`LossyLines`]). When stderr's reader stops reading, the queue
//! fills and further lines are dropped and counted (`rollsafe_log_lines_dropped_total` on the
//! server's metrics) instead of blocking async workers — a full pipe must not stop `/healthz`.
//! [`flush_logs`] at exit waits briefly for the queue to drain.

use std::io::{IsTerminal, Write};
use std::sync::OnceLock;

use anyhow::Context as _;
use rollsafe_server::output::{self, FLUSH_WAIT, LOG_LINES_DROPPED, LossyLines};

/// One log line at a time, handed to the stderr writer thread; never blocks.
struct QueuedLine(&'static LossyLines);

impl Write for QueuedLine {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // The formatter writes each event with one call; a dropped line is counted, not an
        // error (an error would only make the formatter print to stderr directly).
        self.0.send_or_count(bytes.to_vec(), &LOG_LINES_DROPPED);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `--log-format`: how log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line of text per event; colours only when stderr is a terminal.
    Text,
    /// One JSON object per event, for log collectors (the default of `serve`, `watch` and
    /// `emulator`).
    Json,
}

static LOG_FORMAT: OnceLock<LogFormat> = OnceLock::new();

/// Chooses the format of [`init_logging`] (once, before it; later calls are ignored).
pub(crate) fn set_log_format(format: LogFormat) {
    let _ = LOG_FORMAT.set(format);
}

/// Whether log lines (and the warnings commands print on stderr) are JSON, as
/// `--log-format json` asks.
pub(crate) fn logs_json() -> bool {
    LOG_FORMAT.get() == Some(&LogFormat::Json)
}

/// Logs to stderr through a bounded, lossy queue, filtered by `RUST_LOG` (default `info`), in
/// the format of [`set_log_format`] (text when unset). Colours only when stderr is a terminal:
/// a file or a log collector gets plain text.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = std::io::stderr().is_terminal();
    let json = LOG_FORMAT.get() == Some(&LogFormat::Json);
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // No thread for the writer: log directly rather than not at all.
    let _ = match (output::stderr(), json) {
        (Some(writer), true) => builder
            .json()
            .with_writer(move || QueuedLine(writer))
            .try_init(),
        (Some(writer), false) => builder
            .with_ansi(ansi)
            .with_writer(move || QueuedLine(writer))
            .try_init(),
        (None, true) => builder.json().with_writer(std::io::stderr).try_init(),
        (None, false) => builder
            .with_ansi(ansi)
            .with_writer(std::io::stderr)
            .try_init(),
    };
}

/// Waits a short while for queued log lines and audit copies to reach stderr and stdout (call
/// before exiting).
pub(crate) fn flush_logs() {
    output::flush_standard_streams(FLUSH_WAIT);
}

/// A multi-threaded tokio runtime.
pub(crate) fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// SIGTERM and SIGINT, listened for from the moment [`ShutdownSignal::install`] returns: a
/// command installs it before it announces that it is ready, so a signal sent right after the
/// announcement is a clean shutdown, never the default action that kills the process.
#[cfg(unix)]
pub(crate) struct ShutdownSignal {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

#[cfg(unix)]
impl ShutdownSignal {
    /// Starts listening (needs a tokio runtime).
    pub(crate) fn install() -> anyhow::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            term: signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?,
        })
    }

    /// Resolves on the first SIGTERM or SIGINT.
    pub(crate) async fn recv(mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Ctrl-C, listened for once [`ShutdownSignal::recv`] is awaited.
#[cfg(not(unix))]
pub struct ShutdownSignal;

#[cfg(not(unix))]
impl ShutdownSignal {
    /// Nothing to install ahead of time on this platform.
    pub fn install() -> anyhow::Result<Self> {
        Ok(Self)
    }

    /// Resolves on Ctrl-C.
    pub async fn recv(self) {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Resolves on SIGTERM or SIGINT (Ctrl-C elsewhere).
pub(crate) async fn wait_for_signal() -> anyhow::Result<()> {
    ShutdownSignal::install()?.recv().await;
    Ok(())
}

/// What a message must never show: a `Debug` rendering of an error or of the API server's
/// Status.
const DEBUG_RENDERINGS: [&str; 3] = ["Status {", "Some(", "ApiError:"];

/// An error and its causes on one line, as `{:#}` writes them, but without a cause whose text
/// is already part of the line: some errors carry their cause both in their own message and
/// as their source (kube's unreadable-kubeconfig error names the I/O error twice).
///
/// The API server's own answer is said as its HTTP status, never as its text or a `Debug`
/// rendering of its Status (kube's error writes both); a cause that would show one anyway is
/// left out.
pub(crate) fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        // The answer's own source is the Status: its text is the API server's, not said.
        if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&format!("Kubernetes answered HTTP {}", status.code));
            break;
        }
        let text = cause.to_string();
        if DEBUG_RENDERINGS
            .iter()
            .any(|pattern| text.contains(pattern))
        {
            continue;
        }
        if text.is_empty() || line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_said_is_not_said_again() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = anyhow::Error::new(io)
            .context("failed to read '/x/kubeconfig': No such file or directory")
            .context("cannot connect to Kubernetes");
        assert_eq!(
            one_line(&error),
            "cannot connect to Kubernetes: failed to read '/x/kubeconfig': No such file or directory"
        );
        let distinct = anyhow::anyhow!("refused").context("no response from the server");
        let answered = anyhow::Error::new(kube::Error::Api(
            kube::core::Status::failure("leases is forbidden: User \"x\" cannot get", "Forbidden")
                .with_code(403)
                .boxed(),
        ))
        .context("lease manager error")
        .context("cannot start the leader election");
        assert_eq!(
            one_line(&answered),
            "cannot start the leader election: lease manager error: Kubernetes answered HTTP 403"
        );
        assert_eq!(one_line(&distinct), "no response from the server: refused");
    }
}
