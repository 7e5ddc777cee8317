//! Approvals in the controller: a due roll that needs one waits, marked pending, until
//! `rollsafe approve` writes it. The marks, the approval patch and what requires approval are
//! the core's ([`rollsafe_core::pending`]), shared with `rollsafe why`, `rollsafe approve`, the
//! consumers preview and the page.

pub use rollsafe_core::pending::{
    APPROVAL, APPROVE_FIELD_MANAGER, APPROVED, HeldBy, PENDING, PendingMark, approve_document,
    mark, requires,
};
