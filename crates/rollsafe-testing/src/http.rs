//! A raw HTTP/1.1 client for the suites that talk to a server process over its socket (no
//! server types, no client library: what is on the wire is what is asserted).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A response read off the wire.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The status line and the headers.
    pub head: String,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON (`null` when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The first header of this name (any case), trimmed.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    }
}

/// Sends raw bytes on a fresh connection and reads the whole response (the request should
/// carry `Connection: close`). `None` when the server closed without a status line.
pub async fn exchange(addr: &str, request: &[u8], limit: Duration) -> Option<Response> {
    let run = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        // A server may answer (and close) before it has read everything. The write side stays
        // open: the server does not support half-closed connections and would drop the request.
        let _ = stream.write_all(request).await;
        let mut bytes = Vec::new();
        let _ = stream.read_to_end(&mut bytes).await;
        parse(&bytes)
    };
    tokio::time::timeout(limit, run).await.ok().flatten()
}

fn parse(bytes: &[u8]) -> Option<Response> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let mut body = bytes[end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Some(Response { status, head, body })
}

fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(line_end) = bytes.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(String::from_utf8_lossy(&bytes[..line_end]).trim(), 16)
            .unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = line_end + 2;
        let end = (start + size).min(bytes.len());
        out.extend_from_slice(&bytes[start..end]);
        bytes = &bytes[(end + 2).min(bytes.len())..];
    }
    out
}

/// `GET path` on a fresh connection, within 10 seconds.
pub async fn get(addr: &str, path: &str) -> Option<Response> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    exchange(addr, request.as_bytes(), Duration::from_secs(10)).await
}
