//! The emulator's ground layer (apimachinery's place in kube-apiserver): what an API resource
//! is, without behaviour — one row per resource with its wire names, decoding type, printer
//! columns and field labels —, request routing (`RequestInfo`), query parameters, Status
//! errors, request-body decoding (JSON, YAML, protobuf) with the strict decoder's findings,
//! the patch formats, and CRD structural schemas.
//!
//! It depends on no other emulator crate; the registry and the HTTP layer stand on it. It is
//! an internal crate of the emulator, not a public API.

pub mod conversion;
pub mod crd_schema;
pub mod decode;
pub mod go_decode;
pub mod patch;
pub mod printers;
pub mod proto;
pub mod query;
pub mod resources;
pub mod route;
pub mod status;
pub mod util;
