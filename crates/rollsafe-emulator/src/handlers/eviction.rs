//! The eviction subresource (`POST …/pods/<name>/eviction`, a `policy/v1` Eviction — what
//! `kubectl drain` and kube's `Api::evict` send): the body decoded as the real codec decodes it,
//! then the pod evicted by the registry (`rollsafe_emulator_registry::eviction`), which asks
//! the PodDisruptionBudget that selects it. The answer is the real one: 201 with a `Success`
//! Status, or the registry's refusal (404, 409, 429 with a `DisruptionBudget` cause, 500 for
//! a pod two budgets select).

use hyper::Response;
use serde_json::{Value, json};

use crate::handlers::{Call, parse_object, unsupported_body, with_warnings};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::eviction::Eviction;
use rollsafe_emulator_registry::store::Preconditions;
use rollsafe_emulator_registry::store::Write;
use rollsafe_emulator_registry::store::deletion::Propagation;
use rollsafe_emulator_types::decode::{self, FieldValidation};
use rollsafe_emulator_types::resources::EVICTION_GO_TYPE;
use rollsafe_emulator_types::status::StatusError;

/// The API versions an Eviction body may name (`AcceptsGroupVersion`).
const ACCEPTED_VERSIONS: [&str; 2] = ["policy/v1", "policy/v1beta1"];

pub(crate) fn evict(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    if rollsafe_emulator_types::proto::is_protobuf(&c.content_type) {
        return Err(unsupported_body());
    }
    let body = parse_object(c.body)?;
    let text = |key: &str| body.get(key).and_then(Value::as_str).unwrap_or("");
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let version = api_version.rsplit('/').next().unwrap_or("");
    let version = if version.is_empty() { "v1" } else { version };
    if (!kind.is_empty() && kind != "Eviction")
        || (!api_version.is_empty() && !ACCEPTED_VERSIONS.contains(&api_version))
    {
        let shown = if kind.is_empty() { "Eviction" } else { kind };
        return Err(StatusError::bad_request(&format!(
            "{shown} in version {version:?} cannot be handled as a Eviction: converting ({version}.{shown}) to (policy.Eviction): unknown conversion"
        )));
    }
    let framed = |message: &str| {
        StatusError::bad_request(&format!(
            "Eviction in version {version:?} cannot be handled as a Eviction: {message}"
        ))
    };
    let unknown = EVICTION_GO_TYPE(&body).map_err(|m| framed(&m))?;
    let findings = decode::strict_fields(c.body, &unknown);
    let warnings: Vec<String> = match FieldValidation::of(c.query, c.info.verb)? {
        _ if findings.is_empty() => Vec::new(),
        FieldValidation::Ignore => Vec::new(),
        FieldValidation::Warn => findings.iter().map(decode::warning).collect(),
        FieldValidation::Strict => return Err(framed(&decode::strict_error(&findings))),
    };
    let named = body
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if named != c.name() {
        return Err(StatusError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let options = body
        .get("deleteOptions")
        .filter(|o| o.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let options_dry_run = options
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|x| x == "All"));
    let eviction = Eviction {
        preconditions: Preconditions {
            uid: options
                .pointer("/preconditions/uid")
                .and_then(Value::as_str)
                .map(str::to_owned),
            resource_version: options
                .pointer("/preconditions/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
        },
        propagation: Propagation::of(&options, None)?,
        write: if options_dry_run {
            Write::DryRun
        } else {
            c.write()
        },
    };
    let evicted = c.shared.store().evict(c.ns(), c.name(), &eviction);
    evicted.map_err(|refusal| {
        tracing::debug!(code = refusal.code(), "eviction refused");
        refusal.status()
    })?;
    let answer = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201});
    Ok(with_warnings(json(201, &answer), &warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_emulator_types::decode::StrictField;

    #[test]
    fn the_go_type_of_an_eviction_is_checked() {
        let wrong = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": 5}});
        assert_eq!(
            EVICTION_GO_TYPE(&wrong),
            Err(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.name of type string"
                    .to_owned()
            )
        );
        let extra = json!({"metadata": {"name": "web"}, "bogus": 1});
        assert_eq!(EVICTION_GO_TYPE(&extra), Ok(vec!["bogus".to_owned()]));
        assert_eq!(
            decode::strict_error(&[StrictField::Unknown("bogus".to_owned())]),
            "strict decoding error: unknown field \"bogus\""
        );
    }
}
