//! OpenID Connect login: the authorization code flow with PKCE, `state` and `nonce`, through
//! the `openidconnect` crate.
//!
//! - `GET /auth/login`: discovery (cached), then a redirect to the provider's authorization
//!   endpoint with a fresh PKCE challenge (S256), `state` and `nonce`. The verifier, state and
//!   nonce travel in the `rollsafe_login` cookie — an HS256 JWT under the session secret with
//!   its own issuer (`rollsafe-login`, which a session never has), `HttpOnly`, `SameSite=Lax`,
//!   `Path=/auth`, ten minutes — so any replica can finish the login.
//! - `GET /auth/callback`: the state must equal the cookie's; the code is exchanged with the
//!   verifier; the ID token is verified by the crate (signature against the provider's JWKS,
//!   issuer, audience, expiry, nonce). A token signed by a key the cached JWKS does not hold
//!   makes the server rediscover once (key rotation), at most every
//!   [`MIN_REDISCOVERY_INTERVAL`]. Then `email` and `groups` are read from configurable claims
//!   of the verified token, the reserved-identity rule applies, and the `krypton_session` cookie
//!   is set as `POST /auth/session` sets it. Every failure answers 401 (403 for a reserved
//!   identity) with a fixed text naming the step, sets no session and clears the login cookie.
//!
//! Nothing from the provider (its error text, tokens, codes) reaches a response or a log line;
//! logs carry the static [`LoginError::code`].
//!
//! This module is the flow against the provider ([`Oidc`]) and its values; the two routes are
//! served by [`crate::login`], beside the other sign-in routes.

use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, IssuerUrl,
    Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope, SignatureVerificationError,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::Mutex;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::session::SessionSecret;

/// The login-state cookie.
pub const LOGIN_COOKIE: &str = "rollsafe_login";
/// The issuer (and audience) of login-state tokens; never a session's.
const LOGIN_ISSUER: &str = "rollsafe-login";
/// How long a login may take at the provider.
pub const LOGIN_TTL: Duration = Duration::from_secs(600);
/// How long discovery (with the JWKS) is reused.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// The least time between two rediscoveries forced by an unknown signing key.
pub const MIN_REDISCOVERY_INTERVAL: Duration = Duration::from_secs(10);
/// The time limit of each call to the provider.
pub const PROVIDER_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest provider response read.
const MAX_PROVIDER_BODY: usize = 1024 * 1024;

/// OpenID Connect settings, validated.
#[derive(Clone)]
pub struct OidcSettings {
    /// The provider's issuer URL.
    pub issuer: IssuerUrl,
    /// This server's client id at the provider.
    pub client_id: ClientId,
    /// Its client secret (none for a public client).
    pub client_secret: Option<ClientSecret>,
    /// `…/auth/callback` as the provider knows it.
    pub redirect: RedirectUrl,
    /// The scopes asked for besides `openid`.
    pub scopes: Vec<String>,
    /// The ID token claim holding the user's email.
    pub email_claim: String,
    /// The ID token claim holding the user's groups.
    pub groups_claim: String,
}

impl std::fmt::Debug for OidcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OidcSettings")
            .field("issuer", &self.issuer.as_str())
            .field("client_id", &self.client_id.as_str())
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("redirect", &self.redirect.as_str())
            .field("scopes", &self.scopes)
            .field("email_claim", &self.email_claim)
            .field("groups_claim", &self.groups_claim)
            .finish()
    }
}

/// Why a login did not end in a session. The caller sees [`LoginError::message`]; logs see
/// [`LoginError::code`].
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum LoginError {
    /// Discovery or the JWKS could not be fetched.
    #[error("the identity provider could not be reached")]
    Discovery,
    /// The callback came without a valid, unexpired login cookie.
    #[error("no sign-in is in progress in this browser")]
    NoLoginState,
    /// `state` differs from the one this browser was sent with.
    #[error("the sign-in response does not belong to this browser")]
    StateMismatch,
    /// The provider reported an error instead of a code.
    #[error("the identity provider refused the sign-in")]
    ProviderError,
    /// The code could not be exchanged (unknown, replayed, expired, or the PKCE verifier is wrong).
    #[error("the sign-in code was not accepted")]
    Exchange,
    /// The token response had no ID token.
    #[error("the identity provider sent no ID token")]
    NoIdToken,
    /// The ID token failed verification (signature, issuer, audience, expiry, nonce).
    #[error("the ID token is not valid")]
    IdToken,
    /// The verified token lacks the email claim.
    #[error("the ID token names no email")]
    NoEmail,
    /// A reserved identity.
    #[error("this identity cannot be used here")]
    Reserved,
    /// A session could not be minted.
    #[error("a session could not be created")]
    Session,
}

impl LoginError {
    /// A static code for logs.
    pub fn code(self) -> &'static str {
        match self {
            LoginError::Discovery => "discovery",
            LoginError::NoLoginState => "no_login_state",
            LoginError::StateMismatch => "state_mismatch",
            LoginError::ProviderError => "provider_error",
            LoginError::Exchange => "exchange",
            LoginError::NoIdToken => "no_id_token",
            LoginError::IdToken => "id_token",
            LoginError::NoEmail => "no_email",
            LoginError::Reserved => "reserved_identity",
            LoginError::Session => "session",
        }
    }

    /// The fixed text shown.
    pub fn message(self) -> String {
        format!("Sign-in failed: {self}. Start again at /auth/login.")
    }

    /// The status of the answer.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            LoginError::Discovery => StatusCode::BAD_GATEWAY,
            LoginError::Reserved => StatusCode::FORBIDDEN,
            LoginError::Session => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::UNAUTHORIZED,
        }
    }
}

/// What the login cookie carries between `/auth/login` and `/auth/callback`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LoginState {
    /// The `state` sent to the provider.
    pub state: String,
    /// The `nonce` sent to the provider.
    pub nonce: String,
    /// The PKCE verifier of the challenge sent.
    pub verifier: String,
}

#[derive(Serialize, Deserialize)]
struct LoginClaims {
    iss: String,
    aud: String,
    exp: u64,
    #[serde(flatten)]
    login: LoginState,
}

impl LoginState {
    /// Signs the state as the login cookie's value.
    pub fn seal(&self, secret: &SessionSecret, now: u64) -> Result<String, LoginError> {
        let claims = LoginClaims {
            iss: LOGIN_ISSUER.to_owned(),
            aud: LOGIN_ISSUER.to_owned(),
            exp: now.saturating_add(LOGIN_TTL.as_secs()),
            login: self.clone(),
        };
        let key = EncodingKey::from_secret(secret.expose()).map_err(|_| LoginError::Session)?;
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
            .map_err(|_| LoginError::Session)
    }

    /// Verifies a login cookie's value.
    pub fn open(token: &str, secret: &SessionSecret) -> Result<Self, LoginError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[LOGIN_ISSUER]);
        validation.set_audience(&[LOGIN_ISSUER]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let key =
            DecodingKey::from_secret(secret.expose()).map_err(|_| LoginError::NoLoginState)?;
        jsonwebtoken::decode::<LoginClaims>(token, &key, &validation)
            .map(|data| data.claims.login)
            .map_err(|_| LoginError::NoLoginState)
    }
}

type HttpsClient = hyper_util::client::legacy::Client<
    hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
    Full<Bytes>,
>;

/// The login flow of one provider, with its discovery cached.
pub struct Oidc {
    settings: OidcSettings,
    http: HttpsClient,
    discovered: Mutex<Discovered>,
}

/// The cached discovery, and when a refresh was last forced by an unknown key.
#[derive(Default)]
struct Discovered {
    metadata: Option<(Instant, CoreProviderMetadata)>,
    last_forced: Option<Instant>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// A failed call to the provider (no text: the provider's answer is never shown).
#[derive(Debug, Error)]
#[error("the identity provider did not answer")]
pub struct ProviderCallError;

impl Oidc {
    /// The flow for these settings. HTTPS uses the platform's roots.
    pub fn new(settings: OidcSettings) -> Self {
        let (connector, _roots) = rollsafe_https::https_connector();
        Self {
            settings,
            http: hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build(connector),
            discovered: Mutex::new(Discovered::default()),
        }
    }

    /// One request to the provider: never redirected, within [`PROVIDER_CALL_TIMEOUT`] and
    /// [`MAX_PROVIDER_BODY`].
    async fn call(
        http: HttpsClient,
        request: openidconnect::HttpRequest,
    ) -> Result<openidconnect::HttpResponse, ProviderCallError> {
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, Full::new(Bytes::from(body)));
        let exchange = async {
            let response = http.request(request).await.map_err(|_| ProviderCallError)?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_PROVIDER_BODY)
                .collect()
                .await
                .map_err(|_| ProviderCallError)?
                .to_bytes();
            Ok(http::Response::from_parts(parts, body.to_vec()))
        };
        tokio::time::timeout(PROVIDER_CALL_TIMEOUT, exchange)
            .await
            .map_err(|_| ProviderCallError)?
    }

    fn http_client(
        &self,
    ) -> impl Fn(
        openidconnect::HttpRequest,
    ) -> std::pin::Pin<
        Box<dyn Future<Output = Result<openidconnect::HttpResponse, ProviderCallError>> + Send>,
    > + use<> {
        let http = self.http.clone();
        move |request| Box::pin(Self::call(http.clone(), request))
    }

    /// The provider's metadata and JWKS: cached, or fetched when stale, or when `refresh` asks
    /// and no refresh was forced in the last [`MIN_REDISCOVERY_INTERVAL`] (so a flood of tokens
    /// under unknown keys cannot make the server hammer the provider).
    async fn metadata(&self, refresh: bool) -> Result<CoreProviderMetadata, LoginError> {
        let mut discovered = self.discovered.lock().await;
        let forced = refresh
            && discovered
                .last_forced
                .is_none_or(|at| at.elapsed() >= MIN_REDISCOVERY_INTERVAL);
        if let Some((at, metadata)) = discovered.metadata.as_ref()
            && at.elapsed() < DISCOVERY_TTL
            && !forced
        {
            return Ok(metadata.clone());
        }
        if forced {
            discovered.last_forced = Some(Instant::now());
        }
        let http = self.http_client();
        let metadata = CoreProviderMetadata::discover_async(self.settings.issuer.clone(), &http)
            .await
            .map_err(|_| {
                warn!(code = LoginError::Discovery.code(), "OIDC discovery failed");
                LoginError::Discovery
            })?;
        discovered.metadata = Some((Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    /// The authorization URL to send the browser to, and the state to keep in its cookie.
    pub async fn start(&self) -> Result<(String, LoginState), LoginError> {
        let metadata = self.metadata(false).await?;
        let client = CoreClient::from_provider_metadata(
            metadata,
            self.settings.client_id.clone(),
            self.settings.client_secret.clone(),
        )
        .set_redirect_uri(self.settings.redirect.clone());
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .set_pkce_challenge(challenge);
        for scope in &self.settings.scopes {
            request = request.add_scope(Scope::new(scope.clone()));
        }
        let (url, state, nonce) = request.url();
        Ok((
            url.to_string(),
            LoginState {
                state: state.secret().clone(),
                nonce: nonce.secret().clone(),
                verifier: verifier.secret().clone(),
            },
        ))
    }

    /// Finishes a login: exchanges `code`, verifies the ID token, and returns the email and
    /// groups of its claims.
    pub async fn finish(
        &self,
        login: &LoginState,
        code: &str,
    ) -> Result<(String, Vec<String>), LoginError> {
        let http = self.http_client();
        let mut metadata = self.metadata(false).await?;
        let client = |metadata: CoreProviderMetadata| {
            CoreClient::from_provider_metadata(
                metadata,
                self.settings.client_id.clone(),
                self.settings.client_secret.clone(),
            )
            .set_redirect_uri(self.settings.redirect.clone())
        };
        let response = client(metadata.clone())
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(|_| LoginError::Exchange)?
            .set_pkce_verifier(PkceCodeVerifier::new(login.verifier.clone()))
            .request_async(&http)
            .await
            .map_err(|_| LoginError::Exchange)?;
        use openidconnect::TokenResponse as _;
        let id_token = response.id_token().ok_or(LoginError::NoIdToken)?.clone();
        let nonce = Nonce::new(login.nonce.clone());
        let mut rediscovered = false;
        loop {
            let current = client(metadata.clone());
            let verifier = current.id_token_verifier();
            match id_token.claims(&verifier, &nonce) {
                Ok(_) => break,
                Err(ClaimsVerificationError::SignatureVerification(
                    SignatureVerificationError::NoMatchingKey,
                )) if !rediscovered => {
                    // The provider rotated its keys since the JWKS was fetched.
                    info!("ID token signed by an unknown key: fetching the provider's keys again");
                    rediscovered = true;
                    metadata = self.metadata(true).await?;
                }
                Err(_) => return Err(LoginError::IdToken),
            }
        }
        // The token is verified: its payload is the provider's word.
        let payload = id_token
            .to_string()
            .split('.')
            .nth(1)
            .and_then(|p| {
                base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .decode(p)
                    .ok()
            })
            .and_then(|p| serde_json::from_slice::<serde_json::Value>(&p).ok())
            .ok_or(LoginError::IdToken)?;
        let email = payload
            .get(&self.settings.email_claim)
            .and_then(serde_json::Value::as_str)
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .ok_or(LoginError::NoEmail)?
            .to_lowercase();
        let groups = payload
            .get(&self.settings.groups_claim)
            .and_then(serde_json::Value::as_array)
            .map(|g| {
                g.iter()
                    .filter_map(serde_json::Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Ok((email, groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{self, NewSession};

    fn secret() -> SessionSecret {
        SessionSecret::new(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    #[test]
    fn a_login_state_opens_only_with_its_key_and_is_never_a_session() {
        let login = LoginState {
            state: "s".into(),
            nonce: "n".into(),
            verifier: "v".into(),
        };
        let sealed = login.seal(&secret(), session::now()).unwrap();
        assert_eq!(LoginState::open(&sealed, &secret()), Ok(login.clone()));
        let other = SessionSecret::new(b"another-key-another-key-another-key".to_vec());
        assert_eq!(
            LoginState::open(&sealed, &other),
            Err(LoginError::NoLoginState)
        );
        assert!(
            session::verify(&sealed, &secret()).is_err(),
            "not a session"
        );
        let expired = login.seal(&secret(), 1).unwrap();
        assert_eq!(
            LoginState::open(&expired, &secret()),
            Err(LoginError::NoLoginState)
        );
        let session = session::mint(
            &NewSession {
                sub: None,
                email: "a@x.io".into(),
                name: None,
                groups: vec![],
                ttl: Duration::from_secs(60),
            },
            &secret(),
            session::now(),
        )
        .unwrap();
        assert_eq!(
            LoginState::open(&session, &secret()),
            Err(LoginError::NoLoginState)
        );
    }
}
