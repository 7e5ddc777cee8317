//! PUT of an object, of its `status`, or of its `scale`.

use hyper::Response;
use serde_json::{Value, json};

use crate::handlers::scale::scale_of;
use crate::handlers::{
    Call, Decoding, check_name, check_type, crd_schema_of, decode_body, decode_typed,
    set_namespace, with_warnings,
};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::fieldmanager::Tracking;
use rollsafe_emulator_registry::store::{Update, UpdateMode};
use rollsafe_emulator_types::resources::def;
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn update(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let mut obj = decode_body(c)?;
    if c.sub() == Some("scale") {
        let replicas = obj.pointer("/spec/replicas").cloned().unwrap_or(json!(0));
        let mut store = c.shared.store();
        let current = store
            .get(c.info.res, c.ns(), c.name())
            .cloned()
            .ok_or_else(|| StatusError::not_found(d, c.name()))?;
        let mut next = (*current).clone();
        next["spec"]["replicas"] = replicas;
        if let Some(rv) = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
        {
            next["metadata"]["resourceVersion"] = json!(rv);
        }
        let manager = c.manager();
        let (stored, _) = store.update_managed(Update {
            res: c.info.res,
            ns: c.ns(),
            name: c.name(),
            object: next,
            mode: UpdateMode::Put,
            write: c.write(),
            tracking: Tracking::Update(&manager),
        })?;
        return Ok(json(200, &scale_of(&stored)));
    }
    check_type(&obj, c.info.res)?;
    let warnings = decode_typed(c, &mut obj, None, crd_schema_of(c).as_ref(), Decoding::Body)?;
    check_name(&mut obj, c)?;
    set_namespace(&mut obj, c)?;
    let obj = c.to_stored(obj);
    let mode = if c.sub() == Some("status") {
        UpdateMode::Status
    } else {
        UpdateMode::Put
    };
    let manager = c.manager();
    let (stored, _) = c.shared.store().update_managed(Update {
        res: c.stored_res(),
        ns: c.ns(),
        name: c.name(),
        object: obj,
        mode,
        write: c.write(),
        tracking: Tracking::Update(&manager),
    })?;
    Ok(with_warnings(json(200, &c.shown(&stored)), &warnings))
}
