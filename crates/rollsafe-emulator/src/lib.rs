//! A Kubernetes API server emulator.
