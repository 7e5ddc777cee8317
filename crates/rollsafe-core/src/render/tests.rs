use super::*;
use crate::annotations::POD_TEMPLATE_STAMP;
use proptest::prelude::*;
use serde_json::json;

// ---- builders ----------------------------------------------------------------------------

fn deployment(name: &str, env_from_configmaps: &[&str], secret_volumes: &[&str]) -> Value {
    let env_from: Vec<Value> = env_from_configmaps
        .iter()
        .map(|n| json!({"configMapRef": {"name": n}}))
        .collect();
    let volumes: Vec<Value> = secret_volumes
        .iter()
        .map(|n| json!({"name": format!("v-{n}"), "secret": {"secretName": n, "optional": true}}))
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "replicas": 2,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": "app:1", "envFrom": env_from}],
                    "volumes": volumes
                }
            }
        }
    })
}

fn configmap(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ns"}, "data": {"key": value}})
}

fn secret(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "ns"}, "data": {"password": value}})
}

fn service(port: u16) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "ns"}, "spec": {"ports": [{"port": port}]}})
}

fn external_secret(name: &str, target: Option<&str>, key: &str) -> Value {
    let mut spec =
        json!({"refreshInterval": "15s", "data": [{"secretKey": "k", "remoteRef": {"key": key}}]});
    if let Some(target) = target {
        spec["target"] = json!({"name": target, "creationPolicy": "Owner"});
    }
    json!({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret", "metadata": {"name": name, "namespace": "ns"}, "spec": spec})
}

fn mark(mut object: Value, value: Value) -> Value {
    object["metadata"]["annotations"] = json!({ RESTART_ON_CHANGE: value });
    object
}

/// [`super::render`] over owned values, as the tests hold them.
fn render(
    objects: &mut [Value],
    previous: Option<&[Value]>,
    settings: &RenderSettings,
) -> Result<Vec<Update>, RenderError> {
    let mut targets: Vec<&mut Value> = objects.iter_mut().collect();
    let previous: Option<Vec<&Value>> = previous.map(|p| p.iter().collect());
    super::render(&mut targets, previous.as_deref(), settings)
}

fn settings(referenced: bool) -> RenderSettings {
    RenderSettings {
        workload_type: Some(WorkloadType::Deployment),
        referenced_config_rollout: referenced,
        fingerprint_key: None,
        release_namespace: None,
    }
}

fn run(input: &[Value], previous: Option<&[Value]>, settings: &RenderSettings) -> Vec<Value> {
    let mut objects = input.to_vec();
    render(&mut objects, previous, settings).unwrap();
    objects
}

fn hash_of(objects: &[Value], name: &str) -> Option<String> {
    objects
        .iter()
        .find(|o| {
            o["metadata"]["name"] == json!(name)
                && (o["kind"] == "Deployment" || o["kind"] == "StatefulSet")
        })
        .and_then(|o| o.pointer("/spec/template/metadata/annotations"))
        .and_then(|a| a.get(DP_RESOURCE_HASH))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn app_hash(objects: &[Value]) -> Option<String> {
    hash_of(objects, "app")
}

/// A render sequence: each step renders with the previous step's output as `--previous`.
struct Sequence {
    last: Option<Vec<Value>>,
}

impl Sequence {
    fn new() -> Self {
        Self { last: None }
    }

    fn render(&mut self, input: &[Value], referenced: bool) -> Option<String> {
        self.render_with(input, &settings(referenced))
    }

    fn render_with(&mut self, input: &[Value], settings: &RenderSettings) -> Option<String> {
        let previous = self.last.clone().unwrap_or_default();
        let out = run(input, Some(&previous), settings);
        let hash = app_hash(&out);
        self.last = Some(out);
        hash
    }
}

fn base() -> Vec<Value> {
    vec![
        configmap("env", "a"),
        secret("creds", "c2VjcmV0"),
        service(80),
        configmap("unused", "u"),
        deployment("app", &["env"], &["creds"]),
    ]
}

fn with(
    mut objects: Vec<Value>,
    name: &str,
    kind: &str,
    change: impl FnOnce(&mut Value),
) -> Vec<Value> {
    let object = objects
        .iter_mut()
        .find(|o| o["metadata"]["name"] == json!(name) && o["kind"] == json!(kind))
        .unwrap();
    change(object);
    objects
}

fn without(objects: Vec<Value>, name: &str, kind: &str) -> Vec<Value> {
    objects
        .into_iter()
        .filter(|o| !(o["metadata"]["name"] == json!(name) && o["kind"] == json!(kind)))
        .collect()
}

// ---- default mode (upstream) ----------------------------------------------------------------

#[test]
fn upstream_table_cases() {
    let empty_deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"template": {"metadata": {}, "spec": {}}}});
    let out = run(
        &[empty_deployment.clone(), configmap("c", "value")],
        None,
        &settings(false),
    );
    assert!(hash_of(&out, "d").is_some_and(|h| !h.is_empty()));

    let statefulset = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": {"metadata": {}, "spec": {}}}});
    let s = RenderSettings {
        workload_type: Some(WorkloadType::StatefulSet),
        ..RenderSettings::default()
    };
    let out = run(&[statefulset, secret("x", "secret123")], None, &s);
    assert!(hash_of(&out, "s").is_some());

    let out = run(
        std::slice::from_ref(&empty_deployment),
        None,
        &settings(false),
    );
    assert_eq!(hash_of(&out, "d"), None, "nothing to hash: no annotation");
    assert_eq!(out[0], empty_deployment, "and the object is untouched");

    let out = run(&[empty_deployment, service(80)], None, &settings(false));
    assert!(hash_of(&out, "d").is_some());
}

#[test]
fn default_hash_matches_the_vectors() {
    // The ConfigMap vector: metadata is stripped, so any name gives 74f6bb69b4.
    let input = vec![configmap("anything", "value"), deployment("app", &[], &[])];
    let out = run(&input, None, &settings(false));
    assert_eq!(app_hash(&out).as_deref(), Some("74f6bb69b4"));
    let input = vec![
        service(80),
        deployment("app", &[], &[]),
        secret("s", "secret123"),
        configmap("c", "value"),
    ];
    let out = run(&input, None, &settings(false));
    assert_eq!(app_hash(&out).as_deref(), Some("5f85d686fd"));
}

#[test]
fn order_independence_upstream_orders() {
    let cm = configmap("c", "value");
    let sec = secret("s", "secret123");
    let mut svc = service(80);
    svc["metadata"]["namespace"] = json!("default");
    let dep = deployment("app", &[], &[]);
    let orders = [
        vec![cm.clone(), sec.clone(), svc.clone(), dep.clone()],
        vec![svc.clone(), dep.clone(), cm.clone(), sec.clone()],
        vec![sec, svc, cm, dep],
    ];
    let hashes: Vec<_> = orders
        .iter()
        .map(|o| app_hash(&run(o, None, &settings(false))))
        .collect();
    assert!(hashes[0].is_some());
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");
}

#[test]
fn only_the_first_workload_of_the_type_is_annotated_and_same_kind_is_excluded() {
    let input = vec![
        configmap("c", "v"),
        deployment("app", &[], &[]),
        deployment("second", &[], &[]),
    ];
    let out = run(&input, None, &settings(false));
    assert!(app_hash(&out).is_some());
    assert_eq!(hash_of(&out, "second"), None);
    // The second Deployment is not hashed: changing it changes nothing.
    let changed = with(input, "second", "Deployment", |d| {
        d["spec"]["replicas"] = json!(9)
    });
    assert_eq!(
        app_hash(&run(&changed, None, &settings(false))),
        app_hash(&out)
    );
}

#[test]
fn network_policies_are_not_hashed() {
    let policy = |port: u16| json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"}, "spec": {"ingress": [{"ports": [{"port": port}]}]}});
    let a = run(
        &[configmap("c", "v"), policy(80), deployment("app", &[], &[])],
        None,
        &settings(false),
    );
    let b = run(
        &[configmap("c", "v"), policy(81), deployment("app", &[], &[])],
        None,
        &settings(false),
    );
    assert_eq!(app_hash(&a), app_hash(&b));
    let only_policy = run(
        &[policy(80), deployment("app", &[], &[])],
        None,
        &settings(false),
    );
    assert_eq!(app_hash(&only_policy), None);
}

#[test]
fn every_deployment_and_statefulset_without_a_workload_type() {
    let statefulset = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"}, "spec": {"template": {"spec": {"containers": []}}}});
    let input = vec![
        configmap("c", "v"),
        deployment("app", &[], &[]),
        deployment("worker", &[], &[]),
        statefulset,
    ];
    let per_kind = RenderSettings::default();
    let out = run(&input, None, &per_kind);
    let (app, worker, db) = (app_hash(&out), hash_of(&out, "worker"), hash_of(&out, "db"));
    assert!(app.is_some() && db.is_some());
    assert_eq!(
        app, worker,
        "both Deployments hash the same non-Deployment resources"
    );
    assert_ne!(app, db);
    // Rendering the output again changes nothing (the workloads' own annotation is not hashed).
    assert_eq!(run(&out, None, &per_kind), out);
    // A Deployment's content is part of the StatefulSet's hash.
    let changed = with(input, "worker", "Deployment", |d| {
        d["spec"]["replicas"] = json!(5)
    });
    let again = run(&changed, None, &per_kind);
    assert_eq!(app_hash(&again), app);
    assert_ne!(hash_of(&again, "db"), db);
}

#[test]
fn metadata_only_changes_do_not_change_the_hash() {
    let input = base();
    let changed = with(input.clone(), "env", "ConfigMap", |c| {
        c["metadata"]["labels"] = json!({"x": "y"});
        c["metadata"]["annotations"] = json!({"note": "changed"});
    });
    let a = run(&input, None, &settings(false));
    let b = run(&changed, None, &settings(false));
    assert_eq!(app_hash(&a), app_hash(&b));
    let content = with(input, "env", "ConfigMap", |c| c["data"]["key"] = json!("b"));
    assert_ne!(
        app_hash(&run(&content, None, &settings(false))),
        app_hash(&a)
    );
}

#[test]
fn missing_spec_fails_naming_the_workload() {
    let input = vec![
        configmap("c", "v"),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "broken", "namespace": "ns"}}),
    ];
    let mut objects = input.clone();
    let error = render(&mut objects, None, &settings(false)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "Deployment ns/broken: resource missing spec"
    );
    assert_eq!(error.index(), 1);
    assert_eq!(objects, input, "nothing was written");
    // Nothing to hash: no annotation, so no error (upstream returns before writing).
    assert!(render(&mut [input[1].clone()], None, &settings(false)).is_ok());
    let bad_template =
        json!({"kind": "Deployment", "metadata": {"name": "b"}, "spec": {"template": "x"}});
    let error = render(
        &mut [configmap("c", "v"), bad_template],
        None,
        &settings(false),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Deployment b: spec.template is not a map"
    );
}

#[test]
fn default_mode_overwrites_and_removes_state() {
    let mut dep = deployment("app", &[], &[]);
    dep["spec"]["template"]["metadata"]["annotations"] =
        json!({DP_RESOURCE_HASH: "stale", "other": "kept"});
    dep["metadata"]["annotations"] = json!({REFERENCED_CONFIG_STATE: "v1;key=none", "x": "1"});
    let out = run(&[configmap("c", "value"), dep], None, &settings(false));
    let dep = &out[1];
    assert_eq!(
        dep["spec"]["template"]["metadata"]["annotations"],
        json!({DP_RESOURCE_HASH: "74f6bb69b4", "other": "kept"})
    );
    assert_eq!(dep["metadata"]["annotations"], json!({"x": "1"}));
}

// ---- referenced-config mode: what restarts the pods ------------------------------------------

#[test]
fn referenced_configmap_change_restarts_service_change_does_not() {
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), true);
    assert!(h0.is_some());
    let h1 = seq.render(
        &with(base(), "svc", "Service", |s| {
            s["spec"]["ports"][0]["port"] = json!(81)
        }),
        true,
    );
    assert_eq!(h1, h0, "a Service change does not restart");
    let h2 = seq.render(
        &with(base(), "unused", "ConfigMap", |c| {
            c["data"]["key"] = json!("z")
        }),
        true,
    );
    assert_eq!(h2, h1, "an unreferenced ConfigMap does not restart");
    let h3 = seq.render(
        &with(base(), "env", "ConfigMap", |c| {
            c["data"]["key"] = json!("b")
        }),
        true,
    );
    assert_ne!(h3, h2, "a referenced ConfigMap restarts");
    let h4 = seq.render(
        &with(base(), "creds", "Secret", |c| {
            c["data"]["password"] = json!("bmV3")
        }),
        true,
    );
    assert_ne!(h4, h3, "a referenced Secret restarts");
    let h5 = seq.render(
        &with(base(), "creds", "Secret", |c| {
            c["data"]["password"] = json!("bmV3")
        }),
        true,
    );
    assert_eq!(h5, h4, "rendering again without a change restarts nothing");
}

#[test]
fn external_secret_by_target_name_or_own_name() {
    let dep = deployment("app", &[], &["target-secret", "es-own"]);
    let input = |k1: &str, k2: &str| {
        vec![
            external_secret("es-named-otherwise", Some("target-secret"), k1),
            external_secret("es-own", None, k2),
            external_secret("es-unused", Some("nobody"), "x"),
            dep.clone(),
        ]
    };
    let mut seq = Sequence::new();
    let h0 = seq.render(&input("a", "b"), true);
    let h1 = seq.render(&input("a2", "b"), true);
    assert_ne!(h1, h0, "spec.target.name is the Secret the pods mount");
    let h2 = seq.render(&input("a2", "b2"), true);
    assert_ne!(
        h2, h1,
        "without spec.target.name, the ExternalSecret's own name"
    );
    let mut unused_changed = input("a2", "b2");
    unused_changed[2]["spec"]["refreshInterval"] = json!("1h");
    assert_eq!(seq.render(&unused_changed, true), h2);
}

#[test]
fn init_containers_and_env_value_from_count() {
    let mut dep = deployment("app", &[], &[]);
    dep["spec"]["template"]["spec"]["initContainers"] = json!([{"name": "sidecar", "restartPolicy": "Always", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "sidecar-config", "key": "k"}}}]}]);
    let input = |v: &str| vec![configmap("sidecar-config", v), dep.clone()];
    let mut seq = Sequence::new();
    let h0 = seq.render(&input("1"), true);
    assert_ne!(seq.render(&input("2"), true), h0);
}

#[test]
fn a_reference_only_matches_in_the_same_namespace() {
    let mut other = configmap("env", "a");
    other["metadata"]["namespace"] = json!("elsewhere");
    let input = |v: &str| {
        let mut o = other.clone();
        o["data"]["key"] = json!(v);
        vec![o, deployment("app", &["env"], &[])]
    };
    let mut seq = Sequence::new();
    let h0 = seq.render(&input("a"), true);
    assert_eq!(seq.render(&input("b"), true), h0);
    // A resource without a namespace is taken to share the workload's.
    let mut plain = configmap("env", "a");
    plain["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("namespace");
    let mut seq = Sequence::new();
    let h0 = seq.render(&[plain.clone(), deployment("app", &["env"], &[])], true);
    plain["data"]["key"] = json!("b");
    assert_ne!(
        seq.render(&[plain, deployment("app", &["env"], &[])], true),
        h0
    );
}

#[test]
fn restart_on_change_true_false_unset() {
    // "true": an unreferenced resource of any kind restarts the pods.
    let input = |port: u16| {
        vec![
            mark(service(port), json!("true")),
            configmap("env", "a"),
            deployment("app", &["env"], &[]),
        ]
    };
    let mut seq = Sequence::new();
    let h0 = seq.render(&input(80), true);
    assert_ne!(seq.render(&input(81), true), h0);
    // "false": a referenced ConfigMap does not.
    let input = |v: &str| {
        vec![
            mark(configmap("env", v), json!("false")),
            deployment("app", &["env"], &[]),
        ]
    };
    let mut seq = Sequence::new();
    let h0 = seq.render(&input("a"), true);
    assert_eq!(seq.render(&input("b"), true), h0);
}

#[test]
fn invalid_restart_on_change_fails_naming_the_resource() {
    for (value, shown) in [
        (json!("yes"), "\"yes\""),
        (
            json!(true),
            "true (a boolean, not a string; quote it in YAML)",
        ),
        (json!("True"), "\"True\""),
        (json!(""), "\"\""),
    ] {
        let input = vec![
            mark(configmap("flags", "a"), value),
            deployment("app", &[], &[]),
        ];
        let mut objects = input.clone();
        let error = render(&mut objects, None, &settings(true)).unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "ConfigMap ns/flags: invalid openchoreo.dev/restart-on-change annotation {shown}: the value must be the string \"true\" or \"false\""
            )
        );
        assert_eq!(objects, input);
        // Not validated while the setting is off.
        let mut objects = input.clone();
        assert!(render(&mut objects, None, &settings(false)).is_ok());
    }
}

#[test]
fn restart_on_change_is_ignored_on_the_workload() {
    let dep = mark(deployment("app", &["env"], &[]), json!("not a boolean"));
    let mut seq = Sequence::new();
    let h0 = seq.render(&[configmap("env", "a"), dep.clone()], true);
    assert!(h0.is_some());
    assert_ne!(seq.render(&[configmap("env", "b"), dep], true), h0);
}

// ---- referenced-config mode: the promises of "Behavior to Know" -----------------------------

/// 1. Turning the setting on does not restart pods.
#[test]
fn promise_1_turning_the_setting_on_restarts_nothing() {
    let mut seq = Sequence::new();
    let off = seq.render(&base(), false);
    let on = seq.render(&base(), true);
    assert_eq!(on, off);
    // Even when a non-referenced resource changed in the same render.
    let mut seq = Sequence::new();
    let off = seq.render(&base(), false);
    let on = seq.render(
        &with(base(), "svc", "Service", |s| {
            s["spec"]["ports"][0]["port"] = json!(90)
        }),
        true,
    );
    assert_eq!(on, off);
    // From then on, a referenced change restarts.
    let later = seq.render(
        &with(
            with(base(), "svc", "Service", |s| {
                s["spec"]["ports"][0]["port"] = json!(90)
            }),
            "env",
            "ConfigMap",
            |c| c["data"]["key"] = json!("new"),
        ),
        true,
    );
    assert_ne!(later, on);
}

/// 2. Changing the annotation does not restart pods; it only decides about later changes.
#[test]
fn promise_2_changing_restart_on_change_restarts_nothing() {
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), true);
    // Add "false" to the referenced ConfigMap.
    let off = |v: &str| {
        with(base(), "env", "ConfigMap", |c| {
            *c = mark(c.clone(), json!("false"));
            c["data"]["key"] = json!(v);
        })
    };
    assert_eq!(seq.render(&off("a"), true), h0);
    // Its changes no longer restart.
    assert_eq!(seq.render(&off("b"), true), h0);
    // Remove the annotation again: no restart by itself, although the content changed while it
    // was "false" (the comparison is with the content last seen).
    let unset = |v: &str| with(base(), "env", "ConfigMap", |c| c["data"]["key"] = json!(v));
    assert_eq!(seq.render(&unset("b"), true), h0);
    // Later changes restart again.
    let h1 = seq.render(&unset("c"), true);
    assert_ne!(h1, h0);
    // "true" on an unreferenced resource, then "true" removed: no restart either way.
    let marked = |port: u16| {
        with(unset("c"), "svc", "Service", |s| {
            *s = mark(s.clone(), json!("true"));
            s["spec"]["ports"][0]["port"] = json!(port);
        })
    };
    assert_eq!(seq.render(&marked(80), true), h1);
    let h2 = seq.render(&marked(81), true);
    assert_ne!(h2, h1, "a later change to a \"true\" resource restarts");
    assert_eq!(
        seq.render(
            &with(
                unset("c"),
                "svc",
                "Service",
                |s| s["spec"]["ports"][0]["port"] = json!(81)
            ),
            true
        ),
        h2
    );
}

/// 2. (continued) Attaching and removing the opt-out trait restarts nothing.
#[test]
fn promise_2_the_opt_out_trait() {
    let trait_doc = json!({
        "apiVersion": "openchoreo.dev/v1alpha1", "kind": "ClusterTrait",
        "metadata": {"name": "no-restart-on-config-change"},
        "spec": {"patches": [
            {"target": {"group": "", "version": "v1", "kind": "ConfigMap"}, "operations": [{"op": "add", "path": "/metadata/annotations/openchoreo.dev~1restart-on-change", "value": "false"}]},
            {"target": {"group": "", "version": "v1", "kind": "Secret"}, "operations": [{"op": "add", "path": "/metadata/annotations/openchoreo.dev~1restart-on-change", "value": "false"}]},
            {"target": {"group": "external-secrets.io", "version": "v1", "kind": "ExternalSecret"}, "operations": [{"op": "add", "path": "/metadata/annotations/openchoreo.dev~1restart-on-change", "value": "false"}]},
        ]}
    });
    let patches = patch::parse([&trait_doc]).unwrap();
    let patched = |objects: Vec<Value>| -> Vec<Value> {
        objects
            .into_iter()
            .enumerate()
            .map(|(i, mut o)| {
                patch::apply(&patches, &mut o, i).unwrap();
                o
            })
            .collect()
    };
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), true);
    assert_eq!(
        seq.render(&patched(base()), true),
        h0,
        "attaching the trait"
    );
    let changed = with(base(), "env", "ConfigMap", |c| {
        c["data"]["key"] = json!("z")
    });
    assert_eq!(
        seq.render(&patched(changed.clone()), true),
        h0,
        "changes while attached"
    );
    assert_eq!(seq.render(&changed, true), h0, "removing the trait");
}

/// 3. Turning the setting off restarts at most once, and not when nothing changed.
#[test]
fn promise_3_turning_the_setting_off() {
    // Nothing changed while on: no restart.
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), false);
    assert_eq!(seq.render(&base(), true), h0);
    assert_eq!(seq.render(&base(), true), h0);
    assert_eq!(seq.render(&base(), false), h0);

    // A non-referenced change while on: no restart then, one restart when turned off.
    let svc = with(base(), "svc", "Service", |s| {
        s["spec"]["ports"][0]["port"] = json!(81)
    });
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), false);
    assert_eq!(seq.render(&svc, true), h0);
    let h1 = seq.render(&svc, false);
    assert_ne!(h1, h0);
    assert_eq!(seq.render(&svc, false), h1, "only once");

    // A referenced change while on: restarted then, and once more when turned off.
    let env = with(base(), "env", "ConfigMap", |c| {
        c["data"]["key"] = json!("b")
    });
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), false);
    assert_eq!(seq.render(&base(), true), h0);
    let h1 = seq.render(&env, true);
    assert_ne!(h1, h0);
    let h2 = seq.render(&env, false);
    assert_ne!(h2, h1);
    assert_eq!(seq.render(&env, false), h2);

    // A workload first rendered while on: turning off without changes restarts nothing.
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), true);
    assert_eq!(seq.render(&base(), false), h0);
}

/// 4. Removing a referenced ConfigMap, Secret or ExternalSecret, or a "true" resource, restarts.
#[test]
fn promise_4_removing_a_referenced_or_true_resource_restarts() {
    for (name, kind) in [("env", "ConfigMap"), ("creds", "Secret")] {
        let mut seq = Sequence::new();
        let h0 = seq.render(&base(), true);
        let h1 = seq.render(&without(base(), name, kind), true);
        assert_ne!(h1, h0, "{kind} removed; the pod template did not change");
        assert_eq!(seq.render(&without(base(), name, kind), true), h1);
    }
    // An ExternalSecret that creates a Secret mounted as optional.
    let input = vec![
        external_secret("es", Some("creds"), "k"),
        deployment("app", &[], &["creds"]),
    ];
    let mut seq = Sequence::new();
    let h0 = seq.render(&input, true);
    assert_ne!(seq.render(&input[1..], true), h0);
    // A "true" resource.
    let input = vec![
        mark(service(80), json!("true")),
        deployment("app", &[], &[]),
    ];
    let mut seq = Sequence::new();
    let h0 = seq.render(&input, true);
    assert!(h0.is_some());
    assert_ne!(seq.render(&input[1..], true), h0);
    // Neither a "false" one, nor one that does not matter.
    let input = vec![
        mark(configmap("env", "a"), json!("false")),
        service(80),
        deployment("app", &["env"], &[]),
    ];
    let mut seq = Sequence::new();
    let h0 = seq.render(&input, true);
    assert_eq!(seq.render(&input[1..], true), h0);
    assert_eq!(seq.render(&input[2..], true), h0);
    // Rendered again (an optional reference that appears): restarts too.
    let mut seq = Sequence::new();
    let h0 = seq.render(&without(base(), "env", "ConfigMap"), true);
    assert_ne!(seq.render(&base(), true), h0);
}

/// 5. Pod template changes always roll the pods, whatever the setting.
#[test]
fn promise_5_pod_template_changes_are_not_masked() {
    for referenced in [false, true] {
        let mut seq = Sequence::new();
        seq.render(&base(), referenced);
        let before = seq.last.clone().unwrap();
        let new_image = with(base(), "app", "Deployment", |d| {
            d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("app:2");
        });
        seq.render(&new_image, referenced);
        let after = seq.last.clone().unwrap();
        let template = |objects: &[Value]| objects[4]["spec"]["template"].clone();
        assert_ne!(template(&after), template(&before));
        assert_eq!(
            template(&after)["spec"]["containers"][0]["image"],
            json!("app:2")
        );
    }
}

// ---- referenced-config mode: state ----------------------------------------------------------

#[test]
fn state_is_on_workload_metadata_and_small() {
    let out = run(&base(), Some(&[]), &settings(true));
    let dep = &out[4];
    let state = dep["metadata"]["annotations"][REFERENCED_CONFIG_STATE]
        .as_str()
        .unwrap();
    assert!(state.starts_with("v1;key=none;rel="), "{state}");
    assert_eq!(
        state.split(',').count(),
        2,
        "two referenced resources: {state}"
    );
    assert!(state.len() < 64, "{state}");
    assert!(!state.contains("env") && !state.contains("creds"));
    // Nothing else on the workload's metadata changed.
    let mut expected = base()[4].clone();
    expected["metadata"]["annotations"] = json!({REFERENCED_CONFIG_STATE: state});
    expected["spec"]["template"]["metadata"]["annotations"] =
        json!({DP_RESOURCE_HASH: app_hash(&out).unwrap()});
    assert_eq!(dep, &expected);
}

#[test]
fn keyed_state_does_not_hold_unkeyed_digests() {
    let key = FingerprintKey::new(b"0123456789abcdef".to_vec());
    let keyed = RenderSettings {
        fingerprint_key: key.clone(),
        ..settings(true)
    };
    let out = run(&base(), Some(&[]), &keyed);
    let state = out[4]["metadata"]["annotations"][REFERENCED_CONFIG_STATE]
        .as_str()
        .unwrap()
        .to_owned();
    let unkeyed_out = run(&base(), Some(&[]), &settings(true));
    let unkeyed = unkeyed_out[4]["metadata"]["annotations"][REFERENCED_CONFIG_STATE]
        .as_str()
        .unwrap();
    for entry in unkeyed.trim_start_matches("v1;key=none;rel=").split(',') {
        let digest = entry.split(':').nth(1).unwrap();
        assert!(!state.contains(digest), "{state} holds {digest}");
    }
    assert!(!state.contains("key=none"));
    assert!(!format!("{keyed:?}").contains("0123456789abcdef"));

    // Same key: behaves as unkeyed does.
    let mut seq = Sequence::new();
    let h0 = seq.render_with(&base(), &keyed);
    assert_eq!(seq.render_with(&base(), &keyed), h0);
    let changed = with(base(), "creds", "Secret", |s| {
        s["data"]["password"] = json!("eA==")
    });
    let h1 = seq.render_with(&changed, &keyed);
    assert_ne!(h1, h0);
    // A new key cannot compare digests: it re-baselines without restarting.
    let rekeyed = RenderSettings {
        fingerprint_key: FingerprintKey::new(b"another key".to_vec()),
        ..settings(true)
    };
    assert_eq!(seq.render_with(&changed, &rekeyed), h1);
    let changed_again = with(base(), "creds", "Secret", |s| {
        s["data"]["password"] = json!("eQ==")
    });
    assert_ne!(seq.render_with(&changed_again, &rekeyed), h1);
}

#[test]
fn stateless_referenced_hash_covers_only_what_matters() {
    let a = run(&base(), None, &settings(true));
    let svc = with(base(), "svc", "Service", |s| {
        s["spec"]["ports"][0]["port"] = json!(81)
    });
    let b = run(&svc, None, &settings(true));
    assert_eq!(app_hash(&a), app_hash(&b));
    let env = with(base(), "env", "ConfigMap", |c| {
        c["data"]["key"] = json!("b")
    });
    assert_ne!(app_hash(&run(&env, None, &settings(true))), app_hash(&a));
    // Nothing matters: no annotation.
    let out = run(
        &[service(80), deployment("app", &[], &[])],
        None,
        &settings(true),
    );
    assert_eq!(app_hash(&out), None);
}

#[test]
fn corrupt_state_is_treated_as_just_turned_on() {
    let mut seq = Sequence::new();
    let h0 = seq.render(&base(), true);
    let last = seq.last.as_mut().unwrap();
    last[4]["metadata"]["annotations"][REFERENCED_CONFIG_STATE] = json!("garbage");
    let changed = with(base(), "env", "ConfigMap", |c| {
        c["data"]["key"] = json!("b")
    });
    assert_eq!(seq.render(&changed, true), h0);
    assert_ne!(
        seq.render(
            &with(base(), "env", "ConfigMap", |c| c["data"]["key"] =
                json!("c")),
            true
        ),
        h0
    );
}

#[test]
fn per_kind_referenced_mode_tracks_each_workload() {
    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"template": {"spec": {"containers": [{"name": "db", "envFrom": [{"secretRef": {"name": "creds"}}]}]}}}});
    let input = |env: &str, pw: &str| {
        vec![
            configmap("env", env),
            secret("creds", pw),
            deployment("app", &["env"], &[]),
            sts.clone(),
        ]
    };
    let per_kind = RenderSettings {
        referenced_config_rollout: true,
        ..RenderSettings::default()
    };
    let mut seq = Sequence::new();
    let app0 = seq.render_with(&input("a", "p"), &per_kind);
    let db0 = hash_of(seq.last.as_ref().unwrap(), "db");
    let app1 = seq.render_with(&input("b", "p"), &per_kind);
    let db1 = hash_of(seq.last.as_ref().unwrap(), "db");
    assert_ne!(app1, app0);
    assert_eq!(db1, db0);
    let app2 = seq.render_with(&input("b", "q"), &per_kind);
    let db2 = hash_of(seq.last.as_ref().unwrap(), "db");
    assert_eq!(app2, app1);
    assert_ne!(db2, db1);
}

// ---- properties -------------------------------------------------------------------------------

fn arb_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-z0-9 ]{0,8}".prop_map(Value::from),
        Just(Value::Null),
    ]
}

fn arb_content() -> impl Strategy<Value = Value> {
    arb_scalar().prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn arb_resources() -> impl Strategy<Value = Vec<Value>> {
    prop::collection::vec(
        (prop::sample::select(vec!["ConfigMap", "Secret", "Service", "HTTPRoute"]), "[a-z]{1,6}", arb_content()),
        1..6,
    )
    .prop_map(|items| {
        items
            .into_iter()
            .enumerate()
            .map(|(i, (kind, name, content))| {
                json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": format!("{name}{i}"), "namespace": "ns"}, "data": content})
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn hash_is_independent_of_input_order(resources in arb_resources(), seed in any::<u64>()) {
        let mut input = resources.clone();
        input.push(deployment("app", &[], &[]));
        let first = app_hash(&run(&input, None, &settings(false)));
        let mut shuffled = input.clone();
        // A deterministic shuffle from the seed.
        let len = shuffled.len();
        let mut state = seed;
        for i in (1..len).rev() {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            shuffled.swap(i, (state >> 33) as usize % (i + 1));
        }
        prop_assert_eq!(app_hash(&run(&shuffled, None, &settings(false))), first);
    }

    #[test]
    fn hash_ignores_metadata_only_changes(resources in arb_resources(), which in any::<prop::sample::Index>(), label in "[a-z]{1,8}") {
        let mut input = resources.clone();
        input.push(deployment("app", &[], &[]));
        let first = app_hash(&run(&input, None, &settings(false)));
        let i = which.index(resources.len());
        input[i]["metadata"]["labels"] = json!({"changed": label.clone()});
        input[i]["metadata"]["annotations"] = json!({"note": label});
        input[i]["metadata"]["uid"] = json!("x");
        prop_assert_eq!(app_hash(&run(&input, None, &settings(false))), first);
    }

    #[test]
    fn hash_changes_with_any_content_change(resources in arb_resources(), which in any::<prop::sample::Index>(), extra in arb_content()) {
        let mut input = resources.clone();
        input.push(deployment("app", &[], &[]));
        let first = app_hash(&run(&input, None, &settings(false)));
        let i = which.index(resources.len());
        let before = input[i]["data"].clone();
        input[i]["data"] = json!({"changed": [before, extra]});
        prop_assert_ne!(app_hash(&run(&input, None, &settings(false))), first);
    }

    #[test]
    fn rendering_twice_with_the_same_previous_is_stable(resources in arb_resources(), referenced in any::<bool>()) {
        let mut input = resources.clone();
        input.push(deployment("app", &["a0", "b1"], &["c2"]));
        let once = run(&input, Some(&[]), &settings(referenced));
        let twice = run(&once, Some(&once), &settings(referenced));
        prop_assert_eq!(twice, once);
    }
}

#[test]
fn empty_annotation_maps_are_written_like_missing_ones() {
    // Helm templates often leave `annotations:` empty (null): valid manifests, nothing to lose.
    let mut app = deployment("app", &["cfg"], &[]);
    app["metadata"]["annotations"] = Value::Null;
    app["spec"]["template"]["metadata"]["annotations"] = Value::Null;
    let input = vec![app, configmap("cfg", "1")];
    for referenced in [false, true] {
        let mut sequence = Sequence::new();
        let first = sequence.render(&input, referenced);
        assert!(first.is_some(), "referenced={referenced}");
        assert_eq!(
            sequence.render(&input, referenced),
            first,
            "stable, referenced={referenced}"
        );
    }
    let mut no_template_metadata = deployment("app", &["cfg"], &[]);
    no_template_metadata["spec"]["template"]["metadata"] = Value::Null;
    let out = run(
        &[no_template_metadata, configmap("cfg", "1")],
        None,
        &settings(false),
    );
    assert!(app_hash(&out).is_some());
}

#[test]
fn restart_on_change_is_not_validated_without_a_workload() {
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "job", "namespace": "ns"}, "spec": {}});
    let bad = mark(configmap("cfg", "1"), json!("yes"));
    let mut objects = vec![cron, bad.clone()];
    render(&mut objects, None, &settings(true)).unwrap();
    // With a workload beside it, the same value fails the render.
    let mut objects = vec![deployment("app", &["cfg"], &[]), bad];
    assert!(render(&mut objects, None, &settings(true)).is_err());
}

// ---- the namespace objects will have --------------------------------------------------------

fn without_namespaces(objects: Vec<Value>) -> Vec<Value> {
    objects
        .into_iter()
        .map(|mut o| {
            o["metadata"]
                .as_object_mut()
                .unwrap()
                .shift_remove("namespace");
            o
        })
        .collect()
}

/// Plans `input` against `previous` and returns the workload's update.
fn update_of(input: &[Value], previous: &[Value], settings: &RenderSettings) -> Update {
    let objects: Vec<&Value> = input.iter().collect();
    let previous: Vec<&Value> = previous.iter().collect();
    plan(&objects, Some(&previous), settings)
        .unwrap()
        .into_iter()
        .find(|u| input[u.index]["kind"] == "Deployment")
        .unwrap()
}

#[test]
fn objects_without_a_namespace_match_previous_copies_in_the_release_namespace() {
    let in_shop = RenderSettings {
        release_namespace: Some("ns".to_owned()),
        ..settings(true)
    };
    let elsewhere = RenderSettings {
        release_namespace: Some("other".to_owned()),
        ..settings(true)
    };
    let bare = without_namespaces(base());
    // The previous output: rendered without namespaces, read back as the API server stores
    // it (with the namespace set), and as written (without).
    let first = run(&bare, Some(&[]), &in_shop);
    let live: Vec<Value> = first
        .iter()
        .cloned()
        .map(|mut o| {
            o["metadata"]["namespace"] = json!("ns");
            o
        })
        .collect();
    for (name, previous) in [("live", &live), ("previous output", &first)] {
        assert_eq!(
            update_of(&bare, previous, &in_shop).previous,
            PreviousCopy::Found,
            "{name}"
        );
        // A manifest with the namespace spelled out matches both as well.
        assert_eq!(
            update_of(&base(), previous, &in_shop).previous,
            PreviousCopy::Found,
            "{name}"
        );
    }
    // Another release namespace: the live copy in "ns" is not this workload's.
    assert_eq!(
        update_of(&bare, &live, &elsewhere).previous,
        PreviousCopy::Missing
    );
    // No release namespace known: only an exact match.
    assert_eq!(
        update_of(&bare, &live, &settings(true)).previous,
        PreviousCopy::Missing
    );
    assert_eq!(
        update_of(&bare, &first, &settings(true)).previous,
        PreviousCopy::Found
    );
    // Default mode and stateless mode never look.
    let objects: Vec<&Value> = bare.iter().collect();
    for (previous, settings) in [(Some(&[][..]), settings(false)), (None, in_shop.clone())] {
        let updates = plan(&objects, previous, &settings).unwrap();
        assert!(updates.iter().all(|u| u.previous == PreviousCopy::NotRead));
    }
}

#[test]
fn a_service_change_restarts_nothing_against_the_live_copy() {
    // The issue's reproduction: a ConfigMap, a Service and a Deployment, none with a
    // namespace; the previous copy is the live object, which has one.
    let in_shop = RenderSettings {
        release_namespace: Some("ns".to_owned()),
        ..settings(true)
    };
    let bare = without_namespaces(base());
    let default = run(&bare, None, &settings(false));
    let first = run(&bare, Some(&default), &in_shop);
    let live: Vec<Value> = first
        .iter()
        .cloned()
        .map(|mut o| {
            o["metadata"]["namespace"] = json!("ns");
            o
        })
        .collect();
    let service_changed = without_namespaces(with(base(), "svc", "Service", |s| {
        s["spec"]["ports"][0]["port"] = json!(81);
    }));
    let against_output = run(&service_changed, Some(&first), &in_shop);
    let against_live = run(&service_changed, Some(&live), &in_shop);
    assert_eq!(app_hash(&against_output), app_hash(&first));
    assert_eq!(app_hash(&against_live), app_hash(&first));
}

#[test]
fn workloads_are_the_objects_plan_annotates() {
    let input = [
        configmap("a", "1"),
        deployment("one", &[], &[]),
        deployment("two", &[], &[]),
    ];
    let objects: Vec<&Value> = input.iter().collect();
    assert_eq!(workloads(&objects, &settings(false)), vec![1]);
    assert_eq!(workloads(&objects, &RenderSettings::default()), vec![1, 2]);
}

// ---- rendering an output again changes nothing, whatever the workloads' shape --------------

/// A `spec` of any shape a workload may have around its pod template.
fn arb_workload_spec() -> impl Strategy<Value = Option<Value>> {
    let pod_spec =
        json!({"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    prop::sample::select(vec![
        None,
        Some(json!({})),
        Some(json!({"replicas": 1})),
        Some(json!({"template": null})),
        Some(json!({"template": {}})),
        Some(json!({"template": {"metadata": null}})),
        Some(json!({"template": {"metadata": {}}})),
        Some(json!({"template": {"metadata": {"annotations": null}}})),
        Some(json!({"template": {"metadata": {"annotations": {}}}})),
        Some(json!({"template": {"metadata": {"labels": {"a": "b"}}}})),
        Some(json!({"template": {"spec": pod_spec.clone()}})),
        Some(json!({"template": {"metadata": {"annotations": {"x": "y"}}, "spec": pod_spec}})),
    ])
}

fn arb_workload() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["Deployment", "StatefulSet"]),
        "[a-c]",
        arb_workload_spec(),
        prop::sample::select(vec![0u8, 1, 2, 3]),
    )
        .prop_map(|(kind, name, spec, metadata)| {
            let metadata = match metadata {
                0 => json!({"name": name, "namespace": "ns"}),
                1 => json!({"name": name, "namespace": "ns", "annotations": null}),
                2 => json!({"name": name}),
                _ => json!({"name": name, "namespace": "ns", "annotations": {"k": "v"}}),
            };
            let mut object = json!({"apiVersion": "apps/v1", "kind": kind, "metadata": metadata});
            if let Some(spec) = spec {
                object["spec"] = spec;
            }
            object
        })
}

fn arb_rendered_input() -> impl Strategy<Value = Vec<Value>> {
    (
        prop::collection::vec(arb_workload(), 1..4),
        arb_resources(),
        prop::sample::select(vec![None, Some("true"), Some("false")]),
        any::<bool>(),
    )
        .prop_map(|(workloads, mut resources, cfg_mark, with_cfg)| {
            if with_cfg {
                let mut cfg = configmap("cfg", "1");
                if let Some(value) = cfg_mark {
                    cfg = mark(cfg, json!(value));
                }
                resources.push(cfg);
            }
            resources.extend(workloads);
            resources
        })
}

fn arb_render_settings() -> impl Strategy<Value = RenderSettings> {
    (
        prop::sample::select(vec![
            None,
            Some(WorkloadType::Deployment),
            Some(WorkloadType::StatefulSet),
        ]),
        any::<bool>(),
    )
        .prop_map(|(workload_type, referenced)| RenderSettings {
            workload_type,
            referenced_config_rollout: referenced,
            fingerprint_key: None,
            release_namespace: Some("ns".to_owned()),
        })
}

/// Renders `input`, then its output again as Helm would (the output as the previous copy);
/// returns both outputs, or `None` when the input is refused.
fn render_twice(
    input: &[Value],
    settings: &RenderSettings,
    stateful: bool,
) -> Option<(Vec<Value>, Vec<Value>)> {
    let mut once = input.to_vec();
    let previous: Option<&[Value]> = stateful.then_some(&[]);
    render(&mut once, previous, settings).ok()?;
    let mut twice = once.clone();
    let previous = stateful.then_some(once.as_slice());
    render(&mut twice, previous, settings).expect("an output renders again");
    Some((once, twice))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rendering_an_output_again_changes_nothing(
        input in arb_rendered_input(),
        settings in arb_render_settings(),
        stateful in any::<bool>(),
    ) {
        if let Some((once, twice)) = render_twice(&input, &settings, stateful) {
            prop_assert_eq!(twice, once);
        }
    }
}

/// Inputs the property above found, kept as regression cases.
#[test]
fn rendering_an_output_again_changes_nothing_regressions() {
    let dep_ok = deployment("app", &["cfg"], &[]);
    let cases: Vec<(&str, Vec<Value>)> = vec![
        (
            "a StatefulSet without spec.template beside a Deployment",
            vec![
                configmap("cfg", "1"),
                dep_ok.clone(),
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {}}),
            ],
        ),
        (
            "a Deployment with template: null beside a StatefulSet",
            vec![
                configmap("cfg", "1"),
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a", "namespace": "ns"}, "spec": {"template": null}}),
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"replicas": 1}}),
            ],
        ),
        (
            "two workload kinds, neither with a template, nothing else",
            vec![
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {}}),
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "b"}, "spec": {"template": {}}}),
            ],
        ),
    ];
    for (name, input) in cases {
        for settings in [
            RenderSettings::default(),
            RenderSettings {
                referenced_config_rollout: true,
                release_namespace: Some("ns".to_owned()),
                ..RenderSettings::default()
            },
        ] {
            for stateful in [false, true] {
                let (once, twice) = render_twice(&input, &settings, stateful).expect(name);
                assert_eq!(twice, once, "{name}, {settings:?}, stateful {stateful}");
            }
        }
    }
}

/// Two workloads of one identity (a namespace-less copy counts as being in the release's
/// namespace) are refused in referenced-config mode, naming the second; default mode, which
/// keeps no state, renders them as upstream does. Found by
/// `rendering_an_output_again_changes_nothing`: the second copy read the first's state.
#[test]
fn referenced_mode_refuses_a_workload_rendered_twice() {
    let bare = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "a"}, "spec": {}});
    let input = vec![
        configmap("cfg", "1"),
        json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "a", "namespace": "ns"}, "spec": {}}),
        bare,
    ];
    let referenced = RenderSettings {
        referenced_config_rollout: true,
        release_namespace: Some("ns".to_owned()),
        ..RenderSettings::default()
    };
    for previous in [None, Some(&[][..])] {
        let mut objects = input.clone();
        let error = render(&mut objects, previous, &referenced).expect_err("a duplicate");
        assert!(
            matches!(error, RenderError::DuplicateWorkload { index: 2, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "StatefulSet a: the same workload is rendered twice; referenced-config rollout keeps one state per workload"
        );
        assert_eq!(objects, input, "nothing is written on a refusal");
    }
    let mut objects = input.clone();
    render(&mut objects, None, &RenderSettings::default())
        .expect("default mode renders duplicates");
    // Another namespace, or another kind of the same name, is another workload.
    let mut distinct = input.clone();
    distinct[2]["metadata"]["namespace"] = json!("other");
    distinct.push(json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": {}}));
    render(&mut distinct, Some(&[]), &referenced).expect("distinct workloads");
}

// ---- DaemonSets and CronJobs ----------------------------------------------------------------

fn daemon_set(name: &str, secret_volumes: &[&str]) -> Value {
    let volumes: Vec<Value> = secret_volumes
        .iter()
        .map(|n| json!({"name": format!("v-{n}"), "secret": {"secretName": n}}))
        .collect();
    json!({
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "agent", "image": "agent:1"}], "volumes": volumes}
            }
        }
    })
}

fn cron_job(name: &str, env_from_configmaps: &[&str]) -> Value {
    let env_from: Vec<Value> = env_from_configmaps
        .iter()
        .map(|n| json!({"configMapRef": {"name": n}}))
        .collect();
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": {"spec": {"template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "job", "image": "job:1", "envFrom": env_from}]}
            }}}
        }
    })
}

/// Without a workload type, as the command renders by default.
fn every_kind(referenced: bool) -> RenderSettings {
    RenderSettings {
        workload_type: None,
        referenced_config_rollout: referenced,
        fingerprint_key: None,
        release_namespace: Some("ns".to_owned()),
    }
}

/// The annotation on the pod template of the object of `kind` named `name`.
fn stamp_of(objects: &[Value], kind: &str, name: &str) -> Option<String> {
    let pointer = match kind {
        "CronJob" => "/spec/jobTemplate/spec/template/metadata/annotations",
        _ => "/spec/template/metadata/annotations",
    };
    objects
        .iter()
        .find(|o| o["kind"] == json!(kind) && o["metadata"]["name"] == json!(name))
        .and_then(|o| o.pointer(pointer))
        .and_then(|a| a.get(DP_RESOURCE_HASH))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The upstream value over `objects`: each without its top-level metadata, sorted.
fn upstream_hash(objects: &[Value], strips: &[Strip]) -> String {
    let mut pairs: Vec<(&Value, Strip)> = objects.iter().zip(strips.iter().copied()).collect();
    pairs.sort_by_key(|(o, _)| {
        let text = |p: &str| {
            o.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        (
            text("/kind"),
            text("/apiVersion"),
            text("/metadata/namespace"),
            text("/metadata/name"),
        )
    });
    hash::hash_objects(
        pairs.iter().map(|(o, s)| (o.as_object().unwrap(), *s)),
        NumberType::Float64,
    )
}

#[test]
fn daemon_sets_and_cron_jobs_are_annotated_without_a_workload_type() {
    // Beside the ConfigMap of upstream's vector alone, each gets the vector's value, as a
    // Deployment would; the CronJob on its Jobs' pod template, nowhere else.
    for (workload, kind) in [
        (daemon_set("agent", &[]), "DaemonSet"),
        (cron_job("report", &[]), "CronJob"),
    ] {
        let name = workload["metadata"]["name"].as_str().unwrap().to_owned();
        let out = run(
            &[configmap("anything", "value"), workload.clone()],
            None,
            &every_kind(false),
        );
        assert_eq!(
            stamp_of(&out, kind, &name).as_deref(),
            Some("74f6bb69b4"),
            "{kind}"
        );
        if kind == "CronJob" {
            assert!(out[1].pointer("/spec/template").is_none(), "{}", out[1]);
        }
        // The marker on the object's own metadata: what was written, what was there.
        let marker = match kind {
            "CronJob" => {
                r#"{"hash":"74f6bb69b4","missing":"spec.jobTemplate.spec.template.metadata.annotations"}"#
            }
            _ => r#"{"hash":"74f6bb69b4","missing":"spec.template.metadata.annotations"}"#,
        };
        assert_eq!(
            out[1]["metadata"]["annotations"][POD_TEMPLATE_STAMP],
            json!(marker)
        );
        // Nothing else changes.
        let mut unstamped = out[1].clone();
        let pointer = match kind {
            "CronJob" => "/spec/jobTemplate/spec/template/metadata",
            _ => "/spec/template/metadata",
        };
        unstamped
            .pointer_mut(pointer)
            .unwrap()
            .as_object_mut()
            .unwrap()
            .shift_remove("annotations");
        unstamped["metadata"]
            .as_object_mut()
            .unwrap()
            .shift_remove("annotations");
        assert_eq!(unstamped, workload, "{kind}");
    }

    // With every kind: each gets the hash of the objects of the other kinds, NetworkPolicies
    // left out; Deployments and StatefulSets without their pod template's metadata, DaemonSets
    // and CronJobs as rendered.
    let statefulset = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"template": {"metadata": {"labels": {"app": "db"}}, "spec": {}}}});
    let policy = json!({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "np"}, "spec": {}});
    let input = vec![
        configmap("env", "a"),
        secret("creds", "c2VjcmV0"),
        deployment("app", &["env"], &[]),
        statefulset.clone(),
        daemon_set("agent", &["creds"]),
        cron_job("report", &["env"]),
        policy,
    ];
    let out = run(&input, None, &every_kind(false));
    let (cm, sec, dep, sts, ds, cj) = (
        &input[0], &input[1], &input[2], &input[3], &input[4], &input[5],
    );
    use Strip::{Metadata as M, MetadataAndPodTemplateMetadata as P};
    let expected = [
        (
            "Deployment",
            "app",
            upstream_hash(
                &[cm.clone(), sec.clone(), sts.clone(), ds.clone(), cj.clone()],
                &[M, M, P, M, M],
            ),
        ),
        (
            "StatefulSet",
            "db",
            upstream_hash(
                &[cm.clone(), sec.clone(), dep.clone(), ds.clone(), cj.clone()],
                &[M, M, P, M, M],
            ),
        ),
        (
            "DaemonSet",
            "agent",
            upstream_hash(
                &[
                    cm.clone(),
                    sec.clone(),
                    dep.clone(),
                    sts.clone(),
                    cj.clone(),
                ],
                &[M, M, P, P, M],
            ),
        ),
        (
            "CronJob",
            "report",
            upstream_hash(
                &[
                    cm.clone(),
                    sec.clone(),
                    dep.clone(),
                    sts.clone(),
                    ds.clone(),
                ],
                &[M, M, P, P, M],
            ),
        ),
    ];
    for (kind, name, value) in expected {
        assert_eq!(stamp_of(&out, kind, name), Some(value), "{kind}");
    }
    assert_eq!(
        workloads(&input.iter().collect::<Vec<_>>(), &every_kind(false)),
        vec![2, 3, 4, 5]
    );
}

#[test]
fn deployment_and_statefulset_values_do_not_change_beside_daemon_sets_and_cron_jobs() {
    // The values these inputs had before DaemonSets and CronJobs were annotated (the
    // DaemonSet and CronJob hashed as ordinary objects, whole bodies but top-level metadata),
    // pinned: with and without a workload type, in default and referenced-config mode.
    let input = vec![
        configmap("env", "a"),
        secret("creds", "c2VjcmV0"),
        deployment("app", &["env"], &["creds"]),
        daemon_set("agent", &["creds"]),
        cron_job("report", &["env"]),
    ];
    let as_upstream = upstream_hash(
        &[
            input[0].clone(),
            input[1].clone(),
            input[3].clone(),
            input[4].clone(),
        ],
        &[Strip::Metadata; 4],
    );
    for settings in [settings(false), every_kind(false)] {
        let out = run(&input, None, &settings);
        assert_eq!(app_hash(&out), Some(as_upstream.clone()), "{settings:?}");
        assert_eq!(
            app_hash(&out).as_deref(),
            Some("57bf4464f7"),
            "{settings:?}"
        );
        let stateless = run(
            &input,
            None,
            &RenderSettings {
                referenced_config_rollout: true,
                ..settings
            },
        );
        assert_eq!(app_hash(&stateless).as_deref(), Some("c56ff9764"));
    }
    // An empty `annotations: {}` on the DaemonSet's pod template (common in charts) is part
    // of the value, as upstream hashes it.
    let mut empty_map = input.clone();
    empty_map[3]["spec"]["template"]["metadata"]["annotations"] = json!({});
    for settings in [settings(false), every_kind(false)] {
        let with_empty = app_hash(&run(&empty_map, None, &settings));
        assert_eq!(with_empty.as_deref(), Some("569844cbc4"), "{settings:?}");
    }
    // Referenced-config mode: a DaemonSet marked "true" counts for the Deployment as it is
    // rendered, in the stateless, the new and the carried value alike.
    let marked = {
        let mut objects = input.clone();
        objects[3] = mark(objects[3].clone(), json!("true"));
        objects
    };
    for settings in [settings(true), every_kind(true)] {
        let stateless = run(&marked, None, &settings);
        assert_eq!(
            app_hash(&stateless).as_deref(),
            Some("77486db899"),
            "{settings:?}"
        );
        let new = run(&marked, Some(&[]), &settings);
        assert_eq!(
            app_hash(&new).as_deref(),
            Some("57bf4464f7"),
            "{settings:?}"
        );
    }
}

#[test]
fn with_a_workload_type_daemon_sets_and_cron_jobs_are_left_alone() {
    let input = vec![
        configmap("env", "a"),
        deployment("app", &["env"], &[]),
        daemon_set("agent", &[]),
        cron_job("report", &["env"]),
    ];
    for workload_type in [WorkloadType::Deployment, WorkloadType::StatefulSet] {
        for referenced in [false, true] {
            let settings = RenderSettings {
                workload_type: Some(workload_type),
                ..every_kind(referenced)
            };
            let out = run(&input, Some(&[]), &settings);
            assert_eq!(out[2], input[2], "{settings:?}");
            assert_eq!(out[3], input[3], "{settings:?}");
            assert_eq!(
                workloads(&input.iter().collect::<Vec<_>>(), &settings),
                match workload_type {
                    WorkloadType::Deployment => vec![1],
                    WorkloadType::StatefulSet => vec![],
                }
            );
        }
    }
}

/// The pod template shapes a DaemonSet (under `spec`) or CronJob (under
/// `spec.jobTemplate.spec`) may have.
fn template_shapes() -> Vec<Option<Value>> {
    let pod =
        json!({"containers": [{"name": "c", "envFrom": [{"configMapRef": {"name": "cfg"}}]}]});
    vec![
        None,
        Some(json!(null)),
        Some(json!({})),
        Some(json!({"metadata": null, "spec": pod.clone()})),
        Some(json!({"metadata": {}, "spec": pod.clone()})),
        Some(json!({"metadata": {"annotations": null}, "spec": pod.clone()})),
        Some(json!({"metadata": {"annotations": {}}, "spec": pod.clone()})),
        Some(json!({"metadata": {"labels": {"a": "b"}}, "spec": pod.clone()})),
        Some(json!({"metadata": {"annotations": {"x": "y"}}, "spec": pod.clone()})),
        Some(json!({"metadata": {"annotations": {DP_RESOURCE_HASH: "the chart's"}}, "spec": pod})),
    ]
}

fn daemon_set_with(template: Option<Value>) -> Value {
    let mut object = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "ns"}, "spec": {"selector": {}}});
    if let Some(template) = template {
        object["spec"]["template"] = template;
    }
    object
}

fn cron_job_with(job_template: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "report", "namespace": "ns"}, "spec": {"schedule": "@daily", "jobTemplate": job_template}})
}

/// Every DaemonSet and CronJob shape, with the other objects of `base_with_every_kind`.
fn new_kind_shapes() -> Vec<(String, Value)> {
    let mut shapes = Vec::new();
    for template in template_shapes() {
        shapes.push((
            format!("DaemonSet {template:?}"),
            daemon_set_with(template.clone()),
        ));
        let job_spec = match &template {
            Some(template) => json!({"spec": {"template": template}}),
            None => json!({"spec": {}}),
        };
        shapes.push((format!("CronJob {template:?}"), cron_job_with(job_spec)));
    }
    for job_template in [json!(null), json!({}), json!({"spec": null})] {
        shapes.push((
            format!("CronJob jobTemplate {job_template}"),
            cron_job_with(job_template),
        ));
    }
    shapes
}

fn all_settings() -> Vec<RenderSettings> {
    let mut all = Vec::new();
    for workload_type in [
        None,
        Some(WorkloadType::Deployment),
        Some(WorkloadType::StatefulSet),
    ] {
        for referenced in [false, true] {
            all.push(RenderSettings {
                workload_type,
                ..every_kind(referenced)
            });
        }
    }
    all
}

#[test]
fn rendering_again_with_daemon_sets_and_cron_jobs_changes_nothing() {
    let statefulset = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db", "namespace": "ns"}, "spec": {"template": {"spec": {}}}});
    for (shape, object) in new_kind_shapes() {
        let input = vec![
            mark(configmap("cfg", "1"), json!("true")),
            deployment("app", &["cfg"], &[]),
            statefulset.clone(),
            object.clone(),
        ];
        for settings in all_settings() {
            for stateful in [false, true] {
                let (once, twice) = render_twice(&input, &settings, stateful).expect(&shape);
                assert_eq!(twice, once, "{shape}, {settings:?}, stateful {stateful}");
                if settings.referenced_config_rollout {
                    continue;
                }
                // Default mode: the Deployment's value is upstream's, over the DaemonSet or
                // CronJob as rendered (the StatefulSet, also a workload without a type,
                // without its pod template's metadata) — in the first render and, since
                // the second gives the same output, in a render of the output too.
                let strips = match settings.workload_type {
                    None => [
                        Strip::Metadata,
                        Strip::MetadataAndPodTemplateMetadata,
                        Strip::Metadata,
                    ],
                    Some(_) => [Strip::Metadata; 3],
                };
                let others = [input[0].clone(), input[2].clone(), object.clone()];
                if settings.workload_type != Some(WorkloadType::StatefulSet) {
                    assert_eq!(
                        app_hash(&once),
                        Some(upstream_hash(&others, &strips)),
                        "{shape}"
                    );
                }
                let kind = object["kind"].as_str().unwrap();
                let name = object["metadata"]["name"].as_str().unwrap();
                let stamped = stamp_of(&once, kind, name);
                match settings.workload_type {
                    None => assert!(stamped.is_some(), "{shape}"),
                    Some(_) => assert_eq!(once[3], object, "{shape}"),
                }
            }
        }
    }
}

#[test]
fn a_daemon_set_changed_after_its_annotation_was_written_is_hashed_as_it_is() {
    let input = vec![
        configmap("cfg", "1"),
        deployment("app", &[], &[]),
        daemon_set("agent", &[]),
    ];
    let once = run(&input, None, &every_kind(false));
    let value = app_hash(&once);
    assert_eq!(app_hash(&run(&once, None, &every_kind(false))), value);
    // Another value in its place (someone else's edit): the Deployment sees it, as upstream
    // sees any DaemonSet.
    let mut edited = once.clone();
    edited[2]["spec"]["template"]["metadata"]["annotations"][DP_RESOURCE_HASH] = json!("edited");
    let mut as_rendered = input.clone();
    as_rendered[2]["spec"]["template"]["metadata"]["annotations"] =
        json!({DP_RESOURCE_HASH: "edited"});
    let seen = app_hash(&run(&edited, None, &every_kind(false)));
    assert_ne!(seen, value);
    assert_eq!(seen, app_hash(&run(&as_rendered, None, &settings(false))));
    // The marker is never part of any value: it sits in top-level metadata.
    let mut without_marker = once.clone();
    without_marker[2]["metadata"]
        .as_object_mut()
        .unwrap()
        .shift_remove("annotations");
    assert_eq!(
        app_hash(&run(&without_marker, None, &settings(false))),
        app_hash(&run(&once, None, &settings(false)))
    );
}

#[test]
fn referenced_mode_a_daemon_set_rolls_with_the_secret_it_mounts_only() {
    // The DaemonSet mounts `creds`; the Deployment reads `env`; `unrelated` is read by nobody.
    let input = |creds: &str, env: &str, unrelated: &str| {
        vec![
            configmap("env", env),
            secret("creds", creds),
            configmap("unrelated", unrelated),
            deployment("app", &["env"], &[]),
            daemon_set("agent", &["creds"]),
            cron_job("report", &["env"]),
        ]
    };
    for previous_from_output in [true, false] {
        let mut seq = Sequence::new();
        let on = every_kind(true);
        let step = |seq: &mut Sequence, input: &[Value]| {
            let app = if previous_from_output {
                seq.render_with(input, &on)
            } else {
                // The previous copies as --previous-from-cluster reads them: the workloads only.
                let previous: Vec<Value> = seq
                    .last
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|o| o["kind"] != "ConfigMap" && o["kind"] != "Secret")
                    .collect();
                let out = run(input, Some(&previous), &on);
                let app = app_hash(&out);
                seq.last = Some(out);
                app
            };
            let last = seq.last.as_ref().unwrap();
            (
                app,
                stamp_of(last, "DaemonSet", "agent"),
                stamp_of(last, "CronJob", "report"),
            )
        };
        // Installed in default mode, then the setting turned on: nothing restarts.
        let installed = run(&input("c2VjcmV0", "a", "u"), None, &every_kind(false));
        seq.last = Some(installed.clone());
        let first = (
            app_hash(&installed),
            stamp_of(&installed, "DaemonSet", "agent"),
            stamp_of(&installed, "CronJob", "report"),
        );
        assert!(first.1.is_some() && first.2.is_some());
        assert_eq!(step(&mut seq, &input("c2VjcmV0", "a", "u")), first);
        // An unrelated ConfigMap changes: nothing restarts.
        assert_eq!(step(&mut seq, &input("c2VjcmV0", "a", "v")), first);
        // The Secret the DaemonSet mounts changes: the DaemonSet only.
        let (app, agent, report) = step(&mut seq, &input("bmV3", "a", "v"));
        assert_eq!((&app, &report), (&first.0, &first.2));
        assert_ne!(agent, first.1);
        assert!(agent.is_some());
        // The ConfigMap the Deployment and the CronJob read changes: those two, not the
        // DaemonSet.
        let (app2, agent2, report2) = step(&mut seq, &input("bmV3", "b", "v"));
        assert_ne!(app2, app);
        assert_ne!(report2, report);
        assert_eq!(agent2, agent);
        // And a render of that output again changes nothing.
        let last = seq.last.clone().unwrap();
        assert_eq!(run(&last, Some(&last), &on), last);
    }
}

#[test]
fn a_daemon_set_or_cron_job_that_cannot_take_the_annotation_is_left_alone() {
    let cases = [
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "no-spec"}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"}, "spec": {"template": "text"}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"}, "spec": {"template": {"metadata": {"annotations": []}}}}),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": "x", "spec": {}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "x"}, "spec": {"jobTemplate": 5}}),
        json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "x"}, "spec": {"jobTemplate": {"spec": {"template": {"metadata": 1}}}}}),
    ];
    for case in cases {
        let input = vec![
            configmap("cfg", "1"),
            deployment("app", &[], &[]),
            case.clone(),
        ];
        for settings in all_settings() {
            let out = run(&input, Some(&[]), &settings);
            assert_eq!(out[2], case, "{settings:?}");
            assert!(
                app_hash(&out).is_some()
                    || settings.workload_type == Some(WorkloadType::StatefulSet)
            );
        }
        assert_eq!(
            workloads(&input.iter().collect::<Vec<_>>(), &every_kind(false)),
            vec![1]
        );
    }
}

#[test]
fn referenced_mode_leaves_a_daemon_set_rendered_twice_alone() {
    let bare = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"}, "spec": {}});
    let input = vec![
        configmap("cfg", "1"),
        deployment("app", &["cfg"], &[]),
        daemon_set("agent", &[]),
        bare,
    ];
    for previous in [None, Some(&[][..])] {
        let out = run(&input, previous, &every_kind(true));
        assert_eq!(out[2..], input[2..], "neither copy is annotated");
        assert!(app_hash(&out).is_some());
    }
    // Default mode keeps no state: both get the value, as Deployments rendered twice do.
    let out = run(&input, None, &every_kind(false));
    assert!(stamp_of(&out[..3], "DaemonSet", "agent").is_some());
    assert!(
        out[3]
            .pointer("/spec/template/metadata/annotations")
            .is_some()
    );
}

fn arb_new_kind() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(template_shapes()),
        prop::sample::select(vec!["DaemonSet", "CronJob"]),
        "[a-b]",
        prop::sample::select(vec![None, Some("true"), Some("false")]),
        any::<bool>(),
    )
        .prop_map(|(template, kind, name, restart, namespaced)| {
            let mut object = match kind {
                "DaemonSet" => daemon_set_with(template),
                _ => cron_job_with(match template {
                    Some(template) => json!({"spec": {"template": template}}),
                    None => json!({}),
                }),
            };
            object["metadata"]["name"] = json!(name);
            if !namespaced {
                object["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .shift_remove("namespace");
            }
            match restart {
                Some(value) => mark(object, json!(value)),
                None => object,
            }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn rendering_an_output_again_changes_nothing_with_every_kind(
        mut input in arb_rendered_input(),
        new in prop::collection::vec(arb_new_kind(), 1..4),
        settings in arb_render_settings(),
        stateful in any::<bool>(),
    ) {
        input.extend(new);
        if let Some((once, twice)) = render_twice(&input, &settings, stateful) {
            prop_assert_eq!(twice, once);
        }
    }
}
