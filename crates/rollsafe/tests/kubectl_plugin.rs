//! `kubectl rollsafe`: the binary answers as a kubectl plugin when named `kubectl-rollsafe`,
//! driven through every real kubectl release on the machine; and the krew manifest in
//! `deploy/krew/` is a valid plugin manifest once krew-release-bot fills it in.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use rollsafe_testing::{TestCluster, Workload, kubectl_releases, secret};
use serde_json::{Value, json};

const NS: &str = "shop";

/// A directory holding `kubectl-rollsafe`, a link to the built binary (krew installs a link
/// the same way).
fn plugin_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        env!("CARGO_BIN_EXE_rollsafe"),
        dir.path().join("kubectl-rollsafe"),
    )
    .unwrap();
    dir
}

/// Runs `kubectl` with the plugin directory first on `PATH`.
fn kubectl(kubectl: &Path, plugins: &Path, args: &[&str], stdin: Option<&str>) -> Output {
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new(kubectl);
    command
        .args(args)
        .env("PATH", path)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_NAMESPACE")
        .env_remove("ROLLSAFE_CONTEXT")
        .env_remove("KUBECONFIG");
    if stdin.is_none() {
        return command.output().unwrap();
    }
    use std::io::Write as _;
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn every_kubectl_release_runs_rollsafe_as_its_plugin() {
    let releases = kubectl_releases();
    assert!(!releases.is_empty(), "no kubectl on this machine");
    let plugins = plugin_dir();
    let manifest = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"api"},
        "spec":{"template":{"spec":{"containers":[{"name":"app",
        "envFrom":[{"secretRef":{"name":"db-creds"}}]}]}}}}"#;
    for release in &releases {
        let which = release.display();
        // kubectl finds it on PATH.
        let listed = kubectl(release, plugins.path(), &["plugin", "list"], None);
        assert!(
            text(&listed.stdout).contains("kubectl-rollsafe"),
            "{which}: {}{}",
            text(&listed.stdout),
            text(&listed.stderr)
        );
        // Help names the command as the user typed it.
        let help = kubectl(release, plugins.path(), &["rollsafe", "--help"], None);
        assert_eq!(help.status.code(), Some(0), "{which}");
        assert!(
            text(&help.stdout).contains("Usage: kubectl rollsafe [OPTIONS] <COMMAND>"),
            "{which}: {}",
            text(&help.stdout)
        );
        assert_eq!(text(&help.stderr), "", "{which}");
        // Arguments and stdin pass through unchanged.
        let refs = kubectl(
            release,
            plugins.path(),
            &["rollsafe", "refs", "-"],
            Some(manifest),
        );
        assert_eq!(
            refs.status.code(),
            Some(0),
            "{which}: {}",
            text(&refs.stderr)
        );
        let listed: Value = serde_json::from_slice(&refs.stdout).unwrap();
        assert_eq!(listed[0]["name"], "api", "{which}: {listed}");
        assert_eq!(listed[0]["secretConsumers"], json!(["db-creds"]), "{which}");
        // A usage error is the usual exit 2, with the plugin's name.
        let wrong = kubectl(release, plugins.path(), &["rollsafe", "no-such-verb"], None);
        assert_eq!(wrong.status.code(), Some(2), "{which}");
        assert!(
            text(&wrong.stderr).contains("Usage: kubectl rollsafe [OPTIONS] <COMMAND>"),
            "{which}: {}",
            text(&wrong.stderr)
        );
        assert_eq!(text(&wrong.stdout), "", "{which}");
    }
}

#[test]
fn kubectl_rollsafe_reads_the_cluster_with_the_kubeconfig_given() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let seeds = vec![
        secret(NS, "db-creds", "not-a-real-password"),
        Workload::of_kind("Deployment", "api")
            .namespace(NS)
            .consuming_secret_via_env_from("db-creds")
            .build(),
    ];
    let cluster = runtime.block_on(TestCluster::start(seeds));
    let newest = kubectl_releases().pop().expect("a kubectl on this machine");
    let plugins = plugin_dir();
    let kubeconfig = cluster.kubeconfig.display().to_string();
    let out = kubectl(
        &newest,
        plugins.path(),
        &[
            "rollsafe",
            "consumers",
            "--kubeconfig",
            &kubeconfig,
            "-n",
            NS,
            "db-creds",
        ],
        None,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["secret"], "db-creds");
    assert_eq!(shown["workloads"][0]["name"], json!("api"), "{shown}");
    assert!(
        cluster.emu.requests().iter().all(|r| r.method == "GET"),
        "consumers patches nothing"
    );
}

/// `deploy/krew/rollsafe.yaml` as krew-release-bot renders it for a tag: `{{ .TagName }}`
/// becomes the tag, each `{{addURIAndSha "URL" .TagName }}` the `uri` and `sha256` lines.
fn rendered_krew_manifest(tag: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/krew/rollsafe.yaml");
    let template = std::fs::read_to_string(path).unwrap();
    let mut out = String::new();
    for line in template.lines() {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("{{addURIAndSha \"") {
            let indent = &line[..line.len() - trimmed.len()];
            let (uri, _) = rest.split_once('"').unwrap();
            out.push_str(&format!(
                "{indent}uri: {}\n{indent}sha256: {}\n",
                uri.replace("{{ .TagName }}", tag),
                "ab".repeat(32)
            ));
        } else {
            out.push_str(&line.replace("{{ .TagName }}", tag));
            out.push('\n');
        }
    }
    out
}

#[test]
fn the_krew_manifest_names_the_plugin_binary_for_each_platform() {
    let manifest: Value = serde_saphyr::from_str(&rendered_krew_manifest("v1.2.3")).unwrap();
    assert_eq!(
        manifest["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(manifest["kind"], "Plugin");
    assert_eq!(manifest["metadata"]["name"], "rollsafe");
    let spec = &manifest["spec"];
    assert_eq!(spec["version"], "v1.2.3");
    let short = spec["shortDescription"].as_str().unwrap();
    assert!(
        short.len() <= 50,
        "krew-index wants a short description: {short}"
    );
    assert!(spec["homepage"].as_str().unwrap().starts_with("https://"));
    let mut seen = Vec::new();
    for platform in spec["platforms"].as_array().unwrap() {
        let labels = &platform["selector"]["matchLabels"];
        let (os, arch) = (
            labels["os"].as_str().unwrap(),
            labels["arch"].as_str().unwrap(),
        );
        assert_eq!(platform["bin"], "kubectl-rollsafe");
        let uri = platform["uri"].as_str().unwrap();
        assert!(
            uri.ends_with(&format!("/v1.2.3/kubectl-rollsafe_{os}_{arch}.tar.gz")),
            "{uri}"
        );
        assert_eq!(platform["sha256"].as_str().unwrap().len(), 64);
        seen.push(format!("{os}/{arch}"));
    }
    seen.sort();
    assert_eq!(
        seen,
        ["darwin/amd64", "darwin/arm64", "linux/amd64", "linux/arm64"]
    );
}
