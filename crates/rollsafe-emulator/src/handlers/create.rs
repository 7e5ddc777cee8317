//! POST of a new object.

use hyper::Response;

use crate::handlers::{Call, check_type, parse_object, set_namespace, unsupported_body};
use crate::http_util::json;
use crate::server::Body;
use crate::status::ApiError;

pub fn create(c: &Call<'_>) -> Result<Response<Body>, ApiError> {
    if crate::proto::is_protobuf(&c.content_type) {
        return Err(unsupported_body());
    }
    let mut obj = parse_object(c.body)?;
    check_type(&obj, c.info.res)?;
    set_namespace(&mut obj, c)?;
    let created = c.shared.store().create(c.info.res, obj)?;
    Ok(json(201, &created))
}
