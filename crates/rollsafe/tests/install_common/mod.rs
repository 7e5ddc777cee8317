//! Shared by the `install_*` tests: the repository paths, the Helm SDK driver
//! (`tests/helm/helm_driver.py` run by the virtual environment's python), kubectl, and
//! helpers over rendered manifests.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// The workspace root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

pub fn chart_dir() -> PathBuf {
    repo().join("charts/rollsafe")
}

/// Whether a missing tool must fail the test (CI) rather than skip it.
pub fn required() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty())
}

/// The python of the virtual environment `.ci/run` creates with helm-python-sdk:
/// `ROLLSAFE_HELM_PYTHON`, else `.ci/venv/bin/python` when it exists. `None` (with a reason
/// printed) when there is none and CI is not set; under CI a missing venv fails.
pub fn helm_python() -> Option<PathBuf> {
    let candidate = std::env::var_os("ROLLSAFE_HELM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".ci/venv/bin/python"));
    if candidate.is_file() {
        return Some(candidate);
    }
    assert!(
        !required(),
        "CI is set but the Helm SDK python ({}) is missing: run .ci/run to create .ci/venv",
        candidate.display()
    );
    eprintln!(
        "skipping: no Helm SDK python at {} (set ROLLSAFE_HELM_PYTHON or run .ci/run)",
        candidate.display()
    );
    None
}

/// One request to the Helm driver; `Ok(answer)` or `Err(error answer)`.
pub fn helm(python: &Path, request: Value) -> Result<Value, Value> {
    helm_with_env(python, request, &[])
}

pub fn helm_with_env(
    python: &Path,
    request: Value,
    env: &[(&str, std::ffi::OsString)],
) -> Result<Value, Value> {
    let mut command = Command::new(python);
    command
        .arg(repo().join("tests/helm/helm_driver.py"))
        .current_dir(repo())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(request.to_string().as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!(
            "the Helm driver printed no JSON (status {}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )
    });
    if output.status.success() {
        Ok(answer)
    } else {
        Err(answer)
    }
}

pub const RELEASE: &str = "rs";
pub const NAMESPACE: &str = "rollsafe";

/// `helm template`: the rendered manifests by template path.
pub fn render(python: &Path, values: &Value) -> Vec<(String, String)> {
    render_as(python, values, RELEASE, NAMESPACE)
}

/// `helm template` as release `name` in `namespace`: the rendered manifests by template path.
pub fn render_as(
    python: &Path,
    values: &Value,
    name: &str,
    namespace: &str,
) -> Vec<(String, String)> {
    let answer = helm(
        python,
        json!({"op": "render", "chart": chart_dir(), "values": values,
               "name": name, "namespace": namespace}),
    )
    .unwrap_or_else(|error| panic!("render failed: {error}"));
    sorted_manifests(&answer)
}

/// `helm template --kube-version VERSION` of release [`RELEASE`] in [`NAMESPACE`]: the rendered
/// manifests by template path, `.Capabilities.KubeVersion` being `version`.
pub fn render_for_kube_version(
    python: &Path,
    values: &Value,
    version: &str,
) -> Vec<(String, String)> {
    let answer = helm(
        python,
        json!({"op": "render", "chart": chart_dir(), "values": values,
               "name": RELEASE, "namespace": NAMESPACE, "kubeVersion": version}),
    )
    .unwrap_or_else(|error| panic!("render failed: {error}"));
    sorted_manifests(&answer)
}

/// The manifests of a render answer, by template path, sorted.
fn sorted_manifests(answer: &Value) -> Vec<(String, String)> {
    let mut manifests: Vec<(String, String)> = answer["manifests"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(path, text)| (path.clone(), text.as_str().unwrap().to_owned()))
        .collect();
    manifests.sort();
    manifests
}

/// A free port on 127.0.0.1 (released before it is used).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.1 GET; the status code.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

/// The Kubernetes objects of a render (NOTES.txt and empty templates left out).
pub fn objects(manifests: &[(String, String)]) -> Vec<Value> {
    let mut objects = Vec::new();
    for (path, text) in manifests {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        for document in serde_saphyr::from_multiple::<Value>(text)
            .unwrap_or_else(|e| panic!("{path} is not YAML: {e}"))
        {
            if document.is_object() {
                objects.push(document);
            }
        }
    }
    objects
}

pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// Every RBAC rule of the render, with the kind and namespace of the role holding it.
pub fn rules(objects: &[Value]) -> Vec<(String, String, Value)> {
    let mut rules = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        if kind == "Role" || kind == "ClusterRole" {
            let namespace = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            for rule in object["rules"].as_array().cloned().unwrap_or_default() {
                rules.push((kind.to_owned(), namespace.clone(), rule));
            }
        }
    }
    rules
}
