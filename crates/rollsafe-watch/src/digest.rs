//! The content-addressed digest of what a workload consumes.
//!
//! # Definition (version 1)
//!
//! Values are first reduced to a per-key digest, which is all the controller keeps of them:
//!
//! ```text
//! value_digest(v) = SHA-256( "rollsafe.dev/config-value\0v1\0" || u64be(len(v)) || v )
//! ```
//!
//! where `v` is the value's bytes (a Secret's `data` value base64-decoded; a ConfigMap's `data`
//! value as UTF-8, or its `binaryData` value decoded). The workload digest is over the byte string
//!
//! ```text
//! "rollsafe.dev/config-hash\0v1\0"
//! u64be(number of objects)
//! per object, sorted by (kind, name), opted-out objects left out:
//!   lp(kind) lp(name)                      kind is "ConfigMap" or "Secret"
//!   0x00                                   the object does not exist, or
//!   0x01 lp(uid) u64be(number of keys)     it does, then per key, sorted:
//!     lp(key) 0x00                         the key is absent, or
//!     lp(key) 0x01 value_digest(value)     it is present
//! ```
//!
//! with `lp(s) = u64be(len(s)) || s`. The keys are the consumed ones: every key the object has
//! for a whole-object reference, else the referenced keys (present or not). The published value
//! is `v1:` and the hex SHA-256 of that string, or, with a fingerprint key,
//! `v1k:` and the hex HMAC-SHA-256 under that key, so that digests of low-entropy Secret values
//! cannot be checked against guesses by anyone who can read the workload. Golden vectors in the
//! tests pin the definition: changing it changes every digest and rolls every workload.

use std::collections::BTreeMap;
use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use rollsafe_core::reference::ConfigRef;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::consumption::{Consumption, Keys};
use crate::uid::Uid;

/// The domain tag of the workload digest.
pub const DIGEST_DOMAIN: &[u8] = b"rollsafe.dev/config-hash\0v1\0";
/// The domain tag of a value digest.
pub const VALUE_DOMAIN: &[u8] = b"rollsafe.dev/config-value\0v1\0";
/// The shortest accepted fingerprint key, in bytes.
pub const MIN_KEY_LEN: usize = 16;

/// The digest of one value: 32 bytes, never the value.
pub type ValueDigest = [u8; 32];

/// What the digest needs of one live Secret or ConfigMap: its uid, whether it opted out, and
/// the digest of each key's value. Never the data.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SourceDigest {
    /// `metadata.uid`.
    pub uid: Uid,
    /// `rollsafe.dev/watch: "false"` or `openchoreo.dev/restart-on-change: "false"`.
    pub opted_out: bool,
    /// Key → digest of its value.
    pub keys: KeyDigests,
}

/// Each key of one object and the digest of its value, sorted by key, packed in one allocation:
/// per key, its name's length (two bytes, little-endian), the name, then the 32-byte digest. A
/// Secret with three short keys costs one block of about 130 bytes, where a vector of (boxed
/// name, digest) pairs cost that vector plus a block per name (most objects have one to three
/// keys, so a key is found by walking them). A key name is at most 253 bytes in Kubernetes; a
/// longer one, which no API server sends, is cut to [`MAX_KEY_BYTES`] at a character boundary.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct KeyDigests(Option<Box<[u8]>>);

/// The longest key name kept, in bytes (Kubernetes allows 253).
pub const MAX_KEY_BYTES: usize = u16::MAX as usize;

const LEN_BYTES: usize = 2;
const DIGEST_BYTES: usize = 32;

impl fmt::Debug for KeyDigests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl KeyDigests {
    /// No key.
    pub const fn new() -> Self {
        Self(None)
    }

    /// The digest of `key`'s value.
    pub fn get(&self, key: &str) -> Option<&ValueDigest> {
        self.iter()
            .find(|(k, _)| *k == key)
            .map(|(_, digest)| digest)
    }

    /// How many keys.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// No key.
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// The keys and digests, sorted by key.
    pub fn iter(&self) -> KeyDigestsIter<'_> {
        KeyDigestsIter(self.0.as_deref().unwrap_or_default())
    }

    /// Sets `key`'s digest.
    pub fn insert(&mut self, key: &str, value: ValueDigest) {
        let mut entries: Vec<(&str, ValueDigest)> = self.iter().map(|(k, v)| (k, *v)).collect();
        match entries.binary_search_by(|(k, _)| (*k).cmp(key)) {
            Ok(at) => entries[at].1 = value,
            Err(at) => entries.insert(at, (key, value)),
        }
        *self = Self::packed(entries);
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) {
        if self.get(key).is_some() {
            let entries = self.iter().filter(|(k, _)| *k != key).map(|(k, v)| (k, *v));
            *self = Self::packed(entries.collect::<Vec<_>>());
        }
    }

    /// Packs entries that are sorted by key and unique.
    fn packed<K: AsRef<str>>(entries: impl IntoIterator<Item = (K, ValueDigest)>) -> Self {
        let mut bytes = Vec::new();
        for (key, digest) in entries {
            let key = clip(key.as_ref());
            // `clip` keeps at most MAX_KEY_BYTES (u16::MAX) bytes.
            let len = u16::try_from(key.len()).unwrap_or(u16::MAX);
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(key.as_bytes());
            bytes.extend_from_slice(&digest);
        }
        Self((!bytes.is_empty()).then(|| bytes.into_boxed_slice()))
    }
}

/// `key` cut to [`MAX_KEY_BYTES`] at a character boundary.
fn clip(key: &str) -> &str {
    if key.len() <= MAX_KEY_BYTES {
        return key;
    }
    let mut end = MAX_KEY_BYTES;
    while !key.is_char_boundary(end) {
        end -= 1;
    }
    &key[..end]
}

/// The entries of a [`KeyDigests`], in order.
#[derive(Debug, Clone)]
pub struct KeyDigestsIter<'a>(&'a [u8]);

impl<'a> Iterator for KeyDigestsIter<'a> {
    type Item = (&'a str, &'a ValueDigest);

    fn next(&mut self) -> Option<Self::Item> {
        let (len, rest) = self.0.split_first_chunk::<LEN_BYTES>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        let (key, rest) = rest.split_at_checked(len)?;
        let (digest, rest) = rest.split_first_chunk::<DIGEST_BYTES>()?;
        self.0 = rest;
        // Written from a `&str` by `packed`, cut at a character boundary.
        let key = std::str::from_utf8(key).ok()?;
        Some((key, digest))
    }
}

impl From<BTreeMap<String, ValueDigest>> for KeyDigests {
    /// Already sorted and unique: packed in that order.
    fn from(map: BTreeMap<String, ValueDigest>) -> Self {
        Self::packed(map)
    }
}

impl FromIterator<(String, ValueDigest)> for KeyDigests {
    fn from_iter<I: IntoIterator<Item = (String, ValueDigest)>>(iter: I) -> Self {
        iter.into_iter().collect::<BTreeMap<_, _>>().into()
    }
}

/// The digest of one value.
pub fn value_digest(value: &[u8]) -> ValueDigest {
    let mut hasher = Sha256::new();
    hasher.update(VALUE_DOMAIN);
    hasher.update((value.len() as u64).to_be_bytes());
    hasher.update(value);
    hasher.finalize().into()
}

/// Why a fingerprint key cannot be used. Messages never contain the key.
#[derive(Debug, Error)]
pub enum KeyError {
    /// The file could not be read.
    #[error("cannot read the fingerprint key file")]
    Read(#[source] std::io::Error),
    /// Shorter than [`MIN_KEY_LEN`] bytes after trimming trailing whitespace.
    #[error("the fingerprint key is shorter than 16 bytes")]
    TooShort,
}

impl KeyError {
    /// A stable code for logs.
    pub fn code(&self) -> &'static str {
        match self {
            KeyError::Read(_) => "fingerprint_key_read",
            KeyError::TooShort => "fingerprint_key_short",
        }
    }
}

/// Computes workload digests, keyed or not. `Debug` never prints the key.
#[derive(Clone, Default)]
pub struct Fingerprinter {
    key: Option<Vec<u8>>,
}

impl fmt::Debug for Fingerprinter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = if self.key.is_some() {
            "keyed"
        } else {
            "unkeyed"
        };
        write!(f, "Fingerprinter({mode})")
    }
}

impl Fingerprinter {
    /// Unkeyed: plain SHA-256 (`v1:`).
    pub fn unkeyed() -> Self {
        Self { key: None }
    }

    /// Keyed with HMAC-SHA-256 (`v1k:`); the key's trailing whitespace (a file's newline) is
    /// dropped.
    pub fn keyed(key: &[u8]) -> Result<Self, KeyError> {
        let end = key
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(0, |i| i + 1);
        let key = &key[..end];
        if key.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort);
        }
        Ok(Self {
            key: Some(key.to_vec()),
        })
    }

    /// Whether it computes keyed digests (`v1k:`).
    pub fn is_keyed(&self) -> bool {
        self.key.is_some()
    }

    /// Reads the key from a file.
    pub fn from_key_file(path: &std::path::Path) -> Result<Self, KeyError> {
        let bytes = std::fs::read(path).map_err(KeyError::Read)?;
        Self::keyed(&bytes)
    }

    /// The digest of `consumption`, each object looked up by `source` (`None`: it does not
    /// exist).
    pub fn digest<'a>(
        &self,
        consumption: &Consumption,
        source: impl Fn(&ConfigRef) -> Option<&'a SourceDigest>,
    ) -> String {
        let mut out = Vec::with_capacity(64 + consumption.len() * 96);
        out.extend_from_slice(DIGEST_DOMAIN);
        let included: Vec<(&ConfigRef, &Keys, Option<&SourceDigest>)> = consumption
            .iter()
            .map(|(config, keys)| (config, keys, source(config)))
            .filter(|(_, _, found)| !found.is_some_and(|s| s.opted_out))
            .collect();
        out.extend_from_slice(&(included.len() as u64).to_be_bytes());
        for (config, keys, found) in included {
            lp(&mut out, config.kind.as_str().as_bytes());
            lp(&mut out, config.name.as_bytes());
            let Some(found) = found else {
                out.push(0);
                continue;
            };
            out.push(1);
            found.uid.with_bytes(|uid| lp(&mut out, uid));
            let entry = |out: &mut Vec<u8>, key: &str, value: Option<&ValueDigest>| {
                lp(out, key.as_bytes());
                match value {
                    None => out.push(0),
                    Some(value) => {
                        out.push(1);
                        out.extend_from_slice(value);
                    }
                }
            };
            match keys {
                Keys::All => {
                    out.extend_from_slice(&(found.keys.len() as u64).to_be_bytes());
                    for (key, value) in found.keys.iter() {
                        entry(&mut out, key, Some(value));
                    }
                }
                Keys::Some(wanted) => {
                    out.extend_from_slice(&(wanted.len() as u64).to_be_bytes());
                    for key in wanted {
                        entry(&mut out, key, found.keys.get(key));
                    }
                }
            }
        }
        match &self.key {
            None => format!("v1:{}", hex(&Sha256::digest(&out))),
            Some(key) => {
                // HMAC accepts keys of any length; the error branch cannot be taken.
                match Hmac::<Sha256>::new_from_slice(key) {
                    Ok(mut mac) => {
                        mac.update(&out);
                        format!("v1k:{}", hex(&mac.finalize().into_bytes()))
                    }
                    Err(_) => format!("v1:{}", hex(&Sha256::digest(&out))),
                }
            }
        }
    }
}

/// The domain tag of a record entry's object id.
pub const RECORD_ID_DOMAIN: &[u8] = b"rollsafe.dev/config-record-id\0v1\0";
/// Hex digits of an entry's object id (48 bits: distinct among one workload's objects).
const RECORD_ID_HEX: usize = 12;
/// Hex digits of an entry's state (64 bits of the object's own digest).
const RECORD_STATE_HEX: usize = 16;

impl Fingerprinter {
    /// The record written on a workload (`rollsafe.dev/config-record`): the workload digest,
    /// `;`, then per consumed object that has not opted out, sorted like the digest,
    /// `id=state` joined by `,` — `id` the first 12 hex digits of
    /// `SHA-256(RECORD_ID_DOMAIN || lp(kind) || lp(name))`, `state` the first 16 hex digits of
    /// the digest of that object alone (keyed like the workload digest). The per-object part
    /// lets a decision tell an object's change from an object joining or leaving the digest
    /// (an opt-out toggled, a reference added): see [`crate::decision::decide`].
    pub fn record<'a>(
        &self,
        consumption: &Consumption,
        source: impl Fn(&ConfigRef) -> Option<&'a SourceDigest>,
    ) -> String {
        let mut record = self.digest(consumption, &source);
        record.push(';');
        let mut first = true;
        for (config, keys) in consumption {
            if source(config).is_some_and(|s| s.opted_out) {
                continue;
            }
            let alone: Consumption = BTreeMap::from([(config.clone(), keys.clone())]);
            let state = self.digest(&alone, &source);
            let state = state.rsplit(':').next().unwrap_or_default();
            if !first {
                record.push(',');
            }
            first = false;
            record.push_str(&record_id(config));
            record.push('=');
            record.push_str(state.get(..RECORD_STATE_HEX).unwrap_or(state));
        }
        record
    }
}

/// The objects of `consumed` whose state in `record` differs from their state in `current`
/// (both records of one workload; objects on one side only are not changes): the causes of a
/// roll, read from the records alone when no watch event named them (a roll after a restart of
/// the controller, for a change it did not see arrive).
pub fn changed_objects<'a>(
    record: &str,
    current: &str,
    consumed: impl Iterator<Item = &'a ConfigRef>,
) -> Vec<&'a ConfigRef> {
    let (Some(recorded), Some(current)) = (parse_record(record).1, parse_record(current).1) else {
        return Vec::new();
    };
    consumed
        .filter(|config| {
            let id = record_id(config);
            matches!(
                (recorded.get(id.as_str()), current.get(id.as_str())),
                (Some(was), Some(now)) if was != now
            )
        })
        .collect()
}

/// The objects of `consumed` that have an entry in `record` (what it was last rolled for or
/// adopted with); empty for a record from before per-object entries.
pub fn recorded_objects<'a>(
    record: &str,
    consumed: impl Iterator<Item = &'a ConfigRef>,
) -> Vec<&'a ConfigRef> {
    let Some(recorded) = parse_record(record).1 else {
        return Vec::new();
    };
    consumed
        .filter(|config| recorded.contains_key(record_id(config).as_str()))
        .collect()
}

/// Whether a record (or digest) was computed under a fingerprint key (`v1k:`): only a
/// [`Fingerprinter`] with that key computes comparable values.
pub fn is_keyed(record: &str) -> bool {
    record.starts_with("v1k:")
}

/// An object's id in a record.
pub(crate) fn record_id(config: &ConfigRef) -> String {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(RECORD_ID_DOMAIN);
    lp(&mut out, config.kind.as_str().as_bytes());
    lp(&mut out, config.name.as_bytes());
    let mut id = hex(&Sha256::digest(&out));
    id.truncate(RECORD_ID_HEX);
    id
}

/// A record split into the workload digest and, unless it predates per-object entries (a bare
/// digest), its entries: object id → state.
pub fn parse_record(record: &str) -> (&str, Option<BTreeMap<&str, &str>>) {
    let Some((digest, entries)) = record.split_once(';') else {
        return (record, None);
    };
    let entries = entries
        .split(',')
        .filter(|entry| !entry.is_empty())
        .filter_map(|entry| entry.split_once('='))
        .collect();
    (digest, Some(entries))
}

fn lp(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
    out.extend_from_slice(bytes);
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use rollsafe_core::reference::TargetKind;

    /// The packed keys read back as the map they were packed from, in order, through every
    /// change; an empty name and a name of many bytes included.
    #[test]
    fn packed_key_digests_read_back_as_their_map() {
        let long = "k".repeat(253);
        let mut map: BTreeMap<String, ValueDigest> = [
            ("password", b"a".as_slice()),
            ("", b"empty name"),
            ("tls.crt", b"cert"),
            (long.as_str(), b"long"),
            ("ümlaut-key", b"u"),
        ]
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value_digest(value)))
        .collect();
        let mut packed = KeyDigests::from(map.clone());
        let read = |packed: &KeyDigests| -> Vec<(String, ValueDigest)> {
            packed.iter().map(|(k, v)| (k.to_owned(), *v)).collect()
        };
        let expected = |map: &BTreeMap<String, ValueDigest>| -> Vec<(String, ValueDigest)> {
            map.iter().map(|(k, v)| (k.clone(), *v)).collect()
        };
        assert_eq!(read(&packed), expected(&map));
        assert_eq!(packed.len(), 5);
        assert_eq!(packed.get("tls.crt"), Some(&value_digest(b"cert")));
        assert_eq!(packed.get("tls"), None);
        packed.insert("api-key", value_digest(b"new"));
        map.insert("api-key".to_owned(), value_digest(b"new"));
        packed.insert("password", value_digest(b"b"));
        map.insert("password".to_owned(), value_digest(b"b"));
        packed.remove("");
        map.remove("");
        packed.remove("absent");
        assert_eq!(read(&packed), expected(&map));
        assert_eq!(packed, KeyDigests::from(map.clone()));
        for key in map.keys().cloned().collect::<Vec<_>>() {
            packed.remove(&key);
        }
        assert!(packed.is_empty());
        assert_eq!(packed, KeyDigests::new());
    }

    fn cref(kind: TargetKind, name: &str) -> ConfigRef {
        ConfigRef {
            kind,
            name: name.to_owned(),
        }
    }

    fn source(uid: &str, keys: &[(&str, &str)]) -> SourceDigest {
        SourceDigest {
            uid: Uid::new(uid),
            opted_out: false,
            keys: keys
                .iter()
                .map(|(k, v)| ((*k).to_owned(), value_digest(v.as_bytes())))
                .collect(),
        }
    }

    fn keys(list: &[&str]) -> Keys {
        Keys::Some(
            list.iter()
                .map(|k| (*k).to_owned())
                .collect::<BTreeSet<_>>(),
        )
    }

    struct World(BTreeMap<ConfigRef, SourceDigest>);
    impl World {
        fn digest(&self, f: &Fingerprinter, consumption: &Consumption) -> String {
            f.digest(consumption, |c| self.0.get(c))
        }
    }

    fn world() -> World {
        World(BTreeMap::from([
            (
                cref(TargetKind::Secret, "db"),
                source("uid-db", &[("user", "app"), ("password", "hunter2")]),
            ),
            (
                cref(TargetKind::ConfigMap, "settings"),
                source("uid-settings", &[("level", "info")]),
            ),
        ]))
    }

    fn consumption() -> Consumption {
        Consumption::from([
            (cref(TargetKind::Secret, "db"), keys(&["password"])),
            (cref(TargetKind::ConfigMap, "settings"), Keys::All),
        ])
    }

    /// Golden vectors, computed by an independent implementation of the definition (the Python
    /// script in docs/watch.md): these strings are what workloads carry. Changing the definition changes
    /// them, and rolls every workload; that needs a new version tag, not an edit here.
    #[test]
    fn golden_vectors() {
        let w = world();
        let unkeyed = Fingerprinter::unkeyed();
        let keyed = Fingerprinter::keyed(b"0123456789abcdef0123456789abcdef\n").unwrap();
        let cases = [
            (Consumption::new(), &unkeyed, GOLDEN_EMPTY),
            (consumption(), &unkeyed, GOLDEN_UNKEYED),
            (consumption(), &keyed, GOLDEN_KEYED),
            (
                Consumption::from([(cref(TargetKind::Secret, "missing"), Keys::All)]),
                &unkeyed,
                GOLDEN_MISSING,
            ),
        ];
        for (consumption, f, expected) in cases {
            assert_eq!(w.digest(f, &consumption), expected, "{consumption:?} {f:?}");
        }
        assert_eq!(
            hex(&value_digest(b"hunter2")),
            GOLDEN_VALUE,
            "value digest of \"hunter2\""
        );
    }

    const GOLDEN_EMPTY: &str =
        "v1:8a9a7e2707bc7e0981da39ebc84839cccfb5d692c7cd803cc022a3e30af52ea8";
    const GOLDEN_UNKEYED: &str =
        "v1:0f071164ab80d83e8371e0ef143041aa56738019f0a12018ad11dc35166202d6";
    const GOLDEN_KEYED: &str =
        "v1k:daa2fc6299015abda2054e2bc807cd2a4fe0f477ecfda24ee658a9150521434a";
    const GOLDEN_MISSING: &str =
        "v1:84a2998314cf06c7b9179a0c8d44a3af62beb8a47a2e598b477b818d31f40d15";
    const GOLDEN_VALUE: &str = "e84a7d08e913fdf6eb1b6079246d512d100a52407aa1d2da0e12c45958bb7918";

    #[test]
    fn what_changes_the_digest() {
        let f = Fingerprinter::unkeyed();
        let base = world();
        let before = base.digest(&f, &consumption());
        let changed = |edit: &dyn Fn(&mut World)| {
            let mut w = world();
            edit(&mut w);
            w.digest(&f, &consumption()) != before
        };
        let db = cref(TargetKind::Secret, "db");
        let settings = cref(TargetKind::ConfigMap, "settings");
        // A referenced key's value.
        assert!(changed(&|w| {
            w.0.get_mut(&db)
                .unwrap()
                .keys
                .insert("password", value_digest(b"x"));
        }));
        // An unreferenced key: no change.
        assert!(!changed(&|w| {
            w.0.get_mut(&db)
                .unwrap()
                .keys
                .insert("user", value_digest(b"x"));
        }));
        // A new key in a whole-object reference.
        assert!(changed(&|w| {
            w.0.get_mut(&settings)
                .unwrap()
                .keys
                .insert("new", value_digest(b""));
        }));
        // Delete and recreate: same data, new uid.
        assert!(changed(&|w| w.0.get_mut(&db).unwrap().uid = "uid-2".into()));
        // The object disappears.
        assert!(changed(&|w| {
            w.0.remove(&settings);
        }));
        // The referenced key disappears.
        assert!(changed(&|w| {
            w.0.get_mut(&db).unwrap().keys.remove("password");
        }));
        // Opted out: its changes no longer matter.
        let mut out = world();
        out.0.get_mut(&db).unwrap().opted_out = true;
        let opted = out.digest(&f, &consumption());
        out.0
            .get_mut(&db)
            .unwrap()
            .keys
            .insert("password", value_digest(b"y"));
        assert_eq!(out.digest(&f, &consumption()), opted);
    }

    #[test]
    fn length_prefixes_separate_fields() {
        // "a" + "bc" and "ab" + "c" must not collide, in names and in keys.
        let f = Fingerprinter::unkeyed();
        let one = World(BTreeMap::from([(
            cref(TargetKind::Secret, "s"),
            source("u", &[("a", "bc")]),
        )]));
        let two = World(BTreeMap::from([(
            cref(TargetKind::Secret, "s"),
            source("u", &[("ab", "c")]),
        )]));
        let all = Consumption::from([(cref(TargetKind::Secret, "s"), Keys::All)]);
        assert_ne!(one.digest(&f, &all), two.digest(&f, &all));
        // A Secret and a ConfigMap with the same name and content differ.
        let cm = World(BTreeMap::from([(
            cref(TargetKind::ConfigMap, "s"),
            source("u", &[("a", "bc")]),
        )]));
        let cm_all = Consumption::from([(cref(TargetKind::ConfigMap, "s"), Keys::All)]);
        assert_ne!(one.digest(&f, &all), cm.digest(&f, &cm_all));
    }

    #[test]
    fn keys_are_checked_and_never_printed() {
        assert!(matches!(
            Fingerprinter::keyed(b"short\n"),
            Err(KeyError::TooShort)
        ));
        let f = Fingerprinter::keyed(b"0123456789abcdef-secret").unwrap();
        assert_eq!(format!("{f:?}"), "Fingerprinter(keyed)");
        // Keyed and unkeyed never agree.
        let w = world();
        assert_ne!(
            w.digest(&f, &consumption()),
            w.digest(&Fingerprinter::unkeyed(), &consumption())
        );
    }

    #[test]
    fn records_carry_the_digest_and_one_entry_per_object_not_opted_out() {
        let f = Fingerprinter::unkeyed();
        let consumption: Consumption = BTreeMap::from([
            (cref(TargetKind::Secret, "db"), Keys::All),
            (cref(TargetKind::ConfigMap, "settings"), Keys::All),
        ]);
        let db = source("u-1", &[("password", "x")]);
        let mut settings = source("u-2", &[("mode", "fast")]);
        let record_of = |db: &SourceDigest, settings: &SourceDigest| {
            f.record(&consumption, |config| match config.name.as_str() {
                "db" => Some(db),
                _ => Some(settings),
            })
        };
        let both = record_of(&db, &settings);
        let (digest, entries) = parse_record(&both);
        assert_eq!(
            digest,
            f.digest(&consumption, |config| match config.name.as_str() {
                "db" => Some(&db),
                _ => Some(&settings),
            }),
            "the digest part is the v1 digest"
        );
        let entries = entries.unwrap();
        assert_eq!(entries.len(), 2);
        assert!(
            entries
                .iter()
                .all(|(id, state)| id.len() == 12 && state.len() == 16)
        );
        settings.opted_out = true;
        let one = record_of(&db, &settings);
        let (_, fewer) = parse_record(&one);
        let fewer = fewer.unwrap();
        assert_eq!(fewer.len(), 1, "{one}");
        let (id, state) = fewer.iter().next().unwrap();
        assert_eq!(entries.get(id), Some(state), "db's entry is unchanged");
        // `v1:` + 64 hex, `;`, then 12 + 1 + 16 per object and the commas.
        assert_eq!(both.len(), 3 + 64 + 1 + 2 * 29 + 1, "{both}");
    }

    #[test]
    fn recorded_objects_are_the_consumed_ones_with_an_entry() {
        let db = cref(TargetKind::Secret, "db");
        let settings = cref(TargetKind::ConfigMap, "settings");
        let consumption: Consumption = BTreeMap::from([(db.clone(), Keys::All)]);
        let state = source("u-1", &[("password", "x")]);
        let f = Fingerprinter::unkeyed();
        let record = f.record(&consumption, |_| Some(&state));
        let consumed = [db.clone(), settings];
        assert_eq!(recorded_objects(&record, consumed.iter()), [&db]);
        assert!(recorded_objects("v1:abc", consumed.iter()).is_empty());
        assert!(!is_keyed(&record) && !f.is_keyed());
        let keyed = Fingerprinter::keyed(b"0123456789abcdef").unwrap();
        assert!(keyed.is_keyed());
        assert!(is_keyed(&keyed.record(&consumption, |_| Some(&state))));
    }
}
