//! scheduler benchmarks (to be written).
fn main() {}
