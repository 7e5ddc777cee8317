//! Protobuf request bodies (what kubectl 1.32+ sends for `kubectl create <kind>`), encoded here
//! with the `k8s-pb` bindings — the official field numbers — so the emulator's field tables are
//! checked against them, not against themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message as _;
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The `k8s\0` envelope around an object, as client-go writes it.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat()
}

/// POSTs a body as the admin; returns the status and the JSON answer.
async fn post(emu: &RunningEmulator, path: &str, content_type: &str, body: &[u8]) -> (u16, Value) {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nContent-Type: {content_type}\r\nAccept: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        emu.admin_token(),
        body.len()
    );
    let request = [head.as_bytes(), body].concat();
    let (status, _, body) = exchange(emu, &request).await;
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(String::new()),
        labels: BTreeMap::from([("app".to_string(), name.to_string())]),
        annotations: BTreeMap::from([("note".to_string(), "made in protobuf".to_string())]),
        // What Go writes for a zero time: an empty message.
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

fn quantities(pairs: &[(&str, &str)]) -> BTreeMap<String, Quantity> {
    pairs
        .iter()
        .map(|(k, v)| {
            (
                k.to_string(),
                Quantity {
                    string: Some(v.to_string()),
                },
            )
        })
        .collect()
}

fn deployment() -> apps::Deployment {
    let container = core::Container {
        name: Some("app".into()),
        image: Some("registry.example/app:2".into()),
        command: vec!["/app".into()],
        args: vec!["--port".into(), "8080".into()],
        working_dir: Some(String::new()),
        ports: vec![core::ContainerPort {
            name: Some("http".into()),
            container_port: Some(8080),
            protocol: Some("TCP".into()),
            host_port: Some(0),
            host_ip: Some(String::new()),
        }],
        env: vec![
            core::EnvVar {
                name: Some("MODE".into()),
                value: Some("fast".into()),
                value_from: None,
            },
            core::EnvVar {
                name: Some("PASSWORD".into()),
                value: Some(String::new()),
                value_from: Some(core::EnvVarSource {
                    secret_key_ref: Some(core::SecretKeySelector {
                        local_object_reference: Some(core::LocalObjectReference {
                            name: Some("db".into()),
                        }),
                        key: Some("password".into()),
                        optional: Some(false),
                    }),
                    ..Default::default()
                }),
            },
        ],
        env_from: vec![core::EnvFromSource {
            prefix: Some("CFG_".into()),
            config_map_ref: Some(core::ConfigMapEnvSource {
                local_object_reference: Some(core::LocalObjectReference {
                    name: Some("cfg".into()),
                }),
                optional: None,
            }),
            secret_ref: None,
        }],
        resources: Some(core::ResourceRequirements {
            limits: quantities(&[("memory", "128Mi")]),
            requests: quantities(&[("cpu", "100m")]),
            claims: vec![],
        }),
        volume_mounts: vec![core::VolumeMount {
            name: Some("data".into()),
            mount_path: Some("/data".into()),
            read_only: Some(true),
            ..Default::default()
        }],
        image_pull_policy: Some("IfNotPresent".into()),
        termination_message_path: Some("/dev/termination-log".into()),
        stdin: Some(false),
        ..Default::default()
    };
    apps::Deployment {
        metadata: Some(meta("web")),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                match_expressions: vec![meta::LabelSelectorRequirement {
                    key: Some("tier".into()),
                    operator: Some("In".into()),
                    values: vec!["front".into(), "edge".into()],
                }],
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels: BTreeMap::from([
                        ("app".to_string(), "web".to_string()),
                        ("tier".to_string(), "front".to_string()),
                    ]),
                    creation_timestamp: Some(meta::Time::default()),
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    containers: vec![container],
                    restart_policy: Some("Always".into()),
                    termination_grace_period_seconds: Some(0),
                    dns_policy: Some("ClusterFirst".into()),
                    node_selector: BTreeMap::from([("disk".to_string(), "ssd".to_string())]),
                    service_account_name: Some("robot".into()),
                    host_network: Some(false),
                    image_pull_secrets: vec![core::LocalObjectReference {
                        name: Some("pull".into()),
                    }],
                    tolerations: vec![core::Toleration {
                        key: Some("spot".into()),
                        operator: Some("Exists".into()),
                        effect: Some("NoSchedule".into()),
                        toleration_seconds: Some(30),
                        ..Default::default()
                    }],
                    priority: Some(-5),
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("RollingUpdate".into()),
                rolling_update: Some(apps::RollingUpdateDeployment {
                    max_unavailable: Some(IntOrString {
                        r#type: Some(0),
                        int_val: Some(1),
                        str_val: Some(String::new()),
                    }),
                    max_surge: Some(IntOrString {
                        r#type: Some(1),
                        int_val: Some(0),
                        str_val: Some("50%".into()),
                    }),
                }),
            }),
            min_ready_seconds: Some(0),
            revision_history_limit: Some(3),
            paused: Some(false),
            progress_deadline_seconds: Some(120),
        }),
        status: Some(apps::DeploymentStatus {
            observed_generation: Some(0),
            replicas: Some(0),
            ..Default::default()
        }),
    }
}

#[tokio::test]
async fn a_protobuf_deployment_is_stored_as_its_json() {
    let emu = start().await;
    let body = envelope("apps/v1", "Deployment", deployment().encode_to_vec());
    let (status, created) = post(
        &emu,
        "/apis/apps/v1/namespaces/shop/deployments",
        PROTOBUF,
        &body,
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let d = emu.get_object("deployments", Some("shop"), "web").unwrap();
    assert_eq!(d, created);
    assert_eq!(d["metadata"]["labels"], json!({"app": "web"}));
    assert_eq!(d["metadata"]["annotations"]["note"], "made in protobuf");
    // A pointer field keeps its zero value; omitempty fields leave theirs out.
    assert_eq!(d["spec"]["replicas"], 0);
    assert!(d["spec"].get("minReadySeconds").is_none());
    assert!(d["spec"].get("paused").is_none());
    assert_eq!(d["spec"]["revisionHistoryLimit"], 3);
    assert_eq!(d["spec"]["progressDeadlineSeconds"], 120);
    assert_eq!(
        d["spec"]["selector"],
        json!({"matchLabels": {"app": "web"},
               "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]})
    );
    assert_eq!(
        d["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "50%"}})
    );
    let pod = &d["spec"]["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Always");
    assert_eq!(pod["terminationGracePeriodSeconds"], 0);
    assert_eq!(pod["nodeSelector"], json!({"disk": "ssd"}));
    assert_eq!(pod["serviceAccountName"], "robot");
    assert!(pod.get("hostNetwork").is_none());
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "pull"}]));
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "spot", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}])
    );
    assert_eq!(pod["priority"], -5);
    let c = &pod["containers"][0];
    assert_eq!(
        *c,
        json!({
            "name": "app", "image": "registry.example/app:2",
            "command": ["/app"], "args": ["--port", "8080"],
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "fast"},
                    {"name": "PASSWORD",
                     "valueFrom": {"secretKeyRef": {"name": "db", "key": "password", "optional": false}}}],
            "envFrom": [{"prefix": "CFG_", "configMapRef": {"name": "cfg"}}],
            "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "100m"}},
            "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
            "terminationMessagePath": "/dev/termination-log",
            "imagePullPolicy": "IfNotPresent",
            // Defaulted by the server, as the scheme does.
            "terminationMessagePolicy": "File",
        }),
        "{c}"
    );

    // The server owns status.
    assert_eq!(d["status"]["observedGeneration"], 1);
    emu.shutdown().await;
}

#[tokio::test]
async fn protobuf_secrets_configmaps_namespaces_and_rbac() {
    let emu = start().await;
    let secret = core::Secret {
        metadata: Some(meta("db")),
        immutable: Some(false),
        data: BTreeMap::from([("bin".to_string(), vec![0u8, 255, 1])]),
        string_data: BTreeMap::from([("password".to_string(), "hunter2".to_string())]),
        r#type: Some("Opaque".into()),
    };
    let (status, body) = post(
        &emu,
        "/api/v1/namespaces/shop/secrets",
        PROTOBUF,
        &envelope("v1", "Secret", secret.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let s = emu.get_object("secrets", Some("shop"), "db").unwrap();
    assert_eq!(s["immutable"], false);
    assert_eq!(
        s["data"],
        json!({"bin": "AP8B", "password": "aHVudGVyMg=="})
    );

    let cm = core::ConfigMap {
        metadata: Some(meta("cfg")),
        data: BTreeMap::from([("mode".to_string(), "fast".to_string())]),
        binary_data: BTreeMap::from([("blob".to_string(), b"hi".to_vec())]),
        immutable: None,
    };
    let (status, body) = post(
        &emu,
        "/api/v1/namespaces/shop/configmaps",
        PROTOBUF,
        &envelope("v1", "ConfigMap", cm.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let c = emu.get_object("configmaps", Some("shop"), "cfg").unwrap();
    assert_eq!(c["data"], json!({"mode": "fast"}));
    assert_eq!(c["binaryData"], json!({"blob": "aGk="}));
    assert!(c.get("immutable").is_none());

    let ns = core::Namespace {
        metadata: Some(meta("other")),
        spec: Some(core::NamespaceSpec::default()),
        status: Some(core::NamespaceStatus::default()),
    };
    let (status, body) = post(
        &emu,
        "/api/v1/namespaces",
        PROTOBUF,
        &envelope("v1", "Namespace", ns.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["status"]["phase"], "Active");

    let role = rbac::ClusterRole {
        metadata: Some(meta("viewer")),
        rules: vec![rbac::PolicyRule {
            verbs: vec!["get".into()],
            non_resource_ur_ls: vec!["/healthz".into()],
            ..Default::default()
        }],
        aggregation_rule: None,
    };
    let (status, body) = post(
        &emu,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        PROTOBUF,
        &envelope(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            role.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["rules"],
        json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    let binding = rbac::RoleBinding {
        metadata: Some(meta("bind")),
        subjects: vec![rbac::Subject {
            kind: Some("ServiceAccount".into()),
            api_group: Some(String::new()),
            name: Some("robot".into()),
            namespace: Some("shop".into()),
        }],
        role_ref: Some(rbac::RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: Some("ClusterRole".into()),
            name: Some("viewer".into()),
        }),
    };
    let (status, body) = post(
        &emu,
        "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/rolebindings",
        PROTOBUF,
        &envelope(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            binding.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        body["subjects"],
        json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "shop"}])
    );
    assert_eq!(body["roleRef"]["name"], "viewer");
    emu.shutdown().await;
}

#[tokio::test]
async fn protobuf_outside_the_decoded_subset_is_refused_not_stored_incompletely() {
    let emu = start().await;
    let mut d = deployment();
    let container = &mut d
        .spec
        .as_mut()
        .unwrap()
        .template
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.liveness_probe = Some(core::Probe::default());
    let cases = [
        (
            "a field the tables do not cover",
            envelope("apps/v1", "Deployment", d.encode_to_vec()),
        ),
        (
            "a kind not accepted as protobuf",
            envelope("storage.k8s.io/v1", "StorageClass", vec![]),
        ),
        ("no envelope", deployment().encode_to_vec()),
        (
            "a truncated body",
            envelope(
                "apps/v1",
                "Deployment",
                deployment().encode_to_vec()[..40].to_vec(),
            ),
        ),
    ];
    for (what, body) in cases {
        let (status, answer) = post(
            &emu,
            "/apis/apps/v1/namespaces/shop/deployments",
            PROTOBUF,
            &body,
        )
        .await;
        assert_eq!(status, 415, "{what}: {answer}");
        assert_eq!(answer["reason"], "UnsupportedMediaType", "{what}");
    }
    assert!(emu.get_object("deployments", Some("shop"), "web").is_none());
    emu.shutdown().await;
}

/// Services, Jobs, CronJobs and Ingresses encoded by the `k8s-pb` bindings (what kubectl 1.32+
/// sends for `create service|job|cronjob|ingress`) are stored as the JSON a real server holds.
#[tokio::test]
async fn protobuf_services_jobs_cronjobs_and_ingresses() {
    use k8s_pb::api::batch::v1 as batch;
    use k8s_pb::api::networking::v1 as net;
    let emu = start().await;
    let service = core::Service {
        metadata: Some(meta("web")),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                name: Some("http".into()),
                protocol: Some("TCP".into()),
                port: Some(80),
                target_port: Some(IntOrString {
                    r#type: Some(0),
                    int_val: Some(8080),
                    str_val: None,
                }),
                ..Default::default()
            }],
            selector: BTreeMap::from([("app".to_string(), "web".to_string())]),
            r#type: Some("ClusterIP".into()),
            ..Default::default()
        }),
        status: Some(core::ServiceStatus {
            load_balancer: Some(core::LoadBalancerStatus::default()),
            ..Default::default()
        }),
    };
    let (status, body) = post(
        &emu,
        "/api/v1/namespaces/shop/services",
        PROTOBUF,
        &envelope("v1", "Service", service.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu.get_object("services", Some("shop"), "web").unwrap();
    assert_eq!(
        stored["spec"]["ports"],
        json!([{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}])
    );
    assert_eq!(stored["spec"]["selector"], json!({"app": "web"}));
    assert_eq!(stored["spec"]["type"], "ClusterIP");

    let pod_template = core::PodTemplateSpec {
        metadata: Some(meta::ObjectMeta::default()),
        spec: Some(core::PodSpec {
            containers: vec![core::Container {
                name: Some("c".into()),
                image: Some("busybox".into()),
                command: vec!["date".into()],
                ..Default::default()
            }],
            restart_policy: Some("OnFailure".into()),
            ..Default::default()
        }),
    };
    let cron = batch::CronJob {
        metadata: Some(meta("hourly")),
        spec: Some(batch::CronJobSpec {
            schedule: Some("0 * * * *".into()),
            concurrency_policy: Some("Forbid".into()),
            job_template: Some(batch::JobTemplateSpec {
                metadata: Some(meta::ObjectMeta::default()),
                spec: Some(batch::JobSpec {
                    backoff_limit: Some(2),
                    template: Some(pod_template.clone()),
                    ..Default::default()
                }),
            }),
            ..Default::default()
        }),
        status: Some(batch::CronJobStatus::default()),
    };
    let (status, body) = post(
        &emu,
        "/apis/batch/v1/namespaces/shop/cronjobs",
        PROTOBUF,
        &envelope("batch/v1", "CronJob", cron.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu.get_object("cronjobs", Some("shop"), "hourly").unwrap();
    assert_eq!(stored["spec"]["schedule"], "0 * * * *");
    assert_eq!(stored["spec"]["concurrencyPolicy"], "Forbid");
    let job_spec = &stored["spec"]["jobTemplate"]["spec"];
    assert_eq!(job_spec["backoffLimit"], 2);
    assert_eq!(
        job_spec["template"]["spec"]["containers"][0]["command"],
        json!(["date"])
    );

    let job = batch::Job {
        metadata: Some(meta("once")),
        spec: Some(batch::JobSpec {
            template: Some(pod_template),
            ..Default::default()
        }),
        status: Some(batch::JobStatus {
            active: Some(0),
            completed_indexes: Some(String::new()),
            ..Default::default()
        }),
    };
    let (status, body) = post(
        &emu,
        "/apis/batch/v1/namespaces/shop/jobs",
        PROTOBUF,
        &envelope("batch/v1", "Job", job.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");

    let ingress = net::Ingress {
        metadata: Some(meta("web")),
        spec: Some(net::IngressSpec {
            ingress_class_name: Some("nginx".into()),
            tls: vec![net::IngressTls {
                hosts: vec!["web.example".into()],
                secret_name: Some("web-tls".into()),
            }],
            rules: vec![net::IngressRule {
                host: Some("web.example".into()),
                ingress_rule_value: Some(net::IngressRuleValue {
                    http: Some(net::HttpIngressRuleValue {
                        paths: vec![net::HttpIngressPath {
                            path: Some("/api".into()),
                            path_type: Some("Prefix".into()),
                            backend: Some(net::IngressBackend {
                                service: Some(net::IngressServiceBackend {
                                    name: Some("web".into()),
                                    port: Some(net::ServiceBackendPort {
                                        name: None,
                                        number: Some(80),
                                    }),
                                }),
                                resource: None,
                            }),
                        }],
                    }),
                }),
            }],
            default_backend: None,
        }),
        status: Some(net::IngressStatus::default()),
    };
    let (status, body) = post(
        &emu,
        "/apis/networking.k8s.io/v1/namespaces/shop/ingresses",
        PROTOBUF,
        &envelope("networking.k8s.io/v1", "Ingress", ingress.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu.get_object("ingresses", Some("shop"), "web").unwrap();
    assert_eq!(
        stored["spec"]["rules"],
        json!([{"host": "web.example", "http": {"paths": [{"path": "/api", "pathType": "Prefix",
               "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}])
    );
    assert_eq!(stored["spec"]["ingressClassName"], "nginx");
}

/// ResourceQuotas, PodDisruptionBudgets and PriorityClasses encoded by `k8s-pb` (what kubectl
/// 1.32+ sends for `create quota|poddisruptionbudget|priorityclass`); a priority of 0 is kept,
/// as Go's `value` is not `omitempty`.
#[tokio::test]
async fn protobuf_quotas_budgets_and_priority_classes() {
    use k8s_pb::api::policy::v1 as policy;
    use k8s_pb::api::scheduling::v1 as scheduling;
    let emu = start().await;
    let quota = core::ResourceQuota {
        metadata: Some(meta("small")),
        spec: Some(core::ResourceQuotaSpec {
            hard: quantities(&[("pods", "4"), ("requests.cpu", "500m")]),
            scopes: vec!["NotBestEffort".into()],
            scope_selector: Some(core::ScopeSelector {
                match_expressions: vec![core::ScopedResourceSelectorRequirement {
                    scope_name: Some("PriorityClass".into()),
                    operator: Some("In".into()),
                    values: vec!["high".into()],
                }],
            }),
        }),
        status: Some(core::ResourceQuotaStatus::default()),
    };
    let (status, body) = post(
        &emu,
        "/api/v1/namespaces/shop/resourcequotas",
        PROTOBUF,
        &envelope("v1", "ResourceQuota", quota.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu
        .get_object("resourcequotas", Some("shop"), "small")
        .unwrap();
    assert_eq!(
        stored["spec"],
        json!({"hard": {"pods": "4", "requests.cpu": "500m"}, "scopes": ["NotBestEffort"],
               "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}})
    );

    let budget = policy::PodDisruptionBudget {
        metadata: Some(meta("web")),
        spec: Some(policy::PodDisruptionBudgetSpec {
            min_available: Some(IntOrString {
                r#type: Some(1),
                int_val: None,
                str_val: Some("50%".into()),
            }),
            selector: Some(meta::LabelSelector {
                match_labels: BTreeMap::from([("app".to_string(), "web".to_string())]),
                ..Default::default()
            }),
            max_unavailable: None,
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
        }),
        status: Some(policy::PodDisruptionBudgetStatus {
            observed_generation: Some(0),
            disruptions_allowed: Some(0),
            current_healthy: Some(0),
            desired_healthy: Some(0),
            expected_pods: Some(0),
            ..Default::default()
        }),
    };
    let (status, body) = post(
        &emu,
        "/apis/policy/v1/namespaces/shop/poddisruptionbudgets",
        PROTOBUF,
        &envelope("policy/v1", "PodDisruptionBudget", budget.encode_to_vec()),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu
        .get_object("poddisruptionbudgets", Some("shop"), "web")
        .unwrap();
    assert_eq!(
        stored["spec"],
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}},
               "unhealthyPodEvictionPolicy": "AlwaysAllow"})
    );

    let class = scheduling::PriorityClass {
        metadata: Some(meta("zero")),
        value: Some(0),
        global_default: Some(false),
        description: Some("the default".into()),
        preemption_policy: Some("Never".into()),
    };
    let (status, body) = post(
        &emu,
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        PROTOBUF,
        &envelope(
            "scheduling.k8s.io/v1",
            "PriorityClass",
            class.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let stored = emu.get_object("priorityclasses", None, "zero").unwrap();
    assert_eq!(
        (
            &stored["value"],
            &stored["description"],
            &stored["preemptionPolicy"]
        ),
        (&json!(0), &json!("the default"), &json!("Never"))
    );
    emu.shutdown().await;
}
