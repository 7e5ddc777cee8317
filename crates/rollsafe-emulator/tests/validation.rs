//! What the real registry refuses, with its messages: a table of (object or change, status,
//! message).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

fn deployment_with(f: impl FnOnce(&mut Value)) -> Value {
    let mut d = deployment("shop", "web");
    f(&mut d);
    d
}

/// Creates `obj` through the API as the admin; returns (status, message).
async fn create(
    emu: &rollsafe_emulator::RunningEmulator,
    path: &str,
    obj: &Value,
) -> (u16, String) {
    let client = client(emu, "admin").await;
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(obj).unwrap())
        .unwrap();
    match client.request::<Value>(req).await {
        Ok(_) => (201, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => panic!("{other:?}"),
    }
}

async fn replace(
    emu: &rollsafe_emulator::RunningEmulator,
    path: &str,
    obj: &Value,
) -> (u16, String) {
    let client = client(emu, "admin").await;
    let req = http::Request::put(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(obj).unwrap())
        .unwrap();
    match client.request::<Value>(req).await {
        Ok(_) => (200, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(other) => panic!("{other:?}"),
    }
}

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";
const SECRETS: &str = "/api/v1/namespaces/shop/secrets";
const CONFIGMAPS: &str = "/api/v1/namespaces/shop/configmaps";
const KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

#[tokio::test]
async fn creates_the_real_registry_refuses() {
    let emu = start().await;
    let cases: Vec<(&str, &str, Value, u16, String)> = vec![
        (
            "replicas of the wrong type",
            DEPLOYMENTS,
            deployment_with(|d| d["spec"]["replicas"] = json!("three")),
            400,
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32".into(),
        ),
        (
            "negative replicas",
            DEPLOYMENTS,
            deployment_with(|d| d["spec"]["replicas"] = json!(-1)),
            422,
            "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0".into(),
        ),
        (
            "no containers",
            DEPLOYMENTS,
            deployment_with(|d| d["spec"]["template"]["spec"]["containers"] = json!([])),
            422,
            "Deployment.apps \"web\" is invalid: spec.template.spec.containers: Required value".into(),
        ),
        (
            "a container without an image",
            DEPLOYMENTS,
            deployment_with(|d| d["spec"]["template"]["spec"]["containers"] = json!([{"name": "app"}])),
            422,
            "Deployment.apps \"web\" is invalid: spec.template.spec.containers[0].image: Required value".into(),
        ),
        (
            "no selector",
            DEPLOYMENTS,
            deployment_with(|d| {
                d["spec"].as_object_mut().unwrap().remove("selector");
            }),
            422,
            "Deployment.apps \"web\" is invalid: spec.selector: Required value".into(),
        ),
        (
            "a TLS Secret without its keys",
            SECRETS,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tls"},
                   "type": "kubernetes.io/tls", "data": {}}),
            422,
            "Secret \"tls\" is invalid: [data[tls.crt]: Required value, data[tls.key]: Required value]".into(),
        ),
        (
            "an invalid data key",
            CONFIGMAPS,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"},
                   "data": {"bad key": "x"}}),
            422,
            format!("ConfigMap \"cfg\" is invalid: data[bad key]: Invalid value: \"bad key\": {KEY_MSG}"),
        ),
    ];
    for (what, path, obj, code, message) in cases {
        assert_eq!(create(&emu, path, &obj).await, (code, message), "{what}");
    }
    assert!(emu.list_objects("deployments", Some("shop")).is_empty());
    // Namespaces carry the label the real registry sets.
    let ns = emu.get_object("namespaces", None, "shop").unwrap();
    assert_eq!(
        ns["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "shop"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn updates_the_real_registry_refuses() {
    let emu = start().await;
    emu.put_object(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": true,
        "metadata": {"name": "frozen", "namespace": "shop"}, "data": {"a": "1"}}),
    )
    .unwrap();
    emu.put_object(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "db", "namespace": "shop"}, "data": {"a": "MQ=="}}))
        .unwrap();
    let frozen = |data: Value, immutable: bool| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "immutable": immutable,
               "metadata": {"name": "frozen", "namespace": "shop"}, "data": data})
    };
    assert_eq!(
        replace(&emu, &format!("{CONFIGMAPS}/frozen"), &frozen(json!({"a": "2"}), true)).await,
        (
            422,
            "ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set".into()
        )
    );
    assert_eq!(
        replace(&emu, &format!("{CONFIGMAPS}/frozen"), &frozen(json!({"a": "1"}), false)).await,
        (
            422,
            "ConfigMap \"frozen\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set".into()
        )
    );
    let retyped = json!({"apiVersion": "v1", "kind": "Secret", "type": "example.com/custom",
        "metadata": {"name": "db", "namespace": "shop"}, "data": {"a": "MQ=="}});
    assert_eq!(
        replace(&emu, &format!("{SECRETS}/db"), &retyped).await,
        (
            422,
            "Secret \"db\" is invalid: type: Invalid value: \"example.com/custom\": field is immutable".into()
        )
    );
    assert_eq!(
        emu.get_object("configmaps", Some("shop"), "frozen")
            .unwrap()["data"]["a"],
        "1"
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn a_workload_selector_is_immutable_once_created() {
    let emu = start().await;
    emu.put_object(deployment("shop", "web")).unwrap();
    let relabelled = |labels: Value, selector: Value| {
        let mut d = deployment("shop", "web");
        d["spec"]["template"]["metadata"]["labels"] = labels;
        d["spec"]["selector"] = selector;
        d
    };
    let cases = [
        (
            relabelled(
                json!({"app": "web", "tier": "front"}),
                json!({"matchLabels": {"tier": "front", "app": "web"}}),
            ),
            r#"Deployment.apps "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "tier":"front"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"#,
        ),
        (
            relabelled(
                json!({"app": "web"}),
                json!({"matchLabels": {"app": "web"},
                       "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}),
            ),
            r#"Deployment.apps "web" is invalid: spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web"}, MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"app", Operator:"In", Values:[]string{"web"}}}}: field is immutable"#,
        ),
    ];
    for (changed, message) in cases {
        assert_eq!(
            replace(&emu, &format!("{DEPLOYMENTS}/web"), &changed).await,
            (422, message.to_owned())
        );
    }
    // The same selector, written again, is no change.
    assert_eq!(
        replace(
            &emu,
            &format!("{DEPLOYMENTS}/web"),
            &deployment("shop", "web")
        )
        .await
        .0,
        200
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn workload_templates_get_the_scheme_defaults() {
    let emu = start().await;
    let d = deployment_with(|d| {
        d["spec"]["template"]["spec"]["containers"] = json!([
            {"name": "tagged", "image": "registry.example/app:1", "ports": [{"containerPort": 80}]},
            {"name": "latest", "image": "registry.example/app:latest"},
            {"name": "untagged", "image": "registry.example:5000/app"},
            {"name": "digest", "image": "app@sha256:0123"},
        ]);
    });
    assert_eq!(create(&emu, DEPLOYMENTS, &d).await.0, 201);
    let stored = emu.get_object("deployments", Some("shop"), "web").unwrap();
    let pod = &stored["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["terminationGracePeriodSeconds"], 30);
    assert_eq!(pod["dnsPolicy"], "ClusterFirst");
    assert_eq!(pod["schedulerName"], "default-scheduler");
    assert_eq!(pod["securityContext"], json!({}));
    let pulls: Vec<&str> = pod["containers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["imagePullPolicy"].as_str().unwrap())
        .collect();
    assert_eq!(pulls, ["IfNotPresent", "Always", "Always", "IfNotPresent"]);
    let c = &pod["containers"][0];
    assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
    assert_eq!(c["terminationMessagePolicy"], "File");
    assert_eq!(c["resources"], json!({}));
    assert_eq!(c["ports"][0]["protocol"], "TCP");
    emu.shutdown().await;
}
