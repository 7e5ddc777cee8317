//! Output that a stuck reader cannot turn into a stuck server.
//!
//! A [`LossyLines`] owns a stream on its own thread, fed through a bounded queue. Senders never
//! wait: when the queue is full — the reader of the pipe has stopped reading — the line is
//! dropped, and the sender counts it. The async workers therefore never write to a standard
//! stream themselves; `/healthz`, `/metrics` and restarts keep answering with the pipe full.
//! Only copies go through here: the audit file (see [`crate::audit`]) is the record.
//!
//! Each standard stream has one writer per process ([`stdout`], [`stderr`]), shared by log lines
//! and audit copies, so whole lines never interleave however many senders there are, and
//! [`flush_standard_streams`] drains both at exit.

use std::io::Write;
use std::sync::LazyLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;

/// Lines queued for a standard stream before new ones are dropped.
pub const STREAM_QUEUE_LINES: usize = 8192;
/// How long [`LossyLines::flush`] waits for the queue to drain (at process exit).
pub const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// How often [`LossyLines::flush`] retries a full queue.
const FLUSH_POLL: Duration = Duration::from_millis(1);

/// Log lines dropped because their stream was not being read, process-wide.
pub static LOG_LINES_DROPPED: LazyLock<Counter> = LazyLock::new(Counter::default);

enum Message {
    Line(Vec<u8>),
    Flush(SyncSender<()>),
}

/// A bounded, lossy line writer: one thread owns the stream; senders never block.
#[derive(Debug, Clone)]
pub struct LossyLines {
    queue: SyncSender<Message>,
}

/// The process's stdout writer; `None` when its thread could not be started.
static STDOUT: LazyLock<Option<LossyLines>> = LazyLock::new(|| {
    LossyLines::spawn("stdout-writer", STREAM_QUEUE_LINES, std::io::stdout()).ok()
});
/// The process's stderr writer; `None` when its thread could not be started.
static STDERR: LazyLock<Option<LossyLines>> = LazyLock::new(|| {
    LossyLines::spawn("stderr-writer", STREAM_QUEUE_LINES, std::io::stderr()).ok()
});

/// The one writer of this process's stdout.
pub fn stdout() -> Option<&'static LossyLines> {
    STDOUT.as_ref()
}

/// The one writer of this process's stderr.
pub fn stderr() -> Option<&'static LossyLines> {
    STDERR.as_ref()
}

/// Waits up to `wait` in all for what is queued for stdout and stderr to be written (at exit).
pub fn flush_standard_streams(wait: Duration) {
    let deadline = Instant::now() + wait;
    // A stream never used gets its thread now and flushes at once.
    for writer in [stdout(), stderr()].into_iter().flatten() {
        writer.flush(deadline.saturating_duration_since(Instant::now()));
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Message::Line(line) => write!(f, "Line({} bytes)", line.len()),
            Message::Flush(_) => f.write_str("Flush"),
        }
    }
}

impl LossyLines {
    /// Starts the thread that owns `stream`. Lines beyond `capacity` queued are dropped.
    pub fn spawn(
        name: &str,
        capacity: usize,
        stream: impl Write + Send + 'static,
    ) -> std::io::Result<Self> {
        let (queue, receiver) = sync_channel(capacity.max(1));
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || drain(receiver, stream))?;
        Ok(Self { queue })
    }

    /// Queues a line (with its newline). Returns false when it was dropped: the queue is full
    /// or the writer is gone. The caller counts the drop in its own metric.
    pub fn send(&self, line: Vec<u8>) -> bool {
        self.queue.try_send(Message::Line(line)).is_ok()
    }

    /// Queues a line, counting it in `dropped` when it is dropped.
    pub fn send_or_count(&self, line: Vec<u8>, dropped: &Counter) {
        if !self.send(line) {
            dropped.inc();
        }
    }

    /// Waits up to `wait` for every line queued so far to be written. Returns false when the
    /// stream did not take them in time (a reader that stopped reading).
    pub fn flush(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let (done, finished) = sync_channel(1);
        let mut marker = Message::Flush(done);
        loop {
            match self.queue.try_send(marker) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return false,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    marker = back;
                    std::thread::sleep(FLUSH_POLL);
                }
            }
        }
        finished
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .is_ok()
    }
}

fn drain(receiver: Receiver<Message>, mut stream: impl Write) {
    let mut batch = Vec::new();
    while let Ok(first) = receiver.recv() {
        let mut flushes = Vec::new();
        let mut next = Some(first);
        while let Some(message) = next {
            match message {
                Message::Line(line) => batch.extend_from_slice(&line),
                Message::Flush(done) => flushes.push(done),
            }
            // Gather what is already queued into one write.
            next = if batch.len() < 64 * 1024 {
                receiver.try_recv().ok()
            } else {
                None
            };
        }
        // A closed or failing stream loses its copy; the writer keeps draining so senders keep
        // seeing a queue with room.
        let _ = stream.write_all(&batch).and_then(|()| stream.flush());
        batch.clear();
        for done in flushes {
            let _ = done.try_send(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A stream that blocks every write until released.
    struct Gate {
        open: Arc<(Mutex<bool>, std::sync::Condvar)>,
        entered: Arc<std::sync::atomic::AtomicBool>,
        written: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.entered
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let (lock, cvar) = &*self.open;
            let mut open = lock.lock().unwrap();
            while !*open {
                open = cvar.wait(open).unwrap();
            }
            self.written.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_stuck_stream_drops_and_counts_instead_of_blocking() {
        let open = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let written = Arc::new(Mutex::new(Vec::new()));
        let entered = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let gate = Gate {
            open: open.clone(),
            entered: entered.clone(),
            written: written.clone(),
        };
        let dropped = Counter::default();
        let lines = LossyLines::spawn("test-writer", 4, gate).unwrap();
        lines.send_or_count(b"line 0\n".to_vec(), &dropped);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !entered.load(std::sync::atomic::Ordering::SeqCst) {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer never wrote"
            );
            std::thread::yield_now();
        }
        // The writer is stuck in its write: the queue holds 4, the rest drop, no send waits.
        for i in 1..100 {
            lines.send_or_count(format!("line {i}\n").into_bytes(), &dropped);
        }
        assert_eq!(dropped.get(), 95);
        assert!(!lines.flush(Duration::from_millis(10)));
        {
            let (lock, cvar) = &*open;
            *lock.lock().unwrap() = true;
            cvar.notify_all();
        }
        assert!(lines.flush(FLUSH_WAIT));
        let text = String::from_utf8(written.lock().unwrap().clone()).unwrap();
        assert_eq!(text.lines().count(), 5, "{text}");
        assert_eq!(dropped.get(), 95);
        assert!(text.lines().all(|l| l.starts_with("line ")));
    }
}
