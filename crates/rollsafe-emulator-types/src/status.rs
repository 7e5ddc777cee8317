//! `meta/v1 Status` error bodies, shaped exactly like the real API server's.

use serde_json::{Map, Value, json};

use crate::resources::ResourceDef;

/// The fixed sentence the real server puts in a 422 built by `NewGenericServerResponse`, which is
/// what every JSON-patch apply failure produces.
pub const GENERIC_422: &str = "the server rejected our request due to an error in our request";

/// The optimistic-lock message of the real registry.
pub const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// An API error: an HTTP status with a Status body (or, for a few cases, plain text).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusError {
    /// HTTP status code.
    pub code: u16,
    /// The Status body.
    pub body: Value,
    /// `Retry-After` header value in seconds.
    pub retry_after: Option<u32>,
    /// A plain-text body instead of the Status (flow-control 429s, unknown paths).
    pub plain_text: Option<String>,
}

impl std::fmt::Display for StatusError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.plain_text {
            Some(text) => write!(f, "{} {}", self.code, text),
            None => write!(
                f,
                "{} {}",
                self.code,
                self.body
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
            ),
        }
    }
}

impl std::error::Error for StatusError {}

/// The Status body for a failure.
pub fn status_body(code: u16, reason: &str, message: &str, details: Option<Value>) -> Value {
    let mut body = Map::new();
    body.insert("kind".into(), json!("Status"));
    body.insert("apiVersion".into(), json!("v1"));
    body.insert("metadata".into(), json!({}));
    body.insert("status".into(), json!("Failure"));
    body.insert("message".into(), json!(message));
    if !reason.is_empty() {
        body.insert("reason".into(), json!(reason));
    }
    if let Some(details) = details {
        body.insert("details".into(), details);
    }
    body.insert("code".into(), json!(code));
    Value::Object(body)
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Value::Object(d)
}

impl StatusError {
    /// An error with a Status body.
    pub fn new(code: u16, reason: &str, message: &str, details: Option<Value>) -> Self {
        Self {
            code,
            body: status_body(code, reason, message, details),
            retry_after: None,
            plain_text: None,
        }
    }

    /// A plain-text error body (what Go's `http.Error` writes).
    pub fn plain(code: u16, text: &str) -> Self {
        Self {
            code,
            body: Value::Null,
            retry_after: None,
            plain_text: Some(text.to_string()),
        }
    }

    /// Adds `details.retryAfterSeconds` and the `Retry-After` header.
    pub fn with_retry_after(mut self, seconds: u32) -> Self {
        if seconds > 0 {
            self.retry_after = Some(seconds);
            if let Some(body) = self.body.as_object_mut() {
                let details = body.entry("details").or_insert_with(|| json!({}));
                if let Some(d) = details.as_object_mut() {
                    d.insert("retryAfterSeconds".into(), json!(seconds));
                }
                // `code` stays last, as the real encoder orders fields.
                if let Some(code) = body.remove("code") {
                    body.insert("code".into(), code);
                }
            }
        }
        self
    }

    /// The `reason` of the body, or `""`.
    pub fn reason(&self) -> &str {
        self.body
            .get("reason")
            .and_then(Value::as_str)
            .unwrap_or("")
    }

    /// 400 BadRequest.
    pub fn bad_request(message: &str) -> Self {
        Self::new(400, "BadRequest", message, None)
    }

    /// 401 Unauthorized, as the authentication filter writes it.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized", None)
    }

    /// 403 Forbidden for a resource request: `<gr> "<name>" is forbidden: <msg>`.
    pub fn forbidden(group: &str, resource: &str, name: &str, msg: &str) -> Self {
        let gr = if group.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}.{group}")
        };
        let message = match (gr.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {msg}"),
            (false, true) => format!("{gr} is forbidden: {msg}"),
            (false, false) => format!("{gr} \"{name}\" is forbidden: {msg}"),
        };
        Self::new(
            403,
            "Forbidden",
            &message,
            Some(details(name, group, resource)),
        )
    }

    /// 404 NotFound for an object.
    pub fn not_found(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            &format!("{} \"{}\" not found", def.group_resource(), name),
            Some(details(name, def.group, def.plural)),
        )
    }

    /// 404 NotFound for a namespace that does not exist.
    pub fn namespace_not_found(namespace: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            &format!("namespaces \"{namespace}\" not found"),
            Some(details(namespace, "", "namespaces")),
        )
    }

    /// The plain-text `404 page not found` for unknown paths.
    pub fn page_not_found() -> Self {
        Self::plain(404, "404 page not found")
    }

    /// 404 for an unknown resource of a served group version (`/api/v1/nothing`): the API
    /// installer's JSON `Status`, not the mux's plain text.
    pub fn resource_not_found() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
            Some(Value::Object(Map::new())),
        )
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(def: &ResourceDef, method: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            &format!(
                "{} is not supported on resources of kind \"{}\"",
                method,
                def.group_resource()
            ),
            Some(details("", def.group, def.plural)),
        )
    }

    /// 409 AlreadyExists.
    pub fn already_exists(def: &ResourceDef, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            &format!("{} \"{}\" already exists", def.group_resource(), name),
            Some(details(name, def.group, def.plural)),
        )
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <gr> "<name>": <msg>`.
    pub fn conflict(def: &ResourceDef, name: &str, msg: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                def.group_resource(),
                name,
                msg
            ),
            Some(details(name, def.group, def.plural)),
        )
    }

    /// 410 Expired.
    pub fn expired(message: &str) -> Self {
        Self::new(410, "Expired", message, None)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(msg: &str) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            &format!("Request entity too large: {msg}"),
            None,
        )
    }

    /// 415 UnsupportedMediaType for a PATCH content type: the route refuses it before the
    /// patch handler runs, with the generic message and empty details (measured against
    /// kube-apiserver 1.37 by the differential suite).
    pub fn unsupported_patch(_def: &ResourceDef) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            "415: Unsupported Media Type",
            Some(Value::Object(Map::new())),
        )
    }

    /// 405 for a method the route of a resource does not have (`PUT` on a collection): the
    /// router's generic answer, with empty details.
    pub fn method_not_routed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            Some(Value::Object(Map::new())),
        )
    }

    /// 422 Invalid with causes: `<Kind.group> "<name>" is invalid: <field errors>`.
    pub fn invalid(def: &ResourceDef, name: &str, causes: &[FieldCause]) -> Self {
        let texts: Vec<String> = causes.iter().map(FieldCause::text).collect();
        let joined = if texts.len() == 1 {
            texts.join("")
        } else {
            format!("[{}]", texts.join(", "))
        };
        let mut d = Map::new();
        if !name.is_empty() {
            d.insert("name".into(), json!(name));
        }
        if !def.group.is_empty() {
            d.insert("group".into(), json!(def.group));
        }
        d.insert("kind".into(), json!(def.kind));
        d.insert(
            "causes".into(),
            Value::Array(
                causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message(), "field": c.field}))
                    .collect(),
            ),
        );
        Self::new(
            422,
            "Invalid",
            &format!("{} \"{}\" is invalid: {}", def.group_kind(), name, joined),
            Some(Value::Object(d)),
        )
    }

    /// The 422 every JSON-patch apply failure produces: generic message, empty details.
    pub fn json_patch_failed() -> Self {
        Self::new(422, "Invalid", GENERIC_422, Some(json!({})))
    }

    /// 500 InternalError.
    pub fn internal(msg: &str) -> Self {
        Self::new(
            500,
            "InternalError",
            &format!("Internal error occurred: {msg}"),
            Some(json!({"causes": [{"message": msg}]})),
        )
    }
}

/// One field error of an Invalid (422) response.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldCause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueTooLong`, `FieldValueForbidden`.
    pub reason: &'static str,
    /// Field path, e.g. `metadata.name`.
    pub field: String,
    /// The rendered value, for `Invalid value: <value>` messages.
    pub value: Option<String>,
    /// Detail text.
    pub detail: String,
}

impl FieldCause {
    /// `FieldValueRequired`.
    pub fn required(field: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueRequired",
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `FieldValueInvalid`.
    pub fn invalid(field: &str, value: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueInvalid",
            field: field.into(),
            value: Some(value.into()),
            detail: detail.into(),
        }
    }

    /// `FieldValueTypeInvalid`: `Invalid value: "<type>": <detail>` (a schema's type check).
    pub fn type_invalid(field: &str, actual_type: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueTypeInvalid",
            field: field.into(),
            value: Some(format!("{actual_type:?}")),
            detail: detail.into(),
        }
    }

    /// `FieldValueForbidden`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        Self {
            reason: "FieldValueForbidden",
            field: field.into(),
            value: None,
            detail: detail.into(),
        }
    }

    /// `FieldValueNotSupported`: `Unsupported value: <value>: supported values: <supported>`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        Self {
            reason: "FieldValueNotSupported",
            field: field.into(),
            value: Some(value.into()),
            detail: format!("supported values: {}", supported.join(", ")),
        }
    }

    /// `FieldValueTooLong`.
    pub fn too_long(field: &str, max: usize) -> Self {
        Self {
            reason: "FieldValueTooLong",
            field: field.into(),
            value: None,
            detail: format!("may not be more than {max} bytes"),
        }
    }

    /// Go's `field.Error.ErrorBody`: the type, the value for invalid values, and `: detail`
    /// only when there is a detail.
    fn message(&self) -> String {
        let head = match self.reason {
            "FieldValueRequired" => "Required value".to_string(),
            "FieldValueTooLong" => "Too long".to_string(),
            "FieldValueForbidden" => "Forbidden".to_string(),
            "FieldValueNotSupported" => format!(
                "Unsupported value: {}",
                self.value.as_deref().unwrap_or("\"\"")
            ),
            _ => format!("Invalid value: {}", self.value.as_deref().unwrap_or("\"\"")),
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }

    /// `field: message`, as the Invalid status joins it.
    pub fn text(&self) -> String {
        format!("{}: {}", self.field, self.message())
    }
}

/// The canonical reason for a status code, used for injected faults.
pub fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "",
    }
}

/// The real server's generic sentence for a status code (`NewGenericServerResponse`).
pub fn generic_message(code: u16) -> &'static str {
    match code {
        400 => "the server rejected our request for an unknown reason",
        401 => "the server has asked for the client to provide credentials",
        403 => "the server does not allow access to the requested resource",
        404 => "the server could not find the requested resource",
        405 => "the server does not allow this method on the requested resource",
        409 => "the server reported a conflict",
        410 => "the server has already been removed",
        413 => "the server rejected our request because it was too large",
        415 => "the server does not support this media type",
        422 => GENERIC_422,
        429 => "the server has received too many requests and has asked us to try again later",
        500 => "an error on the server has prevented the request from succeeding",
        503 => "the server is currently unable to handle the request",
        504 => {
            "the server was unable to return a response in the time allotted, but may still be processing the request"
        }
        _ => "an error on the server has prevented the request from succeeding",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{def, ids};

    #[test]
    fn not_found_is_shaped_like_the_real_one() {
        let e = StatusError::not_found(def(ids::DEPLOYMENTS), "web");
        assert_eq!(
            e.body.to_string(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"deployments.apps \"web\" not found","reason":"NotFound","details":{"name":"web","group":"apps","kind":"deployments"},"code":404}"#
        );
    }

    #[test]
    fn json_patch_failure_has_empty_details() {
        let e = StatusError::json_patch_failed();
        assert_eq!(
            e.body.to_string(),
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server rejected our request due to an error in our request","reason":"Invalid","details":{},"code":422}"#
        );
    }

    #[test]
    fn forbidden_names_the_resource() {
        let e = StatusError::forbidden(
            "apps",
            "deployments",
            "",
            "User \"bob\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"ns\"",
        );
        assert_eq!(
            e.body["message"],
            "deployments.apps is forbidden: User \"bob\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
        );
        assert_eq!(
            e.body["details"],
            json!({"group": "apps", "kind": "deployments"})
        );
    }

    #[test]
    fn retry_after_goes_into_details() {
        let e = StatusError::new(429, "TooManyRequests", "slow down", None).with_retry_after(3);
        assert_eq!(e.retry_after, Some(3));
        assert_eq!(e.body["details"]["retryAfterSeconds"], 3);
        assert!(e.body.to_string().ends_with(r#""code":429}"#));
    }
}
