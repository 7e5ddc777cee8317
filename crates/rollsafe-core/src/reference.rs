//! Which Secrets and ConfigMaps a pod template references.
//!
//! [`extract`] walks a pod template (`spec.template` of a workload, as `serde_json::Value`) and
//! returns every reference it holds, each with its exact origin. It never panics: a field of the
//! wrong JSON type is skipped, as is a reference without a non-empty string name. Matching is by
//! exact name only — names in commands, labels, annotations or plain env `value`s are not
//! references.
//!
//! Two policies sit on top:
//!
//! - [`restart_consumers`] — the Restart Consumers API: Secrets only, through env
//!   `secretKeyRef`, envFrom `secretRef` (containers, initContainers, ephemeralContainers),
//!   `secret` volumes, projected `secret` sources and `imagePullSecrets`.
//! - [`referenced_config`] — referenced-config rollout: ConfigMaps and Secrets through env
//!   `configMapKeyRef`/`secretKeyRef`, envFrom `configMapRef`/`secretRef` (containers and
//!   initContainers, not ephemeral containers), and `configMap`, `secret` and `projected` volumes.
//!
//! Volume types that carry credentials for a storage driver (`csi.nodePublishSecretRef`,
//! `cephfs.secretRef`, …) are outside both policies and not extracted.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The kind of object a reference points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TargetKind {
    /// A ConfigMap.
    ConfigMap,
    /// A Secret.
    Secret,
}

impl TargetKind {
    /// The Kubernetes kind name.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::ConfigMap => "ConfigMap",
            TargetKind::Secret => "Secret",
        }
    }
}

/// Which container list of the pod spec a container is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ContainerList {
    /// `spec.containers`.
    Container,
    /// `spec.initContainers` (native sidecars included).
    InitContainer,
    /// `spec.ephemeralContainers`.
    EphemeralContainer,
}

impl ContainerList {
    const ALL: [(ContainerList, &'static str); 3] = [
        (ContainerList::Container, "containers"),
        (ContainerList::InitContainer, "initContainers"),
        (ContainerList::EphemeralContainer, "ephemeralContainers"),
    ];
}

/// Where in the pod template a reference is.
///
/// Serialized with a `via` tag: `env`, `envFrom`, `volume`, `projectedVolume`,
/// `imagePullSecret`. A container or volume `name` that is missing or not a string is `null`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "via", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Origin {
    /// `<list>[].env[].valueFrom.secretKeyRef` or `.configMapKeyRef`.
    Env {
        /// The container list.
        container_list: ContainerList,
        /// The container's name.
        container: Option<String>,
        /// The env var's name.
        env: Option<String>,
        /// The key in the Secret or ConfigMap.
        key: Option<String>,
    },
    /// `<list>[].envFrom[].secretRef` or `.configMapRef`.
    EnvFrom {
        /// The container list.
        container_list: ContainerList,
        /// The container's name.
        container: Option<String>,
        /// The envFrom entry's `prefix`, when set.
        #[serde(skip_serializing_if = "Option::is_none")]
        prefix: Option<String>,
    },
    /// `volumes[].secret.secretName` or `volumes[].configMap.name`.
    Volume {
        /// The volume's name.
        volume: Option<String>,
    },
    /// `volumes[].projected.sources[<source>].secret.name` or `.configMap.name`.
    ProjectedVolume {
        /// The volume's name.
        volume: Option<String>,
        /// Index of the source in `projected.sources`.
        source: usize,
    },
    /// `imagePullSecrets[].name`.
    ImagePullSecret,
}

/// One reference from a pod template to a Secret or ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Reference {
    /// What is referenced.
    pub kind: TargetKind,
    /// The referenced object's name (exact).
    pub name: String,
    /// Where the reference is.
    #[serde(flatten)]
    pub origin: Origin,
    /// The reference's `optional` flag, where the API has one (`false` when unset);
    /// absent for `imagePullSecrets`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optional: Option<bool>,
}

impl Reference {
    /// Whether the Restart Consumers policy counts this reference.
    pub fn is_restart_consumer(&self) -> bool {
        self.kind == TargetKind::Secret
    }

    /// Whether the referenced-config policy counts this reference.
    pub fn is_referenced_config(&self) -> bool {
        match &self.origin {
            Origin::Env { container_list, .. } | Origin::EnvFrom { container_list, .. } => {
                *container_list != ContainerList::EphemeralContainer
            }
            Origin::Volume { .. } | Origin::ProjectedVolume { .. } => true,
            Origin::ImagePullSecret => false,
        }
    }
}

/// A referenced object: its kind and exact name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigRef {
    /// ConfigMap or Secret.
    pub kind: TargetKind,
    /// The exact name.
    pub name: String,
}

impl std::fmt::Display for ConfigRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.kind.as_str(), self.name)
    }
}

/// The pod template of a workload object: `spec.template`.
pub fn pod_template(workload: &Value) -> Option<&Value> {
    workload.get("spec")?.get("template")
}

/// Every reference in a pod template (`spec.template`), in document order.
pub fn extract(pod_template: &Value) -> Vec<Reference> {
    let mut out = Vec::new();
    let Some(spec) = pod_template.get("spec").filter(|s| s.is_object()) else {
        return out;
    };
    for (list, field) in ContainerList::ALL {
        for container in array(spec, field) {
            container_references(list, container, &mut out);
        }
    }
    for volume in array(spec, "volumes") {
        volume_references(volume, &mut out);
    }
    for secret in array(spec, "imagePullSecrets") {
        if let Some(name) = name_field(secret, "name") {
            out.push(Reference {
                kind: TargetKind::Secret,
                name,
                origin: Origin::ImagePullSecret,
                optional: None,
            });
        }
    }
    out
}

/// The Restart Consumers policy: the Secrets a pod template references.
pub fn restart_consumers(pod_template: &Value) -> Vec<Reference> {
    extract(pod_template)
        .into_iter()
        .filter(Reference::is_restart_consumer)
        .collect()
}

/// Whether a pod template references the Secret `secret` under the Restart Consumers policy.
pub fn consumes_secret(pod_template: &Value, secret: &str) -> bool {
    restart_consumers(pod_template)
        .iter()
        .any(|reference| reference.name == secret)
}

/// The referenced-config policy: the ConfigMaps and Secrets a pod template references, sorted
/// and unique.
pub fn referenced_config(pod_template: &Value) -> BTreeSet<ConfigRef> {
    extract(pod_template)
        .into_iter()
        .filter(Reference::is_referenced_config)
        .map(|reference| ConfigRef {
            kind: reference.kind,
            name: reference.name,
        })
        .collect()
}

fn container_references(list: ContainerList, container: &Value, out: &mut Vec<Reference>) {
    let container_name = string(container, "name");
    for env in array(container, "env") {
        let Some(value_from) = env.get("valueFrom").filter(|v| v.is_object()) else {
            continue;
        };
        for (field, kind) in [
            ("secretKeyRef", TargetKind::Secret),
            ("configMapKeyRef", TargetKind::ConfigMap),
        ] {
            let Some(selector) = value_from.get(field) else {
                continue;
            };
            if let Some(name) = name_field(selector, "name") {
                out.push(Reference {
                    kind,
                    name,
                    origin: Origin::Env {
                        container_list: list,
                        container: container_name.clone(),
                        env: string(env, "name"),
                        key: string(selector, "key"),
                    },
                    optional: Some(optional(selector)),
                });
            }
        }
    }
    for source in array(container, "envFrom") {
        for (field, kind) in [
            ("secretRef", TargetKind::Secret),
            ("configMapRef", TargetKind::ConfigMap),
        ] {
            let Some(selector) = source.get(field) else {
                continue;
            };
            if let Some(name) = name_field(selector, "name") {
                out.push(Reference {
                    kind,
                    name,
                    origin: Origin::EnvFrom {
                        container_list: list,
                        container: container_name.clone(),
                        prefix: string(source, "prefix"),
                    },
                    optional: Some(optional(selector)),
                });
            }
        }
    }
}

fn volume_references(volume: &Value, out: &mut Vec<Reference>) {
    let volume_name = string(volume, "name");
    if let Some(secret) = volume.get("secret")
        && let Some(name) = name_field(secret, "secretName")
    {
        out.push(Reference {
            kind: TargetKind::Secret,
            name,
            origin: Origin::Volume {
                volume: volume_name.clone(),
            },
            optional: Some(optional(secret)),
        });
    }
    if let Some(config_map) = volume.get("configMap")
        && let Some(name) = name_field(config_map, "name")
    {
        out.push(Reference {
            kind: TargetKind::ConfigMap,
            name,
            origin: Origin::Volume {
                volume: volume_name.clone(),
            },
            optional: Some(optional(config_map)),
        });
    }
    let Some(projected) = volume.get("projected") else {
        return;
    };
    for (index, source) in array(projected, "sources").enumerate() {
        for (field, kind) in [
            ("secret", TargetKind::Secret),
            ("configMap", TargetKind::ConfigMap),
        ] {
            let Some(projection) = source.get(field) else {
                continue;
            };
            if let Some(name) = name_field(projection, "name") {
                out.push(Reference {
                    kind,
                    name,
                    origin: Origin::ProjectedVolume {
                        volume: volume_name.clone(),
                        source: index,
                    },
                    optional: Some(optional(projection)),
                });
            }
        }
    }
}

/// The elements of `value[field]` when it is an array; nothing otherwise (missing, null or of
/// another type).
fn array<'a>(value: &'a Value, field: &str) -> impl Iterator<Item = &'a Value> {
    value
        .get(field)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn string(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// A reference's target name: a non-empty string, or no reference at all.
fn name_field(value: &Value, field: &str) -> Option<String> {
    string(value, field).filter(|name| !name.is_empty())
}

/// The `optional` flag; unset or of the wrong type reads as `false`, as the API defaults it.
fn optional(selector: &Value) -> bool {
    selector
        .get("optional")
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
