//! Sending one request exactly once, classifying what went wrong, and reading bodies within a
//! byte budget.

use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::BodyExt;
use kube::client::Body;
use rollsafe_core::failure::TransportFailure;

/// How long one page of a list may take, headers and body.
pub const LIST_PAGE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the whole inventory of one kind may take, all pages.
pub const INVENTORY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long one patch may take, from sending it to its response headers.
pub const PATCH_TIMEOUT: Duration = Duration::from_secs(15);
/// How long one single-object read (a Secret, a ConfigMap) may take.
pub const GET_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the patch phase of a run may go on starting patches. A match whose patch has not
/// started by then is never sent and is reported `unavailable`; patches already in flight finish
/// (each within [`PATCH_TIMEOUT`]).
pub const PATCH_PHASE_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest body read from a single-object response.
pub const MAX_OBJECT_BODY: u64 = 4 * 1024 * 1024;
/// The most bytes of a response body read after the status is known, only to let the
/// connection go back to the pool.
pub(crate) const MAX_DRAIN_BODY: u64 = 64 * 1024;

/// The time limits of one run. The defaults are the named constants of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// One list page: [`LIST_PAGE_TIMEOUT`].
    pub list_page: Duration,
    /// One kind's whole inventory: [`INVENTORY_TIMEOUT`].
    pub inventory: Duration,
    /// One patch: [`PATCH_TIMEOUT`].
    pub patch: Duration,
    /// One single-object read: [`GET_TIMEOUT`].
    pub get: Duration,
    /// Starting patches: [`PATCH_PHASE_TIMEOUT`].
    pub patch_phase: Duration,
}

impl Timeouts {
    /// The longest a whole run can take: the inventories (listed concurrently), the patch phase,
    /// and the last patch started in it. Callers that must let a run finish wait this long.
    pub fn max_run(&self) -> Duration {
        self.inventory + self.patch_phase + self.patch
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            list_page: LIST_PAGE_TIMEOUT,
            inventory: INVENTORY_TIMEOUT,
            patch: PATCH_TIMEOUT,
            get: GET_TIMEOUT,
            patch_phase: PATCH_PHASE_TIMEOUT,
        }
    }
}

/// Sends `request` once through `client`. An error says whether the request was never sent
/// or may have reached the server.
pub(crate) async fn send_once(
    client: &kube::Client,
    request: Request<Body>,
) -> Result<Response<Body>, TransportFailure> {
    client
        .send(request)
        .await
        .map_err(|error| classify_error(&error))
}

/// Whether a failed call may have reached the server.
///
/// Only errors that provably happened before any byte of the request was written count as
/// [`TransportFailure::NotSent`]: a failure to connect (refused, unreachable, DNS, TLS
/// handshake, connect timeout), a credential provider that failed before the request left, or
/// a client that was already shut down. Anything else — a reset, an EOF before the response,
/// a broken body — may have happened after the server acted, so it is
/// [`TransportFailure::AfterSend`].
pub(crate) fn classify_error(error: &kube::Error) -> TransportFailure {
    match error {
        kube::Error::Auth(_) | kube::Error::BuildRequest(_) | kube::Error::HttpError(_) => {
            return TransportFailure::NotSent;
        }
        _ => {}
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(legacy) = current.downcast_ref::<hyper_util::client::legacy::Error>()
            && legacy.is_connect()
        {
            return TransportFailure::NotSent;
        }
        if current.is::<tower::buffer::error::Closed>() {
            return TransportFailure::NotSent;
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return TransportFailure::NotSent;
        }
        source = current.source();
    }
    TransportFailure::AfterSend
}

/// Why a body could not be read in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// The body is longer than the limit; reading stopped there, after `read` bytes (0 when a
    /// declared length already said so).
    OverLimit {
        /// Bytes received before reading stopped.
        read: u64,
    },
    /// The connection failed while the body was being read.
    Broken,
}

/// Reads a body into memory, stopping as soon as more than `limit` bytes have arrived (or a
/// declared length says they will). At most `limit` bytes plus one frame are ever held.
pub(crate) async fn read_limited<B>(mut body: B, limit: u64) -> Result<Vec<u8>, BodyError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    if body.size_hint().lower() > limit {
        return Err(BodyError::OverLimit { read: 0 });
    }
    let mut out: Vec<u8> = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| BodyError::Broken)?;
        if let Ok(data) = frame.into_data() {
            let total = out.len() as u64 + data.len() as u64;
            if total > limit {
                return Err(BodyError::OverLimit { read: total });
            }
            out.extend_from_slice(&data);
        }
    }
    Ok(out)
}

/// Reads and drops up to [`MAX_DRAIN_BODY`] bytes so a finished response can return its
/// connection to the pool. Errors are irrelevant: the status line already decided.
pub(crate) async fn drain(body: Body) {
    let _ = read_limited(body, MAX_DRAIN_BODY).await;
}

/// Percent-encodes a query value (RFC 3986 unreserved characters pass through).
pub(crate) fn encode_query_value(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, rollsafe_core::uri::NOT_UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::stream;
    use http_body::Frame;
    use http_body_util::StreamBody;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode_query_value("abc-_.~XYZ09"), "abc-_.~XYZ09");
        assert_eq!(encode_query_value("a+b/c=&d"), "a%2Bb%2Fc%3D%26d");
    }

    /// An endless body of 1 MiB chunks that counts how many chunks were pulled.
    fn endless(
        pulled: Arc<AtomicUsize>,
    ) -> impl http_body::Body<Data = Bytes, Error = std::io::Error> + Unpin {
        let chunk = Bytes::from(vec![b' '; 1024 * 1024]);
        StreamBody::new(stream::repeat_with(move || {
            pulled.fetch_add(1, Ordering::SeqCst);
            Ok::<_, std::io::Error>(Frame::data(chunk.clone()))
        }))
    }

    #[tokio::test]
    async fn reading_stops_at_the_limit_of_an_endless_body() {
        let pulled = Arc::new(AtomicUsize::new(0));
        let limit = 32 * 1024 * 1024;
        let result = read_limited(endless(pulled.clone()), limit).await;
        assert_eq!(
            result,
            Err(BodyError::OverLimit {
                read: 33 * 1024 * 1024
            })
        );
        // 32 chunks fit exactly; the 33rd passes the limit and reading stops there.
        assert_eq!(pulled.load(Ordering::SeqCst), 33);
    }

    #[tokio::test]
    async fn a_body_within_the_limit_is_read_whole() {
        let chunks = vec![
            Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(b"{\"a\":"))),
            Ok(Frame::data(Bytes::from_static(b"1}"))),
        ];
        let body = StreamBody::new(stream::iter(chunks));
        assert_eq!(read_limited(body, 7).await.unwrap(), b"{\"a\":1}");
        let chunks = vec![Ok::<_, std::io::Error>(Frame::data(Bytes::from_static(
            b"12345678",
        )))];
        let body = StreamBody::new(stream::iter(chunks));
        assert_eq!(
            read_limited(body, 7).await,
            Err(BodyError::OverLimit { read: 8 })
        );
    }

    #[tokio::test]
    async fn a_broken_body_is_reported() {
        let chunks = vec![
            Ok(Frame::data(Bytes::from_static(b"{"))),
            Err(std::io::Error::other("reset")),
        ];
        let body = StreamBody::new(stream::iter(chunks));
        assert_eq!(read_limited(body, 100).await, Err(BodyError::Broken));
    }
}
