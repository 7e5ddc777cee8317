//! One shared connection pool to the API server, and per-caller clients over it.
//!
//! A [`Connection`] owns one hyper client (one pool of TCP/TLS connections) with the server's
//! own credentials applied. [`Connection::client`] wraps that pool in a thin per-identity layer
//! that appends `Impersonate-User` and one `Impersonate-Group` per group to every request, and
//! hands it to [`kube::Client::new`]. Building a client per caller is cheap; the pool is shared.
//!
//! No layer of this stack retries: kube's default `RetryPolicy` is never installed, and the
//! hyper pool only re-sends a request it had not started to write. Every request is sent at
//! most once. Timeouts are applied per call by the callers ([`crate::Timeouts`]); connecting
//! has its own limit, [`CONNECT_TIMEOUT`].
//!
//! In a pod, [`Connection::in_cluster`] builds the configuration itself from
//! `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT` and the ServiceAccount directory
//! ([`service_account_dir`]: `ROLLSAFE_SERVICEACCOUNT_DIR`, else the kubelet's mount point), so
//! tests can point it at files of their own. The token file is re-read whenever it changes on
//! disk (bound tokens are rotated by the kubelet well before their hourly expiry); the CA file
//! is re-read by the TLS verifier.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use std::time::SystemTime;

use http::{HeaderName, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use thiserror::Error;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceBuilder};

/// How long opening a TCP connection to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the kubelet mounts a pod's ServiceAccount token, CA bundle and namespace.
pub const DEFAULT_SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The environment variable that moves the ServiceAccount directory (tests, unusual mounts).
pub const SERVICE_ACCOUNT_DIR_ENV: &str = "ROLLSAFE_SERVICEACCOUNT_DIR";
/// The API server's address in a pod, as the kubelet sets it.
pub const SERVICE_HOST_ENV: &str = "KUBERNETES_SERVICE_HOST";
/// The API server's port in a pod, as the kubelet sets it.
pub const SERVICE_PORT_ENV: &str = "KUBERNETES_SERVICE_PORT";

/// The ServiceAccount directory: `ROLLSAFE_SERVICEACCOUNT_DIR` when set and not empty, else
/// [`DEFAULT_SERVICE_ACCOUNT_DIR`]. It holds `token`, `ca.crt` and `namespace`.
pub fn service_account_dir() -> PathBuf {
    match std::env::var_os(SERVICE_ACCOUNT_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(DEFAULT_SERVICE_ACCOUNT_DIR),
    }
}

/// The header naming the impersonated user.
pub const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");
/// The header naming one impersonated group; sent once per group.
pub const IMPERSONATE_GROUP: HeaderName = HeaderName::from_static("impersonate-group");

/// Why a [`Connection`] could not be built.
#[derive(Debug, Error)]
pub enum ConnectionError {
    /// The kubeconfig could not be read or does not describe a usable context.
    #[error("cannot load the kubeconfig")]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    /// Neither a kubeconfig nor an in-cluster configuration was found. The source is the
    /// in-cluster failure; the kubeconfig's is kept beside it.
    #[error("cannot find a Kubernetes configuration (kubeconfig or in-cluster)")]
    Infer {
        /// Why no kubeconfig could be loaded.
        kubeconfig: KubeconfigError,
        /// Why the in-cluster configuration could not be built.
        #[source]
        in_cluster: InClusterError,
    },
    /// The in-cluster configuration could not be built.
    #[error("cannot use the in-cluster ServiceAccount configuration")]
    InCluster(#[source] InClusterError),
    /// The configuration's credentials or TLS settings could not be used.
    #[error("cannot set up the Kubernetes client")]
    Client(#[source] kube::Error),
    /// The kubeconfig names an impersonated identity that cannot be sent as headers.
    #[error("the kubeconfig's impersonation settings are invalid")]
    Identity(#[source] IdentityError),
}

impl ConnectionError {
    /// A stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            ConnectionError::Kubeconfig(_) => "kubeconfig",
            ConnectionError::Infer { .. } => "no_configuration",
            ConnectionError::InCluster(error) => error.code(),
            ConnectionError::Client(_) => "client",
            ConnectionError::Identity(_) => "identity",
        }
    }
}

/// Why the in-cluster configuration could not be built. Messages name the file or variable,
/// never its content.
#[derive(Debug, Error)]
pub enum InClusterError {
    /// `KUBERNETES_SERVICE_HOST` or `KUBERNETES_SERVICE_PORT` is not set.
    #[error("{0} is not set: not running in a pod")]
    MissingEnv(&'static str),
    /// `KUBERNETES_SERVICE_PORT` is not a port number, or the host makes no URL.
    #[error("KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT do not form an API server URL")]
    InvalidAddress,
    /// A file of the ServiceAccount directory could not be read.
    #[error("cannot read the ServiceAccount file {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The token file is empty or cannot be sent as a header.
    #[error("the ServiceAccount token file {0} holds no usable token")]
    InvalidToken(PathBuf),
    /// The CA file holds no PEM certificate.
    #[error("the ServiceAccount CA file {0} holds no PEM certificate")]
    InvalidCa(PathBuf),
    /// The namespace file is empty.
    #[error("the ServiceAccount namespace file {0} is empty")]
    EmptyNamespace(PathBuf),
}

impl InClusterError {
    /// A stable code for logs and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            InClusterError::MissingEnv(_) => "in_cluster_env",
            InClusterError::InvalidAddress => "in_cluster_address",
            InClusterError::Read { .. } => "service_account_read",
            InClusterError::InvalidToken(_) => "service_account_token",
            InClusterError::InvalidCa(_) => "service_account_ca",
            InClusterError::EmptyNamespace(_) => "service_account_namespace",
        }
    }
}

/// Why an [`Impersonation`] is invalid.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IdentityError {
    /// The user name is empty.
    #[error("the impersonated user name is empty")]
    EmptyUser,
    /// A group name is empty.
    #[error("an impersonated group name is empty")]
    EmptyGroup,
    /// A user or group name contains characters that cannot be sent in an HTTP header.
    #[error("an impersonated user or group name contains characters not allowed in a header")]
    InvalidHeaderValue,
}

/// The identity a caller acts as: `Impersonate-User` and one `Impersonate-Group` per group.
#[derive(Clone, PartialEq, Eq)]
pub struct Impersonation {
    user: String,
    groups: Vec<String>,
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl Impersonation {
    /// An identity to impersonate. Groups keep their order and duplicates; each becomes its own
    /// header.
    pub fn new<G, S>(user: impl Into<String>, groups: G) -> Result<Self, IdentityError>
    where
        G: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let user = user.into();
        let groups: Vec<String> = groups.into_iter().map(Into::into).collect();
        if user.is_empty() {
            return Err(IdentityError::EmptyUser);
        }
        if groups.iter().any(String::is_empty) {
            return Err(IdentityError::EmptyGroup);
        }
        let value =
            |text: &str| HeaderValue::from_str(text).map_err(|_| IdentityError::InvalidHeaderValue);
        let mut headers = vec![(IMPERSONATE_USER, value(&user)?)];
        for group in &groups {
            headers.push((IMPERSONATE_GROUP, value(group)?));
        }
        Ok(Self {
            user,
            groups,
            headers,
        })
    }

    /// The impersonated user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// The impersonated groups, in order.
    pub fn groups(&self) -> &[String] {
        &self.groups
    }
}

impl fmt::Debug for Impersonation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Impersonation")
            .field("user", &self.user)
            .field("groups", &self.groups)
            .finish()
    }
}

/// The shared, credentialed transport: base URI and server credentials over one hyper pool.
type SharedService = BoxCloneSyncService<Request<Body>, Response<Incoming>, BoxError>;

/// One pool of connections to one API server, with the server's own credentials.
///
/// Cheap to clone; clones share the pool. `Debug` prints the cluster URL only, never
/// credentials.
#[derive(Clone)]
pub struct Connection {
    service: SharedService,
    cluster_url: http::Uri,
    default_namespace: String,
    /// Headers every request carries (kubeconfig extras).
    base_headers: Arc<Vec<(HeaderName, HeaderValue)>>,
    /// The kubeconfig's own impersonation (`as`, `as-groups`), used when a caller names none.
    default_identity: Option<Impersonation>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("cluster_url", &self.cluster_url)
            .field("default_namespace", &self.default_namespace)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Loads a kubeconfig: `path` when given (else `KUBECONFIG` or `~/.kube/config`), and the
    /// named `context` (else the current context).
    pub async fn from_kubeconfig(
        path: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Self, ConnectionError> {
        let options = KubeConfigOptions {
            context: context.map(str::to_owned),
            cluster: None,
            user: None,
        };
        let config = match path {
            Some(path) => {
                let kubeconfig =
                    Kubeconfig::read_from(path).map_err(ConnectionError::Kubeconfig)?;
                kube::Config::from_custom_kubeconfig(kubeconfig, &options).await
            }
            None => kube::Config::from_kubeconfig(&options).await,
        }
        .map_err(ConnectionError::Kubeconfig)?;
        Self::from_config(config)
    }

    /// The configuration a command line names: the kubeconfig `path` and/or `context` when
    /// either is given, else [`Connection::infer`].
    pub async fn from_options(
        path: Option<&Path>,
        context: Option<&str>,
    ) -> Result<Self, ConnectionError> {
        if path.is_some() || context.is_some() {
            Self::from_kubeconfig(path, context).await
        } else {
            Self::infer().await
        }
    }

    /// The local kubeconfig (`KUBECONFIG`, else `~/.kube/config`) if there is one, else the
    /// in-cluster ServiceAccount ([`Connection::in_cluster`] from the environment and
    /// [`service_account_dir`]) — the order of `kubectl` and of every client-go program.
    pub async fn infer() -> Result<Self, ConnectionError> {
        match kube::Config::from_kubeconfig(&KubeConfigOptions::default()).await {
            Ok(config) => Self::from_config(config),
            Err(kubeconfig) => match InCluster::from_env(&service_account_dir()) {
                Ok(in_cluster) => Self::in_cluster(&in_cluster),
                Err(in_cluster) => Err(ConnectionError::Infer {
                    kubeconfig,
                    in_cluster,
                }),
            },
        }
    }

    /// A connection as a pod makes it: to `https://<host>:<port>`, trusting the
    /// ServiceAccount's `ca.crt` (re-read by the verifier when it rotates), authenticated by
    /// its `token` file (re-read whenever the file changes), in the namespace its `namespace`
    /// file names.
    pub fn in_cluster(in_cluster: &InCluster) -> Result<Self, ConnectionError> {
        let (config, token) = in_cluster.config().map_err(ConnectionError::InCluster)?;
        Self::build(config, Some(token))
    }

    /// A connection from a kube `Config`. Its retry setting is ignored: this stack never
    /// retries.
    pub fn from_config(config: kube::Config) -> Result<Self, ConnectionError> {
        Self::build(config, None)
    }

    fn build(config: kube::Config, token: Option<TokenFile>) -> Result<Self, ConnectionError> {
        let mut connector = HttpConnector::new();
        connector.enforce_http(false);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        connector.set_nodelay(true);
        let connector = config
            .rustls_https_connector_with_connector(connector)
            .map_err(ConnectionError::Client)?;
        let http: hyper_util::client::legacy::Client<_, Body> =
            hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build(connector);
        let auth = config.auth_layer().map_err(ConnectionError::Client)?;
        let service = ServiceBuilder::new()
            .layer(config.base_uri_layer())
            .option_layer(auth)
            .option_layer(token.map(|file| TokenFileLayer {
                file: Arc::new(file),
            }))
            .map_err(BoxError::from)
            .service(http);
        let default_identity = match &config.auth_info.impersonate {
            Some(user) => Some(
                Impersonation::new(
                    user.clone(),
                    config
                        .auth_info
                        .impersonate_groups
                        .clone()
                        .unwrap_or_default(),
                )
                .map_err(ConnectionError::Identity)?,
            ),
            None => None,
        };
        Ok(Self {
            service: BoxCloneSyncService::new(service),
            cluster_url: config.cluster_url.clone(),
            default_namespace: config.default_namespace.clone(),
            base_headers: Arc::new(config.headers.clone()),
            default_identity,
        })
    }

    /// The API server's URL.
    pub fn cluster_url(&self) -> &http::Uri {
        &self.cluster_url
    }

    /// The namespace of the configuration's context (or the ServiceAccount's namespace).
    pub fn default_namespace(&self) -> &str {
        &self.default_namespace
    }

    /// The identity the kubeconfig itself impersonates, if any.
    pub fn default_identity(&self) -> Option<&Impersonation> {
        self.default_identity.as_ref()
    }

    /// A kube client acting as `identity` (or, with `None`, as the configuration's own
    /// identity), over the shared pool. Every request it sends carries the identity headers.
    /// It never retries.
    pub fn client(&self, identity: Option<&Impersonation>) -> kube::Client {
        let mut headers = Vec::clone(&self.base_headers);
        if let Some(identity) = identity.or(self.default_identity.as_ref()) {
            headers.extend(identity.headers.iter().cloned());
        }
        let layer = HeadersLayer {
            headers: Arc::new(headers),
        };
        let service = ServiceBuilder::new()
            .layer(layer)
            .service(self.service.clone());
        kube::Client::new(service, self.default_namespace.clone())
    }
}

/// The in-cluster settings: the API server's host and port and the ServiceAccount directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InCluster {
    host: String,
    port: u16,
    dir: PathBuf,
}

impl InCluster {
    /// Explicit settings (tests, or a caller that knows better than the environment).
    pub fn new(host: impl Into<String>, port: u16, dir: impl Into<PathBuf>) -> Self {
        Self {
            host: host.into(),
            port,
            dir: dir.into(),
        }
    }

    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` (both required, as client-go
    /// requires them), with the ServiceAccount files in `dir`.
    pub fn from_env(dir: &Path) -> Result<Self, InClusterError> {
        let host = std::env::var(SERVICE_HOST_ENV)
            .ok()
            .filter(|h| !h.trim().is_empty())
            .ok_or(InClusterError::MissingEnv(SERVICE_HOST_ENV))?;
        let port = std::env::var(SERVICE_PORT_ENV)
            .map_err(|_| InClusterError::MissingEnv(SERVICE_PORT_ENV))?
            .trim()
            .parse::<u16>()
            .map_err(|_| InClusterError::InvalidAddress)?;
        Ok(Self::new(host.trim(), port, dir))
    }

    /// The ServiceAccount directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The token file.
    pub fn token_path(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// The CA bundle.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The namespace file.
    pub fn namespace_path(&self) -> PathBuf {
        self.dir.join("namespace")
    }

    /// `https://host:port`, IPv6 addresses bracketed, as client-go writes it.
    pub fn url(&self) -> Result<http::Uri, InClusterError> {
        let authority = match self.host.parse::<std::net::IpAddr>() {
            Ok(ip) => std::net::SocketAddr::new(ip, self.port).to_string(),
            Err(_) => format!("{}:{}", self.host, self.port),
        };
        format!("https://{authority}")
            .parse()
            .map_err(|_| InClusterError::InvalidAddress)
    }

    /// The kube configuration without credentials, and the token file that supplies them.
    fn config(&self) -> Result<(kube::Config, TokenFile), InClusterError> {
        let read = |path: PathBuf| {
            std::fs::read(&path).map_err(|source| InClusterError::Read { path, source })
        };
        let ca_path = self.ca_path();
        let roots = CertificateDer::pem_slice_iter(&read(ca_path.clone())?)
            .map(|cert| cert.map(|cert| cert.to_vec()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| InClusterError::InvalidCa(ca_path.clone()))?;
        if roots.is_empty() {
            return Err(InClusterError::InvalidCa(ca_path));
        }
        let namespace_path = self.namespace_path();
        let namespace = String::from_utf8_lossy(&read(namespace_path.clone())?)
            .trim()
            .to_owned();
        if namespace.is_empty() {
            return Err(InClusterError::EmptyNamespace(namespace_path));
        }
        let token = TokenFile::open(self.token_path())?;
        let mut config = kube::Config::new(self.url()?);
        config.default_namespace = namespace;
        config.root_cert = Some(roots);
        config.root_cert_file = Some(ca_path);
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        Ok((config, token))
    }
}

/// A bearer token read from a file, re-read whenever the file's identity (inode, size or
/// modification time) changes — the kubelet replaces a projected token by swapping a symlink,
/// so every rotation is a new file. One `stat` per request; a failed or empty re-read keeps
/// the last good token (the file may be briefly absent during the swap), as client-go does.
struct TokenFile {
    path: PathBuf,
    state: Mutex<TokenState>,
}

struct TokenState {
    stamp: FileStamp,
    header: HeaderValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl FileStamp {
    fn of(path: &Path) -> std::io::Result<Self> {
        let metadata = std::fs::metadata(path)?;
        Ok(Self {
            modified: metadata.modified().ok(),
            len: metadata.len(),
            inode: inode(&metadata),
        })
    }
}

#[cfg(unix)]
fn inode(metadata: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(metadata)
}

#[cfg(not(unix))]
fn inode(_: &std::fs::Metadata) -> u64 {
    0
}

impl TokenFile {
    fn open(path: PathBuf) -> Result<Self, InClusterError> {
        let stamp = FileStamp::of(&path).map_err(|source| InClusterError::Read {
            path: path.clone(),
            source,
        })?;
        let header = read_bearer(&path)
            .map_err(|source| InClusterError::Read {
                path: path.clone(),
                source,
            })?
            .ok_or_else(|| InClusterError::InvalidToken(path.clone()))?;
        Ok(Self {
            path,
            state: Mutex::new(TokenState { stamp, header }),
        })
    }

    /// The `Authorization` value for the next request.
    fn header(&self) -> HeaderValue {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(stamp) = FileStamp::of(&self.path)
            && stamp != state.stamp
            && let Ok(Some(header)) = read_bearer(&self.path)
        {
            *state = TokenState { stamp, header };
        }
        state.header.clone()
    }
}

/// `Bearer <token>` from a token file, marked sensitive; `None` when the file holds no token
/// that can be sent.
fn read_bearer(path: &Path) -> std::io::Result<Option<HeaderValue>> {
    let text = std::fs::read_to_string(path)?;
    let token = text.trim();
    if token.is_empty() {
        return Ok(None);
    }
    Ok(HeaderValue::from_str(&format!("Bearer {token}"))
        .ok()
        .map(|mut value| {
            value.set_sensitive(true);
            value
        }))
}

/// Sets `Authorization` from a [`TokenFile`] on every request.
#[derive(Clone)]
struct TokenFileLayer {
    file: Arc<TokenFile>,
}

impl<S> Layer<S> for TokenFileLayer {
    type Service = TokenFileAuth<S>;

    fn layer(&self, inner: S) -> Self::Service {
        TokenFileAuth {
            inner,
            file: self.file.clone(),
        }
    }
}

#[derive(Clone)]
struct TokenFileAuth<S> {
    inner: S,
    file: Arc<TokenFile>,
}

impl<S, B> Service<Request<B>> for TokenFileAuth<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, self.file.header());
        self.inner.call(request)
    }
}

/// Appends a fixed list of headers to every request (repeated names stay repeated).
#[derive(Clone)]
struct HeadersLayer {
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl<S> Layer<S> for HeadersLayer {
    type Service = Headers<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Headers {
            inner,
            headers: self.headers.clone(),
        }
    }
}

#[derive(Clone)]
struct Headers<S> {
    inner: S,
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
}

impl<S, B> Service<Request<B>> for Headers<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        let headers = request.headers_mut();
        for (name, value) in self.headers.iter() {
            headers.append(name.clone(), value.clone());
        }
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_cluster_urls_are_client_go_shaped() {
        let url = |host: &str, port| InCluster::new(host, port, "/x").url().unwrap().to_string();
        assert_eq!(url("10.0.0.1", 443), "https://10.0.0.1:443/");
        assert_eq!(url("fd00::1", 6443), "https://[fd00::1]:6443/");
        assert_eq!(
            url("kubernetes.default.svc", 443),
            "https://kubernetes.default.svc:443/"
        );
        assert!(InCluster::new("bad host", 443, "/x").url().is_err());
    }

    #[test]
    fn token_file_is_reread_when_replaced_and_kept_when_unreadable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "first\n").unwrap();
        let file = TokenFile::open(path.clone()).unwrap();
        assert_eq!(file.header(), "Bearer first");
        assert!(file.header().is_sensitive());
        // The kubelet's atomic swap: a new file renamed over the old one.
        let next = dir.path().join("token.next");
        std::fs::write(&next, "second").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_eq!(file.header(), "Bearer second");
        // Briefly absent, then empty: the last good token stays.
        std::fs::remove_file(&path).unwrap();
        assert_eq!(file.header(), "Bearer second");
        std::fs::write(&path, "  \n").unwrap();
        assert_eq!(file.header(), "Bearer second");
        assert!(matches!(
            TokenFile::open(path.clone()),
            Err(InClusterError::InvalidToken(_))
        ));
    }

    #[test]
    fn impersonation_headers_keep_every_group() {
        let identity = Impersonation::new("ada@example.com", ["devs", "ops", "devs"]).unwrap();
        let names: Vec<_> = identity.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "impersonate-user",
                "impersonate-group",
                "impersonate-group",
                "impersonate-group"
            ]
        );
        assert_eq!(identity.groups(), ["devs", "ops", "devs"]);
    }

    #[test]
    fn impersonation_rejects_unsendable_names() {
        assert_eq!(
            Impersonation::new("", Vec::<String>::new()),
            Err(IdentityError::EmptyUser)
        );
        assert_eq!(
            Impersonation::new("a", [""]),
            Err(IdentityError::EmptyGroup)
        );
        assert_eq!(
            Impersonation::new("a\nb", Vec::<String>::new()),
            Err(IdentityError::InvalidHeaderValue)
        );
    }
}
