//! The ACL on a live Secret — the same decision as for updating it.
//!
//! In order:
//! 1. admins pass (`KRYPTON_ADMIN_USERS` emails case-insensitively, `KRYPTON_ADMIN_GROUPS`
//!    exactly; both empty makes every authenticated user an admin);
//! 2. if the Secret has a non-empty `<prefix>/allowed-groups` or `<prefix>/allowed-users`
//!    annotation (comma-separated), those lists alone decide;
//! 3. else, if the access ConfigMap has a non-empty entry for the namespace, it decides;
//! 4. else the Secret is open.
//!
//! A missing access ConfigMap means no namespace rules. A malformed one denies every non-admin
//! (fail closed) until it is fixed.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::session::User;

/// The key of the access ConfigMap that holds the rules.
pub const ACCESS_KEY: &str = "access.json";

/// Admin users and groups.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Admins {
    /// Lower-cased emails.
    pub users: Vec<String>,
    /// Exact group names.
    pub groups: Vec<String>,
}

impl Admins {
    /// Both lists empty: every authenticated user is an admin (bootstrap).
    pub fn is_bootstrap(&self) -> bool {
        self.users.is_empty() && self.groups.is_empty()
    }
}

/// Splits a comma-separated list — an ACL annotation, or a list setting — trimming entries and
/// dropping empty ones.
pub fn parse_csv(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Who may access Secrets of one namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Groups, matched exactly.
    #[serde(default)]
    pub groups: Vec<String>,
    /// Emails, matched case-insensitively.
    #[serde(default)]
    pub users: Vec<String>,
}

impl Rule {
    fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.users.is_empty()
    }

    fn admits(&self, user: &User) -> bool {
        self.users
            .iter()
            .any(|u| u.trim().eq_ignore_ascii_case(&user.email))
            || self
                .groups
                .iter()
                .any(|g| user.groups.iter().any(|ug| ug == g))
    }
}

/// The namespace rules, as read from the access ConfigMap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessRules {
    /// The ConfigMap (or its key) does not exist: no namespace rules.
    Absent,
    /// Rules per namespace.
    Rules(BTreeMap<String, Rule>),
    /// The ConfigMap exists but its rules cannot be read: non-admins are denied.
    Malformed,
}

impl AccessRules {
    /// Parses `access.json`: `{ "<ns>": { "groups": [..], "users": [..] } }`. Anything else is
    /// [`AccessRules::Malformed`].
    pub fn parse(text: &str) -> Self {
        let Ok(entries) = serde_json::from_str::<BTreeMap<String, serde_json::Value>>(text) else {
            return AccessRules::Malformed;
        };
        let mut rules = BTreeMap::new();
        for (namespace, entry) in entries {
            // Only an object is a rule; serde would also accept a sequence for a struct.
            if !entry.is_object() {
                return AccessRules::Malformed;
            }
            match serde_json::from_value::<Rule>(entry) {
                Ok(rule) => rules.insert(namespace, rule),
                Err(_) => return AccessRules::Malformed,
            };
        }
        AccessRules::Rules(rules)
    }
}

/// Why access was granted or refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// An admin.
    Admin,
    /// Admitted by the Secret's annotations.
    Annotation,
    /// Admitted by the namespace rules.
    NamespaceRule,
    /// No rule applies.
    Open,
    /// Refused by the Secret's annotations.
    DeniedByAnnotation,
    /// Refused by the namespace rules.
    DeniedByNamespaceRule,
    /// Refused because the namespace rules are malformed.
    DeniedMalformedRules,
}

impl Decision {
    /// Whether access is granted.
    pub fn allowed(self) -> bool {
        matches!(
            self,
            Decision::Admin | Decision::Annotation | Decision::NamespaceRule | Decision::Open
        )
    }
}

/// The decision when it does not depend on the namespace rules (the caller is an admin, or the
/// Secret's annotations decide), given the decision made with [`AccessRules::Absent`].
pub fn decided_without_rules(decision_without_rules: Decision) -> Option<Decision> {
    match decision_without_rules {
        Decision::Admin | Decision::Annotation | Decision::DeniedByAnnotation => {
            Some(decision_without_rules)
        }
        _ => None,
    }
}

/// Whether `user` is an admin.
pub fn is_admin(user: &User, admins: &Admins) -> bool {
    admins.is_bootstrap()
        || admins
            .users
            .iter()
            .any(|u| u.eq_ignore_ascii_case(&user.email))
        || admins
            .groups
            .iter()
            .any(|g| user.groups.iter().any(|ug| ug == g))
}

/// Decides access to a live Secret of `namespace` with these annotations.
pub fn decide(
    user: &User,
    admins: &Admins,
    prefix: &str,
    annotations: &BTreeMap<String, String>,
    namespace: &str,
    rules: &AccessRules,
) -> Decision {
    if is_admin(user, admins) {
        return Decision::Admin;
    }
    let list = |suffix: &str| {
        annotations
            .get(&format!("{prefix}/{suffix}"))
            .map(|value| parse_csv(value))
            .unwrap_or_default()
    };
    let annotation_rule = Rule {
        groups: list("allowed-groups"),
        users: list("allowed-users"),
    };
    if !annotation_rule.is_empty() {
        return if annotation_rule.admits(user) {
            Decision::Annotation
        } else {
            Decision::DeniedByAnnotation
        };
    }
    match rules {
        AccessRules::Malformed => Decision::DeniedMalformedRules,
        AccessRules::Rules(rules) => match rules.get(namespace) {
            Some(rule) if !rule.is_empty() => {
                if rule.admits(user) {
                    Decision::NamespaceRule
                } else {
                    Decision::DeniedByNamespaceRule
                }
            }
            _ => Decision::Open,
        },
        AccessRules::Absent => Decision::Open,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv() {
        assert_eq!(parse_csv(" a, ,b ,,c"), ["a", "b", "c"]);
        assert!(parse_csv("").is_empty());
    }

    fn user(email: &str, groups: &[&str]) -> User {
        User {
            sub: email.into(),
            email: email.into(),
            name: email.into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            source: crate::session::Source::Session,
        }
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn decision_table() {
        let admins = Admins {
            users: vec!["root@x.io".into()],
            groups: vec!["Platform".into()],
        };
        let rules = AccessRules::parse(
            r#"{"team-a": {"groups": ["a-devs"], "users": ["Lead@X.io"]}, "open": {}}"#,
        );
        let none = annotations(&[]);
        let by_annotation = annotations(&[
            ("krypton.io/allowed-groups", " ops , "),
            ("krypton.io/allowed-users", "Carol@x.io"),
        ]);
        let empty_annotation = annotations(&[("krypton.io/allowed-groups", " , ")]);
        let other_prefix = annotations(&[("example.com/allowed-groups", "ops")]);
        use Decision::*;
        type Case<'a> = (
            &'a str,
            User,
            &'a BTreeMap<String, String>,
            &'a str,
            &'a AccessRules,
            Decision,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "admin by email, any case",
                user("ROOT@x.io", &[]),
                &by_annotation,
                "team-a",
                &rules,
                Admin,
            ),
            (
                "admin by group, exact",
                user("u@x.io", &["Platform"]),
                &by_annotation,
                "team-a",
                &rules,
                Admin,
            ),
            (
                "admin group is case-sensitive",
                user("u@x.io", &["platform"]),
                &by_annotation,
                "team-a",
                &rules,
                DeniedByAnnotation,
            ),
            (
                "admin even with malformed rules",
                user("root@x.io", &[]),
                &none,
                "team-a",
                &AccessRules::Malformed,
                Admin,
            ),
            (
                "annotation group",
                user("u@x.io", &["ops"]),
                &by_annotation,
                "team-a",
                &rules,
                Annotation,
            ),
            (
                "annotation user, any case",
                user("carol@x.io", &[]),
                &by_annotation,
                "team-a",
                &rules,
                Annotation,
            ),
            (
                "annotations alone decide over namespace rules",
                user("lead@x.io", &["a-devs"]),
                &by_annotation,
                "team-a",
                &rules,
                DeniedByAnnotation,
            ),
            (
                "empty annotation lists fall through",
                user("lead@x.io", &[]),
                &empty_annotation,
                "team-a",
                &rules,
                NamespaceRule,
            ),
            (
                "other prefix is ignored",
                user("u@x.io", &[]),
                &other_prefix,
                "team-a",
                &rules,
                DeniedByNamespaceRule,
            ),
            (
                "namespace group",
                user("u@x.io", &["a-devs"]),
                &none,
                "team-a",
                &rules,
                NamespaceRule,
            ),
            (
                "namespace user",
                user("lead@x.io", &[]),
                &none,
                "team-a",
                &rules,
                NamespaceRule,
            ),
            (
                "namespace rule refuses",
                user("u@x.io", &["b-devs"]),
                &none,
                "team-a",
                &rules,
                DeniedByNamespaceRule,
            ),
            (
                "empty namespace entry is open",
                user("u@x.io", &[]),
                &none,
                "open",
                &rules,
                Open,
            ),
            (
                "namespace without entry is open",
                user("u@x.io", &[]),
                &none,
                "team-b",
                &rules,
                Open,
            ),
            (
                "missing ConfigMap is open",
                user("u@x.io", &[]),
                &none,
                "team-a",
                &AccessRules::Absent,
                Open,
            ),
            (
                "malformed rules deny non-admins",
                user("u@x.io", &["a-devs"]),
                &none,
                "team-a",
                &AccessRules::Malformed,
                DeniedMalformedRules,
            ),
            (
                "annotations still admit with malformed rules",
                user("u@x.io", &["ops"]),
                &by_annotation,
                "team-a",
                &AccessRules::Malformed,
                Annotation,
            ),
        ];
        for (case, user, annotations, namespace, rules, expected) in cases {
            assert_eq!(
                decide(&user, &admins, "krypton.io", annotations, namespace, rules),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn bootstrap_makes_everyone_admin() {
        let rules = AccessRules::Malformed;
        let decision = decide(
            &user("u@x.io", &[]),
            &Admins::default(),
            "krypton.io",
            &BTreeMap::new(),
            "ns",
            &rules,
        );
        assert_eq!(decision, Decision::Admin);
    }

    #[test]
    fn malformed_access_json() {
        for text in [
            "",
            "[]",
            "{\"ns\": []}",
            "{\"ns\": {\"groups\": \"a\"}}",
            "{\"ns\": {\"groups\": [1]}}",
            "{\"ns\": {\"gropus\": [\"a\"]}}",
            "not json",
        ] {
            assert_eq!(AccessRules::parse(text), AccessRules::Malformed, "{text:?}");
        }
        assert_eq!(
            AccessRules::parse("{}"),
            AccessRules::Rules(BTreeMap::new())
        );
    }
}
