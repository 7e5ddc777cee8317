//! `meta.k8s.io/v1` Table responses (what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), built from the printer each
//! resource's row names (`rollsafe_emulator_types::printers`).

use serde_json::{Value, json};

use crate::handlers::Call;
use rollsafe_emulator_types::resources::def;

/// Whether an `Accept` header asks for a Table (any entry with `as=Table` in `meta.k8s.io`).
pub(crate) fn wanted(accept: &str) -> bool {
    accept.split(',').any(|entry| {
        let params: Vec<&str> = entry.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// `?includeObject=`: what each row carries (in the request's form).
fn row_object(c: &Call<'_>, obj: &Value, include: &str) -> Option<Value> {
    match include {
        "None" => None,
        "Object" => {
            let d = def(c.info.res);
            let mut full = c.shown(obj).into_owned();
            if let Some(map) = full.as_object_mut() {
                map.insert("apiVersion".into(), json!(d.api_version()));
                map.insert("kind".into(), json!(d.kind));
            }
            Some(full)
        }
        _ => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })),
    }
}

/// The Table of stored `objects`, with the list's metadata (`resourceVersion`, `continue`,
/// `remainingItemCount`; empty for a single object). `?includeObject=` decides the rows'
/// objects: `Metadata` (default), `Object` or `None`.
pub(crate) fn table<'v>(
    c: &Call<'_>,
    objects: impl IntoIterator<Item = &'v Value>,
    list_meta: Value,
) -> Value {
    let include = c.query.non_empty("includeObject").unwrap_or("Metadata");
    let printer = def(c.stored_res()).printer;
    let now = jiff::Timestamp::now();
    let columns: Vec<Value> = printer
        .columns
        .iter()
        .map(|(name, ty, format, priority)| {
            let description = if *format == "name" {
                "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
            } else {
                ""
            };
            json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
        })
        .collect();
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|o| {
            let mut row = json!({"cells": (printer.cells)(o, now)});
            if let Some(object) = row_object(c, o, include) {
                row["object"] = object;
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_asking_for_tables() {
        assert!(wanted(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wanted("application/json"));
        assert!(!wanted(
            "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
        ));
    }
}
