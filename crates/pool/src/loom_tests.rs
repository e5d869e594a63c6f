//! Loom models of the crate-private protocols.
