//! Small helpers: random ids, timestamps, label maps as text.

use serde_json::{Map, Value};

/// A version-4 UUID string (from the operating system's random source).
pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A random string for `generateName`, from the alphabet the real server uses.
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut r = uuid::Uuid::new_v4().as_u64_pair().0;
    (0..5)
        .map(|_| {
            let c = ALPHABET[(r % ALPHABET.len() as u64) as usize];
            r /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// A random token of 32 hex characters (122 random bits).
pub fn token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
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

/// A JSON object of strings (labels, `matchLabels`) as `<key><kv><value>` pairs joined by `sep`,
/// in the map's order; a value that is not a string reads as empty, and anything but an object
/// gives the empty string.
pub fn join_string_map(map: Option<&serde_json::Value>, kv: &str, sep: &str) -> String {
    map.and_then(serde_json::Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}{kv}{}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(sep)
        })
        .unwrap_or_default()
}

/// The string entries of a JSON array (anything else is no entries).
pub fn strings(value: Option<&serde_json::Value>) -> Vec<String> {
    value
        .and_then(serde_json::Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(serde_json::Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
}

fn ensure_object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("the value was just made an object"),
    }
}

/// `metadata`, made an object (and the object too) if it is not one.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let map = ensure_object(obj);
    ensure_object(
        map.entry("metadata")
            .or_insert_with(|| Value::Object(Map::new())),
    )
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

    #[test]
    fn string_maps_join_in_order() {
        let map = serde_json::json!({"app": "web", "n": 1, "tier": "front"});
        assert_eq!(
            join_string_map(Some(&map), "=", ","),
            "app=web,n=,tier=front"
        );
        assert_eq!(
            join_string_map(Some(&map), ":", ", "),
            "app:web, n:, tier:front"
        );
        assert_eq!(join_string_map(Some(&serde_json::json!("x")), "=", ","), "");
        assert_eq!(join_string_map(None, "=", ","), "");
    }
}
