//! Property and mutation tests over what clients send: request paths, queries, methods, content
//! types and bodies (mutations of real objects and patches). Whatever arrives, the emulator
//! answers (never a panic or a dropped connection), never with a 5xx for junk the real server
//! refuses with a 4xx, and every JSON error body is a well-formed `Status` whose `code` is the
//! HTTP status.
//!
//! Case counts are bounded (`PROPTEST_CASES` overrides them). Inputs that once broke the
//! emulator are kept in `REGRESSIONS` below and run on every `cargo test`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use rollsafe_emulator::RunningEmulator;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::runtime::Runtime;

/// One emulator for every case of a test binary, on its own runtime.
struct Target {
    rt: Runtime,
    emu: RunningEmulator,
}

/// Panics anywhere in this process (the emulator runs in it), counted by a hook.
static PANICS: AtomicUsize = AtomicUsize::new(0);
/// How often each status was answered: the generators must reach past the first checks.
static STATUSES: Mutex<BTreeMap<u16, usize>> = Mutex::new(BTreeMap::new());

fn target() -> &'static Target {
    static TARGET: OnceLock<Target> = OnceLock::new();
    TARGET.get_or_init(|| {
        let default_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // This file's own assertions are not the emulator's panics.
            if info
                .location()
                .is_none_or(|l| !l.file().ends_with("fuzz.rs"))
            {
                PANICS.fetch_add(1, Ordering::SeqCst);
            }
            default_hook(info);
        }));
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let emu = rt.block_on(async {
            let emu = common::start().await;
            common::seed_deployments(&emu, "shop", 3);
            emu.put_object(json!({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "db", "namespace": "shop"}, "stringData": {"k": "v"}}))
                .unwrap();
            emu.put_object(json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "shop"}, "data": {"k": "v"}}))
                .unwrap();
            emu
        });
        Target { rt, emu }
    })
}

/// What the emulator answered.
#[derive(Debug)]
struct Answer {
    head_only: bool,
    status: u16,
    content_type: String,
    body: Vec<u8>,
}

/// Sends one request over a fresh connection and reads the status line, the headers and, for
/// an error, the body (a 2xx may be a watch stream: its body is not waited for).
async fn send(emu: &RunningEmulator, method: &str, target: &str, ct: &str, body: &[u8]) -> Answer {
    let mut s = tokio::net::TcpStream::connect(emu.addr()).await.unwrap();
    let mut req = format!(
        "{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\nConnection: close\r\nContent-Length: {}\r\n",
        emu.admin_token(),
        body.len()
    )
    .into_bytes();
    if !ct.is_empty() {
        req.extend_from_slice(format!("Content-Type: {ct}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    s.write_all(&req).await.unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), async {
        let mut chunk = [0u8; 8192];
        loop {
            let n = s.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = find(&buf, b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                if method == "HEAD"
                    || head
                        .split_whitespace()
                        .nth(1)
                        .is_some_and(|c| c.starts_with('2'))
                {
                    return;
                }
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if length.is_some_and(|n| buf.len() >= end + 4 + n) {
                    return;
                }
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{method} {target}: no answer within 20 s");
    let Some(end) = find(&buf, b"\r\n\r\n") else {
        return Answer {
            head_only: method == "HEAD",
            status: 0,
            content_type: String::new(),
            body: buf,
        };
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type:")
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_default();
    Answer {
        head_only: method == "HEAD",
        status,
        content_type,
        body: buf[end + 4..].to_vec(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The properties every answer has. `Err` names the broken one.
fn check(answer: &Answer) -> Result<(), String> {
    *STATUSES.lock().unwrap().entry(answer.status).or_default() += 1;
    if PANICS.load(Ordering::SeqCst) > 0 {
        return Err("the emulator panicked".into());
    }
    if answer.status == 0 {
        return Err("no HTTP answer (a panic or a dropped connection)".into());
    }
    if answer.status >= 500 {
        return Err(format!(
            "a {} for client input: {}",
            answer.status,
            String::from_utf8_lossy(&answer.body)
        ));
    }
    if answer.head_only {
        // HEAD: the status and headers of the GET, no body.
    } else if answer.status >= 400 && answer.content_type.starts_with("application/json") {
        let body: Value = serde_json::from_slice(&answer.body)
            .map_err(|e| format!("error body is not JSON: {e}"))?;
        let well_formed = body["kind"] == "Status"
            && body["apiVersion"] == "v1"
            && body["metadata"].is_object()
            && body["status"] == "Failure"
            && body["message"].is_string()
            && body.get("reason").is_none_or(Value::is_string)
            && body.get("details").is_none_or(Value::is_object)
            && body["code"] == answer.status;
        if !well_formed {
            return Err(format!("malformed Status for {}: {body}", answer.status));
        }
    } else if answer.status >= 400 && !answer.content_type.starts_with("text/plain") {
        return Err(format!("error with content type {:?}", answer.content_type));
    }
    Ok(())
}

fn run(method: &str, target_uri: &str, ct: &str, body: &[u8]) -> Result<(), String> {
    let t = target();
    let answer = t.rt.block_on(send(&t.emu, method, target_uri, ct, body));
    check(&answer).map_err(|e| format!("{method} {target_uri} [{ct}]: {e}"))
}

fn cases(default: u32) -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..Config::default()
    }
}

const METHODS: &[&str] = &[
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "PROPFIND",
];

const SEGMENTS: &[&str] = &[
    "api",
    "apis",
    "v1",
    "v2",
    "apps",
    "rbac.authorization.k8s.io",
    "namespaces",
    "shop",
    "default",
    "nope",
    "deployments",
    "statefulsets",
    "secrets",
    "configmaps",
    "leases",
    "roles",
    "clusterroles",
    "tokenreviews",
    "selfsubjectaccessreviews",
    "d0000",
    "db",
    "cfg",
    "status",
    "scale",
    "openapi",
    "v3",
    "version",
    "healthz",
    "..",
    ".",
    "%2e%2e",
    "%2F",
    "%00",
    "a%20b",
    "UPPER",
    "a-name-that-is-much-longer-than-the-sixty-three-characters-a-dns-label-allows",
    "%C3%A9",
    "%FF",
    "~",
    "*",
    "_emulator",
];

const QUERY_KEYS: &[&str] = &[
    "limit",
    "continue",
    "labelSelector",
    "fieldSelector",
    "watch",
    "resourceVersion",
    "resourceVersionMatch",
    "timeoutSeconds",
    "allowWatchBookmarks",
    "sendInitialEvents",
    "dryRun",
    "fieldManager",
    "force",
    "fieldValidation",
    "propagationPolicy",
    "pretty",
];

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(SEGMENTS).prop_map(str::to_string),
        1 => "[a-zA-Z0-9%._~:@!$&'()*+,;=-]{0,12}",
    ]
}

fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("0".to_string()),
        Just("-1".to_string()),
        Just("1".to_string()),
        Just("true".to_string()),
        Just("NotOlderThan".to_string()),
        Just("app in (a,b),!x".to_string()),
        Just("metadata.name=d0000".to_string()),
        Just("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoiL1x1MDAwMCJ9".to_string()),
        Just("99999999999999999999999".to_string()),
        Just(u64::MAX.to_string()),
        Just(i64::MAX.to_string()),
        "[ -~]{0,20}",
    ]
}

fn query() -> impl Strategy<Value = String> {
    proptest::collection::vec((proptest::sample::select(QUERY_KEYS), query_value()), 0..4).prop_map(
        |pairs| {
            let mut q = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &pairs {
                q.append_pair(k, v);
            }
            // A watch always ends by itself.
            q.append_pair("timeoutSeconds", "1");
            q.finish()
        },
    )
}

/// Paths the emulator serves, for the generator to start from.
const REAL_PATHS: &[&str] = &[
    "/api/v1/namespaces/shop/secrets",
    "/api/v1/namespaces/shop/secrets/db",
    "/api/v1/secrets",
    "/api/v1/namespaces",
    "/api/v1/namespaces/shop",
    "/api/v1/namespaces/shop/configmaps/cfg",
    "/apis/apps/v1/namespaces/shop/deployments",
    "/apis/apps/v1/namespaces/shop/deployments/d0000",
    "/apis/apps/v1/namespaces/shop/deployments/d0000/scale",
    "/apis/apps/v1/namespaces/shop/deployments/d0000/status",
    "/apis/apps/v1/deployments",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/coordination.k8s.io/v1/namespaces/shop/leases",
    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    "/apis",
    "/api",
    "/version",
    "/openapi/v3",
];

fn request_target() -> impl Strategy<Value = String> {
    let random =
        (proptest::collection::vec(segment(), 0..7), any::<bool>()).prop_map(|(segs, trailing)| {
            let mut path = format!("/{}", segs.join("/"));
            if trailing {
                path.push('/');
            }
            path
        });
    let real = (
        proptest::sample::select(REAL_PATHS),
        proptest::collection::vec(segment(), 0..2),
    )
        .prop_map(|(path, extra)| {
            let mut path = path.to_string();
            for seg in extra {
                path.push('/');
                path.push_str(&seg);
            }
            path
        });
    (prop_oneof![1 => random, 2 => real], query()).prop_map(|(path, q)| format!("{path}?{q}"))
}

const CONTENT_TYPES: &[&str] = &[
    "application/json",
    "application/json; charset=utf-8",
    "application/yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/vnd.kubernetes.protobuf",
    "text/plain",
    "",
    "application/json;;;==",
];

/// Real bodies to mutate: objects of every kind served, and patches of every type.
fn seeds() -> Vec<Value> {
    vec![
        common::deployment("shop", "d0001"),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "shop"},
               "type": "Opaque", "data": {"k": "dg=="}, "stringData": {"x": "y"}}),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "shop",
               "labels": {"a": "b"}, "annotations": {"x": "y"}}, "data": {"k": "v"}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "r", "namespace": "shop"},
               "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": "get", "resource": "secrets", "namespace": "shop"}}}),
        json!([{"op": "test", "path": "/metadata/resourceVersion", "value": "1"},
               {"op": "replace", "path": "/spec/replicas", "value": 2},
               {"op": "add", "path": "/spec/template/metadata/annotations", "value": {"a": "b"}}]),
        json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "x"}],
               "$setElementOrder/containers": [{"name": "app"}]}}},
               "metadata": {"$patch": "replace", "labels": {"$retainKeys": ["a"]}}}),
        json!({"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "x", "resourceVersion": "1"},
               "propagationPolicy": "Foreground"}),
        json!({"spec": {"replicas": 3}}),
    ]
}

/// A JSON value of any shape, small.
fn junk_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,10}".prop_map(Value::String),
        Just(json!("$patch")),
        Just(json!("delete")),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every node of a value, by JSON pointer.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                pointers(
                    c,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                pointers(c, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Truncate(usize),
    FlipByte(usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), junk_value()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        2 => any::<usize>().prop_map(Mutation::Remove),
        1 => any::<usize>().prop_map(Mutation::Truncate),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::FlipByte(i, b)),
    ]
}

fn mutate(seed: &Value, mutations: &[Mutation]) -> Vec<u8> {
    let mut value = seed.clone();
    let mut bytes = None;
    for m in mutations {
        let mut all = Vec::new();
        pointers(&value, String::new(), &mut all);
        match m {
            Mutation::Replace(i, v) => {
                let p = &all[i % all.len()];
                if p.is_empty() {
                    value = v.clone();
                } else if let Some(slot) = value.pointer_mut(p) {
                    *slot = v.clone();
                }
            }
            Mutation::Remove(i) => {
                let p = &all[i % all.len()];
                if let Some((parent, last)) = p.rsplit_once('/')
                    && let Some(container) = value.pointer_mut(parent)
                {
                    match container {
                        Value::Object(o) => {
                            o.remove(&last.replace("~1", "/").replace("~0", "~"));
                        }
                        Value::Array(a) => {
                            if let Ok(i) = last.parse::<usize>()
                                && i < a.len()
                            {
                                a.remove(i);
                            }
                        }
                        _ => {}
                    }
                }
            }
            Mutation::Truncate(n) => {
                let mut b = serde_json::to_vec(&value).unwrap();
                b.truncate(n % (b.len() + 1));
                bytes = Some(b);
            }
            Mutation::FlipByte(i, x) => {
                let mut b = bytes
                    .take()
                    .unwrap_or_else(|| serde_json::to_vec(&value).unwrap());
                if !b.is_empty() {
                    let i = i % b.len();
                    b[i] ^= x;
                }
                bytes = Some(b);
            }
        }
    }
    bytes.unwrap_or_else(|| serde_json::to_vec(&value).unwrap())
}

/// Paths a body is sent to: collections and objects of the kinds the seeds are.
const BODY_TARGETS: &[(&str, &str)] = &[
    ("POST", "/apis/apps/v1/namespaces/shop/deployments"),
    ("PUT", "/apis/apps/v1/namespaces/shop/deployments/d0001"),
    ("PATCH", "/apis/apps/v1/namespaces/shop/deployments/d0001"),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/shop/deployments/d0002?fieldManager=fuzz&force=true",
    ),
    (
        "PUT",
        "/apis/apps/v1/namespaces/shop/deployments/d0001/status",
    ),
    (
        "PATCH",
        "/apis/apps/v1/namespaces/shop/deployments/d0001/scale",
    ),
    (
        "PUT",
        "/apis/apps/v1/namespaces/shop/deployments/d0001/scale",
    ),
    ("POST", "/api/v1/namespaces/shop/secrets"),
    ("PUT", "/api/v1/namespaces/shop/secrets/db"),
    ("PATCH", "/api/v1/namespaces/shop/configmaps/cfg"),
    ("POST", "/api/v1/namespaces/shop/configmaps"),
    ("POST", "/api/v1/namespaces"),
    (
        "POST",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/shop/roles",
    ),
    (
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
    ),
    ("POST", "/apis/authentication.k8s.io/v1/tokenreviews"),
    ("DELETE", "/api/v1/namespaces/shop/configmaps/cfg"),
    ("DELETE", "/apis/apps/v1/namespaces/shop/deployments"),
];

#[test]
fn junk_paths_queries_and_methods_get_well_formed_answers() {
    let mut runner = TestRunner::new(cases(400));
    let strategy = (proptest::sample::select(METHODS), request_target());
    let result = runner.run(&strategy, |(method, uri)| {
        run(method, &uri, "application/json", b"{}").map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_reached(&[200, 400, 404, 405]);
}

/// Fails when the generated inputs never reached these answers (the properties would then hold
/// trivially).
fn assert_reached(codes: &[u16]) {
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "the emulator panicked");
    let seen = STATUSES.lock().unwrap().clone();
    for code in codes {
        assert!(seen.contains_key(code), "no {code} answer in {seen:?}");
    }
}

#[test]
fn mutated_bodies_get_well_formed_answers() {
    let seeds = seeds();
    let mut runner = TestRunner::new(cases(400));
    let strategy = (
        0..seeds.len(),
        proptest::collection::vec(mutation(), 0..4),
        proptest::sample::select(BODY_TARGETS),
        proptest::sample::select(CONTENT_TYPES),
    );
    let result = runner.run(&strategy, |(seed, mutations, (method, uri), ct)| {
        let body = mutate(&seeds[seed], &mutations);
        run(method, uri, ct, &body).map_err(|e| {
            TestCaseError::fail(format!("{e}\nbody: {}", String::from_utf8_lossy(&body)))
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_reached(&[200, 201, 400, 415, 422]);
}

#[test]
fn junk_protobuf_bodies_get_well_formed_answers() {
    let mut runner = TestRunner::new(cases(300));
    let strategy = (
        proptest::collection::vec(any::<u8>(), 0..200),
        proptest::sample::select(BODY_TARGETS),
        any::<bool>(),
    );
    let result = runner.run(&strategy, |(junk, (method, uri), enveloped)| {
        // An envelope naming a served kind, then junk where the object should be.
        let body = if enveloped {
            let mut b = b"k8s\0\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12".to_vec();
            b.push(u8::try_from(junk.len().min(127)).unwrap());
            b.extend_from_slice(&junk);
            b
        } else {
            [b"k8s\0".to_vec(), junk].concat()
        };
        run(method, uri, "application/vnd.kubernetes.protobuf", &body).map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_reached(&[415]);
}

/// Inputs worth keeping, and every input that once broke these properties (marked), run on
/// every `cargo test`: (method, target, content type, body).
const REGRESSIONS: &[(&str, &str, &str, &str)] = &[
    ("GET", "/api/v1/namespaces/shop/secrets?limit=-1", "", ""),
    // Crashed the watch task: the deadline overflowed `Instant`.
    (
        "GET",
        "/api/v1/namespaces/shop/secrets?watch=1&timeoutSeconds=18446744073709551615",
        "",
        "",
    ),
    ("GET", "/healthz", "", ""),
];

#[test]
fn regressions() {
    for (method, uri, ct, body) in REGRESSIONS {
        if let Err(e) = run(method, uri, ct, body.as_bytes()) {
            panic!("{e}");
        }
    }
    // A watch task's panic comes after its answer: ask once more.
    if let Err(e) = run("GET", "/version", "", b"") {
        panic!("{e}");
    }
}
