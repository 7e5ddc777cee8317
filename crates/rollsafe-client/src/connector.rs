//! The one outbound HTTP connector of rollsafe's HTTP clients — the typed API client here and
//! the server's calls to an OpenID provider: HTTP/1.1, `http://` and `https://`, servers
//! verified against the platform's roots. A platform without roots gets an empty store, so
//! `http://` still works and every `https://` server fails verification, as it should; rollsafe
//! never falls back to a bundled list nobody configured.

use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;

/// A connector for `http://` and `https://` (HTTP/1.1), verifying against the platform's roots.
pub fn https_connector() -> HttpsConnector<HttpConnector> {
    let builder = match HttpsConnectorBuilder::new().with_native_roots() {
        Ok(builder) => builder,
        Err(_) => HttpsConnectorBuilder::new().with_tls_config(without_roots()),
    };
    builder.https_or_http().enable_http1().build()
}

/// A TLS configuration that trusts no server.
fn without_roots() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        // The ring provider supports the default versions; the process default is the same
        // provider, should it ever not.
        .unwrap_or_else(|_| rustls::ClientConfig::builder())
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth()
}
