//! The one target form of the commands that name a Secret (`restart`, `restart-consumers`,
//! `consumers`), as kubectl users expect: `-n NAMESPACE NAME`, or `NAMESPACE/NAME`; and the
//! kubectl form of a workload (`why`): `KIND/NAME` with `-n NAMESPACE` ([`WorkloadTarget`]).
//!
//! Without either, the kube commands use the kubeconfig context's namespace; `restart` has no
//! kubeconfig and needs one of the two. Both forms at once must agree. The text is parsed after
//! clap, because a usage error exits 2, which the restart commands reserve for `partial`.

use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::validation::is_dns1123_subdomain;
use rollsafe_core::workload::{WatchedKind, WorkloadKind};

/// The rule a Secret name follows, for its error message.
const SECRET_NAME_RULE: &str = "a Secret name must be a lowercase RFC 1123 subdomain: lower-case \
    letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 \
    characters";

/// The rule a namespace follows, for its error message.
const NAMESPACE_RULE: &str = "a namespace must be a lowercase RFC 1123 label: lower-case letters, \
    digits and '-', starting and ending with a letter or digit, at most 63 characters";

/// A Secret named on the command line; the namespace may still be the context's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    /// From `-n` or the `NAMESPACE/` part, when given.
    pub namespace: Option<Namespace>,
    /// The Secret.
    pub secret: SecretName,
}

impl Target {
    /// Parses `-n` (if given) and the positional `NAME` or `NAMESPACE/NAME`.
    pub(crate) fn parse(flag: Option<&str>, text: &str) -> anyhow::Result<Self> {
        let (prefix, name) = match text.split_once('/') {
            Some((namespace, name)) => (Some(namespace), name),
            None => (None, text),
        };
        let Ok(secret) = name.parse::<SecretName>() else {
            anyhow::bail!("invalid Secret name {name:?}: {SECRET_NAME_RULE}");
        };
        let namespace = match (flag, prefix) {
            (Some(flag), Some(prefix)) if flag != prefix => anyhow::bail!(
                "the namespace is given twice and differs: -n {flag} and {text}; give one of the two"
            ),
            (Some(namespace), _) | (None, Some(namespace)) => {
                let Ok(namespace) = namespace.parse::<Namespace>() else {
                    anyhow::bail!("invalid namespace {namespace:?}: {NAMESPACE_RULE}");
                };
                Some(namespace)
            }
            (None, None) => None,
        };
        Ok(Self { namespace, secret })
    }
}

/// The kinds and their kubectl spellings (singular, plural, short name; case-insensitive, with
/// or without the `.apps` group).
const WORKLOAD_KINDS: &[(&str, WorkloadKind)] = &[
    ("deployment", WorkloadKind::Deployment),
    ("deployments", WorkloadKind::Deployment),
    ("deploy", WorkloadKind::Deployment),
    ("statefulset", WorkloadKind::StatefulSet),
    ("statefulsets", WorkloadKind::StatefulSet),
    ("sts", WorkloadKind::StatefulSet),
    ("daemonset", WorkloadKind::DaemonSet),
    ("daemonsets", WorkloadKind::DaemonSet),
    ("ds", WorkloadKind::DaemonSet),
];

/// A workload named on the command line as kubectl names it: `deployment/NAME`,
/// `deploy/NAME`, `statefulset/NAME`, `sts/NAME`, `daemonset/NAME`, `ds/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WorkloadTarget {
    /// The kind.
    pub kind: WorkloadKind,
    /// The name, a valid object name.
    pub name: String,
}

impl WorkloadTarget {
    /// Parses `KIND/NAME`.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let Some((kind, name)) = text.split_once('/') else {
            anyhow::bail!(
                "invalid workload {text:?}: give KIND/NAME, e.g. deployment/api (kinds: \
                 deployment, statefulset, daemonset, or deploy, sts, ds)"
            );
        };
        let lower = kind.to_ascii_lowercase();
        let lower = lower.strip_suffix(".apps").unwrap_or(&lower);
        let Some(&(_, kind)) = WORKLOAD_KINDS.iter().find(|(k, _)| *k == lower) else {
            anyhow::bail!(
                "invalid workload kind {kind:?}: rollsafe explains deployment, statefulset and \
                 daemonset (or deploy, sts, ds)"
            );
        };
        if !is_dns1123_subdomain(name) {
            anyhow::bail!("invalid {kind} name {name:?}: {OBJECT_NAME_RULE}");
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }
}

/// What `why` explains: every kind `rollsafe watch` rolls, as kubectl spells them.
const WATCHED_KINDS: &[(&str, WatchedKind)] = &[
    ("deployment", WatchedKind::Deployment),
    ("deployments", WatchedKind::Deployment),
    ("deploy", WatchedKind::Deployment),
    ("statefulset", WatchedKind::StatefulSet),
    ("statefulsets", WatchedKind::StatefulSet),
    ("sts", WatchedKind::StatefulSet),
    ("daemonset", WatchedKind::DaemonSet),
    ("daemonsets", WatchedKind::DaemonSet),
    ("ds", WatchedKind::DaemonSet),
    ("cronjob", WatchedKind::CronJob),
    ("cronjobs", WatchedKind::CronJob),
    ("cj", WatchedKind::CronJob),
    ("rollout", WatchedKind::Rollout),
    ("rollouts", WatchedKind::Rollout),
    ("ro", WatchedKind::Rollout),
];

/// A workload of any kind `rollsafe watch` rolls, as kubectl names it: the kinds of
/// [`WorkloadTarget`], and `cronjob/NAME` (`cj/`), `rollout/NAME` (`ro/`, Argo Rollouts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatchedTarget {
    /// The kind.
    pub kind: WatchedKind,
    /// The name, a valid object name.
    pub name: String,
}

impl WatchedTarget {
    /// Parses `KIND/NAME`.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let Some((kind, name)) = text.split_once('/') else {
            anyhow::bail!(
                "invalid workload {text:?}: give KIND/NAME, e.g. deployment/api (kinds: \
                 deployment, statefulset, daemonset, cronjob, rollout, or deploy, sts, ds, cj, ro)"
            );
        };
        let lower = kind.to_ascii_lowercase();
        let lower = [".apps", ".batch", ".argoproj.io"]
            .iter()
            .find_map(|group| lower.strip_suffix(group))
            .unwrap_or(&lower);
        let Some(&(_, kind)) = WATCHED_KINDS.iter().find(|(k, _)| *k == lower) else {
            anyhow::bail!(
                "invalid workload kind {kind:?}: rollsafe explains deployment, statefulset, \
                 daemonset, cronjob and rollout (or deploy, sts, ds, cj, ro)"
            );
        };
        if !is_dns1123_subdomain(name) {
            anyhow::bail!(
                "invalid {} name {name:?}: {OBJECT_NAME_RULE}",
                kind.as_str()
            );
        }
        Ok(Self {
            kind,
            name: name.to_owned(),
        })
    }
}

/// The rule a workload name follows, for its error message.
const OBJECT_NAME_RULE: &str = "a name must be a lowercase RFC 1123 subdomain: lower-case \
    letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 \
    characters";

/// `-n`, parsed (`None`: the context's namespace).
pub(crate) fn namespace_flag(flag: Option<&str>) -> anyhow::Result<Option<Namespace>> {
    flag.map(|namespace| {
        namespace
            .parse::<Namespace>()
            .map_err(|_| anyhow::anyhow!("invalid namespace {namespace:?}: {NAMESPACE_RULE}"))
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-n`, the positional text, and the namespace and Secret parsed or a part of the error.
    type Case = (
        Option<&'static str>,
        &'static str,
        Result<(Option<&'static str>, &'static str), &'static str>,
    );

    #[test]
    fn both_forms_and_their_errors() {
        let cases: &[Case] = &[
            (None, "db", Ok((None, "db"))),
            (Some("shop"), "db", Ok((Some("shop"), "db"))),
            (None, "shop/db", Ok((Some("shop"), "db"))),
            (Some("shop"), "shop/db", Ok((Some("shop"), "db"))),
            (Some("other"), "shop/db", Err("given twice")),
            (None, "Shop/db", Err("invalid namespace")),
            (Some("Bad_NS"), "db", Err("invalid namespace")),
            (None, "shop/", Err("invalid Secret name")),
            (None, "shop/db/x", Err("invalid Secret name")),
            (None, "", Err("invalid Secret name")),
        ];
        for (flag, text, expected) in cases {
            let got = Target::parse(*flag, text);
            match (expected, got) {
                (Ok((namespace, secret)), Ok(target)) => {
                    assert_eq!(target.namespace.as_ref().map(|n| n.as_str()), *namespace);
                    assert_eq!(target.secret.as_str(), *secret);
                }
                (Err(message), Err(error)) => {
                    assert!(error.to_string().contains(message), "{text}: {error}");
                }
                (expected, got) => panic!("{flag:?} {text:?}: {expected:?} vs {got:?}"),
            }
        }
    }

    #[test]
    fn workload_targets() {
        let ok = [
            ("deployment/api", WorkloadKind::Deployment),
            ("deploy/api", WorkloadKind::Deployment),
            ("Deployments.apps/api", WorkloadKind::Deployment),
            ("sts/db", WorkloadKind::StatefulSet),
            ("statefulset/db", WorkloadKind::StatefulSet),
            ("ds/agent", WorkloadKind::DaemonSet),
            ("daemonsets/agent", WorkloadKind::DaemonSet),
        ];
        for (text, kind) in ok {
            let target = WorkloadTarget::parse(text).unwrap();
            assert_eq!(target.kind, kind, "{text}");
        }
        let bad = [
            ("api", "give KIND/NAME"),
            ("pod/api", "invalid workload kind"),
            ("deployment/", "invalid Deployment name"),
            ("deployment/Api", "invalid Deployment name"),
            ("deployment/a/b", "invalid Deployment name"),
        ];
        for (text, message) in bad {
            let error = WorkloadTarget::parse(text).unwrap_err().to_string();
            assert!(error.contains(message), "{text}: {error}");
        }
        for (text, kind) in [
            ("cronjob/nightly", WatchedKind::CronJob),
            ("cj/nightly", WatchedKind::CronJob),
            ("CronJobs.batch/nightly", WatchedKind::CronJob),
            ("rollouts.argoproj.io/web", WatchedKind::Rollout),
            ("deploy/api", WatchedKind::Deployment),
        ] {
            assert_eq!(WatchedTarget::parse(text).unwrap().kind, kind, "{text}");
        }
        assert!(WatchedTarget::parse("pod/api").is_err());
        assert!(namespace_flag(Some("Bad_NS")).is_err());
        assert_eq!(namespace_flag(None).unwrap(), None);
    }
}
