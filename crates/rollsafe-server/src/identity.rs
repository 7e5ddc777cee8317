//! Which authenticated identities the server accepts: reserved Kubernetes identities never.
//!
//! With impersonation on, the caller's email becomes `Impersonate-User` and each group an
//! `Impersonate-Group`. A caller whose identity provider can be made to emit `system:masters`
//! would otherwise act as cluster-admin. So a session whose user name or any group starts with
//! `system:` (after trimming the blanks an HTTP parser strips from a header value, compared
//! without regard to ASCII case) is refused at authentication with a fixed message and
//! audited — never forwarded, never silently stripped: a stripped identity would act with
//! fewer groups than the identity provider gave it, which is a different person to RBAC and
//! to the audit log.
//!
//! The rule holds in every mode (the groups also feed the ACL) and cannot be turned off. It can
//! only be made stricter: [`AllowedGroups`] (`KRYPTON_ALLOWED_GROUPS`) lists patterns, and a
//! session carrying a group that matches none of them is refused the same way.

use thiserror::Error;

use crate::session::{Source, User};

/// The prefix of identities Kubernetes reserves (`system:masters`, `system:serviceaccount:…`,
/// `system:nodes`, `system:anonymous`, …).
pub const RESERVED_PREFIX: &str = "system:";

/// Why an authenticated session is refused. The caller sees one fixed message; the variant is
/// logged and audited as a static reason.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum IdentityRefusal {
    /// The user name is a reserved Kubernetes identity.
    #[error("the user name is a reserved Kubernetes identity")]
    ReservedUser,
    /// A group is a reserved Kubernetes group.
    #[error("a group is a reserved Kubernetes group")]
    ReservedGroup,
    /// A group matches none of the allowed group patterns.
    #[error("a group is not among the allowed groups")]
    GroupNotAllowed,
}

impl IdentityRefusal {
    /// A stable code for logs and the audit line's `reason`.
    pub fn code(self) -> &'static str {
        match self {
            IdentityRefusal::ReservedUser => "reserved_user",
            IdentityRefusal::ReservedGroup => "reserved_group",
            IdentityRefusal::GroupNotAllowed => "group_not_allowed",
        }
    }
}

/// An invalid `KRYPTON_ALLOWED_GROUPS` pattern.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PatternError {
    /// A pattern would admit reserved groups.
    #[error("{0:?} would allow reserved system: groups")]
    AdmitsReserved(String),
    /// A pattern has more than one `*`, or one that is not at its end.
    #[error("{0:?} is not a group name or a prefix ending in a single *")]
    Malformed(String),
}

/// One allowed-group pattern: an exact name, or a prefix followed by `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum GroupPattern {
    Exact(String),
    Prefix(String),
}

impl GroupPattern {
    fn matches(&self, group: &str) -> bool {
        match self {
            GroupPattern::Exact(name) => group == name,
            GroupPattern::Prefix(prefix) => group.starts_with(prefix.as_str()),
        }
    }
}

/// The groups a session may carry, beyond the reserved rule. Empty means every group that is not
/// reserved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedGroups {
    patterns: Vec<GroupPattern>,
}

impl AllowedGroups {
    /// Parses comma-separated patterns: `name` (exact) or `prefix*`. A bare `*` or a prefix that
    /// a reserved group could match is refused: the setting may only make the rule stricter.
    pub fn parse(value: &str) -> Result<Self, PatternError> {
        let mut patterns = Vec::new();
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let pattern = match entry.split_once('*') {
                None => GroupPattern::Exact(entry.to_owned()),
                Some((prefix, "")) if !prefix.is_empty() => GroupPattern::Prefix(prefix.to_owned()),
                _ => return Err(PatternError::Malformed(entry.to_owned())),
            };
            let lowered = entry.to_ascii_lowercase();
            let admits_reserved = match &pattern {
                GroupPattern::Exact(_) => is_reserved(entry),
                // `sys*` admits `system:masters`; `system:x*` admits `system:x…`.
                GroupPattern::Prefix(_) => {
                    let prefix = lowered.trim_end_matches('*');
                    RESERVED_PREFIX.starts_with(prefix) || prefix.starts_with(RESERVED_PREFIX)
                }
            };
            if admits_reserved {
                return Err(PatternError::AdmitsReserved(entry.to_owned()));
            }
            patterns.push(pattern);
        }
        Ok(Self { patterns })
    }

    /// Whether no pattern is set.
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }

    fn allows(&self, group: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(group))
    }
}

/// Whether a user or group name is a reserved Kubernetes identity, as the API server would read
/// it from a header: surrounding blanks removed, and compared without regard to ASCII case (a
/// stricter reading than Kubernetes', which is case-sensitive).
pub fn is_reserved(name: &str) -> bool {
    let name = name.trim_matches(|c: char| c == ' ' || c == '\t');
    name.len() >= RESERVED_PREFIX.len()
        && name.as_bytes()[..RESERVED_PREFIX.len()].eq_ignore_ascii_case(RESERVED_PREFIX.as_bytes())
}

/// The groups the API server gives every authenticated user itself, and so also adds to an
/// impersonated one.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The user name prefix of ServiceAccounts.
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The namespace and name of a ServiceAccount user name (`system:serviceaccount:<ns>:<name>`).
pub fn service_account(user: &str) -> Option<(&str, &str)> {
    let (namespace, name) = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains(':')).then_some((namespace, name))
}

/// Whether the API server adds `group` itself when `user` is impersonated: `system:authenticated`
/// always, and for a ServiceAccount `system:serviceaccounts` and `system:serviceaccounts:<ns>`.
fn implied_group(user: &str, group: &str) -> bool {
    group == AUTHENTICATED_GROUP
        || service_account(user).is_some_and(|(namespace, _)| {
            group == "system:serviceaccounts"
                || group
                    .strip_prefix("system:serviceaccounts:")
                    .is_some_and(|ns| ns == namespace)
        })
}

/// The groups sent as `Impersonate-Group` for a caller: a session's groups as they are; for an
/// identity Kubernetes reviewed, its groups without those the API server adds itself on
/// impersonation (so a ServiceAccount is impersonated by user name alone and gets exactly its
/// own groups back).
pub fn forwarded_groups(user: &User) -> impl Iterator<Item = &String> {
    user.groups
        .iter()
        .filter(move |g| user.source == Source::Session || !implied_group(&user.email, g))
}

/// Checks an authenticated caller against the reserved rule and the allowed groups.
///
/// A session (whose claims an identity provider wrote) may carry no `system:` user or group. An
/// identity the API server vouched for through a TokenReview may be a ServiceAccount, and may
/// carry the `system:` groups the API server adds itself; any other `system:` user or group is
/// refused the same way. The allowed-group patterns apply to the groups that are forwarded.
pub fn check(user: &User, allowed: &AllowedGroups) -> Result<(), IdentityRefusal> {
    let reviewed = user.source == Source::Kubernetes;
    if is_reserved(&user.email) && !(reviewed && service_account(&user.email).is_some()) {
        return Err(IdentityRefusal::ReservedUser);
    }
    if forwarded_groups(user).any(|g| is_reserved(g)) {
        return Err(IdentityRefusal::ReservedGroup);
    }
    if !forwarded_groups(user).all(|g| allowed.allows(g)) {
        return Err(IdentityRefusal::GroupNotAllowed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(email: &str, groups: &[&str]) -> User {
        User {
            sub: "u1".into(),
            email: email.into(),
            name: "U".into(),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            source: crate::session::Source::Session,
        }
    }

    #[test]
    fn reserved_identities_are_refused() {
        let none = AllowedGroups::default();
        let cases: [(User, Result<(), IdentityRefusal>); 10] = [
            (user("alice@x.io", &["dev", "ops"]), Ok(())),
            (user("alice@x.io", &[]), Ok(())),
            (user("alice@x.io", &["systems", "system"]), Ok(())),
            (
                user("alice@x.io", &["dev", "system:masters"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                user("alice@x.io", &[" system:masters"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                user("alice@x.io", &["SYSTEM:Masters"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                user("alice@x.io", &["system:authenticated"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                user("system:admin", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (
                user("system:serviceaccount:kube-system:default", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (
                user("\tsystem:kube-controller-manager", &["dev"]),
                Err(IdentityRefusal::ReservedUser),
            ),
        ];
        for (user, expected) in cases {
            assert_eq!(check(&user, &none), expected, "{user:?}");
        }
    }

    #[test]
    fn allowed_groups_only_narrow() {
        let allowed = AllowedGroups::parse("team-*, ops").unwrap();
        assert_eq!(check(&user("a@x.io", &["team-a", "ops"]), &allowed), Ok(()));
        assert_eq!(check(&user("a@x.io", &[]), &allowed), Ok(()));
        assert_eq!(
            check(&user("a@x.io", &["team-a", "dev"]), &allowed),
            Err(IdentityRefusal::GroupNotAllowed)
        );
        assert_eq!(
            check(&user("a@x.io", &["opsx"]), &allowed),
            Err(IdentityRefusal::GroupNotAllowed)
        );
        // The reserved rule comes first and cannot be widened.
        assert_eq!(
            check(&user("a@x.io", &["system:masters"]), &allowed),
            Err(IdentityRefusal::ReservedGroup)
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 2_000,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        /// Any casing of `system:`, behind any blanks a header parser strips, is refused as a
        /// user and as a group; a name that does not start so is never refused for it.
        #[test]
        fn reserved_prefix_in_any_case_or_padding(
            upper in proptest::collection::vec(proptest::bool::ANY, 7),
            pad in "[ \t]{0,3}",
            rest in "\\PC{0,20}",
            other in "\\PC{0,30}",
        ) {
            let prefix: String = RESERVED_PREFIX
                .chars()
                .zip(upper)
                .map(|(c, up)| if up { c.to_ascii_uppercase() } else { c })
                .collect();
            let reserved = format!("{pad}{prefix}{rest}");
            proptest::prop_assert_eq!(
                check(&user(&reserved, &[]), &AllowedGroups::default()),
                Err(IdentityRefusal::ReservedUser)
            );
            proptest::prop_assert_eq!(
                check(&user("a@x.io", &["dev", &reserved]), &AllowedGroups::default()),
                Err(IdentityRefusal::ReservedGroup)
            );
            let trimmed = other.trim_matches(|c: char| c == ' ' || c == '\t');
            if !trimmed.to_ascii_lowercase().starts_with(RESERVED_PREFIX) {
                proptest::prop_assert_eq!(
                    check(&user("a@x.io", &[&other]), &AllowedGroups::default()),
                    Ok(())
                );
            }
        }
    }

    #[test]
    fn patterns_that_widen_are_refused() {
        for bad in ["*", "s*", "sys*", "System:*", "system:masters", "system:x*"] {
            assert!(
                matches!(
                    AllowedGroups::parse(bad),
                    Err(PatternError::AdmitsReserved(_) | PatternError::Malformed(_))
                ),
                "{bad}"
            );
        }
        for bad in ["a*b", "**", "a**"] {
            assert!(
                matches!(AllowedGroups::parse(bad), Err(PatternError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(AllowedGroups::parse(" , ").unwrap().is_empty());
        assert!(!AllowedGroups::parse("team-*").unwrap().is_empty());
    }

    fn reviewed(name: &str, groups: &[&str]) -> User {
        User {
            source: Source::Kubernetes,
            ..user(name, groups)
        }
    }

    #[test]
    fn reviewed_identities_keep_only_what_the_api_server_adds() {
        let none = AllowedGroups::default();
        let sa = reviewed(
            "system:serviceaccount:ci:deployer",
            &[
                "system:serviceaccounts",
                "system:serviceaccounts:ci",
                "system:authenticated",
            ],
        );
        assert_eq!(check(&sa, &none), Ok(()));
        assert_eq!(
            forwarded_groups(&sa).count(),
            0,
            "impersonated by name alone"
        );
        let cases = [
            // Another namespace's ServiceAccount group is not implied by this one.
            (
                reviewed(
                    "system:serviceaccount:ci:deployer",
                    &["system:serviceaccounts:prod"],
                ),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                reviewed("system:serviceaccount:ci:deployer", &["system:masters"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            (
                reviewed("system:admin", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (
                reviewed("system:serviceaccount:ci", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (
                reviewed("system:serviceaccount:ci:a:b", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (reviewed("alice", &["system:authenticated", "dev"]), Ok(())),
            (
                reviewed("alice", &["system:masters", "system:authenticated"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
            // A session never gets the ServiceAccount exception.
            (
                user("system:serviceaccount:ci:deployer", &[]),
                Err(IdentityRefusal::ReservedUser),
            ),
            (
                user("alice@example.com", &["system:authenticated"]),
                Err(IdentityRefusal::ReservedGroup),
            ),
        ];
        for (caller, expected) in cases {
            assert_eq!(check(&caller, &none), expected, "{caller:?}");
        }
        let alice = reviewed("alice", &["system:authenticated", "dev"]);
        assert_eq!(forwarded_groups(&alice).collect::<Vec<_>>(), ["dev"]);
        let only_ops = AllowedGroups::parse("ops").unwrap();
        assert_eq!(
            check(&alice, &only_ops),
            Err(IdentityRefusal::GroupNotAllowed)
        );
        assert_eq!(check(&sa, &only_ops), Ok(()), "no forwarded group to match");
    }
}
