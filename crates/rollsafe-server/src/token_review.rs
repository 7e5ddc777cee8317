//! Kubernetes bearer tokens: `Authorization: Bearer <token>` that is not a session JWT is
//! checked with a TokenReview, as the server's own identity, when `KRYPTON_TOKEN_REVIEW` is on.
//!
//! - Which tokens are reviewed: bearer tokens only (the cookie is always a session), and never
//!   one whose JWT header says HS256 — that is a session token, valid or not, and it is not sent
//!   to the API server.
//! - Audiences: `KRYPTON_TOKEN_REVIEW_AUDIENCES` (empty: the API server's own). An answer
//!   counts only when its `status.audiences` holds one of them.
//! - Cache: answers (accepted and rejected alike) are kept for [`REVIEW_CACHE_TTL`], keyed by
//!   the SHA-256 digest of the token — never the token — and at most [`MAX_CACHED_REVIEWS`]
//!   of them; a full cache drops its expired entries, then stops caching until some expire.
//! - Load: at most [`MAX_REVIEWS_IN_FLIGHT`] reviews at once; a request that cannot get a slot,
//!   or whose review fails or times out, gets 503 with `Retry-After`, never a 401 (the token
//!   may be valid) and never the upstream text.
//!
//! A reviewed identity is a [`Source::Kubernetes`] user: its name is the Kubernetes user name
//! (for a ServiceAccount, `system:serviceaccount:<namespace>:<name>`), used for the ACL, the
//! audit line and impersonation as [`crate::identity`] says.

use std::collections::HashMap;
use std::time::Duration;

use rollsafe_kube::{Connection, TokenReview, review_token};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;
use tracing::warn;

use crate::error::ApiError;
use crate::session::{Source, User};

/// How long a review's answer is reused.
pub const REVIEW_CACHE_TTL: Duration = Duration::from_secs(10);
/// The most answers kept.
pub const MAX_CACHED_REVIEWS: usize = 4096;
/// The most TokenReviews in flight at once, server-wide.
pub const MAX_REVIEWS_IN_FLIGHT: usize = 16;

/// The SHA-256 digest of a token: the only form in which a token is kept.
type TokenDigest = [u8; 32];

/// Reviews Kubernetes bearer tokens and caches the answers by digest.
#[derive(Debug)]
pub struct TokenReviewer {
    audiences: Vec<String>,
    timeout: Duration,
    cache: Mutex<HashMap<TokenDigest, (Instant, Option<User>)>>,
    slots: Semaphore,
}

impl TokenReviewer {
    /// A reviewer asking for `audiences`, each review within `timeout` (the engine's
    /// single-object read timeout).
    pub fn new(audiences: Vec<String>, timeout: Duration) -> Self {
        Self {
            audiences,
            timeout,
            cache: Mutex::new(HashMap::new()),
            slots: Semaphore::new(MAX_REVIEWS_IN_FLIGHT),
        }
    }

    /// The user a token belongs to; `Ok(None)` when the API server does not accept it.
    pub async fn review(
        &self,
        connection: &Connection,
        token: &str,
    ) -> Result<Option<User>, ApiError> {
        let digest: TokenDigest = Sha256::digest(token.as_bytes()).into();
        if let Some((at, answer)) = self.cache.lock().await.get(&digest)
            && at.elapsed() < REVIEW_CACHE_TTL
        {
            return Ok(answer.clone());
        }
        let Ok(_slot) = self.slots.try_acquire() else {
            warn!(
                code = "review_busy",
                "token review refused: too many in flight"
            );
            return Err(ApiError::AuthenticationUnavailable);
        };
        let client = connection.client(None);
        let answer = match review_token(&client, token, &self.audiences, self.timeout).await {
            Ok(TokenReview::Authenticated { username, groups }) => Some(User {
                sub: username.clone(),
                email: username.clone(),
                name: username,
                groups,
                source: Source::Kubernetes,
            }),
            Ok(TokenReview::Rejected) => None,
            Err(error) => {
                warn!(code = error.code(), "token review failed");
                return Err(ApiError::AuthenticationUnavailable);
            }
        };
        let mut cache = self.cache.lock().await;
        if cache.len() >= MAX_CACHED_REVIEWS {
            cache.retain(|_, (at, _)| at.elapsed() < REVIEW_CACHE_TTL);
        }
        if cache.len() < MAX_CACHED_REVIEWS {
            cache.insert(digest, (Instant::now(), answer.clone()));
        }
        Ok(answer)
    }
}

/// Whether a bearer token is one of ours: a JWT whose header names HS256. Such a token is never
/// sent for review, whether or not it verifies.
pub fn is_session_token(token: &str) -> bool {
    jsonwebtoken::decode_header(token).is_ok_and(|h| h.alg == jsonwebtoken::Algorithm::HS256)
}
