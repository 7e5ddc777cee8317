//! GET of one object (and of its `scale`), as the object, a Table or its metadata.

use hyper::Response;

use crate::handlers::scale::scale_of;
use crate::handlers::{Call, metadata};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_types::resources::def;
use rollsafe_emulator_types::status::StatusError;
use serde_json::json;

pub(crate) fn get(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let obj = c
        .shared
        .store()
        .get(c.stored_res(), c.ns(), c.name())
        .cloned()
        .ok_or_else(|| StatusError::not_found(d, c.name()))?;
    if c.sub() == Some("scale") {
        return Ok(json(200, &scale_of(&obj)));
    }
    if crate::handlers::table::wanted(&c.accept) {
        return Ok(json(
            200,
            &crate::handlers::table::table(
                c,
                [&*obj],
                json!({"resourceVersion": obj.pointer("/metadata/resourceVersion")}),
            ),
        ));
    }
    if let Some(version) = metadata::wanted(&c.accept, metadata::OBJECT) {
        return Ok(json(200, &metadata::partial(&c.shown(&obj), version)));
    }
    Ok(json(200, &c.shown(&obj)))
}
