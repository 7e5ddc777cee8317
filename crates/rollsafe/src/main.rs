//! The `rollsafe` command line: a thin layer over the library crates.
//!
//! Each subcommand lives in its own module with an `Args` struct (clap derive; every setting and
//! connection option is also an environment variable) and a `run` function returning the
//! process exit code.

#![warn(unreachable_pub)]

/// mimalloc, not the system allocator: `rollsafe watch` keeps about a million small, long-lived
/// blocks (a cache entry per Secret, ConfigMap and workload) among short-lived decoding buffers.
/// glibc's allocator adds a header to each block and keeps the holes the decoding leaves
/// between them resident; mimalloc keeps blocks of one size together, without headers, and
/// gives emptied pages back (docs/watch.md, "The whole process at cluster scale").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod approve;
mod consumers;
mod emulator;
mod evict;
mod follow;
mod input;
mod kube_args;
mod migrate;
mod process;
mod progressive;
mod refs;
mod render;
mod restart;
mod restart_consumers;
mod restart_exit;
mod review;
mod sandbox;
mod serve;
mod stdout;
mod target;
mod token;
mod watch;
mod why;

use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

/// The executable name under which kubectl runs rollsafe as its plugin (`kubectl rollsafe …`).
const KUBECTL_PLUGIN: &str = "kubectl-rollsafe";

/// rollsafe rolls Kubernetes workloads when the Secrets and ConfigMaps they consume change.
#[derive(Debug, Parser)]
#[command(name = "rollsafe", version, about, long_about = None)]
struct Cli {
    /// Log lines as `text` or `json` (default: `json` for `serve`, `watch` and `emulator`,
    /// `text` otherwise).
    #[arg(long, global = true, value_enum, env = "ROLLSAFE_LOG_FORMAT")]
    log_format: Option<process::LogFormat>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Approve the roll rollsafe watch holds for a workload (rollsafe.dev/approval), as you:
    /// Kubernetes RBAC (patch on the workload) decides who may.
    #[command(after_help = approve::EXIT_CODES)]
    Approve(approve::Args),
    /// Show which workloads reference a Secret, patching nothing (dry run of restart-consumers).
    #[command(after_help = consumers::EXIT_CODES)]
    Consumers(consumers::Args),
    /// Run a Kubernetes API emulator (test substrate and sandbox cluster).
    Emulator(emulator::Args),
    /// Show what moving to rollsafe from another tool changes (Reloader), writing nothing.
    Migrate(migrate::Args),
    /// List the Secrets and ConfigMaps each workload in a manifest stream references.
    Refs(refs::Args),
    /// Add the config-hash annotation to rendered manifests (usable as a Helm post-renderer).
    Render(render::Args),
    /// Request a rollout of a Secret's consumers through a rollsafe server.
    ///
    /// The server's gates (authentication, scope, the live Secret, the ACL) and its audit
    /// records apply. `--server` is required: without it this is a usage error, never a
    /// fallback to `restart-consumers`, which would skip the gates and the audit. With `--wait`
    /// it follows each requested rollout through the server's rollout route.
    #[command(after_help = follow::WAIT_EXIT_CODES)]
    Restart(restart::Args),
    /// Start an embedded Kubernetes emulator with demo workloads and serve the API against it.
    Sandbox(sandbox::Args),
    /// Request a rollout of every workload that references a Secret, directly against Kubernetes.
    ///
    /// The engine runs as the kubeconfig's identity (or `--as`), with no ACL and no audit
    /// record. It is a verb of its own, not `restart` without `--server`, so that a restart
    /// never changes path because `ROLLSAFE_SERVER` is set or unset. With `--wait` it follows
    /// each requested rollout to its end; with `--progressive` it rolls wave by wave and stops
    /// at the first consumer whose rollout does not complete.
    #[command(after_help = follow::WAIT_EXIT_CODES)]
    RestartConsumers(restart_consumers::Args),
    /// Review an installed release: `review rbac` prints what each of the chart's
    /// ServiceAccounts may do and its difference from the documented minimum.
    Review(review::Args),
    /// Serve the Restart Consumers API.
    Serve(serve::Args),
    /// Print a session token signed with SESSION_SECRET.
    Token(token::Args),
    /// Roll opted-in workloads when the live Secrets and ConfigMaps they consume change.
    Watch(watch::Args),
    /// Explain one workload: what it consumes, whether rollsafe watch watches it, and whether
    /// it would roll it now.
    #[command(after_help = why::EXIT_CODES)]
    Why(why::Args),
}

/// How the process was invoked: `kubectl rollsafe` when its executable is named
/// `kubectl-rollsafe` (kubectl finds plugins on `PATH` by that name and passes the rest of the
/// command line unchanged), else `rollsafe`. Usage, help and error lines use it.
fn invoked_as(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let stem = argv0
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_stem)
        .and_then(std::ffi::OsStr::to_str);
    if stem == Some(KUBECTL_PLUGIN) {
        "kubectl rollsafe"
    } else {
        "rollsafe"
    }
}

fn parse() -> (Cli, &'static str) {
    let name = invoked_as(std::env::args_os().next().as_deref());
    let matches = Cli::command().bin_name(name).get_matches();
    match Cli::from_arg_matches(&matches) {
        Ok(cli) => (cli, name),
        Err(error) => error.exit(),
    }
}

fn main() -> ExitCode {
    let (cli, name) = parse();
    let servers_log_json = matches!(
        cli.command,
        Command::Serve(_) | Command::Watch(_) | Command::Emulator(_)
    );
    process::set_log_format(cli.log_format.unwrap_or(if servers_log_json {
        process::LogFormat::Json
    } else {
        process::LogFormat::Text
    }));
    let result = match cli.command {
        Command::Approve(args) => approve::run(args),
        Command::Consumers(args) => consumers::run(args),
        Command::Emulator(args) => emulator::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Refs(args) => refs::run(args),
        Command::Render(args) => render::run(args),
        Command::Restart(args) => restart::run(args),
        Command::Sandbox(args) => sandbox::run(args),
        Command::RestartConsumers(args) => restart_consumers::run(args),
        Command::Review(args) => review::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Token(args) => token::run(args),
        Command::Watch(args) => watch::run(args),
        Command::Why(args) => why::run(args),
    };
    process::flush_logs();
    match result {
        Ok(code) => code,
        Err(error) if error.is::<stdout::Closed>() => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{name}: {}", process::one_line(&error));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_plugin_name_is_told_by_the_executable_name() {
        use std::ffi::OsStr;
        for (argv0, name) in [
            (Some("rollsafe"), "rollsafe"),
            (Some("/usr/local/bin/rollsafe"), "rollsafe"),
            (
                Some("/home/me/.krew/bin/kubectl-rollsafe"),
                "kubectl rollsafe",
            ),
            (Some("kubectl-rollsafe.exe"), "kubectl rollsafe"),
            (Some("kubectl-rollsafe-old"), "rollsafe"),
            (None, "rollsafe"),
        ] {
            assert_eq!(invoked_as(argv0.map(OsStr::new)), name, "{argv0:?}");
        }
    }
}
