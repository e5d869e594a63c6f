//! Benchmarks live in `benches/`; run them with `cargo xtask bench`.
