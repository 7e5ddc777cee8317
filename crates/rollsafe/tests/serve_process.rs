//! `rollsafe serve` as a child process: a stdout and stderr nobody reads cannot stop it, and a
//! `kill -9` in the middle of concurrent restarts leaves an intent record for every rollout the
//! cluster saw, and no torn audit line.

#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::time::Duration;

use rollsafe_emulator::{Fault, FaultAction};
use rollsafe_testing::http as wire;
use rollsafe_testing::{TestCluster, Workload, eventually, in_flight};
use serde_json::{Value, json};

const NS: &str = "team-a";

/// A Deployment in [`NS`] reading Secret `secret` with `envFrom`.
fn workload(name: &str, secret: &str) -> Value {
    Workload::deployment(name)
        .namespace(NS)
        .consuming_secret_via_env_from(secret)
        .build()
}

/// A running `rollsafe serve`, its pipes held open (and unread unless drained).
struct Served {
    child: Child,
    api: String,
    admin: String,
    _stderr: Option<BufReader<ChildStderr>>,
}

/// What happens to the child's stdout and stderr once it listens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pipes {
    /// Nobody reads them again.
    Stuck,
    /// Read and discarded by background threads.
    Drained,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `rollsafe serve` against the emulator's kubeconfig and reads stderr until the
/// listeners are logged; from then on the pipes are `pipes`.
fn serve(kubeconfig: &Path, audit_file: Option<&Path>, pipes: Pipes) -> Served {
    let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
    command
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--restart-enabled",
            "true",
            "--auth-disabled",
            "true",
            "--namespace",
            NS,
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .env("RUST_LOG", "debug")
        .env_remove("NO_COLOR")
        .env_remove("SESSION_SECRET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, _) in std::env::vars() {
        if name.starts_with("KRYPTON_") || name.starts_with("ROLLSAFE_") {
            command.env_remove(name);
        }
    }
    if let Some(path) = audit_file {
        command.arg("--audit-file").arg(path);
    }
    let mut child = command.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let (mut api, mut admin) = (None, None);
    let mut line = String::new();
    while api.is_none() || admin.is_none() {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "serve exited before listening"
        );
        assert!(
            !line.contains('\u{1b}'),
            "no colour codes when stderr is not a terminal: {line:?}"
        );
        // A server logs JSON by default: one object per line.
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|error| panic!("not a JSON log line ({error}): {line:?}"));
        let fields = &event["fields"];
        if fields["message"] == "serving" {
            api = fields["api"].as_str().map(str::to_owned);
            admin = fields["admin"].as_str().map(str::to_owned);
        }
    }
    let stderr = match pipes {
        Pipes::Stuck => Some(stderr),
        Pipes::Drained => {
            let mut stdout = child.stdout.take().unwrap();
            std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            None
        }
    };
    Served {
        child,
        api: api.unwrap(),
        admin: admin.unwrap(),
        _stderr: stderr,
    }
}

/// A cluster with `secrets` Secrets, each consumed by `per_secret` Deployments.
async fn cluster(secrets: usize, per_secret: usize) -> TestCluster {
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for s in 0..secrets {
        objects.push(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("s{s}"), "namespace": NS}, "stringData": {"k": "v"}}));
        for w in 0..per_secret {
            objects.push(workload(&format!("d{s}-{w}"), &format!("s{s}")));
        }
    }
    TestCluster::start(objects).await
}

/// POST a restart (the dev user of AUTH_DISABLED needs no token).
async fn restart(addr: &str, name: &str, limit: Duration) -> Option<wire::Response> {
    let request = format!(
        "POST /api/namespaces/{NS}/secrets/{name}/restart-consumers HTTP/1.1\r\n\
         Host: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    wire::exchange(addr, request.as_bytes(), limit).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdout_and_stderr_nobody_reads_do_not_stop_the_server() {
    let TestCluster {
        emu,
        kubeconfig,
        dir: _dir,
        ..
    } = cluster(1, 2).await;
    let served = serve(&kubeconfig, None, Pipes::Stuck);
    // Each refusal below writes an audit line to stdout (about 230 bytes) and log lines to
    // stderr: far more than a pipe holds (64 KiB) and than the copy queue holds
    // (STREAM_QUEUE_LINES), and nobody reads either pipe.
    let requests = rollsafe_server::output::STREAM_QUEUE_LINES + 1_000;
    for i in 0..requests {
        let request = "POST /api/namespaces/elsewhere/secrets/s0/restart-consumers HTTP/1.1\r\n\
             Host: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let response = wire::exchange(&served.api, request.as_bytes(), Duration::from_secs(10))
            .await
            .unwrap_or_else(|| panic!("request {i} got no answer: the server is stuck on a pipe"));
        assert_eq!(response.status, 403, "request {i}");
    }
    for (addr, path) in [
        (&served.api, "/healthz"),
        (&served.api, "/livez"),
        (&served.admin, "/healthz"),
        (&served.admin, "/livez"),
        (&served.admin, "/metrics"),
    ] {
        let response = wire::get(addr, path)
            .await
            .unwrap_or_else(|| panic!("{path} got no answer"));
        assert_eq!(response.status, 200, "{path}");
    }
    let metrics = wire::get(&served.admin, "/metrics").await.unwrap();
    let text = String::from_utf8_lossy(&metrics.body).into_owned();
    let counter = |name: &str| -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{name} missing: {text}"))
    };
    assert!(
        counter("rollsafe_audit_stream_dropped_total") > 0,
        "the audit copies beyond the queue were dropped and counted"
    );
    assert!(
        counter("rollsafe_log_lines_dropped_total") > 0,
        "log lines beyond the queue were dropped and counted"
    );
    let response = restart(&served.api, "s0", Duration::from_secs(30))
        .await
        .expect("a restart still answers");
    assert_eq!(response.status, 200, "{:?}", response.json());
    assert_eq!(response.json()["status"], "requested");
    assert_eq!(emu.rollouts().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_under_load_leaves_an_intent_for_every_rollout_and_no_torn_line() {
    const SECRETS: usize = 32;
    const PER_SECRET: usize = 3;
    const APPLIED: u32 = 40;
    let TestCluster {
        emu,
        kubeconfig,
        dir,
        ..
    } = cluster(SECRETS, PER_SECRET).await;
    let audit_file = dir.path().join("audit.log");
    // The first patches go through; every later one is held open far beyond the test.
    emu.add_fault(
        Fault::on("patch", "deployments")
            .nth(APPLIED + 1)
            .times(0)
            .then(FaultAction::Delay { millis: 600_000 }),
    );
    let served = serve(&kubeconfig, Some(&audit_file), Pipes::Drained);
    let runs: Vec<_> = (0..SECRETS)
        .map(|s| {
            let api = served.api.clone();
            tokio::spawn(
                async move { restart(&api, &format!("s{s}"), Duration::from_secs(600)).await },
            )
        })
        .collect();
    eventually(
        "the runs reach the held point",
        Duration::from_secs(60),
        || {
            let held = emu.rollouts().len() >= APPLIED as usize
                && in_flight(&emu, "patch", "deployments") >= 4;
            async move { held.then_some(()) }
        },
    )
    .await;
    // kill -9 at the held point.
    drop(served);
    for run in runs {
        run.abort();
    }
    emu.clear_faults();

    // The restarted server appends to the same file and serves.
    let served = serve(&kubeconfig, Some(&audit_file), Pipes::Drained);
    let response = restart(&served.api, "s0", Duration::from_secs(60))
        .await
        .expect("the restarted server answers");
    assert_eq!(response.status, 200, "{:?}", response.json());
    drop(served);

    let text = std::fs::read_to_string(&audit_file).unwrap();
    let records: Vec<Value> = text
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|_| panic!("a torn audit line: {line:?}"))
        })
        .collect();
    let mut planned: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    let mut results = std::collections::BTreeSet::new();
    for record in &records {
        match record["stage"].as_str() {
            Some("intent") => {
                for target in record["planned"].as_array().unwrap() {
                    *planned
                        .entry((
                            record["namespace"].as_str().unwrap().to_owned(),
                            target["kind"].as_str().unwrap().to_owned(),
                            target["name"].as_str().unwrap().to_owned(),
                        ))
                        .or_default() += 1;
                }
            }
            _ => {
                results.insert(record["requestId"].as_str().unwrap().to_owned());
            }
        }
    }
    let rollouts = emu.rollouts();
    assert!(
        rollouts.len() > APPLIED as usize,
        "the second server rolled too"
    );
    let mut rolled: BTreeMap<(String, String, String), usize> = BTreeMap::new();
    for rollout in &rollouts {
        *rolled
            .entry((
                rollout.namespace.clone(),
                rollout.kind.clone(),
                rollout.name.clone(),
            ))
            .or_default() += 1;
    }
    for (workload, count) in &rolled {
        assert!(
            planned.get(workload).copied().unwrap_or(0) >= *count,
            "{workload:?} rolled {count} times with fewer intent records: {planned:?}"
        );
    }
    let interrupted = records
        .iter()
        .filter(|r| r["stage"] == "intent")
        .filter(|r| !results.contains(r["requestId"].as_str().unwrap()))
        .count();
    assert!(
        interrupted > 0,
        "some runs were killed after their intent and before their result"
    );
}

/// `rollsafe consumers --server`: the preview through the server's API, printed by the CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_previews_consumers_through_the_server() {
    let TestCluster {
        emu,
        kubeconfig,
        dir: _dir,
        ..
    } = cluster(1, 2).await;
    let served = serve(&kubeconfig, None, Pipes::Drained);
    let server = format!("http://{}", served.api);
    let cli = move |secret: &str, output: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_rollsafe"));
        for (name, _) in std::env::vars() {
            if name.starts_with("ROLLSAFE_") {
                command.env_remove(name);
            }
        }
        command
            .args([
                "consumers",
                "--server",
                &server,
                "-o",
                output,
                "-n",
                NS,
                secret,
            ])
            .output()
            .unwrap()
    };
    let json = tokio::task::spawn_blocking({
        let cli = cli.clone();
        move || cli("s0", "json")
    })
    .await
    .unwrap();
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let preview: Value = serde_json::from_slice(&json.stdout).unwrap();
    let names: Vec<&str> = preview["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["d0-0", "d0-1"]);
    assert!(preview["workloads"][0]["rollsNow"].as_bool().unwrap());
    let text = tokio::task::spawn_blocking({
        let cli = cli.clone();
        move || cli("s0", "text")
    })
    .await
    .unwrap();
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("consumer   Deployment/d0-0"), "{text}");
    let missing = tokio::task::spawn_blocking(move || cli("nope", "json"))
        .await
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "rollsafe: HTTP 404: Secret \"nope\" not found"
    );
    assert!(
        emu.requests()
            .iter()
            .all(|r| r.verb.as_deref() != Some("patch")),
        "a preview patches nothing"
    );
    drop(served);
}
