//! How `rollsafe watch` reads the annotations users write. Every key, with its meaning, is in
//! the contract table [`rollsafe_core::annotations`]; how the opt-in and the approval are parsed
//! is the core's ([`rollsafe_core::opt_in`], [`rollsafe_core::pending`]), shared with the
//! consumers preview.

pub use rollsafe_core::opt_in::{
    MAX_LIST_ENTRIES, OptIn, OptInError, source_opted_out, workload_opt_in,
};
pub use rollsafe_core::pending::requires as requires_approval;

use rollsafe_core::window::{RestartWindow, WindowError};

/// A `rollsafe.dev/restart-window` annotation as read: a window, or why it is not one
/// ([`crate::windows`] applies it).
pub type WindowAnnotation = Result<RestartWindow, WindowError>;

/// Reads a `rollsafe.dev/restart-window` value, if present.
pub fn restart_window(value: Option<&str>) -> Option<Box<WindowAnnotation>> {
    value.map(|text| Box::new(text.parse()))
}

/// The field manager of every write.
pub const FIELD_MANAGER: &str = "rollsafe-watch";
/// The `rollsafe.dev/rollout` value that rolls a source's consumers in waves.
pub const PROGRESSIVE: &str = "progressive";
