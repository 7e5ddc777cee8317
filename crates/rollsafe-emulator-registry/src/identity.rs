//! Who a request comes from: the identities the emulator knows (bearer tokens), and the user a
//! request acts as after authentication and impersonation.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The group whose members may do everything, as in a real cluster.
pub const MASTERS_GROUP: &str = "system:masters";
/// Added to every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group of the anonymous user.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The user name of requests without credentials.
pub const ANONYMOUS_USER: &str = "system:anonymous";

/// A user known to the emulator: a name, a bearer token and groups.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// User name (what RBAC subjects and messages use).
    pub name: String,
    /// Bearer token.
    pub token: String,
    /// Groups (besides `system:authenticated`, which is always added).
    #[serde(default)]
    pub groups: Vec<String>,
    /// The audiences a bound token was issued for (TokenRequest); `None` for a static token,
    /// which, as the API server's audience-agnostic authenticators, is valid for the server's own
    /// audience only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audiences: Option<Vec<String>>,
}

/// The API server's own audience: what a token needs to call the API, and what a TokenReview
/// without `spec.audiences` checks for.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("name", &self.name)
            .field("token", &"<redacted>")
            .field("groups", &self.groups)
            .field("audiences", &self.audiences)
            .finish()
    }
}

impl Identity {
    /// A new identity.
    pub fn new(name: impl Into<String>, token: impl Into<String>, groups: &[&str]) -> Self {
        Self {
            name: name.into(),
            token: token.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            audiences: None,
        }
    }

    /// Bound to these audiences, as a requested ServiceAccount token is.
    pub fn with_audiences(mut self, audiences: Vec<String>) -> Self {
        self.audiences = Some(audiences);
        self
    }

    /// The audiences among `targets` this token is valid for (the server's own when `targets`
    /// is empty), as the API server's audience check computes them: empty means rejected.
    pub fn audiences_within(&self, targets: &[String]) -> Vec<String> {
        let own = [API_AUDIENCE.to_owned()];
        let targets = if targets.is_empty() {
            &own[..]
        } else {
            targets
        };
        let issued = self.audiences.as_deref().unwrap_or(&own);
        targets
            .iter()
            .filter(|t| issued.contains(t))
            .cloned()
            .collect()
    }
}

/// Who a request acts as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Groups, including the implicit ones.
    pub groups: Vec<String>,
    /// uid, when impersonated with `Impersonate-Uid`.
    pub uid: Option<String>,
}

impl UserInfo {
    /// The anonymous user.
    pub fn anonymous() -> Self {
        Self {
            name: ANONYMOUS_USER.into(),
            groups: vec![UNAUTHENTICATED_GROUP.into()],
            uid: None,
        }
    }

    /// An authenticated identity with `system:authenticated` added.
    pub fn authenticated(name: &str, groups: &[String]) -> Self {
        let mut groups = groups.to_vec();
        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.into());
        }
        Self {
            name: name.into(),
            groups,
            uid: None,
        }
    }
}
