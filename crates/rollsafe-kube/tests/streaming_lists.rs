//! Whether an API server serves streaming lists, asked of the emulator with the `WatchList`
//! gate off (Kubernetes 1.33's default) and on (1.34's).

use std::time::Duration;

use rollsafe_core::reference::TargetKind;
use rollsafe_emulator::Emulator;
use rollsafe_kube::read::serves_streaming_lists;
use rollsafe_testing::TestCluster;
use serde_json::json;

const TIMEOUT: Duration = Duration::from_secs(10);

fn secret(name: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "namespace": "shop"}, "data": {"k": "dg=="}})
}

#[tokio::test]
async fn a_server_with_the_gate_off_does_not_and_one_with_it_on_does() {
    for (gate, expected) in [(false, false), (true, true)] {
        let cluster = TestCluster::start_with(
            Emulator::builder()
                .watch_list(gate)
                .seed_objects([secret("db"), secret("rollsafe-streaming-list-check")]),
        )
        .await;
        let client = cluster.connection.client(None);
        for (kind, namespace) in [
            (TargetKind::Secret, None),
            (TargetKind::Secret, Some("shop")),
            (TargetKind::ConfigMap, Some("shop")),
        ] {
            let served = serves_streaming_lists(&client, kind, namespace, TIMEOUT)
                .await
                .unwrap();
            assert_eq!(served, expected, "gate {gate}, {kind:?} in {namespace:?}");
        }
        // Each check was one metadata-only watch: no Secret value crossed the wire.
        let checks = cluster.emu.requests_for("watch", "secrets");
        assert_eq!(checks.len(), 2);
        for check in &checks {
            assert_eq!(
                check.query_param("sendInitialEvents").as_deref(),
                Some("true")
            );
            assert!(
                check
                    .accept
                    .as_deref()
                    .is_some_and(|accept| accept.contains("PartialObjectMetadata")),
                "{check:?}"
            );
        }
        cluster.emu.shutdown().await;
    }
}

#[tokio::test]
async fn an_unreachable_server_is_an_error_not_an_answer() {
    let cluster = TestCluster::start(Vec::new()).await;
    let client = cluster.connection.client(None);
    cluster.emu.shutdown().await;
    let answer = serves_streaming_lists(&client, TargetKind::Secret, None, TIMEOUT).await;
    assert!(answer.is_err(), "{answer:?}");
}
