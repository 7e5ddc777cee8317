//! Discovery documents and the minimal OpenAPI v2 and v3 documents kubectl reads.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::LazyLock;

use serde_json::{Value, json};

use rollsafe_emulator_types::resources::{self, ResId, Storage, def};

/// The Kubernetes version the emulator reports.
pub(crate) const KUBERNETES_MINOR: &str = "33";

/// `/version`.
pub(crate) fn version() -> Value {
    json!({
        "major": "1",
        "minor": KUBERNETES_MINOR,
        "gitVersion": format!("v1.{KUBERNETES_MINOR}.0"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-04-23T00:00:00Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

/// `/api`.
pub(crate) fn core_versions(addr: SocketAddr) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr.to_string()}]
    })
}

/// Which resources the emulator serves (the built-in ones and its CRDs' kinds).
pub(crate) type Serves<'a> = dyn Fn(ResId) -> bool + 'a;

fn group_entry(group: &str, serves: &Serves<'_>) -> Value {
    let versions: Vec<Value> = resources::versions_where(group, serves)
        .into_iter()
        .map(|version| json!({"groupVersion": format!("{group}/{version}"), "version": version}))
        .collect();
    let preferred = versions.first().cloned().unwrap_or(Value::Null);
    json!({"name": group, "versions": versions, "preferredVersion": preferred})
}

/// `/apis`.
pub(crate) fn groups(serves: &Serves<'_>) -> Value {
    let groups: Vec<Value> = resources::groups_where(serves)
        .into_iter()
        .map(|(g, _)| group_entry(g, serves))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`, when the group is served.
pub(crate) fn group(group: &str, serves: &Serves<'_>) -> Option<Value> {
    if !resources::groups_where(serves)
        .iter()
        .any(|(g, _)| *g == group)
    {
        return None;
    }
    let mut entry = group_entry(group, serves);
    if let Some(o) = entry.as_object_mut() {
        o.insert("kind".into(), json!("APIGroup"));
        o.insert("apiVersion".into(), json!("v1"));
    }
    Some(entry)
}

/// `/api/v1` or `/apis/<group>/<version>`, when anything in it is served.
pub(crate) fn resource_list(group: &str, version: &str, serves: &Serves<'_>) -> Option<Value> {
    let ids: Vec<ResId> = resources::in_group_version(group, version)
        .into_iter()
        .filter(|id| serves(*id))
        .collect();
    if ids.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for id in ids {
        let d = def(id);
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        out.push(r);
        for sub in d.subresources {
            let mut s = json!({
                "name": format!("{}/{}", d.plural, sub),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            });
            if *sub == "scale" {
                s["group"] = json!("autoscaling");
                s["version"] = json!("v1");
                s["kind"] = json!("Scale");
            }
            if *sub == "token" {
                s["group"] = json!("authentication.k8s.io");
                s["version"] = json!("v1");
                s["kind"] = json!("TokenRequest");
                s["verbs"] = json!(["create"]);
            }
            if *sub == "eviction" {
                s["group"] = json!("policy");
                s["version"] = json!("v1");
                s["kind"] = json!("Eviction");
                s["verbs"] = json!(["create"]);
            }
            out.push(s);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": out}),
    )
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// The content type of the protobuf OpenAPI v2 document (gnostic `openapi_v2.Document`). Clients
/// ask for `…spec.v2@v1.0+protobuf`; the real server answers with this form, which Go's media
/// type parser accepts (`@` is not a token character: client-go fails on it).
pub(crate) const OPENAPI_V2_PROTOBUF: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// `/openapi/v2` as JSON: a valid Swagger 2.0 document without definitions. kubectl 1.27 and
/// 1.28 fetch it before `apply`, `create -f`, `replace -f`, `diff` and `edit`; without a schema
/// for a kind they fall back to their compiled-in types for strategic merge (built-in kinds) or
/// to JSON merge patch (custom resources), as with a real server's CRDs without schemas.
pub(crate) fn openapi_v2() -> Value {
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": {},
        "definitions": {}
    })
}

/// The same document in protobuf: `swagger` (1), `info` (2: `title` 1, `version` 2), and empty
/// `paths` (8) and `definitions` (9).
pub(crate) fn openapi_v2_protobuf() -> Vec<u8> {
    fn field(out: &mut Vec<u8>, number: u8, bytes: &[u8]) {
        out.push((number << 3) | 2);
        // Every length here is below 128: one varint byte.
        out.push(u8::try_from(bytes.len()).unwrap_or(0));
        out.extend_from_slice(bytes);
    }
    let mut info = Vec::new();
    field(&mut info, 1, b"Kubernetes");
    field(&mut info, 2, format!("v1.{KUBERNETES_MINOR}.0").as_bytes());
    let mut doc = Vec::new();
    field(&mut doc, 1, b"2.0");
    field(&mut doc, 2, &info);
    field(&mut doc, 8, &[]);
    field(&mut doc, 9, &[]);
    doc
}

/// `/openapi/v3`: one entry per group/version. Built once: it depends only on the resource table.
pub(crate) fn openapi_index() -> &'static Value {
    static INDEX: LazyLock<Value> = LazyLock::new(build_openapi_index);
    &INDEX
}

fn build_openapi_index() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
    gvs.extend(resources::groups());
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash=EMULATOR{}", crate::discovery::KUBERNETES_MINOR)}),
        );
    }
    json!({"paths": paths})
}

/// `/openapi/v3/<gv>`: just enough for kubectl to learn that every kind supports server-side
/// field validation (the `fieldValidation` parameter on its PATCH operation), so it leaves
/// validation to the server. The documents of the listed group/versions are built once (they
/// depend only on the resource table); any other is built when asked for.
pub(crate) fn openapi_group_version(group: &str, version: &str) -> Cow<'static, Value> {
    static DOCS: LazyLock<Vec<((&str, &str), Value)>> = LazyLock::new(|| {
        std::iter::once(("", "v1"))
            .chain(resources::groups())
            .map(|(g, v)| ((g, v), build_openapi_group_version(g, v)))
            .collect()
    });
    match DOCS.iter().find(|((g, v), _)| *g == group && *v == version) {
        Some((_, doc)) => Cow::Borrowed(doc),
        None => Cow::Owned(build_openapi_group_version(group, version)),
    }
}

fn build_openapi_group_version(group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    for id in resources::in_group_version(group, version) {
        let d = def(id);
        if d.storage == Storage::Review {
            continue;
        }
        let prefix = format!("/{}", gv_path(group, version));
        let item = if d.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("{prefix}/{}/{{name}}", d.plural)
        };
        let gvk = json!({"group": d.group, "version": d.version, "kind": d.kind});
        let params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}
        ]);
        paths.insert(
            item,
            json!({
                "patch": {
                    "operationId": format!("patch{}", d.kind),
                    "parameters": params,
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk
                }
            }),
        );
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{KUBERNETES_MINOR}.0")},
        "paths": paths,
        "components": {"schemas": {}}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apps_lists_scale_subresource() {
        let list = resource_list("apps", "v1", &|_| true).unwrap_or_default();
        let names: Vec<&str> = list["resources"]
            .as_array()
            .map(|a| a.iter().filter_map(|r| r["name"].as_str()).collect())
            .unwrap_or_default();
        assert!(names.contains(&"deployments"));
        assert!(names.contains(&"deployments/scale"));
    }

    #[test]
    fn core_lists_the_eviction_subresource_as_the_real_server_does() {
        let list = resource_list("", "v1", &|_| true).unwrap_or_default();
        let eviction = list["resources"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["name"] == "pods/eviction"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            eviction,
            json!({"name": "pods/eviction", "singularName": "", "namespaced": true,
                   "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
        );
    }

    #[test]
    fn openapi_has_field_validation_for_deployments() {
        let doc = openapi_group_version("apps", "v1");
        let op = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Deployment");
    }

    #[test]
    fn openapi_documents_built_once_match_fresh_ones() {
        let served = openapi_group_version("apps", "v1");
        assert!(matches!(served, Cow::Borrowed(_)));
        assert_eq!(*served, build_openapi_group_version("apps", "v1"));
        assert_eq!(
            *openapi_group_version("", "v1"),
            build_openapi_group_version("", "v1")
        );
        assert_eq!(*openapi_index(), build_openapi_index());
    }
}
