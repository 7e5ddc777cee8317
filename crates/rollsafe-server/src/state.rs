//! What every request shares: [`AppState`], built once from the settings, and the same-origin
//! proof ([`same_origin`]) the state-changing routes ask of a browser.
//!
//! The state imports the parts it holds and nothing that reads it: the routes
//! ([`crate::router`]) and the handlers import the state, never the other way round.

use std::sync::Arc;

use axum::http::{HeaderMap, header};
use rollsafe_kube::{Connection, RestartEngine};
use tokio_util::task::TaskTracker;

use crate::access::{ACCESS_RULES_TTL, AccessRulesCache};
use crate::audit::AuditSink;
use crate::impersonation::ImpersonationMode;
use crate::limits::RunLimiter;
use crate::metrics::Metrics;
use crate::oidc::Oidc;
use crate::settings::Settings;
use crate::token_review::TokenReviewer;

/// The most consumers reads (previews and rollout views) in progress at once, server-wide;
/// beyond it, 429.
pub const MAX_CONCURRENT_PREVIEWS: usize = 64;

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
    /// The server-wide cap on concurrent consumers reads (previews and rollout views).
    pub previews: RunLimiter,
    /// The TokenReview of Kubernetes bearer tokens, when enabled.
    pub reviewer: Option<TokenReviewer>,
    /// OpenID Connect login, when configured.
    pub oidc: Option<Oidc>,
    /// How calls run as the caller: decided at startup by `rollsafe serve`
    /// ([`crate::impersonation::resolve`]); [`ImpersonationMode::assumed`] until then.
    pub impersonation: ImpersonationMode,
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
        let oidc = settings.oidc.clone().map(Oidc::new);
        let reviewer = settings
            .token_review
            .clone()
            .map(|audiences| TokenReviewer::new(audiences, engine.timeouts().get));
        let impersonation =
            ImpersonationMode::assumed(settings.impersonation, settings.impersonation_constrained);
        Self {
            impersonation,
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

impl AppState {
    /// The state with the impersonation mode [`crate::impersonation::resolve`] decided.
    pub fn with_impersonation(mut self, mode: ImpersonationMode) -> Self {
        self.impersonation = mode;
        self
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
