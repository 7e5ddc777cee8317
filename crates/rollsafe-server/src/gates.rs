//! The gates a request about one Secret passes before its handler acts, shared by every route
//! that needs them — the part crates.io's `AuthCheck` plays for its controllers. No handler
//! imports another; each builds a [`SecretCheck`] for what it does:
//!
//! - [`SecretCheck::change`] (the restart, the approval): authentication with the page's
//!   same-origin proof, a reserved identity refused **and audited**, the restart flag; then
//!   the caller's identity, a slot of the server-wide run limit, and the gates on the Secret,
//!   a refusal audited as [`ApiError::audit`] says.
//! - [`SecretCheck::read`] (the consumers preview, the rollout view): the same gates without the
//!   restart flag, a slot of the reads' own limit, and nothing audited (nothing here may change
//!   anything).
//!
//! The gates on the Secret, in order, within [`GATE_DEADLINE`]: namespace scope ([`in_scope`],
//! also the Secret list's) → live visibility (the Secret's metadata read as the caller; a
//! history snapshot answers exactly like a missing Secret, [`is_history_label`]) → the ACL on
//! the live object. Path validation sits between authentication and these, in the handler: its
//! path's names are typed, and parsed there once.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::http::HeaderMap;
use rollsafe_core::name::{AnnotationPrefix, Namespace, SecretName};
use rollsafe_kube::{Impersonation, ReadError, read_secret_metadata};

use crate::acl::{self, AccessRules};
use crate::audit::{self, ApprovalFields, AuditBase};
use crate::auth::{Refusal, authenticate_caller, identity_for, signed_in};
use crate::error::ApiError;
use crate::impersonation::CallerList;
use crate::limits::RunPermit;
use crate::request::internal;
use crate::scope;
use crate::session::User;
use crate::state::AppState;

/// The time limit of the gates on a Secret. The engine bounds its own calls.
pub(crate) const GATE_DEADLINE: Duration = Duration::from_secs(30);

/// The checks of one request about a Secret, built for what its route does.
pub(crate) struct SecretCheck<'a> {
    state: &'a AppState,
    request_id: &'a str,
    /// The audit action, for a route that changes state; `None` for a read.
    change: Option<&'static str>,
    /// The workload an approval is about, on its audit lines.
    approval: Option<ApprovalFields>,
}

/// A request that passed the gates: as which Kubernetes identity, holding which slot.
pub(crate) struct Admitted {
    /// The identity its Kubernetes calls carry.
    pub(crate) identity: Option<Impersonation>,
    /// Its slot of the server-wide limit; dropping it frees the slot.
    pub(crate) permit: RunPermit,
    /// What the ACL decided.
    pub(crate) decision: acl::Decision,
    /// Who asked for what, for the audit lines of a state change.
    pub(crate) audit: AuditBase,
    /// The live Secret's annotations, as the gates read them (its own
    /// `rollsafe.dev/strategy`, for the preview).
    pub(crate) secret_annotations: BTreeMap<String, String>,
}

impl<'a> SecretCheck<'a> {
    /// The checks of a route that changes state (a roll follows), audited as `action`.
    pub(crate) fn change(state: &'a AppState, request_id: &'a str, action: &'static str) -> Self {
        Self {
            state,
            request_id,
            change: Some(action),
            approval: None,
        }
    }

    /// The checks of a route that only reads.
    pub(crate) fn read(state: &'a AppState, request_id: &'a str) -> Self {
        Self {
            state,
            request_id,
            change: None,
            approval: None,
        }
    }

    /// Names the workload of an approval on every audit line written from here on.
    pub(crate) fn on_workload(mut self, approval: ApprovalFields) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Gate 1, authentication, and for a change gate 2, the restart flag. A reserved identity
    /// is refused; for a change it is audited under `names`, the path's Secret as given
    /// (empty when the path does not parse).
    pub(crate) async fn caller(
        &self,
        headers: &HeaderMap,
        names: Option<(&Namespace, &SecretName)>,
    ) -> Result<User, ApiError> {
        let state = self.state;
        let Some(action) = self.change else {
            return signed_in(state, headers).await;
        };
        let user = match authenticate_caller(state, headers, true).await {
            Ok(user) => user,
            Err(Refusal::Reserved(user, refused)) => {
                let (namespace, name) = names
                    .map(|(namespace, name)| (namespace.to_string(), name.to_string()))
                    .unwrap_or_default();
                let base = AuditBase::new(action, &user, namespace, name, self.request_id);
                audit::record(&state.audit, base.refusal(refused.code())).await;
                return Err(ApiError::ReservedIdentity);
            }
            Err(Refusal::Error(error)) => return Err(error),
        };
        if !state.settings.restart_enabled {
            return Err(ApiError::RestartDisabled);
        }
        Ok(user)
    }

    /// The gates after the path: the caller's Kubernetes identity, a slot of the server-wide
    /// limit (before any Kubernetes call), then scope, live visibility and the ACL on the
    /// Secret, as the caller. For a change, a refusal is audited as [`ApiError::audit`] says.
    pub(crate) async fn secret(
        self,
        user: &User,
        namespace: &Namespace,
        name: &SecretName,
    ) -> Result<Admitted, ApiError> {
        let state = self.state;
        let mut audit = AuditBase::new(
            self.change.unwrap_or(audit::ACTION),
            user,
            namespace.to_string(),
            name.to_string(),
            self.request_id,
        );
        audit.approval = self.approval;
        let identity = identity_for(state, user, self.request_id)?;
        let permit = if self.change.is_some() {
            let permit = state.limiter.try_admit();
            if permit.is_none() {
                state.metrics.restart_shed();
            }
            permit
        } else {
            state.previews.try_admit()
        };
        let Some(permit) = permit else {
            return Err(ApiError::Busy);
        };
        let gates = secret_gates(
            state,
            identity.as_ref(),
            user,
            namespace,
            name,
            self.request_id,
        )
        .await;
        match gates {
            Ok((decision, secret_annotations)) => Ok(Admitted {
                identity,
                permit,
                decision,
                audit,
                secret_annotations,
            }),
            Err(error) => {
                // One arm for every refusal: the error says whether and how it is audited.
                if self.change.is_some()
                    && let Some(result) = error.audit()
                {
                    audit::record(&state.audit, audit.line(result, None)).await;
                }
                Err(error)
            }
        }
    }
}

/// Scope, live visibility and the ACL on the live object, within [`GATE_DEADLINE`], with the
/// live Secret's annotations. Nothing is audited here.
async fn secret_gates(
    state: &AppState,
    identity: Option<&Impersonation>,
    user: &User,
    namespace: &Namespace,
    name: &SecretName,
    request_id: &str,
) -> Result<(acl::Decision, BTreeMap<String, String>), ApiError> {
    let settings = &state.settings;
    let client = state.connection.client(identity);
    let gates = async {
        // 4. Namespace scope.
        in_scope(state, namespace, &client).await?;
        // 5. Live visibility, as the caller. The gates need the Secret's labels and annotations
        // only, so its metadata is all that is read: no value ever reaches the server.
        let read_timeout = state.engine.timeouts().get;
        let secret = match read_secret_metadata(&client, namespace, name, read_timeout).await {
            Ok(Some(secret)) if !is_history(&secret, &settings.annotation_prefix) => secret,
            Ok(_) => return Err(ApiError::SecretNotFound(name.clone())),
            Err(error) if error.is_forbidden() => return Err(ApiError::KubernetesDenied),
            Err(error) => return Err(internal(request_id, read_problem(&error))),
        };
        // 6. The ACL on the live object. The access ConfigMap is read only when neither the
        // caller being an admin nor the Secret's own annotations decide.
        let annotations: BTreeMap<String, String> = secret.annotations.unwrap_or_default();
        let decide = |rules: &AccessRules| {
            acl::decide(
                user,
                &settings.admins,
                settings.annotation_prefix.as_str(),
                &annotations,
                namespace.as_str(),
                rules,
            )
        };
        let decision = match acl::decided_without_rules(decide(&AccessRules::Absent)) {
            Some(decision) => decision,
            None => {
                let rules = state
                    .access
                    .get(&state.connection)
                    .await
                    .map_err(|error| internal(request_id, read_problem(&error)))?;
                decide(&rules)
            }
        };
        if !decision.allowed() {
            return Err(ApiError::NotAllowed);
        }
        Ok((decision, annotations))
    };
    tokio::time::timeout(GATE_DEADLINE, gates)
        .await
        .unwrap_or_else(|_| Err(internal(request_id, "the gates exceeded their deadline")))
}

/// The namespace-scope gate, for a caller's client.
pub(crate) async fn in_scope(
    state: &AppState,
    namespace: &Namespace,
    client: &kube::Client,
) -> Result<(), ApiError> {
    let settings = &state.settings;
    let lists = state
        .impersonation
        .lists_as_caller(CallerList::Namespaces, &settings.scope);
    if scope::allows(
        &settings.scope,
        settings.server_namespace.as_str(),
        namespace.as_str(),
        lists.then_some(client),
    )
    .await
    {
        Ok(())
    } else {
        Err(ApiError::NamespaceNotAccessible(namespace.clone()))
    }
}

/// Whether a Secret's labels mark it a history snapshot (`<prefix>/kind=history`): such a
/// Secret is answered as missing, and left out of lists.
pub(crate) fn is_history_label(
    labels: &BTreeMap<String, String>,
    prefix: &AnnotationPrefix,
) -> bool {
    prefix
        .key("kind")
        .is_some_and(|key| labels.get(key.as_str()).map(String::as_str) == Some("history"))
}

fn is_history(
    secret: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    prefix: &AnnotationPrefix,
) -> bool {
    secret
        .labels
        .as_ref()
        .is_some_and(|labels| is_history_label(labels, prefix))
}

/// The fixed text of a failed preflight read, for the log line of its 500.
pub(crate) fn read_problem(error: &ReadError) -> &'static str {
    match error {
        ReadError::Status(_) => "Kubernetes refused a preflight read",
        ReadError::Transport(_) => "no response from Kubernetes to a preflight read",
        ReadError::Timeout => "a preflight read timed out",
        ReadError::Decode => "a preflight read returned an unreadable object",
    }
}
