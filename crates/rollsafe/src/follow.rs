//! Following a restart's rollouts to their end: the `--wait` flags, the live display on stderr,
//! the final report on stdout and the exit codes (docs/rollouts.md).
//!
//! A follow polls a [`RolloutWatch`] every [`FOLLOW_INTERVAL`] — one list per kind with an
//! unfinished workload — until every workload is final, the timeout passes or Ctrl-C stops it.
//! Stopping undoes nothing: what was patched stays patched.

use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rollsafe_client::{Client, ClientError};
use rollsafe_core::contract::WorkloadName;
use rollsafe_core::duration;
use rollsafe_core::name::{Namespace, SecretName};
use rollsafe_core::rollout::follow::Follower;
use rollsafe_core::rollout::{DEFAULT_PROGRESS_DEADLINE, RolloutState, RolloutStatus};
use rollsafe_core::workload::WorkloadKind;
pub(crate) use rollsafe_kube::progressive::{Ending, Follow, RolloutReport};
use rollsafe_kube::{FOLLOW_INTERVAL, ReadError, RolloutWatch};
use tokio::time::Instant;

/// How long `--wait` follows by default.
pub(crate) const DEFAULT_WAIT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A workload stalled (and, progressively, the rest were held back).
pub(crate) const EXIT_STALLED: u8 = 4;
/// The timeout passed before every rollout was final.
pub(crate) const EXIT_TIMEOUT: u8 = 5;
/// A rollout could not be followed to its end: superseded by another change, or the workload
/// deleted or replaced.
pub(crate) const EXIT_LOST: u8 = 6;
/// Ctrl-C stopped the waiting (the shell's convention for SIGINT).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// The exit codes of `--wait`, for `--help`.
pub(crate) const WAIT_EXIT_CODES: &str = "With --wait: 0 every requested workload is complete (or \
    deferred: it rolls on its own trigger); 4 one stalled; 5 the --timeout passed first; 6 one \
    was superseded by another change or deleted; 130 Ctrl-C stopped the waiting (nothing is \
    undone); otherwise the restart's own code.";

/// The follow flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct FollowArgs {
    /// After the result, follow each requested workload until its rollout is complete,
    /// deferred, stalled, superseded or gone (`--wait=false`: do not).
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_name = "BOOL",
        env = "ROLLSAFE_WAIT"
    )]
    pub wait: Option<bool>,
    /// How long to follow before giving up (exit 5), e.g. `90s`, `15m`. Default 15m.
    #[arg(long, value_name = "DURATION", env = "ROLLSAFE_WAIT_TIMEOUT")]
    pub timeout: Option<String>,
    /// A StatefulSet or DaemonSet whose rollout makes no progress for this long is stalled
    /// (a Deployment has its own `progressDeadlineSeconds`). Default 10m.
    #[arg(long, value_name = "DURATION", env = "ROLLSAFE_PROGRESS_DEADLINE")]
    pub progress_deadline: Option<String>,
}

impl FollowArgs {
    /// `None` when not waiting. `required` (a progressive run) waits unless told not to, which
    /// is an error.
    pub(crate) fn parse(&self, required: Option<&str>) -> anyhow::Result<Option<Follow>> {
        let wait = match (self.wait, required) {
            (Some(false), Some(flag)) => anyhow::bail!(
                "{flag} follows each wave to its end: it cannot run with --wait=false"
            ),
            (Some(wait), _) => wait,
            (None, Some(_)) => true,
            (None, None) => false,
        };
        let parse = |flag: &str, value: &Option<String>, default: Duration| match value {
            None => Ok(default),
            Some(text) => match duration::parse(text) {
                Ok(d) if !d.is_zero() => Ok(d),
                Ok(_) => anyhow::bail!("invalid {flag} {text:?}: it must be longer than zero"),
                Err(error) => anyhow::bail!("invalid {flag} {text:?}: {error}"),
            },
        };
        let timeout = parse("--timeout", &self.timeout, DEFAULT_WAIT_TIMEOUT)?;
        let progress_deadline = parse(
            "--progress-deadline",
            &self.progress_deadline,
            DEFAULT_PROGRESS_DEADLINE,
        )?;
        if !wait {
            if self.timeout.is_some() || self.progress_deadline.is_some() {
                anyhow::bail!("--timeout and --progress-deadline apply to --wait: add --wait");
            }
            return Ok(None);
        }
        Ok(Some(Follow {
            timeout,
            progress_deadline,
        }))
    }
}

/// What a follow polls: Kubernetes directly ([`RolloutWatch`]) or a server's rollout route
/// ([`ServerWatch`]).
pub(crate) trait Followable {
    /// One poll; what could not be read, as fixed one-line texts keyed by what it was.
    async fn poll(&mut self) -> Vec<(&'static str, String)>;
    /// Each workload's status, by kind then name.
    fn statuses(&self) -> Vec<(&WorkloadName, &RolloutStatus)>;
    /// Whether every rollout is final.
    fn is_done(&self) -> bool;
}

impl Followable for RolloutWatch {
    async fn poll(&mut self) -> Vec<(&'static str, String)> {
        RolloutWatch::poll(self)
            .await
            .into_iter()
            .map(|(kind, error): (WorkloadKind, ReadError)| {
                (
                    kind.plural(),
                    format!("could not list {}: {error}", kind.plural()),
                )
            })
            .collect()
    }

    fn statuses(&self) -> Vec<(&WorkloadName, &RolloutStatus)> {
        RolloutWatch::statuses(self).collect()
    }

    fn is_done(&self) -> bool {
        RolloutWatch::is_done(self)
    }
}

/// Follows requested workloads through a server's `GET …/secrets/{name}/rollout`: one request
/// per poll for all of them. Each workload's follower pins the restart annotation's value it
/// first sees (the server's result does not carry it).
pub(crate) struct ServerWatch {
    client: Client,
    namespace: Namespace,
    secret: SecretName,
    followed: BTreeMap<WorkloadName, (Follower, RolloutStatus)>,
    started: Instant,
}

impl ServerWatch {
    pub(crate) fn new(
        client: Client,
        namespace: Namespace,
        secret: SecretName,
        workloads: impl IntoIterator<Item = WorkloadName>,
        progress_deadline: Duration,
    ) -> Self {
        let followed = workloads
            .into_iter()
            .map(|w| {
                let follower = Follower::new(w.kind, None, progress_deadline);
                (w, (follower, RolloutStatus::pending()))
            })
            .collect();
        Self {
            client,
            namespace,
            secret,
            followed,
            started: Instant::now(),
        }
    }
}

impl Followable for ServerWatch {
    async fn poll(&mut self) -> Vec<(&'static str, String)> {
        let view = match self.client.rollout(&self.namespace, &self.secret).await {
            Ok(view) => view,
            Err(error) => {
                let text = match error {
                    ClientError::Api(error) => error.to_string(),
                    other => other.to_string(),
                };
                return vec![(
                    "server",
                    format!("could not read the rollout from the server: {text}"),
                )];
            }
        };
        let now = self.started.elapsed();
        for (workload, (follower, status)) in &mut self.followed {
            if status.state.is_final() {
                continue;
            }
            let listed = view
                .inventories
                .get(&workload.kind)
                .is_some_and(|inventory| inventory.complete);
            let seen = view
                .workloads
                .iter()
                .find(|w| w.kind == workload.kind && w.name == workload.name);
            match (seen, listed) {
                (Some(seen), _) => *status = follower.observe(Some(seen.observation()), now),
                // Not in a complete list: deleted, or it no longer consumes the Secret.
                (None, true) => *status = follower.observe(None, now),
                // Its kind could not be listed: nothing is known; keep the last state.
                (None, false) => {}
            }
        }
        Vec::new()
    }

    fn statuses(&self) -> Vec<(&WorkloadName, &RolloutStatus)> {
        self.followed.iter().map(|(w, (_, s))| (w, s)).collect()
    }

    fn is_done(&self) -> bool {
        self.followed.values().all(|(_, s)| s.state.is_final())
    }
}

/// The report of `watch` at a follow's end.
pub(crate) fn report(watch: &impl Followable, ended: Ending) -> RolloutReport {
    RolloutReport::new(watch.statuses(), ended)
}

/// What the command line makes of a follow's report: its exit code and its text.
pub(crate) trait Shown {
    /// The exit code this report asks for, if it asks for one: stalled before a timeout
    /// before a lost rollout; `None` when every workload is complete or deferred.
    fn exit_code(&self) -> Option<ExitCode>;
    /// The final table, for `-o text`.
    fn text(&self) -> String;
}

impl Shown for RolloutReport {
    fn exit_code(&self) -> Option<ExitCode> {
        if self.ended == Ending::Interrupted {
            return Some(ExitCode::from(EXIT_INTERRUPTED));
        }
        if self.any(RolloutState::Stalled) {
            return Some(ExitCode::from(EXIT_STALLED));
        }
        if self.ended == Ending::Timeout {
            return Some(ExitCode::from(EXIT_TIMEOUT));
        }
        if self.any(RolloutState::Superseded) || self.any(RolloutState::Gone) {
            return Some(ExitCode::from(EXIT_LOST));
        }
        None
    }

    fn text(&self) -> String {
        let summary: Vec<String> = self
            .counts
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect();
        let mut out = match self.ended {
            Ending::Done => format!("rollout: {}", summary.join(", ")),
            Ending::Timeout => format!("rollout: timed out; {}", summary.join(", ")),
            Ending::Interrupted => format!("rollout: stopped waiting; {}", summary.join(", ")),
        };
        let width = self
            .workloads
            .iter()
            .map(|w| w.kind.as_str().len() + w.name.len() + 1)
            .max()
            .unwrap_or(0);
        for workload in &self.workloads {
            let name = format!("{}/{}", workload.kind, workload.name);
            out.push_str(&format!(
                "\n  {name:<width$}  {}",
                workload.status.describe()
            ));
        }
        out
    }
}

/// Follows `watch` until every rollout is final, `timeout` has passed or Ctrl-C, showing
/// progress on stderr.
pub(crate) async fn run(watch: &mut impl Followable, timeout: Duration) -> Ending {
    let deadline = Instant::now() + timeout;
    let mut display = Display::new(watch);
    let mut interrupt = std::pin::pin!(tokio::signal::ctrl_c());
    let ending = loop {
        let errors = tokio::select! {
            errors = watch.poll() => errors,
            _ = &mut interrupt => break Ending::Interrupted,
        };
        display.update(watch, &errors);
        if watch.is_done() {
            break Ending::Done;
        }
        let now = Instant::now();
        if now >= deadline {
            break Ending::Timeout;
        }
        tokio::select! {
            () = tokio::time::sleep(FOLLOW_INTERVAL.min(deadline - now)) => {}
            _ = &mut interrupt => break Ending::Interrupted,
        }
    };
    display.finish();
    ending
}

/// Progress on stderr: bars on a terminal, timestamped lines when a workload's state or counts
/// change otherwise.
enum Display {
    Bars {
        bars: BTreeMap<WorkloadName, ProgressBar>,
        // Keeps the bars drawn together.
        _group: MultiProgress,
    },
    Lines {
        last: BTreeMap<WorkloadName, String>,
        errors: BTreeMap<&'static str, String>,
    },
}

impl Display {
    fn new(watch: &impl Followable) -> Self {
        if !std::io::stderr().is_terminal() {
            return Display::Lines {
                last: BTreeMap::new(),
                errors: BTreeMap::new(),
            };
        }
        let group = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template("{prefix:<32} [{bar:20}] {pos}/{len} {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bars = watch
            .statuses()
            .into_iter()
            .map(|(workload, _)| {
                let bar = group.add(ProgressBar::new(0).with_style(style.clone()));
                bar.set_prefix(format!("{}/{}", workload.kind, workload.name));
                (workload.clone(), bar)
            })
            .collect();
        Display::Bars {
            bars,
            _group: group,
        }
    }

    fn update(&mut self, watch: &impl Followable, errors: &[(&'static str, String)]) {
        match self {
            Display::Bars { bars, .. } => {
                for (workload, status) in watch.statuses() {
                    let Some(bar) = bars.get(workload) else {
                        continue;
                    };
                    if let Some(progress) = status.progress {
                        bar.set_length(u64::try_from(progress.desired.max(0)).unwrap_or(0));
                        bar.set_position(u64::try_from(progress.ready.max(0)).unwrap_or(0));
                    }
                    let mut message = status.describe();
                    if let Some((_, error)) = errors.first() {
                        message.push_str(&format!(" ({error})"));
                    }
                    bar.set_message(message);
                }
            }
            Display::Lines {
                last,
                errors: shown,
            } => {
                let stamp = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ");
                for (what, error) in errors {
                    if shown.insert(what, error.clone()).as_ref() != Some(error) {
                        eprintln!("{stamp} {error}; trying again");
                    }
                }
                shown.retain(|what, _| errors.iter().any(|(w, _)| w == what));
                for (workload, status) in watch.statuses() {
                    let line = status.describe();
                    if last.get(workload) != Some(&line) {
                        eprintln!("{stamp} {}/{} {line}", workload.kind, workload.name);
                        last.insert(workload.clone(), line);
                    }
                }
            }
        }
    }

    fn finish(self) {
        if let Display::Bars { bars, .. } = self {
            for bar in bars.values() {
                bar.abandon();
            }
        }
    }
}
