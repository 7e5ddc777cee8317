//! Query strings, label selectors and field selectors.

use serde_json::Value;

/// A parsed query string. Tolerates empty pairs and a leading `&` (kube sends `?&limit=…`).
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses `a=1&b=2` (without the `?`) as Go's `url.ParseQuery` does: `+` is a space.
    pub fn parse(raw: &str) -> Self {
        let pairs = form_urlencoded::parse(raw.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        Self { pairs }
    }

    /// The first value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of a key, in order.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The first non-empty value of a key.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }

    /// Whether a boolean parameter is set to `true`/`1`.
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True" | "TRUE"))
    }
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A label selector in the string syntax of `?labelSelector=`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

/// Splits at commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(rest: &str) -> Option<Vec<String>> {
    let inner = rest.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    /// Parses a selector; the error is the message of the real server's 400.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for part in split_top(s) {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!(
                    "unable to parse requirement: found '', expected: identifier in {s:?}"
                ));
            }
            let req = if let Some(key) = part.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                // What follows the operator is an identifier: `tier===web` is the real 400.
                if v.trim_start().starts_with(['=', '!']) {
                    return Err(format!(
                        "unable to parse requirement: found '{}', expected: identifier",
                        &v.trim_start()[..1]
                    ));
                }
                Requirement::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                let values = set_values(rest)
                    .ok_or_else(|| format!("unable to parse requirement: {part:?}"))?;
                Requirement::NotIn(k.trim().into(), values)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                let values = set_values(rest)
                    .ok_or_else(|| format!("unable to parse requirement: {part:?}"))?;
                Requirement::In(k.trim().into(), values)
            } else if part.contains(char::is_whitespace) || part.contains('(') {
                return Err(format!("unable to parse requirement: {part:?}"));
            } else {
                Requirement::Exists(part.to_string())
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// A `metav1.LabelSelector` object (`matchLabels`, `matchExpressions`), as
    /// `LabelSelectorAsSelector` reads it; `{}` matches everything. The error names what is
    /// not a selector (an unknown operator, `In` without values …).
    pub fn from_object(selector: &Value) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in labels {
                let value = value.as_str().unwrap_or_default();
                reqs.push(Requirement::Eq(key.clone(), value.to_owned()));
            }
        }
        let expressions = selector
            .get("matchExpressions")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for expression in expressions {
            let key = expression
                .get("key")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let values: Vec<String> = expression
                .get("values")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            let operator = expression
                .get("operator")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let req = match operator {
                "In" | "NotIn" if values.is_empty() => {
                    return Err(
                        "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
                            .to_owned(),
                    );
                }
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" | "DoesNotExist" if !values.is_empty() => {
                    return Err(
                        "values: Invalid value: values set must be empty for exists and does not exist"
                            .to_owned(),
                    );
                }
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::NotExists(key),
                other => return Err(format!("{other:?} is not a valid label selector operator")),
            };
            reqs.push(req);
        }
        Ok(Self { reqs })
    }

    /// Whether the selector selects nothing-in-particular (matches everything).
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether an object's labels match.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.reqs.iter().all(|r| match r {
            Requirement::Eq(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEq(k, v) => get(k) != Some(v.as_str()),
            Requirement::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A field selector on `metadata.name`, `metadata.namespace` and the resource's own field
/// labels (`type` for Secrets, `involvedObject.name` … for Events).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a selector; `extra` are the resource's own field labels; other fields give the
    /// real server's 400 message.
    pub fn parse_for(s: &str, extra: &[&str]) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(Self { reqs });
        }
        for part in s.split(',') {
            let part = part.trim();
            let (field, equal, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let field = field.trim();
            if field != "metadata.name" && field != "metadata.namespace" && !extra.contains(&field)
            {
                return Err(format!("field label not supported: {field}"));
            }
            reqs.push((field.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self { reqs })
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Whether an object matches.
    pub fn matches(&self, object: &Value) -> bool {
        self.reqs.iter().all(|(field, equal, value)| {
            let pointer = format!("/{}", field.replace('.', "/"));
            let actual = object
                .pointer(&pointer)
                .and_then(Value::as_str)
                .unwrap_or("");
            (actual == value) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn query_tolerates_empty_pairs() {
        let q = Query::parse("&limit=2&&labelSelector=app%3Dweb&x");
        assert_eq!(q.get("limit"), Some("2"));
        assert_eq!(q.get("labelSelector"), Some("app=web"));
        assert_eq!(q.get("x"), Some(""));
    }

    #[test]
    fn label_selectors() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("missing", false),
            ("!missing", true),
            ("", true),
        ] {
            let s = LabelSelector::parse(sel).unwrap_or_default();
            assert_eq!(s.matches(&obj), want, "{sel}");
        }
    }

    #[test]
    fn label_selector_objects() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (selector, want) in [
            (json!({"matchLabels": {"app": "web"}}), true),
            (json!({"matchLabels": {"app": "api"}}), false),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "back"]}]}),
                true,
            ),
            (
                json!({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
                false,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}),
                true,
            ),
            (
                json!({"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}]}),
                false,
            ),
            (json!({}), true),
        ] {
            let parsed = LabelSelector::from_object(&selector).unwrap_or_default();
            assert_eq!(parsed.matches(&obj), want, "{selector}");
        }
        assert!(LabelSelector::from_object(&json!({})).is_ok_and(|s| s.is_empty()));
        for invalid in [
            json!({"matchExpressions": [{"key": "tier", "operator": "Near", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "In"}]}),
            json!({"matchExpressions": [{"key": "tier", "operator": "Exists", "values": ["x"]}]}),
        ] {
            assert!(LabelSelector::from_object(&invalid).is_err(), "{invalid}");
        }
    }

    #[test]
    fn field_selectors() {
        let obj = json!({"metadata": {"name": "a", "namespace": "ns"}});
        assert!(FieldSelector::parse_for("metadata.name=a", &[]).is_ok_and(|s| s.matches(&obj)));
        assert!(
            FieldSelector::parse_for("metadata.namespace!=ns", &[]).is_ok_and(|s| !s.matches(&obj))
        );
        assert_eq!(
            FieldSelector::parse_for("spec.x=1", &[]),
            Err("field label not supported: spec.x".into())
        );
    }
}
