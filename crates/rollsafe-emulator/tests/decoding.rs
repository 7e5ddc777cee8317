//! Request objects are decoded as their kind's Go type: wrong JSON types are the decoder's 400
//! in Go's words, undeclared fields are refused (`fieldValidation=Strict`), warned about
//! (`Warn`, the default) or ignored — and never stored.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/shop/deployments";

fn with_unknown_fields() -> Value {
    let mut d = deployment("shop", "web");
    d["spec"]["replica"] = json!(3);
    d["spec"]["template"]["spec"]["containers"][0]["imagePolicy"] = json!("Always");
    d
}

#[tokio::test]
async fn undeclared_fields_are_refused_warned_about_or_ignored_and_never_stored() {
    let emu = start().await;
    let (status, warnings, body) = send(
        &emu,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Strict"),
        "application/json",
        &with_unknown_fields(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(warnings.is_empty());
    assert_eq!(body["reason"], "BadRequest");
    assert_eq!(
        body["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: unknown field \"spec.template.spec.containers[0].imagePolicy\", unknown field \"spec.replica\""
    );
    assert!(emu.get_object("deployments", Some("shop"), "web").is_none());

    // No directive is `Warn`: stored without them, one warning each.
    let (status, warnings, body) = send(
        &emu,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &with_unknown_fields(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        warnings,
        [
            r#"299 - "unknown field \"spec.template.spec.containers[0].imagePolicy\"""#,
            r#"299 - "unknown field \"spec.replica\"""#,
        ]
    );
    let stored = emu.get_object("deployments", Some("shop"), "web").unwrap();
    assert!(stored["spec"].get("replica").is_none());
    assert!(
        stored["spec"]["template"]["spec"]["containers"][0]
            .get("imagePolicy")
            .is_none()
    );

    // `Ignore`: dropped silently, on a replace too.
    let mut replacement = with_unknown_fields();
    replacement["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"].clone();
    let (status, warnings, _) = send(
        &emu,
        "PUT",
        &format!("{DEPLOYMENTS}/web?fieldValidation=Ignore"),
        "application/json",
        &replacement,
    )
    .await;
    assert_eq!((status, warnings.len()), (200, 0));
    assert!(
        emu.get_object("deployments", Some("shop"), "web").unwrap()["spec"]
            .get("replica")
            .is_none()
    );

    // A patch's undeclared fields: the bare strict error, as `kubectl edit` shows it.
    let (status, _, body) = send(
        &emu,
        "PATCH",
        &format!("{DEPLOYMENTS}/web?fieldValidation=Strict"),
        "application/merge-patch+json",
        &json!({"metadata": {"app": "web"}}),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["message"],
        "strict decoding error: unknown field \"metadata.app\""
    );
    // Server-side apply: the field manager's words.
    let mut applied = deployment("shop", "web");
    applied["spec"]["paused2"] = json!(true);
    let (status, _, body) = send(
        &emu,
        "PATCH",
        &format!("{DEPLOYMENTS}/web?fieldValidation=Strict&fieldManager=me&force=true"),
        "application/apply-patch+yaml",
        &applied,
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["message"],
        "failed to create typed patch object (shop/web; apps/v1, Kind=Deployment): .spec.paused2: field not declared in schema"
    );
    // An unknown directive is the options kind's 422.
    let (status, _, body) = send(
        &emu,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=strict"),
        "application/json",
        &deployment("shop", "other"),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["message"],
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"strict\": supported values: \"Ignore\", \"Strict\", \"Warn\""
    );
    emu.shutdown().await;
}

#[tokio::test]
async fn values_of_the_wrong_type_are_the_decoders_go_error() {
    let emu = start().await;
    let cases: Vec<(&str, &str, Value, String)> = vec![
        (
            "a number for an image",
            DEPLOYMENTS,
            {
                let mut d = deployment("shop", "web");
                d["spec"]["template"]["spec"]["containers"][0]["image"] = json!(7);
                d
            },
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string".into(),
        ),
        (
            "a string for the template",
            DEPLOYMENTS,
            {
                let mut d = deployment("shop", "web");
                d["spec"]["template"] = json!("nginx");
                d
            },
            "Deployment in version \"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec".into(),
        ),
        (
            "a Secret value that is not base64",
            "/api/v1/namespaces/shop/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "aGVsbG8"}}),
            "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 4".into(),
        ),
        (
            "a ConfigMap value that is not a string",
            "/api/v1/namespaces/shop/configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": true}}),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal bool into Go struct field ConfigMap.data of type string".into(),
        ),
        (
            "a Service port that is a string",
            "/api/v1/namespaces/shop/services",
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}, "spec": {"ports": [{"port": "http"}]}}),
            "Service in version \"v1\" cannot be handled as a Service: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32".into(),
        ),
    ];
    for (what, path, obj, message) in cases {
        let (status, _, body) = send(&emu, "POST", path, "application/json", &obj).await;
        assert_eq!(
            (status, body["message"].as_str().unwrap_or("")),
            (400, message.as_str()),
            "{what}"
        );
    }
    // Go's leniencies: base64 with line breaks, numbers as quantities, null as "not set".
    let ok: Vec<(&str, Value)> = vec![
        (
            "/api/v1/namespaces/shop/secrets",
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrapped"}, "data": {"k": "aGVs\nbG8="}}),
        ),
        (DEPLOYMENTS, {
            let mut d = deployment("shop", "web");
            d["spec"]["template"]["spec"]["containers"][0]["resources"] =
                json!({"limits": {"cpu": 1, "memory": "64Mi"}});
            d["spec"]["template"]["spec"]["containers"][0]["args"] = Value::Null;
            d
        }),
    ];
    for (path, obj) in ok {
        let (status, warnings, body) = send(&emu, "POST", path, "application/json", &obj).await;
        assert_eq!((status, warnings.len()), (201, 0), "{body}");
    }
    emu.shutdown().await;
}

#[tokio::test]
async fn keys_given_twice_are_refused_warned_about_or_ignored_and_the_last_is_kept() {
    let emu = start().await;
    let body = |name: &str| {
        format!(
            r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"{name}","namespace":"shop","labels":{{"app":"a","app":"b"}}}},
            "spec":{{"replicas":1,"selector":{{"matchLabels":{{"app":"b"}}}},"replicas":3,
            "template":{{"metadata":{{"labels":{{"app":"b"}}}},"spec":{{"containers":[{{"name":"c","image":"i","imagePolicy":"x"}}]}}}}}}}}"#
        )
        .into_bytes()
    };

    // `Strict`, as kubectl sends: one 400 naming each field as the decoder met it.
    let (status, _, answer) = send_bytes(
        &emu,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Strict"),
        "application/json",
        &body("strict"),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        "Deployment in version \"v1\" cannot be handled as a Deployment: strict decoding error: \
         duplicate field \"metadata.labels.app\", duplicate field \"spec.replicas\", \
         unknown field \"spec.template.spec.containers[0].imagePolicy\""
    );
    assert!(
        emu.get_object("deployments", Some("shop"), "strict")
            .is_none()
    );

    // `Warn`, the default: stored with the last value of each, one warning per finding.
    let (status, warnings, stored) = send_bytes(
        &emu,
        "POST",
        DEPLOYMENTS,
        "application/json",
        &body("warned"),
    )
    .await;
    assert_eq!(status, 201, "{stored}");
    assert_eq!(
        warnings,
        [
            r#"299 - "duplicate field \"metadata.labels.app\"""#,
            r#"299 - "duplicate field \"spec.replicas\"""#,
            r#"299 - "unknown field \"spec.template.spec.containers[0].imagePolicy\"""#,
        ]
    );
    assert_eq!(stored["spec"]["replicas"], 3);
    assert_eq!(stored["metadata"]["labels"]["app"], "b");

    // `Ignore`: stored, nothing said.
    let (status, warnings, _) = send_bytes(
        &emu,
        "POST",
        &format!("{DEPLOYMENTS}?fieldValidation=Ignore"),
        "application/json",
        &body("ignored"),
    )
    .await;
    assert_eq!((status, warnings.len()), (201, 0));
}
