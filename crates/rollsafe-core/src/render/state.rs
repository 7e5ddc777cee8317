//! The referenced-config state kept on a workload's own `metadata.annotations`, and the
//! per-resource digests it holds.
//!
//! Format (one line, `;`-separated fields, each optional except the version; no spaces, so a
//! YAML emitter keeps it on one plain line):
//!
//! ```text
//! v1;key=<key id|none>;rel=<id>:<digest>,…;off=<id>:<digest>,…
//! ```
//!
//! - `id` is 8 hex digits of FNV-1a 32 over `kind NUL namespace NUL name`: it names a resource
//!   without spelling its name out.
//! - `digest` is the resource's content digest (top-level `metadata` left out): 16 hex digits of
//!   HMAC-SHA-256 under the fingerprint key, or, without a key, 8 hex digits of FNV-1a 32.
//! - `key` identifies the fingerprint key (8 hex digits of an HMAC of a fixed label), so a render
//!   with another key knows the digests are not comparable; `none` when unkeyed.
//! - `rel` lists the resources whose changes restart the pods; `off` the referenced ones marked
//!   `"false"` (kept so that removing the mark later compares against their last content).

use std::collections::BTreeMap;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::Sha256;

use super::FingerprintKey;
use super::dump::{self, NumberType, Sink, Strip};
use super::hash::Fnv32a;

const VERSION: &str = "v1";

/// How content digests are computed.
#[derive(Clone)]
pub(crate) enum Digester {
    Unkeyed,
    Keyed(Hmac<Sha256>),
}

struct MacSink(Hmac<Sha256>);

impl Sink for MacSink {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl Digester {
    pub(crate) fn new(key: Option<&FingerprintKey>) -> Self {
        match key.and_then(|key| Hmac::<Sha256>::new_from_slice(key.bytes()).ok()) {
            Some(mac) => Digester::Keyed(mac),
            None => Digester::Unkeyed,
        }
    }

    /// Identifies the key without revealing it.
    pub(crate) fn key_id(&self) -> String {
        match self {
            Digester::Unkeyed => "none".to_owned(),
            Digester::Keyed(mac) => {
                let mut mac = mac.clone();
                mac.update(b"rollsafe.dev fingerprint key id");
                hex(&mac.finalize().into_bytes()[..4])
            }
        }
    }

    /// The content digest of one resource.
    pub(crate) fn digest(&self, object: &Map<String, Value>) -> String {
        match self {
            Digester::Unkeyed => {
                let mut hasher = Fnv32a::new();
                dump::write_top(&mut hasher, object, Strip::Metadata, NumberType::Float64);
                format!("{:08x}", hasher.finish())
            }
            Digester::Keyed(mac) => {
                let mut sink = MacSink(mac.clone());
                dump::write_top(&mut sink, object, Strip::Metadata, NumberType::Float64);
                hex(&sink.0.finalize().into_bytes()[..8])
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The short identity of a resource.
pub(crate) fn resource_id(kind: &str, namespace: &str, name: &str) -> String {
    let mut hasher = Fnv32a::new();
    hasher.write(kind.as_bytes());
    hasher.write(b"\0");
    hasher.write(namespace.as_bytes());
    hasher.write(b"\0");
    hasher.write(name.as_bytes());
    format!("{:08x}", hasher.finish())
}

/// One tracked resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tracked {
    pub(crate) digest: String,
    /// Whether its changes restart the pods (else: referenced but marked "false").
    pub(crate) relevant: bool,
}

/// The state of one workload.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct State {
    pub(crate) key_id: String,
    pub(crate) tracked: BTreeMap<String, Tracked>,
}

impl State {
    pub(crate) fn encode(&self) -> String {
        let mut out = format!("{VERSION};key={}", self.key_id);
        for (field, relevant) in [("rel", true), ("off", false)] {
            let entries: Vec<String> = self
                .tracked
                .iter()
                .filter(|(_, t)| t.relevant == relevant)
                .map(|(id, t)| format!("{id}:{}", t.digest))
                .collect();
            if !entries.is_empty() {
                out.push(';');
                out.push_str(field);
                out.push('=');
                out.push_str(&entries.join(","));
            }
        }
        out
    }

    /// Parses a state annotation; `None` when it is not one this version wrote.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let mut fields = text.split(';');
        if fields.next()? != VERSION {
            return None;
        }
        let mut state = State::default();
        let mut saw_key = false;
        for field in fields {
            let (name, value) = field.split_once('=')?;
            match name {
                "key" if is_token(value) => {
                    state.key_id = value.to_owned();
                    saw_key = true;
                }
                "rel" | "off" => {
                    for entry in value.split(',') {
                        let (id, digest) = entry.split_once(':')?;
                        if !is_hex(id) || !is_hex(digest) {
                            return None;
                        }
                        let tracked = Tracked {
                            digest: digest.to_owned(),
                            relevant: name == "rel",
                        };
                        state.tracked.insert(id.to_owned(), tracked);
                    }
                }
                _ => return None,
            }
        }
        saw_key.then_some(state)
    }
}

fn is_hex(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_token(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let mut state = State {
            key_id: "none".to_owned(),
            ..State::default()
        };
        state.tracked.insert(
            "0a0b0c0d".to_owned(),
            Tracked {
                digest: "deadbeef".to_owned(),
                relevant: true,
            },
        );
        state.tracked.insert(
            "01020304".to_owned(),
            Tracked {
                digest: "cafebabe".to_owned(),
                relevant: false,
            },
        );
        let text = state.encode();
        assert_eq!(
            text,
            "v1;key=none;rel=0a0b0c0d:deadbeef;off=01020304:cafebabe"
        );
        assert_eq!(State::parse(&text), Some(state));
        assert_eq!(
            State::parse("v1;key=none").map(|s| s.tracked.len()),
            Some(0)
        );
        for bad in [
            "",
            "v2 key=none",
            "v1",
            "v1;key=none;rel=xyz:1",
            "v1;key=none;what=1",
            "v1;key=a b",
            "v1 key=none",
        ] {
            assert_eq!(State::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn keyed_digest_depends_on_key_and_content_only() {
        let object =
            json!({"kind": "Secret", "metadata": {"name": "a"}, "data": {"p": "c2VjcmV0"}});
        let renamed =
            json!({"kind": "Secret", "metadata": {"name": "b"}, "data": {"p": "c2VjcmV0"}});
        let changed =
            json!({"kind": "Secret", "metadata": {"name": "a"}, "data": {"p": "b3RoZXI="}});
        let one = Digester::new(FingerprintKey::new(b"one".to_vec()).as_ref());
        let two = Digester::new(FingerprintKey::new(b"two".to_vec()).as_ref());
        let map = |v: &Value| v.as_object().unwrap().clone();
        assert_eq!(one.digest(&map(&object)), one.digest(&map(&renamed)));
        assert_ne!(one.digest(&map(&object)), one.digest(&map(&changed)));
        assert_ne!(one.digest(&map(&object)), two.digest(&map(&object)));
        assert_eq!(one.digest(&map(&object)).len(), 16);
        assert_ne!(one.key_id(), two.key_id());
        assert_eq!(Digester::Unkeyed.digest(&map(&object)).len(), 8);
        assert_eq!(Digester::Unkeyed.key_id(), "none");
    }
}
