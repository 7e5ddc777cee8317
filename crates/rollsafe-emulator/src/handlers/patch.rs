//! PATCH in the four content types (the patch engines are in `rollsafe_emulator_types::patch`, server-side apply
//! in `rollsafe_emulator_registry::fieldmanager`), including an apply creating a missing object, and PATCH of
//! `status` and `scale`.

use hyper::Response;
use serde_json::{Value, json};

use crate::handlers::scale::scale_of;
use crate::handlers::{
    Call, Decoding, check_name, check_type, decode_typed, set_namespace, with_warnings,
};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::fieldmanager::{self, Tracking};
use rollsafe_emulator_registry::store::{Update, UpdateMode};
use rollsafe_emulator_types::patch::{self, Decoded, PatchKind};
use rollsafe_emulator_types::resources::def;
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn patch_object(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let kind = PatchKind::from_content_type(&c.content_type)
        .filter(|k| !(d.custom && *k == PatchKind::Strategic))
        .ok_or_else(|| StatusError::unsupported_patch(d))?;
    if kind == PatchKind::Apply && c.query.non_empty("fieldManager").is_none() {
        return Err(StatusError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            Some(
                json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"}]}),
            ),
        ));
    }
    if kind != PatchKind::Apply && c.query.get("force").is_some() {
        return Err(StatusError::new(
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
            Some(
                json!({"group": "meta.k8s.io", "kind": "PatchOptions", "causes": [{"reason": "FieldValueForbidden", "message": "Forbidden: may not be specified for non-apply patch", "field": "force"}]}),
            ),
        ));
    }
    let manager = c.manager();
    let force = c.query.flag("force");
    let mut store = c.shared.store();
    let Some(current) = store.get(c.stored_res(), c.ns(), c.name()).cloned() else {
        if kind == PatchKind::Apply && c.sub().is_none() {
            let decoded = patch::decode(kind, c.body)?;
            let Decoded::Document(_, config) = &decoded else {
                return Err(StatusError::bad_request("error decoding YAML"));
            };
            let mut obj = fieldmanager::apply(d, None, config, &manager, force)?;
            check_type(&obj, c.info.res)?;
            let schema = store.crd_schema(c.info.res);
            let warnings = decode_typed(c, &mut obj, None, schema.as_ref(), Decoding::Apply)?;
            check_name(&mut obj, c)?;
            set_namespace(&mut obj, c)?;
            let obj = c.to_stored(obj);
            let created =
                store.create_managed(c.stored_res(), obj, c.write(), Tracking::Applied)?;
            return Ok(with_warnings(json(201, &c.shown(&created)), &warnings));
        }
        return Err(StatusError::not_found(d, c.name()));
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
        let (stored, _) = store.update_managed(Update {
            res: c.info.res,
            ns: c.ns(),
            name: c.name(),
            object: next,
            mode: UpdateMode::Patch,
            write: c.write(),
            tracking: Tracking::Update(&manager),
        })?;
        return Ok(json(200, &scale_of(&stored)));
    }
    let (mut patched, tracking) = match &decoded {
        Decoded::Document(PatchKind::Apply, config) => (
            fieldmanager::apply(d, Some(&c.shown(&current)), config, &manager, force)?,
            Tracking::Applied,
        ),
        _ => (
            patch::apply(&decoded, &c.shown(&current))?,
            Tracking::Update(&manager),
        ),
    };
    let name_now = patched
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name_now != c.name() {
        return Err(StatusError::bad_request(&format!(
            "the name of the object ({name_now}) does not match the name on the URL ({})",
            c.name()
        )));
    }
    check_type(&patched, c.info.res)?;
    let decoding = if kind == PatchKind::Apply {
        Decoding::Apply
    } else {
        Decoding::Patch
    };
    let schema = store.crd_schema(c.info.res);
    let warnings = decode_typed(
        c,
        &mut patched,
        Some(&c.shown(&current)),
        schema.as_ref(),
        decoding,
    )?;
    if def(c.info.res).namespaced {
        set_namespace(&mut patched, c)?;
    }
    let mode = if c.sub() == Some("status") {
        UpdateMode::Status
    } else {
        UpdateMode::Patch
    };
    let patched = c.to_stored(patched);
    let (stored, _) = store.update_managed(Update {
        res: c.stored_res(),
        ns: c.ns(),
        name: c.name(),
        object: patched,
        mode,
        write: c.write(),
        tracking,
    })?;
    Ok(with_warnings(json(200, &c.shown(&stored)), &warnings))
}
