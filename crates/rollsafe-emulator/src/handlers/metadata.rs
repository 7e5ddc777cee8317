//! `meta.k8s.io` PartialObjectMetadata responses. A get or watch whose `Accept` asks for
//! `as=PartialObjectMetadata`, or a list asking for `as=PartialObjectMetadataList`, with
//! `g=meta.k8s.io` and `v=v1` (or `v1beta1`), is answered with the objects' metadata alone,
//! as the real server's `transformObject` does: a client that reads metadata (kube-rs's
//! `get_metadata`, `list_metadata` and `watch_metadata`, client-go's metadata informers)
//! never receives a Secret's values.
//!
//! Decision: an `Accept` naming the other form (a list asking for `PartialObjectMetadata`) is
//! answered with the full object, where the real server answers 406 unless the header also
//! offers plain JSON, which every client sends.

use serde_json::{Map, Value, json};

/// The form a get or watch asks for.
pub(crate) const OBJECT: &str = "PartialObjectMetadata";
/// The form a list asks for.
pub(crate) const LIST: &str = "PartialObjectMetadataList";

/// The `meta.k8s.io` version an `Accept` header asks `kind` (`OBJECT` or `LIST`) in, if any
/// of its entries does.
pub(crate) fn wanted(accept: &str, kind: &str) -> Option<&'static str> {
    accept.split(',').find_map(|entry| {
        let params: Vec<&str> = entry.split(';').map(str::trim).collect();
        let asks_for = params.iter().any(|p| p.strip_prefix("as=") == Some(kind));
        if !asks_for || !params.contains(&"g=meta.k8s.io") {
            return None;
        }
        if params.contains(&"v=v1") {
            Some("meta.k8s.io/v1")
        } else if params.contains(&"v=v1beta1") {
            Some("meta.k8s.io/v1beta1")
        } else {
            None
        }
    })
}

/// An object's metadata as a `PartialObjectMetadata` of `api_version`.
pub(crate) fn partial(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": OBJECT,
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| Value::Object(Map::new())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_asking_for_metadata() {
        let cases = [
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
                OBJECT,
                Some("meta.k8s.io/v1"),
            ),
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                LIST,
                Some("meta.k8s.io/v1"),
            ),
            (
                "application/json;as=PartialObjectMetadataList;v=v1beta1;g=meta.k8s.io",
                LIST,
                Some("meta.k8s.io/v1beta1"),
            ),
            // The list form on a get, another group, a version that does not exist, plain JSON.
            (
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                OBJECT,
                None,
            ),
            (
                "application/json;as=PartialObjectMetadata;g=example.com;v=v1",
                OBJECT,
                None,
            ),
            (
                "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2",
                OBJECT,
                None,
            ),
            ("application/json", OBJECT, None),
        ];
        for (accept, kind, want) in cases {
            assert_eq!(wanted(accept, kind), want, "{accept} as {kind}");
        }
    }

    #[test]
    fn a_partial_object_holds_the_metadata_only() {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db", "labels": {"a": "b"}}, "data": {"password": "c2VjcmV0"}});
        assert_eq!(
            partial(&secret, "meta.k8s.io/v1"),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "db", "labels": {"a": "b"}}})
        );
    }
}
