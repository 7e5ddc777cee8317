//! The Restart Consumers HTTP API.
