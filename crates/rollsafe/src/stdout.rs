//! The commands' results on stdout, and a closed stdout.
//!
//! When stdout's reader goes away before the result is written (`rollsafe refs … | head`), the
//! write fails with `EPIPE` (Rust ignores `SIGPIPE`). That is not a failure of the command:
//! [`write`] turns it into [`Closed`], and `main` ends the process quietly with exit 0, as Unix
//! tools do. Only these writes produce [`Closed`]; an `EPIPE` on a connection to Kubernetes or to
//! a server stays an error. The restart commands write with [`result_line`]: their exit code
//! says what was patched, and a closed stdout does not change it.

use std::io::{self, BufWriter, Write};

/// stdout's reader has gone; `main` exits 0 with nothing on stderr.
#[derive(Debug, thiserror::Error)]
#[error("stdout is closed")]
pub(crate) struct Closed;

/// Writes to stdout through a buffer and flushes it.
pub(crate) fn write(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> anyhow::Result<()> {
    let mut out = BufWriter::new(io::stdout().lock());
    match write(&mut out).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Err(Closed.into()),
        Err(error) => Err(anyhow::Error::new(error).context("cannot write to stdout")),
    }
}

/// Writes `text` and a newline to stdout.
pub(crate) fn line(text: &str) -> anyhow::Result<()> {
    write(|out| writeln!(out, "{text}"))
}

/// Writes the result of a command whose exit code carries its outcome (the restart commands'
/// `partial` and `failed`): a closed stdout is not an error and the caller's exit code stands,
/// so a script reading `$?` after `| head` still sees what happened.
pub(crate) fn result_line(text: &str) -> anyhow::Result<()> {
    match line(text) {
        Err(error) if error.is::<Closed>() => Ok(()),
        other => other,
    }
}
