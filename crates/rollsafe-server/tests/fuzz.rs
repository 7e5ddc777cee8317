//! Property tests that stay in `cargo test` (stable Rust, bounded case counts, a fixed seed
//! per run so a failure reproduces):
//!
//! - session tokens: `verify` never panics; any textual change to a genuine token, and any
//!   re-encoded payload under the genuine signature, is refused; an accepted token always
//!   satisfies every rule;
//! - HTTP request heads against a live server: no panic, no 5xx for junk, no echo of input
//!   (except the path names the contract echoes, which the junk here never forms), and a forged
//!   bearer token is always 401.
//!
//! A failure found here becomes a case in `REGRESSIONS` (and proptest's own regression file).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::{Fixture, NS, SECRET, token};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use rollsafe_server::config::SessionSecret;
use rollsafe_server::session;
use serde_json::{Value, json};

/// Inputs that once misbehaved, or that sit on an edge; each runs on every `cargo test`.
const REGRESSIONS: &[&str] = &[
    "",
    ".",
    "..",
    "...",
    "a.b.c",
    "eyJhbGciOiJub25lIn0..",
    "eyJhbGciOiJIUzI1NiJ9.e30.",
    "eyJhbGciOiJIUzI1NiJ9.bnVsbA.AAAA",
    "\u{0}.\u{0}.\u{0}",
];

/// Request heads on an edge, kept (`{M}` stands for [`MARKER`]).
const HEAD_REGRESSIONS: &[&str] = &[
    "GET * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "POST http://{M}/api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "POST /api/namespaces/%2e%2e/secrets/{M}/restart-consumers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "POST /api/namespaces/team-a/secrets/db%2F..%2F{M}/restart-consumers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "POST /api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\nX-Fold: a\r\n {M}\r\nConnection: close\r\n\r\n",
    "POST /api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {M}\u{0}\r\nConnection: close\r\n\r\n",
    "POST /api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\nConnection: close\r\n\r\n{M}",
    "POST /api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\n{M}\r\n0\r\n\r\n",
    "POST /api/namespaces/team-a/secrets/db/restart-consumers HTTP/1.0\r\n\r\n",
    "{M} / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "GET /healthz HTTP/9.9\r\nHost: x\r\nConnection: close\r\n\r\n",
];

/// A marker no valid Kubernetes name can hold (upper case), put in every generated input: it
/// must never come back in a response.
const MARKER: &str = "ZQX9MARKER";

fn secret() -> SessionSecret {
    SessionSecret::new(SECRET.as_bytes().to_vec())
}

fn runner(cases: u32) -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    )
}

fn b64url_char() -> impl Strategy<Value = char> {
    prop::sample::select(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
            .chars()
            .collect::<Vec<_>>(),
    )
}

#[test]
fn verify_never_panics_and_refuses_junk() {
    for input in REGRESSIONS {
        assert!(session::verify(input, &secret()).is_err(), "{input:?}");
    }
    let junk = prop_oneof![
        any::<String>(),
        prop::collection::vec(b64url_char(), 0..400).prop_map(|c| c.into_iter().collect()),
        (
            prop::collection::vec(b64url_char(), 0..80),
            prop::collection::vec(b64url_char(), 0..200),
            prop::collection::vec(b64url_char(), 0..60)
        )
            .prop_map(|(a, b, c)| format!(
                "{}.{}.{}",
                a.into_iter().collect::<String>(),
                b.into_iter().collect::<String>(),
                c.into_iter().collect::<String>()
            )),
    ];
    runner(2_000)
        .run(&junk, |input| {
            prop_assert!(session::verify(&input, &secret()).is_err());
            Ok(())
        })
        .unwrap();
}

#[test]
fn any_textual_change_to_a_genuine_token_is_refused() {
    let genuine = token("alice@x.io", &["developers"]);
    assert!(session::verify(&genuine, &secret()).is_ok());
    let edits = prop::collection::vec((0..genuine.len(), b64url_char()), 1..4);
    runner(3_000)
        .run(&edits, |edits| {
            let mut bytes = genuine.clone().into_bytes();
            for (at, replacement) in edits {
                bytes[at] = replacement as u8;
            }
            let forged = String::from_utf8(bytes).unwrap();
            if forged != genuine {
                prop_assert!(session::verify(&forged, &secret()).is_err(), "{forged}");
            }
            Ok(())
        })
        .unwrap();
}

fn claim_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z:@. ]{0,12}".prop_map(Value::from),
        Just(json!("krypton")),
        Just(json!(["krypton"])),
        Just(json!(["system:masters", "dev"])),
        Just(json!({"nested": true})),
    ]
}

#[test]
fn a_payload_re_encoded_under_the_genuine_signature_is_refused() {
    let genuine = token("alice@x.io", &["developers"]);
    let parts: Vec<&str> = genuine.split('.').collect();
    let original: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    let claim = prop::sample::select(vec![
        "iss", "sub", "email", "name", "groups", "exp", "nbf", "iat", "aud", "extra",
    ]);
    runner(2_000)
        .run(&(claim, claim_value()), |(claim, value)| {
            let mut payload = original.clone();
            payload[claim] = value;
            if payload == original {
                return Ok(());
            }
            let forged = format!(
                "{}.{}.{}",
                parts[0],
                URL_SAFE_NO_PAD.encode(payload.to_string()),
                parts[2]
            );
            prop_assert!(session::verify(&forged, &secret()).is_err());
            Ok(())
        })
        .unwrap();
}

#[test]
fn an_accepted_token_satisfies_every_rule() {
    let now = session::now() as i64;
    let claims = (
        claim_value(),
        claim_value(),
        claim_value(),
        claim_value(),
        prop_oneof![
            Just(json!(now + 600)),
            Just(json!(now - 600)),
            claim_value()
        ],
        prop_oneof![
            Just(Value::Null),
            Just(json!(now - 60)),
            Just(json!(now + 600)),
            claim_value()
        ],
    );
    runner(2_000)
        .run(&claims, |(iss, sub, email, groups, exp, nbf)| {
            let mut object =
                json!({"iss": iss, "sub": sub, "email": email, "groups": groups, "exp": exp});
            if !nbf.is_null() {
                object["nbf"] = nbf.clone();
            }
            let signed = jsonwebtoken::encode(
                &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
                &object,
                &jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes()).unwrap(),
            )
            .unwrap();
            if let Ok(user) = session::verify(&signed, &secret()) {
                prop_assert_eq!(&object["iss"], &json!("krypton"));
                prop_assert!(object["sub"].is_string());
                prop_assert!(!user.email.is_empty());
                prop_assert!(object["exp"].as_f64().is_some_and(|e| e as i64 + 5 >= now));
                if let Some(nbf) = object.get("nbf") {
                    prop_assert!(nbf.as_f64().is_some_and(|n| n as i64 <= now + 5));
                }
            }
            Ok(())
        })
        .unwrap();
}

/// One generated request head: method, target, headers.
#[derive(Debug, Clone)]
struct Head {
    method: String,
    target: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn bytes(&self) -> Vec<u8> {
        let mut text = format!(
            "{} {} HTTP/1.1\r\nHost: 127.0.0.1\r\n",
            self.method, self.target
        );
        for (name, value) in &self.headers {
            text.push_str(&format!("{name}: {value}\r\n"));
        }
        text.push_str("Connection: close\r\n\r\n");
        text.into_bytes()
    }
}

fn path_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(MARKER.to_owned()),
        Just(format!("..%2F{MARKER}")),
        Just(format!("%2e%2e/{MARKER}")),
        Just(format!("{MARKER}%00")),
        Just(format!("{MARKER}%ZZ")),
        Just(format!("{MARKER}%C3%28")),
        Just(format!("{MARKER};x=1")),
        "[A-Za-z0-9._~%!$&'()*+,;=:@-]{1,40}".prop_map(|s| format!("{s}{MARKER}")),
        "[a-z0-9-]{1,10}".prop_map(|s| format!("{s}-{MARKER}")),
    ]
}

fn head() -> impl Strategy<Value = Head> {
    let method = prop_oneof![
        Just("POST".to_owned()),
        Just("GET".to_owned()),
        Just("PUT".to_owned()),
        Just("DELETE".to_owned()),
        Just("OPTIONS".to_owned()),
        Just("PATCH".to_owned()),
        "[A-Z]{1,10}",
    ];
    let target = prop_oneof![
        (path_segment(), path_segment()).prop_map(|(ns, name)| format!(
            "/api/namespaces/{ns}/secrets/{name}/restart-consumers"
        )),
        (path_segment(), path_segment())
            .prop_map(|(ns, q)| format!("/api/namespaces/{ns}/secrets/db/restart-consumers?{q}")),
        path_segment().prop_map(|s| format!("/{s}")),
        path_segment().prop_map(|s| format!("/api/{s}")),
        Just(format!(
            "/api/namespaces/{NS}/secrets/db/restart-consumers?x={MARKER}"
        )),
        Just(format!(
            "//api/namespaces/{NS}/secrets/{MARKER}/restart-consumers"
        )),
    ];
    let header = prop_oneof![
        Just(("Authorization".to_owned(), format!("Bearer {MARKER}"))),
        Just(("Authorization".to_owned(), format!("Basic {MARKER}"))),
        Just(("Authorization".to_owned(), format!("Bearer a.{MARKER}.c"))),
        Just(("Cookie".to_owned(), format!("krypton_session={MARKER}"))),
        Just((
            "Cookie".to_owned(),
            format!("krypton_session=\"{MARKER}\"; a=b")
        )),
        Just(("Content-Type".to_owned(), format!("text/{MARKER}"))),
        Just(("Accept".to_owned(), MARKER.to_owned())),
        Just(("Origin".to_owned(), format!("http://{MARKER}"))),
        Just(("X-Forwarded-For".to_owned(), MARKER.to_owned())),
        Just(("Content-Length".to_owned(), "0".to_owned())),
        Just(("Content-Length".to_owned(), "99999999999".to_owned())),
        Just(("Content-Length".to_owned(), MARKER.to_owned())),
        Just(("Transfer-Encoding".to_owned(), MARKER.to_owned())),
        "[A-Za-z-]{1,20}".prop_map(|name| (format!("X-{name}"), MARKER.to_owned())),
        "[ -~]{0,60}".prop_map(|value| ("X-Junk".to_owned(), format!("{value}{MARKER}"))),
    ];
    (method, target, prop::collection::vec(header, 0..6)).prop_map(|(method, target, headers)| {
        Head {
            method,
            target,
            headers,
        }
    })
}

#[test]
fn request_heads_never_5xx_never_echo_and_forgeries_are_401() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = runtime.block_on(Fixture::start(|_| {}));
    let api = fixture.api.clone();
    let exchange =
        |bytes: Vec<u8>| runtime.block_on(common::exchange(&api, &bytes, Duration::from_secs(10)));
    for head in HEAD_REGRESSIONS {
        let head = head.replace("{M}", MARKER);
        if let Some(response) = exchange(head.clone().into_bytes()) {
            assert!(response.status < 500, "{} for {head:?}", response.status);
            assert!(
                !String::from_utf8_lossy(&response.body).contains(MARKER),
                "echoed: {head:?}"
            );
            assert!(
                !response.head.contains(MARKER),
                "echoed in the head: {head:?}"
            );
        }
    }
    let long_path = format!(
        "GET /{}{MARKER} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "a".repeat(40 * 1024)
    );
    let response = exchange(long_path.into_bytes()).expect("an answer to a long head");
    assert_eq!(response.status, 431);
    let answered = std::cell::Cell::new(0u32);
    runner(1_000)
        .run(&head(), |head| {
            let response = exchange(head.bytes());
            answered.set(answered.get() + u32::from(response.is_some()));
            // hyper may close a connection whose head it cannot parse; anything it answers is
            // not a server error and carries nothing of the input.
            if let Some(response) = response {
                prop_assert!(response.status < 500, "{} for {head:?}", response.status);
                let body = String::from_utf8_lossy(&response.body);
                prop_assert!(!body.contains(MARKER), "echoed: {body} for {head:?}");
                prop_assert!(
                    !response.head.contains(MARKER),
                    "echoed in the head: {head:?}"
                );
            }

            Ok(())
        })
        .unwrap();
    assert!(
        answered.get() > 900,
        "most heads get an answer: {}",
        answered.get()
    );
    // Forged bearer tokens over HTTP: always exactly 401, and nothing reaches Kubernetes.
    let genuine = token("alice@x.io", &["developers"]);
    let edits = prop::collection::vec((0..genuine.len(), b64url_char()), 1..3);
    runner(300)
        .run(&edits, |edits| {
            let mut bytes = genuine.clone().into_bytes();
            for (at, replacement) in edits {
                bytes[at] = replacement as u8;
            }
            let forged = String::from_utf8(bytes).unwrap();
            if forged == genuine {
                return Ok(());
            }
            let request = format!(
                "POST /api/namespaces/{NS}/secrets/db/restart-consumers HTTP/1.1\r\nHost: x\r\n\
                 Authorization: Bearer {forged}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
            let Some(response) = exchange(request.clone().into_bytes()) else {
                panic!("no answer to {request:?}");
            };
            prop_assert_eq!(response.status, 401);
            prop_assert_eq!(response.json(), json!({"error": "Authentication required"}));
            Ok(())
        })
        .unwrap();
    assert!(
        fixture.emulator.requests().is_empty(),
        "no junk or forged request reached Kubernetes"
    );
    // Still healthy after all of it.
    let health = runtime
        .block_on(common::get(&fixture.api, "/healthz"))
        .unwrap();
    assert_eq!(health.status, 200);
    runtime.block_on(fixture.stop());
}
