//! What every API handler does around its steps: a new request id, a span carrying it, and the
//! sanitized 500 that names the id and logs the problem.

use std::future::Future;

use axum::response::{IntoResponse, Response};
use tracing::{Instrument, error, info_span};

use crate::error::ApiError;

/// Runs a handler with a new request id, in a span carrying it; an error becomes its response.
pub(crate) async fn with_request_id<F, Fut>(route: &'static str, handle: F) -> Response
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<Response, ApiError>>,
{
    let request_id = uuid::Uuid::new_v4().to_string();
    let span = info_span!("request", route, request_id = %request_id);
    handle(request_id)
        .instrument(span)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// The 500 of a request: `problem` is logged with the request id; the caller sees the id only.
pub(crate) fn internal(request_id: &str, problem: &'static str) -> ApiError {
    error!(request_id, problem, "request failed");
    ApiError::Internal {
        request_id: request_id.to_owned(),
    }
}
