use super::*;
use proptest::prelude::*;
use serde_json::json;

fn template(spec: Value) -> Value {
    json!({ "metadata": { "labels": { "app": "x" } }, "spec": spec })
}

/// (case, pod spec, Restart Consumers names, referenced-config entries)
fn table() -> Vec<(&'static str, Value, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        (
            "env secretKeyRef on a container",
            json!({"containers": [{"name": "app", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}]}),
            vec!["db"],
            vec!["Secret/db"],
        ),
        (
            "env secretKeyRef on an initContainer",
            json!({"initContainers": [{"name": "init", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}]}),
            vec!["db"],
            vec!["Secret/db"],
        ),
        (
            "env secretKeyRef on an ephemeralContainer: restart consumers only",
            json!({"ephemeralContainers": [{"name": "dbg", "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}]}),
            vec!["db"],
            vec![],
        ),
        (
            "envFrom secretRef on containers",
            json!({"containers": [{"name": "app", "envFrom": [{"secretRef": {"name": "env"}}]}]}),
            vec!["env"],
            vec!["Secret/env"],
        ),
        (
            "envFrom secretRef on an initContainer (native sidecar)",
            json!({"initContainers": [{"name": "side", "restartPolicy": "Always", "envFrom": [{"secretRef": {"name": "env"}}]}]}),
            vec!["env"],
            vec!["Secret/env"],
        ),
        (
            "envFrom secretRef on an ephemeralContainer",
            json!({"ephemeralContainers": [{"name": "dbg", "envFrom": [{"secretRef": {"name": "env"}}]}]}),
            vec!["env"],
            vec![],
        ),
        (
            "env configMapKeyRef",
            json!({"containers": [{"name": "app", "env": [{"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "k"}}}]}]}),
            vec![],
            vec!["ConfigMap/cfg"],
        ),
        (
            "envFrom configMapRef on an initContainer",
            json!({"initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
            vec![],
            vec!["ConfigMap/cfg"],
        ),
        (
            "envFrom configMapRef on an ephemeralContainer is not referenced config",
            json!({"ephemeralContainers": [{"name": "d", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]}),
            vec![],
            vec![],
        ),
        (
            "secret volume",
            json!({"volumes": [{"name": "certs", "secret": {"secretName": "tls"}}]}),
            vec!["tls"],
            vec!["Secret/tls"],
        ),
        (
            "configMap volume",
            json!({"volumes": [{"name": "conf", "configMap": {"name": "cfg"}}]}),
            vec![],
            vec!["ConfigMap/cfg"],
        ),
        (
            "projected secret and configMap sources",
            json!({"volumes": [{"name": "all", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"secret": {"name": "s1"}},
                {"configMap": {"name": "c1"}},
                {"downwardAPI": {"items": []}}
            ]}}]}),
            vec!["s1"],
            vec!["ConfigMap/c1", "Secret/s1"],
        ),
        (
            "imagePullSecrets: restart consumers only",
            json!({"imagePullSecrets": [{"name": "regcred"}], "containers": []}),
            vec!["regcred"],
            vec![],
        ),
        (
            "secret volume uses secretName, not name",
            json!({"volumes": [{"name": "v", "secret": {"name": "wrong-field"}}]}),
            vec![],
            vec![],
        ),
        (
            "name only in a command argument, label, annotation or plain env value",
            json!({"containers": [{"name": "app", "command": ["run", "--secret=db"], "args": ["db"],
                "env": [{"name": "DB_SECRET", "value": "db"}]}]}),
            vec![],
            vec![],
        ),
        (
            "csi nodePublishSecretRef is outside both policies",
            json!({"volumes": [{"name": "v", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "db"}}}]}),
            vec![],
            vec![],
        ),
        (
            "wrong types at every level are skipped",
            json!({
                "containers": {"name": "not-a-list"},
                "initContainers": [5, "x", null, {"name": 7, "env": {"a": 1}, "envFrom": "db"},
                    {"env": [null, 3, {"valueFrom": "db"}, {"valueFrom": {"secretKeyRef": "db"}},
                             {"valueFrom": {"secretKeyRef": {"name": 5}}},
                             {"valueFrom": {"secretKeyRef": {"name": ""}}}],
                     "envFrom": [null, {"secretRef": null}, {"secretRef": {"name": ["db"]}}]}],
                "volumes": [null, {"secret": "db"}, {"secret": {"secretName": true}},
                    {"projected": {"sources": {"secret": {"name": "db"}}}},
                    {"projected": {"sources": [null, {"secret": []}]}}],
                "imagePullSecrets": ["db", {"name": null}, {"name": 1}]
            }),
            vec![],
            vec![],
        ),
        (
            "null lists",
            json!({"containers": null, "initContainers": null, "ephemeralContainers": null, "volumes": null, "imagePullSecrets": null}),
            vec![],
            vec![],
        ),
        (
            "duplicates are reported once in the sorted sets",
            json!({"containers": [
                {"name": "a", "envFrom": [{"secretRef": {"name": "db"}}], "env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "db", "key": "k"}}}]},
                {"name": "b", "envFrom": [{"secretRef": {"name": "db"}}]}],
                "volumes": [{"name": "v", "secret": {"secretName": "db"}}]}),
            vec!["db", "db", "db", "db"],
            vec!["Secret/db"],
        ),
    ]
}

#[test]
fn reference_paths_table() {
    for (case, spec, consumers, config) in table() {
        let template = template(spec);
        let names: Vec<String> = restart_consumers(&template)
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, consumers, "restart consumers: {case}");
        let config_names: Vec<String> = referenced_config(&template)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(config_names, config, "referenced config: {case}");
    }
}

#[test]
fn substring_names_never_match() {
    let template = template(json!({"containers": [{"name": "app",
        "envFrom": [{"secretRef": {"name": "db-credentials"}}]}],
        "volumes": [{"name": "v", "secret": {"secretName": "my-db"}}]}));
    assert!(!consumes_secret(&template, "db"));
    assert!(!consumes_secret(&template, "db-credential"));
    assert!(consumes_secret(&template, "db-credentials"));
    assert!(consumes_secret(&template, "my-db"));
}

#[test]
fn origins_are_recorded() {
    let template = template(json!({
        "containers": [{"name": "app", "env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password", "optional": true}}}],
            "envFrom": [{"prefix": "DB_", "secretRef": {"name": "db"}}]}],
        "volumes": [{"name": "proj", "projected": {"sources": [{"configMap": {"name": "c"}}, {"secret": {"name": "db", "optional": true}}]}}],
        "imagePullSecrets": [{"name": "db"}]
    }));
    let json = serde_json::to_value(extract(&template)).unwrap();
    assert_eq!(
        json,
        json!([
            {"kind": "Secret", "name": "db", "via": "env", "containerList": "container", "container": "app", "env": "PW", "key": "password", "optional": true},
            {"kind": "Secret", "name": "db", "via": "envFrom", "containerList": "container", "container": "app", "prefix": "DB_", "optional": false},
            {"kind": "ConfigMap", "name": "c", "via": "projectedVolume", "volume": "proj", "source": 0, "optional": false},
            {"kind": "Secret", "name": "db", "via": "projectedVolume", "volume": "proj", "source": 1, "optional": true},
            {"kind": "Secret", "name": "db", "via": "imagePullSecret"}
        ])
    );
}

#[test]
fn not_a_template() {
    for value in [
        json!(null),
        json!([]),
        json!("x"),
        json!({"spec": []}),
        json!({"spec": null}),
    ] {
        assert!(extract(&value).is_empty());
    }
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let names = prop_oneof![
        Just("containers"),
        Just("initContainers"),
        Just("ephemeralContainers"),
        Just("volumes"),
        Just("imagePullSecrets"),
        Just("env"),
        Just("envFrom"),
        Just("valueFrom"),
        Just("secretKeyRef"),
        Just("configMapKeyRef"),
        Just("secretRef"),
        Just("configMapRef"),
        Just("secret"),
        Just("configMap"),
        Just("projected"),
        Just("sources"),
        Just("name"),
        Just("secretName"),
        Just("optional"),
        Just("spec"),
        Just("key"),
        Just("prefix"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((names.clone(), inner), 0..5).prop_map(|fields| {
                Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

proptest! {
    #[test]
    fn extraction_never_panics(value in arbitrary_json()) {
        let references = extract(&value);
        for reference in &references {
            prop_assert!(!reference.name.is_empty());
        }
        let _ = referenced_config(&value);
        let _ = restart_consumers(&json!({"spec": value}));
    }
}
