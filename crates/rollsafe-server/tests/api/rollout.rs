//! `GET …/rollout`: the preview's gates and discovery, each consumer's rollout state from the
//! listed objects, no patch, no uid or resourceVersion; and with the emulator's simulated
//! rollouts, a slow one seen moving and a failing one seen stalled with Kubernetes' reason.

use super::*;
use rollsafe_client::{Client, ClientError, Token};
use rollsafe_core::rollout::{ConsumersRollout, RolloutState};
use rollsafe_core::workload::WorkloadKind;
use rollsafe_emulator::RolloutPaceChange;

fn path(namespace: &str, name: &str, action: &str) -> String {
    format!("/api/namespaces/{namespace}/secrets/{name}/{action}")
}

async fn read(f: &Fixture, name: &str, token: &str) -> (StatusCode, Value) {
    let auth = format!("Bearer {token}");
    let (status, headers, body) = f
        .request(
            Method::GET,
            &path(NS, name, "rollout"),
            &[("authorization", &auth)],
        )
        .await;
    assert_eq!(headers["cache-control"], "no-store");
    (status, body)
}

fn patches(f: &Fixture) -> usize {
    f.emulator
        .requests()
        .iter()
        .filter(|r| r.verb.as_deref() == Some("patch"))
        .count()
}

fn client(f: &Fixture, token: String) -> Client {
    Client::new(&f.url, Some(Token::new(token))).unwrap()
}

async fn rollout_of(client: &Client, name: &str) -> ConsumersRollout {
    client
        .rollout(&NS.parse().unwrap(), &name.parse().unwrap())
        .await
        .unwrap()
}

/// The pod-template annotation the restart wrote on `name` (a Deployment).
fn restarted_at(f: &Fixture, name: &str) -> Option<String> {
    f.emulator
        .get_object("deployments", Some(NS), name)?
        .pointer("/spec/template/metadata/annotations/krypton.io~1restarted-at")?
        .as_str()
        .map(str::to_owned)
}

#[tokio::test]
async fn after_a_restart_each_consumer_is_complete_or_deferred_and_nothing_names_an_identity() {
    let mut objects = seed();
    let mut paused = workload("Deployment", "paused", "db");
    paused["spec"]["paused"] = json!(true);
    objects.push(paused);
    let f = Fixture::start_with(objects, |_| {}).await;
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    let written = restarted_at(&f, "api").unwrap();
    let patched = patches(&f);

    let (status, body) = read(&f, "db", &admin()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["namespace"].as_str(), body["secret"].as_str()),
        (Some(NS), Some("db"))
    );
    for kind in ["Deployment", "StatefulSet", "DaemonSet"] {
        assert_eq!(
            body["inventories"][kind],
            json!({"complete": true}),
            "{kind}"
        );
    }
    let states: Vec<(&str, &str, &str)> = body["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["kind"].as_str().unwrap(),
                w["name"].as_str().unwrap(),
                w["state"].as_str().unwrap(),
            )
        })
        .collect();
    // Today's emulator: status follows spec in the same write, so a rolling workload is
    // complete at once; the paused one waits for its resume.
    assert_eq!(
        states,
        [
            ("Deployment", "api", "complete"),
            ("Deployment", "paused", "deferred"),
            ("StatefulSet", "worker", "complete"),
        ]
    );
    let api = &body["workloads"][0];
    assert_eq!(
        api["restartedAt"],
        written.as_str(),
        "the value the restart wrote"
    );
    assert_eq!(
        api["progress"]["desired"], api["progress"]["updated"],
        "{api}"
    );
    let paused = &body["workloads"][1];
    assert_eq!(paused["deferral"], "paused");
    assert_eq!(paused["deferralReason"], "the Deployment is paused");
    let text = body.to_string();
    for leak in ["uid", "resourceVersion", SECRET_VALUE] {
        assert!(!text.contains(leak), "{leak} in {text}");
    }
    for workload in body["workloads"].as_array().unwrap() {
        let object = f
            .emulator
            .get_object(
                &format!("{}s", workload["kind"].as_str().unwrap().to_lowercase()),
                Some(NS),
                workload["name"].as_str().unwrap(),
            )
            .unwrap();
        for field in ["uid", "resourceVersion"] {
            let value = object["metadata"][field].as_str().unwrap();
            assert!(
                !text.contains(&format!("\"{value}\"")),
                "{field} {value} in {text}"
            );
        }
    }
    assert_eq!(patches(&f), patched, "a rollout read never patches");
    assert_eq!(
        f.audit_lines().len(),
        1,
        "only the restart is audited, as for the preview"
    );
    // One discovery: one list per kind (this seed's kinds fit one page each).
    let lists = f
        .emulator
        .requests()
        .iter()
        .filter(|r| r.verb.as_deref() == Some("list"))
        .count();
    assert_eq!(
        lists,
        3 + 3,
        "the restart's three lists and the read's three"
    );

    // The typed client reads the same.
    let view = rollout_of(&client(&f, admin()), "db").await;
    assert_eq!(serde_json::to_value(&view).unwrap(), body);
    f.stop().await;
}

#[tokio::test]
async fn the_rollout_read_refuses_exactly_as_the_preview_does() {
    // The restart flag off: neither read changes anything, so both answer.
    let f = Fixture::start(|s| s.restart_enabled = false).await;
    let admin = format!("Bearer {}", admin());
    let dave = format!("Bearer {}", token("dave@x.io", &["developers"]));
    let reserved = format!("Bearer {}", token("eve@x.io", &["system:masters"]));
    let cases: [(&str, &str, &str, Option<&str>, u16); 8] = [
        ("no credentials", NS, "db", None, 401),
        ("a bad token", NS, "db", Some("Bearer not-a-token"), 401),
        ("a reserved group", NS, "db", Some(&reserved), 403),
        ("an invalid name", NS, "Bad_Name", Some(&admin), 400),
        ("out of scope", "team-b", "db", Some(&admin), 403),
        ("missing", NS, "nope", Some(&admin), 404),
        ("a history snapshot", NS, "db-v1", Some(&admin), 404),
        ("the ACL", NS, "locked", Some(&dave), 403),
    ];
    for (case, namespace, name, auth, expected) in cases {
        let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", *a)).collect();
        let (preview_status, preview_headers, preview) = f
            .request(Method::GET, &path(namespace, name, "consumers"), &headers)
            .await;
        let (status, headers, body) = f
            .request(Method::GET, &path(namespace, name, "rollout"), &headers)
            .await;
        assert_eq!(status.as_u16(), expected, "{case}: {body}");
        assert_eq!(
            (status, &body),
            (preview_status, &preview),
            "{case}: the same refusal as the preview"
        );
        assert!(
            body["error"].is_string(),
            "{case}: the error envelope: {body}"
        );
        assert_eq!(headers["cache-control"], "no-store", "{case}");
        assert_eq!(preview_headers["cache-control"], "no-store", "{case}");
    }
    assert_eq!(f.workload_requests(), 0, "no gate let a list through");
    assert_eq!(patches(&f), 0);
    // A refusal answers the typed client with its status, as the preview's does.
    match client(&f, token("dave@x.io", &[]))
        .rollout(&NS.parse().unwrap(), &"locked".parse().unwrap())
        .await
    {
        Err(ClientError::Api(error)) => assert_eq!(error.status, 403),
        other => panic!("{other:?}"),
    }
    // Only the restart writes audit lines: neither read audits a refusal.
    assert!(f.audit_lines().is_empty(), "{:?}", f.audit_lines());
    f.stop().await;
}

#[tokio::test]
async fn every_list_is_made_as_the_caller_and_an_incomplete_kind_is_reported() {
    let f = Fixture::start(|s| s.impersonation = true).await;
    f.emulator.add_fault(
        Fault::on("list", "statefulsets")
            .namespace(NS)
            .always()
            .then(FaultAction::status(403)),
    );
    let view = rollout_of(&client(&f, token("dev@x.io", &["developers"])), "db").await;
    let statefulsets = &view.inventories[&WorkloadKind::StatefulSet];
    assert!(!statefulsets.complete);
    assert_eq!(statefulsets.http_status, Some(403));
    let names: Vec<&str> = view.workloads.iter().map(|w| w.name.as_str()).collect();
    assert_eq!(names, ["api"], "an incomplete kind contributes nothing");
    assert_eq!(view.workloads[0].restarted_at, None, "never restarted");
    for request in f.emulator.requests() {
        if request.is("get", "configmaps") {
            continue;
        }
        assert_eq!(
            request.impersonated_user.as_deref(),
            Some("dev@x.io"),
            "{request:?}"
        );
        assert_eq!(request.impersonated_groups, ["developers"], "{request:?}");
    }
    f.stop().await;
}

/// Reads the rollout of `db` until `done` holds for `name`'s entry, within `within`; every
/// state seen on the way, in order, without repeats.
async fn follow(
    client: &Client,
    name: &str,
    within: Duration,
    done: impl Fn(&rollsafe_core::rollout::WorkloadRollout) -> bool,
) -> (
    Vec<(RolloutState, i64)>,
    rollsafe_core::rollout::WorkloadRollout,
) {
    let deadline = tokio::time::Instant::now() + within;
    let mut seen = Vec::new();
    loop {
        let view = rollout_of(client, "db").await;
        let workload = view.workloads.into_iter().find(|w| w.name == name).unwrap();
        let step = (workload.state, workload.progress.map_or(0, |p| p.updated));
        if seen.last() != Some(&step) {
            seen.push(step);
        }
        if done(&workload) {
            return (seen, workload);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never got there: {seen:?} {workload:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_slow_rollout_is_seen_moving_and_a_failing_one_stalled_with_the_reason() {
    let mut objects = seed();
    for (name, deadline) in [("slow", 600), ("failing", 100)] {
        let mut deployment = workload("Deployment", name, "db");
        deployment["spec"]["replicas"] = json!(3);
        deployment["spec"]["progressDeadlineSeconds"] = json!(deadline);
        objects.push(deployment);
    }
    let f = Fixture::start_with(objects, |_| {}).await;
    f.emulator
        .change_settings(RolloutPaceChange {
            pod_ready_millis: Some(150),
            progress_deadline_scale: Some(0.01),
        })
        .unwrap();
    f.emulator.add_fault(
        Fault::on("patch", "deployments")
            .namespace(NS)
            .name("failing")
            .always()
            .then(FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "back-off restarting failed container",
            )),
    );
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");
    let client = client(&f, admin());

    let (seen, slow) = follow(&client, "slow", Duration::from_secs(30), |w| {
        w.state.is_final()
    })
    .await;
    assert_eq!(slow.state, RolloutState::Complete, "{seen:?}");
    // On its way: progressing with part of the replicas updated, then more of them.
    let moving: Vec<i64> = seen
        .iter()
        .filter(|(state, _)| *state == RolloutState::Progressing)
        .map(|(_, updated)| *updated)
        .collect();
    assert!(
        moving.iter().any(|updated| *updated < 3) && moving.windows(2).all(|w| w[0] <= w[1]),
        "seen moving up: {seen:?}"
    );
    assert_eq!(slow.restarted_at, restarted_at(&f, "slow"));

    let (seen, failing) = follow(&client, "failing", Duration::from_secs(30), |w| {
        w.state.is_final()
    })
    .await;
    assert_eq!(failing.state, RolloutState::Stalled, "{seen:?}");
    let reason = failing.reason.unwrap();
    assert_eq!(reason.reason, "ProgressDeadlineExceeded");
    assert!(
        reason
            .message
            .as_deref()
            .unwrap_or("")
            .contains("has timed out progressing"),
        "{reason:?}"
    );
    let progress = failing.progress.unwrap();
    assert!(
        progress.ready < progress.desired || progress.updated < progress.desired,
        "{progress:?}"
    );
    f.stop().await;
}

/// Reads the rollout of `db` until `name`'s entry carries a `pods` note, within `within`.
async fn pods_note(f: &Fixture, name: &str, token: &str, within: Duration) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let (status, body) = read(f, "db", token).await;
        assert_eq!(status, 200, "{body}");
        let workload = body["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .cloned()
            .unwrap();
        if workload.get("pods").is_some() {
            return workload;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} never had a pods note: {workload}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A crash-looping StatefulSet has no progress condition: for the whole progress deadline it is
/// `progressing`. Beside that state the view says what its new pods wait for, as soon as they
/// do — a note, not a verdict — when the caller may list pods, and that it could not read them
/// when the caller may not.
#[tokio::test]
async fn a_crash_looping_rollout_carries_its_new_pods_reason_beside_the_progress() {
    let mut objects = seed();
    let mut crashing = workload("StatefulSet", "crashing", "db");
    crashing["spec"]["replicas"] = json!(2);
    objects.push(crashing);
    objects.push(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "pod-reader", "namespace": NS},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}),
    );
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "pod-readers", "namespace": NS},
        "subjects": [{"kind": "Group", "name": "pod-readers", "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": "pod-reader", "apiGroup": "rbac.authorization.k8s.io"}}));
    let f = Fixture::start_with(objects, |s| s.impersonation = true).await;
    f.emulator
        .change_settings(RolloutPaceChange {
            pod_ready_millis: Some(150),
            progress_deadline_scale: None,
        })
        .unwrap();
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .name("crashing")
            .always()
            .then(FaultAction::rollout_fails(
                "CrashLoopBackOff",
                "back-off restarting failed container",
            )),
    );
    let (status, _, body) = f.restart(NS, "db", Some(&admin())).await;
    assert_eq!(status, 200, "{body}");

    let reader = token("reader@x.io", &["developers", "pod-readers"]);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let crashing = loop {
        let crashing = pods_note(&f, "crashing", &reader, Duration::from_secs(20)).await;
        // First `ContainerCreating`, then the back-off.
        if crashing["pods"]["reason"] == "CrashLoopBackOff" {
            break crashing;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no reason: {crashing}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(crashing["state"], "progressing", "a note, not a verdict");
    assert_eq!(crashing["pods"], json!({"reason": "CrashLoopBackOff"}));
    // The pods are listed as the caller, by the workload's selector and update revision.
    let list = f
        .emulator
        .requests()
        .into_iter()
        .rfind(|r| r.is("list", "pods"))
        .unwrap();
    assert_eq!(list.impersonated_user.as_deref(), Some("reader@x.io"));
    assert!(
        list.query_param("labelSelector")
            .is_some_and(|s| s.contains("controller-revision-hash=")),
        "{list:?}"
    );

    // Without the permission: why there is no note.
    let crashing = pods_note(&f, "crashing", &admin(), Duration::from_secs(20)).await;
    assert_eq!(crashing["state"], "progressing");
    assert_eq!(crashing["pods"], json!({"notRead": "forbidden"}));
    // A complete one carries no note.
    let (_, body) = read(&f, "db", &reader).await;
    let api = body["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "api")
        .cloned()
        .unwrap();
    assert_eq!(api["state"], "complete", "{api}");
    assert_eq!(api.get("pods"), None, "{api}");
    f.stop().await;
}
