//! URL → what the request is about (the real server's `RequestInfo`): the route, the resource,
//! namespace, name and subresource, and the [`Verb`].

use http::Method;

use crate::query::Query;
use crate::resources::{self, ResId, Storage, def};

/// A Kubernetes verb of a resource request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object.
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch`.
    Watch,
    /// POST to a collection.
    Create,
    /// PUT of an object.
    Update,
    /// PATCH of an object.
    Patch,
    /// DELETE of an object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The verb as RBAC rules, faults and the request log name it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Create => "create",
            Self::Update => "update",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::DeleteCollection => "deletecollection",
        }
    }
}

impl std::fmt::Display for Verb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A request on a resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// Resource id.
    pub res: ResId,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Object name from the URL.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`).
    pub subresource: Option<String>,
    /// Kubernetes verb.
    pub verb: Verb,
}

impl ResourceRequest {
    /// `deployments` or `deployments/scale`.
    pub fn full_resource(&self) -> String {
        match &self.subresource {
            Some(s) => format!("{}/{}", def(self.res).plural, s),
            None => def(self.res).plural.to_string(),
        }
    }
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    Resources(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiIndex,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`.
    OpenApiGroupVersion(String, String),
    /// A resource request.
    Resource(ResourceRequest),
    /// A known resource, but a method it does not support.
    MethodNotAllowed(ResId),
    /// Anything else: plain-text 404.
    NotFound,
}

fn verb_for(method: &Method, has_name: bool, query: &Query) -> Option<Verb> {
    Some(match (method.as_str(), has_name) {
        ("GET" | "HEAD", true) => Verb::Get,
        ("GET" | "HEAD", false) => {
            if query.flag("watch") {
                Verb::Watch
            } else {
                Verb::List
            }
        }
        ("POST", false) => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch,
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => return None,
    })
}

/// Parses a request path.
pub fn parse(method: &Method, path: &str, query: &Query) -> Route {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz"] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", "v1"] => Route::Resources(String::new(), "v1".into()),
        ["api", "v1", rest @ ..] => resource_route(method, "", "v1", rest, query),
        ["apis"] => Route::Groups,
        ["apis", g] if resources::groups().iter().any(|(x, _)| x == g) => {
            Route::Group((*g).to_string())
        }
        ["apis", g, v] if !resources::in_group_version(g, v).is_empty() => {
            Route::Resources((*g).to_string(), (*v).to_string())
        }
        ["apis", g, v, rest @ ..] => resource_route(method, g, v, rest, query),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiIndex,
        ["openapi", "v3", "api", "v1"] => Route::OpenApiGroupVersion(String::new(), "v1".into()),
        ["openapi", "v3", "apis", g, v] if !resources::in_group_version(g, v).is_empty() => {
            Route::OpenApiGroupVersion((*g).to_string(), (*v).to_string())
        }
        _ => Route::NotFound,
    }
}

fn resource_route(
    method: &Method,
    group: &str,
    version: &str,
    rest: &[&str],
    query: &Query,
) -> Route {
    let namespaced_target = match rest {
        ["namespaces", ns, plural, tail @ ..] => resources::find(group, version, plural)
            .filter(|id| def(*id).namespaced)
            .map(|id| (Some((*ns).to_string()), id, tail)),
        _ => None,
    };
    let (namespace, res, tail) = match namespaced_target {
        Some(t) => t,
        None => match rest {
            [plural, tail @ ..] => match resources::find(group, version, plural) {
                Some(id) => (None, id, tail),
                None => return Route::NotFound,
            },
            [] => return Route::NotFound,
        },
    };
    let d = def(res);
    let (name, subresource) = match tail {
        [] => (None, None),
        [name] => (Some((*name).to_string()), None),
        [name, sub] if d.subresources.contains(sub) => {
            (Some((*name).to_string()), Some((*sub).to_string()))
        }
        _ => return Route::NotFound,
    };
    if d.namespaced && namespace.is_none() && name.is_some() {
        return Route::NotFound;
    }
    // Subresources created by POST to the object (`serviceaccounts/<name>/token`,
    // `pods/<name>/eviction`); eviction has no other verb (`rest.NamedCreater` only).
    let creates =
        matches!(subresource.as_deref(), Some("token" | "eviction")) && method == Method::POST;
    if subresource.as_deref() == Some("eviction") && !creates {
        return Route::MethodNotAllowed(res);
    }
    let verb = if creates {
        Some(Verb::Create)
    } else {
        verb_for(method, name.is_some(), query)
    };
    let Some(verb) = verb else {
        return Route::MethodNotAllowed(res);
    };
    if d.storage == Storage::Review && verb != Verb::Create {
        return Route::MethodNotAllowed(res);
    }
    if subresource.is_some() && !creates && !matches!(verb, Verb::Get | Verb::Update | Verb::Patch)
    {
        return Route::MethodNotAllowed(res);
    }
    Route::Resource(ResourceRequest {
        res,
        namespace,
        name,
        subresource,
        verb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ids;

    fn p(method: Method, path: &str) -> Route {
        parse(&method, path, &Query::parse(""))
    }

    #[test]
    fn paths() {
        assert_eq!(
            p(Method::GET, "/apis/apps/v1/namespaces/ns/deployments/web"),
            Route::Resource(ResourceRequest {
                res: ids::DEPLOYMENTS,
                namespace: Some("ns".into()),
                name: Some("web".into()),
                subresource: None,
                verb: Verb::Get,
            })
        );
        assert_eq!(
            p(Method::GET, "/api/v1/namespaces/ns"),
            Route::Resource(ResourceRequest {
                res: ids::NAMESPACES,
                namespace: None,
                name: Some("ns".into()),
                subresource: None,
                verb: Verb::Get,
            })
        );
        assert!(matches!(
            p(Method::GET, "/apis/apps/v1/deployments"),
            Route::Resource(ResourceRequest {
                verb: Verb::List,
                namespace: None,
                ..
            })
        ));
        assert!(matches!(
            p(
                Method::PATCH,
                "/apis/apps/v1/namespaces/ns/deployments/web/scale"
            ),
            Route::Resource(ResourceRequest {
                verb: Verb::Patch,
                ..
            })
        ));
        assert_eq!(
            p(Method::GET, "/apis/apps/v1/namespaces/ns/pods"),
            Route::NotFound
        );
        assert_eq!(p(Method::GET, "/apis/nope.io/v1"), Route::NotFound);
        assert_eq!(
            p(Method::POST, "/apis/apps/v1/namespaces/ns/deployments/web"),
            Route::MethodNotAllowed(ids::DEPLOYMENTS)
        );
        assert_eq!(
            p(Method::POST, "/api/v1/namespaces/ns/pods/web-0/eviction"),
            Route::Resource(ResourceRequest {
                res: ids::PODS,
                namespace: Some("ns".into()),
                name: Some("web-0".into()),
                subresource: Some("eviction".into()),
                verb: Verb::Create,
            })
        );
        for method in [Method::GET, Method::PUT, Method::PATCH, Method::DELETE] {
            assert_eq!(
                p(method, "/api/v1/namespaces/ns/pods/web-0/eviction"),
                Route::MethodNotAllowed(ids::PODS)
            );
        }
    }
}
