//! npm's `oidc-provider`, a certified OpenID Provider, started by the tests with
//! `tests/oidc/provider.mjs`.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use rollsafe_server::oidc::OidcSettings;

/// A redirect URI nothing listens on: a test that reads the provider's redirect instead of
/// following it registers this one.
pub const REDIRECT: &str = "http://127.0.0.1:9/auth/callback";

pub fn provider_module() -> Option<PathBuf> {
    let path = std::env::var_os("ROLLSAFE_OIDC_PROVIDER")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../.ci/node/node_modules/oidc-provider/lib/index.js")
        });
    path.exists().then_some(path)
}

/// An `oidc-provider` process, stopped on drop.
pub struct Provider {
    child: Child,
    pub issuer: String,
    /// Kept open: the provider writes to its stdout, and a closed pipe would kill it.
    _stdout: BufReader<std::process::ChildStdout>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn start_provider(
    module: &Path,
    port: u16,
    redirect: &str,
    key_id: &str,
    clock_offset: i64,
) -> Provider {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc/provider.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .env("OIDC_PROVIDER_MODULE", module)
        .env("PORT", port.to_string())
        .env("REDIRECT_URIS", format!("[\"{redirect}\"]"))
        .env("KEY_ID", key_id)
        .env("CLOCK_OFFSET_SECONDS", clock_offset.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdout.read_line(&mut line).unwrap();
    let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
    Provider {
        child,
        issuer: ready["issuer"].as_str().unwrap().to_owned(),
        _stdout: stdout,
    }
}

/// rollsafe's settings for the test provider.
pub fn settings(issuer: &str, redirect: &str) -> OidcSettings {
    OidcSettings {
        issuer: openidconnect::IssuerUrl::new(issuer.to_owned()).unwrap(),
        client_id: openidconnect::ClientId::new("rollsafe".into()),
        client_secret: Some(openidconnect::ClientSecret::new(
            "rollsafe-client-secret".into(),
        )),
        redirect: openidconnect::RedirectUrl::new(redirect.into()).unwrap(),
        scopes: vec!["email".into(), "groups".into()],
        email_claim: "email".into(),
        groups_claim: "groups".into(),
    }
}

pub fn skip_without_provider() -> Option<PathBuf> {
    let module = provider_module();
    if module.is_none() || Command::new("node").arg("--version").output().is_err() {
        assert!(
            std::env::var_os("CI").is_none(),
            "oidc-provider or Node.js is missing; .ci/run installs them"
        );
        eprintln!("skipped: no oidc-provider (npm install oidc-provider in .ci/node) or no node");
        return None;
    }
    module
}
