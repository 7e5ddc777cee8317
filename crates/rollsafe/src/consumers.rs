//! `rollsafe consumers`: a dry run of Restart Consumers. Lists the three workload kinds and
//! prints which workloads reference the Secret, patching nothing — directly against Kubernetes
//! (kubectl-style connection flags), or through a rollsafe server's
//! `GET …/consumers` with `--server` (its gates and identity apply).
//!
//! Output, one JSON object — `rollsafe_core::preview::ConsumersPreview`, the API's shape:
//!
//! ```json
//! { "namespace": "shop", "secret": "db-creds",
//!   "inventories": { "Deployment": { "complete": true },
//!                    "StatefulSet": { "complete": false, "code": "forbidden", "message": "…",
//!                                     "httpStatus": 403 },
//!                    "DaemonSet": { "complete": true } },
//!   "workloads": [ { "kind": "Deployment", "name": "api", "references": [ … ],
//!                    "rollsNow": false, "deferral": "paused",
//!                    "deferralReason": "the Deployment is paused" },
//!                  { "kind": "StatefulSet", "name": "kafka-0", …,
//!                    "operatorOwner": { "apiVersion": "kafka.strimzi.io/v1beta2",
//!                                       "kind": "Kafka", "name": "my-cluster" },
//!                    "restartBy": { "strategy": "patch", "from": "default", "reason": "…" } } ],
//!   "podConsumers": { "state": "read",
//!                     "groups": [ { "owner": { … "kind": "PodGroup", "name": "kafka" },
//!                                   "operator": true, "pods": ["kafka-0"], "count": 1,
//!                                   "restart": "evict", "reason": "…" } ] } }
//! ```
//!
//! `references` has the shape `rollsafe refs` prints. `-o json` (default) follows the output
//! rule of the restart commands; `-o text` says the same in lines: each kind that could not be
//! listed with guidance, each consumer with its references (paths), its operator and how it is
//! restarted when a template patch is not simply the way, and the roll held for it; then the
//! pods that consume the Secret outside the three kinds, by owner (`pods` lines), or why they
//! could not be read (`unread pods`). The pods are listed as the identity (`list pods`); one it
//! may not list still gets the rest. The exit codes are those of the restart commands, read for a
//! command that patches nothing: 0 when every inventory is complete (the list of consumers is
//! the whole answer, possibly empty); 2 when some kind could not be listed and 3 when none could
//! (the object is printed, and its workloads may be missing consumers); 1, with nothing on
//! stdout, for a preflight error (a Secret or namespace that does not exist or cannot be read,
//! an invalid name, no usable configuration) or an `{ error }` response from the server. Pods
//! that could not be read do not change the exit code: they are said in the output and on
//! stderr.

use std::process::ExitCode;

use anyhow::Context as _;
use rollsafe_client::{Client, ClientError, Token};
use rollsafe_core::failure::FailureCode;
use rollsafe_core::pending::HeldBy;
use rollsafe_core::preview::{ConsumersPreview, PendingRoll, PodConsumers};
use rollsafe_core::reference::{ContainerList, Origin, Reference};
use rollsafe_kube::pod_consumers;

use crate::kube_args::KubeArgs;
use crate::restart_exit::{self, OutputFormat};
use crate::target::Target;
use crate::{process, stdout};

/// Show which Deployments, StatefulSets and DaemonSets reference a Secret (dry run).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    pub kube: KubeArgs,
    /// Ask this rollsafe server (base URL) instead of Kubernetes: its authentication, scope,
    /// visibility and ACL apply, and it lists as the caller when it impersonates.
    #[arg(long, env = "ROLLSAFE_SERVER", conflicts_with_all = ["kubeconfig", "context", "as_user"])]
    pub server: Option<String>,
    /// A token for `--server` (a session token, or a Kubernetes token when the server reviews
    /// them).
    #[arg(
        long,
        env = "ROLLSAFE_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    pub token: Option<String>,
    /// How to print the result (`text`: one line per inventory and per workload).
    #[arg(short = 'o', long, value_enum, default_value_t)]
    pub output: OutputFormat,
    /// The Secret, as `NAME` (namespace from `-n` or the context) or `NAMESPACE/NAME`.
    pub secret: String,
}

/// The exit codes, for `--help`.
pub(crate) const EXIT_CODES: &str = "Exit codes: 0 every inventory is complete (the consumers listed are \
    all of them, possibly none); 2 some kinds could not be listed, 3 none could (the result is \
    printed, but consumers may be missing); 1 the Secret or its namespace does not exist or \
    cannot be read, or another error (message on stderr, nothing on stdout).";

/// 0 when every inventory is complete, 2 when some are not, 3 when none is (as `partial` and
/// `failed` for the restart commands).
fn exit_code(preview: &ConsumersPreview) -> ExitCode {
    let unlisted = preview.inventories.values().filter(|i| !i.complete).count();
    if unlisted == 0 {
        ExitCode::SUCCESS
    } else if unlisted < preview.inventories.len() {
        ExitCode::from(2)
    } else {
        ExitCode::from(3)
    }
}

/// What to check when a kind could not be listed, for a command that patches nothing. The
/// API's `message` speaks of patches and the server; this is the command line's wording.
fn guidance(code: FailureCode, through_server: bool) -> &'static str {
    match code {
        FailureCode::Unauthenticated if through_server => {
            "Kubernetes rejected the server's credentials; check the server's Kubernetes credentials"
        }
        FailureCode::Unauthenticated => {
            "Kubernetes rejected the credentials; check the kubeconfig's user and its token"
        }
        FailureCode::Forbidden => {
            "the identity may not list this kind; check its RBAC (list in the namespace)"
        }
        FailureCode::NotFound => "check that the namespace and the apps/v1 API exist",
        FailureCode::InvalidRequest => "check the cluster's Kubernetes version",
        FailureCode::RateLimited => "Kubernetes is rate limiting requests; wait before retrying",
        FailureCode::Conflict | FailureCode::Unavailable | FailureCode::Unconfirmed => {
            "the list did not complete; retry later"
        }
        FailureCode::IncompleteList => {
            "the list was incomplete, inconsistent or over budget; retry later"
        }
    }
}

/// `-o text`: the Secret; each kind that could not be listed, with what to check; then each
/// consumer with what the JSON says of it — why it does not roll now, the controller's view,
/// a halt — then its references to the Secret, one per line, and the roll the controller holds.
fn text(preview: &ConsumersPreview, through_server: bool) -> String {
    let mut out = format!("Secret {}/{}", preview.namespace, preview.secret);
    for (kind, inventory) in &preview.inventories {
        if let Some(code) = inventory.code {
            out.push_str(&format!(
                "\nunlisted   {kind}: {code}: its consumers are unknown; {}",
                guidance(code, through_server)
            ));
        }
    }
    if let Some(pods) = &preview.pod_consumers
        && let (Some(code), Some(message)) = (&pods.code, &pods.message)
    {
        out.push_str(&format!("\nunread     pods: {code}: {message}"));
    }
    let pod_level = preview
        .pod_consumers
        .as_ref()
        .map_or(0, PodConsumers::count);
    if preview.workloads.is_empty() && preview.is_complete() {
        out.push_str(if pod_level == 0 {
            "\nno consumer: no workload references it"
        } else {
            "\nno workload: no Deployment, StatefulSet or DaemonSet references it"
        });
    }
    for workload in &preview.workloads {
        out.push_str(&format!("\nconsumer   {}/{}", workload.kind, workload.name));
        if let Some(reason) = &workload.deferral_reason {
            out.push_str(&format!(" (does not roll now: {reason})"));
        }
        out.push_str(&format!("; watch: {}", workload.watch.describe()));
        if let Some(reason) = &workload.halted {
            out.push_str(&format!(
                "; halted by rollsafe watch ({reason}): remove the rollsafe.dev/halted annotation to resume"
            ));
        }
        if let Some(owned_by) = workload.owned_by() {
            out.push_str(&format!("\n           {owned_by}"));
        }
        if let Some(by) = &workload.restart_by {
            out.push_str(&format!("\n           restart: {}", by.reason));
        }
        for reference in &workload.references {
            out.push_str(&format!("\n           via {}", path(reference)));
        }
        if let Some(pending) = &workload.pending {
            out.push_str(&format!("\n           held {}", held(pending)));
        }
    }
    for group in preview.pod_consumers.iter().flat_map(|pods| &pods.groups) {
        let more = group.count.saturating_sub(group.pods.len());
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        out.push_str(&format!(
            "\npods       {}{more} — {}",
            group.pods.join(", "),
            group.reason
        ));
    }
    out
}

/// Where a reference is in the pod template, as a path (`containers[app].env[PASSWORD]`).
fn path(reference: &Reference) -> String {
    let list = |list: ContainerList| match list {
        ContainerList::Container => "containers",
        ContainerList::InitContainer => "initContainers",
        ContainerList::EphemeralContainer => "ephemeralContainers",
    };
    let name = |name: &Option<String>| name.as_deref().unwrap_or("?").to_owned();
    let mut text = match &reference.origin {
        Origin::Env {
            container_list,
            container,
            env,
            key,
        } => {
            let key = key
                .as_deref()
                .map(|key| format!(" (key {key:?})"))
                .unwrap_or_default();
            format!(
                "{}[{}].env[{}]{key}",
                list(*container_list),
                name(container),
                name(env)
            )
        }
        Origin::EnvFrom {
            container_list,
            container,
            prefix,
        } => {
            let prefix = prefix
                .as_deref()
                .map(|prefix| format!(" (prefix {prefix:?})"))
                .unwrap_or_default();
            format!(
                "{}[{}].envFrom{prefix}",
                list(*container_list),
                name(container)
            )
        }
        Origin::Volume { volume } => format!("volumes[{}]", name(volume)),
        Origin::ProjectedVolume { volume, source } => {
            format!("volumes[{}].projected.sources[{source}]", name(volume))
        }
        Origin::ImagePullSecret => "imagePullSecrets".to_owned(),
    };
    if reference.optional == Some(true) {
        text.push_str(" (optional)");
    }
    text
}

/// The roll `rollsafe watch` holds, in words.
fn held(pending: &PendingRoll) -> String {
    let at = match pending.held_by {
        HeldBy::Window => &pending.until,
        HeldBy::Approval => &pending.since,
    };
    match (pending.held_by, at) {
        (HeldBy::Window, Some(at)) => {
            format!("by rollsafe watch: a restart window holds a roll until {at}")
        }
        (HeldBy::Window, None) => {
            "by rollsafe watch: a restart window holds a roll (it does not open)".to_owned()
        }
        (HeldBy::Approval, Some(since)) => {
            format!("by rollsafe watch: a roll awaits approval since {since} (rollsafe approve)")
        }
        (HeldBy::Approval, None) => {
            "by rollsafe watch: a roll awaits approval (rollsafe approve)".to_owned()
        }
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    if std::env::var_os("RUST_LOG").is_some() {
        process::init_logging();
    }
    let Target { namespace, secret } = Target::parse(args.kube.namespace.as_deref(), &args.secret)?;
    let preview = match &args.server {
        Some(server) => {
            let Some(namespace) = namespace else {
                anyhow::bail!(
                    "the Secret's namespace is missing: give -n NAMESPACE or NAMESPACE/NAME"
                );
            };
            let client = Client::new(server, args.token.clone().map(Token::new))
                .context("invalid --server URL")?;
            match process::runtime()?.block_on(client.consumers(&namespace, &secret)) {
                Ok(preview) => preview,
                Err(ClientError::Api(error)) => {
                    eprintln!("{}", restart_exit::api_error(&error));
                    return Ok(ExitCode::FAILURE);
                }
                Err(error) => return Err(restart_exit::client_error(server, error)),
            }
        }
        None => process::runtime()?.block_on(async {
            let session = args.kube.session(namespace).await?;
            let engine = session.engine();
            let annotations = session.read_secret(&engine, &secret).await?;
            let discovery = engine
                .discover(&session.namespace, &secret, session.identity.as_ref())
                .await;
            anyhow::Ok(
                pod_consumers::preview(&discovery, Some(&session.client), Some(&annotations)).await,
            )
        })?,
    };
    let text = match args.output {
        OutputFormat::Json => restart_exit::json(&preview)?,
        OutputFormat::Text => text(&preview, args.server.is_some()),
    };
    stdout::line(&text)?;
    let code = exit_code(&preview);
    if !preview.is_complete() {
        eprintln!(
            "rollsafe: the inventory is incomplete, so consumers may be missing from the list"
        );
    }
    if let Some(code) = preview
        .pod_consumers
        .as_ref()
        .and_then(|p| p.code.as_deref())
    {
        eprintln!(
            "rollsafe: the pods could not be read ({code}), so pods that consume the Secret outside a Deployment, StatefulSet or DaemonSet are not listed"
        );
    }
    Ok(code)
}
