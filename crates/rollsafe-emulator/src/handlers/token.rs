//! TokenRequest (`POST …/serviceaccounts/<name>/token`, what `kubectl create token` sends): a
//! new bearer token that authenticates as the ServiceAccount.

use hyper::Response;
use serde_json::{Value, json};

use crate::handlers::{Call, decode_body};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::identity::Identity;
use rollsafe_emulator_types::resources::def;
use rollsafe_emulator_types::status::StatusError;
use rollsafe_emulator_types::util;

/// The real default lifetime of a requested token.
pub(crate) const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
/// The real server's shortest allowed lifetime.
pub(crate) const MIN_EXPIRATION_SECONDS: i64 = 600;

pub(crate) fn token_request(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let body = decode_body(c)?;
    let service_account = c
        .shared
        .store()
        .get(c.stored_res(), c.ns(), c.name())
        .cloned()
        .ok_or_else(|| StatusError::not_found(d, c.name()))?;
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let seconds = spec
        .get("expirationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if seconds < MIN_EXPIRATION_SECONDS {
        // The invalid object is the TokenRequest, named as the request names it (usually not:
        // `""`), not the ServiceAccount.
        let name = body
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut details = json!({"group": "authentication.k8s.io", "kind": "TokenRequest",
            "causes": [{"reason": "FieldValueInvalid",
                        "message": format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
                        "field": "spec.expirationSeconds"}]});
        if !name.is_empty() {
            details["name"] = json!(name);
        }
        return Err(StatusError::new(
            422,
            "Invalid",
            &format!(
                "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
            Some(details),
        ));
    }
    let audiences = Some(rollsafe_emulator_types::util::strings(
        spec.get("audiences"),
    ))
    .filter(|a| !a.is_empty())
    .unwrap_or_else(|| vec![rollsafe_emulator_registry::identity::API_AUDIENCE.to_owned()]);
    let token = format!("emulator-sa.{}", util::token());
    let user = format!("system:serviceaccount:{}:{}", c.ns(), c.name());
    let groups = [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{}", c.ns()),
    ];
    let group_refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    c.shared
        .identities
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .insert(
            token.clone(),
            Identity::new(user, token.clone(), &group_refs).with_audiences(audiences.clone()),
        );
    let expires = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::from_secs(seconds))
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    let mut answer = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": c.name(),
            "namespace": c.ns(),
            "creationTimestamp": null,
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": seconds,
            "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null),
        },
        "status": {"token": token, "expirationTimestamp": expires},
    });
    if let Some(uid) = service_account.pointer("/metadata/uid") {
        answer["metadata"]["uid"] = uid.clone();
    }
    Ok(json(201, &answer))
}
