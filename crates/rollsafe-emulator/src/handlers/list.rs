//! LIST: pages with opaque continue tokens in the real format, selectors, the list corruptions
//! faults ask for, and items written without their `kind`/`apiVersion`.

use std::io::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use hyper::Response;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::faults::{ListCorruption, wrong_list_kind};
use crate::handlers::{Call, list_options_invalid, selectors};
use crate::state::Body;
use rollsafe_emulator_registry::store::{Key, Snapshot};
use rollsafe_emulator_types::resources::{ResId, def};
use rollsafe_emulator_types::status::{FieldCause, StatusError};

/// The continue token, in the real server's format: base64url (no padding) of
/// `{"v":"meta.k8s.io/v1","rv":N,"start":"<next key>"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContinueToken {
    /// Format version.
    pub v: String,
    /// The list's resourceVersion; -1 after an expiry (continue at the latest state).
    pub rv: i64,
    /// `<namespace>/<name>\0`: the key after the last one returned.
    pub start: String,
}

impl ContinueToken {
    /// A token continuing after `key` at `rv`.
    pub fn after(rv: i64, key: &Key) -> Self {
        Self {
            v: "meta.k8s.io/v1".into(),
            rv,
            start: format!("{}/{}\u{0}", key.1, key.2),
        }
    }

    /// The opaque string.
    pub fn encode(&self) -> String {
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// Decodes a token, with the real server's 400 messages.
    pub fn decode(token: &str) -> Result<Self, StatusError> {
        let bad = |why: String| StatusError::bad_request(&format!("invalid continue token: {why}"));
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(token.trim_end_matches('='))
            .map_err(|e| bad(format!("continue key is not valid: {e}")))?;
        let tok: Self = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("continue key is not valid: {e}")))?;
        if tok.v != "meta.k8s.io/v1" {
            return Err(bad(
                "continue key is not valid: server does not recognize this encoded version".into(),
            ));
        }
        if tok.rv == 0 {
            return Err(bad(
                "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
                    .into(),
            ));
        }
        if tok.start.is_empty() {
            return Err(bad(
                "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
                    .into(),
            ));
        }
        Ok(tok)
    }

    /// The store key to continue after.
    pub fn after_key(&self, res: ResId) -> Key {
        let start = self.start.trim_end_matches('\u{0}');
        match start.split_once('/') {
            Some((ns, name)) => (res, ns.to_string(), name.to_string()),
            None => (res, String::new(), start.to_string()),
        }
    }
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn expired_continue(start: Option<&str>) -> StatusError {
    let mut e = StatusError::expired(EXPIRED_CONTINUE);
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv: -1,
        start: start.unwrap_or("/\u{0}").to_string(),
    };
    if let Some(meta) = e.body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("continue".into(), json!(token.encode()));
    }
    e
}

fn write_item(buf: &mut Vec<u8>, obj: &Value, strip_type: bool, drop_meta: Option<&str>) {
    let Value::Object(map) = obj else {
        let _ = serde_json::to_writer(&mut *buf, obj);
        return;
    };
    buf.push(b'{');
    let mut first = true;
    for (k, v) in map {
        if strip_type && (k == "kind" || k == "apiVersion") {
            continue;
        }
        if !first {
            buf.push(b',');
        }
        first = false;
        let _ = serde_json::to_writer(&mut *buf, k);
        buf.push(b':');
        match (k.as_str(), drop_meta, v) {
            ("metadata", Some(field), Value::Object(meta)) => {
                let mut meta = meta.clone();
                meta.remove(field);
                let _ = serde_json::to_writer(&mut *buf, &meta);
            }
            _ => {
                let _ = serde_json::to_writer(&mut *buf, v);
            }
        }
    }
    buf.push(b'}');
}

pub(crate) fn list(c: &Call<'_>) -> Result<Response<Body>, StatusError> {
    let d = def(c.info.res);
    let q = c.query;
    let limit = match q.non_empty("limit") {
        Some(s) => {
            let n: i64 = s
                .parse()
                .map_err(|_| StatusError::bad_request(&format!("invalid limit {s:?}")))?;
            usize::try_from(n).ok().filter(|n| *n > 0)
        }
        None => None,
    };
    let rv_param = q.non_empty("resourceVersion");
    let rv_match = q.non_empty("resourceVersionMatch");
    let token = q.non_empty("continue");
    if let Some(m) = rv_match {
        let mut causes = Vec::new();
        if rv_param.is_none() {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                "",
                "resourceVersionMatch is forbidden unless resourceVersion is provided",
            ));
        }
        if token.is_some() {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                "",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        if m != "Exact" && m != "NotOlderThan" {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                m,
                "supported values: \"Exact\", \"NotOlderThan\"",
            ));
        }
        if m == "Exact" && rv_param == Some("0") {
            causes.push(FieldCause::invalid(
                "resourceVersionMatch",
                m,
                "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        if !causes.is_empty() {
            return Err(list_options_invalid(&causes));
        }
    }
    if token.is_some() && rv_param.is_some_and(|r| r != "0") {
        return Err(StatusError::bad_request(
            "specifying resource version is not allowed when using continue",
        ));
    }
    let (labels, fields) = selectors(c)?;
    let filtered = !labels.is_empty() || !fields.is_empty();
    let corruption = c.corruption;

    let store = c.shared.store();
    let (list_rv, after) = match token {
        Some(t) => {
            let tok = ContinueToken::decode(t)?;
            let expired = tok.rv > 0 && (tok.rv as u64) < store.token_floor();
            if expired || corruption == Some(ListCorruption::ExpiredContinue) {
                return Err(expired_continue(Some(&tok.start)));
            }
            let rv = if tok.rv < 0 {
                store.current_rv()
            } else {
                tok.rv as u64
            };
            (rv, Some(tok.after_key(c.stored_res())))
        }
        None => {
            if corruption == Some(ListCorruption::ExpiredContinue) {
                return Err(expired_continue(None));
            }
            (store.current_rv(), None)
        }
    };
    let effective_limit = if rv_param == Some("0") && token.is_none() {
        None
    } else {
        limit
    };
    let want = match (corruption, effective_limit) {
        (Some(ListCorruption::OversizedPage), Some(l)) => Some(l + 1),
        (_, l) => l,
    };
    let mut items: Vec<Arc<Value>> = Vec::new();
    let mut last_key: Option<Key> = None;
    let mut more = false;
    let mut remaining = 0usize;
    let ns = c.info.namespace.as_deref();
    // A continued list reads the snapshot of its first page.
    let snapshot = match token {
        Some(_) if list_rv < store.current_rv() => {
            store.range_at(c.stored_res(), ns, after.as_ref(), list_rv)
        }
        _ => Snapshot::Current,
    };
    let mut iter: Box<dyn Iterator<Item = (&Key, &Arc<Value>)> + '_> = match &snapshot {
        Snapshot::Current => store.range(c.stored_res(), ns, after.as_ref()),
        Snapshot::Changed(objects) => Box::new(objects.iter().map(|(k, v)| (k, v))),
        Snapshot::Expired => {
            let start = after.as_ref().map(|k| format!("{}/{}\u{0}", k.1, k.2));
            return Err(expired_continue(start.as_deref()));
        }
    };
    while let Some((k, v)) = iter.next() {
        if want.is_some_and(|w| items.len() >= w) {
            more = true;
            if !filtered {
                remaining = 1 + iter.by_ref().count();
            }
            break;
        }
        if labels.matches(v) && fields.matches(v) {
            items.push(v.clone());
            last_key = Some(k.clone());
        }
    }
    drop(iter);
    drop(store);

    let mut continue_token = if more {
        last_key
            .as_ref()
            .map(|k| ContinueToken::after(list_rv as i64, k).encode())
    } else {
        None
    };
    match corruption {
        Some(ListCorruption::ShortPage) if !items.is_empty() => {
            items.pop();
            if continue_token.is_none() {
                continue_token = last_key
                    .as_ref()
                    .map(|k| ContinueToken::after(list_rv as i64, k).encode());
            }
        }
        Some(ListCorruption::RepeatedContinue) => {
            if let Some(t) = token {
                continue_token = Some(t.to_string());
            }
        }
        Some(ListCorruption::MalformedContinue) => {
            continue_token = Some("bm90LWEtdG9rZW4".to_string());
        }
        _ => {}
    }

    if corruption.is_none() && super::table::wanted(&c.accept) {
        let mut meta = serde_json::Map::new();
        meta.insert("resourceVersion".into(), json!(list_rv.to_string()));
        if let Some(t) = &continue_token {
            meta.insert("continue".into(), json!(t));
            if !filtered && more {
                meta.insert("remainingItemCount".into(), json!(remaining));
            }
        }
        let table = super::table::table(c, items.iter().map(|i| &**i), Value::Object(meta));
        return Ok(crate::http_util::json(200, &table));
    }
    // Metadata only, when the client asks for it: the same list, each item its metadata.
    let metadata_only = super::metadata::wanted(&c.accept, super::metadata::LIST);
    let (list_kind, api_version) = match metadata_only {
        Some(version) => (super::metadata::LIST.to_owned(), version.to_owned()),
        None => (d.list_kind(), d.api_version()),
    };
    let kind = if corruption == Some(ListCorruption::WrongKind) {
        wrong_list_kind(&list_kind).to_string()
    } else {
        list_kind
    };
    let mut buf: Vec<u8> = Vec::with_capacity(256 + items.len() * 1024);
    let _ = write!(
        buf,
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{{\"resourceVersion\":\"{}\"",
        Value::String(kind),
        Value::String(api_version),
        list_rv
    );
    if let Some(t) = &continue_token {
        let _ = write!(buf, ",\"continue\":{}", Value::String(t.clone()));
        if !filtered && more {
            let _ = write!(buf, ",\"remainingItemCount\":{remaining}");
        }
    }
    buf.extend_from_slice(b"},\"items\":[");
    let drop_field = match corruption {
        Some(ListCorruption::ItemWithoutUid) => Some("uid"),
        Some(ListCorruption::ItemWithoutName) => Some("name"),
        Some(ListCorruption::ItemWithoutResourceVersion) => Some("resourceVersion"),
        _ => None,
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            buf.push(b',');
        }
        let drop_field = if i == 0 { drop_field } else { None };
        let shown = c.shown(item);
        match metadata_only {
            Some(version) => write_item(
                &mut buf,
                &super::metadata::partial(&shown, version),
                false,
                drop_field,
            ),
            None => write_item(&mut buf, &shown, !d.custom, drop_field),
        }
    }
    buf.extend_from_slice(b"]}");
    if corruption == Some(ListCorruption::TruncatedJson) {
        buf.truncate(buf.len() / 2);
    }
    Ok(crate::http_util::full(200, "application/json", buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rollsafe_emulator_types::resources::ids;

    #[test]
    fn continue_tokens_round_trip() {
        let key: Key = (ids::DEPLOYMENTS, "ns".into(), "web".into());
        let t = ContinueToken::after(42, &key);
        let decoded = ContinueToken::decode(&t.encode());
        assert_eq!(decoded.as_ref().ok(), Some(&t));
        assert_eq!(t.after_key(ids::DEPLOYMENTS), key);
    }

    #[test]
    fn malformed_tokens_are_400() {
        for bad in ["!!!", "bm90LWEtdG9rZW4", "e30"] {
            let e = ContinueToken::decode(bad);
            assert_eq!(e.err().map(|e| e.code), Some(400), "{bad}");
        }
    }
}
