//! The Restart Consumers HTTP API.
//!
//! From the roof down (each module imports only the ones below it):
//!
//! - [`serve`]: listeners and graceful shutdown; [`config`]: flags and the
//!   `KRYPTON_*`/`SESSION_*` environment, parsed into [`Settings`] — the wiring, which nothing
//!   below imports.
//! - [`router`]: every route and the middleware that sees every response.
//! - The handlers: [`restart`] (a restart: its gates, then the engine inside the audit
//!   protocol), `approve` (the page's Approve), `consumers` (the preview and the rollout view),
//!   `browse` (the page's reads), [`login`] (signing a browser in and out, OpenID Connect
//!   included), [`web`] (the embedded page), `health` (the probes). No handler imports another:
//!   what they share sits below them — `gates` (authentication for a state change, the restart
//!   flag, the run limits, scope, live visibility, the ACL), `auth` (who the caller is),
//!   `request` (request ids, the sanitized 500) and [`audit::audited`] (intent before the act,
//!   result after).
//! - [`state`]: [`AppState`], what every request shares; [`settings`]: the validated settings.
//! - The parts: [`session`] (session JWTs, [`session::SessionSecret`], [`session::AuthMode`]),
//!   [`token_review`] (Kubernetes bearer tokens checked with a TokenReview), [`oidc`] (the
//!   OpenID Connect flow), [`acl`] (the ACL on a live Secret, [`acl::Admins`]), [`access`]
//!   (the cached access-rules ConfigMap), [`scope`] (namespace scope, [`scope::Scope`]),
//!   [`audit`] (intent and result records, durable in a file, copied to stdout), [`identity`]
//!   (reserved Kubernetes identities are refused), [`impersonation`] (constrained or
//!   unconstrained impersonation, decided at startup), [`limits`] (concurrent runs), [`metrics`]
//!   (Prometheus metrics), [`output`] (bounded, lossy writers for standard streams), [`error`]
//!   (the `{ error }` envelope), `pods` (what a rollout's new pods say, for the rollout view).

#![warn(missing_docs, unreachable_pub)]

pub mod access;
pub mod acl;
mod approve;
pub mod audit;
mod auth;
mod browse;
pub mod config;
mod consumers;
pub mod error;
mod gates;
mod health;
pub mod identity;
pub mod impersonation;
pub mod limits;
pub mod login;
pub mod metrics;
pub mod oidc;
pub mod output;
mod pods;
mod request;
pub mod restart;
pub mod router;
pub mod scope;
pub mod serve;
pub mod session;
pub mod settings;
pub mod state;
pub mod token_review;
pub mod web;

pub use router::router;
pub use serve::{BoundServer, ServeError};
pub use settings::Settings;
pub use state::AppState;
