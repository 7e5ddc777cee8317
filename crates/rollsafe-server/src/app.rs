//! The routes and the gate sequence of a restart request.
//!
//! `POST /api/namespaces/{namespace}/secrets/{name}/restart-consumers` runs, in order:
//! authentication → restart flag → path validation → namespace scope → live visibility (the
//! Secret read as the caller; a history snapshot answers exactly like a missing Secret) → ACL on
//! the live object → the engine, as the caller in impersonation mode. A failing gate answers
//! with the `{ error }` envelope before any workload is listed or patched. Every response
//! carries `Cache-Control: no-store`.
//!
//! `GET /api/namespaces/{namespace}/secrets/{name}/consumers` (the preview) runs the same gates
//! except the restart flag, then the engine's discovery as the caller, and patches nothing.
//!
//! Every error response is an [`ApiError`]: the one middleware that sees every response counts
//! it by its static code and logs that code. A gate's refusal is audited once, as
//! [`ApiError::audit`] says.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{MatchedPath, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rollsafe_core::name::{AnnotationPrefix, Namespace, SecretName};
use rollsafe_kube::{
    Connection, Impersonation, ReadError, RestartEngine, RestartRequest, list_secrets,
    read_secret_metadata,
};
use serde_json::json;
use tokio_util::task::TaskTracker;
use tracing::{Instrument, error, info, info_span, warn};

use crate::access::{ACCESS_RULES_TTL, AccessRulesCache};
use crate::acl::{self, AccessRules};
use crate::audit::{AuditBase, AuditLine, AuditSink};
use crate::config::{AuthMode, Settings};
use crate::error::{ApiError, ErrorCode};
use crate::identity;
use crate::limits::RunLimiter;
use crate::metrics::Metrics;
use crate::scope;
use crate::session::{self, Credentials, User};
use crate::token_review::{self, TokenReviewer};

/// The time limit of the gates before the engine starts. The engine bounds its own calls.
pub const GATE_DEADLINE: Duration = Duration::from_secs(30);
/// The largest request body accepted (the restart route reads none).
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// The most consumers previews in progress at once, server-wide; beyond it, 429.
pub const MAX_CONCURRENT_PREVIEWS: usize = 64;
/// The readiness check's time limit.
const READY_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything a request needs; shared by all requests.
#[derive(Debug)]
pub struct AppState {
    /// Validated settings.
    pub settings: Settings,
    /// The shared connection pool.
    pub connection: Connection,
    /// The restart engine over that pool.
    pub engine: RestartEngine,
    /// Where audit lines go.
    pub audit: AuditSink,
    /// The cached access rules.
    pub access: AccessRulesCache,
    /// Metrics.
    pub metrics: Metrics,
    /// Restart runs in progress. A run is its own task, so a client that hangs up cannot cancel
    /// it halfway; shutdown waits for these.
    pub runs: TaskTracker,
    /// The server-wide cap on concurrent restart runs.
    pub limiter: RunLimiter,
    /// The server-wide cap on concurrent consumers previews.
    pub previews: RunLimiter,
    /// The TokenReview of Kubernetes bearer tokens, when enabled.
    pub reviewer: Option<TokenReviewer>,
    /// OpenID Connect login, when configured.
    pub oidc: Option<crate::oidc::Oidc>,
}

impl AppState {
    /// State for these settings over this connection.
    pub fn new(
        settings: Settings,
        connection: Connection,
        audit: AuditSink,
        metrics: Metrics,
    ) -> Self {
        let engine = RestartEngine::new(&connection).with_observer(Arc::new(metrics.clone()));
        let access = AccessRulesCache::new(
            settings.server_namespace.clone(),
            settings.access_configmap.clone(),
            ACCESS_RULES_TTL,
            engine.timeouts().get,
        );
        let limiter = RunLimiter::new(settings.max_concurrent_restarts);
        let previews = RunLimiter::new(MAX_CONCURRENT_PREVIEWS);
        let oidc = settings.oidc.clone().map(crate::oidc::Oidc::new);
        let reviewer = settings
            .token_review
            .clone()
            .map(|audiences| TokenReviewer::new(audiences, engine.timeouts().get));
        Self {
            engine,
            settings,
            connection,
            audit,
            access,
            metrics,
            runs: TaskTracker::new(),
            limiter,
            previews,
            reviewer,
            oidc,
        }
    }
}

/// The API router.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/restart-consumers",
            post(restart_consumers),
        )
        .route(
            "/api/namespaces/{namespace}/secrets/{name}/consumers",
            get(consumers),
        )
        .route("/api/config", get(config))
        .route("/api/me", get(me))
        .route("/api/namespaces", get(namespaces))
        .route("/api/namespaces/{namespace}/secrets", get(secrets))
        .merge(crate::login::routes())
        .merge(crate::web::routes())
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(state.clone(), observe))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Refuses declared bodies over [`MAX_BODY_BYTES`], counts every response and sets
/// `Cache-Control: no-store` on it.
async fn observe(State(state): State<Arc<AppState>>, request: Request, next: Next) -> Response {
    let route = match request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
    {
        Some("/api/namespaces/{namespace}/secrets/{name}/restart-consumers") => "restart",
        Some("/api/namespaces/{namespace}/secrets/{name}/consumers") => "consumers",
        Some("/api/config") => "config",
        Some("/api/me") => "me",
        Some("/api/namespaces") => "namespaces",
        Some("/api/namespaces/{namespace}/secrets") => "secrets",
        Some("/auth/session") => "session",
        Some("/auth/logout") => "logout",
        Some("/auth/login") => "login",
        Some("/auth/callback") => "callback",
        Some("/" | "/app.js" | "/app.css") => "page",
        Some("/healthz") => "healthz",
        Some("/readyz") => "readyz",
        _ => "other",
    };
    let declared_length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut response = if declared_length.is_some_and(|length| length > MAX_BODY_BYTES) {
        // No route reads a large body; refuse it before any handler runs.
        ApiError::PayloadTooLarge.into_response()
    } else {
        next.run(request).await
    };
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    crate::web::secure(&mut response);
    let status = response.status().as_u16();
    state.metrics.request(route, status);
    if let Some(&ErrorCode(code)) = response.extensions().get::<ErrorCode>() {
        state.metrics.error(code);
        info!(route, status, code, "request refused");
    }
    response
}

async fn not_found() -> ApiError {
    ApiError::NotFound
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

async fn healthz() -> Response {
    Json(json!({ "status": "ok" })).into_response()
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let client = state.connection.client(None);
    match tokio::time::timeout(READY_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(_)) => Json(json!({ "status": "ready" })).into_response(),
        _ => ApiError::NotReady.into_response(),
    }
}

async fn config(State(state): State<Arc<AppState>>) -> Response {
    let settings = &state.settings;
    Json(json!({
        "restartEnabled": settings.restart_enabled,
        "scope": settings.scope.as_str(),
        "authMode": settings.auth.as_str(),
        "impersonation": settings.impersonation,
        "tokenReview": settings.token_review.is_some(),
        "oidc": settings.oidc.is_some(),
    }))
    .into_response()
}

/// `GET /api/me`: who the caller is (for the page's header).
async fn me(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    match signed_in(&state, &headers).await {
        Ok(user) => Json(json!({
            "email": user.email,
            "name": user.name,
            "groups": user.groups,
            "source": user.source,
        }))
        .into_response(),
        Err(error) => error.into_response(),
    }
}

/// `GET /api/namespaces`: the namespaces in scope for the caller, sorted.
async fn namespaces(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Response {
    with_request_id("namespaces", |request_id| async move {
        let user = signed_in(&state, &headers).await?;
        let identity = identity_for(&state, &user, &request_id)?;
        let client = state.connection.client(identity.as_ref());
        let settings = &state.settings;
        let namespaces =
            scope::namespaces(&settings.scope, settings.server_namespace.as_str(), &client).await;
        Ok(Json(json!({ "namespaces": namespaces })).into_response())
    })
    .await
}

/// `GET /api/namespaces/{namespace}/secrets`: the names of the Secrets of a namespace in scope
/// that the caller may list, read as metadata only; history snapshots are left out.
async fn secrets(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<Namespace>, PathRejection>,
) -> Response {
    with_request_id("secrets", |request_id| async move {
        let user = signed_in(&state, &headers).await?;
        let Ok(Path(namespace)) = path else {
            return Err(ApiError::InvalidPath);
        };
        let identity = identity_for(&state, &user, &request_id)?;
        let client = state.connection.client(identity.as_ref());
        let settings = &state.settings;
        in_scope(&state, &namespace, &client).await?;
        let listed = list_secrets(&client, &namespace, state.engine.timeouts().get)
            .await
            .map_err(|error| match error {
                error if error.is_forbidden() => ApiError::KubernetesDenied,
                error => internal(&request_id, read_problem(&error)),
            })?;
        let kind_label = settings.annotation_prefix.key("kind");
        let names: Vec<_> = listed
            .into_iter()
            .filter(|secret| {
                kind_label.as_ref().is_none_or(|label| {
                    secret.labels.get(label.as_str()).map(String::as_str) != Some("history")
                })
            })
            .map(|secret| json!({ "name": secret.name }))
            .collect();
        Ok(Json(json!({ "namespace": namespace, "secrets": names })).into_response())
    })
    .await
}

/// Authentication for a read: the caller, reserved identities refused (unaudited: nothing here
/// can restart anything).
async fn signed_in(state: &AppState, headers: &HeaderMap) -> Result<User, ApiError> {
    match authenticate_caller(state, headers, false).await {
        Ok(user) => Ok(user),
        Err(Refusal::Reserved(..)) => Err(ApiError::ReservedIdentity),
        Err(Refusal::Error(error)) => Err(error),
    }
}

async fn restart_consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("restart", |request_id| async move {
        handle_restart(&state, &headers, path, &request_id).await
    })
    .await
}

/// Runs a handler with a new request id, in a span carrying it; an error becomes its response.
async fn with_request_id<F, Fut>(route: &'static str, handle: F) -> Response
where
    F: FnOnce(String) -> Fut,
    Fut: std::future::Future<Output = Result<Response, ApiError>>,
{
    let request_id = uuid::Uuid::new_v4().to_string();
    let span = info_span!("request", route, request_id = %request_id);
    handle(request_id)
        .instrument(span)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

async fn handle_restart(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let settings = &state.settings;
    // 1. Authentication; reserved Kubernetes identities are refused here, and audited.
    let user = match authenticate_caller(state, headers, true).await {
        Ok(user) => user,
        Err(Refusal::Reserved(user, refused)) => {
            let (namespace, name) = match &path {
                Ok(Path((ns, name))) => (ns.to_string(), name.to_string()),
                Err(_) => (String::new(), String::new()),
            };
            let base = AuditBase {
                user: user.email.clone(),
                namespace,
                name,
                request_id: request_id.to_owned(),
            };
            write_audit(state, base.refusal(refused.code())).await;
            return Err(ApiError::ReservedIdentity);
        }
        Err(Refusal::Error(error)) => return Err(error),
    };
    // 2. The restart flag.
    if !settings.restart_enabled {
        return Err(ApiError::RestartDisabled);
    }
    // 3. Path validation, with no Kubernetes call: the names are parsed into their types here,
    // once.
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let base = AuditBase {
        user: user.email.clone(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        request_id: request_id.to_owned(),
    };
    let identity = identity_for(state, &user, request_id)?;
    // The server-wide run limit, before any Kubernetes call; the permit lives until the run's
    // result record is written.
    let Some(permit) = state.limiter.try_admit() else {
        state.metrics.restart_shed();
        return Err(ApiError::Busy);
    };
    // 4–6. Scope, live visibility and the ACL, as the caller.
    let decision = match secret_gates(
        state,
        identity.as_ref(),
        &user,
        &namespace,
        &name,
        request_id,
    )
    .await
    {
        Ok(decision) => decision,
        Err(error) => {
            // One arm for every refusal: the error says whether and how it is audited.
            if let Some(result) = error.audit() {
                write_audit(state, base.line(result, None)).await;
            }
            return Err(error);
        }
    };
    info!(decision = ?decision, %namespace, secret = %name, "restart allowed");
    // 7. The engine, as the caller, in its own task: once patches may be sent, the run, its
    // metrics and its audit line complete even if the client hangs up or shutdown begins.
    let run = {
        let engine = state.engine.clone();
        let metrics = state.metrics.clone();
        let audit = state.audit.clone();
        let request = RestartRequest::new(namespace, name).acting_as(identity);
        state.runs.spawn(
            async move {
                // Discovery settles and the patches are planned; nothing is patched yet.
                let plan = engine.plan(&request).await;
                // The plan's targets are known here, before the first patch is sent: the
                // intent record is made durable first, and no patch is sent without it.
                if !plan.is_empty() {
                    let intent = base.intent(plan.targets().cloned().collect());
                    if let Err(error) = audit.write(&intent).await {
                        error!(
                            error = error.code(),
                            "intent record not written; nothing patched"
                        );
                        return Err(RunFailure::Intent);
                    }
                }
                let result = engine.execute(plan).await;
                metrics.result(&result);
                // The response waits for the result record.
                write_audit_to(&audit, AuditLine::for_result(base, &result)).await;
                drop(permit);
                Ok(result)
            }
            .in_current_span(),
        )
    };
    let result = match run.await {
        Ok(Ok(result)) => result,
        Ok(Err(RunFailure::Intent)) => {
            return Err(internal(
                request_id,
                "the intent record could not be written; nothing was patched",
            ));
        }
        Err(_) => return Err(internal(request_id, "the restart task failed")),
    };
    let status =
        StatusCode::from_u16(result.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Ok((status, Json(result)).into_response())
}

/// The gates on a Secret after authentication and path validation: namespace scope, live
/// visibility (the Secret read as the caller; a history snapshot answers exactly like a missing
/// Secret) and the ACL on the live object, within [`GATE_DEADLINE`]. Nothing is audited here.
async fn secret_gates(
    state: &AppState,
    identity: Option<&Impersonation>,
    user: &User,
    namespace: &Namespace,
    name: &SecretName,
    request_id: &str,
) -> Result<acl::Decision, ApiError> {
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
        Ok(decision)
    };
    tokio::time::timeout(GATE_DEADLINE, gates)
        .await
        .unwrap_or_else(|_| Err(internal(request_id, "the gates exceeded their deadline")))
}

/// The namespace-scope gate, for a caller's client.
async fn in_scope(
    state: &AppState,
    namespace: &Namespace,
    client: &kube::Client,
) -> Result<(), ApiError> {
    let settings = &state.settings;
    if scope::allows(
        &settings.scope,
        settings.server_namespace.as_str(),
        namespace.as_str(),
        client,
    )
    .await
    {
        Ok(())
    } else {
        Err(ApiError::NamespaceNotAccessible(namespace.clone()))
    }
}

/// Why authentication did not yield a caller.
enum Refusal {
    /// A reserved identity (or one outside the allowed groups): refused, and the restart route
    /// audits it.
    Reserved(User, identity::IdentityRefusal),
    /// No valid credentials, or the review failed.
    Error(ApiError),
}

/// Authenticates the caller and applies the reserved-identity rule.
async fn authenticate_caller(
    state: &AppState,
    headers: &HeaderMap,
    changes_state: bool,
) -> Result<User, Refusal> {
    let user = authenticate(state, headers, changes_state)
        .await
        .map_err(Refusal::Error)?;
    if let Err(refused) = identity::check(&user, &state.settings.allowed_groups) {
        warn!(
            reason = refused.code(),
            "session refused: reserved identity"
        );
        return Err(Refusal::Reserved(user, refused));
    }
    Ok(user)
}

async fn consumers(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
) -> Response {
    with_request_id("consumers", |request_id| async move {
        handle_consumers(&state, &headers, path, &request_id).await
    })
    .await
}

/// The consumers preview: the restart's gates except the restart flag (a preview changes
/// nothing), then its discovery as the caller, and no patch. Refusals are not audited: the
/// audit file records restarts, and nothing here may restart anything.
async fn handle_consumers(
    state: &AppState,
    headers: &HeaderMap,
    path: Result<Path<(Namespace, SecretName)>, PathRejection>,
    request_id: &str,
) -> Result<Response, ApiError> {
    let user = signed_in(state, headers).await?;
    let Ok(Path((namespace, name))) = path else {
        return Err(ApiError::InvalidPath);
    };
    let identity = identity_for(state, &user, request_id)?;
    // Previews list as much as a restart does: they have their own server-wide limit.
    let Some(_permit) = state.previews.try_admit() else {
        return Err(ApiError::Busy);
    };
    secret_gates(
        state,
        identity.as_ref(),
        &user,
        &namespace,
        &name,
        request_id,
    )
    .await?;
    let discovery = state
        .engine
        .discover(&namespace, &name, identity.as_ref())
        .await;
    Ok(Json(discovery.preview()).into_response())
}

/// Why a run stopped before its result.
enum RunFailure {
    /// The intent record could not be made durable, so nothing was patched.
    Intent,
}

/// Authenticates a request: the dev user when authentication is off; else a session JWT (bearer
/// or cookie), or — when TokenReview is on — a Kubernetes bearer token the API server accepts.
/// A cookie-authenticated request that changes state must also pass [`same_origin`].
async fn authenticate(
    state: &AppState,
    headers: &HeaderMap,
    changes_state: bool,
) -> Result<User, ApiError> {
    let secret = match &state.settings.auth {
        AuthMode::Disabled => return Ok(User::dev()),
        AuthMode::Session { secret, .. } => secret,
    };
    let credentials =
        session::credentials_from_headers(headers).ok_or(ApiError::Unauthenticated)?;
    if let Credentials::Cookie(_) = credentials
        && changes_state
        && !same_origin(headers)
    {
        return Err(ApiError::CrossSite);
    }
    let token = credentials.token();
    match (&credentials, &state.reviewer) {
        (Credentials::Bearer(_), Some(reviewer)) if !token_review::is_session_token(token) => {
            reviewer
                .review(&state.connection, token)
                .await?
                .ok_or(ApiError::Unauthenticated)
        }
        _ => session::verify(token, secret).map_err(|_| ApiError::Unauthenticated),
    }
}

/// The header the page sends on every state-changing call. A cross-site form cannot set a
/// header, and a cross-site script that sets one needs a CORS preflight this server never
/// grants.
pub const CSRF_HEADER: &str = "x-rollsafe-csrf";

/// Whether a cookie-authenticated state-changing request comes from a page of this server:
/// it carries [`CSRF_HEADER`], `Sec-Fetch-Site` (when the browser sends it) is `same-origin`,
/// and `Origin` (when sent) names the host the request was sent to. A request with neither
/// `Sec-Fetch-Site` nor `Origin` is refused: every browser that sends cookies sends one of them
/// on a POST.
pub(crate) fn same_origin(headers: &HeaderMap) -> bool {
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if !headers.contains_key(CSRF_HEADER) {
        return false;
    }
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if fetch_site.is_some_and(|site| site != "same-origin") {
        return false;
    }
    match (text(header::ORIGIN), text(header::HOST)) {
        (Some(origin), Some(host)) => {
            origin.split_once("://").is_some_and(|(scheme, authority)| {
                matches!(scheme, "http" | "https") && authority.eq_ignore_ascii_case(host)
            })
        }
        (Some(_), None) => false,
        (None, _) => fetch_site.is_some(),
    }
}

/// The identity Kubernetes calls carry: the caller in impersonation mode (never the dev user),
/// else the server's own.
fn identity_for(
    state: &AppState,
    user: &User,
    request_id: &str,
) -> Result<Option<Impersonation>, ApiError> {
    if !state.settings.impersonation || matches!(state.settings.auth, AuthMode::Disabled) {
        return Ok(None);
    }
    Impersonation::new(
        user.email.clone(),
        identity::forwarded_groups(user).cloned(),
    )
    .map(Some)
    .map_err(|_| {
        internal(
            request_id,
            "the caller's identity cannot be sent as impersonation headers",
        )
    })
}

fn is_history(
    secret: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    prefix: &AnnotationPrefix,
) -> bool {
    let Some(kind_label) = prefix.key("kind") else {
        return false;
    };
    secret
        .labels
        .as_ref()
        .and_then(|labels| labels.get(kind_label.as_str()))
        .is_some_and(|kind| kind == "history")
}

fn read_problem(error: &ReadError) -> &'static str {
    match error {
        ReadError::Status(_) => "Kubernetes refused a preflight read",
        ReadError::Transport(_) => "no response from Kubernetes to a preflight read",
        ReadError::Timeout => "a preflight read timed out",
        ReadError::Decode => "a preflight read returned an unreadable object",
    }
}

fn internal(request_id: &str, problem: &'static str) -> ApiError {
    error!(request_id, problem, "request failed");
    ApiError::Internal {
        request_id: request_id.to_owned(),
    }
}

async fn write_audit(state: &AppState, line: AuditLine) {
    write_audit_to(&state.audit, line).await;
}

async fn write_audit_to(audit: &AuditSink, line: AuditLine) {
    if let Err(error) = audit.write(&line).await {
        error!(error = error.code(), "audit line not written durably");
    }
}
