//! Small helpers: random ids, timestamps.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// 64 unpredictable-enough bits (SipHash keyed by the process's random state, over a counter
/// and the clock). Good for uids, generated names and test tokens; not cryptographic.
pub fn random_u64() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    h.write_u128(nanos);
    h.finish()
}

/// A version-4-shaped UUID string.
pub fn uuid() -> String {
    let a = random_u64();
    let b = random_u64();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        ((b >> 48) & 0x3fff) | 0x8000,
        b & 0xffff_ffff_ffff
    )
}

/// A random string for `generateName`, from the alphabet the real server uses.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize];
            r /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// A random token of 32 hex characters.
pub fn token() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// Now, as the real server writes `creationTimestamp` (RFC 3339, seconds, UTC).
pub fn now_seconds() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Now, RFC 3339 with nanoseconds (request log).
pub fn now_precise() -> String {
    jiff::Timestamp::now().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_shaped_and_distinct() {
        let a = uuid();
        let b = uuid();
        assert_ne!(a, b);
        assert_eq!(a.len(), 36);
        assert_eq!(
            a.split('-').map(str::len).collect::<Vec<_>>(),
            vec![8, 4, 4, 4, 12]
        );
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let t = now_seconds();
        assert_eq!(t.len(), 20);
        assert!(t.ends_with('Z'));
    }
}
