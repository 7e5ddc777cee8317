//! `rollsafe refs` against the real manifests in the shared fixtures.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use assert_cmd::Command;
use serde_json::{Value, json};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/real-manifests")
}

fn refs(args: &[&str], stdin: Option<&str>) -> (bool, Value, String) {
    let mut command = Command::cargo_bin("rollsafe").unwrap();
    command.arg("refs").args(args);
    if let Some(stdin) = stdin {
        command.write_stdin(stdin);
    }
    let output = command.output().unwrap();
    let stdout: Value = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (
        output.status.success(),
        stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn fixture(name: &str) -> String {
    fixtures().join(name).display().to_string()
}

fn workload<'a>(list: &'a Value, kind: &str, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == kind && w["name"] == name)
        .unwrap_or_else(|| panic!("{kind}/{name} not found"))
}

fn summary(workload: &Value) -> Value {
    json!({
        "namespace": workload["namespace"],
        "secretConsumers": workload["secretConsumers"],
        "referencedConfig": workload["referencedConfig"],
    })
}

#[test]
fn every_real_manifest_succeeds() {
    let mut total = 0;
    for entry in std::fs::read_dir(fixtures()).unwrap() {
        let path = entry.unwrap().path();
        let (ok, list, stderr) = refs(&[path.to_str().unwrap()], None);
        assert!(ok, "{}: {stderr}", path.display());
        total += list.as_array().unwrap().len();
    }
    // 13 + 9 + 2 + 1 + 4 + 12 + 1 + 6 + 16 + 3 + 25 + 13 (every workload of apps/v1, apps/v1beta*,
    // extensions/v1beta1; the apps.openshift.io "Deployment" in istio-injected.yaml is not one),
    // and the one batch/v1 CronJob of linkerd-ha.yaml.
    assert_eq!(total, 8 + 9 + 2 + 1 + 4 + 12 + 1 + 6 + 16 + 3 + 25 + 13 + 1);
}

#[test]
fn hand_checked_workloads() {
    let (_, calico, _) = refs(&[&fixture("calico-etcd.yaml")], None);
    assert_eq!(
        summary(workload(&calico, "DaemonSet", "calico-node")),
        json!({"namespace": "kube-system", "secretConsumers": ["calico-etcd-secrets"],
               "referencedConfig": ["ConfigMap/calico-config", "ConfigMap/kubernetes-services-endpoint", "Secret/calico-etcd-secrets"]})
    );

    let (_, addons, _) = refs(&[&fixture("istio-addons.yaml")], None);
    let kiali = workload(&addons, "Deployment", "kiali");
    assert_eq!(
        summary(kiali),
        json!({"namespace": "istio-system",
               "secretConsumers": ["istio.kiali-service-account", "kiali", "kiali-multi-cluster-secret"],
               "referencedConfig": ["ConfigMap/kiali", "ConfigMap/kiali-cabundle", "Secret/istio.kiali-service-account", "Secret/kiali", "Secret/kiali-multi-cluster-secret"]})
    );
    assert_eq!(
        kiali["references"][1],
        json!({"kind": "Secret", "name": "istio.kiali-service-account", "via": "volume", "volume": "kiali-cert", "optional": true})
    );

    // imagePullSecrets count for Restart Consumers, not for referenced config.
    let (_, injected, _) = refs(&[&fixture("istio-injected.yaml")], None);
    assert_eq!(
        summary(workload(&injected, "Deployment", "hello")),
        json!({"namespace": null, "secretConsumers": ["barSecret", "fooSecret"],
               "referencedConfig": ["ConfigMap/istio-ca-crl", "ConfigMap/istio-ca-root-cert"]})
    );

    let (_, bank, _) = refs(&[&fixture("bank-of-anthos.yaml")], None);
    let frontend = workload(&bank, "Deployment", "frontend");
    assert_eq!(
        summary(frontend),
        json!({"namespace": null, "secretConsumers": ["jwt-key"],
               "referencedConfig": ["ConfigMap/demo-data-config", "ConfigMap/environment-config", "ConfigMap/oauth-config", "ConfigMap/service-api-config", "Secret/jwt-key"]})
    );
    assert_eq!(
        frontend["references"][2],
        json!({"kind": "ConfigMap", "name": "oauth-config", "via": "env", "containerList": "container",
               "container": "front", "env": "REGISTERED_OAUTH_CLIENT_ID", "key": "DEMO_OAUTH_CLIENT_ID", "optional": true})
    );

    let (_, argocd, _) = refs(&[&fixture("argocd-ha-install.yaml")], None);
    assert_eq!(
        summary(workload(
            &argocd,
            "StatefulSet",
            "argocd-application-controller"
        )),
        json!({"namespace": null, "secretConsumers": ["argocd-redis", "argocd-repo-server-mtls", "argocd-repo-server-tls"],
               "referencedConfig": ["ConfigMap/argocd-cm", "ConfigMap/argocd-cmd-params-cm", "Secret/argocd-redis", "Secret/argocd-repo-server-mtls", "Secret/argocd-repo-server-tls"]})
    );
}

#[test]
fn output_keeps_input_order_across_files() {
    let (ok, list, _) = refs(
        &[
            &fixture("calico-etcd.yaml"),
            &fixture("ingress-nginx-cloud.yaml"),
        ],
        None,
    );
    assert!(ok);
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["name"].clone())
        .collect();
    assert_eq!(
        names,
        [
            "calico-node",
            "calico-kube-controllers",
            "ingress-nginx-controller"
        ]
    );
}

#[test]
fn stdin_lists_and_skipped_documents() {
    let input = r#"
- apiVersion: v1
  kind: Secret
  metadata: {name: db}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, namespace: prod}
  spec:
    template:
      spec:
        containers:
        - name: app
          envFrom: [{secretRef: {name: db}}]
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: agent}
  spec: {template: {spec: {volumes: [{name: c, configMap: {name: cfg}}]}}}
"#;
    let (ok, list, stderr) = refs(&["-"], Some(input));
    assert!(ok, "{stderr}");
    assert_eq!(
        list,
        json!([
            {"kind": "Deployment", "namespace": "prod", "name": "web", "secretConsumers": ["db"],
             "referencedConfig": ["Secret/db"],
             "references": [{"kind": "Secret", "name": "db", "via": "envFrom", "containerList": "container", "container": "app", "optional": false}]},
            {"kind": "DaemonSet", "namespace": null, "name": "agent", "secretConsumers": [],
             "referencedConfig": ["ConfigMap/cfg"],
             "references": [{"kind": "ConfigMap", "name": "cfg", "via": "volume", "volume": "c", "optional": false}]}
        ])
    );
}

#[test]
fn invalid_yaml_names_file_and_document() {
    let dir = std::env::temp_dir().join(format!("rollsafe-refs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("broken.yaml");
    std::fs::write(
        &path,
        "kind: A\n---\nkind: B\n---\ndata: {password: [hunter2\n",
    )
    .unwrap();
    let (ok, _, stderr) = refs(&[path.to_str().unwrap()], None);
    assert!(!ok);
    assert!(stderr.contains("broken.yaml"), "{stderr}");
    assert!(stderr.contains("document 3"), "{stderr}");
    assert!(
        !stderr.contains("hunter2"),
        "input text must not be echoed: {stderr}"
    );
    let (ok, _, stderr) = refs(&[dir.join("missing.yaml").to_str().unwrap()], None);
    assert!(!ok);
    assert!(stderr.contains("missing.yaml"), "{stderr}");
}

#[test]
fn a_list_nested_in_a_list_is_read_as_kubectl_reads_it() {
    // `kubectl apply -f` flattens a `kind: List` inside a `List` (inside another one) into
    // its objects; so do we.
    let input = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: List
  items:
  - apiVersion: apps/v1
    kind: Deployment
    metadata: {name: inner, namespace: shop}
    spec: {template: {spec: {containers: [{name: app, envFrom: [{secretRef: {name: db}}]}]}}}
  - apiVersion: v1
    kind: DeploymentList
    items:
    - apiVersion: apps/v1
      kind: StatefulSet
      metadata: {name: deepest, namespace: shop}
      spec: {template: {spec: {volumes: [{name: c, configMap: {name: cfg}}]}}}
- apiVersion: apps/v1
  kind: DaemonSet
  metadata: {name: outer, namespace: shop}
  spec: {template: {spec: {}}}
"#;
    let (ok, list, stderr) = refs(&["-"], Some(input));
    assert!(ok, "{stderr}");
    let names: Vec<(&str, &str)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["kind"].as_str().unwrap(), w["name"].as_str().unwrap()))
        .collect();
    assert_eq!(
        names,
        [
            ("Deployment", "inner"),
            ("StatefulSet", "deepest"),
            ("DaemonSet", "outer")
        ]
    );
    assert_eq!(
        workload(&list, "StatefulSet", "deepest")["referencedConfig"],
        json!(["ConfigMap/cfg"])
    );
}

#[test]
fn output_json_or_text_as_the_other_commands() {
    let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\n\
        spec:\n  template:\n    spec:\n      containers:\n      - name: app\n        envFrom:\n        \
        - secretRef: {name: db-creds}\n        - configMapRef: {name: settings}\n---\n\
        apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  template:\n    \
        spec:\n      containers: [{name: agent}]\n";
    let (ok, default, _) = refs(&[], Some(manifest));
    let (json_ok, json, _) = refs(&["-o", "json"], Some(manifest));
    assert!(ok && json_ok);
    assert_eq!(json, default);
    assert_eq!(default.as_array().map(Vec::len), Some(2));

    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(["refs", "-o", "text"])
        .write_stdin(manifest)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Deployment shop/api: ConfigMap/settings, Secret/db-creds\nDaemonSet agent: -\n"
    );
}

#[test]
fn cronjobs_are_read_and_the_text_names_each_object_once() {
    let manifest = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: api, namespace: shop}\n\
        spec:\n  template:\n    spec:\n      imagePullSecrets: [{name: regcred}]\n      \
        containers:\n      - name: app\n        env:\n        - {name: A, valueFrom: {secretKeyRef: \
        {name: db, key: password}}}\n        - {name: B, valueFrom: {secretKeyRef: {name: db, key: \
        user}}}\n        envFrom: [{secretRef: {name: db}}, {configMapRef: {name: settings}}]\n      \
        volumes: [{name: tls, secret: {secretName: tls}}]\n---\n\
        apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: shop}\nspec:\n  \
        schedule: \"0 0 * * *\"\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          \
        containers: [{name: job, envFrom: [{secretRef: {name: db}}]}]\n";
    let (ok, list, stderr) = refs(&[], Some(manifest));
    assert!(ok, "{stderr}");
    let nightly = workload(&list, "CronJob", "nightly");
    assert_eq!(nightly["referencedConfig"], json!(["Secret/db"]));
    assert_eq!(nightly["references"].as_array().map(Vec::len), Some(1));
    // The Restart Consumers API does not restart CronJobs.
    assert_eq!(nightly["secretConsumers"], json!([]));

    let output = Command::cargo_bin("rollsafe")
        .unwrap()
        .args(["refs", "-o", "text"])
        .write_stdin(manifest)
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "Deployment shop/api: ConfigMap/settings, Secret/db, Secret/regcred (restart-consumers \
         only), Secret/tls\nCronJob shop/nightly: Secret/db\n"
    );
}
