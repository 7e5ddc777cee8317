//! `rollsafe sandbox -o json` as a user runs it: one JSON line on stdout, a restart end to end
//! through the HTTP API and `rollsafe restart`, the rollouts recorded by the embedded emulator
//! (read with real kubectl), a clean exit on SIGTERM — and nothing secret in any output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rollsafe_testing::kubectl;
use serde_json::Value;

const DEADLINE: Duration = Duration::from_secs(60);

fn rollsafe() -> PathBuf {
    assert_cmd::cargo::cargo_bin("rollsafe")
}

struct Sandbox {
    child: Child,
    ready: Value,
    stdout_rest: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn start() -> Sandbox {
    let mut child = Command::new(rollsafe())
        .args(["sandbox", "--listen", "127.0.0.1:0", "-o", "json"])
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(DEADLINE)
        .expect("the sandbox printed its ready line");
    let ready: Value = serde_json::from_str(&first).unwrap();
    Sandbox {
        child,
        ready,
        stdout_rest: rx,
        stderr,
    }
}

/// The consumers preview of demo/db-credentials once the controller's published settings are
/// read (the controller publishes them as it starts), within [`DEADLINE`].
fn published_preview(url: &str, token: &str) -> Value {
    let addr = url.trim_start_matches("http://").to_owned();
    let request = format!(
        "GET /api/namespaces/demo/secrets/db-credentials/consumers HTTP/1.1\r\n\
         Host: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = Instant::now();
    loop {
        let response = runtime
            .block_on(rollsafe_testing::http::exchange(
                &addr,
                request.as_bytes(),
                DEADLINE,
            ))
            .expect("the preview answered");
        assert_eq!(response.status, 200, "{}", response.json());
        let preview = response.json();
        if preview["controller"]["settings"] == "published" || started.elapsed() > DEADLINE {
            return preview;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn run(program: &PathBuf, args: &[&str]) -> (i32, String, String) {
    let output = Command::new(program).args(args).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn sandbox_end_to_end() {
    let Some(kubectl) = kubectl() else {
        return;
    };
    let mut sandbox = start();
    let ready = sandbox.ready.clone();
    let keys: Vec<_> = ready.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        keys,
        [
            "url",
            "token",
            "kubeconfig",
            "namespace",
            "page",
            "metrics",
            "controllerMetrics"
        ]
    );
    let url = ready["url"].as_str().unwrap();
    assert_eq!(ready["page"], format!("{url}/"), "the web page's URL");
    let token = ready["token"].as_str().unwrap();
    let kubeconfig = ready["kubeconfig"].as_str().unwrap();
    assert_eq!(ready["namespace"], "demo");

    // The page's Watched column: the sandbox's controller runs with --all and publishes that on
    // its Lease, so every demo consumer of db-credentials is watched, none "not opted in".
    let preview = published_preview(url, token);
    assert_eq!(preview["controller"]["settings"], "published", "{preview}");
    assert_eq!(
        preview["controller"]["lease"], "demo/rollsafe-watch",
        "{preview}"
    );
    assert_eq!(preview["controller"]["all"], true, "{preview}");
    let workloads = preview["workloads"].as_array().unwrap();
    assert_eq!(workloads.len(), 4, "{preview}");
    for workload in workloads {
        assert_eq!(
            workload["controller"],
            serde_json::json!({"watched": "yes", "because": "all"}),
            "{workload}"
        );
    }

    let (code, stdout, stderr) = run(
        &rollsafe(),
        &[
            "restart",
            "--server",
            url,
            "--token",
            token,
            "demo/db-credentials",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let result: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(result["status"], "requested");
    let requested: Vec<_> = result["requested"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            format!(
                "{}/{}",
                w["kind"].as_str().unwrap(),
                w["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        requested,
        [
            "Deployment/api-server",
            "Deployment/batch-reports",
            "StatefulSet/worker",
            "DaemonSet/log-agent"
        ]
    );

    // For people: the paused one is marked, from the server's preview (the JSON has no mark).
    let (code, stdout, stderr) = run(
        &rollsafe(),
        &[
            "restart",
            "--server",
            url,
            "--token",
            token,
            "-o",
            "text",
            "demo/db-credentials",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(
            "requested  Deployment/batch-reports (will not roll now: the Deployment is paused; \
             it rolls when it is resumed)\nrequested  StatefulSet/worker\n"
        ),
        "{stdout}"
    );

    // The history snapshot answers like a missing Secret; the ACL refuses bob on payments-key.
    let (code, _, stderr) = run(
        &rollsafe(),
        &[
            "restart",
            "--server",
            url,
            "--token",
            token,
            "demo/db-credentials-v1",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("HTTP 404: Secret \"db-credentials-v1\" not found"),
        "{stderr}"
    );
    let (code, _, stderr) = run(
        &rollsafe(),
        &["restart", "--server", url, "demo/db-credentials"],
    );
    assert_eq!(code, 1);
    assert!(
        stderr.contains("HTTP 401: Authentication required"),
        "{stderr}"
    );
    assert!(stderr.contains("--token or ROLLSAFE_TOKEN"), "{stderr}");
    let (code, _, stderr) = run(
        &rollsafe(),
        &["consumers", "--server", url, "demo/db-credentials"],
    );
    assert_eq!(code, 1);
    assert!(stderr.contains("--token or ROLLSAFE_TOKEN"), "{stderr}");

    // The emulator recorded the rollouts; the paused Deployment's template changed without rolling.
    let (code, rollouts, stderr) = run(
        &kubectl,
        &[
            "--kubeconfig",
            kubeconfig,
            "get",
            "--raw",
            "/_emulator/rollouts",
        ],
    );
    assert_eq!(code, 0, "{stderr}");
    let rollouts: Value = serde_json::from_str(&rollouts).unwrap();
    let summary: Vec<_> = rollouts
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["rolled"].as_bool().unwrap(),
            )
        })
        .collect();
    // Two restarts (JSON, then text), four workloads each.
    assert_eq!(summary.len(), 8);
    assert!(
        summary.contains(&("batch-reports".to_owned(), false)),
        "{summary:?}"
    );
    assert!(
        summary.contains(&("api-server".to_owned(), true)),
        "{summary:?}"
    );
    let (code, annotation, _) = run(
        &kubectl,
        &[
            "--kubeconfig",
            kubeconfig,
            "-n",
            "demo",
            "get",
            "deployment",
            "api-server",
            "-o",
            "jsonpath={.spec.template.metadata.annotations.krypton\\.io/restarted-at}",
        ],
    );
    assert_eq!(code, 0);
    // One RFC 3339 UTC timestamp with milliseconds (docs/restart-contract.md).
    assert!(
        annotation.ends_with('Z') && annotation.len() == 24,
        "{annotation}"
    );
    let (_, uids, _) = run(
        &kubectl,
        &[
            "--kubeconfig",
            kubeconfig,
            "-n",
            "demo",
            "get",
            "deploy,sts,ds,secrets",
            "-o",
            "jsonpath={.items[*].metadata.uid}",
        ],
    );
    let uids: Vec<String> = uids.split_whitespace().map(str::to_owned).collect();
    assert!(uids.len() >= 10);

    // SIGTERM: a clean exit, within a deadline.
    let status = Command::new("kill")
        .args(["-TERM", &sandbox.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    let exit = loop {
        if let Some(exit) = sandbox.child.try_wait().unwrap() {
            break exit;
        }
        assert!(started.elapsed() < DEADLINE, "the sandbox did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit:?}");
    let extra_stdout: Vec<String> = sandbox.stdout_rest.try_iter().collect();
    assert!(
        extra_stdout.is_empty(),
        "stdout must hold exactly one line: {extra_stdout:?}"
    );
    let stderr = sandbox.stderr.join().unwrap();
    assert!(
        stderr.contains("\"action\":\"secret.restart\""),
        "audit lines go to stderr with -o json"
    );
    assert!(stderr.contains("\"result\":\"allow\""));

    // Nothing secret anywhere: Secret values, the token, uids.
    let everything = format!("{stdout}\n{stderr}\n{}", extra_stdout.join("\n"));
    for forbidden in [
        "sandbox-password-not-a-real-one",
        "an-older-sandbox-password",
        "sandbox-payments-key",
        "sandbox-certificate",
        token,
    ] {
        assert!(!everything.contains(forbidden), "leaked {forbidden}");
    }
    for uid in &uids {
        assert!(!everything.contains(uid.as_str()), "leaked a uid");
    }
}

/// `rollsafe sandbox` as a newcomer starts it (text): the banner names the binary they ran,
/// the ports actually listened on — the metrics listener answers — and the flap stop with how
/// to resume a halted workload.
#[test]
fn the_banner_shows_the_binary_the_ports_and_how_to_resume() {
    let mut child = Command::new(rollsafe())
        .args(["sandbox", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let started = Instant::now();
    let mut banner = Vec::new();
    loop {
        let left = DEADLINE.saturating_sub(started.elapsed());
        let line = rx
            .recv_timeout(left)
            .expect("the sandbox printed its banner");
        let done = line == "Press Ctrl-C to stop.";
        banner.push(line);
        if done {
            break;
        }
    }
    let text = banner.join("\n");
    let binary = rollsafe().display().to_string();
    assert!(
        text.contains(&format!("  {binary} restart --server http://127.0.0.1:")),
        "the binary form: {text}"
    );
    assert!(
        !text.contains(":0/") && !text.contains(":0 "),
        "a port 0: {text}"
    );
    let metrics = banner
        .iter()
        .find_map(|l| l.trim().strip_prefix("Metrics"))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a Metrics line");
    let address = metrics
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("http://ADDR/metrics");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    std::io::Write::write_all(&mut stream, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
        "{answer}"
    );
    // The controller's own metrics, on a listener of its own.
    let controller = banner
        .iter()
        .find_map(|l| l.trim().strip_prefix("Controller"))
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a Controller line");
    let address = controller
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/metrics"))
        .expect("http://ADDR/metrics");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    std::io::Write::write_all(&mut stream, b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.contains("rollsafe_watch_synced 1"), "{answer}");
    assert!(
        text.contains("A workload rolled 20 times within 10 minutes is halted"),
        "{text}"
    );
    assert!(
        text.contains("annotate deployment NAME rollsafe.dev/halted-"),
        "{text}"
    );
    // Every kind stalls within seconds: the StatefulSets' and DaemonSets' deadline is scaled as
    // the emulator scales the Deployments' own, and the command says so.
    assert!(
        text.contains("--progressive --progress-deadline 9s -o text demo/db-credentials"),
        "{text}"
    );
    // The story is true: the fault fires once, and the fix is a good value in the Secret.
    assert!(
        text.contains("(the fault fires\nonce: the revision after it is healthy)"),
        "{text}"
    );
    assert!(
        text.contains(
            "-n demo patch secret db-credentials -p '{\"stringData\":{\"password\":\"fixed\"}}'"
        ),
        "{text}"
    );
    assert!(
        !text.contains("The fixed rotation rolls the canary again"),
        "{text}"
    );

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(started.elapsed() < DEADLINE, "the sandbox did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The banner's safe-rollout story, command for command: a bad rotation stops at the canary
/// (exit 4, every other consumer held back and unpatched), the fixed one completes.
#[test]
fn the_banner_story_stops_a_bad_rotation_at_the_canary_then_completes_the_fix() {
    let Some(kubectl) = kubectl() else {
        return;
    };
    let mut sandbox = start();
    let kubeconfig = sandbox.ready["kubeconfig"].as_str().unwrap().to_owned();
    let (url, token) = (
        sandbox.ready["url"].as_str().unwrap().to_owned(),
        sandbox.ready["token"].as_str().unwrap().to_owned(),
    );
    // Through the server: the rollouts followed to their end with the rollout route.
    let server = |extra: &[&str]| {
        let mut args = vec!["restart", "--server", &url, "--token", &token];
        args.extend_from_slice(extra);
        args.push("demo/db-credentials");
        run(&rollsafe(), &args)
    };
    let (code, stdout, stderr) = server(&["--wait"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let waited: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(waited["result"]["status"], "requested");
    assert_eq!(
        waited["rollout"]["counts"],
        serde_json::json!({"complete": 3, "deferred": 1}),
        "{waited}"
    );
    assert!(
        stderr.contains(" DaemonSet/log-agent "),
        "progress lines: {stderr}"
    );
    let (code, _, stderr) = server(&["--progressive"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("use rollsafe restart-consumers --progressive"),
        "{stderr}"
    );
    // The emulator's address, as the banner prints it.
    let (code, emulator, _) = run(
        &kubectl,
        &[
            "--kubeconfig",
            &kubeconfig,
            "config",
            "view",
            "--minify",
            "-o",
            "jsonpath={.clusters[0].cluster.server}",
        ],
    );
    assert_eq!(code, 0);
    // One port serves both; the banner prints the plain HTTP form.
    let emulator = emulator.replacen("https://", "http://", 1);
    let (code, answer, stderr) = run(
        &PathBuf::from("curl"),
        &[
            "-s",
            "-f",
            "-X",
            "POST",
            &format!("{emulator}/_emulator/faults"),
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"verb":"patch","resource":"deployments","namespace":"demo","name":"api-server","action":{"type":"rolloutFails","reason":"CrashLoopBackOff","message":"password authentication failed"}}"#,
        ],
    );
    assert_eq!(code, 0, "{answer}{stderr}");
    let progressive = |output: &str| {
        run(
            &rollsafe(),
            &[
                "restart-consumers",
                "--kubeconfig",
                &kubeconfig,
                "--progressive",
                "-o",
                output,
                "demo/db-credentials",
            ],
        )
    };
    let worker_template = || {
        run(
            &kubectl,
            &[
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "demo",
                "get",
                "sts",
                "worker",
                "-o",
                "jsonpath={.spec.template.metadata.annotations}",
            ],
        )
        .1
    };
    let worker_before = worker_template();
    let started = Instant::now();
    let (code, stdout, stderr) = progressive("json");
    assert_eq!(code, 4, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["stopped"]["cause"], "stalled", "{report}");
    assert_eq!(report["stopped"]["workload"]["name"], "api-server");
    assert_eq!(
        report["stopped"]["workload"]["reason"]["podReason"],
        "CrashLoopBackOff"
    );
    let held: Vec<&str> = report["heldBack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(held, ["batch-reports", "worker", "log-agent"], "{report}");
    assert_eq!(
        worker_template(),
        worker_before,
        "the held-back StatefulSet was not patched"
    );

    assert!(
        started.elapsed() < DEADLINE,
        "the canary's stall took {:?}",
        started.elapsed()
    );

    // The fix: a good password in the Secret. The controller rolls every consumer once for it,
    // the canary's next revision is healthy (the fault fired once), and every rollout completes.
    let hash = |kind: &str, name: &str| {
        run(
            &kubectl,
            &[
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "demo",
                "get",
                kind,
                name,
                "-o",
                r"jsonpath={.spec.template.metadata.annotations.rollsafe\.dev/config-hash}",
            ],
        )
        .1
    };
    let consumers = [
        ("deployment", "api-server"),
        ("deployment", "batch-reports"),
        ("statefulset", "worker"),
        ("daemonset", "log-agent"),
    ];
    let before: Vec<String> = consumers.iter().map(|(k, n)| hash(k, n)).collect();
    let (code, stdout, stderr) = run(
        &kubectl,
        &[
            "--kubeconfig",
            &kubeconfig,
            "-n",
            "demo",
            "patch",
            "secret",
            "db-credentials",
            "-p",
            r#"{"stringData":{"password":"fixed"}}"#,
        ],
    );
    assert_eq!(code, 0, "{stdout}{stderr}");
    let started = Instant::now();
    loop {
        let rolled = consumers
            .iter()
            .zip(&before)
            .all(|((kind, name), before)| hash(kind, name) != *before);
        if rolled {
            break;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "the controller did not roll every consumer for the fix"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    // The paused batch-reports is patched too; it rolls when it is resumed.
    for (kind, name) in consumers.into_iter().filter(|(_, n)| *n != "batch-reports") {
        let (code, stdout, stderr) = run(
            &kubectl,
            &[
                "--kubeconfig",
                &kubeconfig,
                "-n",
                "demo",
                "rollout",
                "status",
                &format!("{kind}/{name}"),
                "--timeout=60s",
            ],
        );
        assert_eq!(code, 0, "{kind}/{name}: {stdout}{stderr}");
    }
    sandbox.child.kill().unwrap();
    let _ = sandbox.child.wait();
}

/// A StatefulSet that stalls in the sandbox stops a progressive restart within seconds, as a
/// Deployment does, with the deadline the banner passes.
#[test]
fn a_stateful_set_stall_stops_a_progressive_restart_within_seconds() {
    let mut sandbox = start();
    let kubeconfig = sandbox.ready["kubeconfig"].as_str().unwrap().to_owned();
    let emulator = emulator_url(&kubeconfig);
    let (code, answer, stderr) = run(
        &PathBuf::from("curl"),
        &[
            "-s",
            "-f",
            "-X",
            "POST",
            &format!("{emulator}/_emulator/faults"),
            "-H",
            "Content-Type: application/json",
            "-d",
            r#"{"verb":"patch","resource":"statefulsets","namespace":"demo","name":"worker","action":{"type":"rolloutFails","reason":"CrashLoopBackOff","message":"password authentication failed"}}"#,
        ],
    );
    assert_eq!(code, 0, "{answer}{stderr}");
    let started = Instant::now();
    let (code, stdout, stderr) = run(
        &rollsafe(),
        &[
            "restart-consumers",
            "--kubeconfig",
            &kubeconfig,
            "--progressive",
            "--progress-deadline",
            "9s",
            "--timeout",
            "5m",
            "-o",
            "json",
            "demo/db-credentials",
        ],
    );
    assert_eq!(code, 4, "{stdout}{stderr}");
    let report: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report["stopped"]["cause"], "stalled", "{report}");
    assert_eq!(report["stopped"]["workload"]["kind"], "StatefulSet");
    assert_eq!(report["stopped"]["workload"]["name"], "worker");
    assert!(
        started.elapsed() < DEADLINE,
        "the StatefulSet's stall took {:?}",
        started.elapsed()
    );
    sandbox.child.kill().unwrap();
    let _ = sandbox.child.wait();
}

/// The emulator's address from the sandbox's kubeconfig, in the plain HTTP form the banner
/// prints (one port serves both).
fn emulator_url(kubeconfig: &str) -> String {
    let text = std::fs::read_to_string(kubeconfig).unwrap();
    let server = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("server:"))
        .map(|s| s.trim().trim_matches('"').to_owned())
        .expect("a server in the kubeconfig");
    server.replacen("https://", "http://", 1)
}

/// The banner's operator-owned workload: rotating its credentials restarts the prometheus
/// StatefulSet by eviction — read back with real kubectl as the banner says: a `Rolled` Event
/// saying so, then `RolloutComplete` with both pods evicted, and the template untouched.
#[test]
fn the_operator_owned_stateful_set_restarts_by_eviction() {
    let Some(kubectl) = kubectl() else {
        assert!(std::env::var_os("CI").is_none(), "kubectl is missing");
        return;
    };
    let mut sandbox = start();
    let kubeconfig = sandbox.ready["kubeconfig"].as_str().unwrap().to_owned();
    let kube = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", kubeconfig.as_str(), "-n", "demo"];
        all.extend_from_slice(args);
        run(&kubectl, &all)
    };
    let (code, _, stderr) = kube(&["get", "statefulset", "prometheus", "-o", "json"]);
    assert_eq!(code, 0, "{stderr}");
    // Adopted first (the controller starts with the sandbox), then rotated.
    let adopted = Instant::now();
    loop {
        let (_, out, _) = kube(&["get", "statefulset", "prometheus", "-o", "json"]);
        let object: Value = serde_json::from_str(&out).unwrap();
        if object["metadata"]["annotations"]["rollsafe.dev/config-record"].is_string() {
            assert_eq!(
                object["metadata"]["ownerReferences"][0]["kind"], "MetricsStack",
                "operator-owned"
            );
            break;
        }
        assert!(
            adopted.elapsed() < DEADLINE,
            "prometheus was not adopted: {object}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, _, stderr) = kube(&[
        "patch",
        "secret",
        "remote-write-credentials",
        "-p",
        r#"{"stringData":{"password":"rotated"}}"#,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let started = Instant::now();
    let messages = |reason: &str| -> Vec<String> {
        let (_, out, _) = kube(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name=prometheus,reason={reason}"),
            "-o",
            "json",
        ]);
        let list: Value = serde_json::from_str(&out).unwrap_or_default();
        list["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let complete = loop {
        let found = messages("RolloutComplete");
        if !found.is_empty() {
            break found;
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no RolloutComplete on prometheus; Rolled: {:?}",
            messages("Rolled")
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(
        complete[0].starts_with("Restarted by eviction")
            && complete[0].contains("2 pod(s) evicted"),
        "{complete:?}"
    );
    let rolled = messages("Rolled");
    assert!(rolled[0].contains("Restarting by eviction"), "{rolled:?}");
    let (_, out, _) = kube(&["get", "statefulset", "prometheus", "-o", "json"]);
    let object: Value = serde_json::from_str(&out).unwrap();
    assert!(
        object["spec"]["template"]["metadata"]["annotations"]
            .get("rollsafe.dev/config-hash")
            .is_none(),
        "the template is not written: {}",
        object["spec"]["template"]
    );
    sandbox.child.kill().unwrap();
    let _ = sandbox.child.wait();
}
