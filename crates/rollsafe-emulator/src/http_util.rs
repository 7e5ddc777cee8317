//! Response builders and body reading.

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use http_body_util::{BodyExt, Full, Limited};
use hyper::Response;
use hyper::body::Incoming;
use serde_json::Value;

use crate::state::Body;
use rollsafe_emulator_types::status::StatusError;

/// `MaxRequestBodyBytes`: 3 MiB.
pub(crate) const MAX_REQUEST_BODY: usize = 3 * 1024 * 1024;

/// A response with a complete body.
pub(crate) fn full(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut resp = Response::new(Full::new(body.into()).boxed());
    *resp.status_mut() =
        http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(CONTENT_TYPE, v);
    }
    resp
}

/// A JSON response.
pub(crate) fn json(code: u16, value: &Value) -> Response<Body> {
    let body = serde_json::to_vec(value).unwrap_or_default();
    full(code, "application/json", body)
}

/// An error response (Status JSON or plain text), with `Retry-After` when set.
pub(crate) fn error(e: &StatusError) -> Response<Body> {
    let mut resp = match &e.plain_text {
        Some(text) => {
            let mut r = full(e.code, "text/plain; charset=utf-8", format!("{text}\n"));
            r.headers_mut().insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            r
        }
        None => json(e.code, &e.body),
    };
    if let Some(secs) = e.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(RETRY_AFTER, v);
    }
    resp
}

/// Reads a request body, refusing more than [`MAX_REQUEST_BODY`] bytes with the real 413.
pub(crate) async fn read_body(
    body: Incoming,
    content_length: Option<u64>,
) -> Result<Bytes, StatusError> {
    let too_large = || StatusError::too_large(&format!("limit is {MAX_REQUEST_BODY}"));
    if content_length.is_some_and(|n| n > MAX_REQUEST_BODY as u64) {
        return Err(too_large());
    }
    match Limited::new(body, MAX_REQUEST_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) => {
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some()
            {
                Err(too_large())
            } else {
                Err(StatusError::bad_request(&format!(
                    "error reading request body: {e}"
                )))
            }
        }
    }
}
