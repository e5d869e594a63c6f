//! relay benchmarks (to be written).
fn main() {}
