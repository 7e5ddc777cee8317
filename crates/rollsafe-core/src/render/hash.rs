//! The upstream hash: FNV-1a 32-bit over the dump, written in decimal and mapped through
//! apimachinery's safe-encoding alphabet.

use serde_json::{Map, Value};

use super::dump::{self, NumberType, Sink, Strip};

/// FNV-1a, 32-bit (Go's `hash/fnv.New32a`).
#[derive(Debug, Clone, Copy)]
pub struct Fnv32a(u32);

impl Fnv32a {
    const OFFSET_BASIS: u32 = 0x811c_9dc5;
    const PRIME: u32 = 0x0100_0193;

    /// A fresh hasher.
    pub fn new() -> Self {
        Self(Self::OFFSET_BASIS)
    }

    /// The hash of everything written so far.
    pub fn finish(self) -> u32 {
        self.0
    }

    /// The hash of one byte string.
    pub fn hash(bytes: &[u8]) -> u32 {
        let mut hasher = Self::new();
        hasher.write(bytes);
        hasher.finish()
    }
}

impl Default for Fnv32a {
    fn default() -> Self {
        Self::new()
    }
}

impl Sink for Fnv32a {
    fn write(&mut self, bytes: &[u8]) {
        let mut state = self.0;
        for &byte in bytes {
            state ^= u32::from(byte);
            state = state.wrapping_mul(Self::PRIME);
        }
        self.0 = state;
    }
}

/// apimachinery's `rand.SafeEncodeString` alphabet.
const ALPHABET: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";

/// Writes `value` in decimal and maps each digit through the safe-encoding alphabet (index =
/// character code mod 27), as upstream does: 0→4, 1→5, …, 5→9, 6→b, 7→c, 8→d, 9→f.
pub fn safe_encode(value: u32) -> String {
    value
        .to_string()
        .bytes()
        .map(|digit| char::from(ALPHABET[usize::from(digit) % ALPHABET.len()]))
        .collect()
}

/// The upstream hash of a list of objects, in the given order, each without its top-level
/// `metadata` (and whatever else `Strip` says).
pub fn hash_objects<'a>(
    objects: impl IntoIterator<Item = (&'a Map<String, Value>, Strip)>,
    numbers: NumberType,
) -> String {
    let mut list = dump::ListWriter::new(Fnv32a::new());
    for (object, strip) in objects {
        list.push(object, strip, numbers);
    }
    safe_encode(list.finish().finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hash(list: Value, numbers: NumberType) -> String {
        let objects: Vec<_> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (o.as_object().unwrap(), Strip::Metadata))
            .collect();
        hash_objects(objects, numbers)
    }

    fn configmap(value: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "data": {"key": value}})
    }

    fn secret() -> Value {
        json!({"apiVersion": "v1", "kind": "Secret", "data": {"password": "secret123"}})
    }

    fn service() -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "spec": {"ports": [{"port": 80}]}})
    }

    #[test]
    fn fnv_known_values() {
        assert_eq!(Fnv32a::hash(b""), 0x811c_9dc5);
        assert_eq!(Fnv32a::hash(b"a"), 0xe40c_292c);
        assert_eq!(Fnv32a::hash(b"foobar"), 0xbf9c_f968);
    }

    #[test]
    fn alphabet_worked_example() {
        assert_eq!(safe_encode(3_092_662_560), "74f6bb69b4");
        assert_eq!(safe_encode(0), "4");
        assert_eq!(safe_encode(1_234_567_890), "56789bcdf4");
    }

    #[test]
    fn upstream_vectors() {
        let n = NumberType::Float64;
        assert_eq!(hash(json!([configmap("value")]), n), "74f6bb69b4");
        assert_eq!(hash(json!([secret()]), n), "5496857d79");
        assert_eq!(hash(json!([service()]), NumberType::Int), "56bcfbffd8");
        assert_eq!(hash(json!([service()]), NumberType::Float64), "7d744cdf7");
        assert_eq!(hash(json!([service()]), NumberType::Int64), "776676bcf4");
        assert_eq!(hash(json!([configmap("value1")]), n), "5ddcff5889");
        assert_eq!(hash(json!([configmap("value2")]), n), "7cd4f8c668");
        assert_eq!(
            hash(
                json!([configmap("value"), secret(), service()]),
                NumberType::Int
            ),
            "66695948b7"
        );
        assert_eq!(
            hash(
                json!([configmap("value"), secret(), service()]),
                NumberType::Float64
            ),
            "5f85d686fd"
        );
        assert_eq!(hash(json!([]), n), "74f5b764d");
    }

    #[test]
    fn configmap_fnv_value() {
        let objects = [configmap("value")];
        let mut hasher = Fnv32a::new();
        dump::write_list(
            &mut hasher,
            objects
                .iter()
                .map(|o| (o.as_object().unwrap(), Strip::Metadata)),
            NumberType::Float64,
        );
        assert_eq!(hasher.finish(), 3_092_662_560);
    }
}
