//! The annotations `rollsafe watch` reads and writes. The ones users write, and how they are
//! parsed, are the core's ([`rollsafe_core::opt_in`]), shared with the consumers preview.
//!
//! | annotation | on | meaning |
//! |---|---|---|
//! | `rollsafe.dev/watch` | workload | `"true"`: every Secret and ConfigMap the pod template references; `"false"`: never (even with `--all`); `"secret/a,configmap/b"`: exactly the listed objects, every key |
//! | `rollsafe.dev/watch` | Secret, ConfigMap | `"false"`: changes to this object never roll anything |
//! | `openchoreo.dev/restart-on-change` | Secret, ConfigMap | `"false"`: the same as `rollsafe.dev/watch: "false"` |
//! | `rollsafe.dev/config-hash` | pod template (written) | the digest the pods were rolled for |
//! | `rollsafe.dev/config-record` | workload metadata (written) | the digest last rolled for or adopted |
//! | `rollsafe.dev/config-versions` | workload metadata (written) | per recorded object, the resourceVersion the record was read from |
//! | `rollsafe.dev/halted` | workload metadata (written) | the flap stop halted it; removing it resumes |
//! | `rollsafe.dev/rolled-at` | workload metadata (written with each roll) | its recent roll times, read back by the brakes after a failover |
//! | `rollsafe.dev/rollout: progressive` | Secret, ConfigMap | its consumers roll in waves, each only once the earlier waves completed |
//! | `rollsafe.dev/rollout-wave: "N"` | workload | its wave in a progressive roll (ascending; the unannotated last) |

pub use rollsafe_core::opt_in::{
    HALTED, MAX_LIST_ENTRIES, OptIn, OptInError, RESTART_ON_CHANGE, WATCH, source_opted_out,
    workload_opt_in,
};
pub use rollsafe_core::pending::{APPROVAL, APPROVED, PENDING, requires as requires_approval};
pub use rollsafe_core::window::RESTART_WINDOW;

use rollsafe_core::window::{RestartWindow, WindowError};

/// A `rollsafe.dev/restart-window` annotation as read: a window, or why it is not one
/// ([`crate::windows`] applies it).
pub type WindowAnnotation = Result<RestartWindow, WindowError>;

/// Reads a `rollsafe.dev/restart-window` value, if present.
pub fn restart_window(value: Option<&str>) -> Option<Box<WindowAnnotation>> {
    value.map(|text| Box::new(text.parse()))
}

/// The pod-template annotation a roll sets.
pub const CONFIG_HASH: &str = "rollsafe.dev/config-hash";
/// The workload-metadata annotation recording the digest last rolled for (or adopted).
pub const CONFIG_RECORD: &str = "rollsafe.dev/config-record";
/// The workload-metadata annotation recording, per object of the record, the resourceVersion
/// its state was read from (`id=resourceVersion,…`; see [`crate::freshness`]).
pub const CONFIG_VERSIONS: &str = "rollsafe.dev/config-versions";
/// The workload-metadata annotation recording when it was last rolled (RFC 3339 seconds,
/// comma-separated, oldest first; see [`crate::roll_times::RollTimes`]): the flap stop and the
/// token bucket read it back after a restart or a failover.
pub const ROLLED_AT: &str = "rollsafe.dev/rolled-at";
/// The field manager of every write.
pub const FIELD_MANAGER: &str = "rollsafe-watch";
/// The `rollsafe.dev/rollout` value that rolls a source's consumers in waves.
pub const PROGRESSIVE: &str = "progressive";
