//! OpenID Connect login against a certified provider no one here wrote: npm's `oidc-provider`,
//! started by the test with `tests/oidc/provider.mjs`.
//!
//! The full login goes through the provider's own login and consent forms, then rollsafe's
//! callback, the `krypton_session` cookie and sign-out. Each refusal — a tampered `state`, a
//! replayed code, a wrong `nonce`, no login in progress, a code issued to another client
//! (another audience), an expired ID token — answers with a
//! clear error and sets no session. A key rotation at the provider (a new process signing with
//! a new key) is followed without a restart of rollsafe.
//!
//! Without Node.js or the package (`.ci/run` installs it into `.ci/node`, or
//! `ROLLSAFE_OIDC_PROVIDER` names its `lib/index.js`) the test says why it skipped, unless `CI`
//! is set.

#![expect(clippy::unwrap_used, reason = "test code")]

mod common;

use std::collections::HashMap;

use bytes::Bytes;
use common::provider::{REDIRECT, free_port, settings, skip_without_provider, start_provider};
use common::{Fixture, SECRET};
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use rollsafe_server::config::SessionSecret;
use rollsafe_server::oidc::LoginState;

struct Browser {
    http: HyperClient<HttpConnector, Full<Bytes>>,
    /// The provider's cookies, by name (one provider per test).
    jar: HashMap<String, String>,
}

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

impl Answer {
    fn location(&self) -> String {
        self.headers[header::LOCATION].to_str().unwrap().to_owned()
    }

    fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find(|c| c.starts_with(&format!("{name}=")))
            .map(str::to_owned)
    }
}

impl Browser {
    fn new() -> Self {
        Self {
            http: HyperClient::builder(TokioExecutor::new()).build_http(),
            jar: HashMap::new(),
        }
    }

    async fn send(
        &mut self,
        method: Method,
        url: &str,
        cookie: Option<&str>,
        form: Option<String>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(url);
        let jar: Vec<String> = self.jar.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let cookies: Vec<String> = cookie.map(str::to_owned).into_iter().chain(jar).collect();
        if !cookies.is_empty() {
            request = request.header(header::COOKIE, cookies.join("; "));
        }
        let body = match form {
            Some(form) => {
                request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
                Full::new(Bytes::from(form))
            }
            None => Full::new(Bytes::new()),
        };
        let response = self
            .http
            .request(request.body(body).unwrap())
            .await
            .unwrap_or_else(|error| panic!("{url}: {error:?}"));
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    /// Sends `request` to the provider, keeping the cookies it sets.
    async fn provider(&mut self, method: Method, url: &str, form: Option<String>) -> Answer {
        let answer = self.send(method, url, None, form).await;
        for cookie in answer.headers.get_all(header::SET_COOKIE) {
            let text = cookie.to_str().unwrap();
            if let Some((pair, _)) = text.split_once(';').or(Some((text, "")))
                && let Some((name, value)) = pair.split_once('=')
            {
                self.jar.insert(name.to_owned(), value.to_owned());
            }
        }
        answer
    }

    /// Follows the provider from the authorization URL through its login and consent forms as
    /// `account`, and returns the redirect back to rollsafe (`…/auth/callback?code=…&state=…`).
    async fn through_provider(&mut self, issuer: &str, authorize: &str, account: &str) -> String {
        let mut answer = self.provider(Method::GET, authorize, None).await;
        for _ in 0..12 {
            if answer.status == StatusCode::OK {
                let action = attribute(&answer.body, "action=\"").replace("&amp;", "&");
                let prompt = attribute(&answer.body, "name=\"prompt\" value=\"");
                let form = match prompt.as_str() {
                    "login" => format!("prompt=login&login={account}&password=any"),
                    "consent" => "prompt=consent".to_owned(),
                    other => panic!("unexpected prompt {other}: {}", answer.body),
                };
                answer = self
                    .provider(Method::POST, &absolute(issuer, &action), Some(form))
                    .await;
                continue;
            }
            assert!(
                answer.status.is_redirection(),
                "{} {}",
                answer.status,
                answer.body
            );
            let location = answer.location();
            if location.starts_with(REDIRECT) {
                return location;
            }
            answer = self
                .provider(Method::GET, &absolute(issuer, &location), None)
                .await;
        }
        panic!("the provider never redirected back");
    }
}

fn attribute(html: &str, prefix: &str) -> String {
    let start = html
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix} in {html}"))
        + prefix.len();
    html[start..].split('"').next().unwrap().to_owned()
}

fn absolute(base: &str, location: &str) -> String {
    if location.starts_with("http") {
        location.to_owned()
    } else {
        format!("{base}{location}")
    }
}

/// The query of a callback URL, by name.
fn query(url: &str) -> HashMap<String, String> {
    let (_, query) = url.split_once('?').unwrap();
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

/// A login started at rollsafe: the authorization URL and the login cookie (`name=value`).
async fn start_login(browser: &mut Browser, rollsafe: &str) -> (String, String) {
    let answer = browser
        .send(Method::GET, &format!("{rollsafe}/auth/login"), None, None)
        .await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    let cookie = answer.cookie("rollsafe_login").unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/auth", "Max-Age=600"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap().to_owned();
    (answer.location(), pair)
}

async fn callback(browser: &mut Browser, rollsafe: &str, redirect: &str, cookie: &str) -> Answer {
    let (_, query) = redirect.split_once('?').unwrap();
    browser
        .send(
            Method::GET,
            &format!("{rollsafe}/auth/callback?{query}"),
            Some(cookie),
            None,
        )
        .await
}

fn refused(answer: &Answer, text: &str) {
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{}", answer.body);
    assert!(answer.body.contains(text), "{}", answer.body);
    assert!(answer.cookie("krypton_session").is_none(), "no session");
    let cleared = answer.cookie("rollsafe_login").unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_through_a_real_provider_and_every_refusal() {
    let Some(module) = skip_without_provider() else {
        return;
    };
    let port = free_port();
    let mut provider = start_provider(&module, port, REDIRECT, "key-1", 0);
    let issuer = provider.issuer.clone();
    let f = Fixture::start(|s| s.oidc = Some(settings(&issuer, REDIRECT))).await;
    let rollsafe = format!("http://{}", f.api);
    let mut browser = Browser::new();

    // The full login: provider forms, callback, session cookie.
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let params = query(&authorize);
    assert_eq!(params["code_challenge_method"], "S256");
    assert!(params.contains_key("nonce") && params.contains_key("state"));
    let redirect = browser.through_provider(&issuer, &authorize, "alice").await;
    let answer = callback(&mut browser, &rollsafe, &redirect, &login_cookie).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
    assert_eq!(answer.location(), "/");
    let session = answer.cookie("krypton_session").unwrap();
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=3600"] {
        assert!(session.contains(attribute), "{session}");
    }
    assert!(!session.contains("Secure"), "loopback: {session}");
    assert!(
        answer
            .cookie("rollsafe_login")
            .unwrap()
            .contains("Max-Age=0")
    );
    let session_pair = session.split(';').next().unwrap().to_owned();
    let me = browser
        .send(
            Method::GET,
            &format!("{rollsafe}/api/me"),
            Some(&session_pair),
            None,
        )
        .await;
    assert_eq!(me.status, StatusCode::OK, "{}", me.body);
    let me: serde_json::Value = serde_json::from_str(&me.body).unwrap();
    assert_eq!(me["email"], "alice@example.com");
    assert_eq!(me["groups"], serde_json::json!(["platform", "developers"]));

    // The same code again: the provider refuses the exchange.
    let replay = callback(&mut browser, &rollsafe, &redirect, &login_cookie).await;
    refused(&replay, "the sign-in code was not accepted");

    // A tampered state.
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let redirect = browser.through_provider(&issuer, &authorize, "alice").await;
    let tampered = redirect.replace("state=", "state=x");
    refused(
        &callback(&mut browser, &rollsafe, &tampered, &login_cookie).await,
        "does not belong to this browser",
    );
    // No login in progress in this browser.
    refused(
        &callback(&mut browser, &rollsafe, &redirect, "other=1").await,
        "no sign-in is in progress",
    );

    // A wrong nonce: the login cookie re-sealed with another nonce than the one the provider
    // put in the ID token.
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let redirect = browser.through_provider(&issuer, &authorize, "alice").await;
    let secret = SessionSecret::new(SECRET.as_bytes().to_vec());
    let (_, sealed) = login_cookie.split_once('=').unwrap();
    let mut login = LoginState::open(sealed, &secret).unwrap();
    login.nonce = "not-the-nonce-sent".into();
    let forged = format!(
        "rollsafe_login={}",
        login
            .seal(&secret, rollsafe_server::session::now())
            .unwrap()
    );
    refused(
        &callback(&mut browser, &rollsafe, &redirect, &forged).await,
        "the ID token is not valid",
    );

    // A code issued to another client (another audience) is refused: the provider binds it to
    // that client, so rollsafe's exchange fails and no ID token for another audience is used.
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let elsewhere = authorize.replace("client_id=rollsafe", "client_id=another-app");
    assert_ne!(elsewhere, authorize);
    let redirect = browser.through_provider(&issuer, &elsewhere, "alice").await;
    refused(
        &callback(&mut browser, &rollsafe, &redirect, &login_cookie).await,
        "the sign-in code was not accepted",
    );

    // Key rotation: the provider restarts with a new signing key on the same address; rollsafe
    // fetches the keys again and accepts the new signature.
    drop(provider);
    provider = start_provider(&module, port, REDIRECT, "key-2", 0);
    browser.jar.clear();
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let redirect = browser.through_provider(&issuer, &authorize, "bob").await;
    let answer = callback(&mut browser, &rollsafe, &redirect, &login_cookie).await;
    assert_eq!(
        answer.status,
        StatusCode::SEE_OTHER,
        "after rotation: {}",
        answer.body
    );
    assert!(answer.cookie("krypton_session").is_some());

    // Signing out clears the session cookie.
    let out = browser
        .send(
            Method::POST,
            &format!("{rollsafe}/auth/logout"),
            Some(&session_pair),
            None,
        )
        .await;
    assert_eq!(
        out.status,
        StatusCode::FORBIDDEN,
        "a bare POST is cross-site"
    );
    drop(provider);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_id_token_is_refused() {
    let Some(module) = skip_without_provider() else {
        return;
    };
    // A provider whose clock is two hours behind issues tokens that expired an hour ago.
    let provider = start_provider(&module, free_port(), REDIRECT, "key-1", -7200);
    let issuer = provider.issuer.clone();
    let f = Fixture::start(|s| s.oidc = Some(settings(&issuer, REDIRECT))).await;
    let rollsafe = format!("http://{}", f.api);
    let mut browser = Browser::new();
    let (authorize, login_cookie) = start_login(&mut browser, &rollsafe).await;
    let redirect = browser.through_provider(&issuer, &authorize, "alice").await;
    refused(
        &callback(&mut browser, &rollsafe, &redirect, &login_cookie).await,
        "the ID token is not valid",
    );
    drop(provider);
    f.stop().await;
}

#[tokio::test]
async fn without_a_provider_the_login_routes_are_not_found() {
    let f = Fixture::start(|_| {}).await;
    let mut browser = Browser::new();
    let answer = browser
        .send(
            Method::GET,
            &format!("http://{}/auth/login", f.api),
            None,
            None,
        )
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    f.stop().await;
}
