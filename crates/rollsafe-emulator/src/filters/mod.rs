//! The request pipeline, in the real server's order: authentication, impersonation, request
//! info (what the URL addresses), authorization, then the emulator's fault injection, then the
//! handler of the verb. Each filter has its own module.

pub(crate) mod authentication;
pub(crate) mod authorization;
pub(crate) mod fault_injection;
pub(crate) mod impersonation;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, USER_AGENT};
use hyper::body::Incoming;
use hyper::{Request, Response};

use crate::faults::FaultAction;
use crate::handlers::{self, Call};
use crate::http_util::{error, read_body};
use crate::observe::{MAX_LOGGED_BODY, RequestLogEntry};
use crate::state::{Body, Shared};
use rollsafe_emulator_types::query::Query;
use rollsafe_emulator_types::route::{self, Route, Verb};
use rollsafe_emulator_types::status::StatusError;

/// What to do with a request.
pub(crate) enum Outcome {
    /// Send this response.
    Respond(Response<Body>),
    /// Close the connection without a response.
    Drop,
}

fn header(headers: &HeaderMap, name: impl http::header::AsHeaderName) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// Serves one API request and records it in the request log (also when the client hangs up
/// before the answer: the log entry is stored when this future completes or is dropped).
pub(crate) async fn serve(req: Request<Incoming>, shared: &Arc<Shared>) -> Outcome {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let mut pending = shared.begin_entry(parts.method.as_str(), &path, &raw_query);
    pending.entry.content_type = header(&parts.headers, CONTENT_TYPE);
    pending.entry.accept = header(&parts.headers, ACCEPT);
    pending.entry.user_agent = header(&parts.headers, USER_AGENT);
    let outcome = serve_inner(&parts, body, shared, &mut pending.entry).await;
    let status = match &outcome {
        Outcome::Respond(r) => r.status().as_u16(),
        Outcome::Drop => 0,
    };
    pending.set_status(status);
    tracing::debug!(
        method = %pending.entry.method, path = %pending.entry.path, status,
        user = ?pending.entry.user, "request"
    );
    outcome
}

fn respond(e: StatusError) -> Outcome {
    Outcome::Respond(error(&e))
}

async fn serve_inner(
    parts: &http::request::Parts,
    body: Incoming,
    shared: &Arc<Shared>,
    entry: &mut RequestLogEntry,
) -> Outcome {
    let query = Query::parse(&entry.query);
    let requester = match authentication::authenticate(&parts.headers, shared) {
        Ok(u) => u,
        Err(e) => return respond(e),
    };
    entry.user = Some(requester.name.clone());
    entry.groups = requester.groups.clone();
    let user = match impersonation::impersonate(&parts.headers, shared, requester, entry) {
        Ok(u) => u,
        Err(e) => return respond(e),
    };
    let info = match route::parse(&parts.method, &entry.path, &query) {
        // A custom resource no CRD of this emulator defines is as unknown as any other path.
        Route::Resource(info)
            if rollsafe_emulator_types::resources::custom::is_custom(info.res)
                && !shared.store().serves(info.res) =>
        {
            return respond(StatusError::page_not_found());
        }
        Route::Resource(info) => info,
        Route::NotFound if entry.path.starts_with("/api/v1/") => {
            return respond(StatusError::resource_not_found());
        }
        Route::NotFound => return respond(StatusError::page_not_found()),
        Route::MethodNotAllowed(_) => return respond(StatusError::method_not_routed()),
        other => {
            return Outcome::Respond(handlers::nonresource::non_resource(
                other,
                &parts.method,
                &entry.path,
                &header(&parts.headers, ACCEPT).unwrap_or_default(),
                shared,
                &user,
            ));
        }
    };
    let ns = info.namespace.clone().unwrap_or_default();
    let name = info.name.clone().unwrap_or_default();
    let full_resource = info.full_resource();
    entry.verb = Some(info.verb.to_string());
    entry.resource = Some(full_resource.clone());
    entry.namespace = info.namespace.clone();
    entry.name = info.name.clone();

    let content_length = header(&parts.headers, CONTENT_LENGTH).and_then(|v| v.parse().ok());
    let body = match read_body(body, content_length).await {
        Ok(b) => b,
        Err(e) => return respond(e),
    };
    if !body.is_empty() {
        let cut = &body[..body.len().min(MAX_LOGGED_BODY)];
        match std::str::from_utf8(cut) {
            Ok(text) => entry.body = Some(text.to_owned()),
            Err(_) => {
                entry.body_base64 = Some(base64::engine::general_purpose::STANDARD.encode(cut));
            }
        }
    }

    if let Err(e) = authorization::authorize(shared, &user, &info) {
        return respond(e);
    }

    let fired = shared
        .faults()
        .hit(info.verb.as_str(), &full_resource, &ns, &name, &user.name);
    entry.faults = fired.iter().map(|f| f.fault.action.describe()).collect();
    let _in_flight = shared.inflight.enter(info.verb.as_str(), &full_resource);
    let mut corruption = None;
    let mut drop_after = false;
    let mut failing_revision = false;
    let mut stalled_watch = None;
    for fired in fired {
        let fault = &fired.fault;
        match &fault.action {
            FaultAction::Delay { millis } => {
                tokio::time::sleep(Duration::from_millis(*millis)).await;
            }
            FaultAction::DropBeforeApply => return Outcome::Drop,
            FaultAction::DropAfterApply => drop_after = true,
            FaultAction::Status { .. } => {
                return respond(fault_injection::status_fault(&fault.action));
            }
            FaultAction::List { corruption: c } => corruption = Some(*c),
            FaultAction::ConcurrentEdit { patch } => {
                let (tns, tname) = fault_injection::fault_target(fault, &ns, &name);
                fault_injection::concurrent_edit(shared, info.res, &tns, &tname, patch.as_ref());
            }
            FaultAction::DeleteAndRecreate => {
                let (tns, tname) = fault_injection::fault_target(fault, &ns, &name);
                fault_injection::delete_and_recreate(shared, info.res, &tns, &tname);
            }
            FaultAction::RolloutFails { reason, message } => {
                failing_revision = fault_injection::fail_next_revision(
                    shared, info.res, &ns, &name, reason, message,
                );
            }
            // A watch is answered, and its stream stalls; any other request is held here.
            FaultAction::Stall if info.verb == Verb::Watch => stalled_watch = fired.release,
            FaultAction::Stall => {
                if let Some(release) = fired.release {
                    tokio::select! {
                        () = release.wait() => {}
                        () = crate::state::shutdown_signal(shared.shutdown.clone()) => {
                            return Outcome::Drop;
                        }
                    }
                }
            }
        }
    }
    let call = Call {
        shared,
        info: &info,
        query: &query,
        content_type: header(&parts.headers, CONTENT_TYPE).unwrap_or_default(),
        accept: header(&parts.headers, ACCEPT).unwrap_or_default(),
        user_agent: header(&parts.headers, USER_AGENT).unwrap_or_default(),
        body: &body,
        user: &user,
        corruption,
        stall: stalled_watch,
    };
    let resp = handlers::dispatch(&call).unwrap_or_else(|e| error(&e));
    if failing_revision {
        // A request that changed no template marks nothing.
        shared.store().cancel_failing_revision(info.res, &ns, &name);
    }
    if drop_after {
        return Outcome::Drop;
    }
    Outcome::Respond(resp)
}
