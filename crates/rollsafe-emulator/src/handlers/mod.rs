//! One handler per verb over the registry store (the real server's `endpoints/handlers`), plus
//! what they share: the request scope, body decoding and the checks of an object against its URL.

pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod eviction;
pub(crate) mod get;
pub(crate) mod list;
pub(crate) mod metadata;
pub(crate) mod nonresource;
pub(crate) mod patch;
pub(crate) mod review;
pub(crate) mod scale;
pub(crate) mod table;
pub(crate) mod token;
pub(crate) mod update;
pub(crate) mod watch;

use hyper::Response;
use serde_json::{Value, json};

use crate::faults::{ListCorruption, Release};
use crate::state::{Body, Shared};
use rollsafe_emulator_registry::fieldmanager::Manager;
use rollsafe_emulator_registry::identity::UserInfo;
use rollsafe_emulator_registry::store::Write;
use rollsafe_emulator_types::decode::StrictField;
use rollsafe_emulator_types::query::{FieldSelector, LabelSelector, Query};
use rollsafe_emulator_types::resources::{ResId, Storage, def};
use rollsafe_emulator_types::route::{ResourceRequest, Verb};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// Everything a handler needs about one request (the real server's `RequestScope` plus the
/// request itself).
pub(crate) struct Call<'a> {
    /// Server state.
    pub shared: &'a Shared,
    /// What the URL addresses.
    pub info: &'a ResourceRequest,
    /// The query string.
    pub query: &'a Query,
    /// `Content-Type` of the body.
    pub content_type: String,
    /// `Accept` of the request (a Table is answered when it asks for one).
    pub accept: String,
    /// `User-Agent` of the request (the field manager when `fieldManager` is not given).
    pub user_agent: String,
    /// The request body.
    pub body: &'a [u8],
    /// Who the request acts as (after impersonation).
    pub user: &'a UserInfo,
    /// A list corruption a fault asked for.
    pub corruption: Option<ListCorruption>,
    /// Set when a stall fault fired on a watch: its stream delivers nothing until released.
    pub stall: Option<Release>,
}

/// `?dryRun=`: `All` (possibly repeated) or absent; anything else is the real server's 422 on
/// the verb's options kind.
pub(crate) fn write_mode(q: &Query, verb: Verb) -> Result<Write, StatusError> {
    let values = q.all("dryRun");
    if values.is_empty() {
        return Ok(Write::Commit);
    }
    if values.iter().all(|v| *v == "All") {
        return Ok(Write::DryRun);
    }
    let kind = match verb {
        Verb::Create => "CreateOptions",
        Verb::Update => "UpdateOptions",
        Verb::Patch => "PatchOptions",
        _ => "DeleteOptions",
    };
    let shown: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    let detail = format!(
        "Unsupported value: []string{{{}}}: supported values: \"All\"",
        shown.join(", ")
    );
    Err(StatusError::new(
        422,
        "Invalid",
        &format!("{kind}.meta.k8s.io \"\" is invalid: dryRun: {detail}"),
        Some(json!({"group": "meta.k8s.io", "kind": kind,
                    "causes": [{"reason": "FieldValueNotSupported", "message": detail, "field": "dryRun"}]})),
    ))
}

impl Call<'_> {
    /// The namespace of the URL, or `""`.
    pub(crate) fn ns(&self) -> &str {
        self.info.namespace.as_deref().unwrap_or("")
    }

    /// The object name of the URL, or `""`.
    pub(crate) fn name(&self) -> &str {
        self.info.name.as_deref().unwrap_or("")
    }

    /// The resource whose objects this request reads and writes: the request's own, or the
    /// stored one when it is a view (`events.k8s.io/v1` Events are core Events).
    pub(crate) fn stored_res(&self) -> ResId {
        rollsafe_emulator_types::resources::stored(self.info.res)
    }

    /// A stored object as this request's resource shows it.
    pub(crate) fn shown<'v>(&self, obj: &'v Value) -> std::borrow::Cow<'v, Value> {
        let d = def(self.info.res);
        match d.view {
            Some(view) => {
                let mut shown = (view.to_view)(obj);
                if d.custom {
                    // Another served version of a custom resource: conversion `None`.
                    shown["apiVersion"] = json!(d.api_version());
                }
                std::borrow::Cow::Owned(shown)
            }
            None => std::borrow::Cow::Borrowed(obj),
        }
    }

    /// An object in this request's form, in the stored form.
    pub(crate) fn to_stored(&self, obj: Value) -> Value {
        match def(self.info.res).view {
            Some(view) => (view.from_view)(&obj),
            None => obj,
        }
    }

    /// Whether the write is kept (`dryRun=All` keeps nothing); checked in [`dispatch`].
    pub(crate) fn write(&self) -> Write {
        write_mode(self.query, self.info.verb).unwrap_or(Write::Commit)
    }

    /// The subresource.
    pub(crate) fn sub(&self) -> Option<&str> {
        self.info.subresource.as_deref()
    }

    /// Who this write is recorded as in `managedFields`.
    pub(crate) fn manager(&self) -> Manager {
        Manager::from_request(
            self.query.non_empty("fieldManager"),
            &self.user_agent,
            self.sub(),
            def(self.info.res).api_version(),
        )
    }
}

pub(crate) fn dispatch(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    if matches!(
        c.info.verb,
        Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection
    ) {
        write_mode(c.query, c.info.verb)?;
    }
    if def(c.info.res).storage == Storage::Review {
        return review::review(c);
    }
    match c.info.verb {
        Verb::Get => get::get(c),
        Verb::List => list::list(c),
        Verb::Watch => watch::watch(c),
        Verb::Create => create::create(c),
        Verb::Update => update::update(c),
        Verb::Patch => patch::patch_object(c),
        Verb::Delete => delete::delete(c),
        Verb::DeleteCollection => delete::delete_collection(c),
    }
}

pub(crate) fn parse_object(body: &[u8]) -> Result<Value, StatusError> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        StatusError::bad_request(&format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    if !v.is_object() {
        return Err(StatusError::bad_request(
            "couldn't get version/kind; json parse error: the body is not a JSON object",
        ));
    }
    Ok(v)
}

pub(crate) fn check_type(obj: &Value, res: ResId) -> Result<(), StatusError> {
    let d = def(res);
    let expected = d.api_version();
    if let Some(v) = obj.get("apiVersion").and_then(Value::as_str)
        && !v.is_empty()
        && v != expected
    {
        return Err(StatusError::bad_request(&format!(
            "the API version in the data ({v}) does not match the expected API version ({expected})"
        )));
    }
    if let Some(k) = obj.get("kind").and_then(Value::as_str)
        && !k.is_empty()
        && k != d.kind
    {
        return Err(StatusError::bad_request(&format!(
            "the kind in the data ({k}) does not match the expected kind ({})",
            d.kind
        )));
    }
    Ok(())
}

pub(crate) fn set_namespace(obj: &mut Value, c: &Call<'_>) -> Result<(), StatusError> {
    if !def(c.info.res).namespaced {
        return Ok(());
    }
    let url_ns = c.ns().to_string();
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
    let Some(Value::Object(meta)) = meta else {
        return Err(StatusError::bad_request("metadata must be an object"));
    };
    match meta.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != url_ns => Err(StatusError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            meta.insert("namespace".into(), json!(url_ns));
            Ok(())
        }
    }
}

pub(crate) fn check_name(obj: &mut Value, c: &Call<'_>) -> Result<(), StatusError> {
    let url_name = c.name().to_string();
    let meta = obj
        .as_object_mut()
        .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
    let Some(Value::Object(meta)) = meta else {
        return Err(StatusError::bad_request("metadata must be an object"));
    };
    match meta.get("name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() && n != url_name => Err(StatusError::bad_request(&format!(
            "the name of the object ({n}) does not match the name on the URL ({url_name})"
        ))),
        _ => {
            meta.insert("name".into(), json!(url_name));
            Ok(())
        }
    }
}

/// The object of a create or update body: JSON (or YAML, which is JSON here), or Kubernetes
/// protobuf for the kinds [`rollsafe_emulator_types::proto::schema::KINDS`] lists.
pub(crate) fn decode_body(c: &Call<'_>) -> Result<Value, StatusError> {
    if rollsafe_emulator_types::proto::is_protobuf(&c.content_type) {
        return rollsafe_emulator_types::proto::decode_object(c.body).map_err(|e| {
            tracing::debug!(error = %e, code = e.code(), "protobuf body not decoded");
            unsupported_body()
        });
    }
    parse_object(c.body)
}

/// How a decoding failure is worded: create and update as the codec words it (`Deployment in
/// version "v1" cannot be handled as a Deployment: …`), patches bare, server-side apply as the
/// field manager's typed conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decoding {
    /// POST or PUT.
    Body,
    /// JSON, merge or strategic merge patch (the patched object is decoded).
    Patch,
    /// Server-side apply.
    Apply,
}

/// Decodes `obj` as its kind's Go type (`rollsafe_emulator_types::decode`). A value of the wrong type is the
/// decoder's 400. Fields the type does not declare are dropped; under `fieldValidation=Strict`
/// they are a 400 instead, under `Warn` (the default) the returned warnings name them. For a
/// patch, undeclared fields the stored object `current` already holds are not this request's.
///
/// A custom resource is checked against `schema`, its CRD's structural schema
/// ([`crd_schema_of`], or [`rollsafe_emulator_registry::store::Store::crd_schema`] under a held store), instead
/// of a Go type.
pub(crate) fn decode_typed(
    c: &Call<'_>,
    obj: &mut Value,
    current: Option<&Value>,
    schema: Option<&Value>,
    decoding: Decoding,
) -> Result<Vec<String>, StatusError> {
    let d = def(c.info.res);
    let validation = rollsafe_emulator_types::decode::FieldValidation::of(c.query, c.info.verb)?;
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(d.api_version()));
        map.insert("kind".into(), json!(d.kind));
    }
    let framed = |message: &str| match decoding {
        Decoding::Body => format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {message}",
            kind = d.kind,
            version = d.version
        ),
        Decoding::Patch => message.to_owned(),
        Decoding::Apply => format!(
            "failed to create typed patch object ({}/{}; {}/{}, Kind={}): {message}",
            c.ns(),
            c.name(),
            d.group,
            d.version,
            d.kind
        ),
    };
    let mut unknown = match schema {
        Some(schema) => rollsafe_emulator_types::crd_schema::undeclared_fields(schema, obj),
        None => rollsafe_emulator_types::decode::decode(c.info.res, obj)
            .map_err(|m| StatusError::bad_request(&framed(&m)))?,
    };
    if let Some(current) = current {
        unknown.retain(|path| !rollsafe_emulator_types::decode::has_path(current, path));
    }
    // A POST or PUT body is also checked for keys given twice; a patch's result and an applied
    // configuration are objects already, with none.
    let findings: Vec<StrictField> = if decoding == Decoding::Body
        && !rollsafe_emulator_types::proto::is_protobuf(&c.content_type)
    {
        rollsafe_emulator_types::decode::strict_fields(c.body, &unknown)
    } else {
        unknown.iter().cloned().map(StrictField::Unknown).collect()
    };
    rollsafe_emulator_types::decode::drop_fields(obj, &unknown);
    let warnings = match validation {
        _ if findings.is_empty() => Vec::new(),
        rollsafe_emulator_types::decode::FieldValidation::Ignore => Vec::new(),
        rollsafe_emulator_types::decode::FieldValidation::Warn => findings
            .iter()
            .map(rollsafe_emulator_types::decode::warning)
            .collect(),
        rollsafe_emulator_types::decode::FieldValidation::Strict => {
            return Err(StatusError::bad_request(&framed(&match decoding {
                Decoding::Apply => rollsafe_emulator_types::decode::apply_error(&unknown),
                _ => rollsafe_emulator_types::decode::strict_error(&findings),
            })));
        }
    };
    if let Some(schema) = schema {
        rollsafe_emulator_types::crd_schema::apply_defaults(schema, obj);
        let causes = rollsafe_emulator_types::crd_schema::validate(schema, obj);
        if !causes.is_empty() {
            let name = obj
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_else(|| c.name());
            return Err(StatusError::invalid(d, name, &causes));
        }
    }
    Ok(warnings)
}

/// The structural schema of a custom resource's CRD version (taking the store briefly); `None`
/// for a built-in resource.
pub(crate) fn crd_schema_of(c: &Call<'_>) -> Option<Value> {
    if rollsafe_emulator_types::resources::custom::is_custom(c.info.res) {
        c.shared.store().crd_schema(c.info.res)
    } else {
        None
    }
}

/// `response` with one `Warning` header per warning.
pub(crate) fn with_warnings(mut response: Response<Body>, warnings: &[String]) -> Response<Body> {
    for warning in warnings {
        if let Ok(value) = http::HeaderValue::from_str(warning) {
            response.headers_mut().append(http::header::WARNING, value);
        }
    }
    response
}

/// 415 for a body in a format the emulator does not read.
pub(crate) fn unsupported_body() -> StatusError {
    StatusError::new(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        None,
    )
}

pub(crate) fn selectors(c: &Call<'_>) -> Result<(LabelSelector, FieldSelector), StatusError> {
    let q = c.query;
    let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))
        .map_err(|e| StatusError::bad_request(&e))?;
    let extra = rollsafe_emulator_types::resources::field_labels(c.stored_res());
    let fields = FieldSelector::parse_for(q.get("fieldSelector").unwrap_or(""), extra)
        .map_err(|e| StatusError::bad_request(&e))?;
    Ok((labels, fields))
}

pub(crate) fn list_options_invalid(causes: &[FieldCause]) -> StatusError {
    let texts: Vec<String> = causes
        .iter()
        .map(|c| format!("{}: Invalid value: {}", c.field, c.detail))
        .collect();
    StatusError::new(
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
