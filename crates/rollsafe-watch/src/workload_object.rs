//! A workload as the watch streams decode it: the object as one JSON tree without its
//! `metadata.managedFields`, beside the few metadata fields kube's watcher reads.
//!
//! The cache reduces a workload from its JSON ([`crate::cache::WorkloadEntry::classified`]);
//! decoding it as a `DynamicObject` first and converting that to JSON built the object twice
//! (typed metadata, managedFields included, then a second tree) for every listed workload and
//! every event. Here the decoder builds the tree once and skips managedFields — the largest
//! part of a workload many controllers have written to — without building it.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DynamicObject};
use kube::core::DynamicResourceScope;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value};

/// A listed or watched workload.
#[derive(Debug, Clone, Default)]
pub struct WorkloadObject {
    /// name, namespace, uid and resourceVersion (what kube's watcher reads).
    pub metadata: ObjectMeta,
    /// The object, without `metadata.managedFields`.
    pub object: Value,
}

impl WorkloadObject {
    /// The object a write returned, in this form.
    pub fn from_written(object: &DynamicObject) -> Option<Self> {
        let mut value = serde_json::to_value(object).ok()?;
        if let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        Some(Self::of(value))
    }

    /// The object `object` (already without managedFields), with the metadata fields kube's
    /// watcher reads copied out of it.
    fn of(object: Value) -> Self {
        let text = |name: &str| {
            object
                .get("metadata")
                .and_then(|metadata| metadata.get(name))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let metadata = ObjectMeta {
            name: text("name"),
            namespace: text("namespace"),
            uid: text("uid"),
            resource_version: text("resourceVersion"),
            ..ObjectMeta::default()
        };
        Self { metadata, object }
    }
}

impl kube::Resource for WorkloadObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de> Deserialize<'de> for WorkloadObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor)
    }
}

struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = WorkloadObject;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a workload object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<WorkloadObject, A::Error> {
        let mut object = Map::new();
        while let Some(field) = map.next_key::<String>()? {
            let value = if field == "metadata" {
                map.next_value::<Metadata>()?.0
            } else {
                map.next_value::<Value>()?
            };
            object.insert(field, value);
        }
        Ok(WorkloadObject::of(Value::Object(object)))
    }
}

/// `metadata` as JSON, `managedFields` skipped by the decoder.
struct Metadata(Value);

impl<'de> Deserialize<'de> for Metadata {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MetadataVisitor)
    }
}

struct MetadataVisitor;

impl<'de> Visitor<'de> for MetadataVisitor {
    type Value = Metadata;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("object metadata")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Metadata, E> {
        Ok(Metadata(Value::Null))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Metadata, A::Error> {
        let mut metadata = Map::new();
        while let Some(field) = map.next_key::<String>()? {
            if field == "managedFields" {
                map.next_value::<IgnoredAny>()?;
            } else {
                metadata.insert(field, map.next_value::<Value>()?);
            }
        }
        Ok(Metadata(Value::Object(metadata)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "web",
                "namespace": "shop",
                "uid": "0b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2b",
                "resourceVersion": "42",
                "generation": 3,
                "annotations": {"rollsafe.dev/watch": "true"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply",
                    "fieldsV1": {"f:spec": {"f:replicas": {}}}}]
            },
            "spec": {"template": {"spec": {"containers": [{"name": "app",
                "envFrom": [{"secretRef": {"name": "db"}}]}]}}},
            "status": {"observedGeneration": 3, "replicas": 2}
        })
    }

    #[test]
    fn the_tree_is_the_objects_without_managed_fields() {
        let text = serde_json::to_string(&deployment()).unwrap_or_default();
        let decoded: WorkloadObject = serde_json::from_str(&text).unwrap_or_default();
        // What the whole-object path gave: a DynamicObject converted to JSON.
        let dynamic: DynamicObject = serde_json::from_str(&text).unwrap_or_else(|_| {
            DynamicObject::new(
                "",
                &ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
            )
        });
        let mut whole = serde_json::to_value(&dynamic).unwrap_or_default();
        if let Some(metadata) = whole.get_mut("metadata").and_then(Value::as_object_mut) {
            metadata.remove("managedFields");
        }
        assert_eq!(decoded.object, whole);
        assert!(decoded.object.pointer("/metadata/managedFields").is_none());
        assert_eq!(decoded.metadata.name.as_deref(), Some("web"));
        assert_eq!(decoded.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(decoded.metadata.resource_version.as_deref(), Some("42"));
        assert_eq!(
            decoded.metadata.uid.as_deref(),
            Some("0b4c6c5e-2f3a-4d1e-9a8b-7c6d5e4f3a2b")
        );
    }

    #[test]
    fn a_list_page_decodes_into_workload_objects() {
        let page = json!({"apiVersion": "apps/v1", "kind": "DeploymentList",
            "metadata": {"resourceVersion": "50", "continue": "next"},
            "items": [deployment(), {"metadata": null}]});
        let list: kube::core::ObjectList<WorkloadObject> =
            serde_json::from_value(page).unwrap_or_else(|error| panic!("{error}"));
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[0].metadata.name.as_deref(), Some("web"));
        assert_eq!(list.items[1].metadata, ObjectMeta::default());
    }
}
