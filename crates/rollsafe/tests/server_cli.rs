//! The commands that call a server, when no response arrives: the server and a fixed cause are
//! named, never the token or the HTTP stack's text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::net::TcpListener;

use assert_cmd::Command;

const TOKEN: &str = "not-a-real-token-0123456789";

fn rollsafe(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(args)
        .args(["--token", TOKEN, "demo/db-credentials"])
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_TOKEN")
        .env_remove("ROLLSAFE_NAMESPACE")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_refused_connection_names_the_server_and_the_cause() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/base?q=1");
    for command in ["restart", "consumers"] {
        let (code, stdout, stderr) = rollsafe(&[command, "--server", &url]);
        assert_eq!(
            (code, stdout.as_str(), stderr.as_str()),
            (
                Some(1),
                "",
                format!(
                    "rollsafe: no response from the server at http://127.0.0.1:{port}: the \
                     connection was refused\n"
                )
                .as_str()
            ),
            "{command}"
        );
    }
}

#[test]
fn a_server_that_does_not_speak_tls_is_a_tls_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buffer = [0u8; 512];
            let _ = stream.read(&mut buffer);
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("https://127.0.0.1:{port}");
    let (code, _, stderr) = rollsafe(&["restart", "--server", &url]);
    assert_eq!(code, Some(1));
    assert!(
        stderr.starts_with(&format!(
            "rollsafe: no response from the server at https://127.0.0.1:{port}: the TLS handshake failed"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN));
}
