//! `control-plane`: builds what is missing, starts a real Kubernetes control plane on loopback
//! (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok), prints one JSON
//! line on stdout when it is ready —
//! `{"version", "kubeconfig", "server", "users": {"alice", "bob"}, "logs"}` — and on SIGTERM or
//! Ctrl-C stops every process it started and removes its files.
//!
//! With `--watch-stdin` it also stops when its standard input closes, so a parent that holds
//! the other end (`cargo xtask test`) never leaves it behind, however the parent ends — also
//! while it is still starting (the start is dropped, which stops what it had started).
//!
//! Exit codes: 0 after a clean stop, 1 when the control plane could not be built or started
//! (one line on stderr saying why, and the tails of the components' logs), 2 when a component
//! exited while it ran.

use std::io::{Read as _, Write as _};
use std::process::ExitCode;
use std::time::Duration;

use rollsafe_testing::control_plane::{ControlPlane, log_tails};
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let watch_stdin = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--watch-stdin") => true,
        Some(_) => {
            eprintln!("usage: control-plane [--watch-stdin]");
            return ExitCode::from(2);
        }
    };
    // Listen before booting: a stop asked for while the control plane starts drops the start,
    // which stops whatever it had started.
    let Ok(mut terminate) = signal(SignalKind::terminate()) else {
        eprintln!("control-plane: cannot listen for SIGTERM");
        return ExitCode::from(1);
    };
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<()>();
    if watch_stdin {
        std::thread::spawn(move || {
            let mut buffer = [0_u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buffer), Ok(n) if n > 0) {}
            let _ = closed_tx.send(());
        });
    }
    let stdin_closed = async {
        if closed_rx.await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(stdin_closed);
    let started = tokio::select! {
        started = ControlPlane::build_and_start() => started,
        () = &mut stdin_closed => return ExitCode::SUCCESS,
        _ = terminate.recv() => return ExitCode::SUCCESS,
        _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
    };
    let mut plane = match started {
        Ok(plane) => plane,
        Err(error) => {
            eprintln!("control-plane: {error}");
            return ExitCode::from(1);
        }
    };
    let line = match serde_json::to_string(plane.info()) {
        Ok(line) => line,
        Err(_) => {
            eprintln!("control-plane: cannot print the control plane's description");
            return ExitCode::from(1);
        }
    };
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(1);
    }
    let mut check = tokio::time::interval(Duration::from_secs(1));
    let code = loop {
        tokio::select! {
            () = &mut stdin_closed => break ExitCode::SUCCESS,
            _ = terminate.recv() => break ExitCode::SUCCESS,
            _ = tokio::signal::ctrl_c() => break ExitCode::SUCCESS,
            _ = check.tick() => {
                if let Some(component) = plane.exited() {
                    eprintln!("control-plane: {component} exited");
                    eprintln!("{}", log_tails(&plane.info().logs, 30));
                    break ExitCode::from(2);
                }
            }
        }
    };
    plane.stop();
    drop(plane);
    code
}
