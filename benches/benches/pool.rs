//! pool benchmarks (to be written).
fn main() {}
