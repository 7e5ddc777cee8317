//! `rollsafe restart`: call a server's Restart Consumers API with the typed client.
//!
//! Prints the result JSON and exits 0 for `requested`/`no_targets`, 2 for `partial`, 3 for
//! `failed`, and 1 (message on stderr) for an `{ error }` response or no response.

use std::process::ExitCode;

use anyhow::Context as _;
use rollsafe_client::{Client, ClientError, Token};
use rollsafe_core::name::{Namespace, SecretName};

use crate::process;
use crate::restart_exit::exit_code;

/// Request a rollout of every workload consuming a Secret, through a rollsafe server.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The server's base URL, e.g. `http://127.0.0.1:8080`.
    #[arg(long, env = "ROLLSAFE_SERVER")]
    server: String,
    /// A session token (see `rollsafe token`).
    #[arg(long, env = "ROLLSAFE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The Secret, as `NAMESPACE/NAME`.
    secret: String,
}

/// `NAMESPACE/NAME`, both parts valid names.
#[derive(Debug, Clone)]
struct SecretRef {
    namespace: Namespace,
    name: SecretName,
}

impl std::str::FromStr for SecretRef {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let (namespace, name) = value
            .split_once('/')
            .ok_or("the Secret must be given as NAMESPACE/NAME")?;
        Ok(Self {
            namespace: namespace.parse().map_err(|e| format!("{e}"))?,
            name: name.parse().map_err(|e| format!("{e}"))?,
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // Parsed here rather than by clap: a usage error exits 2, which this command reserves for
    // `partial`.
    let SecretRef { namespace, name } = &args.secret.parse().map_err(anyhow::Error::msg)?;
    let client =
        Client::new(&args.server, args.token.map(Token::new)).context("invalid --server URL")?;
    let outcome = process::runtime()?.block_on(client.restart_consumers(namespace, name));
    match outcome {
        Ok(report) => {
            println!("{}", serde_json::to_string_pretty(&report.result)?);
            Ok(exit_code(report.status()))
        }
        Err(ClientError::Api(error)) => {
            eprintln!("rollsafe: {error}");
            Ok(ExitCode::FAILURE)
        }
        Err(error) => Err(error.into()),
    }
}
