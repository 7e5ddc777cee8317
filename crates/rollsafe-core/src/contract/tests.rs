use super::*;
use crate::failure::{Failure, TransportFailure};
use WorkloadKind::{DaemonSet, Deployment, StatefulSet};

/// The seed's 207 example, verbatim: one copy for every suite that checks it.
const SEED_207_EXAMPLE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/seed-207-example.json"
));

fn forbidden() -> Failure {
    Failure::from_status(403)
}

/// (case, outcome, status, HTTP, message)
fn table() -> Vec<(
    &'static str,
    RestartOutcome,
    RestartStatus,
    u16,
    &'static str,
)> {
    let mut rows = Vec::new();

    let mut o = RestartOutcome::new();
    o.acknowledged(Deployment, "a");
    o.acknowledged(StatefulSet, "b");
    rows.push((
        "all acknowledged",
        o,
        RestartStatus::Requested,
        200,
        "Rollout requested for 2 of 2 matched workloads.",
    ));

    let mut o = RestartOutcome::new();
    o.acknowledged(DaemonSet, "a");
    rows.push((
        "one acknowledged",
        o,
        RestartStatus::Requested,
        200,
        "Rollout requested for 1 of 1 matched workload.",
    ));

    rows.push((
        "nothing matched, inventories complete",
        RestartOutcome::new(),
        RestartStatus::NoTargets,
        200,
        "No workloads reference this Secret.",
    ));

    let mut o = RestartOutcome::new();
    o.acknowledged(Deployment, "api-server");
    o.failed(StatefulSet, "worker", forbidden());
    rows.push((
        "acknowledged plus a patch failure",
        o,
        RestartStatus::Partial,
        207,
        "Rollout requested for 1 of 2 matched workloads. 1 patch request failed.",
    ));

    let mut o = RestartOutcome::new();
    o.acknowledged(Deployment, "a");
    o.discovery_failed(DaemonSet, Failure::incomplete_list(None));
    rows.push((
        "acknowledged plus a discovery failure",
        o,
        RestartStatus::Partial,
        207,
        "Rollout requested for 1 of 1 matched workload. Discovery failed for 1 workload kind.",
    ));

    let mut o = RestartOutcome::new();
    o.acknowledged(Deployment, "a");
    o.failed(Deployment, "b", Failure::from_status(422));
    o.failed(
        Deployment,
        "c",
        Failure::from_transport(TransportFailure::AfterSend),
    );
    o.discovery_failed(DaemonSet, forbidden());
    o.discovery_failed(StatefulSet, Failure::from_status(500));
    rows.push(("acknowledged plus both kinds of failure", o, RestartStatus::Partial, 207,
        "Rollout requested for 1 of 3 matched workloads. 2 patch requests failed. Discovery failed for 2 workload kinds."));

    let mut o = RestartOutcome::new();
    o.failed(Deployment, "a", Failure::from_status(409));
    rows.push((
        "only patch failures",
        o,
        RestartStatus::Failed,
        503,
        "No rollout was requested. 1 patch request failed.",
    ));

    let mut o = RestartOutcome::new();
    o.discovery_failed(Deployment, Failure::incomplete_list(Some(410)));
    rows.push((
        "failed discovery with zero known matches is failed, not no_targets",
        o,
        RestartStatus::Failed,
        503,
        "No rollout was requested. Discovery failed for 1 workload kind.",
    ));

    let mut o = RestartOutcome::new();
    for kind in WorkloadKind::ALL {
        o.discovery_failed(kind, forbidden());
    }
    o.failed(Deployment, "x", Failure::incomplete_list(None));
    o.failed(Deployment, "y", Failure::from_status(404));
    rows.push((
        "everything failed",
        o,
        RestartStatus::Failed,
        503,
        "No rollout was requested. 2 patch requests failed. Discovery failed for 3 workload kinds.",
    ));

    rows
}

#[test]
fn status_table() {
    for (case, outcome, status, http, message) in table() {
        assert_eq!(outcome.status(), status, "{case}");
        let result = outcome.into_result();
        assert_eq!(result.status, status, "{case}");
        assert_eq!(result.http_status(), http, "{case}");
        assert_eq!(result.message, message, "{case}");
        assert_eq!(result.note, NOTE, "{case}");
        assert_eq!(
            result.matched,
            result.requested.len() + result.failures.len(),
            "{case}"
        );
        assert_eq!(
            result.error.as_deref(),
            (http == 503).then_some(message),
            "error only on 503: {case}"
        );
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json.get("error").is_some(), http == 503, "{case}");
    }
}

#[test]
fn entries_are_ordered_by_kind_then_name() {
    let mut o = RestartOutcome::new();
    o.acknowledged(DaemonSet, "a");
    o.acknowledged(Deployment, "z");
    o.acknowledged(Deployment, "b");
    o.acknowledged(StatefulSet, "a");
    o.failed(DaemonSet, "b", forbidden());
    o.failed(Deployment, "c", forbidden());
    o.discovery_failed(DaemonSet, forbidden());
    o.discovery_failed(Deployment, forbidden());
    let result = o.into_result();
    let requested: Vec<_> = result
        .requested
        .iter()
        .map(|w| (w.kind, w.name.as_str()))
        .collect();
    assert_eq!(
        requested,
        [
            (Deployment, "b"),
            (Deployment, "z"),
            (StatefulSet, "a"),
            (DaemonSet, "a")
        ]
    );
    let failures: Vec<_> = result
        .failures
        .iter()
        .map(|w| (w.kind, w.name.as_str()))
        .collect();
    assert_eq!(failures, [(Deployment, "c"), (DaemonSet, "b")]);
    let kinds: Vec<_> = result.discovery_failures.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [Deployment, DaemonSet]);
}

#[test]
fn seed_207_example_field_for_field() {
    let mut o = RestartOutcome::new();
    o.failed(StatefulSet, "worker", forbidden());
    o.acknowledged(Deployment, "api-server");
    let result = o.into_result();
    let seed: serde_json::Value = serde_json::from_str(SEED_207_EXAMPLE).unwrap();
    assert_eq!(serde_json::to_value(&result).unwrap(), seed);
    assert_eq!(result.http_status(), 207);
    insta::assert_json_snapshot!("seed_207_example", result);
}

#[test]
fn failed_503_snapshot() {
    let mut o = RestartOutcome::new();
    o.discovery_failed(StatefulSet, Failure::incomplete_list(None));
    o.failed(
        Deployment,
        "web",
        Failure::from_transport(TransportFailure::AfterSend),
    );
    o.failed(Deployment, "api", Failure::incomplete_list(None));
    insta::assert_json_snapshot!("failed_503", o.into_result());
}

#[test]
fn no_targets_and_requested_snapshots() {
    insta::assert_json_snapshot!("no_targets", RestartOutcome::new().into_result());
    let mut o = RestartOutcome::new();
    o.acknowledged(Deployment, "web");
    o.acknowledged(DaemonSet, "agent");
    insta::assert_json_snapshot!("requested", o.into_result());
}

#[test]
fn results_round_trip_for_clients() {
    for (_, outcome, ..) in table() {
        let result = outcome.into_result();
        let text = serde_json::to_string(&result).unwrap();
        let back: RestartResult = serde_json::from_str(&text).unwrap();
        assert_eq!(back, result);
    }
}

#[test]
fn http_status_is_omitted_when_absent() {
    let mut o = RestartOutcome::new();
    o.failed(
        Deployment,
        "web",
        Failure::from_transport(TransportFailure::NotSent),
    );
    let json = serde_json::to_value(o.into_result()).unwrap();
    assert!(json["failures"][0].get("httpStatus").is_none());
    assert_eq!(json["failures"][0]["code"], "unavailable");
}
