//! What the audit file and the logs hold, and never hold.

use super::*;

#[tokio::test]
async fn audit_file_and_logs_hold_no_secret_token_uid_or_upstream_text() {
    let f = Fixture::start(|s| s.impersonation = true).await;
    let upstream = "upstream-detail-do-not-echo";
    let status = |code| FaultAction::Status {
        code,
        reason: None,
        message: Some(upstream.into()),
        retry_after_seconds: None,
        plain_text: false,
    };
    f.emulator.add_fault(
        Fault::on("patch", "statefulsets")
            .namespace(NS)
            .nth(1)
            .then(status(403)),
    );
    f.emulator.add_fault(
        Fault::on("list", "daemonsets")
            .namespace(NS)
            .nth(2)
            .then(status(500)),
    );
    f.emulator.add_fault(
        Fault::on("get", "secrets")
            .namespace(NS)
            .name("db")
            .nth(3)
            .then(status(502)),
    );
    let tokens = [
        admin(),
        token("dave@x.io", &["developers"]),
        token("carol@x.io", &["developers"]),
    ];
    for token in &tokens {
        for name in ["db", "locked", "db-v1", "missing"] {
            f.restart(NS, name, Some(token)).await;
        }
    }
    let logs = String::from_utf8_lossy(&captured_logs().lock().unwrap()).into_owned();
    assert!(logs.contains("restart allowed"), "logs are captured");
    let audit = std::fs::read_to_string(&f.audit_file).unwrap();
    let results: std::collections::BTreeSet<_> = f
        .audit_lines()
        .iter()
        .map(|l| l["result"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        results,
        ["allow", "deny", "error"].map(String::from).into(),
        "{audit}"
    );
    let mut forbidden: Vec<String> = vec![SECRET_VALUE.into(), SECRET.into(), upstream.into()];
    forbidden.extend(tokens.iter().cloned());
    for resource in ["deployments", "statefulsets", "daemonsets", "secrets"] {
        for object in f.emulator.list_objects(resource, Some(NS)) {
            forbidden.push(object["metadata"]["uid"].as_str().unwrap().to_owned());
            forbidden.push(format!(
                "\"{}\"",
                object["metadata"]["resourceVersion"].as_str().unwrap()
            ));
        }
    }
    for needle in &forbidden {
        assert!(
            !audit.contains(needle.as_str()),
            "the audit file holds {needle}"
        );
        assert!(!logs.contains(needle.as_str()), "the logs hold {needle}");
    }
    f.stop().await;
}
