//! Constrained impersonation (KEP-5284): which impersonation rules the server runs under,
//! decided once at startup.
//!
//! With impersonation on, every Kubernetes call of a request carries `Impersonate-User` and one
//! `Impersonate-Group` per group (a reviewed ServiceAccount: its name alone). The headers are
//! the same whatever the rules; the API server's impersonation filter decides who may send
//! them (`k8s.io/apiserver`, `pkg/endpoints/filters/impersonation`, v1.37):
//!
//! - **unconstrained**: `impersonate` on `users`, `groups` (and `serviceaccounts`) of the core
//!   group — whoever holds it may act as those identities for any verb on anything;
//! - **constrained**, where the API server serves it (the `ConstrainedImpersonation` feature:
//!   alpha in 1.35, beta and on by default from 1.36): `impersonate:user-info` on `users` and
//!   `groups` of `authentication.k8s.io` (`impersonate:serviceaccount` on `serviceaccounts` for
//!   a ServiceAccount named alone) says *who*, and `impersonate-on:user-info:<verb>` on the
//!   request's own resource says *what*: the chart grants it for the Secret read, the three
//!   workload lists and the patches only, in the namespaces in scope
//!   (`rollsafe_kube::least_privilege::RULES`). The API server still tries the unconstrained
//!   check last, so a ServiceAccount holding both is unconstrained.
//!
//! [`resolve`] decides, as the server itself, before the listeners open:
//!
//! 1. a SelfSubjectRulesReview in the server's namespace (every authenticated user may send
//!    one): which of the two rule sets the ServiceAccount holds
//!    ([`rollsafe_kube::least_privilege::held_impersonation`]);
//! 2. one probe: `GET /version` impersonating [`PROBE_USER`] with no group. No rollsafe rule
//!    grants anything on `/version` as anyone, so the answer says which filter refused it: the
//!    unconstrained filter refuses on `users` of the core group (the `Status` details: kind
//!    `users`, group empty) — the API server does not serve constrained impersonation; the
//!    constrained filter refuses on the request itself (`impersonate-on:user-info:get` on the
//!    path: no kind) — it does. A probe that passes means some rule lets the ServiceAccount
//!    act as anyone for anything: unconstrained.
//!
//! | `KRYPTON_IMPERSONATION_CONSTRAINED` | unconstrained rule held (or probe passed) | constrained rule held, served | held, not served | neither held |
//! |---|---|---|---|---|
//! | `false` | unconstrained (nothing asked) | ← | ← | ← |
//! | `auto` (default) | unconstrained, warned | constrained | stop: `constrained_impersonation_not_served` | unconstrained, warned |
//! | `true` (the chart, when it grants the constrained rules) | stop: `unconstrained_rule_held` | constrained | stop: `constrained_impersonation_not_served` | stop: `no_constrained_rule` |
//!
//! A stop is one fixed line and exit 1 (a pod restarts; the fallback is the chart's
//! `impersonation.constrained: false`). The version alone would not do: a 1.36 cluster may run
//! with the feature off, and a 1.35 one with it on.
//!
//! Constrained, the server sends no call as the caller that those rules do not grant (each
//! would be refused, and logged by the API server as a refused impersonation): the page's list
//! of a namespace's Secrets answers `kubernetes_denied` as without impersonation, the rollout
//! view's pod notes say `notRead: "forbidden"`, and with `KRYPTON_NAMESPACES` the allow-list
//! decides the scope alone ([`ImpersonationMode::lists_as_caller`]).

use std::time::Duration;

use http_body_util::BodyExt as _;
use k8s_openapi::api::authorization::v1::{SelfSubjectRulesReview, SelfSubjectRulesReviewSpec};
use kube::api::{Api, PostParams};
use rollsafe_kube::least_privilege::{HeldImpersonation, grants_of, held_impersonation};
use rollsafe_kube::{Connection, Impersonation};
use serde::Deserialize;
use thiserror::Error;
use tracing::{info, warn};

use crate::scope::Scope;

/// The user the startup probe impersonates: nobody (not a reserved name; no RBAC names it).
pub const PROBE_USER: &str = "rollsafe.dev:impersonation-probe";

/// `KRYPTON_IMPERSONATION_CONSTRAINED`: which impersonation rules the server may run under.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Constraint {
    /// `auto`: constrained when the ServiceAccount holds the constrained rules and the API
    /// server serves them; else unconstrained.
    #[default]
    Auto,
    /// `true`: constrained, or the server does not start.
    Required,
    /// `false`: the unconstrained rules; nothing is asked at startup.
    Off,
}

impl Constraint {
    /// The setting's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Constraint::Auto => "auto",
            Constraint::Required => "true",
            Constraint::Off => "false",
        }
    }
}

/// How the server's calls run, once decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImpersonationMode {
    /// As the server itself.
    Off,
    /// As the caller, under the constrained rules.
    Constrained,
    /// As the caller, under the unconstrained `impersonate` rules.
    Unconstrained,
}

impl ImpersonationMode {
    /// `off`, `constrained`, `unconstrained` (`/api/config`, the startup log).
    pub fn as_str(self) -> &'static str {
        match self {
            ImpersonationMode::Off => "off",
            ImpersonationMode::Constrained => "constrained",
            ImpersonationMode::Unconstrained => "unconstrained",
        }
    }

    /// The mode a state built in code assumes, without asking the cluster: off without
    /// impersonation, constrained when the setting requires it, else unconstrained. `rollsafe
    /// serve` replaces it with [`resolve`]'s answer.
    pub fn assumed(impersonation: bool, constraint: Constraint) -> Self {
        match (impersonation, constraint) {
            (false, _) => ImpersonationMode::Off,
            (true, Constraint::Required) => ImpersonationMode::Constrained,
            (true, Constraint::Auto | Constraint::Off) => ImpersonationMode::Unconstrained,
        }
    }

    /// Whether a call beyond the constrained rules may be sent as the caller: a list of a
    /// namespace's Secrets or of pods, or of namespaces when `scope` has an allow-list (cluster
    /// scope without one is granted `impersonate-on:user-info:list` on namespaces). Always true
    /// unless constrained.
    pub fn lists_as_caller(self, call: CallerList, scope: &Scope) -> bool {
        if self != ImpersonationMode::Constrained {
            return true;
        }
        match call {
            CallerList::Secrets | CallerList::Pods => false,
            CallerList::Namespaces => {
                matches!(scope, Scope::Cluster { allow_list } if allow_list.is_empty())
            }
        }
    }
}

/// A list the server may make as the caller beyond a restart's own calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerList {
    /// The page's Secrets of a namespace.
    Secrets,
    /// The rollout view's pods of a progressing workload.
    Pods,
    /// The namespaces of the scope gate and the page's picker.
    Namespaces,
}

/// What the probe's answer says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The API server served the probe as [`PROBE_USER`]: some rule lets the ServiceAccount
    /// impersonate anyone for anything.
    Passed,
    /// Refused on `users` of the core group: the unconstrained filter, so constrained
    /// impersonation is not served.
    NotServed,
    /// Refused on the request itself or on `authentication.k8s.io`: the constrained filter.
    Served,
}

/// Why the server does not start. Fixed messages; nothing from the API server.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum ResolveError {
    /// The ServiceAccount holds the constrained rules, but the API server checks only the
    /// unconstrained ones.
    #[error(
        "the API server does not serve constrained impersonation (KEP-5284: Kubernetes 1.36+, \
         feature ConstrainedImpersonation): grant the unconstrained rules \
         (impersonation.constrained=false, KRYPTON_IMPERSONATION_CONSTRAINED=false)"
    )]
    NotServed,
    /// Constrained impersonation is required, but the ServiceAccount holds no constrained rule.
    #[error(
        "KRYPTON_IMPERSONATION_CONSTRAINED=true but the ServiceAccount holds no \
         impersonate:user-info or impersonate:serviceaccount rule"
    )]
    NoConstrainedRule,
    /// Constrained impersonation is required, but the ServiceAccount may also impersonate
    /// without constraint.
    #[error(
        "KRYPTON_IMPERSONATION_CONSTRAINED=true but the ServiceAccount may also impersonate \
         without constraint (an impersonate rule on users, groups or serviceaccounts): remove it"
    )]
    UnconstrainedRuleHeld,
    /// The API server did not answer the review or the probe (after retries).
    #[error("cannot ask the API server which impersonation it serves ({0})")]
    Unanswered(&'static str),
}

impl ResolveError {
    /// A stable code.
    pub fn code(self) -> &'static str {
        match self {
            ResolveError::NotServed => "constrained_impersonation_not_served",
            ResolveError::NoConstrainedRule => "no_constrained_rule",
            ResolveError::UnconstrainedRuleHeld => "unconstrained_rule_held",
            ResolveError::Unanswered(_) => "impersonation_unanswered",
        }
    }
}

/// The mode for `constraint`, given the rules held and the probe's answer (see the module's
/// table). `incomplete`: the rules review could not enumerate every rule (a webhook
/// authorizer), so "no constrained rule" is not concluded from it.
pub fn decide(
    constraint: Constraint,
    held: HeldImpersonation,
    incomplete: bool,
    probe: Probe,
) -> Result<ImpersonationMode, ResolveError> {
    if constraint == Constraint::Off {
        return Ok(ImpersonationMode::Unconstrained);
    }
    let required = constraint == Constraint::Required;
    if held.unconstrained || probe == Probe::Passed {
        return if required {
            Err(ResolveError::UnconstrainedRuleHeld)
        } else {
            Ok(ImpersonationMode::Unconstrained)
        };
    }
    // An incomplete review (a webhook authorizer) does not prove a required rule missing.
    let maybe_held = held.constrained || (required && incomplete);
    if !maybe_held {
        return if required {
            Err(ResolveError::NoConstrainedRule)
        } else {
            Ok(ImpersonationMode::Unconstrained)
        };
    }
    match probe {
        Probe::Served => Ok(ImpersonationMode::Constrained),
        Probe::NotServed | Probe::Passed => Err(ResolveError::NotServed),
    }
}

/// How many times the review and the probe are tried when the API server does not answer.
const ATTEMPTS: u32 = 6;
/// The first wait between attempts (doubled each time, at most 8 s): about 23 s in all.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// One call's time limit.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The most bytes of the probe's answer read (a `Status` or a version document).
const MAX_PROBE_BODY: usize = 64 * 1024;

/// Decides the impersonation mode of a server of `namespace` whose impersonation is on, under
/// `constraint`, over `connection` (the module's table), and logs it.
pub async fn resolve(
    constraint: Constraint,
    namespace: &str,
    connection: &Connection,
) -> Result<ImpersonationMode, ResolveError> {
    if constraint == Constraint::Off {
        info!(
            mode = "unconstrained",
            "impersonation: unconstrained (KRYPTON_IMPERSONATION_CONSTRAINED=false: the \
             ServiceAccount may act as the users and groups its rules name for any verb)"
        );
        return Ok(ImpersonationMode::Unconstrained);
    }
    let mut wait = FIRST_RETRY;
    let mut attempt = 1;
    let (held, incomplete, probe) = loop {
        let asked = async {
            let (held, incomplete) = rules_held(connection, namespace).await?;
            let probe = probe(connection).await?;
            Ok::<_, &'static str>((held, incomplete, probe))
        };
        match asked.await {
            Ok(answer) => break answer,
            Err(what) if attempt >= ATTEMPTS => return Err(ResolveError::Unanswered(what)),
            Err(what) => {
                warn!(what, attempt, "impersonation check unanswered; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(8));
                attempt += 1;
            }
        }
    };
    let mode = decide(constraint, held, incomplete, probe)?;
    let served = match probe {
        Probe::Served => "served",
        Probe::NotServed => "not served",
        Probe::Passed => "unknown (impersonation of anyone passed)",
    };
    if mode == ImpersonationMode::Constrained {
        info!(
            mode = mode.as_str(),
            constrained_impersonation = served,
            "impersonation: constrained (the ServiceAccount may act as a caller only for the \
             calls its impersonate-on rules name)"
        );
    } else {
        warn!(
            mode = mode.as_str(),
            constrained_impersonation = served,
            holds_constrained_rules = held.constrained,
            holds_unconstrained_rules = held.unconstrained,
            "impersonation: unconstrained (the ServiceAccount may act as the users and groups its \
             rules name for any verb)"
        );
    }
    Ok(mode)
}

/// The impersonation rules the server holds, by SelfSubjectRulesReview in `namespace` (its
/// cluster-wide rules included), and whether the review was incomplete.
async fn rules_held(
    connection: &Connection,
    namespace: &str,
) -> Result<(HeldImpersonation, bool), &'static str> {
    let api = Api::<SelfSubjectRulesReview>::all(connection.client(None));
    let review = SelfSubjectRulesReview {
        spec: SelfSubjectRulesReviewSpec {
            namespace: Some(namespace.to_owned()),
        },
        ..Default::default()
    };
    let answer = tokio::time::timeout(CALL_TIMEOUT, api.create(&PostParams::default(), &review))
        .await
        .map_err(|_| "rules review timed out")?
        .map_err(|_| "rules review failed")?;
    let status = answer.status.unwrap_or_default();
    Ok((held_impersonation(&grants_of(&status)), status.incomplete))
}

/// What the probe reads of a refusal: the `Status` details.
#[derive(Debug, Default, Deserialize)]
struct Refusal {
    #[serde(default)]
    details: Details,
}

#[derive(Debug, Default, Deserialize)]
struct Details {
    #[serde(default)]
    group: String,
    #[serde(default)]
    kind: String,
}

/// Sends the probe: `GET /version` as [`PROBE_USER`].
async fn probe(connection: &Connection) -> Result<Probe, &'static str> {
    let identity =
        Impersonation::new(PROBE_USER, Vec::<String>::new()).map_err(|_| "the probe's identity")?;
    let client = connection.client(Some(&identity));
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .map_err(|_| "the probe request")?;
    let call = async {
        let response = client.send(request).await.map_err(|_| "probe not sent")?;
        let status = response.status().as_u16();
        let body = http_body_util::Limited::new(response.into_body(), MAX_PROBE_BODY)
            .collect()
            .await
            .map_err(|_| "probe answer unreadable")?
            .to_bytes();
        Ok::<_, &'static str>((status, body))
    };
    let (status, body) = tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| "probe timed out")??;
    classify(status, &body)
}

/// The probe's answer, read (see the module's comment).
pub fn classify(status: u16, body: &[u8]) -> Result<Probe, &'static str> {
    match status {
        200..=299 => Ok(Probe::Passed),
        403 => {
            let refusal: Refusal = serde_json::from_slice(body).unwrap_or_default();
            if refusal.details.kind == "users" && refusal.details.group.is_empty() {
                Ok(Probe::NotServed)
            } else {
                Ok(Probe::Served)
            }
        }
        _ => Err("probe answered neither 2xx nor 403"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLDS_CONSTRAINED: HeldImpersonation = HeldImpersonation {
        constrained: true,
        unconstrained: false,
    };
    const HOLDS_UNCONSTRAINED: HeldImpersonation = HeldImpersonation {
        constrained: false,
        unconstrained: true,
    };
    const HOLDS_NONE: HeldImpersonation = HeldImpersonation {
        constrained: false,
        unconstrained: false,
    };

    #[test]
    fn the_table() {
        use Constraint::{Auto, Off, Required};
        use ImpersonationMode::{Constrained, Unconstrained};
        use Probe::{NotServed, Passed, Served};
        let cases = [
            (Off, HOLDS_CONSTRAINED, NotServed, Ok(Unconstrained)),
            (Auto, HOLDS_CONSTRAINED, Served, Ok(Constrained)),
            (Required, HOLDS_CONSTRAINED, Served, Ok(Constrained)),
            (
                Auto,
                HOLDS_CONSTRAINED,
                NotServed,
                Err(ResolveError::NotServed),
            ),
            (
                Required,
                HOLDS_CONSTRAINED,
                NotServed,
                Err(ResolveError::NotServed),
            ),
            (Auto, HOLDS_UNCONSTRAINED, Served, Ok(Unconstrained)),
            (Auto, HOLDS_NONE, Passed, Ok(Unconstrained)),
            (
                Required,
                HOLDS_UNCONSTRAINED,
                Served,
                Err(ResolveError::UnconstrainedRuleHeld),
            ),
            (
                Required,
                HOLDS_CONSTRAINED,
                Passed,
                Err(ResolveError::UnconstrainedRuleHeld),
            ),
            (Auto, HOLDS_NONE, Served, Ok(Unconstrained)),
            (
                Required,
                HOLDS_NONE,
                Served,
                Err(ResolveError::NoConstrainedRule),
            ),
        ];
        for (constraint, held, probe, expected) in cases {
            assert_eq!(
                decide(constraint, held, false, probe),
                expected,
                "{constraint:?} {held:?} {probe:?}"
            );
        }
        // A review that could not list every rule does not prove the rule missing.
        assert_eq!(decide(Required, HOLDS_NONE, true, Served), Ok(Constrained));
        assert_eq!(decide(Auto, HOLDS_NONE, true, Served), Ok(Unconstrained));
    }

    #[test]
    fn the_probe_tells_the_filters_apart_by_the_refused_resource() {
        // The unconstrained filter (k8s.io/apiserver WithImpersonation): `impersonate` on users.
        let legacy = br#"{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,
            "details":{"name":"rollsafe.dev:impersonation-probe","kind":"users"}}"#;
        assert_eq!(classify(403, legacy), Ok(Probe::NotServed));
        // The constrained filter: `impersonate-on:user-info:get` on the path (no kind) …
        let on_path = br#"{"kind":"Status","code":403,"reason":"Forbidden","details":{}}"#;
        assert_eq!(classify(403, on_path), Ok(Probe::Served));
        // … or `impersonate:user-info` on users of authentication.k8s.io.
        let on_users =
            br#"{"code":403,"details":{"group":"authentication.k8s.io","kind":"users"}}"#;
        assert_eq!(classify(403, on_users), Ok(Probe::Served));
        assert_eq!(
            classify(200, br#"{"gitVersion":"v1.37.2"}"#),
            Ok(Probe::Passed)
        );
        assert!(classify(500, b"").is_err());
        assert!(classify(401, b"").is_err());
    }

    #[test]
    fn constrained_lists_as_the_caller_only_what_it_is_granted() {
        let no_list = Scope::Cluster {
            allow_list: Vec::new(),
        };
        let listed = Scope::Cluster {
            allow_list: vec!["team-a".parse().unwrap()],
        };
        let constrained = ImpersonationMode::Constrained;
        assert!(!constrained.lists_as_caller(CallerList::Secrets, &no_list));
        assert!(!constrained.lists_as_caller(CallerList::Pods, &no_list));
        assert!(constrained.lists_as_caller(CallerList::Namespaces, &no_list));
        assert!(!constrained.lists_as_caller(CallerList::Namespaces, &listed));
        assert!(!constrained.lists_as_caller(CallerList::Namespaces, &Scope::Namespace));
        for mode in [ImpersonationMode::Off, ImpersonationMode::Unconstrained] {
            for call in [
                CallerList::Secrets,
                CallerList::Pods,
                CallerList::Namespaces,
            ] {
                assert!(mode.lists_as_caller(call, &listed));
            }
        }
    }
}
