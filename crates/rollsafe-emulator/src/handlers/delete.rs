//! DELETE of one object (with preconditions) and of a collection.

use hyper::Response;
use serde_json::{Map, Value, json};

use crate::handlers::{Call, selectors};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::store::deletion::{Deleted, Propagation};
use rollsafe_emulator_registry::store::{Key, Preconditions, Write};
use rollsafe_emulator_types::resources::{def, ids};
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn delete(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let opts: Value = if c.body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        serde_json::from_slice(c.body)
            .map_err(|e| StatusError::bad_request(&format!("error decoding DeleteOptions: {e}")))?
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
    let body_dry_run = opts
        .get("dryRun")
        .and_then(Value::as_array)
        .is_some_and(|v| v.iter().any(|x| x == "All"));
    let write = if body_dry_run {
        Write::DryRun
    } else {
        c.write()
    };
    let propagation = Propagation::of(&opts, c.query.get("propagationPolicy"))?;
    let deleted = c.shared.store().delete_object(
        c.stored_res(),
        c.ns(),
        c.name(),
        &pre,
        propagation,
        write,
    )?;
    if c.info.res == ids::NAMESPACES {
        let mut obj = (**deleted.object()).clone();
        obj["status"] = json!({"phase": "Terminating"});
        return Ok(json(200, &obj));
    }
    let deleted = match deleted {
        // Held by finalizers: the object as it is now; 202 when its dependents go first
        // (`handlers/delete.go`).
        Deleted::Marked(obj) => {
            let code = if propagation == Propagation::Foreground {
                202
            } else {
                200
            };
            return Ok(json(code, &c.shown(&obj)));
        }
        Deleted::Gone(obj) => obj,
    };
    // Services and ServiceAccounts answer with the object deleted (their REST storages set
    // `ReturnDeletedObject`); the others with a Success Status.
    if matches!(c.info.res, ids::SERVICES | ids::SERVICEACCOUNTS) {
        return Ok(json(200, &c.shown(&deleted)));
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

pub(crate) fn delete_collection(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let (labels, fields) = selectors(c)?;
    let mut store = c.shared.store();
    let keys: Vec<Key> = store
        .range(c.stored_res(), c.info.namespace.as_deref(), None)
        .filter(|(_, v)| labels.matches(v) && fields.matches(v))
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for (res, ns, name) in keys {
        if let Ok(obj) = store
            .delete_object(
                res,
                &ns,
                &name,
                &Preconditions::default(),
                Propagation::Background,
                c.write(),
            )
            .map(|deleted| deleted.object().clone())
        {
            let mut item = c.shown(&obj).into_owned();
            // As in any list of a built-in kind, the items carry no kind and apiVersion.
            if !d.custom
                && let Some(map) = item.as_object_mut()
            {
                map.remove("kind");
                map.remove("apiVersion");
            }
            items.push(item);
        }
    }
    let rv = store.current_rv();
    Ok(json(
        200,
        &json!({"kind": d.list_kind(), "apiVersion": d.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": items}),
    ))
}
