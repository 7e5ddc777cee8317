//! What the controller watches and how it acts: [`ControllerSettings`], built by the CLI from
//! its flags, and the named limits and timeouts the controller runs with.

use std::time::Duration;

use rollsafe_core::reference::TargetKind;
use rollsafe_core::rollout::DEFAULT_PROGRESS_DEADLINE;
use rollsafe_core::window::RestartWindow;
use rollsafe_core::workload::WatchedKind;
use rollsafe_notify::Notifier;

use crate::digest::Fingerprinter;
use crate::freshness;
use crate::limits::FlapLimit;
use crate::windows::WallClock;

/// The default adoption pace: first records written per second ([`crate::patches`]).
pub const DEFAULT_ADOPTIONS_PER_SECOND: u32 = 50;
/// The default debounce window.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(2);
/// How long one patch may take.
pub const PATCH_TIMEOUT: Duration = Duration::from_secs(15);
/// The default global rate: rolls per minute.
pub const DEFAULT_ROLLS_PER_MINUTE: u32 = 60;
/// The default burst.
pub const DEFAULT_BURST: u32 = 10;
/// How long publishing one Event may take.
pub const EVENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Events waiting to be published. They are sent by their own task, after the patch they
/// announce and without holding the next one; when this many wait (the events API is slow or
/// down), a further Event is dropped, logged and counted as a failure.
pub const EVENT_QUEUE: usize = 256;
/// The `reportingController` of Events.
pub const REPORTING_CONTROLLER: &str = "rollsafe.dev/watch";

/// Evaluations in one step of the loop: after this many (or once the patch pool is full) it
/// reads the watches again before it takes the next due workload, so that a burst of due
/// workloads (the first list, a new leader) never keeps the watches unread.
pub const EVALUATIONS_PER_STEP: usize = 256;

/// How long after a failed patch (not a conflict) the workload is evaluated again, from the
/// cache as it then is.
pub const FAILURE_RECHECK: Duration = Duration::from_secs(10);
/// Items each watch stream's task may decode ahead of the loop ([`crate::streams`]).
pub const STREAM_BUFFER: usize = 256;

/// What the controller watches and how it acts.
#[derive(Debug, Clone)]
pub struct ControllerSettings {
    /// Namespaces to watch; empty: all.
    pub namespaces: Vec<String>,
    /// A label selector restricting the workloads considered.
    pub selector: Option<String>,
    /// A label selector restricting the Secrets and ConfigMaps watched (sent to the API
    /// server). An object outside it counts as not watched, like an opted-out one.
    pub source_selector: Option<String>,
    /// A label selector on Namespaces: only the objects of the namespaces it selects are
    /// considered, followed as namespaces gain and lose the labels.
    pub namespace_selector: Option<String>,
    /// Namespaces never watched (a field selector on every watch).
    pub ignore_namespaces: Vec<String>,
    /// Kinds of source never watched: their objects count as not watched.
    pub ignore_kinds: Vec<TargetKind>,
    /// Every workload is opted in unless it says `"false"`.
    pub all: bool,
    /// The per-workload debounce window.
    pub debounce: Duration,
    /// Decide, log and count, never patch.
    pub dry_run: bool,
    /// Computes the digests.
    pub fingerprinter: Fingerprinter,
    /// How long one patch may take.
    pub patch_timeout: Duration,
    /// Rolls per minute across everything watched (0: unlimited).
    pub max_rolls_per_minute: u32,
    /// Rolls allowed at once before the per-minute rate applies.
    pub burst: u32,
    /// First records (adoptions) written per second (0: unpaced); rolls never wait for them
    /// ([`crate::patches`]).
    pub max_adoptions_per_second: u32,
    /// The flap stop.
    pub flap_limit: FlapLimit,
    /// This replica's name in Events (`reportingInstance`); default: the host name.
    pub instance: Option<String>,
    /// The server-side timeout of each watch request, in seconds. When it ends, kube's watcher
    /// resumes from the last resourceVersion it saw (relisting on a 410); a request that
    /// delivers nothing for this long plus five seconds is abandoned and resumed the same way.
    /// A stream silent for [`freshness::stall_bound`] of it is stale.
    pub watch_timeout: u32,
    /// After it rolls a workload, how long a StatefulSet or DaemonSet may go without progress
    /// before its rollout is reported stalled (a Deployment has its own deadline).
    pub progress_deadline: Duration,
    /// `--rollout progressive`: every source's consumers roll in waves, not only those of a
    /// source annotated `rollsafe.dev/rollout: progressive`.
    pub progressive_all: bool,
    /// `--reloader-compat`: Stakater Reloader's annotations opt workloads in and sources out,
    /// with Reloader's meaning (`rollsafe_core::opt_in::reloader`).
    pub reloader_compat: bool,
    /// Argo Rollouts are watched and rolled (`--argo-rollouts`, when the API server serves
    /// `rollouts.argoproj.io`: the caller checks).
    pub argo_rollouts: bool,
    /// `--restart-window`: rolls of workloads whose own annotation and changed objects name no
    /// window happen only while it is open ([`crate::windows`]).
    pub restart_window: Option<RestartWindow>,
    /// The wall clock restart windows are read against.
    pub clock: WallClock,
    /// `--require-approval`: namespaces whose rolls all await approval ([`crate::approval`]).
    pub require_approval: Vec<String>,
    /// Where each outcome is also sent (`--notify-webhook`): every Event this controller
    /// publishes on a workload, as a notification ([`rollsafe_notify`]); `None`: none.
    pub notifier: Option<Notifier>,
    /// `--cluster-name`, named in every notification.
    pub cluster_name: Option<String>,
    /// `--page-url`: the page, linked from every notification.
    pub page_url: Option<String>,
    /// Each watch starts with a streaming list (`sendInitialEvents`: the objects as watch
    /// events, then a bookmark) instead of a paged list; only for an API server that serves
    /// them (the caller checks: `rollsafe_kube::read::serves_streaming_lists`).
    pub streaming_lists: bool,
    /// Where the effective settings are published when this replica starts deciding (the
    /// leader, or a controller without leader election at its start): its Lease
    /// ([`rollsafe_kube::published`]); `None`: not published.
    pub publish_on: Option<rollsafe_kube::published::LeaseRef>,
    /// `--strategy`: how workloads that do not choose (`rollsafe.dev/strategy`) restart, per
    /// namespace: a pod-template patch (the default) or eviction (docs/strategies.md).
    pub strategy: rollsafe_core::strategy::StrategyDefaults,
}

impl ControllerSettings {
    /// The workload kinds watched: Deployments, StatefulSets, DaemonSets and CronJobs, and
    /// Argo Rollouts when [`ControllerSettings::argo_rollouts`].
    pub fn kinds(&self) -> impl Iterator<Item = WatchedKind> + use<> {
        let rollouts = self.argo_rollouts;
        WatchedKind::ALL
            .into_iter()
            .filter(move |kind| *kind != WatchedKind::Rollout || rollouts)
    }
}

impl Default for ControllerSettings {
    fn default() -> Self {
        Self {
            namespaces: Vec::new(),
            selector: None,
            source_selector: None,
            namespace_selector: None,
            ignore_namespaces: Vec::new(),
            ignore_kinds: Vec::new(),
            all: false,
            debounce: DEFAULT_DEBOUNCE,
            dry_run: false,
            fingerprinter: Fingerprinter::unkeyed(),
            patch_timeout: PATCH_TIMEOUT,
            watch_timeout: freshness::WATCH_TIMEOUT_SECONDS,
            max_rolls_per_minute: DEFAULT_ROLLS_PER_MINUTE,
            burst: DEFAULT_BURST,
            max_adoptions_per_second: DEFAULT_ADOPTIONS_PER_SECOND,
            flap_limit: FlapLimit::default(),
            instance: None,
            progress_deadline: DEFAULT_PROGRESS_DEADLINE,
            progressive_all: false,
            reloader_compat: false,
            argo_rollouts: false,
            restart_window: None,
            clock: WallClock::system(),
            require_approval: Vec::new(),
            notifier: None,
            cluster_name: None,
            page_url: None,
            streaming_lists: false,
            publish_on: None,
            strategy: rollsafe_core::strategy::StrategyDefaults::default(),
        }
    }
}
