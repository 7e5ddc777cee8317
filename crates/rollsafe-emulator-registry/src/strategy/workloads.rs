//! Deployments, StatefulSets and DaemonSets: their defaults, the selector check, and the
//! emulator's stand-in for their controllers — status follows spec at once, the Deployment
//! revision annotation and the DaemonSet template generation advance on template changes — and
//! the rollout model (why a template change does not roll).

use serde_json::{Map, Value, json};

use super::{DEFAULT, Strategy, default, event, object_at};
use crate::strategy;
use rollsafe_emulator_types::resources::ResourceDef;
use rollsafe_emulator_types::status::{FieldCause, StatusError};
use rollsafe_emulator_types::util;
use rollsafe_emulator_types::util::{meta_mut, meta_str};

/// What the registry does for a workload besides defaulting and validation.
#[derive(Debug)]
pub struct Workload {
    /// Annotation changes bump `metadata.generation` (Deployments).
    pub generation_on_annotations: bool,
    /// A StatefulSet partition ≥ replicas holds a rollout back.
    pub partitioned: bool,
    /// The controller simulation: `(object, old, template_changed)`.
    pub sync: fn(&mut Value, Option<&Value>, bool),
    /// The Events the controller records for a committed change: `(object, old,
    /// template_changed)`.
    pub events: fn(&Value, Option<&Value>, bool) -> Vec<Value>,
}

/// Deployments.
pub static DEPLOYMENT: Strategy = Strategy {
    prepare: prepare_deployment,
    validate: validate_deployment,
    workload: Some(&Workload {
        generation_on_annotations: true,
        partitioned: false,
        sync: sync_deployment,
        events: deployment_events,
    }),
    ..DEFAULT
};

/// StatefulSets.
pub static STATEFULSET: Strategy = Strategy {
    prepare: prepare_statefulset,
    validate: validate_statefulset,
    workload: Some(&Workload {
        generation_on_annotations: false,
        partitioned: true,
        sync: sync_statefulset,
        events: no_events,
    }),
    ..DEFAULT
};

/// DaemonSets.
pub static DAEMONSET: Strategy = Strategy {
    prepare: prepare_daemonset,
    validate: validate_daemonset,
    workload: Some(&Workload {
        generation_on_annotations: false,
        partitioned: false,
        sync: sync_daemonset,
        events: no_events,
    }),
    ..DEFAULT
};

/// Defaults `updateStrategy`/`strategy` (at `key`): type `RollingUpdate` and, for that type,
/// `rollingUpdate`.
fn default_rolling_update(spec: &mut Map<String, Value>, key: &str, rolling_update: Value) {
    if let Some(s) = object_at(spec, key) {
        default(s, "type", json!("RollingUpdate"));
        if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            default(s, "rollingUpdate", rolling_update);
        }
    }
}

/// The scheme's pod-template defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`,
/// `SetDefaults_ContainerPort`), which every real workload read back carries.
fn default_pod_template(spec: &mut Map<String, Value>) {
    let Some(pod) = object_at(spec, "template").and_then(|t| object_at(t, "spec")) else {
        return;
    };
    default(pod, "restartPolicy", json!("Always"));
    default(pod, "terminationGracePeriodSeconds", json!(30));
    default(pod, "dnsPolicy", json!("ClusterFirst"));
    default(pod, "securityContext", json!({}));
    default(pod, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers.iter_mut().filter_map(Value::as_object_mut) {
            let image = c.get("image").and_then(Value::as_str).unwrap_or("");
            // `Always` for `:latest` or an image without a tag (nor a digest).
            let last = image.rsplit('/').next().unwrap_or("");
            let pull = if image.contains('@') || last.contains(':') && !last.ends_with(":latest") {
                "IfNotPresent"
            } else {
                "Always"
            };
            default(c, "imagePullPolicy", json!(pull));
            default(c, "terminationMessagePath", json!("/dev/termination-log"));
            default(c, "terminationMessagePolicy", json!("File"));
            default(c, "resources", json!({}));
            if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    default(p, "protocol", json!("TCP"));
                }
            }
        }
    }
}

fn prepare_deployment(map: &mut Map<String, Value>, _old: Option<&Value>) {
    if let Some(spec) = object_at(map, "spec") {
        default_pod_template(spec);
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "progressDeadlineSeconds", json!(600));
        default_rolling_update(
            spec,
            "strategy",
            json!({"maxUnavailable": "25%", "maxSurge": "25%"}),
        );
    }
}

fn prepare_statefulset(map: &mut Map<String, Value>, _old: Option<&Value>) {
    if let Some(spec) = object_at(map, "spec") {
        default_pod_template(spec);
        default(spec, "replicas", json!(1));
        default(spec, "revisionHistoryLimit", json!(10));
        default(spec, "podManagementPolicy", json!("OrderedReady"));
        default_rolling_update(spec, "updateStrategy", json!({"partition": 0}));
        default(
            spec,
            "persistentVolumeClaimRetentionPolicy",
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
        );
    }
}

fn prepare_daemonset(map: &mut Map<String, Value>, old: Option<&Value>) {
    if let Some(spec) = object_at(map, "spec") {
        default_pod_template(spec);
        default(spec, "revisionHistoryLimit", json!(10));
        default_rolling_update(
            spec,
            "updateStrategy",
            json!({"maxUnavailable": 1, "maxSurge": 0}),
        );
    }
    // apps/v1 keeps the internal `spec.templateGeneration` in an annotation: 1 at creation,
    // one more at each template change (the strategy's `PrepareForCreate`/`PrepareForUpdate`).
    let template = map.get("spec").and_then(|s| s.get("template"));
    let generation = match old {
        None => 1,
        Some(old) if old.pointer("/spec/template") != template => template_generation(old) + 1,
        Some(old) => template_generation(old),
    };
    if let Some(meta) = object_at(map, "metadata") {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(TEMPLATE_GENERATION.into(), json!(generation.to_string()));
        }
    }
}

/// `spec.selector` is required and its `matchLabels` must match the template's labels.
/// The checks of every workload: `replicas` decodes as an int32 and is not negative, the pod
/// template has containers with names and images, and the selector matches the template.
fn validate_workload(
    kind: &str,
    obj: &Value,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    match obj.pointer("/spec/replicas") {
        None | Some(Value::Null) => {}
        Some(Value::Number(n)) if n.as_i64().is_some_and(|r| i32::try_from(r).is_ok()) => {
            if n.as_i64().is_some_and(|r| r < 0) {
                causes.push(FieldCause::invalid(
                    "spec.replicas",
                    &n.to_string(),
                    "must be greater than or equal to 0",
                ));
            }
        }
        Some(other) => {
            let found = match other {
                Value::String(_) => "string",
                Value::Bool(_) => "bool",
                Value::Array(_) => "array",
                Value::Object(_) => "object",
                _ => "number",
            };
            return Err(StatusError::bad_request(&format!(
                "{kind} in version \"v1\" cannot be handled as a {kind}: json: cannot unmarshal {found} into Go struct field {kind}Spec.spec.replicas of type int32"
            )));
        }
    }
    match obj
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
    {
        None => causes.push(FieldCause::required("spec.template.spec.containers", "")),
        Some(containers) if containers.is_empty() => {
            causes.push(FieldCause::required("spec.template.spec.containers", ""));
        }
        Some(containers) => {
            for (i, c) in containers.iter().enumerate() {
                for field in ["name", "image"] {
                    if c.get(field)
                        .and_then(Value::as_str)
                        .is_none_or(str::is_empty)
                    {
                        causes.push(FieldCause::required(
                            &format!("spec.template.spec.containers[{i}].{field}"),
                            "",
                        ));
                    }
                }
            }
        }
    }
    validate_selector(obj, causes)
}

fn validate_deployment(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    validate_workload("Deployment", obj, causes)?;
    validate_selector_unchanged(obj, old, causes);
    Ok(())
}

fn validate_statefulset(
    obj: &Value,
    _old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    validate_workload("StatefulSet", obj, causes)
}

fn validate_daemonset(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    validate_workload("DaemonSet", obj, causes)?;
    validate_selector_unchanged(obj, old, causes);
    Ok(())
}

/// On an update, `spec.selector` may not change (apps/v1 `ValidateDeploymentUpdate` and
/// `ValidateDaemonSetUpdate`: `ValidateImmutableField`), with the real value rendering.
fn validate_selector_unchanged(obj: &Value, old: Option<&Value>, causes: &mut Vec<FieldCause>) {
    let Some(old) = old else {
        return;
    };
    let selector = obj.pointer("/spec/selector");
    if selector.is_none_or(Value::is_null) || selector == old.pointer("/spec/selector") {
        return;
    }
    causes.push(FieldCause::invalid(
        "spec.selector",
        &go_label_selector(selector),
        "field is immutable",
    ));
}

/// A label selector as Go's `%#v` prints a `v1.LabelSelector` (map keys sorted).
fn go_label_selector(selector: Option<&Value>) -> String {
    let quoted = |v: &Value| format!("{:?}", v.as_str().unwrap_or(""));
    let labels = match selector
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        Some(map) => {
            let mut pairs: Vec<(&String, &Value)> = map.iter().collect();
            pairs.sort_by_key(|(k, _)| *k);
            let inner: Vec<String> = pairs
                .into_iter()
                .map(|(k, v)| format!("{k:?}:{}", quoted(v)))
                .collect();
            format!("map[string]string{{{}}}", inner.join(", "))
        }
        None => "map[string]string(nil)".to_owned(),
    };
    let expressions = match selector
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
    {
        Some(list) => {
            let items: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values").and_then(Value::as_array) {
                        Some(vs) => format!(
                            "[]string{{{}}}",
                            vs.iter().map(quoted).collect::<Vec<_>>().join(", ")
                        ),
                        None => "[]string(nil)".to_owned(),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{}, Operator:{}, Values:{values}}}",
                        quoted(e.get("key").unwrap_or(&Value::Null)),
                        quoted(e.get("operator").unwrap_or(&Value::Null)),
                    )
                })
                .collect();
            format!("[]v1.LabelSelectorRequirement{{{}}}", items.join(", "))
        }
        None => "[]v1.LabelSelectorRequirement(nil)".to_owned(),
    };
    format!("v1.LabelSelector{{MatchLabels:{labels}, MatchExpressions:{expressions}}}")
}

fn validate_selector(obj: &Value, causes: &mut Vec<FieldCause>) -> Result<(), StatusError> {
    match obj.pointer("/spec/selector") {
        None | Some(Value::Null) => {
            causes.push(FieldCause::required("spec.selector", ""));
        }
        Some(selector) => {
            let labels = obj.pointer("/spec/template/metadata/labels");
            let matches = selector
                .get("matchLabels")
                .and_then(Value::as_object)
                .is_none_or(|want| {
                    want.iter()
                        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
                });
            if !matches {
                let rendered = util::join_string_map(labels, ":", ", ");
                causes.push(FieldCause::invalid(
                    "spec.template.metadata.labels",
                    &format!("map[string]string{{{rendered}}}"),
                    "`selector` does not match template `labels`",
                ));
            }
        }
    }
    Ok(())
}

fn generation(obj: &Value) -> i64 {
    obj.pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn replicas(obj: &Value) -> i64 {
    obj.pointer("/spec/replicas")
        .and_then(Value::as_i64)
        .unwrap_or(1)
}

fn set_status(obj: &mut Value, status: Value) {
    if let Some(map) = obj.as_object_mut() {
        map.insert("status".into(), status);
    }
}

fn sync_deployment(obj: &mut Value, old: Option<&Value>, template_changed: bool) {
    let old_revision = old
        .and_then(|o| {
            o.pointer("/metadata/annotations/deployment.kubernetes.io~1revision")
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<i64>().ok())
        })
        .unwrap_or(0);
    let paused = is_paused(obj);
    // A template change made while paused waits for the resume, as with the real controller:
    // the new ReplicaSet is not created, so `updatedReplicas` stays behind and `kubectl rollout
    // status` keeps waiting.
    let was_pending =
        old.is_some_and(|o| is_paused(o) && int_at(o, "/status/updatedReplicas") < replicas(o));
    let pending = paused && (template_changed || was_pending);
    let rolls = old.is_none() || (!paused && (template_changed || was_pending));
    let revision = if rolls {
        old_revision + 1
    } else {
        old_revision
    };
    if revision > 0 {
        let meta = meta_mut(obj);
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                "deployment.kubernetes.io/revision".into(),
                json!(revision.to_string()),
            );
        }
    }
    let replicas = replicas(obj);
    let updated = if pending { 0 } else { replicas };
    let progressing = if paused {
        condition(
            old,
            "Progressing",
            "Unknown",
            "DeploymentPaused",
            "Deployment is paused",
        )
    } else {
        condition(
            old,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            &format!(
                "ReplicaSet \"{}\" has successfully progressed.",
                replica_set_name(obj)
            ),
        )
    };
    let available = condition(
        old,
        "Available",
        "True",
        "MinimumReplicasAvailable",
        "Deployment has minimum availability.",
    );
    let status = json!({
        "observedGeneration": generation(obj),
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": replicas,
        "availableReplicas": replicas,
        "conditions": [available, progressing],
    });
    set_status(obj, status);
}

fn is_paused(obj: &Value) -> bool {
    obj.pointer("/spec/paused") == Some(&Value::Bool(true))
}

fn int_at(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// A status condition; the previous one is kept as it was when nothing about it changed (so a
/// no-op write stays a no-op), and keeps its `lastTransitionTime` while its status holds.
fn condition(old: Option<&Value>, kind: &str, status: &str, reason: &str, message: &str) -> Value {
    let previous = old
        .and_then(|o| o.pointer("/status/conditions"))
        .and_then(Value::as_array)
        .and_then(|cs| cs.iter().find(|c| c["type"] == kind));
    let now = json!(util::now_seconds());
    let mut transition = now.clone();
    if let Some(p) = previous {
        if p["status"] == status && p["reason"] == reason && p["message"] == message {
            return p.clone();
        }
        if p["status"] == status {
            transition = p["lastTransitionTime"].clone();
        }
    }
    json!({
        "type": kind,
        "status": status,
        "lastUpdateTime": now,
        "lastTransitionTime": transition,
        "reason": reason,
        "message": message,
    })
}

/// Hash of a pod template, for revision names.
pub fn template_hash(obj: &Value) -> String {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    obj.pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default()
        .hash(&mut h);
    format!("{:x}", h.finish() & 0xff_ffff_ffff)
}

/// The StatefulSet controller's status: with the `RollingUpdate` strategy every pod moves to the
/// new revision at once, except those a partition holds back (`updatedReplicas` = replicas −
/// partition, `currentRevision` stays until all are updated); with `OnDelete` no pod moves
/// until deleted, which never happens here (`updatedReplicas` 0).
fn sync_statefulset(obj: &mut Value, old: Option<&Value>, _template_changed: bool) {
    let replicas = replicas(obj);
    let name = meta_str(obj, "name").unwrap_or("").to_string();
    let update_revision = format!("{name}-{}", template_hash(obj));
    let previous = old
        .and_then(|o| o.pointer("/status/currentRevision"))
        .and_then(Value::as_str)
        .map_or_else(|| update_revision.clone(), str::to_string);
    let on_delete = obj
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        == Some("OnDelete");
    let partition = int_at(obj, "/spec/updateStrategy/rollingUpdate/partition").clamp(0, replicas);
    let updated = if previous == update_revision {
        replicas
    } else if on_delete {
        0
    } else {
        replicas - partition
    };
    let current_revision = if updated >= replicas {
        update_revision.clone()
    } else {
        previous
    };
    let current = if current_revision == update_revision {
        replicas
    } else {
        replicas - updated
    };
    let status = json!({
        "observedGeneration": generation(obj),
        "replicas": replicas,
        "readyReplicas": replicas,
        "currentReplicas": current,
        "updatedReplicas": updated,
        "availableReplicas": replicas,
        "currentRevision": current_revision,
        "updateRevision": update_revision,
        "collisionCount": 0,
    });
    set_status(obj, status);
}

fn sync_daemonset(obj: &mut Value, old: Option<&Value>, template_changed: bool) {
    // One pod on each simulated node. With `OnDelete`, a template change updates no pod (none
    // is deleted here); otherwise the updated count stays what it was.
    let nodes = crate::nodes::NODES.len();
    let on_delete = obj
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        == Some("OnDelete");
    let updated = match old {
        Some(_) if on_delete && template_changed => 0,
        Some(old) if on_delete => old
            .pointer("/status/updatedNumberScheduled")
            .and_then(Value::as_u64)
            .map_or(nodes, |n| usize::try_from(n).unwrap_or(nodes).min(nodes)),
        _ => nodes,
    };
    let status = json!({
        "observedGeneration": generation(obj),
        "desiredNumberScheduled": nodes,
        "currentNumberScheduled": nodes,
        "numberReady": nodes,
        "numberAvailable": nodes,
        "updatedNumberScheduled": updated,
        "numberMisscheduled": 0,
    });
    set_status(obj, status);
}

/// The annotation in which apps/v1 DaemonSets carry their template generation.
pub const TEMPLATE_GENERATION: &str = "deprecated.daemonset.template.generation";

/// A DaemonSet's template generation (1 when it has none yet).
pub fn template_generation(ds: &Value) -> i64 {
    ds.pointer("/metadata/annotations")
        .and_then(|a| a.get(TEMPLATE_GENERATION))
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

fn no_events(_: &Value, _: Option<&Value>, _: bool) -> Vec<Value> {
    Vec::new()
}

/// The name of the ReplicaSet of a Deployment's current template: `<name>-<hash>`, the hash
/// in the alphabet of the real `pod-template-hash` (its value differs: the real one is an FNV
/// hash of the Go template struct).
pub fn replica_set_name(obj: &Value) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    obj.pointer("/spec/template")
        .map(Value::to_string)
        .unwrap_or_default()
        .hash(&mut h);
    let mut n = h.finish();
    let hash: String = (0..10)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize];
            n /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect();
    format!("{}-{hash}", meta_str(obj, "name").unwrap_or(""))
}

/// What the deployment controller records (`ScalingReplicaSet`): the new ReplicaSet scaled up
/// on create and on a rolled template change (and the old one down), or the current one scaled
/// on a replica change.
fn deployment_events(obj: &Value, old: Option<&Value>, template_changed: bool) -> Vec<Value> {
    if obj.pointer("/spec/paused") == Some(&Value::Bool(true)) {
        return Vec::new();
    }
    let scaled = |rs: &str, from: i64, to: i64| {
        let direction = if to > from { "up" } else { "down" };
        event::about(
            obj,
            "Deployment",
            "apps/v1",
            "deployment-controller",
            "ScalingReplicaSet",
            &format!("Scaled {direction} replica set {rs} from {from} to {to}"),
        )
    };
    let replicas = replicas(obj);
    match old {
        None if replicas > 0 => vec![scaled(&replica_set_name(obj), 0, replicas)],
        None => Vec::new(),
        Some(old) => {
            let old_replicas = self::replicas(old);
            let mut out = Vec::new();
            if template_changed {
                if replicas > 0 {
                    out.push(scaled(&replica_set_name(obj), 0, replicas));
                }
                if old_replicas > 0 {
                    out.push(scaled(&replica_set_name(old), old_replicas, 0));
                }
            } else if replicas != old_replicas {
                out.push(scaled(&replica_set_name(obj), old_replicas, replicas));
            }
            out
        }
    }
}

/// Why a template change of `obj` rolls no pods: `Paused`, `OnDelete` or `Partition`; `None`
/// when it rolls.
pub fn held_back(d: &ResourceDef, obj: &Value) -> Option<&'static str> {
    if obj.pointer("/spec/paused") == Some(&Value::Bool(true)) {
        return Some("Paused");
    }
    if obj
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        == Some("OnDelete")
    {
        return Some("OnDelete");
    }
    let partition = obj
        .pointer("/spec/updateStrategy/rollingUpdate/partition")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let partitioned = strategy::of(d.id).workload.is_some_and(|w| w.partitioned);
    (partitioned && partition > 0 && partition >= replicas(obj)).then_some("Partition")
}
