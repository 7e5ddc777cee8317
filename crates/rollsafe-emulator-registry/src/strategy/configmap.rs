//! ConfigMaps: the 1 MiB payload limit over `data` and `binaryData`.

use serde_json::Value;

use super::{DEFAULT, Strategy};
use crate::strategy::secret::MAX_SECRET_SIZE;
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// ConfigMaps.
pub static STRATEGY: Strategy = Strategy {
    validate,
    ..DEFAULT
};

fn validate(
    obj: &Value,
    old: Option<&Value>,
    causes: &mut Vec<FieldCause>,
) -> Result<(), StatusError> {
    // The real order: the update checks, then those of any ConfigMap.
    super::validate_immutable(obj, old, &["data", "binaryData"], causes);
    super::validate_data_keys(obj, &["data", "binaryData"], causes);
    let mut total = 0usize;
    for field in ["data", "binaryData"] {
        if let Some(Value::Object(data)) = obj.get(field) {
            total += data
                .values()
                .map(|v| v.as_str().map(str::len).unwrap_or(0))
                .sum::<usize>();
        }
    }
    if total > MAX_SECRET_SIZE {
        causes.push(FieldCause::too_long("", MAX_SECRET_SIZE));
    }
    Ok(())
}
