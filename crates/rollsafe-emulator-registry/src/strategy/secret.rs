//! Secrets: `stringData` folded into `data`, the default type `Opaque` (or the stored one), and
//! the base64 and 1 MiB checks of `data`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::{DEFAULT, Strategy};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// `MaxSecretSize`: Secret and ConfigMap payload limit.
pub const MAX_SECRET_SIZE: usize = 1024 * 1024;

/// Secrets.
pub static STRATEGY: Strategy = Strategy {
    prepare,
    validate,
    ..DEFAULT
};

fn prepare(map: &mut Map<String, Value>, old: Option<&Value>) {
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = map.entry("data").or_insert_with(|| json!({}));
        if !data.is_object() {
            *data = json!({});
        }
        if let Some(data) = data.as_object_mut() {
            for (k, v) in string_data {
                let text = v.as_str().unwrap_or("").to_string();
                data.insert(
                    k,
                    json!(base64::engine::general_purpose::STANDARD.encode(text)),
                );
            }
        }
    }
    if map
        .get("type")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        let t = old
            .and_then(|o| o.get("type").cloned())
            .unwrap_or_else(|| json!("Opaque"));
        map.insert("type".into(), t);
    }
}

fn validate(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    // The real order: the update checks (type, immutability), then those of any Secret.
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    if let Some(old_kind) = old.and_then(|o| o.get("type")).and_then(Value::as_str)
        && old_kind != kind
    {
        causes.push(FieldCause::invalid(
            "type",
            &format!("{kind:?}"),
            "field is immutable",
        ));
    }
    super::validate_immutable(obj, old, &["data"], causes);
    super::validate_data_keys(obj, &["data"], causes);
    let required: &[&str] = match kind {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for key in required {
        if obj.pointer("/data").and_then(|d| d.get(*key)).is_none() {
            causes.push(FieldCause::required(&format!("data[{key}]"), ""));
        }
    }
    let mut total = 0usize;
    if let Some(Value::Object(data)) = obj.get("data") {
        for v in data.values() {
            let text = v.as_str().unwrap_or("");
            match rollsafe_emulator_types::go_decode::base64_decoded_len(text) {
                Ok(length) => total += length,
                Err(at) => {
                    return Err(StatusError::bad_request(&format!(
                        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte {at}"
                    )));
                }
            }
        }
    }
    if total > MAX_SECRET_SIZE {
        causes.push(FieldCause::too_long("data", MAX_SECRET_SIZE));
    }
    Ok(())
}
