//! The one outbound HTTP connector of rollsafe's HTTP clients — the typed API client, the
//! server's calls to an OpenID provider and the webhook notifier: HTTP/1.1, `http://` and
//! `https://`, servers verified against the platform's roots with the ring provider. A platform
//! without roots gets an empty store, so `http://` still works and every `https://` server
//! fails verification, as it should; rollsafe never falls back to a bundled list nobody
//! configured. The caller learns which ([`Roots`]) and decides whether to say so.

#![warn(missing_docs, unreachable_pub)]

use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::connect::HttpConnector;

/// Where the connector's trusted roots came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roots {
    /// The platform's root certificates.
    Platform,
    /// None were found: the store is empty and every `https://` server fails verification.
    Missing,
}

/// A connector for `http://` and `https://` (HTTP/1.1), verifying against the platform's roots,
/// and where those roots came from.
pub fn https_connector() -> (HttpsConnector<HttpConnector>, Roots) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let (builder, roots) =
        match HttpsConnectorBuilder::new().with_provider_and_native_roots(provider) {
            Ok(builder) => (builder, Roots::Platform),
            Err(_) => (
                HttpsConnectorBuilder::new().with_tls_config(without_roots()),
                Roots::Missing,
            ),
        };
    (builder.https_or_http().enable_http1().build(), roots)
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
