//! Session tokens: HS256 JWTs with `iss=krypton`, as the Secret manager issues them.
//!
//! The same token is accepted from the `krypton_session` cookie and as
//! `Authorization: Bearer …`. Verification requires HS256 (so `alg: none` and every other
//! algorithm fail), a valid signature, `iss = krypton`, an unexpired `exp`, a string `sub` and a
//! non-empty string `email`. `email` is lower-cased, `name` falls back to the email, and `groups`
//! keeps only its string entries (anything but an array is no groups). Any failure means "no
//! user"; the reason is never sent to the caller.

use std::fmt;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::Serialize;
use serde_json::{Map, Value};
use thiserror::Error;

/// The issuer of session tokens.
pub const ISSUER: &str = "krypton";
/// The session cookie.
pub const COOKIE: &str = "krypton_session";
/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECONDS: u64 = 5;

/// The HMAC key of session JWTs. `Debug` never prints it.
#[derive(Clone)]
pub struct SessionSecret(Vec<u8>);

impl SessionSecret {
    /// Wraps a key.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Self(bytes.into())
    }

    /// The key bytes.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for SessionSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionSecret(<redacted>)")
    }
}

/// How callers authenticate.
#[derive(Debug, Clone)]
pub enum AuthMode {
    /// Session JWTs (cookie or bearer) signed with this secret.
    Session {
        /// The HMAC key.
        secret: SessionSecret,
        /// Tokens minted by `rollsafe token` default to this lifetime.
        max_age: Duration,
    },
    /// `AUTH_DISABLED`: every request is the fixed dev admin user.
    Disabled,
}

impl AuthMode {
    /// The mode's name, as `/api/config` reports it.
    pub fn as_str(&self) -> &'static str {
        match self {
            AuthMode::Session { .. } => "session",
            AuthMode::Disabled => "disabled",
        }
    }
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct User {
    /// Subject.
    pub sub: String,
    /// Lower-cased email: the identity used for ACLs, audit and impersonation.
    pub email: String,
    /// Display name.
    pub name: String,
    /// Group names.
    pub groups: Vec<String>,
    /// Who vouched for the identity.
    pub source: Source,
}

/// Who vouched for a caller's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A session JWT signed with the server's key (or the fixed dev user).
    Session,
    /// The Kubernetes API server, through a TokenReview.
    Kubernetes,
}

impl User {
    /// The fixed user of `AUTH_DISABLED`.
    pub fn dev() -> Self {
        Self {
            sub: "dev".into(),
            email: "dev@krypton.local".into(),
            name: "Local Developer".into(),
            groups: vec!["krypton-admin".into()],
            source: Source::Session,
        }
    }
}

/// Why a token was not accepted. Logged at debug level only; callers see 401.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SessionError {
    /// Signature, algorithm, issuer, expiry or encoding is wrong.
    #[error("invalid session token")]
    Invalid,
    /// A required claim is missing or of the wrong type.
    #[error("session token lacks a required claim")]
    Claims,
    /// A token could not be signed.
    #[error("cannot sign a session token")]
    Sign,
}

/// Verifies a session token.
pub fn verify(token: &str, secret: &SessionSecret) -> Result<User, SessionError> {
    let mut validation = Validation::new(Algorithm::HS256);
    validation.set_issuer(&[ISSUER]);
    validation.set_required_spec_claims(&["exp", "iss", "sub"]);
    validation.leeway = LEEWAY_SECONDS;
    validation.validate_nbf = true;
    let key = DecodingKey::from_secret(secret.expose()).map_err(|_| SessionError::Invalid)?;
    let data = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
        .map_err(|_| SessionError::Invalid)?;
    let claims = data.claims;
    // The library accepts an array of issuers that contains ours; a session token names exactly
    // one issuer.
    if claims.get("iss").and_then(Value::as_str) != Some(ISSUER) {
        return Err(SessionError::Invalid);
    }
    let sub = claims
        .get("sub")
        .and_then(Value::as_str)
        .ok_or(SessionError::Claims)?;
    let email = claims
        .get("email")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .ok_or(SessionError::Claims)?
        .to_lowercase();
    let name = claims
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map_or_else(|| email.clone(), str::to_owned);
    let groups = claims
        .get("groups")
        .and_then(Value::as_array)
        .map(|groups| {
            groups
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    Ok(User {
        sub: sub.to_owned(),
        email,
        name,
        groups,
        source: Source::Session,
    })
}

/// What a minted token says.
#[derive(Debug, Clone)]
pub struct NewSession {
    /// Subject; the email when not given.
    pub sub: Option<String>,
    /// Email.
    pub email: String,
    /// Display name; the email when not given.
    pub name: Option<String>,
    /// Groups.
    pub groups: Vec<String>,
    /// Lifetime.
    pub ttl: Duration,
}

/// Signs a session token, valid from `now` (seconds since the epoch) for `session.ttl`.
pub fn mint(
    session: &NewSession,
    secret: &SessionSecret,
    now: u64,
) -> Result<String, SessionError> {
    #[derive(Serialize)]
    struct Claims<'a> {
        iss: &'static str,
        sub: &'a str,
        email: String,
        name: &'a str,
        groups: &'a [String],
        iat: u64,
        exp: u64,
    }
    let email = session.email.trim().to_lowercase();
    let claims = Claims {
        iss: ISSUER,
        sub: session.sub.as_deref().unwrap_or(&email),
        name: session.name.as_deref().unwrap_or(&email),
        email: email.clone(),
        groups: &session.groups,
        iat: now,
        exp: now.saturating_add(session.ttl.as_secs()),
    };
    let key = EncodingKey::from_secret(secret.expose()).map_err(|_| SessionError::Sign)?;
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
        .map_err(|_| SessionError::Sign)
}

/// The credentials a request carries.
#[derive(PartialEq, Eq)]
pub enum Credentials {
    /// `Authorization: Bearer …`: a session JWT, or a Kubernetes token when those are reviewed.
    Bearer(String),
    /// The `krypton_session` cookie: always a session JWT, and sent by browsers on their own,
    /// so state-changing requests need the same-origin check.
    Cookie(String),
}

impl Credentials {
    /// The token.
    pub fn token(&self) -> &str {
        match self {
            Credentials::Bearer(token) | Credentials::Cookie(token) => token,
        }
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Credentials::Bearer(_) => "Bearer(<redacted>)",
            Credentials::Cookie(_) => "Cookie(<redacted>)",
        })
    }
}

/// The credentials of a request: the bearer token when there is one, else the
/// `krypton_session` cookie.
pub fn credentials_from_headers(headers: &http::HeaderMap) -> Option<Credentials> {
    if let Some(value) = headers.get(http::header::AUTHORIZATION)
        && let Ok(value) = value.to_str()
        && let Some((scheme, token)) = value.split_once(' ')
        && scheme.eq_ignore_ascii_case("bearer")
        && !token.trim().is_empty()
    {
        return Some(Credentials::Bearer(token.trim().to_owned()));
    }
    headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().trim_matches('"').to_owned())
        .filter(|value| !value.is_empty())
        .map(Credentials::Cookie)
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use serde_json::json;

    fn secret() -> SessionSecret {
        SessionSecret::new(b"0123456789abcdef0123456789abcdef".to_vec())
    }

    fn sign(claims: &Value, secret: &[u8]) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(secret).unwrap(),
        )
        .unwrap()
    }

    fn claims() -> Value {
        json!({"iss": "krypton", "sub": "u1", "email": "Alice@Example.com", "name": "Alice",
               "groups": ["dev", 5, null, "ops"], "iat": now(), "exp": now() + 600})
    }

    #[test]
    fn valid_token() {
        let user = verify(&sign(&claims(), secret().expose()), &secret()).unwrap();
        assert_eq!(
            user,
            User {
                sub: "u1".into(),
                email: "alice@example.com".into(),
                name: "Alice".into(),
                groups: vec!["dev".into(), "ops".into()],
                source: Source::Session,
            }
        );
    }

    #[test]
    fn minted_tokens_verify() {
        let session = NewSession {
            sub: None,
            email: "Bob@x.io".into(),
            name: None,
            groups: vec!["g".into()],
            ttl: Duration::from_secs(60),
        };
        let user = verify(&mint(&session, &secret(), now()).unwrap(), &secret()).unwrap();
        assert_eq!(
            user,
            User {
                sub: "bob@x.io".into(),
                email: "bob@x.io".into(),
                name: "bob@x.io".into(),
                groups: vec!["g".into()],
                source: Source::Session,
            }
        );
    }

    #[test]
    fn rejected_tokens() {
        let mut wrong_issuer = claims();
        wrong_issuer["iss"] = json!("someone-else");
        let mut expired = claims();
        expired["exp"] = json!(now() - 120);
        let mut no_email = claims();
        no_email.as_object_mut().unwrap().remove("email");
        let mut numeric_email = claims();
        numeric_email["email"] = json!(7);
        let mut no_sub = claims();
        no_sub.as_object_mut().unwrap().remove("sub");
        let mut no_exp = claims();
        no_exp.as_object_mut().unwrap().remove("exp");
        let mut not_yet_valid = claims();
        not_yet_valid["nbf"] = json!(now() + 120);
        let mut string_nbf = claims();
        string_nbf["nbf"] = json!("0");
        let mut issuer_array = claims();
        issuer_array["iss"] = json!(["krypton"]);
        let mut issuer_array_with_others = claims();
        issuer_array_with_others["iss"] = json!(["someone-else", "krypton"]);
        let header_none = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(claims().to_string());
        let alg_none = format!("{header_none}.{payload}.");
        let hs512 = jsonwebtoken::encode(
            &Header::new(Algorithm::HS512),
            &claims(),
            &EncodingKey::from_secret(secret().expose()).unwrap(),
        )
        .unwrap();
        let cases = [
            (
                "bad signature",
                sign(&claims(), b"another-secret-another-secret-xx"),
            ),
            ("wrong issuer", sign(&wrong_issuer, secret().expose())),
            ("expired", sign(&expired, secret().expose())),
            ("missing email", sign(&no_email, secret().expose())),
            ("non-string email", sign(&numeric_email, secret().expose())),
            ("missing sub", sign(&no_sub, secret().expose())),
            ("missing exp", sign(&no_exp, secret().expose())),
            ("nbf in the future", sign(&not_yet_valid, secret().expose())),
            ("nbf not a number", sign(&string_nbf, secret().expose())),
            ("iss an array", sign(&issuer_array, secret().expose())),
            (
                "iss an array with others",
                sign(&issuer_array_with_others, secret().expose()),
            ),
            ("alg none", alg_none),
            ("HS512", hs512),
            ("garbage", "not.a.jwt".to_owned()),
            ("empty", String::new()),
        ];
        for (case, token) in cases {
            assert!(
                verify(&token, &secret()).is_err(),
                "{case} must be rejected"
            );
        }
    }

    #[test]
    fn past_nbf_and_nbf_within_leeway_are_accepted() {
        for nbf in [now() - 60, now() + 2] {
            let mut c = claims();
            c["nbf"] = json!(nbf);
            assert!(
                verify(&sign(&c, secret().expose()), &secret()).is_ok(),
                "{nbf}"
            );
        }
    }

    #[test]
    fn non_array_groups_are_no_groups() {
        let mut c = claims();
        c["groups"] = json!("admins");
        assert!(
            verify(&sign(&c, secret().expose()), &secret())
                .unwrap()
                .groups
                .is_empty()
        );
    }

    #[test]
    fn token_sources() {
        let token_from_headers =
            |h: &http::HeaderMap| credentials_from_headers(h).map(|c| c.token().to_owned());
        let mut headers = http::HeaderMap::new();
        assert_eq!(token_from_headers(&headers), None);
        headers.append(
            http::header::COOKIE,
            "a=b; krypton_session=tok1; c=d".parse().unwrap(),
        );
        assert_eq!(token_from_headers(&headers).as_deref(), Some("tok1"));
        headers.insert(http::header::AUTHORIZATION, "Bearer tok2".parse().unwrap());
        assert_eq!(token_from_headers(&headers).as_deref(), Some("tok2"));
        headers.insert(http::header::AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(token_from_headers(&headers).as_deref(), Some("tok1"));
    }
}
