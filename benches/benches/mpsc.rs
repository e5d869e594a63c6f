//! mpsc benchmarks (to be written).
fn main() {}
