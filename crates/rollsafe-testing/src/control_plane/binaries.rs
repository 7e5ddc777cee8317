//! The control plane's binaries: built from the Go modules pinned under `tools/control-plane/`
//! by its `build.sh`, into a cache outside the repository keyed by the versions, the Go version
//! and the `go.sum` hashes — a second build on the same machine builds nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::ControlPlaneError;

/// The folder of the pinned Go modules and their build script.
pub fn tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/control-plane")
}

/// The exit code of `build.sh` when Go is not installed.
const NO_GO: i32 = 3;

/// Builds what is missing and returns the folder holding `etcd`, `kube-apiserver`,
/// `kube-controller-manager`, `kube-scheduler` and `kwok`. The build's progress goes to this
/// process's stderr.
pub fn build() -> Result<PathBuf, ControlPlaneError> {
    let script = tools_dir().join("build.sh");
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|_| ControlPlaneError::Build {
            reason: format!("cannot run {}", script.display()),
        })?;
    match output.status.code() {
        Some(0) => {}
        Some(NO_GO) => return Err(ControlPlaneError::GoMissing),
        _ => {
            return Err(ControlPlaneError::Build {
                reason: format!("{} failed ({})", script.display(), output.status),
            });
        }
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let dir = stdout
        .lines()
        .last()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| ControlPlaneError::Build {
            reason: "the build printed no binary folder".to_owned(),
        })?;
    for name in COMPONENTS {
        if !dir.join(name).is_file() {
            return Err(ControlPlaneError::Build {
                reason: format!("{name} is missing from {}", dir.display()),
            });
        }
    }
    Ok(dir)
}

/// The binaries a control plane runs.
pub const COMPONENTS: [&str; 5] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
];
