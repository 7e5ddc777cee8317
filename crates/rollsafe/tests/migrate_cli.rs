//! `rollsafe migrate reloader` through the binary: manifests on stdin and from files with every
//! row of Reloader's annotation table, a Reloader values file mapped to rollsafe's chart, the
//! same report read from the in-process emulator with GET requests only, and its failures —
//! one line on stderr, never a Secret value on either stream.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use rollsafe_emulator::RunningEmulator;
use rollsafe_testing::{TestCluster, rbac_for_group};
use serde_json::{Value, json};

const NS: &str = "shop";
/// The fixture's Secret values: never printed.
const SECRET_VALUES: [&str; 2] = ["fixture-password-value", "fixture-certificate"];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/migrate")
        .join(name)
}

fn manifests() -> String {
    std::fs::read_to_string(fixture("reloader.yaml")).unwrap()
}

/// `rollsafe migrate reloader ARGS…` with `stdin`: (exit code, stdout, stderr); asserts that no
/// Secret value is on either stream.
fn migrate(args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut command = Command::cargo_bin("rollsafe").unwrap();
    command
        .args(["migrate", "reloader"])
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("ROLLSAFE_KUBECONFIG")
        .env_remove("ROLLSAFE_CONTEXT")
        .env_remove("ROLLSAFE_AS")
        .env_remove("ROLLSAFE_AS_GROUP")
        .env_remove("ROLLSAFE_MIGRATE_NAMESPACE")
        .env_remove("ROLLSAFE_MIGRATE_FILENAME")
        .env_remove("ROLLSAFE_MIGRATE_OUTPUT")
        .env_remove("ROLLSAFE_MIGRATE_RELOADER_VALUES");
    if let Some(stdin) = stdin {
        command.write_stdin(stdin);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    for value in SECRET_VALUES {
        assert!(
            !stdout.contains(value) && !stderr.contains(value),
            "a Secret value was printed: {stdout}{stderr}"
        );
    }
    (output.status.code().unwrap_or(-1), stdout, stderr)
}

/// The JSON report of a successful run.
fn report(args: &[&str], stdin: Option<&str>) -> Value {
    let (code, stdout, stderr) = migrate(args, stdin);
    assert_eq!((code, stderr.as_str()), (0, ""), "{args:?}");
    serde_json::from_str(&stdout).unwrap()
}

/// A workload of the report by name.
fn workload<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("{name} is not in the report"))
}

fn codes(workload: &Value) -> Vec<&str> {
    workload["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap())
        .collect()
}

#[test]
fn manifests_on_stdin_report_every_row_of_the_reloader_table() {
    let report = report(&["-f", "-", "-o", "json"], Some(&manifests()));
    insta::assert_json_snapshot!("migrate_reloader_manifests", report);

    assert_eq!(
        report["summary"],
        json!({"workloadsRead": 11, "withReloaderAnnotations": 10, "watched": 9,
               "notWatched": 1, "reloaderValues": "defaults"})
    );
    let names: Vec<&str> = report["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "agent", "api", "edge", "finder", "frozen", "keyed", "ledger", "nightly", "owned",
            "pattern"
        ]
    );
    // auto: every reference, one of them by key.
    let api = workload(&report, "api");
    assert_eq!(api["watch"]["state"], "watched");
    assert_eq!(
        api["consumes"],
        json!([{"kind": "ConfigMap", "name": "settings", "keys": null, "rolls": true},
               {"kind": "Secret", "name": "db-creds", "keys": ["password"], "rolls": true}])
    );
    assert_eq!(codes(api), ["keyLevel"]);
    assert_eq!(
        api["differences"][0]["message"],
        "rolls only when key \"password\" of Secret db-creds changes; Reloader restarted it on any \
         change of db-creds"
    );
    assert_eq!(
        api["leftovers"],
        json!(["env STAKATER_DB_CREDS_SECRET in container app"])
    );
    // secret auto: the Secrets only, and the mounted one is ignored.
    let edge = workload(&report, "edge");
    assert_eq!(
        edge["consumes"],
        json!([{"kind": "Secret", "name": "tls", "keys": null, "rolls": false,
                "optedOutBy": "reloader.stakater.com/ignore"}])
    );
    assert_eq!(codes(edge), ["ignoredSource"]);
    // configmap auto, by key.
    assert_eq!(codes(workload(&report, "keyed")), ["keyLevel"]);
    // The reload lists, whole; Reloader's annotation on the template is left as it is.
    let ledger = workload(&report, "ledger");
    assert_eq!(ledger["consumes"].as_array().unwrap().len(), 2);
    assert!(codes(ledger).is_empty());
    assert_eq!(
        ledger["leftovers"],
        json!(["pod-template annotation reloader.stakater.com/last-reloaded-from"])
    );
    // auto: "false".
    let frozen = workload(&report, "frozen");
    assert_eq!(frozen["watch"]["state"], "notWatched");
    assert_eq!(codes(frozen), ["autoFalseWithReload"]);
    // search + match: only the referenced objects carrying match roll it.
    let finder = workload(&report, "finder");
    assert_eq!(finder["watch"]["state"], "watched");
    assert!(codes(finder).is_empty(), "{finder}");
    let rolls: Vec<(&str, bool)> = finder["consumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["rolls"].as_bool().unwrap()))
        .collect();
    assert_eq!(rolls, [("settings", false), ("db-creds", true)]);
    // An unsupported annotation beside a supported one.
    let agent = workload(&report, "agent");
    assert_eq!(agent["watch"]["state"], "watched");
    assert_eq!(codes(agent), ["unsupportedAnnotation"]);
    assert_eq!(
        agent["differences"][0]["annotation"],
        "reloader.stakater.com/rollout-strategy"
    );
    // A regular expression, as Reloader reads it: every Secret whose whole name matches.
    let pattern = workload(&report, "pattern");
    assert_eq!(pattern["watch"]["state"], "watched");
    assert_eq!(
        pattern["consumes"],
        json!([{"kind": "Secret", "name": "db-creds", "keys": null, "rolls": true}])
    );
    assert_eq!(codes(pattern), ["regexEntry"]);
    // rollsafe.dev/watch takes precedence.
    let owned = workload(&report, "owned");
    assert_eq!(owned["watch"]["decidedBy"], "rollsafe.dev/watch");
    assert_eq!(codes(owned), ["rollsafeWatchFirst"]);
    // A CronJob: watched; its next scheduled Job runs with the change.
    let nightly = workload(&report, "nightly");
    assert_eq!(nightly["watch"]["state"], "watched");
    assert_eq!(codes(nightly), ["nextRun"]);
    // The values for Reloader's defaults.
    assert_eq!(
        report["values"],
        json!({"controller": {"enabled": true, "reloaderCompat": true}})
    );
    assert_eq!(report["unmapped"], json!([]));
}

#[test]
fn the_text_report_from_a_file() {
    let (code, text, stderr) = migrate(&["-f", fixture("reloader.yaml").to_str().unwrap()], None);
    assert_eq!((code, stderr.as_str()), (0, ""));
    insta::assert_snapshot!("migrate_reloader_text", text);
    assert!(text.contains(
        "Deployment shop/api\n  reloader:    reloader.stakater.com/auto: \"true\"\n  watch:       \
         watched: every Secret and ConfigMap its pod template references"
    ));
    assert!(
        text.contains(
            "11 workloads read; 10 carry Reloader annotations: 9 watched, 1 not watched."
        )
    );
    assert!(text.contains("restarts nothing"));
    assert!(text.ends_with(
        "Helm values for rollsafe's chart (for Reloader's chart defaults):\ncontroller:\n  \
         enabled: true\n  reloaderCompat: true\n"
    ));
}

#[test]
fn reloaders_values_are_mapped_to_rollsafes() {
    let values = fixture("reloader-values.yaml");
    let report = report(
        &[
            "-f",
            "-",
            "-o",
            "json",
            "--reloader-values",
            values.to_str().unwrap(),
        ],
        Some(&manifests()),
    );
    assert_eq!(report["summary"]["reloaderValues"], "file");
    assert_eq!(
        report["values"],
        json!({"controller": {
            "enabled": true,
            "reloaderCompat": true,
            "ignoreNamespaces": ["kube-system", "monitoring"],
            "sourceSelector": "reloader",
            "argoRollouts": true,
            "replicas": 2,
            "logLevel": "debug",
            "nodeSelector": {"pool": "infra"}
        }})
    );
    let mapped: Vec<(&str, &str)> = report["mapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["setting"].as_str().unwrap(), m["to"].as_str().unwrap()))
        .collect();
    assert_eq!(
        mapped,
        [
            ("reloader.ignoreNamespaces", "controller.ignoreNamespaces"),
            (
                "reloader.resourceLabelSelector",
                "controller.sourceSelector"
            ),
            ("reloader.isArgoRollouts", "controller.argoRollouts"),
            (
                "reloader.enableHA, reloader.deployment.replicas",
                "controller.replicas"
            ),
            ("reloader.logLevel", "controller.logLevel"),
            (
                "reloader.deployment.nodeSelector",
                "controller.nodeSelector"
            ),
        ]
    );
    let unmapped: Vec<&str> = report["unmapped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["setting"].as_str().unwrap())
        .collect();
    assert_eq!(
        unmapped,
        [
            "reloader.reloadStrategy",
            "reloader.reloadOnCreate",
            "reloader.syncAfterRestart",
            "reloader.deployment.resources",
            "image",
        ]
    );
    for entry in report["unmapped"].as_array().unwrap() {
        assert!(!entry["reason"].as_str().unwrap().is_empty(), "{entry}");
    }
    assert!(
        report["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("controller.sourceSelector"))
    );

    let (code, text, _) = migrate(
        &["-f", "-", "--reloader-values", values.to_str().unwrap()],
        Some(&manifests()),
    );
    assert_eq!(code, 0);
    assert!(text.contains(
        "Helm values for rollsafe's chart (from --reloader-values):\ncontroller:\n  enabled: \
         true\n  reloaderCompat: true\n  ignoreNamespaces:\n"
    ));
    assert!(text.contains(
        "moved:      reloader.ignoreNamespaces \"kube-system,monitoring\" -> \
         controller.ignoreNamespaces\n"
    ));
    assert!(text.contains("not moved:  reloader.reloadStrategy \"annotations\": rollsafe always"));
}

#[test]
fn a_bad_values_file_is_one_line_and_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "broken.yaml",
            "reloader: [unclosed\n",
            "not a YAML values file at line 1, column 11: a list or mapping is not closed, or an \
             entry in it is missing",
        ),
        (
            "shape.yaml",
            "- a\n- b\n",
            "the values document is not a mapping",
        ),
        (
            "type.yaml",
            "reloader:\n  watchGlobally: sometimes\n",
            "reloader.watchGlobally is not true or false",
        ),
    ];
    for (name, text, said) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let (code, stdout, stderr) = migrate(
            &["-f", "-", "--reloader-values", path.to_str().unwrap()],
            Some(&manifests()),
        );
        assert_eq!((code, stdout.as_str()), (1, ""), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("rollsafe: --reloader-values {}: ", path.display()))
                && stderr.contains(said),
            "{name}: {stderr}"
        );
    }
    let missing = dir.path().join("missing.yaml");
    let (code, stdout, stderr) = migrate(
        &["-f", "-", "--reloader-values", missing.to_str().unwrap()],
        Some(""),
    );
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        format!(
            "rollsafe: --reloader-values {}: cannot read the file\n",
            missing.display()
        )
    );
}

#[test]
fn usage_errors_exit_2_and_bad_manifests_exit_1() {
    for args in [
        &["-n", NS, "-f", "-"][..],
        &["-n", "Not_A_Namespace"][..],
        &["-o", "yaml", "-f", "-"][..],
    ] {
        let (code, stdout, stderr) = migrate(args, Some(""));
        assert_eq!((code, stdout.as_str()), (2, ""), "{args:?}: {stderr}");
    }
    let (code, stdout, stderr) = migrate(&["-f", "-"], Some("kind: [unclosed\n"));
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr,
        "rollsafe: <stdin>: document 1: invalid YAML at line 1, column 7: a list or mapping is \
         not closed, or an entry in it is missing\n"
    );
    // Nothing annotated: said so.
    let (code, text, _) = migrate(&["-f", "-"], Some(""));
    assert_eq!(code, 0);
    assert!(text.starts_with("0 workloads read; none carries Reloader annotations.\n"));
}

struct Cluster {
    emu: RunningEmulator,
    kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
    // Last: the emulator's runtime outlives the emulator.
    _runtime: tokio::runtime::Runtime,
}

fn cluster() -> Cluster {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut seeds: Vec<Value> = serde_saphyr::from_multiple(&manifests()).unwrap();
    // A namespace without a Reloader annotation: its Secrets are not listed.
    seeds.push(json!({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "elsewhere", "namespace": "other"},
                      "stringData": {"password": SECRET_VALUES[0]}}));
    seeds.extend(rbac_for_group(NS, "devs", false));
    let TestCluster {
        emu,
        kubeconfig,
        dir,
        ..
    } = runtime.block_on(TestCluster::start(seeds));
    Cluster {
        emu,
        kubeconfig,
        _dir: dir,
        _runtime: runtime,
    }
}

impl Cluster {
    fn migrate(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["--kubeconfig", self.kubeconfig.to_str().unwrap()];
        all.extend_from_slice(args);
        migrate(&all, None)
    }
}

#[test]
fn the_cluster_gives_the_same_report_with_get_requests_only() {
    let from_manifests = report(&["-f", "-", "-o", "json"], Some(&manifests()));
    let cluster = cluster();
    for args in [&["-o", "json"][..], &["-o", "json", "-n", NS][..]] {
        cluster.emu.clear_requests();
        let (code, stdout, stderr) = cluster.migrate(args);
        assert_eq!((code, stderr.as_str()), (0, ""), "{args:?}");
        let from_cluster: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(from_cluster, from_manifests, "{args:?}");

        let requests = cluster.emu.requests();
        assert!(
            requests.iter().all(|r| r.method == "GET"),
            "migrate only reads: {requests:?}"
        );
        let lists = |resource: &str| {
            requests
                .iter()
                .filter(|r| r.resource.as_deref() == Some(resource))
                .collect::<Vec<_>>()
        };
        for resource in ["deployments", "statefulsets", "daemonsets", "cronjobs"] {
            let listed = lists(resource);
            assert_eq!(listed.len(), 1, "{resource}: {listed:?}");
            assert!(listed[0].query.contains("limit=500"), "{:?}", listed[0]);
        }
        // Secrets and ConfigMaps: metadata only, in the one namespace that needs them.
        for resource in ["secrets", "configmaps"] {
            let listed = lists(resource);
            assert_eq!(listed.len(), 1, "{resource}: {listed:?}");
            let request = listed[0];
            assert_eq!(request.verb.as_deref(), Some("list"));
            assert_eq!(request.namespace.as_deref(), Some(NS));
            assert!(
                request
                    .accept
                    .as_deref()
                    .is_some_and(|a| a.contains("as=PartialObjectMetadataList")),
                "{request:?}"
            );
        }
    }

    let (code, text, stderr) = cluster.migrate(&[]);
    assert_eq!((code, stderr.as_str()), (0, ""));
    let (_, from_file, _) = migrate(&["-f", fixture("reloader.yaml").to_str().unwrap()], None);
    assert_eq!(text, from_file);
}

#[test]
fn a_read_failure_is_one_line_without_kubernetes_text() {
    let cluster = cluster();
    // The group may list the three apps kinds in shop, nothing else.
    let as_devs = ["--as", "ada@example.com", "--as-group", "devs"];
    let (code, stdout, stderr) = cluster.migrate(&as_devs);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        "rollsafe: cannot list Deployments in all namespaces: Kubernetes answered HTTP 403: the \
         identity may not list them (RBAC)\n"
    );
    let mut scoped = as_devs.to_vec();
    scoped.extend(["-n", NS]);
    let (code, _, stderr) = cluster.migrate(&scoped);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "rollsafe: cannot list CronJobs in namespace shop: Kubernetes answered HTTP 403: the \
         identity may not list them (RBAC)\n"
    );
    assert!(cluster.emu.requests().iter().all(|r| r.method == "GET"));

    // Nothing listening.
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let text = std::fs::read_to_string(&cluster.kubeconfig)
        .unwrap()
        .replace(
            &format!(":{}", cluster.emu.addr().port()),
            &format!(":{closed}"),
        );
    std::fs::write(&kubeconfig, text).unwrap();
    let (code, stdout, stderr) = migrate(&["--kubeconfig", kubeconfig.to_str().unwrap()], None);
    assert_eq!((code, stdout.as_str()), (1, ""));
    assert_eq!(
        stderr,
        "rollsafe: cannot list Deployments in all namespaces: no response from Kubernetes\n"
    );
}

/// A Deployment whose one reload entry is a regular expression, a Secret it matches (with no
/// annotation of its own) and one it does not; and a Deployment whose Reloader annotations are
/// on its pod template only.
const PATTERN_AND_TEMPLATE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: certs
  namespace: shop
  annotations: {secret.reloader.stakater.com/reload: "cert-.*"}
spec:
  selector: {matchLabels: {app: certs}}
  template:
    metadata: {labels: {app: certs}}
    spec:
      containers: [{name: app, image: example.com/certs:1}]
---
apiVersion: v1
kind: Secret
metadata: {name: cert-2024, namespace: shop}
stringData: {tls.crt: fixture-certificate}
---
apiVersion: v1
kind: Secret
metadata: {name: other-2024, namespace: shop}
stringData: {tls.crt: fixture-certificate}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: templated, namespace: shop}
spec:
  selector: {matchLabels: {app: templated}}
  template:
    metadata:
      labels: {app: templated}
      annotations:
        reloader.stakater.com/auto: "true"
        deployment.reloader.stakater.com/pause-period: "5m"
    spec:
      containers: [{name: app, image: example.com/templated:1}]
"#;

#[test]
fn a_regular_expression_entry_lists_what_it_matches_from_a_file_and_from_the_cluster() {
    let consumes = json!([{"kind": "Secret", "name": "cert-2024", "keys": null, "rolls": true}]);
    let from_file = report(&["-f", "-", "-o", "json"], Some(PATTERN_AND_TEMPLATE));
    assert_eq!(workload(&from_file, "certs")["consumes"], consumes);
    let (code, text, stderr) = migrate(&["-f", "-"], Some(PATTERN_AND_TEMPLATE));
    assert_eq!((code, stderr.as_str()), (0, ""));
    assert!(
        text.contains("  consumes:    Secret/cert-2024 (every key)\n"),
        "{text}"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let seeds: Vec<Value> = serde_saphyr::from_multiple(PATTERN_AND_TEMPLATE).unwrap();
    let cluster = runtime.block_on(TestCluster::start(seeds));
    let kubeconfig = cluster.kubeconfig.to_str().unwrap().to_owned();
    let from_cluster = report(&["--kubeconfig", &kubeconfig, "-o", "json"], None);
    assert_eq!(workload(&from_cluster, "certs")["consumes"], consumes);
    drop(cluster);
}

#[test]
fn reloader_annotations_on_the_pod_template_only_are_named_one_by_one() {
    let report = report(&["-f", "-", "-o", "json"], Some(PATTERN_AND_TEMPLATE));
    let templated = workload(&report, "templated");
    assert_eq!(templated["watch"]["state"], "notWatched");
    assert_eq!(
        codes(templated),
        ["templateAnnotations", "unsupportedAnnotation"]
    );
    assert_eq!(
        templated["differences"][1]["annotation"],
        "deployment.reloader.stakater.com/pause-period"
    );
    let (code, text, stderr) = migrate(&["-f", "-"], Some(PATTERN_AND_TEMPLATE));
    assert_eq!((code, stderr.as_str()), (0, ""));
    // The label and its value are apart, and aligned with the other labels.
    assert!(
        text.contains(
            "Deployment shop/templated\n  on template: deployment.reloader.stakater.com/pause-period: \
             \"5m\"\n               reloader.stakater.com/auto: \"true\"\n  watch:       not watched"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "               deployment.reloader.stakater.com/pause-period: rollsafe watch does not \
             pause a Deployment after a roll"
        ),
        "{text}"
    );
}
