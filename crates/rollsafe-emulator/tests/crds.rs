//! CustomResourceDefinitions make their kinds servable, as on a real server: discovery lists
//! them, every served version reads the same objects, and removing the CRD removes its objects
//! and the kinds. Each emulator serves only its own CRDs' kinds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const JSON: &str = "application/json";

fn widget_crd(group: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("widgets.{group}")},
           "spec": {"group": group, "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                    "versions": [
                        {"name": "v1", "served": true, "storage": true,
                         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                         "subresources": {"status": {}}},
                        {"name": "v1beta1", "served": true, "storage": false,
                         "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}})
}

#[tokio::test]
async fn a_crd_makes_its_kind_servable_in_every_served_version() {
    let emu = start().await;
    let other = start().await;
    let group = "crd-served.example.com";
    let widgets = format!("/apis/{group}/v1/namespaces/shop/widgets");
    let (status, _, _) = send(&emu, "GET", &widgets, JSON, &json!({})).await;
    assert_eq!(status, 404, "unknown before its CRD");

    let (status, _, crd) = send(&emu, "POST", CRDS, JSON, &widget_crd(group)).await;
    assert_eq!(status, 201, "{crd}");
    let conditions: Vec<(&str, &str)> = crd["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["type"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        conditions,
        [("NamesAccepted", "True"), ("Established", "True")]
    );
    assert_eq!(crd["status"]["acceptedNames"]["listKind"], "WidgetList");
    assert_eq!(crd["status"]["storedVersions"], json!(["v1"]));

    // Discovery: the group with both versions, the storage version preferred.
    let (_, _, found) = send(&emu, "GET", &format!("/apis/{group}"), JSON, &json!({})).await;
    assert_eq!(found["preferredVersion"]["version"], "v1");
    let versions: Vec<&str> = found["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["v1", "v1beta1"]);
    let (_, _, list) = send(&emu, "GET", &format!("/apis/{group}/v1"), JSON, &json!({})).await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    assert_eq!(list["resources"][0]["shortNames"], json!(["wd"]));

    // Objects: written in one version, read in the other with its apiVersion.
    let (status, _, created) = send(
        &emu,
        "POST",
        &widgets,
        JSON,
        &json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
                "metadata": {"name": "w1"}, "spec": {"size": 3}}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["metadata"]["generation"], 1);
    let (status, _, beta) = send(
        &emu,
        "GET",
        &format!("/apis/{group}/v1beta1/namespaces/shop/widgets/w1"),
        JSON,
        &json!({}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(beta["apiVersion"], format!("{group}/v1beta1"));
    assert_eq!(beta["spec"]["size"], 3);
    let (_, _, items) = send(&emu, "GET", &widgets, JSON, &json!({})).await;
    assert_eq!(items["kind"], "WidgetList");
    assert_eq!(
        items["items"][0]["kind"], "Widget",
        "custom resources keep their kind in lists"
    );

    // Another emulator in the process has no such CRD.
    let (status, _, _) = send(&other, "GET", &widgets, JSON, &json!({})).await;
    assert_eq!(status, 404);
    let (_, _, groups) = send(&other, "GET", "/apis", JSON, &json!({})).await;
    assert!(
        !groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == group)
    );

    // Removing the CRD removes its objects and its kind.
    let (status, _, _) = send(
        &emu,
        "DELETE",
        &format!("{CRDS}/widgets.{group}"),
        JSON,
        &json!({}),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _, _) = send(&emu, "GET", &widgets, JSON, &json!({})).await;
    assert_eq!(status, 404);
    let (status, _, _) = send(&emu, "POST", CRDS, JSON, &widget_crd(group)).await;
    assert_eq!(status, 201);
    let (_, _, items) = send(&emu, "GET", &widgets, JSON, &json!({})).await;
    assert_eq!(items["items"], json!([]), "the old objects are gone");
    emu.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn a_crd_the_real_server_refuses_is_refused() {
    let emu = start().await;
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "a name that is not plural.group",
            {
                let mut crd = widget_crd("crd-refused.example.com");
                crd["metadata"]["name"] = json!("widgets");
                crd
            },
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets\" is invalid: metadata.name: Invalid value: \"widgets\": must be spec.names.plural+\".\"+spec.group",
        ),
        (
            "an unknown scope",
            {
                let mut crd = widget_crd("crd-refused.example.com");
                crd["spec"]["scope"] = json!("Galaxy");
                crd
            },
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.crd-refused.example.com\" is invalid: spec.scope: Unsupported value: \"Galaxy\": supported values: \"Cluster\", \"Namespaced\"",
        ),
        (
            "two storage versions",
            {
                let mut crd = widget_crd("crd-refused.example.com");
                crd["spec"]["versions"][1]["storage"] = json!(true);
                crd
            },
            "CustomResourceDefinition.apiextensions.k8s.io \"widgets.crd-refused.example.com\" is invalid: spec.versions: Invalid value: []apiextensions.CustomResourceDefinitionVersion{…}: must have exactly one version marked as storage version",
        ),
    ];
    for (what, crd, message) in cases {
        let (status, _, body) = send(&emu, "POST", CRDS, JSON, &crd).await;
        assert_eq!(
            (status, body["message"].as_str().unwrap_or("")),
            (422, message),
            "{what}"
        );
    }
    emu.shutdown().await;
}

/// A CRD's structural schema is applied to its objects: undeclared fields are refused, warned
/// about or dropped by `fieldValidation`, defaults fill what is missing, and a value the schema
/// refuses is the 422 a real server answers.
#[tokio::test]
async fn a_crds_schema_prunes_defaults_and_validates_its_objects() {
    let emu = start().await;
    let group = "crd-schema.example.com";
    let mut crd = widget_crd(group);
    crd["spec"]["versions"] = json!([{"name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1},
                "mode": {"type": "string", "enum": ["fast", "safe"], "default": "safe"}}}}}}}]);
    let (status, _, answer) = send(&emu, "POST", CRDS, JSON, &crd).await;
    assert_eq!(status, 201, "{answer}");
    let widgets = format!("/apis/{group}/v1/namespaces/shop/widgets");
    let widget = |name: &str, spec: Value| {
        json!({"apiVersion": format!("{group}/v1"), "kind": "Widget",
               "metadata": {"name": name, "namespace": "shop"}, "spec": spec})
    };

    let (status, _, answer) = send(
        &emu,
        "POST",
        &format!("{widgets}?fieldValidation=Strict"),
        JSON,
        &widget("strict", json!({"size": 1, "colour": "red"})),
    )
    .await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(
        answer["message"],
        "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.colour\""
    );

    let (status, warnings, stored) = send(
        &emu,
        "POST",
        &widgets,
        JSON,
        &widget("warned", json!({"size": 1, "colour": "red"})),
    )
    .await;
    assert_eq!(status, 201, "{stored}");
    assert_eq!(warnings, [r#"299 - "unknown field \"spec.colour\"""#]);
    assert_eq!(stored["spec"], json!({"size": 1, "mode": "safe"}));

    let (status, _, answer) = send(
        &emu,
        "POST",
        &widgets,
        JSON,
        &widget("bad", json!({"size": "three", "mode": "slow"})),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["message"],
        "Widget.crd-schema.example.com \"bad\" is invalid: [spec.size: Invalid value: \"string\": \
         spec.size in body must be of type integer: \"string\", spec.mode: Unsupported value: \
         \"slow\": supported values: \"fast\", \"safe\"]"
    );
    assert_eq!(
        answer["details"]["causes"][0]["reason"],
        "FieldValueTypeInvalid"
    );
    assert_eq!(answer["details"]["causes"][0]["field"], "spec.size");
    assert!(emu.get_object("widgets", Some("shop"), "bad").is_none());

    // A merge patch is checked on the object it makes.
    let (status, _, answer) = send(
        &emu,
        "PATCH",
        &format!("{widgets}/warned"),
        "application/merge-patch+json",
        &json!({"spec": {"size": 0}}),
    )
    .await;
    assert_eq!(status, 422, "{answer}");
    assert_eq!(
        answer["details"]["causes"][0]["message"],
        "Invalid value: 0: spec.size in body should be greater than or equal to 1"
    );
}
