//! Per-resource strategies (the real server's `registry/<group>/<resource>/strategy.go`):
//! defaulting and normalisation, validation, and the controller simulation of workloads. [`of`]
//! binds each resource id to its strategy, as kube-apiserver wires a storage to each resource;
//! the store calls [`prepare`], [`validate`] and [`sync`] and never asks which kind it holds.

pub mod configmap;
pub mod crd;
pub mod event;
pub mod namespace;
pub mod policy;
pub mod rbac;
pub mod scheduling;
pub mod secret;
pub mod service;
pub mod workloads;

use serde_json::{Map, Value, json};

use rollsafe_emulator_types::resources::{ResId, ResourceDef, ids};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// `TotalAnnotationSizeLimitB`.
pub const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

/// How object names are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most resources).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// Any path segment (RBAC objects: `system:basic-user` is a valid name).
    PathSegment,
}

impl NameRule {
    /// The validation message for `name`, or `None` when it is valid.
    pub fn check(self, name: &str) -> Option<&'static str> {
        let (ok, message) = match self {
            Self::Subdomain => (is_dns_subdomain(name), DNS1123_SUBDOMAIN_MSG),
            Self::Label => (is_dns_label(name), DNS1123_LABEL_MSG),
            Self::PathSegment => (
                !name.contains('/') && !name.contains('%') && name != "." && name != "..",
                DNS1123_SUBDOMAIN_MSG,
            ),
        };
        (!ok).then_some(message)
    }
}

/// A resource's own validation: `(object, stored object on updates, causes)`; `Err` for a
/// failure that is not a field cause.
pub type Validate = fn(&Value, Option<&Value>, &mut Vec<FieldCause>) -> Result<(), StatusError>;

/// What the registry does differently for one resource.
#[derive(Debug)]
pub struct Strategy {
    /// How names are validated.
    pub names: NameRule,
    /// Defaulting and normalisation before validation (`PrepareForCreate`/`PrepareForUpdate`
    /// and the scheme's defaulters); `old` is the stored object on updates.
    pub prepare: fn(&mut Map<String, Value>, Option<&Value>),
    /// Kind-specific validation: field causes for a 422, or `Err` for an earlier failure (an
    /// undecodable body is a 400).
    /// `old` is the stored object on updates (immutability rules).
    pub validate: Validate,
    /// Set for workloads: the controller simulation and the rollout model.
    pub workload: Option<&'static workloads::Workload>,
}

fn no_defaults(_: &mut Map<String, Value>, _: Option<&Value>) {}

fn no_validation(_: &Value, _: Option<&Value>, _: &mut Vec<FieldCause>) -> Result<(), StatusError> {
    Ok(())
}

/// Resources with no strategy of their own.
pub static DEFAULT: Strategy = Strategy {
    names: NameRule::Subdomain,
    prepare: no_defaults,
    validate: no_validation,
    workload: None,
};

/// The strategy of a resource: its own where it has one, else [`DEFAULT`] (custom resources
/// included).
pub fn of(res: ResId) -> &'static Strategy {
    match res {
        ids::NAMESPACES => &namespace::STRATEGY,
        ids::SECRETS => &secret::STRATEGY,
        ids::CONFIGMAPS => &configmap::STRATEGY,
        ids::DEPLOYMENTS => &workloads::DEPLOYMENT,
        ids::STATEFULSETS => &workloads::STATEFULSET,
        ids::DAEMONSETS => &workloads::DAEMONSET,
        ids::ROLES | ids::CLUSTERROLES | ids::ROLEBINDINGS | ids::CLUSTERROLEBINDINGS => {
            &rbac::STRATEGY
        }
        ids::SERVICES => &service::STRATEGY,
        ids::INGRESSES => &service::INGRESS,
        ids::CUSTOMRESOURCEDEFINITIONS => &crd::STRATEGY,
        ids::PRIORITYCLASSES => &scheduling::PRIORITY_CLASSES,
        ids::PODDISRUPTIONBUDGETS => &policy::PODDISRUPTIONBUDGETS,
        _ => &DEFAULT,
    }
}

/// Whether `d` is a workload the controller simulation rolls (Deployment, StatefulSet,
/// DaemonSet).
pub fn is_workload(d: &ResourceDef) -> bool {
    of(d.id).workload.is_some()
}

/// Defaulting and normalisation, as the registry strategies do before validation.
pub fn prepare(d: &ResourceDef, obj: &mut Value, old: Option<&Value>) -> Result<(), StatusError> {
    let Some(map) = obj.as_object_mut() else {
        return Err(StatusError::bad_request("the object is not a JSON object"));
    };
    map.insert("apiVersion".into(), json!(d.api_version()));
    map.insert("kind".into(), json!(d.kind));
    // Empty labels and annotations are not kept: `ObjectMeta`'s maps are `omitempty`.
    if !d.custom
        && let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut)
    {
        for key in ["labels", "annotations"] {
            if meta
                .get(key)
                .and_then(Value::as_object)
                .is_some_and(Map::is_empty)
            {
                meta.remove(key);
            }
        }
    }
    (of(d.id).prepare)(map, old);
    Ok(())
}

/// Validation: the name, the annotations' total size, then the resource's own rules.
pub fn validate(
    d: &ResourceDef,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), StatusError> {
    let mut causes = Vec::new();
    if let Some(message) = of(d.id).names.check(name) {
        causes.push(FieldCause::invalid(
            "metadata.name",
            &format!("{name:?}"),
            message,
        ));
    }
    if let Some(Value::Object(annotations)) = obj.pointer("/metadata/annotations") {
        let total: usize = annotations
            .iter()
            .map(|(k, v)| k.len() + v.as_str().map(str::len).unwrap_or(0))
            .sum();
        if total > MAX_ANNOTATIONS_SIZE {
            causes.push(FieldCause::too_long(
                "metadata.annotations",
                MAX_ANNOTATIONS_SIZE,
            ));
        }
    }
    (of(d.id).validate)(obj, old, &mut causes)?;
    if causes.is_empty() {
        Ok(())
    } else {
        Err(StatusError::invalid(d, name, &causes))
    }
}

/// The controller simulation: for a workload, status follows spec at once.
pub fn sync(d: &ResourceDef, obj: &mut Value, old: Option<&Value>, template_changed: bool) {
    if let Some(workload) = of(d.id).workload {
        (workload.sync)(obj, old, template_changed);
    }
}

/// Inserts `value` at `key` unless present.
fn default(map: &mut Map<String, Value>, key: &str, value: Value) {
    map.entry(key).or_insert(value);
}

/// The object at `key`, made one if it is absent (a non-object value is left alone: `None`).
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    map.entry(key).or_insert_with(|| json!({})).as_object_mut()
}

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// `IsConfigMapKey`, for the keys of ConfigMap and Secret data: `data[<key>]` causes.
pub fn validate_data_keys(obj: &Value, fields: &[&str], causes: &mut Vec<FieldCause>) {
    for field in fields {
        let Some(Value::Object(data)) = obj.get(*field) else {
            continue;
        };
        for key in data.keys() {
            let ok = !key.is_empty()
                && key.len() <= 253
                && key
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
            let path = format!("{field}[{key}]");
            if !ok {
                causes.push(FieldCause::invalid(
                    &path,
                    &format!("{key:?}"),
                    CONFIG_KEY_MSG,
                ));
            } else if key == "." || key == ".." {
                causes.push(FieldCause::invalid(
                    &path,
                    &format!("{key:?}"),
                    "must not be '.'",
                ));
            } else if key.starts_with("..") {
                causes.push(FieldCause::invalid(
                    &path,
                    &format!("{key:?}"),
                    "must not start with '..'",
                ));
            }
        }
    }
}

/// With `immutable: true` stored, `immutable` and the data fields may not change
/// (`ValidateConfigMapUpdate`, `ValidateSecretUpdate`).
pub fn validate_immutable(
    obj: &Value,
    old: Option<&Value>,
    fields: &[&str],
    causes: &mut Vec<FieldCause>,
) {
    let Some(old) = old else {
        return;
    };
    if old.get("immutable") != Some(&Value::Bool(true)) {
        return;
    }
    const DETAIL: &str = "field is immutable when `immutable` is set";
    if obj.get("immutable") != Some(&Value::Bool(true)) {
        causes.push(FieldCause::forbidden("immutable", DETAIL));
    }
    for field in fields {
        if obj.get(*field) != old.get(*field) {
            causes.push(FieldCause::forbidden(field, DETAIL));
        }
    }
}

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Whether `s` is a DNS-1123 label.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// Whether `s` is a DNS-1123 subdomain.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}
