//! A set of field paths, kept and encoded as the real server's `FieldsV1` trie: each path
//! element is a string `f:<field>`, `k:<key fields as JSON>`, `v:<value as JSON>` or `i:<index>`,
//! and `.` marks a node that is itself in the set while also having children listed.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A set of paths (a trie over path elements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    /// Whether the path ending at this node is in the set.
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    /// Whether nothing is in the set.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds a path.
    pub fn insert(&mut self, path: &[String]) {
        let mut node = self;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether a path is in the set.
    #[cfg(test)]
    pub fn contains(&self, path: &[&str]) -> bool {
        let mut node = self;
        for pe in path {
            match node.children.get(*pe) {
                Some(n) => node = n,
                None => return false,
            }
        }
        node.member
    }

    /// The subtree under one path element (`None`: nothing at or under it is in the set).
    pub fn child(&self, pe: &str) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Removes one path element with everything under it.
    pub fn remove_subtree(&mut self, pe: &str) {
        self.children.remove(pe);
    }

    /// Keeps only one path element (with everything under it).
    pub fn retain_subtree(&mut self, pe: &str) {
        self.children.retain(|k, _| k == pe);
    }

    /// Removes a path from the set (its children stay).
    pub fn remove_member(&mut self, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            self.member = false;
            return;
        };
        if let Some(child) = self.children.get_mut(*first) {
            child.remove_member(rest);
            if child.is_empty() {
                self.children.remove(*first);
            }
        }
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.union_in(other);
        out
    }

    fn union_in(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (pe, child) in &other.children {
            self.children.entry(pe.clone()).or_default().union_in(child);
        }
    }

    /// Paths in this set and not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            let rest = match other.children.get(pe) {
                Some(o) => child.difference(o),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(pe.clone(), rest);
            }
        }
        out
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, child) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let both = child.intersection(o);
                if !both.is_empty() {
                    out.children.insert(pe.clone(), both);
                }
            }
        }
        out
    }

    /// The paths in the set, in the real server's iteration order (at each level the members
    /// first, then the children's paths).
    pub fn paths(&self) -> Vec<Vec<String>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        for (pe, child) in &self.children {
            if child.member {
                let mut p = prefix.clone();
                p.push(pe.clone());
                out.push(p);
            }
        }
        for (pe, child) in &self.children {
            prefix.push(pe.clone());
            child.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` document.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".into(), Value::Object(Map::new()));
        }
        for (pe, child) in &self.children {
            map.insert(pe.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }

    /// Reads a `fieldsV1` document; `None` when it is not one.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let mut root = Self::node_from(v)?;
        root.member = false;
        Some(root)
    }

    fn node_from(v: &Value) -> Option<FieldSet> {
        let map = v.as_object()?;
        let mut node = FieldSet {
            member: map.is_empty(),
            children: BTreeMap::new(),
        };
        for (k, child) in map {
            if k == "." {
                node.member = true;
                continue;
            }
            if !(k.starts_with("f:")
                || k.starts_with("k:")
                || k.starts_with("v:")
                || k.starts_with("i:"))
            {
                return None;
            }
            node.children.insert(k.clone(), Self::node_from(child)?);
        }
        Some(node)
    }
}

/// A path as the real server prints it in conflicts: `.spec.replicas`,
/// `.spec.template.spec.containers[name="web"].image`, `.metadata.finalizers[="x"]`.
pub fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for pe in path {
        if let Some(name) = pe.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(keys) = pe.strip_prefix("k:") {
            let fields: Vec<String> = match serde_json::from_str::<Map<String, Value>>(keys) {
                Ok(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={}", display_value(v)))
                    .collect(),
                Err(_) => vec![keys.to_string()],
            };
            out.push('[');
            out.push_str(&fields.join(","));
            out.push(']');
        } else if let Some(value) = pe.strip_prefix("v:") {
            let shown = serde_json::from_str::<Value>(value)
                .map(|v| display_value(&v))
                .unwrap_or_else(|_| value.to_string());
            out.push_str(&format!("[={shown}]"));
        } else if let Some(index) = pe.strip_prefix("i:") {
            out.push_str(&format!("[{index}]"));
        }
    }
    out
}

/// A value as the real server prints it inside a path (strings quoted, the rest as is).
fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn p(path: &[&str]) -> Vec<String> {
        path.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn encoding_table() {
        let port = r#"k:{"containerPort":80,"protocol":"TCP"}"#;
        let web = r#"k:{"name":"web"}"#;
        let cases: Vec<(Vec<Vec<String>>, Value)> = vec![
            (vec![], json!({})),
            (
                vec![p(&["f:spec", "f:replicas"])],
                json!({"f:spec": {"f:replicas": {}}}),
            ),
            (
                vec![
                    p(&["f:metadata", "f:labels"]),
                    p(&["f:metadata", "f:labels", "f:app"]),
                ],
                json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
            ),
            (
                vec![
                    p(&["f:spec", "f:containers", web]),
                    p(&["f:spec", "f:containers", web, "f:image"]),
                    p(&["f:spec", "f:containers", web, "f:ports", port]),
                    p(&[
                        "f:spec",
                        "f:containers",
                        web,
                        "f:ports",
                        port,
                        "f:containerPort",
                    ]),
                ],
                json!({"f:spec": {"f:containers": {web: {".": {}, "f:image": {},
                    "f:ports": {port: {".": {}, "f:containerPort": {}}}}}}}),
            ),
            (
                vec![
                    p(&["f:metadata", "f:finalizers", "v:\"a\""]),
                    p(&["f:metadata", "f:finalizers", "v:\"b\""]),
                ],
                json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}}),
            ),
        ];
        for (paths, want) in cases {
            let mut set = FieldSet::default();
            for path in &paths {
                set.insert(path);
            }
            assert_eq!(set.to_fields_v1(), want, "encoding {paths:?}");
            assert_eq!(
                FieldSet::from_fields_v1(&want),
                Some(set.clone()),
                "decoding {want}"
            );
            assert_eq!(set.paths().len(), paths.len());
        }
        assert_eq!(FieldSet::from_fields_v1(&json!({"x": {}})), None);
        assert_eq!(FieldSet::from_fields_v1(&json!([])), None);
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::default();
        a.insert(&p(&["f:spec", "f:replicas"]));
        a.insert(&p(&["f:spec", "f:paused"]));
        let mut b = FieldSet::default();
        b.insert(&p(&["f:spec", "f:replicas"]));
        b.insert(&p(&["f:data", "f:x"]));
        assert!(a.intersection(&b).contains(&["f:spec", "f:replicas"]));
        assert!(!a.intersection(&b).contains(&["f:spec", "f:paused"]));
        let d = a.difference(&b);
        assert!(d.contains(&["f:spec", "f:paused"]) && !d.contains(&["f:spec", "f:replicas"]));
        let u = a.union(&b);
        assert_eq!(u.paths().len(), 3);
        assert!(a.difference(&a).is_empty());
        let mut m = u.clone();
        m.remove_member(&["f:data", "f:x"]);
        assert_eq!(m, a);
    }

    #[test]
    fn paths_print_as_the_real_server_does() {
        assert_eq!(
            display_path(&p(&["f:spec", "f:replicas"])),
            ".spec.replicas"
        );
        assert_eq!(
            display_path(&p(&[
                "f:spec",
                "f:template",
                "f:spec",
                "f:containers",
                r#"k:{"name":"web"}"#,
                "f:image"
            ])),
            r#".spec.template.spec.containers[name="web"].image"#
        );
        assert_eq!(
            display_path(&p(&["f:ports", r#"k:{"port":80,"protocol":"TCP"}"#])),
            r#".ports[port=80,protocol="TCP"]"#
        );
        assert_eq!(
            display_path(&p(&["f:metadata", "f:finalizers", "v:\"x\""])),
            r#".metadata.finalizers[="x"]"#
        );
    }
}
