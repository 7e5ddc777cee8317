//! POST of a new object.

use hyper::Response;

use crate::handlers::{
    Call, Decoding, check_type, crd_schema_of, decode_body, decode_typed, set_namespace,
    with_warnings,
};
use crate::http_util::json;
use crate::state::Body;
use rollsafe_emulator_registry::fieldmanager::Tracking;
use rollsafe_emulator_types::status::StatusError;

pub(crate) fn create(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    if c.sub() == Some("token") {
        return super::token::token_request(c);
    }
    if c.sub() == Some("eviction") {
        return super::eviction::evict(c);
    }
    let mut obj = decode_body(c)?;
    check_type(&obj, c.info.res)?;
    let warnings = decode_typed(c, &mut obj, None, crd_schema_of(c).as_ref(), Decoding::Body)?;
    set_namespace(&mut obj, c)?;
    let obj = c.to_stored(obj);
    let manager = c.manager();
    let created = c.shared.store().create_managed(
        c.stored_res(),
        obj,
        c.write(),
        Tracking::Update(&manager),
    )?;
    Ok(with_warnings(json(201, &c.shown(&created)), &warnings))
}
