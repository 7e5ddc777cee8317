//! The emulator as a client no one here wrote sees it: the official Kubernetes Python client
//! (`pip install kubernetes`, in the virtual environment `.ci/run` creates) runs
//! `tests/python/conformance.py` — CRUD of the served kinds, paging to completion, a stale
//! replace, a failing JSON Patch test, watch order and 410, selectors, impersonation and the
//! DynamicClient over discovery.
//!
//! The interpreter is `ROLLSAFE_PYTHON` (or `ROLLSAFE_HELM_PYTHON`, the same environment);
//! without one that imports `kubernetes` the test says why it skipped, unless `CI` is set.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> Option<PathBuf> {
    let python = std::env::var_os("ROLLSAFE_PYTHON")
        .or_else(|| std::env::var_os("ROLLSAFE_HELM_PYTHON"))
        .map(PathBuf::from)
        .or_else(|| {
            let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/venv/bin/python");
            venv.exists().then_some(venv)
        })?;
    let imports = Command::new(&python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success());
    imports.then_some(python)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_conforms() {
    let Some(python) = python() else {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Python with the kubernetes package; .ci/run installs it"
        );
        eprintln!("skipped: no Python with `kubernetes` (pip install kubernetes)");
        return;
    };
    let emu = common::start().await;
    // History before now is compacted: a watch from resourceVersion 1 is 410 Gone.
    emu.compact();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/conformance.py");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(script)
            .arg(&kubeconfig)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "conformance failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok: ")).count(),
        9,
        "{stdout}"
    );
    emu.shutdown().await;
}
