//! `rollsafe emulator`: one JSON line when ready, a working kubeconfig, clean exit on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
#[cfg(unix)]
fn prints_one_ready_line_and_exits_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let seed = dir.path().join("seed.yaml");
    std::fs::write(
        &seed,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: shop}\ndata: {a: '1'}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: db, namespace: shop}\nstringData: {p: x}\n",
    )
    .unwrap();
    let identities = dir.path().join("ids.yaml");
    std::fs::write(
        &identities,
        "- name: alice\n  token: alice-token\n  groups: [devs]\n",
    )
    .unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rollsafe"))
        .args(["emulator", "--listen", "127.0.0.1:0", "--seed"])
        .arg(&seed)
        .arg("--identities")
        .arg(&identities)
        .arg("--kubeconfig-out")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert!(
        ready["url"]
            .as_str()
            .unwrap()
            .starts_with("http://127.0.0.1:")
    );
    assert_eq!(ready["kubeconfig"], kubeconfig.display().to_string());
    let config = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(config.contains("current-context: \"admin\""));
    assert!(config.contains("- name: \"alice\""));

    // The admin API answers and the seeds are there.
    let url = ready["url"]
        .as_str()
        .unwrap()
        .trim_start_matches("http://")
        .to_string();
    let body = http_get(
        &url,
        "/_emulator/objects?resource=configmaps&namespace=shop&name=cfg",
    );
    assert!(body.contains("\"cfg\""), "{body}");

    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(Instant::now() < deadline, "did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
    assert!(rest.is_empty(), "exactly one line on stdout, then {rest:?}");
}

fn http_get(addr: &str, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    // The admin API answers only loopback `Host` values, as a browser on this machine would send.
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn a_malformed_identities_file_is_not_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("identities.yaml");
    std::fs::write(
        &path,
        "- name: a\n  token: supersecret-token-123\n  groups: [x\n",
    )
    .unwrap();
    let output = Command::new(assert_cmd::cargo::cargo_bin("rollsafe"))
        .args(["emulator", "--listen", "127.0.0.1:0", "--identities"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("identities file"), "{stderr}");
    assert!(stderr.contains("line 3"), "{stderr}");
    assert!(!stderr.contains("supersecret-token-123"), "{stderr}");
    assert!(output.stdout.is_empty());
}
