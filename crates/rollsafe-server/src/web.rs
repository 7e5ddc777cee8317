//! The web page: a framework-free page served by the API server, its assets embedded in the
//! binary (no CDN, no build step). It signs a person in, lists the Secrets in scope, shows a
//! Secret's consumers with their reference paths and whether each rolls now, and restarts them
//! after a confirmation, showing the typed report — `requested`, `partial`, `failed` — or the
//! `{ error }` of a refusal; then it follows each requested workload's rollout by polling the
//! rollout view until every one is final (or 15 minutes pass).
//!
//! Every response of the server carries [`CONTENT_SECURITY_POLICY`] (no inline script or style,
//! nothing from another origin, no framing) with `X-Content-Type-Options: nosniff` and
//! `Referrer-Policy: no-referrer`; everything is `Cache-Control: no-store`.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

/// The page.
const INDEX_HTML: &str = include_str!("../web/index.html");
/// Its script.
const APP_JS: &str = include_str!("../web/app.js");
/// Its style sheet.
const APP_CSS: &str = include_str!("../web/app.css");

/// The Content-Security-Policy of every response.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// `GET /`: the page.
pub(crate) async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /app.js`: its script.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// `GET /app.css`: its style sheet.
pub(crate) async fn style() -> Response {
    asset("text/css; charset=utf-8", APP_CSS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// Adds the security headers every response carries.
pub fn secure(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_no_inline_script_or_style_and_loads_only_its_own_assets() {
        assert!(!INDEX_HTML.contains("<script>"), "no inline script");
        assert!(!INDEX_HTML.contains("style="), "no inline style");
        assert!(!INDEX_HTML.contains("<style"), "no inline style sheet");
        assert!(!INDEX_HTML.contains("onclick"), "no inline handlers");
        for tag in INDEX_HTML
            .split('<')
            .filter(|t| t.starts_with("script") || t.starts_with("link"))
        {
            assert!(!tag.contains("http"), "nothing from another origin: {tag}");
        }
        assert!(INDEX_HTML.contains(r#"<script src="/app.js" defer></script>"#));
        assert!(
            !APP_JS.contains("innerHTML"),
            "text is never parsed as HTML"
        );
    }
}
