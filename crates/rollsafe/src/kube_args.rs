//! Connection and identity options shared by the commands that talk to Kubernetes directly.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_kube::{Connection, Impersonation, RestartEngine, read_secret_metadata};

/// `--kubeconfig`, `--context`, `--as`, `--as-group` and `-n`, each also an environment variable
/// (`ROLLSAFE_KUBECONFIG`, `ROLLSAFE_CONTEXT`, `ROLLSAFE_AS`, `ROLLSAFE_AS_GROUP`,
/// `ROLLSAFE_NAMESPACE`); `KUBECONFIG` is still read by the client when no path is given.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct KubeArgs {
    #[command(flatten)]
    pub connection: ConnectionArgs,
    /// The namespace (default: the context's namespace).
    #[arg(
        short = 'n',
        long,
        value_name = "NAMESPACE",
        env = "ROLLSAFE_NAMESPACE"
    )]
    pub namespace: Option<String>,
}

/// The connection and identity half of [`KubeArgs`], for a command whose `-n` means something
/// else (several namespaces): `--kubeconfig`, `--context`, `--as` and `--as-group`, with the
/// same environment variables.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ConnectionArgs {
    /// The kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// ServiceAccount).
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME", env = "ROLLSAFE_CONTEXT")]
    pub context: Option<String>,
    /// Impersonate this user on every request.
    #[arg(long = "as", value_name = "USER", env = "ROLLSAFE_AS")]
    pub as_user: Option<String>,
    /// Impersonate this group on every request (repeatable, or comma-separated in the
    /// environment; needs --as).
    #[arg(
        long = "as-group",
        value_name = "GROUP",
        requires = "as_user",
        env = "ROLLSAFE_AS_GROUP",
        value_delimiter = ','
    )]
    pub as_group: Vec<String>,
}

impl ConnectionArgs {
    /// A connection from the options.
    pub(crate) async fn connect(&self) -> anyhow::Result<Connection> {
        Connection::from_options(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .context("cannot connect to Kubernetes")
    }

    /// The identity to impersonate, if `--as` was given.
    pub(crate) fn identity(&self) -> anyhow::Result<Option<Impersonation>> {
        match &self.as_user {
            Some(user) => Impersonation::new(user.clone(), self.as_group.clone())
                .map(Some)
                .context("invalid --as/--as-group"),
            None => Ok(None),
        }
    }
}

impl KubeArgs {
    /// A connection from the options.
    pub(crate) async fn connect(&self) -> anyhow::Result<Connection> {
        self.connection.connect().await
    }

    /// The identity to impersonate, if `--as` was given.
    pub(crate) fn identity(&self) -> anyhow::Result<Option<Impersonation>> {
        self.connection.identity()
    }

    /// The kubeconfig context's namespace (when neither `-n` nor `NAMESPACE/` names one).
    pub(crate) fn context_namespace(&self, connection: &Connection) -> anyhow::Result<Namespace> {
        let namespace = connection.default_namespace();
        namespace.parse().map_err(|_| {
            anyhow::anyhow!(
                "invalid namespace {namespace:?} in the kubeconfig context: a namespace must be a \
                 lowercase RFC 1123 label"
            )
        })
    }
}

/// What a command that talks to Kubernetes directly works with, once connected: the
/// connection, the namespace it acts in, and a client acting as `--as` (or as the kubeconfig's
/// identity).
pub(crate) struct Session {
    /// The connection (its pool; [`Session::client`] acts as the identity).
    pub connection: Connection,
    /// The namespace: the command's own (`NAMESPACE/NAME`, `-n`), else the context's.
    pub namespace: Namespace,
    /// The identity impersonated, if `--as` was given.
    pub identity: Option<Impersonation>,
    /// A client acting as [`Session::identity`].
    pub client: kube::Client,
}

impl KubeArgs {
    /// The prologue of every command that talks to Kubernetes directly: the identity (`--as`),
    /// the connection, and the namespace — `namespace` when the command resolved one, else the
    /// kubeconfig context's.
    pub(crate) async fn session(&self, namespace: Option<Namespace>) -> anyhow::Result<Session> {
        let identity = self.identity()?;
        let connection = self.connect().await?;
        let namespace = match namespace {
            Some(namespace) => namespace,
            None => self.context_namespace(&connection)?,
        };
        let client = connection.client(identity.as_ref());
        Ok(Session {
            connection,
            namespace,
            identity,
            client,
        })
    }
}

impl Session {
    /// The restart engine on this connection.
    pub(crate) fn engine(&self) -> RestartEngine {
        RestartEngine::new(&self.connection)
    }

    /// The preflight of the commands that act for a Secret: it must exist and be readable by
    /// the identity (a missing namespace reads as a missing Secret). An error here is exit 1.
    /// Its annotations (its metadata is all that is read).
    pub(crate) async fn read_secret(
        &self,
        engine: &RestartEngine,
        secret: &SecretName,
    ) -> anyhow::Result<BTreeMap<String, String>> {
        let namespace = &self.namespace;
        match read_secret_metadata(&self.client, namespace, secret, engine.timeouts().get).await {
            Ok(Some(metadata)) => Ok(metadata.annotations.unwrap_or_default()),
            Ok(None) => bail!("Secret \"{secret}\" not found in namespace \"{namespace}\""),
            Err(error) if error.is_forbidden() => {
                bail!("not allowed to read Secret \"{secret}\" in namespace \"{namespace}\"")
            }
            Err(error) => {
                bail!("cannot read Secret \"{secret}\" in namespace \"{namespace}\": {error}")
            }
        }
    }
}
