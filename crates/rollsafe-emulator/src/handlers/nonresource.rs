//! Non-resource paths: version, health, discovery and OpenAPI documents.

use hyper::{Method, Response};

use crate::discovery;
use crate::http_util::{error, json};
use crate::state::{Body, Shared};
use rollsafe_emulator_registry::authorizer::{self, Attributes};
use rollsafe_emulator_registry::identity::UserInfo;
use rollsafe_emulator_types::route::Route;
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn non_resource(
    route: Route,
    method: &Method,
    path: &str,
    accept: &str,
    shared: &Shared,
    user: &UserInfo,
) -> Response<Body> {
    let verb = method.as_str().to_ascii_lowercase();
    let attrs = Attributes {
        verb: verb.clone(),
        path: Some(path.to_string()),
        ..Attributes::default()
    };
    if let Err(e) = authorizer::check(&shared.store(), user, &attrs) {
        return error(&e);
    }
    if verb != "get" && verb != "head" {
        return error(&StatusError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            None,
        ));
    }
    match route {
        Route::Version => json(200, &discovery::version()),
        Route::Health => crate::http_util::full(200, "text/plain; charset=utf-8", "ok"),
        Route::CoreVersions => json(200, &discovery::core_versions(shared.addr)),
        Route::Groups | Route::Group(_) | Route::Resources(..) => {
            let store = shared.store();
            let serves = |res| store.serves(res);
            match route {
                Route::Groups => json(200, &discovery::groups(&serves)),
                Route::Group(g) => match discovery::group(&g, &serves) {
                    Some(group) => json(200, &group),
                    None => error(&StatusError::page_not_found()),
                },
                Route::Resources(g, v) => match discovery::resource_list(&g, &v, &serves) {
                    Some(list) => json(200, &list),
                    None => error(&StatusError::page_not_found()),
                },
                _ => error(&StatusError::page_not_found()),
            }
        }
        Route::OpenApiV2 if accept.contains("protobuf") => crate::http_util::full(
            200,
            discovery::OPENAPI_V2_PROTOBUF,
            discovery::openapi_v2_protobuf(),
        ),
        Route::OpenApiV2 => json(200, &discovery::openapi_v2()),
        Route::OpenApiIndex => json(200, discovery::openapi_index()),
        Route::OpenApiGroupVersion(g, v) => json(200, &discovery::openapi_group_version(&g, &v)),
        _ => error(&StatusError::page_not_found()),
    }
}
