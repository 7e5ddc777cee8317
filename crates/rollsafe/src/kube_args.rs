//! Connection and identity options shared by the commands that talk to Kubernetes directly.

use std::path::PathBuf;

use anyhow::Context as _;
use rollsafe_kube::{Connection, Impersonation};

/// `--kubeconfig`, `--context`, `--as`, `--as-group` and `-n`.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeArgs {
    /// The kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// ServiceAccount).
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// Impersonate this user on every request.
    #[arg(long = "as", value_name = "USER")]
    pub as_user: Option<String>,
    /// Impersonate this group on every request (repeatable; needs --as).
    #[arg(long = "as-group", value_name = "GROUP", requires = "as_user")]
    pub as_group: Vec<String>,
    /// The namespace (default: the context's namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: Option<String>,
}

impl KubeArgs {
    /// A connection from the options.
    pub async fn connect(&self) -> anyhow::Result<Connection> {
        Connection::from_options(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .context("cannot connect to Kubernetes")
    }

    /// The identity to impersonate, if `--as` was given.
    pub fn identity(&self) -> anyhow::Result<Option<Impersonation>> {
        match &self.as_user {
            Some(user) => Impersonation::new(user.clone(), self.as_group.clone())
                .map(Some)
                .context("invalid --as/--as-group"),
            None => Ok(None),
        }
    }

    /// The namespace: `-n`, else the connection's default.
    pub fn namespace(&self, connection: &Connection) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| connection.default_namespace().to_owned())
    }
}
