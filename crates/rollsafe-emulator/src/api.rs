//! The Kubernetes API: authentication, impersonation, authorization, faults, and the verbs.

use std::convert::Infallible;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::HeaderMap;
use http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Method, Request, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::auth::{self, Attributes, UserInfo};
use crate::discovery;
use crate::faults::{Fault, FaultAction, ListCorruption, wrong_list_kind};
use crate::http_util::{error, json, read_body};
use crate::observe::{MAX_LOGGED_BODY, RequestLogEntry};
use crate::patch::{self, PatchKind};
use crate::query::{FieldSelector, LabelSelector, Query};
use crate::resources::{ResId, Storage, def, ids};
use crate::route::{self, ResourceRequest, Route};
use crate::server::{Body, Shared};
use crate::status::{self, ApiError, FieldCause};
use crate::store::{Event, EventType, Key, Preconditions, UpdateMode};

/// Server-side watch timeout when the client gives none (the real minimum request timeout).
pub const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);
/// The longest a watch stays open; a larger `timeoutSeconds` is cut to it (a deadline must
/// stay representable: `timeoutSeconds=18446744073709551615` once crashed the watch task).
pub const MAX_WATCH_TIMEOUT: Duration = Duration::from_secs(366 * 24 * 3600);
/// Lines buffered per watch before the writer waits for the client.
pub const WATCH_BUFFER: usize = 256;

/// What to do with a request.
pub enum Outcome {
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
pub async fn serve(req: Request<Incoming>, shared: &Arc<Shared>) -> Outcome {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or("").to_string();
    let mut pending = shared.begin_entry(parts.method.as_str(), &path, &raw_query);
    pending.entry.content_type = header(&parts.headers, CONTENT_TYPE);
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

fn respond(e: ApiError) -> Outcome {
    Outcome::Respond(error(&e))
}

async fn serve_inner(
    parts: &http::request::Parts,
    body: Incoming,
    shared: &Arc<Shared>,
    entry: &mut RequestLogEntry,
) -> Outcome {
    let query = Query::parse(&entry.query);
    let requester = match authenticate(&parts.headers, shared) {
        Ok(u) => u,
        Err(e) => return respond(e),
    };
    entry.user = Some(requester.name.clone());
    entry.groups = requester.groups.clone();
    let user = match impersonate(&parts.headers, shared, requester, entry) {
        Ok(u) => u,
        Err(e) => return respond(e),
    };
    let info = match route::parse(&parts.method, &entry.path, &query) {
        Route::Resource(info) => info,
        Route::NotFound => return respond(ApiError::page_not_found()),
        Route::MethodNotAllowed(res) => {
            return respond(ApiError::method_not_allowed(
                def(res),
                parts.method.as_str(),
            ));
        }
        other => {
            return Outcome::Respond(non_resource(
                other,
                &parts.method,
                &entry.path,
                shared,
                &user,
            ));
        }
    };
    let d = def(info.res);
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
    if info.verb == "patch" {
        let cut = body.len().min(MAX_LOGGED_BODY);
        entry.body = Some(String::from_utf8_lossy(&body[..cut]).into_owned());
    }

    let attrs = Attributes {
        verb: info.verb.to_string(),
        group: d.group.to_string(),
        resource: d.plural.to_string(),
        subresource: info.subresource.clone().unwrap_or_default(),
        namespace: if info.res == ids::NAMESPACES {
            name.clone()
        } else {
            ns.clone()
        },
        name: name.clone(),
        path: None,
    };
    if auth::authorize(&shared.store(), &user, &attrs).is_none() {
        return respond(ApiError::forbidden(
            d.group,
            d.plural,
            &name,
            &attrs.forbidden_message(&user.name),
        ));
    }

    let fired = shared.faults().hit(info.verb, &full_resource, &ns, &name);
    entry.faults = fired.iter().map(|f| f.action.describe()).collect();
    let _in_flight = shared.inflight.enter(info.verb, &full_resource);
    let mut corruption = None;
    let mut drop_after = false;
    for fault in &fired {
        match &fault.action {
            FaultAction::Delay { millis } => {
                tokio::time::sleep(Duration::from_millis(*millis)).await;
            }
            FaultAction::DropBeforeApply => return Outcome::Drop,
            FaultAction::DropAfterApply => drop_after = true,
            FaultAction::Status { .. } => return respond(status_fault(&fault.action)),
            FaultAction::List { corruption: c } => corruption = Some(*c),
            FaultAction::ConcurrentEdit { patch } => {
                let (tns, tname) = fault_target(fault, &ns, &name);
                concurrent_edit(shared, info.res, &tns, &tname, patch.as_ref());
            }
            FaultAction::DeleteAndRecreate => {
                let (tns, tname) = fault_target(fault, &ns, &name);
                delete_and_recreate(shared, info.res, &tns, &tname);
            }
        }
    }
    let call = Call {
        shared,
        info: &info,
        query: &query,
        content_type: header(&parts.headers, CONTENT_TYPE).unwrap_or_default(),
        body: &body,
        user: &user,
        corruption,
    };
    let resp = dispatch(&call).unwrap_or_else(|e| error(&e));
    if drop_after {
        return Outcome::Drop;
    }
    Outcome::Respond(resp)
}

fn fault_target(fault: &Fault, ns: &str, name: &str) -> (String, String) {
    let tns = if ns.is_empty() {
        fault.matcher.namespace.clone().unwrap_or_default()
    } else {
        ns.to_string()
    };
    let tname = if name.is_empty() {
        fault.matcher.name.clone().unwrap_or_default()
    } else {
        name.to_string()
    };
    (tns, tname)
}

fn status_fault(action: &FaultAction) -> ApiError {
    let FaultAction::Status {
        code,
        reason,
        message,
        retry_after_seconds,
        plain_text,
    } = action
    else {
        return ApiError::internal("not a status fault");
    };
    let e = if *plain_text {
        let default = if *code == 429 {
            "Too many requests, please try again later."
        } else {
            status::generic_message(*code)
        };
        ApiError::plain(*code, message.as_deref().unwrap_or(default))
    } else {
        ApiError::new(
            *code,
            reason.as_deref().unwrap_or(status::reason_for(*code)),
            message.as_deref().unwrap_or(status::generic_message(*code)),
            None,
        )
    };
    e.with_retry_after(retry_after_seconds.unwrap_or(0))
}

fn concurrent_edit(shared: &Shared, res: ResId, ns: &str, name: &str, patch: Option<&Value>) {
    let mut store = shared.store();
    let Some(current) = store.get(res, ns, name).cloned() else {
        tracing::warn!(ns, name, "concurrent-edit fault: no such object");
        return;
    };
    let n = shared
        .edit_counter
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        + 1;
    let patch = patch.cloned().unwrap_or_else(|| {
        json!({"metadata": {"annotations": {"emulator.rollsafe.dev/concurrent-edit": n.to_string()}}})
    });
    let mut edited = (*current).clone();
    json_patch::merge(&mut edited, &patch);
    if let Err(e) = store.update(res, ns, name, edited, UpdateMode::Force) {
        tracing::warn!(%e, "concurrent-edit fault failed");
    }
}

fn delete_and_recreate(shared: &Shared, res: ResId, ns: &str, name: &str) {
    let mut store = shared.store();
    let Some(current) = store.get(res, ns, name).cloned() else {
        tracing::warn!(ns, name, "delete-and-recreate fault: no such object");
        return;
    };
    if let Err(e) = store.delete(res, ns, name, &Preconditions::default()) {
        tracing::warn!(%e, "delete-and-recreate fault: delete failed");
        return;
    }
    let mut copy = (*current).clone();
    if let Some(meta) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation"] {
            meta.remove(field);
        }
    }
    if let Some(o) = copy.as_object_mut() {
        o.remove("status");
    }
    if let Err(e) = store.create(res, copy) {
        tracing::warn!(%e, "delete-and-recreate fault: create failed");
    }
}

fn authenticate(headers: &HeaderMap, shared: &Shared) -> Result<UserInfo, ApiError> {
    let Some(value) = headers.get(AUTHORIZATION) else {
        return Ok(UserInfo::anonymous());
    };
    let text = value.to_str().map_err(|_| ApiError::unauthorized())?;
    let token = match text.split_once(' ') {
        Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
        _ => return Err(ApiError::unauthorized()),
    };
    if token.is_empty() {
        return Err(ApiError::unauthorized());
    }
    shared
        .identity_for_token(token)
        .map(|i| UserInfo::authenticated(&i.name, &i.groups))
        .ok_or_else(ApiError::unauthorized)
}

/// The impersonation headers of a request, read strictly: a value that is not UTF-8, or a
/// header the real server would read only once given twice, is refused instead of skipped (a
/// skipped header would run the request as the impersonator).
#[derive(Debug, Default)]
struct ImpersonationHeaders {
    user: Option<String>,
    groups: Vec<String>,
    uid: Option<String>,
    extras: Vec<(String, String)>,
}

fn invalid_impersonation(header: &str, why: &str) -> ApiError {
    ApiError::bad_request(&format!("invalid impersonation header {header}: {why}"))
}

fn header_utf8<'h>(name: &str, value: &'h http::HeaderValue) -> Result<&'h str, ApiError> {
    std::str::from_utf8(value.as_bytes())
        .map_err(|_| invalid_impersonation(name, "the value is not valid UTF-8"))
}

/// One value of a single-valued header; `None` when absent or empty (the real filter treats an
/// empty value as not impersonating).
fn single_header(headers: &HeaderMap, name: &str) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid_impersonation(name, "it may be given once"));
    }
    let text = header_utf8(name, first)?;
    Ok((!text.is_empty()).then(|| text.to_string()))
}

impl ImpersonationHeaders {
    fn read(headers: &HeaderMap) -> Result<Self, ApiError> {
        let user = single_header(headers, "impersonate-user")?;
        let uid = single_header(headers, "impersonate-uid")?;
        let groups = headers
            .get_all("impersonate-group")
            .iter()
            .map(|v| header_utf8("Impersonate-Group", v).map(str::to_string))
            .collect::<Result<Vec<_>, _>>()?;
        let mut extras = Vec::new();
        for (name, value) in headers {
            let Some(key) = name.as_str().strip_prefix("impersonate-extra-") else {
                continue;
            };
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8()
                .map_err(|_| invalid_impersonation(name.as_str(), "the key is not valid UTF-8"))?
                .into_owned();
            extras.push((key, header_utf8(name.as_str(), value)?.to_string()));
        }
        Ok(Self {
            user,
            groups,
            uid,
            extras,
        })
    }
}

fn impersonate(
    headers: &HeaderMap,
    shared: &Shared,
    requester: UserInfo,
    entry: &mut RequestLogEntry,
) -> Result<UserInfo, ApiError> {
    let ImpersonationHeaders {
        user,
        groups,
        uid,
        extras,
    } = ImpersonationHeaders::read(headers)?;
    entry.impersonated_user = user.clone();
    entry.impersonated_groups = groups.clone();
    entry.impersonated_uid = uid.clone();
    let Some(user) = user else {
        if let Some(g) = groups.first() {
            return Err(ApiError::bad_request(&format!(
                "requested [{{Group  {g}  impersonate  groups}}] without impersonating a user"
            )));
        }
        if uid.is_some() || !extras.is_empty() {
            return Err(ApiError::bad_request(
                "requested [{UID / Extra  impersonate}] without impersonating a user",
            ));
        }
        return Ok(requester);
    };
    let store = shared.store();
    let check = |attrs: Attributes| -> Result<(), ApiError> {
        if auth::authorize(&store, &requester, &attrs).is_some() {
            Ok(())
        } else {
            Err(ApiError::forbidden(
                &attrs.group,
                &attrs.resource,
                &attrs.name,
                &attrs.forbidden_message(&requester.name),
            ))
        }
    };
    let impersonate = |group: &str, resource: &str, ns: &str, name: &str, sub: &str| Attributes {
        verb: "impersonate".into(),
        group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: None,
    };
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'))
        .map(|(ns, name)| (ns.to_string(), name.to_string()));
    match &service_account {
        Some((ns, name)) => check(impersonate("", "serviceaccounts", ns, name, ""))?,
        None => check(impersonate("", "users", "", &user, ""))?,
    }
    for g in &groups {
        check(impersonate("", "groups", "", g, ""))?;
    }
    if let Some(uid) = &uid {
        check(impersonate("authentication.k8s.io", "uids", "", uid, ""))?;
    }
    for (key, value) in &extras {
        check(impersonate(
            "authentication.k8s.io",
            "userextras",
            "",
            value,
            key,
        ))?;
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = &service_account
        && all_groups.is_empty()
    {
        all_groups.push("system:serviceaccounts".into());
        all_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    let implicit = if user == auth::ANONYMOUS_USER {
        auth::UNAUTHENTICATED_GROUP
    } else {
        auth::AUTHENTICATED_GROUP
    };
    if !all_groups.iter().any(|g| g == implicit) {
        all_groups.push(implicit.into());
    }
    Ok(UserInfo {
        name: user,
        groups: all_groups,
        uid,
    })
}

fn non_resource(
    route: Route,
    method: &Method,
    path: &str,
    shared: &Shared,
    user: &UserInfo,
) -> Response<Body> {
    let verb = method.as_str().to_ascii_lowercase();
    let attrs = Attributes {
        verb: verb.clone(),
        path: Some(path.to_string()),
        ..Attributes::default()
    };
    if auth::authorize(&shared.store(), user, &attrs).is_none() {
        return error(&ApiError::forbidden(
            "",
            "",
            "",
            &attrs.forbidden_message(&user.name),
        ));
    }
    if verb != "get" && verb != "head" {
        return error(&ApiError::new(
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
        Route::Groups => json(200, &discovery::groups()),
        Route::Group(g) => json(200, &discovery::group(&g)),
        Route::Resources(g, v) => json(200, &discovery::resource_list(&g, &v)),
        Route::OpenApiIndex => json(200, &discovery::openapi_index()),
        Route::OpenApiGroupVersion(g, v) => json(200, &discovery::openapi_group_version(&g, &v)),
        _ => error(&ApiError::page_not_found()),
    }
}

struct Call<'a> {
    shared: &'a Shared,
    info: &'a ResourceRequest,
    query: &'a Query,
    content_type: String,
    body: &'a [u8],
    user: &'a UserInfo,
    corruption: Option<ListCorruption>,
}

impl Call<'_> {
    fn ns(&self) -> &str {
        self.info.namespace.as_deref().unwrap_or("")
    }

    fn name(&self) -> &str {
        self.info.name.as_deref().unwrap_or("")
    }

    fn sub(&self) -> Option<&str> {
        self.info.subresource.as_deref()
    }
}

fn dispatch(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    if def(c.info.res).storage == Storage::Review {
        return review(c);
    }
    match c.info.verb {
        "get" => get(c),
        "list" => list(c),
        "watch" => watch(c),
        "create" => create(c),
        "update" => update(c),
        "patch" => patch_object(c),
        "delete" => delete(c),
        "deletecollection" => delete_collection(c),
        _ => Err(ApiError::method_not_allowed(def(c.info.res), c.info.verb)),
    }
}

fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let meta = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
            "creationTimestamp": meta.get("creationTimestamp"),
        },
        "spec": {"replicas": obj.pointer("/spec/replicas").cloned().unwrap_or(json!(1))},
        "status": {
            "replicas": obj.pointer("/status/replicas").cloned().unwrap_or(json!(0)),
            "selector": selector,
        }
    })
}

fn get(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let obj = c
        .shared
        .store()
        .get(c.info.res, c.ns(), c.name())
        .cloned()
        .ok_or_else(|| ApiError::not_found(d, c.name()))?;
    if c.sub() == Some("scale") {
        return Ok(json(200, &scale_of(&obj)));
    }
    Ok(json(200, &obj))
}

/// The continue token, in the real server's format: base64url (no padding) of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<next key>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Format version.
    pub v: String,
    /// The list's resourceVersion; -1 after an expiry (continue at the latest state).
    pub rv: i64,
    /// `<namespace>/<name>\0`: the key after the last one returned.
    pub start: String,
}

impl ContinueToken {
    /// A token continuing after `key` at `rv`.
    pub fn after(rv: i64, key: &Key) -> Self {
        Self {
            v: "meta.k8s.io/v1".into(),
            rv,
            start: format!("{}/{}\u{0}", key.1, key.2),
        }
    }

    /// The opaque string.
    pub fn encode(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Decodes a token, with the real server's 400 messages.
    pub fn decode(token: &str) -> Result<Self, ApiError> {
        let bad = |why: String| ApiError::bad_request(&format!("invalid continue token: {why}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|e| bad(format!("continue key is not valid: {e}")))?;
        let tok: Self = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("continue key is not valid: {e}")))?;
        if tok.v != "meta.k8s.io/v1" {
            return Err(bad(
                "continue key is not valid: server does not recognize this encoded version".into(),
            ));
        }
        if tok.rv == 0 {
            return Err(bad(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
                    .into(),
            ));
        }
        if tok.start.is_empty() {
            return Err(bad(
                "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
                    .into(),
            ));
        }
        Ok(tok)
    }

    /// The store key to continue after.
    pub fn after_key(&self, res: ResId) -> Key {
        let start = self.start.trim_end_matches('\u{0}');
        match start.split_once('/') {
            Some((ns, name)) => (res, ns.to_string(), name.to_string()),
            None => (res, String::new(), start.to_string()),
        }
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn expired_continue(start: Option<&str>) -> ApiError {
    let mut e = ApiError::expired(EXPIRED_CONTINUE);
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv: -1,
        start: start.unwrap_or("/\u{0}").to_string(),
    };
    if let Some(meta) = e.body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("continue".into(), json!(token.encode()));
    }
    e
}

fn list_options_invalid(causes: &[FieldCause]) -> ApiError {
    let texts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: Invalid value: {}", c.field, c.detail))
        .collect();
    ApiError::new(
        422,
        "Invalid",
        &format!(
            "ListOptions.meta.k8s.io \"\" is invalid: {}",
            texts.join(", ")
        ),
        Some(
            json!({"kind": "ListOptions", "group": "meta.k8s.io", "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.detail, "field": c.field})).collect::<Vec<_>>()}),
        ),
    )
}

fn selectors(q: &Query) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(&e))?;
    let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))
        .map_err(|e| ApiError::bad_request(&e))?;
    Ok((labels, fields))
}

fn write_item(buf: &mut Vec<u8>, obj: &Value, strip_type: bool, drop_meta: Option<&str>) {
    let Value::Object(map) = obj else {
        let _ = serde_json::to_writer(&mut *buf, obj);
        return;
    };
    buf.push(b'{');
    let mut first = true;
    for (k, v) in map {
        if strip_type && (k == "kind" || k == "apiVersion") {
            continue;
        }
        if !first {
            buf.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut *buf, k);
        buf.push(b':');
        match (k.as_str(), drop_meta, v) {
            ("metadata", Some(field), Value::Object(meta)) => {
                let mut meta = meta.clone();
                meta.remove(field);
                let _ = serde_json::to_writer(&mut *buf, &meta);
            }
            _ => {
                let _ = serde_json::to_writer(&mut *buf, v);
            }
        }
    }
    buf.push(b'}');
}

fn list(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let q = c.query;
    let limit = match q.non_empty("limit") {
        Some(s) => {
            let n: i64 = s
                .parse()
                .map_err(|_| ApiError::bad_request(&format!("invalid limit {s:?}")))?;
            usize::try_from(n).ok().filter(|n| *n > 0)
        }
        None => None,
    };
    let rv_param = q.non_empty("resourceVersion");
    let rv_match = q.non_empty("resourceVersionMatch");
    let token = q.non_empty("continue");
    if let Some(m) = rv_match {
        let mut causes = Vec::new();
        if rv_param.is_none() {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                "",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if token.is_some() {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                "",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if m != "Exact" && m != "NotOlderThan" {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                m,
                "supported values: \"Exact\", \"NotOlderThan\"",
            ));
        }
        if m == "Exact" && rv_param == Some("0") {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                m,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if !causes.is_empty() {
            return Err(list_options_invalid(&causes));
        }
    }
    if token.is_some() && rv_param.is_some_and(|r| r != "0") {
        return Err(ApiError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let (labels, fields) = selectors(q)?;
    let filtered = !labels.is_empty() || !fields.is_empty();
    let corruption = c.corruption;

    let store = c.shared.store();
    let (list_rv, after) = match token {
        Some(t) => {
            let tok = ContinueToken::decode(t)?;
            let expired = tok.rv > 0 && (tok.rv as u64) < store.token_floor();
            if expired || corruption == Some(ListCorruption::ExpiredContinue) {
                return Err(expired_continue(Some(&tok.start)));
            }
            let rv = if tok.rv < 0 {
                store.current_rv()
            } else {
                tok.rv as u64
            };
            (rv, Some(tok.after_key(c.info.res)))
        }
        None => {
            if corruption == Some(ListCorruption::ExpiredContinue) {
                return Err(expired_continue(None));
            }
            (store.current_rv(), None)
        }
    };
    let effective_limit = if rv_param == Some("0") && token.is_none() {
        None
    } else {
        limit
    };
    let want = match (corruption, effective_limit) {
        (Some(ListCorruption::OversizedPage), Some(l)) => Some(l + 1),
        (_, l) => l,
    };
    let mut items: Vec<Arc<Value>> = Vec::new();
    let mut last_key: Option<Key> = None;
    let mut more = false;
    let mut remaining = 0usize;
    let mut iter = store.range(c.info.res, c.info.namespace.as_deref(), after.as_ref());
    while let Some((k, v)) = iter.next() {
        if want.is_some_and(|w| items.len() >= w) {
            more = true;
            if !filtered {
                remaining = 1 + iter.by_ref().count();
            }
            break;
        }
        if labels.matches(v) && fields.matches(v) {
            items.push(v.clone());
            last_key = Some(k.clone());
        }
    }
    drop(iter);
    drop(store);

    let mut continue_token = if more {
        last_key
            .as_ref()
            .map(|k| ContinueToken::after(list_rv as i64, k).encode())
    } else {
        None
    };
    match corruption {
        Some(ListCorruption::ShortPage) if !items.is_empty() => {
            items.pop();
            if continue_token.is_none() {
                continue_token = last_key
                    .as_ref()
                    .map(|k| ContinueToken::after(list_rv as i64, k).encode());
            }
        }
        Some(ListCorruption::RepeatedContinue) => {
            if let Some(t) = token {
                continue_token = Some(t.to_string());
            }
        }
        Some(ListCorruption::MalformedContinue) => {
            continue_token = Some("bm90LWEtdG9rZW4".to_string());
        }
        _ => {}
    }

    let list_kind = d.list_kind();
    let kind = if corruption == Some(ListCorruption::WrongKind) {
        wrong_list_kind(&list_kind).to_string()
    } else {
        list_kind
    };
    let mut buf: Vec<u8> = Vec::with_capacity(256 + items.len() * 1024);
    let _ = write!(
        buf,
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{{\"resourceVersion\":\"{}\"",
        Value::String(kind),
        Value::String(d.api_version()),
        list_rv
    );
    if let Some(t) = &continue_token {
        let _ = write!(buf, ",\"continue\":{}", Value::String(t.clone()));
        if !filtered && more {
            let _ = write!(buf, ",\"remainingItemCount\":{remaining}");
        }
    }
    buf.extend_from_slice(b"},\"items\":[");
    let drop_field = match corruption {
        Some(ListCorruption::ItemWithoutUid) => Some("uid"),
        Some(ListCorruption::ItemWithoutName) => Some("name"),
        Some(ListCorruption::ItemWithoutResourceVersion) => Some("resourceVersion"),
        _ => None,
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        write_item(
            &mut buf,
            item,
            !d.custom,
            if i == 0 { drop_field } else { None },
        );
    }
    buf.extend_from_slice(b"]}");
    if corruption == Some(ListCorruption::TruncatedJson) {
        buf.truncate(buf.len() / 2);
    }
    Ok(crate::http_util::full(200, "application/json", buf))
}

struct WatchSpec {
    res: ResId,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmarks: bool,
    initial_end_bookmark: bool,
    timeout: Duration,
    bookmark_interval: Duration,
    api_version: String,
    kind: &'static str,
}

impl WatchSpec {
    fn matches(&self, e: &Event) -> bool {
        e.res == self.res
            && self.namespace.as_deref().is_none_or(|n| n == e.namespace)
            && self.labels.matches(&e.object)
            && self.fields.matches(&e.object)
    }

    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            &json!({"kind": self.kind, "apiVersion": self.api_version, "metadata": meta}),
        )
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut buf = Vec::with_capacity(512);
    let _ = write!(buf, "{{\"type\":\"{kind}\",\"object\":");
    let _ = serde_json::to_writer(&mut buf, object);
    buf.extend_from_slice(b"}\n");
    Bytes::from(buf)
}

fn event_line(e: &Event) -> Bytes {
    let kind = match e.kind {
        EventType::Added => "ADDED",
        EventType::Modified => "MODIFIED",
        EventType::Deleted => "DELETED",
    };
    line(kind, &e.object)
}

fn too_old_line(requested: u64, oldest: u64) -> Bytes {
    let status = status::status_body(
        410,
        "Expired",
        &format!("too old resource version: {requested} ({oldest})"),
        None,
    );
    line("ERROR", &status)
}

fn watch(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let q = c.query;
    let (labels, fields) = selectors(q)?;
    let bookmarks = q.flag("allowWatchBookmarks");
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true" || v == "1");
    if send_initial.is_some() && q.get("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(list_options_invalid(&[FieldCause::invalid(
            "sendInitialEvents",
            "",
            "sendInitialEvents is forbidden unless resourceVersionMatch is NotOlderThan",
        )]));
    }
    let timeout = q
        .non_empty("timeoutSeconds")
        .and_then(|s| s.parse::<u64>().ok())
        .filter(|s| *s > 0)
        .map(|s| Duration::from_secs(s).min(MAX_WATCH_TIMEOUT))
        .unwrap_or(DEFAULT_WATCH_TIMEOUT);
    let rv_param = q.non_empty("resourceVersion");
    let since = match rv_param {
        Some(r) if r != "0" => Some(
            r.parse::<u64>()
                .map_err(|_| ApiError::bad_request(&format!("invalid resource version: {r:?}")))?,
        ),
        _ => None,
    };
    let initial = send_initial.unwrap_or(since.is_none());
    let spec = WatchSpec {
        res: c.info.res,
        namespace: c.info.namespace.clone(),
        labels,
        fields,
        bookmarks,
        initial_end_bookmark: send_initial == Some(true) && bookmarks,
        timeout,
        bookmark_interval: c.shared.bookmark_interval,
        api_version: d.api_version(),
        kind: d.kind,
    };
    let store = c.shared.store();
    let mut initial_lines = Vec::new();
    let (rx, replay, too_old, start_rv) = if initial {
        for (_, obj) in store.range(c.info.res, c.info.namespace.as_deref(), None) {
            if spec.labels.matches(obj) && spec.fields.matches(obj) {
                initial_lines.push(line("ADDED", obj));
            }
        }
        (store.subscribe(), Vec::new(), None, store.current_rv())
    } else {
        let since = since.unwrap_or(0);
        match store.watch_from(since) {
            (rx, Some(replay)) => (rx, replay, None, store.current_rv().max(since)),
            (rx, None) => (
                rx,
                Vec::new(),
                Some((since, store.history_floor().saturating_sub(1))),
                store.current_rv(),
            ),
        }
    };
    drop(store);
    let (tx, mut body_rx) = mpsc::channel::<Bytes>(WATCH_BUFFER);
    let shutdown = c.shared.shutdown.clone();
    tokio::spawn(async move {
        run_watch(
            tx,
            rx,
            spec,
            initial_lines,
            replay,
            too_old,
            start_rv,
            shutdown,
        )
        .await;
    });
    let stream = futures::stream::poll_fn(move |cx| body_rx.poll_recv(cx)).map_ok_frames();
    let mut resp = Response::new(StreamBody::new(stream).boxed());
    resp.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

type FrameStream<S> = futures::stream::Map<S, fn(Bytes) -> Result<Frame<Bytes>, Infallible>>;

trait MapOkFrames: futures::Stream<Item = Bytes> + Sized {
    fn map_ok_frames(self) -> FrameStream<Self> {
        futures::StreamExt::map(self, |b| Ok(Frame::data(b)))
    }
}

impl<S: futures::Stream<Item = Bytes>> MapOkFrames for S {}

#[allow(clippy::too_many_arguments)]
async fn run_watch(
    tx: mpsc::Sender<Bytes>,
    mut rx: broadcast::Receiver<Arc<Event>>,
    spec: WatchSpec,
    initial: Vec<Bytes>,
    replay: Vec<Arc<Event>>,
    too_old: Option<(u64, u64)>,
    mut last_rv: u64,
    shutdown: tokio::sync::watch::Receiver<bool>,
) {
    if let Some((requested, oldest)) = too_old {
        let _ = tx.send(too_old_line(requested, oldest)).await;
        return;
    }
    for l in initial {
        if tx.send(l).await.is_err() {
            return;
        }
    }
    if spec.initial_end_bookmark && tx.send(spec.bookmark(last_rv, true)).await.is_err() {
        return;
    }
    for e in replay {
        last_rv = last_rv.max(e.rv);
        if spec.matches(&e) && tx.send(event_line(&e)).await.is_err() {
            return;
        }
    }
    let deadline = tokio::time::Instant::now() + spec.timeout;
    let mut ticker = tokio::time::interval(spec.bookmark_interval);
    ticker.tick().await;
    loop {
        tokio::select! {
            received = rx.recv() => match received {
                Ok(e) => {
                    if e.rv <= last_rv {
                        continue;
                    }
                    last_rv = e.rv;
                    if spec.matches(&e) && tx.send(event_line(&e)).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let _ = tx.send(too_old_line(last_rv, last_rv + 1)).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            },
            _ = ticker.tick(), if spec.bookmarks => {
                if tx.send(spec.bookmark(last_rv, false)).await.is_err() {
                    return;
                }
            }
            _ = tx.closed() => return,
            _ = tokio::time::sleep_until(deadline) => return,
            _ = crate::server::shutdown_signal(shutdown.clone()) => return,
        }
    }
}

fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(&format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(v)
}

fn check_type(obj: &Value, res: ResId) -> Result<(), ApiError> {
    let d = def(res);
    let expected = d.api_version();
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != expected
    {
        return Err(ApiError::bad_request(&format!(
            "the API version in the data ({v}) does not match the expected API version ({expected})"
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != d.kind
    {
        return Err(ApiError::bad_request(&format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            d.kind
        )));
    }
    Ok(())
}

fn set_namespace(obj: &mut Value, c: &Call<'_>) -> Result<(), ApiError> {
    if !def(c.info.res).namespaced {
        return Ok(());
    }
    let url_ns = c.ns().to_string();
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
    let Some(Value::Object(meta)) = meta else {
        return Err(ApiError::bad_request("metadata must be an object"));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != url_ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta.insert("namespace".into(), json!(url_ns));
            Ok(())
        }
    }
}

fn unsupported_body() -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        None,
    )
}

fn create(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    if crate::proto::is_protobuf(&c.content_type) {
        return Err(unsupported_body());
    }
    let mut obj = parse_object(c.body)?;
    check_type(&obj, c.info.res)?;
    set_namespace(&mut obj, c)?;
    let created = c.shared.store().create(c.info.res, obj)?;
    Ok(json(201, &created))
}

fn check_name(obj: &mut Value, c: &Call<'_>) -> Result<(), ApiError> {
    let url_name = c.name().to_string();
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
    let Some(Value::Object(meta)) = meta else {
        return Err(ApiError::bad_request("metadata must be an object"));
    };
    match meta.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != url_name => Err(ApiError::bad_request(&format!(
            "the name of the object ({n}) does not match the name on the URL ({url_name})"
        ))),
        _ => {
            meta.insert("name".into(), json!(url_name));
            Ok(())
        }
    }
}

fn update(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    if crate::proto::is_protobuf(&c.content_type) {
        return Err(unsupported_body());
    }
    let mut obj = parse_object(c.body)?;
    if c.sub() == Some("scale") {
        let replicas = obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
        let mut store = c.shared.store();
        let current = store
            .get(c.info.res, c.ns(), c.name())
            .cloned()
            .ok_or_else(|| ApiError::not_found(d, c.name()))?;
        let mut next = (*current).clone();
        next["spec"]["replicas"] = replicas;
        if let Some(rv) = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            next["metadata"]["resourceVersion"] = json!(rv);
        }
        let (stored, _) = store.update(c.info.res, c.ns(), c.name(), next, UpdateMode::Put)?;
        return Ok(json(200, &scale_of(&stored)));
    }
    check_type(&obj, c.info.res)?;
    check_name(&mut obj, c)?;
    set_namespace(&mut obj, c)?;
    let mode = if c.sub() == Some("status") {
        UpdateMode::Status
    } else {
        UpdateMode::Put
    };
    let (stored, _) = c
        .shared
        .store()
        .update(c.info.res, c.ns(), c.name(), obj, mode)?;
    Ok(json(200, &stored))
}

fn patch_object(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let kind = PatchKind::from_content_type(&c.content_type)
        .filter(|k| !(d.custom && *k == PatchKind::Strategic))
        .ok_or_else(|| ApiError::unsupported_patch(d))?;
    if kind == PatchKind::Apply && c.query.non_empty("fieldManager").is_none() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            Some(
                json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}),
            ),
        ));
    }
    if kind != PatchKind::Apply && c.query.get("force").is_some() {
        return Err(ApiError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
            Some(
                json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for non-apply patch", "field": "force"}]}),
            ),
        ));
    }
    let mut store = c.shared.store();
    let Some(current) = store.get(c.info.res, c.ns(), c.name()).cloned() else {
        if kind == PatchKind::Apply && c.sub().is_none() {
            let decoded = patch::decode(kind, c.body)?;
            let mut obj = patch::apply(&decoded, &json!({}))?;
            check_type(&obj, c.info.res)?;
            check_name(&mut obj, c)?;
            set_namespace(&mut obj, c)?;
            let created = store.create(c.info.res, obj)?;
            return Ok(json(201, &created));
        }
        return Err(ApiError::not_found(d, c.name()));
    };
    let decoded = patch::decode(kind, c.body)?;
    if c.sub() == Some("scale") {
        let scale = scale_of(&current);
        let patched = patch::apply(&decoded, &scale)?;
        let mut next = (*current).clone();
        next["spec"]["replicas"] = patched
            .pointer("/spec/replicas")
            .cloned()
            .unwrap_or(json!(0));
        next["metadata"]["resourceVersion"] = patched
            .pointer("/metadata/resourceVersion")
            .cloned()
            .unwrap_or(Value::Null);
        let (stored, _) = store.update(c.info.res, c.ns(), c.name(), next, UpdateMode::Patch)?;
        return Ok(json(200, &scale_of(&stored)));
    }
    let mut patched = patch::apply(&decoded, &current)?;
    let name_now = patched
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name_now != c.name() {
        return Err(ApiError::bad_request(&format!(
            "the name of the object ({name_now}) does not match the name on the URL ({})",
            c.name()
        )));
    }
    check_type(&patched, c.info.res)?;
    if def(c.info.res).namespaced {
        set_namespace(&mut patched, c)?;
    }
    let mode = if c.sub() == Some("status") {
        UpdateMode::Status
    } else {
        UpdateMode::Patch
    };
    let (stored, _) = store.update(c.info.res, c.ns(), c.name(), patched, mode)?;
    Ok(json(200, &stored))
}

fn delete(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let opts: Value = if c.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(c.body)
            .map_err(|e| ApiError::bad_request(&format!("error decoding DeleteOptions: {e}")))?
    };
    let pre = Preconditions {
        uid: opts
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string),
        resource_version: opts
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    let deleted = c
        .shared
        .store()
        .delete(c.info.res, c.ns(), c.name(), &pre)?;
    if c.info.res == ids::NAMESPACES {
        let mut obj = (*deleted).clone();
        obj["status"] = json!({"phase": "Terminating"});
        return Ok(json(200, &obj));
    }
    let mut details = Map::new();
    details.insert("name".into(), json!(c.name()));
    if !d.group.is_empty() {
        details.insert("group".into(), json!(d.group));
    }
    details.insert("kind".into(), json!(d.plural));
    if let Some(uid) = deleted.pointer("/metadata/uid") {
        details.insert("uid".into(), uid.clone());
    }
    Ok(json(
        200,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
    ))
}

fn delete_collection(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let (labels, fields) = selectors(c.query)?;
    let mut store = c.shared.store();
    let keys: Vec<Key> = store
        .range(c.info.res, c.info.namespace.as_deref(), None)
        .filter(|(_, v)| labels.matches(v) && fields.matches(v))
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for (res, ns, name) in keys {
        if let Ok(obj) = store.delete(res, &ns, &name, &Preconditions::default()) {
            items.push((*obj).clone());
        }
    }
    let rv = store.current_rv();
    Ok(json(
        200,
        &json!({"kind": d.list_kind(), "apiVersion": d.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}

fn review(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    let d = def(c.info.res);
    let mut obj = if crate::proto::is_protobuf(&c.content_type) {
        crate::proto::decode_access_review(c.body)
            .filter(|_| c.info.res != ids::TOKENREVIEWS)
            .ok_or_else(unsupported_body)?
    } else {
        parse_object(c.body)?
    };
    check_type(&obj, c.info.res)?;
    let status = match c.info.res {
        ids::TOKENREVIEWS => {
            let token = obj
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or("");
            match c.shared.identity_for_token(token) {
                Some(i) => {
                    let u = UserInfo::authenticated(&i.name, &i.groups);
                    json!({"authenticated": true, "user": {"username": u.name, "groups": u.groups}})
                }
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            }
        }
        ids::SELFSUBJECTREVIEWS => {
            let mut info = json!({"username": c.user.name, "groups": c.user.groups});
            if let Some(uid) = &c.user.uid {
                info["uid"] = json!(uid);
            }
            json!({"userInfo": info})
        }
        ids::SELFSUBJECTACCESSREVIEWS | ids::SUBJECTACCESSREVIEWS => {
            let subject = if c.info.res == ids::SELFSUBJECTACCESSREVIEWS {
                c.user.clone()
            } else {
                UserInfo {
                    name: obj
                        .pointer("/spec/user")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    groups: obj
                        .pointer("/spec/groups")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default(),
                    uid: None,
                }
            };
            let attrs = if let Some(r) = obj.pointer("/spec/resourceAttributes") {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                Attributes {
                    verb: s("verb"),
                    group: s("group"),
                    resource: s("resource"),
                    subresource: s("subresource"),
                    namespace: s("namespace"),
                    name: s("name"),
                    path: None,
                }
            } else if let Some(r) = obj.pointer("/spec/nonResourceAttributes") {
                let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                Attributes {
                    verb: s("verb"),
                    path: Some(s("path")),
                    ..Attributes::default()
                }
            } else {
                return Err(ApiError::invalid(
                    d,
                    "",
                    &[FieldCause::invalid(
                        "spec.resourceAttributes",
                        "null",
                        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    )],
                ));
            };
            match auth::authorize(&c.shared.store(), &subject, &attrs) {
                Some(reason) if reason.is_empty() => json!({"allowed": true}),
                Some(reason) => json!({"allowed": true, "reason": reason}),
                None => json!({"allowed": false}),
            }
        }
        _ => return Err(ApiError::method_not_allowed(d, "POST")),
    };
    if let Some(o) = obj.as_object_mut() {
        o.insert("apiVersion".into(), json!(d.api_version()));
        o.insert("kind".into(), json!(d.kind));
        o.entry("metadata").or_insert_with(|| json!({}));
        o.insert("status".into(), status);
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.entry("creationTimestamp").or_insert(Value::Null);
    }
    Ok(json(201, &obj))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let key: Key = (ids::DEPLOYMENTS, "ns".into(), "web".into());
        let t = ContinueToken::after(42, &key);
        let decoded = ContinueToken::decode(&t.encode());
        assert_eq!(decoded.as_ref().ok(), Some(&t));
        assert_eq!(t.after_key(ids::DEPLOYMENTS), key);
    }

    #[test]
    fn malformed_tokens_are_400() {
        for bad in ["!!!", "bm90LWEtdG9rZW4", "e30"] {
            let e = ContinueToken::decode(bad);
            assert_eq!(e.err().map(|e| e.code), Some(400), "{bad}");
        }
    }
}
