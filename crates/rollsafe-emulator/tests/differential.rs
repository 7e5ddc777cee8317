//! The differential suite: the emulator measured against a real kube-apiserver.
//!
//! `tests/fixtures/differential/requests.json` is a corpus of requests as the emulator's
//! request log recorded them from real clients — every kubectl release under the Cloud SDK
//! (1.27 … 1.33), the `kube` crate, the official Python client — and from a hand-written matrix
//! (every served kind × JSON, Table, metadata-only and protobuf answers, selectors, paging,
//! the four patch types and server-side apply, dry runs, impersonation, watches with
//! resourceVersions and bookmarks, and the errors). [`record`] (ignored; run it with
//! `--ignored record`) writes it again.
//!
//! [`parity_with_kube_apiserver_on_real`] sends the corpus, in order, to a fresh
//! emulator and to the shared real control plane (`ROLLSAFE_CONTROL_PLANE`), each in a new
//! namespace, normalises what legitimately differs (uids, resourceVersions, timestamps,
//! generated names, what the real controllers write later; [`normalise`]) and compares status,
//! content type, warnings and body. Every difference must be fixed or listed, with its reason,
//! in `tests/fixtures/differential/allowed.json`; an unlisted one fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use http_body_util::BodyExt as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use rollsafe_emulator::{Emulator, RequestLogEntry, RunningEmulator};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The namespace the corpus was recorded in. Replays use other names of the same length, so
/// that a protobuf body (whose strings are length-prefixed) can be rewritten byte for byte.
const RECORD_NS: &str = "diffrec000";
const NS_PLACEHOLDER: &str = "{{ns}}";
/// How long a watch is read when the server does not end it first.
const WATCH_WINDOW: Duration = Duration::from_millis(1500);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/differential")
}

// ---------------------------------------------------------------------------------------------
// The corpus

/// One request of the corpus.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct Shape {
    /// Which client sent it: `kubectl-1.27`, `kube`, `python`, `matrix`.
    source: String,
    method: String,
    /// Path and query; `{{ns}}` for the namespace, `{{listrv}}` for the resourceVersion of the
    /// last list the server answered, `{{continue}}` for its continue token.
    path: String,
    /// `admin`, `alice` or `bob`: whose token.
    user: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    accept: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    content_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    user_agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    impersonate_user: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    impersonate_groups: Vec<String>,
    /// The body; `{{rv}}` and `{{uid}}` stand for the addressed object's current ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    /// A body that is not UTF-8 (protobuf), base64; its namespace is `RECORD_NS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body_base64: Option<String>,
}

impl Shape {
    /// What makes two requests the same shape: everything sent but the client's name.
    fn key(&self) -> String {
        let mut key = format!("{} {}", self.method, self.path);
        for (name, value) in [
            ("accept", &self.accept),
            ("content-type", &self.content_type),
            ("as", &self.impersonate_user),
        ] {
            if let Some(value) = value {
                let _ = write!(key, " {name}={value}");
            }
        }
        if !self.impersonate_groups.is_empty() {
            let _ = write!(key, " as-group={}", self.impersonate_groups.join(","));
        }
        if self.user != "admin" {
            let _ = write!(key, " user={}", self.user);
        }
        key
    }

    fn distinct(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.key(),
            self.body.as_deref().unwrap_or(""),
            self.body_base64.as_deref().unwrap_or("")
        )
    }

    fn is_watch(&self) -> bool {
        self.path.split_once('?').is_some_and(|(_, q)| {
            q.split('&')
                .any(|p| p.eq_ignore_ascii_case("watch=true") || p == "watch=1")
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Talking to a server

/// One server: a client per identity, the namespace, and what its answers told so far.
struct Target {
    name: &'static str,
    clients: HashMap<String, kube::Client>,
    ns: String,
    /// The addressed object's resourceVersion and uid, by its path.
    objects: HashMap<String, (String, String)>,
    list_rv: String,
    continue_token: String,
}

/// What one request got.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    content_type: String,
    warnings: Vec<String>,
    body: Value,
}

async fn client_for(kubeconfig: &Path, context: &str) -> kube::Client {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(
        kc,
        &KubeConfigOptions {
            context: Some(context.to_owned()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    config.default_retry = false;
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config).unwrap()
}

impl Target {
    async fn new(name: &'static str, kubeconfig: &Path, ns: &str) -> Self {
        let mut clients = HashMap::new();
        for user in ["admin", "alice", "bob"] {
            clients.insert(user.to_owned(), client_for(kubeconfig, user).await);
        }
        Self {
            name,
            clients,
            ns: ns.to_owned(),
            objects: HashMap::new(),
            list_rv: String::new(),
            continue_token: String::new(),
        }
    }

    /// The object a request path addresses: the path without its query and subresource.
    fn object_of(&self, path: &str) -> Option<&(String, String)> {
        let path = path.split('?').next().unwrap_or(path);
        self.objects.get(path).or_else(|| {
            path.rsplit_once('/')
                .and_then(|(parent, _)| self.objects.get(parent))
        })
    }

    fn substitute(&self, text: &str, path: &str) -> String {
        let (rv, uid) = self.object_of(path).cloned().unwrap_or_else(|| {
            (
                "1".to_owned(),
                "00000000-0000-0000-0000-000000000000".into(),
            )
        });
        text.replace(NS_PLACEHOLDER, &self.ns)
            .replace("{{listrv}}", &self.list_rv)
            .replace("{{continue}}", &self.continue_token)
            .replace("{{rv}}", &rv)
            .replace("{{uid}}", &uid)
    }

    async fn send(&mut self, shape: &Shape) -> Answer {
        let raw_path = shape.path.replace(NS_PLACEHOLDER, &self.ns);
        // A body naming the object's resourceVersion or uid gets the current ones: read the
        // object first (the real controllers may have written it since it was last seen).
        if shape
            .body
            .as_deref()
            .is_some_and(|b| b.contains("{{rv}}") || b.contains("{{uid}}"))
        {
            self.refresh(&raw_path).await;
        }
        let path = self.substitute(&shape.path, &raw_path);
        let body: Vec<u8> = if let Some(b64) = &shape.body_base64 {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            replace_bytes(&bytes, RECORD_NS.as_bytes(), self.ns.as_bytes())
        } else {
            shape
                .body
                .as_deref()
                .map(|b| self.substitute(b, &path).into_bytes())
                .unwrap_or_default()
        };
        let mut request = http::Request::builder()
            .method(shape.method.as_str())
            .uri(&path);
        if let Some(v) = &shape.accept {
            request = request.header("Accept", v);
        }
        if let Some(v) = &shape.content_type {
            request = request.header("Content-Type", v);
        }
        if let Some(v) = &shape.user_agent {
            request = request.header("User-Agent", v);
        }
        if let Some(v) = &shape.impersonate_user {
            request = request.header("Impersonate-User", v);
        }
        for g in &shape.impersonate_groups {
            request = request.header("Impersonate-Group", g);
        }
        let request = request.body(kube::client::Body::from(body)).unwrap();
        let client = self.clients[&shape.user].clone();
        let response = tokio::time::timeout(Duration::from_secs(30), client.send(request))
            .await
            .unwrap_or_else(|_| panic!("{}: no answer to {}", self.name, shape.key()))
            .unwrap_or_else(|e| panic!("{}: {} failed: {e}", self.name, shape.key()));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let warnings = response
            .headers()
            .get_all("warning")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let deadline = tokio::time::Instant::now()
            + if shape.is_watch() {
                WATCH_WINDOW
            } else {
                Duration::from_secs(30)
            };
        // Until the body ends, fails, or (a watch) the window closes.
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
            if let Ok(data) = frame.into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        let body = decode_body(&bytes, &content_type, shape.is_watch() && status == 200);
        self.learn(&path, &shape.method, &body);
        Answer {
            status,
            content_type,
            warnings,
            body,
        }
    }

    /// Reads the object `path` addresses until its resourceVersion holds still — the real
    /// controllers write a workload's status for a moment after each change — and keeps it.
    async fn refresh(&mut self, path: &str) {
        let path = path.split('?').next().unwrap_or(path).to_owned();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let mut last = None;
        while self.read_object(&path).await {
            let now = self.object_of(&path).map(|(rv, _)| rv.clone());
            if now == last || tokio::time::Instant::now() > deadline {
                return;
            }
            last = now;
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }

    /// Reads the object `path` addresses, or its parent for a subresource, and keeps its
    /// resourceVersion and uid; whether there is one.
    async fn read_object(&mut self, path: &str) -> bool {
        for candidate in [Some(path), path.rsplit_once('/').map(|(parent, _)| parent)]
            .into_iter()
            .flatten()
        {
            let request = http::Request::builder()
                .method("GET")
                .uri(candidate)
                .header("Accept", "application/json")
                .body(kube::client::Body::from(Vec::new()))
                .unwrap();
            let Ok(response) = self.clients["admin"].send(request).await else {
                continue;
            };
            if !response.status().is_success() {
                continue;
            }
            let Ok(body) = response.into_body().collect().await else {
                continue;
            };
            let object: Value = serde_json::from_slice(&body.to_bytes()).unwrap_or(Value::Null);
            if object["metadata"]["name"].is_string() && object["metadata"]["uid"].is_string() {
                self.learn(candidate, "GET", &object);
                return true;
            }
        }
        false
    }

    /// Keeps the resourceVersions, uids, list resourceVersion and continue token an answer
    /// carries, for the requests after it.
    fn learn(&mut self, path: &str, method: &str, body: &Value) {
        let path = path.split('?').next().unwrap_or(path).to_owned();
        if let Some(items) = body.get("items").and_then(Value::as_array) {
            if let Some(rv) = body["metadata"]["resourceVersion"].as_str() {
                self.list_rv = rv.to_owned();
            }
            self.continue_token = body["metadata"]["continue"]
                .as_str()
                .unwrap_or("")
                .to_owned();
            for item in items {
                if let (Some(name), Some(rv), Some(uid)) = (
                    item["metadata"]["name"].as_str(),
                    item["metadata"]["resourceVersion"].as_str(),
                    item["metadata"]["uid"].as_str(),
                ) {
                    self.objects
                        .insert(format!("{path}/{name}"), (rv.to_owned(), uid.to_owned()));
                }
            }
            return;
        }
        let (Some(name), Some(rv), Some(uid)) = (
            body["metadata"]["name"].as_str(),
            body["metadata"]["resourceVersion"].as_str(),
            body["metadata"]["uid"].as_str(),
        ) else {
            return;
        };
        let key = if method == "POST" && !path.ends_with(&format!("/{name}")) {
            format!("{path}/{name}")
        } else if path.ends_with(&format!("/{name}")) {
            path
        } else if let Some((parent, _)) = path.rsplit_once('/') {
            parent.to_owned()
        } else {
            return;
        };
        self.objects.insert(key, (rv.to_owned(), uid.to_owned()));
    }
}

fn replace_bytes(haystack: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

fn decode_body(bytes: &[u8], content_type: &str, watch: bool) -> Value {
    if content_type.contains("protobuf") {
        return json!(format!("<protobuf>"));
    }
    if watch {
        let events: Vec<Value> = String::from_utf8_lossy(bytes)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|_| json!(l)))
            .collect();
        return Value::Array(events);
    }
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(bytes)))
}

// ---------------------------------------------------------------------------------------------
// Normalising what legitimately differs

/// Whether `s` is a UUID (8-4-4-4-12 hexadecimal digits).
fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// Replaces every UUID inside `s`.
fn mask_uuids(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < s.len() {
        if i + 36 <= s.len() && s.is_char_boundary(i + 36) && is_uuid(&s[i..i + 36]) {
            out.push_str("<uid>");
            i += 36;
        } else {
            let ch = s[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    let _ = bytes;
    out
}

/// Whether `s` is an RFC 3339 time (`2026-12-07T03:04:05Z`, with or without fractions).
fn is_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[..4].iter().all(u8::is_ascii_digit)
        && (s.ends_with('Z') || s[19..].contains('+') || s[19..].contains('-'))
}

/// Normalises one answer's JSON in place: see the module's documentation and
/// docs/emulator.md, "Differential suite", for each rule and why it is not a difference.
fn normalise(value: &mut Value, ns: &str) {
    match value {
        Value::String(s) => {
            let mut t = s.replace(ns, NS_PLACEHOLDER);
            if is_time(&t) {
                t = "<time>".to_owned();
            }
            t = mask_uuids(&t);
            *s = t;
        }
        Value::Array(items) => {
            for item in items {
                normalise(item, ns);
            }
        }
        Value::Object(map) => {
            // What the real controllers write after the answer, at their own pace: a
            // workload's status, the deployment revision, their managedFields entries.
            let workload = map.get("spec").is_some_and(|spec| {
                spec.get("template").is_some() || spec.get("jobTemplate").is_some()
            }) && map.contains_key("metadata");
            if workload {
                map.remove("status");
            }
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                for key in [
                    "uid",
                    "resourceVersion",
                    "creationTimestamp",
                    "deletionTimestamp",
                ] {
                    if meta.get(key).is_some_and(|v| !v.is_null()) {
                        meta.insert(key.to_owned(), json!(format!("<{key}>")));
                    }
                }
                if meta.contains_key("continue") {
                    meta.insert("continue".to_owned(), json!("<continue>"));
                }
                if meta.contains_key("generateName") {
                    meta.insert("name".to_owned(), json!("<generated>"));
                }
                if let Some(Value::Object(annotations)) = meta.get_mut("annotations") {
                    annotations.remove("deployment.kubernetes.io/revision");
                    if annotations.is_empty() {
                        meta.remove("annotations");
                    }
                }
                if let Some(Value::Array(entries)) = meta.get_mut("managedFields") {
                    // Entries are ordered by their times, which differ: compare them by
                    // operation, manager, version and subresource.
                    entries.sort_by_key(|e| {
                        ["operation", "manager", "apiVersion", "subresource"]
                            .map(|k| e[k].as_str().unwrap_or("").to_owned())
                    });
                    entries.retain(|e| {
                        !matches!(
                            e["manager"].as_str(),
                            Some("kube-controller-manager" | "kwok" | "kube-scheduler")
                        )
                    });
                    if entries.is_empty() {
                        meta.remove("managedFields");
                    }
                }
            }
            // The kube-root-ca.crt ConfigMap holds each server's own CA.
            if map
                .get("metadata")
                .and_then(|m| m.get("name"))
                .is_some_and(|n| n == "kube-root-ca.crt")
                && let Some(Value::Object(data)) = map.get_mut("data")
            {
                data.insert("ca.crt".to_owned(), json!("<ca>"));
            }
            // A Service's cluster IPs are allocated from each server's range.
            if let Some(Value::Object(spec)) = map.get_mut("spec") {
                if spec.contains_key("clusterIP") {
                    spec.insert("clusterIP".to_owned(), json!("<ip>"));
                }
                if spec.contains_key("clusterIPs") {
                    spec.insert("clusterIPs".to_owned(), json!(["<ip>"]));
                }
            }
            // A TokenRequest's token is the server's own.
            if map.get("kind").is_some_and(|k| k == "TokenRequest")
                && let Some(Value::Object(status)) = map.get_mut("status")
                && status.contains_key("token")
            {
                status.insert("token".to_owned(), json!("<token>"));
            }
            // A Table's Age column is the time between creation and the answer; a Service's
            // Cluster-IP is allocated from each server's range.
            if map.get("kind").is_some_and(|k| k == "Table") {
                let columns: Vec<usize> = map["columnDefinitions"]
                    .as_array()
                    .map(|cols| {
                        cols.iter()
                            .enumerate()
                            .filter(|(_, c)| c["name"] == "Age" || c["name"] == "Cluster-IP")
                            .map(|(i, _)| i)
                            .collect()
                    })
                    .unwrap_or_default();
                if let Some(Value::Array(rows)) = map.get_mut("rows") {
                    for row in rows {
                        for &i in &columns {
                            if let Some(cell) = row.get_mut("cells").and_then(|c| c.get_mut(i)) {
                                *cell = json!("<masked>");
                            }
                        }
                    }
                }
            }
            for (_, v) in map.iter_mut() {
                normalise(v, ns);
            }
        }
        _ => {}
    }
}

/// The watch events worth comparing: bookmarks are the server's to send when it likes (the
/// real watch cache sends one shortly before `timeoutSeconds` ends, the emulator about once a
/// minute), so only the `k8s.io/initial-events-end` one is kept.
fn without_timed_bookmarks(events: &mut Vec<Value>) {
    events.retain(|e| {
        e["type"] != "BOOKMARK"
            || e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
    });
}

/// "too old resource version: 1 (503)": the second number is the server's oldest one.
fn mask_too_old(value: &mut Value) {
    if let Some(message) = value.get_mut("message")
        && let Some(text) = message.as_str()
        && let Some(at) = text.find("too old resource version: ")
    {
        *message = json!(format!("{}too old resource version: <rv>", &text[..at]));
    }
}

fn compared(answer: &Answer, ns: &str, watch: bool) -> Value {
    let mut body = answer.body.clone();
    if watch && let Value::Array(events) = &mut body {
        without_timed_bookmarks(events);
        for event in events.iter_mut() {
            mask_too_old(&mut event["object"]);
        }
    }
    mask_too_old(&mut body);
    normalise(&mut body, ns);
    let media = answer
        .content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_owned();
    let mut warnings: Vec<Value> = answer
        .warnings
        .iter()
        .map(|w| json!(w.replace(ns, NS_PLACEHOLDER)))
        .collect();
    warnings.sort_by_key(ToString::to_string);
    json!({"status": answer.status, "contentType": media, "warnings": warnings, "body": body})
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Every leaf where `a` (emulator) and `b` (real) differ, as (JSON pointer, a, b).
fn diff(pointer: &str, a: &Value, b: &Value, out: &mut Vec<(String, Value, Value)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = format!("{pointer}/{}", escape(k));
                diff(
                    &p,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for i in 0..x.len().max(y.len()) {
                diff(
                    &format!("{pointer}/{i}"),
                    x.get(i).unwrap_or(&Value::Null),
                    y.get(i).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        _ if a == b => {}
        _ => out.push((pointer.to_owned(), a.clone(), b.clone())),
    }
}

// ---------------------------------------------------------------------------------------------
// The allow-list

/// A difference that is known and accepted, with its reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Allowed {
    /// Glob over `METHOD PATH?QUERY` (`*` within one `/`-separated part, `**` across them).
    request: String,
    /// Glob over the `Accept` header (`**`: any); absent: any.
    #[serde(default)]
    accept: Option<String>,
    /// Glob over the request's body (`**`: any); absent: any.
    #[serde(default)]
    body: Option<String>,
    /// Only requests that impersonate (`true`) or only those that do not (`false`); absent:
    /// both.
    #[serde(default)]
    impersonating: Option<bool>,
    /// Glob over the JSON pointer of the difference (`/status`, `/body/metadata/…`).
    pointer: String,
    /// Why it is allowed.
    reason: String,
}

impl Allowed {
    fn allows(&self, shape: &Shape, pointer: &str) -> bool {
        glob(&self.request, &format!("{} {}", shape.method, shape.path))
            && self
                .accept
                .as_ref()
                .is_none_or(|a| glob(a, shape.accept.as_deref().unwrap_or("")))
            && self
                .body
                .as_ref()
                .is_none_or(|b| glob(b, shape.body.as_deref().unwrap_or("")))
            && self
                .impersonating
                .is_none_or(|i| i == shape.impersonate_user.is_some())
            && glob(&self.pointer, pointer)
    }
}

/// `*` matches within one `/`-separated part, `**` across parts.
fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match p {
            [] => t.is_empty(),
            [b'*', b'*', rest @ ..] => (0..=t.len()).any(|i| go(rest, &t[i..])),
            [b'*', rest @ ..] => {
                let stop = t.iter().position(|&c| c == b'/').unwrap_or(t.len());
                (0..=stop).any(|i| go(rest, &t[i..]))
            }
            [c, rest @ ..] => t.first() == Some(c) && go(rest, &t[1..]),
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 300 {
        format!("{}…", s.chars().take(300).collect::<String>())
    } else {
        s
    }
}

// ---------------------------------------------------------------------------------------------
// The suite

fn replay_namespace() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let n = (u64::from(std::process::id()) * 1_000_003 + u64::from(nanos)) % 10_000_000;
    let ns = format!("dif{n:07}");
    assert_eq!(ns.len(), RECORD_NS.len());
    ns
}

async fn emulator() -> RunningEmulator {
    let mut builder = Emulator::builder();
    for (user, group) in rollsafe_testing::USERS {
        builder = builder.identity(user, &format!("{user}-token"), &[group]);
    }
    builder
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .expect("the emulator starts")
}

fn admin_shape(method: &str, path: &str, body: Option<Value>) -> Shape {
    Shape {
        source: "setup".to_owned(),
        method: method.to_owned(),
        path: path.to_owned(),
        user: "admin".to_owned(),
        accept: Some("application/json".to_owned()),
        content_type: body.as_ref().map(|_| "application/json".to_owned()),
        user_agent: None,
        impersonate_user: None,
        impersonate_groups: Vec::new(),
        body: body.map(|b| b.to_string()),
        body_base64: None,
    }
}

/// Creates the namespace and waits until it holds what a new namespace holds (on a real
/// cluster the `default` ServiceAccount and `kube-root-ca.crt` come moments later).
async fn prepare(target: &mut Target) {
    let ns = target.ns.clone();
    let created = target
        .send(&admin_shape(
            "POST",
            "/api/v1/namespaces",
            Some(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"rollsafe.dev/test": "true"}}})),
        ))
        .await;
    assert_eq!(created.status, 201, "{}: {:?}", target.name, created.body);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for path in [
        format!("/api/v1/namespaces/{ns}/serviceaccounts/default"),
        format!("/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt"),
    ] {
        loop {
            let answer = target.send(&admin_shape("GET", &path, None)).await;
            if answer.status == 200 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{}: {path} did not appear",
                target.name
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Named `…on_real` so that `cargo xtask test --substrate emulator` skips it and `--substrate
/// real` runs it, as the both-substrate suites' `on_real` tests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parity_with_kube_apiserver_on_real() {
    let info = rollsafe_testing::shared_control_plane();
    let corpus: Vec<Shape> = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("requests.json")).expect("the corpus"),
    )
    .expect("the corpus parses");
    let allowed: Vec<Allowed> = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("allowed.json")).expect("the allow-list"),
    )
    .expect("the allow-list parses");
    for entry in &allowed {
        assert!(!entry.reason.trim().is_empty(), "no reason: {entry:?}");
    }

    let emu = emulator().await;
    let dir = tempfile::tempdir().unwrap();
    let emu_kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&emu_kubeconfig).unwrap();
    let ns = replay_namespace();
    let mut emulated = Target::new("emulator", &emu_kubeconfig, &ns).await;
    let mut real = Target::new("real", &info.kubeconfig, &ns).await;
    prepare(&mut emulated).await;
    prepare(&mut real).await;
    // A real server's watch history starts long before the namespace: resourceVersion 1 is
    // too old there, and so it is here.
    emu.compact();

    // Per distinct shape: the worst outcome of its requests (0 identical, 1 allowed, 2 open).
    let mut outcome: BTreeMap<String, u8> = BTreeMap::new();
    let mut open = String::new();
    let mut used = vec![0_usize; allowed.len()];
    // Both answers of every request that differs, one JSON line each, for a closer look.
    let dump = std::env::var_os("ROLLSAFE_DIFFERENTIAL_DUMP").map(PathBuf::from);
    for (i, shape) in corpus.iter().enumerate() {
        let (a, b) = tokio::join!(emulated.send(shape), real.send(shape));
        let mut differences = Vec::new();
        let watch = shape.is_watch();
        let (x, y) = (compared(&a, &ns, watch), compared(&b, &ns, watch));
        diff("", &x, &y, &mut differences);
        if let Some(dump) = &dump
            && x != y
        {
            let line = json!({"i": i, "key": shape.key(), "source": shape.source, "emulator": x, "real": y});
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(dump)
                .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()))
                .unwrap();
        }
        let key = shape.key();
        let mut worst = 0;
        for (pointer, x, y) in differences {
            match allowed.iter().position(|e| e.allows(shape, &pointer)) {
                Some(e) => {
                    used[e] += 1;
                    worst = worst.max(1);
                }
                None => {
                    worst = 2;
                    let _ = writeln!(
                        open,
                        "#{i} [{}] {key}\n    {pointer}\n      emulator: {}\n      real:     {}",
                        shape.source,
                        short(&x),
                        short(&y)
                    );
                }
            }
        }
        let slot = outcome.entry(shape.distinct()).or_insert(0);
        *slot = (*slot).max(worst);
    }

    let count = |n: u8| outcome.values().filter(|&&v| v == n).count();
    let report = format!(
        "differential: {} requests, {} distinct request shapes compared against {}: {} identical, {} with allowed differences only, {} with open differences",
        corpus.len(),
        outcome.len(),
        info.version,
        count(0),
        count(1),
        count(2)
    );
    println!("{report}");
    for (entry, n) in allowed.iter().zip(&used) {
        if *n == 0 {
            println!(
                "allow-list entry matched nothing: {} {}",
                entry.request, entry.pointer
            );
        }
    }
    let _ = real
        .send(&admin_shape(
            "DELETE",
            &format!("/api/v1/namespaces/{ns}"),
            None,
        ))
        .await;
    emu.shutdown().await;
    assert!(
        open.is_empty(),
        "{report}\nunlisted differences (fix the emulator, or list them with a reason in tests/fixtures/differential/allowed.json):\n{open}"
    );
}

// ---------------------------------------------------------------------------------------------
// Recording the corpus

/// Records the corpus again from the emulator's request log:
/// `cargo test -p rollsafe-emulator --test differential -- --ignored record`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "writes tests/fixtures/differential/requests.json"]
async fn record() {
    let emu = emulator().await;
    emu.put_object(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": RECORD_NS}}))
        .unwrap();
    emu.compact();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    emu.write_kubeconfig(&kubeconfig).unwrap();
    emu.clear_requests();

    let mut shapes = Vec::new();
    let mut take = |source: &str, emu: &RunningEmulator| {
        for entry in emu.requests() {
            if let Some(shape) = shape_of(source, &entry) {
                shapes.push(shape);
            }
        }
        emu.clear_requests();
    };

    matrix(&kubeconfig).await;
    take("matrix", &emu);
    kube_crate(&kubeconfig).await;
    take("kube", &emu);
    for kubectl in kubectl_releases() {
        let version = kubectl
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("kubectl."))
            .unwrap_or("path")
            .to_owned();
        run_kubectl(&kubectl, &kubeconfig, dir.path());
        take(&format!("kubectl-{version}"), &emu);
    }
    if let Some(python) = python() {
        run_python(&python, &kubeconfig, dir.path());
        take("python", &emu);
    } else {
        eprintln!("no Python with the kubernetes package: the corpus has no Python requests");
    }

    let mut text = String::from("[\n");
    for (i, shape) in shapes.iter().enumerate() {
        text.push_str("  ");
        text.push_str(&serde_json::to_string(shape).unwrap());
        text.push_str(if i + 1 < shapes.len() { ",\n" } else { "\n" });
    }
    text.push_str("]\n");
    std::fs::create_dir_all(fixtures()).unwrap();
    std::fs::write(fixtures().join("requests.json"), text).unwrap();
    let distinct: BTreeSet<String> = shapes.iter().map(Shape::distinct).collect();
    println!(
        "recorded {} requests, {} distinct shapes",
        shapes.len(),
        distinct.len()
    );
    emu.shutdown().await;
}

/// A log entry as a corpus request: the namespace as `{{ns}}`, resourceVersions and uids that
/// name the current object as placeholders (kept as recorded where the request meant them to
/// be stale: a 409 or 422 answer).
fn shape_of(source: &str, entry: &RequestLogEntry) -> Option<Shape> {
    let user = match entry.user.as_deref() {
        Some("alice") => "alice",
        Some("bob") => "bob",
        Some(_) => "admin",
        // Unauthenticated requests are not in the corpus.
        None => return None,
    };
    let ns = |s: &str| s.replace(RECORD_NS, NS_PLACEHOLDER);
    let mut path = ns(&entry.path);
    if !entry.query.is_empty() {
        let query: Vec<String> = entry
            .query
            .split('&')
            .map(|p| match p.split_once('=') {
                Some(("resourceVersion", v)) if v.parse::<u64>().is_ok_and(|n| n > 9) => {
                    "resourceVersion={{listrv}}".to_owned()
                }
                Some(("continue", _)) => "continue={{continue}}".to_owned(),
                _ => ns(p),
            })
            .collect();
        path = format!("{path}?{}", query.join("&"));
    }
    let stale = matches!(entry.status, 409 | 422);
    let body = entry
        .body
        .as_deref()
        .map(|b| match serde_json::from_str::<Value>(b) {
            Ok(mut v) => {
                placeholders(&mut v, None, stale);
                ns(&v.to_string())
            }
            _ => ns(b),
        });
    Some(Shape {
        source: source.to_owned(),
        method: entry.method.clone(),
        path,
        user: user.to_owned(),
        accept: entry.accept.clone(),
        content_type: entry.content_type.clone(),
        user_agent: entry.user_agent.clone(),
        impersonate_user: entry.impersonated_user.clone(),
        impersonate_groups: entry.impersonated_groups.clone(),
        body,
        body_base64: entry.body_base64.clone(),
    })
}

/// `{{rv}}` and `{{uid}}` for an object's own resourceVersion and uid, in objects and in JSON
/// Patch operations on them; with `stale`, resourceVersions stay as recorded (the request meant
/// an old one).
fn placeholders(value: &mut Value, parent: Option<&str>, stale: bool) {
    match value {
        Value::Object(map) => {
            if let (Some(Value::String(path)), true) = (map.get("path"), map.contains_key("op")) {
                let placeholder = match path.as_str() {
                    "/metadata/resourceVersion" if !stale => Some("{{rv}}"),
                    "/metadata/uid" => Some("{{uid}}"),
                    _ => None,
                };
                if let (Some(p), true) = (placeholder, map.contains_key("value")) {
                    map.insert("value".to_owned(), json!(p));
                }
            }
            let in_meta = matches!(parent, Some("metadata" | "preconditions"));
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &*v) {
                    ("resourceVersion", Value::String(_)) if in_meta && !stale => {
                        *v = json!("{{rv}}");
                    }
                    ("uid", Value::String(_)) if in_meta => *v = json!("{{uid}}"),
                    _ => placeholders(v, Some(k), stale),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|i| placeholders(i, parent, stale)),
        _ => {}
    }
}

fn kubectl_releases() -> Vec<PathBuf> {
    rollsafe_testing::kubectl_releases()
}

fn python() -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.ci/venv/bin/python");
    let python = std::env::var_os("ROLLSAFE_PYTHON")
        .map(PathBuf::from)
        .or_else(|| venv.exists().then_some(venv))?;
    std::process::Command::new(&python)
        .args(["-c", "import kubernetes"])
        .output()
        .is_ok_and(|o| o.status.success())
        .then_some(python)
}

fn run_python(python: &Path, kubeconfig: &Path, dir: &Path) {
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/python/conformance.py"),
    )
    .unwrap()
    .replace("NS = \"conformance\"", &format!("NS = \"{RECORD_NS}\""))
    // The namespace is there already (the replay creates its own).
    .replace(
        "    client.CoreV1Api(api).create_namespace(",
        "    0 and client.CoreV1Api(api).create_namespace(",
    );
    let path = dir.join("conformance.py");
    std::fs::write(&path, script).unwrap();
    let output = std::process::Command::new(python)
        .arg(&path)
        .arg(kubeconfig)
        .output()
        .unwrap();
    eprintln!(
        "python: {}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

const APP_YAML: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: kc-app
  labels: {tier: web}
data:
  a: \"1\"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kc-api
spec:
  replicas: 0
  selector:
    matchLabels: {app: kc-api}
  template:
    metadata:
      labels: {app: kc-api}
    spec:
      containers:
      - name: api
        image: registry.example/api:1
";

/// The kubectl session each release runs, in `RECORD_NS`; it leaves nothing behind.
fn run_kubectl(kubectl: &Path, kubeconfig: &Path, dir: &Path) {
    let app = dir.join("app.yaml");
    std::fs::write(&app, APP_YAML).unwrap();
    let app2 = dir.join("app2.yaml");
    std::fs::write(
        &app2,
        APP_YAML
            .replace("a: \"1\"", "a: \"2\"")
            .replace("api:1", "api:2"),
    )
    .unwrap();
    let editor = dir.join("editor.sh");
    std::fs::write(
        &editor,
        "#!/bin/sh\nsed -i 's/^  a: \"2\"/  a: \"3\"/' \"$1\"\n",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&editor, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let cache = tempfile::tempdir().unwrap();
    let app = app.to_str().unwrap();
    let app2 = app2.to_str().unwrap();
    let sessions: Vec<Vec<&str>> = vec![
        vec!["create", "configmap", "kc-cm", "--from-literal=a=1"],
        vec!["create", "configmap", "kc-cm", "--from-literal=a=1"],
        vec!["get", "configmap", "kc-cm"],
        vec!["get", "configmap", "kc-cm", "-o", "json"],
        vec![
            "get",
            "configmap",
            "kc-cm",
            "-o",
            "yaml",
            "--show-managed-fields",
        ],
        vec!["get", "configmaps", "-o", "wide"],
        vec!["get", "configmaps", "-l", "tier=web"],
        vec![
            "get",
            "configmaps",
            "--field-selector",
            "metadata.name=kc-cm",
        ],
        vec!["get", "configmap", "kc-missing"],
        vec!["label", "configmap", "kc-cm", "tier=web"],
        vec!["annotate", "configmap", "kc-cm", "note=x"],
        vec!["patch", "configmap", "kc-cm", "-p", r#"{"data":{"b":"2"}}"#],
        vec![
            "patch",
            "configmap",
            "kc-cm",
            "--type=merge",
            "-p",
            r#"{"data":{"c":"3"}}"#,
        ],
        vec![
            "patch",
            "configmap",
            "kc-cm",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/data/d","value":"4"}]"#,
        ],
        vec!["describe", "configmap", "kc-cm"],
        vec![
            "create",
            "secret",
            "generic",
            "kc-secret",
            "--from-literal=password=p",
        ],
        vec![
            "get",
            "secret",
            "kc-secret",
            "-o",
            "jsonpath={.data.password}",
        ],
        vec!["create", "serviceaccount", "kc-sa"],
        vec!["create", "token", "kc-sa"],
        vec![
            "create",
            "role",
            "kc-role",
            "--verb=get,list",
            "--resource=configmaps",
        ],
        vec![
            "create",
            "rolebinding",
            "kc-rb",
            "--role=kc-role",
            "--user=alice",
        ],
        vec!["create", "service", "clusterip", "kc-svc", "--tcp=80:8080"],
        vec![
            "create",
            "deployment",
            "kc-web",
            "--image=registry.example/web:1",
            "--replicas=0",
        ],
        vec![
            "create",
            "cronjob",
            "kc-cron",
            "--image=registry.example/job:1",
            "--schedule=*/5 * * * *",
        ],
        vec!["get", "deployment", "kc-web", "-o", "yaml"],
        vec![
            "set",
            "image",
            "deployment/kc-web",
            "web=registry.example/web:2",
        ],
        vec!["scale", "deployment", "kc-web", "--replicas=0"],
        vec!["rollout", "restart", "deployment/kc-web"],
        vec!["apply", "-f", app],
        vec!["apply", "-f", app2],
        vec!["apply", "--dry-run=server", "-f", app],
        vec!["apply", "--server-side", "--force-conflicts", "-f", app],
        vec!["diff", "-f", app2],
        vec!["replace", "-f", app2],
        vec!["get", "configmaps,secrets"],
        vec!["get", "configmap", "kc-app", "-o", "name"],
        vec!["get", "configmaps", "--watch", "--request-timeout=1s"],
        vec!["auth", "can-i", "create", "configmaps"],
        vec!["auth", "can-i", "--list"],
        vec!["auth", "whoami"],
        vec!["get", "configmaps", "--as=alice"],
        vec!["get", "configmaps", "--as=bob", "--as-group=ops"],
        vec!["get", "configmaps", "--context=alice"],
        vec!["delete", "-f", app],
        vec!["delete", "configmap", "kc-cm"],
        vec!["delete", "secret/kc-secret", "serviceaccount/kc-sa"],
        vec![
            "delete",
            "role/kc-role",
            "rolebinding/kc-rb",
            "service/kc-svc",
        ],
        vec!["delete", "deployment/kc-web", "cronjob/kc-cron"],
    ];
    for args in sessions {
        let edit = args.first() == Some(&"edit");
        let output = std::process::Command::new(kubectl)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--cache-dir={}", cache.path().display()))
            .arg(format!("--namespace={RECORD_NS}"))
            .args(&args)
            .env("KUBE_EDITOR", &editor)
            .env("HOME", dir)
            .output()
            .unwrap();
        if !output.status.success() && !edit {
            eprintln!(
                "{} {}: {}",
                kubectl.display(),
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
    }
    let output = std::process::Command::new(kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={RECORD_NS}"))
        .args(["create", "configmap", "kc-edit", "--from-literal=a=2"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let _ = std::process::Command::new(kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={RECORD_NS}"))
        .args(["edit", "configmap", "kc-edit"])
        .env("KUBE_EDITOR", &editor)
        .env("EDITOR", &editor)
        .output()
        .unwrap();
    let _ = std::process::Command::new(kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--namespace={RECORD_NS}"))
        .args(["delete", "configmap", "kc-edit"])
        .output()
        .unwrap();
}

/// The `kube` crate's typed calls, as rollsafe makes them.
async fn kube_crate(kubeconfig: &Path) {
    use futures::StreamExt as _;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};

    let client = client_for(kubeconfig, "admin").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), RECORD_NS);
    let cm = |name: &str, tier: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name, "labels": {"tier": tier}},
            "data": {"k": "v"}}))
        .unwrap()
    };
    let _ = cms
        .create(&PostParams::default(), &cm("kube-a", "web"))
        .await;
    let _ = cms
        .create(&PostParams::default(), &cm("kube-b", "db"))
        .await;
    let _ = cms
        .create(
            &PostParams {
                dry_run: true,
                field_manager: Some("rollsafe".to_owned()),
            },
            &cm("kube-dry", "web"),
        )
        .await;
    let _ = cms.get("kube-a").await;
    let _ = cms.get_opt("kube-missing").await;
    let _ = cms.get_metadata("kube-a").await;
    let _ = cms.list(&ListParams::default().labels("tier=web")).await;
    let _ = cms
        .list(&ListParams::default().labels("tier in (web,db),tier!=x"))
        .await;
    let _ = cms
        .list(&ListParams::default().fields("metadata.name=kube-b"))
        .await;
    let _ = cms.list_metadata(&ListParams::default()).await;
    let first = cms.list(&ListParams::default().limit(1)).await.unwrap();
    if let Some(token) = first.metadata.continue_ {
        let _ = cms
            .list(&ListParams::default().limit(1).continue_token(&token))
            .await;
    }
    let _ = cms.list(&ListParams::default().match_any().limit(2)).await;
    let _ = cms
        .patch(
            "kube-a",
            &PatchParams::apply("rollsafe").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-a"}, "data": {"applied": "yes"}})),
        )
        .await;
    let _ = cms
        .patch(
            "kube-a",
            &PatchParams::apply("other"),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kube-a"}, "data": {"applied": "no"}})),
        )
        .await;
    let _ = cms
        .patch(
            "kube-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"m": "1"}}})),
        )
        .await;
    let _ = cms
        .patch(
            "kube-a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"labels": {"s": "1"}}})),
        )
        .await;
    let current = cms.get("kube-a").await.unwrap();
    let json_patch: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/uid", "value": current.metadata.uid},
        {"op": "test", "path": "/metadata/resourceVersion", "value": current.metadata.resource_version},
        {"op": "add", "path": "/metadata/annotations/rolled", "value": "yes"}
    ]))
    .unwrap();
    let _ = cms
        .patch(
            "kube-a",
            &PatchParams::default(),
            &Patch::Json::<()>(json_patch),
        )
        .await;
    let mut replaced = cms.get("kube-a").await.unwrap();
    replaced.data = Some([("k".to_owned(), "w".to_owned())].into());
    let _ = cms
        .replace("kube-a", &PostParams::default(), &replaced)
        .await;
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap_or_default();
    if let Ok(stream) = cms
        .watch(&WatchParams::default().timeout(1).labels("tier=db"), "0")
        .await
    {
        let _ = tokio::time::timeout(Duration::from_secs(3), stream.collect::<Vec<_>>()).await;
    }
    if let Ok(stream) = cms.watch(&WatchParams::default().timeout(1), &rv).await {
        let _ = tokio::time::timeout(Duration::from_secs(3), stream.collect::<Vec<_>>()).await;
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), RECORD_NS);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "kube-web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "kube-web"}},
            "template": {"metadata": {"labels": {"app": "kube-web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.example/web:1"}]}}}
    }))
    .unwrap();
    let _ = deployments
        .create(&PostParams::default(), &deployment)
        .await;
    let _ = deployments.restart("kube-web").await;
    let _ = deployments.get_scale("kube-web").await;
    let _ = deployments
        .patch(
            "kube-web",
            &PatchParams::apply("rollsafe").force(),
            &Patch::Apply(json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "kube-web", "annotations": {"a": "1"}}})),
        )
        .await;
    let _ = deployments
        .delete("kube-web", &DeleteParams::default())
        .await;
    let _ = cms
        .delete("kube-a", &DeleteParams::default().dry_run())
        .await;
    let _ = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("tier"),
        )
        .await;
}

/// A served kind of the matrix: its collection path, an object of it, and whether the real
/// controllers act on it (then no PUT with a resourceVersion: they may have moved it on).
struct Kind {
    collection: &'static str,
    object: fn(&str) -> Value,
    controlled: bool,
}

fn pod_template(name: &str) -> Value {
    json!({"metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}})
}

fn kinds() -> Vec<Kind> {
    // Events first: later, the real controllers record Events of their own in the namespace.
    vec![
        Kind {
            collection: "/api/v1/namespaces/{{ns}}/events",
            object: |n| {
                json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": n},
                "involvedObject": {"kind": "ConfigMap", "name": n, "namespace": RECORD_NS},
                "reason": "Tested", "message": "a test event", "type": "Normal",
                "source": {"component": "differential"}})
            },
            controlled: false,
        },
        Kind {
            collection: "/api/v1/namespaces/{{ns}}/configmaps",
            object: |n| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"a": "1"}}),
            controlled: false,
        },
        Kind {
            collection: "/api/v1/namespaces/{{ns}}/secrets",
            object: |n| json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": n}, "type": "Opaque", "stringData": {"password": "p"}}),
            controlled: false,
        },
        Kind {
            collection: "/api/v1/namespaces/{{ns}}/serviceaccounts",
            object: |n| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": n}}),
            controlled: false,
        },
        Kind {
            collection: "/api/v1/namespaces/{{ns}}/services",
            object: |n| {
                json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": n},
                "spec": {"selector": {"app": n}, "ports": [{"port": 80, "targetPort": 8080}]}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/apps/v1/namespaces/{{ns}}/deployments",
            object: |n| {
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": n},
                "spec": {"replicas": 0, "selector": {"matchLabels": {"app": n}}, "template": pod_template(n)}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/apps/v1/namespaces/{{ns}}/statefulsets",
            object: |n| {
                json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": n},
                "spec": {"replicas": 0, "serviceName": n, "selector": {"matchLabels": {"app": n}}, "template": pod_template(n)}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/apps/v1/namespaces/{{ns}}/daemonsets",
            object: |n| {
                json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": n},
                "spec": {"selector": {"matchLabels": {"app": n}}, "template": pod_template(n)}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/batch/v1/namespaces/{{ns}}/jobs",
            object: |n| {
                json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": n},
                "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "job", "image": "registry.example/job:1"}]}}}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/batch/v1/namespaces/{{ns}}/cronjobs",
            object: |n| {
                json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": n},
                "spec": {"schedule": "*/5 * * * *", "suspend": true, "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "job", "image": "registry.example/job:1"}]}}}}}})
            },
            controlled: true,
        },
        Kind {
            collection: "/apis/networking.k8s.io/v1/namespaces/{{ns}}/ingresses",
            object: |n| {
                json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": n},
                "spec": {"rules": [{"host": "shop.example", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                    "backend": {"service": {"name": n, "port": {"number": 80}}}}]}}]}})
            },
            controlled: false,
        },
        Kind {
            collection: "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/roles",
            object: |n| {
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": n},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]})
            },
            controlled: false,
        },
        Kind {
            collection: "/apis/rbac.authorization.k8s.io/v1/namespaces/{{ns}}/rolebindings",
            object: |n| {
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": n},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": n},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})
            },
            controlled: false,
        },
        Kind {
            collection: "/apis/coordination.k8s.io/v1/namespaces/{{ns}}/leases",
            object: |n| {
                json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": n},
                "spec": {"holderIdentity": "replica-a", "leaseDurationSeconds": 15}})
            },
            controlled: false,
        },
    ]
}

const JSON: &str = "application/json";
const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf,application/json";
const MERGE: &str = "application/merge-patch+json";
const STRATEGIC: &str = "application/strategic-merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// One request of the matrix, sent to the recording emulator.
struct Req<'a> {
    client: &'a kube::Client,
    method: &'a str,
    path: String,
    accept: &'a str,
    content_type: Option<&'a str>,
    impersonate: Option<(&'a str, &'a [&'a str])>,
    body: Option<String>,
}

impl Req<'_> {
    async fn send(self) -> Value {
        let mut request = http::Request::builder()
            .method(self.method)
            .uri(self.path.replace(NS_PLACEHOLDER, RECORD_NS))
            .header("Accept", self.accept)
            .header("User-Agent", "differential/v1");
        if let Some(ct) = self.content_type {
            request = request.header("Content-Type", ct);
        }
        if let Some((user, groups)) = self.impersonate {
            request = request.header("Impersonate-User", user);
            for g in groups {
                request = request.header("Impersonate-Group", *g);
            }
        }
        let body = self
            .body
            .map(|b| b.replace(NS_PLACEHOLDER, RECORD_NS).into_bytes())
            .unwrap_or_default();
        let request = request.body(kube::client::Body::from(body)).unwrap();
        let response = self.client.send(request).await.unwrap();
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        while let Ok(Some(Ok(frame))) = tokio::time::timeout_at(deadline, body.frame()).await {
            if let Ok(data) = frame.into_data() {
                bytes.extend_from_slice(&data);
            }
        }
        serde_json::from_slice(&bytes).unwrap_or(Value::Null)
    }
}

/// The hand-written matrix: every kind × the ways clients read and write it, and the errors.
#[expect(clippy::too_many_lines, reason = "one list of requests")]
async fn matrix(kubeconfig: &Path) {
    let admin = client_for(kubeconfig, "admin").await;
    let alice = client_for(kubeconfig, "alice").await;
    let req = |method: &'static str, path: String| Req {
        client: &admin,
        method,
        path,
        accept: JSON,
        content_type: None,
        impersonate: None,
        body: None,
    };
    for kind in kinds() {
        let c = kind.collection;
        let stem = c.rsplit('/').next().unwrap();
        let stem = &stem[..stem.len().min(6)];
        let (a, b) = (format!("{stem}-a"), format!("{stem}-b"));
        let mut obj_a = (kind.object)(&a);
        obj_a["metadata"]["labels"] = json!({"tier": "web"});
        let mut obj_b = (kind.object)(&b);
        obj_b["metadata"]["labels"] = json!({"tier": "db"});
        let post = |body: &Value, query: &str| Req {
            content_type: Some(JSON),
            body: Some(body.to_string()),
            ..req("POST", format!("{c}{query}"))
        };
        post(&obj_a, "").send().await;
        post(&obj_b, "?fieldValidation=Strict&fieldManager=differential")
            .send()
            .await;
        post(&obj_a, "").send().await; // 409 AlreadyExists
        post(&(kind.object)(&format!("{stem}-dry")), "?dryRun=All")
            .send()
            .await;
        // (Not for Events: kube-apiserver 1.37 does not check their names.)
        if !c.ends_with("/events") {
            let mut invalid = (kind.object)("Not_A_Name");
            invalid["metadata"]["labels"] = json!({"tier": "web"});
            post(&invalid, "").send().await; // 422
        }
        let mut unknown = (kind.object)(&format!("{stem}-unknown"));
        unknown["spec2"] = json!({"x": 1});
        post(&unknown, "?fieldValidation=Strict&dryRun=All")
            .send()
            .await; // 400
        post(&unknown, "?fieldValidation=Warn&dryRun=All")
            .send()
            .await; // warning
        let one = format!("{c}/{a}");
        for accept in [JSON, TABLE, METADATA, PROTOBUF] {
            Req {
                accept,
                ..req("GET", one.clone())
            }
            .send()
            .await;
        }
        req("GET", format!("{c}/{stem}-missing")).send().await;
        for accept in [JSON, TABLE, METADATA_LIST, PROTOBUF] {
            Req {
                accept,
                ..req("GET", format!("{c}?limit=500"))
            }
            .send()
            .await;
        }
        for query in [
            "labelSelector=tier%3Dweb",
            "labelSelector=tier%20in%20%28web%2Cdb%29",
            "labelSelector=tier%2Ctier%21%3Dweb",
            "labelSelector=%21tier",
            &format!("fieldSelector=metadata.name%3D{b}"),
            &format!("fieldSelector=metadata.name%21%3D{b}"),
            "fieldSelector=spec.nothing%3Dx",
            "labelSelector=tier%3D%3D%3Dweb",
            "limit=1",
            "limit=1&continue={{continue}}",
            "resourceVersion=0",
            "resourceVersionMatch=NotOlderThan&resourceVersion={{listrv}}",
        ] {
            req("GET", format!("{c}?{query}")).send().await;
        }
        let patch = |ct: &'static str, body: Value, query: &str| Req {
            content_type: Some(ct),
            body: Some(body.to_string()),
            ..req("PATCH", format!("{one}{query}"))
        };
        patch(
            MERGE,
            json!({"metadata": {"labels": {"merged": "yes"}}}),
            "",
        )
        .send()
        .await;
        if !c.contains("external") {
            patch(
                STRATEGIC,
                json!({"metadata": {"annotations": {"strategic": "yes"}}}),
                "",
            )
            .send()
            .await;
        }
        patch(
            JSON_PATCH,
            json!([{"op": "add", "path": "/metadata/annotations/json", "value": "yes"}]),
            "",
        )
        .send()
        .await;
        patch(
            JSON_PATCH,
            json!([{"op": "test", "path": "/metadata/labels/tier", "value": "nope"}]),
            "",
        )
        .send()
        .await; // 422
        let current = req("GET", one.clone()).send().await;
        patch(
            JSON_PATCH,
            json!([{"op": "test", "path": "/metadata/uid", "value": current["metadata"]["uid"]},
                   {"op": "test", "path": "/metadata/resourceVersion", "value": current["metadata"]["resourceVersion"]},
                   {"op": "add", "path": "/metadata/annotations/rolled", "value": "yes"}]),
            "",
        )
        .send()
        .await;
        let api_version = obj_a["apiVersion"].clone();
        let kind_name = obj_a["kind"].clone();
        let applied = json!({"apiVersion": api_version, "kind": kind_name,
            "metadata": {"name": a, "labels": {"applied": "yes"}}});
        patch(
            APPLY,
            applied.clone(),
            "?fieldManager=differential&force=true",
        )
        .send()
        .await;
        let conflicting = json!({"apiVersion": api_version, "kind": kind_name,
            "metadata": {"name": a, "labels": {"applied": "no"}}});
        patch(APPLY, conflicting, "?fieldManager=other")
            .send()
            .await; // 409 conflict
        patch(APPLY, applied.clone(), "?force=true").send().await; // 400: no manager
        patch(
            MERGE,
            json!({"metadata": {"labels": {"dry": "yes"}}}),
            "?dryRun=All",
        )
        .send()
        .await;
        patch("text/plain", json!({}), "").send().await; // 415
        Req {
            content_type: Some(MERGE),
            body: Some(json!({"metadata": {"labels": {"x": "1"}}}).to_string()),
            ..req("PATCH", format!("{c}/{stem}-missing"))
        }
        .send()
        .await; // 404
        Req {
            impersonate: Some(("alice", &["devs"])),
            content_type: Some(MERGE),
            body: Some(json!({"metadata": {"labels": {"alice": "yes"}}}).to_string()),
            ..req("PATCH", one.clone())
        }
        .send()
        .await; // 403
        Req {
            client: &alice,
            ..req("GET", one.clone())
        }
        .send()
        .await; // 403
        Req {
            impersonate: Some(("bob", &[])),
            ..req("GET", c.to_owned())
        }
        .send()
        .await; // 403
        if !kind.controlled {
            let mut current = req("GET", one.clone()).send().await;
            current["metadata"]["annotations"] = json!({"replaced": "yes"});
            Req {
                content_type: Some(JSON),
                body: Some(current.to_string()),
                ..req("PUT", one.clone())
            }
            .send()
            .await;
            let mut stale = current.clone();
            stale["metadata"]["resourceVersion"] = json!("1");
            Req {
                content_type: Some(JSON),
                body: Some(stale.to_string()),
                ..req("PUT", one.clone())
            }
            .send()
            .await; // 409
        }
        Req {
            content_type: Some(JSON),
            body: Some(
                json!({"kind": "DeleteOptions", "apiVersion": "v1", "dryRun": ["All"]}).to_string(),
            ),
            ..req("DELETE", one.clone())
        }
        .send()
        .await;
        let mut watches = vec![
            "watch=true&labelSelector=tier%3Ddb&timeoutSeconds=1",
            "watch=1&resourceVersion=0&fieldSelector=metadata.name%3D{b}&timeoutSeconds=1",
        ];
        // The changes since a list: not of kinds the real controllers write meanwhile.
        if !kind.controlled {
            watches.push(
                "watch=true&allowWatchBookmarks=true&resourceVersion={{listrv}}&timeoutSeconds=1",
            );
        }
        for query in watches {
            req("GET", format!("{c}?{}", query.replace("{b}", &b)))
                .send()
                .await;
        }
        Req {
            content_type: Some(JSON),
            body: Some(json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}).to_string()),
            ..req("DELETE", one.clone())
        }
        .send()
        .await;
        req("GET", one.clone()).send().await; // 404
        req("DELETE", one.clone()).send().await; // 404
        req("DELETE", format!("{c}?labelSelector=tier"))
            .send()
            .await;
        req("GET", c.to_owned()).send().await;
    }

    // Subresources, reviews, discovery and odd requests.
    let dep = "/apis/apps/v1/namespaces/{{ns}}/deployments";
    let deployment = (kinds()[5].object)("scaled");
    Req {
        content_type: Some(JSON),
        body: Some(deployment.to_string()),
        ..req("POST", dep.to_owned())
    }
    .send()
    .await;
    for accept in [JSON, PROTOBUF] {
        Req {
            accept,
            ..req("GET", format!("{dep}/scaled/scale"))
        }
        .send()
        .await;
    }
    Req {
        content_type: Some(MERGE),
        body: Some(json!({"spec": {"replicas": 0}}).to_string()),
        ..req("PATCH", format!("{dep}/scaled/scale"))
    }
    .send()
    .await;
    req("GET", format!("{dep}/scaled/status")).send().await;
    Req {
        content_type: Some(MERGE),
        body: Some(json!({"spec": {"paused": true}}).to_string()),
        ..req("PATCH", format!("{dep}/scaled"))
    }
    .send()
    .await;
    req("DELETE", format!("{dep}/scaled")).send().await;
    let reviews = [
        (
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": {"namespace": "{{ns}}", "verb": "patch", "group": "apps", "resource": "deployments"}}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/subjectaccessreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": "alice", "groups": ["devs"], "resourceAttributes": {"namespace": "{{ns}}", "verb": "get", "resource": "secrets"}}}),
        ),
        (
            "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": "{{ns}}"}}),
        ),
        (
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        ),
    ];
    for (path, body) in &reviews {
        for impersonate in [
            None,
            Some(("alice", &["devs"][..])),
            Some(("bob", &["ops"][..])),
        ] {
            Req {
                content_type: Some(JSON),
                body: Some(body.to_string()),
                impersonate,
                ..req("POST", (*path).to_owned())
            }
            .send()
            .await;
        }
    }
    let sa = "/api/v1/namespaces/{{ns}}/serviceaccounts";
    Req {
        content_type: Some(JSON),
        body: Some(
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}})
                .to_string(),
        ),
        ..req("POST", sa.to_owned())
    }
    .send()
    .await;
    for seconds in [3600, 60] {
        Req {
            content_type: Some(JSON),
            body: Some(
                json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}})
                .to_string(),
            ),
            ..req("POST", format!("{sa}/robot/token"))
        }
        .send()
        .await;
    }
    let cms = "/api/v1/namespaces/{{ns}}/configmaps";
    Req {
        content_type: Some(JSON),
        body: Some(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})
                .to_string(),
        ),
        ..req("POST", format!("{cms}?dryRun=All"))
    }
    .send()
    .await;
    Req {
        content_type: Some(JSON),
        body: Some("{not json".to_owned()),
        ..req("POST", cms.to_owned())
    }
    .send()
    .await;
    Req {
        content_type: Some(JSON),
        body: Some(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "wrong-kind"}})
                .to_string(),
        ),
        ..req("POST", cms.to_owned())
    }
    .send()
    .await;
    Req {
        content_type: Some(JSON),
        body: Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other-ns", "namespace": "elsewhere"}}).to_string()),
        ..req("POST", cms.to_owned())
    }
    .send()
    .await;
    Req {
        content_type: Some(JSON),
        body: Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}, "data": {"bad key": "x"}}).to_string()),
        ..req("POST", cms.to_owned())
    }
    .send()
    .await;
    req("GET", format!("{cms}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")).send().await;
    req("GET", format!("{cms}?continue=notatoken")).send().await;
    req("PUT", cms.to_owned()).send().await; // 405
    req("GET", "/api/v1/namespaces/{{ns}}".to_owned())
        .send()
        .await;
    Req {
        accept: TABLE,
        ..req("GET", "/api/v1/namespaces/{{ns}}".to_owned())
    }
    .send()
    .await;
    req(
        "GET",
        "/api/v1/namespaces/does-not-exist/configmaps/x".to_owned(),
    )
    .send()
    .await;
    req("GET", "/api/v1/nothing".to_owned()).send().await;
    req(
        "GET",
        "/apis/apps/v1/deployments?limit=1&labelSelector=nothing%3Dhere".to_owned(),
    )
    .send()
    .await;
    req(
        "GET",
        "/api/v1/configmaps?fieldSelector=metadata.namespace%3D{{ns}}".to_owned(),
    )
    .send()
    .await;
    req("GET", "/no/such/path".to_owned()).send().await;
    req("GET", "/version".to_owned()).send().await;
}
