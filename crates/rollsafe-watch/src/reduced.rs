//! Secrets and ConfigMaps decoded straight into what the cache keeps: a few metadata fields and
//! one digest per key. The watch streams decode list pages and events into [`Reduced`] instead
//! of a full object: a value is hashed as the decoder reads it and never held, the rest of the
//! object (`managedFields`, labels, any other field) is skipped by the decoder.
//!
//! The digests are those of [`crate::cache::SourceEntry::from_object`], byte for byte: a
//! Secret's `data` values and a ConfigMap's `binaryData` values base64-decoded (a value that is
//! not valid base64 is hashed as its text), a ConfigMap's `data` values hashed as text.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollsafe_core::reference::TargetKind;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::digest::{ValueDigest, value_digest};

/// Secret or ConfigMap, as a type (the watch streams are typed by it).
pub trait SourceType: fmt::Debug + Clone + Send + Sync + 'static {
    /// The kind.
    const KIND: TargetKind;
    /// The resource name in API paths.
    const PLURAL: &'static str;
    /// Whether the values of `field` are base64 (`data` of a Secret, `binaryData`); `None`:
    /// not a field with values.
    fn base64(field: &str) -> Option<bool>;
}

/// `v1` Secret.
#[derive(Debug, Clone, Copy)]
pub struct Secrets;

/// `v1` ConfigMap.
#[derive(Debug, Clone, Copy)]
pub struct ConfigMaps;

impl SourceType for Secrets {
    const KIND: TargetKind = TargetKind::Secret;
    const PLURAL: &'static str = "secrets";
    fn base64(field: &str) -> Option<bool> {
        (field == "data").then_some(true)
    }
}

impl SourceType for ConfigMaps {
    const KIND: TargetKind = TargetKind::ConfigMap;
    const PLURAL: &'static str = "configmaps";
    fn base64(field: &str) -> Option<bool> {
        match field {
            "data" => Some(false),
            "binaryData" => Some(true),
            _ => None,
        }
    }
}

/// A Secret or ConfigMap reduced as it is decoded: its name, namespace, uid, resourceVersion
/// and annotations (nothing else of its metadata), and the digest of each key's value.
#[derive(Debug, Clone)]
pub struct Reduced<K> {
    /// The kept metadata fields.
    pub metadata: ObjectMeta,
    /// Key → digest of its value.
    pub keys: BTreeMap<String, ValueDigest>,
    kind: PhantomData<K>,
}

impl<K: SourceType> kube::Resource for Reduced<K> {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        K::KIND.as_str().into()
    }

    fn group(_: &()) -> Cow<'_, str> {
        "".into()
    }

    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }

    fn plural(_: &()) -> Cow<'_, str> {
        K::PLURAL.into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The metadata fields kept; every other one is skipped by the decoder.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    #[serde(default)]
    annotations: KeptAnnotations,
}

/// Whether the controller reads a source's annotation `key`: rollsafe's own
/// (`rollsafe.dev/…`), OpenChoreo's opt-out and Reloader's. Every other annotation is skipped by
/// the decoder, `kubectl.kubernetes.io/last-applied-configuration` above all: on a Secret
/// applied with kubectl it holds the Secret's data, which the controller must never hold.
pub fn read_annotation(key: &str) -> bool {
    key.starts_with("rollsafe.dev/")
        || key == rollsafe_core::annotations::RESTART_ON_CHANGE
        || rollsafe_core::opt_in::reloader::is_reloader_annotation(key)
}

/// The annotations [`read_annotation`] keeps; `None` when there were none at all.
#[derive(Default)]
struct KeptAnnotations(Option<BTreeMap<String, String>>);

impl<'de> Deserialize<'de> for KeptAnnotations {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_option(KeptAnnotationsVisitor)
    }
}

struct KeptAnnotationsVisitor;

impl<'de> Visitor<'de> for KeptAnnotationsVisitor {
    type Value = KeptAnnotations;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of annotations")
    }

    fn visit_none<E: de::Error>(self) -> Result<KeptAnnotations, E> {
        Ok(KeptAnnotations(None))
    }

    fn visit_unit<E: de::Error>(self) -> Result<KeptAnnotations, E> {
        Ok(KeptAnnotations(None))
    }

    fn visit_some<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<KeptAnnotations, D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<KeptAnnotations, A::Error> {
        let mut kept = BTreeMap::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if read_annotation(&key) {
                kept.insert(key.into_owned(), map.next_value::<String>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(KeptAnnotations(Some(kept)))
    }
}

impl<'de, K: SourceType> Deserialize<'de> for Reduced<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(ObjectVisitor(PhantomData))
    }
}

struct ObjectVisitor<K>(PhantomData<K>);

impl<'de, K: SourceType> Visitor<'de> for ObjectVisitor<K> {
    type Value = Reduced<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a {}", K::KIND.as_str())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut metadata = ObjectMeta::default();
        let mut keys = BTreeMap::new();
        while let Some(field) = map.next_key::<Cow<'de, str>>()? {
            if field == "metadata" {
                let kept: Kept = map.next_value()?;
                metadata = ObjectMeta {
                    name: kept.name,
                    namespace: kept.namespace,
                    uid: kept.uid,
                    resource_version: kept.resource_version,
                    annotations: kept.annotations.0,
                    ..ObjectMeta::default()
                };
            } else if let Some(base64) = K::base64(&field) {
                map.next_value_seed(Digests {
                    base64,
                    into: &mut keys,
                })?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(Reduced {
            metadata,
            keys,
            kind: PhantomData,
        })
    }
}

/// One values map (`data`, `binaryData`), hashed into `into` entry by entry; `null` is empty.
struct Digests<'a> {
    base64: bool,
    into: &'a mut BTreeMap<String, ValueDigest>,
}

impl<'de> DeserializeSeed<'de> for Digests<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for Digests<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a map of strings")
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            // A value that is not a string (not sent by the API server) is left out, as
            // `SourceEntry::from_object` leaves it out.
            if let Some(digest) = map.next_value_seed(ValueSeed {
                base64: self.base64,
            })? {
                self.into.insert(key, digest);
            }
        }
        Ok(())
    }
}

/// One value, hashed as it is read: from the input itself when it holds no escapes.
struct ValueSeed {
    base64: bool,
}

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Option<ValueDigest>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ValueSeed {
    type Value = Option<ValueDigest>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(Some(digest_of(value, self.base64)))
    }

    fn visit_borrowed_str<E: de::Error>(self, value: &'de str) -> Result<Self::Value, E> {
        self.visit_str(value)
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Self::Value, E> {
        self.visit_str(&value)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

/// The digest of one value: base64-decoded when `base64` and it decodes, else its text.
pub(crate) fn digest_of(value: &str, base64: bool) -> ValueDigest {
    if base64 {
        base64::engine::general_purpose::STANDARD
            .decode(value)
            .map_or_else(|_| value_digest(value.as_bytes()), |b| value_digest(&b))
    } else {
        value_digest(value.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::SourceEntry;
    use serde_json::json;

    /// The reduced decoding gives the entry of the full object, for every shape the API server
    /// sends (and some it does not).
    #[test]
    fn decoding_into_digests_gives_the_entry_of_the_whole_object() {
        let metadata = json!({"name": "db", "namespace": "shop", "uid": "u-1",
            "resourceVersion": "42", "labels": {"a": "b"},
            "annotations": {"rollsafe.dev/rollout": "progressive", "reloader.stakater.com/match": "true"},
            "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]});
        let secrets = [
            json!({"kind": "Secret", "metadata": metadata, "type": "Opaque",
                   "data": {"password": "aHVudGVyMg==", "raw": "not base64!", "e": ""}}),
            json!({"metadata": metadata, "data": null}),
            json!({"metadata": metadata}),
            json!({"metadata": {"name": "x", "namespace": "shop",
                                "annotations": {"rollsafe.dev/watch": "false"}},
                   "data": {"n": 5, "s": "c3RyaW5n", "esc": "line\nbreak \"quoted\""}}),
        ];
        for object in secrets {
            let text = serde_json::to_vec(&object).unwrap();
            for compat in [false, true] {
                let reduced: Reduced<Secrets> = serde_json::from_slice(&text).unwrap();
                assert_eq!(
                    SourceEntry::from_reduced(reduced, compat),
                    SourceEntry::from_object_in(TargetKind::Secret, &object, compat),
                    "{object} compat={compat}"
                );
            }
        }
        let config_maps = [
            json!({"metadata": metadata, "data": {"mode": "a", "json": "{\"k\": 1}"},
                   "binaryData": {"bin": "eQ=="}, "immutable": true}),
            json!({"binaryData": {"bin": "not base64"}, "metadata": metadata, "data": {"t": "eQ=="}}),
        ];
        for object in config_maps {
            let text = serde_json::to_vec(&object).unwrap();
            let reduced: Reduced<ConfigMaps> = serde_json::from_slice(&text).unwrap();
            assert_eq!(
                SourceEntry::from_reduced(reduced, true),
                SourceEntry::from_object_in(TargetKind::ConfigMap, &object, true),
                "{object}"
            );
        }
    }

    /// Only the annotations the controller reads are kept; a kubectl-applied Secret's
    /// last-applied-configuration, which holds its data, is skipped by the decoder.
    #[test]
    fn only_the_annotations_the_controller_reads_are_kept() {
        let last_applied =
            r#"{"apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"kind":"Secret"}"#;
        let object = json!({"metadata": {"name": "db", "namespace": "shop", "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": last_applied,
                "rollsafe.dev/watch": "false",
                "rollsafe.dev/restart-window": "Sat 10:00-12:00 UTC",
                "openchoreo.dev/restart-on-change": "false",
                "reloader.stakater.com/match": "true",
                "secret.reloader.stakater.com/reload": "x",
                "example.com/team": "payments"}},
            "data": {"password": "aHVudGVyMg=="}});
        let reduced: Reduced<Secrets> = serde_json::from_value(object).unwrap();
        let kept: Vec<&str> = reduced
            .metadata
            .annotations
            .as_ref()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            kept,
            [
                "openchoreo.dev/restart-on-change",
                "reloader.stakater.com/match",
                "rollsafe.dev/restart-window",
                "rollsafe.dev/watch",
                "secret.reloader.stakater.com/reload",
            ]
        );
        assert!(!format!("{reduced:?}").contains("aHVudGVyMg"));
        for (key, read) in [
            ("rollsafe.dev/approval", true),
            ("rollsafe.dev.evil/x", false),
            ("kubectl.kubernetes.io/last-applied-configuration", false),
            ("openchoreo.dev/other", false),
        ] {
            assert_eq!(read_annotation(key), read, "{key}");
        }
        // No annotations, or null: none.
        for metadata in [
            json!({"name": "a"}),
            json!({"name": "a", "annotations": null}),
        ] {
            let reduced: Reduced<Secrets> =
                serde_json::from_value(json!({"metadata": metadata})).unwrap();
            assert!(reduced.metadata.annotations.is_none());
        }
    }

    #[test]
    fn only_the_kept_metadata_is_kept() {
        let object = json!({"metadata": {"name": "db", "namespace": "shop", "uid": "u",
            "resourceVersion": "7", "labels": {"a": "b"}, "generation": 3,
            "managedFields": [{"manager": "m"}], "annotations": {"k": "v"}},
            "data": {"password": "aHVudGVyMg=="}});
        let reduced: Reduced<Secrets> = serde_json::from_value(object).unwrap();
        assert_eq!(reduced.metadata.name.as_deref(), Some("db"));
        assert_eq!(reduced.metadata.resource_version.as_deref(), Some("7"));
        assert!(reduced.metadata.labels.is_none());
        assert!(reduced.metadata.managed_fields.is_none());
        assert!(reduced.metadata.generation.is_none());
        assert!(!format!("{reduced:?}").contains("hunter2"));
        assert!(!format!("{reduced:?}").contains("aHVudGVyMg"));
        // A list page decodes too (kube's ObjectList of the reduced form).
        let page: kube::core::ObjectList<Reduced<Secrets>> = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "9"},
            "items": [{"metadata": {"name": "a", "namespace": "n"}, "data": {"k": "dg=="}}]}))
        .unwrap();
        assert_eq!(page.items.len(), 1);
    }
}
