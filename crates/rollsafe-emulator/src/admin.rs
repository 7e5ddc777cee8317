//! The admin API under `/_emulator/`: unauthenticated, loopback clients only.

use std::net::SocketAddr;
use std::sync::Arc;

use http::Method;
use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::{Value, json};

use crate::faults::Fault;
use crate::http_util::{error, json, read_body};
use crate::state::{ADMIN_PREFIX, Body, Shared};
use rollsafe_emulator_registry::controllers::rollout_sim::RolloutPaceChange;
use rollsafe_emulator_registry::identity::Identity;
use rollsafe_emulator_types::query::Query;
use rollsafe_emulator_types::resources;
use rollsafe_emulator_types::status::StatusError;

/// Serves one admin request.
pub(crate) async fn handle(
    req: Request<Incoming>,
    shared: &Arc<Shared>,
    peer: SocketAddr,
) -> Response<Body> {
    if !peer.ip().is_loopback() {
        return error(&StatusError::plain(
            403,
            "the admin API only answers loopback clients",
        ));
    }
    let (parts, body) = req.into_parts();
    if let Err(e) = check_browser_safety(&parts, shared.addr.port()) {
        return error(&e);
    }
    let path = parts
        .uri
        .path()
        .strip_prefix(ADMIN_PREFIX)
        .unwrap_or("")
        .trim_end_matches('/')
        .to_string();
    let query = Query::parse(parts.uri.query().unwrap_or(""));
    let content_length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let body = match read_body(body, content_length).await {
        Ok(b) => b,
        Err(e) => return error(&e),
    };
    match route(&parts.method, &path, &query, &body, shared) {
        Ok(resp) => resp,
        Err(e) => error(&e),
    }
}

/// Whether a `Host` value (or an `Origin`'s authority) names a loopback address: `localhost`,
/// `127.0.0.0/8` or `[::1]`, with or without a port.
fn is_loopback_authority(authority: &str) -> Option<(bool, Option<u16>)> {
    let authority: http::uri::Authority = authority.parse().ok()?;
    let host = authority.host();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    Some((loopback, authority.port_u16()))
}

/// The admin API is unauthenticated, so it must not be reachable from a web page the user
/// happens to visit: only loopback `Host` values (a DNS-rebinding page carries its own host
/// name), no foreign `Origin` (a cross-site request carries the page's), and a JSON body on
/// every state-changing request (a cross-site form or `text/plain` request cannot send one
/// without a CORS preflight, which this API never grants).
fn check_browser_safety(parts: &http::request::Parts, port: u16) -> Result<(), StatusError> {
    let host = parts
        .uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| {
            parts
                .headers
                .get(http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        });
    let host_ok = host
        .as_deref()
        .and_then(is_loopback_authority)
        .is_some_and(|(loopback, _)| loopback);
    if !host_ok {
        return Err(StatusError::new(
            403,
            "Forbidden",
            "the admin API answers requests addressed to a loopback host only",
            None,
        ));
    }
    for origin in parts.headers.get_all(http::header::ORIGIN) {
        let same_site = origin
            .to_str()
            .ok()
            .and_then(|o| {
                o.strip_prefix("http://")
                    .or_else(|| o.strip_prefix("https://"))
            })
            .and_then(is_loopback_authority)
            .is_some_and(|(loopback, p)| loopback && p == Some(port));
        if !same_site {
            return Err(StatusError::new(
                403,
                "Forbidden",
                "the admin API refuses cross-origin requests",
                None,
            ));
        }
    }
    let reads_only = matches!(parts.method, Method::GET | Method::HEAD | Method::OPTIONS);
    let json_body = parts
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !reads_only && !json_body {
        return Err(StatusError::new(
            415,
            "UnsupportedMediaType",
            "state-changing admin API requests must have Content-Type: application/json",
            None,
        ));
    }
    Ok(())
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, StatusError> {
    serde_json::from_slice(body)
        .map_err(|e| StatusError::bad_request(&format!("invalid JSON body: {e}")))
}

fn ok() -> Response<Body> {
    json(200, &json!({"ok": true}))
}

fn object_address(q: &Query) -> Result<(resources::ResId, String, String), StatusError> {
    let resource = q
        .non_empty("resource")
        .ok_or_else(|| StatusError::bad_request("missing ?resource="))?;
    let res = resources::find_plural(resource)
        .ok_or_else(|| StatusError::bad_request(&format!("unknown resource {resource:?}")))?;
    let name = q
        .non_empty("name")
        .ok_or_else(|| StatusError::bad_request("missing ?name="))?;
    let ns = if resources::def(res).namespaced {
        q.non_empty("namespace").unwrap_or("default").to_string()
    } else {
        String::new()
    };
    Ok((res, ns, name.to_string()))
}

fn route(
    method: &Method,
    path: &str,
    q: &Query,
    body: &[u8],
    shared: &Arc<Shared>,
) -> Result<Response<Body>, StatusError> {
    let handle = crate::handle::Handle {
        shared: shared.clone(),
    };
    match (method.as_str(), path) {
        ("GET", "" | "/health") => Ok(ok()),
        ("GET", "/info") => Ok(json(
            200,
            &json!({
                "url": format!("http://{}", shared.addr),
                "adminToken": shared.admin_token,
                "identities": handle.identity_names(),
                "resourceVersion": shared.store().current_rv().to_string(),
                "objects": shared.store().object_count(),
            }),
        )),
        ("GET", "/faults") => Ok(json(
            200,
            &serde_json::to_value(handle.faults()).unwrap_or_default(),
        )),
        ("POST", "/faults") => {
            let fault: Fault = parse(body)?;
            Ok(json(200, &json!({"id": handle.add_fault(fault)})))
        }
        ("DELETE", "/faults") => {
            handle.clear_faults();
            Ok(ok())
        }
        ("DELETE", p) if p.starts_with("/faults/") => {
            let id: u64 = p["/faults/".len()..]
                .parse()
                .map_err(|_| StatusError::bad_request("fault ids are numbers"))?;
            if handle.remove_fault(id) {
                Ok(ok())
            } else {
                Err(StatusError::plain(404, "no such fault"))
            }
        }
        ("GET", "/requests") => {
            let since: u64 = q
                .non_empty("since")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let entries: Vec<_> = handle
                .requests()
                .into_iter()
                .filter(|e| e.seq > since)
                .collect();
            Ok(json(
                200,
                &serde_json::to_value(entries).unwrap_or_default(),
            ))
        }
        ("DELETE", "/requests") => {
            handle.clear_requests();
            Ok(ok())
        }
        ("GET", "/inflight") => Ok(json(
            200,
            &serde_json::to_value(handle.in_flight()).unwrap_or_default(),
        )),
        ("DELETE", "/inflight") => {
            handle.reset_in_flight();
            Ok(ok())
        }
        ("GET", "/rollouts") => Ok(json(
            200,
            &serde_json::to_value(handle.rollouts()).unwrap_or_default(),
        )),
        ("DELETE", "/rollouts") => {
            handle.clear_rollouts();
            Ok(ok())
        }
        ("GET", "/settings") => Ok(json(
            200,
            &serde_json::to_value(handle.settings()).unwrap_or_default(),
        )),
        ("POST", "/settings") => {
            let change: RolloutPaceChange = parse(body)?;
            let settings = handle
                .change_settings(change)
                .map_err(|e| StatusError::bad_request(&e.to_string()))?;
            Ok(json(
                200,
                &serde_json::to_value(settings).unwrap_or_default(),
            ))
        }
        ("POST", "/reset") => {
            handle
                .reset()
                .map_err(|e| StatusError::internal(&e.to_string()))?;
            Ok(ok())
        }
        ("POST", "/expire-continue-tokens") => {
            handle.expire_continue_tokens();
            Ok(ok())
        }
        ("POST", "/compact") => {
            handle.compact();
            Ok(ok())
        }
        ("POST", "/identities") => {
            let identity: Identity = parse(body)?;
            handle
                .add_identity(identity)
                .map_err(|e| StatusError::bad_request(&e.to_string()))?;
            Ok(ok())
        }
        ("GET", "/objects") => {
            let (res, ns, name) = object_address(q)?;
            let ns_opt = (!ns.is_empty()).then_some(ns.as_str());
            handle
                .get_object(resources::def(res).plural, ns_opt, &name)
                .map(|o| json(200, &o))
                .ok_or_else(|| StatusError::not_found(resources::def(res), &name))
        }
        ("PUT" | "POST", "/objects") => {
            let value: Value = parse(body)?;
            let objects: Vec<Value> = match value {
                Value::Array(items) => items,
                Value::Object(ref o) if o.get("items").is_some_and(Value::is_array) => o
                    .get("items")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                other => vec![other],
            };
            let mut stored = Vec::new();
            for obj in objects {
                stored.push(handle.put_object(obj).map_err(|e| match e {
                    crate::error::EmulatorError::Api(api) => *api,
                    other => StatusError::bad_request(&other.to_string()),
                })?);
            }
            Ok(json(200, &Value::Array(stored)))
        }
        ("DELETE", "/objects") => {
            let (res, ns, name) = object_address(q)?;
            let ns_opt = (!ns.is_empty()).then_some(ns.as_str());
            handle
                .delete_object(resources::def(res).plural, ns_opt, &name)
                .map_err(|e| match e {
                    crate::error::EmulatorError::Api(api) => *api,
                    other => StatusError::bad_request(&other.to_string()),
                })?;
            Ok(ok())
        }
        _ => Err(StatusError::plain(404, "404 page not found")),
    }
}
