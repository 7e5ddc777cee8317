//! The review resources, computed and never stored: TokenReview, SelfSubjectReview,
//! SelfSubjectAccessReview, SubjectAccessReview and SelfSubjectRulesReview.

use hyper::Response;
use serde_json::{Value, json};

use crate::handlers::{Call, check_type, parse_object, unsupported_body};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::authorizer::{self, Attributes};
use rollsafe_emulator_registry::identity::UserInfo;
use rollsafe_emulator_types::resources::{def, ids};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

pub(crate) fn review(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let mut obj = if rollsafe_emulator_types::proto::is_protobuf(&c.content_type) {
        if c.info.res == ids::SELFSUBJECTRULESREVIEWS {
            rollsafe_emulator_types::proto::decode_object(c.body).map_err(|_| unsupported_body())?
        } else {
            rollsafe_emulator_types::proto::decode_access_review(c.body)
                .filter(|_| c.info.res != ids::TOKENREVIEWS)
                .ok_or_else(unsupported_body)?
        }
    } else {
        parse_object(c.body)?
    };
    check_type(&obj, c.info.res)?;
    let status = match c.info.res {
        ids::SELFSUBJECTRULESREVIEWS => {
            let namespace = obj
                .pointer("/spec/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (resource_rules, non_resource_rules) =
                authorizer::rules_for(&c.shared.store(), c.user, namespace);
            json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules,
                   "incomplete": false})
        }
        ids::TOKENREVIEWS => {
            let token = obj
                .pointer("/spec/token")
                .and_then(Value::as_str)
                .unwrap_or("");
            let requested = rollsafe_emulator_types::util::strings(obj.pointer("/spec/audiences"));
            match c.shared.identity_for_token(token) {
                Some(i) => {
                    let audiences = i.audiences_within(&requested);
                    if audiences.is_empty() {
                        json!({"authenticated": false, "user": {},
                               "error": "[invalid bearer token, token audiences is invalid for the target audiences]"})
                    } else {
                        let u = UserInfo::authenticated(&i.name, &i.groups);
                        json!({"authenticated": true,
                               "user": {"username": u.name, "groups": u.groups},
                               "audiences": audiences})
                    }
                }
                None => {
                    json!({"authenticated": false, "user": {}, "error": "invalid bearer token"})
                }
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
                    groups: rollsafe_emulator_types::util::strings(obj.pointer("/spec/groups")),
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
                return Err(StatusError::invalid(
                    d,
                    "",
                    &[FieldCause::invalid(
                        "spec.resourceAttributes",
                        "null",
                        "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                    )],
                ));
            };
            match authorizer::authorize(&c.shared.store(), &subject, &attrs) {
                Some(reason) if reason.is_empty() => json!({"allowed": true}),
                Some(reason) => json!({"allowed": true, "reason": reason}),
                None => json!({"allowed": false}),
            }
        }
        _ => return Err(StatusError::method_not_allowed(d, "POST")),
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
