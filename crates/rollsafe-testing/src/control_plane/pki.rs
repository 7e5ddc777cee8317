//! The control plane's own PKI and identities: a CA, the API server's serving certificate, the
//! service-account signing key, and a static token per identity (the admin in
//! `system:masters`, and the test users), each written with a kubeconfig of its own.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use serde_json::json;

use super::ControlPlaneError;

/// A user of the control plane and the groups its token authenticates it in.
#[derive(Debug, Clone)]
pub struct User {
    /// The user name.
    pub name: &'static str,
    /// Its groups.
    pub groups: &'static [&'static str],
}

/// The admin: `system:masters`, used by the control plane's own components and the harness.
pub const ADMIN: User = User {
    name: "rollsafe-admin",
    groups: &["system:masters"],
};

/// The test users every control plane has, as the emulator's suites have them: alice in
/// `devs`, bob in `ops`.
pub const TEST_USERS: [User; 2] = [
    User {
        name: "alice",
        groups: &["devs"],
    },
    User {
        name: "bob",
        groups: &["ops"],
    },
];

/// The files written into the control plane's `pki` folder.
pub(super) struct Pki {
    pub(super) ca: PathBuf,
    pub(super) serving_cert: PathBuf,
    pub(super) serving_key: PathBuf,
    pub(super) service_account_key: PathBuf,
    pub(super) service_account_public_key: PathBuf,
    pub(super) token_file: PathBuf,
    /// Each user's token, by name (the admin's included).
    pub(super) tokens: BTreeMap<&'static str, String>,
}

fn pki_error(what: &str) -> ControlPlaneError {
    ControlPlaneError::Setup {
        reason: format!("cannot create {what}"),
    }
}

/// A random token: 32 hex digits from the operating system's generator.
fn token() -> Result<String, ControlPlaneError> {
    let mut bytes = [0_u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|_| pki_error("a token"))?;
    Ok(bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    }))
}

impl Pki {
    /// Writes the CA, the serving certificate and key, the service-account key and the token
    /// file under `dir`.
    pub(super) fn write(dir: &Path) -> Result<Self, ControlPlaneError> {
        std::fs::create_dir_all(dir).map_err(|_| pki_error("the pki folder"))?;
        let ca_key = KeyPair::generate().map_err(|_| pki_error("the CA key"))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())
            .map_err(|_| pki_error("the CA certificate"))?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "rollsafe-test-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params
            .self_signed(&ca_key)
            .map_err(|_| pki_error("the CA certificate"))?;
        let issuer = Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate().map_err(|_| pki_error("the serving key"))?;
        let mut serving = CertificateParams::new(vec![
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])
        .map_err(|_| pki_error("the serving certificate"))?;
        serving
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        serving
            .subject_alt_names
            .push(SanType::IpAddress([10, 0, 0, 1].into()));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving
            .signed_by(&serving_key, &issuer)
            .map_err(|_| pki_error("the serving certificate"))?;
        let service_account = KeyPair::generate().map_err(|_| pki_error("the SA key"))?;

        let mut tokens = BTreeMap::new();
        let mut csv = String::new();
        for user in std::iter::once(&ADMIN).chain(TEST_USERS.iter()) {
            let t = token()?;
            let _ = writeln!(
                csv,
                "{t},{name},uid-{name},\"{groups}\"",
                name = user.name,
                groups = user.groups.join(",")
            );
            tokens.insert(user.name, t);
        }

        let pki = Self {
            ca: dir.join("ca.crt"),
            serving_cert: dir.join("apiserver.crt"),
            serving_key: dir.join("apiserver.key"),
            service_account_key: dir.join("sa.key"),
            service_account_public_key: dir.join("sa.pub"),
            token_file: dir.join("tokens.csv"),
            tokens,
        };
        let files = [
            (&pki.ca, ca_cert.pem()),
            (&pki.serving_cert, serving_cert.pem()),
            (&pki.serving_key, serving_key.serialize_pem()),
            (&pki.service_account_key, service_account.serialize_pem()),
            (
                &pki.service_account_public_key,
                service_account.public_key_pem(),
            ),
            (&pki.token_file, csv),
        ];
        for (path, text) in files {
            std::fs::write(path, text).map_err(|_| pki_error("a pki file"))?;
        }
        Ok(pki)
    }

    /// Writes a kubeconfig at `path`, against `server`, with a context and a user entry of the
    /// same name for each `(context, user)` of `contexts`; the first is the current context.
    pub(super) fn write_kubeconfig(
        &self,
        path: &Path,
        server: &str,
        contexts: &[(&str, &str)],
    ) -> Result<(), ControlPlaneError> {
        let users: Vec<&str> = contexts.iter().map(|(context, _)| *context).collect();
        let entries: Vec<_> = contexts
            .iter()
            .map(|(context, user)| json!({"name": context, "user": {"token": self.tokens.get(user).cloned().unwrap_or_default()}}))
            .collect();
        let contexts: Vec<_> = users
            .iter()
            .map(|u| json!({"name": u, "context": {"cluster": "rollsafe", "user": u, "namespace": "default"}}))
            .collect();
        let config = json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "rollsafe", "cluster": {
                "server": server, "certificate-authority": self.ca}}],
            "contexts": contexts,
            "users": entries,
            "current-context": users.first().copied().unwrap_or_default(),
        });
        let text = serde_json::to_string_pretty(&config).map_err(|_| pki_error("a kubeconfig"))?;
        std::fs::write(path, text).map_err(|_| pki_error("a kubeconfig"))
    }
}
