//! Graceful shutdown and clients that go away.

use super::*;

#[tokio::test]
async fn shutdown_lets_an_in_flight_restart_finish() {
    let f = Fixture::start(|_| {}).await;
    let call = f.slow_restart_in_flight().await;
    let emulator_rollouts = f.emulator.handle();
    f.stop().await;
    let status = call.await.unwrap().unwrap();
    assert_eq!(
        status, 200,
        "the in-flight restart completed during shutdown"
    );
    assert_eq!(emulator_rollouts.rollouts().len(), 2);
}

#[tokio::test]
async fn a_client_hanging_up_does_not_cancel_the_restart() {
    let f = Fixture::start(|_| {}).await;
    let call = f.slow_restart_in_flight().await;
    call.abort();
    let _ = call.await;
    // The run completes on its own: both workloads patched, and its audit line written.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while f.audit_lines().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run was cancelled with its client"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.audit_lines()[0]["status"], "requested");
    assert_eq!(f.emulator.rollouts().len(), 2);
    f.stop().await;
}
