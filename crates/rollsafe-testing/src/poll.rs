//! Polling with a deadline: the one way the harness and the suites wait for a server.

use std::future::Future;
use std::time::Duration;

/// Polls `check` every `interval` until it gives `Some`, for at most `timeout`; `None` when it
/// never did.
pub(crate) async fn poll_until<T, F, Fut>(
    timeout: Duration,
    interval: Duration,
    mut check: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(interval).await;
    }
}
