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

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderName, HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::{Body, ConfigExt};
use kube::config::{KubeConfigOptions, Kubeconfig};
use thiserror::Error;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceBuilder};

/// How long opening a TCP connection to the API server may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

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
    /// Neither a kubeconfig nor an in-cluster configuration was found.
    #[error("cannot find a Kubernetes configuration (kubeconfig or in-cluster)")]
    Infer(#[source] kube::config::InferConfigError),
    /// The configuration's credentials or TLS settings could not be used.
    #[error("cannot set up the Kubernetes client")]
    Client(#[source] kube::Error),
    /// The kubeconfig names an impersonated identity that cannot be sent as headers.
    #[error("the kubeconfig's impersonation settings are invalid")]
    Identity(#[source] IdentityError),
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

    /// The local kubeconfig if there is one, else the in-cluster ServiceAccount.
    pub async fn infer() -> Result<Self, ConnectionError> {
        let config = kube::Config::infer()
            .await
            .map_err(ConnectionError::Infer)?;
        Self::from_config(config)
    }

    /// A connection from a kube `Config`. Its retry setting is ignored: this stack never
    /// retries.
    pub fn from_config(config: kube::Config) -> Result<Self, ConnectionError> {
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
