//! The Restart Consumers HTTP API.
//!
//! - [`config`]: settings from flags and the `KRYPTON_*`/`SESSION_*` environment, validated.
//! - [`session`]: session JWTs (cookie or bearer), and minting them.
//! - [`acl`]: the ACL on a live Secret.
//! - [`audit`]: audit lines to stdout and an fsync'd file.

pub mod acl;
pub mod audit;
pub mod config;
pub mod session;
