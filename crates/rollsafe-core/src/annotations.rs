//! Every annotation rollsafe reads or writes, in one place: the contract with the people and
//! tools that write workloads, Secrets and ConfigMaps. The docs link here; a key is defined
//! nowhere else. How a value is parsed belongs to the module named in the last column.
//!
//! | annotation | on | read / written by | meaning | parsed in |
//! |---|---|---|---|---|
//! | `rollsafe.dev/watch` | workload | read: watch, preview, why, migrate | `"true"`: every Secret and ConfigMap the pod template references; `"false"`: never (even with `--all`); `"secret/a,configmap/b"`: exactly the listed objects, every key | [`crate::opt_in`] |
//! | `rollsafe.dev/watch` | Secret, ConfigMap | read: watch, preview | `"false"`: changes to this object never roll anything | [`crate::opt_in`] |
//! | `openchoreo.dev/restart-on-change` | Secret, ConfigMap, rendered resource | read: watch, renderer | `"false"`: the same as `rollsafe.dev/watch: "false"`; to the renderer, whether a change restarts the pods | [`crate::opt_in`], [`crate::render`] |
//! | `rollsafe.dev/halted` | workload metadata | written: watch (flap stop); read: watch, preview, why | the flap stop halted it, the value says why; removing it resumes | [`crate::opt_in::halted`] |
//! | `rollsafe.dev/approval` | workload, Secret, ConfigMap | read: watch, preview | a roll waits for `rollsafe approve` | [`crate::pending`] |
//! | `rollsafe.dev/approved` | workload metadata | written: approve (CLI, server); read: watch | the digest approved | [`crate::pending`] |
//! | `rollsafe.dev/pending` | workload metadata | written: watch; read: preview, approve, why | a roll the controller holds: `window until=… digest=…` or `approval since=… digest=…` | [`crate::pending`] |
//! | `rollsafe.dev/restart-window` | workload, Secret, ConfigMap | read: watch, preview | when rolls may happen (`Mon-Fri 09:00-17:00 Europe/Berlin`) | [`crate::window`] |
//! | `krypton.io/restarted-at` (the default; `--annotation` chooses another) | pod template | written: the restart engine (`rollsafe restart-consumers`, the server's API) | the time of the restart request | [`crate::patch`] |
//! | `rollsafe.dev/config-hash` | pod template | written: watch (each roll) | the digest the pods were rolled for | `rollsafe_watch::digest` |
//! | `rollsafe.dev/config-record` | workload metadata | written: watch; read: watch, why, approve | the digest last rolled for or adopted: what the controller decides from | `rollsafe_watch::digest` |
//! | `rollsafe.dev/config-versions` | workload metadata | written and read: watch | per recorded object, the resourceVersion the record was read from | `rollsafe_watch::freshness` |
//! | `rollsafe.dev/rolled-at` | workload metadata | written and read: watch | its recent roll times (RFC 3339 seconds, oldest first), read back by the brakes after a failover | `rollsafe_watch::roll_times` |
//! | `rollsafe.dev/rollout` | Secret, ConfigMap | read: watch | `progressive`: its consumers roll in waves, each once the earlier waves completed | [`crate::rollout`] |
//! | `rollsafe.dev/rollout-wave` | workload | read: watch, restart-consumers | `"N"`: its wave in a progressive roll (ascending; the unannotated last) | [`crate::rollout::waves`] |
//! | `rollsafe.dev/strategy` | workload, owning resource, Secret, ConfigMap | read: watch, restart-consumers, preview, why | `evict`: restart the consuming pods by PDB-respecting eviction, not by a template patch; `patch`: the default | [`crate::strategy`] |
//! | `rollsafe.dev/max-unavailable` | workload, owning resource | read: eviction runs | `"N"` (1–100): the most consuming pods down at once; default 1 | [`crate::strategy`] |
//! | `rollsafe.dev/evict-unprotected` | workload, owning resource | read: eviction runs | `"true"`: a single pod no PodDisruptionBudget protects may be evicted (downtime accepted) | [`crate::strategy`] |
//! | `rollsafe.dev/evicting` | workload metadata | written and removed: watch; read: watch, why | an eviction run in progress for the recorded content: the instant it restarts pods for (RFC 3339); pods created after it count as restarted, so a new leader continues the run | [`crate::strategy`] |
//! | `rollsafe.dev/settings` | the controller's Lease | written: watch (leader); read: why, preview, page | the controller's effective settings, JSON | [`crate::published`] |
//! | `kubernetes.io/change-cause` | workload metadata | written: watch (each roll) | why the revision was made, as `kubectl rollout history` shows it | — |
//! | `openchoreo.dev/dp-resource-hash` | pod template | written: renderer | the hash of the referenced config | [`crate::render`] |
//! | `rollsafe.dev/referenced-config-state` | workload metadata | written and read: renderer | the referenced-config state between renders | [`crate::render`] |
//! | `rollsafe.dev/pod-template-stamp` | DaemonSet, CronJob metadata | written and read: renderer | the marker of the last stamped pod template | [`crate::render`] |
//! | `reloader.stakater.com/*`, `*.reloader.stakater.com/*` | workload, Secret, ConfigMap | read: watch under `--reloader-compat`, migrate | Stakater Reloader's annotations, as Reloader meant them | [`crate::opt_in::reloader`] |
//!
//! rollsafe sets no labels: it selects by the labels users give (`--selector`) and writes only
//! the annotations above.

/// The opt-in/opt-out annotation, on workloads and on sources.
pub const WATCH: &str = "rollsafe.dev/watch";
/// OpenChoreo's per-object opt-out, honoured on live sources; to the renderer, the per-resource
/// annotation that decides whether a change restarts the pods.
pub const RESTART_ON_CHANGE: &str = "openchoreo.dev/restart-on-change";
/// The annotation that halts a workload (written by the flap stop; removing it resumes). Its
/// value says why.
pub const HALTED: &str = "rollsafe.dev/halted";

/// The annotation (workload, Secret, ConfigMap) requiring approval before a roll.
pub const APPROVAL: &str = "rollsafe.dev/approval";
/// The workload-metadata annotation `rollsafe approve` writes: the digest approved.
pub const APPROVED: &str = "rollsafe.dev/approved";
/// The workload-metadata annotation marking a roll the controller holds (a restart window, or
/// an approval): `window until=… digest=…` or `approval since=… digest=…`.
pub const PENDING: &str = "rollsafe.dev/pending";
/// The annotation holding a workload's or a source's restart window.
pub const RESTART_WINDOW: &str = "rollsafe.dev/restart-window";

/// The pod-template annotation a restart patch sets by default. The server, the CLI and the
/// engine all default to it ([`crate::name::AnnotationKey::restarted_at`]); `--annotation`
/// chooses another.
pub const RESTART_ANNOTATION: &str = "krypton.io/restarted-at";

/// The pod-template annotation a roll of `rollsafe watch` sets: the workload digest the pods
/// were rolled for.
pub const CONFIG_HASH: &str = "rollsafe.dev/config-hash";
/// The workload-metadata annotation recording the digest last rolled for or adopted: what the
/// controller decides from.
pub const CONFIG_RECORD: &str = "rollsafe.dev/config-record";
/// The workload-metadata annotation recording, per object of the record, the resourceVersion
/// its state was read from (`id=resourceVersion,…`).
pub const CONFIG_VERSIONS: &str = "rollsafe.dev/config-versions";
/// The workload-metadata annotation recording when it was last rolled (RFC 3339 seconds,
/// comma-separated, oldest first): the flap stop and the token bucket read it back after a
/// restart or a failover.
pub const ROLLED_AT: &str = "rollsafe.dev/rolled-at";
/// Where `kubectl rollout history` reads why a revision was made; each roll writes it.
pub const CHANGE_CAUSE: &str = "kubernetes.io/change-cause";

/// The annotation on a Secret or ConfigMap that makes the controller roll its consumers in waves.
pub const ROLLOUT: &str = "rollsafe.dev/rollout";
/// The annotation that places a workload in a progressive restart's wave.
pub const ROLLOUT_WAVE: &str = "rollsafe.dev/rollout-wave";

/// The annotation choosing how consumers are restarted: `patch` (the default) or `evict`.
pub const STRATEGY: &str = "rollsafe.dev/strategy";
/// The annotation widening an eviction run: the most consuming pods down at once.
pub const MAX_UNAVAILABLE: &str = "rollsafe.dev/max-unavailable";
/// The annotation accepting downtime: a single pod no PodDisruptionBudget protects may be evicted.
pub const EVICT_UNPROTECTED: &str = "rollsafe.dev/evict-unprotected";

/// The workload-metadata annotation marking an eviction run in progress: the instant (RFC 3339)
/// it restarts pods for. Removed when the run ends.
pub const EVICTING: &str = "rollsafe.dev/evicting";

/// The annotation on the controller's Lease holding its settings.
pub const SETTINGS: &str = "rollsafe.dev/settings";

/// The pod-template annotation the renderer sets: the hash of the referenced config.
pub const DP_RESOURCE_HASH: &str = "openchoreo.dev/dp-resource-hash";
/// The workload `metadata.annotations` key that carries the renderer's referenced-config state.
pub const REFERENCED_CONFIG_STATE: &str = "rollsafe.dev/referenced-config-state";
/// The `metadata.annotations` key of the renderer's marker on a DaemonSet or CronJob.
pub const POD_TEMPLATE_STAMP: &str = "rollsafe.dev/pod-template-stamp";
