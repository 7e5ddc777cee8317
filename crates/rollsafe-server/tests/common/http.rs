//! The raw HTTP/1.1 client of `rollsafe-testing` (no server types: also used by the CLI's
//! process tests), and polling helpers of the server suites.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use rollsafe_emulator::RunningEmulator;
pub use rollsafe_testing::http::{Response, exchange, get};

/// Polls `check` every few milliseconds until it holds or `limit` passes.
pub async fn wait_until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Requests of one verb on one resource being handled by the emulator now.
pub fn in_flight(emulator: &RunningEmulator, verb: &str, resource: &str) -> u32 {
    emulator
        .in_flight()
        .iter()
        .find(|s| s.verb == verb && s.resource == resource)
        .map_or(0, |s| s.current)
}
