//! `rollsafe review rbac`: what each ServiceAccount of an installed release may do, and its
//! difference from the documented minimum (`rollsafe_kube::least_privilege`).

use std::fmt::Write as _;
use std::process::ExitCode;

use rollsafe_kube::least_privilege::{self, AccountReview, Notes};
use serde::Serialize;

use crate::process;
use crate::restart_exit::{self, OutputFormat};
use crate::stdout;

pub(crate) const EXIT_CODES: &str = "Exit codes: 0 every ServiceAccount of the chart is granted \
    exactly the documented minimum (beyond what every ServiceAccount of the namespace may do); \
    1 a ServiceAccount is granted more than the minimum or lacks part of it (each rule named on \
    stdout); 2 the review could not be made (message on stderr, nothing on stdout).";

/// `rollsafe review …`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub(crate) enum What {
    /// For each ServiceAccount the chart created in the release namespace: everything it may
    /// do (SelfSubjectRulesReview as that ServiceAccount, what `kubectl auth can-i --list --as`
    /// shows) beyond what every ServiceAccount may do, and the difference from the documented
    /// minimum of its mode (read from the chart's Deployment running as it). Needs `list` on
    /// ServiceAccounts, Deployments and RoleBindings and `impersonate` on `serviceaccounts`:
    /// run it as a cluster administrator.
    #[command(after_help = EXIT_CODES)]
    Rbac(RbacArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct RbacArgs {
    /// The release namespace.
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    pub namespace: String,
    /// Only this release (`app.kubernetes.io/instance`); default: every release of the chart
    /// in the namespace.
    #[arg(long, value_name = "NAME")]
    pub release: Option<String>,
    /// The kubeconfig file (default: $KUBECONFIG or ~/.kube/config, else the in-cluster
    /// ServiceAccount). Its user must be allowed to impersonate ServiceAccounts.
    #[arg(long, value_name = "PATH", env = "ROLLSAFE_KUBECONFIG")]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use (default: the current context).
    #[arg(long, value_name = "NAME", env = "ROLLSAFE_CONTEXT")]
    pub context: Option<String>,
    /// `text` (default) or `json`.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: OutputFormat,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    minimal: bool,
    service_accounts: Vec<AccountReview>,
    warnings: Vec<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let What::Rbac(args) = args.what;
    let mut notes = Notes::default();
    let reviewed = process::runtime()?.block_on(async {
        let connection = rollsafe_kube::Connection::from_options(
            args.kubeconfig.as_deref(),
            args.context.as_deref(),
        )
        .await
        .map_err(|error| anyhow::anyhow!("cannot connect to Kubernetes ({})", error.code()))?;
        least_privilege::review(
            &connection,
            &args.namespace,
            args.release.as_deref(),
            &mut notes,
        )
        .await
        .map_err(|error| anyhow::anyhow!("cannot review the RBAC ({})", error.code()))
    });
    let accounts = match reviewed {
        Ok(accounts) => accounts,
        Err(error) => {
            eprintln!("rollsafe: {error}");
            return Ok(ExitCode::from(2));
        }
    };
    let report = Report {
        minimal: accounts.iter().all(AccountReview::is_minimal),
        service_accounts: accounts,
        warnings: notes.warnings,
    };
    for warning in &report.warnings {
        eprintln!("rollsafe: warning: {warning}");
    }
    let out = match args.output {
        OutputFormat::Json => restart_exit::json(&report)?,
        OutputFormat::Text => text(&report),
    };
    stdout::line(&out)?;
    Ok(if report.minimal {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Per ServiceAccount and namespace: what it may do beyond the baseline, as `kubectl auth can-i
/// --list` lays it out, then the difference (`+` granted beyond the minimum, `-` documented but
/// not granted) or `minimal`.
fn text(report: &Report) -> String {
    let mut out = String::new();
    for account in &report.service_accounts {
        let _ = writeln!(
            out,
            "ServiceAccount {}/{} (release {}, {}: {})",
            account.namespace,
            account.name,
            account.release,
            match account.mode.component {
                least_privilege::Component::Server => "server",
                least_privilege::Component::Controller => "controller",
            },
            account.described
        );
        for ns in &account.namespaces {
            let _ = writeln!(
                out,
                "  in {} (beyond the {} grants every ServiceAccount there has):",
                ns.namespace, ns.baseline
            );
            if ns.granted.is_empty() {
                let _ = writeln!(out, "    nothing");
            } else {
                let _ = writeln!(
                    out,
                    "    {:<40} {:<20} {:<24} Verbs",
                    "Resources", "Non-Resource URLs", "Resource Names"
                );
                for grant in &ns.granted {
                    let _ = writeln!(
                        out,
                        "    {:<40} {:<20} {:<24} [{}]",
                        grant.resource,
                        bracket(&grant.url),
                        bracket(&grant.name),
                        grant.verb
                    );
                }
            }
            for grant in &ns.difference.extra {
                let _ = writeln!(out, "    + {grant}  (beyond the documented minimum)");
            }
            for grant in &ns.difference.missing {
                let _ = writeln!(out, "    - {grant}  (documented, not granted)");
            }
            for grant in &ns.difference.named_by_values {
                let _ = writeln!(
                    out,
                    "    ~ {grant}  (names from the chart's values: check them)"
                );
            }
        }
        let verdict = if account.is_minimal() {
            "minimal: no difference from the documented minimum"
        } else {
            "NOT minimal: see the + and - lines"
        };
        let _ = writeln!(out, "  {verdict}");
    }
    let _ = write!(
        out,
        "{}",
        if report.minimal {
            "every ServiceAccount is the documented minimum"
        } else {
            "difference from the documented minimum found"
        }
    );
    out
}

fn bracket(text: &str) -> String {
    if text.is_empty() {
        "[]".to_owned()
    } else {
        format!("[{text}]")
    }
}
