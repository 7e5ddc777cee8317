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

/// How long the provider may take to print its line. A start that hangs (seen once in a CI
/// run from nothing: the process alive and idle, never listening) is killed and tried once more,
/// so that it fails the test instead of stalling the whole run.
const PROVIDER_START: std::time::Duration = std::time::Duration::from_secs(60);

pub fn start_provider(
    module: &Path,
    port: u16,
    redirect: &str,
    key_id: &str,
    clock_offset: i64,
) -> Provider {
    for attempt in 1..=2 {
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
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sent, received) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let read = stdout.read_line(&mut line).map(|_| line);
            let _ = sent.send((read, stdout));
        });
        match received.recv_timeout(PROVIDER_START) {
            Ok((Ok(line), stdout)) if !line.trim().is_empty() => {
                let ready: serde_json::Value = serde_json::from_str(&line).unwrap();
                return Provider {
                    child,
                    issuer: ready["issuer"].as_str().unwrap().to_owned(),
                    _stdout: stdout,
                };
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!("the OIDC provider did not start (attempt {attempt})");
            }
        }
    }
    panic!("the OIDC provider did not start within {PROVIDER_START:?}, twice");
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
