//! The errors of the emulator's library API.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::tls::TlsError;
use rollsafe_emulator_types::status::StatusError;

/// Errors of the emulator's library API.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    /// The listen address is not a loopback address.
    #[error("the emulator listens on loopback addresses only, not {0}")]
    NotLoopback(SocketAddr),
    /// Binding failed.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// A seed manifest did not parse.
    #[error("seed manifest: {0}")]
    Manifest(#[from] rollsafe_manifest::ManifestError),
    /// A seed object was refused.
    #[error("seed object {index} ({kind} {name:?}): {source}")]
    Seed {
        /// 0-based position among the seed objects.
        index: usize,
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        source: Box<StatusError>,
    },
    /// A settings change was refused.
    #[error("{0}")]
    Settings(String),
    /// An identity is invalid (reserved name, duplicate token, empty token).
    #[error("identity {name:?}: {reason}")]
    Identity {
        /// Identity name.
        name: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The resource plural is not served.
    #[error("unknown resource {0:?}")]
    UnknownResource(String),
    /// A write was refused, as the API would refuse it.
    #[error("{0}")]
    Api(Box<StatusError>),
    /// TLS could not be set up.
    #[error(transparent)]
    Tls(#[from] TlsError),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

impl From<StatusError> for EmulatorError {
    fn from(e: StatusError) -> Self {
        Self::Api(Box::new(e))
    }
}
