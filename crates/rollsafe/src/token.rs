//! `rollsafe token`: mint a session JWT for scripts and tests.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use rollsafe_server::config::{MIN_SESSION_SECRET_LEN, SessionSecret};
use rollsafe_server::session::{self, NewSession};

/// Print a session token signed with SESSION_SECRET.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The user's email (lower-cased in the token).
    #[arg(long)]
    email: String,
    /// Subject; the email when absent.
    #[arg(long)]
    sub: Option<String>,
    /// Display name; the email when absent.
    #[arg(long)]
    name: Option<String>,
    /// A group; repeatable.
    #[arg(long = "group")]
    groups: Vec<String>,
    /// Lifetime, e.g. `30m`, `8h`, `3600s`, `1h30m`.
    #[arg(long, default_value = "8h", value_parser = parse_ttl)]
    ttl: Duration,
    /// The signing key.
    #[arg(long, env = "SESSION_SECRET", hide_env_values = true)]
    session_secret: String,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.session_secret.len() < MIN_SESSION_SECRET_LEN {
        bail!("SESSION_SECRET: must be at least {MIN_SESSION_SECRET_LEN} bytes");
    }
    if args.email.trim().is_empty() {
        bail!("--email must not be empty");
    }
    let token = session::mint(
        &NewSession {
            sub: args.sub,
            email: args.email,
            name: args.name,
            groups: args.groups,
            ttl: args.ttl,
        },
        &SessionSecret::new(args.session_secret.into_bytes()),
        session::now(),
    )
    .context("cannot sign the token")?;
    println!("{token}");
    Ok(ExitCode::SUCCESS)
}

/// The duration format of every flag (`SESSION_MAX_AGE` too).
fn parse_ttl(text: &str) -> Result<Duration, String> {
    rollsafe_server::config::parse_duration(text)
        .map_err(|_| format!("{text:?} is not a duration (e.g. 30m, 8h, 1h30m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_parsing() {
        for (text, seconds) in [
            ("90", 90),
            ("90s", 90),
            ("15m", 900),
            ("8h", 28_800),
            ("1h30m", 5_400),
            ("1d", 86_400),
        ] {
            assert_eq!(parse_ttl(text), Ok(Duration::from_secs(seconds)), "{text}");
        }
        for bad in ["", "0", "h", "5x", "-1h", "1.5h"] {
            assert!(parse_ttl(bad).is_err(), "{bad}");
        }
    }
}
