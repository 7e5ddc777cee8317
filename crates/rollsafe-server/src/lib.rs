//! The Restart Consumers HTTP API.
//!
//! - [`config`]: settings from flags and the `KRYPTON_*`/`SESSION_*` environment, validated.
//! - [`session`]: session JWTs (cookie or bearer), and minting them; [`token_review`]:
//!   Kubernetes bearer tokens checked with a TokenReview.
//! - [`acl`]: the ACL on a live Secret; [`access`]: the cached access-rules ConfigMap.
//! - [`scope`]: namespace scope.
//! - [`audit`]: intent and result records, durable in a file, copied to stdout.
//! - [`identity`]: reserved Kubernetes identities are refused; [`limits`]: concurrent runs.
//! - [`output`]: bounded, lossy writers for standard streams.
//! - [`app`]: the routes and the gate sequence; [`error`]: the `{ error }` envelope.
//! - [`web`]: the embedded web page; [`login`]: signing a browser in and out with a session
//!   token; [`oidc`]: OpenID Connect login.
//! - [`metrics`]: Prometheus metrics; [`serve`]: listeners and graceful shutdown.

#![warn(missing_docs, unreachable_pub)]

pub mod access;
pub mod acl;
pub mod app;
pub mod audit;
pub mod config;
pub mod error;
pub mod identity;
pub mod limits;
pub mod login;
pub mod metrics;
pub mod oidc;
pub mod output;
pub mod scope;
pub mod serve;
pub mod session;
pub mod token_review;
pub mod web;

pub use app::{AppState, router};
pub use serve::{BoundServer, ServeError};
