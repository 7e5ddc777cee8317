//! Local webhook receivers, log capture and a sample notification, shared by the test crates.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "shared by several test crates; each uses a part"
)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use rollsafe_notify::{Cause, Format, Notification, Outcome, Sink, WebhookUrl};
use serde_json::Value;
use tokio::sync::watch;

/// The credential every test webhook URL carries, in its path and its query.
pub const TOKEN: &str = "XoxbT0kenS3cretZZ";

/// A string that looks like a Secret's value and is given to nothing.
pub const VALUE_LOOKALIKE: &str = "hunter2-s3cr3t-value";

/// A request the receiver saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub target: String,
    pub headers: HeaderMap,
    pub body: bytes::Bytes,
    pub at: Instant,
}

impl Recorded {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// How the receiver answers one request.
#[derive(Clone)]
pub enum Reply {
    /// This status, empty body.
    Status(u16),
    /// This status with a `Retry-After`.
    RetryAfter(u16, &'static str),
    /// Never answers.
    Hang,
    /// Waits until [`Receiver::open_gate`], then 200.
    Gate,
    /// As the service would: 400 with the validator's complaint unless the request is a
    /// `POST` of `application/json` whose body the validator accepts, then 200.
    Validate(fn(&Value) -> Result<(), String>),
}

struct Shared {
    requests: Mutex<Vec<Recorded>>,
    script: Mutex<VecDeque<Reply>>,
    then: Reply,
    gate: watch::Receiver<bool>,
    complaints: Mutex<Vec<String>>,
}

/// A webhook receiver on 127.0.0.1.
pub struct Receiver {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    gate: watch::Sender<bool>,
}

impl Receiver {
    /// Answers with `script` in order, then `then` forever.
    pub async fn start(script: Vec<Reply>, then: Reply) -> Receiver {
        let (gate, gate_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            script: Mutex::new(script.into()),
            then,
            gate: gate_rx,
            complaints: Mutex::new(Vec::new()),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver { addr, shared, gate }
    }

    /// Always `reply`.
    pub async fn always(reply: Reply) -> Receiver {
        Receiver::start(Vec::new(), reply).await
    }

    /// The webhook URL of this receiver, with [`TOKEN`] in its path and query.
    pub fn url(&self) -> WebhookUrl {
        format!(
            "http://{}/services/T0001/B0001/{TOKEN}?token={TOKEN}",
            self.addr
        )
        .parse()
        .unwrap()
    }

    pub fn sink(&self, format: Format) -> Sink {
        Sink {
            url: self.url(),
            format,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    pub fn complaints(&self) -> Vec<String> {
        self.shared.complaints.lock().unwrap().clone()
    }

    pub fn open_gate(&self) {
        self.gate.send_replace(true);
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = to_bytes(body, 1024 * 1024).await.unwrap();
    let recorded = Recorded {
        method: parts.method.to_string(),
        target: parts
            .uri
            .path_and_query()
            .map(ToString::to_string)
            .unwrap_or_default(),
        headers: parts.headers,
        body,
        at: Instant::now(),
    };
    shared.requests.lock().unwrap().push(recorded.clone());
    let reply = shared
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| shared.then.clone());
    match reply {
        Reply::Status(status) => StatusCode::from_u16(status).unwrap().into_response(),
        Reply::RetryAfter(status, after) => (
            StatusCode::from_u16(status).unwrap(),
            [("retry-after", after)],
        )
            .into_response(),
        Reply::Hang => std::future::pending().await,
        Reply::Gate => {
            let mut gate = shared.gate.clone();
            gate.wait_for(|open| *open).await.unwrap();
            StatusCode::OK.into_response()
        }
        Reply::Validate(validate) => {
            let verdict = check_request(&recorded).and_then(|body| validate(&body));
            match verdict {
                Ok(()) => StatusCode::OK.into_response(),
                Err(complaint) => {
                    shared.complaints.lock().unwrap().push(complaint.clone());
                    Response::builder()
                        .status(StatusCode::BAD_REQUEST)
                        .body(Body::from(complaint))
                        .unwrap()
                }
            }
        }
    }
}

/// What every chat webhook requires of the request itself.
fn check_request(recorded: &Recorded) -> Result<Value, String> {
    if recorded.method != "POST" {
        return Err(format!("method {}", recorded.method));
    }
    match recorded.header("content-type") {
        Some(ct) if ct.starts_with("application/json") => {}
        other => return Err(format!("content-type {other:?}")),
    }
    serde_json::from_slice(&recorded.body).map_err(|_| "body is not JSON".to_owned())
}

/// Polls `condition` until it holds; panics with `what` after `within`.
pub async fn wait_until(within: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Everything logged (every level) on this thread while the guard lives.
pub struct Logs {
    buffer: Arc<Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

#[derive(Clone)]
struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Captures the logs of this thread: use with a current-thread runtime (the default of
    /// `#[tokio::test]`), so the delivery tasks log here too.
    pub fn capture() -> Logs {
        let buffer = Arc::new(Mutex::new(Vec::new()));
        let writer = LogWriter(buffer.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        Logs {
            buffer,
            _guard: tracing::subscriber::set_default(subscriber),
        }
    }

    pub fn text(&self) -> String {
        String::from_utf8(self.buffer.lock().unwrap().clone()).unwrap()
    }

    /// Asserts that nothing logged carries the webhook's credential.
    pub fn assert_no_secret(&self) {
        let text = self.text();
        assert!(!text.contains(TOKEN), "the token was logged:\n{text}");
        assert!(!text.contains("/services/"), "the path was logged:\n{text}");
        assert!(!text.contains("token="), "the query was logged:\n{text}");
    }
}

/// A roll of Deployment `shop/web` for two objects, on cluster `prod-eu`, with a link.
pub fn sample() -> Notification {
    Notification {
        outcome: Outcome::Rolled,
        cluster: Some("prod-eu".to_owned()),
        namespace: "shop".to_owned(),
        workload_kind: "Deployment".to_owned(),
        workload: "web".to_owned(),
        causes: vec![
            Cause {
                kind: "Secret".to_owned(),
                name: "db".to_owned(),
                keys: vec!["password".to_owned(), "username".to_owned()],
            },
            Cause {
                kind: "ConfigMap".to_owned(),
                name: "settings".to_owned(),
                keys: vec![],
            },
        ],
        summary: "Rolled for changes to Secret/db, ConfigMap/settings".to_owned(),
        link: Some("https://rollsafe.example/ui/workloads?ns=shop&name=web".to_owned()),
        at: "2026-03-01T12:30:05Z".parse().unwrap(),
    }
}
